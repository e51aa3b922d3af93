//! The server-rendered dashboard, one module per page (its view model, handler and form
//! actions): `overview`, `nodes` (with `node_query`, its query), `node` (with its rename
//! form), `bulk` (bulk node actions with their review), `environments`, `environment`,
//! `environment_edit` (members, add and remove, delete), `settings`, `network`, `deployment` (a
//! deployment's runs), `deployments` (an environment's deployment history), `releases` (with
//! plugin upload and removal); the roles picker (`roles.rs`), the confirmation destructive
//! actions ask for (`confirm.rs`), the notice after every action (`notice.rs`), the view
//! models pages share (`views.rs`), how a run is shown and numbered (`runs.rs`), a deployment's
//! timeline as SVG (`timeline.rs`), and the errors every page renders the same way (here).
//! Sign-in, the Account and Audit pages live with access control (`access/login.rs`).

pub mod bulk;
pub mod confirm;
pub mod deployment;
pub mod deployments;
pub mod environment;
pub mod environment_edit;
pub mod environments;
pub mod network;
pub mod node;
pub mod node_query;
pub mod nodes;
pub mod notice;
pub mod overview;
pub mod releases;
pub mod roles;
pub mod runs;
pub mod settings;
pub mod timeline;
pub mod views;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use askama::Template;

use crate::http::ApiError;
use crate::http::pages::views::Me;

pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
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
        me: Me::default(),
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

/// Any path that is not a page.
pub async fn not_found(req: actix_web::HttpRequest) -> HttpResponse {
    error_page(
        StatusCode::NOT_FOUND,
        format!("There is no page at {}.", req.path()),
    )
}
