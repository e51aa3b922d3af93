//! Queries on `history`: the append-only log of what happened to the master and its nodes,
//! shown on the Overview page and, later, on each node's page.

use rusqlite::params;

use super::{ReadTxn, Result, WriteTxn};
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
        Ok(())
    }
}
