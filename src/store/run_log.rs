//! What people read of deployments (the CLI's `deployment list|show|logs` and its `--follow`):
//! every deployment with how many of its runs stand in each status, read from the tallies
//! SQLite keeps as runs are written (`run_tallies`) without loading a run, the runs of nodes
//! deleted since in their kept counts (`removed_runs`); and one deployment's runs filtered by
//! node, task and status, without their arguments, dependencies, output and report when only
//! their progress is wanted (a follower asks every second). No writes.

use super::deployments::{
    DEPLOYMENT_COLUMNS, RUN_COLUMNS, RunCounts, deployment_from_row, run_from_row,
};
use super::{Deployment, ReadTxn, Result, Run};

/// Which runs of a deployment to read.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only this node's.
    pub node_id: Option<i64>,
    /// Only this graph task's, or this step's (`interface.step`, as `deploy.configure`).
    pub task: Option<String>,
    /// Only runs in these statuses (none: all).
    pub statuses: Vec<String>,
    /// Leave out each run's arguments, dependencies, output tail and report.
    pub brief: bool,
    /// Skip this many of the matching runs (paging).
    pub offset: usize,
    /// Read at most this many (none: every one from `offset` on).
    pub limit: Option<usize>,
}

/// [`RUN_COLUMNS`], with the heavy columns read as empty values when `brief`.
fn run_columns(brief: bool) -> String {
    RUN_COLUMNS
        .split(',')
        .map(str::trim)
        .map(|c| match (brief, c) {
            (true, "args") => "'{}'",
            (true, "deps") => "'[]'",
            (true, "output_tail") => "''",
            (true, "report") => "NULL",
            (_, c) => c,
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl ReadTxn<'_> {
    /// Deployments newest first, of environment `cluster_id` or of all, each with its runs
    /// counted by status, deleted nodes' runs included ([`RunCounts`]).
    pub fn deployments_counted(
        &self,
        cluster_id: Option<i64>,
    ) -> Result<Vec<(Deployment, RunCounts)>> {
        let sql = format!(
            "WITH mine AS (SELECT id FROM deployments WHERE ?1 IS NULL OR cluster_id = ?1),
             every AS (
               SELECT deployment, status, n, 0 AS gone FROM run_tallies
               WHERE deployment IN mine AND n > 0
               UNION ALL
               SELECT deployment, status, n, n FROM removed_runs WHERE deployment IN mine),
             c AS (
               SELECT deployment AS dep, SUM(n) AS n_total,
                 SUM(CASE status WHEN 'pending' THEN n ELSE 0 END) AS n_pending,
                 SUM(CASE status WHEN 'running' THEN n ELSE 0 END) AS n_running,
                 SUM(CASE status WHEN 'ok' THEN n ELSE 0 END) AS n_ok,
                 SUM(CASE status WHEN 'failed' THEN n ELSE 0 END) AS n_failed,
                 SUM(gone) AS n_gone
               FROM every GROUP BY deployment)
             SELECT {DEPLOYMENT_COLUMNS}, COALESCE(n_total, 0), COALESCE(n_pending, 0),
               COALESCE(n_running, 0), COALESCE(n_ok, 0), COALESCE(n_failed, 0),
               COALESCE(n_gone, 0)
             FROM deployments LEFT JOIN c ON c.dep = deployments.id
             WHERE (?1 IS NULL OR cluster_id = ?1) AND status != 'preparing'
             ORDER BY id DESC"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([cluster_id], |r| {
            let n = |i| r.get::<_, i64>(i).map(|n| usize::try_from(n).unwrap_or(0));
            let (total, pending, running, ok, failed) = (n(10)?, n(11)?, n(12)?, n(13)?, n(14)?);
            Ok((
                deployment_from_row(r)?,
                RunCounts {
                    total,
                    pending,
                    running,
                    ok,
                    failed,
                    skipped: total.saturating_sub(pending + running + ok + failed),
                    of_deleted_nodes: n(15)?,
                },
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// How many runs of `deployment` stand in each status, deleted nodes' runs included
    /// ([`RunCounts`]).
    pub fn run_counts(&self, deployment: i64) -> Result<RunCounts> {
        let mut c = RunCounts::default();
        self.count_by_status(
            "SELECT status, n FROM run_tallies WHERE deployment = ?1 AND n > 0",
            deployment,
            |status, n| c.add(status, n),
        )?;
        Ok(c.plus(self.deleted_runs(deployment)?))
    }

    /// Run `sql` (status and a count per row, for `deployment`) and hand each row to `add`.
    fn count_by_status(
        &self,
        sql: &str,
        deployment: i64,
        mut add: impl FnMut(&str, usize),
    ) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map([deployment], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })?;
        for row in rows {
            let (status, n) = row?;
            add(&status, usize::try_from(n).unwrap_or(0));
        }
        Ok(())
    }

    /// The runs of `deployment` that went with nodes deleted since, counted by the status
    /// each was left in.
    pub fn deleted_runs(&self, deployment: i64) -> Result<RunCounts> {
        let mut c = RunCounts::default();
        self.count_by_status(
            "SELECT status, SUM(n) FROM removed_runs WHERE deployment = ?1 GROUP BY status",
            deployment,
            |status, n| c.add_deleted(status, n),
        )?;
        Ok(c)
    }

    /// The runs of `deployment` that `filter` keeps, by node then order, as
    /// [`ReadTxn::runs`] orders them.
    pub fn runs_where(&self, deployment: i64, filter: &RunFilter) -> Result<Vec<Run>> {
        let sql = format!(
            "SELECT {} FROM step_runs
             WHERE deployment = ?1 AND (?2 IS NULL OR node_id = ?2)
               AND (?3 IS NULL OR task = ?3 OR interface || '.' || step = ?3)
               AND (?4 IS NULL OR instr(?4, ',' || status || ',') > 0)
             ORDER BY node_id NULLS FIRST, seq, id
             LIMIT ?5 OFFSET ?6",
            run_columns(filter.brief)
        );
        let statuses =
            (!filter.statuses.is_empty()).then(|| format!(",{},", filter.statuses.join(",")));
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let limit = filter.limit.map_or(i64::MAX, count);
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            rusqlite::params![
                deployment,
                filter.node_id,
                filter.task,
                statuses,
                limit,
                count(filter.offset)
            ],
            run_from_row,
        )?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brief_columns_keep_every_column_in_its_place() {
        let full: Vec<&str> = RUN_COLUMNS.split(',').map(str::trim).collect();
        let brief = run_columns(true);
        let brief: Vec<&str> = brief.split(", ").collect();
        assert_eq!(full.len(), brief.len());
        for (f, b) in full.iter().zip(&brief) {
            match *f {
                "args" | "deps" | "output_tail" | "report" => assert_ne!(f, b),
                _ => assert_eq!(f, b),
            }
        }
        assert_eq!(run_columns(false), full.join(", "));
    }
}
