//! Queries on `deployment_graphs`: the graphs uploaded through Nailgun's API, each owned by an
//! environment, a release or a plugin, one per owner and graph type. Rows go with their owner
//! (foreign keys cascade: an environment's when it is deleted, a release's and a plugin's when
//! the plugin is removed, in the same transaction). The tasks are kept as uploaded (checked
//! before they get here, by [`crate::engine::graph::upload`]).

use rusqlite::{OptionalExtension, Row, params};
use serde_json::Value as J;

use super::sqlite;
use super::{ReadTxn, Result, StoreError, WriteTxn};

/// Who owns a stored graph: Nailgun's `relations[].model` and `model_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GraphOwner {
    Cluster(i64),
    Release(i64),
    Plugin(i64),
}

impl GraphOwner {
    /// Nailgun's model name: `cluster`, `release`, `plugin`.
    pub fn model(self) -> &'static str {
        match self {
            GraphOwner::Cluster(_) => "cluster",
            GraphOwner::Release(_) => "release",
            GraphOwner::Plugin(_) => "plugin",
        }
    }

    pub fn id(self) -> i64 {
        match self {
            GraphOwner::Cluster(id) | GraphOwner::Release(id) | GraphOwner::Plugin(id) => id,
        }
    }

    /// The error for an owner that does not exist.
    pub fn missing(self) -> StoreError {
        StoreError::NotFound {
            entity: match self {
                GraphOwner::Cluster(_) => "environment",
                GraphOwner::Release(_) => "release",
                GraphOwner::Plugin(_) => "plugin",
            },
            id: self.id().to_string(),
        }
    }

    /// The owner's column and table.
    fn column(self) -> (&'static str, &'static str) {
        match self {
            GraphOwner::Cluster(_) => ("cluster_id", "clusters"),
            GraphOwner::Release(_) => ("release_id", "releases"),
            GraphOwner::Plugin(_) => ("plugin_id", "plugins"),
        }
    }
}

/// One stored graph.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredGraph {
    pub id: i64,
    pub owner: GraphOwner,
    pub graph_type: String,
    pub name: Option<String>,
    /// `node_filter`, `on_success`, `on_error`, `on_stop` as uploaded (an object).
    pub metadata: J,
    /// The tasks as uploaded (a list).
    pub tasks: J,
}

/// What an upload stores: the graph's name, metadata and tasks.
#[derive(Debug, Clone, Copy)]
pub struct GraphBody<'a> {
    pub name: Option<&'a str>,
    pub metadata: &'a J,
    pub tasks: &'a J,
}

const COLUMNS: &str = "id, cluster_id, release_id, plugin_id, type, name, metadata, tasks";

fn graph_from_row(row: &Row<'_>) -> rusqlite::Result<StoredGraph> {
    let cluster: Option<i64> = row.get(1)?;
    let release: Option<i64> = row.get(2)?;
    let plugin: Option<i64> = row.get(3)?;
    let owner = match (cluster, release, plugin) {
        (Some(id), _, _) => GraphOwner::Cluster(id),
        (_, Some(id), _) => GraphOwner::Release(id),
        (_, _, Some(id)) => GraphOwner::Plugin(id),
        // The table's CHECK forbids it.
        (None, None, None) => {
            return Err(rusqlite::Error::FromSqlConversionFailure(
                1,
                rusqlite::types::Type::Null,
                "a deployment graph without an owner".into(),
            ));
        }
    };
    Ok(StoredGraph {
        id: row.get(0)?,
        owner,
        graph_type: row.get(4)?,
        name: row.get(5)?,
        metadata: super::catalog::json_column(row, 6)?,
        tasks: super::catalog::json_column(row, 7)?,
    })
}

impl ReadTxn<'_> {
    /// `owner`'s stored graph of `graph_type`.
    pub fn stored_graph(&self, owner: GraphOwner, graph_type: &str) -> Result<Option<StoredGraph>> {
        let (column, _) = owner.column();
        let sql =
            format!("SELECT {COLUMNS} FROM deployment_graphs WHERE {column} = ?1 AND type = ?2");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row(params![owner.id(), graph_type], graph_from_row)
            .optional()?)
    }

    /// `owner`'s stored graphs, by type.
    pub fn stored_graphs_of(&self, owner: GraphOwner) -> Result<Vec<StoredGraph>> {
        let (column, _) = owner.column();
        let sql =
            format!("SELECT {COLUMNS} FROM deployment_graphs WHERE {column} = ?1 ORDER BY type");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([owner.id()], graph_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every stored graph, by id.
    pub fn stored_graphs(&self) -> Result<Vec<StoredGraph>> {
        let sql = format!("SELECT {COLUMNS} FROM deployment_graphs ORDER BY id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], graph_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Whether `owner` exists (an environment, a release or an installed plugin).
    pub fn graph_owner_exists(&self, owner: GraphOwner) -> Result<bool> {
        let (_, table) = owner.column();
        let sql = format!("SELECT 1 FROM {table} WHERE id = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([owner.id()], |_| Ok(()))
            .optional()?
            .is_some())
    }
}

impl WriteTxn<'_> {
    /// Store `owner`'s graph of `graph_type` (`POST`): a conflict when it has one already,
    /// not found when the owner does not exist.
    pub fn create_graph(
        &self,
        owner: GraphOwner,
        graph_type: &str,
        body: GraphBody<'_>,
    ) -> Result<StoredGraph> {
        let read = self.read();
        if !read.graph_owner_exists(owner)? {
            return Err(owner.missing());
        }
        if read.stored_graph(owner, graph_type)?.is_some() {
            return Err(StoreError::Conflict(format!(
                "{} {} has a deployment graph of type {graph_type:?} already; PUT replaces it",
                owner.model(),
                owner.id()
            )));
        }
        let (column, _) = owner.column();
        let sql = format!(
            "INSERT INTO deployment_graphs ({column}, type, name, metadata, tasks)
             VALUES (?1, ?2, ?3, ?4, ?5)"
        );
        self.conn.prepare_cached(&sql)?.execute(params![
            owner.id(),
            graph_type,
            body.name,
            body.metadata.to_string(),
            body.tasks.to_string()
        ])?;
        read.stored_graph(owner, graph_type)?
            .ok_or_else(|| owner.missing())
    }

    /// Replace `owner`'s graph of `graph_type` (`PUT`): its tasks, and its name and metadata
    /// when given. `None` when it has none (or the owner does not exist).
    pub fn replace_graph(
        &self,
        owner: GraphOwner,
        graph_type: &str,
        body: GraphBody<'_>,
    ) -> Result<Option<StoredGraph>> {
        let (column, _) = owner.column();
        let sql = format!(
            "UPDATE deployment_graphs SET tasks = ?3, name = COALESCE(?4, name),
                 metadata = {}
             WHERE {column} = ?1 AND type = ?2",
            sqlite::json_merge_patch("metadata", "?5")
        );
        let changed = self.conn.prepare_cached(&sql)?.execute(params![
            owner.id(),
            graph_type,
            body.tasks.to_string(),
            body.name,
            body.metadata.to_string()
        ])?;
        if changed == 0 {
            return Ok(None);
        }
        self.read().stored_graph(owner, graph_type)
    }

    /// Delete `owner`'s graph of `graph_type`; whether there was one. Not found when the
    /// owner does not exist.
    pub fn delete_graph(&self, owner: GraphOwner, graph_type: &str) -> Result<bool> {
        if !self.read().graph_owner_exists(owner)? {
            return Err(owner.missing());
        }
        let (column, _) = owner.column();
        let sql = format!("DELETE FROM deployment_graphs WHERE {column} = ?1 AND type = ?2");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .execute(params![owner.id(), graph_type])?
            > 0)
    }
}
