//! The background checkpoint: a thread and a connection of its own copy the WAL into the
//! database file, so that no commit waits for a checkpoint's bulk (see [`Checkpointer`]).
//! SQLite's WAL is this file's whole subject; another engine has its own way of keeping its
//! log short.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::configure;
use crate::store::{Result, StoreError};

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How often the background checkpoint runs.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// How soon it runs again while it closes in on the writes of a long WAL.
const CLOSING_IN: Duration = Duration::from_millis(5);

/// Past this many WAL frames (64 MiB of 4 KiB pages) the WAL is made to start over even while
/// writes never pause: once the checkpoint thread has copied all but [`CATCH_UP_FRAMES`] of
/// it, the writer copies that rest itself between two transactions ([`Checkpointer::committed`]),
/// and its next transaction writes the WAL from its beginning. 10,000 agents deploying grow
/// the WAL by about 100 MiB a second, and a checkpoint that runs beside the writes never
/// catches up with them alone.
const START_OVER_FRAMES: i64 = 16_384;

/// The most frames the writer is asked to copy itself (4 MiB): a few milliseconds.
const CATCH_UP_FRAMES: i64 = 1_024;

/// Past this many WAL frames (1 GiB) the checkpoint thread waits for the writer and blocks it
/// while it copies the rest, so that the WAL stays bounded even when long reads keep it from
/// starting over (a reader's snapshot pins the frames after it). Blocking waits for those
/// readers too, which stalls every write for as long as the oldest read lasts: a last resort.
const WAL_CAP_FRAMES: i64 = 262_144;

/// A WAL file that grew past this in a burst (one transaction writes what it writes) is
/// truncated by the checkpoint thread once it has copied all of it and no commit came for
/// [`IDLE_FOR`]. Truncating blocks the writer, and costs about 0.2 s a GiB on a file
/// system that discards freed blocks, so not while writes keep coming: the WAL starts over
/// inside the file instead (SQLite's own size limit would truncate in the writer).
const WAL_KEEP_BYTES: u64 = 64 << 20;

/// How long without a commit before a large WAL file is truncated.
const IDLE_FOR: Duration = Duration::from_secs(5);

/// What the writer and the checkpoint thread tell each other.
#[derive(Debug, Default)]
struct Shared {
    /// Commits so far, which tells the checkpoint thread whether writes have paused.
    commits: AtomicU64,
    /// Set by the checkpoint thread when the writer should copy the rest of the WAL.
    catch_up: AtomicBool,
}

/// Copies the WAL into the database file from a thread and a connection of its own, so a
/// commit never waits for a checkpoint's writes and two fsyncs (30–50 ms on a busy disk). The
/// writer's automatic checkpoint is off. A passive checkpoint never blocks the writer or the
/// readers. The WAL starts again from its beginning at the first write after a checkpoint that
/// copied all of it, if no reader still reads an older snapshot: in any pause of the writes,
/// and past [`START_OVER_FRAMES`] through the writer's catch-up. Only a WAL past
/// [`WAL_CAP_FRAMES`] gets a blocking (RESTART) checkpoint, and only a large WAL file idle for
/// [`IDLE_FOR`] is truncated. Stopped and joined when dropped.
pub(in crate::store) struct Checkpointer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    shared: Arc<Shared>,
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
        let shared = Arc::new(Shared::default());
        let flag = Arc::clone(&stop);
        let told = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("stoker-checkpoint".into())
            .spawn(move || {
                let (lock, wake) = &*flag;
                let mut stopped = locked(lock);
                let mut round = Round {
                    copied: None,
                    commits: 0,
                    since: Instant::now(),
                };
                let mut pause = CHECKPOINT_EVERY;
                while !*stopped {
                    stopped = wake
                        .wait_timeout(stopped, pause)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|poisoned| poisoned.into_inner().0);
                    if *stopped {
                        break;
                    }
                    pause = checkpoint(&conn, &wal, &told, &mut round).unwrap_or_else(|err| {
                        tracing::debug!(%err, "background checkpoint");
                        CHECKPOINT_EVERY
                    });
                }
            })
            .map_err(|source| StoreError::Thread {
                name: "checkpoint",
                source,
            })?;
        Ok(Checkpointer {
            stop,
            shared,
            thread: Some(thread),
        })
    }

    /// The writer committed, on `conn`, and still holds the writer (no other write can start):
    /// if the checkpoint thread asked for it, copy the few frames it has not, so that the next
    /// transaction writes the WAL from its beginning. A failure only leaves the WAL longer.
    pub(in crate::store) fn committed(&self, conn: &Connection) {
        self.shared.commits.fetch_add(1, Ordering::Relaxed);
        if self.shared.catch_up.swap(false, Ordering::AcqRel)
            && let Err(err) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        {
            tracing::debug!(%err, "the writer's catch-up checkpoint");
        }
    }
}

/// What the checkpoint thread remembers between rounds.
#[derive(Debug)]
struct Round {
    /// Frames copied at the last round.
    copied: Option<i64>,
    /// Commits counted at the last round, and since when that count has not moved.
    commits: u64,
    since: Instant,
}

/// One round of the checkpoint thread: passive; then, by what is left, ask the writer to copy
/// the rest (a long WAL nearly all copied), go again soon (a long WAL copied in part since the
/// last round), block (a WAL past its cap), or truncate (a large WAL file all copied, with no
/// commit for [`IDLE_FOR`]). Returns how long to pause before the next round.
fn checkpoint(
    conn: &Connection,
    wal: &Path,
    shared: &Shared,
    round: &mut Round,
) -> rusqlite::Result<Duration> {
    // (frames in the WAL, frames copied into the database)
    let frames = |mode: &str| {
        conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
            Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        })
    };
    let commits = shared.commits.load(Ordering::Relaxed);
    if commits != round.commits {
        round.commits = commits;
        round.since = Instant::now();
    }
    let (in_wal, copied) = frames("PASSIVE")?;
    let progress = round.copied.replace(copied) != Some(copied);
    let mut pause = CHECKPOINT_EVERY;
    if in_wal >= WAL_CAP_FRAMES {
        tracing::info!(frames = in_wal, "WAL past its cap: blocking checkpoint");
        frames("RESTART")?;
    } else if in_wal == copied
        && !progress
        && round.since.elapsed() >= IDLE_FOR
        && std::fs::metadata(wal).is_ok_and(|m| m.len() > WAL_KEEP_BYTES)
    {
        frames("TRUNCATE")?;
    } else if in_wal >= START_OVER_FRAMES {
        if in_wal - copied <= CATCH_UP_FRAMES {
            shared.catch_up.store(true, Ordering::Release);
        } else if progress {
            // Copying what the writes added, not held back by a reader's snapshot: once more
            // before the writer is asked.
            pause = CLOSING_IN;
        }
    }
    Ok(pause)
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
