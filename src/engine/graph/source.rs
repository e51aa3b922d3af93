//! Where tasks come from, each with its file and line:
//!
//! - [`library`]: a fuel-library tree (`deployment/puppet/**/tasks.yaml`), read the way
//!   `fuel rel --sync-deployment-tasks` did: every file whose name ends in `tasks.yaml`, here
//!   in path order, concatenated into the `default` graph; `graphs/<name>/tasks.yaml` is the
//!   graph `<name>`.
//! - [`release_graph`]: a release plugin (`is_release: true`): one release's graph of a type,
//!   role groups from its roles' `tasks:` included, with its roles, tags and setting defaults.
//! - [`plugin_graph`]: an enabled plugin as one release sees it: its deployment tasks (or graph
//!   of the type) and its legacy `tasks.yaml`.
//!
//! Pure: files come through [`PackageFiles`]; packages are read by [`crate::engine::plugin`].

use std::collections::HashMap;

use serde_json::Value as J;

use super::build::{PluginGraph, ReleaseGraph};
use super::data::settings_from_attributes;
use super::task::Source;
use crate::engine::plugin::load::{Package, PackageVersion, is_release_record};
use crate::engine::plugin::release::{for_release, releases, with_base};
use crate::engine::plugin::yaml::{self, Node, Pos};
use crate::engine::plugin::{Level, PackageFiles, files::glob_match};

/// Why tasks cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("{file}:{line}:{column}: {message}")]
    Yaml {
        file: String,
        line: u32,
        column: u32,
        message: String,
    },
    #[error("{file}: a task file holds a list of tasks, not {found}")]
    NotAList { file: String, found: String },
    #[error("{0}: cannot read: {1}")]
    Read(String, String),
    #[error("no task file (*tasks.yaml) in the tree")]
    Empty,
    #[error("there is no graph {graph:?}; this release has: {}", available.join(", "))]
    NoGraph {
        graph: String,
        available: Vec<String>,
    },
    #[error("the package defines no release")]
    NotARelease,
    #[error("the package defines no release {wanted:?}; it has: {}", available.join(", "))]
    NoRelease {
        wanted: String,
        available: Vec<String>,
    },
    #[error("the package cannot be read:\n{}", .0.join("\n"))]
    Package(Vec<String>),
}

fn parse_tasks(
    files: &dyn PackageFiles,
    path: &str,
    origin: &str,
) -> Result<Vec<(J, Source)>, SourceError> {
    let bytes = files
        .read(path)
        .map_err(|e| SourceError::Read(path.to_string(), e.to_string()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| SourceError::Read(path.to_string(), "not UTF-8 text".to_string()))?;
    let parsed = yaml::parse(path, &text).map_err(|e| SourceError::Yaml {
        file: path.to_string(),
        line: e.pos.line,
        column: e.pos.column,
        message: e.message,
    })?;
    nodes_to_tasks(&parsed.root, path, origin)
}

fn nodes_to_tasks(root: &Node, path: &str, origin: &str) -> Result<Vec<(J, Source)>, SourceError> {
    if root.is_null() {
        return Ok(Vec::new());
    }
    let Some(items) = root.as_seq() else {
        return Err(SourceError::NotAList {
            file: path.to_string(),
            found: root.type_name().to_string(),
        });
    };
    Ok(items
        .iter()
        .map(|n| (n.to_json(), source_at(origin, &n.pos)))
        .collect())
}

fn source_at(origin: &str, pos: &Pos) -> Source {
    Source::new(origin, &pos.file, pos.line)
}

/// The graphs a fuel-library tree holds: `default` and each `graphs/<name>/`.
pub fn library_graphs(files: &dyn PackageFiles) -> Vec<String> {
    let mut out = vec!["default".to_string()];
    for e in files.entries() {
        if !e.is_dir
            && let Some(rest) = e.path.strip_prefix("graphs/")
            && let Some((name, file)) = rest.split_once('/')
            && file == "tasks.yaml"
        {
            out.push(name.to_string());
        }
    }
    out
}

/// A fuel-library tree's graph `graph`, tasks in path order then file order.
pub fn library(
    files: &dyn PackageFiles,
    origin: &str,
    graph: &str,
) -> Result<Vec<(J, Source)>, SourceError> {
    let paths: Vec<String> = files
        .entries()
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.path)
        .filter(|p| {
            if graph == "default" {
                !p.starts_with("graphs/")
                    && p.rsplit('/')
                        .next()
                        .is_some_and(|f| f.ends_with("tasks.yaml"))
            } else {
                *p == format!("graphs/{graph}/tasks.yaml")
            }
        })
        .collect();
    if paths.is_empty() {
        if graph != "default" {
            return Err(SourceError::NoGraph {
                graph: graph.to_string(),
                available: library_graphs(files),
            });
        }
        return Err(SourceError::Empty);
    }
    let mut out = Vec::new();
    for p in paths {
        out.extend(parse_tasks(files, &p, origin)?);
    }
    Ok(out)
}

fn load_errors(pkg: &Package) -> Result<(), SourceError> {
    let errors: Vec<String> = pkg
        .diagnostics
        .iter()
        .filter(|d| d.level == Level::Error)
        .map(|d| d.render())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SourceError::Package(errors))
    }
}

/// The names a release can be picked by: its name and its version.
pub fn release_names(pkg: &Package) -> Vec<String> {
    releases(pkg)
        .iter()
        .map(|r| format!("{} ({})", r.name, r.version))
        .collect()
}

/// A release plugin's release (`pick` = its name or version; the first when `None`) and its
/// graph of type `graph`.
pub fn release_graph(
    pkg: &Package,
    pick: Option<&str>,
    graph: &str,
) -> Result<ReleaseGraph, SourceError> {
    load_errors(pkg)?;
    let trees = releases(pkg);
    let records: Vec<&Node> = pkg
        .release_records()
        .iter()
        .filter(|r| is_release_record(r))
        .collect();
    if trees.is_empty() {
        return Err(SourceError::NotARelease);
    }
    let idx = match pick {
        None => 0,
        Some(w) => trees
            .iter()
            .position(|t| t.name == w || t.version == w)
            .ok_or_else(|| SourceError::NoRelease {
                wanted: w.to_string(),
                available: release_names(pkg),
            })?,
    };
    let tree = &trees[idx];
    let graphs = tree.data.get("graphs").and_then(J::as_object);
    let Some(g) = graphs.and_then(|g| g.get(graph)) else {
        return Err(SourceError::NoGraph {
            graph: graph.to_string(),
            available: graphs
                .map(|g| g.keys().cloned().collect())
                .unwrap_or_default(),
        });
    };
    let tasks_json: Vec<J> = g
        .get("tasks")
        .and_then(J::as_array)
        .cloned()
        .unwrap_or_default();
    // Positions: the graph's task nodes in order, then role groups at their role.
    let merged = records.get(idx).map(|r| with_base(r));
    let node_tasks: Vec<&Node> = merged
        .as_ref()
        .map(|m| {
            let from_graphs = m.get("graphs").and_then(Node::as_seq).and_then(|gs| {
                gs.iter()
                    .find(|g| g.get("type").and_then(Node::as_str) == Some(graph))
                    .and_then(|g| g.get("tasks"))
            });
            let list = match from_graphs {
                Some(t) => Some(t),
                None if graph == "default" => m.get("deployment_tasks"),
                None => None,
            };
            list.and_then(Node::as_seq)
                .map(|s| s.iter().collect())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    let origin = format!("release {}", tree.name);
    let roles_node = merged.as_ref().and_then(|m| m.get("roles").cloned());
    let fallback = Pos::file(&pkg.metadata_file);
    let tasks = tasks_json
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let pos = match node_tasks.get(i) {
                Some(n) => n.pos.clone(),
                None => t
                    .get("id")
                    .and_then(J::as_str)
                    .and_then(|id| roles_node.as_ref()?.get(id)?.get("tasks"))
                    .map_or_else(|| fallback.clone(), |n| n.pos.clone()),
            };
            (t, source_at(&origin, &pos))
        })
        .collect();
    Ok(ReleaseGraph {
        name: tree.name.clone(),
        version: tree.version.clone(),
        operating_system: tree.operating_system.clone(),
        tasks,
        roles_metadata: tree.data.get("roles_metadata").cloned().unwrap_or(J::Null),
        tags_metadata: tree.data.get("tags_metadata").cloned().unwrap_or(J::Null),
        settings: settings_from_attributes(
            tree.data.get("attributes_metadata").unwrap_or(&J::Null),
        ),
    })
}

/// Every mapping with a string `id` under `node`: id → position (first one wins).
fn id_positions(node: &Node, out: &mut HashMap<String, Pos>) {
    if let Some(id) = node.get("id").and_then(Node::as_str) {
        out.entry(id.to_string())
            .or_insert_with(|| node.pos.clone());
    }
    if let Some(items) = node.as_seq() {
        for i in items {
            id_positions(i, out);
        }
    }
    if let Some(entries) = node.as_map() {
        for (_, v) in entries {
            id_positions(v, out);
        }
    }
}

/// An enabled plugin seen from a release (`release_version` like `newton-10.0`, its operating
/// system): its tasks of graph `graph` and, for `default`, its legacy `tasks.yaml`. A plugin with
/// no compatible release record is used as written, with a warning saying so.
pub fn plugin_graph(
    pkg: &Package,
    release_version: &str,
    operating_system: &str,
    graph: &str,
) -> Result<PluginGraph, SourceError> {
    load_errors(pkg)?;
    let name = pkg.name().to_string();
    let mut warnings = Vec::new();
    let tree = match for_release(pkg, release_version, operating_system) {
        Some(t) => t,
        None => {
            warnings.push(format!(
                "plugin {name} {} declares no release compatible with {release_version} on \
                 {operating_system}; its tasks are planned anyway",
                pkg.version()
            ));
            pkg.manifest()
        }
    };
    let mut positions = HashMap::new();
    for f in ["deployment_tasks.yaml"] {
        if let Some(n) = pkg.file_node(f) {
            id_positions(n, &mut positions);
        }
    }
    id_positions(&pkg.metadata, &mut positions);
    let fallback = Pos::file("deployment_tasks.yaml");
    let list = if graph == "default" {
        tree.get("deployment_tasks").and_then(J::as_array)
    } else {
        tree.get("graphs")
            .and_then(J::as_array)
            .and_then(|gs| {
                gs.iter()
                    .find(|g| g.get("type").and_then(J::as_str) == Some(graph))
            })
            .and_then(|g| g.get("tasks"))
            .and_then(J::as_array)
    };
    let tasks = list
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let pos = t
                .get("id")
                .and_then(J::as_str)
                .and_then(|id| positions.get(id))
                .unwrap_or(&fallback)
                .clone();
            (t, source_at(&name, &pos))
        })
        .collect();
    let legacy_nodes: Vec<Pos> = pkg
        .file_node("tasks.yaml")
        .and_then(Node::as_seq)
        .map(|s| s.iter().map(|n| n.pos.clone()).collect())
        .unwrap_or_default();
    let legacy_fallback = Pos::file("tasks.yaml");
    let legacy = if graph == "default" {
        tree.get("tasks")
            .and_then(J::as_array)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let pos = legacy_nodes.get(i).unwrap_or(&legacy_fallback).clone();
                (t, source_at(&name, &pos))
            })
            .collect()
    } else {
        Vec::new()
    };
    let scripts_path = tree
        .get("release")
        .or_else(|| tree.get("releases").and_then(|r| r.get(0)))
        .and_then(|r| r.get("deployment_scripts_path"))
        .and_then(J::as_str)
        .unwrap_or("deployment_scripts/")
        .to_string();
    Ok(PluginGraph {
        name,
        version: pkg.version(),
        id: 0,
        title: tree
            .get("title")
            .and_then(J::as_str)
            .unwrap_or_default()
            .to_string(),
        hot_pluggable: tree
            .get("is_hotpluggable")
            .and_then(J::as_bool)
            .unwrap_or(false),
        attributes: tree
            .get("attributes_metadata")
            .and_then(|a| a.get("attributes"))
            .cloned()
            .unwrap_or(J::Null),
        scripts_path,
        v1: pkg.package_version == Some(PackageVersion::V1),
        tasks,
        legacy,
        roles_metadata: tree.get("roles_metadata").cloned().unwrap_or(J::Null),
        warnings,
    })
}

/// Whether `path` names a task file of a fuel-library tree.
pub fn is_task_file(path: &str) -> bool {
    glob_match("**/*tasks.yaml", path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::plugin::{MemFiles, load};

    #[test]
    fn library_reads_task_files_in_path_order_with_lines() {
        let mut m = MemFiles::new();
        m.add("deployment/b/tasks.yaml", "- id: b\n  type: stage\n")
            .unwrap();
        m.add(
            "deployment/a/tasks.yaml",
            "# c\n- id: a\n  type: stage\n- id: a2\n  type: stage\n",
        )
        .unwrap();
        m.add("graphs/prov/tasks.yaml", "- {id: p, type: stage}\n")
            .unwrap();
        m.add("README.md", "x").unwrap();
        let t = library(&m, "release lib", "default").unwrap();
        let got: Vec<(String, String)> = t
            .iter()
            .map(|(j, s)| (j["id"].as_str().unwrap().to_string(), s.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("a".into(), "deployment/a/tasks.yaml:2 (release lib)".into()),
                (
                    "a2".into(),
                    "deployment/a/tasks.yaml:4 (release lib)".into()
                ),
                ("b".into(), "deployment/b/tasks.yaml:1 (release lib)".into()),
            ]
        );
        assert_eq!(library(&m, "r", "prov").unwrap().len(), 1);
        let e = library(&m, "r", "nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "there is no graph \"nope\"; this release has: default, prov"
        );
        assert!(is_task_file("deployment/x/tasks.yaml"));
    }

    #[test]
    fn plugin_graph_keeps_positions_and_legacy_tasks() {
        let mut m = MemFiles::new();
        m.add(
            "metadata.yaml",
            "name: p\nversion: '1.2.0'\npackage_version: '4.0.0'\nfuel_version: ['9.0']\n\
             releases:\n  - {os: ubuntu, version: newton-10.0, mode: [ha], \
             deployment_scripts_path: d/, repository_path: r/}\n",
        )
        .unwrap();
        m.add(
            "deployment_tasks.yaml",
            "- id: one\n  type: shell\n  role: [controller]\n",
        )
        .unwrap();
        m.add(
            "tasks.yaml",
            "- role: '*'\n  stage: post_deployment/10\n  type: shell\n  parameters: {cmd: x}\n",
        )
        .unwrap();
        let pkg = load(&m);
        let g = plugin_graph(&pkg, "newton-10.0", "Ubuntu", "default").unwrap();
        assert_eq!(g.tasks[0].1.to_string(), "deployment_tasks.yaml:1 (p)");
        assert_eq!(g.tasks[0].0["roles"], serde_json::json!(["controller"]));
        assert_eq!(g.legacy[0].1.to_string(), "tasks.yaml:1 (p)");
        assert!(g.warnings.is_empty());
        let g = plugin_graph(&pkg, "liberty-8.0", "Ubuntu", "default").unwrap();
        assert!(
            g.warnings[0].contains("no release compatible"),
            "{:?}",
            g.warnings
        );
    }
}
