//! The database's part of a backup: a consistent copy of a live database file made with
//! SQLite's online backup API from a connection of its own (another process, such as `stoker
//! backup`, while the daemon serves), and the checks a copy must pass before anyone trusts it.
//!
//! The copy is taken in steps of [`PAGES_PER_STEP`] pages with a short pause between them.
//! Under WAL a step is a read transaction, so it never blocks the daemon's writer; but a write
//! by another connection between two steps makes SQLite start the copy again. A database that
//! the daemon writes without pause (a deployment's agents) could restart a stepped copy
//! forever, so after [`MAX_RESTARTS`] restarts the rest is copied in one step, one read
//! transaction, which still does not block the writer (it only holds back the checkpoint until
//! it ends). The archive around the copy (the key, the manifest) is `crate::backup`'s.

use std::path::Path;
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use crate::store::{Result, StoreError, migrations};

/// Pages copied per step (4 MiB of 4 KiB pages).
const PAGES_PER_STEP: i32 = 1024;
/// The pause between two steps, in which the daemon's writer has the database to itself.
const PAUSE: Duration = Duration::from_millis(5);
/// Restarts of a stepped copy (the source changed between steps) before the rest is copied
/// in one step.
const MAX_RESTARTS: u32 = 3;
/// How long the copy waits, in all, on steps the source's locks keep from running (a
/// checkpoint truncating the WAL): past it the backup fails instead of waiting forever.
const MAX_BUSY: Duration = Duration::from_secs(60);

/// What a finished copy holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyInfo {
    /// The copy's schema version (`user_version`).
    pub schema: u32,
    /// Its size in pages.
    pub pages: i64,
    /// How often the stepped copy started again because the source changed.
    pub restarts: u32,
}

/// Copy the database at `source` (which must exist; it is never created nor written) into a
/// new file `dest` (which must not exist), then check the copy ([`check`]). The copy is a
/// single self-contained file in rollback-journal mode, synced to disk.
pub fn copy_live(source: &Path, dest: &Path) -> Result<CopyInfo> {
    let open_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Open { path, source }
    };
    let from = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(open_err(source))?;
    from.busy_timeout(Duration::from_secs(5))
        .map_err(open_err(source))?;
    let mut to = Connection::open_with_flags(
        dest,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(open_err(dest))?;
    let restarts = {
        let backup = Backup::new(&from, &mut to).map_err(|e| at(e, dest))?;
        let mut restarts = 0;
        let mut last_remaining = i32::MAX;
        let mut busy = Duration::ZERO;
        loop {
            let pages = if restarts >= MAX_RESTARTS {
                -1
            } else {
                PAGES_PER_STEP
            };
            match backup.step(pages).map_err(|e| at(e, dest))? {
                StepResult::Done => break,
                StepResult::More => {
                    let remaining = backup.progress().remaining;
                    if remaining > last_remaining {
                        restarts += 1;
                    }
                    last_remaining = remaining;
                }
                // Busy or locked for a moment (a checkpoint, a write): wait and go on.
                _ => {
                    busy += PAUSE;
                    if busy >= MAX_BUSY {
                        return Err(StoreError::Io {
                            path: source.to_path_buf(),
                            source: std::io::Error::other(format!(
                                "it stayed locked for {} s: the backup stopped",
                                MAX_BUSY.as_secs()
                            )),
                        });
                    }
                }
            }
            std::thread::sleep(PAUSE);
        }
        restarts
    };
    // The copy is one file: no WAL beside it.
    to.pragma_update(None, "journal_mode", "DELETE")
        .map_err(|e| at(e, dest))?;
    to.close().map_err(|(_, e)| at(e, dest))?;
    drop(from);
    let (schema, pages) = check(dest)?;
    std::fs::File::open(dest)
        .and_then(|f| f.sync_all())
        .map_err(|e| StoreError::Io {
            path: dest.to_path_buf(),
            source: e,
        })?;
    Ok(CopyInfo {
        schema,
        pages,
        restarts,
    })
}

/// Check a database file that no one else has open: `PRAGMA integrity_check` and
/// `foreign_key_check` must be clean and its schema no newer than this build's. Returns its
/// schema version and size in pages. Opened read-only: a file that fails is left as it was.
pub fn check(path: &Path) -> Result<(u32, i64)> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let corrupt = |detail: String| StoreError::Corrupt {
        what: "database copy",
        detail: format!("{}: {detail}", path.display()),
    };
    let problems: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| corrupt(format!("integrity check failed: {e}")))?;
    if problems != ["ok"] {
        let shown: Vec<&str> = problems.iter().take(5).map(String::as_str).collect();
        return Err(corrupt(format!(
            "integrity check found {} problem(s): {}",
            problems.len(),
            shown.join("; ")
        )));
    }
    let orphans: i64 = conn
        .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .map_err(|e| corrupt(format!("foreign key check failed: {e}")))?;
    if orphans > 0 {
        return Err(corrupt(format!(
            "{orphans} row(s) point at rows that do not exist (foreign_key_check)"
        )));
    }
    let schema = migrations::current(&conn)?;
    if schema > migrations::latest() {
        return Err(StoreError::TooNew {
            found: schema,
            latest: migrations::latest(),
        });
    }
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    Ok((schema, pages))
}

/// `e` located at `path`: a full disk names the file being written.
fn at(e: rusqlite::Error, path: &Path) -> StoreError {
    StoreError::from(e).at(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_copy_taken_while_another_connection_writes_is_whole_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("stoker.db");
        let store = std::sync::Arc::new(Store::open(&db).unwrap());
        let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let writer = {
            let (store, writing) = (store.clone(), writing.clone());
            std::thread::spawn(move || {
                let mut i = 0i64;
                while writing.load(std::sync::atomic::Ordering::Relaxed) {
                    store
                        .write(|tx| tx.add_history(i, None, "test", &"x".repeat(2000)))
                        .unwrap();
                    i += 1;
                }
                i
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        let copy = dir.path().join("copy.db");
        let info = copy_live(&db, &copy).unwrap();
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        let written = writer.join().unwrap();
        assert_eq!(info.schema, migrations::latest());
        assert!(written > 0);
        assert!(
            !dir.path().join("copy.db-wal").exists(),
            "the copy is one file"
        );
        let copied = Store::open(&copy).unwrap();
        let n = copied
            .read(|r| r.recent_history(1_000_000))
            .unwrap()
            .into_iter()
            .filter(|h| h.kind == "test")
            .count();
        assert!(n as i64 <= written, "{n} of {written}");
    }

    #[test]
    fn a_damaged_file_fails_the_check_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("bad.db");
        std::fs::write(&db, b"not a database at all, just some bytes").unwrap();
        let err = check(&db).unwrap_err().to_string();
        assert!(err.contains("bad.db"), "{err}");
    }
}
