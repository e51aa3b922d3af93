//! What a transaction was made from, as Nailgun serves it (`fuel2 task deployment-info|settings|
//! network-configuration download`): `/transactions/{id}/deployment_info[?nodes=]` (`{common,
//! nodes: {uid: facts}}`, `{}` when it kept none, as a provisioning), `/settings` (`{editable}`,
//! secrets masked below admin as the environment's attributes are) and
//! `/network_configuration`; and an environment's last successful deployment's settings and
//! network configuration (`/clusters/{id}/attributes/deployed`,
//! `/clusters/{id}/network_configuration/deployed`). Thin: read the store, answer.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::access::Caller;
use crate::http::api::catalog::id_of;
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::store::TransactionPart;

/// Transaction `id`'s `part`, 404 when there is no such transaction.
async fn part(state: &AppState, id: i64, part: TransactionPart) -> Result<Value, ApiError> {
    let found = state
        .store(move |s| {
            s.read(|r| match r.deployment(id)? {
                Some(_) => Ok(Some(r.transaction_part(id, part)?)),
                None => Ok(None),
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("transaction {id} not found")))?;
    Ok(found.unwrap_or_else(|| json!({})))
}

#[derive(Debug, Deserialize)]
pub struct NodesQuery {
    nodes: Option<String>,
}

/// `GET /api/v1/transactions/{id}/deployment_info[?nodes=1,2]`
pub async fn deployment_info(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    q: web::Query<NodesQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "transaction")?;
    let only = query::ids("nodes", q.nodes.as_deref())?;
    let mut info = part(&state, id, TransactionPart::DeploymentInfo).await?;
    if !only.is_empty()
        && let Some(nodes) = info.get_mut("nodes").and_then(Value::as_object_mut)
    {
        nodes.retain(|uid, _| only.iter().any(|n| n.to_string() == *uid));
    }
    Ok(HttpResponse::Ok().json(caller.shown(info)))
}

/// `GET /api/v1/transactions/{id}/settings`
pub async fn settings(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "transaction")?;
    let v = part(&state, id, TransactionPart::Settings).await?;
    Ok(HttpResponse::Ok().json(caller.shown(v)))
}

/// `GET /api/v1/transactions/{id}/network_configuration`
pub async fn network_configuration(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "transaction")?;
    let v = part(&state, id, TransactionPart::Network).await?;
    Ok(HttpResponse::Ok().json(v))
}

/// The newest successful deployment's `part` of environment `path`, or Nailgun's 404.
async fn deployed(
    state: &AppState,
    path: &str,
    part: TransactionPart,
    missing: &str,
) -> Result<Value, ApiError> {
    let id = id_of(path, "environment")?;
    state
        .store(move |s| {
            s.read(|r| {
                r.existing_cluster(id)?;
                r.deployed_part(id, part)
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(missing.to_string()))
}

/// `GET /api/v1/clusters/{id}/attributes/deployed`
pub async fn deployed_attributes(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let v = deployed(
        &state,
        &path,
        TransactionPart::Settings,
        "Cluster does not have deployed attributes!",
    )
    .await?;
    Ok(HttpResponse::Ok().json(caller.shown(v)))
}

/// `GET /api/v1/clusters/{id}/network_configuration/deployed`
pub async fn deployed_network(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let v = deployed(
        &state,
        &path,
        TransactionPart::Network,
        "Cluster does not have deployed configuration!",
    )
    .await?;
    Ok(HttpResponse::Ok().json(v))
}
