//! Dashboard pages: one handler and one askama view per page. Handlers fetch through the store
//! on a blocking thread and hand pre-formatted view models to templates in `web/templates`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError, web};
use askama::Template;
use askama_web::WebTemplate;

use super::views::{CountTile, HistoryRow, NodeRow, human_bytes};
use super::{ApiError, AppState};
use crate::model::{Node, Release};
use crate::store::NO_RELEASE_MESSAGE;

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    nav: &'static str,
    version: &'static str,
    tiles: Vec<CountTile>,
    history: Vec<HistoryRow>,
    has_nodes: bool,
    no_release: bool,
    no_release_message: &'static str,
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

/// One row of the environments table.
pub struct EnvironmentRow {
    id: i64,
    name: String,
    release: String,
    status: String,
    created: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "environments.html")]
pub struct EnvironmentsPage {
    nav: &'static str,
    version: &'static str,
    rows: Vec<EnvironmentRow>,
    releases: Vec<Release>,
    no_release_message: &'static str,
}

/// One installed plugin with its validator findings, as text lines.
pub struct PluginRow {
    name: String,
    title: String,
    version: String,
    package_version: String,
    kind: &'static str,
    installed: String,
    diagnostics: Vec<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "releases.html")]
pub struct ReleasesPage {
    nav: &'static str,
    version: &'static str,
    releases: Vec<Release>,
    plugins: Vec<PluginRow>,
    no_release_message: &'static str,
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
    let (counts, history, releases) = state
        .store(|s| {
            s.read(|tx| {
                Ok((
                    tx.node_counts()?,
                    tx.recent_history(15)?,
                    tx.releases()?.len(),
                ))
            })
        })
        .await?;
    Ok(OverviewPage {
        nav: "overview",
        version: VERSION,
        no_release: releases == 0,
        no_release_message: NO_RELEASE_MESSAGE,
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
pub async fn environments(state: web::Data<AppState>) -> Result<EnvironmentsPage, PageError> {
    let (clusters, releases) = state
        .store(|s| s.read(|tx| Ok((tx.clusters()?, tx.releases()?))))
        .await?;
    let rows = clusters
        .iter()
        .map(|c| EnvironmentRow {
            id: c.id,
            name: c.name.clone(),
            release: releases
                .iter()
                .find(|r| r.id == c.release_id)
                .map_or_else(|| format!("release {}", c.release_id), |r| r.name.clone()),
            status: c.status.clone(),
            created: super::views::utc(c.created_at),
        })
        .collect();
    Ok(EnvironmentsPage {
        nav: "environments",
        version: VERSION,
        rows,
        releases: releases
            .into_iter()
            .filter(Release::is_deployable)
            .collect(),
        no_release_message: NO_RELEASE_MESSAGE,
    })
}

/// The create-environment form's fields.
#[derive(Debug, serde::Deserialize)]
pub struct EnvironmentForm {
    name: String,
    release_id: String,
}

/// `POST /environments`: create, then back to the list (post/redirect/get).
pub async fn create_environment(
    state: web::Data<AppState>,
    form: web::Form<EnvironmentForm>,
) -> Result<HttpResponse, PageError> {
    let form = form.into_inner();
    let body = serde_json::json!({
        "name": form.name,
        "release_id": form.release_id.trim().parse::<i64>().unwrap_or(0),
    });
    let new = super::catalog::parse_new_cluster(body.to_string().as_bytes())?;
    let now = crate::clock::now();
    state
        .store(move |s| {
            s.write(|tx| tx.create_cluster(&new.name, new.release_id, &new.net_segment_type, now))
        })
        .await?;
    Ok(HttpResponse::SeeOther()
        .insert_header(("Location", "/environments"))
        .finish())
}

/// `GET /releases`
pub async fn releases(state: web::Data<AppState>) -> Result<ReleasesPage, PageError> {
    let now = crate::clock::now();
    let (releases, plugins) = state
        .store(|s| s.read(|tx| Ok((tx.releases()?, tx.plugins()?))))
        .await?;
    let plugins = plugins
        .into_iter()
        .map(|p| PluginRow {
            diagnostics: p
                .diagnostics
                .as_array()
                .map(|list| list.iter().map(diagnostic_line).collect())
                .unwrap_or_default(),
            kind: if p.is_release { "release" } else { "plugin" },
            installed: super::views::ago(p.installed_at, now),
            name: p.name,
            title: p.title,
            version: p.version,
            package_version: p.package_version,
        })
        .collect();
    Ok(ReleasesPage {
        nav: "releases",
        version: VERSION,
        releases,
        plugins,
        no_release_message: NO_RELEASE_MESSAGE,
    })
}

/// A stored diagnostic as one line: `warning metadata.yaml:3:1 fuel_version: deprecated`.
fn diagnostic_line(d: &serde_json::Value) -> String {
    let text = |k: &str| d.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let num = |k: &str| d.get(k).and_then(serde_json::Value::as_u64);
    let place = match (num("line"), num("column")) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}", text("file")),
        _ => text("file").to_string(),
    };
    format!(
        "{} {place} {}: {}",
        text("level"),
        text("field"),
        text("message")
    )
}

/// Any path that is not a page.
pub async fn not_found(req: actix_web::HttpRequest) -> HttpResponse {
    error_page(
        StatusCode::NOT_FOUND,
        format!("There is no page at {}.", req.path()),
    )
}
