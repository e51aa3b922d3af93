//! Queries on `master_tasks`: tasks of the master itself rather than of an environment
//! (Nailgun's `dump`, the diagnostic snapshot), shown with the deployments as Nailgun's
//! transactions. Both share one id space (`ids::TRANSACTIONS`): every deployment and master
//! task takes the next id above any either table has ever held.

use rusqlite::{OptionalExtension, params};
use serde_json::Value as J;

use super::{ReadTxn, Result, StoreError, WriteTxn};

/// One task of the master.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MasterTask {
    pub id: i64,
    /// Nailgun's task name (`dump`).
    pub name: String,
    /// `pending`, `running`, `ready` or `error`.
    pub status: String,
    /// 0 to 100.
    pub progress: u8,
    pub message: Option<String>,
    /// A JSON object.
    pub result: J,
    /// Unix seconds.
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

const COLUMNS: &str = "id, name, status, progress, message, result, created_at, finished_at";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(MasterTask, String)> {
    Ok((
        MasterTask {
            id: r.get(0)?,
            name: r.get(1)?,
            status: r.get(2)?,
            progress: r.get::<_, i64>(3)?.clamp(0, 100) as u8,
            message: r.get(4)?,
            result: J::Null,
            created_at: r.get(6)?,
            finished_at: r.get(7)?,
        },
        r.get(5)?,
    ))
}

fn decode((mut t, result): (MasterTask, String)) -> Result<MasterTask> {
    t.result = serde_json::from_str(&result).map_err(|e| StoreError::Corrupt {
        what: "master task result",
        detail: format!("{}: {e}", t.id),
    })?;
    Ok(t)
}

impl ReadTxn<'_> {
    /// The master's tasks (one with `id`, or all), newest first.
    pub fn master_tasks(&self, id: Option<i64>) -> Result<Vec<MasterTask>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM master_tasks WHERE ?1 IS NULL OR id = ?1 ORDER BY id DESC"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([id], from_row)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(decode(row?)?);
        }
        Ok(out)
    }
}

impl WriteTxn<'_> {
    /// Start a task `name` of the master, `running`: refused (409) while one of that name
    /// runs, as Nailgun's `check_running_task`. Finished ones of the name are forgotten but
    /// the newest `keep`.
    pub fn start_master_task(&self, name: &str, keep: usize, now: i64) -> Result<MasterTask> {
        let running: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM master_tasks
                 WHERE name = ?1 AND status IN ('pending', 'running') LIMIT 1",
                [name],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(id) = running {
            return Err(StoreError::Conflict(format!(
                "A task is already running: {name} task {id}; wait for it to end"
            )));
        }
        self.conn.execute(
            "DELETE FROM master_tasks WHERE name = ?1 AND id NOT IN
               (SELECT id FROM master_tasks WHERE name = ?1 ORDER BY id DESC LIMIT ?2)",
            params![name, i64::try_from(keep).unwrap_or(i64::MAX)],
        )?;
        let id = self.take_id(&super::ids::TRANSACTIONS)?;
        self.conn.execute(
            "INSERT INTO master_tasks (id, name, status, progress, created_at)
             VALUES (?1, ?2, 'running', 0, ?3)",
            params![id, name, now],
        )?;
        self.read()
            .master_tasks(Some(id))?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::NotFound {
                entity: "master task",
                id: id.to_string(),
            })
    }

    /// End task `id`: `ready` (progress 100) with its message and result, or `error` with
    /// why. False when it was not running any more.
    pub fn finish_master_task(
        &self,
        id: i64,
        ok: bool,
        message: &str,
        result: &J,
        now: i64,
    ) -> Result<bool> {
        Ok(self.conn.execute(
            "UPDATE master_tasks SET status = ?2, progress = 100, message = ?3, result = ?4,
               finished_at = ?5
             WHERE id = ?1 AND status IN ('pending', 'running')",
            params![
                id,
                if ok { "ready" } else { "error" },
                message,
                result.to_string(),
                now
            ],
        )? == 1)
    }

    /// Tasks a stopped master left unfinished end in `error`, saying why; how many.
    pub fn fail_unfinished_master_tasks(&self, message: &str, now: i64) -> Result<usize> {
        Ok(self.conn.execute(
            "UPDATE master_tasks SET status = 'error', progress = 100, message = ?1,
               finished_at = ?2
             WHERE status IN ('pending', 'running')",
            params![message, now],
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::store_with_cluster;
    use serde_json::json;

    #[test]
    fn master_tasks_and_deployments_share_one_id_space() {
        let (_dir, store) = store_with_cluster();
        let empty = store
            .write(|tx| tx.record_empty_deployment(1, "deployment", "default", false, None, 10))
            .unwrap();
        let t = store
            .write(|tx| tx.start_master_task("dump", 2, 11))
            .unwrap();
        assert_eq!(t.id, empty.id + 1);
        assert_eq!(t.status, "running");
        // One running: a second is refused.
        assert!(matches!(
            store.write(|tx| tx.start_master_task("dump", 2, 12)),
            Err(StoreError::Conflict(_))
        ));
        assert!(
            store
                .write(|tx| tx.finish_master_task(t.id, true, "/api/dump/x", &json!({}), 13))
                .unwrap()
        );
        let next = store
            .write(|tx| tx.record_empty_deployment(1, "deployment", "default", false, None, 14))
            .unwrap();
        assert_eq!(
            next.id,
            t.id + 1,
            "a deployment takes an id above the task's"
        );
        // Only the newest `keep` finished ones stay.
        let mut ids = vec![t.id];
        for at in 15..18 {
            let t = store
                .write(|tx| tx.start_master_task("dump", 2, at))
                .unwrap();
            store
                .write(|tx| tx.finish_master_task(t.id, false, "failed", &json!({}), at))
                .unwrap();
            ids.push(t.id);
        }
        let kept: Vec<i64> = store
            .read(|r| r.master_tasks(None))
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(kept, [ids[3], ids[2], ids[1]]);
        let t = store
            .write(|tx| tx.start_master_task("dump", 2, 20))
            .unwrap();
        assert_eq!(
            store
                .write(|tx| tx.fail_unfinished_master_tasks("stopped", 21))
                .unwrap(),
            1
        );
        let failed = &store.read(|r| r.master_tasks(Some(t.id))).unwrap()[0];
        assert_eq!(
            (failed.status.as_str(), failed.message.as_deref()),
            ("error", Some("stopped"))
        );
    }
}
