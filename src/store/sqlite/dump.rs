//! The database as a diagnostic snapshot carries it: a consistent copy (`VACUUM INTO` from a
//! connection of its own, so neither the writer nor the readers wait), in which every secret
//! is blanked before anything else can read it: the credential columns (password hashes,
//! session, API, boot and agent token hashes, the service agents' credential hashes, CSRF
//! tokens), in every JSON document of every table the values `auth::mask` masks for a viewer
//! and everything nested under a credential's key (passwords, tokens, keys in settings, task
//! parameters, deployed data, OpenStack configurations), and those credentials' values (of
//! [`MIN_SCRUBBED`] characters or more) wherever they were copied into other text (a task's
//! data as YAML, a step's output). The copy is then rebuilt (`VACUUM`, with `secure_delete`
//! on), so no page keeps what was blanked.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::store::{Result, Store, StoreError};

/// Every column that holds a credential, and how it is blanked (a unique or primary-key
/// column gets a distinct placeholder per row).
const CREDENTIALS: &[(&str, &str, &str)] = &[
    ("users", "password_hash", "''"),
    ("sessions", "token_hash", "'blanked-' || rowid"),
    ("sessions", "csrf", "''"),
    ("api_tokens", "token_hash", "'blanked-' || rowid"),
    ("boot_tokens", "token_hash", "''"),
    ("nodes", "agent_token_hash", "NULL"),
    ("nodes", "agent_token_pending_hash", "NULL"),
    ("nodes", "os_credential_hash", "NULL"),
    ("node_bmcs", "sealed_password", "NULL"),
];

fn io(dest: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::Open {
        path: dest.to_path_buf(),
        source: e,
    }
}

/// Every (table, column) of the database's tables, with the column's declared type.
fn columns(conn: &Connection) -> rusqlite::Result<Vec<(String, String, String)>> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
             ORDER BY name",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::new();
    for t in tables {
        let mut stmt = conn.prepare("SELECT name, type FROM pragma_table_info(?1)")?;
        let cols = stmt.query_map([&t], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        for c in cols {
            let (name, kind) = c?;
            out.push((t.clone(), name, kind));
        }
    }
    Ok(out)
}

/// Credentials shorter than this are masked where they are JSON values, but not looked for
/// in other text: too many words are that short (Fuel's default password is `admin`).
pub const MIN_SCRUBBED: usize = 6;

/// The BLOB columns: each gzipped JSON ([`crate::store::transaction_data`]), unpacked, blanked as a
/// document is and packed again. Any other BLOB column fails the test that checks this list.
const PACKED: &[(&str, &str)] = &[
    ("transaction_data", "deployment_info"),
    ("transaction_data", "settings"),
    ("transaction_data", "network"),
];

/// Rewrite `table.column` row by row (one row in memory at a time; the rows chosen by
/// `filter`, an SQL condition): `f` gives the row's new value, or None to leave it.
fn rewrite<T: rusqlite::types::FromSql + rusqlite::ToSql>(
    conn: &Connection,
    table: &str,
    column: &str,
    filter: &str,
    mut f: impl FnMut(i64, T) -> Result<Option<T>>,
) -> Result<()> {
    let rowids: Vec<i64> = conn
        .prepare(&format!("SELECT rowid FROM {table} WHERE {filter}"))?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut get = conn.prepare(&format!("SELECT {column} FROM {table} WHERE rowid = ?1"))?;
    let mut set = conn.prepare(&format!(
        "UPDATE {table} SET {column} = ?2 WHERE rowid = ?1"
    ))?;
    for rowid in rowids {
        let value: T = get.query_row([rowid], |r| r.get(0))?;
        if let Some(new) = f(rowid, value)? {
            set.execute(rusqlite::params![rowid, new])?;
        }
    }
    Ok(())
}

/// Every string in `doc` with each of the secrets `found` finds replaced by [`MASK`]; whether
/// one was.
///
/// [`MASK`]: crate::auth::mask::MASK
fn scrub_strings(doc: &mut serde_json::Value, found: &regex::Regex) -> bool {
    match doc {
        serde_json::Value::String(s) => match found.replace_all(s, crate::auth::mask::MASK) {
            std::borrow::Cow::Owned(new) => {
                *s = new;
                true
            }
            std::borrow::Cow::Borrowed(_) => false,
        },
        serde_json::Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, x| scrub_strings(x, found) | any),
        serde_json::Value::Object(map) => map
            .values_mut()
            .fold(false, |any, x| scrub_strings(x, found) | any),
        _ => false,
    }
}

/// Every packed document ([`PACKED`]) unpacked, blanked by `f` (which says whether it changed
/// anything) and packed again; see [`repacked`].
fn rewrite_packed(
    conn: &Connection,
    mut f: impl FnMut(&mut serde_json::Value) -> bool,
) -> Result<()> {
    for (table, column) in PACKED {
        let filter = format!("{column} IS NOT NULL");
        rewrite(
            conn,
            table,
            column,
            &filter,
            |rowid, bytes: Option<Vec<u8>>| {
                let Some(bytes) = bytes else { return Ok(None) };
                repacked(bytes, rowid, &mut f)
            },
        )?;
    }
    Ok(())
}

/// A packed document, blanked by `f` (which says whether it changed anything) and packed
/// again; one that does not unpack is dropped whole, as nothing can say it holds no secret.
fn repacked(
    bytes: Vec<u8>,
    rowid: i64,
    f: impl FnOnce(&mut serde_json::Value) -> bool,
) -> Result<Option<Option<Vec<u8>>>> {
    let Ok(mut doc) = crate::store::transaction_data::unpack(&bytes, rowid) else {
        return Ok(Some(None));
    };
    if !f(&mut doc) {
        return Ok(None);
    }
    Ok(Some(Some(crate::store::TransactionData::pack(&doc)?)))
}

/// Blank every secret of the open copy (see the module text): the credential columns, then
/// every JSON document (text, or packed in a BLOB) masked, then what the documents held
/// looked for in all text, in one pass over each column.
fn blank(conn: &Connection) -> Result<()> {
    use crate::auth::mask::{MASK, mask_everywhere};
    for (table, column, value) in CREDENTIALS {
        conn.execute(&format!("UPDATE {table} SET {column} = {value}"), [])?;
    }
    let text_columns: Vec<(String, String)> = columns(conn)?
        .into_iter()
        .filter(|(_, _, kind)| kind.eq_ignore_ascii_case("TEXT"))
        .map(|(t, c, _)| (t, c))
        .collect();
    let mut hidden = Vec::new();
    for (table, column) in &text_columns {
        let json = format!("substr(ltrim({column}), 1, 1) IN ('{{', '[')");
        rewrite(conn, table, column, &json, |_, text: String| {
            let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(&text) else {
                return Ok(None);
            };
            let before = doc.clone();
            mask_everywhere(&mut doc, &mut hidden);
            Ok((doc != before).then(|| doc.to_string()))
        })?;
    }
    rewrite_packed(conn, |doc| {
        let before = doc.clone();
        mask_everywhere(doc, &mut hidden);
        *doc != before
    })?;
    // What the documents held, wherever it was copied into text (a task's parameters as
    // YAML, a command line, a step's output): all of it found in one pass per value, the
    // longest first where one secret holds another.
    hidden.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    hidden.dedup();
    hidden.retain(|s| s.chars().count() >= MIN_SCRUBBED && s != MASK);
    if hidden.is_empty() {
        return Ok(());
    }
    let alternation: Vec<String> = hidden.iter().map(|s| regex::escape(s)).collect();
    let found = regex::RegexBuilder::new(&alternation.join("|"))
        .size_limit(1 << 26)
        .build()
        .map_err(|e| StoreError::Corrupt {
            what: "snapshot secrets",
            detail: e.to_string(),
        })?;
    for (table, column) in &text_columns {
        let long = format!("length({column}) >= {MIN_SCRUBBED}");
        rewrite(conn, table, column, &long, |_, text: String| {
            Ok(match found.replace_all(&text, MASK) {
                std::borrow::Cow::Owned(new) => Some(new),
                std::borrow::Cow::Borrowed(_) => None,
            })
        })?;
    }
    rewrite_packed(conn, |doc| scrub_strings(doc, &found))
}

impl Store {
    /// The database's size in bytes (its pages), to bound a snapshot before copying it.
    pub fn database_bytes(&self) -> Result<u64> {
        self.read(|r| {
            let pages: i64 = r.conn.query_row("PRAGMA page_count", [], |x| x.get(0))?;
            let size: i64 = r.conn.query_row("PRAGMA page_size", [], |x| x.get(0))?;
            Ok(pages.max(0).unsigned_abs() * size.max(0).unsigned_abs())
        })
    }

    /// Copy the database to `dest` (which must not exist) as one consistent snapshot, every
    /// secret blanked in the copy (see the module text). The copy's schema version.
    pub fn copy_without_secrets(&self, dest: &Path) -> Result<u32> {
        let source = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| io(&self.path, e))?;
        source
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| io(&self.path, e))?;
        let target = dest.to_string_lossy().to_string();
        source.execute("VACUUM INTO ?1", [&target])?;
        drop(source);
        let copy = Connection::open(dest).map_err(|e| io(dest, e))?;
        // Nothing of a blanked value may stay on a page or in a journal beside the copy.
        copy.pragma_update(None, "journal_mode", "MEMORY")?;
        copy.pragma_update(None, "secure_delete", true)?;
        copy.execute_batch("BEGIN IMMEDIATE")?;
        match blank(&copy) {
            Ok(()) => copy.execute_batch("COMMIT")?,
            Err(e) => {
                let _ = copy.execute_batch("ROLLBACK");
                return Err(e);
            }
        }
        copy.execute_batch("VACUUM")?;
        let version: u32 = copy.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        copy.close().map_err(|(_, e)| io(dest, e))?;
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::mask::{MASK, is_secret_key};
    use crate::store::testing::store_with_cluster;

    /// Columns whose names sound secret but hold none.
    const NOT_SECRET: &[(&str, &str)] = &[
        ("nodes", "token_deployment"),
        ("settings", "key"),
        ("users", "password_changed_at"),
    ];

    /// A new credential column cannot slip into snapshots: every column whose name says
    /// secret is blanked, or listed as no secret.
    #[test]
    fn every_secret_sounding_column_is_blanked() {
        let (_dir, store) = store_with_cluster();
        let all = store.read(|r| Ok(columns(r.conn)?)).unwrap();
        for (table, column, _) in all {
            let secret = is_secret_key(&column) || column.contains("hash") || column == "csrf";
            let listed = CREDENTIALS
                .iter()
                .any(|(t, c, _)| *t == table && *c == column)
                || NOT_SECRET.iter().any(|(t, c)| *t == table && *c == column);
            assert!(
                !secret || listed,
                "{table}.{column}: blank it in a snapshot"
            );
        }
    }

    /// A secret in a column the blanking cannot read would leave in every snapshot: each
    /// column's declared type is one it reads (TEXT as text or a JSON document; INTEGER and
    /// REAL hold no secret), or the column is one of the gzipped documents it unpacks.
    #[test]
    fn every_column_is_of_a_kind_the_blanking_reads() {
        let (_dir, store) = store_with_cluster();
        let all = store.read(|r| Ok(columns(r.conn)?)).unwrap();
        for (table, column, kind) in all {
            let kind = kind.to_ascii_uppercase();
            let packed = PACKED.iter().any(|(t, c)| *t == table && *c == column);
            // A credential column is blanked whole, whatever it holds (a sealed BMC password).
            let blanked = CREDENTIALS
                .iter()
                .any(|(t, c, _)| *t == table && *c == column);
            assert!(
                matches!(kind.as_str(), "TEXT" | "INTEGER" | "REAL")
                    || (kind == "BLOB" && (packed || blanked)),
                "{table}.{column} ({kind}): a snapshot cannot blank what it holds"
            );
            assert!(
                !packed || kind == "BLOB",
                "{table}.{column} listed as packed"
            );
        }
    }

    #[test]
    fn the_copy_holds_no_secret() {
        let (dir, store) = store_with_cluster();
        store
            .write(|tx| {
                tx.conn.execute_batch(
                    "INSERT INTO users (id, name, role, password_hash, created_at,
                       password_changed_at)
                     VALUES (1, 'admin', 'admin', '$argon2id$v=19$SECRET-HASH', 1, 1);
                     INSERT INTO api_tokens (user_id, name, kind, role, token_hash, created_at,
                       expires_at) VALUES (1, 't', 'personal', 'admin', 'TOKEN-HASH', 1, 9);
                     INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at,
                       agent_token_hash)
                     VALUES (1, '52:54:00:00:00:01', 'n', 'discover', 1, 1, 'AGENT-HASH');
                     UPDATE clusters SET name = 'env';",
                )?;
                tx.set_cluster_settings(
                    1,
                    &serde_json::json!({"access": {"password": "ENV-PASSWORD", "user": "admin"}}),
                    1,
                )?;
                tx.conn.execute(
                    "INSERT INTO deployments (id, cluster_id, status, created_at)
                     VALUES (7, 1, 'done', 1)",
                    [],
                )?;
                let pack = |v| crate::store::TransactionData::pack(&v);
                tx.attach_transaction_data(
                    7,
                    &crate::store::TransactionData {
                        deployment_info: Some(pack(serde_json::json!({"nodes": {"1": {
                            "keystone": {"admin_token": "OLD-TOKEN-VALUE"},
                            "task": "echo OLD-TOKEN-VALUE ENV-PASSWORD"}}}))?),
                        settings: Some(pack(serde_json::json!({"editable": {"access": {
                            "password": {"type": "password", "value": "ENV-PASSWORD"}}}}))?),
                        network: Some(b"not gzip".to_vec()),
                    },
                )?;
                Ok(())
            })
            .unwrap();
        let dest = dir.path().join("copy.db");
        let version = store.copy_without_secrets(&dest).unwrap();
        assert_eq!(version, crate::store::migrations::latest());
        let bytes = std::fs::read(&dest).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for secret in ["SECRET-HASH", "TOKEN-HASH", "AGENT-HASH", "ENV-PASSWORD"] {
            assert!(!text.contains(secret), "{secret} in the copy");
        }
        assert!(text.contains("admin"), "what is not secret stays");
        // The packed documents, unpacked: a byte search of the file cannot see into them.
        let copy = Connection::open(&dest).unwrap();
        let (info, settings, network): (Vec<u8>, Vec<u8>, Option<Vec<u8>>) = copy
            .query_row(
                "SELECT deployment_info, settings, network FROM transaction_data",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        let info = crate::store::transaction_data::unpack(&info, 7).unwrap();
        let settings = crate::store::transaction_data::unpack(&settings, 7).unwrap();
        assert_eq!(info["nodes"]["1"]["keystone"]["admin_token"], MASK);
        assert_eq!(
            info["nodes"]["1"]["task"],
            format!("echo {MASK} {MASK}"),
            "found where copied, the other document's secret too"
        );
        assert_eq!(settings["editable"]["access"]["password"]["value"], MASK);
        assert_eq!(network, None, "what does not unpack is dropped");
        // The original is untouched.
        let users = store
            .read(|r| {
                Ok(r.conn
                    .query_row("SELECT password_hash FROM users", [], |x| {
                        x.get::<_, String>(0)
                    })?)
            })
            .unwrap();
        assert!(users.contains("SECRET-HASH"));
    }
}
