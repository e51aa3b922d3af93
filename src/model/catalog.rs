//! What a master offers and holds beyond nodes: installed plugins, the releases they carry, and
//! environments (Fuel's clusters) created from a release. Plain data, as stored and served;
//! the plugin engine produces the release trees, the store keeps them, the API shows them.

use serde::{Deserialize, Serialize};

/// An installed plugin package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginSummary {
    pub id: i64,
    pub name: String,
    pub title: String,
    pub version: String,
    pub package_version: String,
    pub description: String,
    /// Whether the package carries releases (`is_release: true` records).
    pub is_release: bool,
    /// Unix seconds.
    pub installed_at: i64,
    /// The validator's findings at install time (warnings and infos; errors refuse install).
    pub diagnostics: serde_json::Value,
    /// Its metadata's `releases` records in Nailgun's plugin shape (`os`, `version`, `mode`,
    /// `deployment_scripts_path`, `repository_path`), as `fuel2 plugins list` reads them.
    pub releases: Vec<serde_json::Value>,
}

/// A release an environment can be created from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Release {
    pub id: i64,
    pub name: String,
    /// Fuel's `<openstack>-<fuel>` form, like `newton-10.0`.
    pub version: String,
    pub operating_system: String,
    pub description: String,
    /// `available` releases can be deployed; others are listed only.
    pub state: String,
    /// The plugin that installed it.
    pub plugin_id: i64,
}

impl Release {
    /// Whether environments may be created from it (Nailgun's `is_deployable`).
    pub fn is_deployable(&self) -> bool {
        self.state != "unavailable"
    }
}

/// Environment statuses, as Nailgun names them.
pub const CLUSTER_STATUSES: [&str; 7] = [
    "new",
    "deployment",
    "stopped",
    "operational",
    "error",
    "remove",
    "partially_deployed",
];

/// An environment: nodes deployed together from one release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub id: i64,
    pub name: String,
    pub release_id: i64,
    pub status: String,
    pub net_segment_type: String,
    /// Unix seconds.
    pub created_at: i64,
}
