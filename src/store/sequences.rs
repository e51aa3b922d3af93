//! Queries on `deployment_sequences`: Nailgun's deployment sequences, a release's named lists
//! of graphs to run one after another (`fuel2 sequence ...`). One name per release (a name
//! taken is a conflict); rows go with their release (foreign key). The graphs are checked
//! before they get here (`crate::sequences`) and kept as [`ChainGraph`]s.

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use super::{ChainGraph, ReadTxn, Result, StoreError, WriteTxn};

/// One sequence, as Nailgun's serializer shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sequence {
    pub id: i64,
    pub release_id: i64,
    pub name: String,
    pub graphs: Vec<ChainGraph>,
}

const COLUMNS: &str = "id, release_id, name, graphs";

fn sequence_from_row(r: &Row<'_>) -> rusqlite::Result<Sequence> {
    let graphs: String = r.get(3)?;
    Ok(Sequence {
        id: r.get(0)?,
        release_id: r.get(1)?,
        name: r.get(2)?,
        graphs: serde_json::from_str(&graphs).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, e.into())
        })?,
    })
}

fn json(graphs: &[ChainGraph]) -> Result<String> {
    serde_json::to_string(graphs).map_err(|e| StoreError::Corrupt {
        what: "deployment sequence",
        detail: e.to_string(),
    })
}

fn taken(name: &str, release: i64) -> StoreError {
    StoreError::Conflict(format!(
        "Sequence with name \"{name}\" already exist for release {release}."
    ))
}

impl ReadTxn<'_> {
    /// Every sequence, or release `release`'s, by id.
    pub fn sequences(&self, release: Option<i64>) -> Result<Vec<Sequence>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM deployment_sequences
             WHERE ?1 IS NULL OR release_id = ?1 ORDER BY id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([release], sequence_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn sequence(&self, id: i64) -> Result<Option<Sequence>> {
        let sql = format!("SELECT {COLUMNS} FROM deployment_sequences WHERE id = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([id], sequence_from_row)
            .optional()?)
    }

    /// Sequence `id`, or not found.
    pub fn existing_sequence(&self, id: i64) -> Result<Sequence> {
        self.sequence(id)?.ok_or_else(|| StoreError::NotFound {
            entity: "sequence",
            id: id.to_string(),
        })
    }

    fn sequence_named(&self, release: i64, name: &str) -> Result<Option<i64>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT id FROM deployment_sequences WHERE release_id = ?1 AND name = ?2",
            )?
            .query_row(params![release, name], |r| r.get(0))
            .optional()?)
    }
}

impl WriteTxn<'_> {
    /// Store a new sequence of release `release`: not found when there is no such release, a
    /// conflict when the release has a sequence of that name.
    pub fn create_sequence(
        &self,
        release: i64,
        name: &str,
        graphs: &[ChainGraph],
    ) -> Result<Sequence> {
        if self.read().release(release)?.is_none() {
            return Err(StoreError::NotFound {
                entity: "release",
                id: release.to_string(),
            });
        }
        if self.read().sequence_named(release, name)?.is_some() {
            return Err(taken(name, release));
        }
        let id = self.conn.query_row(
            "INSERT INTO deployment_sequences (release_id, name, graphs) VALUES (?1, ?2, ?3)
             RETURNING id",
            params![release, name, json(graphs)?],
            |r| r.get::<_, i64>(0),
        )?;
        self.read().existing_sequence(id)
    }

    /// Change sequence `id`'s name and/or graphs (what is given); not found when there is no
    /// such sequence, a conflict when the new name is another's of its release.
    pub fn update_sequence(
        &self,
        id: i64,
        name: Option<&str>,
        graphs: Option<&[ChainGraph]>,
    ) -> Result<Sequence> {
        let current = self.read().existing_sequence(id)?;
        if let Some(name) = name
            && self
                .read()
                .sequence_named(current.release_id, name)?
                .is_some_and(|other| other != id)
        {
            return Err(taken(name, current.release_id));
        }
        let graphs = graphs.map(json).transpose()?;
        self.conn.execute(
            "UPDATE deployment_sequences SET name = COALESCE(?2, name),
               graphs = COALESCE(?3, graphs) WHERE id = ?1",
            params![id, name, graphs],
        )?;
        self.read().existing_sequence(id)
    }

    /// Delete sequence `id`; not found when there is none.
    pub fn delete_sequence(&self, id: i64) -> Result<()> {
        let n = self
            .conn
            .execute("DELETE FROM deployment_sequences WHERE id = ?1", [id])?;
        if n == 0 {
            return Err(StoreError::NotFound {
                entity: "sequence",
                id: id.to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(t: &str) -> ChainGraph {
        ChainGraph {
            graph_type: t.into(),
            nodes: None,
        }
    }

    #[test]
    fn names_are_unique_per_release_and_rows_go_with_it() {
        let (_dir, store) = crate::store::testing::store_with_cluster();
        let s = store
            .write(|tx| tx.create_sequence(1, "upgrade", &[g("a"), g("b")]))
            .unwrap();
        assert_eq!((s.release_id, s.graphs.len()), (1, 2));
        let dup = store.write(|tx| tx.create_sequence(1, "upgrade", &[g("a")]));
        assert!(matches!(dup, Err(StoreError::Conflict(_))), "{dup:?}");
        let none = store.write(|tx| tx.create_sequence(9, "x", &[g("a")]));
        assert!(matches!(none, Err(StoreError::NotFound { .. })), "{none:?}");
        let other = store
            .write(|tx| tx.create_sequence(1, "other", &[g("c")]))
            .unwrap();
        let clash = store.write(|tx| tx.update_sequence(other.id, Some("upgrade"), None));
        assert!(matches!(clash, Err(StoreError::Conflict(_))), "{clash:?}");
        let same = store
            .write(|tx| tx.update_sequence(s.id, Some("upgrade"), Some(&[g("z")])))
            .unwrap();
        assert_eq!(same.graphs, [g("z")]);
        assert_eq!(store.read(|r| r.sequences(Some(1))).unwrap().len(), 2);
        assert_eq!(store.read(|r| r.sequences(Some(2))).unwrap().len(), 0);
        store.write(|tx| tx.delete_sequence(other.id)).unwrap();
        let gone = store.write(|tx| tx.delete_sequence(other.id));
        assert!(matches!(gone, Err(StoreError::NotFound { .. })), "{gone:?}");
        store
            .write(|tx| {
                tx.conn.execute("DELETE FROM clusters", [])?;
                tx.conn.execute("DELETE FROM releases WHERE id = 1", [])?;
                Ok(())
            })
            .unwrap();
        assert!(store.read(|r| r.sequences(None)).unwrap().is_empty());
    }
}
