//! What people read of deployments (the CLI's `deployment list|show|logs` and its `--follow`):
//! every deployment with how many of its runs stand in each status, counted in SQL without
//! loading a run; and one deployment's runs filtered by node, task and status, without their
//! arguments, dependencies, output and report when only their progress is wanted (a follower
//! asks every second). No writes.

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
    /// counted by status.
    pub fn deployments_counted(
        &self,
        cluster_id: Option<i64>,
    ) -> Result<Vec<(Deployment, RunCounts)>> {
        let sql = format!(
            "WITH c AS (
               SELECT deployment AS dep, COUNT(*) AS n_total,
                 SUM(status = 'pending') AS n_pending, SUM(status = 'running') AS n_running,
                 SUM(status = 'ok') AS n_ok, SUM(status = 'failed') AS n_failed
               FROM step_runs
               WHERE deployment IN
                 (SELECT id FROM deployments WHERE ?1 IS NULL OR cluster_id = ?1)
               GROUP BY deployment)
             SELECT {DEPLOYMENT_COLUMNS}, COALESCE(n_total, 0), COALESCE(n_pending, 0),
               COALESCE(n_running, 0), COALESCE(n_ok, 0), COALESCE(n_failed, 0)
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
                },
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// How many runs of `deployment` stand in each status.
    pub fn run_counts(&self, deployment: i64) -> Result<RunCounts> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT status, COUNT(*) FROM step_runs WHERE deployment = ?1 GROUP BY status",
        )?;
        let rows = stmt.query_map([deployment], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })?;
        let mut c = RunCounts::default();
        for row in rows {
            let (status, n) = row?;
            let n = usize::try_from(n).unwrap_or(0);
            c.total += n;
            match status.as_str() {
                "pending" => c.pending += n,
                "running" => c.running += n,
                "ok" => c.ok += n,
                "failed" => c.failed += n,
                _ => c.skipped += n,
            }
        }
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
             ORDER BY node_id IS NOT NULL, node_id, seq, id
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
