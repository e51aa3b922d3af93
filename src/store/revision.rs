//! The plan revision: one number that moves whenever anything a plan is made from changes, so
//! that a page can tell its kept plan still holds by reading one row. Before it, each view of
//! an environment read and hashed every input of its plan again (every node with its
//! inventory, disks, attributes and deployed state): about a second a view at 10,000 nodes.
//!
//! The number is kept by the database, not by the code that writes: every table is watched
//! (a trigger on each insert, delete and update that changes a watched column bumps
//! `plan_revision.n`) but the few in [`UNWATCHED`], which planning never reads and the busy
//! paths write all the time (runs, leases, sessions, a node's last call). So no write path can
//! forget to bump it, a new table is watched from its first migration, and a no-op update
//! (a column set to what it was) moves nothing. `planner`'s tests record every table and
//! column that reading a plan's inputs touches (SQLite's authorizer) and fail when one of them
//! is in [`UNWATCHED`]. The triggers themselves are SQLite's (`sqlite/revision.rs`), made
//! again at each open from this list.
//!
//! A kept plan remembers the revision its inputs were read at (in the same read transaction);
//! an equal revision later means that nothing it was made from has changed since. A different
//! one only means something may have: the planner then compares its digest of the inputs, as
//! before.

use super::{ReadTxn, Result};

/// A table, or one column of it, that planning never reads.
#[derive(Debug, Clone, Copy)]
pub struct Unwatched {
    pub table: &'static str,
    /// `None`: the whole table.
    pub column: Option<&'static str>,
    pub why: &'static str,
}

const fn table(table: &'static str, why: &'static str) -> Unwatched {
    Unwatched {
        table,
        column: None,
        why,
    }
}

const fn column(table: &'static str, column: &'static str, why: &'static str) -> Unwatched {
    Unwatched {
        table,
        column: Some(column),
        why,
    }
}

/// What planning never reads, and why it is not watched: each is written on a busy path (an
/// agent's call, a DHCP packet, a sign-in) that would otherwise move the revision all the time.
pub const UNWATCHED: &[Unwatched] = &[
    column(
        "nodes",
        "last_seen_at",
        "every agent call writes it; plans read nodes without it",
    ),
    column(
        "nodes",
        "agent_token_hash",
        "a bootstrap agent's hello rotates it",
    ),
    column(
        "nodes",
        "agent_token_pending_hash",
        "a bootstrap agent's hello rotates it",
    ),
    column(
        "nodes",
        "token_deployment",
        "which deployment issued the agent's token",
    ),
    column(
        "nodes",
        "os_credential_hash",
        "the service agent's credential",
    ),
    column("nodes", "agent_version", "an agent's hello reports it"),
    table(
        "step_runs",
        "a deployment's runs: each agent call moves one",
    ),
    table(
        "run_tallies",
        "the runs counted by status: moves with every run",
    ),
    table("deployment_states", "a running deployment's progress"),
    table("deployment_ran", "what a running deployment has started"),
    table("leases", "every DHCP packet writes one"),
    table("history", "the activity feed"),
    table("audit", "the audit log"),
    table("sessions", "dashboard sign-ins"),
    table("api_tokens", "tokens and their last use"),
    table("users", "accounts"),
    table("boot_tokens", "one per PXE boot"),
    table("node_bmcs", "the power sync writes each BMC's reading"),
    table(
        "master_tasks",
        "the master's own tasks (snapshots, verifications)",
    ),
];

impl ReadTxn<'_> {
    /// The plan revision now (see the module's text).
    pub fn plan_revision(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("SELECT n FROM plan_revision WHERE id = 1", [], |r| r.get(0))?)
    }
}
