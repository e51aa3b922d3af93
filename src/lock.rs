//! The data directory's lock: whoever changes the data directory as a whole holds an exclusive
//! `flock` on `data_dir/stoker.lock` for as long as it does. `stoker serve` takes it at start
//! and keeps it until it exits; `stoker restore` takes it while it swaps the files. So a daemon
//! does not start on a directory being restored, a restore does not run under a serving
//! daemon, and two daemons never share one directory. The kernel drops the lock when its
//! holder's file closes, whatever the way the process ends, so a crash leaves no stale lock.
//! The holder writes its PID and purpose into the file for the refusal's message; the file
//! itself is never removed (removing a lock file lets two processes lock two different files).

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "stoker.lock";

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "the data directory {} is in use by {holder}: stop it first (a daemon: `systemctl stop \
         stoker` or its signal; a restore: let it finish)",
        .dir.display()
    )]
    Held { dir: PathBuf, holder: String },
    #[error("cannot lock the data directory with {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The held lock; dropping it releases it.
#[derive(Debug)]
pub struct DataLock {
    _file: File,
}

impl DataLock {
    /// Take the lock of `data_dir` (which must exist) for `purpose` (`serve`, `restore`), or
    /// say who holds it. Never waits.
    pub fn acquire(data_dir: &Path, purpose: &str) -> Result<DataLock, LockError> {
        let path = data_dir.join(LOCK_FILE);
        let io = |source: std::io::Error| LockError::Io {
            path: path.clone(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                let mut said = String::new();
                let _ = Read::by_ref(&mut file).take(200).read_to_string(&mut said);
                let said = said.trim();
                return Err(LockError::Held {
                    dir: data_dir.to_path_buf(),
                    holder: if said.is_empty() {
                        "another stoker process".to_string()
                    } else {
                        format!("another stoker process ({said})")
                    },
                });
            }
            Err(e) => return Err(io(e.into())),
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        write!(file, "pid {}: stoker {purpose}", std::process::id()).map_err(io)?;
        Ok(DataLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_naming_the_first_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let held = DataLock::acquire(dir.path(), "serve").unwrap();
        let err = DataLock::acquire(dir.path(), "restore")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("pid {}: stoker serve", std::process::id())),
            "{err}"
        );
        drop(held);
        DataLock::acquire(dir.path(), "restore").unwrap();
    }
}
