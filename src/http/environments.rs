//! JSON endpoints for an environment's make-up and its plan: which nodes it holds with which
//! roles (`/clusters/{id}/nodes`), its settings over the release's defaults
//! (`/clusters/{id}/settings`) and the deployment plan the engine makes of them
//! (`/clusters/{id}/plan`, as JSON, text or Graphviz dot). Thin: parse, call the store or
//! [`crate::planner`], render.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::Value;

use super::catalog::id_of;
use super::{ApiError, AppState};
use crate::planner::{self, EnvironmentPlan};

/// `GET /api/v1/clusters/{id}/nodes`
pub async fn nodes(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let nodes = state
        .store(move |s| {
            s.read(|r| {
                r.cluster(id)?.ok_or(crate::store::StoreError::NotFound {
                    entity: "environment",
                    id: id.to_string(),
                })?;
                r.cluster_nodes(id)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(nodes))
}

#[derive(Debug, Deserialize)]
struct Assign {
    roles: Option<Value>,
}

/// Roles from `{"roles": ["controller", ...]}`: non-empty names, no duplicates.
pub fn parse_roles(body: &[u8]) -> Result<Vec<String>, ApiError> {
    let a: Assign =
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let Some(Value::Array(items)) = a.roles else {
        return Err(ApiError::BadRequest(
            "roles: expected a list of role names, like {\"roles\": [\"controller\"]}".to_string(),
        ));
    };
    let mut roles: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_str().map(str::trim) {
            Some(r) if !r.is_empty() && !roles.iter().any(|x| x == r) => roles.push(r.to_string()),
            Some(r) if !r.is_empty() => {
                return Err(ApiError::BadRequest(format!(
                    "roles[{i}]: {r:?} is listed twice"
                )));
            }
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "roles[{i}]: expected a non-empty role name, found {item}"
                )));
            }
        }
    }
    if roles.is_empty() {
        return Err(ApiError::BadRequest(
            "roles: at least one role is needed".to_string(),
        ));
    }
    Ok(roles)
}

/// `PUT /api/v1/clusters/{id}/nodes/{node_id}` with `{"roles": [...]}`: assign a node, or change
/// its roles.
pub async fn assign(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (cluster, node) = path.into_inner();
    let cluster = id_of(&cluster, "environment")?;
    let node = id_of(&node, "node")?;
    let roles = parse_roles(&body)?;
    let now = crate::clock::now();
    let node = state
        .store(move |s| s.write(|tx| tx.assign_node(cluster, node, &roles, now)))
        .await?;
    Ok(HttpResponse::Ok().json(node))
}

/// `DELETE /api/v1/clusters/{id}/nodes/{node_id}`: take a node out of the environment.
pub async fn unassign(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (cluster, node) = path.into_inner();
    let cluster = id_of(&cluster, "environment")?;
    let node = id_of(&node, "node")?;
    let now = crate::clock::now();
    state
        .store(move |s| {
            s.write(|tx| {
                let n = tx.read().node(node)?;
                if n.as_ref().and_then(|n| n.cluster_id) != Some(cluster) {
                    return Err(crate::store::StoreError::NotFound {
                        entity: "node in this environment",
                        id: node.to_string(),
                    });
                }
                tx.unassign_node(node, now)
            })
        })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `GET /api/v1/clusters/{id}/settings`
pub async fn settings(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let settings = state
        .store(move |s| s.read(|r| r.cluster_settings(id)))
        .await?;
    Ok(HttpResponse::Ok().json(settings))
}

/// `PUT /api/v1/clusters/{id}/settings`: replace the settings (a JSON object).
pub async fn put_settings(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "settings: expected a JSON object".to_string(),
        ));
    }
    let now = crate::clock::now();
    let v = value.clone();
    state
        .store(move |s| s.write(|tx| tx.set_cluster_settings(id, &v, now)))
        .await?;
    Ok(HttpResponse::Ok().json(value))
}

#[derive(Debug, Deserialize)]
pub struct PlanQuery {
    graph: Option<String>,
    format: Option<String>,
}

/// Plan an environment off the async runtime (planning a large graph takes a while).
pub async fn make_plan(
    state: &AppState,
    id: i64,
    graph: String,
) -> Result<EnvironmentPlan, ApiError> {
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    web::block(move || planner::plan_environment(&store, &data_dir, id, &graph))
        .await
        .map_err(|e| ApiError::Internal(format!("blocking task failed: {e}")))?
        .map_err(ApiError::from)
}

/// `GET /api/v1/clusters/{id}/plan?graph=default&format=json|text|dot`
pub async fn plan(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<PlanQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let q = query.into_inner();
    let graph = q.graph.unwrap_or_else(|| "default".to_string());
    let format = q.format.unwrap_or_else(|| "json".to_string());
    if !["json", "text", "dot"].contains(&format.as_str()) {
        return Err(ApiError::BadRequest(format!(
            "format: expected json, text or dot, found {format:?}"
        )));
    }
    let env = make_plan(&state, id, graph).await?;
    Ok(match format.as_str() {
        "text" => HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .body(env.plan.to_text()),
        "dot" => HttpResponse::Ok()
            .content_type("text/vnd.graphviz; charset=utf-8")
            .body(env.plan.to_dot()),
        _ => HttpResponse::Ok()
            .content_type("application/json")
            .body(env.plan.to_json()),
    })
}
