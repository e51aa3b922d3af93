//! What an operator changes on nodes through Nailgun's node API: a node's name, host name and
//! labels (`PUT /nodes/{id}`), several nodes deleted at once (`DELETE /nodes/?ids=`), and a
//! node's uploaded documents (`node_documents`: its disks' layout, its VMs' configuration, its
//! attributes).
//! Nailgun's rules that need the other nodes (a host name unique in the environment, only a
//! node not yet provisioned renamed) are checked here, in the write's transaction.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};

use super::nodes::default_hostname;
use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::model::{Node, NodeId, NodeStatus};

/// A node's uploaded document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeDocument {
    /// Its volumes on its disks (Nailgun's `/nodes/{id}/disks`).
    Disks,
    /// Its virtual machines (Nailgun's `/nodes/{id}/vms_conf`).
    VmsConf,
    /// Its attributes' values (Nailgun's `/nodes/{id}/attributes`; `crate::node_attributes`).
    Attributes,
}

impl NodeDocument {
    fn kind(self) -> &'static str {
        match self {
            NodeDocument::Disks => "disks",
            NodeDocument::VmsConf => "vms_conf",
            NodeDocument::Attributes => "attributes",
        }
    }
}

/// The fields of `PUT /nodes/{id}` stoker honours; `None` leaves one as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeEdit {
    pub name: Option<String>,
    pub hostname: Option<String>,
    pub labels: Option<BTreeMap<String, Option<String>>>,
}

impl ReadTxn<'_> {
    /// Node `id`'s uploaded document of `kind`, if any.
    pub fn node_document(
        &self,
        id: NodeId,
        kind: NodeDocument,
    ) -> Result<Option<serde_json::Value>> {
        let body: Option<String> = self
            .conn
            .prepare_cached("SELECT body FROM node_documents WHERE node_id = ?1 AND kind = ?2")?
            .query_row(params![id, kind.kind()], |r| r.get(0))
            .optional()?;
        body.map(|b| {
            serde_json::from_str(&b).map_err(|e| StoreError::Corrupt {
                what: "node document",
                detail: format!("node {id} {}: {e}", kind.kind()),
            })
        })
        .transpose()
    }

    /// The documents of kind `kind` of environment `cluster`'s nodes, by node.
    pub fn node_documents(
        &self,
        cluster: i64,
        kind: NodeDocument,
    ) -> Result<std::collections::HashMap<NodeId, serde_json::Value>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT d.node_id, d.body FROM node_documents d JOIN nodes n ON n.id = d.node_id
             WHERE n.cluster_id = ?1 AND d.kind = ?2",
        )?;
        let rows = stmt.query_map(params![cluster, kind.kind()], |r| {
            Ok((r.get::<_, NodeId>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = std::collections::HashMap::new();
        for row in rows {
            let (id, body) = row?;
            let v = serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                what: "node document",
                detail: format!("node {id} {}: {e}", kind.kind()),
            })?;
            out.insert(id, v);
        }
        Ok(out)
    }

    /// The nodes in environment `cluster` (`None`: in none), for host name uniqueness.
    fn nodes_in(&self, cluster: Option<i64>) -> Result<Vec<Node>> {
        match cluster {
            Some(c) => self.cluster_nodes(c),
            None => Ok(self
                .nodes()?
                .into_iter()
                .filter(|n| n.cluster_id.is_none())
                .collect()),
        }
    }
}

impl WriteTxn<'_> {
    /// Apply an operator's edit to node `id`, as Nailgun's `NodeValidator.validate_update`
    /// allows it: a new host name only while the node is in `discover` (its installed OS has
    /// the old one) and unique among the nodes of its environment (or of no environment).
    /// Nothing is written when a rule refuses.
    pub fn edit_node(&self, id: NodeId, edit: &NodeEdit, now: i64) -> Result<Node> {
        let node = self.read().existing_node(id)?;
        if let Some(hostname) = &edit.hostname
            && *hostname != node.hostname
        {
            if node.status != NodeStatus::Discover {
                return Err(StoreError::Conflict(format!(
                    "node {id}'s hostname may be changed only before provisioning (it is {})",
                    node.status
                )));
            }
            if let Some(other) = self
                .read()
                .nodes_in(node.cluster_id)?
                .iter()
                .find(|n| n.id != id && n.hostname == *hostname)
            {
                return Err(StoreError::Conflict(format!(
                    "duplicate hostname {hostname:?}: node {} has it",
                    other.id
                )));
            }
            let stored = (*hostname != default_hostname(id)).then_some(hostname.as_str());
            self.conn.execute(
                "UPDATE nodes SET hostname = ?1 WHERE id = ?2",
                params![stored, id],
            )?;
            self.add_history(
                now,
                Some(id),
                "node.hostname",
                &format!("hostname {} → {hostname}", node.hostname),
            )?;
        }
        if let Some(name) = &edit.name
            && *name != node.name
        {
            self.conn.execute(
                "UPDATE nodes SET name = ?1 WHERE id = ?2",
                params![name, id],
            )?;
            self.add_history(
                now,
                Some(id),
                "node.renamed",
                &format!("{} renamed {name}", node.name),
            )?;
        }
        if let Some(labels) = &edit.labels {
            let json = serde_json::to_string(labels).map_err(|e| StoreError::Corrupt {
                what: "node labels",
                detail: e.to_string(),
            })?;
            self.conn.execute(
                "UPDATE nodes SET labels = ?1 WHERE id = ?2",
                params![json, id],
            )?;
        }
        self.read().existing_node(id)
    }

    /// Delete nodes `ids` together (Nailgun's `DELETE /nodes/?ids=`): every one must exist
    /// (not found names the missing ones) and be deletable as [`WriteTxn::delete_node`] says
    /// (a conflict names each node in an environment); nothing is deleted otherwise.
    pub fn delete_nodes(&self, ids: &[NodeId], now: i64) -> Result<Vec<Node>> {
        let mut missing = Vec::new();
        let mut assigned = Vec::new();
        for id in ids {
            match self.read().node(*id)? {
                None => missing.push(id.to_string()),
                Some(n) => {
                    if let Some(c) = n.cluster_id {
                        assigned.push(format!("{id} (environment {c})"));
                    }
                }
            }
        }
        if !missing.is_empty() {
            return Err(StoreError::NotFound {
                entity: "nodes",
                id: missing.join(", "),
            });
        }
        if !assigned.is_empty() {
            return Err(StoreError::Conflict(format!(
                "nodes {} are in an environment; remove them from it first",
                assigned.join(", ")
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        ids.iter()
            .filter(|id| seen.insert(**id))
            .map(|id| self.delete_node(*id, now))
            .collect()
    }

    /// Store node `id`'s document of `kind` (`None`: drop it, back to the defaults).
    pub fn set_node_document(
        &self,
        id: NodeId,
        kind: NodeDocument,
        body: Option<&serde_json::Value>,
    ) -> Result<()> {
        match body {
            None => {
                self.conn.execute(
                    "DELETE FROM node_documents WHERE node_id = ?1 AND kind = ?2",
                    params![id, kind.kind()],
                )?;
            }
            Some(body) => {
                self.conn.execute(
                    "INSERT INTO node_documents (node_id, kind, body) VALUES (?1, ?2, ?3)
                     ON CONFLICT(node_id, kind) DO UPDATE SET body = excluded.body",
                    params![id, kind.kind(), body.to_string()],
                )?;
            }
        }
        Ok(())
    }
}
