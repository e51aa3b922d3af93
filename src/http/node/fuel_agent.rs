//! Fuel's nailgun-agent endpoints, kept for compatibility and only for discovery:
//! `POST /api/nodes` registers a node in `discover` from Fuel's `{mac, meta}` document, and
//! `PUT /api/nodes/agent` refreshes the inventory of a node that is still in `discover`. They
//! are unauthenticated, as in Fuel, so they are rate-limited like the hello, count against
//! `discovery.max_nodes`, never hand out an agent token, never take a MAC another node owns,
//! and never touch a node that an environment has taken further: stoker's own agent
//! (`/api/v1/agent/*`, with its token) is the way past discovery. Thin: `model::fuel` turns
//! Fuel's `meta` into stoker's validated inventory, `engine::hello` decides, the store writes.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use crate::engine::hello::{self, Credential, Decision, FuelCall, Hello};
use crate::http::node::agent::{
    MAX_HELLO_BYTES, inventory_error, peer_address, rate_limit, refusal_error,
};
use crate::http::{ApiError, AppState};
use crate::model::Node;
use crate::model::fuel::inventory_from_fuel;
use crate::store::{HelloTarget, HelloWrite};

/// Rate-limit, read Fuel's document, let `engine::hello` decide `call` and record it: the
/// node written, or why not.
async fn fuel_call(
    state: &AppState,
    req: &HttpRequest,
    body: &[u8],
    call: FuelCall,
) -> Result<Node, ApiError> {
    rate_limit(state, req)?;
    if body.len() > MAX_HELLO_BYTES {
        return Err(ApiError::BadRequest(format!(
            "node document is {} bytes; the limit is {MAX_HELLO_BYTES}",
            body.len()
        )));
    }
    let inventory =
        inventory_from_fuel(body).map_err(|e| inventory_error(e, "Fuel node document (meta)"))?;
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
