//! Each node's deployment data (Fuel's "astute.yaml"), the `$` of every YAQL field: a common
//! part deep-merged under a node part, the node's keys winning (Nailgun's `UnionDict`).
//!
//! The common part is, lowest priority first: the release's setting defaults
//! (`attributes_metadata.editable`, flattened as Nailgun serialized them: `common.x.value` →
//! `x`, `additional_components.x.value` → `x.enabled`, `group.x.value` → `group.x`); what stoker
//! generates (`cluster: {id, name}`, `openstack_version`, `master_ip`, `network_metadata.nodes`
//! with every node's uid, name, fqdn and node_roles, and the legacy `nodes` list); then the
//! cluster's `settings`. The node part is `uid`, `name`, `fqdn`, `roles` (primaries applied),
//! `node_roles`, `status`, then the node's own `data`. The master pseudo node is
//! `{uid: master, roles: [master]}`.
//!
//! Values are converted to YAQL values once (the common part once per plan), and a node's view
//! shares the common part's sub-trees instead of copying them. Pure.

use serde_json::{Map, Value as J, json};

use super::input::{Cluster, NodeSpec};
use super::roles::Assigned;
use crate::yaql::Value as Y;

/// The deployment data of one plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeploymentData {
    pub common: J,
    /// Node parts, in node order.
    pub nodes: Vec<J>,
    /// The master pseudo node's part.
    pub master: J,
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

/// A release's `attributes_metadata` as deployment data (see the module docs).
pub fn settings_from_attributes(attributes: &J) -> J {
    let mut out = Map::new();
    let Some(groups) = attributes.get("editable").and_then(J::as_object) else {
        return J::Object(out);
    };
    for (group, attrs) in groups {
        let Some(attrs) = attrs.as_object() else {
            continue;
        };
        let mut g = Map::new();
        for (name, attr) in attrs {
            if name == "metadata" {
                continue;
            }
            let Some(value) = attr.get("value") else {
                continue;
            };
            match group.as_str() {
                "common" => {
                    out.insert(name.clone(), value.clone());
                }
                "additional_components" => {
                    out.insert(name.clone(), json!({"enabled": value}));
                }
                _ => {
                    g.insert(name.clone(), value.clone());
                }
            }
        }
        if !g.is_empty() {
            let mut merged = out.remove(group).unwrap_or(J::Object(Map::new()));
            deep_merge(&mut merged, &J::Object(g));
            out.insert(group.clone(), merged);
        }
    }
    J::Object(out)
}

/// Build every node's data. `release_settings` is [`settings_from_attributes`] of the release.
pub fn build(
    cluster: &Cluster,
    nodes: &[NodeSpec],
    assigned: &[Assigned],
    release_version: &str,
    release_settings: &J,
) -> DeploymentData {
    let mut common = if release_settings.is_object() {
        release_settings.clone()
    } else {
        J::Object(Map::new())
    };
    let mut meta_nodes = Map::new();
    let mut legacy = Vec::new();
    for (n, a) in nodes.iter().zip(assigned) {
        let name = n.name();
        meta_nodes.insert(
            name.clone(),
            json!({
                "uid": n.uid,
                "name": name,
                "user_node_name": name,
                "fqdn": n.fqdn(),
                "node_roles": a.roles,
                "swift_zone": n.uid,
            }),
        );
        for role in &a.roles {
            legacy.push(json!({"uid": n.uid, "name": name, "fqdn": n.fqdn(), "role": role}));
        }
    }
    let generated = json!({
        "cluster": {"id": cluster.id, "name": cluster.name},
        "openstack_version": release_version,
        "master_ip": cluster.master_ip,
        "network_metadata": {"nodes": meta_nodes},
        "nodes": legacy,
    });
    deep_merge(&mut common, &generated);
    deep_merge(&mut common, &cluster.settings);
    let node_parts = nodes
        .iter()
        .zip(assigned)
        .map(|(n, a)| {
            let mut part = json!({
                "uid": n.uid,
                "name": n.name(),
                "fqdn": n.fqdn(),
                "roles": a.roles,
                "node_roles": a.roles,
                "status": n.status,
            });
            deep_merge(&mut part, &n.data);
            part
        })
        .collect();
    DeploymentData {
        common,
        nodes: node_parts,
        master: json!({"uid": "master", "roles": ["master"]}),
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

    #[test]
    fn attributes_flatten_like_nailgun() {
        let attrs = json!({"editable": {
            "common": {"metadata": {}, "debug": {"value": true}},
            "additional_components": {"sahara": {"value": false}},
            "public_ssl": {"horizon": {"value": true}, "metadata": {"label": "x"}},
            "empty": {"metadata": {}}
        }});
        assert_eq!(
            settings_from_attributes(&attrs),
            json!({"debug": true, "sahara": {"enabled": false}, "public_ssl": {"horizon": true}})
        );
    }

    #[test]
    fn node_data_layers() {
        let cluster = Cluster {
            settings: json!({"network_metadata": {"vips": {"a": 1}}, "x": 1}),
            ..Cluster::default()
        };
        let mut n = NodeSpec::new("3", &["controller"]);
        n.data = json!({"x": 2, "network_scheme": {}});
        let a = Assigned {
            roles: vec!["primary-controller".into()],
            tags: vec![],
        };
        let d = build(
            &cluster,
            &[n],
            &[a],
            "newton-10.0",
            &json!({"x": 0, "debug": false}),
        );
        assert_eq!(d.common["x"], 1);
        assert_eq!(d.common["debug"], false);
        assert_eq!(d.common["network_metadata"]["vips"]["a"], 1);
        assert_eq!(
            d.common["network_metadata"]["nodes"]["node-3"]["node_roles"],
            json!(["primary-controller"])
        );
        assert_eq!(d.nodes[0]["x"], 2);
        assert_eq!(d.nodes[0]["roles"], json!(["primary-controller"]));
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
