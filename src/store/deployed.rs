//! What ran successfully in each environment: per node and task the deployment that last ran
//! it, and the deployment data of those deployments. The next plan reads it back as `$%old`, so
//! a redeploy runs only what changed. Stored as rows (`deployed_tasks`) and one JSON snapshot
//! per deployment still referred to (`deployed_snapshots`); the engine's
//! [`Deployed`](crate::engine::graph::Deployed) decides what to keep.

use rusqlite::params;

use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::engine::graph::{Deployed, Snapshot};

impl ReadTxn<'_> {
    /// The deployed state of an environment (empty before its first successful deployment).
    pub fn deployed(&self, cluster_id: i64) -> Result<Deployed> {
        let mut out = Deployed::default();
        let mut stmt = self.conn.prepare_cached(
            "SELECT deployment, data FROM deployed_snapshots WHERE cluster_id = ?1
             ORDER BY deployment",
        )?;
        let rows = stmt.query_map([cluster_id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        for row in rows {
            let (id, data) = row?;
            let snap: Snapshot = serde_json::from_str(&data).map_err(|e| StoreError::Corrupt {
                what: "deployed snapshot",
                detail: format!("environment {cluster_id}, deployment {id}: {e}"),
            })?;
            out.deployments.insert(id, snap);
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT node_uid, task, deployment FROM deployed_tasks WHERE cluster_id = ?1",
        )?;
        let rows = stmt.query_map([cluster_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        for row in rows {
            let (uid, task, dep) = row?;
            out.tasks.entry(uid).or_default().insert(task, dep);
        }
        Ok(out)
    }
}

impl WriteTxn<'_> {
    /// Replace an environment's deployed state.
    pub fn save_deployed(&self, cluster_id: i64, deployed: &Deployed) -> Result<()> {
        self.conn.execute(
            "DELETE FROM deployed_snapshots WHERE cluster_id = ?1",
            [cluster_id],
        )?;
        self.conn.execute(
            "DELETE FROM deployed_tasks WHERE cluster_id = ?1",
            [cluster_id],
        )?;
        for (id, snap) in &deployed.deployments {
            let data = serde_json::to_string(snap).map_err(|e| StoreError::Corrupt {
                what: "deployed snapshot",
                detail: e.to_string(),
            })?;
            self.conn.execute(
                "INSERT INTO deployed_snapshots (cluster_id, deployment, data) VALUES (?1, ?2, ?3)",
                params![cluster_id, id, data],
            )?;
        }
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO deployed_tasks (cluster_id, node_uid, task, deployment)
             VALUES (?1, ?2, ?3, ?4)",
        )?;
        for (uid, tasks) in &deployed.tasks {
            for (task, dep) in tasks {
                stmt.execute(params![cluster_id, uid, task, dep])?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::Store;

    fn store_with_cluster() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        store
            .write(|tx| {
                tx.conn.execute_batch(
                    "INSERT INTO plugins (id, name, version, title, package_version, description,
                       is_release, path, diagnostics, manifest, installed_at)
                     VALUES (1, 'r', '1.0.0', 'r', '5.0.0', '', 1, '/x', '[]', '{}', 1);
                     INSERT INTO releases (id, plugin_id, name, version, operating_system,
                       description, state, data)
                     VALUES (1, 1, 'r', 'newton-10.0', 'ubuntu', '', 'available', '{}');
                     INSERT INTO clusters (id, name, release_id, status, net_segment_type, created_at)
                     VALUES (1, 'env', 1, 'new', 'vlan', 1);",
                )?;
                Ok(())
            })
            .unwrap();
        (dir, store)
    }

    #[test]
    fn deployed_state_round_trips() {
        let (_dir, store) = store_with_cluster();
        let mut d = Deployed::default();
        d.deployments.insert(
            "1".to_string(),
            Snapshot {
                common: serde_json::json!({"a": 1}),
                nodes: BTreeMap::from([("1".to_string(), serde_json::json!({"b": 2}))]),
            },
        );
        d.tasks
            .entry("1".to_string())
            .or_default()
            .insert("netconfig".to_string(), "1".to_string());
        store.write(|tx| tx.save_deployed(1, &d)).unwrap();
        assert_eq!(store.read(|r| r.deployed(1)).unwrap(), d);
        // An environment that does not exist: the foreign key refuses, nothing half-written.
        assert!(store.write(|tx| tx.save_deployed(7, &d)).is_err());
        assert_eq!(store.read(|r| r.deployed(7)).unwrap(), Deployed::default());
    }
}
