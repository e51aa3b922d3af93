//! Orchestration decisions for one deployment: which runs it is made of, with the waits and
//! concurrency keys that [`super::schedule`] applies to decide which may start. A *run* is one deploy step of one node (`deploy.write_image`, `deploy.configure`, each
//! graph task of `deploy.run_tasks`, `power.reboot_to_disk`, ...), or a stage of the sync node
//! (a barrier the master completes itself when everything before it is done).
//!
//! Rules: a node runs one step at a time, in its order; a failed run stops its node; a run
//! waits for its cross-node dependencies (from the plan's `requires` on other nodes and on the
//! sync node); a concurrency key (a task's strategy, or `provision` for the cap on concurrent
//! image writes) caps how many runs with that key are running at once. A plan's group wait
//! (a task on every node of a role set, [`crate::engine::graph::Group`]) is one *barrier* run
//! of the sync node (step `deploy.barrier`, its task the group's id) that depends on the
//! group's runs and completes itself like a stage: each run that waits for the group depends
//! on the barrier only, so N runs waiting for N others are 2N dependencies, not N². Pure: the caller stores
//! runs, keeps their [`super::schedule::Schedule`], sends them to agents and feeds their
//! states back.

use std::collections::{BTreeMap, HashMap};

use serde::{Serialize, Serializer};
use serde_json::{Value as J, json};

use super::graph::plan::Shared;
use super::graph::{Group, Plan, Status, Step};
use super::steps::{Location, PlannedStep};

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    Pending,
    Running,
    Ok,
    Failed,
    Skipped,
}

impl RunStatus {
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Ok,
        RunStatus::Failed,
        RunStatus::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Finished in a way that lets what depends on it go on.
    pub fn is_done(self) -> bool {
        matches!(self, RunStatus::Ok | RunStatus::Skipped)
    }
}

/// A run to create. `deps` are indices into the list it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// `None`: the sync node.
    pub node: Option<i64>,
    pub seq: u32,
    pub interface: String,
    pub step: String,
    /// The graph task, for `deploy.run_tasks` runs and stages.
    pub task: Option<String>,
    /// Step arguments; for a graph task `{"task": {id, type, parameters}}`.
    pub args: Args,
    pub deps: Vec<usize>,
    pub concurrency: Option<String>,
    pub max_parallel: Option<u64>,
    pub timeout_s: u64,
    pub status: RunStatus,
    pub reason: Option<String>,
    /// Where it runs: which agent of the node may take it (the master completes its own).
    pub runs_on: Location,
}

/// A run's step arguments. A graph task's are `{"task": {id, type, parameters}}` with the
/// plan's own parameters (one value shared by every node they are the same on, and kept by
/// the plan anyway), written out when the run is stored instead of copied into each of a
/// deployment's hundreds of thousands of runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Args {
    Json(J),
    Task {
        id: String,
        ty: String,
        parameters: Option<Shared>,
    },
}

impl Args {
    /// As JSON text (a task's: `{"task": {id, parameters, type}}`), written without making a
    /// value.
    pub fn text(&self) -> String {
        // Writing JSON values into a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for Args {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The task's keys in the order a JSON object (sorted keys) writes them.
        #[derive(Serialize)]
        struct Task<'a> {
            id: &'a str,
            parameters: Option<&'a Shared>,
            #[serde(rename = "type")]
            ty: &'a str,
        }
        #[derive(Serialize)]
        struct Outer<'a> {
            task: Task<'a>,
        }
        match self {
            Args::Json(j) => j.serialize(s),
            Args::Task { id, ty, parameters } => Outer {
                task: Task {
                    id,
                    parameters: parameters.as_ref(),
                    ty,
                },
            }
            .serialize(s),
        }
    }
}

/// Knobs of [`runs_for`].
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Timeout of a task that gives none (`parameters.timeout`), and of steps.
    pub default_timeout_s: u64,
    /// Timeout of `deploy.write_image`.
    pub image_timeout_s: u64,
    /// How many nodes may write their image at once (0: no cap).
    pub max_provisioning: u64,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            default_timeout_s: 600,
            image_timeout_s: 3600,
            max_provisioning: 10,
        }
    }
}

fn timeout_of(params: Option<&J>, default: u64) -> u64 {
    params
        .and_then(|p| p.get("timeout"))
        .and_then(|t| t.as_u64().or_else(|| t.as_f64().map(|f| f.max(1.0) as u64)))
        .filter(|&t| t > 0)
        .unwrap_or(default)
}

/// What a task run waits for before the runs are numbered: a task on a node, or a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Wait {
    Task(String, String),
    Group(usize),
}

/// The run of one graph task on one node (`node` None: the sync node), with the tasks it
/// waits for on other nodes and the groups it waits for.
fn task_run(
    node: Option<i64>,
    uid: &str,
    t: &Step,
    seq: u32,
    opts: &RunOptions,
) -> (NewRun, Vec<Wait>) {
    let params = t.parameters.as_ref().map(|p| p.0.as_ref());
    let (status, reason) = match t.status {
        Status::Run | Status::Stage => (RunStatus::Pending, None),
        Status::Skipped => (RunStatus::Skipped, t.reason.as_deref().map(str::to_string)),
    };
    let limit = t.strategy.as_ref().and_then(|s| s.limit());
    let run = NewRun {
        node,
        seq,
        interface: "deploy".to_string(),
        step: if t.status == Status::Stage {
            "stage"
        } else {
            "run_tasks"
        }
        .to_string(),
        task: Some(t.id.to_string()),
        args: Args::Task {
            id: t.id.to_string(),
            ty: t.ty.to_string(),
            parameters: t.parameters.clone(),
        },
        deps: Vec::new(),
        concurrency: limit.map(|_| format!("task:{}", t.id)),
        max_parallel: limit,
        timeout_s: timeout_of(params, opts.default_timeout_s),
        status,
        reason,
        runs_on: if node.is_some() {
            Location::Os
        } else {
            Location::Master
        },
    };
    // Same-node order comes from `seq`; on the sync node every wait is a dependency.
    let waits = t
        .requires
        .iter()
        .filter(|r| *r.node != *uid || node.is_none())
        .map(|r| Wait::Task(r.task.to_string(), r.node.to_string()))
        .chain(t.requires_groups.iter().map(|g| Wait::Group(g.index)))
        .collect();
    (run, waits)
}

/// The barrier run of group `g`: the sync node's, completed by the master like a stage when
/// every run of the group is done.
fn barrier_run(g: &Group, seq: u32, opts: &RunOptions) -> NewRun {
    NewRun {
        node: None,
        seq,
        interface: "deploy".to_string(),
        step: "barrier".to_string(),
        task: Some(g.id.clone()),
        args: Args::Json(json!({"group": {"id": g.id, "task": g.task, "roles": g.roles}})),
        deps: Vec::new(),
        concurrency: None,
        max_parallel: None,
        timeout_s: opts.default_timeout_s,
        status: RunStatus::Pending,
        reason: None,
        runs_on: Location::Master,
    }
}

/// The run of a deploy step other than `deploy.run_tasks`.
fn step_run(node: i64, s: &PlannedStep, seq: u32, opts: &RunOptions) -> NewRun {
    let image = s.step == "write_image";
    let capped = image && opts.max_provisioning > 0;
    NewRun {
        node: Some(node),
        seq,
        interface: s.interface.as_str().to_string(),
        step: s.step.clone(),
        task: None,
        args: Args::Json(J::Object(s.args.clone())),
        deps: Vec::new(),
        concurrency: capped.then(|| "provision".to_string()),
        max_parallel: capped.then_some(opts.max_provisioning),
        timeout_s: if image {
            opts.image_timeout_s
        } else {
            opts.default_timeout_s
        },
        status: RunStatus::Pending,
        reason: None,
        runs_on: s.runs_on,
    }
}

/// Expand a plan and each node's deploy steps into runs. `nodes` maps the plan's node uids to
/// node ids (a uid not in it is not deployed; the sync node `null` gets its stages). `steps`
/// are a node's deploy steps in the order they run; `deploy.run_tasks` expands into the node's
/// graph tasks, skipped ones recorded with their reason.
pub fn runs_for(
    plan: &Plan,
    nodes: &BTreeMap<String, i64>,
    steps: &dyn Fn(i64) -> Vec<PlannedStep>,
    opts: &RunOptions,
) -> Vec<NewRun> {
    let mut runs: Vec<NewRun> = Vec::new();
    // (task, uid) → run index, and each task run's cross-node waits, resolved at the end.
    let mut by_task: HashMap<(String, String), usize> = HashMap::new();
    let mut waits: Vec<(usize, Vec<Wait>)> = Vec::new();
    let mut push_tasks =
        |runs: &mut Vec<NewRun>, seq: &mut u32, node: Option<i64>, uid: &str, tasks: &[Step]| {
            for t in tasks {
                let (run, w) = task_run(node, uid, t, *seq, opts);
                *seq += 1;
                runs.push(run);
                by_task.insert((t.id.to_string(), uid.to_string()), runs.len() - 1);
                waits.push((runs.len() - 1, w));
            }
        };
    for node in &plan.nodes {
        let mut seq = 0u32;
        if node.uid == "null" {
            push_tasks(&mut runs, &mut seq, None, &node.uid, &node.tasks);
            continue;
        }
        let Some(&id) = nodes.get(&node.uid) else {
            continue;
        };
        for s in steps(id) {
            if s.interface.as_str() == "deploy" && s.step == "run_tasks" {
                push_tasks(&mut runs, &mut seq, Some(id), &node.uid, &node.tasks);
            } else {
                runs.push(step_run(id, &s, seq, opts));
                seq += 1;
            }
        }
    }
    // One barrier run per group some run waits for, after the sync node's stages: group
    // index → the barrier's run index.
    let wanted: std::collections::BTreeSet<usize> = waits
        .iter()
        .flat_map(|(_, w)| w)
        .filter_map(|w| match w {
            Wait::Group(g) => Some(*g),
            Wait::Task(..) => None,
        })
        .collect();
    let mut barriers: BTreeMap<usize, usize> = BTreeMap::new();
    let mut seq = runs.iter().filter(|r| r.node.is_none()).count() as u32;
    for g in wanted {
        let Some(group) = plan.groups.get(g) else {
            continue;
        };
        let mut run = barrier_run(group, seq, opts);
        seq += 1;
        run.deps = group
            .nodes
            .iter()
            .filter_map(|uid| by_task.get(&(group.task.clone(), uid.clone())).copied())
            .collect();
        run.deps.sort_unstable();
        barriers.insert(g, runs.len());
        runs.push(run);
    }
    for (i, w) in waits {
        let mut deps: Vec<usize> = w
            .iter()
            .filter_map(|k| match k {
                Wait::Task(task, uid) => by_task.get(&(task.clone(), uid.clone())).copied(),
                Wait::Group(g) => barriers.get(g).copied(),
            })
            .filter(|&d| d != i)
            .collect();
        deps.sort_unstable();
        deps.dedup();
        runs[i].deps = deps;
    }
    runs
}

/// A stored run, as much as scheduling needs.
#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    pub id: i64,
    pub node: Option<i64>,
    pub seq: u32,
    pub status: RunStatus,
    pub deps: Vec<i64>,
    pub concurrency: Option<String>,
    pub max_parallel: Option<u64>,
    /// Its timeout: also how long it may wait, due, for its agent to take it.
    pub timeout_s: u64,
    /// Which agent may take it.
    pub runs_on: Location,
}

/// Where a deployment stands ([`super::schedule::Schedule::progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Something runs or can start.
    Going,
    /// Every run is done.
    Done,
    /// A run failed and nothing else can move.
    Stuck,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's arguments are written as the JSON value they stand for, a task's parameters
    /// shared with the plan rather than copied.
    #[test]
    fn arguments_are_written_as_their_json() {
        let params = Shared(std::sync::Arc::new(
            json!({"cmd": "x", "timeout": 42, "nested": {"b": [1, 2.5, null], "a": "é\"q"}}),
        ));
        let cases = [
            Args::Task {
                id: "netconfig".into(),
                ty: "puppet".into(),
                parameters: Some(params.clone()),
            },
            Args::Task {
                id: "stage".into(),
                ty: "stage".into(),
                parameters: None,
            },
            Args::Json(json!({"group": {"id": "a@b", "task": "a", "roles": "b"}})),
            Args::Json(J::Null),
        ];
        // What a run's arguments were before they were written lazily.
        let value = |a: &Args| match a {
            Args::Json(j) => j.clone(),
            Args::Task { id, ty, parameters } => json!({"task": {
                "id": id,
                "type": ty,
                "parameters": parameters.as_ref().map_or(J::Null, |p| (*p.0).clone()),
            }}),
        };
        for a in cases {
            assert_eq!(a.text(), value(&a).to_string());
        }
        let Args::Task { parameters, .. } = task_run(
            Some(1),
            "1",
            &Step {
                id: "netconfig".into(),
                ty: "puppet",
                status: Status::Run,
                reason: None,
                order: 0,
                source: "".into(),
                parameters: Some(params.clone()),
                fail_on_error: true,
                strategy: None,
                compared_with: None,
                requires: vec![],
                requires_groups: vec![],
            },
            0,
            &RunOptions::default(),
        )
        .0
        .args
        else {
            panic!("a task run's arguments are a task's");
        };
        assert!(std::sync::Arc::ptr_eq(&parameters.unwrap().0, &params.0));
    }

    #[test]
    fn a_plan_and_steps_expand_into_ordered_runs_with_cross_node_waits() {
        use crate::engine::graph::{Cluster, Deployed, NodeSpec, ReleaseGraph, Source, plan};
        use crate::engine::steps;
        let src = || Source::new("release r", "tasks.yaml", 1);
        let tasks = vec![
            (json!({"id": "start", "type": "stage"}), src()),
            (
                json!({"id": "db", "type": "shell", "roles": ["primary-controller", "controller"], "version": "2.1.0", "requires": ["start"],
                    "parameters": {"cmd": "x", "timeout": 42}}),
                src(),
            ),
            (
                json!({"id": "agent", "type": "shell", "version": "2.1.0", "roles": ["compute"],
                    "cross-depends": [{"name": "db", "role": "primary-controller"}],
                    "parameters": {"cmd": "y", "strategy": {"type": "one_by_one"}}}),
                src(),
            ),
            (
                json!({"id": "off", "type": "shell", "version": "2.1.0", "roles": ["compute"], "requires": ["agent"],
                    "condition": {"yaql_exp": "false"}, "parameters": {"cmd": "z"}}),
                src(),
            ),
        ];
        let release = ReleaseGraph {
            name: "r".into(),
            version: "newton-10.0".into(),
            tasks,
            ..ReleaseGraph::default()
        };
        let nodes = [
            NodeSpec::new("1", &["controller"]),
            NodeSpec::new("2", &["compute"]),
        ];
        let p = plan(
            &Cluster::default(),
            &nodes,
            &release,
            &[],
            &Deployed::default(),
        )
        .unwrap();
        let defs = steps::builtins(Some("http://m/os.img"), None);
        let mut planned = steps::plan(&defs, &[]).unwrap();
        // Nodes without a BMC: the deployer drops the master's power step for them.
        planned.retain(|s| s.runs_on != steps::Location::Master);
        let ids = BTreeMap::from([("1".to_string(), 1), ("2".to_string(), 2)]);
        let runs = runs_for(&p, &ids, &|_| planned.clone(), &RunOptions::default());
        let name = |r: &NewRun| r.task.clone().unwrap_or_else(|| r.step.clone());
        let of = |n: Option<i64>| -> Vec<(u32, String)> {
            runs.iter()
                .filter(|r| r.node == n)
                .map(|r| (r.seq, name(r)))
                .collect()
        };
        let s = |v: &[(u32, &str)]| -> Vec<(u32, String)> {
            v.iter().map(|(i, n)| (*i, n.to_string())).collect()
        };
        assert_eq!(
            of(Some(1)),
            s(&[
                (0, "write_image"),
                (1, "configure"),
                (2, "reboot_to_disk"),
                (3, "db")
            ])
        );
        assert_eq!(
            of(Some(2)),
            s(&[
                (0, "write_image"),
                (1, "configure"),
                (2, "reboot_to_disk"),
                (3, "agent"),
                (4, "off")
            ])
        );
        // Provisioning runs in the ramdisk, the graph's tasks on the installed OS.
        let on = |n: i64, t: &str| {
            runs.iter()
                .find(|r| r.node == Some(n) && name(r) == t)
                .map(|r| r.runs_on)
        };
        assert_eq!(on(1, "configure"), Some(steps::Location::Ramdisk));
        assert_eq!(on(1, "reboot_to_disk"), Some(steps::Location::Ramdisk));
        assert_eq!(on(1, "db"), Some(steps::Location::Os));
        assert_eq!(on(2, "off"), Some(steps::Location::Os));
        assert_eq!(of(None), s(&[(0, "start")]));
        let find = |n: i64, t: &str| {
            runs.iter()
                .position(|r| r.node == Some(n) && name(r) == t)
                .unwrap()
        };
        // db waits for the stage; agent waits for db on the other node.
        let stage = runs.iter().position(|r| r.node.is_none()).unwrap();
        assert_eq!(runs[find(1, "db")].deps, [stage]);
        assert_eq!(runs[find(2, "agent")].deps, [find(1, "db")]);
        assert_eq!(runs[find(1, "db")].timeout_s, 42);
        // Strategies and the provisioning cap become concurrency keys.
        assert_eq!(
            runs[find(2, "agent")].concurrency.as_deref(),
            Some("task:agent")
        );
        assert_eq!(runs[find(2, "agent")].max_parallel, Some(1));
        assert_eq!(
            runs[find(1, "write_image")].concurrency.as_deref(),
            Some("provision")
        );
        // A false condition is a skipped run with its reason.
        let off = &runs[find(2, "off")];
        assert_eq!(off.status, RunStatus::Skipped);
        assert!(
            off.reason.as_deref().unwrap_or("").contains("condition"),
            "{off:?}"
        );
    }

    /// A group wait is one barrier run: N runs waiting for N others are 2N dependencies, and
    /// the schedule lets none of them start before the whole group is done (or skipped).
    #[test]
    fn a_group_wait_is_one_barrier_run() {
        use crate::engine::graph::{Cluster, Deployed, NodeSpec, ReleaseGraph, Source, plan};
        use crate::engine::schedule::Schedule;
        let src = || Source::new("release r", "tasks.yaml", 1);
        let release = ReleaseGraph {
            name: "r".into(),
            version: "newton-10.0".into(),
            tasks: vec![
                (
                    json!({"id": "agent", "type": "shell", "version": "2.1.0", "roles": ["compute"],
                           "parameters": {"cmd": "a"}}),
                    src(),
                ),
                (
                    json!({"id": "enable", "type": "shell", "version": "2.1.0", "roles": ["compute"],
                           "requires": ["agent"], "cross-depends": [{"name": "agent"}],
                           "parameters": {"cmd": "e"}}),
                    src(),
                ),
            ],
            ..ReleaseGraph::default()
        };
        let uids: Vec<String> = (1..=6).map(|i| i.to_string()).collect();
        let nodes: Vec<NodeSpec> = uids
            .iter()
            .map(|u| NodeSpec::new(u, &["compute"]))
            .collect();
        let p = plan(
            &Cluster::default(),
            &nodes,
            &release,
            &[],
            &Deployed::default(),
        )
        .unwrap();
        assert_eq!(p.groups.len(), 1, "{}", p.to_text());
        // Node 6 is left out of this deployment: its agent is not waited for.
        let ids: BTreeMap<String, i64> = (1..=5).map(|i| (i.to_string(), i)).collect();
        let mut planned =
            crate::engine::steps::plan(&crate::engine::steps::builtins(None, None), &[]).unwrap();
        planned.retain(|s| s.step == "run_tasks");
        let runs = runs_for(&p, &ids, &|_| planned.clone(), &RunOptions::default());
        let barrier: Vec<usize> = (0..runs.len())
            .filter(|&i| runs[i].step == "barrier")
            .collect();
        assert_eq!(barrier.len(), 1);
        let b = &runs[barrier[0]];
        assert_eq!(b.node, None);
        assert_eq!(b.task.as_deref(), Some("agent@*"));
        let agents: Vec<usize> = (0..runs.len())
            .filter(|&i| runs[i].task.as_deref() == Some("agent"))
            .collect();
        assert_eq!(b.deps, agents);
        for r in runs.iter().filter(|r| r.task.as_deref() == Some("enable")) {
            assert_eq!(r.deps, barrier, "{r:?}");
        }
        let deps: usize = runs.iter().map(|r| r.deps.len()).sum();
        assert_eq!(deps, 5 + 5);
        // Scheduled: every enable waits until the last agent is done or skipped.
        let mut s = Schedule::new(
            runs.iter()
                .enumerate()
                .map(|(i, r)| RunView {
                    id: i as i64,
                    node: r.node,
                    seq: r.seq,
                    status: r.status,
                    deps: r.deps.iter().map(|&d| d as i64).collect(),
                    concurrency: r.concurrency.clone(),
                    max_parallel: r.max_parallel,
                    timeout_s: r.timeout_s,
                    runs_on: r.runs_on,
                })
                .collect(),
        );
        for (k, &a) in agents.iter().enumerate() {
            assert!(s.ready_stages().is_empty());
            s.set(
                a as i64,
                if k == 2 {
                    RunStatus::Skipped
                } else {
                    RunStatus::Ok
                },
            );
            for n in 1..=5 {
                let next = s.next_for(n).map(|id| runs[id as usize].task.clone());
                if next == Some(Some("enable".to_string())) {
                    panic!("node {n} may start enable after {} agents", k + 1);
                }
            }
        }
        assert_eq!(s.ready_stages(), [barrier[0] as i64]);
        s.set(barrier[0] as i64, RunStatus::Ok);
        for n in 1..=5 {
            let next = s.next_for(n).unwrap();
            assert_eq!(runs[next as usize].task.as_deref(), Some("enable"));
        }
    }
}
