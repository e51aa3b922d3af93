//! The master's TLS identity and how its clients trust it. The daemon serves HTTPS with the
//! operator's certificate chain or with one it made on first start (`server.rs`). A certificate
//! is named by the SHA-256 of its DER encoding ([`Fingerprint`]); the master logs its own and
//! puts it on nodes' kernel command line. Agents and the CLI pin it (`pin.rs`): they fetch the
//! master's chain, check its first certificate against the fingerprint, and from then on trust
//! only that chain's last certificate, so no other server can stand in for the master.

mod pin;
mod server;

use std::path::PathBuf;
use std::sync::Arc;

pub use pin::{CHAIN_PATH, anchor, client_config, fetch_chain, pinned, trusting_nothing};
pub use server::{Identity, Origin};

/// The crypto every TLS connection of stoker uses (ring: no C toolchain beyond cc, no cmake).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What went wrong loading, making or checking a certificate.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {detail}")]
    Pem { path: PathBuf, detail: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot make a self-signed certificate: {0}")]
    Generate(String),
    #[error("{what}: {detail}")]
    Config { what: String, detail: String },
    #[error("invalid certificate fingerprint {0:?}: expected sha256: and 64 hex digits")]
    BadFingerprint(String),
    #[error(
        "{url} presented a certificate with fingerprint {found}, not the master's {expected}: \
         another server answered, or the master's certificate changed"
    )]
    Mismatch {
        url: String,
        found: String,
        expected: String,
    },
    #[error("cannot fetch the master's certificate chain from {url}: {detail}")]
    Fetch { url: String, detail: String },
}

/// The SHA-256 of a certificate's DER encoding, shown as `sha256:` and 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    pub fn of(der: &[u8]) -> Fingerprint {
        use sha2::Digest;
        Fingerprint(sha2::Sha256::digest(der).into())
    }

    /// `sha256:HEX`, bare `HEX`, or OpenSSL's `AB:CD:...`; any case.
    pub fn parse(text: &str) -> Result<Fingerprint, TlsError> {
        let bad = || TlsError::BadFingerprint(text.to_string());
        let t = text.trim();
        let t = t
            .strip_prefix("sha256:")
            .or_else(|| t.strip_prefix("SHA256:"))
            .unwrap_or(t);
        let digits: String = t.chars().filter(|c| *c != ':').collect();
        if digits.len() != 64 || !digits.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Fingerprint(out))
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", crate::model::hex(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_parse_in_every_common_spelling() {
        let f = Fingerprint::of(b"certificate");
        let shown = f.to_string();
        assert!(
            shown.starts_with("sha256:") && shown.len() == 7 + 64,
            "{shown}"
        );
        assert_eq!(Fingerprint::parse(&shown).unwrap(), f);
        let bare = shown.trim_start_matches("sha256:");
        assert_eq!(Fingerprint::parse(bare).unwrap(), f);
        let openssl: Vec<String> = bare
            .as_bytes()
            .chunks(2)
            .map(|c| String::from_utf8_lossy(c).to_uppercase())
            .collect();
        assert_eq!(Fingerprint::parse(&openssl.join(":")).unwrap(), f);
        for bad in [
            "",
            "sha256:",
            "sha256:zz",
            &shown[..60],
            &format!("{shown}00"),
        ] {
            assert!(Fingerprint::parse(bad).is_err(), "{bad}");
        }
        // Multi-byte characters never reach the hex slicing.
        assert!(Fingerprint::parse(&"é".repeat(32)).is_err());
    }
}
