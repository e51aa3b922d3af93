//! Nailgun's OpenStack configuration API (`fuel2 openstack-config list|upload|download|delete|
//! execute`, `fuel openstack-config`): `GET/POST /openstack-config/`, `GET/DELETE
//! /openstack-config/{id}/`, `PUT /openstack-config/execute/`. Thin: parse, call
//! [`crate::openstack_config`] (which checks and stores), answer; `execute` starts the
//! deployment of the nodes it names and answers Nailgun's task.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use crate::deployer::Scope;
use crate::engine::state::Phase;
use crate::http::access::Caller;
use crate::http::api::catalog::id_of;
use crate::http::{ApiError, AppState};
use crate::openstack_config::{self as configs, ConfigError};

impl From<ConfigError> for ApiError {
    fn from(e: ConfigError) -> ApiError {
        match e {
            ConfigError::Store(e) => ApiError::Store(e),
            ConfigError::Planning(e) => ApiError::Planning(e),
        }
    }
}

/// Run `f` off the async runtime (it may open the installed plugins to learn the roles).
async fn blocking<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&crate::store::Store, &std::path::Path) -> Result<T, ConfigError> + Send + 'static,
) -> Result<T, ApiError> {
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    Ok(crate::http::off_worker(move || f(&store, &data_dir)).await??)
}

/// `GET /api/v1/openstack-config/?cluster_id=N[&node_id=|node_ids=|node_role=][&is_active=]`
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(req.query_string())
        .map_err(|e| ApiError::BadRequest(format!("invalid query: {e}")))?;
    let filter = configs::parse_filter(&pairs)?;
    let body = state
        .store(move |s| s.read(|r| configs::list(r, &filter)))
        .await?;
    Ok(HttpResponse::Ok().json(caller.shown(Value::from(body))))
}

/// `POST /api/v1/openstack-config/`: 201 with the list of configurations stored.
pub async fn create(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let doc: Value = ApiError::parse(&body)?;
    let now = crate::clock::now();
    let made = blocking(&state, move |s, dir| configs::create(s, dir, &doc, now)).await?;
    Ok(HttpResponse::Created().json(made))
}

/// `GET /api/v1/openstack-config/{id}/`: its credentials masked below admin, as every list.
pub async fn show(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "OpenStack configuration")?;
    let body = state
        .store(move |s| s.read(|r| configs::show(r, id)))
        .await?;
    Ok(HttpResponse::Ok().json(caller.shown(body)))
}

/// `DELETE /api/v1/openstack-config/{id}/`: 204; it stays, inactive.
pub async fn delete(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "OpenStack configuration")?;
    let now = crate::clock::now();
    state.store(move |s| configs::delete(s, id, now)).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `PUT /api/v1/openstack-config/execute/` `{cluster_id, node_ids?|node_id?|node_role?,
/// force?}`: the deployment phase of the ready nodes named (every node of the environment
/// without a name), so their tasks get the configuration; 202 with the transaction.
pub async fn execute(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let doc: Value = ApiError::parse(&body)?;
    let update = blocking(&state, move |s, dir| configs::execute(s, dir, &doc)).await?;
    let scope = Scope {
        nodes: Some(update.nodes),
        phase: Some(Phase::Deploy),
        force: update.force,
        ..Default::default()
    };
    crate::http::api::transactions::start(&state, update.cluster_id, scope).await
}
