//! Chains of graphs: several graphs run one after another as one transaction (Nailgun's
//! parent transaction and its sub-transactions). The parent is a `deployments` row of the
//! environment without runs, so its id is a transaction id like any other: status [`CHAINING`]
//! while it goes, then `done`, `dry_run`, `error` or `aborted`, its message saying why when
//! it did not end well; `deployment_chains` keeps what it runs (its graphs in order, dry run,
//! force).
//! Each graph's deployment is a child row carrying `parent_id` and its place (`chain_seq`),
//! created only when its graph starts (a place is taken once: a unique index). What comes
//! next is decided by [`crate::engine::chain`]; starting a child needs the planner, so
//! `crate::chains` drives it, from the API and from the daemon's loop.
//!
//! While a chain goes, nothing else of its environment starts (Deploy, reset, retry, another
//! chain) between its children either; a child's last write checks that its chain still
//! goes, so a chain stopped while its next child was being written never runs that child.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::deployments::{DEPLOYMENT_COLUMNS, deployment_from_row};
use super::{Deployment, ReadTxn, Result, StoreError, WriteTxn};
use crate::engine::chain::{self, Child, End, Next};

/// The status of a chain's parent while it goes.
pub const CHAINING: &str = "chain";

/// The name of a chain's parent transaction (Nailgun's `deploy` task, whose sub-tasks are
/// `deployment`s).
pub const CHAIN_NAME: &str = "deploy";

/// One graph of a chain (or of a sequence): its type and, when given, the nodes it runs on
/// (none: every node of the environment), as Nailgun's `graphs` items say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainGraph {
    #[serde(rename = "type")]
    pub graph_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<i64>>,
}

/// A graph's child deployment, with its runs and how many finished.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainChild {
    pub place: usize,
    pub deployment: Deployment,
    pub runs: u64,
    pub finished: u64,
}

/// A chain: its parent row, what it runs and its children so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub parent: Deployment,
    pub graphs: Vec<ChainGraph>,
    pub dry_run: bool,
    pub force: bool,
    pub children: Vec<ChainChild>,
}

impl Chain {
    /// Whether it still goes.
    pub fn goes(&self) -> bool {
        self.parent.status == CHAINING
    }

    /// Its children's standing by place, for [`chain::next`].
    pub fn standing(&self) -> BTreeMap<usize, Child> {
        self.children
            .iter()
            .map(|c| (c.place, Child::of_status(&c.deployment.status)))
            .collect()
    }

    /// What comes next ([`chain::next`]).
    pub fn next(&self) -> Next {
        chain::next(self.graphs.len(), &self.standing())
    }

    /// How the chain ends when `next` (its [`Chain::next`]) says it is over: the parent's
    /// status and, when it did not end well, why. None while a graph runs or is to start.
    pub fn ending(&self, next: Next) -> Option<(&'static str, Option<String>)> {
        let graphs = self.graphs.len();
        match next {
            Next::Wait(_) | Next::Start(_) => None,
            Next::Finish => Some((if self.dry_run { "dry_run" } else { "done" }, None)),
            Next::Fail(index) => Some((
                "error",
                Some(
                    End::Failed {
                        index,
                        graphs,
                        graph_type: self.graph_type(index),
                        child: self.child(index).map_or(0, |c| c.deployment.id),
                    }
                    .message(),
                ),
            )),
            Next::Stop(index) => Some(("aborted", Some(self.stopped_at(index)))),
        }
    }

    /// The message of a chain stopped at graph `index` (its child, if started, aborted).
    fn stopped_at(&self, index: usize) -> String {
        End::Stopped {
            index,
            graphs: self.graphs.len(),
            graph_type: self.graph_type(index),
            child: self.child(index).map(|c| c.deployment.id),
        }
        .message()
    }

    /// The child at `place`, if started.
    pub fn child(&self, place: usize) -> Option<&ChainChild> {
        self.children.iter().find(|c| c.place == place)
    }

    /// The type of graph `place` (empty past the last).
    pub fn graph_type(&self, place: usize) -> String {
        self.graphs
            .get(place)
            .map(|g| g.graph_type.clone())
            .unwrap_or_default()
    }

    /// The parent's progress in percent ([`chain::progress`]); 100 once it ended well.
    pub fn progress(&self) -> u64 {
        if matches!(self.parent.status.as_str(), "done" | "dry_run") {
            return 100;
        }
        let percents = self
            .children
            .iter()
            .map(|c| {
                let ok = Child::of_status(&c.deployment.status) == Child::Succeeded;
                (c.place, chain::child_percent(ok, c.runs, c.finished))
            })
            .collect();
        chain::progress(self.graphs.len(), &percents)
    }
}

fn corrupt(detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        what: "deployment chain",
        detail: detail.to_string(),
    }
}

impl ReadTxn<'_> {
    /// The chain of environment `cluster_id` that goes, if any (at most one).
    pub fn active_chain(&self, cluster_id: i64) -> Result<Option<Deployment>> {
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE cluster_id = ?1 AND status = ?2"
        );
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row(params![cluster_id, CHAINING], deployment_from_row)
            .optional()?)
    }

    /// Every chain that goes and has something to do, by id: none of its graphs runs (or is
    /// being written), so its next one is to start or it is over. A chain whose graph runs is
    /// left alone until that graph ends, so the daemon's loop reads nothing more of it.
    pub fn chains_to_move(&self) -> Result<Vec<i64>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT p.id FROM deployments p
             WHERE p.status = ?1 AND NOT EXISTS (
               SELECT 1 FROM deployments c
               WHERE c.parent_id = p.id AND c.status IN ('running', 'preparing'))
             ORDER BY p.id",
        )?;
        let rows = stmt.query_map([CHAINING], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The chain whose parent is `parent`; None when it is not one.
    pub fn chain(&self, parent: i64) -> Result<Option<Chain>> {
        Ok(self.chains(None, Some(parent))?.into_iter().next())
    }

    /// Chains, newest first: of one environment or of all, or the one of parent `id`.
    pub fn chains(&self, cluster_id: Option<i64>, id: Option<i64>) -> Result<Vec<Chain>> {
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS}, c.graphs, c.dry_run, c.force
             FROM deployments d JOIN deployment_chains c ON c.deployment = d.id
             WHERE (?1 IS NULL OR d.cluster_id = ?1) AND (?2 IS NULL OR d.id = ?2)
             ORDER BY d.id DESC"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let heads = stmt
            .query_map(params![cluster_id, id], |r| {
                Ok((
                    deployment_from_row(r)?,
                    r.get::<_, String>(10)?,
                    r.get::<_, bool>(11)?,
                    r.get::<_, bool>(12)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(heads.len());
        for (parent, graphs, dry_run, force) in heads {
            let graphs: Vec<ChainGraph> = serde_json::from_str(&graphs).map_err(corrupt)?;
            let children = self.chain_children(parent.id)?;
            out.push(Chain {
                parent,
                graphs,
                dry_run,
                force,
                children,
            });
        }
        Ok(out)
    }

    /// A chain's children that were written whole, by place.
    fn chain_children(&self, parent: i64) -> Result<Vec<ChainChild>> {
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS}, d.chain_seq,
               (SELECT COALESCE(SUM(c.n), 0) FROM counted_runs c WHERE c.deployment = d.id),
               (SELECT COALESCE(SUM(c.n), 0) FROM counted_runs c WHERE c.deployment = d.id
                  AND c.status IN ('ok', 'failed', 'skipped'))
             FROM deployments d
             WHERE d.parent_id = ?1 AND d.status != 'preparing'
             ORDER BY d.chain_seq"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([parent], |r| {
            let count = |i| r.get::<_, i64>(i).map(|n| n.max(0).unsigned_abs());
            Ok(ChainChild {
                deployment: deployment_from_row(r)?,
                place: usize::try_from(r.get::<_, i64>(10)?.max(0)).unwrap_or(usize::MAX),
                runs: count(11)?,
                finished: count(12)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

impl WriteTxn<'_> {
    /// A graph of a chain is written whole only while its chain goes: one stopped meanwhile
    /// never runs it.
    pub(super) fn check_chain_goes_on(&self, dep: i64) -> Result<()> {
        let parent: Option<(i64, String)> = self
            .conn
            .prepare_cached(
                "SELECT p.id, p.status FROM deployments d JOIN deployments p ON p.id = d.parent_id
                 WHERE d.id = ?1",
            )?
            .query_row([dep], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        match parent {
            Some((id, status)) if status != CHAINING => Err(StoreError::Conflict(format!(
                "transaction {id} is over ({status}): its next graph does not start"
            ))),
            _ => Ok(()),
        }
    }

    /// A child of a chain that goes is not deleted: the chain would run its graph again.
    pub(super) fn refuse_in_running_chain(&self, d: &Deployment) -> Result<()> {
        let Some(parent) = d.parent_id else {
            return Ok(());
        };
        match self.read().deployment(parent)? {
            Some(p) if p.status == CHAINING => Err(StoreError::Conflict(format!(
                "deployment {} is a graph of transaction {parent}, which goes on; stop it first",
                d.id
            ))),
            _ => Ok(()),
        }
    }

    /// A chain's parent has no runs to retry (its failed child has); nothing else of an
    /// environment that is busy is retried but its chain's own children.
    pub(super) fn refuse_retry_of_chain(&self, d: &Deployment) -> Result<()> {
        let is_parent: bool = self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM deployment_chains WHERE deployment = ?1)",
            )?
            .query_row([d.id], |r| r.get(0))?;
        if is_parent {
            return Err(StoreError::Conflict(format!(
                "transaction {} runs graphs one after another and has no steps of its own; \
                 retry its failed graph's deployment, or execute the graphs again",
                d.id
            )));
        }
        self.read().refuse_if_busy(d.cluster_id, d.parent_id)
    }

    /// Open a chain of `graphs` on environment `cluster_id`: its parent, going, with no child
    /// yet. Refused while the environment deploys or another chain of it goes.
    pub fn open_chain(
        &self,
        cluster_id: i64,
        graphs: &[ChainGraph],
        dry_run: bool,
        force: bool,
        now: i64,
    ) -> Result<Deployment> {
        let cluster = self.read().existing_cluster(cluster_id)?;
        self.read().refuse_if_busy(cluster_id, None)?;
        let types: Vec<&str> = graphs.iter().map(|g| g.graph_type.as_str()).collect();
        let id = self.insert_deployment(
            cluster_id,
            CHAINING,
            None,
            CHAIN_NAME,
            &types.join(","),
            None,
            now,
        )?;
        let graphs_json = serde_json::to_string(graphs).map_err(corrupt)?;
        self.conn.execute(
            "INSERT INTO deployment_chains (deployment, graphs, dry_run, force)
             VALUES (?1, ?2, ?3, ?4)",
            params![id, graphs_json, dry_run, force],
        )?;
        self.add_event(
            now,
            super::About::deployment(id),
            "deployment.chain",
            &format!(
                "transaction {id} of {}: graphs {} one after another{}",
                cluster.name,
                types.join(", "),
                if dry_run { " (dry run)" } else { "" }
            ),
        )?;
        self.existing_deployment(id)
    }

    /// End chain `parent` with `status` (`done`, `dry_run`, `error`, `aborted`) and why, if it
    /// still goes; whether it did.
    pub fn end_chain(
        &self,
        parent: i64,
        status: &str,
        message: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        let ended = self.conn.execute(
            "UPDATE deployments SET status = ?2, finished_at = ?3, message = ?5
             WHERE id = ?1 AND status = ?4",
            params![parent, status, now, CHAINING, message],
        )?;
        if ended == 0 {
            return Ok(false);
        }
        self.deployment_changed(parent)?;
        self.add_event(
            now,
            super::About::deployment(parent),
            &format!("deployment.chain_{status}"),
            &format!(
                "transaction {parent} {status}{}",
                message.map_or_else(String::new, |m| format!(": {m}"))
            ),
        )?;
        Ok(true)
    }

    /// Forget chain `parent`, which goes and has no child: its first graph could not start,
    /// and the request that opened it is refused as a whole.
    pub fn drop_chain(&self, parent: i64) -> Result<()> {
        self.conn.execute(
            "DELETE FROM deployments WHERE id = ?1 AND status = ?2
               AND NOT EXISTS (SELECT 1 FROM deployments c WHERE c.parent_id = ?1)",
            params![parent, CHAINING],
        )?;
        Ok(())
    }

    /// Stop environment `cluster_id`'s chain, if one goes: its running graph is aborted (as a
    /// deployment is) and the chain ends `aborted`, naming where; the graphs after it never
    /// start. A chain already over but not yet ended by the daemon's loop (its last graph
    /// done, or one failed) ends as it stands. The ended parent, or None when no chain goes.
    pub fn stop_chain(&self, cluster_id: i64, now: i64) -> Result<Option<Deployment>> {
        let Some(parent) = self.read().active_chain(cluster_id)? else {
            return Ok(None);
        };
        let Some(c) = self.read().chain(parent.id)? else {
            return Ok(None);
        };
        let next = c.next();
        let (status, message) = match (next, c.ending(next)) {
            (_, Some(ending)) => ending,
            (Next::Wait(i), None) => {
                if let Some(running) = c.child(i) {
                    self.abort_deployment(running.deployment.id, now)?;
                }
                ("aborted", Some(c.stopped_at(i)))
            }
            (Next::Start(i), None) => ("aborted", Some(c.stopped_at(i))),
            (_, None) => ("aborted", None),
        };
        self.end_chain(parent.id, status, message.as_deref(), now)?;
        Ok(Some(self.existing_deployment(parent.id)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graphs(types: &[&str]) -> Vec<ChainGraph> {
        types
            .iter()
            .map(|t| ChainGraph {
                graph_type: t.to_string(),
                nodes: None,
            })
            .collect()
    }

    /// Between two graphs of a chain (its parent going, no child running) the environment is
    /// busy: nothing else starts (a deletion, a retry, a network verification) and its
    /// network configuration does not change.
    #[test]
    fn an_environment_is_busy_between_the_graphs_of_its_chain() {
        let (_dir, store) = crate::store::testing::store_with_cluster();
        let parent = store
            .write(|tx| tx.open_chain(1, &graphs(&["a", "b"]), false, false, 5))
            .unwrap();
        store
            .write(|tx| {
                tx.record_empty_deployment(1, "deployment", "a", false, Some((parent.id, 0)), 6)
            })
            .unwrap();
        let busy = store.read(|r| r.busy(1)).unwrap();
        assert_eq!(busy.map(|d| d.id), Some(parent.id));
        let refused = |what: &str, r: Result<()>| match r {
            Err(StoreError::Conflict(m)) => assert!(
                m.contains(&format!("transaction {}", parent.id)) && m.contains("stop_deployment"),
                "{what}: {m}"
            ),
            other => panic!("{what}: {other:?}"),
        };
        refused(
            "delete",
            store.write(|tx| tx.delete_cluster(1, 7).map(|_| ())),
        );
        refused(
            "check",
            store.write(|tx| tx.create_check(1, &[], None, 7).map(|_| ())),
        );
        refused("reset", store.read(|r| r.refuse_if_busy(1, None)));
        // The chain's own next graph starts.
        store
            .read(|r| r.refuse_if_busy(1, Some(parent.id)))
            .unwrap();
        let put = store.write(|tx| {
            crate::networks::put_configuration(tx, 1, &serde_json::json!({})).map(|_| ())
        });
        assert!(matches!(put, Err(StoreError::Forbidden(_))), "{put:?}");
    }

    #[test]
    fn a_chain_takes_the_environment_and_each_place_once() {
        let (_dir, store) = crate::store::testing::store_with_cluster();
        let parent = store
            .write(|tx| tx.open_chain(1, &graphs(&["a", "b"]), false, false, 5))
            .unwrap();
        assert_eq!(
            (parent.status.as_str(), parent.name.as_str()),
            (CHAINING, CHAIN_NAME)
        );
        // Nothing else starts: another chain, a deployment, an empty one.
        let other = store.write(|tx| tx.open_chain(1, &graphs(&["c"]), false, false, 6));
        assert!(matches!(other, Err(StoreError::Conflict(_))), "{other:?}");
        let empty = store
            .write(|tx| tx.record_empty_deployment(1, "deployment", "default", false, None, 6));
        assert!(matches!(empty, Err(StoreError::Conflict(_))), "{empty:?}");
        // Its own graphs do, each place once.
        let first = store
            .write(|tx| {
                tx.record_empty_deployment(1, "deployment", "a", false, Some((parent.id, 0)), 7)
            })
            .unwrap();
        assert_eq!(first.parent_id, Some(parent.id));
        let again = store.write(|tx| {
            tx.record_empty_deployment(1, "deployment", "a", false, Some((parent.id, 0)), 7)
        });
        assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
        let c = store.read(|r| r.chain(parent.id)).unwrap().unwrap();
        assert_eq!(c.next(), Next::Start(1));
        assert_eq!(c.progress(), 50);
        // A child of a chain that goes is not deleted, nor is the chain.
        for id in [first.id, parent.id] {
            let del = store.write(|tx| tx.delete_deployment(id, 8));
            assert!(matches!(del, Err(StoreError::Conflict(_))), "{del:?}");
        }

        // Stopped before its second graph started: it ends, naming it, and nothing of it
        // starts afterwards.
        let stopped = store.write(|tx| tx.stop_chain(1, 9)).unwrap().unwrap();
        assert_eq!(stopped.status, "aborted");
        let c = store.read(|r| r.chain(parent.id)).unwrap().unwrap();
        assert_eq!(
            c.parent.message.as_deref(),
            Some("stopped by the operator at graph 2 of 2 (b)")
        );
        let late = store.write(|tx| {
            tx.record_empty_deployment(1, "deployment", "b", false, Some((parent.id, 1)), 10)
        });
        assert!(matches!(late, Err(StoreError::Conflict(_))), "{late:?}");
        assert!(store.write(|tx| tx.stop_chain(1, 11)).unwrap().is_none());
        // Over, the environment is free again; deleting the parent takes its children.
        store
            .write(|tx| tx.record_empty_deployment(1, "deployment", "default", false, None, 12))
            .unwrap();
        store
            .write(|tx| tx.delete_deployment(parent.id, 13))
            .unwrap();
        assert!(store.read(|r| r.deployment(first.id)).unwrap().is_none());
    }

    /// The daemon's loop reads only chains with something to do; one whose graph is being
    /// written when the daemon is killed (-9) carries on after a restart: the half-written
    /// graph is gone and is started again. A failed graph ends the chain failed, even when
    /// the operator stops it before the loop saw the failure.
    #[test]
    fn the_loop_moves_only_idle_chains_and_a_cut_graph_starts_again() {
        let (dir, store) = crate::store::testing::store_with_cluster();
        let parent = store
            .write(|tx| tx.open_chain(1, &graphs(&["a", "b"]), false, false, 5))
            .unwrap();
        let to_move = |store: &crate::store::Store| store.read(|r| r.chains_to_move()).unwrap();
        assert_eq!(to_move(&store), [parent.id], "its first graph is to start");
        let child = |store: &crate::store::Store, status: &str| {
            store
                .write(|tx| {
                    tx.conn.execute(
                        "INSERT INTO deployments (id, cluster_id, status, created_at,
                           name, graph_type, parent_id, chain_seq)
                         VALUES (90, 1, ?1, 6, 'deployment', 'a', ?2, 0)
                         ON CONFLICT (id) DO UPDATE SET status = excluded.status,
                           parent_id = excluded.parent_id",
                        params![status, parent.id],
                    )?;
                    Ok(())
                })
                .unwrap()
        };
        child(&store, "preparing");
        assert!(to_move(&store).is_empty(), "a graph is being written");
        drop(store);
        // kill -9 here: the reopened store drops the half-written graph; the chain goes on
        // and its first graph is to start again.
        let store = crate::store::Store::open(&dir.path().join("s.db")).unwrap();
        assert!(store.read(|r| r.deployment(90)).unwrap().is_none());
        let c = store.read(|r| r.chain(parent.id)).unwrap().unwrap();
        assert!(c.goes());
        assert_eq!(c.next(), Next::Start(0));
        assert_eq!(to_move(&store), [parent.id]);
        child(&store, "running");
        assert!(to_move(&store).is_empty(), "its graph runs");
        child(&store, "error");
        assert_eq!(to_move(&store), [parent.id], "its graph failed: to end");
        // Stopped before the loop ended it: it ends failed, naming the failure.
        let ended = store.write(|tx| tx.stop_chain(1, 9)).unwrap().unwrap();
        assert_eq!(ended.status, "error");
        assert_eq!(
            ended.message.as_deref(),
            Some(
                "graph 1 of 2 (a) failed: transaction 90 stopped on a failed step; the graph \
                 after it did not run"
            )
        );
        assert!(to_move(&store).is_empty());
    }

    #[test]
    fn a_chain_whose_first_graph_cannot_start_is_dropped_whole() {
        let (_dir, store) = crate::store::testing::store_with_cluster();
        let parent = store
            .write(|tx| tx.open_chain(1, &graphs(&["a"]), true, false, 5))
            .unwrap();
        store.write(|tx| tx.drop_chain(parent.id)).unwrap();
        assert!(store.read(|r| r.deployment(parent.id)).unwrap().is_none());
        assert!(store.read(|r| r.chain(parent.id)).unwrap().is_none());
    }
}
