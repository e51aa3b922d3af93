//! The background checkpoint: a thread and a connection of its own copy the WAL into the
//! database file, so that no commit waits for a checkpoint (see [`Checkpointer`]). SQLite's
//! WAL is this file's whole subject; another engine has its own way of keeping its log short.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;

use super::configure;
use crate::store::{Result, StoreError};

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How often the background checkpoint runs.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Past this many WAL frames (1 GiB of 4 KiB pages) the checkpoint thread waits for the
/// writer and blocks it while it copies the rest (a stall of 100–200 ms), so that a write load
/// with no pause at all still has a bounded WAL. 1,000 agents stepping as fast as the agents
/// bench drives them grow the WAL by about 60 MiB a second; real steps, which take minutes,
/// leave pauses in which it starts over long before this.
const WAL_CAP_FRAMES: i64 = 262_144;

/// A WAL file that grew past this in a burst is truncated by the checkpoint thread once it has
/// copied all of it and no write came for a whole round: truncating a few hundred MiB blocks
/// the writer for 100 ms or more, so not while anyone writes (SQLite's own size limit would
/// do it in the writer, at the first write after the WAL caught up).
const WAL_KEEP_BYTES: u64 = 64 << 20;

/// Copies the WAL into the database file from a thread and a connection of its own, so a
/// commit never waits for a checkpoint's writes and two fsyncs (30–50 ms on a busy disk). The
/// writer's automatic checkpoint is off. A passive checkpoint never blocks the writer or the
/// readers; the WAL starts again from its beginning at the first write after a checkpoint that
/// caught up, which happens in any pause of the writes. Only a WAL past [`WAL_CAP_FRAMES`]
/// gets a blocking (RESTART) checkpoint, and only an idle WAL file past [`WAL_KEEP_BYTES`] is
/// truncated. Stopped and joined when dropped.
pub(in crate::store) struct Checkpointer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    pub(in crate::store) fn start(path: &Path) -> Result<Checkpointer> {
        let conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        configure(&conn, path)?;
        let wal = path.with_extension("db-wal");
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("stoker-checkpoint".into())
            .spawn(move || {
                let (lock, wake) = &*flag;
                let mut stopped = locked(lock);
                let mut last = None;
                while !*stopped {
                    stopped = wake
                        .wait_timeout(stopped, CHECKPOINT_EVERY)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|poisoned| poisoned.into_inner().0);
                    if *stopped {
                        break;
                    }
                    match checkpoint(&conn, &wal, last) {
                        Ok(frames) => last = Some(frames),
                        Err(err) => tracing::debug!(%err, "background checkpoint"),
                    }
                }
            })
            .map_err(|source| StoreError::Thread {
                name: "checkpoint",
                source,
            })?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
    }
}

/// One round of the checkpoint thread: passive; then blocking if the WAL is past its cap, or
/// truncating if its file has grown large and it is all copied and unchanged since the last
/// round (`last`: the frames in it then). Returns the frames in the WAL.
fn checkpoint(conn: &Connection, wal: &Path, last: Option<i64>) -> rusqlite::Result<i64> {
    // (busy, frames in the WAL, frames copied into the database)
    let frames = |mode: &str| {
        conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
            Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        })
    };
    let (in_wal, copied) = frames("PASSIVE")?;
    if in_wal >= WAL_CAP_FRAMES {
        tracing::info!(frames = in_wal, "WAL past its cap: blocking checkpoint");
        frames("RESTART")?;
    } else if in_wal == copied
        && last == Some(in_wal)
        && std::fs::metadata(wal).is_ok_and(|m| m.len() > WAL_KEEP_BYTES)
    {
        frames("TRUNCATE")?;
    }
    Ok(in_wal)
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (lock, wake) = &*self.stop;
        *locked(lock) = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
