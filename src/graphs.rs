//! Nailgun's deployment graphs as the master holds them: a release's or a plugin's own graphs
//! live in its package's files, uploaded ones (`fuel2 graph upload`) in the store
//! ([`crate::store::StoredGraph`]); an uploaded graph of a type overrides the package's of the
//! same owner and type. Gathers both for the API (`/deployment_graphs`, `/graphs`) and an
//! environment's task lists per level (`/deployment_tasks`), merged as Nailgun merged them
//! ([`crate::engine::graph::upload::merge_by_id`]). Decides nothing the engine decides.
//!
//! A package's graph has no row, so no stored id: its id is negative and stable while the
//! package is unchanged: `-(kind * 10^9 + owner id * 1000 + place of its type + 1)`, `kind` 1
//! for a release, 2 for a plugin. Stored graphs have Nailgun's positive ids.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value as J, json};

use crate::engine::graph::upload::merge_by_id;
use crate::package::graphs::{
    GraphSourceError, open_release, plugin_graph_types, plugin_tasks, release_graph_types,
};
use crate::planner::PlanningError;
use crate::store::{GraphOwner, ReadTxn, Store, StoreError, StoredGraph};

/// One graph as Nailgun's API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphView {
    pub id: i64,
    pub graph_type: String,
    pub owner: GraphOwner,
    pub name: Option<String>,
    /// `node_filter`, `on_success`, `on_error`, `on_stop` (an object).
    pub metadata: J,
    pub tasks: J,
    /// It was uploaded (not the package's own).
    pub stored: bool,
}

impl GraphView {
    pub fn of_stored(g: StoredGraph) -> GraphView {
        GraphView {
            id: g.id,
            graph_type: g.graph_type,
            owner: g.owner,
            name: g.name,
            metadata: g.metadata,
            tasks: g.tasks,
            stored: true,
        }
    }

    /// `owner`'s package graph of `graph_type`, the `place`-th type its package defines.
    fn of_package(owner: GraphOwner, place: usize, graph_type: &str, tasks: Vec<J>) -> GraphView {
        GraphView {
            id: package_id(owner, place),
            graph_type: graph_type.to_string(),
            owner,
            name: None,
            metadata: json!({}),
            tasks: J::Array(tasks),
            stored: false,
        }
    }

    /// Nailgun's graph object: the metadata keys, `id`, `name`, `tasks`, `relations`.
    pub fn to_json(&self) -> J {
        let mut out = self.metadata.as_object().cloned().unwrap_or_default();
        out.insert("id".into(), json!(self.id));
        out.insert("name".into(), json!(self.name));
        out.insert("tasks".into(), self.tasks.clone());
        out.insert(
            "relations".into(),
            json!([{
                "type": self.graph_type,
                "model": self.owner.model(),
                "model_id": self.owner.id(),
            }]),
        );
        J::Object(out)
    }
}

/// Where an owner's own graphs are: a release's package (path under the data dir, release
/// name) or a plugin's.
enum Package {
    Release {
        path: String,
        release: String,
    },
    Plugin {
        path: String,
    },
    /// An environment has no package.
    None,
}

/// `owner`'s package and its stored graphs; not found when the owner does not exist.
fn read_owner(
    store: &Store,
    owner: GraphOwner,
) -> Result<(Package, Vec<StoredGraph>), PlanningError> {
    store
        .read(|r| {
            if !r.graph_owner_exists(owner)? {
                return Ok(None);
            }
            let paths = r.plugin_paths()?;
            let path_of = |plugin: i64| {
                paths
                    .iter()
                    .find(|(id, ..)| *id == plugin)
                    .map(|(.., p)| p.clone())
            };
            let package = match owner {
                GraphOwner::Cluster(_) => Package::None,
                GraphOwner::Release(id) => match r.release(id)? {
                    Some(rel) => match path_of(rel.plugin_id) {
                        Some(path) => Package::Release {
                            path,
                            release: rel.name,
                        },
                        None => Package::None,
                    },
                    None => Package::None,
                },
                GraphOwner::Plugin(id) => match (path_of(id), r.plugins()?) {
                    // A release plugin's graphs are its releases'.
                    (Some(path), plugins)
                        if !plugins.iter().any(|p| p.id == id && p.is_release) =>
                    {
                        Package::Plugin { path }
                    }
                    _ => Package::None,
                },
            };
            Ok(Some((package, r.stored_graphs_of(owner)?)))
        })?
        .ok_or_else(|| PlanningError::Store(owner.missing()))
}

fn package_error(owner: GraphOwner, data_dir: &Path, source: GraphSourceError) -> PlanningError {
    let source = source.relative_to(data_dir);
    match owner {
        GraphOwner::Release(id) => PlanningError::Release {
            release: id.to_string(),
            source,
        },
        other => PlanningError::Plugin {
            plugin: other.id().to_string(),
            source,
        },
    }
}

/// The graph types `package` defines.
fn package_types(
    owner: GraphOwner,
    data_dir: &Path,
    package: &Package,
) -> Result<Vec<String>, PlanningError> {
    let types = match package {
        Package::Release { path, release } => release_graph_types(&data_dir.join(path), release),
        Package::Plugin { path } => plugin_graph_types(&data_dir.join(path)),
        Package::None => Ok(Vec::new()),
    };
    types.map_err(|e| package_error(owner, data_dir, e))
}

/// `package`'s tasks of `graph_type`, one of the types it defines ([`package_types`]).
fn package_tasks(
    owner: GraphOwner,
    data_dir: &Path,
    package: &Package,
    graph_type: &str,
) -> Result<Vec<J>, PlanningError> {
    let tasks = match package {
        Package::Release { path, release } => open_release(
            &data_dir.join(path).to_string_lossy(),
            Some(release),
            graph_type,
            None,
        )
        .map(|o| o.graph.tasks.into_iter().map(|(t, _)| t).collect()),
        Package::Plugin { path } => plugin_tasks(&data_dir.join(path), graph_type),
        Package::None => Ok(Vec::new()),
    };
    tasks.map_err(|e| package_error(owner, data_dir, e))
}

fn package_id(owner: GraphOwner, place: usize) -> i64 {
    let kind = match owner {
        GraphOwner::Release(_) => 1,
        GraphOwner::Plugin(_) => 2,
        GraphOwner::Cluster(_) => 3,
    };
    let place = i64::try_from(place).unwrap_or(999).min(999);
    -(kind * 1_000_000_000 + owner.id() * 1000 + place + 1)
}

/// `owner`'s graph of `graph_type`: the uploaded one, else its package's; `None` when neither
/// exists; not found when the owner does not.
pub fn graph(
    store: &Store,
    data_dir: &Path,
    owner: GraphOwner,
    graph_type: &str,
) -> Result<Option<GraphView>, PlanningError> {
    let (package, stored) = read_owner(store, owner)?;
    if let Some(g) = stored.into_iter().find(|g| g.graph_type == graph_type) {
        return Ok(Some(GraphView::of_stored(g)));
    }
    let types = package_types(owner, data_dir, &package)?;
    let Some(place) = types.iter().position(|t| t == graph_type) else {
        return Ok(None);
    };
    let tasks = package_tasks(owner, data_dir, &package, graph_type)?;
    Ok(Some(GraphView::of_package(owner, place, graph_type, tasks)))
}

/// Every graph of `owner`: its package's types (an uploaded graph in place of the package's of
/// its type), then the uploaded graphs of other types.
pub fn graphs_of(
    store: &Store,
    data_dir: &Path,
    owner: GraphOwner,
) -> Result<Vec<GraphView>, PlanningError> {
    let (package, mut stored) = read_owner(store, owner)?;
    let mut out = Vec::new();
    for (place, ty) in package_types(owner, data_dir, &package)?
        .into_iter()
        .enumerate()
    {
        if let Some(i) = stored.iter().position(|g| g.graph_type == ty) {
            out.push(GraphView::of_stored(stored.remove(i)));
        } else {
            let tasks = package_tasks(owner, data_dir, &package, &ty)?;
            out.push(GraphView::of_package(owner, place, &ty, tasks));
        }
    }
    out.extend(stored.into_iter().map(GraphView::of_stored));
    Ok(out)
}

/// `GET /graphs/`'s filters (Nailgun's `DeploymentGraphCollectionHandler`).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub clusters: Vec<i64>,
    pub releases: Vec<i64>,
    pub plugins: Vec<i64>,
    /// Only these types (empty: every type).
    pub types: Vec<String>,
    /// With `clusters`: their releases' and enabled plugins' graphs too.
    pub fetch_related: bool,
}

/// The graphs `filter` selects: with no owner given, every graph of every environment,
/// release and plugin; else those owners' (and, with `fetch_related`, the environments'
/// releases and enabled plugins'). An owner that does not exist is skipped, as Nailgun's.
pub fn filtered(
    store: &Store,
    data_dir: &Path,
    filter: &Filter,
) -> Result<Vec<GraphView>, PlanningError> {
    let mut owners: Vec<GraphOwner> = Vec::new();
    let everything =
        filter.clusters.is_empty() && filter.releases.is_empty() && filter.plugins.is_empty();
    store.read(|r| {
        if everything {
            owners.extend(r.clusters()?.iter().map(|c| GraphOwner::Cluster(c.id)));
            owners.extend(r.releases()?.iter().map(|rel| GraphOwner::Release(rel.id)));
            owners.extend(
                r.plugins()?
                    .iter()
                    .filter(|p| !p.is_release)
                    .map(|p| GraphOwner::Plugin(p.id)),
            );
            return Ok(());
        }
        for &c in &filter.clusters {
            owners.push(GraphOwner::Cluster(c));
            if filter.fetch_related
                && let Some((release, plugins)) = release_and_plugins(r, c)?
            {
                owners.push(GraphOwner::Release(release.id));
                // A listing of graphs is no plan: settings that enable a plugin twice only
                // leave its graphs out (planning says why).
                owners.extend(
                    plugins
                        .unwrap_or_default()
                        .into_iter()
                        .map(GraphOwner::Plugin),
                );
            }
        }
        owners.extend(filter.releases.iter().map(|&id| GraphOwner::Release(id)));
        owners.extend(filter.plugins.iter().map(|&id| GraphOwner::Plugin(id)));
        Ok(())
    })?;
    let mut seen = std::collections::HashSet::new();
    owners.retain(|o| seen.insert(*o));
    let mut out = Vec::new();
    for owner in owners {
        let graphs = match graphs_of(store, data_dir, owner) {
            Ok(g) => g,
            Err(
                PlanningError::NoCluster(_) | PlanningError::Store(StoreError::NotFound { .. }),
            ) => {
                continue;
            }
            Err(e) => return Err(e),
        };
        out.extend(
            graphs
                .into_iter()
                .filter(|g| filter.types.is_empty() || filter.types.contains(&g.graph_type)),
        );
    }
    Ok(out)
}

/// An environment's release and the ids of the plugins enabled in it, or why they are not
/// one version of each plugin.
type ReleaseAndPlugins = (crate::model::Release, Result<Vec<i64>, PlanningError>);

/// Environment `cluster`'s release and the plugins enabled in it (not the release's own), as
/// the planner finds them (one version per plugin: settings that enable a plugin without
/// saying which of its versions are an error); None when there is no such environment.
fn release_and_plugins(
    r: &ReadTxn<'_>,
    cluster: i64,
) -> Result<Option<ReleaseAndPlugins>, StoreError> {
    let Some((_, release)) = r.cluster_with_release(cluster)? else {
        return Ok(None);
    };
    let settings = r.cluster_settings(cluster)?;
    let installed = crate::planner::installed(&r.plugin_paths()?, release.plugin_id);
    let plugins = crate::engine::settings::enabled_plugins(&settings, &installed)
        .map_err(PlanningError::PluginChoice);
    Ok(Some((release, plugins)))
}

/// Which of an environment's task lists (`/deployment_tasks/...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Release, plugins and the environment's own, merged (what the planner plans).
    All,
    /// The environment's own graph.
    Own,
    /// Its release's graph (uploaded, else the package's).
    Release,
    /// Its enabled plugins' graphs.
    Plugins,
}

/// Environment `cluster`'s tasks of `graph_type` at `level`; a list no graph defines is empty.
pub fn cluster_tasks(
    store: &Store,
    data_dir: &Path,
    cluster: i64,
    graph_type: &str,
    level: Level,
) -> Result<Vec<J>, PlanningError> {
    let (release, plugins) = store
        .read(|r| release_and_plugins(r, cluster))?
        .ok_or(PlanningError::NoCluster(cluster))?;
    let plugins = plugins?;
    let tasks_of = |owner: GraphOwner| -> Result<Vec<J>, PlanningError> {
        Ok(graph(store, data_dir, owner, graph_type)?
            .and_then(|g| g.tasks.as_array().cloned())
            .unwrap_or_default())
    };
    let plugin_tasks = || -> Result<Vec<J>, PlanningError> {
        let mut out = Vec::new();
        for &p in &plugins {
            out.extend(tasks_of(GraphOwner::Plugin(p))?);
        }
        Ok(out)
    };
    Ok(match level {
        Level::Own => tasks_of(GraphOwner::Cluster(cluster))?,
        Level::Release => tasks_of(GraphOwner::Release(release.id))?,
        Level::Plugins => plugin_tasks()?,
        Level::All => {
            let release = tasks_of(GraphOwner::Release(release.id))?;
            let plugins = plugin_tasks()?;
            let own = tasks_of(GraphOwner::Cluster(cluster))?;
            merge_by_id(&[&release, &plugins, &own])
        }
    })
}

/// Whether `raw` is a graph type: 1-255 letters, digits, `_`, `-` or `.` (what Nailgun's URLs
/// and fuel2 take).
pub fn is_graph_type(raw: &str) -> bool {
    !raw.is_empty()
        && raw.len() <= 255
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The graph types environment `cluster` can run: the deployment graph (`default`) always,
/// and every type its release, its enabled plugins or the environment itself defines (in a
/// package or uploaded). Each package's list of types is read once; no task is read.
pub fn types_for(
    store: &Store,
    data_dir: &Path,
    cluster: i64,
) -> Result<BTreeSet<String>, PlanningError> {
    let (release, plugins) = store
        .read(|r| release_and_plugins(r, cluster))?
        .ok_or(PlanningError::NoCluster(cluster))?;
    let owners = [
        GraphOwner::Cluster(cluster),
        GraphOwner::Release(release.id),
    ]
    .into_iter()
    .chain(plugins?.into_iter().map(GraphOwner::Plugin));
    let mut types = BTreeSet::from(["default".to_string()]);
    for owner in owners {
        let (package, stored) = read_owner(store, owner)?;
        types.extend(stored.into_iter().map(|g| g.graph_type));
        types.extend(package_types(owner, data_dir, &package)?);
    }
    Ok(types)
}
