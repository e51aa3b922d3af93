//! Endpoints the node agent calls. For now the hello: an inventory document that creates a node
//! in `discover` (open discovery, rate-limited) or refreshes a known one (only with the node's
//! boot token or agent token; `engine::hello` holds the policy). The report-and-fetch-next loop
//! joins it with the orchestration.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Serialize;

use super::{ApiError, AppState};
use crate::engine::hello::{self, Credential, Decision, Refusal};
use crate::model::{Node, RawInventory};
use crate::store::TokenCheck;

/// Largest inventory document accepted, far above a real server's (a few KiB).
pub const MAX_HELLO_BYTES: usize = 256 * 1024;

#[derive(Serialize)]
struct HelloReply {
    created: bool,
    node: Node,
    /// The node's new agent token, given once: at creation and with each boot token.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_token: Option<String>,
}

/// Parse an inventory document, naming the field at fault for type errors as well as for
/// semantic ones.
pub fn parse_inventory(body: &[u8]) -> Result<crate::model::Inventory, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let raw: RawInventory = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::InvalidJson(inner.to_string())
        } else if path == "." {
            ApiError::InvalidInput {
                what: "inventory",
                fields: vec![crate::model::FieldError {
                    field: "$".to_string(),
                    message: format!("the document must be a JSON object ({inner})"),
                }],
            }
        } else {
            ApiError::InvalidInput {
                what: "inventory",
                fields: vec![crate::model::FieldError {
                    field: path,
                    message: inner.to_string(),
                }],
            }
        }
    })?;
    raw.validate().map_err(|fields| ApiError::InvalidInput {
        what: "inventory",
        fields,
    })
}

/// Refuse a discovery call from a client that made too many lately (per client address).
pub fn rate_limit(state: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    if let Some(peer) = req.peer_addr()
        && let Some(wait) = state
            .hello_limit
            .check(peer.ip(), std::time::Instant::now())
    {
        tracing::warn!(%peer, path = req.path(), "discovery call rate-limited");
        return Err(ApiError::RateLimited {
            client: peer.ip().to_string(),
            retry_after: wait.as_secs().max(1),
        });
    }
    Ok(())
}

/// The bearer token of a request, if it carries one.
pub(super) fn bearer(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get(actix_web::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(|t| t.trim().to_string())
}

/// `POST /api/v1/agent/hello`
///
/// Without a token this is plain discovery. With `Authorization: Bearer <boot token>` (the
/// token from the node's kernel command line) the token must be the unused one issued to one of
/// the node's MACs; a wrong token is refused and logged, and nothing is written.
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
    let inventory = parse_inventory(&body)?;
    let now = crate::clock::now();
    let presented = bearer(&req).map(|t| super::boot::hash_token(&t));
    let (new_token, new_hash) = super::boot::new_token()?;
    let lifetime = state.boot.token_lifetime;
    let peer = req.peer_addr();
    let outcome = state
        .store(move |s| {
            s.write(|tx| {
                let known = tx.read().node_for_inventory(&inventory)?;
                let credential = match &presented {
                    None => Credential::None,
                    Some(hash) => {
                        let macs: Vec<_> = inventory.interfaces.iter().map(|n| &n.mac).collect();
                        if tx.consume_boot_token(&macs, hash, now, lifetime)?
                            == TokenCheck::Accepted
                        {
                            Credential::BootToken
                        } else if let Some(node) = &known
                            && tx.read().agent_token_matches(node.id, hash)?
                        {
                            Credential::AgentToken
                        } else {
                            Credential::Invalid
                        }
                    }
                };
                let issue = match hello::decide(known.is_some(), credential) {
                    Decision::Refuse(why) => return Ok(Err(why)),
                    Decision::Create | Decision::Refresh { rotate: true } => true,
                    Decision::Refresh { rotate: false } => false,
                };
                let hash = issue.then_some(new_hash.as_str());
                let (node, outcome) = tx.record_hello(&inventory, hash, now)?;
                Ok(Ok((node, outcome, issue)))
            })
        })
        .await?;
    let (node, outcome, issued) = outcome.map_err(|why| match why {
        Refusal::Unauthorized => {
            tracing::warn!(?peer, "agent hello refused: invalid, used or expired token");
            ApiError::Unauthorized("the token is invalid, used or expired".to_string())
        }
        Refusal::AlreadyRegistered => {
            tracing::warn!(?peer, "agent hello refused: known node without a token");
            ApiError::Conflict(
                "this node is already registered; say hello with its agent token or boot it \
                 again from this master"
                    .to_string(),
            )
        }
    })?;
    let created = outcome == crate::store::HelloOutcome::Created;
    tracing::info!(node = node.id, mac = %node.mac, created, "agent hello");
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
