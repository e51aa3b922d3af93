//! What can be known about a package's graphs before any cluster exists, checked when it is
//! installed, as Nailgun's graph validator did when a graph was uploaded: a cycle among the
//! tasks' `requires` / `required_for` edges (task by task, whatever nodes they would run on),
//! and, in a graph that must stand alone (a release's), a `requires`, `required_for` or group
//! member naming no task. An extension plugin's tasks may name the release's tasks, which are
//! not in the package, so only its own cycles are refused. Edges given as YAQL, `/regex/`
//! names and cross-node dependencies are left to the plan, as are groups' own edges (the
//! planner ignores them). Pure.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value as J;

use super::build::{CycleStep, find_cycles};
use super::roles::regex_name;
use super::source;
use super::task::{Source, contains_yaql, names};
use crate::engine::plugin::yaml::Pos;
use crate::engine::plugin::{Diagnostics, Report};

/// One finding: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub source: Source,
    pub message: String,
}

fn id_of(task: &J) -> Option<&str> {
    task.get("id").and_then(J::as_str)
}

fn is_group(task: &J) -> bool {
    task.get("type").and_then(J::as_str) == Some("group")
}

/// The names in an edge field, unless it is YAQL (evaluated per node by the planner).
fn edge_names(task: &J, key: &str) -> Vec<String> {
    match task.get(key) {
        Some(v) if contains_yaql(v) => Vec::new(),
        v => names(v),
    }
}

/// Check one graph's tasks. `standalone`: every name must be a task of this graph.
pub fn check(graph: &str, tasks: &[(J, Source)], standalone: bool) -> Vec<Problem> {
    let mut problems = Vec::new();
    // Task ids in order of first appearance; a later duplicate is the same vertex.
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut first: Vec<usize> = Vec::new();
    for (i, (t, _)) in tasks.iter().enumerate() {
        if let Some(id) = id_of(t)
            && !is_group(t)
            && !index.contains_key(id)
        {
            index.insert(id, first.len());
            first.push(i);
        }
    }
    let defined: BTreeSet<&str> = tasks.iter().filter_map(|(t, _)| id_of(t)).collect();
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for (t, src) in tasks {
        let Some(id) = id_of(t) else { continue };
        let unknown = |what: &str, name: &str| Problem {
            source: src.clone(),
            message: format!(
                "graph {graph}: task {id} {what} {name}, which no task of the graph defines"
            ),
        };
        if is_group(t) {
            if standalone {
                for member in edge_names(t, "tasks") {
                    if !defined.contains(member.as_str()) {
                        problems.push(unknown("lists the member", &member));
                    }
                }
            }
            continue;
        }
        let Some(&v) = index.get(id) else { continue };
        for (key, what, forward) in [
            ("requires", "requires", true),
            ("required_for", "is required for", false),
        ] {
            for name in edge_names(t, key) {
                if regex_name(&name).is_some() {
                    continue;
                }
                match index.get(name.as_str()) {
                    Some(&u) => {
                        let (a, b) = if forward { (u, v) } else { (v, u) };
                        edges.push((a as u32, b as u32));
                    }
                    // A group's name is a known name; its edges are the planner's business.
                    None if defined.contains(name.as_str()) => {}
                    None if standalone => problems.push(unknown(what, &name)),
                    None => {}
                }
            }
        }
    }
    edges.sort_unstable();
    edges.dedup();
    let describe = |v: usize| {
        let (t, src) = &tasks[first[v]];
        Some(CycleStep {
            task: id_of(t).unwrap_or("?").to_string(),
            node: String::new(),
            source: src.to_string(),
        })
    };
    for cycle in find_cycles(&edges, first.len(), &describe) {
        let Some(start) = cycle.first() else { continue };
        let path: Vec<String> = cycle
            .iter()
            .map(|s| format!("{} ({})", s.task, s.source))
            .collect();
        problems.push(Problem {
            source: tasks[first[index.get(start.task.as_str()).copied().unwrap_or(0)]]
                .1
                .clone(),
            message: format!(
                "graph {graph}: requires/required_for make a cycle (each task waits for the one \
                 before it): {} -> back to {}",
                path.join(" -> "),
                start.task
            ),
        });
    }
    problems
}

/// The graphs a checked package defines, each checked: every release's graphs for a release
/// plugin (standalone), the plugin's own tasks otherwise. Errors, ready to add to the report.
pub fn package_diagnostics(report: &Report) -> Diagnostics {
    let pkg = &report.package;
    let mut found: Vec<Problem> = Vec::new();
    if pkg.is_release_plugin() {
        for tree in &report.releases {
            let graphs: Vec<String> = tree
                .data
                .get("graphs")
                .and_then(J::as_object)
                .map(|g| g.keys().cloned().collect())
                .unwrap_or_default();
            for graph in graphs {
                if let Ok(g) = source::release_graph(pkg, Some(&tree.name), &graph) {
                    found.extend(check(&graph, &g.tasks, true));
                }
            }
        }
    } else {
        let manifest = pkg.manifest();
        let mut graphs = vec!["default".to_string()];
        for g in manifest
            .get("graphs")
            .and_then(J::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(t) = g.get("type").and_then(J::as_str) {
                graphs.push(t.to_string());
            }
        }
        // Each release record may bring tasks of its own.
        let mut targets: Vec<(String, String)> = manifest
            .get("releases")
            .and_then(J::as_array)
            .into_iter()
            .flatten()
            .map(|r| {
                let text = |k: &str| r.get(k).and_then(J::as_str).unwrap_or("").to_string();
                (text("version"), text("os"))
            })
            .collect();
        targets.push((String::new(), String::new()));
        for graph in &graphs {
            for (version, os) in &targets {
                if let Ok(g) = source::plugin_graph(pkg, version, os, graph) {
                    found.extend(check(graph, &g.tasks, false));
                }
            }
        }
    }
    let mut d = Diagnostics::default();
    let mut seen = BTreeSet::new();
    for p in found {
        if !seen.insert(p.message.clone()) {
            continue;
        }
        let pos = Pos {
            file: p.source.file.clone(),
            line: p.source.line,
            column: 0,
        };
        d.error(&pos, "", p.message);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tasks(list: J) -> Vec<(J, Source)> {
        list.as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                (
                    t.clone(),
                    Source::new("release r", "graph.yaml", i as u32 + 1),
                )
            })
            .collect()
    }

    #[test]
    fn cycles_name_every_task_with_its_line() {
        let t = tasks(json!([
            {"id": "a", "type": "puppet", "requires": ["c"]},
            {"id": "b", "type": "puppet", "requires": ["a"]},
            {"id": "c", "type": "shell", "required_for": ["a"], "requires": ["b"]},
            {"id": "d", "type": "shell", "requires": "d"},
            {"id": "e", "type": "shell", "requires": {"yaql_exp": "'e'"}},
        ]));
        let p = check("default", &t, true);
        let messages: Vec<&str> = p.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(messages.len(), 2, "{messages:#?}");
        assert!(
            messages[0]
                .contains("a (graph.yaml:1 (release r)) -> b (graph.yaml:2 (release r)) -> c")
                && messages[0].contains("back to a"),
            "{}",
            messages[0]
        );
        assert!(
            messages[1].contains("d (graph.yaml:4 (release r)) -> back to d"),
            "{}",
            messages[1]
        );
        assert_eq!(p[1].source.line, 4);
    }

    #[test]
    fn unknown_names_matter_only_in_a_graph_that_stands_alone() {
        let t = tasks(json!([
            {"id": "g", "type": "group", "tasks": ["a", "ghost"], "requires": ["nothing"]},
            {"id": "a", "type": "puppet", "requires": ["g", "/^x/", "missing"], "required_for": ["later"]},
        ]));
        let p = check("default", &t, true);
        let messages: Vec<&str> = p.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "graph default: task g lists the member ghost, which no task of the graph defines",
                "graph default: task a requires missing, which no task of the graph defines",
                "graph default: task a is required for later, which no task of the graph defines",
            ]
        );
        assert!(check("default", &t, false).is_empty());
    }
}
