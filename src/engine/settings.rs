//! An environment's settings checked against the attributes that back them: the release's
//! `attributes_metadata.editable` and the `environment_config.yaml` attributes of the plugins the
//! release can enable. Settings are stored in the shape deployment data has (see
//! [`crate::engine::graph::data::settings_from_attributes`]): an attribute of the `common` group
//! is a top-level key, one of `additional_components` is `{name: {enabled: value}}`, one of any
//! other group (a plugin's group is named after the plugin) is `{group: {name: value}}`, and a
//! toggleable group (every plugin's) may hold `{metadata: {enabled: bool}}`.
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

/// Every settings key an environment accepts, from its release and its plugins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    keys: BTreeMap<String, Slot>,
    /// The release's name, for messages.
    release: String,
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
                }) => check_group(key, value, attributes, *toggleable, origin, &mut out),
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
            check_metadata(&path, v, out);
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

/// A toggleable group's `metadata`: `{enabled: bool}`, and a plugin's `chosen_id` (which of
/// its installed versions, see [`super::attributes`]).
fn check_metadata(path: &str, v: &J, out: &mut Vec<FieldError>) {
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
        if k == "chosen_id" {
            if v.as_i64().is_none() {
                out.push(problem(
                    format!("{path}.chosen_id"),
                    format!("expected a plugin id, found {}", describe(v)),
                ));
            }
        } else if k != "enabled" {
            out.push(problem(
                format!("{path}.{k}"),
                "metadata takes only \"enabled\" and \"chosen_id\"",
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
}
