//! What the dashboard reads of deployments for people, kept lean for big ones: a deployment's
//! runs without their arguments or output ([`RunLine`]: 40,000 of them are a few MB), the
//! output tails of just the runs a page shows, an environment's deployments with their counts
//! per status, a node's deployments, runs, last failure and outputs (through the
//! `step_runs_by_node` index), who started a deployment, nodes' names without their
//! inventories, and what a timeline of a big deployment needs ([`TimelineRuns`]). Read-only but for
//! [`WriteTxn::set_deployment_starter`].

use std::collections::HashMap;

use rusqlite::{OptionalExtension, Row, params};

use super::deployments::{DEPLOYMENT_COLUMNS, Deployment, RunCounts, deployment_from_row};
use super::{ReadTxn, Result, WriteTxn};
use crate::engine::steps::Location;

/// A run as a page lists it: everything but its arguments, output and report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLine {
    pub id: i64,
    pub deployment: i64,
    /// `None`: the sync node (a stage).
    pub node_id: Option<i64>,
    pub seq: u32,
    pub interface: String,
    pub step: String,
    pub task: Option<String>,
    pub status: String,
    /// Why it was skipped, when it was.
    pub reason: Option<String>,
    pub attempt: u32,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    pub runs_on: Location,
    /// The length of its output tail in bytes (the tail itself is read by [`ReadTxn::run_outputs`]).
    pub output_len: usize,
}

impl RunLine {
    /// Its graph task, or `interface.step`.
    pub fn name(&self) -> String {
        self.task
            .clone()
            .unwrap_or_else(|| format!("{}.{}", self.interface, self.step))
    }

    /// A graph task's run (`deploy.run_tasks` or a stage), not one of the node's own steps.
    pub fn is_task(&self) -> bool {
        self.task.is_some()
    }
}

/// A deployment as an environment's page draws it without reading every run (200,000 at
/// 10,000 nodes): its counts per status, when its first run started and its last finished
/// (kept with the counts, so a retried run's earlier attempt still counts), how many lanes (nodes, and the sync node for stages) its runs are on, and the runs of only
/// the lanes the timeline keeps, in [`ReadTxn::run_lines`]' order. The lanes kept are the
/// timeline's: the sync node first, then nodes with a failed run, running ones, the rest, each
/// by id.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRuns {
    pub counts: RunCounts,
    pub lines: Vec<RunLine>,
    pub lanes: usize,
    pub first_start: Option<i64>,
    pub last_finish: Option<i64>,
}

/// An environment's deployment with how its runs stand and who started it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentSummary {
    pub deployment: Deployment,
    pub counts: RunCounts,
    pub started_by: Option<String>,
}

/// `columns` (a comma-separated list) each prefixed with the table alias `alias`.
fn prefixed(alias: &str, columns: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

const LINE_COLUMNS: &str = "id, deployment, node_id, seq, interface, step, task, status, reason, \
     attempt, started_at, finished_at, exit_code, error, runs_on, length(CAST(output_tail AS BLOB))";

fn line_from_row(r: &Row<'_>) -> rusqlite::Result<RunLine> {
    Ok(RunLine {
        id: r.get(0)?,
        deployment: r.get(1)?,
        node_id: r.get(2)?,
        seq: r.get(3)?,
        interface: r.get(4)?,
        step: r.get(5)?,
        task: r.get(6)?,
        status: r.get(7)?,
        reason: r.get(8)?,
        attempt: r.get(9)?,
        started_at: r.get(10)?,
        finished_at: r.get(11)?,
        exit_code: r.get(12)?,
        error: r.get(13)?,
        runs_on: Location::parse(r.get_ref(14)?.as_str()?).unwrap_or_default(),
        output_len: r.get::<_, i64>(15)?.max(0).unsigned_abs() as usize,
    })
}

impl RunCounts {
    /// Counts of `lines`' statuses.
    pub fn of_lines(lines: &[RunLine]) -> RunCounts {
        let mut c = RunCounts::default();
        for l in lines {
            c.add(&l.status, 1);
        }
        c
    }
}

/// A node as a list of runs names it: its name, roles and status, without its inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLabel {
    pub name: String,
    pub roles: Vec<String>,
    pub status: crate::model::NodeStatus,
}

impl ReadTxn<'_> {
    /// Every node's name, roles and status, by id (a thousand nodes' inventories are not read).
    pub fn node_labels(&self) -> Result<HashMap<i64, NodeLabel>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, name, roles, status FROM nodes")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut out = HashMap::new();
        for row in rows {
            let (id, name, roles, status) = row?;
            let corrupt = |what: &'static str, detail: String| super::StoreError::Corrupt {
                what,
                detail: format!("node {id}: {detail}"),
            };
            out.insert(
                id,
                NodeLabel {
                    name,
                    roles: serde_json::from_str(&roles)
                        .map_err(|e| corrupt("node roles", e.to_string()))?,
                    status: status.parse().map_err(|e| corrupt("node status", e))?,
                },
            );
        }
        Ok(out)
    }

    /// What an environment's page draws of a deployment, however big (see [`TimelineRuns`]):
    /// counted and bounded by SQL, with only the kept lanes' runs read.
    pub fn timeline_runs(&self, deployment: i64, max_lanes: usize) -> Result<TimelineRuns> {
        let counts = self.run_counts(deployment)?;
        // Kept in the tallies' rows by SQLite's triggers (migration 33): a handful of rows.
        let (first_start, last_finish): (Option<i64>, Option<i64>) = self
            .conn
            .prepare_cached(
                "SELECT MIN(first_start), MAX(last_finish) FROM run_tallies WHERE deployment = ?1",
            )?
            .query_row([deployment], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let sync: bool = self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM step_runs WHERE deployment = ?1 AND node_id IS NULL)",
            )?
            .query_row([deployment], |r| r.get(0))?;
        // The nodes' lanes counted by stepping from one node to the next in
        // step_runs_by_deployment: a seek per node, not a read of each of its runs.
        let nodes: i64 = self
            .conn
            .prepare_cached(
                "WITH RECURSIVE lane(node) AS (
                   SELECT MIN(node_id) FROM step_runs WHERE deployment = ?1
                   UNION ALL
                   SELECT (SELECT MIN(node_id) FROM step_runs
                           WHERE deployment = ?1 AND node_id > lane.node)
                   FROM lane WHERE lane.node IS NOT NULL)
                 SELECT COUNT(node) FROM lane",
            )?
            .query_row([deployment], |r| r.get(0))?;
        let lanes = nodes + i64::from(sync);
        let kept = self.kept_lanes(deployment, max_lanes, sync)?;
        let mut lines = Vec::new();
        let sync_sql = format!(
            "SELECT {LINE_COLUMNS} FROM step_runs WHERE deployment = ?1 AND node_id IS NULL
             ORDER BY seq, id"
        );
        let mut ordered = kept.clone();
        ordered.sort_by_key(|n| (n.is_some(), *n));
        for lane in ordered {
            match lane {
                Some(node) => lines.extend(self.node_run_lines(deployment, node)?),
                None => lines.extend(
                    self.conn
                        .prepare_cached(&sync_sql)?
                        .query_map([deployment], line_from_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()?,
                ),
            }
        }
        Ok(TimelineRuns {
            counts,
            lines,
            lanes: lanes.max(0).unsigned_abs() as usize,
            first_start,
            last_finish,
        })
    }

    /// The lanes a timeline of at most `max_lanes` draws: the sync node's first (`sync`: the
    /// deployment has one), then nodes with a failed run, then nodes with a running one, then
    /// the others, each by id. The failed and running ones come from `step_runs_unsettled` and
    /// the others from `step_runs_by_deployment` in node order, read only until the lanes are
    /// full.
    fn kept_lanes(
        &self,
        deployment: i64,
        max_lanes: usize,
        sync: bool,
    ) -> Result<Vec<Option<i64>>> {
        let mut kept: Vec<Option<i64>> = Vec::new();
        if sync && max_lanes > 0 {
            kept.push(None);
        }
        let mut chosen = std::collections::HashSet::new();
        let mut take = |stmt: &mut rusqlite::CachedStatement<'_>,
                        args: &[&dyn rusqlite::ToSql],
                        kept: &mut Vec<Option<i64>>|
         -> Result<()> {
            let mut rows = stmt.query(args)?;
            while kept.len() < max_lanes {
                let Some(row) = rows.next()? else { break };
                let node: i64 = row.get(0)?;
                if chosen.insert(node) {
                    kept.push(Some(node));
                }
            }
            Ok(())
        };
        for status in ["failed", "running"] {
            let mut stmt = self.conn.prepare_cached(
                "SELECT DISTINCT node_id FROM step_runs
                 WHERE deployment = ?1 AND status IN ('running', 'failed') AND status = ?2
                   AND node_id IS NOT NULL
                 ORDER BY node_id",
            )?;
            take(&mut stmt, &[&deployment, &status], &mut kept)?;
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT DISTINCT node_id FROM step_runs WHERE deployment = ?1 AND node_id IS NOT NULL
             ORDER BY node_id",
        )?;
        take(&mut stmt, &[&deployment], &mut kept)?;
        Ok(kept)
    }

    /// Every run of a deployment as a line, by node (the sync node first) then order.
    pub fn run_lines(&self, deployment: i64) -> Result<Vec<RunLine>> {
        let sql = format!(
            "SELECT {LINE_COLUMNS} FROM step_runs WHERE deployment = ?1
             ORDER BY node_id NULLS FIRST, seq, id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([deployment], line_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The runs of `node` in `deployment`, in order.
    pub fn node_run_lines(&self, deployment: i64, node: i64) -> Result<Vec<RunLine>> {
        let sql = format!(
            "SELECT {LINE_COLUMNS} FROM step_runs WHERE deployment = ?1 AND node_id = ?2
             ORDER BY seq, id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([deployment, node], line_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The output tails of the runs `ids` (those with none are left out).
    pub fn run_outputs(&self, ids: &[i64]) -> Result<HashMap<i64, String>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT output_tail FROM step_runs WHERE id = ?1")?;
        let mut out = HashMap::new();
        for &id in ids {
            let tail: Option<String> = stmt.query_row([id], |r| r.get(0)).optional()?;
            if let Some(t) = tail.filter(|t| !t.is_empty()) {
                out.insert(id, t);
            }
        }
        Ok(out)
    }

    /// An environment's deployments, newest first, `limit` from `offset`, each with its counts
    /// per status and who started it; and how many it has in all.
    pub fn deployment_history(
        &self,
        cluster_id: i64,
        limit: u32,
        offset: u32,
    ) -> Result<(Vec<DeploymentSummary>, u64)> {
        let total: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM deployments WHERE cluster_id = ?1 AND status != 'preparing'",
            )?
            .query_row([cluster_id], |r| r.get(0))?;
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS}, started_by FROM deployments
             WHERE cluster_id = ?1 AND status != 'preparing' ORDER BY id DESC LIMIT ?2 OFFSET ?3"
        );
        let found: Vec<(Deployment, Option<String>)> = self
            .conn
            .prepare_cached(&sql)?
            .query_map(params![cluster_id, limit, offset], |r| {
                Ok((deployment_from_row(r)?, r.get(10)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut out = Vec::with_capacity(found.len());
        for (deployment, started_by) in found {
            out.push(DeploymentSummary {
                counts: self.run_counts(deployment.id)?,
                deployment,
                started_by,
            });
        }
        Ok((out, total.max(0).unsigned_abs()))
    }

    /// Who started deployment `id`: its own record, else its chain's (a graph the daemon
    /// started for a chain of graphs).
    pub fn deployment_starter(&self, id: i64) -> Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT COALESCE(d.started_by, p.started_by) FROM deployments d
                 LEFT JOIN deployments p ON p.id = d.parent_id WHERE d.id = ?1",
            )?
            .query_row([id], |r| r.get(0))
            .optional()?
            .flatten())
    }

    /// The deployments `node` took part in, newest first, at most `limit` after skipping
    /// `offset` (a deployment still being written is none of them).
    pub fn node_deployments(&self, node: i64, limit: u32, offset: u64) -> Result<Vec<Deployment>> {
        let sql = format!(
            "SELECT {} FROM deployments d WHERE d.id IN
               (SELECT DISTINCT deployment FROM step_runs WHERE node_id = ?1)
               AND d.status != 'preparing'
             ORDER BY d.id DESC LIMIT ?2 OFFSET ?3",
            prefixed("d", DEPLOYMENT_COLUMNS)
        );
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let rows = self
            .conn
            .prepare_cached(&sql)?
            .query_map(params![node, limit, offset], deployment_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// How many deployments `node` took part in (as [`ReadTxn::node_deployments`] counts them).
    pub fn node_deployment_count(&self, node: i64) -> Result<u64> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM deployments d WHERE d.id IN
                   (SELECT DISTINCT deployment FROM step_runs WHERE node_id = ?1)
                   AND d.status != 'preparing'",
            )?
            .query_row([node], |r| r.get(0))?;
        Ok(n.max(0).unsigned_abs())
    }

    /// The newest failed run of `node`, in any deployment.
    pub fn last_failed_run(&self, node: i64) -> Result<Option<RunLine>> {
        let sql = format!(
            "SELECT {LINE_COLUMNS} FROM step_runs WHERE node_id = ?1 AND status = 'failed'
             ORDER BY deployment DESC, seq DESC LIMIT 1"
        );
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([node], line_from_row)
            .optional()?)
    }

    /// What `node`'s agents reported, newest first: the runs with an output, at most `limit`,
    /// each with its output tail.
    pub fn node_outputs(&self, node: i64, limit: u32) -> Result<Vec<(RunLine, String)>> {
        let sql = format!(
            "SELECT {LINE_COLUMNS}, output_tail FROM step_runs
             WHERE node_id = ?1 AND output_tail != ''
             ORDER BY deployment DESC, COALESCE(finished_at, started_at, 0) DESC, seq DESC
             LIMIT ?2"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![node, limit], |r| {
            Ok((line_from_row(r)?, r.get::<_, String>(16)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

impl WriteTxn<'_> {
    /// Record who started deployment `id` (the first to say so wins).
    pub fn set_deployment_starter(&self, id: i64, user: &str) -> Result<()> {
        self.conn
            .prepare_cached(
                "UPDATE deployments SET started_by = ?2 WHERE id = ?1 AND started_by IS NULL",
            )?
            .execute(params![id, user])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// Two deployments of one environment: node 1 and 2 in the first, node 1 in the second.
    fn seeded() -> (tempfile::TempDir, Store) {
        let (dir, store) = crate::store::testing::store_with_cluster();
        store
            .write(|tx| {
                tx.conn.execute_batch(
                    "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at,
                       cluster_id) VALUES
                       (1, '52:54:00:00:00:01', 'node-1', 'ready', 1, 1, 1),
                       (2, '52:54:00:00:00:02', 'node-2', 'error', 1, 1, 1);
                     INSERT INTO deployments (id, cluster_id, status, created_at, finished_at,
                       name, graph_type)
                     VALUES (10, 1, 'error', 100, 160, 'deployment', 'default'),
                            (11, 1, 'done', 200, 230, 'deployment', 'default');
                     INSERT INTO step_runs (id, deployment, node_id, seq, interface, step, task,
                       args, deps, timeout_s, status, attempt, started_at, finished_at,
                       exit_code, output_tail, error, runs_on) VALUES
                       (1, 10, NULL, 0, 'deploy', 'stage', 'start', '{}', '[]', 1, 'ok', 1,
                        100, 100, NULL, '', NULL, 'master'),
                       (2, 10, 1, 0, 'deploy', 'write_image', NULL, '{}', '[]', 1, 'ok', 1,
                        101, 120, 0, 'wrote 2 GiB', NULL, 'ramdisk'),
                       (3, 10, 2, 0, 'deploy', 'run_tasks', 'hiera', '{\"big\":1}', '[]', 1,
                        'failed', 2, 121, 150, 1, 'héllo\nboom', 'exit 1', 'os'),
                       (4, 10, 2, 1, 'deploy', 'run_tasks', 'netconfig', '{}', '[]', 1,
                        'pending', 0, NULL, NULL, NULL, '', NULL, 'os'),
                       (5, 11, 1, 0, 'deploy', 'run_tasks', 'hiera', '{}', '[]', 1, 'ok', 1,
                        201, 229, 0, 'again', NULL, 'os');",
                )?;
                tx.set_deployment_starter(11, "otto")?;
                tx.set_deployment_starter(11, "someone else")
            })
            .unwrap();
        (dir, store)
    }

    #[test]
    fn lines_leave_arguments_and_output_out_and_outputs_come_by_id() {
        let (_dir, store) = seeded();
        let lines = store.read(|r| r.run_lines(10)).unwrap();
        let names: Vec<String> = lines.iter().map(RunLine::name).collect();
        assert_eq!(names, ["start", "deploy.write_image", "hiera", "netconfig"]);
        assert_eq!(lines[2].output_len, "héllo\nboom".len());
        assert_eq!(lines[2].attempt, 2);
        assert_eq!(lines[2].runs_on, Location::Os);
        let c = RunCounts::of_lines(&lines);
        assert_eq!((c.total, c.ok, c.failed, c.pending), (4, 2, 1, 1));
        let out = store.read(|r| r.run_outputs(&[2, 3, 4, 99])).unwrap();
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[&3], "héllo\nboom");
        let node2 = store.read(|r| r.node_run_lines(10, 2)).unwrap();
        assert_eq!(node2.len(), 2);
    }

    /// The lanes SQL keeps are the timeline's (the sync node, the failed, then by id), with
    /// all their runs in order, and the counts and span are the whole deployment's.
    #[test]
    fn a_timeline_reads_only_the_lanes_it_keeps() {
        let (_dir, store) = seeded();
        let all = store.read(|r| r.timeline_runs(10, 40)).unwrap();
        assert_eq!(all.lines, store.read(|r| r.run_lines(10)).unwrap());
        assert_eq!(
            (all.lanes, all.first_start, all.last_finish),
            (3, Some(100), Some(150))
        );
        assert_eq!((all.counts.total, all.counts.failed), (4, 1));
        // Two lanes: the stages, then node 2 (a failed run) before node 1.
        let two = store.read(|r| r.timeline_runs(10, 2)).unwrap();
        let lanes: Vec<Option<i64>> = two.lines.iter().map(|l| l.node_id).collect();
        assert_eq!(lanes, [None, Some(2), Some(2)]);
        assert_eq!((two.lanes, two.counts.total), (3, 4));
        let none = store.read(|r| r.timeline_runs(99, 40)).unwrap();
        assert_eq!(
            (none.lines.len(), none.lanes, none.first_start),
            (0, 0, None)
        );
    }

    /// The lanes kept at 10,000 nodes are chosen the same way: a node with a running run
    /// comes after the failed ones and before the others, and a node counted once.
    #[test]
    fn kept_lanes_put_failed_then_running_nodes_first() {
        let (_dir, store) = seeded();
        crate::store::testing::exec(
            &store,
            "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at)
                     VALUES (3, '52:54:00:00:00:03', 'node-3', 'ready', 1, 1);
                     INSERT INTO step_runs (id, deployment, node_id, seq, interface, step,
                       args, deps, timeout_s, status, attempt, started_at, runs_on) VALUES
                       (6, 10, 3, 0, 'deploy', 'run_tasks', '{}', '[]', 1, 'running', 1, 90,
                        'os'),
                       (7, 10, 2, 2, 'deploy', 'run_tasks', '{}', '[]', 1, 'running', 1, 152,
                        'os');",
        );
        let lanes = |max| -> Vec<Option<i64>> {
            let t = store.read(|r| r.timeline_runs(10, max)).unwrap();
            let mut l: Vec<Option<i64>> = t.lines.iter().map(|l| l.node_id).collect();
            l.dedup();
            assert_eq!(
                (t.lanes, t.first_start, t.last_finish),
                (4, Some(90), Some(150))
            );
            l
        };
        // Drawn in node order; kept: the stages, node 2 (failed, and running), node 3.
        assert_eq!(lanes(3), [None, Some(2), Some(3)]);
        assert_eq!(lanes(40), [None, Some(1), Some(2), Some(3)]);
        assert_eq!(lanes(1), [None]);
        assert!(lanes(0).is_empty());
    }

    /// What SQLite's triggers keep in `run_tallies` is what counting the runs gives, through
    /// every way runs are written: made, claimed, finished, retried, a node deleted (its runs
    /// kept in `removed_runs`), a deployment deleted.
    #[test]
    fn tallies_follow_every_write_of_runs() {
        let (_dir, store) = seeded();
        let check = |what: &str| {
            store
                .read(|r| {
                    for dep in [10, 11] {
                        let counted: Vec<(String, i64)> = r
                            .conn
                            .prepare(
                                "SELECT status, SUM(n) FROM
                                   (SELECT status, 1 AS n FROM step_runs WHERE deployment = ?1
                                    UNION ALL
                                    SELECT status, n FROM removed_runs WHERE deployment = ?1)
                                 GROUP BY status ORDER BY status",
                            )?
                            .query_map([dep], |row| Ok((row.get(0)?, row.get(1)?)))?
                            .collect::<rusqlite::Result<_>>()?;
                        let c = r.run_counts(dep)?;
                        let of = |s: &str| {
                            counted
                                .iter()
                                .find(|(k, _)| k == s)
                                .map_or(0, |(_, n)| usize::try_from(*n).unwrap())
                        };
                        assert_eq!(
                            (c.pending, c.running, c.ok, c.failed, c.skipped),
                            (
                                of("pending"),
                                of("running"),
                                of("ok"),
                                of("failed"),
                                of("skipped")
                            ),
                            "{what}: deployment {dep}"
                        );
                        let total: i64 = counted.iter().map(|(_, n)| n).sum();
                        assert_eq!(c.total, usize::try_from(total).unwrap(), "{what}");
                    }
                    Ok(())
                })
                .unwrap();
        };
        // The span kept with the tallies is what the runs give while none went back; after a
        // retry or a node's deletion it still starts no later than any run left.
        let span = |what: &str, exact: bool| {
            store
                .read(|r| {
                    for dep in [10, 11] {
                        let (first, last): (Option<i64>, Option<i64>) = r.conn.query_row(
                            "SELECT MIN(started_at), MAX(finished_at) FROM step_runs
                             WHERE deployment = ?1",
                            [dep],
                            |row| Ok((row.get(0)?, row.get(1)?)),
                        )?;
                        let t = r.timeline_runs(dep, 40)?;
                        if exact {
                            assert_eq!((t.first_start, t.last_finish), (first, last), "{what}");
                        } else {
                            assert!(first.is_none_or(|f| t.first_start <= Some(f)), "{what}");
                            assert!(last.is_none_or(|l| t.last_finish >= Some(l)), "{what}");
                        }
                    }
                    Ok(())
                })
                .unwrap();
        };
        check("seeded");
        span("seeded", true);
        let sql = |s: &str| crate::store::testing::exec(&store, s);
        sql("UPDATE step_runs SET status = 'running', started_at = 300 WHERE id = 4");
        check("claimed");
        span("claimed", true);
        sql("UPDATE step_runs SET status = 'ok', finished_at = 301 WHERE id = 4");
        check("finished");
        span("finished", true);
        sql("UPDATE step_runs SET status = 'ok' WHERE id = 4");
        check("the same status again");
        span("the same status again", true);
        sql("UPDATE step_runs SET status = 'pending', started_at = NULL WHERE deployment = 10");
        check("retried");
        span("retried", false);
        // As `delete_node` deletes a node: its runs counted into removed_runs, then gone
        // with it (step_runs cascade).
        sql("INSERT INTO removed_runs (deployment, node_id, status, n)
             SELECT deployment, node_id, status, COUNT(*) FROM step_runs WHERE node_id = 2
             GROUP BY deployment, status;
             DELETE FROM nodes WHERE id = 2;");
        check("node 2 deleted");
        span("node 2 deleted", false);
        sql("DELETE FROM deployments WHERE id = 11");
        check("deployment 11 deleted");
        let left: i64 = store
            .read(|r| {
                Ok(r.conn.query_row(
                    "SELECT COUNT(*) FROM run_tallies WHERE deployment = 11",
                    [],
                    |row| row.get(0),
                )?)
            })
            .unwrap();
        assert_eq!(left, 0, "a deleted deployment's tallies go with it");
    }

    #[test]
    fn history_counts_statuses_and_says_who_started() {
        let (_dir, store) = seeded();
        let (all, total) = store.read(|r| r.deployment_history(1, 10, 0)).unwrap();
        assert_eq!(total, 2);
        assert_eq!(all[0].deployment.id, 11);
        assert_eq!(all[0].started_by.as_deref(), Some("otto"), "the first wins");
        assert_eq!(all[1].started_by, None);
        assert_eq!(
            (all[1].counts.total, all[1].counts.failed, all[1].counts.ok),
            (4, 1, 2)
        );
        let (page2, _) = store.read(|r| r.deployment_history(1, 1, 1)).unwrap();
        assert_eq!(page2.len(), 1);
        assert_eq!(page2[0].deployment.id, 10);
        assert_eq!(
            store.read(|r| r.deployment_starter(11)).unwrap().as_deref(),
            Some("otto")
        );
    }

    #[test]
    fn a_node_has_its_deployments_last_failure_and_outputs() {
        let (_dir, store) = seeded();
        let labels = store.read(|r| r.node_labels()).unwrap();
        assert_eq!(labels[&2].name, "node-2");
        assert_eq!(labels[&2].status, crate::model::NodeStatus::Error);
        let ids = |limit: u32, offset: u64| -> Vec<i64> {
            store
                .read(|r| r.node_deployments(1, limit, offset))
                .unwrap()
                .iter()
                .map(|d| d.id)
                .collect()
        };
        assert_eq!(ids(10, 0), [11, 10]);
        assert_eq!(ids(1, 0), [11], "bounded");
        assert_eq!(ids(1, 1), [10], "the older ones a page on");
        assert_eq!(ids(5, 2), Vec::<i64>::new());
        assert_eq!(store.read(|r| r.node_deployment_count(1)).unwrap(), 2);
        assert_eq!(store.read(|r| r.node_deployment_count(99)).unwrap(), 0);
        let failed = store.read(|r| r.last_failed_run(2)).unwrap().unwrap();
        assert_eq!(failed.name(), "hiera");
        assert_eq!(failed.error.as_deref(), Some("exit 1"));
        assert_eq!(store.read(|r| r.last_failed_run(1)).unwrap(), None);
        let outputs = store.read(|r| r.node_outputs(1, 10)).unwrap();
        let tails: Vec<&str> = outputs.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(tails, ["again", "wrote 2 GiB"], "newest first");
    }
}
