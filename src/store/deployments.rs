//! Deployments and their step runs: creating a deployment from the runs the engine made,
//! handing a node its next run, recording results (idempotent by run and attempt), timeouts,
//! abort and retry, and moving nodes, the environment and the deployed state along as runs
//! finish. Every change is one transaction, so a master killed at any point restarts from a
//! consistent table: a run that had succeeded is never handed out again.
//!
//! Which run may start is decided by a [`Schedule`] per running deployment, kept in memory in
//! step with the rows this module writes (so a poll costs what the node's runs cost), and
//! rebuilt from the rows after a rollback or a restart. Node statuses move only through
//! [`crate::engine::state`]'s transition table (`WriteTxn::move_node`). No HTTP, no clock
//! (time comes in as `now`).

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value as J;

use super::catalog::{json_column, json_column_as, optional_json};
use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::engine::bmc_steps;
use crate::engine::liveness::{self, Waiting};
use crate::engine::orchestrate::{Progress, RunStatus, RunView};
use crate::engine::schedule::Schedule;
use crate::engine::state::{self, Event, NodeState};
use crate::engine::steps::Location;
use crate::events::Change;

/// The name of a reset's deployment (Nailgun's `reset_environment` task): when its runs on a
/// node are done, the node is reset ([`WriteTxn::reset_node`]) rather than finished, and when
/// it ends the environment is `new` again.
pub const RESET: &str = "reset_environment";

/// The name of a network verification (Nailgun's `verify_networks` task): a *check*, whose
/// runs probe the nodes' networks ([`crate::engine::network::verify`]) and move nothing: no
/// node or environment state changes, a failed probe is part of the verdict, and its end is
/// judged ([`WriteTxn::judge_check`]) into its message and result.
pub const VERIFY: &str = "verify_networks";

/// A deployment row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deployment {
    pub id: i64,
    pub cluster_id: i64,
    /// `running`, `done`, `error`, `aborted`, or `dry_run` (recorded, nothing ran).
    pub status: String,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    /// Nailgun's transaction name: `deployment`, `provision` (provisioning only), or
    /// [`RESET`].
    pub name: String,
    /// The graph type it ran.
    pub graph_type: String,
    /// What it concluded, when it judges something at its end (a network verification).
    pub message: Option<String>,
    /// Its result in Nailgun's task shape (a verification: the interfaces with absent VLANs).
    pub result: Option<J>,
    /// The chain it is a graph of (Nailgun's parent transaction), if any
    /// ([`crate::store::Chain`]).
    pub parent_id: Option<i64>,
}

impl Deployment {
    /// A check (network verification): it moves no node or environment state.
    pub fn is_check(&self) -> bool {
        self.name == VERIFY
    }
}

/// A step run row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub id: i64,
    pub deployment: i64,
    pub node_id: Option<i64>,
    pub seq: u32,
    pub interface: String,
    pub step: String,
    pub task: Option<String>,
    pub args: J,
    pub deps: Vec<i64>,
    pub concurrency: Option<String>,
    pub max_parallel: Option<u64>,
    pub timeout_s: u64,
    pub status: String,
    pub reason: Option<String>,
    pub attempt: u32,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub exit_code: Option<i32>,
    pub output_tail: String,
    pub error: Option<String>,
    /// Where it runs (`ramdisk`, `os`, `master`).
    pub runs_on: Location,
    /// What the agent reported beside its output (a network probe: the frames it heard).
    pub report: Option<J>,
}

/// What an agent's poll finds.
#[derive(Debug)]
pub enum Claim {
    /// Nothing to run now.
    Idle,
    /// A run, now running.
    Run(Box<Run>),
    /// The node's next run is due but runs elsewhere than this agent: on the installed OS
    /// while the node answers from the ramdisk, or the other way round.
    Elsewhere { run_id: i64, runs_on: Location },
}

impl Run {
    /// `interface.step`, as Ironic names steps.
    pub fn step_id(&self) -> String {
        format!("{}.{}", self.interface, self.step)
    }

    /// What the run is called when it fails (in history and the node's error).
    fn label(&self) -> String {
        label(self.task.as_deref(), &self.interface, &self.step)
    }

    /// The step's arguments as the agent sees them: a graph task run carries its task beside
    /// the step, not in its arguments.
    pub fn step_args(&self) -> serde_json::Value {
        if self.task.is_some() {
            serde_json::json!({})
        } else {
            self.args.clone()
        }
    }
}

/// How many runs of a deployment are in each status. Where the store counts a deployment's
/// runs, the runs of nodes deleted since are in it too, each in the status it was left in, and
/// `of_deleted_nodes` says how many of `total` they are (they are no longer listed): a
/// deployment keeps counting what it ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RunCounts {
    pub total: usize,
    pub pending: usize,
    pub running: usize,
    pub ok: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Of `total`, the runs of nodes deleted since, which went with them.
    pub of_deleted_nodes: usize,
}

impl RunCounts {
    /// Count `n` more runs in `status`.
    pub fn add(&mut self, status: &str, n: usize) {
        self.total += n;
        match status {
            "pending" => self.pending += n,
            "running" => self.running += n,
            "ok" => self.ok += n,
            "failed" => self.failed += n,
            _ => self.skipped += n,
        }
    }

    /// Finished without failing (ok or skipped): what a node's progress counts.
    pub fn done(&self) -> usize {
        self.ok + self.skipped
    }

    /// Count `n` runs in `status` of a node deleted since.
    pub fn add_deleted(&mut self, status: &str, n: usize) {
        self.add(status, n);
        self.of_deleted_nodes += n;
    }

    /// These counts with `other`'s added.
    pub fn plus(self, other: RunCounts) -> RunCounts {
        RunCounts {
            total: self.total + other.total,
            pending: self.pending + other.pending,
            running: self.running + other.running,
            ok: self.ok + other.ok,
            failed: self.failed + other.failed,
            skipped: self.skipped + other.skipped,
            of_deleted_nodes: self.of_deleted_nodes + other.of_deleted_nodes,
        }
    }

    /// The runs still listed: all but those of deleted nodes.
    pub fn listed(&self) -> usize {
        self.total - self.of_deleted_nodes
    }
}

/// A run's name in history and errors: its graph task, or `interface.step`.
fn label(task: Option<&str>, interface: &str, step: &str) -> String {
    task.map_or_else(|| format!("{interface}.{step}"), str::to_string)
}

/// What deciding about a report needs of its run.
/// Where a run belongs, for the schedule and the listeners of its changes.
#[derive(Debug, Clone, Copy)]
struct RunAt {
    deployment: i64,
    cluster: Option<i64>,
    node: Option<i64>,
}

struct RunHead {
    deployment: i64,
    node_id: Option<i64>,
    attempt: u32,
    status: String,
    /// The task, or `interface.step`.
    label: String,
    runs_on: Location,
    /// Whether its step moves its node through its states: all but the master's power-off
    /// that ends a reset ([`bmc_steps::moves_node`]); nor does any step of a check
    /// ([`VERIFY`]), which its deployment says.
    moves_node: bool,
}

/// What an agent reported about a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub attempt: u32,
    pub ok: bool,
    pub exit_code: Option<i32>,
    pub output_tail: String,
    pub error: Option<String>,
    /// What the run reported beside its output (a network probe: the frames it heard).
    pub report: Option<J>,
}

/// What became of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Recorded now.
    Accepted,
    /// This attempt's result was recorded before (a re-sent report).
    Duplicate,
    /// Not the run's current attempt, or the run is not active: ignored.
    Stale,
}

pub(super) const DEPLOYMENT_COLUMNS: &str =
    "id, cluster_id, status, created_at, finished_at, name, graph_type, message, result, parent_id";
/// The runs the timeout watcher fails, once a second: looked up through `step_runs_deadline`
/// (the running runs by `started_at + timeout_s`, the expression written as the index's), only
/// those past it, which a test of the migrations checks.
pub(super) const EXPIRED: &str = "status = 'running' AND started_at + timeout_s < ?1";
/// What deciding a result needs of run `?1` (its deployment is read apart, once, and handed
/// on to [`WriteTxn::advance_deployment`]). One table, not a join: SQLite compiled the joined
/// form with `deployments` again each time it was bound to another id
/// (`StatementStatus::RePrepare` counted one a call; single-table lookups by id are not),
/// 3.6% of the writer's time in a redeploy of 10,000 nodes.
pub(super) const RUN_HEAD: &str =
    "SELECT deployment, node_id, attempt, status, interface, step, task, runs_on
     FROM step_runs WHERE id = ?1";

pub(super) const RUN_COLUMNS: &str = "id, deployment, node_id, seq, interface, step, task, args, deps, \
     concurrency, max_parallel, timeout_s, status, reason, attempt, started_at, finished_at, \
     exit_code, output_tail, error, runs_on, report";

pub(super) fn deployment_from_row(r: &Row<'_>) -> rusqlite::Result<Deployment> {
    Ok(Deployment {
        id: r.get(0)?,
        cluster_id: r.get(1)?,
        status: r.get(2)?,
        created_at: r.get(3)?,
        finished_at: r.get(4)?,
        name: r.get(5)?,
        graph_type: r.get(6)?,
        message: r.get(7)?,
        result: optional_json(r, 8)?,
        parent_id: r.get(9)?,
    })
}

pub(super) fn run_from_row(r: &Row<'_>) -> rusqlite::Result<Run> {
    Ok(Run {
        id: r.get(0)?,
        deployment: r.get(1)?,
        node_id: r.get(2)?,
        seq: r.get(3)?,
        interface: r.get(4)?,
        step: r.get(5)?,
        task: r.get(6)?,
        args: json_column(r, 7)?,
        deps: json_column_as(r, 8)?,
        concurrency: r.get(9)?,
        max_parallel: r.get::<_, Option<i64>>(10)?.map(|m| m.max(0) as u64),
        timeout_s: r.get::<_, i64>(11)?.max(0) as u64,
        status: r.get(12)?,
        reason: r.get(13)?,
        attempt: r.get(14)?,
        started_at: r.get(15)?,
        finished_at: r.get(16)?,
        exit_code: r.get(17)?,
        output_tail: r.get(18)?,
        error: r.get(19)?,
        runs_on: {
            let at: String = r.get(20)?;
            Location::parse(&at).ok_or_else(|| {
                rusqlite::Error::FromSqlConversionFailure(
                    20,
                    rusqlite::types::Type::Text,
                    format!("runs_on {at:?} is not ramdisk, os or master").into(),
                )
            })?
        },
        report: optional_json(r, 21)?,
    })
}

impl ReadTxn<'_> {
    /// The running deployments that have a master run (a BMC step) not started yet.
    pub fn deployments_with_master_runs(&self) -> Result<Vec<i64>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT DISTINCT r.deployment FROM step_runs r
                   JOIN deployments d ON d.id = r.deployment
                 WHERE r.runs_on = 'master' AND r.status = 'pending' AND d.status = 'running'",
            )?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?)
    }

    pub fn deployment(&self, id: i64) -> Result<Option<Deployment>> {
        let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE id = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([id], deployment_from_row)
            .optional()?)
    }

    /// An environment's deployments, newest first.
    pub fn deployments(&self, cluster_id: i64) -> Result<Vec<Deployment>> {
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS} FROM deployments
             WHERE cluster_id = ?1 AND status != 'preparing' ORDER BY id DESC"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([cluster_id], deployment_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Deployments, newest first (of one environment or of all; or the one with `id`), each
    /// with how many runs it has and how many have finished (ok, failed or skipped).
    pub fn deployments_with_progress(
        &self,
        cluster_id: Option<i64>,
        id: Option<i64>,
    ) -> Result<Vec<(Deployment, u64, u64)>> {
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS},
               (SELECT COALESCE(SUM(c.n), 0) FROM counted_runs c WHERE c.deployment = d.id),
               (SELECT COALESCE(SUM(c.n), 0) FROM counted_runs c WHERE c.deployment = d.id
                  AND c.status IN ('ok', 'failed', 'skipped'))
             FROM deployments d
             WHERE (?1 IS NULL OR d.cluster_id = ?1) AND (?2 IS NULL OR d.id = ?2)
               AND d.status != 'preparing'
             ORDER BY d.id DESC"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([cluster_id, id], |r| {
            let count = |i| r.get::<_, i64>(i).map(|n| n.max(0).unsigned_abs());
            Ok((deployment_from_row(r)?, count(10)?, count(11)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every run of a deployment, by node then order (sync-node runs first: `NULLS FIRST`,
    /// SQLite's own order for ascending keys). In the order of `step_runs_by_deployment`, so
    /// a page of it (`runs_where`) is read from the index instead of sorting every run first.
    pub fn runs(&self, deployment: i64) -> Result<Vec<Run>> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM step_runs WHERE deployment = ?1
             ORDER BY node_id NULLS FIRST, seq, id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([deployment], run_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The nodes deployment `d` waits on because their agents have gone silent
    /// ([`crate::engine::liveness`]); none unless it runs.
    pub fn waiting_agents(&self, d: &Deployment, now: i64) -> Result<Vec<Waiting>> {
        if d.status != "running" {
            return Ok(Vec::new());
        }
        // No agent silent (the rule while a deployment goes well): nothing waits on one, and
        // neither the runs (200,000 at 10,000 nodes) nor the nodes need be read. Asked of the
        // nodes last seen before the cutoff, each checked against the deployment's runs by
        // one seek in step_runs_by_node: reading every node of a 10,000-node deployment for
        // this (its DISTINCT over the runs' index) took each poll about 29 ms of CPU.
        let any_silent: bool = self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM nodes n WHERE n.last_seen_at < ?2
                   AND EXISTS (SELECT 1 FROM step_runs r
                               WHERE r.deployment = ?1 AND r.node_id = n.id))",
            )?
            .query_row(params![d.id, liveness::silent_before(now)], |r| r.get(0))?;
        if !any_silent {
            return Ok(Vec::new());
        }
        let seen: std::collections::HashMap<i64, liveness::Agent> = self
            .conn
            .prepare_cached(
                "SELECT id, last_seen_at, name FROM nodes WHERE id IN
                 (SELECT DISTINCT node_id FROM step_runs WHERE deployment = ?1)",
            )?
            .query_map([d.id], |r| {
                Ok((
                    r.get(0)?,
                    liveness::Agent {
                        last_seen: r.get(1)?,
                        name: r.get(2)?,
                    },
                ))
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(liveness::waiting(
            self.run_views(d.id)?,
            d.created_at,
            &seen,
            now,
        ))
    }

    /// What scheduling needs of every run of a deployment, without arguments or output: the
    /// orchestrator reads this on every claim and report, so it stays small.
    pub fn run_views(&self, deployment: i64) -> Result<Vec<RunView>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, node_id, seq, status, deps, concurrency, max_parallel, timeout_s, runs_on
             FROM step_runs WHERE deployment = ?1",
        )?;
        let rows = stmt.query_map([deployment], |r| {
            let status: String = r.get(3)?;
            Ok(RunView {
                id: r.get(0)?,
                node: r.get(1)?,
                seq: r.get(2)?,
                status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
                deps: json_column_as(r, 4)?,
                concurrency: r.get(5)?,
                max_parallel: r.get::<_, Option<i64>>(6)?.map(|m| m.max(0) as u64),
                timeout_s: r.get::<_, i64>(7)?.max(0) as u64,
                runs_on: Location::parse(r.get_ref(8)?.as_str()?).unwrap_or_default(),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn run(&self, id: i64) -> Result<Option<Run>> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM step_runs WHERE id = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([id], run_from_row)
            .optional()?)
    }

    /// The newest deployment a node took part in, with the node's runs in it.
    pub fn node_runs(&self, node_id: i64) -> Result<Option<(Deployment, Vec<Run>)>> {
        let dep: Option<i64> = self
            .conn
            .query_row(
                "SELECT MAX(deployment) FROM step_runs WHERE node_id = ?1",
                [node_id],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        let Some(dep) = dep else {
            return Ok(None);
        };
        let Some(d) = self.deployment(dep)? else {
            return Ok(None);
        };
        let runs = self
            .runs(dep)?
            .into_iter()
            .filter(|r| r.node_id == Some(node_id))
            .collect();
        Ok(Some((d, runs)))
    }

    pub fn running_deployment(&self, cluster_id: i64) -> Result<Option<Deployment>> {
        // At most one deployment of an environment runs (create_deployment refuses a second).
        // No ORDER BY ... LIMIT: with one, SQLite compiles the cached statement again on every
        // use (its plan depends on ?1), and this runs on every agent call.
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS} FROM deployments
             WHERE cluster_id = ?1 AND status = 'running'"
        );
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([cluster_id], deployment_from_row)
            .optional()?)
    }

    /// What keeps environment `cluster_id` busy: its running deployment (a graph's, a reset, a
    /// network verification), else its chain of graphs that goes (between its graphs too).
    /// While one is, nothing else of the environment starts and its configuration does not
    /// change.
    pub fn busy(&self, cluster_id: i64) -> Result<Option<Deployment>> {
        match self.running_deployment(cluster_id)? {
            Some(d) => Ok(Some(d)),
            None => self.active_chain(cluster_id),
        }
    }

    /// Refuse (409) to start something in environment `cluster_id` while it is [`busy`],
    /// saying with what, but for chain `own`'s next graph.
    ///
    /// [`busy`]: ReadTxn::busy
    pub fn refuse_if_busy(&self, cluster_id: i64, own: Option<i64>) -> Result<()> {
        let Some(d) = self.busy(cluster_id)? else {
            return Ok(());
        };
        let stop = format!("PUT /api/v1/clusters/{cluster_id}/stop_deployment");
        let why = if d.status == super::CHAINING {
            if Some(d.id) == own {
                return Ok(());
            }
            format!(
                "environment {cluster_id} runs graphs one after another (transaction {}); stop \
                 it first ({stop})",
                d.id
            )
        } else if d.is_check() {
            format!(
                "environment {cluster_id} is running a network verification (task {}); wait \
                 for it to end",
                d.id
            )
        } else {
            format!(
                "environment {cluster_id} is being deployed (deployment {}); abort it first \
                 ({stop})",
                d.id
            )
        };
        Err(StoreError::Conflict(why))
    }
}

impl WriteTxn<'_> {
    /// Forget a finished deployment and its runs (Nailgun's `DELETE /transactions/{id}`); what
    /// it deployed stays the environment's deployed state. A running one is refused.
    pub fn delete_deployment(&self, id: i64, now: i64) -> Result<()> {
        let d = self.existing_deployment(id)?;
        if matches!(d.status.as_str(), "running" | "preparing" | super::CHAINING) {
            return Err(StoreError::Conflict(format!(
                "deployment {id} is running; abort it first"
            )));
        }
        self.refuse_in_running_chain(&d)?;
        // A chain's children go with it (foreign key).
        self.conn
            .execute("DELETE FROM deployments WHERE id = ?1", [id])?;
        self.emit(Change::Deployment {
            id,
            cluster: Some(d.cluster_id),
            status: "deleted".to_string(),
        });
        self.add_event(
            now,
            super::About::cluster(d.cluster_id),
            "deployment.deleted",
            &format!("deployment {id} ({}) deleted", d.status),
        )
    }

    /// Hand `node_id` its next run, if its environment is deploying and the run may start.
    /// A run the master still thinks is running on the node (its agent restarted) is handed
    /// again with the next attempt number.
    pub fn claim_run(&self, node_id: i64, agent: Location, now: i64) -> Result<Claim> {
        // A woken call's claim frees its wave's place (`waiters`).
        self.note_claim(node_id);
        // Only what is needed: this runs on every poll of every agent.
        let (cluster, status, error_type): (Option<i64>, String, Option<String>) = self
            .conn
            .prepare_cached("SELECT cluster_id, status, error_type FROM nodes WHERE id = ?1")?
            .query_row([node_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?
            .ok_or_else(|| StoreError::NotFound {
                entity: "node",
                id: node_id.to_string(),
            })?;
        let Some(cluster) = cluster else {
            return Ok(Claim::Idle);
        };
        let Some(dep) = self.read().running_deployment(cluster)? else {
            return Ok(Claim::Idle);
        };
        let Some((run_id, runs_on)) = self.with_schedule(dep.id, |s| {
            s.next_for(node_id)
                .map(|id| (id, s.runs_on(id).unwrap_or_default()))
        })?
        else {
            return Ok(Claim::Idle);
        };
        if runs_on != agent {
            // The run is for the node's other agent: the OS's while the node is still in the
            // bootstrap (it booted from the network instead of its disk), or the ramdisk's
            // while the installed OS answers (its disk was not rewritten).
            return Ok(Claim::Elsewhere { run_id, runs_on });
        }
        self.conn
            .prepare_cached(
                "UPDATE step_runs SET status = 'running', attempt = attempt + 1, started_at = ?1,
                   finished_at = NULL, exit_code = NULL, error = NULL
                 WHERE id = ?2",
            )?
            .execute(params![now, run_id])?;
        self.mirror(
            RunAt {
                deployment: dep.id,
                cluster: Some(dep.cluster_id),
                node: Some(node_id),
            },
            run_id,
            RunStatus::Running,
        );
        let run = self
            .read()
            .run(run_id)?
            .ok_or_else(|| StoreError::NotFound {
                entity: "run",
                id: run_id.to_string(),
            })?;
        if !dep.is_check() && bmc_steps::moves_node(&run.interface, &run.step) {
            let from = super::nodes::stored_state(node_id, &status, error_type.as_deref())?;
            self.move_node_from(node_id, from, Some(dep.id), now, |s| {
                state::enter(s, run.runs_on.phase())
            })?;
        }
        Ok(Claim::Run(Box::new(run)))
    }

    /// The nodes whose next run is due on the master (a BMC step), in every running
    /// deployment: what the master's step runner claims with [`WriteTxn::claim_run`].
    /// Only deployments with a pending master run are looked at (an index holds just those),
    /// so with no BMC step waiting this costs one empty index lookup.
    pub fn master_runs_due(&self) -> Result<Vec<i64>> {
        let deployments = self.read().deployments_with_master_runs()?;
        let mut nodes = Vec::new();
        for dep in deployments {
            let due = self.with_schedule(dep, |s| {
                s.nodes()
                    .filter(|n| {
                        s.next_for(*n)
                            .is_some_and(|id| s.runs_on(id) == Some(Location::Master))
                    })
                    .collect::<Vec<_>>()
            })?;
            nodes.extend(due);
        }
        Ok(nodes)
    }

    /// Record an agent's result for a run of `node_id`.
    pub fn report_run(
        &self,
        run_id: i64,
        node_id: i64,
        result: &RunResult,
        now: i64,
    ) -> Result<Report> {
        // Only what deciding needs; not the arguments or the output.
        let head = self
            .conn
            .prepare_cached(RUN_HEAD)?
            .query_row([run_id], |r| {
                Ok(RunHead {
                    deployment: r.get(0)?,
                    node_id: r.get(1)?,
                    attempt: r.get(2)?,
                    status: r.get(3)?,
                    label: label(
                        r.get_ref(6)?.as_str_or_null()?,
                        r.get_ref(4)?.as_str()?,
                        r.get_ref(5)?.as_str()?,
                    ),
                    runs_on: Location::parse(r.get_ref(7)?.as_str()?).unwrap_or_default(),
                    moves_node: bmc_steps::moves_node(
                        r.get_ref(4)?.as_str()?,
                        r.get_ref(5)?.as_str()?,
                    ),
                })
            })
            .optional()?;
        let Some(run) = head else {
            return Err(StoreError::NotFound {
                entity: "run",
                id: run_id.to_string(),
            });
        };
        if run.node_id != Some(node_id) {
            return Err(StoreError::NotFound {
                entity: "run of this node",
                id: run_id.to_string(),
            });
        }
        if run.attempt != result.attempt {
            return Ok(Report::Stale);
        }
        match run.status.as_str() {
            "running" => {}
            "ok" | "failed" => return Ok(Report::Duplicate),
            _ => return Ok(Report::Stale),
        }
        // Read once: nothing below changes the deployment's row before it closes it.
        let Some(dep) = self.read().deployment(run.deployment)? else {
            return Err(StoreError::NotFound {
                entity: "deployment",
                id: run.deployment.to_string(),
            });
        };
        let status = if result.ok {
            RunStatus::Ok
        } else {
            RunStatus::Failed
        };
        self.conn
            .prepare_cached(
                "UPDATE step_runs SET status = ?1, finished_at = ?2, exit_code = ?3,
                   output_tail = ?4, error = ?5, report = ?6 WHERE id = ?7",
            )?
            .execute(params![
                status.as_str(),
                now,
                result.exit_code,
                tail(&result.output_tail),
                result.error,
                result.report.as_ref().map(J::to_string),
                run_id
            ])?;
        self.mirror(
            RunAt {
                deployment: dep.id,
                cluster: Some(dep.cluster_id),
                node: Some(node_id),
            },
            run_id,
            status,
        );
        if !run.moves_node || dep.name == VERIFY {
            // A check's failed probe is part of its verdict, not the node's error; a failed
            // power-off after an erase leaves the node where the erase put it.
        } else if !result.ok {
            let why = result.error.as_deref().unwrap_or("step failed");
            self.fail_node(run.node_id, run.deployment, &run.label, why, now)?;
        } else if run.runs_on.phase() == state::Phase::Provision
            && self.with_schedule(run.deployment, |s| s.provisioned(node_id))?
        {
            // The node's last provisioning step (reboot_to_disk): it is provisioned while
            // its installed OS boots, before its agent there takes a deployment step.
            self.move_node(node_id, Some(run.deployment), now, state::provisioning_done)?;
        }
        self.advance_deployment(&dep, Some(node_id), now)?;
        Ok(Report::Accepted)
    }

    /// Keep the latest output tail of a running run.
    pub fn run_output(&self, run_id: i64, node_id: i64, attempt: u32, text: &str) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE step_runs SET output_tail = ?1
                 WHERE id = ?2 AND node_id = ?3 AND attempt = ?4 AND status = 'running'",
            )?
            .execute(params![tail(text), run_id, node_id, attempt])?;
        Ok(n > 0)
    }

    /// Fail every running run that has outlived its timeout ([`EXPIRED`]), and every due run
    /// no agent took in time (`boot_s`: how long a node may take to boot before a run it must
    /// boot for, `deploy.boot_timeout`). Returns how many.
    pub fn expire_runs(&self, now: i64, boot_s: u64) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM step_runs WHERE {EXPIRED}"
        ))?;
        let late: Vec<Run> = stmt
            .query_map([now], run_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        for run in &late {
            let why = format!("timed out after {} s", run.timeout_s);
            self.conn.execute(
                "UPDATE step_runs SET status = 'failed', finished_at = ?1, error = ?2 WHERE id = ?3",
                params![now, why, run.id],
            )?;
            let at = RunAt {
                deployment: run.deployment,
                cluster: self.cluster_of(run.deployment)?,
                node: run.node_id,
            };
            self.mirror(at, run.id, RunStatus::Failed);
            if !self.is_check(run.deployment)? {
                self.fail_node(run.node_id, run.deployment, &run.label(), &why, now)?;
            }
            self.advance(run.deployment, run.node_id, now)?;
        }
        Ok(late.len() + self.expire_untaken(now, boot_s)?)
    }

    /// Fail every run that has been due longer than it may wait without its node's agent
    /// taking it ([`Schedule::overdue`]: its timeout, or `boot_s` after a boot), saying why:
    /// the agent has not called since it was due (offline, or cannot reach the master), or the
    /// agent that calls is the node's other one. A retry makes them due again. Returns how
    /// many.
    fn expire_untaken(&self, now: i64, boot_s: u64) -> Result<usize> {
        let running: Vec<i64> = self
            .conn
            .prepare_cached("SELECT id FROM deployments WHERE status = 'running'")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut failed = 0;
        for dep in running {
            for late in self.with_schedule(dep, |s| s.overdue(now, boot_s))? {
                let (run_id, since) = (late.run, late.since);
                let Some(run) = self.read().run(run_id)? else {
                    continue;
                };
                let Some(node) = run.node_id else { continue };
                let (last_seen, kind): (i64, String) = self
                    .conn
                    .prepare_cached("SELECT last_seen_at, agent_kind FROM nodes WHERE id = ?1")?
                    .query_row([node], |r| Ok((r.get(0)?, r.get(1)?)))?;
                let kind = Location::parse(&kind).unwrap_or_default();
                let within = if late.for_boot {
                    format!(
                        "within the {} s its node may take to boot (deploy.boot_timeout)",
                        late.limit_s
                    )
                } else {
                    format!("within its {} s timeout", late.limit_s)
                };
                let why = if last_seen <= since {
                    format!(
                        "node-{node}'s agent has not called since {}; the step was due from \
                         {} and was not taken {within} (the node is off, hung, or cannot \
                         reach the master)",
                        crate::model::utc(last_seen),
                        crate::model::utc(since),
                    )
                } else {
                    format!(
                        "the step runs on {} but node-{node}'s agent calls from {}; it was due \
                         from {} and was not taken {within} (did the node boot its installed \
                         OS?)",
                        run.runs_on.describe(),
                        kind.describe(),
                        crate::model::utc(since),
                    )
                };
                self.conn.execute(
                    "UPDATE step_runs SET status = 'failed', finished_at = ?1, error = ?2
                     WHERE id = ?3 AND status = 'pending'",
                    params![now, why, run.id],
                )?;
                let at = RunAt {
                    deployment: dep,
                    cluster: self.cluster_of(dep)?,
                    node: Some(node),
                };
                self.mirror(at, run.id, RunStatus::Failed);
                if self.is_check(dep)? {
                    self.advance(dep, Some(node), now)?;
                    failed += 1;
                    continue;
                }
                // The node never entered the step's phase (nobody took the step): it fails in
                // that phase, as if it had.
                let phase = run.runs_on.phase();
                self.move_node(node, Some(dep), now, |s| match s {
                    NodeState::Error(_) => Ok(s),
                    s => state::next(state::enter(s, phase)?, Event::StepFailed),
                })?;
                self.add_event(
                    now,
                    super::About::deployment(dep).and_node(node),
                    "node.error",
                    &format!("{} failed: {why}", run.label()),
                )?;
                self.advance(dep, Some(node), now)?;
                failed += 1;
            }
        }
        Ok(failed)
    }

    /// A node that leaves its environment while it is being deployed runs nothing more of it:
    /// its runs not yet finished fail, saying so, and the deployment goes on without them (or
    /// ends, when nothing else can move), instead of waiting for it forever.
    pub(super) fn leave_running_deployment(
        &self,
        cluster_id: i64,
        node: i64,
        now: i64,
    ) -> Result<()> {
        let Some(d) = self.read().running_deployment(cluster_id)? else {
            return Ok(());
        };
        let open: Vec<i64> = self
            .conn
            .prepare_cached(
                "SELECT id FROM step_runs WHERE deployment = ?1 AND node_id = ?2
                   AND status IN ('pending', 'running')",
            )?
            .query_map([d.id, node], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        if open.is_empty() {
            return Ok(());
        }
        let why = format!("node-{node} left the environment during the deployment");
        for id in &open {
            self.conn.execute(
                "UPDATE step_runs SET status = 'failed', finished_at = ?1, error = ?2
                 WHERE id = ?3",
                params![now, why, id],
            )?;
            let at = RunAt {
                deployment: d.id,
                cluster: Some(d.cluster_id),
                node: Some(node),
            };
            self.mirror(at, *id, RunStatus::Failed);
        }
        self.add_event(
            now,
            super::About::deployment(d.id).and_node(node),
            "deployment.node_left",
            &format!(
                "deployment {}: {} runs of node-{node} failed: {why}",
                d.id,
                open.len()
            ),
        )?;
        self.advance(d.id, None, now)
    }

    /// Stop handing out runs; what runs finishes and is recorded, nothing else starts. The
    /// runs keep their state, so a retry resumes where it stopped.
    pub fn abort_deployment(&self, id: i64, now: i64) -> Result<Deployment> {
        let d = self.existing_deployment(id)?;
        if d.status != "running" {
            return Err(StoreError::Conflict(format!(
                "deployment {id} is {}, not running",
                d.status
            )));
        }
        self.conn.execute(
            "UPDATE deployments SET status = 'aborted', finished_at = ?1 WHERE id = ?2",
            params![now, id],
        )?;
        self.deployment_changed(id)?;
        if d.is_check() {
            self.forget_schedule(id);
            self.conn.execute(
                "UPDATE deployments SET message = 'Network verification was stopped.'
                 WHERE id = ?1",
                [id],
            )?;
            self.add_event(
                now,
                super::About::deployment(id),
                "deployment.aborted",
                &format!("network verification {id} stopped"),
            )?;
            return self.existing_deployment(id);
        }
        self.conn.execute(
            "UPDATE clusters SET status = 'stopped' WHERE id = ?1",
            [d.cluster_id],
        )?;
        self.forget_schedule(id);
        // Nodes in the middle of a phase stop there, in error; a retry resumes them.
        for node in self.deployment_nodes(id)? {
            self.move_node(node, Some(id), now, |s| match s {
                NodeState::Provisioning
                | NodeState::ProvisionWait
                | NodeState::Deploying
                | NodeState::DeployWait => state::next(s, Event::Abort),
                other => Ok(other),
            })?;
        }
        self.add_event(
            now,
            super::About::deployment(id),
            "deployment.aborted",
            &format!("deployment {id} aborted"),
        )?;
        self.existing_deployment(id)
    }

    /// Run the failed steps again (and go on after an abort); succeeded steps never run again.
    pub fn retry_deployment(&self, id: i64, now: i64) -> Result<Deployment> {
        let d = self.existing_deployment(id)?;
        // Not a dry run either: retrying one would run for real what it only recorded.
        if !matches!(d.status.as_str(), "error" | "aborted") {
            return Err(StoreError::Conflict(format!(
                "deployment {id} is {}; only a failed or aborted deployment can be retried",
                d.status
            )));
        }
        if d.is_check() {
            return Err(StoreError::Conflict(format!(
                "{id} is a network verification; start a new one instead of retrying it"
            )));
        }
        self.refuse_retry_of_chain(&d)?;
        self.conn.execute(
            "UPDATE step_runs SET status = 'pending', started_at = NULL, finished_at = NULL
             WHERE deployment = ?1 AND status = 'failed'",
            [id],
        )?;
        self.conn.execute(
            "UPDATE deployments SET status = 'running', finished_at = NULL WHERE id = ?1",
            [id],
        )?;
        self.deployment_changed(id)?;
        self.conn.execute(
            "UPDATE clusters SET status = 'deployment' WHERE id = ?1",
            [d.cluster_id],
        )?;
        self.forget_schedule(id);
        for node in self.deployment_nodes(id)? {
            self.move_node(node, Some(id), now, |s| match s {
                NodeState::Error(_) => state::next(s, Event::Retry),
                other => Ok(other),
            })?;
        }
        self.add_event(
            now,
            super::About::deployment(id),
            "deployment.retried",
            &format!("deployment {id} retried"),
        )?;
        self.advance(id, None, now)?;
        self.existing_deployment(id)
    }

    /// Whether deployment `dep` is a check ([`VERIFY`]).
    fn is_check(&self, dep: i64) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached("SELECT name FROM deployments WHERE id = ?1")?
            .query_row([dep], |r| r.get::<_, String>(0))
            .optional()?
            .is_some_and(|n| n == VERIFY))
    }

    /// Insert a deployment row (a graph of chain `parent` at its place, when given), its id
    /// taken from the one id space of transactions and master tasks; a place taken already
    /// is a conflict.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert_deployment(
        &self,
        cluster_id: i64,
        status: &str,
        finished_at: Option<i64>,
        name: &str,
        graph_type: &str,
        parent: Option<(i64, u32)>,
        now: i64,
    ) -> Result<i64> {
        // One id space with the master's tasks (`master_tasks`).
        let id = self.take_id(&super::ids::TRANSACTIONS)?;
        let inserted = self.conn.execute(
            "INSERT INTO deployments (id, cluster_id, status, created_at, finished_at, name,
               graph_type, parent_id, chain_seq)
             VALUES (?9, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                cluster_id,
                status,
                now,
                finished_at,
                name,
                graph_type,
                parent.map(|p| p.0),
                parent.map(|p| p.1),
                id
            ],
        );
        match (inserted, parent) {
            (Ok(_), _) => {
                // A deployment being prepared is nobody's business until it starts.
                if status != "preparing" {
                    self.emit(Change::Deployment {
                        id,
                        cluster: Some(cluster_id),
                        status: status.to_string(),
                    });
                }
                Ok(id)
            }
            (Err(rusqlite::Error::SqliteFailure(e, _)), Some((chain, place)))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(StoreError::Conflict(format!(
                    "graph {} of transaction {chain} has started already",
                    place + 1
                )))
            }
            (Err(e), _) => Err(e.into()),
        }
    }

    pub(super) fn existing_deployment(&self, id: i64) -> Result<Deployment> {
        self.read()
            .deployment(id)?
            .ok_or_else(|| StoreError::NotFound {
                entity: "deployment",
                id: id.to_string(),
            })
    }

    fn fail_node(
        &self,
        node: Option<i64>,
        dep: i64,
        label: &str,
        why: &str,
        now: i64,
    ) -> Result<()> {
        let Some(node) = node else {
            return Ok(());
        };
        self.move_node(node, Some(dep), now, |s| match s {
            // Stopped by an abort already.
            NodeState::Error(_) => Ok(s),
            s => state::next(s, Event::StepFailed),
        })?;
        self.add_history(
            now,
            Some(node),
            "node.error",
            &format!("{label} failed: {why}"),
        )
    }

    /// The nodes that have runs in deployment `dep`.
    fn deployment_nodes(&self, dep: i64) -> Result<Vec<i64>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT DISTINCT node_id FROM step_runs WHERE deployment = ?1 AND node_id IS NOT NULL",
        )?;
        let rows = stmt.query_map([dep], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Run `f` on deployment `dep`'s schedule, built from its rows when not in memory.
    pub(super) fn with_schedule<T>(
        &self,
        dep: i64,
        f: impl FnOnce(&mut Schedule) -> T,
    ) -> Result<T> {
        let mut cache = self.schedules.borrow_mut();
        let schedule = match cache.entry(dep) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Schedule::new(self.read().run_views(dep)?))
            }
        };
        Ok(f(schedule))
    }

    /// Mirror a run status just written into its deployment's schedule, if one is in memory
    /// (otherwise the next use builds it from the rows, which already say so).
    /// It is also where listeners hear of every run status written (`events::Change::Run`).
    fn mirror(&self, at: RunAt, run: i64, status: RunStatus) {
        if let Some(s) = self.schedules.borrow_mut().get_mut(&at.deployment) {
            s.set(run, status);
        }
        self.emit(Change::Run {
            id: run,
            deployment: at.deployment,
            cluster: at.cluster,
            node: at.node,
            status: status.as_str(),
        });
    }

    /// The environment of deployment `dep`, for a change's listeners.
    fn cluster_of(&self, dep: i64) -> Result<Option<i64>> {
        Ok(self
            .conn
            .prepare_cached("SELECT cluster_id FROM deployments WHERE id = ?1")?
            .query_row([dep], |r| r.get(0))
            .optional()?)
    }

    /// Tell listeners deployment `id` changed status (as it now stands).
    pub(super) fn deployment_changed(&self, id: i64) -> Result<()> {
        let row: Option<(i64, String)> = self
            .conn
            .prepare_cached("SELECT cluster_id, status FROM deployments WHERE id = ?1")?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((cluster, status)) = row {
            self.emit(Change::Deployment {
                id,
                cluster: Some(cluster),
                status,
            });
        }
        Ok(())
    }

    pub(super) fn forget_schedule(&self, dep: i64) {
        self.schedules.borrow_mut().remove(&dep);
    }

    /// Complete sync-node stages whose dependencies are done, finish nodes whose runs are all
    /// done (`node`, or every node of the deployment when None), and close the deployment when
    /// nothing more can happen.
    pub(super) fn advance(&self, dep: i64, node: Option<i64>, now: i64) -> Result<()> {
        match self.read().deployment(dep)? {
            Some(d) => self.advance_deployment(&d, node, now),
            None => Ok(()),
        }
    }

    /// [`WriteTxn::advance`] for a caller that has just read the deployment `d` (an agent's
    /// result: the writer's busiest path need not read it twice).
    fn advance_deployment(&self, d: &Deployment, node: Option<i64>, now: i64) -> Result<()> {
        let dep = d.id;
        if d.status == "running" {
            loop {
                let stages = self.with_schedule(dep, |s| s.ready_stages())?;
                if stages.is_empty() {
                    break;
                }
                for id in stages {
                    self.conn
                        .prepare_cached(
                            "UPDATE step_runs SET status = 'ok', attempt = 1, started_at = ?1,
                               finished_at = ?1 WHERE id = ?2",
                        )?
                        .execute(params![now, id])?;
                    let at = RunAt {
                        deployment: dep,
                        cluster: Some(d.cluster_id),
                        node: None,
                    };
                    self.mirror(at, id, RunStatus::Ok);
                }
            }
        }
        if d.is_check() {
            return self.advance_check(d, now);
        }
        let nodes: Vec<i64> = match node {
            Some(n) => vec![n],
            None => self.with_schedule(dep, |s| s.nodes().collect())?,
        };
        for n in nodes {
            if self.with_schedule(dep, |s| s.node_done(n))? {
                let pending: bool = self
                    .conn
                    .prepare_cached("SELECT pending_deletion FROM nodes WHERE id = ?1")?
                    .query_row([n], |r| r.get(0))
                    .optional()?
                    .unwrap_or(false);
                if d.name == RESET {
                    // Its disk is erased: back in discover, still in the environment.
                    self.reset_node(n, now)?;
                } else if pending {
                    // Its deletion graph ran: it leaves the environment.
                    self.release_node(n, now)?;
                } else if self.move_node(n, Some(dep), now, state::finish)? == NodeState::Ready {
                    // Deployed with the roles it has: Nailgun's pending roles become its roles.
                    // Cached: every node of a deployment ends here, and compiling this
                    // statement (the revision triggers on `nodes` with it) cost the writer 4%
                    // of a redeploy's time.
                    self.conn
                        .prepare_cached("UPDATE nodes SET deployed_roles = roles WHERE id = ?1")?
                        .execute([n])?;
                }
            }
        }
        if d.status != "running" {
            self.forget_schedule(dep);
            return Ok(());
        }
        match self.with_schedule(dep, |s| s.progress())? {
            Progress::Going => {}
            Progress::Done => {
                self.forget_schedule(dep);
                self.keep_deployed(d.cluster_id, dep)?;
                self.conn.execute(
                    "UPDATE deployments SET status = 'done', finished_at = ?1 WHERE id = ?2",
                    params![now, dep],
                )?;
                self.deployment_changed(dep)?;
                if d.name == RESET {
                    self.reset_done(d.cluster_id)?;
                } else {
                    self.conn.execute(
                        "UPDATE clusters SET status = 'operational' WHERE id = ?1",
                        [d.cluster_id],
                    )?;
                }
                self.add_event(
                    now,
                    super::About::deployment(dep),
                    "deployment.done",
                    &format!("deployment {dep} done"),
                )?;
            }
            Progress::Stuck => {
                self.forget_schedule(dep);
                self.conn.execute(
                    "UPDATE deployments SET status = 'error', finished_at = ?1 WHERE id = ?2",
                    params![now, dep],
                )?;
                self.deployment_changed(dep)?;
                self.conn.execute(
                    "UPDATE clusters SET status = 'error' WHERE id = ?1",
                    [d.cluster_id],
                )?;
                self.add_event(
                    now,
                    super::About::deployment(dep),
                    "deployment.error",
                    &format!("deployment {dep} stopped on a failed step"),
                )?;
            }
        }
        Ok(())
    }
}

/// The last 8 KiB of an output, cut on a character boundary.
fn tail(s: &str) -> &str {
    const MAX: usize = 8 * 1024;
    if s.len() <= MAX {
        return s;
    }
    let mut start = s.len() - MAX;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use rusqlite::{OptionalExtension, StatementStatus};

    use crate::store::testing::store_with_cluster;

    /// The timeout watcher fails a running run past `started_at + timeout_s`, saying so, and
    /// leaves one within its time running (both read through the deadline index).
    #[test]
    fn a_run_past_its_deadline_fails_and_one_within_it_runs_on() {
        let (_dir, store) = store_with_cluster();
        crate::store::testing::exec(
            &store,
            "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at, cluster_id)
             VALUES (1, '52:54:00:00:00:01', 'n1', 'deploying', 1, 1, 1),
                    (2, '52:54:00:00:00:02', 'n2', 'deploying', 1, 1, 1);
             INSERT INTO deployments (id, cluster_id, status, created_at, name, graph_type)
             VALUES (10, 1, 'running', 100, 'deployment', 'default');
             INSERT INTO step_runs (id, deployment, node_id, seq, interface, step, args, deps,
               timeout_s, status, attempt, started_at, runs_on) VALUES
               (1, 10, 1, 0, 'deploy', 'run_tasks', '{}', '[]', 10, 'running', 1, 100, 'os'),
               (2, 10, 2, 0, 'deploy', 'run_tasks', '{}', '[]', 1000, 'running', 1, 100, 'os');",
        );
        let status = |id: i64| -> (String, Option<String>) {
            store
                .read(|r| {
                    Ok(r.conn.query_row(
                        "SELECT status, error FROM step_runs WHERE id = ?1",
                        [id],
                        |row| Ok((row.get(0)?, row.get(1)?)),
                    )?)
                })
                .unwrap()
        };
        assert_eq!(
            store.write(|tx| tx.expire_runs(110, 1800)).unwrap(),
            0,
            "not past it yet"
        );
        assert_eq!(store.write(|tx| tx.expire_runs(111, 1800)).unwrap(), 1);
        assert_eq!(
            status(1),
            (
                "failed".to_string(),
                Some("timed out after 10 s".to_string())
            )
        );
        assert_eq!(status(2), ("running".to_string(), None));
    }

    /// A run's deps that are not a list of run ids are an error naming the column, in the
    /// API's read of the run and in the scheduler's (which once read them as no deps at all,
    /// so such a run would have started before what it waits for).
    #[test]
    fn deps_that_are_not_run_ids_are_refused_naming_the_column() {
        let (_dir, store) = store_with_cluster();
        crate::store::testing::exec(
            &store,
            "INSERT INTO deployments (id, cluster_id, status, created_at, name, graph_type)
             VALUES (10, 1, 'running', 100, 'deployment', 'default'),
                    (11, 1, 'running', 100, 'deployment', 'default');
             INSERT INTO step_runs (id, deployment, seq, interface, step, args, deps,
               timeout_s, status, attempt, runs_on) VALUES
               (1, 10, 0, 'deploy', 'x', '{}', '[7, 8]', 10, 'pending', 0, 'os'),
               (2, 11, 0, 'deploy', 'x', '{}', '[\"a\"]', 10, 'pending', 0, 'os');",
        );
        let run = store.read(|r| r.run(1)).unwrap().unwrap();
        assert_eq!(run.deps, vec![7, 8]);
        let views = store.read(|r| r.run_views(10)).unwrap();
        assert_eq!(views[0].deps, vec![7, 8]);
        let bad = store.read(|r| r.run(2)).unwrap_err().to_string();
        assert!(bad.contains("deps: invalid type"), "{bad}");
        let bad = store.read(|r| r.run_views(11)).unwrap_err().to_string();
        assert!(bad.contains("deps: invalid type"), "{bad}");
    }

    /// Waiting agents: none while every agent of the deployment called within the window
    /// (whatever other nodes do), the silent one once it has not.
    #[test]
    fn a_deployment_waits_only_on_its_own_silent_agents() {
        let (_dir, store) = store_with_cluster();
        crate::store::testing::exec(
            &store,
            "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at, cluster_id)
             VALUES (1, '52:54:00:00:00:01', 'n1', 'deploying', 1, 1000, 1),
                    (2, '52:54:00:00:00:02', 'n2', 'discover', 1, 1, NULL);
             INSERT INTO deployments (id, cluster_id, status, created_at, name, graph_type)
             VALUES (10, 1, 'running', 900, 'deployment', 'default');
             INSERT INTO step_runs (id, deployment, node_id, seq, interface, step, args, deps,
               timeout_s, status, attempt, runs_on) VALUES
               (1, 10, 1, 0, 'deploy', 'run_tasks', '{}', '[]', 600, 'pending', 0, 'os');",
        );
        let waiting = |now: i64| {
            store
                .read(|r| {
                    let d = r.deployment(10)?.unwrap();
                    r.waiting_agents(&d, now)
                })
                .unwrap()
        };
        // Node 2 is long silent but has no run in the deployment.
        assert_eq!(waiting(1000 + crate::model::node::ONLINE_WINDOW_S), vec![]);
        let w = waiting(1001 + crate::model::node::ONLINE_WINDOW_S);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!((w[0].node_id, w[0].run_id, w[0].since), (1, 1, 1000));
    }

    #[test]
    fn a_results_run_head_is_compiled_once_whatever_run_it_reads() {
        // Every agent's result reads its run's head through the writer: a statement SQLite
        // compiles again at each new id costs the one thread all agents wait for.
        let (_dir, store) = store_with_cluster();
        store
            .write(|tx| {
                for id in 1..=4_i64 {
                    tx.conn
                        .prepare_cached(super::RUN_HEAD)?
                        .query_row([id], |_| Ok(()))
                        .optional()?;
                }
                let stmt = tx.conn.prepare_cached(super::RUN_HEAD)?;
                assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0);
                Ok(())
            })
            .unwrap();
    }
}
