//! A node's interfaces as Nailgun shows and changes them (`NodeInterfacesSerializer`,
//! `NetworkManager.get_default_interfaces_configuration`, `NetAssignmentValidator`): its NICs
//! from the inventory, each with `assigned_networks` and `attributes` (the release's
//! `nic_attributes`), bonds of them; the default assignment (the admin network on the PXE NIC,
//! the others by `map_priority`, one untagged network per NIC); and the checks of an
//! operator's assignment: only the node's own NICs, real and unique bond slaves, every network
//! of the node on exactly one interface, no two untagged networks or equal VLANs on one.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value as J, json};

use super::model::{ADMIN, NetworkGroup};
use super::validate::Problems;
use crate::model::{FieldError, Inventory};

/// Bond modes Nailgun knows (`consts.BOND_MODES`, Linux and OVS).
const BOND_MODES: &[&str] = &[
    "balance-rr",
    "active-backup",
    "balance-xor",
    "broadcast",
    "802.3ad",
    "balance-tlb",
    "balance-alb",
    "balance-slb",
    "balance-tcp",
    "lacp-balance-tcp",
];

/// Attributes as defaults: each `{value: x, ...}` kept, the shape Nailgun's NIC `attributes`
/// have.
fn attributes(defaults: &J) -> J {
    if defaults.is_object() {
        defaults.clone()
    } else {
        json!({})
    }
}

/// The node's NICs in Nailgun's shape, numbered from 1 in inventory order, none assigned.
/// `pxe_mac`: the MAC the node booted from (its identifying MAC).
pub fn nics(inv: &Inventory, pxe_mac: &str, nic_attributes: &J) -> Vec<J> {
    inv.interfaces
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "id": i + 1,
                "type": "ether",
                "name": n.name,
                "mac": n.mac.as_str(),
                "state": n.link.map(|up| if up { "up" } else { "down" }),
                "current_speed": n.speed_mbps,
                "max_speed": n.speed_mbps,
                "driver": null,
                "bus_info": null,
                "pxe": n.mac.as_str().eq_ignore_ascii_case(pxe_mac),
                "meta": {},
                "assigned_networks": [],
                "attributes": attributes(nic_attributes),
            })
        })
        .collect()
}

fn assigned(n: &NetworkGroup) -> J {
    json!({"id": n.id, "name": n.name})
}

/// The default assignment (`get_default_interfaces_configuration`): networks by
/// `map_priority`; the PXE NIC may take the admin network, the others not; on each NIC all
/// tagged networks and one untagged; a `dedicated_nic` network alone; what is left goes to the
/// first NIC.
pub fn default_assignment(mut nics: Vec<J>, networks: &[&NetworkGroup]) -> Vec<J> {
    let mut to_assign: Vec<&NetworkGroup> = networks.to_vec();
    to_assign.sort_by_key(|n| (n.map_priority(), n.id));
    for nic in nics.iter_mut() {
        let pxe = nic.get("pxe").and_then(J::as_bool).unwrap_or(false);
        let mut chosen: Vec<&NetworkGroup> = Vec::new();
        let mut untagged = 0;
        for n in to_assign.iter().copied() {
            if n.name == ADMIN && !pxe {
                continue;
            }
            if n.meta_bool("dedicated_nic") {
                if chosen.is_empty() {
                    chosen.push(n);
                    break;
                }
            } else if n.is_untagged() {
                if untagged == 0 {
                    chosen.push(n);
                    untagged += 1;
                }
            } else {
                chosen.push(n);
            }
        }
        to_assign.retain(|n| !chosen.iter().any(|c| c.id == n.id));
        nic["assigned_networks"] = J::Array(chosen.iter().map(|n| assigned(n)).collect());
    }
    if !to_assign.is_empty()
        && let Some(first) = nics.first_mut()
        && let Some(list) = first["assigned_networks"].as_array_mut()
    {
        list.extend(to_assign.iter().map(|n| assigned(n)));
    }
    nics
}

/// An operator's interfaces (`PUT /nodes/{id}/interfaces/`) checked against the node's NICs
/// (`base`, from [`nics`]) and networks; the interfaces to store (the NICs' own fields kept
/// from the inventory, assignments and attributes from the request; bonds as given).
pub fn check_assignment(
    body: &J,
    base: &[J],
    networks: &[&NetworkGroup],
    bond_attributes: &J,
) -> Result<Vec<J>, Vec<FieldError>> {
    let mut p = Problems::default();
    let Some(list) = body.as_array() else {
        p.add("$", "must be a list of interfaces");
        return Err(p.0);
    };
    let by_id: BTreeMap<i64, &NetworkGroup> = networks.iter().map(|n| (n.id, *n)).collect();
    let nic_names: BTreeMap<&str, &J> = base
        .iter()
        .filter_map(|n| n["name"].as_str().map(|s| (s, n)))
        .collect();
    let mut out = Vec::new();
    let mut seen_nics = BTreeSet::new();
    let mut slaves_seen: BTreeMap<String, String> = BTreeMap::new();
    let mut placed: BTreeMap<i64, String> = BTreeMap::new();
    let mut pxe_holder: Option<String> = None;
    for (i, iface) in list.iter().enumerate() {
        let field = format!("[{i}]");
        let Some(obj) = iface.as_object() else {
            p.add(field, "each interface must be an object");
            continue;
        };
        let kind = obj.get("type").and_then(J::as_str).unwrap_or("");
        let (name, mut stored) = match kind {
            "ether" => {
                let id = obj.get("id").and_then(J::as_i64);
                let Some(nic) = base.iter().find(|n| n["id"].as_i64() == id) else {
                    p.add(
                        format!("{field}.id"),
                        format!("{id:?} is not one of this node's interfaces"),
                    );
                    continue;
                };
                let name = nic["name"].as_str().unwrap_or_default().to_string();
                if !seen_nics.insert(name.clone()) {
                    p.add(
                        format!("{field}.id"),
                        format!("interface {name} is listed twice"),
                    );
                }
                if nic["pxe"].as_bool() == Some(true) {
                    pxe_holder.get_or_insert(name.clone());
                }
                let mut stored = nic.clone();
                if let Some(a) = obj.get("attributes") {
                    if a.is_object() {
                        stored["attributes"] = a.clone();
                    } else {
                        p.add(format!("{field}.attributes"), "must be an object");
                    }
                }
                (name, stored)
            }
            "bond" => {
                let name = obj
                    .get("name")
                    .and_then(J::as_str)
                    .unwrap_or("")
                    .to_string();
                if name.is_empty() || nic_names.contains_key(name.as_str()) {
                    p.add(
                        format!("{field}.name"),
                        "each bond needs a name that is not a NIC's",
                    );
                }
                let slaves: Vec<String> = obj
                    .get("slaves")
                    .and_then(J::as_array)
                    .map(|l| {
                        l.iter()
                            .filter_map(|s| s.get("name").and_then(J::as_str).map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                if slaves.len() < 2 {
                    p.add(
                        format!("{field}.slaves"),
                        format!("bond {name} must have two or more slaves, each with a name"),
                    );
                }
                for s in &slaves {
                    match nic_names.get(s.as_str()) {
                        None => p.add(
                            format!("{field}.slaves"),
                            format!("bond {name}: slave {s} is not one of this node's interfaces"),
                        ),
                        Some(nic) => {
                            if nic["pxe"].as_bool() == Some(true) {
                                pxe_holder = Some(name.clone());
                            }
                        }
                    }
                    if let Some(other) = slaves_seen.insert(s.clone(), name.clone()) {
                        p.add(
                            format!("{field}.slaves"),
                            format!("interface {s} is a slave of both {other} and {name}"),
                        );
                    }
                }
                let attrs = obj
                    .get("attributes")
                    .cloned()
                    .unwrap_or_else(|| attributes(bond_attributes));
                let mode = obj
                    .get("mode")
                    .and_then(J::as_str)
                    .or_else(|| attrs.pointer("/mode/value/value").and_then(J::as_str))
                    .unwrap_or("");
                if !BOND_MODES.contains(&mode) {
                    p.add(
                        format!("{field}.mode"),
                        format!(
                            "bond {name}: unknown mode {mode:?}, one of {}",
                            BOND_MODES.join(", ")
                        ),
                    );
                }
                let stored = json!({
                    "type": "bond",
                    "name": name,
                    "mode": mode,
                    "mac": null,
                    "state": null,
                    "slaves": slaves.iter().map(|s| json!({"name": s})).collect::<Vec<_>>(),
                    "assigned_networks": [],
                    "attributes": attrs,
                    "meta": {},
                });
                (name, stored)
            }
            _ => {
                p.add(format!("{field}.type"), "must be ether or bond");
                continue;
            }
        };
        let mut nets = Vec::new();
        let mut untagged: Vec<&str> = Vec::new();
        let mut vlans: BTreeMap<i64, &str> = BTreeMap::new();
        for (j, a) in obj
            .get("assigned_networks")
            .and_then(J::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            let nf = format!("{field}.assigned_networks[{j}]");
            let Some(net) = a
                .get("id")
                .and_then(J::as_i64)
                .and_then(|id| by_id.get(&id))
            else {
                p.add(
                    nf,
                    format!(
                        "{} is not a network of this node",
                        a.get("id").unwrap_or(&J::Null)
                    ),
                );
                continue;
            };
            if let Some(other) = placed.insert(net.id, name.clone()) {
                p.add(
                    nf.clone(),
                    format!(
                        "network {} is assigned to both {other} and {name}",
                        net.name
                    ),
                );
            }
            if net.is_untagged() {
                untagged.push(&net.name);
            } else if let Some(v) = net.vlan_start
                && let Some(other) = vlans.insert(v, &net.name)
            {
                p.add(
                    nf.clone(),
                    format!(
                        "interface {name}: {other}, {} networks use the same VLAN tags",
                        net.name
                    ),
                );
            }
            nets.push(assigned(net));
        }
        if untagged.len() > 1 {
            p.add(
                format!("{field}.assigned_networks"),
                format!(
                    "Some untagged networks are assigned to the same physical interface {name}: {}",
                    untagged.join(", ")
                ),
            );
        }
        stored["assigned_networks"] = J::Array(nets);
        out.push((name, stored));
    }
    // Slaves carry nothing of their own.
    for (name, stored) in &out {
        if slaves_seen.contains_key(name)
            && stored["assigned_networks"]
                .as_array()
                .is_some_and(|l| !l.is_empty())
        {
            p.add(
                format!("{name}.assigned_networks"),
                format!("interface {name} is a bond slave and cannot carry networks"),
            );
        }
    }
    for n in networks {
        match placed.get(&n.id) {
            None => p.add(
                "assigned_networks",
                format!(
                    "network {} (id {}) is not assigned to any interface",
                    n.name, n.id
                ),
            ),
            Some(holder) if n.name == ADMIN && pxe_holder.as_deref() != Some(holder) => p.add(
                "assigned_networks",
                format!("the admin network must be on the PXE interface, not {holder}"),
            ),
            _ => {}
        }
    }
    // Every NIC stays, listed or not.
    for nic in base {
        let name = nic["name"].as_str().unwrap_or_default();
        if !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_string(), nic.clone()));
        }
    }
    p.into_result(out.into_iter().map(|(_, v)| v).collect())
}
