//! Endpoints the node agent calls. For now the discovery hello: an inventory document that
//! creates a node in `discover` or refreshes a known one. Later issues add per-node tokens and
//! the report-and-fetch-next loop here.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Serialize;

use super::{ApiError, AppState};
use crate::model::{Node, RawInventory};
use crate::store::TokenCheck;

/// Largest inventory document accepted, far above a real server's (a few KiB).
pub const MAX_HELLO_BYTES: usize = 256 * 1024;

#[derive(Serialize)]
struct HelloReply {
    created: bool,
    node: Node,
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

/// The bearer token of a request, if it carries one.
fn bearer(req: &HttpRequest) -> Option<String> {
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
    if let Some(peer) = req.peer_addr()
        && let Some(wait) = state
            .hello_limit
            .check(peer.ip(), std::time::Instant::now())
    {
        tracing::warn!(%peer, "agent hello rate-limited");
        return Err(ApiError::RateLimited {
            client: peer.ip().to_string(),
            retry_after: wait.as_secs().max(1),
        });
    }
    let inventory = parse_inventory(&body)?;
    let now = crate::clock::now();
    let token_hash = bearer(&req).map(|t| super::boot::hash_token(&t));
    let lifetime = state.boot.token_lifetime;
    let peer = req.peer_addr();
    let (node, outcome) = state
        .store(move |s| {
            s.write(|tx| {
                if let Some(hash) = &token_hash {
                    let macs: Vec<_> = inventory.interfaces.iter().map(|n| &n.mac).collect();
                    if tx.consume_boot_token(&macs, hash, now, lifetime)? == TokenCheck::Refused {
                        return Ok(Err(()));
                    }
                }
                tx.record_hello(&inventory, now).map(Ok)
            })
        })
        .await?
        .map_err(|()| {
            tracing::warn!(?peer, "agent hello refused: invalid or used boot token");
            ApiError::Unauthorized("the boot token is invalid, used or expired".to_string())
        })?;
    let created = outcome == crate::store::HelloOutcome::Created;
    tracing::info!(node = node.id, mac = %node.mac, created, "agent hello");
    let reply = HelloReply { created, node };
    Ok(if created {
        HttpResponse::Created().json(reply)
    } else {
        HttpResponse::Ok().json(reply)
    })
}
