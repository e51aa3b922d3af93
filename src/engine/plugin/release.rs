//! From a loaded package to what a master stores and deploys:
//!
//! - [`releases`]: each `is_release: true` record (over its `base_release` template, its own
//!   keys winning) becomes a release tree in Nailgun's shape: `roles` → `roles_metadata`,
//!   `networks` → `networks_metadata`, `os` → `operating_system` ..., and `graphs` by type, with
//!   `deployment_tasks` as the `default` graph when no `default` graph is given.
//! - [`role_group_tasks`]: stoker's extension: a role's `tasks: [...]` becomes the group task
//!   Fuel would have read, `{id: role, type: group, role: [role], tasks, fault_tolerance?}`.
//! - [`select_records`]: version-constraint records. Records with the same `id` form a group;
//!   a record may carry `fuel_version` and `openstack_version` constraints (see [`super::version`]).
//!   For an environment's release the best satisfied record of each group is kept: the one with
//!   more constrained dimensions, then the higher stated lower bound, then the later in the
//!   file. A group with no satisfied record is dropped.
//! - [`for_release`]: a (multi-release) plugin seen from one release: the compatible `releases[]`
//!   record's per-release keys over the package's root files, then record selection.
//!
//! Pure.

use serde_json::{Map, Value as J, json};

use super::load::{Package, is_release_record};
use super::version::{Constraint, ReleaseVersion, Version, release_compatible};
use super::yaml::{Node, Value};

/// A release defined by a release plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseTree {
    pub name: String,
    pub version: String,
    pub operating_system: String,
    pub description: String,
    pub state: String,
    /// The whole tree (roles, networks, volumes, attributes, graphs ...).
    pub data: J,
}

/// Keys renamed when a record becomes a release (Nailgun's `PluginAdapterV5`).
const RENAMES: &[(&str, &str)] = &[
    ("attributes", "attributes_metadata"),
    ("networks", "networks_metadata"),
    ("network_roles", "network_roles_metadata"),
    ("volumes", "volumes_metadata"),
    ("roles", "roles_metadata"),
    ("components", "components_metadata"),
    ("os", "operating_system"),
    ("release_name", "name"),
    ("tags", "tags_metadata"),
];

/// A record over its `base_release` template: the record's keys win (shallow, as Nailgun).
pub fn with_base(record: &Node) -> Node {
    let mut out = match record.get("base_release") {
        Some(base) if base.as_map().is_some() => base.clone(),
        _ => Node::new(Value::Map(Vec::new()), record.pos.clone()),
    };
    for (k, v) in record.as_map().unwrap_or(&[]) {
        if k.text != "base_release" && k.text != "base_release_path" {
            out.insert(&k.text, v.clone());
        }
    }
    out
}

fn text(v: Option<&J>) -> String {
    match v {
        Some(J::String(s)) => s.clone(),
        Some(J::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// The group tasks a roles mapping's `tasks:` lists stand for (package 5.0.0, stoker extension).
pub fn role_group_tasks(roles: &J) -> Vec<J> {
    let Some(map) = roles.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, role) in map {
        let Some(tasks) = role.get("tasks").filter(|t| t.is_array()) else {
            continue;
        };
        let mut group = json!({
            "id": name,
            "type": "group",
            "role": [name],
            "tasks": tasks,
            "parameters": {"strategy": {"type": "parallel"}},
        });
        if let Some(ft) = role.get("fault_tolerance") {
            group["fault_tolerance"] = ft.clone();
        }
        out.push(group);
    }
    out
}

/// `role` is accepted as an alias of `roles`: give every task that has only `role` its `roles`.
pub fn normalize_roles(tasks: &mut J) {
    if let J::Array(list) = tasks {
        for t in list {
            if let Some(o) = t.as_object_mut()
                && !o.contains_key("roles")
                && let Some(r) = o.get("role").cloned()
            {
                o.insert("roles".to_string(), r);
            }
        }
    }
}

/// Remove `tasks` from each role (they became group tasks).
fn strip_role_tasks(roles: &mut J) {
    if let Some(map) = roles.as_object_mut() {
        for role in map.values_mut() {
            if let Some(r) = role.as_object_mut() {
                r.remove("tasks");
            }
        }
    }
}

/// Graphs of a release record by type: `{type: {name, tasks, metadata}}`.
fn graphs_of(record: &Map<String, J>) -> Map<String, J> {
    let mut graphs = Map::new();
    if let Some(J::Array(list)) = record.get("graphs") {
        for g in list {
            let ty = text(g.get("type"));
            if ty.is_empty() {
                continue;
            }
            graphs.insert(
                ty.clone(),
                json!({
                    "name": g.get("name").cloned().unwrap_or(J::String(ty)),
                    "tasks": g.get("tasks").cloned().filter(J::is_array).unwrap_or(json!([])),
                    "metadata": g.get("metadata").cloned().unwrap_or(json!({})),
                }),
            );
        }
    }
    if !graphs.contains_key("default")
        && let Some(tasks) = record.get("deployment_tasks").filter(|t| t.is_array())
    {
        graphs.insert(
            "default".to_string(),
            json!({"name": "default", "tasks": tasks, "metadata": {}}),
        );
    }
    graphs
}

/// Every release a package defines.
pub fn releases(pkg: &Package) -> Vec<ReleaseTree> {
    let mut out = Vec::new();
    for record in pkg
        .release_records()
        .iter()
        .filter(|r| is_release_record(r))
    {
        let merged = with_base(record).to_json();
        let J::Object(mut map) = merged else {
            continue;
        };
        for (from, to) in RENAMES {
            if let Some(v) = map.remove(*from)
                && !map.contains_key(*to)
            {
                map.insert((*to).to_string(), v);
            }
        }
        let mut graphs = graphs_of(&map);
        if let Some(roles) = map.get_mut("roles_metadata") {
            let groups = role_group_tasks(roles);
            strip_role_tasks(roles);
            if !groups.is_empty() {
                let default = graphs
                    .entry("default".to_string())
                    .or_insert_with(|| json!({"name": "default", "tasks": [], "metadata": {}}));
                if let Some(J::Array(tasks)) = default.get_mut("tasks") {
                    tasks.extend(groups);
                }
            }
        }
        for g in graphs.values_mut() {
            if let Some(tasks) = g.get_mut("tasks") {
                normalize_roles(tasks);
            }
        }
        map.remove("graphs");
        map.remove("deployment_tasks");
        map.remove("is_release");
        map.remove("is_hotpluggable");
        map.insert("graphs".to_string(), J::Object(graphs));
        map.entry("state".to_string())
            .or_insert_with(|| J::String("available".to_string()));
        out.push(ReleaseTree {
            name: text(map.get("name")),
            version: text(map.get("version")),
            operating_system: text(map.get("operating_system")),
            description: text(map.get("description")),
            state: text(map.get("state")),
            data: J::Object(map),
        });
    }
    out
}

/// The version-constraint keys a record may carry.
pub const CONSTRAINT_KEYS: [&str; 2] = ["fuel_version", "openstack_version"];

fn constraint_of(record: &J, key: &str) -> Option<Result<Constraint, String>> {
    let raw = record.get(key)?;
    Some(match raw {
        J::String(s) => Constraint::parse(s).map_err(|e| e.to_string()),
        J::Number(n) => Constraint::parse(&n.to_string()).map_err(|e| e.to_string()),
        other => Err(format!("{key} must be a string constraint, not {other}")),
    })
}

/// Whether any record of a list carries a version constraint.
pub fn has_constraints(records: &[J]) -> bool {
    records
        .iter()
        .any(|r| CONSTRAINT_KEYS.iter().any(|k| r.get(*k).is_some()))
}

/// How good a satisfied record is: constrained dimensions, Fuel floor, OpenStack floor, index.
type Score = (usize, Vec<u64>, Vec<u64>, usize);

/// Keep, per `id` group, the best record for a release; see the module docs. Returns the kept
/// records in file order and the ids of dropped groups. Records without an `id` are kept.
pub fn select_records(records: &[J], release: &ReleaseVersion) -> (Vec<J>, Vec<String>) {
    if !has_constraints(records) {
        return (records.to_vec(), Vec::new());
    }
    let fuel = Version::parse(&release.fuel);
    let openstack = Version::parse(&release.openstack);
    // (score, index) of the best record per id.
    let mut best: Vec<(String, Option<Score>)> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let Some(id) = r.get("id").and_then(J::as_str) else {
            continue;
        };
        let mut dims = 0;
        let mut ok = true;
        let mut floors = (Vec::new(), Vec::new());
        for (k, have) in [("fuel_version", &fuel), ("openstack_version", &openstack)] {
            match constraint_of(r, k) {
                None => {}
                Some(Ok(c)) => {
                    dims += 1;
                    ok &= have.as_ref().is_some_and(|v| c.matches(v));
                    let floor = c.floor().map(|v| v.0.clone()).unwrap_or_default();
                    if k == "fuel_version" {
                        floors.0 = floor;
                    } else {
                        floors.1 = floor;
                    }
                }
                Some(Err(_)) => ok = false,
            }
        }
        let slot = match best.iter().position(|(b, _)| b == id) {
            Some(p) => p,
            None => {
                best.push((id.to_string(), None));
                best.len() - 1
            }
        };
        if ok {
            let score = (dims, floors.0, floors.1, i);
            let better = best[slot].1.as_ref().is_none_or(|cur| score > *cur);
            if better {
                best[slot].1 = Some(score);
            }
        }
    }
    let keep: Vec<usize> = best
        .iter()
        .filter_map(|(_, s)| s.as_ref().map(|s| s.3))
        .collect();
    let dropped = best
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(id, _)| id.clone())
        .collect();
    let kept = records
        .iter()
        .enumerate()
        .filter(|(i, r)| r.get("id").and_then(J::as_str).is_none() || keep.contains(i))
        .map(|(_, r)| {
            let mut r = r.clone();
            if let Some(o) = r.as_object_mut() {
                for k in CONSTRAINT_KEYS {
                    o.remove(k);
                }
            }
            r
        })
        .collect();
    (kept, dropped)
}

/// Per-release keys of a compatibility record and the root keys they replace.
const RECORD_KEYS: &[(&str, &str)] = &[
    ("deployment_tasks", "deployment_tasks"),
    ("roles", "roles_metadata"),
    ("node_roles", "roles_metadata"),
    ("network_roles", "network_roles_metadata"),
    ("volumes", "volumes_metadata"),
    ("components", "components_metadata"),
    ("attributes", "attributes_metadata"),
    ("environment_config", "attributes_metadata"),
    ("nic_attributes", "nic_attributes_metadata"),
    ("bond_attributes", "bond_attributes_metadata"),
    ("node_attributes", "node_attributes_metadata"),
    ("tasks", "tasks"),
];

/// A plugin as one release sees it, or `None` when no `releases[]` record is compatible
/// (Nailgun's rule: version prefixes and the operating system, case-insensitively). The result
/// is the manifest with the record's per-release keys over the root ones, `release` set to the
/// chosen record, records selected by version constraints, and `dropped_records` listing groups
/// that had no satisfied record.
pub fn for_release(pkg: &Package, release_version: &str, operating_system: &str) -> Option<J> {
    let record = pkg.release_records().iter().find(|r| {
        !is_release_record(r)
            && r.get("version")
                .and_then(Node::as_str)
                .is_some_and(|v| release_compatible(v, release_version))
            && r.get("os")
                .or_else(|| r.get("operating_system"))
                .and_then(Node::as_str)
                .is_some_and(|os| os.eq_ignore_ascii_case(operating_system))
    })?;
    let mut tree = pkg.manifest();
    let rec = record.to_json();
    let map = tree.as_object_mut()?;
    for (from, to) in RECORD_KEYS {
        if let Some(v) = rec.get(*from).filter(|v| !v.is_string()) {
            map.insert((*to).to_string(), v.clone());
        }
    }
    if let Some(roles) = map.get_mut("roles_metadata") {
        let groups = role_group_tasks(roles);
        strip_role_tasks(roles);
        if !groups.is_empty() {
            let tasks = map
                .entry("deployment_tasks")
                .or_insert_with(|| J::Array(Vec::new()));
            if let J::Array(list) = tasks {
                list.extend(groups);
            }
        }
    }
    if let Some(tasks) = map.get_mut("deployment_tasks") {
        normalize_roles(tasks);
    }
    let version = ReleaseVersion::parse(release_version);
    let mut dropped = Vec::new();
    for key in ["deployment_tasks", "network_roles_metadata"] {
        if let Some(J::Array(list)) = map.get(key) {
            let (kept, gone) = select_records(list, &version);
            dropped.extend(gone);
            map.insert(key.to_string(), J::Array(kept));
        }
    }
    if let Some(J::Array(graphs)) = rec.get("graphs") {
        let mut out = Vec::new();
        for g in graphs {
            let mut g = g.clone();
            if let Some(J::Array(tasks)) = g.get("tasks") {
                let (kept, gone) = select_records(tasks, &version);
                dropped.extend(gone);
                g["tasks"] = J::Array(kept);
            }
            out.push(g);
        }
        map.insert("graphs".to_string(), J::Array(out));
    }
    map.insert("release".to_string(), rec);
    map.insert(
        "dropped_records".to_string(),
        J::Array(dropped.into_iter().map(J::String).collect()),
    );
    Some(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_record_per_group() {
        let records = vec![
            json!({"id": "a", "v": "any"}),
            json!({"id": "a", "fuel_version": ">=9", "v": "9+"}),
            json!({"id": "a", "fuel_version": ">=10", "v": "10+"}),
            json!({"id": "b", "openstack_version": "==2014.2,==2015.1", "v": "juno/kilo"}),
            json!({"id": "c", "v": "plain"}),
        ];
        let newton = ReleaseVersion::parse("newton-10.0.0");
        let (kept, dropped) = select_records(&records, &newton);
        let vs: Vec<&str> = kept.iter().map(|r| r["v"].as_str().unwrap()).collect();
        assert_eq!(vs, ["10+", "plain"]);
        assert_eq!(dropped, ["b"]);
        assert!(kept[0].get("fuel_version").is_none());
        let kilo = ReleaseVersion::parse("2015.1.0-7.0");
        let (kept, _) = select_records(&records, &kilo);
        let vs: Vec<&str> = kept.iter().map(|r| r["v"].as_str().unwrap()).collect();
        assert_eq!(vs, ["any", "juno/kilo", "plain"]);
    }

    #[test]
    fn role_tasks_become_groups() {
        let roles =
            json!({"controller": {"name": "C", "tasks": ["a", "b"], "fault_tolerance": "0%"}});
        let g = role_group_tasks(&roles);
        assert_eq!(
            g[0],
            json!({"id": "controller", "type": "group", "role": ["controller"], "tasks": ["a", "b"],
                   "parameters": {"strategy": {"type": "parallel"}}, "fault_tolerance": "0%"})
        );
    }
}
