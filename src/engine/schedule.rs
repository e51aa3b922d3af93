//! One deployment's scheduling state, kept up to date run by run, so that handing a node its
//! next run and recording a result cost what that node's runs cost, not what the whole
//! deployment costs. The rules are [`super::orchestrate`]'s (a node runs its runs one at a time
//! in order, a run waits for its dependencies, a concurrency key caps how many runs with it
//! run at once, sync-node stages complete when their dependencies are done); this module only
//! keeps the indexes that answer them quickly: a cursor per node on its first unfinished run,
//! a count of unfinished dependencies per stage, running runs per concurrency key, and totals.
//!
//! Pure and in memory: the store builds a [`Schedule`] from its rows, mirrors every status it
//! writes into it, and drops it whenever a transaction rolls back, so the database stays the
//! only truth.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::orchestrate::{Progress, RunStatus, RunView};
use super::state::Phase;
use super::steps::Location;

#[derive(Debug, Clone)]
struct Slot {
    node: Option<i64>,
    /// Position in its node's lane (or in the stage list).
    pos: usize,
    status: RunStatus,
    deps: Vec<i64>,
    concurrency: Option<String>,
    max_parallel: Option<u64>,
    timeout_s: u64,
    runs_on: Location,
}

/// The scheduling state of one deployment.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    runs: HashMap<i64, Slot>,
    /// Each node's runs in order, and the index of its first unfinished one.
    lanes: BTreeMap<i64, (Vec<i64>, usize)>,
    /// Sync-node runs in order.
    stages: Vec<i64>,
    /// For each run, the stages that wait for it.
    waiters: HashMap<i64, Vec<i64>>,
    /// For each stage, how many of its dependencies are not done.
    unmet: HashMap<i64, usize>,
    /// Pending stages whose dependencies are all done.
    ready: BTreeSet<(usize, i64)>,
    running_by_key: HashMap<String, u64>,
    not_done: usize,
    running: usize,
    /// Node runs that may start but no agent has taken, and since when (the `now` of the
    /// first [`Schedule::overdue`] that saw them due).
    due: HashMap<i64, i64>,
    /// Node runs that runs on other nodes wait for (cross-node waits): their end can make
    /// another node's run due.
    unblocks: std::collections::HashSet<i64>,
    /// What the changes since [`Schedule::take_released`] may have made due for agents other
    /// than the reporting one.
    released: Released,
}

/// What changes to a schedule may have made due for nodes other than the one whose agent
/// reported (whose agents may be waiting for work: `store::waiters`), so that only those are
/// looked at again: every node (a new or rebuilt schedule, a stage or a cross-node wait done),
/// a number of nodes (concurrency slots freed: that many can start), or named nodes (a master
/// run done, a run made pending again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Released {
    pub everyone: bool,
    pub slots: u64,
    pub nodes: BTreeSet<i64>,
}

impl Released {
    pub fn is_empty(&self) -> bool {
        !self.everyone && self.slots == 0 && self.nodes.is_empty()
    }
}

/// A run its node's agent has not taken in time ([`Schedule::overdue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overdue {
    pub run: i64,
    /// When it was first seen due.
    pub since: i64,
    /// How long it could wait: its timeout, or the boot timeout.
    pub limit_s: u64,
    /// The limit was the boot timeout: its node had to boot before it could take it, and
    /// that is longer than its own timeout.
    pub for_boot: bool,
}

impl Schedule {
    pub fn new(views: Vec<RunView>) -> Schedule {
        let mut s = Schedule {
            released: Released {
                everyone: true,
                ..Released::default()
            },
            ..Schedule::default()
        };
        let mut lanes: BTreeMap<i64, Vec<(u32, i64)>> = BTreeMap::new();
        let mut stages: Vec<(u32, i64)> = Vec::new();
        for v in views {
            match v.node {
                Some(n) => lanes.entry(n).or_default().push((v.seq, v.id)),
                None => stages.push((v.seq, v.id)),
            }
            s.runs.insert(
                v.id,
                Slot {
                    node: v.node,
                    pos: 0,
                    status: v.status,
                    deps: v.deps,
                    concurrency: v.concurrency,
                    max_parallel: v.max_parallel,
                    timeout_s: v.timeout_s,
                    runs_on: v.runs_on,
                },
            );
        }
        stages.sort_unstable();
        s.stages = stages.into_iter().map(|(_, id)| id).collect();
        for (i, id) in s.stages.iter().enumerate() {
            if let Some(slot) = s.runs.get_mut(id) {
                slot.pos = i;
            }
        }
        for (node, mut lane) in lanes {
            lane.sort_unstable();
            let ids: Vec<i64> = lane.into_iter().map(|(_, id)| id).collect();
            for (i, id) in ids.iter().enumerate() {
                if let Some(slot) = s.runs.get_mut(id) {
                    slot.pos = i;
                }
            }
            s.lanes.insert(node, (ids, 0));
        }
        for slot in s.runs.values() {
            if !slot.status.is_done() {
                s.not_done += 1;
            }
            if slot.status == RunStatus::Running {
                s.running += 1;
                if let Some(k) = &slot.concurrency {
                    *s.running_by_key.entry(k.clone()).or_default() += 1;
                }
            }
        }
        for slot in s.runs.values() {
            if slot.node.is_some() {
                for d in &slot.deps {
                    if s.runs.get(d).is_some_and(|dep| dep.node != slot.node) {
                        s.unblocks.insert(*d);
                    }
                }
            }
        }
        for &stage in &s.stages {
            let Some(slot) = s.runs.get(&stage) else {
                continue;
            };
            let mut unmet = 0;
            for d in &slot.deps {
                if let Some(dep) = s.runs.get(d) {
                    s.waiters.entry(*d).or_default().push(stage);
                    if !dep.status.is_done() {
                        unmet += 1;
                    }
                }
            }
            if unmet == 0 && slot.status == RunStatus::Pending {
                s.ready.insert((slot.pos, stage));
            }
            s.unmet.insert(stage, unmet);
        }
        let nodes: Vec<i64> = s.lanes.keys().copied().collect();
        for n in nodes {
            s.advance_lane(n);
        }
        s
    }

    fn advance_lane(&mut self, node: i64) {
        let Some((ids, cursor)) = self.lanes.get_mut(&node) else {
            return;
        };
        while let Some(id) = ids.get(*cursor) {
            if self.runs.get(id).is_some_and(|s| s.status.is_done()) {
                *cursor += 1;
            } else {
                break;
            }
        }
    }

    fn deps_done(&self, slot: &Slot) -> bool {
        slot.deps
            .iter()
            .all(|d| self.runs.get(d).is_none_or(|s| s.status.is_done()))
    }

    /// The node's first unfinished run.
    fn head(&self, node: i64) -> Option<(i64, &Slot)> {
        let (ids, cursor) = self.lanes.get(&node)?;
        let id = *ids.get(*cursor)?;
        Some((id, self.runs.get(&id)?))
    }

    fn may_start(&self, slot: &Slot, extra: &HashMap<&str, u64>) -> bool {
        if slot.status != RunStatus::Pending || !self.deps_done(slot) {
            return false;
        }
        match (&slot.concurrency, slot.max_parallel) {
            (Some(k), Some(max)) => {
                let running = self.running_by_key.get(k).copied().unwrap_or(0)
                    + extra.get(k.as_str()).copied().unwrap_or(0);
                running < max
            }
            _ => true,
        }
    }

    /// What `node` should run now: the run it is running (its agent asks again after a
    /// restart), or its next run if that may start.
    pub fn next_for(&self, node: i64) -> Option<i64> {
        let (id, slot) = self.head(node)?;
        if slot.status == RunStatus::Running || self.may_start(slot, &HashMap::new()) {
            Some(id)
        } else {
            None
        }
    }

    /// Which agent may take run `id`.
    pub fn runs_on(&self, id: i64) -> Option<Location> {
        self.runs.get(&id).map(|s| s.runs_on)
    }

    /// Whether every provisioning run of `node` is done: a node's runs are ordered phase
    /// first, so its first unfinished run, if any, is a deployment run.
    pub fn provisioned(&self, node: i64) -> bool {
        self.head(node)
            .is_none_or(|(_, slot)| slot.runs_on.phase() == Phase::Deploy)
    }

    /// Record a run's new status.
    pub fn set(&mut self, id: i64, status: RunStatus) {
        let Some(slot) = self.runs.get_mut(&id) else {
            return;
        };
        let old = std::mem::replace(&mut slot.status, status);
        if old == status {
            return;
        }
        let (node, pos, key) = (slot.node, slot.pos, slot.concurrency.clone());
        let (capped, master) = (
            slot.max_parallel.is_some(),
            slot.runs_on == Location::Master,
        );
        if old == RunStatus::Running && capped && key.is_some() {
            self.released.slots += 1;
        }
        if status.is_done() && !old.is_done() {
            if self.unblocks.contains(&id) {
                self.released.everyone = true;
            } else if let (Some(n), true) = (node, master) {
                self.released.nodes.insert(n);
            }
        } else if status == RunStatus::Pending {
            // Made pending again (a retry): its node may take it.
            match node {
                Some(n) => {
                    self.released.nodes.insert(n);
                }
                None => self.released.everyone = true,
            }
        }
        if old == RunStatus::Running {
            self.running = self.running.saturating_sub(1);
            if let Some(n) = key.as_ref().and_then(|k| self.running_by_key.get_mut(k)) {
                *n = n.saturating_sub(1);
            }
        }
        if status == RunStatus::Running {
            self.running += 1;
            if let Some(k) = key {
                *self.running_by_key.entry(k).or_default() += 1;
            }
        }
        if old.is_done() != status.is_done() {
            if status.is_done() {
                self.not_done = self.not_done.saturating_sub(1);
            } else {
                self.not_done += 1;
            }
            let waiters = self.waiters.get(&id).cloned().unwrap_or_default();
            for stage in waiters {
                let Some(n) = self.unmet.get_mut(&stage) else {
                    continue;
                };
                if status.is_done() {
                    *n = n.saturating_sub(1);
                } else {
                    *n += 1;
                }
                let n = *n;
                self.refresh_stage(stage, n);
            }
        }
        match node {
            None => {
                let n = self.unmet.get(&id).copied().unwrap_or(0);
                self.refresh_stage(id, n);
            }
            Some(n) => {
                if let Some((_, cursor)) = self.lanes.get_mut(&n)
                    && !status.is_done()
                    && pos < *cursor
                {
                    // A finished run became unfinished again (a retry): the lane resumes there.
                    *cursor = pos;
                }
                self.advance_lane(n);
            }
        }
    }

    fn refresh_stage(&mut self, stage: i64, unmet: usize) {
        let Some(slot) = self.runs.get(&stage) else {
            return;
        };
        let key = (slot.pos, stage);
        if unmet == 0 && slot.status == RunStatus::Pending {
            self.ready.insert(key);
        } else {
            self.ready.remove(&key);
        }
    }

    /// What the changes since the last call may have made due for other nodes' agents (see
    /// [`Released`]); starts afresh.
    pub fn take_released(&mut self) -> Released {
        std::mem::take(&mut self.released)
    }

    /// Pending sync-node stages whose dependencies are all done, in order: the caller
    /// completes them itself.
    pub fn ready_stages(&self) -> Vec<i64> {
        self.ready.iter().map(|(_, id)| *id).collect()
    }

    /// Whether every run of `node` is done (succeeded or skipped).
    pub fn node_done(&self, node: i64) -> bool {
        self.lanes
            .get(&node)
            .is_some_and(|(ids, cursor)| *cursor >= ids.len())
    }

    /// The nodes this deployment drives.
    pub fn nodes(&self) -> impl Iterator<Item = i64> + '_ {
        self.lanes.keys().copied()
    }

    /// Every run that may start now, in a stable order: ready stages first, then each node's
    /// next run by node id, concurrency caps counted as they are handed out.
    pub fn runnable(&self) -> Vec<i64> {
        let mut out = self.ready_stages();
        let mut extra: HashMap<&str, u64> = HashMap::new();
        for &node in self.lanes.keys() {
            let Some((id, slot)) = self.head(node) else {
                continue;
            };
            if self.may_start(slot, &extra) {
                if let (Some(k), Some(_)) = (&slot.concurrency, slot.max_parallel) {
                    *extra.entry(k.as_str()).or_default() += 1;
                }
                out.push(id);
            }
        }
        out
    }

    /// Node runs that have been due (free to start, waiting only for their node's agent to
    /// take them) for longer than they may wait at `now`, with since when and that limit: an
    /// agent that is gone, or the wrong agent (the bootstrap's when the step runs on the
    /// installed OS), never takes them, and they must fail rather than wait forever. A run may
    /// wait its timeout, or `boot_s` when that is longer and its node must boot before it can
    /// take it ([`Overdue::for_boot`]): a real server's firmware and OS take minutes to come up,
    /// which a task's timeout (counted once an agent takes it) is not meant to cover. The
    /// first call that sees a run due starts its clock; a schedule built again (after a
    /// restart) starts them again, which only gives the agents more time.
    pub fn overdue(&mut self, now: i64, boot_s: u64) -> Vec<Overdue> {
        let due: Vec<i64> = self
            .runnable()
            .into_iter()
            .filter(|id| self.runs.get(id).is_some_and(|s| s.node.is_some()))
            .collect();
        let mut kept = HashMap::with_capacity(due.len());
        let mut out = Vec::new();
        for id in due {
            let since = self.due.get(&id).copied().unwrap_or(now);
            kept.insert(id, since);
            let timeout = self.runs.get(&id).map_or(0, |s| s.timeout_s);
            let for_boot = boot_s > timeout && self.boots_before(id);
            let limit_s = if for_boot { boot_s } else { timeout };
            if now.saturating_sub(since) > limit_s as i64 {
                out.push(Overdue {
                    run: id,
                    since,
                    limit_s,
                    for_boot,
                });
            }
        }
        self.due = kept;
        out
    }

    /// Whether run `id`'s node boots before its agent can take it: the run is an agent's (the
    /// bootstrap's or the installed OS's) and the last run before it in its node's lane that
    /// was not skipped (a skipped one rebooted nothing) runs elsewhere: a power step of the
    /// master (the node boots the network), `reboot_to_disk` in the ramdisk (it boots its
    /// disk), or any step that hands the node to its other agent.
    fn boots_before(&self, id: i64) -> bool {
        let Some(slot) = self.runs.get(&id) else {
            return false;
        };
        let Some((ids, _)) = slot.node.and_then(|n| self.lanes.get(&n)) else {
            return false;
        };
        slot.runs_on != Location::Master
            && ids[..slot.pos]
                .iter()
                .rev()
                .filter_map(|prev| self.runs.get(prev))
                .find(|prev| prev.status != RunStatus::Skipped)
                .is_some_and(|prev| prev.runs_on != slot.runs_on)
    }

    /// Where the deployment stands. Cheap while something runs; otherwise it looks for a run
    /// that may start.
    pub fn progress(&self) -> Progress {
        if self.not_done == 0 {
            return Progress::Done;
        }
        if self.running > 0 || !self.ready.is_empty() {
            return Progress::Going;
        }
        let none = HashMap::new();
        let startable = self
            .lanes
            .keys()
            .any(|&n| self.head(n).is_some_and(|(_, s)| self.may_start(s, &none)));
        if startable {
            Progress::Going
        } else {
            Progress::Stuck
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RunStatus::*;

    fn v(id: i64, node: Option<i64>, seq: u32, status: RunStatus, deps: &[i64]) -> RunView {
        RunView {
            id,
            node,
            seq,
            status,
            deps: deps.to_vec(),
            concurrency: None,
            max_parallel: None,
            timeout_s: 10,
            runs_on: Location::Os,
        }
    }

    /// The rules as a schedule built from `runs` states them.
    fn runnable(runs: &[RunView]) -> Vec<i64> {
        Schedule::new(runs.to_vec()).runnable()
    }

    fn progress(runs: &[RunView]) -> Progress {
        Schedule::new(runs.to_vec()).progress()
    }

    fn capped(mut r: RunView, key: &str, max: u64) -> RunView {
        r.concurrency = Some(key.into());
        r.max_parallel = Some(max);
        r
    }

    #[test]
    fn a_node_runs_in_order_and_waits_for_other_nodes() {
        // Node 1: 1, 2. Node 2: 3 (waits for 2), 4.
        let mut s = Schedule::new(vec![
            v(2, Some(1), 2, Pending, &[]),
            v(1, Some(1), 1, Pending, &[]),
            v(3, Some(2), 1, Pending, &[2]),
            v(4, Some(2), 2, Pending, &[]),
        ]);
        assert_eq!(s.next_for(1), Some(1));
        assert_eq!(s.next_for(2), None);
        s.set(1, Running);
        assert_eq!(s.next_for(1), Some(1), "a running run is handed again");
        s.set(1, Ok);
        assert_eq!(s.next_for(1), Some(2));
        s.set(2, Ok);
        assert!(s.node_done(1));
        assert_eq!(s.next_for(2), Some(3));
        assert_eq!(s.progress(), Progress::Going);
        s.set(3, Skipped);
        s.set(4, Ok);
        assert_eq!(s.progress(), Progress::Done);
    }

    #[test]
    fn stages_become_ready_when_their_dependencies_are_done() {
        let mut s = Schedule::new(vec![
            v(10, None, 1, Pending, &[]),
            v(1, Some(1), 1, Pending, &[10]),
            v(2, Some(2), 1, Pending, &[10]),
            v(11, None, 2, Pending, &[1, 2]),
            v(3, Some(1), 2, Pending, &[11]),
        ]);
        assert_eq!(s.ready_stages(), vec![10]);
        assert_eq!(s.next_for(1), None);
        s.set(10, Ok);
        assert!(s.ready_stages().is_empty());
        s.set(1, Ok);
        assert!(s.ready_stages().is_empty());
        s.set(2, Ok);
        assert_eq!(s.ready_stages(), vec![11]);
        s.set(11, Ok);
        assert_eq!(s.next_for(1), Some(3));
        // A retry makes a finished run unfinished again: the stage waits again.
        s.set(2, Pending);
        assert_eq!(s.unmet.get(&11), Some(&1));
    }

    #[test]
    fn a_concurrency_cap_holds_across_nodes() {
        let mut s = Schedule::new(vec![
            capped(v(1, Some(1), 1, Pending, &[]), "provision", 1),
            capped(v(2, Some(2), 1, Pending, &[]), "provision", 1),
        ]);
        assert_eq!(s.runnable(), vec![1]);
        s.set(1, Running);
        assert_eq!(s.next_for(2), None);
        s.set(1, Ok);
        assert_eq!(s.next_for(2), Some(2));
    }

    #[test]
    fn a_failure_with_nothing_else_to_do_is_stuck() {
        let mut s = Schedule::new(vec![
            v(1, Some(1), 1, Pending, &[]),
            v(2, Some(2), 1, Pending, &[1]),
        ]);
        s.set(1, Running);
        s.set(1, Failed);
        assert_eq!(s.progress(), Progress::Stuck);
        assert_eq!(s.next_for(1), None);
        s.set(1, Pending);
        assert_eq!(s.progress(), Progress::Going);
        assert_eq!(s.next_for(1), Some(1));
    }

    #[test]
    fn kept_up_to_date_it_agrees_with_one_built_from_scratch() {
        // A small deployment walked run by run: after each change, the incremental schedule
        // answers what a schedule built afresh from the same statuses answers.
        let views = vec![
            v(10, None, 1, Pending, &[]),
            capped(v(1, Some(1), 1, Pending, &[10]), "provision", 1),
            capped(v(4, Some(2), 1, Pending, &[10]), "provision", 1),
            v(2, Some(1), 2, Pending, &[]),
            v(5, Some(2), 2, Pending, &[2]),
            v(11, None, 2, Pending, &[2, 5]),
            v(3, Some(1), 3, Pending, &[11]),
            v(6, Some(2), 3, Pending, &[11]),
        ];
        let mut live = Schedule::new(views.clone());
        let mut statuses: HashMap<i64, RunStatus> =
            views.iter().map(|r| (r.id, r.status)).collect();
        let fresh = |statuses: &HashMap<i64, RunStatus>| {
            Schedule::new(
                views
                    .iter()
                    .map(|r| RunView {
                        status: statuses[&r.id],
                        ..r.clone()
                    })
                    .collect(),
            )
        };
        for _ in 0..20 {
            let f = fresh(&statuses);
            assert_eq!(live.runnable(), f.runnable());
            assert_eq!(live.progress(), f.progress());
            let Some(&id) = live.runnable().first() else {
                break;
            };
            for status in [Running, Ok] {
                if live.runs[&id].status == Pending && live.runs[&id].node.is_none() {
                    live.set(id, Ok);
                    statuses.insert(id, Ok);
                    break;
                }
                live.set(id, status);
                statuses.insert(id, status);
                let f = fresh(&statuses);
                for n in [1, 2] {
                    assert_eq!(live.next_for(n), f.next_for(n), "node {n}");
                    assert_eq!(live.node_done(n), f.node_done(n));
                }
            }
        }
        assert_eq!(live.progress(), Progress::Done);
    }

    #[test]
    fn one_step_at_a_time_per_node_in_order() {
        let runs = [
            v(1, Some(1), 0, Ok, &[]),
            v(2, Some(1), 1, Pending, &[]),
            v(3, Some(1), 2, Pending, &[]),
            v(4, Some(2), 0, Running, &[]),
            v(5, Some(2), 1, Pending, &[]),
        ];
        assert_eq!(runnable(&runs), [2]);
        assert_eq!(progress(&runs), Progress::Going);
    }

    #[test]
    fn cross_node_dependencies_and_stages_wait() {
        let mut runs = vec![
            v(1, None, 0, Pending, &[2, 4]),
            v(2, Some(1), 0, Ok, &[]),
            v(3, Some(1), 1, Pending, &[1]),
            v(4, Some(2), 0, Pending, &[]),
        ];
        assert_eq!(runnable(&runs), [4], "the stage waits for node 2");
        runs[3].status = Ok;
        assert_eq!(runnable(&runs), [1], "now the stage, then node 1 goes on");
        runs[0].status = Ok;
        assert_eq!(runnable(&runs), [3]);
    }

    #[test]
    fn a_failure_stops_its_node_and_what_waits_for_it() {
        let runs = [
            v(1, Some(1), 0, Failed, &[]),
            v(2, Some(1), 1, Pending, &[]),
            v(3, Some(2), 0, Pending, &[1]),
        ];
        assert!(runnable(&runs).is_empty());
        assert_eq!(progress(&runs), Progress::Stuck);
    }

    #[test]
    fn concurrency_keys_cap_running_runs() {
        let key = |mut r: RunView| {
            r.concurrency = Some("provision".into());
            r.max_parallel = Some(2);
            r
        };
        let runs = [
            key(v(1, Some(1), 0, Running, &[])),
            key(v(2, Some(2), 0, Pending, &[])),
            key(v(3, Some(3), 0, Pending, &[])),
        ];
        assert_eq!(runnable(&runs), [2], "one more fits under the cap of 2");
    }

    #[test]
    fn done_when_everything_is_ok_or_skipped() {
        let runs = [v(1, Some(1), 0, Ok, &[]), v(2, Some(1), 1, Skipped, &[])];
        assert_eq!(progress(&runs), Progress::Done);
        assert!(runnable(&runs).is_empty());
    }

    #[test]
    fn a_due_run_nobody_takes_is_overdue_after_its_timeout_and_a_taken_one_never() {
        let mut s = Schedule::new(vec![
            v(1, Some(7), 0, Pending, &[]),
            v(2, Some(7), 1, Pending, &[]),
            v(3, Some(8), 0, Pending, &[]),
            v(4, None, 0, Pending, &[1]),
        ]);
        // Runs 1 and 3 are due from t=100; 2 waits behind 1, the stage waits for 1.
        let over = |s: &mut Schedule, now| -> Vec<(i64, i64)> {
            s.overdue(now, 1800)
                .into_iter()
                .map(|o| {
                    assert_eq!((o.limit_s, o.for_boot), (10, false), "{o:?}");
                    (o.run, o.since)
                })
                .collect()
        };
        assert!(over(&mut s, 100).is_empty());
        assert!(over(&mut s, 110).is_empty(), "10 s is within the timeout");
        s.set(3, Running);
        assert_eq!(over(&mut s, 111), [(1, 100)], "3 was taken; 1 is overdue");
        // Failed and retried: due again from the retry, not from the first time.
        s.set(1, Failed);
        assert!(over(&mut s, 112).is_empty());
        s.set(1, Pending);
        assert!(over(&mut s, 113).is_empty());
        assert_eq!(over(&mut s, 124), [(1, 113)]);
    }

    /// A run its node must boot for (the last run before it that ran went elsewhere: the
    /// master powered the node on, or the ramdisk rebooted it to its disk) may wait the boot
    /// timeout when that is longer than its own; once a run of the same agent came before it,
    /// or only skipped runs elsewhere, only its own.
    #[test]
    fn a_run_after_a_boot_may_wait_the_boot_timeout() {
        let at = |loc, r: RunView| RunView { runs_on: loc, ..r };
        let mut s = Schedule::new(vec![
            at(Location::Master, v(1, Some(7), 0, Pending, &[])),
            at(Location::Ramdisk, v(2, Some(7), 1, Pending, &[])),
            at(Location::Ramdisk, v(3, Some(7), 2, Pending, &[])),
            v(4, Some(7), 3, Pending, &[]),
            v(5, Some(7), 4, Pending, &[]),
            // Node 8's lane starts on the installed OS: nothing boots before it.
            v(6, Some(8), 0, Pending, &[]),
            // Node 9's ramdisk run was skipped: its OS run follows an OS run that ran.
            v(7, Some(9), 0, Ok, &[]),
            at(Location::Ramdisk, v(8, Some(9), 1, Skipped, &[])),
            v(9, Some(9), 2, Pending, &[]),
        ]);
        let over = |s: &mut Schedule, now, boot| -> Vec<(i64, u64, bool)> {
            s.overdue(now, boot)
                .into_iter()
                .map(|o| (o.run, o.limit_s, o.for_boot))
                .collect()
        };
        // The master's own run, a lane's first run and one after only a skipped run elsewhere
        // never wait for a boot.
        assert!(over(&mut s, 100, 300).is_empty());
        assert_eq!(
            over(&mut s, 111, 300),
            [(1, 10, false), (6, 10, false), (9, 10, false)]
        );
        s.set(1, Ok);
        s.set(6, Ok);
        s.set(9, Ok);
        // Run 2 follows the master's power step: the node boots the network first.
        assert!(over(&mut s, 200, 300).is_empty());
        assert!(over(&mut s, 500, 300).is_empty(), "300 s is the limit");
        assert_eq!(over(&mut s, 501, 300), [(2, 300, true)]);
        s.set(2, Ok);
        // Run 3 follows a ramdisk run: its own timeout.
        assert!(over(&mut s, 600, 300).is_empty());
        assert_eq!(over(&mut s, 611, 300), [(3, 10, false)]);
        s.set(3, Ok);
        // Run 4 waits for the installed OS to boot; a boot timeout shorter than its own
        // timeout changes nothing.
        assert!(over(&mut s, 700, 5).is_empty());
        assert!(over(&mut s, 710, 5).is_empty());
        assert_eq!(over(&mut s, 711, 5), [(4, 10, false)]);
        s.set(4, Ok);
        assert!(over(&mut s, 800, 300).is_empty());
        assert_eq!(over(&mut s, 811, 300), [(5, 10, false)]);
    }

    #[test]
    fn a_node_is_provisioned_once_its_first_unfinished_run_is_a_deployment_run() {
        let ramdisk = |mut r: RunView| {
            r.runs_on = Location::Ramdisk;
            r
        };
        let mut s = Schedule::new(vec![
            ramdisk(v(1, Some(7), 0, Pending, &[])),
            ramdisk(v(2, Some(7), 1, Pending, &[])),
            v(3, Some(7), 2, Pending, &[]),
        ]);
        assert_eq!(s.runs_on(1), Some(Location::Ramdisk));
        assert_eq!(s.runs_on(3), Some(Location::Os));
        assert!(!s.provisioned(7));
        s.set(1, Ok);
        assert!(!s.provisioned(7));
        s.set(2, Ok);
        assert!(s.provisioned(7));
        s.set(3, Ok);
        assert!(s.provisioned(7), "a node with nothing left");
    }
}
