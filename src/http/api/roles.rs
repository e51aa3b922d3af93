//! Nailgun 11's role and tag API, per release and per environment (`fuel2 role ... -r|-e`,
//! `fuel2 tag ...`): `GET/POST /{releases|clusters}/{id}/{roles|tags}`,
//! `GET/PUT/DELETE /{releases|clusters}/{id}/{roles|tags}/{name}`. Thin: the path says whose
//! and which; [`crate::roles`] checks, stores and shows.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use crate::http::api::catalog::id_of;
use crate::http::{ApiError, AppState};
use crate::roles;
use crate::store::{MetaKind, MetaOwner};

/// The owner, kind and name a request's path names: `/api/v1/{releases|clusters}/{id}/
/// {roles|tags}[/{name}]`.
fn target(req: &HttpRequest) -> Result<(MetaOwner, MetaKind, Option<String>), ApiError> {
    let parts: Vec<&str> = req.path().trim_end_matches('/').split('/').collect();
    let (Some(o), Some(id), Some(k)) = (parts.get(3), parts.get(4), parts.get(5)) else {
        return Err(ApiError::NotFound(format!(
            "no role endpoint {}",
            req.path()
        )));
    };
    let owner = match *o {
        "releases" => MetaOwner::Release(id_of(id, "release")?),
        _ => MetaOwner::Cluster(id_of(id, "environment")?),
    };
    let kind = if *k == "tags" {
        MetaKind::Tag
    } else {
        MetaKind::Role
    };
    Ok((
        owner,
        kind,
        req.match_info().get("name").map(str::to_string),
    ))
}

/// `GET /{owner}/{id}/{roles|tags}`: everything the owner offers.
pub async fn list(state: web::Data<AppState>, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let (owner, kind, _) = target(&req)?;
    let body = state
        .store(move |s| s.read(|r| roles::list(r, owner, kind)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /{owner}/{id}/{roles|tags}/{name}`: one of the owner's own.
pub async fn show(state: web::Data<AppState>, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let (owner, kind, name) = target(&req)?;
    let name = name.unwrap_or_default();
    let body = state
        .store(move |s| s.read(|r| roles::show(r, owner, kind, &name)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `POST /{owner}/{id}/{roles|tags}`: 201 with what was created.
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (owner, kind, _) = target(&req)?;
    let doc: Value = ApiError::parse(&body)?;
    let shown = state
        .store(move |s| s.write(|tx| roles::put(tx, owner, kind, None, &doc)))
        .await?;
    Ok(HttpResponse::Created().json(shown))
}

/// `PUT /{owner}/{id}/{roles|tags}/{name}`: what it is now.
pub async fn update(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (owner, kind, name) = target(&req)?;
    let name = name.unwrap_or_default();
    let doc: Value = ApiError::parse(&body)?;
    let shown = state
        .store(move |s| s.write(|tx| roles::put(tx, owner, kind, Some(&name), &doc)))
        .await?;
    Ok(HttpResponse::Ok().json(shown))
}

/// `DELETE /{owner}/{id}/{roles|tags}/{name}`: 204; a role a node has is 400, naming it.
pub async fn delete(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (owner, kind, name) = target(&req)?;
    let name = name.unwrap_or_default();
    state
        .store(move |s| s.write(|tx| roles::delete(tx, owner, kind, &name)))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
