//! An operator's node actions in the JSON API: `DELETE /api/v1/nodes/{id}` (refused with 409
//! while the node is in an environment or a running deployment, as Nailgun refuses it; its
//! MACs, inventory and boot tokens go with it, and a node that boots again is discovered anew)
//! and `POST /api/v1/nodes/{id}/approve` (a node discovered under `discovery.approval =
//! manual` gets its boot token from its next boot on). Thin: the store checks and writes; the
//! dashboard's buttons call the same two functions.

use actix_web::{HttpResponse, web};

use crate::http::{ApiError, AppState};
use crate::model::{Node, NodeId};

/// Delete node `id`; the node as it was.
pub(crate) async fn delete_node(state: &AppState, id: NodeId) -> Result<Node, ApiError> {
    let now = crate::clock::now();
    let node = state
        .store(move |s| s.write(|tx| tx.delete_node(id, now)))
        .await?;
    tracing::info!(node = id, mac = %node.mac, "node deleted");
    Ok(node)
}

/// Approve node `id`; the node now, and whether it was waiting.
pub(crate) async fn approve_node(state: &AppState, id: NodeId) -> Result<(Node, bool), ApiError> {
    let now = crate::clock::now();
    let (node, was_waiting) = state
        .store(move |s| {
            s.write(|tx| {
                let changed = tx.approve_node(id, now)?;
                let node =
                    tx.read()
                        .node(id)?
                        .ok_or_else(|| crate::store::StoreError::NotFound {
                            entity: "node",
                            id: id.to_string(),
                        })?;
                Ok((node, changed))
            })
        })
        .await?;
    if was_waiting {
        tracing::info!(node = id, mac = %node.mac, "node approved");
    }
    Ok((node, was_waiting))
}

/// `DELETE /api/v1/nodes/{id}`: 204.
pub async fn delete(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    delete_node(&state, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /api/v1/nodes/{id}/approve`: the node (approving an approved node changes nothing).
pub async fn approve(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let (node, _) = approve_node(&state, id).await?;
    Ok(HttpResponse::Ok().json(node))
}
