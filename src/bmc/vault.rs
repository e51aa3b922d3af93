//! BMC credentials at rest: each password is sealed with ChaCha20-Poly1305 (ring's AEAD, the
//! crate rustls already brings) under a 256-bit key kept in `data_dir/bmc.key` (mode 0600,
//! made once at first use and never rewritten). The node's id is the associated data, so a
//! sealed password copied onto another node's row does not open. The database alone (a
//! backup, a snapshot, a stolen file) therefore holds no usable BMC password; the key file
//! and the database together do, which is why the snapshot never carries the key.

use std::io::Write;
use std::path::{Path, PathBuf};

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

/// The key file's name in the data directory.
pub const KEY_FILE: &str = "bmc.key";
const KEY_LEN: usize = 32;
/// What a sealed value starts with, so a later format can be told apart.
const VERSION: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("cannot read or create the BMC credentials key {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("no randomness for the BMC credentials: {0}")]
    Random(String),
    #[error(
        "the stored BMC password of node {node} does not open with {path}: the key file was \
         replaced or the row was copied from another node; set the credentials again"
    )]
    Open { node: i64, path: PathBuf },
}

/// The key, loaded once.
pub struct Vault {
    key: LessSafeKey,
    path: PathBuf,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault").field("path", &self.path).finish()
    }
}

impl Vault {
    /// The key of `data_dir`, made now if there is none.
    pub fn open(data_dir: &Path) -> Result<Vault, VaultError> {
        let path = data_dir.join(KEY_FILE);
        let key_err = |reason: String| VaultError::Key {
            path: path.clone(),
            reason,
        };
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut fresh = [0u8; KEY_LEN];
                getrandom::fill(&mut fresh).map_err(|e| VaultError::Random(e.to_string()))?;
                write_new(&path, &fresh).map_err(|e| key_err(e.to_string()))?;
                // Another process may have won the race: read what is there.
                std::fs::read(&path).map_err(|e| key_err(e.to_string()))?
            }
            Err(e) => return Err(key_err(e.to_string())),
        };
        if bytes.len() != KEY_LEN {
            return Err(key_err(format!(
                "{} bytes; a key is {KEY_LEN} bytes",
                bytes.len()
            )));
        }
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| key_err("not a ChaCha20-Poly1305 key".into()))?;
        Ok(Vault {
            key: LessSafeKey::new(unbound),
            path,
        })
    }

    fn aad(node: i64) -> [u8; 19] {
        let mut aad = *b"stoker-bmc:\0\0\0\0\0\0\0\0";
        aad[11..].copy_from_slice(&node.to_be_bytes());
        aad
    }

    /// `password` sealed for node `node`: version, nonce, ciphertext and tag.
    pub fn seal(&self, node: i64, password: &str) -> Result<Vec<u8>, VaultError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| VaultError::Random(e.to_string()))?;
        let mut buf = password.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(Self::aad(node)),
                &mut buf,
            )
            .map_err(|_| VaultError::Random("sealing failed".into()))?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + buf.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&buf);
        Ok(out)
    }

    /// The password sealed for node `node`.
    pub fn open_for(&self, node: i64, sealed: &[u8]) -> Result<String, VaultError> {
        let bad = || VaultError::Open {
            node,
            path: self.path.clone(),
        };
        if sealed.len() < 1 + NONCE_LEN || sealed[0] != VERSION {
            return Err(bad());
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&sealed[1..1 + NONCE_LEN]);
        let mut buf = sealed[1 + NONCE_LEN..].to_vec();
        let plain = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(Self::aad(node)),
                &mut buf,
            )
            .map_err(|_| bad())?;
        String::from_utf8(plain.to_vec()).map_err(|_| bad())
    }
}

/// Create `path` with `bytes`, readable by its owner only; fails if it exists.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(path) {
        Ok(mut f) => {
            f.write_all(bytes)?;
            f.sync_all()
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_per_node_and_keeps_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::open(dir.path()).unwrap();
        let sealed = v.seal(7, "s3cret").unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"s3cret"));
        assert_eq!(v.open_for(7, &sealed).unwrap(), "s3cret");
        assert!(matches!(
            v.open_for(8, &sealed),
            Err(VaultError::Open { node: 8, .. })
        ));
        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(v.open_for(7, &tampered).is_err());
        // The same key on the next start; a new key cannot open the old password.
        let again = Vault::open(dir.path()).unwrap();
        assert_eq!(again.open_for(7, &sealed).unwrap(), "s3cret");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let other = tempfile::tempdir().unwrap();
        assert!(
            Vault::open(other.path())
                .unwrap()
                .open_for(7, &sealed)
                .is_err()
        );
        std::fs::write(other.path().join(KEY_FILE), b"short").unwrap();
        assert!(matches!(
            Vault::open(other.path()),
            Err(VaultError::Key { .. })
        ));
    }
}
