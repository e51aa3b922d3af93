//! Which listener serves what. Under TLS the daemon listens twice: HTTPS on `http.listen` for
//! everything, and plain HTTP on `http.boot_listen` for what iPXE fetches (it cannot check the
//! master's certificate): `/boot/` and nothing else. A plain request for anything else is sent
//! to the HTTPS URL (308, with a JSON body saying so), so no credential or session is ever
//! asked for in clear. Answers over TLS carry HSTS. Without TLS there is one plain listener and
//! this layer only passes requests on. The listening sockets themselves are opened here too,
//! with a backlog sized for a site's agents connecting at once ([`LISTEN_BACKLOG`]).

use std::net::{SocketAddr, TcpListener};

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};

use crate::http::AppState;

/// Connections the kernel may queue on a listener before the daemon accepts them (clamped to
/// `net.core.somaxconn`, 4096 by default since Linux 5.4). Rust's `TcpListener::bind` asks for
/// 128: 10,000 agents opening their connections within a second (a rack's ramdisks asking for
/// work, every agent reconnecting after the daemon restarts) overflowed it (the kernel's
/// `ListenOverflows`), and each SYN it dropped cost its agent TCP's first retransmission, one
/// second (the agents bench's first deployment had a max of 1.0-1.1 s from those alone).
const LISTEN_BACKLOG: i32 = 4096;

/// Listen on `addr` for HTTP as `TcpListener::bind` does (`SO_REUSEADDR`, so a restarted
/// daemon binds while the last one's connections linger in `TIME_WAIT`), with a backlog of
/// [`LISTEN_BACKLOG`].
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// The kernel's cap on any listener's backlog (`net.core.somaxconn`), when it can be read.
fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Say at start when the kernel keeps the listeners' backlog under 1,024 (128 before Linux
/// 5.4): a rack of agents connecting at once then waits a second each. Like the open-file
/// limit's check, it only tells: the host's settings are the operator's.
pub fn check_backlog() {
    match somaxconn() {
        Some(cap) if cap < 1024 => tracing::warn!(
            somaxconn = cap,
            "the kernel queues at most {cap} connections on a listener (net.core.somaxconn): \
             agents connecting at once past that wait a second each; raise it to {LISTEN_BACKLOG}"
        ),
        cap => tracing::debug!(?cap, "listen backlog {LISTEN_BACKLOG}, the kernel's cap"),
    }
}

/// What the boot scripts and this layer need to know about TLS.
#[derive(Debug, Clone)]
pub struct TlsInfo {
    /// The master's certificate fingerprint (`sha256:HEX`), for nodes' kernel command line.
    pub fingerprint: String,
    /// The master's certificate chain as PEM (served at `/boot/tls/chain.pem`).
    pub chain_pem: std::sync::Arc<str>,
    /// The port of the HTTPS listener.
    pub api_port: u16,
    /// The port of the plain listener for iPXE.
    pub boot_port: u16,
}

/// HSTS for a year: a browser that reached the dashboard over HTTPS never tries it in clear.
const HSTS: &str = "max-age=31536000";

/// The master's HTTPS URL for a request that came to `local` in clear: `http.public_url`, else
/// the same address on the HTTPS port.
pub fn https_base(public_url: Option<&str>, tls: &TlsInfo, local: SocketAddr) -> String {
    match public_url {
        Some(url) => url.to_string(),
        None => format!("https://{}", SocketAddr::new(local.ip(), tls.api_port)),
    }
}

/// The host of a URL, an IPv6 address in its brackets: `https://master.lab:8443/x` gives
/// `master.lab`, `http://[fd00::2]:80` gives `[fd00::2]`.
pub fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    if authority.starts_with('[') {
        return authority.split_inclusive(']').next().unwrap_or(authority);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// The plain-HTTP base URL iPXE fetches from (boot scripts, the DHCP answer's boot file,
/// TFTP's `stoker.ipxe`): `http.public_url` itself without TLS; under TLS its host on the
/// boot listener's port; without one, `host` (an IPv6 address in brackets) on that port.
pub fn boot_base(public_url: Option<&str>, tls: bool, host: &str, boot_port: u16) -> String {
    match (public_url, tls) {
        (Some(url), false) => url.to_string(),
        (Some(url), true) => format!("http://{}:{boot_port}", url_host(url)),
        (None, _) => format!("http://{host}:{boot_port}"),
    }
}

/// Only `/boot/` in clear when TLS is on; HSTS on every answer over TLS.
pub async fn listener_policy(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>() else {
        return next.call(req).await;
    };
    let Some(tls) = state.boot.tls.clone() else {
        return next.call(req).await;
    };
    if req.app_config().secure() {
        let mut res = next.call(req).await?;
        res.headers_mut().insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(HSTS),
        );
        return Ok(res);
    }
    if req.path().starts_with("/boot/") {
        return next.call(req).await;
    }
    let base = https_base(
        state.boot.public_url.as_deref(),
        &tls,
        req.app_config().local_addr(),
    );
    let location = match req.uri().path_and_query() {
        Some(pq) => format!("{base}{pq}"),
        None => base,
    };
    let body = serde_json::json!({
        "code": "https_required",
        "message": format!(
            "this port serves only iPXE's boot files; the dashboard and the API are at {location}"
        ),
    });
    let res = HttpResponse::PermanentRedirect()
        .insert_header((header::LOCATION, location))
        .json(body);
    Ok(req.into_response(res))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_https_url_is_the_configured_one_else_the_same_address() {
        let tls = TlsInfo {
            fingerprint: String::new(),
            chain_pem: "".into(),
            api_port: 8443,
            boot_port: 8080,
        };
        let local: SocketAddr = "10.20.0.2:8080".parse().unwrap();
        assert_eq!(https_base(None, &tls, local), "https://10.20.0.2:8443");
        let v6: SocketAddr = "[fd00::2]:8080".parse().unwrap();
        assert_eq!(https_base(None, &tls, v6), "https://[fd00::2]:8443");
        assert_eq!(
            https_base(Some("https://master.lab"), &tls, local),
            "https://master.lab"
        );
    }

    /// 500 agents connect at once and nobody accepts yet: every connection is queued by the
    /// kernel at once (with a backlog of 128 the 130th waited a second for its SYN's
    /// retransmission and timed out here).
    #[test]
    fn a_burst_of_connections_is_queued_without_a_retransmission() {
        let l = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        // A host that caps every backlog lower (an old kernel's 128) queues no more than that
        // for anyone: the test then asks for what the cap allows.
        let n = 500.min(somaxconn().unwrap_or(4096).saturating_sub(8)) as usize;
        let mut streams = Vec::with_capacity(n);
        for i in 0..n {
            let s =
                std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(500))
                    .unwrap_or_else(|e| panic!("connection {i} of {n} not queued: {e}"));
            streams.push(s);
        }
        // They are all there to accept, and the listener still serves.
        l.set_nonblocking(true).unwrap();
        let accepted = std::iter::from_fn(|| l.accept().ok()).take(n).count();
        assert_eq!(accepted, n);
    }
}
