//! Nailgun's environment attributes (`/clusters/{id}/attributes` and `/defaults`): `fuel2 env
//! settings download|upload` and the old `fuel settings`. The document is built and read back
//! by [`crate::engine::attributes`] over the environment's settings, which stay the one place
//! an environment's settings live (`/clusters/{id}/settings` shows the same values in the
//! deployment-data shape). Secrets are masked below admin and a masked value sent back keeps
//! the stored one. A change is read, applied and written in one transaction, so two uploads
//! that change different groups both land.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::attributes::{self, Models, Source};
use crate::http::access::Caller;
use crate::http::api::catalog::{cluster_json, id_of};
use crate::http::api::environments::accepts;
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::planner::Accepts;
use crate::store::StoreError;

fn source(a: &Accepts) -> Source<'_> {
    Source {
        release: &a.release_attributes,
        plugins: &a.plugins,
    }
}

/// What restrictions may read besides the document: the environment as Nailgun shows it, the
/// master's version and the networking parameters.
pub fn models(cluster: &crate::model::Cluster, release: &crate::model::Release) -> Models {
    Models {
        cluster: cluster_json(cluster, Some(release)),
        version: crate::http::api::version_json(),
        networking_parameters: json!({
            "segmentation_type": cluster.net_segment_type,
            "net_l23_provider": "ovs",
        }),
    }
}

fn answer(caller: &Caller, editable: Value) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "editable": caller.shown(editable) }))
}

/// The document of environment `path` with its settings, or with none (`defaults`).
async fn document(
    state: &AppState,
    caller: &Caller,
    path: &str,
    defaults: bool,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(path, "environment")?;
    let accepts = accepts(state, id).await?;
    let settings = if defaults {
        json!({})
    } else {
        state
            .store(move |s| s.read(|r| r.cluster_settings(id)))
            .await?
    };
    Ok(answer(
        caller,
        attributes::editable(source(&accepts), &settings),
    ))
}

/// `GET /api/v1/clusters/{id}/attributes`
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    document(&state, &caller, &path, false).await
}

/// `GET /api/v1/clusters/{id}/attributes/defaults`: the document with nothing set.
pub async fn defaults(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    document(&state, &caller, &path, true).await
}

#[derive(Debug, Deserialize)]
pub struct Force {
    force: Option<String>,
}

/// How a change of attributes is checked besides the engine's rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct Change {
    /// Change them while the environment deploys (Nailgun's `force`).
    pub force: bool,
    /// Refuse what a restriction holding in the result hides or disables
    /// ([`attributes::locked_changes`]), as Fuel's Settings tab did; the API, as Nailgun's,
    /// leaves that to [`attributes::apply`]'s checks.
    pub locked: bool,
}

/// Apply `request` (`{editable: {...}}`, Nailgun's PATCH-like PUT) to environment `id`'s
/// settings: read, checked and written in one transaction, a masked secret sent back keeping
/// its stored value. The new editable document.
pub async fn change(
    state: &AppState,
    id: i64,
    mut request: Value,
    how: Change,
) -> Result<Value, ApiError> {
    let accepts = accepts(state, id).await?;
    let now = crate::clock::now();
    state
        .store(move |s| {
            s.write(|tx| {
                let (cluster, release) =
                    tx.read()
                        .cluster_with_release(id)?
                        .ok_or_else(|| StoreError::NotFound {
                            entity: "environment",
                            id: id.to_string(),
                        })?;
                let settings = tx.read().cluster_settings(id)?;
                let src = source(&accepts);
                let before = attributes::editable(src, &settings);
                // A secret sent back as read (`******`) keeps its stored value.
                if let Some(sent) = request.get_mut("editable") {
                    crate::auth::mask::unmask(sent, &before);
                }
                let models = models(&cluster, &release);
                let invalid = |fields| StoreError::Invalid {
                    what: "attributes",
                    fields,
                };
                let next = attributes::apply(src, &settings, &request, &models).map_err(invalid)?;
                let after = attributes::editable(src, &next);
                if how.locked {
                    let locked = attributes::locked_changes(&before, &after, &models);
                    if !locked.is_empty() {
                        return Err(invalid(locked));
                    }
                }
                if next != settings && cluster.status == "deployment" && !how.force {
                    return Err(StoreError::Forbidden(format!(
                        "Environment attributes of {} couldn't be changed during deployment \
                         (send force=1 to change them anyway)",
                        cluster.name
                    )));
                }
                if next != settings {
                    tx.set_cluster_settings(id, &next, now)?;
                }
                Ok(after)
            })
        })
        .await
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
    let request: Value = ApiError::parse(&body)?;
    let doc = change(
        &state,
        id,
        request,
        Change {
            force,
            locked: false,
        },
    )
    .await?;
    Ok(answer(&caller, doc))
}

/// `PUT /api/v1/clusters/{id}/attributes/defaults`: every setting back to its default.
pub async fn reset_defaults(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let accepts = accepts(&state, id).await?;
    let now = crate::clock::now();
    state
        .store(move |s| s.write(|tx| tx.set_cluster_settings(id, &json!({}), now)))
        .await?;
    Ok(answer(
        &caller,
        attributes::editable(source(&accepts), &json!({})),
    ))
}
