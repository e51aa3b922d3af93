//! Queries on `history`: the append-only log of what happened to the master and its nodes,
//! shown on the Overview page and, a node's own, on the node's page. A line names what it is about: its node,
//! environment and deployment (any of them), each a link while it exists; a deleted one
//! leaves its link empty (`ON DELETE SET NULL`) and its name in the message, and since no id is
//! ever reused (`ids.rs`) an old line never points at a newer object.

use rusqlite::{OptionalExtension, params};

use super::{ReadTxn, Result, WriteTxn};
use crate::events::Change;
use crate::model::NodeId;

/// One line of history, with the current names of what it is about.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HistoryEntry {
    pub at: i64,
    pub node_id: Option<NodeId>,
    pub kind: String,
    pub message: String,
    /// The node's name now, while it exists.
    pub node_name: Option<String>,
    pub cluster_id: Option<i64>,
    /// The environment's name now, while it exists.
    pub cluster_name: Option<String>,
    pub deployment_id: Option<i64>,
}

/// What a line of history is about. A node alone stands for its environment at that moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct About {
    pub node: Option<NodeId>,
    pub cluster: Option<i64>,
    /// A deployment (or another transaction) that exists; its environment is the line's when
    /// `cluster` is not given.
    pub deployment: Option<i64>,
}

impl About {
    pub fn node(id: NodeId) -> About {
        About {
            node: Some(id),
            ..About::default()
        }
    }

    pub fn cluster(id: i64) -> About {
        About {
            cluster: Some(id),
            ..About::default()
        }
    }

    pub fn deployment(id: i64) -> About {
        About {
            deployment: Some(id),
            ..About::default()
        }
    }

    /// The same, about node `id` too.
    pub fn and_node(self, id: NodeId) -> About {
        About {
            node: Some(id),
            ..self
        }
    }
}

const COLUMNS: &str = "h.at, h.node_id, h.kind, h.message, n.name, h.cluster_id, c.name,
    h.deployment_id";

const FROM: &str = "history h LEFT JOIN nodes n ON n.id = h.node_id
    LEFT JOIN clusters c ON c.id = h.cluster_id";

fn entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<HistoryEntry> {
    Ok(HistoryEntry {
        at: r.get(0)?,
        node_id: r.get(1)?,
        kind: r.get(2)?,
        message: r.get(3)?,
        node_name: r.get(4)?,
        cluster_id: r.get(5)?,
        cluster_name: r.get(6)?,
        deployment_id: r.get(7)?,
    })
}

impl ReadTxn<'_> {
    /// The newest `limit` entries, newest first.
    pub fn recent_history(&self, limit: u32) -> Result<Vec<HistoryEntry>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM {FROM} ORDER BY h.id DESC LIMIT ?1"
        ))?;
        let rows = stmt.query_map([limit], entry)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The newest `limit` entries about `node`, newest first.
    pub fn node_history(&self, node: NodeId, limit: u32) -> Result<Vec<HistoryEntry>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM {FROM} WHERE h.node_id = ?1
             ORDER BY h.at DESC, h.id DESC LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![node, limit], entry)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

impl WriteTxn<'_> {
    /// A line about node `node_id` (and so its environment now), or about the master.
    pub fn add_history(
        &self,
        at: i64,
        node_id: Option<NodeId>,
        kind: &str,
        message: &str,
    ) -> Result<()> {
        self.add_event(
            at,
            About {
                node: node_id,
                ..About::default()
            },
            kind,
            message,
        )
    }

    /// A line about what `about` names; an environment not given is the deployment's, else
    /// the node's.
    pub fn add_event(&self, at: i64, about: About, kind: &str, message: &str) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO history (at, node_id, cluster_id, deployment_id, kind, message)
                 VALUES (?1, ?2, coalesce(?3, (SELECT cluster_id FROM deployments WHERE id = ?4),
                                          (SELECT cluster_id FROM nodes WHERE id = ?2)),
                         ?4, ?5, ?6)",
            )?
            .execute(params![
                at,
                about.node,
                about.cluster,
                about.deployment,
                kind,
                message
            ])?;
        // Whatever happens to a node is a line of its history: its listeners hear of it too,
        // with where it stands now.
        if let Some(id) = about.node {
            let now: Option<(String, Option<i64>)> = self
                .conn
                .prepare_cached("SELECT status, cluster_id FROM nodes WHERE id = ?1")?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let (status, cluster) = now.map_or((None, None), |(s, c)| (Some(s), c));
            self.emit(Change::Node {
                id,
                what: kind.to_string(),
                status,
                cluster,
            });
        }
        self.emit(Change::Activity {
            at,
            node: about.node,
            what: kind.to_string(),
            message: message.to_string(),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::state::NodeState;
    use crate::model::NodeStatus;

    /// A node's status line links the deployment that moved it, beside the node and its
    /// environment; a move by no deployment links none.
    #[test]
    fn a_status_line_links_the_deployment_that_moved_the_node() {
        let (_dir, store) = crate::store::testing::store_with_cluster();
        store
            .write(|tx| {
                tx.conn.execute_batch(
                    "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at,
                       cluster_id) VALUES (3, '52:54:00:00:00:03', 'node-3', 'discover', 1, 1, 1);
                     INSERT INTO deployments (id, cluster_id, status, created_at, name,
                       graph_type) VALUES (5, 1, 'done', 1, 'deployment', 'default'),
                                          (6, 1, 'running', 2, 'deployment', 'default');",
                )?;
                tx.move_node(3, Some(6), 10, |_| {
                    Ok(NodeState::of(NodeStatus::Provisioning, false, None))
                })?;
                tx.move_node(3, None, 11, |_| {
                    Ok(NodeState::of(NodeStatus::Ready, false, None))
                })?;
                Ok(())
            })
            .unwrap();
        let lines = store.read(|r| r.node_history(3, 10)).unwrap();
        let status: Vec<(Option<i64>, Option<i64>, Option<i64>)> = lines
            .iter()
            .filter(|l| l.kind == "node.status")
            .map(|l| (l.node_id, l.cluster_id, l.deployment_id))
            .collect();
        assert_eq!(
            status,
            [(Some(3), Some(1), None), (Some(3), Some(1), Some(6))],
            "newest first: {lines:?}"
        );
    }
}
