//! Plugin installation over HTTP: `POST /api/v1/plugins` with a built package (`.fp`, gzipped
//! tar) as the body, and Fuel's `POST /api/v1/plugins/sync`, which re-reads the plugin folders
//! under the data dir. An invalid package is refused with 400 `invalid_plugin` and its
//! diagnostics.
//!
//! The body is streamed to a hidden file under `data_dir/plugins/`, never held in memory, and
//! refused with 413 `payload_too_large` as soon as it passes `plugins.max_upload_bytes` (at
//! once when its Content-Length says so). Unpacking, checking and recording
//! ([`crate::package::install::install_archive`], within the other `plugins.max_*` limits) and
//! rescans run on one thread of their own, one at a time: the memory a hostile package makes
//! the parser use (up to its node budget) is then reused by the next package instead of staying
//! resident in the malloc arena of whichever blocking thread ran it, so the daemon's peak is
//! that of one package however many arrive. Error messages never hold a host path:
//! file-system failures are logged with theirs and answered without it.

use std::pin::Pin;
use std::sync::{Mutex, OnceLock, mpsc};

use actix_web::body::{BodyStream, MessageBody};
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use crate::http::{ApiError, AppState};
use crate::package::archive::bytes;
use crate::package::install::{InstallError, Installed, Scratch, install_archive, sync};
use crate::package::{PackageError, PackageLimits};

/// Chunks of the body are gathered up to this size before each write to disk.
const WRITE_BATCH: usize = 1 << 20;

type Job = Box<dyn FnOnce() + Send>;

/// The package thread's queue, started on first use.
fn package_thread() -> Result<mpsc::Sender<Job>, ApiError> {
    static QUEUE: OnceLock<Mutex<Option<mpsc::Sender<Job>>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| Mutex::new(None));
    let mut queue = queue
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(tx) = queue.as_ref() {
        return Ok(tx.clone());
    }
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("packages".to_string())
        .stack_size(8 << 20)
        .spawn(move || {
            for job in rx {
                // A panic fails that job (its caller sees the reply dropped), not the thread.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
        })
        .map_err(|e| ApiError::Internal(format!("cannot start the package thread: {e}")))?;
    *queue = Some(tx.clone());
    Ok(tx)
}

/// Run `f` on the package thread and wait for it.
async fn on_package_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    package_thread()?
        .send(Box::new(move || {
            let _ = reply.send(f());
        }))
        .map_err(|_| ApiError::Internal("the package thread has stopped".to_string()))?;
    answer
        .await
        .map_err(|_| ApiError::Internal("the package job failed; the log says why".to_string()))
}

pub fn install_error(e: InstallError) -> Result<HttpResponse, ApiError> {
    match e {
        InstallError::Invalid(d) => Ok(HttpResponse::BadRequest().json(json!({
            "code": "invalid_plugin",
            "message": format!("the plugin is invalid: {} error(s)", d.count(crate::engine::plugin::Level::Error)),
            "diagnostics": d.0,
        }))),
        InstallError::Package(PackageError::BadArchive(m)) => Err(ApiError::BadRequest(m)),
        InstallError::Package(PackageError::TooLarge(m)) => Err(ApiError::TooLarge(m)),
        InstallError::Package(PackageError::Conflict(m)) => Err(ApiError::Conflict(m)),
        InstallError::Package(PackageError::Store(s)) => Err(ApiError::Store(s)),
        InstallError::Package(PackageError::Io { path, source })
            if source.kind() == std::io::ErrorKind::StorageFull =>
        {
            Err(ApiError::Store(crate::store::StoreError::DiskFull { path }))
        }
        InstallError::Package(other) => Err(internal(&other)),
    }
}

/// A refused install as the API's error (an invalid package is the API's 400 with its
/// findings; here, its message).
pub fn install_error_of(e: &InstallError) -> ApiError {
    match e {
        InstallError::Invalid(_) => ApiError::BadRequest(e.to_string()),
        InstallError::Package(PackageError::BadArchive(m)) => ApiError::BadRequest(m.clone()),
        InstallError::Package(PackageError::TooLarge(m)) => ApiError::TooLarge(m.clone()),
        InstallError::Package(PackageError::Conflict(m)) => ApiError::Conflict(m.clone()),
        InstallError::Package(other) => internal(other),
    }
}

/// A failure of this host (disk, permissions): logged in full, answered without the path.
fn internal(e: &dyn std::fmt::Display) -> ApiError {
    tracing::error!("plugin files: {e}");
    ApiError::Internal(
        "cannot write or read the plugin files on the master; its log says why".to_string(),
    )
}

fn too_large(limits: &PackageLimits) -> ApiError {
    ApiError::TooLarge(format!(
        "the package is larger than {} (plugins.max_upload_bytes)",
        bytes(limits.max_upload)
    ))
}

/// Write `data` to the end of the upload file, on the blocking pool.
async fn append(
    file: std::fs::File,
    data: Vec<u8>,
    path: &std::path::Path,
) -> Result<std::fs::File, ApiError> {
    crate::http::off_worker(move || {
        use std::io::Write;
        let mut file = file;
        file.write_all(&data).map(|()| file)
    })
    .await?
    .map_err(|e| match disk_full(path, &e) {
        Some(full) => full,
        None => internal(&format!("writing an upload: {e}")),
    })
}

/// A write that found no space left on the disk holding `path`, said as the store says it
/// (507 `disk_full`).
fn disk_full(path: &std::path::Path, e: &std::io::Error) -> Option<ApiError> {
    (e.kind() == std::io::ErrorKind::StorageFull).then(|| {
        ApiError::Store(crate::store::StoreError::DiskFull {
            path: path.to_path_buf(),
        })
    })
}

/// Stream `body` into `upload`, refusing it past `limits.max_upload` (at once when `declared`,
/// its announced length, says so). Returns its size.
async fn receive<S, E>(
    body: S,
    declared: Option<u64>,
    upload: &Scratch,
    limits: &PackageLimits,
) -> Result<u64, ApiError>
where
    S: futures_util::Stream<Item = Result<web::Bytes, E>>,
    E: std::fmt::Display,
{
    if declared.is_some_and(|length| length > limits.max_upload) {
        return Err(too_large(limits));
    }
    let mut file = std::fs::File::create(upload.path())
        .map_err(|e| internal(&format!("creating an upload: {e}")))?;
    let mut body = std::pin::pin!(body);
    let mut batch: Vec<u8> = Vec::new();
    let mut total = 0u64;
    while let Some(chunk) = std::future::poll_fn(|cx| body.as_mut().poll_next(cx)).await {
        let chunk = chunk.map_err(|e| {
            ApiError::BadRequest(format!("the request body could not be read: {e}"))
        })?;
        total += chunk.len() as u64;
        if total > limits.max_upload {
            return Err(too_large(limits));
        }
        batch.extend_from_slice(&chunk);
        if batch.len() >= WRITE_BATCH {
            file = append(file, std::mem::take(&mut batch), upload.path()).await?;
        }
    }
    if !batch.is_empty() {
        append(file, batch, upload.path()).await?;
    }
    Ok(total)
}

/// A package streamed from `body` to a hidden file under the data directory (never held in
/// memory, refused past `plugins.max_upload_bytes`), then unpacked, checked and installed on
/// the package thread: the API's upload and the dashboard's alike. `Ok(Err(_))` is a package
/// that was read and refused (invalid, too large unpacked, a conflict).
pub async fn install_upload<S, E>(
    state: &AppState,
    body: S,
    declared: Option<u64>,
) -> Result<Result<Installed, InstallError>, ApiError>
where
    S: futures_util::Stream<Item = Result<web::Bytes, E>>,
    E: std::fmt::Display,
{
    let limits = state.package_limits;
    let upload = Scratch::upload(&state.data_dir).map_err(|e| internal(&e))?;
    let size = receive(body, declared, &upload, &limits).await?;
    if size == 0 {
        return Err(ApiError::BadRequest(
            "send the package (.fp, as `stoker plugin build` makes it) as the request body"
                .to_string(),
        ));
    }
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    let now = crate::clock::now();
    let outcome = on_package_thread(move || {
        let done = install_archive(&store, &data_dir, upload.path(), &limits.archive, now);
        drop(upload);
        done
    })
    .await?;
    if let Ok(done) = &outcome {
        tracing::info!(plugin = %done.plugin.name, version = %done.plugin.version, "plugin installed");
    }
    Ok(outcome)
}

/// `POST /api/v1/plugins`: install the package in the body. 201 with the plugin, its releases
/// and its findings.
pub async fn install_plugin(
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let declared = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body = BodyStream::new(payload.into_inner());
    match install_upload(&state, Unpin(body), declared).await? {
        Ok(done) => Ok(HttpResponse::Created().json(json!({
            "plugin": done.plugin,
            "releases": done.releases,
            "diagnostics": done.diagnostics.0,
        }))),
        Err(e) => install_error(e),
    }
}

/// A request body as a stream of its chunks.
struct Unpin<B>(BodyStream<B>);

impl<B> futures_util::Stream for Unpin<B>
where
    BodyStream<B>: MessageBody + std::marker::Unpin,
    <BodyStream<B> as MessageBody>::Error: std::fmt::Display,
{
    type Item = Result<web::Bytes, String>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<web::Bytes, String>>> {
        Pin::new(&mut self.0)
            .poll_next(cx)
            .map(|c| c.map(|r| r.map_err(|e| e.to_string())))
    }
}

/// `POST /api/v1/plugins/sync`: re-read every plugin folder.
pub async fn sync_plugins(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    let now = crate::clock::now();
    let outcome = on_package_thread(move || sync(&store, &data_dir, now)).await?;
    match outcome {
        Ok(report) => Ok(HttpResponse::Ok().json(report)),
        Err(e) => install_error(e),
    }
}
