//! An environment's deployment plan, from what the master holds: the environment and its nodes
//! and settings from the store, the release's and the enabled plugins' graphs from the installed
//! packages under the data directory, and the deployed state of earlier runs. Gathers them and
//! calls the pure [`crate::engine::graph::plan`]; decides nothing itself and writes nothing
//! (a deployment records what it ran: [`crate::store`]'s `create_deployment`).
//!
//! A plugin is enabled in an environment the way Fuel marked it in the cluster attributes: its
//! settings hold `<plugin name>: {metadata: {enabled: true}}`.

use std::path::{Path, PathBuf};

use serde_json::Value as J;

use crate::engine::graph::{self, NodeSpec, Plan, PlanError};
use crate::model::{Cluster, Node, NodeStatus, Release};
use crate::package::graphs::{GraphSourceError, OpenedRelease, open_plugin, open_release};
use crate::store::{Store, StoreError};

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanningError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("environment {0} not found")]
    NoCluster(i64),
    #[error("environment {0} has no nodes; assign nodes with roles first")]
    NoNodes(String),
    #[error("release {release}: {source}")]
    Release {
        release: String,
        #[source]
        source: GraphSourceError,
    },
    #[error("plugin {plugin}: {source}")]
    Plugin {
        plugin: String,
        #[source]
        source: GraphSourceError,
    },
    #[error(transparent)]
    Plan(#[from] PlanError),
}

impl PlanningError {
    /// A stable code for API clients.
    pub fn code(&self) -> &'static str {
        match self {
            PlanningError::Store(e) => e.code(),
            PlanningError::NoCluster(_) => "not_found",
            PlanningError::NoNodes(_) => "no_nodes",
            PlanningError::Release { .. } | PlanningError::Plugin { .. } => "bad_package",
            PlanningError::Plan(_) => "plan_failed",
        }
    }
}

/// Everything a plan was made from, kept so a successful run can be recorded against it.
#[derive(Debug, Clone)]
pub struct EnvironmentPlan {
    pub cluster: Cluster,
    pub release: Release,
    pub nodes: Vec<Node>,
    pub plan: Plan,
}

/// The status a node has for the planner (Nailgun's names; old data is ignored for the
/// statuses in [`graph::input::REDEPLOY_STATUSES`]).
fn spec_of(node: &Node) -> NodeSpec {
    let mut spec = NodeSpec::new(&node.id.to_string(), &[]);
    spec.roles.clone_from(&node.roles);
    spec.name = Some(node.name.clone());
    spec.status = node.status.as_str().to_string();
    spec.pending_addition = node.status == NodeStatus::Discover;
    spec
}

fn enabled(settings: &J, plugin: &str) -> bool {
    settings
        .get(plugin)
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("enabled"))
        .and_then(J::as_bool)
        .unwrap_or(false)
}

/// Plan an environment's `graph` (`default`, `provisioning`, ...).
pub fn plan_environment(
    store: &Store,
    data_dir: &Path,
    cluster_id: i64,
    graph_type: &str,
) -> Result<EnvironmentPlan, PlanningError> {
    let (cluster, release, nodes, settings, deployed, plugins) = store
        .read(|r| {
            let cluster = r.cluster(cluster_id)?;
            let Some(cluster) = cluster else {
                return Ok(None);
            };
            let release = r
                .release(cluster.release_id)?
                .ok_or_else(|| StoreError::NotFound {
                    entity: "release",
                    id: cluster.release_id.to_string(),
                })?;
            let nodes = r.cluster_nodes(cluster_id)?;
            let settings = r.cluster_settings(cluster_id)?;
            let deployed = r.deployed(cluster_id)?;
            let plugins = r.plugin_paths()?;
            Ok(Some((cluster, release, nodes, settings, deployed, plugins)))
        })?
        .ok_or(PlanningError::NoCluster(cluster_id))?;
    if nodes.is_empty() {
        return Err(PlanningError::NoNodes(cluster.name));
    }
    let release_path = plugins
        .iter()
        .find(|(id, ..)| *id == release.plugin_id)
        .map(|(.., path)| data_dir.join(path))
        .ok_or_else(|| StoreError::NotFound {
            entity: "plugin",
            id: release.plugin_id.to_string(),
        })?;
    let opened = open_release(
        &release_path.to_string_lossy(),
        Some(&release.name),
        graph_type,
        None,
    )
    .map_err(|source| PlanningError::Release {
        release: release.name.clone(),
        source: source.relative_to(data_dir),
    })?;
    let plugin_graphs = enabled_plugins(&plugins, &settings, data_dir, &opened, graph_type)?;
    let spec = graph::Cluster {
        id: cluster.id,
        name: cluster.name.clone(),
        settings,
        ..graph::Cluster::default()
    };
    let specs: Vec<NodeSpec> = nodes.iter().map(spec_of).collect();
    let plan = graph::plan(&spec, &specs, &opened.graph, &plugin_graphs, &deployed)?;
    Ok(EnvironmentPlan {
        cluster,
        release,
        nodes,
        plan,
    })
}

fn enabled_plugins(
    plugins: &[(i64, String, String, String)],
    settings: &J,
    data_dir: &Path,
    release: &OpenedRelease,
    graph_type: &str,
) -> Result<Vec<graph::PluginGraph>, PlanningError> {
    let mut out = Vec::new();
    for (_, name, _, path) in plugins {
        if !enabled(settings, name) {
            continue;
        }
        let path: PathBuf = data_dir.join(path);
        let g =
            open_plugin(&path, release, graph_type).map_err(|source| PlanningError::Plugin {
                plugin: name.clone(),
                source: source.relative_to(data_dir),
            })?;
        out.push(g);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_is_enabled_by_its_metadata() {
        let s = serde_json::json!({"a": {"metadata": {"enabled": true}}, "b": {"metadata": {}}});
        assert!(enabled(&s, "a"));
        assert!(!enabled(&s, "b"));
        assert!(!enabled(&s, "c"));
    }
}
