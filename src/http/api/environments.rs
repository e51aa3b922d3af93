//! JSON endpoints for an environment's make-up and its plan: which nodes it holds with which
//! roles (`/clusters/{id}/nodes`), its settings over the release's defaults
//! (`/clusters/{id}/settings`) and the deployment plan the engine makes of them
//! (`/clusters/{id}/plan`, as JSON, text or Graphviz dot). Roles and settings are checked
//! against what the environment accepts ([`crate::planner::accepts`]) before anything is
//! written; a refusal is a 400 naming each bad field. Thin: parse, call the store or
//! [`crate::planner`], render.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::Value;

use crate::http::api::catalog::id_of;
use crate::http::{ApiError, AppState};
use crate::planner::{self, Accepts, Planned};

/// `GET /api/v1/clusters/{id}/nodes`
pub async fn nodes(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let nodes = state
        .store(move |s| {
            s.read(|r| {
                r.existing_cluster(id)?;
                r.cluster_nodes(id)
            })
        })
        .await?;
    let body: Vec<serde_json::Value> = nodes
        .iter()
        .map(crate::http::api::catalog::node_json)
        .collect();
    Ok(HttpResponse::Ok().json(body))
}

#[derive(Debug, Deserialize)]
struct Assign {
    roles: Option<Value>,
}

/// Roles from `{"roles": ["controller", ...]}`: non-empty names, no duplicates.
pub fn parse_roles(body: &[u8]) -> Result<Vec<String>, ApiError> {
    let a: Assign = ApiError::parse(body)?;
    roles_of(a.roles.as_ref(), "roles")
}

/// The role list at `field` of a request: non-empty names, no duplicates.
fn roles_of(value: Option<&Value>, field: &str) -> Result<Vec<String>, ApiError> {
    let Some(Value::Array(items)) = value else {
        return Err(ApiError::BadRequest(format!(
            "{field}: expected a list of role names, like [\"controller\"]"
        )));
    };
    let mut roles: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_str().map(str::trim) {
            Some(r) if !r.is_empty() && !roles.iter().any(|x| x == r) => roles.push(r.to_string()),
            Some(r) if !r.is_empty() => {
                return Err(ApiError::BadRequest(format!(
                    "{field}[{i}]: {r:?} is listed twice"
                )));
            }
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "{field}[{i}]: expected a non-empty role name, found {item}"
                )));
            }
        }
    }
    if roles.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "{field}: at least one role is needed"
        )));
    }
    Ok(roles)
}

/// What environment `id` accepts (roles, settings), gathered off the async runtime: it opens
/// the installed plugins.
pub async fn accepts(state: &AppState, id: i64) -> Result<Accepts, ApiError> {
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    crate::http::off_worker(move || planner::accepts(&store, &data_dir, id))
        .await?
        .map_err(ApiError::from)
}

/// Refuse, before anything is written, every role of `lists` (each the request's field and
/// its roles) that environment `cluster` does not accept: 400 naming each, with the valid ones.
pub async fn check_roles(
    state: &AppState,
    cluster: i64,
    lists: &[(String, &[String])],
) -> Result<(), ApiError> {
    let accepts = accepts(state, cluster).await?;
    let fields: Vec<_> = lists
        .iter()
        .flat_map(|(field, roles)| accepts.check_roles(field, roles))
        .collect();
    if fields.is_empty() {
        Ok(())
    } else {
        Err(ApiError::InvalidInput {
            what: "roles",
            fields,
        })
    }
}

/// The node list of Nailgun's `assignment` and `unassignment` bodies, `[{"id": 1, ...}, ...]`,
/// with each node's roles when `with_roles`.
fn node_list(body: &[u8], with_roles: bool) -> Result<Vec<(i64, Vec<String>)>, ApiError> {
    let items: Vec<Value> = ApiError::parse(body)?;
    if items.is_empty() {
        return Err(ApiError::BadRequest(
            "expected at least one node".to_string(),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let id = item["id"].as_i64().filter(|id| *id > 0).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "[{i}].id: expected a node id, found {}",
                    item["id"]
                ))
            })?;
            let roles = if with_roles {
                roles_of(item.get("roles"), &format!("[{i}].roles"))?
            } else {
                Vec::new()
            };
            Ok((id, roles))
        })
        .collect()
}

/// Assign each node of `nodes` (`(field, node, roles)`: `field` names its roles in a refusal)
/// to environment `cluster` with its roles, every one or none: each role list checked first
/// ([`check_roles`]: names and conflicts), then written in one transaction.
pub async fn assign_nodes(
    state: &AppState,
    cluster: i64,
    nodes: Vec<(String, i64, Vec<String>)>,
) -> Result<(), ApiError> {
    let lists: Vec<(String, &[String])> = nodes
        .iter()
        .map(|(field, _, roles)| (field.clone(), roles.as_slice()))
        .collect();
    check_roles(state, cluster, &lists).await?;
    let now = crate::clock::now();
    let nodes: Vec<(i64, Vec<String>)> = nodes
        .into_iter()
        .map(|(_, node, roles)| (node, roles))
        .collect();
    state
        .store(move |s| s.write(|tx| tx.assign_nodes(cluster, &nodes, now)))
        .await
}

/// `POST /api/v1/clusters/{id}/assignment` `[{"id": N, "roles": [...]}, ...]` (Nailgun's, for
/// `fuel2 env add nodes`): assign every node or none. 200 with `null`, as Nailgun answers.
pub async fn assign_many(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let cluster = id_of(&path, "environment")?;
    let nodes = node_list(&body, true)?
        .into_iter()
        .enumerate()
        .map(|(i, (id, roles))| (format!("[{i}].roles"), id, roles))
        .collect();
    assign_nodes(&state, cluster, nodes).await?;
    Ok(HttpResponse::Ok().json(Value::Null))
}

/// `POST /api/v1/clusters/{id}/unassignment` `[{"id": N}, ...]` (Nailgun's, for `fuel2 env
/// remove nodes`): take every node out of the environment, or none. 200 with `null`.
pub async fn unassign_many(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let cluster = id_of(&path, "environment")?;
    let nodes = node_list(&body, false)?;
    let now = crate::clock::now();
    state
        .store(move |s| {
            s.write(|tx| {
                for (node, _) in &nodes {
                    tx.remove_from_cluster(cluster, *node, now)?;
                }
                Ok(())
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(Value::Null))
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
    check_roles(&state, cluster, &[("roles".to_string(), &roles)]).await?;
    let now = crate::clock::now();
    let node = state
        .store(move |s| s.write(|tx| tx.assign_node(cluster, node, &roles, now)))
        .await?;
    Ok(HttpResponse::Ok().json(crate::http::api::catalog::node_json(&node)))
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
        .store(move |s| s.write(|tx| tx.remove_from_cluster(cluster, node, now)))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `GET /api/v1/clusters/{id}/settings`
/// Secrets (passwords, keys, tokens) read as `******` for roles below admin.
pub async fn settings(
    state: web::Data<AppState>,
    caller: crate::http::access::Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let settings = state
        .store(move |s| s.read(|r| r.cluster_settings(id)))
        .await?;
    Ok(HttpResponse::Ok().json(caller.shown(settings)))
}

/// `PUT /api/v1/clusters/{id}/settings`: replace the settings (a JSON object), each key backed
/// by an attribute of the release or a plugin and of its type; refused whole otherwise.
pub async fn put_settings(
    state: web::Data<AppState>,
    caller: crate::http::access::Caller,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let value: Value = ApiError::parse(&body)?;
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "settings: expected a JSON object".to_string(),
        ));
    }
    let fields = accepts(&state, id).await?.settings.check(&value);
    if !fields.is_empty() {
        return Err(ApiError::InvalidInput {
            what: "settings",
            fields,
        });
    }
    let now = crate::clock::now();
    // A secret sent back as read (`******`) keeps its stored value.
    let value = state
        .store(move |s| {
            s.write(|tx| {
                let mut v = value;
                let stored = tx.read().cluster_settings(id)?;
                crate::auth::mask::unmask(&mut v, &stored);
                tx.set_cluster_settings(id, &v, now)?;
                Ok(v)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(caller.shown(value)))
}

#[derive(Debug, Deserialize)]
pub struct PlanQuery {
    graph: Option<String>,
    format: Option<String>,
}

/// An environment's plan, off the async runtime (planning a large graph takes a while): the
/// kept one while nothing it is made from changed ([`planner::Plans`]).
pub async fn make_plan(state: &AppState, id: i64, graph: String) -> Result<Planned, ApiError> {
    let store = std::sync::Arc::clone(&state.store);
    let plans = std::sync::Arc::clone(&state.plans);
    let data_dir = state.data_dir.clone();
    let now = crate::clock::now();
    crate::http::off_worker(move || plans.plan(&store, &data_dir, id, &graph, now))
        .await?
        .map_err(ApiError::from)
}

/// The headers that say which plan an answer shows: when it was made, and whether it was kept
/// from an earlier call (`X-Stoker-Plan-Cached: true`) or made for this one.
pub fn plan_headers(made_at: i64, cached: bool) -> [(&'static str, String); 2] {
    [
        ("x-stoker-plan-made", made_at.to_string()),
        ("x-stoker-plan-cached", cached.to_string()),
    ]
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
    let planned = make_plan(&state, id, graph).await?;
    let headers = plan_headers(planned.made_at, planned.cached);
    let env = match planned.plan {
        Ok(env) => env,
        Err(e) => {
            let mut response = actix_web::ResponseError::error_response(&ApiError::from(
                planner::PlanningError::Kept(e),
            ));
            for (k, v) in headers {
                if let Ok(v) = actix_web::http::header::HeaderValue::from_str(&v) {
                    response
                        .headers_mut()
                        .insert(actix_web::http::header::HeaderName::from_static(k), v);
                }
            }
            return Ok(response);
        }
    };
    // Hundreds of megabytes at 10,000 nodes: written off the worker.
    let (content_type, body) = crate::http::off_worker(move || match format.as_str() {
        "text" => ("text/plain; charset=utf-8", env.plan.to_text()),
        "dot" => ("text/vnd.graphviz; charset=utf-8", env.plan.to_dot()),
        _ => ("application/json", env.plan.to_json()),
    })
    .await?;
    let mut response = HttpResponse::Ok();
    for h in headers {
        response.insert_header(h);
    }
    Ok(response.content_type(content_type).body(body))
}
