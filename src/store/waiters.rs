//! Agents' calls held until they have something to run (long-poll). An agent that asks for
//! work (`next`) when none is due may ask the master to hold its call a while: its handler
//! parks the call here, keyed by node, and waits for a wake or its own deadline. The call is
//! parked inside the writer's transaction that found nothing due for it, and woken in the
//! writer thread right after each commit, from what the commit released in a deployment's
//! schedule ([`Schedule::take_released`]): a run that becomes due after the claim is never
//! missed, and only the nodes a change can concern are looked at. A woken call claims again
//! through the writer's queue. Thousands of nodes made due at once (a new deployment, a stage
//! done) are woken a wave at a time, [`WAVE`] after a commit, so their claims interleave with
//! the other agents' calls instead of all queueing in front of them; the next wave only once
//! most of the last one has claimed (or [`WAVE_PATIENCE`] passed: a woken caller may have gone
//! away). A wave per commit was not enough: 10,000 nodes woken by one Deploy queued their
//! claims 200 ms deep in the writer, since commits came faster than the claims they woke.
//! Paced this way, a call waits for its turn held (which its answer says) rather than in the
//! writer's queue, and the rest of the agents' calls find that queue short.
//!
//! Bounded: past [`MAX_PARKED`] calls a call is not held (its agent is answered at once and
//! polls). Closing (the daemon stops) answers every held call at once. No thread per call: a
//! held call is a oneshot channel. Owns no SQL; lives beside the writer's schedules.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{Store, WriteTxn};
use crate::engine::schedule::{Released, Schedule};
use crate::engine::steps::Location;

/// Most calls held at once: above 10,000 nodes with room for both agents of a few.
pub const MAX_PARKED: usize = 20_000;

/// Calls woken at once, at most: a wave's claims are one group of the writer. A day-2 claim
/// (its run, the node's new token, a history line) costs the writer about 0.2 ms, so a wave of
/// 128 made each woken call wait about 30 ms for its group (p50 at 10,000 nodes, 5 s steps).
pub const WAVE: usize = 32;

/// How long the next wave waits for the last one's claims, at most.
pub const WAVE_PATIENCE: Duration = Duration::from_millis(20);

/// Why a held call ends before its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Something may be due for its node: claim again.
    Due,
    /// Answer now, without claiming: the daemon stops, or another call of the same node took
    /// its place.
    Answer,
}

impl WriteTxn<'_> {
    /// Hold a call of `node`'s agent until a commit makes a run due for the node (or says to
    /// answer now); `None` when no more calls can be held. Call it in the transaction that
    /// found nothing due: a change committed after it wakes the call.
    pub fn park(&self, node: i64) -> Option<oneshot::Receiver<Wake>> {
        Store::lock(self.waiters).park(node)
    }

    /// `node` claims (every claim says so): if it was woken, its wave's place is free for the
    /// next.
    pub(super) fn note_claim(&self, node: i64) {
        Store::lock(self.waiters).claimed(node);
    }
}

/// The held calls.
#[derive(Debug)]
pub(super) struct Waiters {
    parked: HashMap<i64, oneshot::Sender<Wake>>,
    /// Found due, not woken yet, by node.
    due: VecDeque<(i64, oneshot::Sender<Wake>)>,
    /// Nodes of the last waves woken whose claims are not in yet.
    woken: HashSet<i64>,
    /// When the last wave was woken.
    last_wave: Option<Instant>,
    max: usize,
    closed: bool,
}

impl Default for Waiters {
    fn default() -> Waiters {
        Waiters::new(MAX_PARKED)
    }
}

impl Waiters {
    pub(super) fn new(max: usize) -> Waiters {
        Waiters {
            parked: HashMap::new(),
            due: VecDeque::new(),
            woken: HashSet::new(),
            last_wave: None,
            max,
            closed: false,
        }
    }

    /// Hold a call of `node`; `None` when no more can be held (or the daemon stops).
    pub(super) fn park(&mut self, node: i64) -> Option<oneshot::Receiver<Wake>> {
        if self.closed {
            return None;
        }
        if self.parked.len() >= self.max && !self.parked.contains_key(&node) {
            // Calls whose callers gave up (their deadline passed) still have their slot.
            self.parked.retain(|_, tx| !tx.is_closed());
            if self.parked.len() >= self.max {
                return None;
            }
        }
        let (tx, rx) = oneshot::channel();
        if let Some(before) = self.parked.insert(node, tx) {
            let _ = before.send(Wake::Answer);
        }
        Some(rx)
    }

    /// The calls held now (their callers may have given up since).
    pub(super) fn held(&self) -> usize {
        self.parked.len()
    }

    /// After a commit: the held calls of nodes that schedule `s`'s changes (`r`) may have
    /// made a run due for, and that have one, are queued to be woken.
    pub(super) fn release(&mut self, s: &Schedule, r: &Released) {
        if self.parked.is_empty() || r.is_empty() {
            return;
        }
        // An agent's run (not the master's) is due for the node; one for its other agent is
        // answered too, with the reason.
        let due = |n: i64| {
            s.next_for(n)
                .is_some_and(|id| s.runs_on(id) != Some(Location::Master))
        };
        let mut found: Vec<i64> = r
            .nodes
            .iter()
            .copied()
            .filter(|n| self.parked.contains_key(n) && due(*n))
            .collect();
        if r.everyone {
            found.extend(self.parked.keys().copied().filter(|n| due(*n)));
        } else if r.slots > 0 {
            let slots = usize::try_from(r.slots).unwrap_or(usize::MAX);
            found.extend(
                self.parked
                    .keys()
                    .copied()
                    .filter(|n| !r.nodes.contains(n) && due(*n))
                    .take(slots),
            );
        }
        for n in found {
            if let Some(tx) = self.parked.remove(&n) {
                self.due.push_back((n, tx));
            }
        }
    }

    /// Every held call is to be woken (the schedules were dropped: nothing says whom a change
    /// concerned).
    pub(super) fn release_all(&mut self) {
        self.due.extend(self.parked.drain());
    }

    /// Wake up to [`WAVE`] of the calls found due, once at most half of the last wave is still
    /// to claim (or [`WAVE_PATIENCE`] passed since it was woken); returns how many are left
    /// to wake.
    pub(super) fn wake_wave(&mut self, now: Instant) -> usize {
        if self.due.is_empty() {
            return 0;
        }
        let waited = self
            .last_wave
            .is_none_or(|t| now.saturating_duration_since(t) >= WAVE_PATIENCE);
        if waited {
            // Whoever of the last wave has not claimed by now is not coming.
            self.woken.clear();
        } else if self.woken.len() > WAVE / 2 {
            return self.due.len();
        }
        let mut sent = 0;
        while sent < WAVE {
            let Some((node, tx)) = self.due.pop_front() else {
                break;
            };
            // A caller that gave up meanwhile does not count.
            if tx.send(Wake::Due).is_ok() {
                self.woken.insert(node);
                sent += 1;
            }
        }
        self.last_wave = Some(now);
        self.due.len()
    }

    /// `node` claimed.
    pub(super) fn claimed(&mut self, node: i64) {
        self.woken.remove(&node);
    }

    /// Calls found due and not woken yet.
    pub(super) fn waking(&self) -> usize {
        self.due.len()
    }

    /// Answer every held call now, and hold none from now on.
    pub(super) fn close(&mut self) {
        self.closed = true;
        for (_, tx) in self.parked.drain().chain(self.due.drain(..)) {
            let _ = tx.send(Wake::Answer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::orchestrate::{RunStatus, RunView};

    fn run(id: i64, node: Option<i64>, seq: u32, deps: &[i64]) -> RunView {
        RunView {
            id,
            node,
            seq,
            status: RunStatus::Pending,
            deps: deps.to_vec(),
            concurrency: None,
            max_parallel: None,
            timeout_s: 60,
            runs_on: Location::Os,
        }
    }

    #[test]
    fn only_nodes_with_a_due_run_are_woken_a_wave_at_a_time() {
        // Node 1 runs now; node 2 waits for node 1's run (a cross-node wait).
        let mut s = Schedule::new(vec![run(1, Some(1), 0, &[]), run(2, Some(2), 0, &[1])]);
        let mut w = Waiters::new(10);
        let mut one = w.park(1).unwrap();
        let mut two = w.park(2).unwrap();
        let r = s.take_released();
        assert!(r.everyone, "a new schedule concerns everyone");
        w.release(&s, &r);
        assert_eq!(w.waking(), 1);
        assert_eq!(w.wake_wave(Instant::now()), 0);
        assert_eq!(one.try_recv(), Ok(Wake::Due));
        assert!(two.try_recv().is_err(), "node 2 still waits");
        s.set(1, RunStatus::Running);
        assert!(s.take_released().is_empty(), "taking a run frees nothing");
        s.set(1, RunStatus::Ok);
        let r = s.take_released();
        assert!(r.everyone, "a cross-node wait ended");
        w.release(&s, &r);
        w.wake_wave(Instant::now());
        assert_eq!(two.try_recv(), Ok(Wake::Due));
        assert_eq!(w.held(), 0);
    }

    #[test]
    fn a_same_node_step_releases_nobody_and_a_freed_slot_wakes_that_many() {
        let capped = |mut r: RunView| {
            r.concurrency = Some("provision".into());
            r.max_parallel = Some(1);
            r
        };
        let mut s = Schedule::new(vec![
            capped(run(1, Some(1), 0, &[])),
            run(2, Some(1), 1, &[]),
            capped(run(3, Some(2), 0, &[])),
            capped(run(4, Some(3), 0, &[])),
        ]);
        s.take_released();
        s.set(1, RunStatus::Running);
        let mut w = Waiters::new(10);
        let mut two = w.park(2).unwrap();
        let mut three = w.park(3).unwrap();
        s.set(1, RunStatus::Ok);
        let r = s.take_released();
        assert_eq!((r.everyone, r.slots), (false, 1));
        w.release(&s, &r);
        w.wake_wave(Instant::now());
        let woken = [two.try_recv().is_ok(), three.try_recv().is_ok()];
        assert_eq!(
            woken.iter().filter(|w| **w).count(),
            1,
            "one slot, one node"
        );
        s.set(2, RunStatus::Running);
        s.set(2, RunStatus::Ok);
        assert!(s.take_released().is_empty(), "node 1's own lane");
    }

    #[test]
    fn bounded_replaced_and_closed_calls_are_answered() {
        let mut w = Waiters::new(2);
        let mut first = w.park(1).unwrap();
        let _second = w.park(2).unwrap();
        assert!(w.park(3).is_none(), "full");
        let _again = w.park(1).unwrap();
        assert_eq!(
            first.try_recv(),
            Ok(Wake::Answer),
            "replaced by its node's new call"
        );
        drop(_second);
        assert!(w.park(3).is_some(), "a caller that gave up frees its slot");
        let mut many = Waiters::new(1000);
        let rxs: Vec<_> = (0..WAVE as i64 + 5)
            .map(|n| many.park(n).unwrap())
            .collect();
        many.release_all();
        let now = Instant::now();
        assert_eq!(many.wake_wave(now), 5, "one wave at a time");
        assert_eq!(
            many.wake_wave(now + WAVE_PATIENCE),
            0,
            "the next once the last had its time"
        );
        assert!(rxs.into_iter().all(|mut rx| rx.try_recv() == Ok(Wake::Due)));
        w.close();
        assert!(w.park(9).is_none(), "closed");
    }

    #[test]
    fn the_next_wave_waits_for_most_of_the_last_ones_claims() {
        let mut w = Waiters::new(10 * WAVE);
        let mut rxs: Vec<_> = (0..3 * WAVE as i64)
            .map(|n| (n, w.park(n).unwrap()))
            .collect();
        // Which nodes a wave woke, taking their wakes.
        let woken_now = |rxs: &mut Vec<(i64, oneshot::Receiver<Wake>)>| -> Vec<i64> {
            rxs.iter_mut()
                .filter_map(|(n, rx)| (rx.try_recv() == Ok(Wake::Due)).then_some(*n))
                .collect()
        };
        w.release_all();
        let t = Instant::now();
        assert_eq!(w.wake_wave(t), 2 * WAVE);
        let first = woken_now(&mut rxs);
        assert_eq!(first.len(), WAVE);
        // Commits come and go, and nodes not woken claim: nobody else is woken.
        assert_eq!(w.wake_wave(t + Duration::from_millis(1)), 2 * WAVE);
        w.claimed(1_000_000);
        for n in &first[..WAVE / 2 - 1] {
            w.claimed(*n);
        }
        assert_eq!(
            w.wake_wave(t + Duration::from_millis(2)),
            2 * WAVE,
            "half and one wait"
        );
        w.claimed(first[WAVE / 2 - 1]);
        assert_eq!(w.wake_wave(t + Duration::from_millis(3)), WAVE, "half came");
        assert_eq!(woken_now(&mut rxs).len(), WAVE);
        // The second wave never claims (its callers went away): the third goes after a while.
        let later = t + Duration::from_millis(3);
        assert_eq!(w.wake_wave(later + WAVE_PATIENCE / 2), WAVE);
        assert_eq!(w.wake_wave(later + WAVE_PATIENCE), 0);
        assert_eq!(woken_now(&mut rxs).len(), WAVE);
        assert_eq!(
            w.wake_wave(later + WAVE_PATIENCE),
            0,
            "nothing left to wake"
        );
    }
}
