//! Queries on `history`: the append-only log of what happened to the master and its nodes,
//! shown on the Overview page and, a node's own, on the node's page.

use rusqlite::{OptionalExtension, params};

use super::{ReadTxn, Result, WriteTxn};
use crate::events::Change;
use crate::model::NodeId;

/// One line of history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HistoryEntry {
    pub at: i64,
    pub node_id: Option<NodeId>,
    pub kind: String,
    pub message: String,
}

impl ReadTxn<'_> {
    /// The newest `limit` entries, newest first.
    pub fn recent_history(&self, limit: u32) -> Result<Vec<HistoryEntry>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT at, node_id, kind, message FROM history ORDER BY id DESC LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit], |r| {
            Ok(HistoryEntry {
                at: r.get(0)?,
                node_id: r.get(1)?,
                kind: r.get(2)?,
                message: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The newest `limit` entries about `node`, newest first.
    pub fn node_history(&self, node: NodeId, limit: u32) -> Result<Vec<HistoryEntry>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT at, node_id, kind, message FROM history WHERE node_id = ?1
             ORDER BY at DESC, id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![node, limit], |r| {
            Ok(HistoryEntry {
                at: r.get(0)?,
                node_id: r.get(1)?,
                kind: r.get(2)?,
                message: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

impl WriteTxn<'_> {
    pub fn add_history(
        &self,
        at: i64,
        node_id: Option<NodeId>,
        kind: &str,
        message: &str,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO history (at, node_id, kind, message) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![at, node_id, kind, message])?;
        // Whatever happens to a node is a line of its history: its listeners hear of it too,
        // with where it stands now.
        if let Some(id) = node_id {
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
            node: node_id,
            what: kind.to_string(),
            message: message.to_string(),
        });
        Ok(())
    }
}
