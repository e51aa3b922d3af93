//! Group commit for many small writes: the agents' step calls (ask for the next run, report a
//! result, stream output) arrive thousands a second during a big deployment, each a tiny
//! transaction. A [`GroupWriter`] owns one thread that takes every write waiting in its queue,
//! runs each in its own savepoint of one transaction, commits once, and only then answers
//! each caller: a caller still hears back only after its change is durable, a write that fails
//! is rolled back alone, and the fixed cost of a commit (locks, the WAL write) is paid once per
//! group instead of once per call. While writes keep coming, the writer lingers half a
//! millisecond to gather more of them into the group. Each commit wakes a wave of the agents'
//! held calls it made a run due for (`waiters`); while some wait for their wave and no write
//! comes, the writer wakes the next one every 2 ms.
//!
//! Owns the thread and the queue; what a write does is the caller's closure over
//! [`WriteTxn`]. No HTTP here; async callers await the answer without blocking their runtime.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Result, Store, StoreError, WriteTxn};

/// Hands a job's outcome to its caller once the group's fate is known: `None` when the group
/// committed, or why the commit failed.
type Deliver = Box<dyn FnOnce(Option<&StoreError>) + Send>;

/// One queued write: runs inside its savepoint (or, given None, does not run at all), says
/// whether it succeeded (a failed one is rolled back alone), and how to answer its caller.
pub(super) type Job = Box<dyn FnOnce(Option<&WriteTxn<'_>>) -> (bool, Deliver) + Send>;

/// At most this many writes share a transaction, so one group never holds the writer long.
const MAX_GROUP: usize = 256;

/// While writes come in together (the last group had more than one), the writer waits this
/// long for more before it commits: a commit costs about as much as two agent calls, and
/// groups of two were the rule at 5,000 calls a second. A lone write never waits.
const LINGER: Duration = Duration::from_micros(500);

/// While held agents' calls found due wait to be woken (a wave after each commit) and no write
/// comes, the writer wakes the next wave after this pause.
const WAVE_PAUSE: Duration = Duration::from_millis(2);

/// The queue to the writer thread. Cloning shares the queue; the thread ends when the last
/// clone is dropped, and with it its handle on the store.
#[derive(Debug, Clone)]
pub struct GroupWriter {
    jobs: mpsc::Sender<Job>,
}

/// What the writer tells an observer (the metrics) about each group it wrote: how many writes
/// it held and how long its transaction took, the writes and the commit.
pub type GroupObserver = Box<dyn Fn(usize, Duration) + Send>;

impl GroupWriter {
    /// Start the writer thread for `store`.
    pub fn start(store: Arc<Store>) -> std::io::Result<GroupWriter> {
        GroupWriter::observed(store, Box::new(|_, _| {}))
    }

    /// Start the writer thread for `store`, telling `observe` about every group.
    pub fn observed(store: Arc<Store>, observe: GroupObserver) -> std::io::Result<GroupWriter> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("stoker-writer".into())
            .spawn(move || {
                let mut busy = false;
                loop {
                    let first = if store.waking() > 0 {
                        match queue.recv_timeout(WAVE_PAUSE) {
                            Ok(job) => job,
                            Err(mpsc::RecvTimeoutError::Timeout) => {
                                store.wake_due();
                                continue;
                            }
                            Err(mpsc::RecvTimeoutError::Disconnected) => break,
                        }
                    } else {
                        match queue.recv() {
                            Ok(job) => job,
                            Err(_) => break,
                        }
                    };
                    let mut group = vec![first];
                    let until = Instant::now() + if busy { LINGER } else { Duration::ZERO };
                    while group.len() < MAX_GROUP {
                        let left = until.saturating_duration_since(Instant::now());
                        match queue.recv_timeout(left) {
                            Ok(job) => group.push(job),
                            Err(_) => break,
                        }
                    }
                    busy = group.len() > 1;
                    let size = group.len();
                    let started = Instant::now();
                    store.write_group(group);
                    observe(size, started.elapsed());
                }
            })?;
        Ok(GroupWriter { jobs })
    }

    /// Run `f` in the next group's transaction; the answer comes once that group committed.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&WriteTxn<'_>) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (answer, answered) = tokio::sync::oneshot::channel::<Result<T>>();
        self.queue(f, move |r| {
            // The caller may have gone (its request was cancelled): nothing to tell.
            let _ = answer.send(r);
        })?;
        answered
            .await
            .map_err(|_| StoreError::Commit("the writer thread dropped the write".into()))?
    }

    /// [`GroupWriter::write`] for a caller off the async runtime, which blocks until the
    /// group committed: a big write cut in parts (a deployment's runs) queues each part behind
    /// the agents' calls already waiting, instead of holding the writer for all of them.
    pub fn write_blocking<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&WriteTxn<'_>) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (answer, answered) = mpsc::sync_channel::<Result<T>>(1);
        self.queue(f, move |r| {
            let _ = answer.send(r);
        })?;
        answered
            .recv()
            .map_err(|_| StoreError::Commit("the writer thread dropped the write".into()))?
    }

    /// Queue `f`; `answer` gets its outcome once the group's commit is known.
    fn queue<T, F>(&self, f: F, answer: impl FnOnce(Result<T>) + Send + 'static) -> Result<()>
    where
        F: FnOnce(&WriteTxn<'_>) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let job: Job = Box::new(move |tx| {
            let outcome = match tx {
                Some(tx) => std::panic::catch_unwind(AssertUnwindSafe(|| f(tx)))
                    .unwrap_or_else(|_| Err(StoreError::Commit("the write panicked".into())))
                    .map_err(|e| e.at(tx.path)),
                None => Err(StoreError::Commit("the write did not run".into())),
            };
            let ok = outcome.is_ok();
            let deliver: Deliver = Box::new(move |commit: Option<&StoreError>| {
                answer(match (commit, outcome) {
                    // A full disk is said as such to every caller of the group.
                    (Some(err), Ok(_)) => Err(err
                        .again()
                        .unwrap_or_else(|| StoreError::Commit(err.to_string()))),
                    (_, outcome) => outcome,
                });
            });
            (ok, deliver)
        });
        self.jobs
            .send(job)
            .map_err(|_| StoreError::Commit("the writer thread has stopped".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("stoker.db")).unwrap();
        (dir, Arc::new(store))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_commit_and_a_failing_one_is_rolled_back_alone() {
        let (_dir, store) = store();
        let w = GroupWriter::start(Arc::clone(&store)).unwrap();
        let mut tasks = Vec::new();
        for i in 0..200i64 {
            let w = w.clone();
            tasks.push(tokio::spawn(async move {
                w.write(move |tx| {
                    tx.add_history(i, None, "test", &format!("write {i}"))?;
                    if i % 10 == 0 {
                        return Err(StoreError::Conflict(format!("write {i} refused")));
                    }
                    Ok(i)
                })
                .await
            }));
        }
        let mut ok = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => ok += 1,
                Err(StoreError::Conflict(msg)) => assert!(msg.ends_with("refused")),
                Err(other) => panic!("{other}"),
            }
        }
        assert_eq!(ok, 180);
        let kept = store
            .read(|r| r.recent_history(1000))
            .unwrap()
            .into_iter()
            .filter(|h| h.kind == "test")
            .count();
        assert_eq!(kept, 180, "the refused writes left nothing behind");
    }

    #[tokio::test]
    async fn a_panicking_write_is_refused_and_the_writer_goes_on() {
        let (_dir, store) = store();
        let w = GroupWriter::start(Arc::clone(&store)).unwrap();
        let r: Result<()> = w
            .write(|tx| {
                tx.add_history(1, None, "test", "before the panic")?;
                panic!("boom")
            })
            .await;
        assert!(r.is_err());
        let n = w
            .write(|tx| tx.add_history(2, None, "test", "after").map(|()| 2))
            .await
            .unwrap();
        assert_eq!(n, 2);
        let messages: Vec<String> = store
            .read(|r| r.recent_history(10))
            .unwrap()
            .into_iter()
            .filter(|h| h.kind == "test")
            .map(|h| h.message)
            .collect();
        assert_eq!(messages, vec!["after".to_string()]);
    }
}
