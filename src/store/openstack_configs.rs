//! Queries on `openstack_configs`: Nailgun's OpenStack configuration overrides of an
//! environment, one of its roles or one of its nodes. A new one for a scope makes that scope's
//! active one inactive in the same write, and deleting one only makes it inactive, so the
//! history of a scope stays readable (`is_active` false). The rules (what may be stored, who
//! may see it, how they merge into a node's deployment data) are `crate::openstack_config`'s.

use rusqlite::{OptionalExtension, params};
use serde_json::Value as J;

use super::{ReadTxn, Result, StoreError, WriteTxn};

/// What a configuration applies to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum ConfigScope {
    /// Every node of the environment.
    Cluster,
    /// The nodes holding a role.
    Role(String),
    /// One node.
    Node(i64),
}

impl ConfigScope {
    /// Nailgun's `config_type`.
    pub fn config_type(&self) -> &'static str {
        match self {
            ConfigScope::Cluster => "cluster",
            ConfigScope::Role(_) => "role",
            ConfigScope::Node(_) => "node",
        }
    }
}

/// One stored configuration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OpenstackConfig {
    pub id: i64,
    pub cluster_id: i64,
    /// The node of a node configuration (None once that node was deleted).
    pub node_id: Option<i64>,
    /// The role of a role configuration.
    pub node_role: Option<String>,
    /// `cluster`, `role` or `node`.
    pub config_type: String,
    pub is_active: bool,
    /// Unix seconds.
    pub created_at: i64,
    /// A JSON object.
    pub configuration: J,
}

const COLUMNS: &str =
    "id, cluster_id, node_id, node_role, config_type, is_active, created_at, configuration";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(OpenstackConfig, String)> {
    Ok((
        OpenstackConfig {
            id: r.get(0)?,
            cluster_id: r.get(1)?,
            node_id: r.get(2)?,
            node_role: r.get(3)?,
            config_type: r.get(4)?,
            is_active: r.get::<_, i64>(5)? == 1,
            created_at: r.get(6)?,
            configuration: J::Null,
        },
        r.get(7)?,
    ))
}

fn decode((mut c, text): (OpenstackConfig, String)) -> Result<OpenstackConfig> {
    c.configuration = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
        what: "OpenStack configuration",
        detail: format!("{}: {e}", c.id),
    })?;
    Ok(c)
}

impl ReadTxn<'_> {
    /// Environment `cluster_id`'s configurations (only the active ones, or only the inactive
    /// ones, or all with `None`), oldest first.
    pub fn openstack_configs(
        &self,
        cluster_id: i64,
        active: Option<bool>,
    ) -> Result<Vec<OpenstackConfig>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM openstack_configs
             WHERE cluster_id = ?1 AND (?2 IS NULL OR is_active = ?2)
             ORDER BY created_at, id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![cluster_id, active.map(i64::from)], from_row)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(decode(row?)?);
        }
        Ok(out)
    }

    /// One configuration, active or not.
    pub fn openstack_config(&self, id: i64) -> Result<Option<OpenstackConfig>> {
        let sql = format!("SELECT {COLUMNS} FROM openstack_configs WHERE id = ?1");
        self.conn
            .prepare_cached(&sql)?
            .query_row([id], from_row)
            .optional()?
            .map(decode)
            .transpose()
    }
}

impl WriteTxn<'_> {
    /// Store `configuration` (a JSON object) as environment `cluster_id`'s active one for
    /// `scope`, the one active there until now made inactive (Nailgun's
    /// `OpenstackConfig.create`). Its id.
    pub fn add_openstack_config(
        &self,
        cluster_id: i64,
        scope: &ConfigScope,
        configuration: &J,
        now: i64,
    ) -> Result<i64> {
        let (node_id, node_role) = match scope {
            ConfigScope::Cluster => (None, None),
            ConfigScope::Role(r) => (None, Some(r.as_str())),
            ConfigScope::Node(n) => (Some(*n), None),
        };
        let config_type = scope.config_type();
        self.conn.execute(
            "UPDATE openstack_configs SET is_active = 0
             WHERE cluster_id = ?1 AND config_type = ?2 AND is_active = 1
               AND node_id IS ?3 AND node_role IS ?4",
            params![cluster_id, config_type, node_id, node_role],
        )?;
        let inserted_id = self.conn.query_row(
            "INSERT INTO openstack_configs (cluster_id, node_id, node_role, config_type,
               is_active, created_at, configuration)
             VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6)
             RETURNING id",
            params![
                cluster_id,
                node_id,
                node_role,
                config_type,
                now,
                configuration.to_string()
            ],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(inserted_id)
    }

    /// Make configuration `id` inactive; false when it was not active.
    pub fn deactivate_openstack_config(&self, id: i64) -> Result<bool> {
        Ok(self.conn.execute(
            "UPDATE openstack_configs SET is_active = 0 WHERE id = ?1 AND is_active = 1",
            [id],
        )? == 1)
    }

    /// A node leaving its environment: its own configurations go inactive (Nailgun's
    /// `disable_by_nodes`).
    pub(super) fn deactivate_node_openstack_configs(&self, node_id: i64) -> Result<()> {
        self.conn.execute(
            "UPDATE openstack_configs SET is_active = 0
             WHERE node_id = ?1 AND config_type = 'node' AND is_active = 1",
            [node_id],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::store_with_cluster;
    use serde_json::json;

    #[test]
    fn a_new_configuration_replaces_its_scopes_active_one_only() {
        let (_dir, store) = store_with_cluster();
        let ids = store
            .write(|tx| {
                let a = tx.add_openstack_config(1, &ConfigScope::Cluster, &json!({"a": 1}), 10)?;
                let r = tx.add_openstack_config(
                    1,
                    &ConfigScope::Role("controller".into()),
                    &json!({"r": 1}),
                    11,
                )?;
                let b = tx.add_openstack_config(1, &ConfigScope::Cluster, &json!({"b": 2}), 12)?;
                Ok((a, r, b))
            })
            .unwrap();
        let active = store.read(|r| r.openstack_configs(1, Some(true))).unwrap();
        assert_eq!(
            active.iter().map(|c| c.id).collect::<Vec<_>>(),
            [ids.1, ids.2]
        );
        let old = store.read(|r| r.openstack_config(ids.0)).unwrap().unwrap();
        assert!(!old.is_active);
        assert_eq!(old.configuration, json!({"a": 1}));
        assert!(
            store
                .write(|tx| tx.deactivate_openstack_config(ids.1))
                .unwrap()
        );
        assert!(
            !store
                .write(|tx| tx.deactivate_openstack_config(ids.1))
                .unwrap()
        );
        assert_eq!(
            store.read(|r| r.openstack_configs(1, None)).unwrap().len(),
            3
        );
    }
}
