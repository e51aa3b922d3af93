//! Endpoints the node agent calls. For now the discovery hello: an inventory document that
//! creates a node in `discover` or refreshes a known one. Later issues add per-node tokens and
//! the report-and-fetch-next loop here.

use actix_web::{HttpResponse, web};
use serde::Serialize;

use super::{ApiError, AppState};
use crate::model::{Node, RawInventory};

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

/// `POST /api/v1/agent/hello`
pub async fn hello(state: web::Data<AppState>, body: web::Bytes) -> Result<HttpResponse, ApiError> {
    if body.len() > MAX_HELLO_BYTES {
        return Err(ApiError::BadRequest(format!(
            "inventory is {} bytes; the limit is {MAX_HELLO_BYTES}",
            body.len()
        )));
    }
    let inventory = parse_inventory(&body)?;
    let now = crate::clock::now();
    let (node, outcome) = state
        .store(move |s| s.write(|tx| tx.record_hello(&inventory, now)))
        .await?;
    let created = outcome == crate::store::HelloOutcome::Created;
    tracing::info!(node = node.id, mac = %node.mac, created, "agent hello");
    let reply = HelloReply { created, node };
    Ok(if created {
        HttpResponse::Created().json(reply)
    } else {
        HttpResponse::Ok().json(reply)
    })
}
