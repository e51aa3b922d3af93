//! The deployment graph engine: Fuel task graphs (a release's, enabled plugins', legacy
//! plugin `tasks.yaml` adapted in) turned into an exact, explainable plan for every node of a
//! cluster. Pure: graphs, cluster and deployed state come in as values; no I/O, no clock.
//!
//! - [`task`]: the task model (every type and field Fuel knew, with its source file and line).
//! - [`roles`]: tags, primaries (`primary-controller` on exactly one controller) and role
//!   values (`*`, `master`, `/regex/`, names).
//! - [`fields`]: `{yaql_exp: ...}` at any depth of any field but `id`; `str.format` names.
//! - [`expr`]: legacy string conditions (Nailgun Expressions, as Fuel 8 wrote them).
//! - [`legacy`]: legacy plugin tasks adapted with generated ids, ordered by stage postfix.
//! - [`input`]: the cluster, its nodes, the deployed state; the cluster file format.
//! - [`data`]: each node's deployment data (`$`, `$node`, `$common`).
//! - [`source`]: a release's and a plugin's tasks, with positions, out of packages and
//!   fuel-library trees.
//! - [`build`]: merge, place, evaluate per node, edges, cycle check, order: [`plan`].
//! - [`barrier`]: a wait for a task on every node of a role set as one barrier vertex.
//! - [`share`]: conditions' sub-expressions that read only the common data, evaluated once
//!   per class of nodes instead of once per node.
//! - [`check`]: what can be checked of a package's graphs at install, without a cluster.
//! - [`plan`]: the plan and its text, JSON and dot renderings.
//! - [`upload`]: a graph uploaded through Nailgun's API, checked; Nailgun's merge by task id.
//! - [`picture`]: the plan's task graph laid out in layers, as SVG for the dashboard.

mod barrier;
pub mod build;
pub mod check;
pub mod data;
pub mod expr;
pub mod fields;
pub mod input;
pub mod legacy;
pub mod picture;
pub mod plan;
pub mod preview;
pub mod roles;
pub mod share;
pub mod source;
pub mod task;
pub mod upload;

pub use build::{
    Change, ChangeOf, DEFAULT_YAQL_BUDGET, EvalFailure, Method, PlanError, PluginGraph,
    ReleaseGraph, SnapshotOf, Spender, plan, plan_by, plan_with, plan_within,
};
pub use input::{Cluster, Deployed, NodeSpec, Replaced, Snapshot, parse_cluster};
pub use plan::{Group, GroupRef, Plan, Status, Step, Strategy};
pub use task::{Source, Task, TaskType};

#[cfg(test)]
mod tests;
