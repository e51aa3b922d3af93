//! Nailgun's environment attributes (`/clusters/{id}/attributes`, `/defaults`, `/deployed`):
//! `fuel2 env settings download|upload` and the old `fuel settings`. The document is built and
//! read back by [`crate::engine::attributes`] over the environment's settings, which stay the one
//! place an environment's settings live (`/clusters/{id}/settings` shows the same values in the
//! deployment-data shape). Secrets are masked below admin and a masked value sent back keeps
//! the stored one.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Role;
use crate::engine::attributes::{self, Models, Source};
use crate::http::access::Caller;
use crate::http::api::catalog::{cluster_json, id_of};
use crate::http::api::environments::accepts;
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::model::{Cluster, Release};
use crate::planner::Accepts;

/// Everything a document of environment `id` is built from.
struct Parts {
    cluster: Cluster,
    release: Release,
    accepts: Accepts,
    settings: Value,
}

async fn parts(state: &AppState, id: i64) -> Result<Parts, ApiError> {
    let accepts = accepts(state, id).await?;
    let (cluster, release, settings) = state
        .store(move |s| {
            s.read(|r| {
                let Some((c, rel)) = r.cluster_with_release(id)? else {
                    return Ok(None);
                };
                Ok(Some((c, rel, r.cluster_settings(id)?)))
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("environment {id} does not exist")))?;
    Ok(Parts {
        cluster,
        release,
        accepts,
        settings,
    })
}

impl Parts {
    fn source(&self) -> Source<'_> {
        Source {
            release: &self.accepts.release_attributes,
            plugins: &self.accepts.plugins,
        }
    }

    fn models(&self) -> Models {
        Models {
            cluster: cluster_json(&self.cluster, Some(&self.release)),
            version: crate::http::api::version_json(),
            networking_parameters: json!({
                "segmentation_type": self.cluster.net_segment_type,
                "net_l23_provider": "ovs",
            }),
        }
    }
}

fn answer(caller: &Caller, mut editable: Value) -> HttpResponse {
    if caller.0.role != Role::Admin {
        crate::auth::mask::mask(&mut editable);
    }
    HttpResponse::Ok().json(json!({ "editable": editable }))
}

/// `GET /api/v1/clusters/{id}/attributes`
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let p = parts(&state, id).await?;
    Ok(answer(
        &caller,
        attributes::editable(p.source(), &p.settings),
    ))
}

/// `GET /api/v1/clusters/{id}/attributes/defaults`: the document with nothing set.
pub async fn defaults(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let p = parts(&state, id).await?;
    Ok(answer(
        &caller,
        attributes::editable(p.source(), &json!({})),
    ))
}

#[derive(Debug, Deserialize)]
pub struct Force {
    force: Option<String>,
}

/// `PUT /api/v1/clusters/{id}/attributes[?force=1]`: change what the document sends (Nailgun's
/// PUT is a PATCH), every value checked; while the environment deploys, a change needs
/// `force`, as Nailgun's locked clusters did.
pub async fn put(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    q: web::Query<Force>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let force = query::flag("force", q.force.as_deref())?;
    let mut request: Value = ApiError::parse(&body)?;
    let p = parts(&state, id).await?;
    // A secret sent back as read (`******`) keeps its stored value.
    if let Some(sent) = request.get_mut("editable") {
        crate::auth::mask::unmask(sent, &attributes::editable(p.source(), &p.settings));
    }
    let next =
        attributes::apply(p.source(), &p.settings, &request, &p.models()).map_err(|fields| {
            ApiError::InvalidInput {
                what: "attributes",
                fields,
            }
        })?;
    if next != p.settings && p.cluster.status == "deployment" && !force {
        return Err(ApiError::Forbidden(format!(
            "Environment attributes of {} couldn't be changed during deployment (send force=1 \
             to change them anyway)",
            p.cluster.name
        )));
    }
    let now = crate::clock::now();
    let stored = next.clone();
    state
        .store(move |s| s.write(|tx| tx.set_cluster_settings(id, &stored, now)))
        .await?;
    Ok(answer(&caller, attributes::editable(p.source(), &next)))
}

/// `PUT /api/v1/clusters/{id}/attributes/defaults`: every setting back to its default.
pub async fn reset_defaults(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let p = parts(&state, id).await?;
    let now = crate::clock::now();
    state
        .store(move |s| s.write(|tx| tx.set_cluster_settings(id, &json!({}), now)))
        .await?;
    Ok(answer(
        &caller,
        attributes::editable(p.source(), &json!({})),
    ))
}
