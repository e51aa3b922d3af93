//! Whether a running deployment is waiting on agents that have gone. A node is waiting for its
//! agent when one of its runs may start now (the schedule hands it out: its lane's head, its
//! dependencies done, under its concurrency cap), the run is an agent's (not the master's BMC
//! steps), and the agent has not called within the online window ([`ONLINE_WINDOW_S`]): every
//! agent call is its heartbeat, so an agent that is up takes a due run within seconds. The wait
//! counts from the agent's last call, or from the deployment's start when the agent was last
//! seen before it. Runs already running are not counted: an agent executing a long step may be
//! silent. The runs themselves fail at their step timeout (the store's `expire_untaken`); this
//! only says what the deployment is waiting for meanwhile.
//!
//! Its message names the node as the dashboard does, by its name ("waiting for the agent of
//! node-3 since …" for a node named node-3); the node's id is beside it (`node_id`).
//!
//! Pure: the caller reads the runs, the agents' last calls, the nodes' names and the clock.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::orchestrate::RunView;
use super::schedule::Schedule;
use super::steps::Location;
use crate::model::node::ONLINE_WINDOW_S;

/// A node whose due run waits for its agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiting {
    pub node_id: i64,
    /// Its name, as the dashboard shows it.
    pub node_name: String,
    /// The run it waits to hand out (the first, when several are due).
    pub run_id: i64,
    /// Since when the deployment has waited for this agent.
    pub since: i64,
    /// The agent's last call (0: never).
    pub last_seen: i64,
    /// "waiting for the agent of node-3 since 2026-11-25 12:04:00 UTC", by the node's name.
    pub message: String,
}

/// What the caller read of a node: its agent's last call (0: never) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub last_seen: i64,
    pub name: String,
}

/// Whether an agent last seen at `last_seen` (0: never) is silent at `now`: no call within the
/// online window, that is a last call before [`silent_before`]`(now)`.
pub fn silent(last_seen: i64, now: i64) -> bool {
    last_seen < silent_before(now)
}

/// The last call before which an agent is silent at `now`. When no node with a run in the
/// deployment was last seen before it, [`waiting`] is empty, and its caller need not read the
/// runs (nor the nodes) at all: the store asks that of the database in one query.
pub fn silent_before(now: i64) -> i64 {
    now.saturating_sub(ONLINE_WINDOW_S)
}

/// The nodes a running deployment started at `started_at` waits on at `now`, by node id;
/// `nodes` holds each node's agent's last call and the node's name (one missing: never seen,
/// named `node-<id>`).
pub fn waiting(
    views: Vec<RunView>,
    started_at: i64,
    nodes: &HashMap<i64, Agent>,
    now: i64,
) -> Vec<Waiting> {
    let agents: HashMap<i64, i64> = views
        .iter()
        .filter(|v| v.runs_on != Location::Master)
        .filter_map(|v| v.node.map(|n| (v.id, n)))
        .collect();
    let schedule = Schedule::new(views);
    let mut out: BTreeMap<i64, Waiting> = BTreeMap::new();
    for run in schedule.runnable() {
        let Some(&node) = agents.get(&run) else {
            continue;
        };
        let known = nodes.get(&node);
        let seen = known.map_or(0, |a| a.last_seen);
        if !silent(seen, now) || out.contains_key(&node) {
            continue;
        }
        let since = seen.max(started_at);
        let name = known.map_or_else(|| format!("node-{node}"), |a| a.name.clone());
        out.insert(
            node,
            Waiting {
                node_id: node,
                message: format!(
                    "waiting for the agent of {name} since {}",
                    crate::model::utc(since)
                ),
                node_name: name,
                run_id: run,
                since,
                last_seen: seen,
            },
        );
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::orchestrate::RunStatus;

    fn run(id: i64, node: i64, seq: u32, status: RunStatus, runs_on: Location) -> RunView {
        RunView {
            id,
            node: Some(node),
            seq,
            status,
            deps: Vec::new(),
            concurrency: None,
            max_parallel: None,
            timeout_s: 600,
            runs_on,
        }
    }

    #[test]
    fn silent_means_last_seen_before_the_cutoff_the_store_asks_with() {
        let now = 1_000_000;
        assert_eq!(silent_before(now), now - ONLINE_WINDOW_S);
        assert!(
            !silent(now - ONLINE_WINDOW_S, now),
            "a call exactly a window ago"
        );
        assert!(silent(now - ONLINE_WINDOW_S - 1, now));
        assert!(silent(0, now), "never seen");
        assert!(!silent(now + 5, now), "a clock that stepped back");
        assert_eq!(silent_before(i64::MIN + 1), i64::MIN, "no overflow");
    }

    #[test]
    fn only_due_runs_of_silent_agents_are_waited_on() {
        let views = vec![
            // node 1: done one step, the next due, agent silent for a minute.
            run(1, 1, 0, RunStatus::Ok, Location::Ramdisk),
            run(2, 1, 1, RunStatus::Pending, Location::Ramdisk),
            // node 2: due, agent called 5 s ago.
            run(3, 2, 0, RunStatus::Pending, Location::Ramdisk),
            // node 3: running a long step, agent silent: not waiting.
            run(4, 3, 0, RunStatus::Running, Location::Ramdisk),
            run(5, 3, 1, RunStatus::Pending, Location::Ramdisk),
            // node 4: its due run is the master's (a BMC step): not the agent's.
            run(6, 4, 0, RunStatus::Pending, Location::Master),
            // node 5: never seen, its run due since the start.
            run(7, 5, 0, RunStatus::Pending, Location::Os),
        ];
        let agent = |last_seen: i64, name: &str| Agent {
            last_seen,
            name: name.to_string(),
        };
        let seen = HashMap::from([
            (1, agent(1_000, "rack1-ctl")),
            (2, agent(1_055, "node-2")),
            (3, agent(900, "node-3")),
            (4, agent(0, "node-4")),
            (5, agent(0, "node-5")),
        ]);
        let w = waiting(views.clone(), 950, &seen, 1_060);
        let got: Vec<(i64, i64, i64)> = w.iter().map(|w| (w.node_id, w.run_id, w.since)).collect();
        assert_eq!(got, vec![(1, 2, 1_000), (5, 7, 950)]);
        // Named as the dashboard names them; the id beside.
        assert_eq!(
            w[0].message,
            "waiting for the agent of rack1-ctl since 1970-01-01 00:16:40 UTC"
        );
        assert_eq!((w[0].node_id, w[0].node_name.as_str()), (1, "rack1-ctl"));
        assert_eq!(
            w[1].message,
            "waiting for the agent of node-5 since 1970-01-01 00:15:50 UTC"
        );
        // A node the caller found nothing of: never seen, named by its id.
        let w = waiting(views, 950, &HashMap::new(), 1_060);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w[0].message
                .starts_with("waiting for the agent of node-1 since ")
        );
        // Within the online window nobody is waited on.
        let views = vec![run(2, 1, 1, RunStatus::Pending, Location::Ramdisk)];
        let seen = HashMap::from([(1, agent(1_000, "rack1-ctl"))]);
        assert!(waiting(views, 950, &seen, 1_000 + ONLINE_WINDOW_S).is_empty());
    }
}
