//! Deployment and provisioning facts as Nailgun's orchestrator API serves them (`fuel2 env
//! deployment-facts|provisioning-facts download|upload|delete`, old `fuel deployment|
//! provisioning --download|--upload|--delete|--default`):
//! - the defaults are what the master generates: the deployment data of the plan made without
//!   uploads, and each node's provisioning data (identity, addresses, disks);
//! - an upload replaces the environment's uploaded facts of that kind; a node's are checked to be
//!   a node of the environment (stoker refuses and names a stranger, where Nailgun dropped it);
//! - the next deployment uses them: the uploaded common deployment facts are merged over the
//!   generated ones and a node's replace its own ([`crate::engine::graph::Replaced`]); a node's
//!   uploaded provisioning `hostname` names the node its provisioning configures.
//!
//! Shapes are Nailgun's: deployment facts a list of node dicts with `uid` (the common part
//! merged into each, or, with `split`, apart with uid `common`); provisioning facts
//! `{engine, nodes: [...]}`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value as J, json};

use crate::engine::graph::data::deep_merge;
use crate::model::FieldError;
use crate::store::{COMMON, FactsKind};

/// Nailgun's `_deployment_info_in_compatible_format`: node dicts with the common part merged
/// into each, or (`split`) the common part apart as one more dict with uid `common`.
pub fn compatible(common: Option<&J>, nodes: Vec<J>, split: bool) -> J {
    let mut out = nodes;
    if let Some(common) = common.filter(|c| c.as_object().is_some_and(|o| !o.is_empty())) {
        if split {
            let mut c = common.clone();
            if let Some(o) = c.as_object_mut() {
                o.insert("uid".into(), json!(COMMON));
            }
            out.push(c);
        } else {
            for n in &mut out {
                let mut merged = common.clone();
                deep_merge(&mut merged, n);
                *n = merged;
            }
        }
    }
    J::Array(out)
}

/// The uploaded facts of `kind` in Nailgun's shape: deployment facts as [`compatible`],
/// provisioning facts as `{<common keys>, nodes: [...]}` (`{}` when none).
pub fn uploaded_json(kind: FactsKind, mut facts: BTreeMap<String, J>, split: bool) -> J {
    let common = facts.remove(COMMON);
    let nodes: Vec<J> = facts.into_values().collect();
    match kind {
        FactsKind::Deployment => compatible(common.as_ref(), nodes, split),
        FactsKind::Provisioning => {
            if common.is_none() && nodes.is_empty() {
                return json!({});
            }
            let mut out = match common {
                Some(J::Object(o)) => o,
                _ => Map::new(),
            };
            out.insert("nodes".into(), J::Array(nodes));
            J::Object(out)
        }
    }
}

fn uid_of(v: &J) -> Option<String> {
    match &v["uid"] {
        J::String(s) => Some(s.clone()),
        J::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A host name as RFC 1123 allows it.
fn is_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// An upload of `kind` checked against the environment's `members` (node ids): by uid, the
/// common part under [`COMMON`]. Deployment facts: a list of dicts with `uid` (`common` for the
/// common part), or `{common, nodes}` with `nodes` a list or a dict by uid; provisioning
/// facts: `{..., nodes: [...]}`, everything but `nodes` the common part.
pub fn parse_upload(
    kind: FactsKind,
    body: &J,
    members: &BTreeSet<i64>,
) -> Result<BTreeMap<String, J>, Vec<FieldError>> {
    let mut problems = Vec::new();
    let mut out = BTreeMap::new();
    let mut field = |field: String, message: String| problems.push(FieldError { field, message });
    let (common, nodes): (Option<J>, Vec<J>) = match (kind, body) {
        (FactsKind::Deployment, J::Array(list)) => {
            let mut common = None;
            let mut nodes = Vec::new();
            for item in list {
                if uid_of(item).as_deref() == Some(COMMON) {
                    let mut c = item.clone();
                    if let Some(o) = c.as_object_mut() {
                        o.remove("uid");
                    }
                    common = Some(c);
                } else {
                    nodes.push(item.clone());
                }
            }
            (common, nodes)
        }
        (FactsKind::Deployment, J::Object(o)) => {
            let nodes = match o.get("nodes") {
                None => Vec::new(),
                Some(J::Array(l)) => l.clone(),
                Some(J::Object(m)) => m
                    .iter()
                    .map(|(uid, v)| {
                        let mut v = v.clone();
                        if let Some(o) = v.as_object_mut() {
                            o.entry("uid").or_insert_with(|| json!(uid));
                        }
                        v
                    })
                    .collect(),
                Some(_) => {
                    field("nodes".into(), "must be a list or an object by uid".into());
                    Vec::new()
                }
            };
            for k in o.keys().filter(|k| *k != "common" && *k != "nodes") {
                field(k.clone(), "unknown key: expected common and nodes".into());
            }
            (o.get("common").cloned(), nodes)
        }
        (FactsKind::Provisioning, J::Object(o)) => {
            let nodes = match o.get("nodes") {
                None => Vec::new(),
                Some(J::Array(l)) => l.clone(),
                Some(_) => {
                    field("nodes".into(), "must be a list".into());
                    Vec::new()
                }
            };
            let mut common = o.clone();
            common.remove("nodes");
            ((!common.is_empty()).then_some(J::Object(common)), nodes)
        }
        (FactsKind::Deployment, _) => {
            field(
                "$".into(),
                "must be a list of node facts (each with uid) or {common, nodes}".into(),
            );
            (None, Vec::new())
        }
        (FactsKind::Provisioning, _) => {
            field(
                "$".into(),
                "must be an object: {engine, nodes: [...]}".into(),
            );
            (None, Vec::new())
        }
    };
    if let Some(c) = common {
        if c.is_object() {
            out.insert(COMMON.to_string(), c);
        } else {
            field("common".into(), "must be an object".into());
        }
    }
    for (i, n) in nodes.into_iter().enumerate() {
        let at = format!("nodes[{i}]");
        if !n.is_object() {
            field(at, "must be an object".into());
            continue;
        }
        let Some(uid) = uid_of(&n) else {
            field(format!("{at}.uid"), "is required: the node's id".into());
            continue;
        };
        match uid.parse::<i64>() {
            Ok(id) if members.contains(&id) => {}
            _ => {
                field(
                    format!("{at}.uid"),
                    format!("{uid:?} is not a node of this environment"),
                );
                continue;
            }
        }
        if kind == FactsKind::Provisioning {
            match &n["hostname"] {
                J::Null => {}
                J::String(h) if is_hostname(h) => {}
                _ => {
                    field(
                        format!("{at}.hostname"),
                        "must be a host name (letters, digits, '-' and '.', at most 253)".into(),
                    );
                    continue;
                }
            }
        }
        if out.insert(uid.clone(), n).is_some() {
            field(format!("{at}.uid"), format!("node {uid} is given twice"));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The generated facts of `kind` for environment `cluster_id`'s nodes `only` (none: every node
/// not pending deletion; a stranger is refused by name), in Nailgun's shape.
pub fn defaults(
    m: &crate::deployer::Master<'_>,
    cluster_id: i64,
    kind: FactsKind,
    only: &BTreeSet<i64>,
    split: bool,
    now: i64,
) -> Result<J, crate::deployer::DeployError> {
    let nodes = m.store.read(|r| {
        r.existing_cluster(cluster_id)?;
        r.cluster_nodes(cluster_id)
    })?;
    let strangers: Vec<String> = only
        .iter()
        .filter(|id| !nodes.iter().any(|n| n.id == **id))
        .map(ToString::to_string)
        .collect();
    if !strangers.is_empty() {
        return Err(crate::deployer::DeployError::NotInEnvironment {
            nodes: strangers.join(", "),
            cluster: cluster_id.to_string(),
        });
    }
    let chosen = |id: i64, pending: bool| {
        if only.is_empty() {
            !pending
        } else {
            only.contains(&id)
        }
    };
    match kind {
        FactsKind::Deployment => {
            let planned = m.plans.generated(m.store, m.data_dir, cluster_id, now)?;
            let env = planned.plan.map_err(crate::planner::PlanningError::Kept)?;
            let plan = &env.plan;
            let picked: Vec<J> = plan
                .uids
                .iter()
                .zip(&plan.data.nodes)
                .filter(|(uid, _)| {
                    nodes
                        .iter()
                        .any(|n| n.id.to_string() == **uid && chosen(n.id, n.pending_deletion))
                })
                .map(|(_, facts)| facts.value())
                .collect();
            Ok(compatible(Some(&plan.data.common), picked, split))
        }
        FactsKind::Provisioning => {
            let volumes = m
                .store
                .read(|r| crate::volumes::of_nodes(r, cluster_id, &nodes))?;
            let list: Vec<J> = nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| chosen(n.id, n.pending_deletion))
                .map(|(i, n)| {
                    json!({
                        "uid": n.id.to_string(),
                        "name": format!("node-{}", n.id),
                        "hostname": n.hostname,
                        "fqdn": format!("{}.domain.tld", n.hostname),
                        "mac": n.mac.as_str(),
                        "ip": n.address,
                        "ks_meta": {"pm_data": {"ks_spaces": volumes.node(i)}},
                    })
                })
                .collect();
            Ok(json!({
                "engine": {"provision_method": "image"},
                "nodes": list,
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_are_read_in_both_of_nailguns_shapes_and_strangers_named() {
        let members: BTreeSet<i64> = [1, 2].into();
        let list = json!([{"uid": "common", "a": 1}, {"uid": "1", "b": 2}, {"uid": 2, "c": 3}]);
        let got = parse_upload(FactsKind::Deployment, &list, &members).unwrap();
        assert_eq!(got[COMMON], json!({"a": 1}));
        assert_eq!(got["2"]["c"], 3);
        let dict = json!({"common": {"a": 1}, "nodes": {"1": {"b": 2}}});
        let got = parse_upload(FactsKind::Deployment, &dict, &members).unwrap();
        assert_eq!(got["1"], json!({"b": 2, "uid": "1"}));
        let bad = json!([{"uid": "7"}, {"x": 1}, "no"]);
        let e = parse_upload(FactsKind::Deployment, &bad, &members).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["nodes[0].uid", "nodes[1].uid", "nodes[2]"]);
        let prov = json!({"engine": {"url": "x"}, "nodes": [{"uid": "1", "hostname": "h"}]});
        let got = parse_upload(FactsKind::Provisioning, &prov, &members).unwrap();
        assert_eq!(got[COMMON], json!({"engine": {"url": "x"}}));
        assert_eq!(uploaded_json(FactsKind::Provisioning, got, false), prov);
    }

    #[test]
    fn the_common_part_is_merged_into_each_node_or_apart_with_split() {
        let common = json!({"a": {"x": 1}, "b": 1});
        let nodes = vec![json!({"uid": "1", "a": {"y": 2}})];
        assert_eq!(
            compatible(Some(&common), nodes.clone(), false),
            json!([{"uid": "1", "a": {"x": 1, "y": 2}, "b": 1}])
        );
        assert_eq!(
            compatible(Some(&common), nodes, true),
            json!([{"uid": "1", "a": {"y": 2}}, {"a": {"x": 1}, "b": 1, "uid": "common"}])
        );
    }
}
