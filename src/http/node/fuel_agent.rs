//! Fuel's nailgun-agent endpoints, kept for compatibility and only for discovery:
//! `POST /api/nodes` registers a node in `discover` from Fuel's `{mac, meta}` document, and
//! `PUT /api/nodes/agent` refreshes the inventory of a node that is still in `discover`. They
//! are unauthenticated, as in Fuel, so they are rate-limited like the hello, count against
//! `discovery.max_nodes`, never hand out an agent token, never take a MAC another node owns,
//! and never touch a node that an environment has taken further: stoker's own agent
//! (`/api/v1/agent/*`, with its token) is the way past discovery. Thin: translate Fuel's `meta`
//! into stoker's inventory, check it with the hello's validation, let `engine::hello` decide,
//! call the store.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use crate::engine::hello::{self, Credential, Decision, FuelCall, Hello};
use crate::http::node::agent::{
    MAX_HELLO_BYTES, parse_inventory, peer_address, rate_limit, refusal_error,
};
use crate::http::{ApiError, AppState};
use crate::model::{Inventory, Node};
use crate::store::{HelloTarget, HelloWrite};

/// stoker's inventory document from Fuel's node document (`meta.interfaces`, `meta.cpu`,
/// `meta.memory`, `meta.disks`, `meta.system`; a top-level `mac` when `meta` lists no
/// interface), validated as the hello's is. A field at fault is named in stoker's terms, with
/// Fuel's `meta` path beside it.
pub fn inventory_from_fuel(body: &[u8]) -> Result<Inventory, ApiError> {
    if body.len() > MAX_HELLO_BYTES {
        return Err(ApiError::BadRequest(format!(
            "node document is {} bytes; the limit is {MAX_HELLO_BYTES}",
            body.len()
        )));
    }
    let doc: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let meta = &doc["meta"];
    let mut interfaces: Vec<Value> = meta["interfaces"]
        .as_array()
        .map(|nics| {
            nics.iter()
                .map(|n| {
                    json!({
                        "name": n["name"],
                        "mac": n["mac"],
                        "speed_mbps": n["current_speed"].as_u64().or(n["max_speed"].as_u64()),
                        "link": n["state"].as_str().map(|s| s == "up"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if interfaces.is_empty() && doc["mac"].is_string() {
        interfaces.push(json!({"name": "eth0", "mac": doc["mac"]}));
    }
    let cpu = &meta["cpu"];
    let disks: Vec<Value> = meta["disks"]
        .as_array()
        .map(|ds| {
            ds.iter()
                .map(|d| {
                    json!({"name": d["name"], "size_bytes": d["size"], "model": d["model"],
                           "serial": d["serial"]})
                })
                .collect()
        })
        .unwrap_or_default();
    let system = &meta["system"];
    let ours = json!({
        "interfaces": interfaces,
        "cpu": {"count": cpu["total"], "model": cpu["spec"][0]["model"]},
        "memory_bytes": meta["memory"]["total"],
        "disks": disks,
        "system": {"vendor": system["manufacturer"], "product": system["product"],
                   "serial": system["serial"]},
    });
    let bytes = serde_json::to_vec(&strip_nulls(ours))
        .map_err(|e| ApiError::Internal(format!("cannot re-encode the inventory: {e}")))?;
    parse_inventory(&bytes).map_err(|e| match e {
        ApiError::InvalidInput { what: _, fields } => ApiError::InvalidInput {
            what: "Fuel node document (meta)",
            fields,
        },
        other => other,
    })
}

/// Fuel's `meta` document of a node from stoker's inventory: the inverse of
/// [`inventory_from_fuel`], for the clients that read Nailgun's node shape (`fuel2 node show`).
pub fn fuel_meta(inv: &Inventory) -> Value {
    let interfaces: Vec<Value> = inv
        .interfaces
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "name": n.name,
                "mac": n.mac.as_str(),
                "pxe": i == 0,
                "state": n.link.map(|up| if up { "up" } else { "down" }),
                "current_speed": n.speed_mbps,
                "max_speed": n.speed_mbps,
            })
        })
        .collect();
    let disks: Vec<Value> = inv
        .disks
        .iter()
        .map(|d| {
            json!({"name": d.name, "disk": d.name, "size": d.size_bytes, "model": d.model,
                   "serial": d.serial, "removable": "0", "extra": []})
        })
        .collect();
    json!({
        "interfaces": interfaces,
        "cpu": {"total": inv.cpu.count, "spec": [{"model": inv.cpu.model, "frequency": null}]},
        "memory": {"total": inv.memory_bytes},
        "disks": disks,
        "system": {"manufacturer": inv.system.vendor, "product": inv.system.product,
                   "serial": inv.system.serial},
    })
}

/// Fuel's agents send `null` for what they could not read; stoker's inventory leaves it out.
fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// Rate-limit, read Fuel's document, let `engine::hello` decide `call` and record it: the
/// node written, or why not.
async fn fuel_call(
    state: &AppState,
    req: &HttpRequest,
    body: &[u8],
    call: FuelCall,
) -> Result<Node, ApiError> {
    rate_limit(state, req)?;
    let inventory = inventory_from_fuel(body)?;
    let now = crate::clock::now();
    let discovery = state.boot.discovery;
    let peer = peer_address(req);
    // Unauthenticated: the caller's address names a node only when it creates one.
    let address = (call == FuelCall::Register).then(|| peer.clone()).flatten();
    let outcome = state
        .store(move |s| {
            s.write(|tx| {
                let r = tx.read();
                let owners = r.mac_owners(inventory.interfaces.iter().map(|n| &n.mac))?;
                let owner = match owners.first() {
                    Some((_, id)) => r.known_node(*id)?,
                    None => None,
                };
                let room = !owners.is_empty() || r.node_total()? < discovery.max_nodes;
                let facts = Hello {
                    credential: Credential::None,
                    owners: &owners,
                    owner,
                    room,
                    approval: discovery.approval,
                };
                let target = match hello::decide_fuel(call, &facts) {
                    Decision::Refuse(why) => return Ok(Err(why)),
                    Decision::Create { approved, .. } => HelloTarget::Create { approved },
                    Decision::Refresh { node, macs, .. } => HelloTarget::Refresh { node, macs },
                };
                let written = tx.apply_hello(&HelloWrite {
                    inventory: &inventory,
                    target,
                    token_hash: None,
                    address: address.as_deref(),
                    now,
                })?;
                Ok(Ok(written.0))
            })
        })
        .await?;
    outcome.map_err(|why| refusal_error(why, discovery.max_nodes, peer.as_deref()))
}

/// `POST /api/nodes`: register a discovered node, as nailgun-agent does on its first run.
/// A MAC that stoker knows is refused with 409, as Nailgun does.
pub async fn register(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let node = fuel_call(&state, &req, &body, FuelCall::Register).await?;
    tracing::info!(node = node.id, mac = %node.mac, "node registered through Fuel's API");
    Ok(HttpResponse::Created().json(crate::http::api::catalog::node_json(&node)))
}

/// `PUT /api/nodes/agent`: nailgun-agent's periodic update. Refreshes the inventory (and MACs)
/// of a node still in `discover`; a node an environment took further is left alone (409), a
/// document listing another node's MAC changes nothing (409), an unknown one is 404.
pub async fn update(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let node = fuel_call(&state, &req, &body, FuelCall::Update).await?;
    Ok(HttpResponse::Ok().json(json!({"id": node.id})))
}
