//! Nailgun's editable attributes (`/clusters/{id}/attributes`, `fuel2 env settings`): an
//! environment's settings shown in the shape of Nailgun's Settings tab and written back from it.
//!
//! The document is `{group: {metadata, attribute: {type, value, label, restrictions, regex,
//! ...}}}`: the release's `attributes_metadata.editable`, and for each plugin compatible with the
//! release a container `{metadata: {class: plugin, toggleable, enabled, chosen_id, label,
//! versions: [{metadata: {plugin_id, plugin_version, ...}, attribute: {...}}]}}` (one version per
//! installed package of that name), as Nailgun's `get_editable_attributes(all_plugins_versions)`
//! answered. Values come from the environment's settings, which keep the deployment-data shape
//! of [`super::settings`] (`common` attributes top-level, `additional_components` as
//! `{name: {enabled}}`, any other group as `{group: {name: value}}`, a toggleable group's or a
//! plugin's switch as `{group: {metadata: {enabled, chosen_id}}}`), holding only what differs
//! from the defaults.
//!
//! [`apply`] turns an edited document back into settings, as Nailgun's PATCH-like PUT: only the
//! groups and attributes sent change. Each value is checked for its type
//! ([`super::settings::Attribute::check`]), then the whole result as Nailgun's
//! `AttributesRestriction.check_data` does: `hide` restrictions skip an attribute, `disable`
//! ones refuse an enabled checkbox or group, text and numbers may not be null unless
//! `nullable`, lists keep within `min`/`max` items, and values match their `regex` (a Python
//! regular expression). Restrictions are Nailgun expressions ([`super::graph::expr`]) over the
//! models `settings` (this document), `cluster`, `version` and `networking_parameters`.
//! Where Nailgun ignored something, this refuses and names it: an unknown group or attribute, a
//! top-level key other than `editable`, a `chosen_id` that is not one of the plugin's versions.
//! Pure.

use serde_json::{Map, Value as J, json};

use super::graph::expr;
use super::settings::Attribute;
use crate::model::FieldError;

/// One installed plugin package that an environment could enable.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginAttributes {
    pub id: i64,
    pub name: String,
    pub title: String,
    pub version: String,
    /// Its `environment_config.yaml` `attributes` (a `metadata` block and attributes).
    pub attributes: J,
}

/// What an environment's attributes are made of.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The release's `attributes_metadata` (`{editable: {...}, generated: {...}}`).
    pub release: &'a J,
    /// Every plugin package compatible with the release, any order.
    pub plugins: &'a [PluginAttributes],
}

/// The models restrictions are evaluated against, besides `settings`.
#[derive(Debug, Clone, Default)]
pub struct Models {
    pub cluster: J,
    pub version: J,
    pub networking_parameters: J,
}

/// Where the value of `group`'s `attribute` lives in the settings.
fn value_path(group: &str, attribute: &str) -> Vec<String> {
    match group {
        "common" => vec![attribute.to_string()],
        "additional_components" => vec![attribute.to_string(), "enabled".to_string()],
        _ => vec![group.to_string(), attribute.to_string()],
    }
}

fn switch_path(group: &str, key: &str) -> Vec<String> {
    vec![group.to_string(), "metadata".to_string(), key.to_string()]
}

fn get<'a>(mut v: &'a J, path: &[String]) -> Option<&'a J> {
    for k in path {
        v = v.as_object()?.get(k)?;
    }
    Some(v)
}

/// Set `path` in `settings` to `value`, or remove it (and the objects it leaves empty) when
/// `value` is the default.
fn put(settings: &mut J, path: &[String], value: &J, default: &J) {
    if value == default {
        remove(settings, path);
        return;
    }
    let mut v = settings;
    for k in &path[..path.len() - 1] {
        if !v.is_object() {
            *v = J::Object(Map::new());
        }
        v = match v {
            J::Object(m) => m.entry(k.clone()).or_insert_with(|| J::Object(Map::new())),
            _ => return,
        };
    }
    if !v.is_object() {
        *v = J::Object(Map::new());
    }
    if let (J::Object(m), Some(last)) = (v, path.last()) {
        m.insert(last.clone(), value.clone());
    }
}

fn remove(settings: &mut J, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let Some(m) = settings.as_object_mut() else {
        return false;
    };
    if rest.is_empty() {
        m.remove(first);
    } else if let Some(child) = m.get_mut(first) {
        remove(child, rest);
        if child.as_object().is_some_and(Map::is_empty) {
            m.remove(first);
        }
    }
    m.is_empty()
}

fn is_toggleable(metadata: Option<&J>) -> bool {
    metadata.is_some_and(|m| {
        m.get("toggleable").and_then(J::as_bool) == Some(true) || m.get("enabled").is_some()
    })
}

/// The versions of each plugin name, in id order.
fn plugins_by_name(plugins: &[PluginAttributes]) -> Vec<(&str, Vec<&PluginAttributes>)> {
    let mut by: std::collections::BTreeMap<&str, Vec<&PluginAttributes>> = Default::default();
    for p in plugins {
        by.entry(p.name.as_str()).or_default().push(p);
    }
    by.into_iter()
        .map(|(name, mut v)| {
            v.sort_by_key(|p| p.id);
            (name, v)
        })
        .collect()
}

/// The version of plugin `name` the settings choose: `metadata.chosen_id` when it is one of
/// them, else the newest installed (the highest id).
fn chosen<'a>(settings: &J, name: &str, versions: &[&'a PluginAttributes]) -> &'a PluginAttributes {
    let id = get(settings, &switch_path(name, "chosen_id")).and_then(J::as_i64);
    versions
        .iter()
        .find(|p| Some(p.id) == id)
        .or(versions.last())
        .copied()
        .unwrap_or(versions[0])
}

/// The editable document of an environment whose settings are `settings` (`{}` gives the
/// defaults, with every plugin disabled).
pub fn editable(src: Source<'_>, settings: &J) -> J {
    let mut out = Map::new();
    let groups = src
        .release
        .get("editable")
        .and_then(J::as_object)
        .cloned()
        .unwrap_or_default();
    for (group, attrs) in groups {
        let mut attrs = attrs;
        if let Some(o) = attrs.as_object_mut() {
            let toggle = is_toggleable(o.get("metadata"));
            for (name, attr) in o.iter_mut() {
                if name == "metadata" {
                    if toggle
                        && let Some(v) = get(settings, &switch_path(&group, "enabled"))
                        && let Some(m) = attr.as_object_mut()
                    {
                        m.insert("enabled".to_string(), v.clone());
                    }
                    continue;
                }
                if let Some(v) = get(settings, &value_path(&group, name))
                    && let Some(a) = attr.as_object_mut()
                {
                    a.insert("value".to_string(), v.clone());
                }
            }
        }
        out.insert(group, attrs);
    }
    for (name, versions) in plugins_by_name(src.plugins) {
        if out.contains_key(name) {
            continue;
        }
        let chosen = chosen(settings, name, &versions);
        let enabled = get(settings, &switch_path(name, "enabled"))
            .and_then(J::as_bool)
            .unwrap_or(false);
        let each: Vec<J> = versions
            .iter()
            .map(|p| plugin_version(p, (p.id == chosen.id).then_some(settings)))
            .collect();
        out.insert(
            name.to_string(),
            json!({"metadata": {
                "class": "plugin",
                "toggleable": true,
                "weight": 70,
                "label": chosen.title,
                "enabled": enabled,
                "chosen_id": chosen.id,
                "default": false,
                "versions": each,
            }}),
        );
    }
    J::Object(out)
}

/// One version of a plugin in its container: its attributes (values from `settings` when it
/// is the chosen one) and `metadata` with its id and version.
fn plugin_version(p: &PluginAttributes, settings: Option<&J>) -> J {
    let mut attrs = p.attributes.as_object().cloned().unwrap_or_default();
    for (name, attr) in attrs.iter_mut() {
        if name == "metadata" {
            continue;
        }
        if let Some(v) = settings.and_then(|s| get(s, &value_path(&p.name, name)))
            && let Some(a) = attr.as_object_mut()
        {
            a.insert("value".to_string(), v.clone());
        }
    }
    let mut metadata = attrs
        .remove("metadata")
        .and_then(|m| m.as_object().cloned())
        .unwrap_or_default();
    metadata.insert("plugin_id".to_string(), json!(p.id));
    metadata.insert("plugin_version".to_string(), json!(p.version));
    metadata.insert("contains_legacy_tasks".to_string(), json!(false));
    attrs.insert("metadata".to_string(), J::Object(metadata));
    J::Object(attrs)
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

fn describe(v: &J) -> String {
    crate::engine::steps::describe(v)
}

/// The settings after `request` (a PUT body, `{editable: {...}}`) is applied to `settings`, or
/// every problem, each with its path in the request (`editable.<group>.<attribute>.value`).
/// `models` are what restrictions may read besides the document itself.
pub fn apply(
    src: Source<'_>,
    settings: &J,
    request: &J,
    models: &Models,
) -> Result<J, Vec<FieldError>> {
    let mut out = Vec::new();
    let Some(body) = request.as_object() else {
        return Err(vec![problem(
            "body",
            format!(
                "expected an object with \"editable\", found {}",
                describe(request)
            ),
        )]);
    };
    for key in body.keys() {
        match key.as_str() {
            "editable" => {}
            "generated" => out.push(problem(
                "generated",
                "It is not allowed to update generated attributes",
            )),
            other => out.push(problem(
                other,
                "unknown key: the attributes document has only \"editable\"",
            )),
        }
    }
    let empty = Map::new();
    let edits = match body.get("editable") {
        None => &empty,
        Some(J::Object(m)) => m,
        Some(other) => {
            out.push(problem(
                "editable",
                format!(
                    "Editable attributes should be a dictionary, found {}",
                    describe(other)
                ),
            ));
            return Err(out);
        }
    };
    let release = src
        .release
        .get("editable")
        .and_then(J::as_object)
        .cloned()
        .unwrap_or_default();
    let plugins = plugins_by_name(src.plugins);
    let mut next = settings.clone();
    for (group, sent) in edits {
        let field = format!("editable.{group}");
        let Some(sent) = sent.as_object() else {
            out.push(problem(
                field,
                format!("expected a group of attributes, found {}", describe(sent)),
            ));
            continue;
        };
        if let Some(known) = release.get(group).and_then(J::as_object) {
            let toggle = is_toggleable(known.get("metadata"));
            apply_group(group, &field, known, toggle, sent, &mut next, &mut out);
        } else if let Some((_, versions)) = plugins.iter().find(|(n, _)| n == group) {
            apply_plugin(group, &field, versions, sent, &mut next, &mut out);
        } else {
            let mut names: Vec<&str> = release.keys().map(String::as_str).collect();
            names.extend(plugins.iter().map(|(n, _)| *n));
            names.sort_unstable();
            out.push(problem(
                field,
                format!(
                    "no group of the release or of a plugin compatible with it is called \
                     {group:?}; the groups are: {}",
                    names.join(", ")
                ),
            ));
        }
    }
    if !out.is_empty() {
        return Err(out);
    }
    let doc = editable(src, &next);
    let found = check_data(&doc, models);
    if found.is_empty() {
        Ok(next)
    } else {
        Err(found)
    }
}

/// A release group's edits: the switch (`metadata.enabled`) and attribute values; the rest of
/// `metadata` and of each attribute (labels, weights, restrictions) is presentation and ignored.
fn apply_group(
    group: &str,
    field: &str,
    known: &Map<String, J>,
    toggle: bool,
    sent: &Map<String, J>,
    next: &mut J,
    out: &mut Vec<FieldError>,
) {
    for (name, attr) in sent {
        let path = format!("{field}.{name}");
        if name == "metadata" {
            if let Some(v) = attr.get("enabled") {
                if !toggle {
                    if v != known
                        .get("metadata")
                        .and_then(|m| m.get("enabled"))
                        .unwrap_or(&J::Bool(true))
                    {
                        out.push(problem(
                            format!("{path}.enabled"),
                            format!("group {group} cannot be switched off or on"),
                        ));
                    }
                } else if let Some(b) = v.as_bool() {
                    let default = known
                        .get("metadata")
                        .and_then(|m| m.get("enabled"))
                        .cloned()
                        .unwrap_or(J::Bool(false));
                    put(next, &switch_path(group, "enabled"), &J::Bool(b), &default);
                } else {
                    out.push(problem(
                        format!("{path}.enabled"),
                        format!("expected a boolean, found {}", describe(v)),
                    ));
                }
            }
            continue;
        }
        let Some(meta) = known.get(name) else {
            let mut names: Vec<&str> = known
                .keys()
                .filter(|k| *k != "metadata")
                .map(String::as_str)
                .collect();
            names.sort_unstable();
            out.push(problem(
                path,
                format!(
                    "group {group} has no attribute {name:?}; its attributes are: {}",
                    names.join(", ")
                ),
            ));
            continue;
        };
        set_value(group, name, &path, meta, attr, next, out);
    }
}

/// Check and store one attribute's sent `value` (an attribute sent without one changes nothing).
fn set_value(
    group: &str,
    name: &str,
    path: &str,
    meta: &J,
    sent: &J,
    next: &mut J,
    out: &mut Vec<FieldError>,
) {
    let Some(sent) = sent.as_object() else {
        out.push(problem(
            path,
            format!(
                "expected an attribute ({{\"value\": ...}}), found {}",
                describe(sent)
            ),
        ));
        return;
    };
    let Some(value) = sent.get("value") else {
        return;
    };
    let Some(attribute) = Attribute::from_metadata(meta) else {
        return;
    };
    // A null text or number is the restrictions' to judge ([`check_data`]: refused unless
    // `nullable`, or its group is off, or it is hidden or disabled).
    let null_allowed = value.is_null() && matches!(attribute.ty.as_str(), "text" | "number");
    if !null_allowed && let Err(m) = attribute.check(value) {
        out.push(problem(format!("{path}.value"), m));
        return;
    }
    put(next, &value_path(group, name), value, &attribute.default);
}

/// A plugin container's edits: `metadata.enabled`, `metadata.chosen_id` and the chosen
/// version's attribute values (under `metadata.versions`, as the document shows them).
fn apply_plugin(
    name: &str,
    field: &str,
    versions: &[&PluginAttributes],
    sent: &Map<String, J>,
    next: &mut J,
    out: &mut Vec<FieldError>,
) {
    for key in sent.keys().filter(|k| *k != "metadata") {
        out.push(problem(
            format!("{field}.{key}"),
            format!(
                "plugin {name}'s attributes are set in metadata.versions, under the chosen \
                 version"
            ),
        ));
    }
    let Some(meta) = sent.get("metadata") else {
        return;
    };
    let Some(meta) = meta.as_object() else {
        out.push(problem(
            format!("{field}.metadata"),
            format!("expected an object, found {}", describe(meta)),
        ));
        return;
    };
    let ids: Vec<String> = versions.iter().map(|p| p.id.to_string()).collect();
    if let Some(id) = meta.get("chosen_id") {
        match id.as_i64() {
            Some(id) if versions.iter().any(|p| p.id == id) => {
                let default = J::from(versions.last().map_or(0, |p| p.id));
                put(
                    next,
                    &switch_path(name, "chosen_id"),
                    &J::from(id),
                    &default,
                );
            }
            _ => out.push(problem(
                format!("{field}.metadata.chosen_id"),
                format!(
                    "{} is not an installed version of plugin {name}; its plugin ids are: {}",
                    describe(id),
                    ids.join(", ")
                ),
            )),
        }
    }
    if let Some(v) = meta.get("enabled") {
        match v.as_bool() {
            Some(b) => put(
                next,
                &switch_path(name, "enabled"),
                &J::Bool(b),
                &J::Bool(false),
            ),
            None => out.push(problem(
                format!("{field}.metadata.enabled"),
                format!("expected a boolean, found {}", describe(v)),
            )),
        }
    }
    let chosen = chosen(next, name, versions);
    // An enabled plugin names its version, as the settings' check wants when several are
    // installed ([`super::settings::enabled_plugins`]).
    if get(next, &switch_path(name, "enabled")).and_then(J::as_bool) == Some(true) {
        put(
            next,
            &switch_path(name, "chosen_id"),
            &J::from(chosen.id),
            &J::Null,
        );
    }
    let Some(sent_versions) = meta.get("versions") else {
        return;
    };
    let Some(list) = sent_versions.as_array() else {
        out.push(problem(
            format!("{field}.metadata.versions"),
            format!("expected a list, found {}", describe(sent_versions)),
        ));
        return;
    };
    for (i, version) in list.iter().enumerate() {
        let vfield = format!("{field}.metadata.versions[{i}]");
        let id = version
            .get("metadata")
            .and_then(|m| m.get("plugin_id"))
            .and_then(J::as_i64);
        let Some(id) = id else {
            out.push(problem(
                format!("{vfield}.metadata.plugin_id"),
                "each version names its plugin_id",
            ));
            continue;
        };
        if !versions.iter().any(|p| p.id == id) {
            out.push(problem(
                format!("{vfield}.metadata.plugin_id"),
                format!(
                    "{id} is not an installed version of plugin {name}; its plugin ids are: {}",
                    ids.join(", ")
                ),
            ));
            continue;
        }
        if id != chosen.id {
            continue;
        }
        let known = chosen.attributes.as_object().cloned().unwrap_or_default();
        let Some(attrs) = version.as_object() else {
            continue;
        };
        for (attr, sent) in attrs.iter().filter(|(k, _)| *k != "metadata") {
            let path = format!("{vfield}.{attr}");
            match known.get(attr) {
                Some(meta) => set_value(name, attr, &path, meta, sent, next, out),
                None => out.push(problem(
                    path,
                    format!("plugin {name} {} has no attribute {attr:?}", chosen.version),
                )),
            }
        }
    }
}

/// What a restriction's model path reads: `settings:` is the editable document `doc`, the
/// others are `models`. With `merged`, a plugin's attributes are read from its chosen version,
/// as Fuel's Settings tab merged them into the plugin's section (`settings:P.A.value`), its
/// switch from the container (`settings:P.metadata.enabled`).
fn lookup<'a>(
    doc: &'a J,
    models: &'a Models,
    merged: bool,
) -> impl Fn(&str, &str) -> Result<Option<J>, String> + 'a {
    move |model: &str, path: &str| -> Result<Option<J>, String> {
        let root = match model {
            "settings" => doc,
            "cluster" => &models.cluster,
            "version" => &models.version,
            "networking_parameters" => &models.networking_parameters,
            other => {
                return Err(format!(
                    "unknown model {other:?}: attribute restrictions may use settings:, \
                     cluster:, version: and networking_parameters:"
                ));
            }
        };
        let path: Vec<String> = path.split('.').map(str::to_string).collect();
        if merged
            && model == "settings"
            && let [group, attr, rest @ ..] = path.as_slice()
            && attr != "metadata"
            && let Some(container) = doc.get(group)
            && container
                .get("metadata")
                .and_then(|m| m.get("class"))
                .and_then(J::as_str)
                == Some("plugin")
        {
            let chosen = container
                .get("metadata")
                .and_then(|m| m.get("chosen_id"))
                .and_then(J::as_i64);
            return Ok(chosen_version(Some(container), chosen)
                .and_then(|v| v.get(attr))
                .and_then(|a| get(a, rest))
                .cloned());
        }
        Ok(get(root, &path).cloned())
    }
}

/// Nailgun's `AttributesRestriction.check_data` over a whole editable document: every
/// problem, each at its attribute's path.
pub fn check_data(doc: &J, models: &Models) -> Vec<FieldError> {
    let mut out = Vec::new();
    let lookup = lookup(doc, models, false);
    find_errors(doc, "editable", &lookup, &mut out);
    out
}

/// How the restrictions of one item stand (an attribute, a group with its `metadata`, or a
/// role's metadata: whatever carries `restrictions`), as Fuel's Settings tab showed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restricted {
    /// A `hide` restriction holds: the item is not shown, and not checked.
    pub hidden: bool,
    /// A `disable` restriction holds: shown, not changeable (a checkbox or group may not be on).
    pub disabled: bool,
    /// The messages of the restrictions that hold (`hide`, `disable` and `none` alike), or
    /// their conditions when they have no message.
    pub messages: Vec<String>,
}

/// The restrictions of `item` evaluated over the editable document `doc` and `models`; a
/// condition that cannot be read counts as not holding and is said in the messages.
pub fn restricted(item: &J, doc: &J, models: &Models) -> Restricted {
    let mut out = Restricted::default();
    for c in conditions(item, doc, models) {
        match (&c.error, c.holds) {
            (Some(e), _) => out.messages.push(e.clone()),
            (None, true) => {
                match c.action.as_str() {
                    "hide" => out.hidden = true,
                    "disable" => out.disabled = true,
                    _ => {}
                }
                out.messages.push(c.message);
            }
            (None, false) => {}
        }
    }
    out
}

/// One restriction of an item, evaluated, and in the form a browser can evaluate again while
/// the operator edits the Settings form.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// `hide`, `disable`, or `none` (only its message).
    pub action: String,
    /// Its message, or its condition when it has none.
    pub message: String,
    /// Whether it holds over the document now.
    pub holds: bool,
    /// Why it could not be read (it then counts as not holding).
    pub error: Option<String>,
    /// When it reads a setting the form edits: its condition as a tree ([`live_tree`]), every
    /// other model path already replaced by its value. `None`: what it says now is final.
    pub tree: Option<J>,
}

/// Every restriction of `item` (an attribute, a group with its `metadata`, a plugin version)
/// over the editable document `doc` and `models`, in order.
pub fn conditions(item: &J, doc: &J, models: &Models) -> Vec<Condition> {
    let Some(data) = item.as_object() else {
        return Vec::new();
    };
    let rs = restrictions(data);
    if rs.is_empty() {
        return Vec::new();
    }
    let lookup = lookup(doc, models, true);
    rs.into_iter()
        .map(|r| {
            let parsed = expr::parse(&r.condition);
            let holds = parsed
                .clone()
                .and_then(|e| expr::eval(&e, &lookup, &r.condition));
            let (holds, error) = match holds {
                Ok(v) => (expr::truthy(&v), None),
                Err(e) => (false, Some(format!("restriction {:?}: {e}", r.condition))),
            };
            let tree = match (&parsed, &error) {
                (Ok(e), None) => live_tree(e, &lookup, &|path| !is_password(doc, path))
                    .ok()
                    .filter(|(_, live)| *live)
                    .map(|(t, _)| t),
                _ => None,
            };
            Condition {
                message: r.message.unwrap_or_else(|| r.condition.clone()),
                action: r.action,
                holds,
                error,
                tree,
            }
        })
        .collect()
}

/// Whether the `settings:` path `G.A.value` is a password attribute of `doc`.
fn is_password(doc: &J, path: &str) -> bool {
    let mut parts = path.split('.');
    match (parts.next(), parts.next()) {
        (Some(g), Some(a)) => doc[g][a]["type"] == "password",
        _ => false,
    }
}

/// The setting a `settings:` path names when the Settings form edits it: `G.A.value` (the
/// attribute `A` of section `G`) or `G.metadata.enabled` (the section's switch).
fn form_setting(path: &str) -> bool {
    let parts: Vec<&str> = path.split('.').collect();
    matches!(parts.as_slice(), [g, a, "value"] if !g.is_empty() && !a.is_empty() && *a != "metadata")
        || matches!(parts.as_slice(), [g, "metadata", "enabled"] if !g.is_empty())
}

/// A parsed condition as a JSON tree a browser evaluates with Nailgun's semantics (Python's
/// truth, `==` and `in`; `and`/`or` give an operand): `["s", "G.A.value", value now]` a
/// setting the form edits (its value now, for when its control is missing or disabled),
/// `["v", value]` any part that reads none of those, already evaluated (`cluster:`, `version:`,
/// `networking_parameters:`, settings the form does not edit, and a password, whose value is
/// never sent to the page), `["not", x]`, and `[op, left, right]` for `or`, `and`, `==`, `!=`
/// and `in`. `editable` says whether a settings path is one the form edits in the clear. The
/// flag says whether the tree reads the form at all.
pub fn live_tree(
    e: &expr::Expr,
    lookup: &expr::Lookup<'_>,
    editable: &dyn Fn(&str) -> bool,
) -> Result<(J, bool), String> {
    use expr::{Expr, Op};
    let reads = |path: &str| form_setting(path) && editable(path);
    if !reads_form(e, &reads) {
        let v = expr::eval(e, lookup, "").map_err(|e| e.message)?;
        return Ok((json!(["v", v]), false));
    }
    Ok(match e {
        Expr::Path { path, .. } => {
            let now = lookup("settings", path)?.unwrap_or(J::Null);
            (json!(["s", path, now]), true)
        }
        Expr::Not(x) => (json!(["not", live_tree(x, lookup, editable)?.0]), true),
        Expr::Bin(op, l, r) => {
            let name = match op {
                Op::Or => "or",
                Op::And => "and",
                Op::Eq => "==",
                Op::Ne => "!=",
                Op::In => "in",
            };
            let (lt, _) = live_tree(l, lookup, editable)?;
            let (rt, _) = live_tree(r, lookup, editable)?;
            (json!([name, lt, rt]), true)
        }
        Expr::Lit(v) => (json!(["v", v]), false),
    })
}

/// Whether `e` reads a setting `reads` accepts.
fn reads_form(e: &expr::Expr, reads: &dyn Fn(&str) -> bool) -> bool {
    match e {
        expr::Expr::Lit(_) => false,
        expr::Expr::Path { model, path } => model == "settings" && reads(path),
        expr::Expr::Not(x) => reads_form(x, reads),
        expr::Expr::Bin(_, l, r) => reads_form(l, reads) || reads_form(r, reads),
    }
}

/// The changes from the editable document `before` to `after` that a restriction holding in
/// `after` forbids, as Fuel's Settings tab forbade them by hiding or disabling the control: a
/// value changed while its attribute, or its section (a group, a plugin's chosen version), is
/// hidden or disabled, a group or plugin switched on (or a plugin's version chosen) while
/// disabled. Switching a checkbox or group off is always allowed (it is how a disabled one
/// that is on is put right). A section that is only switched off keeps its values and takes
/// changes to them: its switch, not a restriction, greys them out. Each at its path, as
/// [`check_data`] names them.
pub fn locked_changes(before: &J, after: &J, models: &Models) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(groups) = after.as_object() else {
        return out;
    };
    let locked = |item: &J| {
        let r = restricted(item, after, models);
        (r.hidden || r.disabled).then(|| {
            if r.messages.is_empty() {
                "a restriction holds".to_string()
            } else {
                r.messages.join("; ")
            }
        })
    };
    // `section`: why the attributes' section is hidden or disabled, when it is.
    let attrs = |field: &str,
                 now: &Map<String, J>,
                 was: Option<&J>,
                 section: Option<&str>,
                 out: &mut Vec<FieldError>| {
        for (name, attr) in now.iter().filter(|(k, _)| *k != "metadata") {
            let value = attr.get("value");
            let old = was.and_then(|w| w.get(name)).and_then(|a| a.get("value"));
            if value == old || value == Some(&J::Bool(false)) {
                continue;
            }
            let why = match (locked(attr), section) {
                (Some(why), _) => why,
                (None, Some(s)) => format!("its section is restricted: {s}"),
                (None, None) => continue,
            };
            out.push(problem(
                format!("{field}.{name}.value"),
                format!("cannot be changed: {why}"),
            ));
        }
    };
    for (group, data) in groups {
        let field = format!("editable.{group}");
        let Some(now) = data.as_object() else {
            continue;
        };
        let was = before.get(group);
        let meta = now.get("metadata");
        let switched_on = |key: &str| {
            let v = meta.and_then(|m| m.get(key));
            v != was.and_then(|w| w.get("metadata")).and_then(|m| m.get(key))
                && v != Some(&J::Bool(false))
        };
        if meta.and_then(|m| m.get("class")).and_then(J::as_str) == Some("plugin") {
            let chosen = meta.and_then(|m| m.get("chosen_id")).and_then(J::as_i64);
            let Some(v) = chosen_version(Some(data), chosen) else {
                continue;
            };
            let section = locked(v);
            if (switched_on("enabled") || switched_on("chosen_id"))
                && let Some(why) = &section
            {
                out.push(problem(
                    format!("{field}.metadata.enabled"),
                    format!("cannot be switched on: {why}"),
                ));
            }
            if let Some(now) = v.as_object() {
                attrs(
                    &format!("{field}.metadata.versions"),
                    now,
                    chosen_version(was, chosen),
                    section.as_deref(),
                    &mut out,
                );
            }
            continue;
        }
        let section = locked(data);
        if switched_on("enabled")
            && let Some(why) = &section
        {
            out.push(problem(
                format!("{field}.metadata.enabled"),
                format!("cannot be switched on: {why}"),
            ));
        }
        attrs(&field, now, was, section.as_deref(), &mut out);
    }
    out
}

/// The version of a plugin container (`doc`) whose `plugin_id` is `chosen`.
fn chosen_version(doc: Option<&J>, chosen: Option<i64>) -> Option<&J> {
    doc.and_then(|d| d.get("metadata"))
        .and_then(|m| m.get("versions"))
        .and_then(J::as_array)
        .and_then(|vs| {
            vs.iter().find(|v| {
                v.get("metadata")
                    .and_then(|m| m.get("plugin_id"))
                    .and_then(J::as_i64)
                    == chosen
            })
        })
}

/// A restriction in Nailgun's canonical form.
struct Restriction {
    condition: String,
    action: String,
    message: Option<String>,
}

fn restrictions(data: &Map<String, J>) -> Vec<Restriction> {
    let list = match data.get("metadata") {
        Some(m) => m.get("restrictions"),
        None => data.get("restrictions"),
    };
    let Some(list) = list.and_then(J::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|r| match r {
            J::String(s) => Some(Restriction {
                condition: s.clone(),
                action: "disable".to_string(),
                message: None,
            }),
            J::Object(o) if o.contains_key("condition") => Some(Restriction {
                condition: o.get("condition")?.as_str()?.to_string(),
                action: o
                    .get("action")
                    .and_then(J::as_str)
                    .unwrap_or("disable")
                    .to_string(),
                message: o.get("message").and_then(J::as_str).map(str::to_string),
            }),
            J::Object(o) => {
                let (cond, msg) = o.iter().next()?;
                Some(Restriction {
                    condition: cond.clone(),
                    action: "disable".to_string(),
                    message: msg.as_str().map(str::to_string),
                })
            }
            _ => None,
        })
        .collect()
}

/// The restrictions with `action` whose condition holds; a condition that cannot be parsed or
/// evaluated is reported at `field`.
fn satisfied<'r>(
    rs: &'r [Restriction],
    action: &str,
    lookup: &expr::Lookup<'_>,
    field: &str,
    out: &mut Vec<FieldError>,
) -> Vec<&'r Restriction> {
    rs.iter()
        .filter(|r| r.action == action)
        .filter(|r| {
            match expr::parse(&r.condition).and_then(|e| expr::eval(&e, lookup, &r.condition)) {
                Ok(v) => expr::truthy(&v),
                Err(e) => {
                    out.push(problem(format!("{field}.restrictions"), e.to_string()));
                    false
                }
            }
        })
        .collect()
}

fn find_errors(data: &J, field: &str, lookup: &expr::Lookup<'_>, out: &mut Vec<FieldError>) {
    let data = match data {
        J::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                find_errors(item, &format!("{field}[{i}]"), lookup, out);
            }
            return;
        }
        J::Object(m) => m,
        _ => return,
    };
    let group = data.contains_key("metadata");
    let value = if group {
        data.get("metadata")
            .and_then(|m| m.get("enabled"))
            .cloned()
            .unwrap_or(J::Bool(true))
    } else {
        data.get("value").cloned().unwrap_or(J::Null)
    };
    let label = if group {
        data.get("metadata").and_then(|m| m.get("label"))
    } else {
        data.get("label")
    }
    .and_then(J::as_str)
    .unwrap_or(field)
    .to_string();
    let rs = restrictions(data);
    if !satisfied(&rs, "hide", lookup, field, out).is_empty() {
        return;
    }
    if group && !expr::truthy(&value) {
        return;
    }
    let ty = data.get("type").and_then(J::as_str).unwrap_or_default();
    let value_field = if group {
        format!("{field}.metadata.enabled")
    } else {
        format!("{field}.value")
    };
    if (ty == "checkbox" || group) && expr::truthy(&value) {
        for r in satisfied(&rs, "disable", lookup, field, out) {
            let why = r.message.clone().unwrap_or_else(|| {
                format!(
                    "restriction with action='{}' and condition='{}' failed due to attribute \
                     value='{}'",
                    r.action,
                    r.condition,
                    py_str(&value)
                )
            });
            out.push(problem(
                &value_field,
                format!("Validation failed for attribute '{label}': {why}"),
            ));
        }
    } else if !satisfied(&rs, "disable", lookup, field, out).is_empty() {
        return;
    }
    if matches!(ty, "text" | "number")
        && value.is_null()
        && data.get("nullable").and_then(J::as_bool) != Some(true)
    {
        out.push(problem(
            &value_field,
            format!("Null value is forbidden for '{label}'"),
        ));
    }
    if matches!(ty, "text_list" | "textarea_list")
        && let Some(items) = value.as_array()
    {
        let n = items.len() as f64;
        if let Some(min) = data.get("min").and_then(J::as_f64)
            && n < min
        {
            out.push(problem(
                &value_field,
                format!("Value {} should have at least {min} items", py_str(&value)),
            ));
        }
        if let Some(max) = data.get("max").and_then(J::as_f64)
            && n > max
        {
            out.push(problem(
                &value_field,
                format!(
                    "Value {} should not have more than {max} items",
                    py_str(&value)
                ),
            ));
        }
    }
    if let Some(e) = regex_error(data) {
        out.push(problem(&value_field, e));
    }
    for (k, v) in data {
        if k != "metadata" {
            find_errors(v, &format!("{field}.{k}"), lookup, out);
        }
    }
}

fn py_str(v: &J) -> String {
    match v {
        J::String(s) => s.clone(),
        J::Bool(true) => "True".to_string(),
        J::Bool(false) => "False".to_string(),
        J::Null => "None".to_string(),
        other => other.to_string(),
    }
}

/// Nailgun's `validate_regex`: a string value (or each item of a list) must match the
/// attribute's `regex.source` somewhere (`re.search`), else its `regex.error`.
fn regex_error(data: &Map<String, J>) -> Option<String> {
    let value = data.get("value").filter(|v| !v.is_null())?;
    let regex = data.get("regex").and_then(J::as_object)?;
    let source = regex.get("source").and_then(J::as_str)?;
    let error = regex
        .get("error")
        .and_then(J::as_str)
        .unwrap_or("Invalid value")
        .to_string();
    let re = match super::pyregex::compile(source) {
        Ok(re) => re,
        Err(e) => return Some(format!("the attribute's regex {source:?} is invalid: {e}")),
    };
    let matches = |s: &str| re.is_match(s).unwrap_or(false);
    match value {
        J::String(s) => (!matches(s)).then_some(error),
        J::Array(items) => {
            let bad: Vec<String> = items
                .iter()
                .filter(|i| !i.as_str().is_some_and(matches))
                .map(py_str)
                .collect();
            (!bad.is_empty()).then(|| format!("{error}: {}", bad.join(", ")))
        }
        other => Some(format!(
            "Value {} is of invalid type, cannot check regexp",
            py_str(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release() -> J {
        json!({"editable": {
            "access": {"metadata": {"label": "Access", "weight": 10},
                       "user": {"type": "text", "value": "admin", "label": "Username",
                                "regex": {"source": "^(?!services$)[\\w-]+$",
                                          "error": "Invalid username"}},
                       "password": {"type": "password", "value": "admin"}},
            "common": {"metadata": {"label": "Common"},
                       "debug": {"type": "checkbox", "value": false, "label": "Debug"},
                       "libvirt_type": {"type": "radio", "value": "kvm",
                                        "values": [{"data": "kvm"}, {"data": "qemu"}]},
                       "nested": {"type": "checkbox", "value": false, "label": "Nested",
                                  "restrictions": [{"condition":
                                      "settings:common.libvirt_type.value == 'qemu'",
                                      "message": "Nested needs KVM"}]}},
            "additional_components": {"metadata": {"label": "Extras"},
                                      "sahara": {"type": "checkbox", "value": false}},
            "syslog": {"metadata": {"label": "Syslog", "toggleable": true, "enabled": false},
                       "server": {"type": "text", "value": ""},
                       "port": {"type": "text", "value": null, "label": "Port"}},
            "external_ntp": {"metadata": {"label": "NTP"},
                             "ntp_list": {"type": "text_list", "value": ["a"], "min": 1,
                                          "label": "NTP servers"}}
        }})
    }

    fn plugins() -> Vec<PluginAttributes> {
        let attrs = |v: &str| {
            json!({"metadata": {"restrictions": [], "always_editable": false},
                   "endpoint": {"type": "text", "value": v, "label": "Endpoint"}})
        };
        vec![
            PluginAttributes {
                id: 4,
                name: "odl".into(),
                title: "OpenDaylight".into(),
                version: "1.0.0".into(),
                attributes: attrs("old"),
            },
            PluginAttributes {
                id: 9,
                name: "odl".into(),
                title: "OpenDaylight".into(),
                version: "2.0.0".into(),
                attributes: attrs("new"),
            },
        ]
    }

    fn put_ok(settings: &J, body: J) -> J {
        let rel = release();
        let ps = plugins();
        let src = Source {
            release: &rel,
            plugins: &ps,
        };
        apply(src, settings, &body, &Models::default()).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn put_err(settings: &J, body: J) -> Vec<FieldError> {
        let rel = release();
        let ps = plugins();
        let src = Source {
            release: &rel,
            plugins: &ps,
        };
        apply(src, settings, &body, &Models::default()).expect_err("refused")
    }

    #[test]
    fn values_come_from_the_settings_shape() {
        let rel = release();
        let ps = plugins();
        let src = Source {
            release: &rel,
            plugins: &ps,
        };
        let settings = json!({"debug": true, "sahara": {"enabled": true},
                              "access": {"user": "ops"},
                              "syslog": {"metadata": {"enabled": true}},
                              "odl": {"metadata": {"enabled": true, "chosen_id": 4},
                                      "endpoint": "x"}});
        let doc = editable(src, &settings);
        assert_eq!(doc["common"]["debug"]["value"], json!(true));
        assert_eq!(doc["common"]["debug"]["label"], json!("Debug"));
        assert_eq!(doc["additional_components"]["sahara"]["value"], json!(true));
        assert_eq!(doc["access"]["user"]["value"], json!("ops"));
        assert_eq!(doc["syslog"]["metadata"]["enabled"], json!(true));
        let odl = &doc["odl"]["metadata"];
        assert_eq!(odl["class"], json!("plugin"));
        assert_eq!(odl["enabled"], json!(true));
        assert_eq!(odl["chosen_id"], json!(4));
        assert_eq!(odl["versions"][0]["endpoint"]["value"], json!("x"));
        assert_eq!(
            odl["versions"][0]["metadata"]["plugin_version"],
            json!("1.0.0")
        );
        assert_eq!(odl["versions"][1]["endpoint"]["value"], json!("new"));
        // Defaults: nothing set, the newest version chosen, every plugin off.
        let d = editable(src, &json!({}));
        assert_eq!(d["odl"]["metadata"]["enabled"], json!(false));
        assert_eq!(d["odl"]["metadata"]["chosen_id"], json!(9));
        assert_eq!(d["common"]["debug"]["value"], json!(false));
    }

    #[test]
    fn a_downloaded_document_uploads_unchanged_and_edits_land_in_settings() {
        let rel = release();
        let ps = plugins();
        let src = Source {
            release: &rel,
            plugins: &ps,
        };
        let settings = json!({"debug": true});
        let doc = json!({"editable": editable(src, &settings)});
        assert_eq!(put_ok(&settings, doc.clone()), settings);
        let mut edited = doc;
        edited["editable"]["common"]["debug"]["value"] = json!(false);
        edited["editable"]["access"]["user"]["value"] = json!("ops");
        edited["editable"]["odl"]["metadata"]["enabled"] = json!(true);
        edited["editable"]["odl"]["metadata"]["versions"][1]["endpoint"]["value"] = json!("y");
        edited["editable"]["syslog"]["metadata"]["enabled"] = json!(true);
        edited["editable"]["syslog"]["port"]["value"] = json!("514");
        let next = put_ok(&settings, edited);
        assert_eq!(
            next,
            json!({"access": {"user": "ops"},
                   "syslog": {"metadata": {"enabled": true}, "port": "514"},
                   "odl": {"metadata": {"enabled": true, "chosen_id": 9}, "endpoint": "y"}})
        );
        // A partial body changes only what it names (Nailgun's PUT is a PATCH).
        let next = put_ok(
            &next,
            json!({"editable": {"common": {"libvirt_type": {"value": "qemu"}}}}),
        );
        assert_eq!(next["libvirt_type"], json!("qemu"));
        assert_eq!(next["access"]["user"], json!("ops"));
    }

    #[test]
    fn bad_documents_are_refused_naming_the_field() {
        let s = json!({});
        let e = put_err(&s, json!({"editable": {"nope": {}}}));
        assert_eq!(e[0].field, "editable.nope");
        let e = put_err(
            &s,
            json!({"editable": {"common": {"debugg": {"value": true}}}}),
        );
        assert_eq!(e[0].field, "editable.common.debugg");
        assert!(e[0].message.contains("debug"), "{}", e[0].message);
        let e = put_err(
            &s,
            json!({"editable": {"common": {"debug": {"value": "yes"}}}}),
        );
        assert_eq!(e[0].field, "editable.common.debug.value");
        let e = put_err(&s, json!({"generated": {}}));
        assert_eq!(e[0].field, "generated");
        let e = put_err(&s, json!({"editable": []}));
        assert_eq!(e[0].field, "editable");
        let e = put_err(
            &s,
            json!({"editable": {"odl": {"metadata": {"chosen_id": 5}}}}),
        );
        assert_eq!(e[0].field, "editable.odl.metadata.chosen_id");
        let e = put_err(
            &s,
            json!({"editable": {"odl": {"metadata": {"versions": [
                {"metadata": {"plugin_id": 9}, "port": {"value": "1"}}]}}}}),
        );
        assert_eq!(e[0].field, "editable.odl.metadata.versions[0].port");
    }

    #[test]
    fn regex_and_restrictions_are_checked_as_nailgun_did() {
        let s = json!({});
        // A lookahead in the regex (Python syntax) refuses a reserved name.
        let e = put_err(
            &s,
            json!({"editable": {"access": {"user": {"value": "services"}}}}),
        );
        assert_eq!(e[0].field, "editable.access.user.value");
        assert_eq!(e[0].message, "Invalid username");
        put_ok(
            &s,
            json!({"editable": {"access": {"user": {"value": "service"}}}}),
        );
        // A disable restriction refuses an enabled checkbox, with its message.
        let e = put_err(
            &s,
            json!({"editable": {"common": {"libvirt_type": {"value": "qemu"},
                                           "nested": {"value": true}}}}),
        );
        assert_eq!(e[0].field, "editable.common.nested.value");
        assert!(
            e[0].message.contains("Nested needs KVM"),
            "{}",
            e[0].message
        );
        put_ok(
            &s,
            json!({"editable": {"common": {"nested": {"value": true}}}}),
        );
        // Null text is refused only where the group is on: syslog is off by default.
        put_ok(
            &s,
            json!({"editable": {"syslog": {"server": {"value": "x"}}}}),
        );
        let e = put_err(
            &s,
            json!({"editable": {"syslog": {"metadata": {"enabled": true}}}}),
        );
        assert_eq!(e[0].field, "editable.syslog.port.value");
        assert!(e[0].message.contains("Null value is forbidden for 'Port'"));
        // Lists keep their minimum length.
        let e = put_err(
            &s,
            json!({"editable": {"external_ntp": {"ntp_list": {"value": []}}}}),
        );
        assert!(
            e[0].message.contains("at least 1 items"),
            "{}",
            e[0].message
        );
    }

    #[test]
    fn conditions_become_trees_the_form_evaluates_with_constants_filled_in() {
        let doc = json!({
            "common": {"metadata": {},
                       "libvirt_type": {"type": "radio", "value": "qemu"},
                       "nested": {"type": "checkbox", "value": false, "restrictions": [
                           {"condition": "settings:common.libvirt_type.value != 'kvm' or \
                                          not (cluster:net_provider == 'neutron')",
                            "action": "hide"},
                           {"condition": "'advanced' in version:feature_groups",
                            "message": "advanced"},
                           "nic:x.y == 1"]}},
        });
        let models = Models {
            cluster: json!({"net_provider": "neutron"}),
            version: json!({"feature_groups": ["experimental"]}),
            ..Models::default()
        };
        let cs = conditions(&doc["common"]["nested"], &doc, &models);
        assert_eq!(cs.len(), 3);
        assert_eq!((cs[0].action.as_str(), cs[0].holds), ("hide", true));
        assert_eq!(
            cs[0].tree,
            Some(json!([
                "or",
                [
                    "!=",
                    ["s", "common.libvirt_type.value", "qemu"],
                    ["v", "kvm"]
                ],
                ["v", false]
            ]))
        );
        // Reads nothing the form edits: final as evaluated.
        assert_eq!((cs[1].holds, cs[1].tree.clone()), (false, None));
        assert_eq!(cs[1].message, "advanced");
        // Cannot be read: said, never live.
        assert!(cs[2].error.as_deref().unwrap_or_default().contains("nic"));
        assert_eq!((cs[2].holds, cs[2].tree.clone()), (false, None));
        let r = restricted(&doc["common"]["nested"], &doc, &models);
        assert!(r.hidden && !r.disabled);
        assert_eq!(r.messages.len(), 2, "{:?}", r.messages);

        // A password is never sent to the page: what reads it goes as its result.
        let doc = json!({"access": {"metadata": {},
            "password": {"type": "password", "value": "s3cret"},
            "user": {"type": "text", "value": "admin", "restrictions": [
                "settings:access.password.value == 'guess' or settings:access.user.value == ''"]}}});
        let c = &conditions(&doc["access"]["user"], &doc, &Models::default())[0];
        assert_eq!(
            c.tree,
            Some(json!([
                "or",
                ["v", false],
                ["==", ["s", "access.user.value", "admin"], ["v", ""]]
            ]))
        );
        assert!(
            !c.tree
                .as_ref()
                .is_some_and(|t| t.to_string().contains("s3cret"))
        );
    }

    #[test]
    fn a_plugins_attributes_are_read_from_its_chosen_version() {
        let rel = release();
        let ps = plugins();
        let src = Source {
            release: &rel,
            plugins: &ps,
        };
        let doc = editable(
            src,
            &json!({"odl": {"metadata": {"enabled": true, "chosen_id": 4}, "endpoint": "x"}}),
        );
        let item = json!({"restrictions": [
            "settings:odl.endpoint.value == 'x' and settings:odl.metadata.enabled == true"]});
        let r = restricted(&item, &doc, &Models::default());
        assert!(r.disabled, "{r:?}");
        let c = &conditions(&item, &doc, &Models::default())[0];
        assert_eq!(
            c.tree,
            Some(json!([
                "and",
                ["==", ["s", "odl.endpoint.value", "x"], ["v", "x"]],
                ["==", ["s", "odl.metadata.enabled", true], ["v", true]]
            ]))
        );
    }

    #[test]
    fn a_restricted_sections_values_may_not_change_a_switched_off_ones_may() {
        let mut rel = release();
        rel["editable"]["syslog"]["metadata"]["restrictions"] = json!([{"condition": "settings:common.debug.value == false",
                    "message": "Needs debug"}]);
        let ps = plugins();
        let src = Source {
            release: &rel,
            plugins: &ps,
        };
        let before = editable(src, &json!({}));
        let after = editable(src, &json!({"syslog": {"server": "logs"}}));
        let e = locked_changes(&before, &after, &Models::default());
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].field, "editable.syslog.server.value");
        assert!(e[0].message.contains("Needs debug"), "{}", e[0].message);
        // Debug on: the section is not restricted; it is switched off, and takes the change.
        let before = editable(src, &json!({"debug": true}));
        let after = editable(src, &json!({"debug": true, "syslog": {"server": "logs"}}));
        assert_eq!(locked_changes(&before, &after, &Models::default()), vec![]);
    }
}
