//! Graph sources on disk, for `stoker graph plan` and the dashboard's plans: a release given as
//! a directory (a release plugin, or a fuel-library tree of `*tasks.yaml` files), a built
//! `.fp`, or the name of a bundled release; plugins given as directories or archives. Opens
//! files and hands them to [`crate::engine::graph::source`]; decides nothing itself.

use std::path::Path;

use super::{PackageError, bundled, open};
use crate::engine::graph::source::{self, SourceError};
use crate::engine::graph::{PluginGraph, ReleaseGraph};
use crate::engine::plugin::{PackageFiles, load};

/// Why a graph source cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GraphSourceError {
    #[error(transparent)]
    Package(#[from] PackageError),
    #[error("{what}: {source}")]
    Source {
        what: String,
        #[source]
        source: SourceError,
    },
    #[error("{0:?} is neither a directory, a .fp file nor a bundled release (bundled: {1})")]
    Unknown(String, String),
}

impl GraphSourceError {
    /// The same error with paths under `base` written relative to it: answers to API clients
    /// name a plugin's folder as the store does (`plugins/NAME-VERSION`), never the host's
    /// data directory.
    pub fn relative_to(self, base: &Path) -> GraphSourceError {
        let prefix = format!("{}/", base.display());
        let text = |s: String| s.replace(&prefix, "");
        let path = |p: std::path::PathBuf| p.strip_prefix(base).map(Path::to_path_buf).unwrap_or(p);
        match self {
            GraphSourceError::Package(PackageError::Io { path: p, source }) => {
                GraphSourceError::Package(PackageError::Io {
                    path: path(p),
                    source,
                })
            }
            GraphSourceError::Package(PackageError::NotAPackage { path: p, reason }) => {
                GraphSourceError::Package(PackageError::NotAPackage {
                    path: path(p),
                    reason,
                })
            }
            GraphSourceError::Source { what, source } => GraphSourceError::Source {
                what: text(what),
                source,
            },
            GraphSourceError::Unknown(arg, bundled) => {
                GraphSourceError::Unknown(text(arg), bundled)
            }
            other => other,
        }
    }
}

/// A release ready to plan, and the operating system plugins are matched against.
#[derive(Debug, Clone)]
pub struct OpenedRelease {
    pub graph: ReleaseGraph,
    pub operating_system: String,
}

fn from_package(
    files: &dyn PackageFiles,
    what: &str,
    pick: Option<&str>,
    graph: &str,
) -> Result<OpenedRelease, GraphSourceError> {
    let pkg = load(files);
    let os = crate::engine::plugin::release::releases(&pkg)
        .into_iter()
        .find(|r| pick.is_none_or(|p| r.name == p || r.version == p))
        .map(|r| r.operating_system)
        .unwrap_or_default();
    let g =
        source::release_graph(&pkg, pick, graph).map_err(|source| GraphSourceError::Source {
            what: what.to_string(),
            source,
        })?;
    Ok(OpenedRelease {
        graph: g,
        operating_system: os,
    })
}

/// Open a release: a directory (release plugin when it has `metadata.yaml`, else a
/// fuel-library tree named by its folder, version `library_version`), a `.fp`, or a bundled
/// release by folder, release name or version.
pub fn open_release(
    arg: &str,
    pick: Option<&str>,
    graph: &str,
    library_version: Option<&str>,
) -> Result<OpenedRelease, GraphSourceError> {
    let path = Path::new(arg);
    if path.is_dir() && !path.join("metadata.yaml").is_file() {
        let files = super::dir::DirFiles::new(path)?;
        let name = path
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
            .unwrap_or_else(|| arg.to_string());
        let origin = format!("release {name}");
        let tasks =
            source::library(&files, &origin, graph).map_err(|source| GraphSourceError::Source {
                what: arg.to_string(),
                source,
            })?;
        return Ok(OpenedRelease {
            graph: ReleaseGraph {
                version: library_version.unwrap_or(&name).to_string(),
                operating_system: "Ubuntu".to_string(),
                name,
                tasks,
                ..ReleaseGraph::default()
            },
            operating_system: "ubuntu".to_string(),
        });
    }
    if path.exists() {
        let files = open(path)?;
        return from_package(files.as_ref(), arg, pick, graph);
    }
    let bundled = bundled::packages();
    for (folder, files) in &bundled {
        let pkg = load(files);
        let matches = folder == arg
            || crate::engine::plugin::release::releases(&pkg)
                .iter()
                .any(|r| r.name == arg || r.version == arg);
        if matches {
            let pick = if folder == arg {
                pick
            } else {
                pick.or(Some(arg))
            };
            return from_package(files, arg, pick, graph);
        }
    }
    Err(GraphSourceError::Unknown(
        arg.to_string(),
        bundled
            .iter()
            .map(|(f, _)| f.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    ))
}

/// Open an enabled plugin (directory or `.fp`) as `release` sees it.
pub fn open_plugin(
    path: &Path,
    release: &OpenedRelease,
    graph: &str,
) -> Result<PluginGraph, GraphSourceError> {
    let files = open(path)?;
    let pkg = load(files.as_ref());
    source::plugin_graph(
        &pkg,
        &release.graph.version,
        &release.operating_system,
        graph,
    )
    .map_err(|source| GraphSourceError::Source {
        what: path.display().to_string(),
        source,
    })
}
/// The graph types release `release` (its name) of the release plugin at `path` defines.
pub fn release_graph_types(path: &Path, release: &str) -> Result<Vec<String>, GraphSourceError> {
    let files = open(path)?;
    let pkg = load(files.as_ref());
    let trees = crate::engine::plugin::release::releases(&pkg);
    let tree = trees
        .iter()
        .find(|t| t.name == release || t.version == release)
        .ok_or_else(|| GraphSourceError::Source {
            what: path.display().to_string(),
            source: SourceError::NoRelease {
                wanted: release.to_string(),
                available: source::release_names(&pkg),
            },
        })?;
    Ok(tree
        .data
        .get("graphs")
        .and_then(serde_json::Value::as_object)
        .map(|g| g.keys().cloned().collect())
        .unwrap_or_default())
}

/// The plugin at `path` as written, not as a release sees it: its graph types (`default` for
/// its deployment tasks, then each of `graphs:`).
pub fn plugin_graph_types(path: &Path) -> Result<Vec<String>, GraphSourceError> {
    let files = open(path)?;
    let pkg = load(files.as_ref());
    let tree = pkg.manifest();
    let mut out = Vec::new();
    if tree
        .get("deployment_tasks")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|t| !t.is_empty())
    {
        out.push("default".to_string());
    }
    for g in tree
        .get("graphs")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = g.get("type").and_then(serde_json::Value::as_str)
            && !out.iter().any(|o| o == t)
        {
            out.push(t.to_string());
        }
    }
    Ok(out)
}

/// The plugin at `path`'s tasks of graph `graph` as written (no release's view of it).
pub fn plugin_tasks(path: &Path, graph: &str) -> Result<Vec<serde_json::Value>, GraphSourceError> {
    let files = open(path)?;
    let pkg = load(files.as_ref());
    let g =
        source::plugin_graph(&pkg, "", "", graph).map_err(|source| GraphSourceError::Source {
            what: path.display().to_string(),
            source,
        })?;
    Ok(g.tasks.into_iter().map(|(t, _)| t).collect())
}
