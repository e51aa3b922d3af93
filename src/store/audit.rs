//! Queries on `audit`: every state-changing request, with who made it (user and role, or
//! `anonymous`), from where, what (method and path) and the answer's status. Kept for
//! `audit.retention_days` and shown on the Audit page and at `GET /api/v1/audit`.

use rusqlite::params;
use serde::Serialize;

use super::{ReadTxn, Result, WriteTxn};

/// One audited request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    /// The user, or `anonymous`.
    pub actor: String,
    /// The caller's role, or `none`.
    pub role: String,
    /// The client's address.
    pub source: String,
    pub method: String,
    pub path: String,
    pub status: u16,
    /// Why it was refused, or what it did, when the edge knows.
    pub detail: String,
}

impl ReadTxn<'_> {
    /// The newest `limit` entries older than `before` (an id; `None`: the newest), newest first.
    pub fn audit(&self, limit: u32, before: Option<i64>) -> Result<Vec<AuditEntry>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, at, actor, role, source, method, path, status, detail FROM audit
             WHERE ?1 IS NULL OR id < ?1 ORDER BY id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![before, limit], |r| {
            Ok(AuditEntry {
                id: r.get(0)?,
                at: r.get(1)?,
                actor: r.get(2)?,
                role: r.get(3)?,
                source: r.get(4)?,
                method: r.get(5)?,
                path: r.get(6)?,
                status: r.get(7)?,
                detail: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

impl WriteTxn<'_> {
    /// Record one request (the entry's `id` is ignored).
    pub fn add_audit(&self, e: &AuditEntry) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO audit (at, actor, role, source, method, path, status, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                e.at, e.actor, e.role, e.source, e.method, e.path, e.status, e.detail
            ])?;
        self.emit(crate::events::Change::Audit {
            at: e.at,
            actor: e.actor.clone(),
            method: e.method.clone(),
            path: e.path.clone(),
            status: e.status,
        });
        Ok(())
    }

    /// Forget entries from before `before`.
    pub fn prune_audit(&self, before: i64) -> Result<usize> {
        Ok(self
            .conn
            .execute("DELETE FROM audit WHERE at < ?1", [before])?)
    }
}
