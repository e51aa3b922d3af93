//! Where a followed deployment stands, from one snapshot to the next, without I/O: each
//! node's steps done of its steps, its current step and whether it failed; which failures are
//! new (a run that fails again after a retry is new again: its attempt changed); the waiting
//! message when it changes; and whether the deployment has ended, and how.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

/// A deployment as a follower sees it: the head of `GET /api/v1/deployments/{id}/runs?brief=1`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Head {
    pub id: i64,
    #[serde(default)]
    pub status: String,
    /// Why it waits (agents gone silent), when it does.
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub created_at: Option<i64>,
    #[serde(default)]
    pub finished_at: Option<i64>,
}

/// One run, without its arguments and output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RunHead {
    pub id: i64,
    #[serde(default)]
    pub node_id: Option<i64>,
    #[serde(default)]
    pub interface: String,
    #[serde(default)]
    pub step: String,
    #[serde(default)]
    pub task: Option<String>,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default)]
    pub exit_code: Option<i64>,
    #[serde(default)]
    pub error: Option<String>,
}

impl RunHead {
    /// Its graph task, else `interface.step`.
    pub fn name(&self) -> String {
        self.task
            .clone()
            .unwrap_or_else(|| format!("{}.{}", self.interface, self.step))
    }

    fn finished(&self) -> bool {
        matches!(self.status.as_str(), "ok" | "failed" | "skipped")
    }
}

/// How a deployment stands at one poll.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub deployment: Head,
    pub runs: Vec<RunHead>,
    /// The answer as it came, for `-o json|yaml`.
    pub raw: Value,
}

impl Snapshot {
    /// From the answer of `GET /api/v1/deployments/{id}/runs`.
    pub fn parse(raw: Value) -> Result<Snapshot, serde_json::Error> {
        Ok(Snapshot {
            deployment: Head::deserialize(&raw["deployment"])?,
            runs: Vec::<RunHead>::deserialize(&raw["runs"])?,
            raw,
        })
    }
}

/// Where one node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Its next step is not due yet.
    Waiting,
    Running,
    Done,
    Failed,
}

/// One node's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeProgress {
    pub node: i64,
    pub total: usize,
    pub done: usize,
    /// The step running now, or the one that failed.
    pub current: Option<String>,
    pub state: NodeState,
}

/// What changed since the last snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Node(NodeProgress),
    /// A run failed (this attempt of it).
    Failed(RunHead),
    /// The deployment's waiting message changed (`None`: it no longer waits).
    Waiting(Option<String>),
}

/// How a followed deployment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// `done`, or a dry run recorded.
    Done,
    /// `error` or `aborted`.
    Failed,
}

/// Whether status `s` is a deployment's end, and which.
pub fn end_of(status: &str) -> Option<End> {
    match status {
        "done" | "dry_run" => Some(End::Done),
        "error" | "aborted" => Some(End::Failed),
        _ => None,
    }
}

/// The follower's memory between snapshots.
#[derive(Debug, Default)]
pub struct Progress {
    nodes: BTreeMap<i64, NodeProgress>,
    failures: BTreeSet<(i64, u32)>,
    waiting: Option<String>,
    started: bool,
}

impl Progress {
    /// What changed from the last snapshot to `s` (on the first, everything).
    pub fn update(&mut self, s: &Snapshot) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut per_node: BTreeMap<i64, Vec<&RunHead>> = BTreeMap::new();
        for r in &s.runs {
            if let Some(n) = r.node_id {
                per_node.entry(n).or_default().push(r);
            }
        }
        for (node, runs) in per_node {
            let now = node_progress(node, &runs);
            if self.nodes.get(&node) != Some(&now) {
                changes.push(Change::Node(now.clone()));
                self.nodes.insert(node, now);
            }
        }
        for r in s.runs.iter().filter(|r| r.status == "failed") {
            if self.failures.insert((r.id, r.attempt)) {
                changes.push(Change::Failed(r.clone()));
            }
        }
        let waiting = s
            .deployment
            .message
            .clone()
            .filter(|_| s.deployment.status == "running");
        if waiting != self.waiting && (self.started || waiting.is_some()) {
            changes.push(Change::Waiting(waiting.clone()));
        }
        self.waiting = waiting;
        self.started = true;
        changes
    }
}

fn node_progress(node: i64, runs: &[&RunHead]) -> NodeProgress {
    let done = runs.iter().filter(|r| r.finished()).count();
    let failed = runs.iter().find(|r| r.status == "failed");
    let running = runs.iter().find(|r| r.status == "running");
    let (state, current) = match (failed, running) {
        (Some(f), _) => (NodeState::Failed, Some(f.name())),
        (None, Some(r)) => (NodeState::Running, Some(r.name())),
        (None, None) if done == runs.len() => (NodeState::Done, None),
        (None, None) => (NodeState::Waiting, None),
    };
    NodeProgress {
        node,
        total: runs.len(),
        done,
        current,
        state,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, node: i64, task: &str, status: &str, attempt: u32) -> RunHead {
        RunHead {
            id,
            node_id: Some(node),
            interface: "deploy".into(),
            step: "run_tasks".into(),
            task: Some(task.into()),
            status: status.into(),
            attempt,
            ..RunHead::default()
        }
    }

    fn snap(status: &str, runs: Vec<RunHead>) -> Snapshot {
        Snapshot {
            deployment: Head {
                id: 7,
                status: status.into(),
                ..Head::default()
            },
            runs,
            raw: Value::Null,
        }
    }

    #[test]
    fn nodes_report_steps_done_and_the_step_running() {
        let mut p = Progress::default();
        let first = p.update(&snap(
            "running",
            vec![
                run(1, 1, "a", "ok", 1),
                run(2, 1, "b", "running", 1),
                run(3, 2, "a", "pending", 0),
            ],
        ));
        assert_eq!(
            first,
            vec![
                Change::Node(NodeProgress {
                    node: 1,
                    total: 2,
                    done: 1,
                    current: Some("b".into()),
                    state: NodeState::Running
                }),
                Change::Node(NodeProgress {
                    node: 2,
                    total: 1,
                    done: 0,
                    current: None,
                    state: NodeState::Waiting
                }),
            ]
        );
        // The same again: nothing to say.
        assert!(
            p.update(&snap(
                "running",
                vec![
                    run(1, 1, "a", "ok", 1),
                    run(2, 1, "b", "running", 1),
                    run(3, 2, "a", "pending", 0)
                ],
            ))
            .is_empty()
        );
    }

    #[test]
    fn a_failure_is_told_once_per_attempt() {
        let mut p = Progress::default();
        let failed = run(2, 1, "keystone", "failed", 1);
        let c = p.update(&snap(
            "error",
            vec![run(1, 1, "a", "ok", 1), failed.clone()],
        ));
        assert!(c.contains(&Change::Failed(failed.clone())), "{c:?}");
        assert!(c.iter().any(
            |c| matches!(c, Change::Node(n) if n.state == NodeState::Failed
            && n.current.as_deref() == Some("keystone"))
        ));
        assert!(
            p.update(&snap("error", vec![run(1, 1, "a", "ok", 1), failed]))
                .is_empty()
        );
        // Retried, failed again: a new failure.
        let again = run(2, 1, "keystone", "failed", 2);
        let c = p.update(&snap("error", vec![run(1, 1, "a", "ok", 1), again.clone()]));
        assert_eq!(c, vec![Change::Failed(again)]);
        assert_eq!(end_of("error"), Some(End::Failed));
        assert_eq!(end_of("aborted"), Some(End::Failed));
        assert_eq!(end_of("done"), Some(End::Done));
        assert_eq!(end_of("running"), None);
    }

    #[test]
    fn the_waiting_message_is_told_when_it_changes() {
        let mut p = Progress::default();
        let mut s = snap("running", vec![run(1, 1, "a", "pending", 0)]);
        p.update(&s);
        s.deployment.message = Some("waiting for the agent of node-1".into());
        assert!(p.update(&s).contains(&Change::Waiting(Some(
            "waiting for the agent of node-1".into()
        ))));
        assert!(p.update(&s).is_empty());
        s.deployment.message = None;
        assert_eq!(p.update(&s), vec![Change::Waiting(None)]);
    }

    #[test]
    fn a_snapshot_parses_the_apis_answer() {
        let raw = serde_json::json!({
            "deployment": {"id": 3, "status": "running", "runs": {"total": 1}},
            "runs": [{"id": 9, "node_id": 2, "interface": "deploy", "step": "configure",
                      "task": null, "status": "running", "attempt": 1, "exit_code": null,
                      "error": null, "seq": 0}]
        });
        let s = Snapshot::parse(raw).unwrap();
        assert_eq!(s.deployment.id, 3);
        assert_eq!(s.runs[0].name(), "deploy.configure");
    }
}
