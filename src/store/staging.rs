//! Starting a deployment without stopping the agents. A deployment of 1,000 nodes is some
//! 20,000 runs; written in one transaction they held the one writer for 250–300 ms, and every
//! agent's call of that moment waited behind them (the redeploy's p99 was the Deploy's write).
//!
//! So a deployment is written in parts, each through the [`GroupWriter`]'s queue behind the
//! agents' calls already waiting, and is invisible until its last part:
//! 1. a `preparing` deployment row (the environment checked: no deployment running) and the
//!    ids its runs will have (creations are serialized by `Store::creating`, so nothing else
//!    takes them meanwhile);
//! 2. off the writer: what its success adds to the deployed state (the engine's
//!    [`ChangeOf`]: the tasks it runs and its data for their nodes, borrowed from the plan;
//!    the current state is not read) and the deployment's [`Schedule`], built from the runs
//!    in memory;
//! 3. the runs and the tasks in parts of [`PART`] rows, each part's rows made (and its runs
//!    consumed) just before it is written;
//! 4. one short transaction makes it `running`, installs the schedule, releases the nodes that
//!    leave without a deletion graph and lets the stages that can complete themselves do so.
//!
//! Nothing outside sees a `preparing` deployment: claims look for `running` ones, lists skip
//! it. A failure in any part deletes it (its rows go with it), and a daemon killed meanwhile
//! deletes it at the next start ([`Store::open`]): a deployment appears whole or not at all.

use std::collections::HashSet;

use serde_json::Value as J;

use super::{Deployment, GroupWriter, Result, Store, StoreError, WriteTxn};
use crate::engine::graph::{ChangeOf, Plan};
use crate::engine::orchestrate::{NewRun, RunStatus, RunView};
use crate::engine::schedule::Schedule;
use crate::engine::steps::Location;

/// Rows written per transaction: about 10 ms of the writer's time, as long as an agent's
/// call may wait for it.
const PART: usize = 1_000;

/// What a new deployment is made of.
pub struct NewDeployment<'a> {
    pub cluster_id: i64,
    pub plan: &'a Plan,
    /// Its runs; `deps` are indices into it. Consumed as they are written: a run's arguments
    /// become text one part at a time.
    pub runs: Vec<NewRun>,
    /// Nodes that leave the environment as it starts (pending deletion, no deletion graph).
    pub release: Vec<i64>,
    /// Whether its success becomes the environment's deployed state (the deployment graph's
    /// runs; not another graph type's).
    pub record: bool,
    /// Record what would run and run nothing: the deployment is stored as a finished
    /// `dry_run`, and nothing else changes.
    pub dry_run: bool,
    /// Nailgun's transaction name (`deployment`, `provision`) and the graph type run.
    pub name: &'static str,
    pub graph_type: String,
    /// The chain it runs a graph of, and its place in it ([`super::Chain`]).
    pub parent: Option<(i64, u32)>,
    pub now: i64,
    /// What it is made from, kept with it ([`super::TransactionData`]): called once its runs
    /// are written, just before it becomes visible, so the caller can pack it on another
    /// thread meanwhile (the deployment data of 1,000 nodes takes most of a second).
    pub data: Option<PendingData<'a>>,
}

/// A transaction's data still being made: called once, it waits for it.
pub type PendingData<'a> = Box<dyn FnOnce() -> Result<super::TransactionData> + 'a>;

/// One `step_runs` row, ready to insert: a run with its id and its waits' ids.
struct Row {
    id: i64,
    node: Option<i64>,
    seq: u32,
    interface: String,
    step: String,
    task: Option<String>,
    /// The arguments' JSON, made here, off the writer.
    args: String,
    deps: Vec<i64>,
    concurrency: Option<String>,
    max_parallel: Option<u64>,
    timeout_s: u64,
    status: RunStatus,
    reason: Option<String>,
    runs_on: Location,
}

impl Store {
    /// Create a deployment of `new.cluster_id` through `writer`, in parts (see the module's
    /// text). Refused while another deployment of the environment is running.
    pub fn create_deployment(
        &self,
        writer: &GroupWriter,
        new: NewDeployment<'_>,
    ) -> Result<Deployment> {
        let _one_at_a_time = Self::lock(&self.creating);
        let (cluster_id, now, name, graph_type, parent) = (
            new.cluster_id,
            new.now,
            new.name,
            new.graph_type.clone(),
            new.parent,
        );
        let (dep, first) = writer.write_blocking(move |tx| {
            tx.open_deployment(cluster_id, name, &graph_type, parent, now)
        })?;
        let staged = self.stage(writer, dep, first, new);
        if staged.is_err() {
            // Best effort: a leftover is deleted at the next start anyway.
            let _ = writer.write_blocking(move |tx| tx.drop_preparing(dep));
        }
        staged
    }

    fn stage(
        &self,
        writer: &GroupWriter,
        dep: i64,
        first: i64,
        mut new: NewDeployment<'_>,
    ) -> Result<Deployment> {
        // What a success keeps: the plan's tasks this deployment has a run for that is not
        // skipped (not those of nodes or phases left out), and its data for their nodes.
        let change = if new.record && !new.dry_run {
            let runs: HashSet<(String, &str)> = new
                .runs
                .iter()
                .filter(|r| r.status != RunStatus::Skipped)
                .filter_map(|r| Some((r.node?.to_string(), r.task.as_deref()?)))
                .collect();
            ChangeOf::of(new.plan, |uid, task| {
                runs.contains(&(uid.to_string(), task))
            })
        } else {
            ChangeOf::default()
        };
        let total = new.runs.len();
        let schedule = Schedule::new(
            new.runs
                .iter()
                .enumerate()
                .map(|(i, r)| view(r, i, first, total))
                .collect(),
        );
        // Rows are made a part at a time, here (their arguments' text off the writer), each
        // run dropped as its row is made.
        let runs = std::mem::take(&mut new.runs).into_iter().enumerate();
        in_parts(
            writer,
            runs.map(|(i, r)| row(r, i, first, total)),
            move |tx, part| tx.insert_runs(dep, part),
        )?;
        in_parts(writer, change.tasks, move |tx, part| {
            tx.insert_ran(dep, part)
        })?;
        // The snapshot's text (tens of megabytes at 10,000 nodes) is made once the runs are
        // written and gone, not held beside them.
        let snapshot = match &change.snapshot {
            Some(s) => Some(serde_json::to_string(s).map_err(|e| StoreError::Corrupt {
                what: "deployed snapshot",
                detail: e.to_string(),
            })?),
            None => None,
        };
        if let Some(pending) = new.data.take() {
            let data = pending()?;
            writer.write_blocking(move |tx| tx.attach_transaction_data(dep, &data))?;
        }
        let (cluster_id, release, now) = (new.cluster_id, new.release, new.now);
        if new.dry_run {
            return writer.write_blocking(move |tx| tx.finish_dry_run(dep, cluster_id, total, now));
        }
        writer.write_blocking(move |tx| {
            tx.start_deployment(dep, cluster_id, total, snapshot, schedule, &release, now)
        })
    }
}

/// Write `items` in parts of [`PART`], each in its own group of `writer`; each part is
/// taken from `items` (made, when they are made lazily) on the caller's thread.
fn in_parts<T: Send + 'static>(
    writer: &GroupWriter,
    items: impl IntoIterator<Item = T>,
    write: impl Fn(&WriteTxn<'_>, &[T]) -> Result<()> + Send + Sync + Copy + 'static,
) -> Result<()> {
    let mut items = items.into_iter();
    loop {
        let part: Vec<T> = items.by_ref().take(PART).collect();
        if part.is_empty() {
            return Ok(());
        }
        writer.write_blocking(move |tx| write(tx, &part))?;
    }
}

/// The waits of a run of `total` numbered from `first`, as ids (an index past the last run
/// is not one).
fn dep_ids(r: &NewRun, first: i64, total: usize) -> Vec<i64> {
    r.deps
        .iter()
        .filter(|&&d| d < total)
        .map(|&d| first + d as i64)
        .collect()
}

/// Run `i` of `total` numbered from `first` as its row.
fn row(r: NewRun, i: usize, first: i64, total: usize) -> Row {
    Row {
        id: first + i as i64,
        node: r.node,
        seq: r.seq,
        deps: dep_ids(&r, first, total),
        args: r.args.text(),
        interface: r.interface,
        step: r.step,
        task: r.task,
        concurrency: r.concurrency,
        max_parallel: r.max_parallel,
        timeout_s: r.timeout_s,
        status: r.status,
        reason: r.reason,
        runs_on: r.runs_on,
    }
}

/// What the schedule needs of run `i` of `total` numbered from `first`, as
/// `ReadTxn::run_views` would read it back.
fn view(r: &NewRun, i: usize, first: i64, total: usize) -> RunView {
    RunView {
        id: first + i as i64,
        node: r.node,
        seq: r.seq,
        status: r.status,
        deps: dep_ids(r, first, total),
        concurrency: r.concurrency.clone(),
        max_parallel: r.max_parallel,
        timeout_s: r.timeout_s,
        runs_on: r.runs_on,
    }
}

impl WriteTxn<'_> {
    /// A `preparing` deployment of `cluster_id` (a graph of chain `parent`, at its place,
    /// when given) and the id its first run will have.
    fn open_deployment(
        &self,
        cluster_id: i64,
        name: &str,
        graph_type: &str,
        parent: Option<(i64, u32)>,
        now: i64,
    ) -> Result<(i64, i64)> {
        self.read().existing_cluster(cluster_id)?;
        self.read()
            .refuse_if_busy(cluster_id, parent.map(|p| p.0))?;
        let dep =
            self.insert_deployment(cluster_id, "preparing", None, name, graph_type, parent, now)?;
        let first: i64 =
            self.conn
                .query_row("SELECT COALESCE(MAX(id), 0) + 1 FROM step_runs", [], |r| {
                    r.get(0)
                })?;
        Ok((dep, first))
    }

    fn insert_runs(&self, dep: i64, rows: &[Row]) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO step_runs (id, deployment, node_id, seq, interface, step, task, args,
               deps, concurrency, max_parallel, timeout_s, status, reason, runs_on)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )?;
        for r in rows {
            stmt.execute(rusqlite::params![
                r.id,
                dep,
                r.node,
                r.seq,
                r.interface,
                r.step,
                r.task,
                r.args,
                J::from(r.deps.clone()).to_string(),
                r.concurrency,
                r.max_parallel.map(|m| m.min(i64::MAX as u64) as i64),
                r.timeout_s.min(i64::MAX as u64) as i64,
                r.status.as_str(),
                r.reason,
                r.runs_on.as_str(),
            ])?;
        }
        Ok(())
    }

    fn insert_ran(&self, dep: i64, ran: &[(String, String)]) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO deployment_ran (deployment, node_uid, task) VALUES (?1, ?2, ?3)",
        )?;
        for (uid, task) in ran {
            stmt.execute(rusqlite::params![dep, uid, task])?;
        }
        Ok(())
    }

    /// The last part: the deployment starts, whole.
    #[allow(clippy::too_many_arguments)]
    fn start_deployment(
        &self,
        dep: i64,
        cluster_id: i64,
        runs: usize,
        snapshot: Option<String>,
        schedule: Schedule,
        release: &[i64],
        now: i64,
    ) -> Result<Deployment> {
        self.check_chain_goes_on(dep)?;
        let started = self.conn.execute(
            "UPDATE deployments SET status = 'running' WHERE id = ?1 AND status = 'preparing'",
            [dep],
        )?;
        self.deployment_changed(dep)?;
        let cluster = self.read().cluster(cluster_id)?;
        let (1, Some(cluster)) = (started, cluster) else {
            return Err(StoreError::Conflict(format!(
                "environment {cluster_id} was deleted while its deployment was being written"
            )));
        };
        self.conn.execute(
            "INSERT INTO deployment_states (deployment) VALUES (?1)",
            [dep],
        )?;
        if let Some(snapshot) = &snapshot {
            self.stage_snapshot(cluster_id, dep, snapshot)?;
        }
        self.conn.execute(
            "UPDATE clusters SET status = 'deployment' WHERE id = ?1",
            [cluster_id],
        )?;
        self.add_event(
            now,
            super::About::deployment(dep),
            "deployment.started",
            &format!("deployment {dep} of {} started ({runs} runs)", cluster.name),
        )?;
        self.schedules.borrow_mut().insert(dep, schedule);
        self.advance(dep, None, now)?;
        for &node in release {
            self.release_node(node, now)?;
        }
        self.existing_deployment(dep)
    }

    /// A deployment with nothing to run, finished as it starts: an environment with no nodes
    /// (Nailgun's LCM releases accepted deploying an empty environment and ended the task at
    /// once), or a graph of a chain (`parent`, at its place) whose every task is skipped.
    /// Nothing but the record and the history changes.
    #[allow(clippy::too_many_arguments)]
    pub fn record_empty_deployment(
        &self,
        cluster_id: i64,
        name: &str,
        graph_type: &str,
        dry_run: bool,
        parent: Option<(i64, u32)>,
        now: i64,
    ) -> Result<Deployment> {
        let cluster = self.read().existing_cluster(cluster_id)?;
        self.read()
            .refuse_if_busy(cluster_id, parent.map(|p| p.0))?;
        let status = if dry_run { "dry_run" } else { "done" };
        let dep =
            self.insert_deployment(cluster_id, status, Some(now), name, graph_type, parent, now)?;
        self.check_chain_goes_on(dep)?;
        let why = if parent.is_some() {
            "no task of this graph of a chain runs here"
        } else {
            "the environment has no nodes"
        };
        self.add_event(
            now,
            super::About::deployment(dep),
            "deployment.empty",
            &format!("{name} {dep} of {}: {why}, nothing to run", cluster.name),
        )?;
        self.existing_deployment(dep)
    }

    /// The last part of a dry run: recorded as finished, nothing else changes.
    fn finish_dry_run(
        &self,
        dep: i64,
        cluster_id: i64,
        runs: usize,
        now: i64,
    ) -> Result<Deployment> {
        self.check_chain_goes_on(dep)?;
        let done = self.conn.execute(
            "UPDATE deployments SET status = 'dry_run', finished_at = ?2
             WHERE id = ?1 AND status = 'preparing'",
            rusqlite::params![dep, now],
        )?;
        self.deployment_changed(dep)?;
        let cluster = self.read().cluster(cluster_id)?;
        let (1, Some(cluster)) = (done, cluster) else {
            return Err(StoreError::Conflict(format!(
                "environment {cluster_id} was deleted while its dry run was being written"
            )));
        };
        self.add_event(
            now,
            super::About::deployment(dep),
            "deployment.dry_run",
            &format!(
                "dry run {dep} of {}: {runs} runs recorded, none run",
                cluster.name
            ),
        )?;
        self.existing_deployment(dep)
    }

    /// Delete a deployment that did not finish preparing, and its rows.
    fn drop_preparing(&self, dep: i64) -> Result<()> {
        self.conn.execute(
            "DELETE FROM deployments WHERE id = ?1 AND status = 'preparing'",
            [dep],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_cut_short_while_preparing_is_never_seen_and_gone_at_the_next_start() {
        let (dir, store) = crate::store::testing::store_with_cluster();
        let path = dir.path().join("s.db");
        store
            .write(|tx| {
                let (dep, first) = tx.open_deployment(1, "deployment", "default", None, 5)?;
                let rows = [row(
                    NewRun {
                        node: None,
                        seq: 0,
                        interface: "deploy".into(),
                        step: "run_tasks".into(),
                        task: Some("stage".into()),
                        args: crate::engine::orchestrate::Args::Json(J::Null),
                        deps: vec![],
                        concurrency: None,
                        max_parallel: None,
                        timeout_s: 60,
                        status: crate::engine::orchestrate::RunStatus::Pending,
                        reason: None,
                        runs_on: crate::engine::steps::Location::Master,
                    },
                    0,
                    first,
                    1,
                )];
                tx.insert_runs(dep, &rows)?;
                tx.insert_ran(dep, &[("1".into(), "netconfig".into())])?;
                Ok(())
            })
            .unwrap();
        let seen = store
            .read(|r| Ok((r.deployments(1)?, r.deployments_with_progress(None, None)?)))
            .unwrap();
        assert!(seen.0.is_empty() && seen.1.is_empty(), "{seen:?}");
        store.close().unwrap();

        let store = Store::open(&path).unwrap();
        let left: i64 = store
            .read(|r| {
                Ok(r.conn.query_row(
                    "SELECT (SELECT COUNT(*) FROM deployments) + (SELECT COUNT(*) FROM step_runs)
                          + (SELECT COUNT(*) FROM deployment_ran)",
                    [],
                    |row| row.get(0),
                )?)
            })
            .unwrap();
        assert_eq!(left, 0);
    }
}
