//! From graphs, a cluster and what was deployed before to a [`Plan`], the way Nailgun's LCM
//! transaction serializer did it, with the checks it lacked:
//!
//! 1. **Merge.** The release graph, then each enabled plugin's tasks (plugins by name): a plugin
//!    task with a release task's id replaces it in place; two plugins with one id is an error
//!    ("overlapping"), so is an id twice in one graph. Then the environment's own graph
//!    ([`Cluster::tasks`], uploaded): a task replaces the one of its id in place, as Nailgun's
//!    `_merge_tasks_lists` lets the cluster's graph win, or is appended. Legacy `tasks.yaml`
//!    tasks are adapted ([`super::legacy`]) and appended with generated ids.
//! 2. **Place.** Roles are assigned ([`super::roles`]); every task but groups goes to the nodes
//!    its `tags`/`roles`/`role`/`groups` resolve to, stages to the sync node; each id in a
//!    group's `tasks:` goes to every node of the group, whatever its own roles say. A task on
//!    no node is listed with the reason. A node runs each task id once. A legacy task after
//!    one on no node waits for the nearest earlier one of its chain that has a node, or for
//!    the stage's end marker ([`legacy::skip_unplaced`]), and the plan says so.
//! 3. **Serialize per node.** Every field but `id` may be a YAQL field, evaluated with `$` = the
//!    node's data, `$%old` = the data of the deployment that last ran this task on this node
//!    (`{}` when none, when the node must be redeployed, or when the cluster is forced), `$node`
//!    and `$common`. A false `condition` (YAQL, legacy string or plain value) skips the task
//!    with the reason; it stays in the graph with its edges. Evaluation failures are collected
//!    and returned together.
//! 4. **Edges.** `requires`/`required_for` name tasks on the same node or the sync node (exact
//!    id or `/regex/`); `cross-depends`/`cross-depended-by` entries `{name, role, policy}`
//!    look on the nodes `role` resolves to (absent = every node, `self`, `null` = sync node,
//!    `policy: any` = one node), the task itself on its own node excluded (for `self` too). A `requires` (or cross-depends) target
//!    that no task defines is a warning in the plan, and the edge is dropped.
//! 5. **Check and order.** The order of the (node, task) graph is Kahn's, ties broken by graph
//!    position then node order, so the same input gives the same plan byte for byte. When
//!    Kahn's cannot finish, petgraph's strongly connected components give the cycles, and the
//!    error prints each with every task's file and line.
//!
//! **Budget.** All of a plan's YAQL evaluations together may take at most a budget of
//! interpreter steps ([`DEFAULT_YAQL_BUDGET`], or the caller's): past it the plan is refused with
//! [`PlanError::Budget`], naming the tasks and fields that spent the most. Steps, not time: the
//! same input spends the same steps, so the refusal is deterministic. Each of step 3's two
//! threads counts its own work against what step 2 left of the budget (so at most twice that is
//! done before both stop); the plan is over budget when the sum is.
//!
//! Pure: no I/O, no clock. Step 3 runs on two threads (each over whole places, results put
//! back in order), so a plan is the same bytes however it was computed.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;
use serde_json::{Map, Value as J};

use super::barrier::{Ask, Barriers, Masks};
use super::data;
use super::expr;
use super::fields::{self, FormatContext};
use super::input::{Cluster, Deployed, NodeSpec};
use super::legacy::{self, LegacyTasks};
use super::plan::{
    Concurrency, FaultGroup, Group, GroupRef, NodePlan, Plan, Shared, Status, Step, Strategy,
    Summary, TaskRef, Unplaced,
};
use super::roles::{self, Assigned, NodeRoles, Place, Resolver, RoleMeta, regex_name};
use super::share;
use super::task::{Source, Task, TaskType, contains_yaql, names, yaql_of};
use crate::yaql::{Context, Engine, FinalMemo, Limits, Value as Y};

/// A release's graph of one type, with what role resolution and data need.
#[derive(Debug, Clone, Default)]
pub struct ReleaseGraph {
    pub name: String,
    /// `<openstack>-<fuel>`, e.g. `newton-10.0` (`OPENSTACK_VERSION`).
    pub version: String,
    /// `Ubuntu`, `CentOS` (`$.release.operating_system`).
    pub operating_system: String,
    pub tasks: Vec<(J, Source)>,
    pub roles_metadata: J,
    pub tags_metadata: J,
    /// Setting defaults as deployment data (see [`data::settings_from_attributes`]).
    pub settings: J,
}

/// An enabled plugin's tasks for the graph type being planned.
#[derive(Debug, Clone, Default)]
pub struct PluginGraph {
    pub name: String,
    pub version: String,
    /// Nailgun's `plugin_id`: the installed plugin's id (the master's), or its place among the
    /// plugins given (`stoker graph plan`).
    pub id: i64,
    /// The plugin's title (its settings' `metadata.label`).
    pub title: String,
    /// `is_hotpluggable` (`metadata.hot_pluggable`).
    pub hot_pluggable: bool,
    /// Its `environment_config.yaml` attributes as the release sees them (`{metadata, <name>:
    /// {value, type, ...}}`), for its settings in the deployment data
    /// ([`data::plugin_settings`]).
    pub attributes: J,
    /// Its scripts' folder in the package (`deployment_scripts_path`, `deployment_scripts/` by
    /// default), for `$.plugins`.
    pub scripts_path: String,
    /// Package format 1.0.0.
    pub v1: bool,
    pub tasks: Vec<(J, Source)>,
    /// Legacy `tasks.yaml` tasks.
    pub legacy: Vec<(J, Source)>,
    /// The plugin's node roles (their tags and primaries count like the release's).
    pub roles_metadata: J,
    /// Notes from loading (e.g. no compatible release record), shown in the plan.
    pub warnings: Vec<String>,
}

/// A YAQL or legacy expression that failed on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalFailure {
    pub task: String,
    pub node: String,
    pub field: String,
    pub expression: String,
    pub message: String,
    pub source: String,
}

impl fmt::Display for EvalFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: task {} on node {}: {}: {} (expression: {})",
            self.source,
            self.task,
            self.node,
            self.field,
            self.message,
            self.expression
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        )
    }
}

/// The YAQL work one plan may do by default, in interpreter steps (function calls and counted
/// iterations) over all its evaluations: about 5 s of lambda-heavy YAQL on one core. A
/// 1,000-node plan of fuel-library stable-newton takes 170,000 (a sixtieth of it).
pub const DEFAULT_YAQL_BUDGET: u64 = 10_000_000;

/// The YAQL work one task's field did in a plan that went over its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spender {
    pub task: String,
    pub source: String,
    /// `condition`, `parameters`, `requires`, `type`, ...
    pub field: String,
    pub steps: u64,
    pub evaluations: u64,
}

impl fmt::Display for Spender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task {} ({}), field {}: {} steps in {} evaluation(s)",
            self.task, self.source, self.field, self.steps, self.evaluations
        )
    }
}

fn list_spenders(v: &[Spender]) -> String {
    v.iter()
        .map(|s| format!("  {s}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Steps spent per (task index, field), and how many evaluations spent them.
type Spent = BTreeMap<(usize, &'static str), (u64, u64)>;

/// Counts one thread's YAQL work against its share of the plan's budget.
struct Meter<'e> {
    engine: &'e Engine,
    limit: u64,
    spent: Cell<u64>,
    by: RefCell<Spent>,
}

impl<'e> Meter<'e> {
    fn new(engine: &'e Engine, limit: u64) -> Meter<'e> {
        Meter {
            engine,
            limit,
            spent: Cell::new(0),
            by: RefCell::new(BTreeMap::new()),
        }
    }

    fn over(&self) -> bool {
        self.spent.get() > self.limit
    }

    /// Evaluate task `task`'s `field` expression with what is left of the budget.
    fn eval(
        &self,
        task: usize,
        field: &'static str,
        text: &str,
        ctx: &Context,
    ) -> Result<Y, String> {
        if self.over() {
            return Err("not evaluated: the plan's YAQL budget is spent".to_string());
        }
        let allowance = self.limit - self.spent.get();
        let (result, steps) = self.engine.eval_metered(text, ctx, allowance);
        self.spent.set(self.spent.get().saturating_add(steps));
        let mut by = self.by.borrow_mut();
        let e = by.entry((task, field)).or_insert((0, 0));
        e.0 = e.0.saturating_add(steps);
        e.1 += 1;
        result.map_err(|e| e.to_string())
    }

    fn eval_json(
        &self,
        task: usize,
        field: &'static str,
        text: &str,
        ctx: &Context,
    ) -> Result<J, String> {
        self.eval(task, field, text, ctx)?
            .to_json()
            .map_err(|e| e.to_string())
    }

    fn into_parts(self) -> (u64, Spent) {
        (self.spent.get(), self.by.into_inner())
    }
}

/// The budget error from every meter's work, the biggest spenders first.
fn over_budget(budget: u64, tasks: &[Task], parts: Vec<(u64, Spent)>) -> PlanError {
    let mut spent = 0u64;
    let mut all: Spent = BTreeMap::new();
    for (s, by) in parts {
        spent = spent.saturating_add(s);
        for (k, (steps, n)) in by {
            let e = all.entry(k).or_insert((0, 0));
            e.0 = e.0.saturating_add(steps);
            e.1 += n;
        }
    }
    let mut spenders: Vec<(usize, Spender)> = all
        .into_iter()
        .map(|((ti, field), (steps, evaluations))| {
            (
                ti,
                Spender {
                    task: tasks[ti].id.clone(),
                    source: tasks[ti].source.to_string(),
                    field: field.to_string(),
                    steps,
                    evaluations,
                },
            )
        })
        .collect();
    spenders.sort_by_key(|(ti, s)| (Reverse(s.steps), *ti, s.field.clone()));
    PlanError::Budget {
        budget,
        spent,
        spenders: spenders.into_iter().take(5).map(|(_, s)| s).collect(),
    }
}

/// One link of a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleStep {
    pub task: String,
    pub node: String,
    pub source: String,
}

fn list_failures(v: &[EvalFailure]) -> String {
    let mut s: Vec<String> = v.iter().take(20).map(|f| format!("  {f}")).collect();
    if v.len() > 20 {
        s.push(format!("  ... and {} more", v.len() - 20));
    }
    s.join("\n")
}

fn list_cycles(v: &[Vec<CycleStep>]) -> String {
    v.iter()
        .map(|c| {
            let mut lines: Vec<String> = c
                .iter()
                .map(|s| format!("    {} on node {} ({})", s.task, s.node, s.source))
                .collect();
            if let Some(first) = c.first() {
                lines.push(format!("    back to {} on node {}", first.task, first.node));
            }
            format!("  cycle:\n{}", lines.join("\n      -> is required by\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why no plan can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Task(#[from] super::task::TaskError),
    #[error(transparent)]
    Legacy(#[from] legacy::LegacyError),
    #[error(transparent)]
    Roles(#[from] roles::RolesError),
    #[error("tasks duplication found: {id} is defined at {first} and again at {second}")]
    Duplicate {
        id: String,
        first: String,
        second: String,
    },
    #[error(
        "plugin {second} is overlapping with plugin {first} by introducing the same deployment \
         task with id {id}"
    )]
    Overlap {
        id: String,
        first: String,
        second: String,
    },
    #[error("{at}: group {group} lists task {member}, which no task defines")]
    UnknownMember {
        group: String,
        member: String,
        at: String,
    },
    #[error("the task graph has {} cycle(s):\n{}", .0.len(), list_cycles(.0))]
    Cycle(Vec<Vec<CycleStep>>),
    #[error("{} expression(s) failed:\n{}", .0.len(), list_failures(.0))]
    Evaluation(Vec<EvalFailure>),
    #[error(
        "the plan's YAQL evaluation is over its budget of {budget} steps ({spent} spent when \
         it stopped); the tasks that spent the most:\n{}",
        list_spenders(.spenders)
    )]
    Budget {
        budget: u64,
        spent: u64,
        /// The biggest spenders, most first (at most five).
        spenders: Vec<Spender>,
    },
}

/// A cross-node dependency entry.
#[derive(Debug, Clone, PartialEq)]
enum CrossRole {
    All,
    SelfNode,
    Sync,
    Roles(J),
}

#[derive(Debug, Clone, PartialEq)]
struct CrossDep {
    name: String,
    role: CrossRole,
    any: bool,
}

/// A task's edges on one node, as names.
#[derive(Debug, Clone, PartialEq, Default)]
struct Edges {
    requires: Vec<String>,
    required_for: Vec<String>,
    cross_depends: Vec<CrossDep>,
    cross_depended_by: Vec<CrossDep>,
}

const EDGE_KEYS: [&str; 4] = [
    "requires",
    "required_for",
    "cross-depends",
    "cross-depended-by",
];

fn parse_cross(v: Option<&J>) -> Result<Vec<CrossDep>, String> {
    let items = match v {
        None | Some(J::Null) => return Ok(Vec::new()),
        Some(J::Array(items)) => items,
        Some(other) => {
            return Err(format!(
                "must be a list of {{name, role, policy}}, not {other}"
            ));
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Some(o) = item.as_object() else {
            if item.is_null() {
                continue;
            }
            return Err(format!(
                "entries are {{name, role, policy}} mappings, not {item}"
            ));
        };
        let name = match o.get("name") {
            Some(J::String(s)) => s.clone(),
            Some(J::Number(n)) => n.to_string(),
            other => return Err(format!("an entry needs a string name, not {other:?}")),
        };
        let role = match o.get("role") {
            None => CrossRole::All,
            Some(J::Null) => CrossRole::Sync,
            Some(J::String(s)) if s == "self" => CrossRole::SelfNode,
            Some(r) => CrossRole::Roles(r.clone()),
        };
        let any = match o.get("policy") {
            None | Some(J::Null) => false,
            Some(J::String(p)) if p == "all" => false,
            Some(J::String(p)) if p == "any" => true,
            Some(other) => return Err(format!("policy must be all or any, not {other}")),
        };
        out.push(CrossDep { name, role, any });
    }
    Ok(out)
}

fn parse_edges(t: &J) -> Result<Edges, (&'static str, String)> {
    Ok(Edges {
        requires: names(t.get("requires")),
        required_for: names(t.get("required_for")),
        cross_depends: parse_cross(t.get("cross-depends")).map_err(|e| ("cross-depends", e))?,
        cross_depended_by: parse_cross(t.get("cross-depended-by"))
            .map_err(|e| ("cross-depended-by", e))?,
    })
}

/// How a task's condition is given.
#[derive(Debug, Clone)]
enum Cond {
    True,
    Value(bool),
    Yaql(String),
    Legacy(expr::Expr, String),
}

/// A task prepared once for all nodes.
struct Template {
    raw: J,
    cond: Cond,
    /// A YAQL condition with what reads only common data shared ([`share`]).
    shared: Option<share::Rewritten>,
    edges: Option<Arc<Edges>>,
    params: Option<Shared>,
    type_yaql: Option<String>,
}

/// A task on one place, serialized.
struct Inst {
    status: Status,
    ty: &'static str,
    reason: Option<Arc<str>>,
    parameters: Option<Shared>,
    strategy: Option<Strategy>,
    fail_on_error: bool,
    compared_with: Option<Arc<str>>,
    edges: Arc<Edges>,
}

/// The text `key` names in `made`, made by `make` the first time: one shared copy for every
/// step that says it.
fn shared_text<K: std::hash::Hash + Eq>(
    made: &mut HashMap<K, Arc<str>>,
    key: K,
    make: impl FnOnce() -> String,
) -> Arc<str> {
    Arc::clone(made.entry(key).or_insert_with(|| Arc::from(make())))
}

fn version_below_2(v: Option<&str>) -> bool {
    let parts: Vec<u64> = v
        .unwrap_or("0.0.0")
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    parts.first().copied().unwrap_or(0) < 2
}

fn with_cwd(params: &J) -> J {
    let mut p = params.clone();
    if let Some(o) = p.as_object_mut() {
        o.entry("cwd").or_insert_with(|| J::String("/".to_string()));
    }
    p
}

fn parse_strategy(params: &J) -> Result<Option<Strategy>, String> {
    let Some(s) = params.get("strategy").filter(|s| !s.is_null()) else {
        return Ok(None);
    };
    let ty = s
        .get("type")
        .and_then(J::as_str)
        .ok_or_else(|| format!("strategy needs a type (parallel or one_by_one): {s}"))?;
    if ty != "parallel" && ty != "one_by_one" {
        return Err(format!(
            "strategy type must be parallel or one_by_one, not {ty:?}"
        ));
    }
    let amount = match s.get("amount") {
        None | Some(J::Null) => None,
        Some(J::Number(n)) => match n.as_i64() {
            Some(a) if a >= 0 => Some(a as u64),
            _ => {
                return Err(format!(
                    "strategy amount must be a whole number, 0 or more (0 = no limit), not {n}"
                ));
            }
        },
        Some(other) => {
            return Err(format!(
                "strategy amount must be a whole number, 0 or more, not {other}"
            ));
        }
    };
    Ok(Some(Strategy {
        ty: ty.to_string(),
        amount,
    }))
}

/// The merged task list and the ids generated for legacy tasks.
type Merged = (Vec<(J, Source)>, Vec<legacy::Generated>);

/// Merge the release graph with plugins and adapted legacy tasks.
fn merge(
    release: &ReleaseGraph,
    plugins: &[PluginGraph],
    own: &[(J, Source)],
    warnings: &mut Vec<String>,
) -> Result<Merged, PlanError> {
    let id_of = |t: &J| match t.get("id") {
        Some(J::String(s)) => Some(s.clone()),
        Some(J::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let mut merged: Vec<(J, Source)> = Vec::with_capacity(release.tasks.len());
    let mut pos: HashMap<String, usize> = HashMap::new();
    for (t, s) in &release.tasks {
        if let Some(id) = id_of(t) {
            if let Some(&i) = pos.get(&id) {
                return Err(PlanError::Duplicate {
                    id,
                    first: merged[i].1.to_string(),
                    second: s.to_string(),
                });
            }
            pos.insert(id, merged.len());
        }
        merged.push((t.clone(), s.clone()));
    }
    let mut sorted: Vec<&PluginGraph> = plugins.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut owner: HashMap<String, (String, Source)> = HashMap::new();
    for p in &sorted {
        warnings.extend(p.warnings.iter().cloned());
        for (t, s) in &p.tasks {
            let Some(id) = id_of(t) else {
                merged.push((t.clone(), s.clone()));
                continue;
            };
            if let Some((other, first)) = owner.get(&id) {
                if *other == p.name {
                    return Err(PlanError::Duplicate {
                        id,
                        first: first.to_string(),
                        second: s.to_string(),
                    });
                }
                return Err(PlanError::Overlap {
                    id,
                    first: other.clone(),
                    second: p.name.clone(),
                });
            }
            owner.insert(id.clone(), (p.name.clone(), s.clone()));
            match pos.get(&id) {
                Some(&i) => {
                    warnings.push(format!(
                        "{s}: plugin {} replaces task {id} of the release ({})",
                        p.name, merged[i].1
                    ));
                    merged[i] = (t.clone(), s.clone());
                }
                None => {
                    pos.insert(id, merged.len());
                    merged.push((t.clone(), s.clone()));
                }
            }
        }
    }
    for (t, s) in own {
        match id_of(t).and_then(|id| pos.get(&id).map(|&i| (id, i))) {
            Some((id, i)) => {
                warnings.push(format!(
                    "{s}: the environment's graph replaces task {id} ({})",
                    merged[i].1
                ));
                merged[i] = (t.clone(), s.clone());
            }
            None => {
                if let Some(id) = id_of(t) {
                    pos.insert(id, merged.len());
                }
                merged.push((t.clone(), s.clone()));
            }
        }
    }
    let stages: Vec<(String, J, J)> = merged
        .iter()
        .filter(|(t, _)| t.get("type").and_then(J::as_str) == Some("stage"))
        .filter_map(|(t, _)| {
            Some((
                id_of(t)?,
                t.get("requires").cloned().unwrap_or(J::Null),
                t.get("required_for").cloned().unwrap_or(J::Null),
            ))
        })
        .collect();
    let legacy_in: Vec<LegacyTasks<'_>> = sorted
        .iter()
        .filter(|p| !p.legacy.is_empty())
        .map(|p| LegacyTasks {
            plugin: &p.name,
            version: &p.version,
            v1: p.v1,
            tasks: &p.legacy,
        })
        .collect();
    let adapted = legacy::adapt(&legacy_in, &|m| legacy::successor(&stages, m))?;
    warnings.extend(adapted.warnings);
    for (t, s) in adapted.tasks {
        if let Some(id) = id_of(&t) {
            if let Some(&i) = pos.get(&id) {
                return Err(PlanError::Duplicate {
                    id,
                    first: merged[i].1.to_string(),
                    second: format!("{s} (generated for a legacy task)"),
                });
            }
            pos.insert(id, merged.len());
        }
        merged.push((t, s));
    }
    Ok((merged, adapted.generated))
}

/// Uids sort numerically when they are numbers.
fn uid_key(uid: &str) -> (u8, u64, String) {
    match uid.parse::<u64>() {
        Ok(n) => (0, n, String::new()),
        Err(_) => (1, 0, uid.to_string()),
    }
}

/// Per-place evaluation state.
struct PlaceEnv {
    uid: String,
    data: Y,
    node: Y,
    common_j: Arc<J>,
    /// The node's part as a value, made when a legacy condition first needs it.
    node_j: Option<Arc<J>>,
    /// Old data is ignored on this place.
    fresh: bool,
    contexts: HashMap<Option<Arc<str>>, Context>,
}

/// A class of nodes whose shared values are the same: the deployment their old data comes
/// from, and whether they had no part in it.
type Class = (Option<Arc<str>>, bool);

/// A task's shared values as variables, per class of nodes (None: the original decides).
type SharedValues = HashMap<(usize, Class), Option<Vec<(String, Y)>>>;

/// The shared values of `rw` in a class's context, as variables: None when one fails or is
/// not of its kind (the original text decides then).
fn shared_of(
    meter: &Meter<'_>,
    ti: usize,
    rw: &share::Rewritten,
    ctx: &Context,
) -> Option<Vec<(String, Y)>> {
    let mut out = Vec::with_capacity(rw.hoisted.len());
    for h in &rw.hoisted {
        let v = meter.eval(ti, "condition", &h.text, ctx).ok()?;
        let v = match h.kind {
            share::Kind::Changed => matches!(v, Y::Bool(_)).then_some(v)?,
            share::Kind::Members => {
                // Strings only: as the keys of a mapping they answer `in` by a lookup.
                let mut keys = Map::new();
                for item in v.as_seq()?.iter() {
                    keys.insert(item.as_str()?.to_string(), J::Null);
                }
                match data::to_yaql(&J::Object(keys)) {
                    Y::Dict(d) => Y::Keys(d),
                    _ => return None,
                }
            }
        };
        out.push((h.var.clone(), v));
    }
    Some(out)
}

/// Make the plan. See the module docs.
pub fn plan(
    cluster: &Cluster,
    nodes: &[NodeSpec],
    release: &ReleaseGraph,
    plugins: &[PluginGraph],
    deployed: &Deployed,
) -> Result<Plan, PlanError> {
    let engine = Engine::new(Limits::default());
    plan_with(&engine, cluster, nodes, release, plugins, deployed)
}

/// [`plan`] with a YAQL engine the caller keeps (its parse cache survives between plans).
pub fn plan_with(
    engine: &Engine,
    cluster: &Cluster,
    nodes: &[NodeSpec],
    release: &ReleaseGraph,
    plugins: &[PluginGraph],
    deployed: &Deployed,
) -> Result<Plan, PlanError> {
    plan_within(
        engine,
        DEFAULT_YAQL_BUDGET,
        cluster,
        nodes,
        release,
        plugins,
        deployed,
    )
}

/// [`plan_with`] with a YAQL budget: all the plan's evaluations together may take at most
/// `budget` steps (see the module docs).
pub fn plan_within(
    engine: &Engine,
    budget: u64,
    cluster: &Cluster,
    nodes_in: &[NodeSpec],
    release: &ReleaseGraph,
    plugins: &[PluginGraph],
    deployed: &Deployed,
) -> Result<Plan, PlanError> {
    plan_by(
        engine,
        budget,
        Method::default(),
        cluster,
        nodes_in,
        release,
        plugins,
        deployed,
    )
}

/// How a plan is computed. Both ways give the same plan (the same tasks, data, order and
/// waits); the default is the one that scales, the [`Method::REFERENCE`] is the direct one
/// the tests, `.ci/graph-conformance.sh` and `stoker graph plan --reference` compare it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    /// A wait for a task on every node of a role set is one group ([`super::barrier`]),
    /// rather than a wait for each member: 2N edges for N consumers of N members, not N².
    pub barriers: bool,
    /// Conditions' sub-expressions that read only common data are evaluated once per class
    /// of nodes ([`share`]), rather than on each node: what changes is the YAQL steps spent.
    pub sharing: bool,
}

impl Method {
    /// Every wait per member, every condition on each node: quadratic in the nodes for
    /// Fuel's graphs, and the meaning the default must keep.
    pub const REFERENCE: Method = Method {
        barriers: false,
        sharing: false,
    };
}

impl Default for Method {
    fn default() -> Method {
        Method {
            barriers: true,
            sharing: true,
        }
    }
}

/// [`plan_within`] by a chosen [`Method`].
#[allow(clippy::too_many_arguments)]
pub fn plan_by(
    engine: &Engine,
    budget: u64,
    method: Method,
    cluster: &Cluster,
    nodes_in: &[NodeSpec],
    release: &ReleaseGraph,
    plugins: &[PluginGraph],
    deployed: &Deployed,
) -> Result<Plan, PlanError> {
    let mut warnings: Vec<String> = Vec::new();
    let (merged, generated) = merge(release, plugins, &cluster.tasks, &mut warnings)?;
    let mut tasks = Vec::with_capacity(merged.len());
    for (i, (raw, source)) in merged.into_iter().enumerate() {
        tasks.push(Task::parse(raw, source, i)?);
    }
    let mut id_of: HashMap<&str, usize> = HashMap::with_capacity(tasks.len());
    for t in &tasks {
        id_of.insert(t.id.as_str(), t.index);
    }

    // Nodes in uid order; roles and data.
    let mut nodes: Vec<&NodeSpec> = nodes_in.iter().collect();
    nodes.sort_by_key(|n| uid_key(&n.uid));
    // A release without role metadata (a fuel-library tree) gets Fuel newton's, so that a
    // plugin's roles add to them instead of replacing them (and the primaries with them).
    let (default_roles, default_tags) = roles::default_metadata();
    let release_meta = release.roles_metadata.is_object();
    let mut roles_meta = if release_meta {
        release.roles_metadata.clone()
    } else {
        default_roles
    };
    for p in plugins {
        if let Some(o) = p.roles_metadata.as_object() {
            if !roles_meta.is_object() {
                roles_meta = J::Object(Map::new());
            }
            data::deep_merge(&mut roles_meta, &J::Object(o.clone()));
        }
    }
    if cluster.roles_metadata.is_object() {
        if !roles_meta.is_object() {
            roles_meta = J::Object(Map::new());
        }
        data::deep_merge(&mut roles_meta, &cluster.roles_metadata);
    }
    let mut tags_meta = if release_meta || release.tags_metadata.is_object() {
        release.tags_metadata.clone()
    } else {
        default_tags
    };
    if cluster.tags_metadata.is_object() {
        if !tags_meta.is_object() {
            tags_meta = J::Object(Map::new());
        }
        data::deep_merge(&mut tags_meta, &cluster.tags_metadata);
    }
    let meta = RoleMeta::from_release(&roles_meta, &tags_meta);
    let node_roles: Vec<NodeRoles<'_>> = nodes
        .iter()
        .map(|n| NodeRoles {
            roles: &n.roles,
            ready: n.status == "ready",
            primary: &n.primary,
            pending_deletion: n.pending_deletion,
        })
        .collect();
    let uids: Vec<String> = nodes.iter().map(|n| n.uid.clone()).collect();
    let assigned: Vec<Assigned> = roles::assign(&node_roles, &uids, &meta)?;
    let dd = data::build(cluster, &nodes, &assigned, release, plugins, deployed);
    // The keys any node's own data has, new or old: what reads none of them reads the
    // common part, the same for every node ([`share`]). None when a node's data is not a
    // mapping (a replaced one may be anything): nothing is shared then.
    let node_keys: Option<BTreeSet<String>> = {
        let old = deployed
            .deployments
            .values()
            .flat_map(|s| s.nodes.values())
            .filter(|p| !p.is_null())
            .map(data::Part::keys);
        let mut keys = dd.node_keys.clone().unwrap_or_default();
        let mut mappings = dd.node_keys.is_some();
        for part in old {
            match part {
                Some(k) => keys.extend(k),
                None => mappings = false,
            }
        }
        (method.sharing && mappings).then_some(keys)
    };
    let resolver = Resolver::new(&assigned);
    let n = nodes.len();
    let master = resolver.master();
    let sync = resolver.sync();
    let place_uid = |p: Place| -> String {
        if p == master {
            "master".to_string()
        } else if p == sync {
            "null".to_string()
        } else {
            uids[p].clone()
        }
    };
    // A place's part of the deployment data (the sync node has none).
    let part_at = |p: Place| -> &data::Part {
        if p == master {
            &dd.master
        } else {
            &dd.nodes[p]
        }
    };

    // YAQL values: the common part once, each place's view sharing it.
    let common_y = data::to_yaql(&dd.common);
    let common_j = Arc::new(dd.common.clone());
    // One finalisation memo for the plan: every node's data shares the common sub-trees, so
    // `changed($.network_metadata)` finalises and compares them once, not once per node.
    let memo = Rc::new(FinalMemo::default());
    let cluster_ctx = Context::from_value(common_y.clone())
        .with_memo(memo.clone())
        .with_var_value("common", common_y.clone())
        .with_var_value("node", data::to_yaql(&J::Object(Map::new())));
    let common_meter = Meter::new(engine, budget);
    let eval_common = |task: usize, field: &'static str, text: &str| -> Result<J, String> {
        common_meter.eval_json(task, field, text, &cluster_ctx)
    };

    // Templates: formatting once, structural YAQL (roles, group members) against $common.
    let fmt_ctx = FormatContext {
        cluster_id: cluster.id.to_string(),
        openstack_version: release.version.clone(),
        master_ip: cluster.master_ip.clone(),
        cn_hostname: cluster.master_hostname.clone(),
    };
    let mut failures: Vec<EvalFailure> = Vec::new();
    let fail = |t: &Task, node: &str, field: &str, expression: &str, message: String| EvalFailure {
        task: t.id.clone(),
        node: node.to_string(),
        field: field.to_string(),
        expression: expression.to_string(),
        message,
        source: t.source.to_string(),
    };
    let mut templates: Vec<Template> = Vec::with_capacity(tasks.len());
    for t in &tasks {
        let raw = fields::format_task(&t.raw, &fmt_ctx);
        let cond = match raw.get("condition") {
            None | Some(J::Null) => Cond::True,
            Some(J::Bool(b)) => Cond::Value(*b),
            Some(J::String(s)) => match expr::parse(s) {
                Ok(e) => Cond::Legacy(e, s.clone()),
                Err(e) => {
                    failures.push(fail(t, "*", "condition", s, e.message));
                    Cond::Value(false)
                }
            },
            Some(v) => match yaql_of(v) {
                Some(J::String(e)) => Cond::Yaql(e.clone()),
                Some(other) => {
                    failures.push(fail(
                        t,
                        "*",
                        "condition",
                        &other.to_string(),
                        "yaql_exp must be a string".to_string(),
                    ));
                    Cond::Value(false)
                }
                None => Cond::Value(expr::truthy(v)),
            },
        };
        let edges_yaql = EDGE_KEYS
            .iter()
            .any(|k| raw.get(*k).is_some_and(contains_yaql));
        let edges = if edges_yaql {
            None
        } else {
            match parse_edges(&raw) {
                Ok(e) => Some(Arc::new(e)),
                Err((field, m)) => {
                    failures.push(fail(t, "*", field, "", m));
                    Some(Arc::new(Edges::default()))
                }
            }
        };
        let params_raw = raw.get("parameters").cloned().unwrap_or(J::Null);
        let params = if contains_yaql(&params_raw) || params_raw.is_null() {
            None
        } else {
            Some(Shared(Arc::new(with_cwd(&params_raw))))
        };
        let type_yaql = match (t.ty, raw.get("type").and_then(yaql_of)) {
            (None, Some(J::String(e))) => Some(e.clone()),
            _ => None,
        };
        let shared = match (&cond, &node_keys) {
            (Cond::Yaql(e), Some(keys)) => share::rewrite(e, keys),
            _ => None,
        };
        templates.push(Template {
            raw,
            cond,
            shared,
            edges,
            params,
            type_yaql,
        });
    }

    // Static warnings: targets no task defines; old task versions.
    let mut regex_ids: HashMap<String, Option<Vec<usize>>> = HashMap::new();
    let mut match_regex = |pattern: &str| -> Option<Vec<usize>> {
        regex_ids
            .entry(pattern.to_string())
            .or_insert_with(|| {
                let re = regex::Regex::new(&format!("^(?:{pattern})")).ok()?;
                Some(
                    tasks
                        .iter()
                        .filter(|t| re.is_match(&t.id))
                        .map(|t| t.index)
                        .collect(),
                )
            })
            .clone()
    };
    for (t, tpl) in tasks.iter().zip(&templates) {
        if t.is_group() {
            continue;
        }
        if !t.is_stage() && t.ty != Some(TaskType::Skipped) && version_below_2(t.version.as_deref())
        {
            warnings.push(format!(
                "{}: task {} has version {}, older than 2.0.0 (cross-node dependencies); it is \
                 planned like a 2.0.0 task",
                t.source,
                t.id,
                t.version.as_deref().unwrap_or("none (1.0.0)")
            ));
        }
        let Some(edges) = &tpl.edges else { continue };
        let mut check = |what: &str, name: &str| {
            let missing = match regex_name(name) {
                Some(p) => match match_regex(p) {
                    Some(ids) if !ids.is_empty() => None,
                    Some(_) => Some("which matches no task"),
                    None => Some("which is not a valid regular expression"),
                },
                None if id_of.contains_key(name) => None,
                None => Some("which no task defines"),
            };
            if let Some(why) = missing {
                warnings.push(format!(
                    "{}: task {} {what} {name}, {why}; the edge is dropped",
                    t.source, t.id
                ));
            }
        };
        for r in &edges.requires {
            check("requires", r);
        }
        for r in &edges.required_for {
            check("is required for", r);
        }
        for c in &edges.cross_depends {
            check("cross-depends on", &c.name);
        }
        for c in &edges.cross_depended_by {
            check("is cross-depended by", &c.name);
        }
    }

    // Placement.
    let mut placed: Vec<BTreeSet<Place>> = vec![BTreeSet::new(); tasks.len()];
    let mut unplaced: Vec<Unplaced> = Vec::new();
    let mut fault_groups: Vec<FaultGroup> = Vec::new();
    let roles_value = |t: &Task, tpl: &Template, failures: &mut Vec<EvalFailure>| -> Option<J> {
        let key = t.roles_key;
        let v = tpl.raw.get(key)?;
        if contains_yaql(v) {
            let mut ev = |e: &str| eval_common(t.index, key, e);
            match fields::eval_fields(v, key, &mut ev) {
                Ok(v) => Some(v),
                Err(e) => {
                    failures.push(fail(t, "*", &e.field, &e.expression, e.message));
                    None
                }
            }
        } else {
            Some(v.clone())
        }
    };
    for (t, tpl) in tasks.iter().zip(&templates) {
        if t.is_group() {
            continue;
        }
        if t.is_stage() {
            placed[t.index].insert(sync);
            continue;
        }
        match roles_value(t, tpl, &mut failures) {
            None => {}
            Some(r) => {
                let res = resolver.resolve(&r, false);
                if let Some(w) = res.warning {
                    warnings.push(format!("{}: task {}: {w}", t.source, t.id));
                }
                placed[t.index].extend(res.places);
            }
        }
    }
    for (t, tpl) in tasks.iter().zip(&templates) {
        if !t.is_group() {
            continue;
        }
        let places = match roles_value(t, tpl, &mut failures) {
            Some(r) => resolver.resolve(&r, false).places,
            None => Vec::new(),
        };
        let members = match tpl.raw.get("tasks") {
            Some(v) if contains_yaql(v) => {
                let mut ev = |e: &str| eval_common(t.index, "tasks", e);
                match fields::eval_fields(v, "tasks", &mut ev) {
                    Ok(v) => names(Some(&v)),
                    Err(e) => {
                        failures.push(fail(t, "*", &e.field, &e.expression, e.message));
                        Vec::new()
                    }
                }
            }
            other => names(other),
        };
        for m in &members {
            let Some(&mi) = id_of.get(m.as_str()) else {
                return Err(PlanError::UnknownMember {
                    group: t.id.clone(),
                    member: m.clone(),
                    at: t.source.to_string(),
                });
            };
            if !tasks[mi].is_group() {
                placed[mi].extend(places.iter().copied());
            }
        }
        if !places.is_empty() {
            fault_groups.push(FaultGroup {
                name: t.id.clone(),
                node_ids: places.iter().map(|&p| place_uid(p)).collect(),
                fault_tolerance: t
                    .fault_tolerance()
                    .cloned()
                    .unwrap_or_else(|| J::from(places.len() as u64 + 1)),
            });
        }
    }
    // Legacy chains stay whole: a task placed on no node is skipped over.
    let relinked = legacy::skip_unplaced(
        &generated,
        &|id| id_of.get(id).is_some_and(|&i| !placed[i].is_empty()),
        &|id| {
            id_of
                .get(id)
                .and_then(|&i| templates[i].raw.get("roles").cloned())
                .unwrap_or(J::Null)
        },
    );
    for r in relinked {
        let Some(&ti) = id_of.get(r.id.as_str()) else {
            continue;
        };
        let t = &tasks[ti];
        let tpl = &mut templates[ti];
        if let Some(o) = tpl.raw.as_object_mut() {
            o.insert("cross-depends".to_string(), r.cross_depends.clone());
        }
        let waits = r
            .cross_depends
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.get("name").and_then(J::as_str))
            .collect::<Vec<_>>()
            .join(", ");
        warnings.push(format!(
            "{}: legacy task {} waits for {waits}: {} before it run(s) on no node",
            t.source,
            t.id,
            r.skipped.join(", ")
        ));
        let edges_yaql = EDGE_KEYS
            .iter()
            .any(|k| tpl.raw.get(*k).is_some_and(contains_yaql));
        tpl.edges = if edges_yaql {
            None
        } else {
            match parse_edges(&tpl.raw) {
                Ok(e) => Some(Arc::new(e)),
                Err((field, m)) => {
                    failures.push(fail(t, "*", field, "", m));
                    Some(Arc::new(Edges::default()))
                }
            }
        };
    }
    for t in &tasks {
        if t.is_group() || !placed[t.index].is_empty() {
            continue;
        }
        let reason = match &t.roles {
            None => "it has no tags, roles, role or groups".to_string(),
            Some(r) => format!("no node matches its {} {}", t.roles_key, r),
        };
        unplaced.push(Unplaced {
            task: t.id.clone(),
            source: t.source.to_string(),
            reason,
        });
    }

    // Vertices, place by place in node order, tasks in graph order.
    let places_total = n + 2;
    let mut per_place: Vec<Vec<usize>> = vec![Vec::new(); places_total];
    for t in &tasks {
        for &p in &placed[t.index] {
            per_place[p].push(t.index);
        }
    }
    let mut vertices: Vec<(Place, usize)> = Vec::new();
    let mut vindex: Vec<HashMap<usize, u32>> = vec![HashMap::new(); places_total];
    for (p, list) in per_place.iter().enumerate() {
        for &ti in list {
            vindex[p].insert(ti, vertices.len() as u32);
            vertices.push((p, ti));
        }
    }

    // What placement spent of the budget; the rest is each serializing thread's share.
    let (common_spent, common_by) = common_meter.into_parts();
    if common_spent > budget {
        return Err(over_budget(budget, &tasks, vec![(common_spent, common_by)]));
    }
    let share = budget - common_spent;

    // Serialize every vertex: a run of vertices (whole places, in order) at a time, each run
    // with YAQL values of its own (they are not shared between threads).
    let serialize = |run: &[(Place, usize)]| -> (Vec<Inst>, Vec<EvalFailure>, (u64, Spent)) {
        let mut failures: Vec<EvalFailure> = Vec::new();
        let meter = Meter::new(engine, share);
        let common_y = data::to_yaql(&dd.common);
        let memo = Rc::new(FinalMemo::default());
        let cluster_ctx = Context::from_value(common_y.clone())
            .with_memo(memo.clone())
            .with_var_value("common", common_y.clone())
            .with_var_value("node", data::to_yaql(&J::Object(Map::new())));
        let mut snapshots: HashMap<Arc<str>, Y> = HashMap::new();
        // Why a step is skipped, made once per task and deployment of its old data (or per
        // type): the same text for every node of a class, shared by their steps.
        let mut reasons: HashMap<(usize, Option<Arc<str>>), Arc<str>> = HashMap::new();
        let mut type_reasons: HashMap<&'static str, Arc<str>> = HashMap::new();
        // Shared values per task and class of nodes (old data's deployment, and whether the
        // node had a part in it), and each class's context: the common data only.
        let mut shared_values: SharedValues = HashMap::new();
        let mut class_contexts: HashMap<Class, Context> = HashMap::new();
        let mut insts: Vec<Inst> = Vec::with_capacity(run.len());
        let mut env: Option<PlaceEnv> = None;
        let empty = data::to_yaql(&J::Object(Map::new()));
        for &(p, ti) in run {
            if meter.over() {
                // The plan is refused: what is left is not worth evaluating.
                break;
            }
            let t = &tasks[ti];
            let tpl = &templates[ti];
            if p == sync {
                let edges = match &tpl.edges {
                    Some(e) => e.clone(),
                    None => {
                        let mut raw = Map::new();
                        for k in EDGE_KEYS {
                            let mut ev = |e: &str| meter.eval_json(ti, k, e, &cluster_ctx);
                            if let Some(v) = tpl.raw.get(k) {
                                match fields::eval_fields(v, k, &mut ev) {
                                    Ok(v) => {
                                        raw.insert(k.to_string(), v);
                                    }
                                    Err(e) => failures.push(fail(
                                        t,
                                        "null",
                                        &e.field,
                                        &e.expression,
                                        e.message,
                                    )),
                                }
                            }
                        }
                        match parse_edges(&J::Object(raw)) {
                            Ok(e) => Arc::new(e),
                            Err((f, m)) => {
                                failures.push(fail(t, "null", f, "", m));
                                Arc::new(Edges::default())
                            }
                        }
                    }
                };
                insts.push(Inst {
                    status: if t.is_stage() {
                        Status::Stage
                    } else {
                        Status::Skipped
                    },
                    ty: t.ty.map_or("stage", TaskType::as_str),
                    reason: None,
                    parameters: None,
                    strategy: None,
                    fail_on_error: false,
                    compared_with: None,
                    edges,
                });
                continue;
            }
            if env.as_ref().is_none_or(|e| e.uid != place_uid(p)) {
                let node_y = part_at(p).to_yaql();
                let fresh = cluster.force || (p != master && nodes[p].needs_redeploy());
                env = Some(PlaceEnv {
                    uid: place_uid(p),
                    data: data::union(&common_y, &node_y),
                    node: node_y,
                    common_j: common_j.clone(),
                    node_j: None,
                    fresh,
                    contexts: HashMap::new(),
                });
            }
            let Some(pe) = env.as_mut() else { continue };
            let last = if pe.fresh {
                None
            } else {
                deployed.last_deployment(&pe.uid, &t.id).cloned()
            };
            if !pe.contexts.contains_key(&last) {
                let old = match &last {
                    None => empty.clone(),
                    Some(dep) => {
                        let snap = deployed.deployments.get(&**dep);
                        let common_old = match snapshots.get(dep) {
                            Some(v) => v.clone(),
                            None => {
                                let v = data::to_yaql(snap.map_or(&J::Null, |s| &s.common));
                                snapshots.insert(dep.clone(), v.clone());
                                v
                            }
                        };
                        let node_old = snap
                            .and_then(|s| s.nodes.get(&pe.uid))
                            .map_or(Y::Null, data::Part::to_yaql);
                        data::union(&common_old, &node_old)
                    }
                };
                let ctx = Context::from_value(pe.data.clone())
                    .with_memo(memo.clone())
                    .with_old_value(old)
                    .with_var_value("node", pe.node.clone())
                    .with_var_value("common", common_y.clone());
                pe.contexts.insert(last.clone(), ctx);
            }
            let Some(ctx) = pe.contexts.get(&last) else {
                continue;
            };
            let node_name = pe.uid.clone();
            // Condition, with what reads only common data shared by the node's class.
            let mut evaluated = |e: &str| -> Result<Y, String> {
                let Some(rw) = &tpl.shared else {
                    return meter.eval(ti, "condition", e, ctx);
                };
                let class: Class = (
                    last.clone(),
                    last.as_ref().is_some_and(|dep| {
                        deployed
                            .deployments
                            .get(&**dep)
                            .and_then(|s| s.nodes.get(&pe.uid))
                            .is_none_or(data::Part::is_null)
                    }),
                );
                let values = shared_values.entry((ti, class.clone())).or_insert_with(|| {
                    let cctx = class_contexts.entry(class.clone()).or_insert_with(|| {
                        let old = match &class.0 {
                            None => empty.clone(),
                            Some(dep) => {
                                let common_old = snapshots
                                    .entry(dep.clone())
                                    .or_insert_with(|| {
                                        data::to_yaql(
                                            deployed
                                                .deployments
                                                .get(&**dep)
                                                .map_or(&J::Null, |s| &s.common),
                                        )
                                    })
                                    .clone();
                                let node_old = if class.1 { Y::Null } else { empty.clone() };
                                data::union(&common_old, &node_old)
                            }
                        };
                        Context::from_value(common_y.clone())
                            .with_memo(memo.clone())
                            .with_old_value(old)
                            .with_var_value("common", common_y.clone())
                    });
                    shared_of(&meter, ti, rw, cctx)
                });
                match values {
                    Some(vars) => {
                        let with = vars.iter().fold(ctx.clone(), |c, (name, v)| {
                            c.with_var_value(name, v.clone())
                        });
                        // The original decides whenever the rewrite fails (see `share`).
                        meter
                            .eval(ti, "condition", &rw.text, &with)
                            .or_else(|_| meter.eval(ti, "condition", e, ctx))
                    }
                    None => meter.eval(ti, "condition", e, ctx),
                }
            };
            let (run, why) = match &tpl.cond {
                Cond::True => (true, None),
                Cond::Value(b) => (
                    *b,
                    (!*b).then(|| {
                        shared_text(&mut reasons, (ti, None), || "condition is false".into())
                    }),
                ),
                Cond::Yaql(e) => match evaluated(e) {
                    Ok(v) => {
                        let run = v.truthy();
                        let why = (!run).then(|| {
                            shared_text(&mut reasons, (ti, last.clone()), || {
                                format!(
                                    "condition is false: {} (old data: {})",
                                    e.split_whitespace().collect::<Vec<_>>().join(" "),
                                    last.as_deref()
                                        .map_or("none".to_string(), |d| format!("deployment {d}"))
                                )
                            })
                        });
                        (run, why)
                    }
                    Err(x) => {
                        failures.push(fail(t, &node_name, "condition", e, x));
                        (false, None)
                    }
                },
                Cond::Legacy(x, text) => {
                    // The node's part as a value, read from its text the first time one of
                    // its tasks has a legacy condition.
                    let nj = pe
                        .node_j
                        .get_or_insert_with(|| Arc::new(part_at(p).value()))
                        .clone();
                    let cj = pe.common_j.clone();
                    let lookup = move |model: &str, path: &str| -> Result<Option<J>, String> {
                        match model {
                            "settings" => Ok(data::union_path(
                                &cj,
                                &nj,
                                &expr::rewrite_settings_path(path),
                            )),
                            "cluster" => Ok(data::union_path(&cj, &nj, &format!("cluster.{path}"))),
                            other => Err(expr::unknown_model(other)),
                        }
                    };
                    match expr::eval(x, &lookup, text) {
                        Ok(v) => {
                            let run = expr::truthy(&v);
                            let why = (!run).then(|| {
                                shared_text(&mut reasons, (ti, None), || {
                                    format!("condition is false: {text}")
                                })
                            });
                            (run, why)
                        }
                        Err(e) => {
                            failures.push(fail(t, &node_name, "condition", text, e.message));
                            (false, None)
                        }
                    }
                }
            };
            // Type.
            let ty = match (&tpl.type_yaql, t.ty) {
                (Some(e), _) => match meter.eval_json(ti, "type", e, ctx) {
                    Ok(J::String(s)) => match TaskType::parse(&s) {
                        Some(ty) if !matches!(ty, TaskType::Group | TaskType::Stage) => ty,
                        _ => {
                            failures.push(fail(
                                t,
                                &node_name,
                                "type",
                                e,
                                format!("computed type {s:?} is not a node task type"),
                            ));
                            TaskType::Skipped
                        }
                    },
                    Ok(other) => {
                        failures.push(fail(
                            t,
                            &node_name,
                            "type",
                            e,
                            format!("computed type must be a string, not {other}"),
                        ));
                        TaskType::Skipped
                    }
                    Err(m) => {
                        failures.push(fail(t, &node_name, "type", e, m));
                        TaskType::Skipped
                    }
                },
                (None, Some(ty)) => ty,
                (None, None) => TaskType::Skipped,
            };
            let (status, reason) = if !run {
                (Status::Skipped, why)
            } else if !ty.is_action() {
                let why = shared_text(&mut type_reasons, ty.as_str(), || format!("type is {ty}"));
                (Status::Skipped, Some(why))
            } else {
                (Status::Run, None)
            };
            // Edges.
            let edges = match &tpl.edges {
                Some(e) => e.clone(),
                None => {
                    let mut raw = Map::new();
                    for k in EDGE_KEYS {
                        let mut ev = |e: &str| meter.eval_json(ti, k, e, ctx);
                        if let Some(v) = tpl.raw.get(k) {
                            match fields::eval_fields(v, k, &mut ev) {
                                Ok(v) => {
                                    raw.insert(k.to_string(), v);
                                }
                                Err(e) => failures.push(fail(
                                    t,
                                    &node_name,
                                    &e.field,
                                    &e.expression,
                                    e.message,
                                )),
                            }
                        }
                    }
                    match parse_edges(&J::Object(raw)) {
                        Ok(e) => Arc::new(e),
                        Err((f, m)) => {
                            failures.push(fail(t, &node_name, f, "", m));
                            Arc::new(Edges::default())
                        }
                    }
                }
            };
            // Parameters, strategy, fail_on_error (only for what runs).
            let mut parameters = None;
            let mut strategy = None;
            let mut fail_on_error = false;
            if status == Status::Run {
                parameters = match (&tpl.params, tpl.raw.get("parameters")) {
                    (Some(s), _) => Some(s.clone()),
                    (None, None | Some(J::Null)) => {
                        Some(Shared(Arc::new(with_cwd(&J::Object(Map::new())))))
                    }
                    (None, Some(v)) => match fields::eval_fields(v, "parameters", &mut |e: &str| {
                        meter.eval_json(ti, "parameters", e, ctx)
                    }) {
                        Ok(v) => Some(Shared(Arc::new(with_cwd(&v)))),
                        Err(e) => {
                            failures.push(fail(t, &node_name, &e.field, &e.expression, e.message));
                            None
                        }
                    },
                };
                if let Some(p) = &parameters {
                    match parse_strategy(&p.0) {
                        Ok(s) => strategy = s,
                        Err(m) => failures.push(fail(t, &node_name, "parameters.strategy", "", m)),
                    }
                }
                fail_on_error = match tpl.raw.get("fail_on_error") {
                    None | Some(J::Null) => true,
                    Some(v) if contains_yaql(v) => {
                        match fields::eval_fields(v, "fail_on_error", &mut |e: &str| {
                            meter.eval_json(ti, "fail_on_error", e, ctx)
                        }) {
                            Ok(v) => expr::truthy(&v),
                            Err(e) => {
                                failures.push(fail(
                                    t,
                                    &node_name,
                                    &e.field,
                                    &e.expression,
                                    e.message,
                                ));
                                true
                            }
                        }
                    }
                    Some(v) => expr::truthy(v),
                };
            }
            insts.push(Inst {
                status,
                ty: ty.as_str(),
                reason,
                parameters,
                strategy,
                fail_on_error,
                compared_with: last,
                edges,
            });
        }
        (insts, failures, meter.into_parts())
    };
    // Two runs of about half the vertices each, split between places, on two threads; the
    // results are put back in order, so the plan is the same as from one run.
    let half = vertices.len() / 2;
    let split = (half..vertices.len())
        .find(|&i| i == 0 || vertices[i].0 != vertices[i - 1].0)
        .unwrap_or(vertices.len());
    let (first, second) = vertices.split_at(split);
    let ((mut insts, first_failures, first_spent), (rest, rest_failures, rest_spent)) =
        if second.is_empty() {
            (
                serialize(first),
                (Vec::new(), Vec::new(), (0, BTreeMap::new())),
            )
        } else {
            std::thread::scope(|scope| {
                let other = scope.spawn(|| serialize(second));
                let mine = serialize(first);
                match other.join() {
                    Ok(theirs) => (mine, theirs),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            })
        };
    let yaql_steps = common_spent + first_spent.0 + rest_spent.0;
    if yaql_steps > budget {
        return Err(over_budget(
            budget,
            &tasks,
            vec![(common_spent, common_by), first_spent, rest_spent],
        ));
    }
    insts.extend(rest);
    failures.extend(first_failures);
    failures.extend(rest_failures);
    if !failures.is_empty() {
        return Err(PlanError::Evaluation(failures));
    }

    // Edges between vertices. A wait for a task on every node of a role set is an ask, which
    // becomes a barrier ([`barrier`]) instead of a wait per node.
    let lookup = |p: Place, ti: usize| vindex[p].get(&ti).copied();
    let mut masks = Masks::new(places_total, n);
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut asks: Vec<Ask> = Vec::new();
    for (v, &(p, ti)) in vertices.iter().enumerate() {
        let v = v as u32;
        let e = insts[v as usize].edges.clone();
        let mut targets = |name: &str, out: &mut Vec<usize>| match regex_name(name) {
            Some(pat) => out.extend(match_regex(pat).unwrap_or_default()),
            None => out.extend(id_of.get(name).copied()),
        };
        for (names_, forward) in [(&e.requires, true), (&e.required_for, false)] {
            for name in names_.iter() {
                let mut ids = Vec::new();
                targets(name, &mut ids);
                for tj in ids {
                    for q in [p, sync] {
                        if let Some(u) = lookup(q, tj) {
                            edges.push(if forward { (u, v) } else { (v, u) });
                        }
                    }
                }
            }
        }
        for (deps, forward) in [(&e.cross_depends, true), (&e.cross_depended_by, false)] {
            for d in deps.iter() {
                let mut ids = Vec::new();
                targets(&d.name, &mut ids);
                if ids.is_empty() {
                    continue;
                }
                // Every node of a role set: a group (`cross-depends`) or a mask of places.
                let group = match &d.role {
                    _ if d.any => None,
                    CrossRole::All => Some(Masks::ALL),
                    CrossRole::Roles(r) => {
                        Some(masks.of_roles(r, || resolver.resolve(r, false).places))
                    }
                    CrossRole::SelfNode | CrossRole::Sync => None,
                };
                if method.barriers
                    && forward
                    && let Some(mask) = group
                {
                    asks.extend(ids.iter().map(|&task| Ask {
                        consumer: v,
                        task,
                        mask,
                    }));
                    continue;
                }
                let allowed: Option<u32> = match (&d.role, group) {
                    (_, Some(mask)) => Some(mask),
                    (CrossRole::SelfNode | CrossRole::Sync, _) => None,
                    (CrossRole::All, None) => {
                        let all = J::String("*".to_string());
                        Some(masks.of_any(&all, || resolver.resolve(&all, true).places))
                    }
                    (CrossRole::Roles(r), None) => {
                        Some(masks.of_any(r, || resolver.resolve(r, true).places))
                    }
                };
                for tj in ids {
                    let mut add = |q: Place| {
                        // The task itself on its own node is excluded, whatever the role
                        // (`self` too: stable-8.0's cluster_health cross-depends on
                        // `/(primary-)?cluster/` on itself, which its own id matches).
                        if q == p && tj == ti {
                            return;
                        }
                        if let Some(u) = lookup(q, tj) {
                            edges.push(if forward { (u, v) } else { (v, u) });
                        }
                    };
                    match &d.role {
                        CrossRole::SelfNode => add(p),
                        CrossRole::Sync => add(sync),
                        _ => {
                            if let Some(mask) = allowed {
                                for &q in &placed[tj] {
                                    if masks.has(mask, q) {
                                        add(q);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let barriers = Barriers::build(
        asks,
        &mut masks,
        &|tj| placed[tj].iter().copied().collect(),
        &|q, tj| lookup(q, tj),
        &|v| vertices[v as usize],
        &mut edges,
    );
    // A direct wait that a group of its consumer covers is said once, by the group.
    edges.retain(|&(u, v)| {
        let (q, tu) = vertices[u as usize];
        !barriers.covers(&masks, v, q, tu)
    });
    edges.sort_unstable();
    edges.dedup();
    // What the plan means: each direct wait, and each member of each group a task waits for
    // (a consumer's groups are of different tasks, none has the consumer itself).
    let mut summary = Summary {
        nodes: n,
        edges: edges.len(),
        cross_node_edges: edges
            .iter()
            .filter(|&&(a, b)| vertices[a as usize].0 != vertices[b as usize].0)
            .count(),
        barriers: barriers.list.len(),
        yaql_steps,
        ..Summary::default()
    };
    for &(v, b) in &barriers.uses {
        let b = &barriers.list[b as usize];
        let p = vertices[v as usize].0;
        let here = usize::from(masks.has(b.mask, p) && lookup(p, b.task).is_some());
        summary.edges += b.members.len();
        summary.cross_node_edges += b.members.len() - here;
    }
    // The graph: barriers are vertices after the tasks', between their members and consumers.
    let nv = vertices.len();
    let total = nv + barriers.list.len();
    for (i, b) in barriers.list.iter().enumerate() {
        let bv = (nv + i) as u32;
        edges.extend(b.members.iter().map(|&m| (m, bv)));
    }
    edges.extend(barriers.uses.iter().map(|&(v, b)| ((nv as u32) + b, v)));
    edges.sort_unstable();

    // Order: Kahn's on a compact adjacency (edges are sorted, so each vertex's successors
    // are one slice). A barrier is passed as soon as its last member is placed, without a
    // place of its own, so tasks get the order they would get from waits per member. When it
    // cannot finish there is a cycle: petgraph finds and reports it.
    let mut starts = vec![0u32; total + 1];
    let mut indeg = vec![0u32; total];
    for &(a, b) in &edges {
        starts[a as usize + 1] += 1;
        indeg[b as usize] += 1;
    }
    for i in 0..total {
        starts[i + 1] += starts[i];
    }
    let succ = |v: usize| &edges[starts[v] as usize..starts[v + 1] as usize];
    let key = |v: usize| {
        let (p, ti) = vertices[v];
        Reverse((tasks[ti].index, p, v))
    };
    let mut heap: BinaryHeap<Reverse<(usize, Place, usize)>> =
        (0..nv).filter(|&v| indeg[v] == 0).map(key).collect();
    let mut order = vec![0usize; nv];
    let mut next = 0;
    while let Some(Reverse((_, _, v))) = heap.pop() {
        order[v] = next;
        next += 1;
        for &(_, u) in succ(v) {
            let u = u as usize;
            indeg[u] -= 1;
            if indeg[u] > 0 {
                continue;
            }
            if u < nv {
                heap.push(key(u));
                continue;
            }
            for &(_, w) in succ(u) {
                let w = w as usize;
                indeg[w] -= 1;
                if indeg[w] == 0 {
                    heap.push(key(w));
                }
            }
        }
    }
    if next < nv {
        return Err(PlanError::Cycle(find_cycles(&edges, total, &|v: usize| {
            let (p, ti) = *vertices.get(v)?;
            Some(CycleStep {
                task: tasks[ti].id.clone(),
                node: place_uid(p),
                source: tasks[ti].source.to_string(),
            })
        })));
    }
    drop(heap);
    drop(indeg);
    // Each vertex's predecessors, as one flat list sliced per vertex.
    let mut in_starts = vec![0u32; total + 1];
    for &(_, b) in &edges {
        in_starts[b as usize + 1] += 1;
    }
    for i in 0..total {
        in_starts[i + 1] += in_starts[i];
    }
    let mut fill = in_starts.clone();
    let mut preds = vec![0u32; edges.len()];
    for &(a, b) in &edges {
        preds[fill[b as usize] as usize] = a;
        fill[b as usize] += 1;
    }
    drop(fill);

    // Output.
    // The waits are in `preds` now; free the edge list before the steps are built.
    drop(edges);
    drop(starts);
    let mut by_place: Vec<Vec<usize>> = vec![Vec::new(); places_total];
    for (v, &(p, _)) in vertices.iter().enumerate() {
        by_place[p].push(v);
    }
    // Names shared by every reference (a thousand-node plan has millions of edges).
    let task_names: Vec<Arc<str>> = tasks.iter().map(|t| Arc::from(t.id.as_str())).collect();
    let task_sources: Vec<Arc<str>> = tasks
        .iter()
        .map(|t| Arc::from(t.source.to_string()))
        .collect();
    let place_names: Vec<Arc<str>> = (0..places_total)
        .map(|p| Arc::from(place_uid(p).as_str()))
        .collect();
    // Groups, named `task@roles` (told apart by a number when two role values read alike).
    let mut group_ids: HashMap<String, usize> = HashMap::new();
    let groups: Vec<Group> = barriers
        .list
        .iter()
        .map(|b| {
            let roles = masks.label(b.mask).to_string();
            let base = format!("{}@{roles}", tasks[b.task].id);
            let seen = group_ids.entry(base.clone()).or_insert(0);
            *seen += 1;
            let id = if *seen == 1 {
                base
            } else {
                format!("{base} #{seen}")
            };
            Group {
                id,
                task: tasks[b.task].id.clone(),
                roles,
                nodes: b
                    .members
                    .iter()
                    .map(|&m| place_uid(vertices[m as usize].0))
                    .collect(),
            }
        })
        .collect();
    drop(barriers);
    let group_names: Vec<Arc<str>> = groups.iter().map(|g| Arc::from(g.id.as_str())).collect();
    let mut node_plans = Vec::new();
    let mut conc: BTreeMap<usize, (Strategy, usize)> = BTreeMap::new();
    for (p, mut vs) in by_place.into_iter().enumerate() {
        if vs.is_empty() && p >= n {
            continue;
        }
        vs.sort_by_key(|&v| order[v]);
        let (name, roles_, tags) = if p == master {
            (
                "master".to_string(),
                vec!["master".to_string()],
                vec!["master".to_string()],
            )
        } else if p == sync {
            ("sync".to_string(), Vec::new(), Vec::new())
        } else {
            (
                nodes[p].user_node_name(),
                assigned[p].roles.clone(),
                assigned[p].tags.clone(),
            )
        };
        let mut steps = Vec::with_capacity(vs.len());
        for v in vs {
            let (_, ti) = vertices[v];
            let inst = &insts[v];
            match inst.status {
                Status::Run => summary.run += 1,
                Status::Skipped => summary.skipped += 1,
                Status::Stage => summary.stages += 1,
            }
            if let Some(s) = &inst.strategy {
                let e = conc.entry(ti).or_insert((s.clone(), 0));
                e.1 += 1;
                let stricter = match (e.0.limit(), s.limit()) {
                    (None, Some(_)) => true,
                    (Some(a), Some(b)) => b < a,
                    _ => false,
                };
                if stricter {
                    e.0 = s.clone();
                }
            }
            let mut req = preds[in_starts[v] as usize..in_starts[v + 1] as usize].to_vec();
            let waits_for_groups: Vec<GroupRef> = req
                .iter()
                .filter(|&&u| u as usize >= nv)
                .map(|&u| GroupRef {
                    index: u as usize - nv,
                    id: group_names[u as usize - nv].clone(),
                })
                .collect();
            req.retain(|&u| (u as usize) < nv);
            req.sort_unstable_by_key(|&u| order[u as usize]);
            steps.push(Step {
                id: task_names[ti].clone(),
                ty: inst.ty,
                status: inst.status,
                reason: inst.reason.clone(),
                order: order[v],
                source: task_sources[ti].clone(),
                parameters: inst.parameters.clone(),
                fail_on_error: inst.fail_on_error,
                strategy: inst.strategy.clone(),
                compared_with: inst.compared_with.clone(),
                requires: req
                    .into_iter()
                    .map(|u| {
                        let (q, tj) = vertices[u as usize];
                        TaskRef {
                            task: task_names[tj].clone(),
                            node: place_names[q].clone(),
                        }
                    })
                    .collect(),
                requires_groups: waits_for_groups,
            });
        }
        node_plans.push(NodePlan {
            uid: place_uid(p),
            name,
            roles: roles_,
            tags,
            tasks: steps,
        });
    }
    let mut seen = BTreeSet::new();
    warnings.retain(|w| seen.insert(w.clone()));
    Ok(Plan {
        cluster: cluster.name.clone(),
        cluster_id: cluster.id,
        release: release.name.clone(),
        release_version: release.version.clone(),
        summary,
        warnings,
        generated,
        unplaced,
        fault_tolerance_groups: fault_groups,
        groups,
        concurrency: conc
            .into_iter()
            .map(|(ti, (strategy, nodes))| Concurrency {
                task: tasks[ti].id.clone(),
                strategy,
                nodes,
            })
            .collect(),
        nodes: node_plans,
        data: dd,
        uids,
    })
}

/// Up to five cycles of the (node, task) graph, each starting at its smallest vertex, sorted
/// by their first task and node; vertices `describe` gives nothing for (barriers) are left
/// out of the path.
pub(super) fn find_cycles(
    edges: &[(u32, u32)],
    nv: usize,
    describe: &dyn Fn(usize) -> Option<CycleStep>,
) -> Vec<Vec<CycleStep>> {
    let mut g: DiGraph<(), ()> = DiGraph::with_capacity(nv, edges.len());
    for _ in 0..nv {
        g.add_node(());
    }
    g.extend_with_edges(edges.iter().map(|&(a, b)| (a, b)));
    let mut cycles = Vec::new();
    for comp in tarjan_scc(&g) {
        let looped = comp.len() > 1 || comp.first().is_some_and(|&x| g.contains_edge(x, x));
        if !looped {
            continue;
        }
        cycles.push(
            cycle_in(&g, &comp)
                .into_iter()
                .filter_map(|x| describe(x.index()))
                .collect::<Vec<_>>(),
        );
        if cycles.len() >= 5 {
            break;
        }
    }
    cycles.sort_by(|a, b| {
        let k = |c: &Vec<CycleStep>| c.first().map(|s| (s.task.clone(), s.node.clone()));
        k(a).cmp(&k(b))
    });
    cycles
}

/// One cycle through a strongly connected component: the shortest path from its smallest
/// vertex back to itself.
fn cycle_in(g: &DiGraph<(), ()>, comp: &[NodeIndex]) -> Vec<NodeIndex> {
    let inside: BTreeSet<NodeIndex> = comp.iter().copied().collect();
    let Some(&start) = inside.iter().next() else {
        return Vec::new();
    };
    if g.contains_edge(start, start) {
        return vec![start];
    }
    let mut prev: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(x) = queue.pop_front() {
        let mut next: Vec<NodeIndex> = g.neighbors(x).filter(|y| inside.contains(y)).collect();
        next.sort();
        for y in next {
            if y == start {
                let mut path = vec![x];
                let mut cur = x;
                while cur != start {
                    match prev.get(&cur) {
                        Some(&p) => {
                            path.push(p);
                            cur = p;
                        }
                        None => break,
                    }
                }
                path.reverse();
                return path;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = prev.entry(y) {
                e.insert(x);
                queue.push_back(y);
            }
        }
    }
    vec![start]
}

/// What a successful run of a plan adds to the deployed state: the (node, task) pairs it
/// ran, and its data for the nodes that ran something.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    pub tasks: Vec<(String, String)>,
    /// None when nothing ran.
    pub snapshot: Option<super::input::Snapshot>,
}

/// A [`Change`] that borrows its data from the plan: what a deployment stores (its snapshot
/// written as the text of [`super::input::Snapshot`]) without a copy of every node's data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeOf<'a> {
    pub tasks: Vec<(String, String)>,
    /// None when nothing ran.
    pub snapshot: Option<SnapshotOf<'a>>,
}

/// A snapshot's data, borrowed; serialised exactly as [`super::input::Snapshot`] (a deployment's
/// snapshot, and its transaction's `deployment_info`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapshotOf<'a> {
    pub common: &'a J,
    pub nodes: BTreeMap<&'a str, &'a data::Part>,
}

impl<'a> ChangeOf<'a> {
    /// The change of running `plan`'s tasks that `ran` keeps (node uid, task id): those of
    /// nodes or phases left out of a deployment did not run.
    pub fn of(plan: &'a Plan, ran: impl Fn(&str, &str) -> bool) -> ChangeOf<'a> {
        let mut tasks = Vec::new();
        for node in plan.nodes.iter().filter(|n| n.uid != "null") {
            for step in &node.tasks {
                if step.status == Status::Run && ran(&node.uid, &step.id) {
                    tasks.push((node.uid.clone(), step.id.to_string()));
                }
            }
        }
        if tasks.is_empty() {
            return ChangeOf::default();
        }
        let uids: std::collections::BTreeSet<&str> =
            tasks.iter().map(|(u, _)| u.as_str()).collect();
        let mut nodes: BTreeMap<&str, &data::Part> = plan
            .uids
            .iter()
            .zip(&plan.data.nodes)
            .filter(|(uid, _)| uids.contains(uid.as_str()))
            .map(|(uid, part)| (uid.as_str(), part))
            .collect();
        if uids.contains("master") {
            nodes.insert("master", &plan.data.master);
        }
        ChangeOf {
            snapshot: Some(SnapshotOf {
                common: &plan.data.common,
                nodes,
            }),
            tasks,
        }
    }
}

impl Change {
    /// [`ChangeOf::of`], owning its data.
    pub fn of(plan: &Plan, ran: impl Fn(&str, &str) -> bool) -> Change {
        let c = ChangeOf::of(plan, ran);
        Change {
            snapshot: c.snapshot.map(|s| super::input::Snapshot {
                common: s.common.clone(),
                nodes: s
                    .nodes
                    .into_iter()
                    .map(|(uid, part)| (uid.to_string(), part.clone()))
                    .collect(),
            }),
            tasks: c.tasks,
        }
    }
}

impl Deployed {
    /// Record a successful run of `plan` as deployment `id`: every task that ran on a node
    /// now compares with this deployment's data; skipped tasks keep their earlier record.
    pub fn record(&mut self, plan: &Plan, id: &str) {
        self.apply(Change::of(plan, |_, _| true), id);
    }

    /// Apply `change` as deployment `id`, then drop what nothing refers to any more.
    pub fn apply(&mut self, change: Change, id: &str) {
        let mut names = std::collections::HashSet::new();
        for (uid, task) in change.tasks {
            self.record_run(&mut names, &uid, &task, id);
        }
        if let Some(snap) = change.snapshot {
            self.deployments.insert(id.to_string(), snap);
        }
        self.prune();
    }
}
