//! Endpoints the node agent calls. For now the hello: an inventory document that creates a node
//! in `discover` (open discovery, rate-limited and capped; with `discovery.approval = manual`
//! the node waits for an operator) or refreshes a known one (only with the node's boot token or
//! agent token, and never taking another node's MAC; `engine::hello` holds the policy). The
//! address a hello comes from is kept as the node's address. Also the helpers the other
//! unauthenticated endpoints share: rate limits, the caller's address, refusals as API errors.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Serialize;

use crate::engine::hello::{self, Credential, Decision, Hello, Refusal};
use crate::http::limit::RateLimiter;
use crate::http::{ApiError, AppState};
use crate::model::{InventoryError, Mac, Node};
use crate::store::{HelloTarget, HelloWrite, TokenCheck};

/// Largest inventory document accepted (the model's bound).
pub const MAX_HELLO_BYTES: usize = crate::model::MAX_INVENTORY_BYTES;

#[derive(Serialize)]
struct HelloReply {
    created: bool,
    node: Node,
    /// The node's new agent token, given once: at creation and with each boot token.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_token: Option<String>,
}

/// An inventory document's problems as the API's error: `invalid_json` for a document that
/// is not JSON, `invalid_input` naming every field at fault in `what`.
pub(super) fn inventory_error(err: InventoryError, what: &'static str) -> ApiError {
    match err {
        InventoryError::Json(message) => ApiError::InvalidJson(message),
        InventoryError::Fields(fields) => ApiError::InvalidInput { what, fields },
    }
}

/// Refuse a discovery call from a client that made too many lately (per client address).
pub fn rate_limit(state: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    limit(&state.hello_limit, req)
}

/// Refuse a call from a client that `limiter` says made too many lately; refusals are logged
/// with their count, at most once every [`crate::http::limit::LOG_EVERY`].
pub(crate) fn limit(limiter: &RateLimiter, req: &HttpRequest) -> Result<(), ApiError> {
    let now = std::time::Instant::now();
    if let Some(peer) = req.peer_addr()
        && let Some(wait) = limiter.check(peer.ip(), now)
    {
        if let Some(refused) = limiter.note_refusal(now) {
            tracing::warn!(
                %peer,
                path = req.path(),
                refused,
                "unauthenticated calls rate-limited (logged at most every 10 s)"
            );
        }
        return Err(ApiError::RateLimited {
            client: peer.ip().to_string(),
            retry_after: wait.as_secs().max(1),
        });
    }
    Ok(())
}

/// The address a request came from, as the boot and hello policies compare it (an IPv4
/// address seen through an IPv6 socket in its IPv4 form).
pub(crate) fn peer_address(req: &HttpRequest) -> Option<String> {
    req.peer_addr().map(|p| p.ip().to_canonical().to_string())
}

/// The API error for a refused hello or Fuel call, logged with the caller's address.
pub(crate) fn refusal_error(why: Refusal, max_nodes: u64, peer: Option<&str>) -> ApiError {
    let peer = peer.unwrap_or("?");
    match why {
        Refusal::Unauthorized => {
            tracing::warn!(peer, "agent hello refused: invalid, used or expired token");
            ApiError::Unauthorized("the token is invalid, used or expired".to_string())
        }
        Refusal::AlreadyRegistered { mac, node } => {
            tracing::warn!(peer, %mac, node, "discovery refused: known node without a token");
            ApiError::Conflict(format!(
                "this node is already registered (node {node} has MAC {mac}); say hello with \
                 its agent token or boot it again from this master"
            ))
        }
        Refusal::MacTaken { mac, node } => {
            tracing::warn!(peer, %mac, node, "discovery refused: the inventory lists another node's MAC");
            ApiError::Conflict(format!(
                "MAC {mac} belongs to node {node}; MACs never move between nodes (if the NIC \
                 moved, delete node {node} first)"
            ))
        }
        Refusal::AwaitingApproval { node } => {
            tracing::info!(peer, node, "agent hello: the node waits for approval");
            ApiError::AwaitingApproval(format!(
                "node {node} waits for an operator's approval (POST /api/v1/nodes/{node}/approve \
                 or the node's page); boot it again once approved"
            ))
        }
        Refusal::Full => {
            tracing::warn!(
                peer,
                max_nodes,
                "discovery refused: discovery.max_nodes reached"
            );
            ApiError::DiscoveryFull(format!(
                "stoker keeps at most {max_nodes} nodes (discovery.max_nodes); delete nodes \
                 or raise the limit"
            ))
        }
        Refusal::Unknown => {
            ApiError::NotFound("no node has these MACs; register it with POST /api/nodes".into())
        }
        Refusal::PastDiscovery { node, status } => ApiError::Conflict(format!(
            "node {node} is {}: past discovery, its inventory comes from stoker's agent only",
            status.as_str()
        )),
    }
}

/// The bearer token of a request, if it carries one.
pub(crate) fn bearer(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get(actix_web::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(|t| t.trim().to_string())
}

/// `POST /api/v1/agent/hello`
///
/// Without a token this is plain discovery. With `Authorization: Bearer <token>` the token must
/// be the unused boot token issued to one of the inventory's MACs, or a node's agent token; a
/// wrong token is refused and logged, and nothing is written. `engine::hello` decides the rest
/// (no MAC of another node, approval, the node cap).
pub async fn hello(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    if body.len() > MAX_HELLO_BYTES {
        return Err(ApiError::BadRequest(format!(
            "inventory is {} bytes; the limit is {MAX_HELLO_BYTES}",
            body.len()
        )));
    }
    rate_limit(&state, &req)?;
    let inventory =
        crate::model::parse_inventory(&body).map_err(|e| inventory_error(e, "inventory"))?;
    let now = crate::clock::now();
    let presented = bearer(&req).map(|t| crate::http::node::boot::hash_token(&t));
    let (new_token, new_hash) = crate::http::node::boot::new_token()?;
    let lifetime = state.boot.token_lifetime;
    let discovery = state.boot.discovery;
    let peer = peer_address(&req);
    let address = peer.clone();
    let outcome = state
        .store(move |s| {
            s.write(|tx| {
                let r = tx.read();
                let macs: Vec<&Mac> = inventory.interfaces.iter().map(|n| &n.mac).collect();
                let owners = r.mac_owners(macs.iter().copied())?;
                let mut boot_token_of = None;
                let credential = match &presented {
                    None => Credential::None,
                    Some(hash) => match r.check_boot_token(&macs, hash, now, lifetime)? {
                        TokenCheck::Valid(mac) => {
                            let owner = owners.iter().find(|(m, _)| *m == mac).map(|o| o.1);
                            let known = match owner {
                                Some(id) => r.known_node(id)?,
                                None => None,
                            };
                            boot_token_of = Some(mac);
                            Credential::BootToken(known)
                        }
                        TokenCheck::Refused => match r.node_by_agent_token(hash)? {
                            Some((id, _)) => r
                                .known_node(id)?
                                .map_or(Credential::Invalid, Credential::AgentToken),
                            None => Credential::Invalid,
                        },
                    },
                };
                let owner = match owners.first() {
                    Some((_, id)) => r.known_node(*id)?,
                    None => None,
                };
                let room = !owners.is_empty() || r.node_total()? < discovery.max_nodes;
                let decision = hello::decide(&Hello {
                    credential,
                    owners: &owners,
                    owner,
                    room,
                    approval: discovery.approval,
                });
                let (target, issue) = match decision {
                    Decision::Refuse(why) => return Ok(Err(why)),
                    Decision::Create { approved, issue } => {
                        (HelloTarget::Create { approved }, issue)
                    }
                    Decision::Refresh { node, rotate, macs } => {
                        (HelloTarget::Refresh { node, macs }, rotate)
                    }
                };
                if let Some(mac) = &boot_token_of {
                    tx.use_boot_token(mac, now)?;
                }
                let (node, outcome) = tx.apply_hello(&HelloWrite {
                    inventory: &inventory,
                    target,
                    token_hash: issue.then_some(new_hash.as_str()),
                    address: address.as_deref(),
                    now,
                })?;
                Ok(Ok((node, outcome, issue)))
            })
        })
        .await?;
    let (node, outcome, issued) =
        outcome.map_err(|why| refusal_error(why, discovery.max_nodes, peer.as_deref()))?;
    let created = outcome == crate::store::HelloOutcome::Created;
    tracing::info!(
        node = node.id,
        mac = %node.mac,
        created,
        approved = node.approved,
        "agent hello"
    );
    let reply = HelloReply {
        created,
        node,
        agent_token: issued.then_some(new_token),
    };
    Ok(if created {
        HttpResponse::Created().json(reply)
    } else {
        HttpResponse::Ok().json(reply)
    })
}
