//! An environment's settings checked against the attributes that back them: the release's
//! `attributes_metadata.editable` and the `environment_config.yaml` attributes of the plugins the
//! release can enable. Settings are stored in the shape deployment data has (see
//! [`crate::engine::graph::data::settings_from_attributes`]): an attribute of the `common` group
//! is a top-level key, one of `additional_components` is `{name: {enabled: value}}`, one of any
//! other group (a plugin's group is named after the plugin) is `{group: {name: value}}`, and a
//! toggleable group (every plugin's) may hold `{metadata: {enabled: bool}}`.
//!
//! Plugins are enabled as Nailgun enabled them (`plugins/manager.py`, `ClusterPlugin`): by name,
//! one version per plugin. `{name: {metadata: {enabled: true}}}` enables the plugin installed
//! under that name; when several versions of it are installed, `metadata.chosen_id` (Nailgun's
//! key) names the one, by its id, and without it the settings are refused, naming each version
//! ([`enabled_plugins`]). A `chosen_id` must be the id of a version of that plugin, so no plugin
//! can be enabled under another plugin's key.
//!
//! A key no attribute backs is refused, and so is a value of the wrong type for the attribute's
//! Fuel type: `checkbox` takes a boolean; `text`, `password` and `textarea` a string; `number`
//! a number (within `min`/`max` when given); `select` and `radio` one of their `values`' data;
//! `text_list` and `textarea_list` a list of strings; `custom_repo_configuration` a list of
//! repository objects; any other type (`hidden`, `file`, custom ones) a value of the same JSON
//! kind as the attribute's default, or anything when it has none. Every problem is reported with
//! its key path. Regular expressions (`regex:`) and `restrictions` are not checked: they are
//! Python regular expressions and Nailgun expressions the dashboard evaluates. Pure.

use std::collections::BTreeMap;

use serde_json::Value as J;

use crate::model::FieldError;

/// One attribute: its Fuel type, default and allowed values.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub ty: String,
    pub default: J,
    /// `values[].data` of a `select` or `radio`.
    pub choices: Vec<String>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Attribute {
    pub fn from_metadata(attr: &J) -> Option<Attribute> {
        let attr = attr.as_object()?;
        let number = |k: &str| attr.get(k).and_then(J::as_f64);
        Some(Attribute {
            ty: attr
                .get("type")
                .and_then(J::as_str)
                .unwrap_or_default()
                .to_string(),
            default: attr.get("value").cloned().unwrap_or(J::Null),
            choices: attr
                .get("values")
                .and_then(J::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter_map(|v| v.get("data").and_then(J::as_str))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            min: number("min"),
            max: number("max"),
        })
    }

    /// Why `v` is not a value of this attribute, if it is not.
    pub fn check(&self, v: &J) -> Result<(), String> {
        let describe = crate::engine::steps::describe;
        let expect = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "expected {what} (a {} setting), found {}",
                    self.ty,
                    describe(v)
                ))
            }
        };
        match self.ty.as_str() {
            "checkbox" => expect(v.is_boolean(), "a boolean"),
            "text" | "password" | "textarea" => expect(v.is_string(), "a string"),
            "number" => {
                expect(v.is_number(), "a number")?;
                let n = v.as_f64().unwrap_or_default();
                match (self.min, self.max) {
                    (Some(min), _) if n < min => Err(format!("{n} is below the minimum, {min}")),
                    (_, Some(max)) if n > max => Err(format!("{n} is above the maximum, {max}")),
                    _ => Ok(()),
                }
            }
            "select" | "radio" => match v.as_str() {
                Some(s) if self.choices.iter().any(|c| c == s) => Ok(()),
                Some(s) => Err(format!(
                    "{s:?} is not one of the choices: {}",
                    self.choices.join(", ")
                )),
                None => expect(false, &format!("one of {}", self.choices.join(", "))),
            },
            "text_list" | "textarea_list" => expect(
                v.as_array().is_some_and(|a| a.iter().all(J::is_string)),
                "a list of strings",
            ),
            "custom_repo_configuration" => expect(
                v.as_array().is_some_and(|a| a.iter().all(J::is_object)),
                "a list of repository objects ({name, uri, suite, section, type, priority})",
            ),
            _ => {
                let same = match &self.default {
                    J::Null => true,
                    J::Bool(_) => v.is_boolean(),
                    J::Number(_) => v.is_number(),
                    J::String(_) => v.is_string(),
                    J::Array(_) => v.is_array(),
                    J::Object(_) => v.is_object(),
                };
                let kind = match &self.default {
                    J::Bool(_) => "a boolean",
                    J::Number(_) => "a number",
                    J::String(_) => "a string",
                    J::Array(_) => "a list",
                    _ => "an object",
                };
                expect(same, kind)
            }
        }
    }
}

/// What a top-level settings key is.
#[derive(Debug, Clone, PartialEq)]
enum Slot {
    /// An attribute of the `common` group.
    Attribute(Attribute),
    /// An attribute of `additional_components`: `{enabled: value}`.
    Component(Attribute),
    /// A group of attributes, from the release or a plugin (`origin`).
    Group {
        attributes: BTreeMap<String, Attribute>,
        toggleable: bool,
        origin: String,
    },
}

/// An installed plugin as settings name it: its id (the master's), name and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub id: i64,
    pub name: String,
    pub version: String,
}

impl Installed {
    /// `NAME VERSION (id ID)`, for messages.
    fn label(&self) -> String {
        format!("{} {} (id {})", self.name, self.version, self.id)
    }
}

/// `1.0.0 (id 3) and 2.0.0 (id 4)`.
fn versions_of(versions: &[&Installed]) -> String {
    let each: Vec<String> = versions
        .iter()
        .map(|p| format!("{} (id {})", p.version, p.id))
        .collect();
    match each.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => each.join(""),
    }
}

/// Which version of plugin `key` the settings' value `value` enable: `Ok(None)` when it is not
/// enabled. With `every`, a bad `chosen_id` is reported even when the plugin is off (a write
/// is checked whole); without, only an enabled plugin's (a plan needs only those).
fn choose(
    key: &str,
    value: &J,
    installed: &[Installed],
    every: bool,
) -> Result<Option<i64>, FieldError> {
    let versions: Vec<&Installed> = installed.iter().filter(|p| p.name == key).collect();
    let metadata = value.get("metadata");
    let enabled = metadata.and_then(|m| m.get("enabled")).and_then(J::as_bool) == Some(true);
    if versions.is_empty() || !(enabled || every) {
        return Ok(None);
    }
    let chosen = match metadata.and_then(|m| m.get("chosen_id")) {
        None | Some(J::Null) => None,
        Some(v) => {
            let field = format!("{key}.metadata.chosen_id");
            let Some(id) = v.as_i64() else {
                return Err(problem(
                    field,
                    format!(
                        "expected the id of a version of plugin {key} (an integer), found {}",
                        describe(v)
                    ),
                ));
            };
            if !versions.iter().any(|p| p.id == id) {
                let what = match installed.iter().find(|p| p.id == id) {
                    Some(other) => format!("plugin id {id} is {}, not {key}", other.label()),
                    None => format!("no installed plugin has id {id}"),
                };
                return Err(problem(
                    field,
                    format!(
                        "{what}: choose one of {key}'s versions, {}",
                        versions_of(&versions)
                    ),
                ));
            }
            Some(id)
        }
    };
    if !enabled {
        return Ok(None);
    }
    match (chosen, versions.as_slice()) {
        (Some(id), _) => Ok(Some(id)),
        (None, [one]) => Ok(Some(one.id)),
        (None, many) => Err(problem(
            format!("{key}.metadata.enabled"),
            format!(
                "plugin {key} is installed in {} versions, {}, and an environment enables one \
                 version of a plugin: name it with {key}.metadata.chosen_id",
                many.len(),
                versions_of(many)
            ),
        )),
    }
}

/// The installed plugins `settings` enable (ids, in `installed`'s order): for each plugin name
/// enabled, its one installed version, or among several the one `metadata.chosen_id` names.
/// Every plugin enabled without saying which of its versions, or naming one that is not its
/// own, is a problem naming its field and each version.
pub fn enabled_plugins(settings: &J, installed: &[Installed]) -> Result<Vec<i64>, Vec<FieldError>> {
    let mut ids = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in settings.as_object().into_iter().flatten() {
        match choose(key, value, installed, false) {
            Ok(Some(id)) => ids.push(id),
            Ok(None) => {}
            Err(p) => problems.push(p),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(installed
        .iter()
        .filter(|p| ids.contains(&p.id))
        .map(|p| p.id)
        .collect())
}

/// Whether `settings` enable `plugin`, leniently: its name is enabled and no `chosen_id` names
/// another version. For what an environment accepts (roles, settings), so that settings
/// [`enabled_plugins`] refuses can still be seen and replaced.
pub fn enables(settings: &J, plugin: &Installed) -> bool {
    let Some(metadata) = settings.get(&plugin.name).and_then(|p| p.get("metadata")) else {
        return false;
    };
    metadata.get("enabled").and_then(J::as_bool) == Some(true)
        && metadata
            .get("chosen_id")
            .and_then(J::as_i64)
            .is_none_or(|id| id == plugin.id)
}

/// Every settings key an environment accepts, from its release and its plugins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    keys: BTreeMap<String, Slot>,
    /// The release's name, for messages.
    release: String,
    /// The plugins installed, each version (the release's own left out): which of them a
    /// plugin's settings enable is checked against these.
    installed: Vec<Installed>,
}

fn toggleable(metadata: Option<&J>) -> bool {
    metadata.is_some_and(|m| {
        m.get("toggleable").and_then(J::as_bool) == Some(true) || m.get("enabled").is_some()
    })
}

impl Schema {
    /// The keys of release `release`'s `attributes_metadata` (`{editable: {group: {...}}}`).
    pub fn of_release(release: &str, attributes_metadata: &J) -> Schema {
        let mut schema = Schema {
            keys: BTreeMap::new(),
            release: release.to_string(),
            installed: Vec::new(),
        };
        let groups = attributes_metadata
            .get("editable")
            .and_then(J::as_object)
            .cloned()
            .unwrap_or_default();
        for (group, attrs) in &groups {
            let Some(attrs) = attrs.as_object() else {
                continue;
            };
            let each = || {
                attrs
                    .iter()
                    .filter(|(name, _)| *name != "metadata")
                    .filter_map(|(name, a)| Some((name.clone(), Attribute::from_metadata(a)?)))
            };
            match group.as_str() {
                "common" => {
                    for (name, a) in each() {
                        schema.keys.insert(name, Slot::Attribute(a));
                    }
                }
                "additional_components" => {
                    for (name, a) in each() {
                        schema.keys.insert(name, Slot::Component(a));
                    }
                }
                _ => schema.add_group(
                    group,
                    each().collect(),
                    toggleable(attrs.get("metadata")),
                    &format!("release {release}"),
                ),
            }
        }
        schema
    }

    /// Add plugin `name`'s attributes (its `environment_config.yaml`, `{attributes: {...}}`)
    /// as the group `name`, which can be enabled with `{metadata: {enabled: true}}`.
    pub fn add_plugin(&mut self, name: &str, environment_config: &J) {
        let attributes = environment_config
            .get("attributes")
            .and_then(J::as_object)
            .map(|attrs| {
                attrs
                    .iter()
                    .filter(|(k, _)| *k != "metadata")
                    .filter_map(|(k, a)| Some((k.clone(), Attribute::from_metadata(a)?)))
                    .collect()
            })
            .unwrap_or_default();
        self.add_group(name, attributes, true, &format!("plugin {name}"));
    }

    /// The plugins installed (every version, the release's own left out), against which a
    /// plugin's `metadata.chosen_id` and the one-version rule are checked.
    pub fn set_installed(&mut self, installed: Vec<Installed>) {
        self.installed = installed;
    }

    fn add_group(
        &mut self,
        name: &str,
        attributes: BTreeMap<String, Attribute>,
        toggle: bool,
        from: &str,
    ) {
        match self.keys.get_mut(name) {
            Some(Slot::Group {
                attributes: have,
                toggleable,
                origin,
            }) => {
                have.extend(attributes);
                *toggleable |= toggle;
                *origin = format!("{origin} and {from}");
            }
            _ => {
                self.keys.insert(
                    name.to_string(),
                    Slot::Group {
                        attributes,
                        toggleable: toggle,
                        origin: from.to_string(),
                    },
                );
            }
        }
    }

    /// Every problem of `settings` (a JSON object), each with its key path; empty when they
    /// are all backed by attributes and of the right types.
    pub fn check(&self, settings: &J) -> Vec<FieldError> {
        let mut out = Vec::new();
        let Some(map) = settings.as_object() else {
            out.push(problem(
                "settings",
                format!("expected an object, found {}", describe(settings)),
            ));
            return out;
        };
        for (key, value) in map {
            match self.keys.get(key) {
                None => out.push(problem(
                    key,
                    format!(
                        "no attribute of release {} or of its plugins is called {key:?}; the \
                         settings are: {}",
                        self.release,
                        names(self.keys.keys())
                    ),
                )),
                Some(Slot::Attribute(a)) => {
                    if let Err(m) = a.check(value) {
                        out.push(problem(key, m));
                    }
                }
                Some(Slot::Component(a)) => match value.as_object() {
                    Some(o) => {
                        for (k, v) in o {
                            let path = format!("{key}.{k}");
                            if k != "enabled" {
                                out.push(problem(
                                    path,
                                    "an additional component takes only \"enabled\"",
                                ));
                            } else if let Err(m) = a.check(v) {
                                out.push(problem(path, m));
                            }
                        }
                    }
                    None => out.push(problem(
                        key,
                        format!(
                            "expected {{\"enabled\": ...}} (an additional component), found {}",
                            describe(value)
                        ),
                    )),
                },
                Some(Slot::Group {
                    attributes,
                    toggleable,
                    origin,
                }) => {
                    let plugin = self.installed.iter().any(|p| p.name == *key);
                    check_group(
                        key,
                        value,
                        attributes,
                        *toggleable,
                        plugin,
                        origin,
                        &mut out,
                    );
                    if let Err(p) = choose(key, value, &self.installed, true) {
                        out.push(p);
                    }
                }
            }
        }
        out
    }
}

fn check_group(
    key: &str,
    value: &J,
    attributes: &BTreeMap<String, Attribute>,
    toggleable: bool,
    plugin: bool,
    origin: &str,
    out: &mut Vec<FieldError>,
) {
    let Some(o) = value.as_object() else {
        out.push(problem(
            key,
            format!(
                "expected an object of the settings of group {key} ({origin}), found {}",
                describe(value)
            ),
        ));
        return;
    };
    for (k, v) in o {
        let path = format!("{key}.{k}");
        if k == "metadata" && toggleable {
            check_metadata(&path, v, plugin, out);
            continue;
        }
        match attributes.get(k) {
            Some(a) => {
                if let Err(m) = a.check(v) {
                    out.push(problem(path, m));
                }
            }
            None => {
                let mut known: Vec<&String> = attributes.keys().collect();
                let metadata = "metadata".to_string();
                if toggleable {
                    known.push(&metadata);
                    known.sort();
                }
                out.push(problem(
                    path,
                    format!(
                        "group {key} ({origin}) has no attribute {k:?}; its settings are: {}",
                        names(known.into_iter())
                    ),
                ));
            }
        }
    }
}

/// A toggleable group's `metadata`: `{enabled: bool}`, and for a plugin's also `chosen_id`
/// (checked by [`choose`]).
fn check_metadata(path: &str, v: &J, plugin: bool, out: &mut Vec<FieldError>) {
    let Some(m) = v.as_object() else {
        out.push(problem(
            path,
            format!(
                "expected {{\"enabled\": true|false}}, found {}",
                describe(v)
            ),
        ));
        return;
    };
    for (k, v) in m {
        if plugin && k == "chosen_id" {
            continue;
        }
        if k != "enabled" {
            out.push(problem(
                format!("{path}.{k}"),
                if plugin {
                    "a plugin's metadata takes only \"enabled\" and \"chosen_id\""
                } else {
                    "metadata takes only \"enabled\""
                },
            ));
        } else if !v.is_boolean() {
            out.push(problem(
                format!("{path}.enabled"),
                format!("expected a boolean, found {}", describe(v)),
            ));
        }
    }
}

fn describe(v: &J) -> String {
    crate::engine::steps::describe(v)
}

fn names<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let all: Vec<&str> = keys.map(String::as_str).collect();
    if all.is_empty() {
        return "none".to_string();
    }
    let shown = all.iter().take(40).copied().collect::<Vec<_>>().join(", ");
    if all.len() > 40 {
        format!("{shown} and {} more", all.len() - 40)
    } else {
        shown
    }
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        let release = json!({"editable": {
            "access": {"metadata": {"label": "Access"},
                       "user": {"type": "text", "value": "admin"},
                       "password": {"type": "password", "value": "admin"}},
            "common": {"debug": {"type": "checkbox", "value": false},
                       "libvirt_type": {"type": "radio", "value": "kvm",
                                        "values": [{"data": "kvm"}, {"data": "qemu"}]}},
            "additional_components": {"sahara": {"type": "checkbox", "value": false}},
            "provision": {"image_data": {"type": "hidden", "value": {"/": {}}},
                          "method": {"type": "hidden", "value": "image"}},
            "external_ntp": {"ntp_list": {"type": "text_list", "value": ["a"]}},
            "repo_setup": {"repos": {"type": "custom_repo_configuration", "value": []}},
            "kernel": {"workers": {"type": "number", "value": 2, "min": 1, "max": 64}},
            "storage": {"metadata": {"toggleable": true, "enabled": false},
                        "iser": {"type": "checkbox", "value": false}}
        }});
        let mut s = Schema::of_release("newton", &release);
        s.add_plugin(
            "lma",
            &json!({"attributes": {"metadata": {"label": "LMA"},
                                   "level": {"type": "select", "value": "info",
                                             "values": [{"data": "info"}, {"data": "debug"}]}}}),
        );
        s
    }

    fn fields(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(|e| e.field.clone()).collect()
    }

    #[test]
    fn settings_backed_by_attributes_of_the_right_types_pass() {
        let ok = json!({
            "access": {"user": "ops", "password": "s3cret"},
            "debug": true,
            "libvirt_type": "qemu",
            "sahara": {"enabled": true},
            "provision": {"image_data": {"/": {"uri": "x"}}, "method": "image"},
            "external_ntp": {"ntp_list": ["0.pool.ntp.org"]},
            "repo_setup": {"repos": [{"name": "extra", "uri": "http://mirror/"}]},
            "kernel": {"workers": 8},
            "storage": {"metadata": {"enabled": true}, "iser": true},
            "lma": {"metadata": {"enabled": true}, "level": "debug"}
        });
        assert_eq!(schema().check(&ok), []);
        assert_eq!(schema().check(&json!({})), []);
    }

    #[test]
    fn unknown_keys_are_refused_with_their_path() {
        let errors = schema().check(&json!({
            "bogus": 1,
            "access": {"nope": "x"},
            "lma": {"metadata": {"enabled": true, "chosen_id": "3", "on": 1}},
            "sahara": {"on": true}
        }));
        assert_eq!(
            fields(&errors),
            [
                "access.nope",
                "bogus",
                "lma.metadata.chosen_id",
                "lma.metadata.on",
                "sahara.on"
            ]
        );
        assert_eq!(
            errors[1].message,
            "no attribute of release newton or of its plugins is called \"bogus\"; the settings \
             are: access, debug, external_ntp, kernel, libvirt_type, lma, provision, repo_setup, \
             sahara, storage"
        );
        assert!(
            errors[0]
                .message
                .contains("group access (release newton) has no attribute \"nope\"; its settings are: password, user"),
            "{}",
            errors[0].message
        );
    }

    #[test]
    fn values_of_the_wrong_type_are_refused_with_the_expected_type() {
        let errors = schema().check(&json!({
            "access": {"user": 5, "password": null},
            "debug": "yes",
            "libvirt_type": "xen",
            "provision": {"image_data": "x"},
            "external_ntp": {"ntp_list": ["a", 1]},
            "repo_setup": {"repos": "deb http://x"},
            "kernel": {"workers": 100},
            "storage": {"metadata": {"enabled": "yes"}},
            "lma": {"level": "trace"},
            "sahara": true
        }));
        let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "access.password: expected a string (a password setting), found null",
                "access.user: expected a string (a text setting), found the number 5",
                "debug: expected a boolean (a checkbox setting), found a string",
                "external_ntp.ntp_list: expected a list of strings (a text_list setting), found an array",
                "kernel.workers: 100 is above the maximum, 64",
                "libvirt_type: \"xen\" is not one of the choices: kvm, qemu",
                "lma.level: \"trace\" is not one of the choices: info, debug",
                "provision.image_data: expected an object (a hidden setting), found a string",
                "repo_setup.repos: expected a list of repository objects ({name, uri, suite, section, type, priority}) (a custom_repo_configuration setting), found a string",
                "sahara: expected {\"enabled\": ...} (an additional component), found the boolean true",
                "storage.metadata.enabled: expected a boolean, found a string",
            ]
        );
    }

    #[test]
    fn a_non_object_is_refused() {
        assert_eq!(fields(&schema().check(&json!([1]))), ["settings"]);
        assert_eq!(fields(&schema().check(&json!({"access": 1}))), ["access"]);
    }

    fn installed() -> Vec<Installed> {
        [
            (3, "lma", "1.0.0"),
            (4, "lma", "2.0.0"),
            (5, "odl", "1.1.0"),
        ]
        .into_iter()
        .map(|(id, name, version)| Installed {
            id,
            name: name.to_string(),
            version: version.to_string(),
        })
        .collect()
    }

    #[test]
    fn one_version_of_each_plugin_is_enabled() {
        let all = installed();
        let on = |chosen: Option<J>| {
            let mut m = json!({"enabled": true});
            if let Some(c) = chosen {
                m["chosen_id"] = c;
            }
            json!({"lma": {"metadata": m}, "odl": {"metadata": {"enabled": true}}})
        };
        // The only version of odl; lma's chosen one.
        assert_eq!(enabled_plugins(&on(Some(json!(4))), &all), Ok(vec![4, 5]));
        assert_eq!(
            enabled_plugins(&json!({"odl": {"metadata": {"enabled": false}}}), &all),
            Ok(vec![])
        );
        // lma without saying which: both versions named.
        let e = enabled_plugins(&on(None), &all).unwrap_err();
        assert_eq!(
            e.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "lma.metadata.enabled: plugin lma is installed in 2 versions, 1.0.0 (id 3) and \
              2.0.0 (id 4), and an environment enables one version of a plugin: name it with \
              lma.metadata.chosen_id"
            ]
        );
        // odl's id under lma's key would enable odl twice: refused.
        let e = enabled_plugins(&on(Some(json!(5))), &all).unwrap_err();
        assert_eq!(
            e[0].to_string(),
            "lma.metadata.chosen_id: plugin id 5 is odl 1.1.0 (id 5), not lma: choose one of \
             lma's versions, 1.0.0 (id 3) and 2.0.0 (id 4)"
        );
        let e = enabled_plugins(&on(Some(json!(9))), &all).unwrap_err();
        assert!(
            e[0].message.starts_with("no installed plugin has id 9"),
            "{e:?}"
        );
        // A plan needs only the enabled ones right; a write is checked whole.
        let off = json!({"lma": {"metadata": {"enabled": false, "chosen_id": 5}}});
        assert_eq!(enabled_plugins(&off, &all), Ok(vec![]));
        let mut s = schema();
        s.set_installed(all.clone());
        assert_eq!(fields(&s.check(&off)), ["lma.metadata.chosen_id"]);
        let lma = |m: J| json!({"lma": {"metadata": m}});
        assert_eq!(
            fields(&s.check(&lma(json!({"enabled": true})))),
            ["lma.metadata.enabled"]
        );
        assert_eq!(
            s.check(&lma(json!({"enabled": true, "chosen_id": 3})))[..],
            []
        );
        // Only a plugin's metadata takes chosen_id.
        let e = s.check(&json!({"storage": {"metadata": {"chosen_id": 3}}}));
        assert_eq!(fields(&e), ["storage.metadata.chosen_id"]);
        // Leniently (what an environment accepts), a chosen version and an unnamed one count.
        assert!(enables(&on(Some(json!(4))), &all[1]));
        assert!(!enables(&on(Some(json!(4))), &all[0]));
        assert!(enables(&on(None), &all[0]) && enables(&on(None), &all[1]));
    }
}
