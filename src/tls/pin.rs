//! Trusting the master from a fingerprint. The master's chain is public, so it can be fetched
//! over any channel, even a TLS connection nothing verifies ([`fetch_chain`]); what makes it
//! trustworthy is that its first certificate has the fingerprint the node was given
//! ([`anchor`]). From then on the client trusts that chain's last certificate alone
//! ([`client_config`]): the master's own when it is self-signed, else the issuer the operator
//! put last in `http.tls_cert`. Names are still checked, so the master's URL must be one its
//! certificate names (a self-signed one names every address the master had when it was made).

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

use super::{Fingerprint, TlsError};

/// Where the master serves its certificate chain (on both of its listeners).
pub const CHAIN_PATH: &str = "/boot/tls/chain.pem";

/// The certificate to trust, from the master's chain (PEM): the chain's last, once its first
/// has `fingerprint` (when one is given; a chain read from the master's own files needs none).
pub fn anchor(
    chain_pem: &str,
    fingerprint: Option<&Fingerprint>,
    url: &str,
) -> Result<CertificateDer<'static>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Fetch {
            url: url.to_string(),
            detail: format!("not a PEM certificate chain: {e}"),
        })?;
    let (Some(first), Some(last)) = (chain.first(), chain.last()) else {
        return Err(TlsError::Fetch {
            url: url.to_string(),
            detail: "no certificate in the answer".to_string(),
        });
    };
    if let Some(expected) = fingerprint {
        let found = Fingerprint::of(first.as_ref());
        if found != *expected {
            return Err(TlsError::Mismatch {
                url: url.to_string(),
                found: found.to_string(),
                expected: expected.to_string(),
            });
        }
    }
    Ok(last.clone())
}

/// A client TLS configuration that trusts `anchor` and nothing else.
pub fn client_config(anchor: &CertificateDer<'static>) -> TlsConfig {
    TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(super::provider())
        .root_certs(RootCerts::Specific(Arc::new(vec![
            Certificate::from_der(anchor.as_ref()).to_owned(),
        ])))
        .build()
}

/// A client TLS configuration that trusts nothing: for clients of a plain `http://` master, so
/// that an `https://` URL they meet (a redirect, an image URL) fails with an error instead of
/// falling back to roots stoker does not ship.
pub fn trusting_nothing() -> TlsConfig {
    TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(super::provider())
        .root_certs(RootCerts::Specific(Arc::new(Vec::new())))
        .build()
}

/// GET the master's chain from `base` (an `https://` URL) without checking the connection:
/// the caller checks what it got against a fingerprint. The answer is capped at 64 KiB.
pub fn fetch_chain(base: &str, timeout: Duration) -> Result<String, TlsError> {
    let url = format!("{}{CHAIN_PATH}", base.trim_end_matches('/'));
    let fetch = |detail: String| TlsError::Fetch {
        url: url.clone(),
        detail,
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .tls_config(
            TlsConfig::builder()
                .provider(TlsProvider::Rustls)
                .unversioned_rustls_crypto_provider(super::provider())
                .disable_verification(true)
                .build(),
        )
        .build()
        .into();
    let mut resp = agent.get(&url).call().map_err(|e| fetch(e.to_string()))?;
    resp.body_mut()
        .with_config()
        .limit(64 * 1024)
        .read_to_string()
        .map_err(|e| fetch(e.to_string()))
}

/// A TLS configuration pinned to the master at `base` with `fingerprint`: fetch, check, trust.
pub fn pinned(
    base: &str,
    fingerprint: &Fingerprint,
    timeout: Duration,
) -> Result<TlsConfig, TlsError> {
    let chain = fetch_chain(base, timeout)?;
    let anchor = anchor(&chain, Some(fingerprint), base)?;
    Ok(client_config(&anchor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::Identity;

    #[test]
    fn the_anchor_is_the_chains_last_once_its_first_matches() {
        let dir = tempfile::tempdir().unwrap();
        let a = Identity::self_signed(&dir.path().join("a"), &["a.example".to_string()]).unwrap();
        let b = Identity::self_signed(&dir.path().join("b"), &["b.example".to_string()]).unwrap();
        let got = anchor(&a.chain_pem, Some(&a.fingerprint), "https://a").unwrap();
        assert_eq!(Fingerprint::of(got.as_ref()), a.fingerprint);
        // A two-certificate chain: the anchor is the last.
        let two = format!("{}{}", a.chain_pem, b.chain_pem);
        let got = anchor(&two, Some(&a.fingerprint), "https://a").unwrap();
        assert_eq!(Fingerprint::of(got.as_ref()), b.fingerprint);
        // Another server's chain is refused naming both fingerprints.
        let e = anchor(&b.chain_pem, Some(&a.fingerprint), "https://a")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&a.fingerprint.to_string()) && e.contains(&b.fingerprint.to_string()),
            "{e}"
        );
        for junk in [
            "",
            "hello",
            "-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n",
        ] {
            assert!(
                anchor(junk, Some(&a.fingerprint), "https://a").is_err(),
                "{junk}"
            );
        }
        // Without a fingerprint (the master's own file), the chain is taken as it is.
        assert!(anchor(&b.chain_pem, None, "https://b").is_ok());
    }
}

#[cfg(test)]
mod no_trust_tests {
    #[test]
    fn an_https_url_without_trust_is_an_error_not_a_panic() {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(super::trusting_nothing())
            .timeout_global(Some(std::time::Duration::from_secs(2)))
            .build()
            .into();
        // Nothing listens on port 9 of loopback: the call fails, whatever the reason.
        assert!(agent.get("https://127.0.0.1:9/").call().is_err());
    }
}
