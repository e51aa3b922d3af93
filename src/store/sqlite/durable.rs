//! Durability on demand, for the one writer that promises more than the rest: the DHCP server
//! sends an acknowledgement only once the commit that holds its lease would survive a power
//! loss. The database runs with `synchronous=NORMAL` for every connection: a commit writes its
//! pages to the WAL file, into the kernel's page cache, and survives a crash of the process but
//! not of the machine; only checkpoints sync. [`WalSync::sync`] is `fdatasync` of the WAL file,
//! from the caller's own thread and holding no lock of SQLite's, so the other writers (the
//! agents' group writer above all) never wait for a disk flush they did not ask for; they wait
//! only for the lease rows' own commit, which writes to the page cache.
//!
//! Why that makes every commit made before the call durable, whoever made it:
//! - in WAL mode a transaction's changes exist only as WAL frames until a checkpoint copies
//!   them; after a power loss SQLite replays the frames whose salts match the WAL header and
//!   whose cumulative checksums hold, up to the last commit frame, and ignores the rest (a torn
//!   tail is never misread: its checksum fails);
//! - `fdatasync` on any descriptor of the file flushes every dirty page of it, the header (which
//!   SQLite itself syncs whenever the WAL starts over) and the frames of every commit so far;
//! - if a checkpoint copied the frames into the database file before the call, and a writer
//!   then started the WAL over, SQLite synced the database file before letting it start over
//!   (`walCheckpoint` syncs before `nBackfill` reaches the last frame), so those commits are
//!   in the synced database file.
//!
//! A failed `fdatasync` leaves the file's content on disk unknown (Linux reports the error once
//! and marks the pages clean), so a [`WalSync`] that failed once fails every later call: no
//! promise is made again until the daemon restarts and SQLite's recovery reads what really is
//! on the disk.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::store::{Result, Store, StoreError};

/// A handle on the database's WAL file that flushes it. One per caller that needs it.
#[derive(Debug)]
pub struct WalSync {
    path: PathBuf,
    file: File,
    /// The first failure, repeated by every later call.
    failed: Option<String>,
}

/// The WAL file SQLite keeps beside `db`.
fn wal_of(db: &Path) -> PathBuf {
    let mut name = OsString::from(db.as_os_str());
    name.push("-wal");
    PathBuf::from(name)
}

impl Store {
    /// A [`WalSync`] for this database. The database must be in WAL mode (it always is once
    /// [`Store::open`] ran, unless the file system cannot hold WAL's shared memory); the
    /// directory is synced once so the WAL file's own entry is on disk.
    pub fn wal_sync(&self) -> Result<WalSync> {
        let mode: String =
            self.read(|tx| Ok(tx.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?))?;
        let path = wal_of(&self.path);
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(format!(
                    "the database is in journal mode {mode}, not WAL: durable lease commits \
                     need WAL (is the data directory on a network file system?)"
                )),
            });
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        let file = File::open(&path).map_err(io(&path))?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io(dir))?;
        }
        Ok(WalSync {
            path,
            file,
            failed: None,
        })
    }
}

impl WalSync {
    /// Make every commit made before this call survive a power loss. After a failure, fails
    /// every time, saying what the first failure was.
    pub fn sync(&mut self) -> Result<()> {
        if let Some(first) = &self.failed {
            return Err(StoreError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(format!(
                    "an earlier sync failed ({first}); what reached the disk is unknown until \
                     stoker restarts"
                )),
            });
        }
        self.file.sync_data().map_err(|source| {
            self.failed = Some(source.to_string());
            if source.kind() == std::io::ErrorKind::StorageFull {
                StoreError::DiskFull {
                    path: self.path.clone(),
                }
            } else {
                StoreError::Io {
                    path: self.path.clone(),
                    source,
                }
            }
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_syncs_the_wal_beside_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let mut sync = store.wal_sync().unwrap();
        assert_eq!(sync.path(), dir.path().join("s.db-wal"));
        store
            .write(|tx| {
                tx.apply_lease_changes(&[])?;
                Ok(())
            })
            .unwrap();
        sync.sync().unwrap();
        sync.sync().unwrap();
    }

    #[test]
    fn a_failed_sync_fails_every_later_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let mut sync = store.wal_sync().unwrap();
        sync.failed = Some("Input/output error (os error 5)".into());
        let err = sync.sync().unwrap_err().to_string();
        assert!(
            err.contains("s.db-wal") && err.contains("os error 5"),
            "{err}"
        );
        assert!(err.contains("restarts"), "{err}");
    }
}
