//! Nodes' BMCs and power in the JSON API, thin over `crate::bmc::actions`:
//! `GET|PUT|DELETE /api/v1/nodes/{id}/bmc` (the password is write-only: never returned, only
//! `password_set`), `POST /api/v1/nodes/{id}/power` (`{"action": "on"|"off"|"soft_off"|
//! "reboot"|"pxe"|"disk"}`: 200 with the result, 502 with it when the BMC failed),
//! `POST /api/v1/nodes/power` (`{"nodes": [ids], "action"}`: a result per node, 200 when all
//! succeeded, 207 when some failed) and `POST /api/v1/nodes` (enroll a node by its MAC before
//! it boots, optionally with its BMC, as Ironic's enroll).

use actix_web::{HttpResponse, web};
use serde_json::{Value, json};

use crate::bmc::actions::Act;
use crate::http::access::Caller;
use crate::http::{ApiError, AppState};
use crate::model::{FieldError, Mac, NodeId};
use crate::store::StoredBmc;

/// At most this many nodes in one bulk action.
const MAX_BULK: usize = 10_000;

fn invalid(fields: Vec<FieldError>) -> ApiError {
    ApiError::InvalidInput {
        what: "BMC",
        fields,
    }
}

/// A BMC as the API shows it: everything but the password.
pub fn bmc_json(b: &StoredBmc) -> Value {
    json!({
        "node_id": b.node_id,
        "driver": b.driver,
        "address": b.address,
        "username": b.username,
        "password_set": b.usable(),
        "verify_tls": b.verify_tls,
        "source": b.source,
        "power_state": b.power_state,
        "power_checked_at": b.power_checked_at,
        "power_error": b.power_error,
        "failures": b.failures,
    })
}

/// `GET /api/v1/nodes/{id}/bmc`.
pub async fn show(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let b = state
        .store(move |s| {
            s.read(|r| {
                r.existing_node(id)?;
                r.bmc(id)
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("node {id} has no BMC")))?;
    Ok(HttpResponse::Ok().json(bmc_json(&b)))
}

/// Set node `id`'s BMC from `body`; the stored BMC.
pub(crate) async fn set_bmc(
    state: &AppState,
    id: NodeId,
    body: Value,
) -> Result<StoredBmc, ApiError> {
    let (bmc, store) = (
        std::sync::Arc::clone(&state.bmc),
        std::sync::Arc::clone(&state.store),
    );
    crate::http::off_worker(move || bmc.bmcs.set(&store, id, &body, crate::clock::now()))
        .await?
        .map_err(ApiError::Store)
}

/// `PUT /api/v1/nodes/{id}/bmc`.
pub async fn update(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let body: Value = ApiError::parse(&body)?;
    let b = set_bmc(&state, id, body).await?;
    Ok(HttpResponse::Ok().json(bmc_json(&b)))
}

/// `DELETE /api/v1/nodes/{id}/bmc`: 204, 404 without one.
pub async fn delete(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let now = crate::clock::now();
    let gone = state
        .store(move |s| s.write(|tx| tx.delete_bmc(id, now)))
        .await?;
    if gone {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(ApiError::NotFound(format!("node {id} has no BMC")))
    }
}

fn parse_act(v: &Value) -> Result<Act, ApiError> {
    let names = Act::ALL.map(Act::as_str).join(", ");
    match v.get("action") {
        Some(Value::String(a)) => Act::parse(a).ok_or_else(|| {
            invalid(vec![FieldError {
                field: "action".into(),
                message: format!("{a:?} is not one of: {names}"),
            }])
        }),
        _ => Err(invalid(vec![FieldError {
            field: "action".into(),
            message: format!("required: one of {names}"),
        }])),
    }
}

/// Run `act` on `nodes` (each must exist and have a usable BMC, else nothing runs); the
/// results in `nodes`' order.
pub(crate) async fn power_nodes(
    state: &AppState,
    nodes: Vec<NodeId>,
    act: Act,
    actor: String,
) -> Result<Vec<crate::bmc::actions::ActResult>, ApiError> {
    let check = nodes.clone();
    let missing: Vec<String> = state
        .store(move |s| {
            s.read(|r| {
                // One query for the usual case; only the nodes it leaves out are looked at.
                let usable = r.nodes_with_usable_bmc()?;
                let mut out = Vec::new();
                for id in check.into_iter().filter(|id| !usable.contains(id)) {
                    out.push(match (r.node(id)?, r.bmc(id)?) {
                        (None, _) => format!("node {id} does not exist"),
                        (Some(_), None) => format!("node {id} has no BMC"),
                        (Some(_), Some(_)) => format!("node {id}'s BMC has no credentials"),
                    });
                }
                Ok(out)
            })
        })
        .await?;
    if !missing.is_empty() {
        return Err(ApiError::Conflict(format!(
            "nothing was done: {}",
            missing.join("; ")
        )));
    }
    let (bmc, store) = (
        std::sync::Arc::clone(&state.bmc),
        std::sync::Arc::clone(&state.store),
    );
    crate::http::off_worker(move || bmc.bmcs.act_many(&store, &nodes, act, &actor)).await
}

/// `POST /api/v1/nodes/{id}/power`.
pub async fn power(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let body: Value = ApiError::parse(&body)?;
    let act = parse_act(&body)?;
    let mut results = power_nodes(&state, vec![id], act, caller.0.user.clone()).await?;
    let r = results
        .pop()
        .ok_or_else(|| ApiError::Internal("no result".into()))?;
    Ok(if r.ok {
        HttpResponse::Ok()
    } else {
        HttpResponse::BadGateway()
    }
    .json(r))
}

/// `POST /api/v1/nodes/power`.
pub async fn power_many(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: Value = ApiError::parse(&body)?;
    let act = parse_act(&body)?;
    let nodes: Vec<NodeId> = match body.get("nodes").and_then(Value::as_array) {
        Some(list) if !list.is_empty() && list.len() <= MAX_BULK => {
            let ids: Option<Vec<NodeId>> =
                list.iter().map(|v| v.as_i64().filter(|i| *i > 0)).collect();
            let mut ids = ids.ok_or_else(|| {
                invalid(vec![FieldError {
                    field: "nodes".into(),
                    message: "expected positive node ids".into(),
                }])
            })?;
            // A node named twice is acted on once, in the order first named.
            let mut seen = std::collections::HashSet::new();
            ids.retain(|id| seen.insert(*id));
            ids
        }
        _ => {
            return Err(invalid(vec![FieldError {
                field: "nodes".into(),
                message: format!("expected a list of 1 to {MAX_BULK} node ids"),
            }]));
        }
    };
    let results = power_nodes(&state, nodes, act, caller.0.user.clone()).await?;
    let failed = results.iter().filter(|r| !r.ok).count();
    let status = if failed == 0 {
        actix_web::http::StatusCode::OK
    } else {
        actix_web::http::StatusCode::MULTI_STATUS
    };
    Ok(HttpResponse::build(status)
        .json(json!({"action": act.as_str(), "failed": failed, "results": results})))
}

/// `POST /api/v1/nodes`: enroll `{"mac", "name"?, "bmc"?}`; 201 with the node and its BMC.
/// A bad BMC enrolls nothing.
pub async fn enroll(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: Value = ApiError::parse(&body)?;
    let mut errors = Vec::new();
    if let Some(obj) = body.as_object() {
        for k in obj
            .keys()
            .filter(|k| !["mac", "name", "bmc"].contains(&k.as_str()))
        {
            errors.push(FieldError {
                field: k.clone(),
                message: "unknown field; the fields are: mac, name, bmc".into(),
            });
        }
    }
    let mac = match body
        .get("mac")
        .and_then(Value::as_str)
        .map(str::parse::<Mac>)
    {
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => {
            errors.push(FieldError {
                field: "mac".into(),
                message: e.to_string(),
            });
            None
        }
        None => {
            errors.push(FieldError {
                field: "mac".into(),
                message: "required: the MAC the node boots from".into(),
            });
            None
        }
    };
    let name = match body.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) if !n.trim().is_empty() && n.len() <= 100 => Some(n.clone()),
        Some(_) => {
            errors.push(FieldError {
                field: "name".into(),
                message: "expected a name of 1 to 100 characters".into(),
            });
            None
        }
    };
    let bmc = body.get("bmc").cloned();
    if let Some(b) = &bmc
        && let Err(mut e) = crate::bmc::actions::parse_input(b, false)
    {
        for f in &mut e {
            f.field = format!("bmc.{}", f.field).trim_end_matches('.').to_string();
        }
        errors.append(&mut e);
    }
    let Some(mac) = mac.filter(|_| errors.is_empty()) else {
        return Err(ApiError::InvalidInput {
            what: "enrollment",
            fields: errors,
        });
    };
    let now = crate::clock::now();
    let (bmcs, store) = (
        std::sync::Arc::clone(&state.bmc),
        std::sync::Arc::clone(&state.store),
    );
    // The node and its BMC in one transaction: a BMC that cannot be stored enrolls nothing.
    let (node, b) = crate::http::off_worker(move || {
        store.write(|tx| {
            let id = tx.enroll_node(&mac, name.as_deref(), now)?;
            let b = match &bmc {
                Some(body) => Some(bmcs.bmcs.set_in(tx, id, body, now)?),
                None => None,
            };
            Ok((tx.read().existing_node(id)?, b))
        })
    })
    .await??;
    tracing::info!(node = node.id, mac = %node.mac, "node enrolled");
    let mut doc = crate::http::api::catalog::node_json(&node);
    if let Some(b) = &b {
        doc["bmc"] = bmc_json(b);
    }
    Ok(HttpResponse::Created().json(doc))
}
