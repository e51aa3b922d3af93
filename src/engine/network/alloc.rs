//! Address allocation, as Nailgun's `NetworkManager.assign_ips`, `assign_admin_ips` and
//! `assign_vip` decide it: each node of an environment gets one address in each network it is
//! on but the admin network, each virtual IP of the release's network roles one in its network,
//! the first free one of the network's ranges in order. A node's admin address is not
//! allocated: it is the address the master's DHCP leased it (Nailgun's `assign_admin_ips`
//! allocated from the same pool its DHCP served; here the lease is the one record, so the pool
//! never runs out under the environments and never disagrees with the DHCP server). An address
//! once given is kept while it stays in its network's ranges, so plans and deployments see the
//! same addresses; an address no longer wanted is freed. Deterministic: the same inputs give
//! the same addresses.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as J;

use super::ip::{Ip, free_ips};
use super::model::NetworkGroup;

/// Who holds an address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Owner {
    Node(i64),
    Vip {
        name: String,
        namespace: Option<String>,
    },
}

/// One held address (`id` 0: not stored yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub id: i64,
    pub network_id: i64,
    pub owner: Owner,
    pub ip: String,
    /// Set by an operator (`fuel2 vip create/upload`): kept as given, never moved.
    pub user_defined: bool,
}

/// An address that should exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub network_id: i64,
    pub owner: Owner,
}

/// What to change: rows to delete, addresses to add.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub drop: Vec<i64>,
    pub add: Vec<Address>,
}

fn same_holder(a: &Address, w: &Want) -> bool {
    a.network_id == w.network_id
        && match (&a.owner, &w.owner) {
            (Owner::Node(x), Owner::Node(y)) => x == y,
            (Owner::Vip { name: x, .. }, Owner::Vip { name: y, .. }) => x == y,
            _ => false,
        }
}

/// The changes that make `existing` (this environment's addresses) hold `wanted`. `taken`:
/// addresses other environments hold in shared networks (the admin network). Err names the
/// network that ran out, as Nailgun's `OutOfIPs`.
pub fn allocate(
    networks: &[NetworkGroup],
    existing: &[Address],
    wanted: &[Want],
    taken: &BTreeSet<(i64, Ip)>,
) -> Result<Changes, String> {
    let by_id: BTreeMap<i64, &NetworkGroup> = networks.iter().map(|n| (n.id, n)).collect();
    let in_ranges = |net: &NetworkGroup, ip: &str| {
        Ip::parse(ip)
            .ok()
            .is_some_and(|ip| net.parsed_ranges().iter().any(|r| r.contains(ip)))
    };
    let mut changes = Changes::default();
    let mut kept: Vec<&Address> = Vec::new();
    for a in existing {
        let wanted_here = wanted.iter().any(|w| same_holder(a, w));
        let net = by_id.get(&a.network_id);
        let keep = match net {
            None => false,
            Some(_) if a.user_defined => wanted_here || matches!(a.owner, Owner::Vip { .. }),
            Some(net) => wanted_here && in_ranges(net, &a.ip),
        };
        if keep
            && !kept
                .iter()
                .any(|k| k.network_id == a.network_id && k.owner == a.owner)
        {
            kept.push(a);
        } else {
            changes.drop.push(a.id);
        }
    }
    let mut used: BTreeMap<i64, BTreeSet<Ip>> = BTreeMap::new();
    for (net, ip) in taken {
        used.entry(*net).or_default().insert(*ip);
    }
    for a in &kept {
        if let Ok(ip) = Ip::parse(&a.ip) {
            used.entry(a.network_id).or_default().insert(ip);
        }
    }
    for net in networks {
        if let Some(g) = net.parsed_gateway() {
            used.entry(net.id).or_default().insert(g);
        }
    }
    for w in wanted {
        if kept.iter().any(|a| same_holder(a, w)) {
            continue;
        }
        let Some(net) = by_id.get(&w.network_id) else {
            continue;
        };
        let ranges = net.parsed_ranges();
        let used_here = used.entry(net.id).or_default();
        let Some(ip) = free_ips(&ranges, used_here, 1).and_then(|v| v.into_iter().next()) else {
            let text: Vec<String> = ranges.iter().map(ToString::to_string).collect();
            return Err(format!(
                "Not enough free IP addresses in ranges [{}] of '{}' network",
                text.join(","),
                net.name
            ));
        };
        used_here.insert(ip);
        changes.add.push(Address {
            id: 0,
            network_id: net.id,
            owner: w.owner.clone(),
            ip: ip.to_string(),
            user_defined: false,
        });
    }
    Ok(changes)
}

/// A node of an environment, as allocation sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: i64,
    pub roles: Vec<String>,
}

/// Nailgun's `Node.should_have_public`: a role that needs a public address
/// (`public_ip_required`, `public_for_dvr_required` in the roles' metadata), or the
/// environment's `public_network_assignment.assign_to_all_nodes`.
pub fn should_have_public(roles: &[String], roles_metadata: &J, settings: &J) -> bool {
    let all = settings
        .pointer("/public_network_assignment/assign_to_all_nodes")
        .map(|v| v.get("value").unwrap_or(v))
        .and_then(J::as_bool)
        .unwrap_or(false);
    all || roles.iter().any(|r| {
        let meta = roles_metadata.get(r.as_str());
        ["public_ip_required", "public_for_dvr_required"]
            .iter()
            .any(|k| meta.and_then(|m| m.get(k)).and_then(J::as_bool) == Some(true))
    })
}

/// The networks a node is on: all of its environment's and the admin network, but `public`
/// only for a node that [`should_have_public`].
pub fn node_networks(networks: &[NetworkGroup], public: bool) -> Vec<&NetworkGroup> {
    networks
        .iter()
        .filter(|n| public || n.name != "public")
        .collect()
}

/// The addresses an environment should hold: one per node on each of its networks that has
/// L3 (a notation and ranges), then each virtual IP of the release's network roles
/// (`properties.vip`) in the network the role maps to (`default_mapping`).
pub fn wanted(
    networks: &[NetworkGroup],
    members: &[Member],
    roles_metadata: &J,
    settings: &J,
    network_roles: &J,
) -> Vec<Want> {
    let mut out = Vec::new();
    for m in members {
        let public = should_have_public(&m.roles, roles_metadata, settings);
        for n in node_networks(networks, public) {
            if n.name == super::ADMIN || n.meta_str("notation").is_none() || n.ip_ranges.is_empty()
            {
                continue;
            }
            out.push(Want {
                network_id: n.id,
                owner: Owner::Node(m.id),
            });
        }
    }
    for (vip, net_name) in vips_of(network_roles) {
        if let Some(n) = networks.iter().find(|n| n.name == net_name) {
            out.push(Want {
                network_id: n.id,
                owner: Owner::Vip {
                    name: vip.name,
                    namespace: vip.namespace,
                },
            });
        }
    }
    out
}

/// A virtual IP a network role declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VipSpec {
    pub name: String,
    pub namespace: Option<String>,
    pub alias: Option<String>,
    pub network_role: String,
    pub node_roles: Vec<String>,
}

/// Each declared virtual IP with the name of its network.
pub fn vips_of(network_roles: &J) -> Vec<(VipSpec, String)> {
    let mut out = Vec::new();
    for role in network_roles.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let (Some(id), Some(net)) = (
            role.get("id").and_then(J::as_str),
            role.get("default_mapping").and_then(J::as_str),
        ) else {
            continue;
        };
        let list = role
            .pointer("/properties/vip")
            .and_then(J::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for v in list {
            let Some(name) = v.get("name").and_then(J::as_str) else {
                continue;
            };
            if out.iter().any(|(s, _): &(VipSpec, String)| s.name == name) {
                continue;
            }
            let text = |k: &str| v.get(k).and_then(J::as_str).map(str::to_string);
            let node_roles = v
                .get("node_roles")
                .and_then(J::as_array)
                .map(|l| {
                    l.iter()
                        .filter_map(|r| r.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_else(|| {
                    vec!["controller".to_string(), "primary-controller".to_string()]
                });
            out.push((
                VipSpec {
                    name: name.to_string(),
                    namespace: text("namespace"),
                    alias: text("alias"),
                    network_role: id.to_string(),
                    node_roles,
                },
                net.to_string(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn net(id: i64, first: &str, last: &str) -> NetworkGroup {
        NetworkGroup {
            id,
            name: format!("n{id}"),
            release: Some(1),
            cidr: Some("10.0.0.0/24".into()),
            gateway: Some("10.0.0.1".into()),
            vlan_start: None,
            ip_ranges: vec![[first.into(), last.into()]],
            meta: json!({}),
            group_id: Some(1),
        }
    }

    fn want(node: i64) -> Want {
        Want {
            network_id: 1,
            owner: Owner::Node(node),
        }
    }

    #[test]
    fn addresses_are_kept_freed_and_given_in_order() {
        let nets = [net(1, "10.0.0.1", "10.0.0.4")];
        let first = allocate(&nets, &[], &[want(7), want(8)], &BTreeSet::new()).unwrap();
        let ips: Vec<&str> = first.add.iter().map(|a| a.ip.as_str()).collect();
        assert_eq!(ips, ["10.0.0.2", "10.0.0.3"], "the gateway is skipped");
        let stored: Vec<Address> = first
            .add
            .iter()
            .enumerate()
            .map(|(i, a)| Address {
                id: i as i64 + 1,
                ..a.clone()
            })
            .collect();
        // Node 7 leaves, node 9 comes: 8 keeps its address, 9 gets the first free one (7's).
        let next = allocate(&nets, &stored, &[want(8), want(9)], &BTreeSet::new()).unwrap();
        assert_eq!(next.drop, [1]);
        assert_eq!(next.add.len(), 1);
        assert_eq!(next.add[0].ip, "10.0.0.2");
        let full = allocate(
            &nets,
            &[],
            &[want(1), want(2), want(3), want(4)],
            &BTreeSet::new(),
        );
        assert!(full.unwrap_err().contains("'n1' network"));
        // Another environment's address in a shared network is taken.
        let taken = [(1, Ip::parse("10.0.0.2").unwrap())].into_iter().collect();
        let got = allocate(&nets, &[], &[want(5), want(6)], &taken).unwrap();
        assert_eq!(got.add[0].ip, "10.0.0.3");
        assert_eq!(got.add[1].ip, "10.0.0.4");
    }
}
