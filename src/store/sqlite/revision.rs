//! The plan revision's triggers (`store::revision` says what the revision is): SQLite's
//! `CREATE TRIGGER`, made again at every open from the tables the database has and the list of
//! what is unwatched, so a table a later migration adds is watched without anyone remembering
//! to. An update bumps the revision only when a watched column really changed (`IS NOT`, which
//! treats NULLs as values).

use rusqlite::Connection;

use super::super::revision::UNWATCHED;
use super::super::{Result, StoreError};

/// Every trigger this module makes is named so.
const PREFIX: &str = "plan_rev_";

const BUMP: &str = "UPDATE plan_revision SET n = n + 1 WHERE id = 1;";

/// Drop this module's triggers and make them again, in one transaction.
pub(in crate::store) fn watch(conn: &mut Connection) -> Result<()> {
    let tx = conn.transaction()?;
    let old: Vec<String> = tx
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE ?1")?
        .query_map([format!("{PREFIX}%")], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for name in old {
        tx.execute_batch(&format!("DROP TRIGGER {}", quoted(&name)))?;
    }
    let tables: Vec<String> = tx
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE 'sqlite_%' AND name <> 'plan_revision' ORDER BY name",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for t in tables {
        if UNWATCHED.iter().any(|u| u.table == t && u.column.is_none()) {
            continue;
        }
        let columns: Vec<String> = tx
            .prepare("SELECT name FROM pragma_table_info(?1)")?
            .query_map([&t], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let watched: Vec<&String> = columns
            .iter()
            .filter(|c| {
                !UNWATCHED
                    .iter()
                    .any(|u| u.table == t && u.column == Some(c.as_str()))
            })
            .collect();
        if watched.is_empty() {
            return Err(StoreError::Corrupt {
                what: "plan revision",
                detail: format!("table {t} has no watched column left"),
            });
        }
        let name = |what: &str| quoted(&format!("{PREFIX}{t}_{what}"));
        let on = quoted(&t);
        let of = watched
            .iter()
            .map(|c| quoted(c))
            .collect::<Vec<_>>()
            .join(", ");
        let changed = watched
            .iter()
            .map(|c| format!("old.{0} IS NOT new.{0}", quoted(c)))
            .collect::<Vec<_>>()
            .join(" OR ");
        tx.execute_batch(&format!(
            "CREATE TRIGGER {} AFTER INSERT ON {on} BEGIN {BUMP} END;
             CREATE TRIGGER {} AFTER DELETE ON {on} BEGIN {BUMP} END;
             CREATE TRIGGER {} AFTER UPDATE OF {of} ON {on} WHEN {changed} BEGIN {BUMP} END;",
            name("insert"),
            name("delete"),
            name("update"),
        ))?;
    }
    tx.commit()?;
    Ok(())
}

/// An identifier, double-quoted as SQL quotes them.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
impl super::super::Store {
    /// Run `f` with every reader recording the `(table, column)` each statement it compiles
    /// reads (SQLite's authorizer, which sees a statement when it is prepared: the readers'
    /// kept statements are dropped first, so each is prepared again).
    pub(crate) fn reads_of<T>(
        &self,
        f: impl FnOnce() -> T,
    ) -> (T, std::collections::BTreeSet<(String, String)>) {
        use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
        use std::sync::{Arc, Mutex};
        let seen = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        for reader in &self.readers {
            let mut conn = Self::lock(reader);
            conn.flush_prepared_statement_cache();
            let seen = Arc::clone(&seen);
            conn.authorizer(Some(move |ctx: AuthContext<'_>| {
                if let AuthAction::Read {
                    table_name,
                    column_name,
                } = ctx.action
                {
                    seen.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert((table_name.to_string(), column_name.to_string()));
                }
                Authorization::Allow
            }))
            .expect("an authorizer is set");
        }
        let out = f();
        for reader in &self.readers {
            let mut conn = Self::lock(reader);
            conn.authorizer(None::<fn(AuthContext<'_>) -> Authorization>)
                .expect("the authorizer is removed");
            conn.flush_prepared_statement_cache();
        }
        let seen = seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        (out, seen)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::store_with_cluster;

    fn revision(store: &crate::store::Store) -> i64 {
        store.read(|r| r.plan_revision()).unwrap()
    }

    #[test]
    fn watched_changes_move_it_and_unwatched_or_no_op_ones_do_not() {
        let (_dir, store) = store_with_cluster();
        let write = |sql: &str| crate::store::testing::exec(&store, sql);
        write(
            "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at)
             VALUES (7, '52:54:00:00:00:07', 'node-7', 'discover', 1, 1)",
        );
        let at = revision(&store);
        // A node's last call, a lease, the activity feed: not plan inputs.
        write("UPDATE nodes SET last_seen_at = 99 WHERE id = 7");
        write(
            "INSERT INTO leases (ip, mac, expires_at, state) VALUES ('10.0.0.9', 'x', 5, 'bound')",
        );
        write("INSERT INTO history (at, node_id, kind, message) VALUES (1, 7, 'k', 'm')");
        // A watched column set to what it was.
        write("UPDATE nodes SET status = 'discover', roles = '[]' WHERE id = 7");
        assert_eq!(revision(&store), at);
        // Each real change moves it: an update, with an unwatched column beside it too.
        write("UPDATE nodes SET roles = '[\"compute\"]', last_seen_at = 100 WHERE id = 7");
        let after_roles = revision(&store);
        assert!(after_roles > at);
        write("UPDATE clusters SET settings = '{\"a\": 1}' WHERE id = 1");
        let after_settings = revision(&store);
        assert!(after_settings > after_roles);
        write("UPDATE nodes SET address = NULL WHERE id = 7");
        assert_eq!(
            revision(&store),
            after_settings,
            "NULL to NULL is no change"
        );
        write("UPDATE nodes SET address = '10.20.0.7' WHERE id = 7");
        let after_address = revision(&store);
        assert!(after_address > after_settings, "NULL to a value is one");
        write("DELETE FROM nodes WHERE id = 7");
        assert!(revision(&store) > after_address);
    }

    #[test]
    fn the_triggers_are_made_again_at_each_open_and_follow_new_tables() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = crate::store::Store::open(&path).unwrap();
        store
            .write(|tx| {
                tx.conn
                    .execute_batch("CREATE TABLE later (id INTEGER PRIMARY KEY, v TEXT)")?;
                Ok(())
            })
            .unwrap();
        drop(store);
        let store = crate::store::Store::open(&path).unwrap();
        let at = revision(&store);
        store
            .write(|tx| {
                tx.conn
                    .execute_batch("INSERT INTO later (v) VALUES ('x')")?;
                Ok(())
            })
            .unwrap();
        assert_eq!(revision(&store), at + 1);
        let triggers: i64 = store
            .read(|r| {
                Ok(r.conn.query_row(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'
                     AND name LIKE 'plan_rev_later_%'",
                    [],
                    |row| row.get(0),
                )?)
            })
            .unwrap();
        assert_eq!(triggers, 3);
    }
}
