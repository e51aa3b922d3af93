//! Nailgun's node disks API (the volume_manager extension's handlers) for `fuel2 node disks`
//! and the old `fuel node --disk`: `GET /nodes/{id}/disks` (the node's volumes in the simple
//! format), `GET /nodes/{id}/disks/defaults` (the layout its roles get by default) and
//! `PUT /nodes/{id}/disks` (an upload checked by field, applied over the current layout and
//! stored). Thin: [`crate::volumes`] reads, [`crate::engine::volumes`] decides.

use actix_web::{HttpResponse, web};
use serde_json::Value;

use crate::engine::volumes::{parse_simple, to_simple};
use crate::http::{ApiError, AppState};
use crate::store::NodeDocument;
use crate::volumes::{VolumesError, layout};

impl From<VolumesError> for ApiError {
    fn from(e: VolumesError) -> ApiError {
        match e {
            VolumesError::Store(s) => ApiError::Store(s),
            // The release's volumes_metadata is at fault: `bad_package`, naming it.
            other => ApiError::from(crate::planner::PlanningError::Volumes(other)),
        }
    }
}

async fn read(state: &AppState, id: i64, fresh: bool) -> Result<Value, ApiError> {
    let volumes = state
        .store(move |s| {
            s.read(|r| {
                let node = r.existing_node(id)?;
                Ok(layout(r, &node, fresh))
            })
        })
        .await??;
    Ok(to_simple(&volumes.current))
}

/// `GET /api/v1/nodes/{id}/disks`
pub async fn disks(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    Ok(HttpResponse::Ok().json(read(&state, id, false).await?))
}

/// `GET /api/v1/nodes/{id}/disks/defaults`
pub async fn defaults(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    Ok(HttpResponse::Ok().json(read(&state, id, true).await?))
}

/// `PUT /api/v1/nodes/{id}/disks`: the stored layout in the simple format; 400 naming each bad
/// field, nothing stored.
pub async fn update(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let doc: Value = ApiError::parse(&body)?;
    let upload = parse_simple(&doc).map_err(|fields| ApiError::InvalidInput {
        what: "disks",
        fields,
    })?;
    let stored = state
        .store(move |s| {
            s.write(|tx| {
                let node = tx.read().existing_node(id)?;
                let mut l = match layout(&tx.read(), &node, false) {
                    Ok(l) => l,
                    Err(e) => return Ok(Err(ApiError::from(e))),
                };
                let fields = l.manager.check(&upload, l.ubuntu);
                if !fields.is_empty() {
                    return Ok(Err(ApiError::InvalidInput {
                        what: "disks",
                        fields,
                    }));
                }
                let full = match l.manager.apply(&upload) {
                    Ok(f) => Value::Array(f),
                    Err(e) => return Ok(Err(ApiError::Internal(e.to_string()))),
                };
                tx.set_node_document(id, NodeDocument::Disks, Some(&full))?;
                Ok(Ok(full))
            })
        })
        .await??;
    let full = stored.as_array().cloned().unwrap_or_default();
    Ok(HttpResponse::Ok().json(to_simple(&full)))
}
