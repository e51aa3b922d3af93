//! Plugin installation over HTTP: `POST /api/v1/plugins` with a built package (`.fp`, gzipped
//! tar) as the body, and Fuel's `POST /api/v1/plugins/sync`, which re-reads the plugin folders
//! under the data dir. An invalid package is refused with 400 `invalid_plugin` and its
//! diagnostics. The work (unpack, validate, write, record) runs on the blocking pool.

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::{ApiError, AppState};
use crate::package::install::{InstallError, install, sync};
use crate::package::{PackageError, archive};

/// The largest package accepted.
pub const MAX_UPLOAD: usize = 256 * 1024 * 1024;

fn install_error(e: InstallError) -> Result<HttpResponse, ApiError> {
    match e {
        InstallError::Invalid(d) => Ok(HttpResponse::BadRequest().json(json!({
            "code": "invalid_plugin",
            "message": format!("the plugin is invalid: {} error(s)", d.count(crate::engine::plugin::Level::Error)),
            "diagnostics": d.0,
        }))),
        InstallError::Package(PackageError::BadArchive(m)) => Err(ApiError::BadRequest(m)),
        InstallError::Package(PackageError::Conflict(m)) => Err(ApiError::Conflict(m)),
        InstallError::Package(PackageError::Store(s)) => Err(ApiError::Store(s)),
        InstallError::Package(other) => Err(ApiError::Internal(other.to_string())),
    }
}

/// `POST /api/v1/plugins`: install the package in the body. 201 with the plugin, its releases
/// and its findings.
pub async fn install_plugin(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    if body.is_empty() {
        return Err(ApiError::BadRequest(
            "send the package (.fp, as `stoker plugin build` makes it) as the request body"
                .to_string(),
        ));
    }
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    let now = crate::clock::now();
    let outcome = web::block(move || {
        let files = archive::read(&body).map_err(InstallError::from)?;
        install(&store, &data_dir, &files, now)
    })
    .await
    .map_err(|e| ApiError::Internal(format!("blocking task failed: {e}")))?;
    match outcome {
        Ok(done) => {
            tracing::info!(plugin = %done.plugin.name, version = %done.plugin.version, "plugin installed");
            Ok(HttpResponse::Created().json(json!({
                "plugin": done.plugin,
                "releases": done.releases,
                "diagnostics": done.diagnostics.0,
            })))
        }
        Err(e) => install_error(e),
    }
}

/// `POST /api/v1/plugins/sync`: re-read every plugin folder.
pub async fn sync_plugins(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    let now = crate::clock::now();
    let outcome = web::block(move || sync(&store, &data_dir, now))
        .await
        .map_err(|e| ApiError::Internal(format!("blocking task failed: {e}")))?;
    match outcome {
        Ok(report) => Ok(HttpResponse::Ok().json(report)),
        Err(e) => install_error(e),
    }
}
