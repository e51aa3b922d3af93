//! Deployment and provisioning facts an operator uploaded (`fuel2 env deployment-facts|
//! provisioning-facts upload`): per environment and kind, the common part (uid `common`) and
//! each node's, replaced whole by an upload and cleared by a delete. A node that leaves its
//! environment loses its own (as Nailgun's node loses its `replaced_*_info`).

use std::collections::BTreeMap;

use rusqlite::params;
use serde_json::Value as J;

use super::{ReadTxn, Result, StoreError, WriteTxn};

/// Which facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactsKind {
    Deployment,
    Provisioning,
}

impl FactsKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FactsKind::Deployment => "deployment",
            FactsKind::Provisioning => "provisioning",
        }
    }
}

/// The uid of the common part.
pub const COMMON: &str = "common";

impl ReadTxn<'_> {
    /// The facts of `kind` uploaded for environment `cluster_id`, by uid (`common` and node
    /// ids), only those of nodes still in it.
    pub fn uploaded_facts(&self, cluster_id: i64, kind: FactsKind) -> Result<BTreeMap<String, J>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT uid, body FROM facts_overrides
             WHERE cluster_id = ?1 AND kind = ?2 AND (uid = 'common' OR uid IN
               (SELECT CAST(id AS TEXT) FROM nodes WHERE cluster_id = ?1))",
        )?;
        let rows = stmt.query_map(params![cluster_id, kind.as_str()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (uid, body) = row?;
            let v = serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                what: "uploaded facts",
                detail: format!("environment {cluster_id}, {uid}: {e}"),
            })?;
            out.insert(uid, v);
        }
        Ok(out)
    }
}

impl WriteTxn<'_> {
    /// Replace environment `cluster_id`'s uploaded facts of `kind` with `facts` (by uid;
    /// empty: none).
    pub fn set_uploaded_facts(
        &self,
        cluster_id: i64,
        kind: FactsKind,
        facts: &BTreeMap<String, J>,
    ) -> Result<()> {
        self.read().existing_cluster(cluster_id)?;
        self.conn.execute(
            "DELETE FROM facts_overrides WHERE cluster_id = ?1 AND kind = ?2",
            params![cluster_id, kind.as_str()],
        )?;
        for (uid, body) in facts {
            self.conn.execute(
                "INSERT INTO facts_overrides (cluster_id, kind, uid, body) VALUES (?1, ?2, ?3, ?4)",
                params![cluster_id, kind.as_str(), uid, body.to_string()],
            )?;
        }
        Ok(())
    }

    /// A node left environment `cluster_id`: its uploaded facts go.
    pub(super) fn forget_node_facts(&self, cluster_id: i64, node_id: i64) -> Result<()> {
        self.conn.execute(
            "DELETE FROM facts_overrides WHERE cluster_id = ?1 AND uid = ?2",
            params![cluster_id, node_id.to_string()],
        )?;
        Ok(())
    }
}
