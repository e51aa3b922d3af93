//! What only SQLite has, in one place: opening a connection and its PRAGMAs (WAL, foreign
//! keys, `synchronous`), the transaction modes and savepoints the writer uses, the background
//! WAL checkpoint (`checkpoint.rs`), the online backup API and the checks a copy must pass
//! (`backup.rs`), the blanked copy a diagnostic snapshot carries through `VACUUM INTO`
//! (`dump.rs`), the `fdatasync` of the WAL that makes a commit survive a power loss
//! (`durable.rs`), the triggers that keep the plan revision (`revision.rs`), and the JSON
//! functions some queries use. The queries in the rest of
//! `crate::store` are SQL that PostgreSQL would also read (`INSERT … RETURNING id`, `ON
//! CONFLICT … DO UPDATE`, `COALESCE`); `tests/tidy.rs` fails on a SQLite-only construct
//! outside this module and the migrations. A second backend (`docs/scale-out.md`, section 5)
//! starts by writing its own version of this module.

pub mod backup;
mod checkpoint;
mod dump;
mod durable;
pub(in crate::store) mod revision;

use std::path::Path;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

pub(in crate::store) use checkpoint::Checkpointer;
pub use durable::WalSync;

use super::{Result, StoreError};

/// Prepared statements kept per connection. rusqlite keeps 16 by default, fewer than the
/// statements of one agent call's path (token, claim, report, history, savepoints), so they
/// pushed each other out and were compiled again on every call (13% of the writer's time).
const STATEMENT_CACHE: usize = 128;

/// What every connection sets: its statement cache, a busy timeout, foreign keys on, and
/// `synchronous = NORMAL` (with WAL, a commit survives a crash of the process; what must
/// survive a power loss syncs the WAL itself).
fn configure(conn: &Connection, path: &Path) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let setup = || -> rusqlite::Result<()> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "foreign_keys", true)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(())
    };
    setup().map_err(|source| open_error(path, source))
}

fn open_error(path: &Path, source: rusqlite::Error) -> StoreError {
    StoreError::Open {
        path: path.to_path_buf(),
        source,
    }
}

/// The writer's connection: the database switched to WAL, its automatic checkpoint off (the
/// [`Checkpointer`]'s thread keeps the WAL short instead).
pub(in crate::store) fn open_writer(path: &Path) -> Result<Connection> {
    let writer = Connection::open(path).map_err(|e| open_error(path, e))?;
    writer
        .pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| open_error(path, e))?;
    configure(&writer, path)?;
    writer
        .pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(|e| open_error(path, e))?;
    Ok(writer)
}

/// A read-only connection.
pub(in crate::store) fn open_reader(path: &Path) -> Result<Connection> {
    let reader = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(path, e))?;
    configure(&reader, path)?;
    Ok(reader)
}

/// A read transaction: a snapshot taken at its first read.
pub(in crate::store) fn begin_read(conn: &mut Connection) -> rusqlite::Result<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Deferred)
}

/// A write transaction that holds the write lock from its start, so it never fails halfway
/// for want of it.
pub(in crate::store) fn begin_write(conn: &mut Connection) -> rusqlite::Result<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
}

/// The savepoint each job of a group write runs in (`Store::write_group`): opened, rolled
/// back to when the job fails, released after it.
pub(in crate::store) const SAVEPOINT: &str = "SAVEPOINT job";
pub(in crate::store) const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO job";
pub(in crate::store) const RELEASE_SAVEPOINT: &str = "RELEASE job";

/// Copy all of the WAL into the database file and empty it: at close, so a cleanly closed
/// database is one self-contained file.
pub(in crate::store) fn checkpoint_all(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
}

/// SQL for the member of the JSON text in `column` at `path` (an SQL expression giving a JSON
/// path such as `'$.releases'`), as JSON text; NULL where there is none. PostgreSQL would say
/// `(column::jsonb #> path)::text`.
pub(in crate::store) fn json_member(column: &str, path: &str) -> String {
    format!("json_extract({column}, {path})")
}

/// SQL for the JSON text in `column` with the object `patch` (an SQL expression) merged into
/// it as RFC 7396 says. PostgreSQL's `||` on `jsonb` is the shallow form of it.
pub(in crate::store) fn json_merge_patch(column: &str, patch: &str) -> String {
    format!("json_patch({column}, {patch})")
}

/// SQL that is true when the JSON array in `array` (an SQL expression) has the element
/// `value` (an SQL expression). PostgreSQL: `array::jsonb ? value`.
pub(in crate::store) fn json_array_has(array: &str, value: &str) -> String {
    format!("EXISTS (SELECT 1 FROM json_each({array}) WHERE value = {value})")
}

/// SQL for the elements of the JSON array `array` (an SQL expression) as a subquery of one
/// column, for `x IN (...)`. PostgreSQL: `(SELECT jsonb_array_elements_text(array::jsonb))`.
pub(in crate::store) fn json_array_values(array: &str) -> String {
    format!("(SELECT value FROM json_each({array}))")
}

/// SQL for the elements of the JSON array `array` as a table whose column `value` is each
/// element, to name in a `FROM` with an alias. PostgreSQL: `jsonb_array_elements_text(...)`
/// with its column renamed.
pub(in crate::store) fn json_elements(array: &str) -> String {
    format!("json_each({array})")
}
