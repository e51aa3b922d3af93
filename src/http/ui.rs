//! Dashboard pages: one handler and one askama view per page. Handlers fetch through the store
//! on a blocking thread and hand pre-formatted view models to templates in `web/templates`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError, web};
use askama::Template;
use askama_web::WebTemplate;

use super::views::{CountTile, HistoryRow, NodeRow, human_bytes};
use super::{ApiError, AppState};
use crate::model::Node;

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    nav: &'static str,
    version: &'static str,
    tiles: Vec<CountTile>,
    history: Vec<HistoryRow>,
    has_nodes: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "nodes.html")]
pub struct NodesPage {
    nav: &'static str,
    version: &'static str,
    rows: Vec<NodeRow>,
}

#[derive(Template, WebTemplate)]
#[template(path = "node.html")]
pub struct NodePage {
    nav: &'static str,
    version: &'static str,
    row: NodeRow,
    node: Node,
    created: String,
    memory: String,
    disks: Vec<(String, String, String, String)>,
}

#[derive(Template, WebTemplate)]
#[template(path = "environments.html")]
pub struct EnvironmentsPage {
    nav: &'static str,
    version: &'static str,
}

#[derive(Template, WebTemplate)]
#[template(path = "releases.html")]
pub struct ReleasesPage {
    nav: &'static str,
    version: &'static str,
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    nav: &'static str,
    version: &'static str,
    status: u16,
    title: &'static str,
    message: String,
}

/// An error on a dashboard route, rendered as a page rather than JSON.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct PageError(#[from] ApiError);

impl ResponseError for PageError {
    fn status_code(&self) -> StatusCode {
        self.0.status_code()
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if status.is_server_error() {
            tracing::error!(error = %self.0, "page failed");
        }
        error_page(status, self.0.to_string())
    }
}

fn error_page(status: StatusCode, message: String) -> HttpResponse {
    let page = ErrorPage {
        nav: "",
        version: VERSION,
        status: status.as_u16(),
        title: status.canonical_reason().unwrap_or("Error"),
        message,
    };
    match page.render() {
        Ok(html) => HttpResponse::build(status)
            .content_type("text/html; charset=utf-8")
            .body(html),
        Err(e) => HttpResponse::build(status)
            .content_type("text/plain; charset=utf-8")
            .body(format!(
                "{message}\n(error page failed: {e})",
                message = page.message
            )),
    }
}

/// `GET /`
pub async fn overview(state: web::Data<AppState>) -> Result<OverviewPage, PageError> {
    let now = crate::clock::now();
    let (counts, history) = state
        .store(|s| s.read(|tx| Ok((tx.node_counts()?, tx.recent_history(15)?))))
        .await?;
    Ok(OverviewPage {
        nav: "overview",
        version: VERSION,
        has_nodes: counts.total > 0,
        tiles: CountTile::from_counts(&counts),
        history: history.iter().map(|h| HistoryRow::new(h, now)).collect(),
    })
}

/// `GET /nodes`
pub async fn nodes(state: web::Data<AppState>) -> Result<NodesPage, PageError> {
    let now = crate::clock::now();
    let nodes = state.store(|s| s.read(|tx| tx.nodes())).await?;
    Ok(NodesPage {
        nav: "nodes",
        version: VERSION,
        rows: nodes.iter().map(|n| NodeRow::new(n, now)).collect(),
    })
}

/// `GET /nodes/{id}`
pub async fn node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<NodePage, PageError> {
    let id = super::api::node_id(&path)?;
    let node = state
        .store(move |s| s.read(|tx| tx.node(id)))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("node {id} not found")))?;
    let now = crate::clock::now();
    Ok(NodePage {
        nav: "nodes",
        version: VERSION,
        row: NodeRow::new(&node, now),
        created: super::views::utc(node.created_at),
        memory: human_bytes(node.inventory.memory_bytes),
        disks: node
            .inventory
            .disks
            .iter()
            .map(|d| {
                (
                    d.name.clone(),
                    human_bytes(d.size_bytes),
                    d.model.clone().unwrap_or_default(),
                    d.serial.clone().unwrap_or_default(),
                )
            })
            .collect(),
        node,
    })
}

/// `GET /environments`
pub async fn environments() -> EnvironmentsPage {
    EnvironmentsPage {
        nav: "environments",
        version: VERSION,
    }
}

/// `GET /releases`
pub async fn releases() -> ReleasesPage {
    ReleasesPage {
        nav: "releases",
        version: VERSION,
    }
}

/// Any path that is not a page.
pub async fn not_found(req: actix_web::HttpRequest) -> HttpResponse {
    error_page(
        StatusCode::NOT_FOUND,
        format!("There is no page at {}.", req.path()),
    )
}
