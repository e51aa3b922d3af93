//! The shape checks of fuel-plugin-builder 4.2.0's validators, file by file, as Rust code
//! rather than JSON schemas: `metadata.yaml`, legacy `tasks.yaml`, `environment_config.yaml`,
//! `deployment_tasks.yaml` (v3 and v4+ task schemas), `network_roles.yaml`, `node_roles.yaml`,
//! `volumes.yaml`, `components.yaml`, and the v5 NIC/bond/node attribute files. Unlike FPB, every
//! problem is reported, not just the first. Pure.

use super::diag::{Diagnostics, join};
use super::load::PackageVersion;
use super::yaml::{Node, Value};

/// What a field may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Str,
    Int,
    Bool,
    Array,
    Object,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Int => "an integer",
            Kind::Bool => "a boolean",
            Kind::Array => "a list",
            Kind::Object => "a mapping",
        }
    }

    fn holds(self, n: &Node) -> bool {
        matches!(
            (self, &n.value),
            (Kind::Str, Value::Str(_))
                | (Kind::Int, Value::Int(_))
                | (Kind::Bool, Value::Bool(_))
                | (Kind::Array, Value::Seq(_))
                | (Kind::Object, Value::Map(_))
        )
    }
}

/// Error unless `n` is of `kind`; returns whether it is.
pub fn expect(n: &Node, kind: Kind, field: &str, d: &mut Diagnostics) -> bool {
    if kind.holds(n) {
        return true;
    }
    d.error(
        &n.pos,
        field,
        format!("must be {}, not {}", kind.name(), describe(n)),
    );
    false
}

/// A value for messages: `string "x"`, `integer 5`, `null`, `a list`.
pub fn describe(n: &Node) -> String {
    match &n.value {
        Value::Str(s) => format!("the string {s:?}"),
        Value::Int(i) => format!("the integer {i}"),
        Value::Float(f) => format!("the number {f}"),
        Value::Bool(b) => format!("{b}"),
        Value::Null => "null (empty)".to_string(),
        Value::Seq(_) => "a list".to_string(),
        Value::Map(_) => "a mapping".to_string(),
    }
}

/// Check an optional key's type; returns the node when present and of the right kind.
pub fn opt<'a>(
    parent: &'a Node,
    key: &str,
    kind: Kind,
    field: &str,
    d: &mut Diagnostics,
) -> Option<&'a Node> {
    let n = parent.get(key)?;
    expect(n, kind, &join(field, key), d).then_some(n)
}

/// Error for each missing required key.
pub fn required(n: &Node, keys: &[&str], field: &str, d: &mut Diagnostics) {
    if n.as_map().is_none() {
        return;
    }
    for key in keys {
        if n.get(key).is_none() {
            d.error(
                &n.pos,
                &join(field, key),
                format!("{key:?} is required{}", where_(field)),
            );
        }
    }
}

fn where_(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!(" in {field}")
    }
}

/// A list of strings.
pub fn string_list(n: &Node, field: &str, d: &mut Diagnostics) -> bool {
    if !expect(n, Kind::Array, field, d) {
        return false;
    }
    let mut ok = true;
    for (i, item) in n.as_seq().unwrap_or(&[]).iter().enumerate() {
        ok &= expect(item, Kind::Str, &join(field, i), d);
    }
    ok
}

fn all_chars(s: &str, ok: impl Fn(char) -> bool) -> bool {
    !s.is_empty() && s.chars().all(ok)
}

/// `^[0-9a-zA-Z_-]+$`: task ids, role names.
pub fn is_task_name(s: &str) -> bool {
    all_chars(s, |c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub use super::load::is_plugin_name;

/// `^[0-9a-z_-]+$`: VIP names and namespaces.
fn is_lower_name(s: &str) -> bool {
    is_plugin_name(s)
}

fn is_perm(s: &str) -> bool {
    s.len() == 4 && s.chars().all(|c| ('0'..='7').contains(&c))
}

const COMPONENT_TYPES: [&str; 4] = ["hypervisor", "network", "storage", "additional_service"];

/// `type:name(:name)*`, and with `wildcard` a trailing `*` (or empty last part).
pub fn is_component_name(s: &str, wildcard: bool) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    let Some((first, rest)) = parts.split_first() else {
        return false;
    };
    if !COMPONENT_TYPES.contains(first) || rest.is_empty() {
        return false;
    }
    let seg = |p: &str| {
        all_chars(p, |c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'
        })
    };
    let (last, middle) = rest.split_last().unwrap_or((&"", &[]));
    middle.iter().all(|p| seg(p)) && (seg(last) || (wildcard && (last.is_empty() || *last == "*")))
}

/// A task role value: `/regex/` that compiles, or a name / `*` (v4+ format).
pub fn role_format(s: &str) -> Result<(), String> {
    if s.len() >= 2 && s.starts_with('/') && s.ends_with('/') {
        return regex::Regex::new(&s[1..s.len() - 1])
            .map(|_| ())
            .map_err(|e| format!("the regular expression {s} does not compile: {e}"));
    }
    if s == "*" || is_task_name(s) {
        return Ok(());
    }
    Err(format!(
        "{s:?} is not a role: use a name of letters, digits, _ and -, \"*\", or a /regexp/"
    ))
}

// ---------------------------------------------------------------------------------------------
// metadata.yaml

const GROUPS: [&str; 6] = [
    "network",
    "storage",
    "storage::cinder",
    "storage::glance",
    "hypervisor",
    "monitoring",
];

/// The metadata fields FPB requires for a package version (v5 release plugins need less:
/// `validate` relaxes those).
pub fn required_metadata(v: PackageVersion) -> Vec<&'static str> {
    let mut keys = vec![
        "name",
        "title",
        "version",
        "package_version",
        "description",
        "fuel_version",
        "releases",
    ];
    if v >= PackageVersion::V2 {
        keys.extend(["licenses", "authors", "homepage", "groups"]);
    }
    if v >= PackageVersion::V4 {
        keys.push("is_hotpluggable");
    }
    keys
}

/// Field types of `metadata.yaml` (required keys are checked by the caller).
pub fn metadata_fields(v: PackageVersion, n: &Node, d: &mut Diagnostics) {
    // The name's rule is checked by `load::check_name`, which every reader of a package runs.
    opt(n, "name", Kind::Str, "", d);
    for key in ["title", "description", "homepage"] {
        opt(n, key, Kind::Str, "", d);
    }
    if let Some(ver) = n.get("version")
        && !matches!(ver.value, Value::Str(_))
    {
        d.error(
            &ver.pos,
            "version",
            format!(
                "must be a string, not {} (quote it: '1.0.0')",
                describe(ver)
            ),
        );
    }
    for key in ["fuel_version", "licenses", "authors"] {
        if let Some(list) = n.get(key) {
            string_list(list, key, d);
        }
    }
    if let Some(groups) = opt(n, "groups", Kind::Array, "", d) {
        let mut seen = Vec::new();
        for (i, g) in groups.as_seq().unwrap_or(&[]).iter().enumerate() {
            let field = join("groups", i);
            let Some(s) = g.as_str() else {
                expect(g, Kind::Str, &field, d);
                continue;
            };
            let equipment = v >= PackageVersion::V4 && s == "equipment";
            if !GROUPS.contains(&s) && !equipment {
                d.error(
                    &g.pos,
                    &field,
                    format!(
                        "{s:?} is not a plugin group; use one of {}{}",
                        GROUPS.join(", "),
                        if v >= PackageVersion::V4 {
                            ", equipment"
                        } else {
                            ""
                        }
                    ),
                );
            }
            if seen.contains(&s) {
                d.error(&g.pos, &field, format!("group {s:?} is listed twice"));
            }
            seen.push(s);
        }
    }
    opt(n, "is_hotpluggable", Kind::Bool, "", d);
}

/// A compatibility record of `releases[]` (not `is_release`).
pub fn compat_release(v: PackageVersion, r: &Node, field: &str, d: &mut Diagnostics) {
    if !expect(r, Kind::Object, field, d) {
        return;
    }
    let os_key = if v >= PackageVersion::V5
        && r.get("os").is_none()
        && r.get("operating_system").is_some()
    {
        "operating_system"
    } else {
        "os"
    };
    let mut req = vec!["version", os_key];
    if v < PackageVersion::V5 {
        req.push("mode");
    }
    required(r, &req, field, d);
    opt(r, "version", Kind::Str, field, d);
    if let Some(os) = r.get(os_key) {
        let f = join(field, os_key);
        match os.as_str() {
            Some("ubuntu" | "centos") => {}
            Some(other)
                if v >= PackageVersion::V5
                    && matches!(other.to_ascii_lowercase().as_str(), "ubuntu" | "centos") => {}
            _ => d.error(
                &os.pos,
                &f,
                format!("must be ubuntu or centos, not {}", describe(os)),
            ),
        }
    }
    if let Some(mode) = opt(r, "mode", Kind::Array, field, d) {
        for (i, m) in mode.as_seq().unwrap_or(&[]).iter().enumerate() {
            if !matches!(m.as_str(), Some("ha" | "multinode")) {
                d.error(
                    &m.pos,
                    &join(&join(field, "mode"), i),
                    format!("must be ha or multinode, not {}", describe(m)),
                );
            }
        }
    }
    for key in ["deployment_scripts_path", "repository_path"] {
        opt(r, key, Kind::Str, field, d);
    }
}

// ---------------------------------------------------------------------------------------------
// Restrictions and attributes (environment_config.yaml, nic/bond/node config)

fn restrictions(n: &Node, field: &str, d: &mut Diagnostics) {
    if !expect(n, Kind::Array, field, d) {
        return;
    }
    let items = n.as_seq().unwrap_or(&[]);
    if items.is_empty() {
        d.error(
            &n.pos,
            field,
            "must hold at least one restriction (or be left out)",
        );
    }
    for (i, r) in items.iter().enumerate() {
        let f = join(field, i);
        match &r.value {
            Value::Str(_) => {}
            Value::Map(entries) => {
                let full = r.get("condition").is_some();
                if full {
                    opt(r, "condition", Kind::Str, &f, d);
                    opt(r, "message", Kind::Str, &f, d);
                    opt(r, "action", Kind::Str, &f, d);
                } else if entries.len() != 1 {
                    d.error(
                        &r.pos,
                        &f,
                        "a restriction is a condition string, {condition, message?, action?}, \
                         or a single {condition: message} pair",
                    );
                }
            }
            _ => {
                d.error(
                    &r.pos,
                    &f,
                    format!("a restriction cannot be {}", describe(r)),
                );
            }
        }
    }
}

/// `environment_config.yaml`.
pub fn env_config(v: PackageVersion, n: &Node, d: &mut Diagnostics) {
    if n.is_null() {
        return;
    }
    if !expect(n, Kind::Object, "", d) {
        return;
    }
    let Some(attrs) = opt(n, "attributes", Kind::Object, "", d) else {
        return;
    };
    for (key, attr) in attrs.as_map().unwrap_or(&[]) {
        let field = join("attributes", &key.text);
        if !expect(attr, Kind::Object, &field, d) {
            continue;
        }
        if key.text == "metadata" {
            opt(attr, "label", Kind::Str, &field, d);
            opt(attr, "weight", Kind::Int, &field, d);
            opt(attr, "toggleable", Kind::Bool, &field, d);
            opt(attr, "enabled", Kind::Bool, &field, d);
            if let Some(r) = attr.get("restrictions") {
                restrictions(r, &join(&field, "restrictions"), d);
            }
            if v >= PackageVersion::V4
                && let Some(g) = attr.get("group")
            {
                const META_GROUPS: [&str; 8] = [
                    "general",
                    "security",
                    "compute",
                    "network",
                    "storage",
                    "logging",
                    "openstack_services",
                    "other",
                ];
                if !g.as_str().is_some_and(|s| META_GROUPS.contains(&s)) {
                    d.error(
                        &g.pos,
                        &join(&field, "group"),
                        format!(
                            "must be one of {}, not {}",
                            META_GROUPS.join(", "),
                            describe(g)
                        ),
                    );
                }
            }
            continue;
        }
        required(attr, &["type", "label", "weight", "value"], &field, d);
        opt(attr, "type", Kind::Str, &field, d);
        opt(attr, "weight", Kind::Int, &field, d);
        opt(attr, "label", Kind::Str, &field, d);
        if let Some(value) = attr.get("value") {
            let ok = match &value.value {
                Value::Str(_) | Value::Bool(_) => true,
                Value::Map(_) => value
                    .get("generator")
                    .is_none_or(|g| matches!(g.value, Value::Str(_))),
                Value::Seq(items) => items
                    .iter()
                    .all(|i| matches!(i.value, Value::Str(_) | Value::Bool(_))),
                _ => false,
            };
            if !ok {
                d.error(
                    &value.pos,
                    &join(&field, "value"),
                    format!(
                        "must be a string, a boolean, a list of those, or {{generator: ...}}, not {}",
                        describe(value)
                    ),
                );
            }
        }
        if let Some(r) = attr.get("restrictions") {
            restrictions(r, &join(&field, "restrictions"), d);
        }
        if let Some(values) = opt(attr, "values", Kind::Array, &field, d) {
            for (i, item) in values.as_seq().unwrap_or(&[]).iter().enumerate() {
                let f = join(&join(&field, "values"), i);
                if expect(item, Kind::Object, &f, d) {
                    required(item, &["data", "label"], &f, d);
                    opt(item, "data", Kind::Str, &f, d);
                    opt(item, "label", Kind::Str, &f, d);
                }
            }
        }
    }
}

fn nic_attribute_group(n: &Node, field: &str, d: &mut Diagnostics) {
    if !expect(n, Kind::Object, field, d) {
        return;
    }
    for (key, item) in n.as_map().unwrap_or(&[]) {
        let f = join(field, &key.text);
        if key.text == "metadata" {
            if expect(item, Kind::Object, &f, d) {
                required(item, &["label"], &f, d);
                opt(item, "label", Kind::Str, &f, d);
                if let Some(r) = item.get("restrictions") {
                    restrictions(r, &join(&f, "restrictions"), d);
                }
            }
            continue;
        }
        if !is_task_name(&key.text) {
            d.error(
                &key.pos,
                &f,
                format!("{:?} is not a valid attribute name", key.text),
            );
            continue;
        }
        if expect(item, Kind::Object, &f, d) {
            required(item, &["type", "label", "value"], &f, d);
            opt(item, "label", Kind::Str, &f, d);
            opt(item, "description", Kind::Str, &f, d);
            opt(item, "type", Kind::Str, &f, d);
            if let Some(r) = item.get("restrictions") {
                restrictions(r, &join(&f, "restrictions"), d);
            }
        }
    }
}

/// `nic_config.yaml` and `bond_config.yaml`: `{metadata?, <attribute>: {type, label, value}}`.
pub fn nic_attributes(n: &Node, d: &mut Diagnostics) {
    if !n.is_null() {
        nic_attribute_group(n, "", d);
    }
}

/// `node_config.yaml`: `{<group>: {metadata?, <attribute>: {...}}}`.
pub fn node_attributes(n: &Node, d: &mut Diagnostics) {
    if n.is_null() || !expect(n, Kind::Object, "", d) {
        return;
    }
    for (key, group) in n.as_map().unwrap_or(&[]) {
        if !is_task_name(&key.text) {
            d.error(
                &key.pos,
                &key.text,
                format!("{:?} is not a valid group name", key.text),
            );
            continue;
        }
        nic_attribute_group(group, &key.text, d);
    }
}

// ---------------------------------------------------------------------------------------------
// Legacy tasks.yaml

/// `tasks.yaml` (pre/post-deployment tasks of package versions 1 and 2).
pub fn legacy_tasks(v: PackageVersion, n: &Node, d: &mut Diagnostics) {
    if n.is_null() || !expect(n, Kind::Array, "", d) {
        return;
    }
    for (i, task) in n.as_seq().unwrap_or(&[]).iter().enumerate() {
        let field = i.to_string();
        if !expect(task, Kind::Object, &field, d) {
            continue;
        }
        required(task, &["parameters", "type", "stage", "role"], &field, d);
        let types: &[&str] = if v == PackageVersion::V1 {
            &["puppet", "shell"]
        } else {
            &["puppet", "shell", "reboot"]
        };
        let ty = task.get("type");
        if let Some(t) = ty
            && !t.as_str().is_some_and(|s| types.contains(&s))
        {
            d.error(
                &t.pos,
                &join(&field, "type"),
                format!("must be one of {}, not {}", types.join(", "), describe(t)),
            );
        }
        if let Some(stage) = task.get("stage") {
            let f = join(&field, "stage");
            match stage.as_str() {
                Some(s) => match crate::engine::order::parse_stage(s) {
                    Ok(spec) if v == PackageVersion::V1 && spec.postfix.is_some() => d.error(
                        &stage.pos,
                        &f,
                        "stage postfixes (/NUMBER) need package_version 2.0.0 or later",
                    ),
                    Ok(_) => {}
                    Err(e) => d.error(&stage.pos, &f, e.to_string()),
                },
                None => {
                    expect(stage, Kind::Str, &f, d);
                }
            }
        }
        if let Some(role) = task.get("role") {
            let ok = match &role.value {
                Value::Str(s) => s == "*" || s == "master",
                Value::Seq(items) => items.iter().all(|x| matches!(x.value, Value::Str(_))),
                _ => false,
            };
            if !ok {
                d.error(
                    &role.pos,
                    &join(&field, "role"),
                    format!(
                        "must be a list of role names, \"*\" or \"master\", not {}",
                        describe(role)
                    ),
                );
            }
        }
        let Some(params) = task.get("parameters") else {
            continue;
        };
        let pf = join(&field, "parameters");
        if !expect(params, Kind::Object, &pf, d) {
            continue;
        }
        let needs: &[&str] = match ty.and_then(Node::as_str) {
            Some("puppet") => &["timeout", "puppet_modules", "puppet_manifest"],
            Some("shell") => &["timeout", "cmd"],
            _ => &["timeout"],
        };
        required(params, needs, &pf, d);
        if let Some(t) = opt(params, "timeout", Kind::Int, &pf, d)
            && matches!(t.value, Value::Int(x) if x < 0)
        {
            d.error(&t.pos, &join(&pf, "timeout"), "must not be negative");
        }
        if v >= PackageVersion::V3
            && let Some(r) = opt(params, "retries", Kind::Int, &pf, d)
            && matches!(r.value, Value::Int(x) if x < 0)
        {
            d.error(&r.pos, &join(&pf, "retries"), "must not be negative");
        }
        for key in ["puppet_modules", "puppet_manifest", "cmd"] {
            if needs.contains(&key) {
                opt(params, key, Kind::Str, &pf, d);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Deployment tasks

/// Task types a deployment task may have, by package version.
pub fn task_types(v: PackageVersion, release_graph: bool) -> Vec<&'static str> {
    let mut t = vec![
        "puppet",
        "shell",
        "group",
        "skipped",
        "copy_files",
        "sync",
        "upload_file",
        "stage",
        "reboot",
    ];
    if v >= PackageVersion::V5 || release_graph {
        // Release graphs (provisioning, deletion) use the master-side types.
        t.extend(["master_shell", "move_to_bootstrap", "erase_node"]);
    }
    t
}

fn name_list(n: &Node, field: &str, d: &mut Diagnostics) {
    if !expect(n, Kind::Array, field, d) {
        return;
    }
    for (i, item) in n.as_seq().unwrap_or(&[]).iter().enumerate() {
        let f = join(field, i);
        match item.as_str() {
            Some(s) if is_task_name(s) => {}
            Some(s) => d.error(
                &item.pos,
                &f,
                format!("{s:?} is not a task name (letters, digits, _ and -)"),
            ),
            None => {
                expect(item, Kind::Str, &f, d);
            }
        }
    }
}

fn is_yaql(n: &Node) -> bool {
    n.get("yaql_exp")
        .is_some_and(|e| matches!(e.value, Value::Str(_)))
}

fn role_value(n: &Node, field: &str, d: &mut Diagnostics) {
    let one = |item: &Node, f: &str, d: &mut Diagnostics| match item.as_str() {
        Some(s) => {
            if let Err(m) = role_format(s) {
                d.error(&item.pos, f, m);
            }
        }
        None => d.error(
            &item.pos,
            f,
            format!("a role must be a string, not {}", describe(item)),
        ),
    };
    match &n.value {
        Value::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                one(item, &join(field, i), d);
            }
        }
        _ => one(n, field, d),
    }
}

fn relations(n: &Node, field: &str, d: &mut Diagnostics) {
    if is_yaql(n) {
        return;
    }
    let Some(items) = n.as_seq() else {
        d.error(
            &n.pos,
            field,
            format!(
                "must be a list of {{name, role?, policy?}} or a {{yaql_exp}}, not {}",
                describe(n)
            ),
        );
        return;
    };
    for (i, rel) in items.iter().enumerate() {
        let f = join(field, i);
        if !expect(rel, Kind::Object, &f, d) {
            continue;
        }
        required(rel, &["name"], &f, d);
        if let Some(name) = rel.get("name")
            && !matches!(name.value, Value::Str(_))
            && !is_yaql(name)
        {
            d.error(
                &name.pos,
                &join(&f, "name"),
                "must be a string or a {yaql_exp}",
            );
        }
        if let Some(role) = rel.get("role")
            && !matches!(role.value, Value::Str(_) | Value::Seq(_))
            && !is_yaql(role)
        {
            d.error(
                &role.pos,
                &join(&f, "role"),
                "must be a string, a list or a {yaql_exp}",
            );
        }
        if let Some(p) = rel.get("policy")
            && !matches!(p.as_str(), Some("all" | "any"))
        {
            d.error(
                &p.pos,
                &join(&f, "policy"),
                format!("must be all or any, not {}", describe(p)),
            );
        }
    }
}

fn params_for(ty: &str, task: &Node, field: &str, v4: bool, strict: bool, d: &mut Diagnostics) {
    let pf = join(field, "parameters");
    let params = task.get("parameters");
    let needs_params = matches!(ty, "copy_files" | "sync" | "upload_file");
    let Some(p) = params else {
        if needs_params {
            d.error(&task.pos, &pf, format!("a {ty} task needs parameters"));
        }
        return;
    };
    if !expect(p, Kind::Object, &pf, d) {
        return;
    }
    if v4 && let Some(s) = p.get("strategy") {
        let sf = join(&pf, "strategy");
        if expect(s, Kind::Object, &sf, d) {
            required(s, &["type"], &sf, d);
            if let Some(t) = s.get("type")
                && !matches!(t.as_str(), Some("parallel" | "one_by_one"))
            {
                d.error(
                    &t.pos,
                    &join(&sf, "type"),
                    format!("must be parallel or one_by_one, not {}", describe(t)),
                );
            }
            if let Some(a) = s.get("amount")
                && !matches!(a.value, Value::Int(_))
                && !is_yaql(a)
            {
                d.error(
                    &a.pos,
                    &join(&sf, "amount"),
                    "must be an integer or a {yaql_exp}",
                );
            }
        }
    }
    let int = |key: &str, d: &mut Diagnostics| {
        opt(p, key, Kind::Int, &pf, d);
    };
    match ty {
        "puppet" => {
            // Release graphs (Fuel's own library) leave the timeout to the orchestrator's default.
            let needs: &[&str] = if strict {
                &["puppet_manifest", "puppet_modules", "timeout"]
            } else {
                &["puppet_manifest", "puppet_modules"]
            };
            required(p, needs, &pf, d);
            for key in ["puppet_manifest", "puppet_modules"] {
                if let Some(s) = opt(p, key, Kind::Str, &pf, d)
                    && s.as_str() == Some("")
                {
                    d.error(&s.pos, &join(&pf, key), "must not be empty");
                }
            }
            int("timeout", d);
            int("retries", d);
        }
        "shell" => {
            required(p, &["cmd"], &pf, d);
            if p.get("cmd").is_some_and(|c| !is_yaql(c)) {
                opt(p, "cmd", Kind::Str, &pf, d);
            }
            for key in ["retries", "interval", "timeout"] {
                int(key, d);
            }
        }
        "copy_files" => {
            required(p, &["files"], &pf, d);
            if let Some(files) = opt(p, "files", Kind::Array, &pf, d) {
                let items = files.as_seq().unwrap_or(&[]);
                if items.is_empty() {
                    d.error(
                        &files.pos,
                        &join(&pf, "files"),
                        "must list at least one {src, dst}",
                    );
                }
                for (i, f) in items.iter().enumerate() {
                    let ff = join(&join(&pf, "files"), i);
                    if expect(f, Kind::Object, &ff, d) {
                        required(f, &["src", "dst"], &ff, d);
                        opt(f, "src", Kind::Str, &ff, d);
                        opt(f, "dst", Kind::Str, &ff, d);
                    }
                }
            }
            for key in ["permissions", "dir_permissions"] {
                if let Some(s) = opt(p, key, Kind::Str, &pf, d)
                    && !s.as_str().is_some_and(is_perm)
                {
                    d.error(
                        &s.pos,
                        &join(&pf, key),
                        "must be four octal digits, like '0644'",
                    );
                }
            }
        }
        "sync" => {
            required(p, &["src", "dst"], &pf, d);
            opt(p, "src", Kind::Str, &pf, d);
            opt(p, "dst", Kind::Str, &pf, d);
            int("timeout", d);
        }
        "upload_file" => {
            required(p, &["path", "data"], &pf, d);
            opt(p, "path", Kind::Str, &pf, d);
            if p.get("data").is_some_and(|x| !is_yaql(x)) {
                opt(p, "data", Kind::Str, &pf, d);
            }
        }
        "reboot" => int("timeout", d),
        _ => {}
    }
}

/// One deployment task of a v3 package (FPB's v3 per-type schemas).
pub fn task_v3(task: &Node, field: &str, d: &mut Diagnostics) {
    let ty = task.get("type").and_then(Node::as_str).unwrap_or("");
    if matches!(
        ty,
        "shell" | "group" | "copy_files" | "sync" | "upload_file"
    ) {
        required(task, &["role"], field, d);
    }
    if let Some(role) = task.get("role") {
        let ok = match &role.value {
            Value::Str(s) => s == "*" || s == "master",
            Value::Seq(items) => items.iter().all(|i| i.as_str().is_some_and(is_task_name)),
            _ => false,
        };
        if !ok {
            d.error(
                &role.pos,
                &join(field, "role"),
                format!(
                    "must be a list of role names, \"*\" or \"master\", not {}",
                    describe(role)
                ),
            );
        }
    }
    if let Some(groups) = task.get("groups") {
        name_list(groups, &join(field, "groups"), d);
    }
    params_for(ty, task, field, false, true, d);
}

/// One deployment task of a v4/v5 package (FPB's generated task schema). `strict`: a plugin's
/// own task file (FPB's rules in full) rather than a release graph.
pub fn task_v4(task: &Node, field: &str, strict: bool, d: &mut Diagnostics) {
    let ty = task.get("type").and_then(Node::as_str).unwrap_or("");
    if let Some(id) = task.get("id")
        && let Some(s) = id.as_str()
        && s != "*"
        && !is_task_name(s)
    {
        d.error(
            &id.pos,
            &join(field, "id"),
            format!("{s:?} is not a task id (letters, digits, _ and -)"),
        );
    }
    if let Some(ver) = task.get("version") {
        let ok = ver.as_str().is_some_and(|s| {
            let parts: Vec<&str> = s.split('.').collect();
            parts.len() == 3 && parts.iter().all(|p| all_chars(p, |c| c.is_ascii_digit()))
        });
        if !ok {
            d.error(
                &ver.pos,
                &join(field, "version"),
                format!(
                    "must be a version string like '2.1.0', not {}",
                    describe(ver)
                ),
            );
        }
    }
    for key in ["role", "groups", "roles"] {
        if let Some(r) = task.get(key) {
            role_value(r, &join(field, key), d);
        }
    }
    for key in ["cross-depends", "cross-depended-by"] {
        if let Some(r) = task.get(key) {
            relations(r, &join(field, key), d);
        }
    }
    if let Some(tasks) = task.get("tasks") {
        let f = join(field, "tasks");
        if expect(tasks, Kind::Array, &f, d) {
            for (i, t) in tasks.as_seq().unwrap_or(&[]).iter().enumerate() {
                match t.as_str() {
                    Some(s) if s == "*" || is_task_name(s) => {}
                    _ => d.error(
                        &t.pos,
                        &join(&f, i),
                        format!("{} is not a task name", describe(t)),
                    ),
                }
            }
        }
    }
    if let Some(stage) = task.get("stage") {
        let f = join(field, "stage");
        match stage.as_str() {
            Some(s) => {
                if let Err(e) = crate::engine::order::parse_stage(s) {
                    d.error(&stage.pos, &f, e.to_string());
                }
            }
            None => {
                expect(stage, Kind::Str, &f, d);
            }
        }
    }
    if let Some(re) = task.get("reexecute_on") {
        let f = join(field, "reexecute_on");
        if expect(re, Kind::Array, &f, d) {
            for (i, x) in re.as_seq().unwrap_or(&[]).iter().enumerate() {
                if x.as_str() != Some("deploy_changes") {
                    d.error(
                        &x.pos,
                        &join(&f, i),
                        format!("only deploy_changes is allowed, not {}", describe(x)),
                    );
                }
            }
        }
    }
    params_for(ty, task, field, true, strict, d);
}

/// The common part of every deployment task: a mapping with `id` and a known `type`, and
/// `requires`/`required_for` lists. Returns the type when known.
pub fn task_common<'a>(
    task: &'a Node,
    types: &[&str],
    field: &str,
    d: &mut Diagnostics,
) -> Option<&'a str> {
    if !expect(task, Kind::Object, field, d) {
        return None;
    }
    required(task, &["id", "type"], field, d);
    opt(task, "id", Kind::Str, field, d);
    for key in ["requires", "required_for"] {
        if let Some(l) = task.get(key) {
            name_list(l, &join(field, key), d);
        }
    }
    let t = task.get("type")?;
    match t.as_str() {
        Some(s) if types.contains(&s) => Some(s),
        _ => {
            d.error(
                &t.pos,
                &join(field, "type"),
                format!(
                    "there is no task type {}; known types: {}",
                    describe(t),
                    types.join(", ")
                ),
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Roles, networks, volumes, components

/// `network_roles.yaml` (or a release's `network_roles`).
pub fn network_roles(n: &Node, d: &mut Diagnostics) {
    if n.is_null() || !expect(n, Kind::Array, "", d) {
        return;
    }
    for (i, r) in n.as_seq().unwrap_or(&[]).iter().enumerate() {
        let f = i.to_string();
        if !expect(r, Kind::Object, &f, d) {
            continue;
        }
        required(r, &["id", "default_mapping", "properties"], &f, d);
        opt(r, "id", Kind::Str, &f, d);
        opt(r, "default_mapping", Kind::Str, &f, d);
        let Some(p) = opt(r, "properties", Kind::Object, &f, d) else {
            continue;
        };
        let pf = join(&f, "properties");
        required(p, &["subnet", "gateway", "vip"], &pf, d);
        opt(p, "subnet", Kind::Bool, &pf, d);
        opt(p, "gateway", Kind::Bool, &pf, d);
        if let Some(vips) = opt(p, "vip", Kind::Array, &pf, d) {
            for (j, vip) in vips.as_seq().unwrap_or(&[]).iter().enumerate() {
                let vf = join(&join(&pf, "vip"), j);
                if !expect(vip, Kind::Object, &vf, d) {
                    continue;
                }
                required(vip, &["name"], &vf, d);
                for key in ["name", "namespace"] {
                    if let Some(s) = opt(vip, key, Kind::Str, &vf, d)
                        && !s.as_str().is_some_and(is_lower_name)
                    {
                        d.error(
                            &s.pos,
                            &join(&vf, key),
                            format!("{} must be lowercase letters, digits, _ and -", describe(s)),
                        );
                    }
                }
            }
        }
    }
}

fn limit_rule(n: &Node, key: &str, field: &str, d: &mut Diagnostics) {
    if let Some(x) = n.get(key)
        && !matches!(x.value, Value::Str(_) | Value::Int(_))
    {
        d.error(
            &x.pos,
            &join(field, key),
            format!("must be a string or an integer, not {}", describe(x)),
        );
    }
}

/// `node_roles.yaml` (or a release's `roles`). `allow_tasks`: v5's `tasks:` extension.
pub fn node_roles(n: &Node, allow_tasks: bool, d: &mut Diagnostics) {
    if n.is_null() || !expect(n, Kind::Object, "", d) {
        return;
    }
    for (key, role) in n.as_map().unwrap_or(&[]) {
        let f = key.text.clone();
        if !is_task_name(&key.text) {
            d.error(
                &key.pos,
                &f,
                format!(
                    "{:?} is not a valid role name (letters, digits, _ and -)",
                    key.text
                ),
            );
            continue;
        }
        if !expect(role, Kind::Object, &f, d) {
            continue;
        }
        required(role, &["name", "description"], &f, d);
        opt(role, "name", Kind::Str, &f, d);
        opt(role, "description", Kind::Str, &f, d);
        if let Some(c) = role.get("conflicts") {
            let ok = c.as_str() == Some("*")
                || c.as_seq()
                    .is_some_and(|l| l.iter().all(|x| matches!(x.value, Value::Str(_))));
            if !ok {
                d.error(
                    &c.pos,
                    &join(&f, "conflicts"),
                    "must be a list of role names or \"*\"",
                );
            }
        }
        for key in ["has_primary", "public_ip_required"] {
            opt(role, key, Kind::Bool, &f, d);
        }
        for key in ["update_required", "update_once"] {
            if let Some(l) = role.get(key) {
                string_list(l, &join(&f, key), d);
            }
        }
        opt(role, "weight", Kind::Int, &f, d);
        if let Some(limits) = opt(role, "limits", Kind::Object, &f, d) {
            let lf = join(&f, "limits");
            opt(limits, "condition", Kind::Str, &lf, d);
            for k in ["max", "recommended", "min"] {
                limit_rule(limits, k, &lf, d);
            }
            if let Some(ov) = opt(limits, "overrides", Kind::Array, &lf, d) {
                let of = join(&lf, "overrides");
                let items = ov.as_seq().unwrap_or(&[]);
                if items.is_empty() {
                    d.error(
                        &ov.pos,
                        &of,
                        "must hold at least one override (or be left out)",
                    );
                }
                for (i, o) in items.iter().enumerate() {
                    let oif = join(&of, i);
                    if expect(o, Kind::Object, &oif, d) {
                        required(o, &["condition"], &oif, d);
                        opt(o, "condition", Kind::Str, &oif, d);
                        opt(o, "message", Kind::Str, &oif, d);
                        for k in ["max", "recommended", "min"] {
                            limit_rule(o, k, &oif, d);
                        }
                    }
                }
            }
        }
        if let Some(r) = role.get("restrictions") {
            restrictions(r, &join(&f, "restrictions"), d);
        }
        if let Some(t) = role.get("tasks") {
            let tf = join(&f, "tasks");
            if allow_tasks {
                name_list(t, &tf, d);
            } else {
                d.error(
                    &t.pos,
                    &tf,
                    "a role's tasks: list needs package_version 5.0.0",
                );
            }
        }
    }
}

/// `volumes.yaml` (or a release's `volumes`).
pub fn volumes(n: &Node, d: &mut Diagnostics) {
    if n.is_null() || !expect(n, Kind::Object, "", d) {
        return;
    }
    required(n, &["volumes_roles_mapping", "volumes"], "", d);
    if let Some(map) = opt(n, "volumes_roles_mapping", Kind::Object, "", d) {
        for (key, allocs) in map.as_map().unwrap_or(&[]) {
            let f = join("volumes_roles_mapping", &key.text);
            if !is_task_name(&key.text) {
                d.error(
                    &key.pos,
                    &f,
                    format!("{:?} is not a valid role name", key.text),
                );
                continue;
            }
            if !expect(allocs, Kind::Array, &f, d) {
                continue;
            }
            let items = allocs.as_seq().unwrap_or(&[]);
            if items.is_empty() {
                d.error(&allocs.pos, &f, "must list at least one volume allocation");
            }
            for (i, a) in items.iter().enumerate() {
                let af = join(&f, i);
                if !expect(a, Kind::Object, &af, d) {
                    continue;
                }
                required(a, &["allocate_size", "id"], &af, d);
                opt(a, "id", Kind::Str, &af, d);
                if let Some(s) = a.get("allocate_size")
                    && !matches!(s.as_str(), Some("all" | "min" | "full-disk"))
                {
                    d.error(
                        &s.pos,
                        &join(&af, "allocate_size"),
                        format!("must be all, min or full-disk, not {}", describe(s)),
                    );
                }
            }
        }
    }
    if let Some(vols) = opt(n, "volumes", Kind::Array, "", d) {
        for (i, v) in vols.as_seq().unwrap_or(&[]).iter().enumerate() {
            let f = join("volumes", i);
            if expect(v, Kind::Object, &f, d) {
                required(v, &["id", "type"], &f, d);
                opt(v, "id", Kind::Str, &f, d);
                opt(v, "type", Kind::Str, &f, d);
            }
        }
    }
}

/// `components.yaml` (or a release's `components`).
pub fn components(n: &Node, d: &mut Diagnostics) {
    if n.is_null() || !expect(n, Kind::Array, "", d) {
        return;
    }
    const KEYS: [&str; 7] = [
        "name",
        "label",
        "description",
        "compatible",
        "requires",
        "incompatible",
        "bind",
    ];
    for (i, c) in n.as_seq().unwrap_or(&[]).iter().enumerate() {
        let f = i.to_string();
        if !expect(c, Kind::Object, &f, d) {
            continue;
        }
        required(c, &["name", "label"], &f, d);
        for (key, _) in c.as_map().unwrap_or(&[]) {
            if !KEYS.contains(&key.text.as_str()) {
                d.error(
                    &key.pos,
                    &join(&f, &key.text),
                    format!(
                        "unknown component key {:?}; known: {}",
                        key.text,
                        KEYS.join(", ")
                    ),
                );
            }
        }
        if let Some(name) = opt(c, "name", Kind::Str, &f, d)
            && !name.as_str().is_some_and(|s| is_component_name(s, false))
        {
            d.error(
                &name.pos,
                &join(&f, "name"),
                format!(
                    "{} is not a component name like hypervisor:name or additional_service:name",
                    describe(name)
                ),
            );
        }
        opt(c, "label", Kind::Str, &f, d);
        opt(c, "description", Kind::Str, &f, d);
        opt(c, "bind", Kind::Array, &f, d);
        for key in ["compatible", "requires", "incompatible"] {
            let Some(list) = opt(c, key, Kind::Array, &f, d) else {
                continue;
            };
            for (j, item) in list.as_seq().unwrap_or(&[]).iter().enumerate() {
                let jf = join(&join(&f, key), j);
                if !expect(item, Kind::Object, &jf, d) {
                    continue;
                }
                required(item, &["name"], &jf, d);
                opt(item, "message", Kind::Str, &jf, d);
                if let Some(name) = opt(item, "name", Kind::Str, &jf, d)
                    && !name.as_str().is_some_and(|s| is_component_name(s, true))
                {
                    d.error(
                        &name.pos,
                        &join(&jf, "name"),
                        format!(
                            "{} is not a component name (a trailing * is allowed)",
                            describe(name)
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(is_component_name("network:neutron:ml2", false));
        assert!(is_component_name("network:neutron:*", true));
        assert!(!is_component_name("network:neutron:*", false));
        assert!(!is_component_name("foo:bar", false));
        assert!(role_format("/^(primary-)?controller$/").is_ok());
        assert!(role_format("/(unclosed/").is_err());
        assert!(role_format("primary-controller").is_ok() && role_format("a b").is_err());
    }
}
