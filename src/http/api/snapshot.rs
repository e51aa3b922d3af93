//! The diagnostic snapshot as Nailgun's API had it (`fuel2 snapshot create|get-link|
//! get-default-config`, `fuel snapshot`): `PUT /logs/package` starts the `dump` task (202 with
//! it; its message, once ready, is where the archive is), `GET /logs/package/config/default`
//! answers the configuration it takes (none: `{}`), and `GET /api/dump/{name}` downloads one.
//! A snapshot holds the master's whole state: every route is the admin's. Thin: parse, call
//! [`crate::snapshot`], answer.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use crate::http::api::transactions::master_task_json;
use crate::http::{ApiError, AppState};
use crate::snapshot::SnapshotError;

impl From<SnapshotError> for ApiError {
    fn from(e: SnapshotError) -> ApiError {
        match e {
            SnapshotError::Store(e) => ApiError::Store(e),
            SnapshotError::NotFound(name) => ApiError::NotFound(format!("no snapshot {name}")),
            e @ SnapshotError::Io { .. } => ApiError::Internal(e.to_string()),
        }
    }
}

/// `PUT /api/v1/logs/package` with an optional body (`{}` or `null`: stoker's snapshot has
/// fixed contents): 202 with the running `dump` task; 409 while one runs.
pub async fn create(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let conf: Option<Value> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(ApiError::parse(&body)?)
    };
    let (snapshots, store) = (
        std::sync::Arc::clone(&state.snapshots),
        std::sync::Arc::clone(&state.store),
    );
    let now = crate::clock::now();
    let task =
        crate::http::off_worker(move || snapshots.start(&store, conf.as_ref(), now)).await??;
    Ok(HttpResponse::Accepted().json(master_task_json(&task)))
}

/// `GET /api/v1/logs/package/config/default`: what `PUT /logs/package` takes, `{}`.
pub async fn default_config() -> HttpResponse {
    HttpResponse::Ok().json(json!({}))
}

/// `GET /api/dump/{name}`: a ready snapshot, as a download.
pub async fn download(
    state: web::Data<AppState>,
    req: HttpRequest,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let path = state.snapshots.file(&name)?;
    let file = crate::http::off_worker(move || actix_files::NamedFile::open(path))
        .await?
        .map_err(|_| ApiError::NotFound(format!("no snapshot {name}")))?;
    Ok(file
        .set_content_type(
            "application/gzip"
                .parse()
                .unwrap_or(actix_web::mime::APPLICATION_OCTET_STREAM),
        )
        .set_content_disposition(actix_web::http::header::ContentDisposition {
            disposition: actix_web::http::header::DispositionType::Attachment,
            parameters: vec![actix_web::http::header::DispositionParam::Filename(name)],
        })
        .into_response(&req))
}
