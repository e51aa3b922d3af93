//! Checking a network configuration as Nailgun's `NetworkConfigurationValidator`,
//! `NeutronNetworkConfigurationValidator` and `NetworkCheck` (`checker.py`) do, each problem
//! named by its field (`networks[id=3].cidr`, `networking_parameters.vlan_range`) and, in the
//! message, by the network's name. Stricter than Nailgun in one way: a key neither Nailgun's
//! schema nor its answer has is refused instead of ignored.

use std::collections::BTreeMap;

use serde_json::{Map, Value as J};

use super::ip::{Cidr, Ip, Range};
use super::model::{ADMIN, NetworkGroup, PARAMETER_KEYS, ranges_from_cidr};
use crate::model::FieldError;

/// The keys of a network group in a request (`NETWORK_GROUP`).
const NETWORK_KEYS: &[&str] = &[
    "id",
    "group_id",
    "name",
    "release",
    "gateway",
    "cidr",
    "vlan_start",
    "ip_ranges",
    "meta",
];

/// The keys of a network's `meta` (`NETWORK_META`).
const META_KEYS: &[&str] = &[
    "name",
    "cidr",
    "gateway",
    "ip_range",
    "vlan_start",
    "seg_type",
    "neutron_vlan_range",
    "use_gateway",
    "notation",
    "render_type",
    "render_addr_mask",
    "unmovable",
    "map_priority",
    "configurable",
    "floating_range_var",
    "ext_net_data",
    "vips",
    "restrictions",
];

/// The top-level keys of a configuration: what Nailgun answers, sent back by the client.
const CONFIG_KEYS: &[&str] = &[
    "networks",
    "networking_parameters",
    "vips",
    "management_vip",
    "management_vrouter_vip",
    "public_vip",
    "public_vrouter_vip",
];

/// Problems found, in order.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<FieldError>);

impl Problems {
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_result<T>(self, ok: T) -> Result<T, Vec<FieldError>> {
        if self.0.is_empty() {
            Ok(ok)
        } else {
            Err(self.0)
        }
    }
}

fn label(n: &NetworkGroup) -> String {
    format!("network {} (id {})", n.name, n.id)
}

fn opt_string(v: &J) -> Result<Option<String>, ()> {
    match v {
        J::Null => Ok(None),
        J::String(s) if s.is_empty() => Ok(None),
        J::String(s) => Ok(Some(s.clone())),
        _ => Err(()),
    }
}

/// `current` with the changes of one network of a request (`update`, an object), checked on
/// its own (`validate_network_group` and the schema); `field` names it (`networks[id=3]`).
/// Unknown keys, a changed name, release or admin network are refused.
pub fn apply_network(
    current: &NetworkGroup,
    update: &Map<String, J>,
    field: &str,
    p: &mut Problems,
) -> NetworkGroup {
    let mut next = current.clone();
    let who = label(current);
    for key in update.keys() {
        if !NETWORK_KEYS.contains(&key.as_str()) {
            p.add(
                format!("{field}.{key}"),
                format!("{who}: unknown key {key:?}"),
            );
        }
    }
    if let Some(name) = update.get("name")
        && name.as_str() != Some(current.name.as_str())
    {
        p.add(
            format!("{field}.name"),
            format!("{who}: the name cannot be changed here"),
        );
    }
    if let Some(release) = update.get("release")
        && release.as_i64() != current.release
        && !(release.is_null() && current.release.is_none())
    {
        p.add(
            format!("{field}.release"),
            "Network release could not be changed.",
        );
    }
    if let Some(group) = update.get("group_id")
        && group.as_i64() != current.group_id
        && !(group.is_null() && current.group_id.is_none())
    {
        p.add(
            format!("{field}.group_id"),
            format!("{who}: the node group cannot be changed"),
        );
    }
    if let Some(meta) = update.get("meta") {
        match meta.as_object() {
            None => p.add(format!("{field}.meta"), format!("{who}: must be an object")),
            Some(m) => {
                for key in m.keys() {
                    if !META_KEYS.contains(&key.as_str()) {
                        p.add(
                            format!("{field}.meta.{key}"),
                            format!("{who}: unknown key {key:?}"),
                        );
                    }
                }
                // Only `notation` and `use_gateway` change (`update_networks`).
                for key in ["notation", "use_gateway"] {
                    if let Some(v) = m.get(key) {
                        let ok = match key {
                            "notation" => {
                                v.is_null() || matches!(v.as_str(), Some("cidr" | "ip_ranges"))
                            }
                            _ => v.is_boolean(),
                        };
                        if ok {
                            if let Some(o) = next.meta.as_object_mut() {
                                o.insert(key.to_string(), v.clone());
                            }
                        } else {
                            p.add(
                                format!("{field}.meta.{key}"),
                                format!(
                                    "{who}: {key} must be {}",
                                    match key {
                                        "notation" => "cidr, ip_ranges or null",
                                        _ => "true or false",
                                    }
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
    if let Some(v) = update.get("cidr") {
        match opt_string(v) {
            Ok(None) => next.cidr = None,
            Ok(Some(c)) => match Cidr::parse(&c) {
                Ok(parsed) => next.cidr = Some(parsed.canonical()),
                Err(e) => p.add(format!("{field}.cidr"), format!("{who}: {e}")),
            },
            Err(()) => p.add(
                format!("{field}.cidr"),
                format!("{who}: must be a string or null"),
            ),
        }
    }
    if let Some(v) = update.get("gateway") {
        match opt_string(v) {
            Ok(g) => {
                if let Some(text) = &g
                    && let Err(e) = Ip::parse(text)
                {
                    p.add(format!("{field}.gateway"), format!("{who}: {e}"));
                }
                next.gateway = g;
            }
            Err(()) => p.add(
                format!("{field}.gateway"),
                format!("{who}: must be a string or null"),
            ),
        }
    }
    if let Some(v) = update.get("vlan_start") {
        match v {
            J::Null => next.vlan_start = None,
            _ => match v.as_i64() {
                Some(id) if (1..=4094).contains(&id) => next.vlan_start = Some(id),
                _ => p.add(
                    format!("{field}.vlan_start"),
                    format!(
                        "VLAN ID(s) is out of range for {} network (1-4094).",
                        current.name
                    ),
                ),
            },
        }
    }
    let mut ranges_given = false;
    if let Some(v) = update.get("ip_ranges") {
        match parse_ranges(v) {
            Ok(r) => {
                ranges_given = true;
                next.ip_ranges = r;
            }
            Err(e) => p.add(format!("{field}.ip_ranges"), format!("{who}: {e}")),
        }
    }
    let use_gateway = next.meta_bool("use_gateway");
    let notation = next.meta_str("notation").map(str::to_string);
    if use_gateway && next.gateway.is_none() {
        next.gateway = current.gateway.clone();
        if next.gateway.is_none() {
            p.add(
                format!("{field}.gateway"),
                "Flag 'use_gateway' cannot be provided without gateway",
            );
        }
    }
    if !use_gateway && next.gateway != current.gateway {
        p.add(
            format!("{field}.gateway"),
            format!(
                "Gateway for network '{}' (Network IDs: '{}') cannot be changed while \
                 'use_gateway' is False",
                current.name, current.id
            ),
        );
    }
    let new_cidr = next.cidr != current.cidr;
    let mut sorted_new = next.ip_ranges.clone();
    sorted_new.sort();
    let mut sorted_old = current.ip_ranges.clone();
    sorted_old.sort();
    if ranges_given
        && sorted_new != sorted_old
        && notation.as_deref() == Some("cidr")
        && !new_cidr
        && current.meta_str("notation") != Some("ip_ranges")
    {
        p.add(
            format!("{field}.ip_ranges"),
            format!(
                "ip_ranges for network '{}' (Network IDs: '{}') cannot be changed with 'cidr' \
                 notation, change notation to 'ip_ranges'",
                current.name, current.id
            ),
        );
    }
    match notation.as_deref() {
        Some("cidr") => match next.parsed_cidr() {
            // `_regenerate_ip_ranges_on_notation`: cidr notation takes its range from the CIDR.
            Some(c) => next.ip_ranges = ranges_from_cidr(&c, use_gateway),
            None => p.add(
                format!("{field}.cidr"),
                format!("No CIDR was specified for network {}", current.id),
            ),
        },
        Some("ip_ranges") => {
            if next.cidr.is_none() {
                p.add(
                    format!("{field}.cidr"),
                    format!("No CIDR was specified for network {}", current.id),
                );
            }
            if next.ip_ranges.is_empty() {
                p.add(
                    format!("{field}.ip_ranges"),
                    format!("No IP ranges were specified for network {}", current.id),
                );
            }
        }
        _ => {}
    }
    check_inside(&next, field, p);
    next
}

fn parse_ranges(v: &J) -> Result<Vec<[String; 2]>, String> {
    let list = v
        .as_array()
        .ok_or("must be a list of [first, last] address pairs")?;
    let mut out = Vec::new();
    for (i, r) in list.iter().enumerate() {
        match r.as_array().map(Vec::as_slice) {
            Some([J::String(a), J::String(b)]) => {
                Range::parse(a, b).map_err(|e| format!("range {i}: {e}"))?;
                out.push([a.clone(), b.clone()]);
            }
            _ => return Err(format!("range {i} must be a pair of addresses")),
        }
    }
    Ok(out)
}

/// The gateway and ranges inside the CIDR, not on its subnet or broadcast address, not
/// crossing each other (`check_network_addresses_not_match_subnet_and_broadcast`, the public
/// range checks).
fn check_inside(n: &NetworkGroup, field: &str, p: &mut Problems) {
    let Some(cidr) = n.parsed_cidr() else {
        return;
    };
    let edge = |ip: Ip| ip == cidr.network() || ip == cidr.broadcast();
    let ranges = n.parsed_ranges();
    if let Some(gw) = n.parsed_gateway() {
        if !cidr.contains(gw) {
            p.add(
                format!("{field}.gateway"),
                format!(
                    "Gateway address does not belong to the network '{}'.",
                    n.name
                ),
            );
        } else if edge(gw) {
            p.add(
                format!("{field}.gateway"),
                format!(
                    "{} network gateway address is equal to either subnet address or \
                     broadcast address of the network.",
                    n.name
                ),
            );
        }
        if ranges.iter().any(|r| r.contains(gw)) {
            p.add(
                format!("{field}.gateway"),
                format!(
                    "Address intersection between gateway and IP range of {} network. \
                     (Network IDs: '{}')",
                    n.name, n.id
                ),
            );
        }
    }
    for (i, r) in ranges.iter().enumerate() {
        if !r.inside(&cidr) {
            p.add(
                format!("{field}.ip_ranges[{i}]"),
                format!(
                    "{} network IP range [{r}] is not inside its CIDR {}",
                    n.name,
                    cidr.canonical()
                ),
            );
        } else if r.contains(cidr.network()) || r.contains(cidr.broadcast()) {
            p.add(
                format!("{field}.ip_ranges[{i}]"),
                format!(
                    "{} network IP range [{r}] intersect with either subnet address or \
                     broadcast address of the network.",
                    n.name
                ),
            );
        }
        for (j, other) in ranges.iter().enumerate().skip(i + 1) {
            if r.intersects(other) {
                p.add(
                    format!("{field}.ip_ranges[{j}]"),
                    format!(
                        "Address space intersection between ranges of {} network.",
                        n.name
                    ),
                );
            }
        }
    }
}

/// Checks across the networks and the parameters (`NetworkCheck`'s neutron checks): no two
/// networks' address spaces intersect; no two tagged networks share a VLAN; with VLAN
/// segmentation, no network VLAN inside Neutron's `vlan_range`; the floating ranges in the
/// public CIDR, off its ranges and gateway; the internal gateway in the internal CIDR.
pub fn check_together(networks: &[NetworkGroup], params: &J, p: &mut Problems) {
    let with_cidr: Vec<(&NetworkGroup, Cidr)> = networks
        .iter()
        .filter_map(|n| n.parsed_cidr().map(|c| (n, c)))
        .collect();
    for (i, (a, ca)) in with_cidr.iter().enumerate() {
        for (b, cb) in with_cidr.iter().skip(i + 1) {
            if ca.intersects(cb) {
                p.add(
                    format!("networks[id={}].cidr", b.id),
                    format!(
                        "Address space intersection between networks:\n{}, {}.",
                        a.name, b.name
                    ),
                );
            }
        }
    }
    let mut by_vlan: BTreeMap<i64, Vec<&NetworkGroup>> = BTreeMap::new();
    for n in networks {
        if let Some(v) = n.vlan_start {
            by_vlan.entry(v).or_default().push(n);
        }
    }
    for (vlan, nets) in &by_vlan {
        if nets.len() > 1 {
            let names: Vec<&str> = nets.iter().map(|n| n.name.as_str()).collect();
            p.add(
                format!("networks[id={}].vlan_start", nets[nets.len() - 1].id),
                format!(
                    "{} networks use the same VLAN ID(s) ({vlan}). You should assign different \
                     VLAN IDs to every network.",
                    names.join(", ")
                ),
            );
        }
    }
    if let Some([lo, hi]) = private_vlan_range(params) {
        let clashing: Vec<&NetworkGroup> = networks
            .iter()
            .filter(|n| n.vlan_start.is_some_and(|v| (lo..=hi).contains(&v)))
            .collect();
        if !clashing.is_empty() {
            let names: Vec<&str> = clashing.iter().map(|n| n.name.as_str()).collect();
            p.add(
                "networking_parameters.vlan_range",
                format!(
                    "VLAN tags of {} network(s) intersect with VLAN ID range defined for \
                     Neutron L2. Networks VLAN tags must not intersect with Neutron L2 VLAN ID \
                     range.",
                    names.join(", ")
                ),
            );
        }
    }
    let floating: Vec<Range> = params
        .get("floating_ranges")
        .and_then(J::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|r| match r.as_array().map(Vec::as_slice) {
                    Some([J::String(a), J::String(b)]) => Range::parse(a, b).ok(),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(public) = networks.iter().find(|n| n.name == "public")
        && let Some(cidr) = public.parsed_cidr()
    {
        for (i, r) in floating.iter().enumerate() {
            let field = format!("networking_parameters.floating_ranges[{i}]");
            if !r.inside(&cidr) {
                p.add(
                    field,
                    format!(
                        "Floating address range {r} is not in the public CIDR {}.",
                        cidr.canonical()
                    ),
                );
                continue;
            }
            if r.contains(cidr.network()) || r.contains(cidr.broadcast()) {
                p.add(
                    field.clone(),
                    format!(
                        "Neutron L3 external floating range [{r}] intersect with either \
                         subnet address or broadcast address of public network."
                    ),
                );
            }
            if public.parsed_ranges().iter().any(|pr| pr.intersects(r)) {
                p.add(
                    field.clone(),
                    "Address space intersection between ranges of public and floating network.",
                );
            }
            if public.parsed_gateway().is_some_and(|g| r.contains(g)) {
                p.add(
                    field,
                    "Address intersection between public gateway and floating range.",
                );
            }
        }
    }
    let internal = params
        .get("internal_cidr")
        .and_then(J::as_str)
        .and_then(|c| Cidr::parse(c).ok());
    let internal_gw = params
        .get("internal_gateway")
        .and_then(J::as_str)
        .and_then(|g| Ip::parse(g).ok());
    if let (Some(c), Some(g)) = (internal, internal_gw) {
        if !c.contains(g) {
            p.add(
                "networking_parameters.internal_gateway",
                format!(
                    "Internal gateway {g} is not in internal address space {}.",
                    c.canonical()
                ),
            );
        } else if g == c.network() || g == c.broadcast() {
            p.add(
                "networking_parameters.internal_gateway",
                "Neutron L3 internal network gateway address is equal to either subnet \
                 address or broadcast address of the network.",
            );
        }
        for r in &floating {
            if c.range().intersects(r) {
                p.add(
                    "networking_parameters.internal_cidr",
                    format!(
                        "Intersection between internal CIDR {} and floating range {r}.",
                        c.canonical()
                    ),
                );
            }
        }
    }
}

/// Neutron's VLAN range for the private network (`networking_parameters.vlan_range`), when
/// segmentation is by VLAN.
pub fn private_vlan_range(params: &J) -> Option<[i64; 2]> {
    if params.get("segmentation_type").and_then(J::as_str) != Some("vlan") {
        return None;
    }
    int_pair(params.get("vlan_range"))
}

fn int_pair(v: Option<&J>) -> Option<[i64; 2]> {
    match v?.as_array()?.as_slice() {
        [a, b] => Some([a.as_i64()?, b.as_i64()?]),
        _ => None,
    }
}

/// `current` parameters with a request's (`NEUTRON_NETWORK_CONFIGURATION` and
/// `_check_segmentation_type_changing`).
pub fn apply_parameters(current: &J, update: &J, p: &mut Problems) -> J {
    let mut next = current.clone();
    let Some(update) = update.as_object() else {
        p.add("networking_parameters", "must be an object");
        return next;
    };
    for (key, v) in update {
        let field = format!("networking_parameters.{key}");
        if !PARAMETER_KEYS.contains(&key.as_str()) {
            p.add(field, format!("unknown key {key:?}"));
            continue;
        }
        let problem: Option<String> = match key.as_str() {
            "segmentation_type" | "net_l23_provider" => {
                (current.get(key) != Some(v)).then(|| format!("Change of '{key}' is prohibited"))
            }
            "base_mac" => v
                .as_str()
                .filter(|m| m.parse::<crate::model::Mac>().is_ok())
                .is_none()
                .then(|| "must be a MAC address".to_string()),
            "floating_name" | "internal_name" => {
                (!v.is_string()).then(|| "must be a string".to_string())
            }
            "internal_cidr" => match v {
                J::Null => None,
                J::String(s) => Cidr::parse(s).err(),
                _ => Some("must be a CIDR or null".to_string()),
            },
            "internal_gateway" => match v {
                J::Null => None,
                J::String(s) => Ip::parse(s).err(),
                _ => Some("must be an address or null".to_string()),
            },
            "dns_nameservers" => match v.as_array() {
                Some(l) => {
                    let mut seen = std::collections::BTreeSet::new();
                    l.iter().find_map(|x| match x.as_str().map(Ip::parse) {
                        Some(Ok(ip)) if seen.insert(ip) => None,
                        Some(Ok(_)) => Some("DNS servers IPs have to be distinct.".to_string()),
                        Some(Err(e)) => Some(e),
                        None => Some("must be a list of addresses".to_string()),
                    })
                }
                None => Some("must be a list of addresses".to_string()),
            },
            "floating_ranges" => match v.as_array() {
                Some(l) if !l.is_empty() => parse_ranges(v).err(),
                Some(_) => Some("needs at least one range".to_string()),
                None => Some("must be a list of [first, last] address pairs".to_string()),
            },
            "vlan_range" => match int_pair(Some(v)) {
                Some([a, b]) if (2..=4094).contains(&a) && (2..=4094).contains(&b) && a < b => None,
                _ => Some("must be [first, last] VLAN IDs, 2 to 4094, first below last".into()),
            },
            "gre_id_range" => match int_pair(Some(v)) {
                Some([a, b]) if (1..=65535).contains(&a) && (1..=65535).contains(&b) && a < b => {
                    None
                }
                _ => Some("must be [first, last] tunnel IDs, 1 to 65535, first below last".into()),
            },
            "configuration_template" => {
                (!v.is_null() && !v.is_object()).then(|| "must be an object or null".to_string())
            }
            _ => None,
        };
        match problem {
            Some(message) => p.add(field, message),
            None => {
                if let Some(o) = next.as_object_mut() {
                    o.insert(key.clone(), v.clone());
                }
            }
        }
    }
    next
}

/// A whole `PUT network_configuration/neutron` body over the current networks (the admin
/// network among them) and parameters: the new networks and parameters, or every problem.
pub fn apply_config(
    networks: &[NetworkGroup],
    params: &J,
    body: &J,
) -> Result<(Vec<NetworkGroup>, J), Vec<FieldError>> {
    let mut p = Problems::default();
    let Some(body) = body.as_object() else {
        p.add("$", "the network configuration must be an object");
        return Err(p.0);
    };
    for key in body.keys() {
        if !CONFIG_KEYS.contains(&key.as_str()) {
            p.add(key.clone(), format!("unknown key {key:?}"));
        }
    }
    let mut next: Vec<NetworkGroup> = networks.to_vec();
    if let Some(list) = body.get("networks") {
        match list.as_array() {
            None => p.add("networks", "must be a list of networks"),
            Some(list) => {
                let mut missing = Vec::new();
                for (i, item) in list.iter().enumerate() {
                    let Some(obj) = item.as_object() else {
                        p.add(format!("networks[{i}]"), "must be an object");
                        continue;
                    };
                    let Some(id) = obj.get("id").and_then(J::as_i64) else {
                        p.add(
                            format!("networks[{i}].id"),
                            "is required and must be an integer",
                        );
                        continue;
                    };
                    let Some(pos) = next.iter().position(|n| n.id == id) else {
                        missing.push(id);
                        continue;
                    };
                    let field = format!("networks[id={id}]");
                    let current = next[pos].clone();
                    let changed = apply_network(&current, obj, &field, &mut p);
                    if current.name == ADMIN && changed != current {
                        p.add(
                            field,
                            "the admin network (fuelweb_admin) is the master's PXE subnet: \
                             change it in the master's configuration (dhcp.subnets)",
                        );
                        continue;
                    }
                    next[pos] = changed;
                }
                if !missing.is_empty() {
                    missing.sort_unstable();
                    let ids: Vec<String> = missing.iter().map(i64::to_string).collect();
                    p.add(
                        "networks",
                        format!(
                            "Networks with ID's [{}] are not present in the database",
                            ids.join(", ")
                        ),
                    );
                }
            }
        }
    }
    let new_params = match body.get("networking_parameters") {
        Some(update) => apply_parameters(params, update, &mut p),
        None => params.clone(),
    };
    if p.is_empty() {
        check_together(&next, &new_params, &mut p);
    }
    p.into_result((next, new_params))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::network::model::{default_parameters, release_networks};
    use serde_json::json;

    fn setup() -> (Vec<NetworkGroup>, J) {
        let meta = json!({"neutron": {"networks": [
            {"name": "public", "cidr": "172.16.0.0/24", "ip_range": ["172.16.0.2", "172.16.0.126"],
             "gateway": "172.16.0.1", "vlan_start": null, "use_gateway": true, "notation": "ip_ranges"},
            {"name": "management", "cidr": "192.168.0.0/24", "vlan_start": 101, "notation": "cidr"},
            {"name": "storage", "cidr": "192.168.1.0/24", "vlan_start": 102, "notation": "cidr"}
        ], "config": {"floating_ranges": [["172.16.0.130", "172.16.0.254"]]}}});
        let mut nets = release_networks(&meta, 1, "vlan", 1);
        for (i, n) in nets.iter_mut().enumerate() {
            n.id = i as i64 + 2;
        }
        (nets, default_parameters(&meta, "vlan"))
    }

    fn fields(body: J) -> Vec<String> {
        let (nets, params) = setup();
        match apply_config(&nets, &params, &body) {
            Ok(_) => Vec::new(),
            Err(e) => e
                .into_iter()
                .map(|f| format!("{}: {}", f.field, f.message))
                .collect(),
        }
    }

    #[test]
    fn a_valid_change_is_applied_and_cidr_notation_regenerates_ranges() {
        let (nets, params) = setup();
        let body = json!({"networks": [{"id": 3, "cidr": "10.1.0.0/16", "vlan_start": 200}],
                          "networking_parameters": {"vlan_range": [1000, 1100]}});
        let (next, p) = apply_config(&nets, &params, &body).unwrap();
        assert_eq!(next[1].cidr.as_deref(), Some("10.1.0.0/16"));
        assert_eq!(next[1].ip_ranges, [["10.1.0.1", "10.1.255.254"]]);
        assert_eq!(p["vlan_range"], json!([1000, 1100]));
    }

    #[test]
    fn each_bad_value_is_named_by_network_and_key() {
        let cases = [
            (
                json!({"networks": [{"id": 3, "cidr": "10.0.0.0/40"}]}),
                "networks[id=3].cidr",
            ),
            (
                json!({"networks": [{"id": 3, "vlan_start": 5000}]}),
                "networks[id=3].vlan_start",
            ),
            (
                json!({"networks": [{"id": 99}]}),
                "networks: Networks with ID's [99]",
            ),
            (
                json!({"networks": [{"id": 3, "colour": 1}]}),
                "networks[id=3].colour",
            ),
            (
                json!({"networks": [{"id": 2, "ip_ranges": [["172.16.1.2", "172.16.1.9"]]}]}),
                "networks[id=2].ip_ranges[0]",
            ),
            (
                json!({"networks": [{"id": 2, "gateway": "10.0.0.1"}]}),
                "networks[id=2].gateway",
            ),
            (
                json!({"networks": [{"id": 4, "vlan_start": 101}]}),
                "networks[id=4].vlan_start",
            ),
            (
                json!({"networks": [{"id": 4, "cidr": "192.168.0.128/25"}]}),
                "networks[id=4].cidr",
            ),
            (
                json!({"networking_parameters": {"floating_ranges": [["172.16.1.2", "172.16.1.9"]]}}),
                "networking_parameters.floating_ranges[0]",
            ),
            (
                json!({"networking_parameters": {"floating_ranges": [["172.16.0.100", "172.16.0.140"]]}}),
                "networking_parameters.floating_ranges[0]",
            ),
            (
                json!({"networking_parameters": {"segmentation_type": "tun"}}),
                "networking_parameters.segmentation_type: Change of 'segmentation_type' is prohibited",
            ),
            (
                json!({"networking_parameters": {"vlan_range": [1000, 1100]},
                    "networks": [{"id": 3, "vlan_start": 1050}]}),
                "networking_parameters.vlan_range",
            ),
            (json!({"surprise": 1}), "surprise"),
        ];
        for (body, want) in cases {
            let got = fields(body.clone());
            assert!(got.iter().any(|f| f.starts_with(want)), "{body}: {got:?}");
        }
    }
}
