//! What ran successfully in each environment: per node and task the deployment that last ran
//! it, and the deployment data of those deployments. The next plan reads it back as `$%old`, so
//! a redeploy runs only what changed. Stored as rows (`deployed_tasks`) and one JSON snapshot
//! per deployment (`deployed_snapshots`); the engine's
//! [`Deployed`](crate::engine::graph::Deployed) decides what to keep.
//!
//! A deployment's snapshot is written into `deployed_snapshots` when it starts, and counts
//! only once a task row refers to it, which its success writes: at 10,000 nodes the snapshot
//! is some 47 MB of JSON, and copying it at the deployment's end (then blanking the original)
//! held the writer, and every agent's call, for most of a second. Snapshots of deployments
//! that did not succeed stay for a retry (as they stayed in `deployment_states` before).

use rusqlite::params;

use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::engine::graph::{Deployed, Snapshot};

impl ReadTxn<'_> {
    /// The deployed state of an environment (empty before its first successful deployment).
    pub fn deployed(&self, cluster_id: i64) -> Result<Deployed> {
        let mut out = Deployed::default();
        // Only snapshots a task refers to: a running or failed deployment's is not deployed.
        let mut stmt = self.conn.prepare_cached(
            "SELECT s.deployment, s.data FROM deployed_snapshots s WHERE s.cluster_id = ?1
               AND EXISTS (SELECT 1 FROM deployed_tasks t
                           WHERE t.cluster_id = s.cluster_id AND t.deployment = s.deployment)
             ORDER BY s.deployment",
        )?;
        let mut rows = stmt.query([cluster_id])?;
        while let Some(row) = rows.next()? {
            let id: String = row.get(0)?;
            // Parsed from SQLite's own buffer: a snapshot of 10,000 nodes is tens of
            // megabytes of text, and a copy of it would sit beside its parse at every plan.
            let corrupt = |detail: String| StoreError::Corrupt {
                what: "deployed snapshot",
                detail: format!("environment {cluster_id}, deployment {id}: {detail}"),
            };
            let data = row
                .get_ref(1)?
                .as_str()
                .map_err(|e| corrupt(e.to_string()))?;
            let snap: Snapshot = serde_json::from_str(data).map_err(|e| corrupt(e.to_string()))?;
            out.add_snapshot(id, snap);
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT node_uid, task, deployment FROM deployed_tasks WHERE cluster_id = ?1",
        )?;
        // Read from SQLite's buffers, each task and deployment id kept once.
        let mut names = std::collections::HashSet::new();
        let mut rows = stmt.query([cluster_id])?;
        while let Some(row) = rows.next()? {
            let text = |i: usize| -> Result<&str> {
                row.get_ref(i)?.as_str().map_err(|e| StoreError::Corrupt {
                    what: "deployed task",
                    detail: format!("environment {cluster_id}: {e}"),
                })
            };
            out.record_run(&mut names, text(0)?, text(1)?, text(2)?);
        }
        Ok(out)
    }
}

impl WriteTxn<'_> {
    /// Deployment `dep` of `cluster_id` starts: its snapshot is stored, not deployed yet (no
    /// task refers to it until [`WriteTxn::keep_deployed`]).
    pub(super) fn stage_snapshot(&self, cluster_id: i64, dep: i64, snapshot: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO deployed_snapshots (cluster_id, deployment, data)
             VALUES (?1, CAST(?2 AS TEXT), ?3)
             ON CONFLICT (cluster_id, deployment) DO UPDATE SET data = excluded.data",
            params![cluster_id, dep, snapshot],
        )?;
        Ok(())
    }

    /// Deployment `dep` of `cluster_id` succeeded: the tasks it ran, written when it was
    /// created (`deployment_ran`), become the environment's deployed state, and with them its
    /// snapshot ([`WriteTxn::stage_snapshot`]). Nodes no longer in the environment (or leaving
    /// it) keep nothing (back in an environment, they are new), and snapshots of successful
    /// deployments no task refers to any more go. All in SQL, a copy of what this deployment
    /// ran: this runs inside the call of the agent whose result ended the deployment, so it
    /// must not parse or rewrite the whole state. Its list of what it ran has served and
    /// goes later, in parts ([`WriteTxn::prune_ran`]): 180,000 rows at 10,000 nodes.
    pub(super) fn keep_deployed(&self, cluster_id: i64, dep: i64) -> Result<()> {
        // A deployment started before snapshots were staged has its snapshot here.
        self.conn.execute(
            "INSERT INTO deployed_snapshots (cluster_id, deployment, data)
             SELECT ?1, CAST(deployment AS TEXT), snapshot FROM deployment_states
             WHERE deployment = ?2 AND snapshot IS NOT NULL
             ON CONFLICT (cluster_id, deployment) DO UPDATE SET data = excluded.data",
            params![cluster_id, dep],
        )?;
        self.conn.execute(
            "INSERT INTO deployed_tasks (cluster_id, node_uid, task, deployment)
             SELECT ?1, node_uid, task, CAST(?2 AS TEXT) FROM deployment_ran
             WHERE deployment = ?2
             ON CONFLICT (cluster_id, node_uid, task) DO UPDATE SET deployment = excluded.deployment",
            params![cluster_id, dep],
        )?;
        self.conn.execute(
            "DELETE FROM deployed_tasks WHERE cluster_id = ?1 AND node_uid NOT IN
               (SELECT CAST(id AS TEXT) FROM nodes
                WHERE cluster_id = ?1 AND NOT pending_deletion)",
            [cluster_id],
        )?;
        self.conn.execute(
            "DELETE FROM deployed_snapshots WHERE cluster_id = ?1 AND deployment NOT IN
               (SELECT deployment FROM deployed_tasks WHERE cluster_id = ?1)
             AND deployment NOT IN
               (SELECT CAST(id AS TEXT) FROM deployments
                WHERE cluster_id = ?1 AND status <> 'done' AND id <> ?2)",
            [cluster_id, dep],
        )?;
        // Kept once, in deployed_snapshots.
        self.conn.execute(
            "UPDATE deployment_states SET snapshot = NULL
             WHERE deployment = ?1 AND snapshot IS NOT NULL",
            [dep],
        )?;
        Ok(())
    }

    /// Delete up to `limit` rows of what successful deployments ran (`deployment_ran`), which
    /// [`WriteTxn::keep_deployed`] has copied; returns how many went. A failed deployment's
    /// list stays for its retry.
    pub fn prune_ran(&self, limit: usize) -> Result<usize> {
        Ok(self
            .conn
            .prepare_cached(
                "DELETE FROM deployment_ran WHERE rowid IN
                   (SELECT rowid FROM deployment_ran WHERE deployment IN
                      (SELECT id FROM deployments WHERE status = 'done')
                    LIMIT ?1)",
            )?
            .execute([i64::try_from(limit).unwrap_or(i64::MAX)])?)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::Store;
    use crate::store::testing::store_with_cluster;

    /// Deployment `dep` as creation writes it: its snapshot and the tasks it runs.
    fn staged(store: &Store, dep: i64, snap: &Snapshot, ran: &[(&str, &str)]) {
        let snap = serde_json::to_string(snap).unwrap();
        store
            .write(|tx| {
                tx.conn.execute(
                    "INSERT INTO deployments (id, cluster_id, status, created_at)
                     VALUES (?1, 1, 'running', 1)",
                    [dep],
                )?;
                tx.conn.execute(
                    "INSERT INTO deployment_states (deployment, snapshot) VALUES (?1, ?2)",
                    params![dep, snap],
                )?;
                for (uid, task) in ran {
                    tx.conn.execute(
                        "INSERT INTO deployment_ran (deployment, node_uid, task)
                         VALUES (?1, ?2, ?3)",
                        params![dep, uid, task],
                    )?;
                }
                Ok(())
            })
            .unwrap();
    }

    /// Deployment `dep` succeeds, as the store's caller of `keep_deployed` goes on.
    fn succeed(store: &Store, dep: i64) {
        store
            .write(|tx| {
                tx.keep_deployed(1, dep)?;
                tx.conn.execute(
                    "UPDATE deployments SET status = 'done' WHERE id = ?1",
                    [dep],
                )?;
                Ok(())
            })
            .unwrap();
    }

    /// Deployment `dep` starts as `start_deployment` writes it now: the tasks it runs, its
    /// snapshot staged.
    fn started(store: &Store, dep: i64, snap: &Snapshot, ran: &[(&str, &str)]) {
        staged(store, dep, &Snapshot::default(), ran);
        let snap = serde_json::to_string(snap).unwrap();
        store
            .write(|tx| {
                tx.conn.execute(
                    "UPDATE deployment_states SET snapshot = NULL WHERE deployment = ?1",
                    [dep],
                )?;
                tx.stage_snapshot(1, dep, &snap)
            })
            .unwrap();
    }

    fn snap(nodes: &[&str]) -> Snapshot {
        Snapshot {
            common: serde_json::json!({"a": 1}),
            nodes: nodes
                .iter()
                .map(|n| {
                    let part = serde_json::json!({"uid": n});
                    (n.to_string(), crate::engine::graph::data::Part::of(&part))
                })
                .collect(),
        }
    }

    fn tasks(d: &Deployed) -> BTreeMap<(String, String), String> {
        d.tasks
            .iter()
            .flat_map(|(u, t)| {
                t.iter()
                    .map(move |(task, dep)| ((u.clone(), task.to_string()), dep.to_string()))
            })
            .collect()
    }

    /// A store with environment 1 and ready nodes `1..=n` in it.
    fn with_nodes(n: i64) -> (tempfile::TempDir, Store) {
        let (dir, store) = store_with_cluster();
        store
            .write(|tx| {
                for id in 1..=n {
                    tx.conn.execute(
                        "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at,
                           cluster_id)
                         VALUES (?1, printf('52:54:00:00:00:%02x', ?1), 'node-' || ?1, 'ready',
                           1, 1, 1)",
                        [id],
                    )?;
                }
                Ok(())
            })
            .unwrap();
        (dir, store)
    }

    #[test]
    fn a_successful_deployment_becomes_the_deployed_state_by_what_it_ran() {
        let (_dir, store) = with_nodes(2);
        staged(
            &store,
            1,
            &snap(&["1", "2"]),
            &[("1", "netconfig"), ("1", "puppet"), ("2", "netconfig")],
        );
        succeed(&store, 1);
        let d = store.read(|r| r.deployed(1)).unwrap();
        assert_eq!(d.deployments["1"], snap(&["1", "2"]));
        assert_eq!(tasks(&d).len(), 3);
        assert!(tasks(&d).values().all(|dep| dep == "1"));

        // A redeploy runs one task on node 1: only that task moves to deployment 2; the rest
        // still refer to deployment 1, whose snapshot stays.
        staged(&store, 2, &snap(&["1"]), &[("1", "puppet")]);
        succeed(&store, 2);
        let d = store.read(|r| r.deployed(1)).unwrap();
        assert_eq!(d.last_run("1", "puppet"), Some("2"));
        assert_eq!(d.last_run("1", "netconfig"), Some("1"));
        assert_eq!(d.last_run("2", "netconfig"), Some("1"));
        assert_eq!(d.deployments.keys().collect::<Vec<_>>(), vec!["1", "2"]);

        // Node 2 leaves; deployment 3 runs everything left on node 1: deployment 1's snapshot is
        // referred to by nothing and goes, and node 2 keeps nothing.
        store
            .write(|tx| {
                tx.conn
                    .execute("UPDATE nodes SET cluster_id = NULL WHERE id = 2", [])?;
                Ok(())
            })
            .unwrap();
        staged(&store, 3, &snap(&["1"]), &[("1", "netconfig")]);
        succeed(&store, 3);
        let d = store.read(|r| r.deployed(1)).unwrap();
        assert_eq!(
            tasks(&d),
            BTreeMap::from([
                (("1".into(), "netconfig".into()), "3".into()),
                (("1".into(), "puppet".into()), "2".into()),
            ])
        );
        assert_eq!(d.deployments.keys().collect::<Vec<_>>(), vec!["2", "3"]);
        // What creation wrote has served: nothing of it is kept twice, once pruned.
        assert_eq!(store.write(|tx| tx.prune_ran(2)).unwrap(), 2);
        assert_eq!(store.write(|tx| tx.prune_ran(100)).unwrap(), 3);
        assert_eq!(store.write(|tx| tx.prune_ran(100)).unwrap(), 0);
        let left: i64 = store
            .read(|r| {
                Ok(r.conn.query_row(
                    "SELECT (SELECT COUNT(*) FROM deployment_ran)
                          + (SELECT COUNT(*) FROM deployment_states WHERE snapshot IS NOT NULL)",
                    [],
                    |row| row.get(0),
                )?)
            })
            .unwrap();
        assert_eq!(left, 0);
    }

    /// A deployed snapshot that is not JSON text (a damaged file, a hand edit) is an error
    /// naming the environment and the deployment, not a panic or an empty state.
    #[test]
    fn a_damaged_snapshot_is_named() {
        let (_dir, store) = with_nodes(1);
        staged(&store, 1, &snap(&["1"]), &[("1", "netconfig")]);
        succeed(&store, 1);
        for (bad, says) in [
            ("CAST(X'7BFF00' AS TEXT)", "utf-8"),
            ("'{\"common\": '", "eof while parsing"),
        ] {
            store
                .write(|tx| {
                    tx.conn.execute(
                        &format!(
                            "UPDATE deployed_snapshots SET data = {bad} WHERE deployment = '1'"
                        ),
                        [],
                    )?;
                    Ok(())
                })
                .unwrap();
            let e = store.read(|r| r.deployed(1)).unwrap_err().to_string();
            assert!(
                e.contains("environment 1, deployment 1") && e.to_lowercase().contains(says),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_staged_snapshot_counts_once_its_deployment_succeeds_and_a_failed_ones_stays() {
        let (_dir, store) = with_nodes(1);
        started(
            &store,
            1,
            &snap(&["1"]),
            &[("1", "netconfig"), ("1", "puppet")],
        );
        let d = store.read(|r| r.deployed(1)).unwrap();
        assert_eq!(d, Deployed::default(), "running: nothing is deployed yet");
        succeed(&store, 1);
        let d = store.read(|r| r.deployed(1)).unwrap();
        assert_eq!(d.deployments["1"], snap(&["1"]));
        assert_eq!(d.last_run("1", "puppet"), Some("1"));

        // Deployment 2 fails (it may be retried); deployment 3, running meanwhile, succeeds and
        // takes every task: deployment 1's snapshot goes, 2's stays for its retry, unseen.
        started(&store, 2, &snap(&["1", "x"]), &[("1", "puppet")]);
        store
            .write(|tx| {
                tx.conn
                    .execute("UPDATE deployments SET status = 'error' WHERE id = 2", [])?;
                Ok(())
            })
            .unwrap();
        started(
            &store,
            3,
            &snap(&["1", "y"]),
            &[("1", "netconfig"), ("1", "puppet")],
        );
        succeed(&store, 3);
        let d = store.read(|r| r.deployed(1)).unwrap();
        assert_eq!(d.deployments.keys().collect::<Vec<_>>(), vec!["3"]);
        let stored: Vec<String> = store
            .read(|r| {
                let mut st = r
                    .conn
                    .prepare("SELECT deployment FROM deployed_snapshots ORDER BY deployment")?;
                let rows = st.query_map([], |row| row.get(0))?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .unwrap();
        assert_eq!(stored, vec!["2", "3"]);

        // Retried, deployment 2 succeeds: its snapshot counts for the task it ran (its list
        // of what it runs stayed with it, pruning took only the successful ones').
        assert_eq!(store.write(|tx| tx.prune_ran(100)).unwrap(), 4);
        succeed(&store, 2);
        let d = store.read(|r| r.deployed(1)).unwrap();
        assert_eq!(d.last_run("1", "puppet"), Some("2"));
        assert_eq!(d.deployments["2"], snap(&["1", "x"]));
        assert_eq!(d.deployments.keys().collect::<Vec<_>>(), vec!["2", "3"]);
    }
}
