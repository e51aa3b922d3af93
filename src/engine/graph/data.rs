//! Each node's deployment data (Fuel's "astute.yaml"), the `$` of every YAQL field: a common
//! part deep-merged under a node part, the node's keys winning (Nailgun's `UnionDict`). The
//! keys, their shapes and their value types are those of Nailgun's LCM serializer
//! (`nailgun/orchestrator/deployment_serializers.py`, stable/newton: `DeploymentLCMSerializer`
//! over `DeploymentHASerializer90` ... `DeploymentMultinodeSerializer`), from what stoker knows.
//!
//! The common part is, lowest priority first:
//!
//! 1. the release's settings ([`settings_from_attributes`]: Nailgun's
//!    `Attributes.merged_attrs_values` of `attributes_metadata`);
//! 2. each enabled plugin's settings under its name ([`plugin_settings`]: its
//!    `environment_config.yaml` defaults and a `metadata` block, as
//!    `PluginManager.get_plugins_attributes` made them);
//! 3. what Nailgun's serializers generate ([`build`] lists each key with the function it
//!    comes from): `deployment_mode`, `deployment_id`, `openstack_version`, `fuel_version`,
//!    `nodes`, `workloads_collector`, `use_cinder`, `master_ip`, `network_metadata`, `plugins`,
//!    `mp`, `last_controller`, `cluster`, `release`;
//! 4. the environment's `settings` (its values over the defaults of 1 and 2; a cluster file may
//!    also give what stoker cannot generate, such as `network_metadata.vips`).
//!
//! The node part is `uid`, `fqdn`, `status`, `vms_conf`, `fail_if_error`, `online`,
//! `user_node_name`, `test_vm_image`, `roles`, `configuration`, `configuration_options`, and
//! `deleted` on a node pending deletion, with stoker's `name` and `node_roles` beside them,
//! then the node's own `data`. The master pseudo node is `{uid: master, roles: [master]}`.
//!
//! The network serializer's keys come from the environment's stored networks when the planner
//! hands them in (`Cluster::network`, made by `engine::network::scheme::facts`): `quantum`,
//! `quantum_settings`, `network_metadata.vips` and each node's `network_roles` addresses in the
//! common part, `network_scheme` in the node part.
//!
//! Left out, because stoker has no model of them: `dhcp_binding_params`, `provision`, generated secrets
//! (`{generator: ...}` attributes), CPU pinning and huge pages, OpenStack config overrides,
//! and plugins' node attributes.
//!
//! Values are converted to YAQL values once (the common part once per plan), and a node's view
//! shares the common part's sub-trees instead of copying them. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value as J, json};

use super::build::{PluginGraph, ReleaseGraph};
use super::input::{Cluster, Deployed, NodeSpec};
use super::legacy::plugin_dir;
use super::roles::Assigned;
use crate::yaql::Value as Y;

/// The deployment data of one plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeploymentData {
    pub common: J,
    /// Node parts, in node order, as text: a plan keeps every node's part (to record after a
    /// success), and 10,000 nodes' parts took some 480 MB as values.
    pub nodes: Vec<Part>,
    /// The master pseudo node's part.
    pub master: Part,
    /// The keys of the node parts and the master's; None when one of them is not a mapping
    /// (a replaced part may be anything).
    pub node_keys: Option<BTreeSet<String>>,
}

/// One node's part of the deployment data, kept as its compact JSON text (that of
/// `serde_json::to_string` of the value: keys sorted) and written as it is. The text is
/// shared by its clones: a node's part that did not change since a deployment is one text in
/// the deployed snapshots and the new plan ([`Part::same_as`]).
#[derive(Debug, Clone)]
pub struct Part(Arc<RawValue>);

impl Part {
    pub fn of(v: &J) -> Part {
        // A JSON value always writes as JSON text.
        Part(Arc::from(
            serde_json::value::to_raw_value(v).unwrap_or_else(|_| null_text()),
        ))
    }

    /// This part, sharing the text of the first of `earlier` that has the same text: the
    /// copy made for it goes.
    pub fn same_as<'a>(self, mut earlier: impl Iterator<Item = &'a Part>) -> Part {
        earlier.find(|e| **e == self).cloned().unwrap_or(self)
    }

    /// Whether `other` is this very text, not a copy of it.
    #[cfg(test)]
    pub(crate) fn shares_text_with(&self, other: &Part) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        self.0.get()
    }

    /// The value (read back from the text).
    pub fn value(&self) -> J {
        serde_json::from_str(self.0.get()).unwrap_or(J::Null)
    }

    /// As a YAQL value, read straight from the text.
    pub fn to_yaql(&self) -> Y {
        crate::yaql::Converter::new()
            .convert_text(self.0.get())
            .unwrap_or(Y::Null)
    }

    /// Whether it is `null` (a node with no part).
    pub fn is_null(&self) -> bool {
        self.text() == "null"
    }

    /// Its keys when it is a mapping (read without making its values).
    pub fn keys(&self) -> Option<Vec<String>> {
        serde_json::from_str::<BTreeMap<String, serde::de::IgnoredAny>>(self.text())
            .ok()
            .map(|m| m.into_keys().collect())
    }
}

fn null_text() -> Box<RawValue> {
    RawValue::from_string("null".to_string()).unwrap_or_default()
}

impl Default for Part {
    fn default() -> Part {
        Part(Arc::from(null_text()))
    }
}

impl PartialEq for Part {
    fn eq(&self, other: &Part) -> bool {
        self.text() == other.text()
    }
}

impl serde::Serialize for Part {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Read as a value (from any format: a cluster file's YAML too), kept as its text.
impl<'de> serde::Deserialize<'de> for Part {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Part, D::Error> {
        J::deserialize(d).map(|v| Part::of(&v))
    }
}

/// Deep merge `over` into `base` (dicts merge, anything else replaces).
pub fn deep_merge(base: &mut J, over: &J) {
    match (base, over) {
        (J::Object(b), J::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        deep_merge(existing, v);
                    }
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// A group of attributes as facts: each `{value: x, ...}` becomes `x`; anything else (the
/// group's `metadata`, an attribute without a value) stays as it is.
fn group_values(attrs: &Map<String, J>) -> Map<String, J> {
    attrs
        .iter()
        .map(|(name, attr)| {
            let v = match attr.as_object().and_then(|a| a.get("value")) {
                Some(v) => v.clone(),
                None => attr.clone(),
            };
            (name.clone(), v)
        })
        .collect()
}

/// `v` without the attributes a generator fills (`{generator: password}`): stoker keeps no
/// generated values per environment.
fn without_generators(v: &J) -> Option<J> {
    match v {
        J::Object(o) if o.contains_key("generator") => None,
        J::Object(o) => Some(J::Object(
            o.iter()
                .filter_map(|(k, x)| Some((k.clone(), without_generators(x)?)))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

/// A release's `attributes_metadata` as deployment data, as Nailgun's
/// `Attributes.merged_attrs_values` made it (`objects/cluster.py`): `editable` deep-merged over
/// `generated` (its plain values; see [`without_generators`]); in every group each
/// `{value: x}` becomes `x` and the group's `metadata` stays; the `common` group's keys then
/// move to the top level (`common.debug.value` → `debug`, and `common.metadata` →
/// `metadata`), and each boolean of `additional_components` becomes `{<name>: {enabled: x}}`,
/// merged into a group of that name if there is one (`additional_components.sahara.value` →
/// `sahara.enabled`).
pub fn settings_from_attributes(attributes: &J) -> J {
    let mut merged = attributes
        .get("generated")
        .and_then(without_generators)
        .filter(J::is_object)
        .unwrap_or_else(|| J::Object(Map::new()));
    if let Some(editable) = attributes.get("editable").filter(|e| e.is_object()) {
        deep_merge(&mut merged, editable);
    }
    let J::Object(groups) = merged else {
        return J::Object(Map::new());
    };
    let mut out: Map<String, J> = groups
        .into_iter()
        .map(|(group, attrs)| {
            let v = match attrs.as_object() {
                Some(a) => J::Object(group_values(a)),
                None => attrs,
            };
            (group, v)
        })
        .collect();
    if let Some(J::Object(common)) = out.remove("common") {
        out.extend(common);
    }
    if let Some(J::Object(components)) = out.remove("additional_components") {
        for (name, enabled) in components {
            if !enabled.is_boolean() {
                continue;
            }
            let slot = out.entry(name).or_insert_with(|| J::Object(Map::new()));
            if !slot.is_object() {
                *slot = J::Object(Map::new());
            }
            if let Some(o) = slot.as_object_mut() {
                o.insert("enabled".to_string(), enabled);
            }
        }
    }
    J::Object(out)
}

/// An enabled plugin's settings, under its name in the common part, as
/// `PluginManager.get_plugins_attributes` (`plugins/manager.py`) made them for deployment and
/// `merged_attrs_values` flattened them: a `metadata` block (`create_common_metadata`: `class:
/// plugin`, `toggleable: true`, `weight: 70`, `label` = the plugin's title, `enabled: true`;
/// then the `metadata` of its `environment_config.yaml` attributes; then
/// `fill_plugin_metadata`: `plugin_id`, `plugin_version`, `hot_pluggable`) and each attribute's
/// default value. The environment's values go over these.
pub fn plugin_settings(p: &PluginGraph) -> J {
    let attrs = p.attributes.as_object().cloned().unwrap_or_default();
    let mut metadata = json!({
        "class": "plugin",
        "toggleable": true,
        "weight": 70,
        "label": p.title,
        "enabled": true,
    });
    if let Some(m) = attrs.get("metadata").filter(|m| m.is_object()) {
        dict_update(&mut metadata, m);
    }
    dict_update(
        &mut metadata,
        &json!({
            "plugin_id": p.id,
            "plugin_version": p.version,
            "hot_pluggable": p.hot_pluggable,
        }),
    );
    let mut out = group_values(&attrs);
    out.insert("metadata".to_string(), metadata);
    J::Object(out)
}

/// Python's `dict.update`: `over`'s keys replace `base`'s.
fn dict_update(base: &mut J, over: &J) {
    if let (Some(b), Some(o)) = (base.as_object_mut(), over.as_object()) {
        for (k, v) in o {
            b.insert(k.clone(), v.clone());
        }
    }
}

/// The Fuel version of an environment: the cluster's own, else the part of the release's
/// version after its first `-` when that is a version (`newton-10.0` → `10.0`), else 10.0
/// (Nailgun stamped clusters with the master's `VERSION.release`).
pub fn fuel_version(cluster: &Cluster, release_version: &str) -> String {
    if let Some(v) = &cluster.fuel_version {
        return v.clone();
    }
    match release_version.split_once('-') {
        Some((_, v)) if v.starts_with(|c: char| c.is_ascii_digit()) => v.to_string(),
        _ => "10.0".to_string(),
    }
}

/// Roles Nailgun's HA serializers call critical: a node whose first role is one of them has
/// `fail_if_error` (`DeploymentHASerializer.critical_roles`).
const CRITICAL_ROLES: [&str; 5] = [
    "primary-controller",
    "primary-mongo",
    "primary-swift-proxy",
    "ceph-osd",
    "controller",
];

/// The test VM image OSTF uploads (`generate_test_vm_image_data`); its folder depends on the
/// operating system.
fn test_vm_image(operating_system: &str) -> J {
    let dir = if operating_system.to_ascii_lowercase().contains("ubuntu") {
        "/usr/share/cirros-testvm/"
    } else {
        "/opt/vm/"
    };
    json!({
        "container_format": "bare",
        "public": "true",
        "disk_format": "qcow2",
        "img_name": "TestVM",
        "img_path": format!("{dir}cirros-x86_64-disk.img"),
        "os_name": "cirros",
        "min_ram": 64,
        "glance_properties": "",
        "properties": {},
    })
}

/// Build every node's data (see the module docs for the layers).
pub fn build(
    cluster: &Cluster,
    nodes: &[&NodeSpec],
    assigned: &[Assigned],
    release: &ReleaseGraph,
    plugins: &[PluginGraph],
    deployed: &Deployed,
) -> DeploymentData {
    // 1. The release's settings; 2. each enabled plugin's (`Cluster.get_attributes`).
    let mut common = if release.settings.is_object() {
        release.settings.clone()
    } else {
        J::Object(Map::new())
    };
    let mut enabled: Vec<&PluginGraph> = plugins.iter().collect();
    enabled.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(o) = common.as_object_mut() {
        for p in &enabled {
            o.insert(p.name.clone(), plugin_settings(p));
        }
    }
    // 3. What the serializers generate.
    let fuel_version = fuel_version(cluster, &release.version);
    // Roles as Nailgun's `Node.all_tags`: sorted. Nodes pending deletion are left out of the
    // lists of nodes (`Cluster.get_nodes_not_for_deletion`).
    let roles_of = |a: &Assigned| {
        let mut r = a.roles.clone();
        r.sort();
        r
    };
    let mut meta_nodes = Map::new();
    let mut legacy = Vec::new();
    let mut last_controller: Option<(u64, String)> = None;
    let mut use_cinder = false;
    for (n, a) in nodes.iter().zip(assigned) {
        if n.pending_deletion {
            continue;
        }
        let name = n.name();
        let roles = roles_of(a);
        // NeutronNetworkDeploymentSerializer70.generate_network_metadata, and
        // DeploymentHASerializer90.get_common_attrs for the two `nova_*` flags.
        meta_nodes.insert(
            format!("node-{}", n.uid),
            json!({
                "uid": n.uid,
                "fqdn": n.fqdn(),
                "name": name,
                "user_node_name": n.user_node_name(),
                "swift_zone": n.uid,
                "node_roles": roles,
                "network_roles": {},
                "nova_cpu_pinning_enabled": n.nova_cpu_pinning,
                "nova_hugepages_enabled": n.nova_hugepages,
            }),
        );
        // DeploymentMultinodeSerializer.node_list (+ user_node_name in 6.1, swift_zone in HA).
        for role in &roles {
            legacy.push(json!({
                "uid": n.uid,
                "fqdn": n.fqdn(),
                "name": name,
                "role": role,
                "user_node_name": n.user_node_name(),
                "swift_zone": n.uid,
            }));
            // DeploymentHASerializer.get_last_controller: the controller with the highest uid.
            if role == "controller" || role == "primary-controller" {
                let key = n.uid.parse::<u64>().unwrap_or(0);
                if last_controller.as_ref().is_none_or(|(k, _)| key >= *k) {
                    last_controller = Some((key, name.clone()));
                }
            }
        }
        // DeploymentMultinodeSerializer.get_common_attrs: `resolver.resolve(['cinder'])`.
        use_cinder |= a.tags.iter().any(|t| t == "cinder");
    }
    // The settings' `workloads_collector.user` becomes `username`, and `create_user` says
    // whether the master sends statistics (stoker sends none).
    let mut workloads = common
        .as_object_mut()
        .and_then(|o| o.remove("workloads_collector"))
        .filter(J::is_object)
        .unwrap_or_else(|| J::Object(Map::new()));
    let username = workloads
        .as_object_mut()
        .and_then(|w| w.remove("user"))
        .unwrap_or(J::Null);
    if let Some(w) = workloads.as_object_mut() {
        w.insert("create_user".to_string(), J::Bool(false));
        w.insert("username".to_string(), username);
    }
    let plugin_list: Vec<J> = enabled
        .iter()
        .map(|p| {
            // DeploymentLCMSerializer.serialize_plugin (repositories left out).
            let dir = plugin_dir(&p.name, &p.version);
            let folder = dir
                .trim_start_matches("/etc/fuel/plugins/")
                .trim_end_matches('/');
            json!({
                "name": p.name,
                "scripts": [{
                    "remote_url": format!(
                        "rsync://{}:/plugins/{folder}/{}",
                        cluster.master_ip, p.scripts_path
                    ),
                    "local_path": dir,
                }],
            })
        })
        .collect();
    let mut generated = json!({
        // DeploymentMultinodeSerializer.get_common_attrs
        "deployment_mode": cluster.mode,
        "deployment_id": cluster.id,
        "openstack_version": release.version,
        "fuel_version": fuel_version,
        "nodes": legacy,
        "workloads_collector": workloads,
        // NeutronNetworkDeploymentSerializer.get_common_attrs (network_metadata's nodes only)
        "master_ip": cluster.master_ip,
        "network_metadata": {"nodes": meta_nodes, "vips": {}},
        // inject_list_of_plugins
        "plugins": plugin_list,
        // DeploymentHASerializer.get_common_attrs
        "mp": [{"point": "1", "weight": "1"}, {"point": "2", "weight": "2"}],
        "last_controller": last_controller.map(|(_, name)| name),
        // DeploymentLCMSerializer.get_common_attrs
        "cluster": {
            "id": cluster.id,
            "name": cluster.name,
            "fuel_version": fuel_version,
            "status": cluster.status,
            "mode": cluster.mode,
        },
        "release": {
            "name": release.name,
            "version": release.version,
            "operating_system": release.operating_system,
        },
    });
    // NeutronNetworkDeploymentSerializer: the network keys, when the environment has networks.
    if let Some(net) = &cluster.network {
        deep_merge(&mut generated, &net.common);
    }
    if use_cinder && let Some(o) = generated.as_object_mut() {
        o.insert("use_cinder".to_string(), J::Bool(true));
    }
    deep_merge(&mut common, &generated);
    // 4. The environment's values; `chosen_id`, which picked the plugin's version, is not
    // one (Nailgun's deployment data has no such key).
    deep_merge(&mut common, &cluster.settings);
    if let Some(o) = common.as_object_mut() {
        for p in &enabled {
            if let Some(m) = o
                .get_mut(&p.name)
                .and_then(|g| g.get_mut("metadata"))
                .and_then(J::as_object_mut)
            {
                m.remove("chosen_id");
            }
        }
    }
    let vm_image = test_vm_image(&release.operating_system);
    // Each part is made and written as text before the next: the values of every node's
    // part never live together.
    let mut node_keys = Some(BTreeSet::new());
    let node_parts: Vec<Part> = nodes
        .iter()
        .zip(assigned)
        .map(|(n, a)| {
            // 4. What an operator uploaded is instead of the node's part.
            if let Some(replaced) = cluster.replaced.nodes.get(&n.uid) {
                keys_of(&mut node_keys, replaced);
                return Part::of(replaced);
            }
            let roles = roles_of(a);
            // DeploymentMultinodeSerializer.serialize_node (+ 6.1's user_node_name), as
            // DeploymentLCMSerializer.serialize_node calls it with the first role.
            let critical = roles
                .first()
                .is_some_and(|r| CRITICAL_ROLES.contains(&r.as_str()));
            let mut part = json!({
                "uid": n.uid,
                "name": n.name(),
                "fqdn": n.fqdn(),
                "status": n.status,
                "vms_conf": [],
                "fail_if_error": critical,
                "online": n.online,
                "user_node_name": n.user_node_name(),
                "test_vm_image": vm_image,
                "roles": roles,
                "node_roles": roles,
                "configuration": {},
                "configuration_options": {},
            });
            if n.pending_deletion
                && let Some(o) = part.as_object_mut()
            {
                o.insert("deleted".to_string(), J::Bool(true));
            }
            if let Some(scheme) = cluster.network.as_ref().and_then(|f| f.scheme(&n.uid))
                && let Some(o) = part.as_object_mut()
            {
                o.insert("network_scheme".to_string(), scheme);
            }
            deep_merge(&mut part, &n.data);
            keys_of(&mut node_keys, &part);
            // Unchanged since a deployment: the deployed snapshot's text, not a second one.
            Part::of(&part).same_as(deployed.parts_of(&n.uid))
        })
        .collect();

    // 4. What an operator uploaded: over the common part.
    if let Some(over) = &cluster.replaced.common {
        deep_merge(&mut common, over);
    }
    let master = json!({"uid": "master", "roles": ["master"]});
    keys_of(&mut node_keys, &master);
    DeploymentData {
        common,
        nodes: node_parts,
        master: Part::of(&master),
        node_keys,
    }
}

/// Add the keys of `part` to `keys`; a part that is not a mapping leaves none.
fn keys_of(keys: &mut Option<BTreeSet<String>>, part: &J) {
    match (keys.as_mut(), part.as_object()) {
        (Some(k), Some(o)) => k.extend(o.keys().cloned()),
        _ => *keys = None,
    }
}

/// JSON into a YAQL value (arrays become tuples, objects frozen dicts, as yaql's
/// `convert_input_data`).
pub fn to_yaql(v: &J) -> Y {
    serde::Deserialize::deserialize(v).unwrap_or(Y::Null)
}

/// `UnionDict(common, node)` as a value: node keys win, dicts on both sides merge, and the
/// common part's untouched sub-trees are shared, not copied.
pub fn union(common: &Y, node: &Y) -> Y {
    match (common, node) {
        (Y::Dict(c), Y::Dict(n)) => {
            let mut map = c.map.clone();
            for (k, v) in &n.map {
                let merged = match map.get(k) {
                    Some(existing @ Y::Dict(_)) if matches!(v, Y::Dict(_)) => union(existing, v),
                    _ => v.clone(),
                };
                map.insert(k.clone(), merged);
            }
            Y::frozen_dict(map)
        }
        (_, n) => n.clone(),
    }
}

/// Walk `path` (dotted keys) through the union of `common` and `node` without building it.
pub fn union_path(common: &J, node: &J, path: &str) -> Option<J> {
    let mut c = Some(common);
    let mut n = Some(node);
    for key in path.split('.') {
        let nv = n.and_then(|x| x.as_object()).and_then(|o| o.get(key));
        let cv = c.and_then(|x| x.as_object()).and_then(|o| o.get(key));
        match (nv, cv) {
            (Some(v), Some(w)) if v.is_object() && w.is_object() => {
                n = Some(v);
                c = Some(w);
            }
            (Some(v), _) => {
                n = Some(v);
                c = None;
            }
            (None, Some(w)) => {
                n = None;
                c = Some(w);
            }
            (None, None) => return None,
        }
    }
    match (n, c) {
        (Some(v), Some(w)) if v.is_object() && w.is_object() => {
            let mut merged = w.clone();
            deep_merge(&mut merged, v);
            Some(merged)
        }
        (Some(v), _) => Some(v.clone()),
        (None, Some(w)) => Some(w.clone()),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::graph::input::NodeSpec;

    /// A part kept as text gives back the value it was made from, and the same YAQL value
    /// (variants, key order, numbers) as converting the value itself, which the plan did
    /// before parts were text; keys and `null` are read from the text.
    #[test]
    fn a_part_kept_as_text_reads_back_as_its_value() {
        let values = [
            json!({"uid": "7", "b": [1, -2, 2.5, 1e300, -0.0, 9_223_372_036_854_775_807i64,
                   18_446_744_073_709_551_615u64, null, true],
                   "a": {"é\u{1F600}\"\n": [[], {}], "z": "x"}, "scheme": {"endpoints": {}}}),
            json!([1, "two"]),
            json!("text"),
            J::Null,
        ];
        for v in values {
            let part = Part::of(&v);
            assert_eq!(part.value(), v);
            assert_eq!(part.text(), serde_json::to_string(&v).unwrap());
            assert_eq!(
                format!("{:?}", part.to_yaql()),
                format!("{:?}", to_yaql(&v))
            );
            assert_eq!(part.is_null(), v.is_null());
            assert_eq!(
                part.keys(),
                v.as_object().map(|o| o.keys().cloned().collect())
            );
            // Written into a document as the value would be, and read back from any format.
            assert_eq!(
                serde_json::to_string(&json!({"p": v})).unwrap(),
                serde_json::to_string(
                    &serde_json::json!({"p": serde_json::to_value(&part).unwrap()})
                )
                .unwrap()
            );
            let yaml: Part = serde_saphyr::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
            assert_eq!(yaml, part);
        }
    }

    #[test]
    fn attributes_flatten_like_nailgun() {
        let attrs = json!({
            "editable": {
                "common": {"metadata": {"label": "Common"}, "debug": {"value": true}},
                "additional_components": {
                    "metadata": {"label": "Additional"},
                    "sahara": {"value": false},
                    "murano": {"value": true},
                },
                "murano": {"metadata": {"label": "Murano"}, "db": {"value": "mysql"}},
                "public_ssl": {"horizon": {"value": true}, "metadata": {"label": "x"}},
                "custom": {"no_value": {"label": "kept whole"}},
                "mysql": {"port": {"value": 3306}},
            },
            "generated": {
                "mysql": {"root_password": {"generator": "password"}, "wsrep": {"port": 4567}},
                "nova": {"state_path": "/var/lib/nova"},
            },
        });
        assert_eq!(
            settings_from_attributes(&attrs),
            json!({
                "debug": true,
                "metadata": {"label": "Common"},
                "sahara": {"enabled": false},
                "murano": {"metadata": {"label": "Murano"}, "db": "mysql", "enabled": true},
                "public_ssl": {"horizon": true, "metadata": {"label": "x"}},
                "custom": {"no_value": {"label": "kept whole"}},
                "mysql": {"port": 3306, "wsrep": {"port": 4567}},
                "nova": {"state_path": "/var/lib/nova"},
            })
        );
    }

    fn release() -> ReleaseGraph {
        ReleaseGraph {
            name: "Newton".into(),
            version: "newton-10.0".into(),
            operating_system: "Ubuntu".into(),
            settings: settings_from_attributes(&json!({
                "editable": {
                    "common": {
                        "metadata": {"label": "Common", "weight": 30},
                        "debug": {"value": false, "type": "checkbox"},
                        "propagate_task_deploy": {"value": false, "type": "hidden"},
                    },
                    "additional_components": {"sahara": {"value": true, "type": "checkbox"}},
                    "access": {
                        "metadata": {"label": "Access", "weight": 10},
                        "user": {"value": "admin", "type": "text"},
                    },
                    "sahara": {"db": {"value": "mysql"}},
                    "workloads_collector": {
                        "enabled": {"value": true, "type": "hidden"},
                        "user": {"value": "fuel_stats_user", "type": "hidden"},
                    },
                },
                "generated": {
                    "mysql": {"root_password": {"generator": "password"}},
                    "nova": {"state_path": "/var/lib/nova"},
                },
            })),
            ..ReleaseGraph::default()
        }
    }

    fn odl() -> PluginGraph {
        PluginGraph {
            name: "odl".into(),
            version: "1.2.3".into(),
            id: 7,
            title: "OpenDaylight".into(),
            attributes: json!({
                "metadata": {"group": "network", "odl_deb": "opendaylight"},
                "enable_sfc": {"value": false, "type": "checkbox", "label": "SFC"},
                "rest_api_port": {"value": "8282", "type": "text", "label": "Port"},
            }),
            scripts_path: "deployment_scripts/".into(),
            ..PluginGraph::default()
        }
    }

    fn assigned(roles: &[&str], tags: &[&str]) -> Assigned {
        Assigned {
            roles: roles.iter().map(|r| r.to_string()).collect(),
            tags: tags.iter().map(|r| r.to_string()).collect(),
        }
    }

    /// A small cluster's data against what Nailgun (stable/newton) would serialize for it, key
    /// by key. The keys come from nailgun/orchestrator/deployment_serializers.py:
    /// - `DeploymentMultinodeSerializer.get_common_attrs`: the settings
    ///   (objects/cluster.py `Attributes.merged_attrs_values` of `Cluster.get_attributes`, with
    ///   plugins/manager.py `PluginManager.get_plugins_attributes`), `deployment_mode`,
    ///   `deployment_id` (= the cluster's id), `openstack_version`, `fuel_version`, `nodes`
    ///   (`node_list`), `workloads_collector`, `use_cinder`, `plugins`
    ///   (`inject_list_of_plugins`);
    /// - `DeploymentMultinodeSerializer61.serialize_node_for_node_list` (`user_node_name`),
    ///   `DeploymentHASerializer.node_list` (`swift_zone`), `.get_common_attrs` (`mp`,
    ///   `last_controller`);
    /// - `DeploymentHASerializer90.get_common_attrs` (`nova_cpu_pinning_enabled`,
    ///   `nova_hugepages_enabled`) over extensions/network_manager/serializers/
    ///   neutron_serializers.py `generate_network_metadata` (`network_metadata.nodes`, keyed
    ///   `node-<id>`);
    /// - `DeploymentLCMSerializer.get_common_attrs` (`cluster`: id, name, fuel_version, status,
    ///   mode; `release`: name, version, operating_system), `.serialize_plugin` (`plugins`
    ///   entries), `.serialize_nodes` (the master pseudo node), `.serialize_node` (`roles`,
    ///   `deleted`, `configuration`, `configuration_options` from `inject_configs`);
    /// - `DeploymentMultinodeSerializer.serialize_node` (`uid`, `fqdn`, `status`, `vms_conf`,
    ///   `fail_if_error`, `online`, `test_vm_image` from `generate_test_vm_image_data`) and
    ///   `DeploymentMultinodeSerializer61.serialize_node` (`user_node_name`).
    #[test]
    fn a_small_cluster_serializes_as_nailgun_did() {
        let cluster = Cluster {
            id: 5,
            name: "env".into(),
            settings: json!({"odl": {"metadata": {"enabled": true}, "rest_api_port": "9999"},
                             "debug": true}),
            ..Cluster::default()
        };
        let mut n1 = NodeSpec::new("1", &["controller"]);
        n1.user_node_name = Some("Untitled (0a:01)".into());
        let mut n2 = NodeSpec::new("2", &["compute", "cinder"]);
        n2.status = "discover".into();
        let mut n3 = NodeSpec::new("3", &["compute"]);
        n3.pending_deletion = true;
        n3.online = false;
        let d = build(
            &cluster,
            &[&n1, &n2, &n3],
            &[
                assigned(&["primary-controller"], &["primary-controller"]),
                assigned(&["compute", "cinder"], &["compute", "cinder"]),
                assigned(&["compute"], &["compute"]),
            ],
            &release(),
            &[odl()],
            &Deployed::default(),
        );
        let entry = |uid: &str, role: &str, user: &str| {
            json!({"uid": uid, "fqdn": format!("node-{uid}.domain.tld"), "name": format!("node-{uid}"),
                   "role": role, "user_node_name": user, "swift_zone": uid})
        };
        let meta = |uid: &str, roles: J, user: &str| {
            json!({"uid": uid, "fqdn": format!("node-{uid}.domain.tld"), "name": format!("node-{uid}"),
                   "user_node_name": user, "swift_zone": uid, "node_roles": roles,
                   "network_roles": {}, "nova_cpu_pinning_enabled": false,
                   "nova_hugepages_enabled": false})
        };
        assert_eq!(
            d.common,
            json!({
                // The release's settings, flattened.
                "access": {"metadata": {"label": "Access", "weight": 10}, "user": "admin"},
                "metadata": {"label": "Common", "weight": 30},
                "debug": true,
                "propagate_task_deploy": false,
                "sahara": {"db": "mysql", "enabled": true},
                "mysql": {},
                "nova": {"state_path": "/var/lib/nova"},
                "workloads_collector": {"enabled": true, "create_user": false,
                                        "username": "fuel_stats_user"},
                // The plugin's, under its name, the environment's value over its default.
                "odl": {
                    "metadata": {"class": "plugin", "toggleable": true, "weight": 70,
                                 "label": "OpenDaylight", "enabled": true, "group": "network",
                                 "odl_deb": "opendaylight", "plugin_id": 7,
                                 "plugin_version": "1.2.3", "hot_pluggable": false},
                    "enable_sfc": false,
                    "rest_api_port": "9999",
                },
                "deployment_mode": "ha_compact",
                "deployment_id": 5,
                "openstack_version": "newton-10.0",
                "fuel_version": "10.0",
                "nodes": [
                    entry("1", "primary-controller", "Untitled (0a:01)"),
                    entry("2", "cinder", "node-2"),
                    entry("2", "compute", "node-2"),
                ],
                "use_cinder": true,
                "master_ip": "10.20.0.2",
                "network_metadata": {
                    "nodes": {
                        "node-1": meta("1", json!(["primary-controller"]), "Untitled (0a:01)"),
                        "node-2": meta("2", json!(["cinder", "compute"]), "node-2"),
                    },
                    "vips": {},
                },
                "plugins": [{"name": "odl", "scripts": [{
                    "remote_url": "rsync://10.20.0.2:/plugins/odl-1.2/deployment_scripts/",
                    "local_path": "/etc/fuel/plugins/odl-1.2/",
                }]}],
                "mp": [{"point": "1", "weight": "1"}, {"point": "2", "weight": "2"}],
                "last_controller": "node-1",
                "cluster": {"id": 5, "name": "env", "fuel_version": "10.0", "status": "new",
                            "mode": "ha_compact"},
                "release": {"name": "Newton", "version": "newton-10.0",
                            "operating_system": "Ubuntu"},
            })
        );
        let vm = json!({"container_format": "bare", "public": "true", "disk_format": "qcow2",
                        "img_name": "TestVM",
                        "img_path": "/usr/share/cirros-testvm/cirros-x86_64-disk.img",
                        "os_name": "cirros", "min_ram": 64, "glance_properties": "",
                        "properties": {}});
        assert_eq!(
            d.nodes[0].value(),
            json!({"uid": "1", "name": "node-1", "fqdn": "node-1.domain.tld", "status": "ready",
                   "vms_conf": [], "fail_if_error": true, "online": true,
                   "user_node_name": "Untitled (0a:01)", "test_vm_image": vm,
                   "roles": ["primary-controller"], "node_roles": ["primary-controller"],
                   "configuration": {}, "configuration_options": {}})
        );
        // The first role (sorted) decides `fail_if_error`.
        assert_eq!(d.nodes[1].value()["roles"], json!(["cinder", "compute"]));
        assert_eq!(d.nodes[1].value()["fail_if_error"], false);
        assert_eq!(d.nodes[1].value()["status"], "discover");
        // A node pending deletion is marked and left out of the lists of nodes.
        assert_eq!(d.nodes[2].value()["deleted"], true);
        assert_eq!(d.nodes[2].value()["online"], false);
        assert!(d.nodes[0].value().get("deleted").is_none());
        assert_eq!(
            d.master.value(),
            json!({"uid": "master", "roles": ["master"]})
        );
    }

    #[test]
    fn node_data_layers() {
        let cluster = Cluster {
            settings: json!({"network_metadata": {"vips": {"a": 1}}, "x": 1}),
            ..Cluster::default()
        };
        let mut n = NodeSpec::new("3", &["controller"]);
        n.data = std::sync::Arc::new(json!({"x": 2, "network_scheme": {}}));
        let r = ReleaseGraph {
            settings: json!({"x": 0, "debug": false}),
            ..ReleaseGraph::default()
        };
        let d = build(
            &cluster,
            &[&n],
            &[assigned(&["primary-controller"], &[])],
            &r,
            &[],
            &Deployed::default(),
        );
        assert_eq!(d.common["x"], 1);
        assert_eq!(d.common["debug"], false);
        assert_eq!(d.common["network_metadata"]["vips"]["a"], 1);
        assert_eq!(
            d.common["network_metadata"]["nodes"]["node-3"]["node_roles"],
            json!(["primary-controller"])
        );
        assert_eq!(d.nodes[0].value()["x"], 2);
        assert_eq!(d.nodes[0].value()["roles"], json!(["primary-controller"]));
    }

    #[test]
    fn fuel_version_from_the_cluster_or_the_release() {
        let c = Cluster::default();
        assert_eq!(fuel_version(&c, "newton-10.0"), "10.0");
        assert_eq!(fuel_version(&c, "2014.2.2-6.1"), "6.1");
        assert_eq!(fuel_version(&c, "stable-newton"), "10.0");
        let pinned = Cluster {
            fuel_version: Some("9.0".into()),
            ..Cluster::default()
        };
        assert_eq!(fuel_version(&pinned, "newton-10.0"), "9.0");
    }

    #[test]
    fn union_matches_a_deep_merge() {
        let common = json!({"a": {"b": 1, "c": 2}, "d": [1], "e": 5});
        let node = json!({"a": {"c": 3}, "d": [2], "f": 6});
        let mut merged = common.clone();
        deep_merge(&mut merged, &node);
        let u = union(&to_yaql(&common), &to_yaql(&node));
        assert_eq!(u.to_json().unwrap(), merged);
        assert_eq!(union_path(&common, &node, "a.c"), Some(json!(3)));
        assert_eq!(
            union_path(&common, &node, "a"),
            Some(json!({"b": 1, "c": 3}))
        );
        assert_eq!(union_path(&common, &node, "e"), Some(json!(5)));
        assert_eq!(union_path(&common, &node, "zz.y"), None);
    }
}
