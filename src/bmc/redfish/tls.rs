//! TLS to a BMC: the ureq agent every Redfish request goes through, and how it trusts the BMC.
//!
//! With `verify_tls` the BMC's chain and name are checked against the system's roots (the PEM
//! bundle `SSL_CERT_FILE` names, else Debian's or Red Hat's), as Ironic's `redfish_verify_ca`.
//! Without it (most BMCs ship self-signed certificates) any certificate is taken, but the
//! handshake's signatures are still checked with ring's algorithms, so the session is at least
//! bound to the key of the certificate the BMC showed. ureq's own `disable_verification` skips
//! those checks too and has no hook for a verifier, hence a small connector of our own: TCP from
//! ureq, then rustls with our configuration. No proxy (BMC networks are local, and a proxy would
//! see the credentials), no redirects followed by ureq (the client follows same-origin ones).

use std::fmt;
use std::io::{Read, Write};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
    StreamOwned,
};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, TcpConnector,
    Transport, TransportAdapter,
};

/// Where the system's roots are, first found wins (after `SSL_CERT_FILE`).
const ROOT_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// An agent for one BMC: every call bounded by `timeout`, statuses returned (not errors),
/// redirects returned (not followed).
pub(crate) fn agent(verify: bool, timeout: Duration) -> Result<ureq::Agent, String> {
    let tls = if verify { verified()? } else { unverified()? };
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .user_agent("stoker")
        .build();
    let connector = ().chain(TcpConnector::default()).chain(BmcTls { config: tls });
    Ok(ureq::Agent::with_parts(
        config,
        connector,
        LiteralFirst::default(),
    ))
}

/// Addresses written as IP literals (most BMCs') are taken as they are; host names go to
/// ureq's resolver, which with a timeout set spawns a thread per lookup (a thread per request
/// of a 1,000-BMC sweep, for nothing, without this).
#[derive(Debug, Default)]
struct LiteralFirst(DefaultResolver);

impl Resolver for LiteralFirst {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let literal = uri
            .host()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
            .and_then(|h| h.parse::<std::net::IpAddr>().ok());
        let Some(ip) = literal else {
            return self.0.resolve(uri, config, timeout);
        };
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("http") {
                80
            } else {
                443
            });
        let mut out = self.empty();
        out.push(std::net::SocketAddr::new(ip, port));
        Ok(out)
    }
}

/// Built once per process: the root bundle is a few hundred kilobytes of PEM.
fn verified() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = RootCertStore::empty();
            let env = std::env::var("SSL_CERT_FILE").ok();
            let bundle = env
                .iter()
                .map(String::as_str)
                .chain(ROOT_BUNDLES)
                .find(|p| std::path::Path::new(p).is_file());
            if let Some(path) = bundle {
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| format!("cannot read the root certificates in {path}: {e}"))?;
                // A bundle with a broken entry still trusts the rest, as OpenSSL does.
                roots.add_parsable_certificates(certs.filter_map(Result::ok));
            }
            let config = ClientConfig::builder_with_provider(crate::tls::provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

fn unverified() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = crate::tls::provider();
            let verifier = AnyCertificate {
                algorithms: provider.signature_verification_algorithms,
            };
            let config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

/// Takes whatever certificate the BMC shows (its chain, names and dates are not checked), but
/// checks that the BMC signed the handshake with that certificate's key.
#[derive(Debug)]
struct AnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Wraps ureq's TCP transport in rustls for `https://` URLs (as ureq's own `RustlsConnector`
/// does, with our configuration instead of one built from ureq's `TlsConfig`).
struct BmcTls {
    config: Arc<ClientConfig>,
}

impl fmt::Debug for BmcTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BmcTls").finish()
    }
}

impl<In: Transport> Connector<In> for BmcTls {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Ok(None);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        // `[::1]` in a URL is `::1` to TLS.
        let host = details.uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| ureq::Error::Tls("the BMC's host is not a DNS name or IP address"))?;
        let mut conn = ClientConnection::new(self.config.clone(), name)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock)?;
        Ok(Some(Either::B(TlsTransport {
            buffers: LazyBuffers::new(
                details.config.input_buffer_size(),
                details.config.output_buffer_size(),
            ),
            stream: StreamOwned::new(conn, sock),
        })))
    }
}

pub(super) struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsTransport")
            .field("chained", &self.stream.sock.inner())
            .finish()
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}
