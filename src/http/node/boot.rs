//! The HTTP half of network boot: the per-node iPXE script (`/boot/{mac}.ipxe`) and the
//! bootstrap kernel and initramfs (`/boot/images/{file}`, with Range support).
//!
//! A node that is not yet deployed gets the bootstrap script, whose kernel command line carries
//! the master's URL, the node's MAC and a fresh one-time token (stored hashed, with the address
//! it went to); a deployed node gets a "boot from local disk" script, and a node waiting for
//! approval the bootstrap without a token. A token goes only to the address the node is known
//! by (`boot.token_binding`); the scripts are rate-limited per client and globally.
//!
//! A script holds two URLs, both from the configuration or the socket, never from the request's
//! `Host` header: where iPXE fetches files (plain HTTP: the boot listener under TLS) and the
//! master's URL for the agent (`https://` under TLS, with the certificate's fingerprint beside
//! it). Each is `http.public_url`'s host, else the address the request itself came to, which is
//! by construction one the node can reach. `/boot/tls/chain.pem` serves the certificate chain
//! that fingerprint names.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use crate::engine::hello::{self, BootAsk, BootRefusal};
use crate::http::{ApiError, AppState};
use crate::model::{Mac, hex};

#[derive(Template)]
#[template(path = "boot/bootstrap.ipxe", escape = "none")]
struct BootstrapScript<'a> {
    /// Where iPXE fetches files (plain HTTP).
    base: &'a str,
    /// The master's URL for the agent.
    master: &'a str,
    /// The master's certificate fingerprint, under TLS.
    fingerprint: Option<&'a str>,
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

/// The two URLs of a boot script: (where iPXE fetches files, the master's URL for the agent).
pub(crate) fn bases(
    boot: &crate::http::BootSettings,
    local: std::net::SocketAddr,
) -> (String, String) {
    use crate::http::transport::{boot_base, https_base};
    let host = match local.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    let public = boot.public_url.as_deref();
    match &boot.tls {
        None => {
            let base = boot_base(public, false, &host, local.port());
            (base.clone(), base)
        }
        Some(tls) => (
            boot_base(public, true, &host, tls.boot_port),
            https_base(public, tls, local),
        ),
    }
}

/// `GET /boot/tls/chain.pem`: the master's certificate chain, for clients that pin its
/// fingerprint (public: what makes it trusted is the fingerprint, not how it travelled).
pub async fn tls_chain(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    match &state.boot.tls {
        Some(tls) => Ok(HttpResponse::Ok()
            .content_type("application/x-pem-file")
            .body(tls.chain_pem.to_string())),
        None => Err(ApiError::NotFound(
            "this master serves no TLS (http.tls)".to_string(),
        )),
    }
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
    crate::http::node::agent::limit(&state.boot_limit, &req)?;
    let mac: Mac = path
        .parse()
        .map_err(|e: String| ApiError::BadRequest(format!("boot script path: {e}")))?;
    let (base, master) = bases(&state.boot, req.app_config().local_addr());
    let peer = crate::http::node::agent::peer_address(&req).unwrap_or_default();
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
                    // A node with an installed OS boots it: provisioned, deploying, ready, or
                    // failed while deploying (its disk is fine; a retry reaches its service
                    // agent). Only discovery and provisioning need the bootstrap.
                    if node.boots_from_disk() {
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
            master: &master,
            fingerprint: state.boot.tls.as_ref().map(|t| t.fingerprint.as_str()),
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
    let opened = crate::http::off_worker(move || actix_files::NamedFile::open(path)).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::transport::TlsInfo;

    fn settings(public_url: Option<&str>, tls: bool) -> crate::http::BootSettings {
        crate::http::BootSettings {
            public_url: public_url.map(str::to_string),
            kernel_args: String::new(),
            images_dir: "/nonexistent".into(),
            tftp_root: "/nonexistent".into(),
            token_lifetime: 60,
            binding: crate::engine::hello::Binding::None,
            discovery: crate::config::DiscoverySettings {
                approval: crate::engine::hello::Approval::Auto,
                max_nodes: 1,
            },
            tls: tls.then(|| TlsInfo {
                fingerprint: "sha256:00".to_string(),
                chain_pem: "".into(),
                api_port: 8443,
                boot_port: 8080,
            }),
        }
    }

    #[test]
    fn script_urls_come_from_the_configuration_or_the_socket() {
        let local: std::net::SocketAddr = "10.20.0.2:8080".parse().unwrap();
        let plain = |url| bases(&settings(url, false), local);
        let tls = |url| bases(&settings(url, true), local);
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            plain(None),
            pair("http://10.20.0.2:8080", "http://10.20.0.2:8080")
        );
        assert_eq!(
            plain(Some("http://master.lab:8000")),
            pair("http://master.lab:8000", "http://master.lab:8000")
        );
        assert_eq!(
            tls(None),
            pair("http://10.20.0.2:8080", "https://10.20.0.2:8443")
        );
        assert_eq!(
            tls(Some("https://master.lab:8443")),
            pair("http://master.lab:8080", "https://master.lab:8443")
        );
        assert_eq!(
            tls(Some("https://[fd00::2]:8443")),
            pair("http://[fd00::2]:8080", "https://[fd00::2]:8443")
        );
        assert_eq!(
            tls(Some("https://master.lab")),
            pair("http://master.lab:8080", "https://master.lab")
        );
    }
}
