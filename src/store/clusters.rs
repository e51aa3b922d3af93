//! Queries on `clusters` (environments). Creating one needs a deployable release: with none
//! installed the refusal says how to get one, the message every surface shows.

use rusqlite::{OptionalExtension, Row, params};

use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::model::Cluster;

/// What an operator reads when no release is installed, wherever they try to create an
/// environment.
pub const NO_RELEASE_MESSAGE: &str = "no release is installed, so no environment can be created; \
     install a release plugin with `stoker plugin install FILE|DIR`, or put back the bundled \
     one with `stoker plugin install --bundled`";

const COLUMNS: &str = "id, name, release_id, status, net_segment_type, created_at";

fn cluster_from_row(row: &Row<'_>) -> rusqlite::Result<Cluster> {
    Ok(Cluster {
        id: row.get(0)?,
        name: row.get(1)?,
        release_id: row.get(2)?,
        status: row.get(3)?,
        net_segment_type: row.get(4)?,
        created_at: row.get(5)?,
    })
}

impl ReadTxn<'_> {
    pub fn clusters(&self) -> Result<Vec<Cluster>> {
        let sql = format!("SELECT {COLUMNS} FROM clusters ORDER BY id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], cluster_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn cluster(&self, id: i64) -> Result<Option<Cluster>> {
        let sql = format!("SELECT {COLUMNS} FROM clusters WHERE id = ?1");
        Ok(self
            .conn
            .query_row(&sql, [id], cluster_from_row)
            .optional()?)
    }
}

impl WriteTxn<'_> {
    /// Create an environment from a release.
    pub fn create_cluster(
        &self,
        name: &str,
        release_id: i64,
        net_segment_type: &str,
        now: i64,
    ) -> Result<Cluster> {
        let read = self.read();
        if read.releases()?.is_empty() {
            return Err(StoreError::NoRelease);
        }
        let release = read
            .release(release_id)?
            .ok_or_else(|| StoreError::NotFound {
                entity: "release",
                id: release_id.to_string(),
            })?;
        if !release.is_deployable() {
            return Err(StoreError::Conflict(format!(
                "release {} ({}) is {} and cannot be deployed",
                release.name, release.id, release.state
            )));
        }
        let taken: Option<i64> = self
            .conn
            .query_row("SELECT id FROM clusters WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(id) = taken {
            return Err(StoreError::Conflict(format!(
                "an environment named {name:?} already exists (id {id})"
            )));
        }
        self.conn.execute(
            "INSERT INTO clusters (name, release_id, status, net_segment_type, created_at)
             VALUES (?1, ?2, 'new', ?3, ?4)",
            params![name, release_id, net_segment_type, now],
        )?;
        let id = self.conn.last_insert_rowid();
        self.add_history(
            now,
            None,
            "cluster.created",
            &format!("created environment {name} from {}", release.name),
        )?;
        let sql = format!("SELECT {COLUMNS} FROM clusters WHERE id = ?1");
        Ok(self.conn.query_row(&sql, [id], cluster_from_row)?)
    }
}
