//! The validator: every rule a package must pass, as diagnostics (error / warning / info) with
//! file, line, column and field. It runs fuel-plugin-builder 4.2.0's checks for package versions
//! 1.0.0–5.0.0 ([`super::schema`]), the release-as-plugin spec's lists (research/fuel.md §4.4),
//! the v5 rules, stage-postfix syntax (through [`crate::engine::order::parse_stage`]) and
//! version-constraint syntax. Pure: the package arrives loaded, files through the trait.
//!
//! Levels: an error refuses installation; a warning is something that works but is deprecated
//! or probably a mistake; an info says what the loader did (a folder kept, a graph found).

use super::diag::{Diagnostics, join};
use super::files::PackageFiles;
use super::load::{Package, PackageVersion, is_release_record, load};
use super::release::{CONSTRAINT_KEYS, ReleaseTree, releases};
use super::schema::{self, Kind, describe, expect, opt, required};
use super::version::{Constraint, Version};
use super::yaml::{Node, Pos, Value};

/// What checking a package produced.
#[derive(Debug, Clone)]
pub struct Report {
    pub package: Package,
    pub diagnostics: Diagnostics,
    /// The releases the package defines (empty for ordinary plugins).
    pub releases: Vec<ReleaseTree>,
}

impl Report {
    /// No errors: the package may be installed.
    pub fn is_valid(&self) -> bool {
        !self.diagnostics.has_errors()
    }
}

/// Load and validate a package.
pub fn check(files: &dyn PackageFiles) -> Report {
    let package = load(files);
    let diagnostics = validate(&package, files);
    let releases = if diagnostics.has_errors() {
        Vec::new()
    } else {
        releases(&package)
    };
    Report {
        package,
        diagnostics,
        releases,
    }
}

/// Syntax check of a `yaql_exp` expression with stoker's YAQL parser; the error names yaql's
/// exception class and the character where parsing failed.
pub fn yaql_syntax(expr: &str) -> Result<(), String> {
    crate::yaql::check_syntax(expr).map_err(|e| match e.position {
        Some(at) => format!("{e} (at character {at})"),
        None => e.to_string(),
    })
}

/// Where a task list came from, which decides the rules that apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskSource {
    /// The plugin's `deployment_tasks.yaml` (or a per-release `deployment_tasks_path`).
    PluginFile,
    /// A graph (`graphs[].tasks`) or a release's `deployment_tasks`.
    Graph,
}

/// A field prefix for nodes loaded from another file: field paths are relative to each file.
fn prefix(node: &Node, pkg: &Package, field: &str) -> String {
    if &*node.pos.file == pkg.metadata_file.as_str() {
        field.to_string()
    } else {
        String::new()
    }
}

fn version_at_least(text: &str, min: &str) -> bool {
    match (Version::parse(text), Version::parse(min)) {
        (Some(a), Some(b)) => {
            let n = a.0.len().max(b.0.len());
            let pad = |v: &Version| {
                let mut p = v.0.clone();
                p.resize(n, 0);
                p
            };
            pad(&a) >= pad(&b)
        }
        _ => false,
    }
}

fn normalized(name: &str) -> String {
    name.to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Walk a task for `{yaql_exp: ...}` values.
fn yaql_in(node: &Node, field: &str, d: &mut Diagnostics) {
    match &node.value {
        Value::Map(entries) => {
            if let Some(expr) = node.get("yaql_exp") {
                match expr.as_str() {
                    Some(s) => {
                        if let Err(m) = yaql_syntax(s) {
                            d.error(&expr.pos, &join(field, "yaql_exp"), m);
                        }
                    }
                    None => d.error(
                        &expr.pos,
                        &join(field, "yaql_exp"),
                        format!("must be a string expression, not {}", describe(expr)),
                    ),
                }
            }
            for (k, v) in entries {
                yaql_in(v, &join(field, &k.text), d);
            }
        }
        Value::Seq(items) => {
            for (i, v) in items.iter().enumerate() {
                yaql_in(v, &join(field, i), d);
            }
        }
        _ => {}
    }
}

fn has_truthy(task: &Node, key: &str) -> bool {
    match task.get(key).map(|n| &n.value) {
        None | Some(Value::Null) => false,
        Some(Value::Str(s)) => !s.is_empty(),
        Some(Value::Seq(l)) => !l.is_empty(),
        Some(Value::Map(m)) => !m.is_empty(),
        Some(Value::Bool(b)) => *b,
        Some(_) => true,
    }
}

/// Check a list of deployment tasks.
fn check_tasks(
    pv: PackageVersion,
    list: &Node,
    source: TaskSource,
    field: &str,
    d: &mut Diagnostics,
) {
    if !expect(list, Kind::Array, field, d) {
        return;
    }
    let types = schema::task_types(pv, source == TaskSource::Graph);
    let mut ids: Vec<(String, bool, Pos)> = Vec::new();
    let mut groups_used: Vec<(Pos, String)> = Vec::new();
    for (i, task) in list.as_seq().unwrap_or(&[]).iter().enumerate() {
        let f = join(field, i);
        let Some(ty) = schema::task_common(task, &types, &f, d) else {
            continue;
        };
        if pv == PackageVersion::V3 {
            schema::task_v3(task, &f, d);
        } else {
            schema::task_v4(task, &f, source == TaskSource::PluginFile, d);
        }
        let id = task
            .get("id")
            .and_then(Node::as_str)
            .unwrap_or("?")
            .to_string();
        if pv >= PackageVersion::V4
            && ty != "stage"
            && !["roles", "groups", "role", "tags"]
                .iter()
                .any(|k| has_truthy(task, k))
        {
            d.warning(
                &task.pos,
                &f,
                format!("task {id} has no roles, groups, role or tags: it may run on no node"),
            );
        }
        if pv >= PackageVersion::V5 {
            if ty == "group" && source == TaskSource::PluginFile {
                d.error(
                    &task.get("type").map_or(task.pos.clone(), |t| t.pos.clone()),
                    &join(&f, "type"),
                    format!(
                        "type: group is not allowed in deployment_tasks.yaml with package \
                         5.0.0; declare the role's tasks in node_roles.yaml (tasks: [...]) for \
                         group {id}"
                    ),
                );
            }
            if !matches!(ty, "stage" | "group") {
                match task.get("version").and_then(Node::as_str) {
                    Some(v) if version_at_least(v, "2.0.0") => {}
                    Some(v) => d.error(
                        &task
                            .get("version")
                            .map_or(task.pos.clone(), |x| x.pos.clone()),
                        &join(&f, "version"),
                        format!("task {id} has version {v}; package 5.0.0 needs 2.0.0 or later"),
                    ),
                    None => d.error(
                        &task.pos,
                        &join(&f, "version"),
                        format!(
                            "task {id} has no version; package 5.0.0 needs version: 2.0.0 or later"
                        ),
                    ),
                }
            }
            if let Some(g) = task.key("groups") {
                groups_used.push((g.pos.clone(), join(&f, "groups")));
            }
        }
        let mut constrained = false;
        for key in CONSTRAINT_KEYS {
            let Some(c) = task.get(key) else {
                continue;
            };
            constrained = true;
            let text = match &c.value {
                Value::Str(s) => s.clone(),
                Value::Int(i) => i.to_string(),
                Value::Float(x) => x.to_string(),
                _ => {
                    d.error(
                        &c.pos,
                        &join(&f, key),
                        format!("must be a version constraint string, not {}", describe(c)),
                    );
                    continue;
                }
            };
            if let Err(e) = Constraint::parse(&text) {
                d.error(&c.pos, &join(&f, key), e.to_string());
            }
        }
        if let Some((_, prev_constrained, prev)) = ids.iter().find(|(x, _, _)| *x == id)
            && !constrained
            && !prev_constrained
        {
            d.warning(
                &task.pos,
                &f,
                format!(
                    "task {id} is defined twice (also at line {}) without fuel_version or \
                     openstack_version constraints; the later one wins",
                    prev.line
                ),
            );
        }
        ids.push((id, constrained, task.pos.clone()));
        yaql_in(task, &f, d);
    }
    // One warning per task list, at the first use.
    if let Some((pos, field)) = groups_used.first() {
        let more = match groups_used.len() {
            1 => String::new(),
            n => format!(" ({n} tasks use it)"),
        };
        d.warning(
            pos,
            field,
            format!("groups is deprecated with package 5.0.0; use roles{more}"),
        );
    }
}

/// Check the loaded metadata blocks of a release record or a per-release record.
fn check_blocks(
    pv: PackageVersion,
    pkg: &Package,
    record: &Node,
    field: &str,
    d: &mut Diagnostics,
) {
    let mut sub = Diagnostics::default();
    for (key, check) in [
        ("roles", 0),
        ("node_roles", 0),
        ("network_roles", 1),
        ("volumes", 2),
        ("components", 3),
    ] {
        let Some(n) = record.get(key) else {
            continue;
        };
        if n.as_str().is_some() {
            continue;
        }
        let here = prefix(n, pkg, &join(field, key));
        let mut inner = Diagnostics::default();
        match check {
            0 => schema::node_roles(n, pv >= PackageVersion::V5, &mut inner),
            1 => schema::network_roles(n, &mut inner),
            2 => schema::volumes(n, &mut inner),
            _ => schema::components(n, &mut inner),
        }
        for mut diag in inner.0 {
            diag.field = join(&here, &diag.field).trim_end_matches('.').to_string();
            if diag.field.ends_with('.') || diag.field.is_empty() {
                diag.field = here.clone();
            }
            sub.0.push(diag);
        }
    }
    d.0.extend(sub.0);
    for key in [
        "attributes",
        "vmware_attributes",
        "node_attributes",
        "nic_attributes",
        "bond_attributes",
        "networks",
    ] {
        if let Some(n) = record.get(key)
            && !n.is_null()
            && n.as_str().is_none()
        {
            expect(n, Kind::Object, &prefix(n, pkg, &join(field, key)), d);
        }
    }
    if let Some(tasks) = record.get("deployment_tasks")
        && tasks.as_str().is_none()
    {
        let source = if is_release_record(record) {
            TaskSource::Graph
        } else {
            TaskSource::PluginFile
        };
        check_tasks(
            pv,
            tasks,
            source,
            &prefix(tasks, pkg, &join(field, "deployment_tasks")),
            d,
        );
    }
}

fn check_graphs(
    pv: PackageVersion,
    pkg: &Package,
    record: &Node,
    field: &str,
    d: &mut Diagnostics,
) {
    let Some(graphs) = record.get("graphs") else {
        return;
    };
    let gf = join(field, "graphs");
    if !expect(graphs, Kind::Array, &gf, d) {
        return;
    }
    const KEYS: [&str; 5] = ["type", "name", "tasks", "tasks_path", "metadata"];
    let mut seen: Vec<&str> = Vec::new();
    for (i, g) in graphs.as_seq().unwrap_or(&[]).iter().enumerate() {
        let f = join(&gf, i);
        if !expect(g, Kind::Object, &f, d) {
            continue;
        }
        required(g, &["type"], &f, d);
        for (k, _) in g.as_map().unwrap_or(&[]) {
            if !KEYS.contains(&k.text.as_str()) {
                d.error(
                    &k.pos,
                    &join(&f, &k.text),
                    format!(
                        "unknown graph key {:?}; a graph has {}",
                        k.text,
                        KEYS.join(", ")
                    ),
                );
            }
        }
        if let Some(t) = opt(g, "type", Kind::Str, &f, d).and_then(Node::as_str) {
            if seen.contains(&t) {
                d.error(
                    &g.pos,
                    &join(&f, "type"),
                    format!("a second {t} graph; each type may appear once"),
                );
            }
            seen.push(t);
            d.info(&g.pos, &f, format!("graph: {t}"));
        }
        opt(g, "name", Kind::Str, &f, d);
        opt(g, "metadata", Kind::Object, &f, d);
        match g.get("tasks") {
            Some(tasks) if tasks.is_null() => {}
            Some(tasks) => check_tasks(
                pv,
                tasks,
                TaskSource::Graph,
                &prefix(tasks, pkg, &join(&f, "tasks")),
                d,
            ),
            None if g.get("tasks_path").is_none() => {
                d.warning(&g.pos, &f, "the graph has no tasks");
            }
            None => {}
        }
    }
}

fn check_release_record(
    pv: PackageVersion,
    pkg: &Package,
    record: &Node,
    field: &str,
    d: &mut Diagnostics,
) {
    let rec = record;
    // The template fills in what the record leaves out.
    let merged = super::release::with_base(rec);
    let name_key = if merged.get("name").is_none() && merged.get("release_name").is_some() {
        if let Some(k) = rec.key("release_name") {
            d.warning(
                &k.pos,
                &join(field, "release_name"),
                "release_name is accepted as an alias of name; prefer name",
            );
        }
        "release_name"
    } else {
        "name"
    };
    let os_key = if merged.get("operating_system").is_none() && merged.get("os").is_some() {
        "os"
    } else {
        "operating_system"
    };
    for key in [name_key, "description", os_key, "version"] {
        match merged.get(key) {
            None => d.error(
                &rec.pos,
                &join(field, key),
                format!(
                    "a release (is_release: true) needs {key}{}",
                    match key {
                        "name" => " (release_name is accepted too)",
                        "operating_system" => " (os is accepted too)",
                        _ => "",
                    }
                ),
            ),
            Some(n) => {
                expect(n, Kind::Str, &prefix(n, pkg, &join(field, key)), d);
            }
        }
    }
    if let Some(k) = rec.key("is_hotpluggable") {
        d.info(
            &k.pos,
            &join(field, "is_hotpluggable"),
            "is_hotpluggable is ignored for releases",
        );
    }
    for key in ["mode", "modes"] {
        if let Some(k) = rec.key(key) {
            d.warning(
                &k.pos,
                &join(field, key),
                format!("{key} is deprecated with package 5.0.0"),
            );
        }
    }
    if let Some(b) = rec.get("base_release")
        && b.as_map().is_none()
    {
        d.error(
            &b.pos,
            &join(field, "base_release"),
            format!(
                "the release template must be a mapping, not {}",
                describe(b)
            ),
        );
    }
    check_blocks(pv, pkg, &merged, field, d);
    check_graphs(pv, pkg, &merged, field, d);
    let has_default = merged.get("deployment_tasks").is_some()
        || merged
            .get("graphs")
            .and_then(Node::as_seq)
            .is_some_and(|gs| {
                gs.iter()
                    .any(|g| g.get("type").and_then(Node::as_str) == Some("default"))
            })
        || merged.get("roles").is_some_and(|r| {
            r.as_map()
                .is_some_and(|m| m.iter().any(|(_, role)| role.get("tasks").is_some()))
        });
    if !has_default {
        d.warning(&rec.pos, field, "the release has no default deployment graph (graphs: [{type: default ...}] or deployment_tasks_path)");
    }
}

/// Validate a loaded package.
pub fn validate(pkg: &Package, files: &dyn PackageFiles) -> Diagnostics {
    let mut d = pkg.diagnostics.clone();
    let meta = &pkg.metadata;
    if meta.as_map().is_none() {
        return d.sorted();
    }
    let pv = match meta.get("package_version") {
        None => {
            d.error(
                &meta.pos,
                "package_version",
                "package_version is required (1.0.0 to 5.0.0)",
            );
            return d.sorted();
        }
        Some(n) => match pkg.package_version {
            Some(v) => v,
            None => {
                d.error(
                    &n.pos,
                    "package_version",
                    format!("package_version {} is not supported: stoker reads 1.0.0, 2.0.0, 3.0.0, 4.0.0 and 5.0.0 (quote it: '5.0.0')", describe(n)),
                );
                return d.sorted();
            }
        },
    };
    let records = pkg.release_records();
    let release_records: Vec<(usize, &Node)> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| is_release_record(r))
        .collect();
    let is_release = !release_records.is_empty();

    // metadata.yaml: required fields and types.
    let mut req = schema::required_metadata(pv);
    if pv >= PackageVersion::V5 {
        req.retain(|k| *k != "fuel_version");
        if is_release {
            req.retain(|k| {
                !matches!(
                    *k,
                    "is_hotpluggable" | "licenses" | "authors" | "homepage" | "groups"
                )
            });
        }
    }
    required(meta, &req, "", &mut d);
    schema::metadata_fields(pv, meta, &mut d);
    if let Some(fv) = meta.get("fuel_version") {
        if pv >= PackageVersion::V5
            && let Some(k) = meta.key("fuel_version")
        {
            d.warning(&k.pos, "fuel_version", "fuel_version is deprecated with package 5.0.0; the releases list says what the plugin works with");
        }
        for (i, v) in fv.as_seq().unwrap_or(&[]).iter().enumerate() {
            if let Some(s) = v.as_str()
                && !version_at_least(s, pv.min_fuel())
            {
                d.error(
                    &v.pos,
                    &join("fuel_version", i),
                    format!(
                        "package format {} is not compatible with Fuel {s}: Fuel must be {} or \
                         later; remove {s} or use an older package_version",
                        pv.as_str(),
                        pv.min_fuel()
                    ),
                );
            }
        }
    }
    if pv >= PackageVersion::V5 {
        for key in ["mode", "modes"] {
            if let Some(k) = meta.key(key) {
                d.warning(
                    &k.pos,
                    key,
                    format!("{key} is deprecated with package 5.0.0"),
                );
            }
        }
    }

    // releases[]
    if let Some(list) = meta.get("releases") {
        if expect(list, Kind::Array, "releases", &mut d) && records.is_empty() {
            d.warning(
                &list.pos,
                "releases",
                "the plugin lists no release, so it can be used with none",
            );
        }
        for (i, record) in records.iter().enumerate() {
            let field = join("releases", i);
            if is_release_record(record) {
                if pv < PackageVersion::V5 {
                    let at = record
                        .key("is_release")
                        .map_or(record.pos.clone(), |k| k.pos.clone());
                    d.error(
                        &at,
                        &join(&field, "is_release"),
                        "releases as plugins (is_release: true) need package_version 5.0.0",
                    );
                }
                check_release_record(pv, pkg, record, &field, &mut d);
            } else {
                schema::compat_release(pv, record, &field, &mut d);
                if pv >= PackageVersion::V5 {
                    for key in ["mode", "modes"] {
                        if let Some(k) = record.key(key) {
                            d.warning(
                                &k.pos,
                                &join(&field, key),
                                format!("{key} is deprecated with package 5.0.0"),
                            );
                        }
                    }
                    check_blocks(pv, pkg, record, &field, &mut d);
                    check_graphs(pv, pkg, record, &field, &mut d);
                }
            }
            // FPB: the scripts and repository folders must exist.
            let mut missing = Vec::new();
            for key in ["deployment_scripts_path", "repository_path"] {
                if let Some(p) = record.get(key).and_then(Node::as_str)
                    && !files.is_dir(p)
                {
                    missing.push((
                        key,
                        p,
                        record
                            .get(key)
                            .map_or(record.pos.clone(), |n| n.pos.clone()),
                    ));
                }
            }
            for (key, p, pos) in missing {
                d.error(
                    &pos,
                    &join(&field, key),
                    format!("cannot find the folder {p:?} in the package"),
                );
            }
        }
        if is_release && release_records.len() < records.len() {
            let (i, _) = records
                .iter()
                .enumerate()
                .find(|(_, r)| !is_release_record(r))
                .unwrap_or((0, &records[0]));
            d.error(
                &records[i].pos,
                &join("releases", i),
                "a plugin carries releases (is_release: true) or extends releases, not both; \
                 move the release extensions to another plugin",
            );
        }
        if release_records.len() > 1 {
            d.warning(&list.pos, "releases", format!("the plugin defines {} releases; one release per plugin is easier to remove and update", release_records.len()));
        }
        let plugin_name = pkg.name();
        for (i, r) in &release_records {
            let merged = super::release::with_base(r);
            let rname = merged
                .get("name")
                .or_else(|| merged.get("release_name"))
                .and_then(Node::as_str);
            if let Some(rname) = rname
                && !plugin_name.is_empty()
                && normalized(rname) != normalized(plugin_name)
            {
                d.warning(
                    &r.pos,
                    &join(&join("releases", i), "name"),
                    format!(
                        "the plugin name {plugin_name:?} differs from the release name {rname:?}"
                    ),
                );
            }
        }
    }

    // Fixed-name files.
    let file_pos = |name: &str| Pos::file(name);
    for lf in &pkg.files {
        let name = lf.spec.file;
        let node = lf.node.as_ref();
        let mut inner = Diagnostics::default();
        match name {
            "tasks.yaml" => {
                let must_exist = pv <= PackageVersion::V2;
                if !lf.exists {
                    if must_exist {
                        inner.error(
                            &file_pos(name),
                            "",
                            format!("tasks.yaml is required with package {}", pv.as_str()),
                        );
                    }
                } else if let Some(n) = node {
                    if n.is_null() && pv <= PackageVersion::V3 {
                        inner.error(
                            &file_pos(name),
                            "",
                            "tasks.yaml is empty; write [] for no tasks",
                        );
                    }
                    schema::legacy_tasks(pv, n, &mut inner);
                    let non_empty = n.as_seq().is_some_and(|l| !l.is_empty());
                    if non_empty && pv == PackageVersion::V5 {
                        inner.error(&n.pos, "", "legacy tasks (tasks.yaml) are not supported with package 5.0.0; move them to deployment_tasks.yaml");
                    } else if non_empty && pv == PackageVersion::V4 {
                        inner.warning(&n.pos, "", "legacy tasks (tasks.yaml) are deprecated with package 4.0.0; Fuel 9+ refuses to enable such a plugin unless propagate_task_deploy is set, stoker runs them by stage postfix");
                    }
                }
            }
            "environment_config.yaml" => {
                if !lf.exists {
                    if !(pv >= PackageVersion::V5 && is_release) {
                        inner.error(
                            &file_pos(name),
                            "",
                            "environment_config.yaml is required (an empty attributes: {} will do)",
                        );
                    }
                } else if let Some(n) = node {
                    schema::env_config(pv, n, &mut inner);
                }
            }
            "deployment_tasks.yaml" => {
                if !lf.exists {
                    if !(pv >= PackageVersion::V5 && is_release) {
                        inner.error(
                            &file_pos(name),
                            "",
                            format!(
                                "deployment_tasks.yaml is required with package {} ([] for none)",
                                pv.as_str()
                            ),
                        );
                    }
                } else if let Some(n) = node {
                    if n.is_null() {
                        inner.error(
                            &file_pos(name),
                            "",
                            "deployment_tasks.yaml is empty; write [] for no tasks",
                        );
                    } else {
                        check_tasks(pv, n, TaskSource::PluginFile, "", &mut inner);
                    }
                }
            }
            "network_roles.yaml" => {
                if let Some(n) = node {
                    schema::network_roles(n, &mut inner);
                }
            }
            "node_roles.yaml" => {
                if let Some(n) = node {
                    schema::node_roles(n, pv >= PackageVersion::V5, &mut inner);
                    role_group_clashes(pkg, n, &mut inner);
                }
            }
            "volumes.yaml" => {
                if let Some(n) = node {
                    schema::volumes(n, &mut inner);
                }
            }
            "components.yaml" => {
                if let Some(n) = node {
                    schema::components(n, &mut inner);
                }
            }
            "nic_config.yaml" | "bond_config.yaml" => {
                if let Some(n) = node {
                    schema::nic_attributes(n, &mut inner);
                }
            }
            "node_config.yaml" => {
                if let Some(n) = node {
                    schema::node_attributes(n, &mut inner);
                }
            }
            _ => {}
        }
        d.0.extend(inner.0);
    }
    d.sorted()
}

/// A role's `tasks:` makes a group task named after the role: it must not clash with a task of
/// `deployment_tasks.yaml`.
fn role_group_clashes(pkg: &Package, roles: &Node, d: &mut Diagnostics) {
    let Some(tasks) = pkg
        .file_node("deployment_tasks.yaml")
        .and_then(Node::as_seq)
    else {
        return;
    };
    for (key, role) in roles.as_map().unwrap_or(&[]) {
        if role.get("tasks").is_none() {
            continue;
        }
        if let Some(t) = tasks
            .iter()
            .find(|t| t.get("id").and_then(Node::as_str) == Some(key.text.as_str()))
        {
            d.error(
                &key.pos,
                &join(&key.text, "tasks"),
                format!(
                    "role {} lists tasks, which makes a group task {} — but deployment_tasks.yaml line {} already defines a task with that id",
                    key.text, key.text, t.pos.line
                ),
            );
        } else {
            d.info(
                &key.pos,
                &join(&key.text, "tasks"),
                format!(
                    "role {} becomes a group task of its tasks (a stoker extension)",
                    key.text
                ),
            );
        }
    }
}
