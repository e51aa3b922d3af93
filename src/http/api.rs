//! The native JSON API under `/api/v1` (the Nailgun-compatible API comes later, beside it) and
//! `/healthz`. Each handler validates its input, makes one store call and returns JSON.

use actix_web::{HttpResponse, web};
use serde::Serialize;

use super::{ApiError, AppState};
use crate::model::{Node, NodeId};

#[derive(Serialize)]
struct Version {
    name: &'static str,
    version: &'static str,
    api: &'static str,
    schema_version: u32,
}

/// `GET /api/v1/version`
pub async fn version() -> HttpResponse {
    HttpResponse::Ok().json(Version {
        name: "stoker",
        version: env!("CARGO_PKG_VERSION"),
        api: "v1",
        schema_version: crate::store::migrations::latest(),
    })
}

/// `GET /healthz`: 200 when the daemon can read its database, 500 otherwise.
pub async fn healthz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.store(|s| s.read(|tx| tx.node_counts())).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({"status": "ok"})))
}

/// `GET /api/v1/nodes`
pub async fn nodes(state: web::Data<AppState>) -> Result<web::Json<Vec<Node>>, ApiError> {
    Ok(web::Json(state.store(|s| s.read(|tx| tx.nodes())).await?))
}

/// Parse a node id from the path, naming it when it is not a number.
pub(super) fn node_id(raw: &str) -> Result<NodeId, ApiError> {
    raw.parse::<NodeId>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::BadRequest(format!("node id {raw:?} is not a positive integer")))
}

/// `GET /api/v1/nodes/{id}`
pub async fn node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<web::Json<Node>, ApiError> {
    let id = node_id(&path)?;
    state
        .store(move |s| s.read(|tx| tx.node(id)))
        .await?
        .map(web::Json)
        .ok_or_else(|| ApiError::NotFound(format!("node {id} not found")))
}

/// Any other path under `/api/v1`.
pub async fn not_found(req: actix_web::HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound(format!(
        "no API endpoint {} {}",
        req.method(),
        req.path()
    )))
}
