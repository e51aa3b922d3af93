//! A node's attributes, as Nailgun 10's `NodeAttributesHandler` serves them (`GET/PUT
//! /nodes/{id}/attributes`, `GET /nodes/{id}/attributes/defaults`; `fuel2 node
//! attributes-download|attributes-upload`): the release's `node_attributes` (groups such as
//! `cpu_pinning` and `hugepages`, each attribute with a `type` and a `value`; the release data's
//! `node_attributes_metadata`) are the defaults, and a node's attributes are the values stored
//! for it (`store::NodeDocument::Attributes`, the whole map of values, `{group: {attribute:
//! value}}`) over them. A node outside any environment has none (`{}`, Nailgun's answer for
//! its defaults), and its stored values go when it leaves its environment, with its other node
//! documents.
//!
//! A change is Nailgun's: the body is merged over the current attributes (a `custom_hugepages`
//! value key by key), then checked whole. Stoker refuses, each by its field (`cpu_pinning.nova.
//! value`), an unknown group or attribute, a change to anything but an attribute's `value` (the
//! rest is the release's), a value of the wrong type (`number`: a non-negative integer within
//! its `min`/`max`, `null` only when `nullable`; `custom_hugepages`: page size in KiB → non-
//! negative integer count; `checkbox`: a boolean; the text types: a string), and then, as
//! Nailgun's `NodeAttributesValidator`: pinning every CPU of the node (the operating system
//! keeps at least one), huge pages of a size the node does not support, and huge pages that do
//! not fit in the node's memory beyond the 1 GiB Nailgun keeps for the operating system. Nothing
//! is written on refusal.
//!
//! The deployment data carries what Nailgun's `DeploymentHASerializer90` derives from them
//! ([`deployment`]): `nova.cpu_pinning` (the CPUs pinned for Nova), `cpu_pinning` (other
//! components' CPUs), `nova.enable_hugepages`, `dpdk.ovs_socket_mem` and the `hugepages`
//! distribution, and in `network_metadata.nodes` the two `nova_*_enabled` flags. Stoker's
//! inventory has no NUMA topology: a node is one NUMA node (id 0) holding all its CPUs
//! (numbered from 0) and all its memory, which is how Nailgun distributes on such a node.

use serde_json::{Map, Value as J, json};

use crate::model::{FieldError, Node, NodeId};
use crate::store::{NodeDocument, ReadTxn, StoreError, WriteTxn};

/// What a refusal is about.
const WHAT: &str = "node attributes";
/// The release data's keys of the node attributes: a plugin's records map theirs to the
/// first (`engine::plugin::release`), a release record keeps Nailgun's name, the second.
const METADATA: [&str; 2] = ["node_attributes_metadata", "node_attributes"];
/// Nailgun's `MEMORY_RESERVED_FOR_OPERATING_SYSTEM` (on NUMA node 0), in KiB.
const RESERVED_KIB: u64 = 1024 * 1024;
/// Nailgun's `DEFAULT_HUGEPAGE_SIZE`, in KiB: the pages of a `number` huge pages attribute.
const DEFAULT_PAGE_KIB: u64 = 2048;
/// Huge page sizes (KiB) a node supports. Nailgun reads them from the node's
/// `numa_topology.supported_hugepages`; stoker's inventory has no such list, so every node
/// supports Nailgun's two (`HUGE_PAGES_SIZE_MAP`): 2 MiB and 1 GiB pages.
pub const SUPPORTED_PAGE_KIB: &[u64] = &[2048, 1_048_576];

/// The hardware the checks need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hardware {
    pub cpus: u32,
    pub memory_bytes: u64,
}

impl Hardware {
    pub fn of(node: &Node) -> Hardware {
        Hardware {
            cpus: node.inventory.cpu.count,
            memory_bytes: node.inventory.memory_bytes,
        }
    }
}

/// The release's node attributes (an object; `{}` when the release has none).
pub fn metadata_of(r: &ReadTxn<'_>, release_id: i64) -> Result<J, StoreError> {
    for key in METADATA {
        if let J::Object(m) = r.release_value(release_id, key)? {
            return Ok(J::Object(m));
        }
    }
    Ok(json!({}))
}

/// `GET /nodes/{id}/attributes/defaults`: the release's, or `{}` outside any environment.
pub fn defaults_of(r: &ReadTxn<'_>, id: NodeId) -> Result<J, StoreError> {
    let node = r.existing_node(id)?;
    match node.cluster_id {
        None => Ok(json!({})),
        Some(c) => metadata_of(r, r.existing_cluster(c)?.release_id),
    }
}

/// `GET /nodes/{id}/attributes`: the stored values over the release's, or `{}` outside any
/// environment.
pub fn of_node(r: &ReadTxn<'_>, id: NodeId) -> Result<J, StoreError> {
    let defaults = defaults_of(r, id)?;
    let stored = r.node_document(id, NodeDocument::Attributes)?;
    Ok(current(&defaults, stored.as_ref()))
}

/// `PUT /nodes/{id}/attributes`: `body` merged over node `id`'s attributes, checked, stored;
/// answers the attributes then.
pub fn update(tx: &WriteTxn<'_>, id: NodeId, body: &J) -> Result<J, StoreError> {
    let r = tx.read();
    let node = r.existing_node(id)?;
    if node.cluster_id.is_none() {
        return Err(StoreError::Invalid {
            what: WHAT,
            fields: vec![FieldError {
                field: "cluster".into(),
                message: format!("Node '{id}' doesn't belong to any cluster"),
            }],
        });
    }
    let defaults = defaults_of(&r, id)?;
    let stored = r.node_document(id, NodeDocument::Attributes)?;
    let attrs = current(&defaults, stored.as_ref());
    let merged = merge(&defaults, &attrs, body, Hardware::of(&node))
        .map_err(|fields| StoreError::Invalid { what: WHAT, fields })?;
    tx.set_node_document(id, NodeDocument::Attributes, Some(&values(&merged)))?;
    Ok(merged)
}

/// The attributes `defaults` with the values `stored` (`{group: {attribute: value}}`) in place
/// of theirs; a stored value of an attribute the release no longer has is left out.
pub fn current(defaults: &J, stored: Option<&J>) -> J {
    let mut out = defaults.clone();
    let Some(stored) = stored.and_then(J::as_object) else {
        return out;
    };
    for (g, attrs) in stored {
        for (a, v) in attrs.as_object().into_iter().flatten() {
            if let Some(slot) = out
                .get_mut(g)
                .and_then(|group| group.get_mut(a))
                .and_then(|attr| attr.get_mut("value"))
            {
                *slot = v.clone();
            }
        }
    }
    out
}

/// The values of `attrs`, `{group: {attribute: value}}`: what is stored.
pub fn values(attrs: &J) -> J {
    let mut out = Map::new();
    for (g, group) in attrs.as_object().into_iter().flatten() {
        let vals: Map<String, J> = attributes(group)
            .filter_map(|(a, attr)| attr.get("value").map(|v| (a.clone(), v.clone())))
            .collect();
        out.insert(g.clone(), J::Object(vals));
    }
    J::Object(out)
}

/// A group's attributes (everything but its `metadata`), each an object.
fn attributes(group: &J) -> impl Iterator<Item = (&String, &J)> {
    group
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(a, attr)| *a != "metadata" && attr.is_object())
}

/// `body` merged over `attrs` (node attributes whose release's are `defaults`), checked by
/// field; then Nailgun's checks against the node's hardware `hw`.
pub fn merge(defaults: &J, attrs: &J, body: &J, hw: Hardware) -> Result<J, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut bad = |field: String, message: String| errors.push(FieldError { field, message });
    let mut out = attrs.clone();
    let Some(body) = body.as_object() else {
        bad("$".into(), "expected an object of attribute groups".into());
        return Err(errors);
    };
    for (g, gbody) in body {
        let Some(group) = defaults.get(g).filter(|v| v.is_object()) else {
            let known: Vec<&str> = defaults
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .collect();
            bad(
                g.clone(),
                format!("unknown group (known: {})", known.join(", ")),
            );
            continue;
        };
        let Some(gbody) = gbody.as_object() else {
            bad(g.clone(), "must be an object of attributes".into());
            continue;
        };
        for (a, abody) in gbody {
            let path = format!("{g}.{a}");
            if a == "metadata" {
                if group.get("metadata") != Some(abody) {
                    bad(path, "is the release's: only values may change".into());
                }
                continue;
            }
            let Some(meta) = group.get(a).filter(|v| v.is_object()) else {
                bad(path, "unknown attribute".into());
                continue;
            };
            let Some(abody) = abody.as_object() else {
                bad(path, "must be an object with a value".into());
                continue;
            };
            for (k, v) in abody {
                let at = format!("{path}.{k}");
                if k == "value" {
                    let old = out.pointer(&format!("/{g}/{a}/value")).cloned();
                    match check_value(meta, old.as_ref(), v, &at) {
                        Ok(new) => {
                            if let Some(slot) = out.pointer_mut(&format!("/{g}/{a}/value")) {
                                *slot = new;
                            }
                        }
                        Err(mut e) => errors_push(&mut bad, &mut e),
                    }
                } else if meta.get(k).is_none() {
                    bad(at, "unknown key: only value may change".into());
                } else if meta.get(k) != Some(v) {
                    bad(at, "is the release's: only value may change".into());
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let errors = check_hardware(&out, hw);
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn errors_push(bad: &mut impl FnMut(String, String), e: &mut Vec<FieldError>) {
    for f in e.drain(..) {
        bad(f.field, f.message);
    }
}

/// A new value `v` of the attribute `meta` (whose value is `old`), as its type allows it.
fn check_value(meta: &J, old: Option<&J>, v: &J, at: &str) -> Result<J, Vec<FieldError>> {
    let err = |field: String, message: String| vec![FieldError { field, message }];
    match meta.get("type").and_then(J::as_str).unwrap_or("") {
        "number" => {
            if v.is_null() {
                return if meta.get("nullable").and_then(J::as_bool) == Some(true) {
                    Ok(J::Null)
                } else {
                    Err(err(at.into(), "must be a non-negative integer".into()))
                };
            }
            let Some(n) = v.as_u64() else {
                return Err(err(at.into(), "must be a non-negative integer".into()));
            };
            if let Some(min) = meta.get("min").and_then(J::as_f64)
                && (n as f64) < min
            {
                return Err(err(at.into(), format!("must be at least {min}")));
            }
            if let Some(max) = meta.get("max").and_then(J::as_f64)
                && (n as f64) > max
            {
                return Err(err(at.into(), format!("must be at most {max}")));
            }
            Ok(v.clone())
        }
        "custom_hugepages" => {
            let Some(pages) = v.as_object() else {
                return Err(err(
                    at.into(),
                    "must be an object of page size (KiB) to count".into(),
                ));
            };
            let mut out = old.and_then(J::as_object).cloned().unwrap_or_default();
            let mut errors = Vec::new();
            for (size, count) in pages {
                let field = format!("{at}.{size}");
                if page_kib(size).is_none() {
                    errors.extend(err(field, "is not a page size in KiB".into()));
                } else if count.as_u64().is_none() {
                    errors.extend(err(field, "must be a non-negative integer".into()));
                } else {
                    out.insert(size.clone(), count.clone());
                }
            }
            if errors.is_empty() {
                Ok(J::Object(out))
            } else {
                Err(errors)
            }
        }
        "checkbox" if !v.is_boolean() => Err(err(at.into(), "must be true or false".into())),
        "text" | "textarea" | "password" | "select" | "radio" if !v.is_string() => {
            Err(err(at.into(), "must be a string".into()))
        }
        _ => Ok(v.clone()),
    }
}

/// A page size in KiB, written as Nailgun keys them (`"2048"`).
fn page_kib(size: &str) -> Option<u64> {
    if size.is_empty() || !size.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    size.parse().ok().filter(|n| *n > 0)
}

/// The non-zero integer values of group `g`'s attributes of type `ty` (any type: `None`).
fn numbers<'a>(attrs: &'a J, g: &str, ty: Option<&'a str>) -> Vec<(&'a str, u64)> {
    attrs
        .get(g)
        .map(attributes)
        .into_iter()
        .flatten()
        .filter(|(_, attr)| ty.is_none() || attr.get("type").and_then(J::as_str) == ty)
        .filter_map(|(a, attr)| Some((a.as_str(), attr.get("value")?.as_u64()?)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Huge pages wanted by `attrs`, by size in KiB: `custom_hugepages` counts, and a `number`
/// attribute's MiB (per NUMA node, one here) in 2 MiB pages (Nailgun's `total_hugepages`).
/// Each with the attributes that want them.
fn wanted_pages(attrs: &J) -> std::collections::BTreeMap<u64, (u64, Vec<String>)> {
    let mut out: std::collections::BTreeMap<u64, (u64, Vec<String>)> = Default::default();
    for (a, attr) in attrs.get("hugepages").map(attributes).into_iter().flatten() {
        match attr.get("type").and_then(J::as_str) {
            Some("custom_hugepages") => {
                for (size, count) in attr
                    .get("value")
                    .and_then(J::as_object)
                    .into_iter()
                    .flatten()
                {
                    if let (Some(kib), Some(n)) = (page_kib(size), count.as_u64())
                        && n > 0
                    {
                        let e = out.entry(kib).or_default();
                        e.0 += n;
                        e.1.push(format!("hugepages.{a}.value.{size}"));
                    }
                }
            }
            Some("number") => {
                if let Some(mib) = attr.get("value").and_then(J::as_u64).filter(|n| *n > 0) {
                    let e = out.entry(DEFAULT_PAGE_KIB).or_default();
                    e.0 += mib.div_ceil(2);
                    e.1.push(format!("hugepages.{a}.value"));
                }
            }
            _ => {}
        }
    }
    out
}

/// Nailgun's `_validate_cpu_pinning` and `_validate_hugepages` for a node with `hw`.
pub fn check_hardware(attrs: &J, hw: Hardware) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let pinned = numbers(attrs, "cpu_pinning", None);
    // Saturating: hostile counts must not wrap round to a total that passes.
    let total = pinned
        .iter()
        .fold(0u64, |sum, (_, n)| sum.saturating_add(*n));
    if total > 0 && total >= u64::from(hw.cpus) {
        for (a, _) in &pinned {
            errors.push(FieldError {
                field: format!("cpu_pinning.{a}.value"),
                message: format!(
                    "{total} CPUs pinned of the node's {}: the operating system requires at \
                     least one CPU that is not pinned",
                    hw.cpus
                ),
            });
        }
    }
    let wanted = wanted_pages(attrs);
    let supported: Vec<String> = SUPPORTED_PAGE_KIB.iter().map(u64::to_string).collect();
    for (kib, (_, fields)) in &wanted {
        if !SUPPORTED_PAGE_KIB.contains(kib) {
            for f in fields {
                errors.push(FieldError {
                    field: f.clone(),
                    message: format!(
                        "the node doesn't support {kib} KiB huge pages (supported: {})",
                        supported.join(", ")
                    ),
                });
            }
        }
    }
    if errors.is_empty() {
        let need: u64 = wanted
            .iter()
            .map(|(kib, (n, _))| kib.saturating_mul(*n))
            .fold(0, u64::saturating_add);
        let free = (hw.memory_bytes / 1024).saturating_sub(RESERVED_KIB);
        if need > free {
            for (_, fields) in wanted.values() {
                for f in fields {
                    errors.push(FieldError {
                        field: f.clone(),
                        message: format!(
                            "huge pages take {} MiB; the node has {} MiB beside the 1024 MiB \
                             kept for the operating system",
                            need / 1024,
                            free / 1024
                        ),
                    });
                }
            }
        }
    }
    errors
}

/// What a node's deployment data carries from its attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    /// Merged into the node's part of the data (`{}` when nothing is enabled).
    pub data: J,
    /// `network_metadata.nodes.<node>.nova_cpu_pinning_enabled`.
    pub nova_cpu_pinning: bool,
    /// `network_metadata.nodes.<node>.nova_hugepages_enabled`.
    pub nova_hugepages: bool,
}

/// Nailgun's `DeploymentHASerializer90.serialize_node_attributes` for a node with `cpus` CPUs
/// and attributes `attrs`, on one NUMA node (the module's text).
pub fn deployment(attrs: &J, cpus: u32) -> Deployment {
    let mut data = Map::new();
    let nova_pinned = attrs
        .pointer("/cpu_pinning/nova/value")
        .and_then(J::as_u64)
        .unwrap_or(0);
    let nova_pages = attrs
        .pointer("/hugepages/nova/value")
        .and_then(J::as_object)
        .is_some_and(|m| m.values().any(|c| c.as_u64().is_some_and(|n| n > 0)));
    let pinned = numbers(attrs, "cpu_pinning", None);
    if !pinned.is_empty() {
        // distribute_node_cpus: Nova first (take_all from NUMA 0), then the other components
        // by name, each its count, CPUs in order.
        let mut next = 0u64;
        let mut take = |n: u64| {
            let end = next.saturating_add(n).min(u64::from(cpus));
            let cpus: Vec<u64> = (next..end).collect();
            next = end;
            cpus
        };
        let mut others = Map::new();
        if nova_pinned > 0 {
            let list = take(nova_pinned);
            data.insert("nova".into(), json!({"cpu_pinning": list}));
        }
        let mut rest: Vec<&(&str, u64)> = pinned.iter().filter(|(a, _)| *a != "nova").collect();
        rest.sort();
        for (a, n) in rest {
            others.insert((*a).to_string(), json!(take(*n)));
        }
        data.insert("cpu_pinning".into(), J::Object(others));
    }
    let dpdk_mib = attrs
        .pointer("/hugepages/dpdk/value")
        .and_then(J::as_u64)
        .unwrap_or(0);
    if nova_pages || dpdk_mib > 0 {
        let nova = data.entry("nova").or_insert_with(|| json!({}));
        if let Some(o) = nova.as_object_mut() {
            o.insert("enable_hugepages".into(), J::Bool(nova_pages));
        }
        let dpdk = if dpdk_mib > 0 {
            json!({"ovs_socket_mem": [dpdk_mib]})
        } else {
            json!({})
        };
        data.insert("dpdk".into(), dpdk);
        // distribute_hugepages on NUMA 0; none at all when 1 GiB pages are wanted (Nailgun's
        // LP #1560532 skip).
        let wanted = wanted_pages(attrs);
        if !wanted.contains_key(&1_048_576) {
            let list: Vec<J> = wanted
                .iter()
                .map(|(kib, (n, _))| json!({"count": n, "numa_id": 0, "size": kib}))
                .collect();
            if !list.is_empty() {
                data.insert("hugepages".into(), J::Array(list));
            }
        }
    }
    Deployment {
        data: J::Object(data),
        nova_cpu_pinning: nova_pinned > 0,
        nova_hugepages: nova_pages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> J {
        json!({
            "cpu_pinning": {
                "metadata": {"group": "nfv", "label": "CPU pinning", "weight": 10},
                "nova": {"value": 0, "min": 0, "weight": 10, "type": "number", "label": "Nova"}
            },
            "hugepages": {
                "metadata": {"group": "nfv", "label": "Huge pages", "weight": 20},
                "nova": {"value": {"2048": 0, "1048576": 0}, "type": "custom_hugepages",
                         "weight": 10, "label": "Nova huge pages"}
            }
        })
    }

    const HW: Hardware = Hardware {
        cpus: 4,
        memory_bytes: 8 << 30,
    };

    fn fields(r: Result<J, Vec<FieldError>>) -> Vec<String> {
        r.unwrap_err().into_iter().map(|f| f.field).collect()
    }

    #[test]
    fn values_merge_over_the_defaults() {
        let d = defaults();
        let body = json!({"cpu_pinning": {"nova": {"value": 2}},
                          "hugepages": {"nova": {"value": {"2048": 10}}}});
        let merged = merge(&d, &d, &body, HW).unwrap();
        assert_eq!(merged["cpu_pinning"]["nova"]["value"], 2);
        assert_eq!(
            merged["hugepages"]["nova"]["value"],
            json!({"2048": 10, "1048576": 0})
        );
        assert_eq!(merged["cpu_pinning"]["nova"]["label"], "Nova");
        let stored = values(&merged);
        assert_eq!(current(&d, Some(&stored)), merged);
        // The whole document back unchanged is accepted.
        assert_eq!(merge(&d, &merged, &merged, HW).unwrap(), merged);
    }

    #[test]
    fn refusals_name_their_field() {
        let d = defaults();
        let m = |b: J| fields(merge(&d, &d, &b, HW));
        assert_eq!(m(json!({"numa": {}})), ["numa"]);
        assert_eq!(
            m(json!({"cpu_pinning": {"dpdk": {"value": 1}}})),
            ["cpu_pinning.dpdk"]
        );
        assert_eq!(
            m(json!({"cpu_pinning": {"nova": {"value": "2"}}})),
            ["cpu_pinning.nova.value"]
        );
        assert_eq!(
            m(json!({"cpu_pinning": {"nova": {"value": -1}}})),
            ["cpu_pinning.nova.value"]
        );
        assert_eq!(
            m(json!({"cpu_pinning": {"nova": {"min": 1}}})),
            ["cpu_pinning.nova.min"]
        );
        assert_eq!(
            m(json!({"hugepages": {"nova": {"value": {"2M": 1, "2048": -1}}}})),
            ["hugepages.nova.value.2048", "hugepages.nova.value.2M"]
        );
        assert_eq!(m(json!([])), ["$"]);
    }

    #[test]
    fn number_honours_min_and_max() {
        let mut d = defaults();
        d["cpu_pinning"]["nova"]["min"] = json!(1);
        d["cpu_pinning"]["nova"]["max"] = json!(3);
        let m = |v: u64| merge(&d, &d, &json!({"cpu_pinning": {"nova": {"value": v}}}), HW);
        assert!(m(0).unwrap_err()[0].message.contains("at least 1"));
        assert!(m(4).unwrap_err()[0].message.contains("at most 3"));
        assert!(m(2).is_ok());
    }

    #[test]
    fn one_cpu_stays_unpinned() {
        let d = defaults();
        let m = |v: u64| merge(&d, &d, &json!({"cpu_pinning": {"nova": {"value": v}}}), HW);
        assert!(m(3).is_ok());
        assert_eq!(fields(m(4)), ["cpu_pinning.nova.value"]);
        // Counts that would wrap round to a small total are refused, not passed.
        let wrapping = json!({"cpu_pinning": {
            "nova": {"type": "number", "value": u64::MAX},
            "other": {"type": "number", "value": 2}}});
        assert_eq!(check_hardware(&wrapping, HW).len(), 2);
    }

    #[test]
    fn page_sizes_and_memory() {
        let d = defaults();
        let m = |v: J| merge(&d, &d, &json!({"hugepages": {"nova": {"value": v}}}), HW);
        assert_eq!(fields(m(json!({"4": 1}))), ["hugepages.nova.value.4"]);
        assert!(
            m(json!({"4": 0})).is_ok(),
            "a size asked none of is no request"
        );
        // 8 GiB less 1 GiB for the OS: 7 pages of 1 GiB fit, 8 do not.
        assert!(m(json!({"1048576": 7})).is_ok());
        assert_eq!(
            fields(m(json!({"1048576": 8}))),
            ["hugepages.nova.value.1048576"]
        );
        assert_eq!(
            fields(m(json!({"1048576": 6, "2048": 1024}))),
            ["hugepages.nova.value.2048", "hugepages.nova.value.1048576"]
        );
    }

    #[test]
    fn deployment_data_as_nailgun_serializes_it() {
        let d = defaults();
        assert_eq!(deployment(&d, 4).data, json!({}));
        let a = merge(
            &d,
            &d,
            &json!({"cpu_pinning": {"nova": {"value": 2}},
                    "hugepages": {"nova": {"value": {"2048": 16}}}}),
            HW,
        )
        .unwrap();
        let dep = deployment(&a, 4);
        assert_eq!(
            dep.data,
            json!({
                "nova": {"cpu_pinning": [0, 1], "enable_hugepages": true},
                "cpu_pinning": {},
                "dpdk": {},
                "hugepages": [{"count": 16, "numa_id": 0, "size": 2048}],
            })
        );
        assert!(dep.nova_cpu_pinning && dep.nova_hugepages);
        // 1 GiB pages: Nailgun leaves the distribution out.
        let a = merge(
            &d,
            &d,
            &json!({"hugepages": {"nova": {"value": {"1048576": 1}}}}),
            HW,
        )
        .unwrap();
        let dep = deployment(&a, 4);
        assert_eq!(
            dep.data,
            json!({"nova": {"enable_hugepages": true}, "dpdk": {}})
        );
        assert!(!dep.nova_cpu_pinning && dep.nova_hugepages);
    }
}
