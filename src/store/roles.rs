//! Queries on `release_overrides` and `cluster_overrides`: roles and tags created, changed or
//! deleted through Nailgun's API on a release or an environment, and a release's repositories
//! set with `fuel2 release repos update`, each kept over what the release's package says. A
//! row's body is the whole object as Nailgun's API shows it; a NULL body is a package's role
//! or tag deleted. The rows go with their release or environment.

use rusqlite::params;

use super::{ReadTxn, Result, StoreError, WriteTxn};

/// Who an override belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaOwner {
    Release(i64),
    Cluster(i64),
}

/// What an override is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaKind {
    Role,
    Tag,
    /// A release's repositories (one row, named `repos`).
    Repos,
}

impl MetaKind {
    fn as_str(self) -> &'static str {
        match self {
            MetaKind::Role => "role",
            MetaKind::Tag => "tag",
            MetaKind::Repos => "repos",
        }
    }
}

impl MetaOwner {
    fn table(self) -> (&'static str, &'static str, i64) {
        match self {
            MetaOwner::Release(id) => ("release_overrides", "release_id", id),
            MetaOwner::Cluster(id) => ("cluster_overrides", "cluster_id", id),
        }
    }
}

fn decode(name: String, body: Option<String>) -> Result<(String, Option<serde_json::Value>)> {
    let body = body
        .map(|b| {
            serde_json::from_str(&b).map_err(|e| StoreError::Corrupt {
                what: "role or tag override",
                detail: format!("{name}: {e}"),
            })
        })
        .transpose()?;
    Ok((name, body))
}

impl ReadTxn<'_> {
    /// `owner`'s overrides of `kind` in name order: each name with its body, `None` when
    /// deleted.
    pub fn overrides(
        &self,
        owner: MetaOwner,
        kind: MetaKind,
    ) -> Result<Vec<(String, Option<serde_json::Value>)>> {
        let (table, column, id) = owner.table();
        let sql = format!(
            "SELECT name, body FROM {table} WHERE {column} = ?1 AND kind = ?2 ORDER BY name"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![id, kind.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (name, body): (String, Option<String>) = row?;
            out.push(decode(name, body)?);
        }
        Ok(out)
    }

    /// The `volumes_roles_mapping` of the roles created or changed on `release`, then on
    /// environment `cluster`, in that order; `None` for a deleted role.
    pub fn role_volume_mappings(
        &self,
        release: i64,
        cluster: Option<i64>,
    ) -> Result<Vec<(String, Option<serde_json::Value>)>> {
        let mut out = Vec::new();
        let owners =
            std::iter::once(MetaOwner::Release(release)).chain(cluster.map(MetaOwner::Cluster));
        for owner in owners {
            for (name, body) in self.overrides(owner, MetaKind::Role)? {
                let mapping = match body {
                    None => None,
                    Some(b) => b.get("volumes_roles_mapping").cloned(),
                };
                out.push((name, mapping));
            }
        }
        Ok(out)
    }
}

impl WriteTxn<'_> {
    /// Set `owner`'s override `name` of `kind` (`None`: deleted).
    pub fn set_override(
        &self,
        owner: MetaOwner,
        kind: MetaKind,
        name: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<()> {
        let (table, column, id) = owner.table();
        let sql = format!(
            "INSERT INTO {table} ({column}, kind, name, body) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT({column}, kind, name) DO UPDATE SET body = excluded.body"
        );
        self.conn.execute(
            &sql,
            params![id, kind.as_str(), name, body.map(|b| b.to_string())],
        )?;
        Ok(())
    }

    /// Forget `owner`'s override `name` of `kind` (a role created only through the API and
    /// deleted leaves nothing behind).
    pub fn drop_override(&self, owner: MetaOwner, kind: MetaKind, name: &str) -> Result<()> {
        let (table, column, id) = owner.table();
        let sql = format!("DELETE FROM {table} WHERE {column} = ?1 AND kind = ?2 AND name = ?3");
        self.conn.execute(&sql, params![id, kind.as_str(), name])?;
        Ok(())
    }
}
