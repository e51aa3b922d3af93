//! Queries on `plugins`, `releases` and `settings`: what is installed. Installing a plugin and
//! its releases is one transaction; removing a plugin removes its releases, unless an
//! environment still uses one of them.

use rusqlite::{OptionalExtension, Row, params};

use super::sqlite;
use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::model::{PluginSummary, Release};

/// A plugin to record, as the plugin engine validated it.
#[derive(Debug, Clone)]
pub struct NewPlugin<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub title: &'a str,
    pub package_version: &'a str,
    pub description: &'a str,
    pub is_release: bool,
    /// Where the unpacked package lives under the data dir.
    pub path: &'a str,
    pub diagnostics: &'a serde_json::Value,
    /// The loaded metadata tree.
    pub manifest: &'a serde_json::Value,
}

/// A release to record, with its whole loaded tree.
#[derive(Debug, Clone)]
pub struct NewRelease<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub operating_system: &'a str,
    pub description: &'a str,
    pub state: &'a str,
    pub data: &'a serde_json::Value,
}

/// A JSON text column as a tree.
pub(super) fn json_column(row: &Row<'_>, idx: usize) -> rusqlite::Result<serde_json::Value> {
    json_column_as(row, idx)
}

/// A JSON text column read straight into `T` (a run's `deps` into a `Vec<i64>`), from the
/// row's own text rather than a copy of it: a page of 10,000 runs reads 10,000 of each. A value
/// that is not that JSON is an error naming the column (`deps: invalid type: …`).
pub(super) fn json_column_as<T: serde::de::DeserializeOwned>(
    row: &Row<'_>,
    idx: usize,
) -> rusqlite::Result<T> {
    let value = row.get_ref(idx)?;
    let named = |e: &dyn std::fmt::Display| -> Box<dyn std::error::Error + Send + Sync> {
        let column = row.as_ref().column_name(idx).unwrap_or("?");
        format!("{column}: {e}").into()
    };
    let text = value.as_str().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(idx, value.data_type(), named(&e))
    })?;
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, named(&e))
    })
}

/// A nullable JSON text column.
pub(super) fn optional_json(
    row: &Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<serde_json::Value>> {
    match row.get_ref(idx)? {
        rusqlite::types::ValueRef::Null => Ok(None),
        _ => json_column_as(row, idx).map(Some),
    }
}

fn plugin_from_row(row: &Row<'_>) -> rusqlite::Result<PluginSummary> {
    Ok(PluginSummary {
        id: row.get(0)?,
        name: row.get(1)?,
        title: row.get(2)?,
        version: row.get(3)?,
        package_version: row.get(4)?,
        description: row.get(5)?,
        is_release: row.get(6)?,
        installed_at: row.get(7)?,
        diagnostics: json_column(row, 8)?,
        releases: match json_column(row, 9)? {
            serde_json::Value::Array(records) => records.iter().map(nailgun_release).collect(),
            _ => Vec::new(),
        },
    })
}

/// One `releases` record of a plugin's metadata as Nailgun lists it (a release record names
/// its system `operating_system`; a plugin's compatibility record, `os`).
fn nailgun_release(r: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "os": r.get("os").or_else(|| r.get("operating_system")),
        "version": r.get("version"),
        "mode": r.get("mode"),
        "deployment_scripts_path": r.get("deployment_scripts_path"),
        "repository_path": r.get("repository_path"),
    })
}

/// The manifest itself is large (every file of the package); only its `releases` are read.
fn plugin_columns() -> String {
    format!(
        "id, name, title, version, package_version, description, is_release, installed_at, \
         diagnostics, COALESCE({}, '[]')",
        sqlite::json_member("manifest", "'$.releases'")
    )
}

fn release_from_row(row: &Row<'_>) -> rusqlite::Result<Release> {
    Ok(Release {
        id: row.get(0)?,
        name: row.get(1)?,
        version: row.get(2)?,
        operating_system: row.get(3)?,
        description: row.get(4)?,
        state: row.get(5)?,
        plugin_id: row.get(6)?,
    })
}

const RELEASE_COLUMNS: &str = "id, name, version, operating_system, description, state, plugin_id";

/// A plugin's dependents: the environments made from its releases, and those whose settings
/// enable it, each `(id, name)`.
pub type PluginDependents = (Vec<(i64, String)>, Vec<(i64, String)>);

impl ReadTxn<'_> {
    /// What depends on plugin `id` (named `name`): the environments made from one of its
    /// releases (they keep it from being removed), and those whose settings enable it; each
    /// `(id, name)`, by name.
    pub fn plugin_dependents(&self, id: i64, name: &str) -> Result<PluginDependents> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT c.id, c.name FROM clusters c JOIN releases r ON c.release_id = r.id
             WHERE r.plugin_id = ?1 ORDER BY c.name",
        )?;
        let made: Vec<(i64, String)> = stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        // A plugin's switch in an environment's settings: `{NAME: {metadata: {enabled}}}`.
        let path = format!("$.\"{}\".metadata.enabled", name.replace('"', ""));
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT id, name FROM clusters WHERE {} = 1 ORDER BY name",
            sqlite::json_member("settings", "?1")
        ))?;
        let enabling: Vec<(i64, String)> = stmt
            .query_map([path], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok((made, enabling))
    }

    pub fn plugins(&self) -> Result<Vec<PluginSummary>> {
        let sql = format!(
            "SELECT {} FROM plugins ORDER BY name, version",
            plugin_columns()
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], plugin_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn plugin_by_name(&self, name: &str, version: Option<&str>) -> Result<Vec<PluginSummary>> {
        let sql = format!(
            "SELECT {} FROM plugins WHERE name = ?1 AND (?2 IS NULL OR version = ?2)
             ORDER BY version",
            plugin_columns()
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![name, version], plugin_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The unpacked package directory of a plugin, relative to the data dir.
    pub fn plugin_path(&self, id: i64) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT path FROM plugins WHERE id = ?1", [id], |r| r.get(0))
            .optional()?)
    }

    pub fn releases(&self) -> Result<Vec<Release>> {
        let sql = format!("SELECT {RELEASE_COLUMNS} FROM releases ORDER BY id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], release_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn release(&self, id: i64) -> Result<Option<Release>> {
        let sql = format!("SELECT {RELEASE_COLUMNS} FROM releases WHERE id = ?1");
        Ok(self
            .conn
            .query_row(&sql, [id], release_from_row)
            .optional()?)
    }

    /// The whole loaded tree of a release (roles, networks, attributes, graphs ...).
    pub fn release_data(&self, id: i64) -> Result<Option<serde_json::Value>> {
        Ok(self
            .conn
            .query_row("SELECT data FROM releases WHERE id = ?1", [id], |r| {
                json_column(r, 0)
            })
            .optional()?)
    }

    /// One top-level section of a release's tree (`volumes_metadata`, `components` ...),
    /// `null` where it has none, without reading the rest; `None` when there is no release.
    pub fn release_section(&self, id: i64, key: &str) -> Result<Option<serde_json::Value>> {
        let text: Option<Option<String>> = self
            .conn
            .prepare_cached(&format!(
                "SELECT {} FROM releases WHERE id = ?1",
                sqlite::json_member("data", "'$.' || ?2")
            ))?
            .query_row(params![id, key], |r| r.get(0))
            .optional()?;
        text.map(|t| match t {
            None => Ok(serde_json::Value::Null),
            Some(t) => serde_json::from_str(&t).map_err(|e| StoreError::Corrupt {
                what: "release data",
                detail: format!("release {id} {key}: {e}"),
            }),
        })
        .transpose()
    }

    /// A release's `roles_metadata` and `attributes_metadata` (`null` where it has none),
    /// without reading the rest of its tree: what assignments and settings are checked against.
    pub fn release_roles_and_attributes(
        &self,
        id: i64,
    ) -> Result<Option<(serde_json::Value, serde_json::Value)>> {
        let section = |row: &Row<'_>, idx: usize| -> rusqlite::Result<serde_json::Value> {
            let text: Option<String> = row.get(idx)?;
            match text {
                None => Ok(serde_json::Value::Null),
                Some(t) => serde_json::from_str(&t).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        idx,
                        rusqlite::types::Type::Text,
                        Box::new(e),
                    )
                }),
            }
        };
        Ok(self
            .conn
            .query_row(
                &format!(
                    "SELECT {}, {} FROM releases WHERE id = ?1",
                    sqlite::json_member("data", "'$.roles_metadata'"),
                    sqlite::json_member("data", "'$.attributes_metadata'")
                ),
                [id],
                |r| Ok((section(r, 0)?, section(r, 1)?)),
            )
            .optional()?)
    }

    /// Every installed plugin's id and loaded manifest as stored (text): a plan's cache key
    /// covers them, since `plugin sync` rewrites them when a plugin's files change.
    pub fn plugin_manifests(&self) -> Result<Vec<(i64, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, manifest FROM plugins ORDER BY id")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every installed plugin's id, name, version and directory (relative to the data dir).
    pub fn plugin_paths(&self) -> Result<Vec<(i64, String, String, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, name, version, path FROM plugins ORDER BY id")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn setting(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional()?)
    }
}

impl WriteTxn<'_> {
    /// Record a plugin and its releases; a plugin of the same name and version, or a release of
    /// the same name and version, is a conflict.
    pub fn insert_plugin(
        &self,
        plugin: &NewPlugin<'_>,
        releases: &[NewRelease<'_>],
        now: i64,
    ) -> Result<PluginSummary> {
        if !self
            .read()
            .plugin_by_name(plugin.name, Some(plugin.version))?
            .is_empty()
        {
            return Err(StoreError::Conflict(format!(
                "plugin {} {} is already installed",
                plugin.name, plugin.version
            )));
        }
        let plugin_id = self.conn.query_row(
            "INSERT INTO plugins (name, version, title, package_version, description, is_release,
                                  path, diagnostics, manifest, installed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             RETURNING id",
            params![
                plugin.name,
                plugin.version,
                plugin.title,
                plugin.package_version,
                plugin.description,
                plugin.is_release,
                plugin.path,
                plugin.diagnostics.to_string(),
                plugin.manifest.to_string(),
                now
            ],
            |r| r.get::<_, i64>(0),
        )?;
        for r in releases {
            self.insert_release(plugin_id, r)?;
        }
        let kind = if plugin.is_release {
            "release plugin"
        } else {
            "plugin"
        };
        self.add_history(
            now,
            None,
            "plugin.installed",
            &format!("installed {kind} {} {}", plugin.name, plugin.version),
        )?;
        self.emit(crate::events::Change::Plugin {
            name: plugin.name.to_string(),
            version: plugin.version.to_string(),
            what: "installed",
        });
        let sql = format!("SELECT {} FROM plugins WHERE id = ?1", plugin_columns());
        Ok(self.conn.query_row(&sql, [plugin_id], plugin_from_row)?)
    }

    /// Remove a plugin and its releases. Refused while an environment uses one of them.
    pub fn remove_plugin(&self, id: i64, now: i64) -> Result<PluginSummary> {
        let sql = format!("SELECT {} FROM plugins WHERE id = ?1", plugin_columns());
        let plugin = self
            .conn
            .query_row(&sql, [id], plugin_from_row)
            .optional()?
            .ok_or_else(|| StoreError::NotFound {
                entity: "plugin",
                id: id.to_string(),
            })?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT c.name FROM clusters c JOIN releases r ON c.release_id = r.id
             WHERE r.plugin_id = ?1 ORDER BY c.name",
        )?;
        let users: Vec<String> = stmt
            .query_map([id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        if !users.is_empty() {
            return Err(StoreError::Conflict(format!(
                "plugin {} {} provides the release of environment(s) {}; delete them first",
                plugin.name,
                plugin.version,
                users.join(", ")
            )));
        }
        self.conn
            .execute("DELETE FROM plugins WHERE id = ?1", [id])?;
        self.add_history(
            now,
            None,
            "plugin.removed",
            &format!("removed plugin {} {}", plugin.name, plugin.version),
        )?;
        self.emit(crate::events::Change::Plugin {
            name: plugin.name.clone(),
            version: plugin.version.clone(),
            what: "removed",
        });
        Ok(plugin)
    }

    /// Add one release of plugin `plugin_id`; a release of that name and version from any
    /// plugin is a conflict.
    fn insert_release(&self, plugin_id: i64, r: &NewRelease<'_>) -> Result<()> {
        let taken: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM releases WHERE name = ?1 AND version = ?2",
                params![r.name, r.version],
                |row| row.get(0),
            )
            .optional()?;
        if taken.is_some() {
            return Err(StoreError::Conflict(format!(
                "release {:?} ({}) is already installed by another plugin",
                r.name, r.version
            )));
        }
        self.conn.execute(
            "INSERT INTO releases (plugin_id, name, version, operating_system, description,
                                   state, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                plugin_id,
                r.name,
                r.version,
                r.operating_system,
                r.description,
                r.state,
                r.data.to_string()
            ],
        )?;
        Ok(())
    }

    /// Refresh an installed plugin from its files (`POST /api/v1/plugins/sync`): its findings,
    /// its loaded tree, and its releases' trees (a release it now defines is added).
    pub fn update_plugin(
        &self,
        id: i64,
        diagnostics: &serde_json::Value,
        manifest: &serde_json::Value,
        releases: &[NewRelease<'_>],
    ) -> Result<()> {
        self.conn.execute(
            "UPDATE plugins SET diagnostics = ?2, manifest = ?3 WHERE id = ?1",
            params![id, diagnostics.to_string(), manifest.to_string()],
        )?;
        for r in releases {
            let changed = self.conn.execute(
                "UPDATE releases SET operating_system = ?4, description = ?5, data = ?6
                 WHERE plugin_id = ?1 AND name = ?2 AND version = ?3",
                params![
                    id,
                    r.name,
                    r.version,
                    r.operating_system,
                    r.description,
                    r.data.to_string()
                ],
            )?;
            if changed == 0 {
                self.insert_release(id, r)?;
            }
        }
        Ok(())
    }

    pub fn set_setting(&self, key: &str, value: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO settings (key, value) VALUES (?1, ?2)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }
}
