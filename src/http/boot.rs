//! The HTTP half of network boot: the per-node iPXE script (`/boot/{mac}.ipxe`) and the
//! bootstrap kernel and initramfs (`/boot/images/{file}`, with Range support).
//!
//! A node that is not yet deployed gets the bootstrap script, whose kernel command line carries
//! the master's URL, the node's MAC and a fresh one-time token (stored hashed, with the address
//! it went to); a deployed node gets a "boot from local disk" script, and a node waiting for
//! approval the bootstrap without a token. A token goes only to the address the node is known
//! by (`boot.token_binding`); the scripts are rate-limited per client and globally. The URL is
//! `http.public_url`, or else the address the request itself came to, which is by construction
//! one the node can reach.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use super::{ApiError, AppState};
use crate::engine::hello::{self, BootAsk, BootRefusal};
use crate::model::{Mac, NodeStatus, hex};

#[derive(Template)]
#[template(path = "boot/bootstrap.ipxe", escape = "none")]
struct BootstrapScript<'a> {
    base: &'a str,
    mac: &'a Mac,
    token: Option<&'a str>,
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

fn script_response(body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(body)
}

/// Which script a boot script request gets.
enum Script {
    /// The node is deployed: boot from its disk.
    Local(i64),
    /// The bootstrap image with a fresh boot token.
    Bootstrap,
    /// The bootstrap image without a token: the node waits for an operator's approval.
    Waiting(i64),
    /// No token for this address.
    Refused(BootRefusal),
    /// `discovery.max_nodes` unused tokens are out.
    Full,
}

/// `GET /boot/{mac}.ipxe`
///
/// A fresh boot token goes only to the address the node is known by (`boot.token_binding`,
/// decided by `engine::hello::boot_token`); a request from elsewhere gets 403, is logged, and
/// leaves the node's token as it was.
pub async fn ipxe_script(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    super::agent::limit(&state.boot_limit, &req)?;
    let mac: Mac = path
        .parse()
        .map_err(|e: String| ApiError::BadRequest(format!("boot script path: {e}")))?;
    let base = base_url(&state, &req)?;
    let peer = super::agent::peer_address(&req).unwrap_or_default();
    let (token, hash) = new_token()?;
    let now = crate::clock::now();
    let binding = state.boot.binding;
    let lifetime = state.boot.token_lifetime;
    let max_tokens = state.boot.discovery.max_nodes;
    let (asked, from) = (mac.clone(), peer.clone());
    let script = state
        .store(move |s| {
            s.write(|tx| {
                let r = tx.read();
                let node = r.node_by_mac(&asked)?;
                if let Some(node) = &node {
                    if node.status == NodeStatus::Ready {
                        return Ok(Script::Local(node.id));
                    }
                    if !node.approved {
                        return Ok(Script::Waiting(node.id));
                    }
                }
                let lease = r.lease_of(&asked, now)?.map(|ip| ip.to_string());
                let outstanding = r.outstanding_boot_token(&asked, now, lifetime)?;
                let ask = BootAsk {
                    binding,
                    peer: &from,
                    lease: lease.as_deref(),
                    node_address: node.as_ref().and_then(|n| n.address.as_deref()),
                    outstanding: outstanding.as_deref(),
                };
                if let Err(why) = hello::boot_token(&ask) {
                    return Ok(Script::Refused(why));
                }
                if outstanding.is_none() && r.live_boot_tokens(now, lifetime)? >= max_tokens {
                    return Ok(Script::Full);
                }
                tx.issue_boot_token(&asked, &hash, now, &from)?;
                Ok(Script::Bootstrap)
            })
        })
        .await?;
    let render = |token: Option<&str>| {
        BootstrapScript {
            base: &base,
            mac: &mac,
            token,
            kernel_args: &state.boot.kernel_args,
        }
        .render()
        .map_err(|e| ApiError::Internal(format!("boot script template: {e}")))
    };
    let body = match script {
        Script::Local(node_id) => {
            tracing::info!(node = node_id, %mac, "boot script: local disk");
            LocalScript { node_id, mac: &mac }
                .render()
                .map_err(|e| ApiError::Internal(format!("boot script template: {e}")))?
        }
        Script::Bootstrap => {
            tracing::info!(%mac, %base, %peer, "boot script: bootstrap image");
            render(Some(&token))?
        }
        Script::Waiting(node_id) => {
            tracing::info!(node = node_id, %mac, "boot script: bootstrap image, no token until approved");
            render(None)?
        }
        Script::Refused(why) => {
            let reason = match &why {
                BootRefusal::NoLease => format!(
                    "stoker's DHCP has leased {mac} no address (boot.token_binding = lease)"
                ),
                BootRefusal::NotTheNode { expected } => {
                    format!("{mac} is known at {expected}")
                }
                BootRefusal::Outstanding { issued_to } if issued_to.is_empty() => {
                    format!("an unused boot token of {mac} went to another address")
                }
                BootRefusal::Outstanding { issued_to } => {
                    format!("an unused boot token of {mac} went to {issued_to}")
                }
            };
            tracing::warn!(%mac, %peer, %reason, "boot token refused to this address");
            return Err(ApiError::Forbidden(format!(
                "no boot token for {mac} to {peer}: {reason}"
            )));
        }
        Script::Full => {
            tracing::warn!(%mac, %peer, max_tokens, "boot token refused: too many unused ones");
            return Err(ApiError::DiscoveryFull(format!(
                "{max_tokens} boot tokens are out unused (discovery.max_nodes); try again later"
            )));
        }
    };
    Ok(script_response(body))
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
