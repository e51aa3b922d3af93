//! The first start of a master: with no user in the database, create `admin` with a random
//! password and write that password once to `data_dir/initial-admin-password` (mode 0600), so
//! the operator who installed stoker can sign in; the log says where it is. This is the one
//! part of `auth` at the edge (it writes a file and the database); the daemon calls it.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Role, password};
use crate::store::Store;

/// The file holding the first admin's password.
pub const PASSWORD_FILE: &str = "initial-admin-password";

/// Why the first admin could not be created.
#[derive(Debug, thiserror::Error)]
pub enum FirstStartError {
    #[error(transparent)]
    Auth(#[from] super::AuthError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Create `admin` if there is no user yet; return the password file when one was written.
pub fn ensure_admin(
    store: &Store,
    data_dir: &Path,
    now: i64,
) -> Result<Option<PathBuf>, FirstStartError> {
    if store.read(|tx| tx.user_count())? > 0 {
        return Ok(None);
    }
    let secret = password::generate()?;
    let hash = password::hash(&secret)?;
    let path = data_dir.join(PASSWORD_FILE);
    // The file first: a user whose password nobody can read would lock the operator out.
    write_private(&path, &format!("{secret}\n"))?;
    store.write(|tx| tx.create_user("admin", Role::Admin, &hash, now).map(|_| ()))?;
    Ok(Some(path))
}

/// Write `text` to a new file readable only by its owner (replacing a stale one).
fn write_private(path: &Path, text: &str) -> Result<(), FirstStartError> {
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |source| FirstStartError::Write {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(fail)?;
    f.write_all(text.as_bytes()).map_err(fail)?;
    f.sync_all().map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)?;
    Ok(())
}
