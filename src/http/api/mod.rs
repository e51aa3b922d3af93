//! The native JSON API under `/api/v1` (nodes, version) and `/healthz`; Nailgun's shapes, which
//! the same routes also carry for `fuel2`, are built in `catalog.rs`. Each handler validates
//! its input, makes one store call and returns JSON.

pub mod attributes;
pub mod bmc;
pub mod catalog;
pub mod deploy;
pub mod disks;
pub mod environments;
pub mod events;
pub mod extras;
pub mod facts;
pub mod graphs;
pub mod metrics;
pub mod networks;
pub mod nodes;
pub mod openstack_config;
pub mod ostf;
pub mod plugins;
pub mod pxe;
pub mod query;
pub mod roles;
pub mod runs;
pub mod sequences;
pub mod snapshot;
pub mod transaction_data;
pub mod transactions;

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::engine::state::{ErrorType, NodeState};
use crate::http::{ApiError, AppState};
use crate::model::{Node, NodeId};
use crate::store::{Deployment, Run};

/// What `/version` answers: Nailgun's `release`, `api`, `feature_groups` and `auth_required`
/// (python-fuelclient reads them; it signs in through `/keystone/v2.0/tokens` when
/// `auth_required` is true), with stoker's own name, version and database schema beside them.
pub fn version_json() -> serde_json::Value {
    json!({
        "release": "10.0",
        "api": "1",
        "feature_groups": ["advanced"],
        "auth_required": true,
        "name": "stoker",
        "version": env!("CARGO_PKG_VERSION"),
        "schema_version": crate::store::migrations::latest(),
    })
}

/// `GET /api/v1/version`
pub async fn version() -> HttpResponse {
    HttpResponse::Ok().json(version_json())
}

/// `GET /healthz`: 200 when the daemon can read its database, 500 otherwise.
pub async fn healthz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.store(|s| s.read(|tx| tx.node_counts())).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({"status": "ok"})))
}

/// `GET /api/v1/nodes`, and as Nailgun filters it: `?cluster_id=N` the nodes of environment N
/// (none when there is no such environment), `?cluster_id=` the nodes in no environment.
pub async fn nodes(
    state: web::Data<AppState>,
    q: web::Query<std::collections::BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let filter = match q.get("cluster_id").map(|s| s.trim()) {
        None => None,
        Some("") => Some(None),
        Some(raw) => Some(Some(raw.parse::<i64>().map_err(|_| {
            ApiError::field(
                "query",
                "cluster_id",
                format!("{raw:?} is not an environment id"),
            )
        })?)),
    };
    let nodes = state
        .store(move |s| {
            s.read(|tx| match filter {
                Some(Some(c)) => tx.cluster_nodes(c),
                Some(None) => Ok(tx
                    .nodes()?
                    .into_iter()
                    .filter(|n| n.cluster_id.is_none())
                    .collect()),
                None => tx.nodes(),
            })
        })
        .await?;
    crate::http::big_json(move || {
        Ok(nodes
            .iter()
            .map(crate::http::api::catalog::node_json)
            .collect::<Vec<_>>())
    })
    .await
}

/// Parse a node id from the path, naming it when it is not a number.
pub(crate) fn node_id(raw: &str) -> Result<NodeId, ApiError> {
    raw.parse::<NodeId>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::BadRequest(format!("node id {raw:?} is not a positive integer")))
}

/// A node with where its deployment stands, Ironic-style: `provision_state` (`deploying`, or
/// `wait call-back` while its agent runs a step), `deploy_step` (the step running now, or
/// null), `driver_internal_info.deploy_steps` and `deploy_step_index`, and on failure the
/// failing step with its output.
pub fn node_detail(node: &Node, progress: Option<&(Deployment, Vec<Run>)>) -> serde_json::Value {
    let mut v = crate::http::api::catalog::node_json(node);
    let (deployment, runs) = match progress {
        Some((d, runs)) => (Some(d.id), runs.as_slice()),
        None => (None, &[][..]),
    };
    let running = runs.iter().find(|r| r.status == "running");
    let failed = runs.iter().find(|r| r.status == "failed");
    let state = NodeState::of_node(node, running.is_some());
    v["provision_state"] = json!(state.sub_state());
    v["error_type"] = json!(state.error_type().map(ErrorType::as_str));
    v["deploy_step"] = running.map_or(serde_json::Value::Null, |r| {
        json!({"interface": r.interface, "step": r.step, "task": r.task, "args": r.step_args(),
               "attempt": r.attempt, "started_at": r.started_at})
    });
    v["driver_internal_info"] = json!({
        "deployment": deployment,
        "deploy_steps": runs.iter().map(|r| json!({"interface": r.interface, "step": r.step,
            "task": r.task, "run": r.id, "status": r.status})).collect::<Vec<_>>(),
        "deploy_step_index": runs.iter().position(|r| r.status != "ok" && r.status != "skipped"),
    });
    v["last_error"] = failed.map_or(serde_json::Value::Null, |r| {
        json!({"step": format!("{}.{}", r.interface, r.step), "task": r.task,
               "error": r.error, "exit_code": r.exit_code, "output_tail": r.output_tail,
               "finished_at": r.finished_at})
    });
    v
}

/// `GET /api/v1/nodes/{id}`
pub async fn node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = node_id(&path)?;
    let (node, progress) = state
        .store(move |s| s.read(|tx| Ok((tx.node(id)?, tx.node_runs(id)?))))
        .await?;
    let node = node.ok_or_else(|| ApiError::NotFound(format!("node {id} not found")))?;
    Ok(HttpResponse::Ok().json(node_detail(&node, progress.as_ref())))
}

/// Any other path under `/api/v1`.
pub async fn not_found(req: actix_web::HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound(format!(
        "no API endpoint {} {}",
        req.method(),
        req.path()
    )))
}
