//! The DHCP server's durability stage: group commit with a real `fdatasync` per group. The
//! deciding loop (`server`) hands over each batch it decided, its lease changes and its encoded
//! replies, and goes back to the socket at once; one thread of this stage takes every batch
//! waiting at that moment as one group, commits the group's lease changes through the store's
//! shared writer (`synchronous=NORMAL`: the page cache, no flush, at most [`CHUNK`] changes per
//! transaction so the agents' writes interleave), flushes the WAL with one `fdatasync`
//! ([`crate::store::WalSync`]: held by no lock, so no other writer of the daemon waits for it),
//! and only then sends the group's replies. An ACK leaves only after the flush that covers it
//! returned: an acknowledged lease survives a crash of the process and a power loss. An OFFER's
//! hold is kept in memory only ([`LeaseChange::kept`]), so the deciding loop sends OFFERs (and
//! NAKs) itself, at once: they cost this thread, the serial part of the path, nothing. While
//! one group flushes, the next gathers, so the flush's latency sets the group's size, not the
//! rate.
//!
//! When a commit fails (a full disk, a busy database), the group's replies are dropped, its
//! changes are kept and committed before anything newer, retried every [`RETRY`], and the
//! server decides nothing new meanwhile ([`Health::Stalled`]); when the flush fails, what
//! reached the disk is unknown, and the server stops answering until it is restarted
//! ([`Health::Broken`]). Either way it never acknowledges what it could not keep. The in-memory
//! table keeps changes whose replies were dropped: no client heard of them, and a client that
//! asks again is given the same address.
//!
//! Why group commit on the database rather than a lease journal of stoker's own: the lease must
//! be in the database anyway when its ACK leaves (the boot endpoints read a MAC's lease to
//! decide who gets a boot token, and iPXE asks for its script right after its ACK), so a
//! journal would add a second write per change, a file format with its recovery, compaction and
//! a second source of truth to reconcile after a restore, for no fewer flushes: one per group
//! either way. SQLite's WAL already is a checksummed append-only journal that recovery reads up
//! to its last whole commit; what `synchronous=NORMAL` lacked was only the flush before the
//! reply, and that flush is taken out of SQLite's locks.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::lease::LeaseChange;
use super::server::DhcpStats;
use crate::store::{Store, StoreError, WalSync};

/// Most lease changes one transaction commits; a larger group is committed in several, then
/// flushed once, so the store's writer, which the agents' calls share, is never held long: an
/// upsert cost 14–18 µs in groups of 256 on the loaded 2-core machine, so a chunk holds it
/// about 2 ms; a transaction's own cost (about 100 µs) is under 5% of a full chunk's.
pub const CHUNK: usize = 128;
/// Most decided batches waiting for the stage; past it the deciding loop waits (and the
/// socket's receive buffer takes the excess).
const QUEUE: usize = 64;
/// Most replies one group sends; the rest wait for the next group.
const MAX_GROUP_REPLIES: usize = 16_384;
/// How often a failed commit is tried again while nothing new arrives.
const RETRY: Duration = Duration::from_secs(1);
/// How long a reply waits for room in the socket's send buffer before it is dropped.
const SEND_PATIENCE: Duration = Duration::from_millis(50);

/// One decided batch: the lease changes to keep, then the replies that announce them.
#[derive(Debug, Default)]
pub struct Decided {
    pub changes: Vec<LeaseChange>,
    pub replies: Vec<(Vec<u8>, SocketAddr)>,
}

/// Whether the durable path keeps its promises; read by the deciding loop before each batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Ok = 0,
    /// Commits fail (a full disk...): retried; nothing new is decided meanwhile.
    Stalled = 1,
    /// A flush failed: nothing is answered until a restart.
    Broken = 2,
}

/// The stage's handle, held by the deciding loop.
pub struct Stage {
    queue: mpsc::Sender<Decided>,
    health: Arc<AtomicU8>,
    thread: std::thread::JoinHandle<()>,
}

/// What the stage's thread owns.
struct Worker {
    store: Arc<Store>,
    wal: WalSync,
    socket: UdpSocket,
    stats: Arc<DhcpStats>,
    health: Arc<AtomicU8>,
    /// Changes decided but not committed yet (a commit failed), oldest first.
    pending: Vec<LeaseChange>,
    /// When a failure was last logged, and how many went unlogged since.
    logged: Option<Instant>,
    unlogged: u64,
}

impl Stage {
    /// Start the stage's thread. `socket` is the server's own socket (a duplicate descriptor).
    pub fn start(
        store: Arc<Store>,
        socket: UdpSocket,
        stats: Arc<DhcpStats>,
    ) -> Result<Stage, StoreError> {
        let wal = store.wal_sync()?;
        let (queue, batches) = mpsc::channel(QUEUE);
        let health = Arc::new(AtomicU8::new(Health::Ok as u8));
        let worker = Worker {
            store,
            wal,
            socket,
            stats,
            health: Arc::clone(&health),
            pending: Vec::new(),
            logged: None,
            unlogged: 0,
        };
        let thread = std::thread::Builder::new()
            .name("stoker-dhcp-leases".into())
            .spawn(move || worker.run(batches))
            .map_err(|source| StoreError::Thread {
                name: "DHCP lease",
                source,
            })?;
        Ok(Stage {
            queue,
            health,
            thread,
        })
    }

    pub fn health(&self) -> Health {
        match self.health.load(Ordering::Relaxed) {
            0 => Health::Ok,
            1 => Health::Stalled,
            _ => Health::Broken,
        }
    }

    /// Hand a decided batch over; waits while the queue is full. False if the stage is gone.
    pub async fn submit(&self, batch: Decided) -> bool {
        self.queue.send(batch).await.is_ok()
    }

    /// Let the stage finish what it was given (commit, flush, reply) and wait for its thread.
    pub async fn finish(self) {
        drop(self.queue);
        let thread = self.thread;
        if tokio::task::spawn_blocking(move || thread.join())
            .await
            .is_err()
        {
            tracing::error!("the DHCP lease thread failed");
        }
    }
}

fn add_elapsed(counter: &AtomicU64, since: Instant) {
    let nanos = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counter.fetch_add(nanos, Ordering::Relaxed);
}

impl Worker {
    fn run(mut self, mut batches: mpsc::Receiver<Decided>) {
        loop {
            let first = if self.pending.is_empty() {
                match batches.blocking_recv() {
                    Some(b) => b,
                    None => break,
                }
            } else {
                // Stalled: retry the commit every RETRY, taking whatever arrived meanwhile.
                match self.wait_while_stalled(&mut batches) {
                    Some(b) => b,
                    None => break,
                }
            };
            let mut group = vec![first];
            let mut replies = group[0].replies.len();
            while replies < MAX_GROUP_REPLIES {
                match batches.try_recv() {
                    Ok(b) => {
                        replies += b.replies.len();
                        group.push(b);
                    }
                    Err(_) => break,
                }
            }
            self.keep_then_reply(group);
        }
        if !self.pending.is_empty() && self.commit() {
            let _ = self.wal.sync();
        }
    }

    /// Sleep in short steps until a batch arrives or RETRY passed; then try the pending
    /// commit again. `None` when the server is gone.
    fn wait_while_stalled(&mut self, batches: &mut mpsc::Receiver<Decided>) -> Option<Decided> {
        let start = Instant::now();
        loop {
            match batches.try_recv() {
                Ok(b) => return Some(b),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            if start.elapsed() >= RETRY {
                return Some(Decided::default());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn set_health(&self, h: Health) {
        self.health.store(h as u8, Ordering::Relaxed);
    }

    /// Log a failure at most once every 10 s (with how many were not logged).
    fn failure(&mut self, err: &StoreError, what: &str) {
        super::server::bump(&self.stats.store_errors);
        let due = self
            .logged
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(10));
        if due {
            tracing::error!(%err, also = self.unlogged, "{what}");
            self.logged = Some(Instant::now());
            self.unlogged = 0;
        } else {
            self.unlogged += 1;
        }
    }

    /// Commit the pending changes, in chunks. True when all are committed.
    fn commit(&mut self) -> bool {
        let started = Instant::now();
        let mut done = 0;
        while done < self.pending.len() {
            let end = (done + CHUNK).min(self.pending.len());
            let chunk = &self.pending[done..end];
            match self.store.write(|tx| tx.apply_lease_changes(chunk)) {
                Ok(()) => done = end,
                Err(err) => {
                    self.pending.drain(..done);
                    add_elapsed(&self.stats.lease_commit_nanos, started);
                    self.failure(
                        &err,
                        "cannot store DHCP leases: no answers until they are stored; retrying \
                         every second",
                    );
                    return false;
                }
            }
        }
        self.pending.clear();
        add_elapsed(&self.stats.lease_commit_nanos, started);
        true
    }

    fn keep_then_reply(&mut self, group: Vec<Decided>) {
        if self.health.load(Ordering::Relaxed) == Health::Broken as u8 {
            return;
        }
        let mut replies = Vec::new();
        let had_pending = !self.pending.is_empty();
        for d in group {
            self.pending.extend(d.changes);
            replies.extend(d.replies);
        }
        if !self.pending.is_empty() {
            if !self.commit() {
                self.set_health(Health::Stalled);
                return;
            }
            let started = Instant::now();
            let synced = self.wal.sync();
            add_elapsed(&self.stats.lease_sync_nanos, started);
            if let Err(err) = synced {
                self.set_health(Health::Broken);
                super::server::bump(&self.stats.store_errors);
                tracing::error!(
                    %err,
                    "cannot flush DHCP leases to disk: the DHCP server answers nothing more \
                     until stoker is restarted (what reached the disk is unknown)"
                );
                return;
            }
            super::server::bump(&self.stats.lease_groups);
            if had_pending {
                // The group whose commit failed lost its replies; these batches' changes are
                // on disk now, so their replies may leave, late as they are.
                tracing::info!("DHCP leases are stored again; answering");
                self.set_health(Health::Ok);
            }
        }
        for (bytes, to) in replies {
            self.send(&bytes, to);
        }
    }

    fn send(&self, bytes: &[u8], to: SocketAddr) {
        let start = Instant::now();
        loop {
            match self.socket.send_to(bytes, to) {
                Ok(_) => {
                    super::server::bump(&self.stats.replied);
                    return;
                }
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    if start.elapsed() >= SEND_PATIENCE {
                        tracing::warn!(%to, "DHCP reply dropped: the send buffer stayed full");
                        return;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(err) => {
                    tracing::warn!(%err, %to, "cannot send a DHCP reply");
                    return;
                }
            }
        }
    }
}
