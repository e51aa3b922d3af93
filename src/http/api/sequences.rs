//! Nailgun's deployment sequence API (`fuel2 sequence create|upload|list|show|update|delete|
//! download|execute`): `GET /sequences/[?release=|?cluster=]`, `POST /sequences/` (201),
//! `GET|PUT|PATCH|DELETE /sequences/{id}/`, `POST /sequences/{id}/execute/` (Nailgun's task
//! object, 202 while it runs). Thin: parse, call [`crate::sequences`], answer.

use std::sync::Arc;

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use crate::http::api::catalog::id_of;
use crate::http::api::transactions::answer_started;
use crate::http::{ApiError, AppState};
use crate::sequences::{self, NewSequence, SequenceChange, SequenceRun};

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    release: Option<String>,
    cluster: Option<String>,
}

/// `GET /api/v1/sequences[?release=N|?cluster=N]`.
pub async fn list(
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let some = |raw: &Option<String>, what| match raw.as_deref() {
        None | Some("") => Ok(None),
        Some(raw) => id_of(raw, what).map(Some),
    };
    let release = some(&query.release, "release")?;
    let cluster = some(&query.cluster, "environment")?;
    let body = state
        .store(move |s| s.read(|r| sequences::list(r, release, cluster)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `POST /api/v1/sequences`: 201 with the sequence.
pub async fn create(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let new: NewSequence = ApiError::parse_fields(&body, "sequence")?;
    let made = state
        .store(move |s| s.write(|tx| sequences::create(tx, &new)))
        .await?;
    Ok(HttpResponse::Created().json(made))
}

/// `GET /api/v1/sequences/{id}`.
pub async fn show(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "sequence")?;
    let found = state
        .store(move |s| s.read(|r| r.existing_sequence(id)))
        .await?;
    Ok(HttpResponse::Ok().json(found))
}

/// `PUT|PATCH /api/v1/sequences/{id}`: the sequence as it is now.
pub async fn update(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "sequence")?;
    let change: SequenceChange = ApiError::parse_fields(&body, "sequence")?;
    let now = state
        .store(move |s| s.write(|tx| sequences::update(tx, id, &change)))
        .await?;
    Ok(HttpResponse::Ok().json(now))
}

/// `DELETE /api/v1/sequences/{id}`: 204.
pub async fn delete(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "sequence")?;
    state
        .store(move |s| s.write(|tx| tx.delete_sequence(id)))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /api/v1/sequences/{id}/execute`: the sequence's graphs on the environment, one after
/// another; the transaction, 202 while it runs (200 when it is over already: a dry run).
pub async fn execute(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "sequence")?;
    let run: SequenceRun = ApiError::parse_fields(&body, "sequence execution")?;
    let chains = Arc::clone(&state.chains);
    let now = crate::clock::now();
    let started = crate::http::api::deploy::on_master(&state, move |m| {
        sequences::execute(m, &chains, id, &run, now)
    })
    .await?;
    crate::http::api::deploy::record_starter(&state, started.id).await;
    answer_started(&state, started.id).await
}
