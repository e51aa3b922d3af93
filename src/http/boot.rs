//! The HTTP half of network boot: the per-node iPXE script (`/boot/{mac}.ipxe`) and the
//! bootstrap kernel and initramfs (`/boot/images/{file}`, with Range support).
//!
//! A node that is not yet deployed gets the bootstrap script, whose kernel command line carries
//! the master's URL, the node's MAC and a fresh one-time token (stored hashed); a deployed node
//! gets a "boot from local disk" script. The URL is `http.public_url`, or else the address the
//! request itself came to, which is by construction one the node can reach.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use super::{ApiError, AppState};
use crate::model::{Mac, NodeStatus, hex};

#[derive(Template)]
#[template(path = "boot/bootstrap.ipxe", escape = "none")]
struct BootstrapScript<'a> {
    base: &'a str,
    mac: &'a Mac,
    token: &'a str,
    kernel_args: &'a str,
}

#[derive(Template)]
#[template(path = "boot/local.ipxe", escape = "none")]
struct LocalScript<'a> {
    node_id: i64,
    mac: &'a Mac,
}

/// A fresh random token (256 bits, hex) and its SHA-256 hash (hex), which is all that is stored.
pub fn new_token() -> Result<(String, String), ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::Internal(format!("no randomness for a boot token: {e}")))?;
    let token = hex(&bytes);
    let hash = hash_token(&token);
    Ok((token, hash))
}

/// SHA-256 of a token, hex-encoded.
pub fn hash_token(token: &str) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(token.as_bytes()))
}

/// The base URL nodes should use: configured, or the `Host` this request was sent to.
fn base_url(state: &AppState, req: &HttpRequest) -> Result<String, ApiError> {
    if let Some(url) = &state.boot.public_url {
        return Ok(url.clone());
    }
    let info = req.connection_info();
    let host = info.host();
    let safe = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '-' | '[' | ']'));
    if !safe {
        return Err(ApiError::BadRequest(format!(
            "cannot build boot URLs from Host {host:?}; set http.public_url"
        )));
    }
    Ok(format!("http://{host}"))
}

fn script(body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(body)
}

/// `GET /boot/{mac}.ipxe`
pub async fn ipxe_script(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let mac: Mac = path
        .parse()
        .map_err(|e: String| ApiError::BadRequest(format!("boot script path: {e}")))?;
    let base = base_url(&state, &req)?;
    let lookup = mac.clone();
    let node = state
        .store(move |s| s.read(|tx| tx.node_by_mac(&lookup)))
        .await?;
    if let Some(node) = node.filter(|n| n.status == NodeStatus::Ready) {
        tracing::info!(node = node.id, %mac, "boot script: local disk");
        let body = LocalScript {
            node_id: node.id,
            mac: &mac,
        }
        .render()
        .map_err(|e| ApiError::Internal(format!("boot script template: {e}")))?;
        return Ok(script(body));
    }
    let (token, hash) = new_token()?;
    let now = crate::clock::now();
    let issued_for = mac.clone();
    state
        .store(move |s| s.write(|tx| tx.issue_boot_token(&issued_for, &hash, now)))
        .await?;
    tracing::info!(%mac, %base, "boot script: bootstrap image");
    let body = BootstrapScript {
        base: &base,
        mac: &mac,
        token: &token,
        kernel_args: &state.boot.kernel_args,
    }
    .render()
    .map_err(|e| ApiError::Internal(format!("boot script template: {e}")))?;
    Ok(script(body))
}

/// `GET /boot/images/{file}`: the bootstrap kernel and initramfs, with Range and conditional
/// requests (actix-files), from the data dir's `images/`.
pub async fn image(
    state: web::Data<AppState>,
    req: HttpRequest,
    file: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let dir = state.boot.images_dir.clone();
    serve_file(
        dir,
        file.into_inner(),
        &req,
        "the bootstrap images (images/ in the data directory); build them with \
         images/build-bootstrap.sh",
    )
    .await
}

/// `GET /boot/ipxe/{file}`: the iPXE loaders of the TFTP root over HTTP, for UEFI HTTP boot
/// clients (their DHCP answer points here).
pub async fn ipxe_loader(
    state: web::Data<AppState>,
    req: HttpRequest,
    file: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let dir = state.boot.tftp_root.clone();
    serve_file(
        dir,
        file.into_inner(),
        &req,
        "the TFTP root (tftp.root, or tftp/ in the data directory); \
         images/build-bootstrap.sh copies Debian's iPXE binaries there",
    )
    .await
}

/// One file of `dir` by its bare name, with Range support. `hint` names the place for users
/// (the host path is only logged).
async fn serve_file(
    dir: std::path::PathBuf,
    name: String,
    req: &HttpRequest,
    hint: &str,
) -> Result<HttpResponse, ApiError> {
    if name.starts_with('.') || name.contains(['/', '\\']) {
        return Err(ApiError::BadRequest(format!("invalid file name {name:?}")));
    }
    let path = dir.join(&name);
    let opened = web::block(move || actix_files::NamedFile::open(path))
        .await
        .map_err(|e| ApiError::Internal(format!("blocking task failed: {e}")))?;
    match opened {
        Ok(file) => Ok(file
            .use_last_modified(true)
            .set_content_type(mime_octet())
            .into_response(req)),
        Err(e) => {
            // The directory is the host's business: the log says where, the answer does not.
            tracing::warn!(dir = %dir.display(), file = %name, "cannot serve a boot file: {e}");
            Err(ApiError::NotFound(format!("no file {name} in {hint}")))
        }
    }
}

fn mime_octet() -> actix_web::mime::Mime {
    actix_web::mime::APPLICATION_OCTET_STREAM
}
