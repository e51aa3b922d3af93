//! Nailgun's orchestrator facts API (`/clusters/{id}/orchestrator/deployment|provisioning`
//! and their `/defaults`): `fuel2 env deployment-facts|provisioning-facts` and the old `fuel
//! deployment|provisioning`. Thin: parse, read or write the store, shape with
//! [`crate::facts`].

use std::collections::BTreeSet;

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::facts;
use crate::http::api::catalog::id_of;
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::store::{FactsKind, StoreError};

#[derive(Debug, Deserialize)]
pub struct FactsQuery {
    nodes: Option<String>,
    split: Option<String>,
}

fn kind_of(raw: &str) -> Result<FactsKind, ApiError> {
    match raw {
        "deployment" => Ok(FactsKind::Deployment),
        "provisioning" => Ok(FactsKind::Provisioning),
        other => Err(ApiError::NotFound(format!(
            "no such facts: {other:?} (deployment or provisioning)"
        ))),
    }
}

/// `GET /api/v1/clusters/{id}/orchestrator/{kind}[?split=1]`: the uploaded facts.
pub async fn uploaded(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    q: web::Query<FactsQuery>,
) -> Result<HttpResponse, ApiError> {
    let (id, kind) = (id_of(&path.0, "environment")?, kind_of(&path.1)?);
    let split = query::flag("split", q.split.as_deref())?;
    let got = state
        .store(move |s| {
            s.read(|r| {
                r.existing_cluster(id)?;
                r.uploaded_facts(id, kind)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(facts::uploaded_json(kind, got, split)))
}

/// `PUT /api/v1/clusters/{id}/orchestrator/{kind}`: replace the uploaded facts (checked: every
/// node one of the environment's); they are what the next deployment uses.
pub async fn upload(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (id, kind) = (id_of(&path.0, "environment")?, kind_of(&path.1)?);
    let body: Value = ApiError::parse(&body)?;
    let got = state
        .store(move |s| {
            s.write(|tx| {
                let members: BTreeSet<i64> =
                    tx.read().cluster_nodes(id)?.iter().map(|n| n.id).collect();
                let parsed = facts::parse_upload(kind, &body, &members).map_err(|fields| {
                    StoreError::Invalid {
                        what: "facts",
                        fields,
                    }
                })?;
                tx.set_uploaded_facts(id, kind, &parsed)?;
                Ok(parsed)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(facts::uploaded_json(kind, got, false)))
}

/// `DELETE /api/v1/clusters/{id}/orchestrator/{kind}`: the generated facts are used again
/// (202, `{}`, as Nailgun).
pub async fn delete(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, kind) = (id_of(&path.0, "environment")?, kind_of(&path.1)?);
    state
        .store(move |s| s.write(|tx| tx.set_uploaded_facts(id, kind, &Default::default())))
        .await?;
    Ok(HttpResponse::Accepted().json(json!({})))
}

/// `GET /api/v1/clusters/{id}/orchestrator/{kind}/defaults[?nodes=1,2&split=1]`: what the
/// master generates, uploads ignored; by default for every node not pending deletion.
pub async fn defaults(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    q: web::Query<FactsQuery>,
) -> Result<HttpResponse, ApiError> {
    let (id, kind) = (id_of(&path.0, "environment")?, kind_of(&path.1)?);
    let split = query::flag("split", q.split.as_deref())?;
    let only: BTreeSet<i64> = query::ids("nodes", q.nodes.as_deref())?
        .into_iter()
        .collect();
    let now = crate::clock::now();
    let answer = crate::http::api::deploy::on_master(&state, move |m| {
        crate::facts::defaults(m, id, kind, &only, split, now)
    })
    .await?;
    Ok(HttpResponse::Ok().json(answer))
}
