//! Ids that are never used twice: an environment's, and a transaction's (deployments and the
//! master's tasks share one space). SQLite's `INTEGER PRIMARY KEY` gives a deleted row's id
//! to the next insert when it was the highest, so an old activity line, a Fuel client or a log
//! naming "environment 3" would then name another one. The highest id ever taken is kept in
//! `settings` (`clusters.last_id`, `transactions.last_id`, from migration 26) and each new one
//! is above it and above every row there is. Nodes keep theirs the same way
//! (`nodes.deleted_max_id`, see `nodes.rs`).

use rusqlite::params;

use super::{Result, WriteTxn};

/// One id space: the key of its high-water mark and the tables whose ids are in it.
pub(super) struct Space {
    key: &'static str,
    tables: &'static [&'static str],
}

pub(super) const CLUSTERS: Space = Space {
    key: "clusters.last_id",
    tables: &["clusters"],
};

pub(super) const TRANSACTIONS: Space = Space {
    key: "transactions.last_id",
    tables: &["deployments", "master_tasks"],
};

impl WriteTxn<'_> {
    /// The next id of `space`, taken: above every id it has held, the mark raised to it.
    pub(super) fn take_id(&self, space: &Space) -> Result<i64> {
        let highest = space
            .tables
            .iter()
            .map(|t| format!("COALESCE((SELECT MAX(id) FROM {t}), 0)"))
            .chain(std::iter::once(
                "COALESCE((SELECT CAST(value AS INTEGER) FROM settings WHERE key = ?1), 0)"
                    .to_string(),
            ))
            .collect::<Vec<_>>()
            .join(", ");
        let id: i64 = self
            .conn
            .prepare_cached(&format!("SELECT MAX({highest}) + 1"))?
            .query_row([space.key], |r| r.get(0))?;
        self.conn
            .prepare_cached(
                "INSERT INTO settings (key, value) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![space.key, id.to_string()])?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::store_with_cluster;

    #[test]
    fn the_newest_deleted_id_is_not_taken_again() {
        let (_dir, store) = store_with_cluster();
        store
            .write(|tx| {
                let b = tx.create_cluster("b", 1, "vlan", 10)?;
                assert_eq!(b.id, 2);
                tx.delete_cluster(b.id, 11)?;
                let c = tx.create_cluster("c", 1, "vlan", 12)?;
                assert_eq!(c.id, 3, "environment 2 was deleted; its id stays unused");

                let d = tx.insert_deployment(
                    c.id,
                    "done",
                    Some(13),
                    "deployment",
                    "default",
                    None,
                    13,
                )?;
                tx.delete_deployment(d, 14)?;
                let task = tx.start_master_task("dump", 1, 15)?;
                assert_eq!(task.id, d + 1, "one id space, the deleted one skipped");
                let e = tx.insert_deployment(
                    c.id,
                    "done",
                    Some(16),
                    "deployment",
                    "default",
                    None,
                    16,
                )?;
                assert_eq!(e, d + 2);
                // A deployment that goes with its environment takes its id along too.
                tx.delete_cluster(c.id, 17)?;
                let f = tx.create_cluster("f", 1, "vlan", 18)?;
                assert_eq!(f.id, 4);
                let g = tx.insert_deployment(
                    f.id,
                    "done",
                    Some(19),
                    "deployment",
                    "default",
                    None,
                    19,
                )?;
                assert_eq!(g, e + 1);
                Ok(())
            })
            .unwrap();
    }
}
