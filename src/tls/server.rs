//! The certificate the daemon serves: the operator's chain and key (`http.tls_cert`,
//! `http.tls_key`), or a self-signed certificate made once, on the first start that needs it,
//! and kept in `data_dir/tls/` (`master.key` mode 0600, written before `master.crt`, each through
//! a temporary file and a rename, so an interrupted start leaves no half a pair). A kept
//! certificate is reused as it is, whatever the addresses are now: its fingerprint is what
//! provisioned nodes pin.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::{Fingerprint, TlsError};

/// Where the served certificate came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `http.tls_cert` and `http.tls_key`.
    Files,
    /// Made by stoker; `created` on this start.
    SelfSigned { created: bool },
}

/// The certificate chain and key the daemon serves.
pub struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// The fingerprint of the first certificate: the master's own.
    pub fingerprint: Fingerprint,
    /// The chain as PEM, for clients that pin (`/boot/tls/chain.pem`).
    pub chain_pem: String,
    /// Where the certificate file is.
    pub cert_path: PathBuf,
    pub origin: Origin,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("fingerprint", &self.fingerprint)
            .field("cert_path", &self.cert_path)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The certificates of a PEM file, first to last.
fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_path_buf(),
            detail: format!("not a PEM certificate chain: {e}"),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_path_buf(),
            detail: "no CERTIFICATE in it".to_string(),
        });
    }
    Ok(chain)
}

fn private_key(path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| TlsError::Pem {
        path: path.to_path_buf(),
        detail: format!("no PKCS#8, PKCS#1 or SEC1 private key in it: {e}"),
    })
}

/// The chain re-encoded as PEM: only the certificates, whatever else the operator's file held.
fn pem_of(chain: &[CertificateDer<'_>]) -> String {
    let lf = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    chain
        .iter()
        .map(|c| pem::encode_config(&pem::Pem::new("CERTIFICATE", c.as_ref()), lf))
        .collect()
}

/// Write `bytes` to `path` through a temporary file and a rename, with `mode`.
fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| TlsError::Write {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

impl Identity {
    fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        cert_path: PathBuf,
        origin: Origin,
    ) -> Result<Identity, TlsError> {
        let fingerprint = Fingerprint::of(chain[0].as_ref());
        let identity = Identity {
            chain_pem: pem_of(&chain),
            chain,
            key,
            fingerprint,
            cert_path,
            origin,
        };
        // Refuses a key that is not the certificate's.
        identity.server_config()?;
        Ok(identity)
    }

    /// The operator's certificate chain and key.
    pub fn load(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
        let chain = certificates(cert, &read(cert)?)?;
        let key_der = private_key(key, &read(key)?)?;
        Identity::new(chain, key_der, cert.to_path_buf(), Origin::Files).map_err(|e| match e {
            TlsError::Config { detail, .. } => TlsError::Config {
                what: format!("{} and {}", cert.display(), key.display()),
                detail,
            },
            other => other,
        })
    }

    /// The certificate kept in `dir` (`master.crt`, `master.key`), or a new one for `names`
    /// (DNS names and IP addresses) when there is none.
    pub fn self_signed(dir: &Path, names: &[String]) -> Result<Identity, TlsError> {
        let cert_path = dir.join("master.crt");
        let key_path = dir.join("master.key");
        if cert_path.exists() && key_path.exists() {
            let chain = certificates(&cert_path, &read(&cert_path)?)?;
            let key = private_key(&key_path, &read(&key_path)?)?;
            return Identity::new(chain, key, cert_path, Origin::SelfSigned { created: false });
        }
        std::fs::create_dir_all(dir).map_err(|source| TlsError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let generate = |e: rcgen::Error| TlsError::Generate(e.to_string());
        let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(generate)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "stoker master");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "stoker (self-signed)");
        let key_pair = rcgen::KeyPair::generate().map_err(generate)?;
        let cert = params.self_signed(&key_pair).map_err(generate)?;
        write_atomically(&key_path, key_pair.serialize_pem().as_bytes(), 0o600)?;
        write_atomically(&cert_path, cert.pem().as_bytes(), 0o644)?;
        let key = PrivateKeyDer::try_from(key_pair.serialize_der())
            .map_err(|e| TlsError::Generate(format!("the new key cannot be read back: {e}")))?;
        Identity::new(
            vec![cert.der().clone()],
            key,
            cert_path,
            Origin::SelfSigned { created: true },
        )
    }

    /// The rustls configuration serving this identity (TLS 1.2 and 1.3, HTTP/1.1).
    pub fn server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let config = |detail: String| TlsError::Config {
            what: self.cert_path.display().to_string(),
            detail,
        };
        let mut c = rustls::ServerConfig::builder_with_provider(super::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| config(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| config(format!("the key does not serve this certificate: {e}")))?;
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(c)
    }

    /// The server configuration, shared.
    pub fn shared_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        self.server_config().map(Arc::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        let names = vec!["127.0.0.1".to_string(), "master.example".to_string()];
        let first = Identity::self_signed(&tls, &names).unwrap();
        assert_eq!(first.origin, Origin::SelfSigned { created: true });
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tls.join("master.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Other names on the next start change nothing: nodes pinned this one.
        let again = Identity::self_signed(&tls, &["10.0.0.1".to_string()]).unwrap();
        assert_eq!(again.origin, Origin::SelfSigned { created: false });
        assert_eq!(again.fingerprint, first.fingerprint);
        assert_eq!(
            again.chain_pem,
            std::fs::read_to_string(tls.join("master.crt")).unwrap()
        );
        assert!(!tls.join("master.tmp").exists());
    }

    #[test]
    fn operator_files_are_checked_and_named_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let a = Identity::self_signed(&dir.path().join("a"), &["a.example".to_string()]).unwrap();
        let b = Identity::self_signed(&dir.path().join("b"), &["b.example".to_string()]).unwrap();
        let ok = Identity::load(&a.cert_path, &dir.path().join("a/master.key")).unwrap();
        assert_eq!(ok.fingerprint, a.fingerprint);
        assert_eq!(ok.origin, Origin::Files);
        // b's key for a's certificate.
        let e = Identity::load(&a.cert_path, &dir.path().join("b/master.key"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a/master.crt") && e.contains("does not serve"),
            "{e}"
        );
        let _ = b;
        // A key file given as the certificate, and a missing file.
        let e = Identity::load(
            &dir.path().join("a/master.key"),
            &dir.path().join("a/master.key"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("master.key") && e.contains("no CERTIFICATE"),
            "{e}"
        );
        let e = Identity::load(
            &dir.path().join("nope.crt"),
            &dir.path().join("a/master.key"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("nope.crt"), "{e}");
    }

    #[test]
    fn only_certificates_are_served_from_a_file_that_holds_the_key_too() {
        let dir = tempfile::tempdir().unwrap();
        let a = Identity::self_signed(&dir.path().join("a"), &["a.example".to_string()]).unwrap();
        let both = dir.path().join("both.pem");
        let key = std::fs::read_to_string(dir.path().join("a/master.key")).unwrap();
        std::fs::write(&both, format!("{key}{}", a.chain_pem)).unwrap();
        let loaded = Identity::load(&both, &both).unwrap();
        assert_eq!(loaded.fingerprint, a.fingerprint);
        assert!(
            !loaded.chain_pem.contains("PRIVATE KEY"),
            "{}",
            loaded.chain_pem
        );
        assert_eq!(loaded.chain_pem, a.chain_pem);
    }
}
