//! The store: the only module that imports rusqlite.
//!
//! [`Store`] owns one writer and one reader connection to a WAL-mode database file. All access
//! goes through [`Store::read`] (a consistent snapshot) or [`Store::write`] (an immediate
//! transaction committed only when the closure returns `Ok`; an error or a panic rolls it back),
//! so a half-written change never reaches the file. Calls are synchronous; async callers use
//! `spawn_blocking`, or a [`GroupWriter`] that commits many small writes together. Queries live
//! in one file per table group; no SQL exists outside this module. What only SQLite has (its
//! PRAGMAs, WAL checkpoints, transaction modes and savepoints, the online backup API, `VACUUM
//! INTO`, JSON functions) lives in [`sqlite`]; the queries beside it are in SQL a second engine
//! would also read (`tests/tidy.rs` keeps it so; `docs/scale-out.md`, section 5).

mod audit;
mod bmcs;
mod boot_tokens;
mod catalog;
mod chains;
mod checks;
mod clusters;
mod deployed;
mod deployment_views;
mod deployments;
mod error;
mod facts;
mod gauges;
mod graphs;
mod group;
mod history;
mod ids;
mod leases;
mod master_tasks;
pub mod migrations;
mod networks;
mod node_edits;
mod node_list;
mod nodes;
mod openstack_configs;
pub mod revision;
mod roles;
mod run_log;
mod sequences;
mod sqlite;
mod staging;
mod transaction_data;
#[cfg(test)]
mod upgrades;
mod users;
mod waiters;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use rusqlite::Connection;

use crate::engine::schedule::Schedule;
use crate::events::{Bus, Change};

pub use audit::AuditEntry;
pub use bmcs::{BmcWrite, MasterRun, StoredBmc};
pub use boot_tokens::TokenCheck;
pub use catalog::{NewPlugin, NewRelease};
pub use chains::{CHAIN_NAME, CHAINING, Chain, ChainChild, ChainGraph};
pub use checks::Probe;
pub use clusters::NO_RELEASE_MESSAGE;
pub use deployment_views::{DeploymentSummary, NodeLabel, RunLine, TimelineRuns};
pub use deployments::{Claim, Deployment, RESET, Report, Run, RunCounts, RunResult, VERIFY};
pub use error::StoreError;
pub use facts::{COMMON, FactsKind};
pub use gauges::Gauges;
pub use graphs::{GraphBody, GraphOwner, StoredGraph};
pub use group::{GroupObserver, GroupWriter};
pub use history::{About, HistoryEntry};
pub use master_tasks::MasterTask;
pub use node_edits::{NodeDocument, NodeEdit};
pub use node_list::{
    InEnvironment, ListedNode, NodeFilter, NodeListing, NodeQuery, Power, SortKey,
};
pub use nodes::{HelloOutcome, HelloTarget, HelloWrite, NodeCounts};
pub use openstack_configs::{ConfigScope, OpenstackConfig};
pub use roles::{MetaKind, MetaOwner};
pub use run_log::RunFilter;
pub use sequences::Sequence;
pub use sqlite::WalSync;
pub use sqlite::backup;
pub use staging::{NewDeployment, PendingData};
pub use transaction_data::{TransactionData, TransactionPart};
pub use users::{ApiToken, Login, NewToken, Session, SessionLimits, TokenCaller, User};
pub use waiters::{MAX_PARKED, WAVE, Wake};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A read-only view inside one transaction.
pub struct ReadTxn<'a> {
    conn: &'a Connection,
}

/// A writable view inside one immediate transaction; it can read what it wrote.
pub struct WriteTxn<'a> {
    conn: &'a Connection,
    /// The database file, for errors that name it (a full disk).
    path: &'a Path,
    /// The running deployments' schedules, kept in step with what this transaction writes.
    schedules: &'a RefCell<Schedules>,
    /// What this transaction changed, published once it commits.
    changes: &'a RefCell<Vec<Change>>,
    /// The agents' calls held until they have work ([`WriteTxn::park`]).
    waiters: &'a Mutex<waiters::Waiters>,
}

/// Scheduling state of deployments, by id: derived from the `step_runs` rows, kept in memory so
/// an agent's poll does not re-read its whole deployment. Dropped whenever a transaction rolls
/// back, and rebuilt from the database when next needed.
type Schedules = HashMap<i64, Schedule>;

/// The writer connection and what is derived from the rows it wrote.
struct Writer {
    conn: Connection,
    schedules: Schedules,
}

impl WriteTxn<'_> {
    /// Read through the same transaction, seeing this transaction's own writes.
    pub fn read(&self) -> ReadTxn<'_> {
        ReadTxn { conn: self.conn }
    }

    /// Tell listeners of `change` once this transaction commits (never if it rolls back).
    pub(crate) fn emit(&self, change: Change) {
        self.changes.borrow_mut().push(change);
    }
}

/// The database of one stoker master.
pub struct Store {
    path: PathBuf,
    writer: Mutex<Writer>,
    /// Read-only connections ([`READERS`]): WAL lets them read while the writer writes, and
    /// each other, so a long read (a page listing every run of a big deployment) does not hold
    /// up the others.
    readers: Vec<Mutex<Connection>>,
    /// Where the next read starts looking for a free reader.
    next_reader: std::sync::atomic::AtomicUsize,
    checkpointer: sqlite::Checkpointer,
    /// Held while a deployment is created in parts (`staging`): one at a time, so the run
    /// ids one reserves are not taken by another.
    creating: Mutex<()>,
    /// Where committed changes are told.
    events: Bus,
    /// The agents' calls held until they have work, woken after the commits that make it due.
    waiters: Mutex<waiters::Waiters>,
}

/// Read-only connections: reads run on actix's blocking pool, several at once.
const READERS: usize = 4;

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (creating if needed) the database at `path`, switch it to WAL and apply every
    /// pending migration. A database written by a newer stoker is refused, not touched.
    pub fn open(path: &Path) -> Result<Store> {
        let mut writer = sqlite::open_writer(path)?;
        migrations::migrate(&mut writer)?;
        sqlite::revision::watch(&mut writer)?;
        // A deployment still preparing was cut short by a stop: it never started.
        writer.execute("DELETE FROM deployments WHERE status = 'preparing'", [])?;
        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            readers.push(Mutex::new(sqlite::open_reader(path)?));
        }
        Ok(Store {
            path: path.to_path_buf(),
            writer: Mutex::new(Writer {
                conn: writer,
                schedules: Schedules::new(),
            }),
            readers,
            next_reader: std::sync::atomic::AtomicUsize::new(0),
            checkpointer: sqlite::Checkpointer::start(path)?,
            creating: Mutex::new(()),
            events: Bus::new(),
            waiters: Mutex::new(waiters::Waiters::default()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stream of committed changes.
    pub fn events(&self) -> &Bus {
        &self.events
    }

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        // A panic inside a transaction rolled it back (Transaction's Drop), so the connection
        // itself is still sound: recover it instead of poisoning the whole daemon.
        m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Run `f` on a consistent snapshot of the database, on a reader no other read holds (or,
    /// all busy, the next one's turn).
    pub fn read<T>(&self, f: impl FnOnce(&ReadTxn<'_>) -> Result<T>) -> Result<T> {
        let start = self
            .next_reader
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = self.readers.len();
        let free = (0..n).find_map(|i| match self.readers[(start + i) % n].try_lock() {
            Ok(conn) => Some(conn),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        });
        let mut conn = match free {
            Some(conn) => conn,
            None => Self::lock(&self.readers[start % n]),
        };
        let tx = sqlite::begin_read(&mut conn)?;
        f(&ReadTxn { conn: &tx })
    }

    /// Run `f` in an immediate transaction; commit when it returns `Ok`, roll back otherwise.
    /// The in-memory schedules follow: kept on commit, dropped on a rollback or a panic.
    pub fn write<T>(&self, f: impl FnOnce(&WriteTxn<'_>) -> Result<T>) -> Result<T> {
        let mut guard = Self::lock(&self.writer);
        let Writer { conn, schedules } = &mut *guard;
        let cache = RefCell::new(std::mem::take(schedules));
        let changes = RefCell::new(Vec::new());
        let located = |e: StoreError| e.at(&self.path);
        let tx = sqlite::begin_write(conn).map_err(|e| located(e.into()))?;
        let done = f(&WriteTxn {
            conn: &tx,
            path: &self.path,
            schedules: &cache,
            changes: &changes,
            waiters: &self.waiters,
        })
        .map_err(located)
        .and_then(|value| tx.commit().map(|()| value).map_err(|e| located(e.into())));
        self.checkpointer.committed(conn);
        // A rollback drops the schedules (rebuilt from the rows when next needed) and what
        // the transaction would have told.
        if done.is_ok() {
            *schedules = cache.into_inner();
            self.events.publish(changes.into_inner());
        }
        self.release_waiters(schedules, done.is_err());
        done
    }

    /// After a commit (or a rollback, `dropped`: the schedules are gone): queue the held
    /// calls of the nodes the commit may have made a run due for, and wake a wave of them.
    fn release_waiters(&self, schedules: &mut Schedules, dropped: bool) {
        let mut waiters = Self::lock(&self.waiters);
        if dropped {
            waiters.release_all();
        }
        for s in schedules.values_mut() {
            let released = s.take_released();
            waiters.release(s, &released);
        }
        waiters.wake_wave(Instant::now());
    }

    /// Wake the next wave of held calls found due (the writer thread does, when no write
    /// comes to do it after a commit); returns how many are still to wake.
    pub(crate) fn wake_due(&self) -> usize {
        Self::lock(&self.waiters).wake_wave(Instant::now())
    }

    /// Held calls found due and not woken yet.
    pub(crate) fn waking(&self) -> usize {
        Self::lock(&self.waiters).waking()
    }

    /// Agents' calls held now.
    pub fn held_calls(&self) -> usize {
        Self::lock(&self.waiters).held()
    }

    /// Answer every held call now and hold none from now on: the daemon stops.
    pub fn stop_holding(&self) {
        Self::lock(&self.waiters).close();
    }

    /// Run `jobs` in one immediate transaction, each in its own savepoint (one that fails is
    /// rolled back alone, and the in-memory schedules are dropped, to be rebuilt from the
    /// rows), commit once, then answer every job.
    fn write_group(&self, jobs: Vec<group::Job>) {
        let mut guard = Self::lock(&self.writer);
        let Writer { conn, schedules } = &mut *guard;
        let cache = RefCell::new(std::mem::take(schedules));
        let tx = match sqlite::begin_write(conn) {
            Ok(tx) => tx,
            Err(e) => {
                let err = StoreError::from(e).at(&self.path);
                for job in jobs {
                    let (_, deliver) = job(None);
                    deliver(Some(&err));
                }
                return;
            }
        };
        let step = |sql: &str| tx.prepare_cached(sql).and_then(|mut s| s.execute([]));
        let changes = RefCell::new(Vec::new());
        let mut answers = Vec::with_capacity(jobs.len());
        let mut dropped = false;
        for job in jobs {
            if let Err(e) = step(sqlite::SAVEPOINT) {
                let (_, deliver) = job(None);
                answers.push((deliver, Some(StoreError::from(e).at(&self.path))));
                continue;
            }
            let mark = changes.borrow().len();
            let (ok, deliver) = job(Some(&WriteTxn {
                conn: &tx,
                path: &self.path,
                schedules: &cache,
                changes: &changes,
                waiters: &self.waiters,
            }));
            let mut failed = None;
            if !ok {
                failed = step(sqlite::ROLLBACK_TO_SAVEPOINT).err();
                cache.borrow_mut().clear();
                changes.borrow_mut().truncate(mark);
                dropped = true;
            }
            let failed = failed.or(step(sqlite::RELEASE_SAVEPOINT).err());
            answers.push((deliver, failed.map(|e| StoreError::from(e).at(&self.path))));
        }
        let committed = tx.commit().map_err(|e| StoreError::from(e).at(&self.path));
        match &committed {
            Ok(()) => {
                *schedules = cache.into_inner();
                self.events.publish(changes.into_inner());
            }
            Err(_) => {
                schedules.clear();
                dropped = true;
            }
        }
        self.release_waiters(schedules, dropped);
        for (deliver, failed) in answers {
            deliver(committed.as_ref().err().or(failed.as_ref()));
        }
        // After the answers: a catch-up checkpoint delays only the writes queued behind it.
        self.checkpointer.committed(conn);
    }

    /// Checkpoint the WAL into the main file and close both connections. After a clean close the
    /// `-wal` and `-shm` files are gone and the database is a single self-contained file.
    pub fn close(self) -> Result<()> {
        drop(self.checkpointer);
        for reader in self.readers {
            let reader = reader
                .into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            reader.close().map_err(|(_, e)| StoreError::Sqlite(e))?;
        }
        let writer = self
            .writer
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .conn;
        sqlite::checkpoint_all(&writer)?;
        writer.close().map_err(|(_, e)| StoreError::Sqlite(e))?;
        Ok(())
    }
}

/// What the store's tests share.
#[cfg(test)]
pub(crate) mod testing {
    use super::Store;

    /// A store in a temporary directory (its file `s.db`) holding release plugin 1, release 1
    /// and environment 1 (`env`).
    pub(crate) fn store_with_cluster() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        exec(
            &store,
            "INSERT INTO plugins (id, name, version, title, package_version, description,
                       is_release, path, diagnostics, manifest, installed_at)
                     VALUES (1, 'r', '1.0.0', 'r', '5.0.0', '', 1, '/x', '[]', '{}', 1);
                     INSERT INTO releases (id, plugin_id, name, version, operating_system,
                       description, state, data)
                     VALUES (1, 1, 'r', 'newton-10.0', 'ubuntu', '', 'available', '{}');
                     INSERT INTO clusters (id, name, release_id, status, net_segment_type,
                       created_at) VALUES (1, 'env', 1, 'new', 'vlan', 1);",
        );
        (dir, store)
    }

    /// Run `sql` (statements as a test seeds or changes them) in one write transaction.
    pub(crate) fn exec(store: &Store, sql: &str) {
        store
            .write(|tx| Ok(tx.conn.execute_batch(sql)?))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}
