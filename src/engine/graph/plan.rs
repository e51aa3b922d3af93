//! A plan: per node, the ordered list of tasks with their evaluated parameters, strategy,
//! skip reasons and the tasks (on any node) each must wait for; plus the warnings, the ids
//! generated for legacy plugin tasks, the tasks no node runs, fault-tolerance groups,
//! per-task concurrency and the group waits. A wait for a task on every node of a role set is
//! one [`Group`] (a barrier, see [`super::barrier`]) that the plan lists once, and each task
//! that waits for it names it: what a task waits for is its `requires` and every member of its
//! `requires_groups` ([`Step::waits`]). Rendered as text (for people), JSON (for programs;
//! byte-identical for the same input) and Graphviz dot, each saying a group wait once. Pure:
//! it formats values it is given.

use std::fmt::Write as _;
use std::io;
use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::Value as J;

use super::data::DeploymentData;
use super::legacy::Generated;

/// JSON shared between steps (parameters without YAQL are the same on every node).
#[derive(Debug, Clone, PartialEq)]
pub struct Shared(pub Arc<J>);

impl Serialize for Shared {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// What happens to a task on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The orchestrator runs it.
    Run,
    /// Kept in the graph for its edges; nothing runs (see `reason`).
    Skipped,
    /// A synchronisation point on the sync node.
    Stage,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Run => "run",
            Status::Skipped => "skipped",
            Status::Stage => "stage",
        }
    }
}

/// `parameters.strategy`: how many nodes may run the task at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Strategy {
    /// `parallel` or `one_by_one`.
    #[serde(rename = "type")]
    pub ty: String,
    /// For `parallel`: at most this many nodes at once (0 = no limit; absent = no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<u64>,
}

impl Strategy {
    /// How many nodes may run it at once; `None` for no limit.
    pub fn limit(&self) -> Option<u64> {
        if self.ty == "one_by_one" {
            Some(1)
        } else {
            self.amount.filter(|&a| a > 0)
        }
    }
}

/// A task on a node. The names are shared (a thousand-node plan has millions of these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    pub task: Arc<str>,
    pub node: Arc<str>,
}

impl Serialize for TaskRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("TaskRef", 2)?;
        st.serialize_field("task", &*self.task)?;
        st.serialize_field("node", &*self.node)?;
        st.end()
    }
}

/// A group wait: task `task` on every node of `nodes` (the nodes of the role set `roles` that
/// run it). A task that waits for the group waits for each of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// `task@roles`, unique in the plan.
    pub id: String,
    pub task: String,
    /// The role set as written (`*` = every cluster node; several sets joined by ` + `).
    pub roles: String,
    /// The members' nodes, in node order.
    pub nodes: Vec<String>,
}

/// A step's wait for a group: its place in [`Plan::groups`]; written as the group's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRef {
    pub index: usize,
    pub id: Arc<str>,
}

impl Serialize for GroupRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.id)
    }
}

/// One task of one node's list. Its texts are shared: every node's step of a task has the
/// same id and source, and its steps of one deployment's data the same reason and
/// deployment, so a plan of 10,000 nodes holds each once, not once a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub id: Arc<str>,
    /// The task's type as written (or computed); what runs is decided by `status`.
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
    /// Position in the whole plan's order (every `requires` comes earlier).
    pub order: usize,
    /// Where the task was written.
    pub source: Arc<str>,
    /// Evaluated parameters (only for tasks that run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Shared>,
    pub fail_on_error: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// The deployment whose data `$%old` held, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared_with: Option<Arc<str>>,
    /// Tasks that must finish (or be skipped) first, on this node or others, in plan order
    /// (those of its groups are not repeated here).
    pub requires: Vec<TaskRef>,
    /// Groups whose every member must finish (or be skipped) first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requires_groups: Vec<GroupRef>,
}

impl Step {
    /// Everything it waits for: its `requires`, then each group's members.
    pub fn waits<'a>(&'a self, plan: &'a Plan) -> impl Iterator<Item = TaskRef> + 'a {
        let groups = self
            .requires_groups
            .iter()
            .filter_map(|g| plan.groups.get(g.index))
            .flat_map(|g| {
                let task: Arc<str> = Arc::from(g.task.as_str());
                g.nodes.iter().map(move |node| TaskRef {
                    task: task.clone(),
                    node: Arc::from(node.as_str()),
                })
            });
        self.requires.iter().cloned().chain(groups)
    }
}

/// One node's ordered list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodePlan {
    /// Node uid; `master` for the master pseudo node, `null` for the sync node.
    pub uid: String,
    /// The operator's name for the node (`user_node_name`).
    pub name: String,
    pub roles: Vec<String>,
    pub tags: Vec<String>,
    pub tasks: Vec<Step>,
}

/// A task that no node runs, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unplaced {
    pub task: String,
    pub source: String,
    pub reason: String,
}

/// A group's fault tolerance (Astute's `fault_tolerance_groups`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultGroup {
    pub name: String,
    pub node_ids: Vec<String>,
    /// As written (int, `"N%"`, negative); node count + 1 (no limit) when absent.
    pub fault_tolerance: J,
}

/// How many nodes may run one task at once, over all its nodes (the strictest wins).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Concurrency {
    pub task: String,
    pub strategy: Strategy,
    pub nodes: usize,
}

/// Totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub nodes: usize,
    pub run: usize,
    pub skipped: usize,
    pub stages: usize,
    /// Waits between tasks, each member of a group a task waits for counted: what the plan
    /// means, not how it is stored.
    pub edges: usize,
    pub cross_node_edges: usize,
    /// Group waits (barriers) standing for many of those.
    pub barriers: usize,
    /// The YAQL steps the plan's evaluations took (see [`super::build`]'s budget).
    pub yaql_steps: u64,
}

/// The plan of one deployment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub cluster: String,
    pub cluster_id: i64,
    pub release: String,
    pub release_version: String,
    pub summary: Summary,
    pub warnings: Vec<String>,
    /// Ids given to legacy plugin tasks (`tasks.yaml`).
    pub generated: Vec<Generated>,
    pub unplaced: Vec<Unplaced>,
    pub fault_tolerance_groups: Vec<FaultGroup>,
    pub concurrency: Vec<Concurrency>,
    /// Group waits, each listed once (steps name them in `requires_groups`).
    pub groups: Vec<Group>,
    /// Cluster nodes in uid order, then `master` and the sync node `null` when they have tasks.
    pub nodes: Vec<NodePlan>,
    /// The deployment data the plan was computed from (to record after a success).
    #[serde(skip)]
    pub data: DeploymentData,
    /// Uids of the cluster nodes, in the order of `data.nodes`.
    #[serde(skip)]
    pub uids: Vec<String>,
}

/// Pretty-prints down to [`Shallow::DEPTH`] levels of nesting, compact below.
#[derive(Default)]
struct Shallow {
    pretty: serde_json::ser::PrettyFormatter<'static>,
    depth: usize,
}

impl Shallow {
    /// Plan (1), nodes (2), node (3), tasks (4), step (5), its lists and maps (6).
    const DEPTH: usize = 6;
    fn deep(&self) -> bool {
        self.depth > Self::DEPTH
    }
}

impl serde_json::ser::Formatter for Shallow {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        if self.deep() {
            w.write_all(b"[")
        } else {
            self.pretty.begin_array(w)
        }
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        let deep = self.deep();
        self.depth -= 1;
        if deep {
            w.write_all(b"]")
        } else {
            self.pretty.end_array(w)
        }
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if self.deep() {
            if first { Ok(()) } else { w.write_all(b",") }
        } else {
            self.pretty.begin_array_value(w, first)
        }
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.deep() {
            Ok(())
        } else {
            self.pretty.end_array_value(w)
        }
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        if self.deep() {
            w.write_all(b"{")
        } else {
            self.pretty.begin_object(w)
        }
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        let deep = self.deep();
        self.depth -= 1;
        if deep {
            w.write_all(b"}")
        } else {
            self.pretty.end_object(w)
        }
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if self.deep() {
            if first { Ok(()) } else { w.write_all(b",") }
        } else {
            self.pretty.begin_object_key(w, first)
        }
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.deep() {
            w.write_all(b":")
        } else {
            self.pretty.begin_object_value(w)
        }
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.deep() {
            Ok(())
        } else {
            self.pretty.end_object_value(w)
        }
    }
}

/// What the text plan says of its numbers, which the dashboard's plan and deployment pages
/// share.
pub const NUMBERING: &str = "tasks are numbered per node, 1 to n in the order the node runs \
     them (skipped ones too), as the dashboard's plan and deployment pages number them; a \
     deployment also runs each node's own deploy steps (provisioning: write the image, \
     configure, reboot to disk), which this plan does not list, numbered p1, p2, ... apart";

fn short(s: &str, max: usize) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

impl Plan {
    /// JSON (deterministic): indented down to each step's fields, one line per value below
    /// (each wait `{"task":..,"node":..}`, each parameter), so a thousand-node plan with two
    /// million waits stays readable and half the size.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        let _ = self.write_json(&mut out);
        out.pop();
        String::from_utf8(out).unwrap_or_default()
    }

    /// A node's list by uid.
    pub fn node(&self, uid: &str) -> Option<&NodePlan> {
        self.nodes.iter().find(|n| n.uid == uid)
    }

    /// The text report: summary, warnings, generated ids, unplaced tasks, then a table per
    /// node (cross-node waits listed under each task).
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let s = &self.summary;
        let _ = writeln!(
            o,
            "plan for {} (id {}), release {} ({}): {} nodes, {} tasks to run, {} skipped, {} \
             edges ({} across nodes)",
            self.cluster,
            self.cluster_id,
            self.release,
            self.release_version,
            s.nodes,
            s.run,
            s.skipped,
            s.edges,
            s.cross_node_edges
        );
        let _ = writeln!(o, "{NUMBERING}");
        if !self.warnings.is_empty() {
            let _ = writeln!(o, "\nwarnings:");
            for w in &self.warnings {
                let _ = writeln!(o, "  - {w}");
            }
        }
        if !self.generated.is_empty() {
            let _ = writeln!(o, "\nlegacy plugin tasks (tasks.yaml), ids generated:");
            for g in &self.generated {
                let _ = writeln!(
                    o,
                    "  {:<20} {:<24} {:<24} {}",
                    g.id, g.plugin, g.stage, g.source
                );
            }
        }
        if !self.unplaced.is_empty() {
            let _ = writeln!(o, "\nnot run on any node ({}):", self.unplaced.len());
            for u in &self.unplaced {
                let _ = writeln!(o, "  {:<40} {}", u.task, u.reason);
            }
        }
        if !self.concurrency.is_empty() {
            let _ = writeln!(o, "\nconcurrency limits:");
            for c in &self.concurrency {
                let limit = c
                    .strategy
                    .limit()
                    .map_or("no limit".to_string(), |l| format!("{l} at a time"));
                let _ = writeln!(
                    o,
                    "  {:<40} {:<10} {} ({} nodes)",
                    c.task, c.strategy.ty, limit, c.nodes
                );
            }
        }
        if !self.groups.is_empty() {
            let _ = writeln!(o, "\ngroup waits (barriers) ({}):", self.groups.len());
            for g in &self.groups {
                let nodes = g.nodes.join(", ");
                let _ = writeln!(
                    o,
                    "  {:<40} {} nodes: {}",
                    g.id,
                    g.nodes.len(),
                    short(&nodes, 120)
                );
            }
        }
        for n in &self.nodes {
            let label = match n.uid.as_str() {
                "null" => "sync node (null)".to_string(),
                "master" => "master".to_string(),
                uid => format!("node {uid} {}", n.name),
            };
            let _ = writeln!(o, "\n{label} [{}]", n.roles.join(", "));
            for (i, t) in n.tasks.iter().enumerate() {
                let what = match t.status {
                    Status::Run => String::new(),
                    Status::Stage => "stage".to_string(),
                    Status::Skipped => {
                        format!("skipped: {}", short(t.reason.as_deref().unwrap_or(""), 90))
                    }
                };
                let strategy = t.strategy.as_ref().map_or(String::new(), |s| {
                    s.limit()
                        .map_or(format!("[{}]", s.ty), |l| format!("[{} {l}]", s.ty))
                });
                let _ = writeln!(
                    o,
                    "  {:>4}. {:<6} {:<40} {:<12} {}{}",
                    i + 1,
                    if t.status == Status::Run { "run" } else { "-" },
                    t.id,
                    t.ty,
                    strategy,
                    what
                );
                let mut cross = t.requires.iter().filter(|r| *r.node != *n.uid).peekable();
                if cross.peek().is_some() || !t.requires_groups.is_empty() {
                    // Only as much as is shown (a node may wait for a thousand others).
                    let mut line = String::new();
                    let waits = cross.map(|r| format!("{}@{}", r.task, r.node)).chain(
                        t.requires_groups.iter().map(|g| {
                            let size = self.groups.get(g.index).map_or(0, |g| g.nodes.len());
                            format!("{} (barrier, {size} nodes)", g.id)
                        }),
                    );
                    for w in waits {
                        if !line.is_empty() {
                            line.push_str(", ");
                        }
                        line.push_str(&w);
                        if line.chars().count() > 200 {
                            break;
                        }
                    }
                    let _ = writeln!(o, "        waits for {}", short(&line, 200));
                }
            }
        }
        o
    }

    /// Graphviz: one cluster per node, skipped tasks dashed, stages as diamonds.
    pub fn to_dot(&self) -> String {
        let mut out = Vec::new();
        let _ = self.write_dot(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`Plan::to_json`] written out as it is made (a thousand-node plan is hundreds of MB).
    pub fn write_json(&self, w: &mut dyn io::Write) -> io::Result<()> {
        let mut ser = serde_json::Serializer::with_formatter(&mut *w, Shallow::default());
        self.serialize(&mut ser)?;
        w.write_all(b"\n")
    }

    /// [`Plan::to_dot`] written out as it is made.
    pub fn write_dot(&self, w: &mut dyn io::Write) -> io::Result<()> {
        /// A `"task@node"` dot id (double quotes in ids become single ones).
        struct Id<'a>(&'a str, &'a str);
        impl std::fmt::Display for Id<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"")?;
                for part in self.0.split('"').enumerate() {
                    if part.0 > 0 {
                        f.write_str("'")?;
                    }
                    f.write_str(part.1)?;
                }
                write!(f, "@{}\"", self.1)
            }
        }
        w.write_all(b"digraph plan {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n")?;
        for n in &self.nodes {
            writeln!(
                w,
                "  subgraph \"cluster_{}\" {{\n    label=\"{} [{}]\";",
                n.uid,
                n.name.replace('"', "'"),
                n.roles.join(", ")
            )?;
            for t in &n.tasks {
                let style = match t.status {
                    Status::Run => "",
                    Status::Skipped => ", style=dashed, fontcolor=gray40",
                    Status::Stage => ", shape=diamond",
                };
                writeln!(
                    w,
                    "    {} [label=\"{}\"{style}];",
                    Id(&t.id, &n.uid),
                    t.id.replace('"', "'")
                )?;
            }
            w.write_all(b"  }\n")?;
        }
        // A group wait is one barrier: its members point at it, it points at who waits.
        let barrier = |g: &Group| format!("\"{} (barrier)\"", g.id.replace('"', "'"));
        for g in &self.groups {
            writeln!(
                w,
                "  {} [label=\"{} ({} nodes)\", shape=octagon];",
                barrier(g),
                g.id.replace('"', "'"),
                g.nodes.len()
            )?;
            for node in &g.nodes {
                writeln!(w, "  {} -> {};", Id(&g.task, node), barrier(g))?;
            }
        }
        for n in &self.nodes {
            for t in &n.tasks {
                for r in &t.requires {
                    writeln!(w, "  {} -> {};", Id(&r.task, &r.node), Id(&t.id, &n.uid))?;
                }
                for g in t
                    .requires_groups
                    .iter()
                    .filter_map(|g| self.groups.get(g.index))
                {
                    writeln!(w, "  {} -> {};", barrier(g), Id(&t.id, &n.uid))?;
                }
            }
        }
        w.write_all(b"}\n")
    }
}
