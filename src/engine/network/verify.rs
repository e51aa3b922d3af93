//! Network verification's verdict, pure: what each node was asked to probe (its interfaces and
//! the VLANs of the networks assigned to them) against what each node's probe heard, as
//! Nailgun's `verify_networks_resp` and `connectivity_check.check_received_data` judge it. A
//! VLAN counts as received on an interface when the frames of every other node that carries
//! that VLAN came in on it; otherwise it is one of the interface's `absent_vlans`. A node that
//! returned nothing fails the check by name, as Nailgun's "Node(s) ... didn't return data."
//! What each node is asked to probe comes from its interfaces and their networks
//! ([`expected`], Nailgun's `get_ifaces_on_undeployed_node` / `get_ifaces_on_deployed_node`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use super::NetworkGroup;

/// Bond modes a bootstrap cannot set up: their slaves are left out of the check until the
/// node is deployed (Nailgun's `excluded_networks`).
const UNCHECKABLE_BOND_MODES: &[&str] = &["802.3ad", "balance-rr"];

/// The VLANs a network is probed on: its VLAN, Neutron's whole VLAN range for the private
/// network of VLAN segmentation, else untagged (0); the admin network (no node group) is
/// untagged.
pub fn network_vlans(net: &NetworkGroup, vlan_range: Option<(u16, u16)>) -> Vec<u16> {
    if net.group_id.is_none() {
        return vec![0];
    }
    if let Some(v) = net.vlan_start.and_then(|v| u16::try_from(v).ok()) {
        return vec![v];
    }
    match vlan_range {
        Some((lo, hi)) if net.meta_bool("neutron_vlan_range") && lo <= hi => (lo..=hi).collect(),
        _ => vec![0],
    }
}

/// What one node is asked to probe, from its interfaces in Nailgun's shape (`type`, `name`,
/// `mac`, `assigned_networks` `[{id}]`; bonds with `mode` and `slaves` `[{name}]`) and the
/// environment's networks. A node not deployed yet has no bonds up: each slave NIC is probed
/// with its bond's networks, except in modes a bootstrap cannot set up; a deployed node probes
/// its bonds themselves.
pub fn expected(
    uid: i64,
    name: &str,
    interfaces: &[J],
    networks: &[NetworkGroup],
    vlan_range: Option<(u16, u16)>,
    deployed: bool,
) -> Expected {
    let vlans_of = |iface: &J| -> Vec<u16> {
        let mut out = Vec::new();
        for a in iface["assigned_networks"].as_array().into_iter().flatten() {
            if let Some(net) = networks.iter().find(|n| Some(n.id) == a["id"].as_i64()) {
                out.extend(network_vlans(net, vlan_range));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    };
    let is_bond = |i: &J| i["type"] == "bond";
    let mut out = Vec::new();
    for iface in interfaces {
        let iface_name = iface["name"].as_str().unwrap_or_default();
        let vlans = if deployed {
            vlans_of(iface)
        } else if is_bond(iface) {
            continue;
        } else {
            let bond = interfaces.iter().find(|b| {
                is_bond(b)
                    && b["slaves"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|s| s["name"] == iface_name)
            });
            match bond {
                Some(b)
                    if UNCHECKABLE_BOND_MODES.contains(&b["mode"].as_str().unwrap_or_default()) =>
                {
                    continue;
                }
                Some(b) => vlans_of(b),
                None => vlans_of(iface),
            }
        };
        if !vlans.is_empty() {
            out.push(ExpectedIface {
                iface: iface_name.to_string(),
                mac: iface["mac"].as_str().unwrap_or_default().to_string(),
                vlans,
            });
        }
    }
    Expected {
        uid,
        name: name.to_string(),
        networks: out,
    }
}

/// One node's part of the check: what its probe is asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    pub uid: i64,
    pub name: String,
    /// Per interface, its VLANs (0: untagged) and MAC.
    pub networks: Vec<ExpectedIface>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedIface {
    pub iface: String,
    pub mac: String,
    pub vlans: Vec<u16>,
}

/// What one node's probe heard (the agent's report): per interface, per VLAN, the node ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    pub node: i64,
    pub networks: Vec<ReceivedIface>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedIface {
    pub iface: String,
    pub vlans: BTreeMap<u16, BTreeSet<i64>>,
}

/// One interface of one node with VLANs on which some peer was not heard: Nailgun's result
/// entry (`uid`, `name`, `interface`, `mac`, `absent_vlans`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Absent {
    pub uid: i64,
    pub name: String,
    pub interface: String,
    pub mac: String,
    pub absent_vlans: Vec<u16>,
}

/// The check's outcome: `ready` with an empty result, or `error` with a message and, when
/// every node answered, the interfaces with absent VLANs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: &'static str,
    pub message: Option<String>,
    pub result: Vec<Absent>,
}

/// Judge the reports against what was expected. `received` may miss nodes (their agent
/// never ran the probe, or it failed): the verdict names them.
pub fn judge(expected: &[Expected], received: &[Received]) -> Verdict {
    let by_node: BTreeMap<i64, &Received> = received.iter().map(|r| (r.node, r)).collect();
    let silent: Vec<String> = expected
        .iter()
        .filter(|e| !by_node.contains_key(&e.uid))
        .map(|e| {
            if e.name.is_empty() {
                format!("id: {}", e.uid)
            } else {
                e.name.clone()
            }
        })
        .collect();
    if !silent.is_empty() {
        return Verdict {
            status: "error",
            message: Some(format!("Node(s) {} didn't return data.", silent.join(", "))),
            result: Vec::new(),
        };
    }
    // Which nodes carry each VLAN: they are the peers every carrier should hear on it.
    let mut carriers: BTreeMap<u16, BTreeSet<i64>> = BTreeMap::new();
    for e in expected {
        for n in &e.networks {
            for v in &n.vlans {
                carriers.entry(*v).or_default().insert(e.uid);
            }
        }
    }
    let mut result = Vec::new();
    for e in expected {
        let heard = by_node.get(&e.uid);
        for n in &e.networks {
            let got = heard.and_then(|r| r.networks.iter().find(|h| h.iface == n.iface));
            let mut absent: Vec<u16> = n
                .vlans
                .iter()
                .copied()
                .filter(|v| {
                    let peers = carriers
                        .get(v)
                        .into_iter()
                        .flatten()
                        .filter(|p| **p != e.uid);
                    let from = got.and_then(|g| g.vlans.get(v));
                    peers
                        .into_iter()
                        .any(|p| !from.is_some_and(|f| f.contains(p)))
                })
                .collect();
            absent.sort_unstable();
            absent.dedup();
            if !absent.is_empty() {
                result.push(Absent {
                    uid: e.uid,
                    name: e.name.clone(),
                    interface: n.iface.clone(),
                    mac: n.mac.clone(),
                    absent_vlans: absent,
                });
            }
        }
    }
    if result.is_empty() {
        Verdict {
            status: "ready",
            message: None,
            result,
        }
    } else {
        Verdict {
            status: "error",
            message: Some(
                "Some networks were not verified: frames of other nodes did not reach \
                 these interfaces on these VLANs."
                    .to_string(),
            ),
            result,
        }
    }
}

/// How long a probe listens and when it sends (its spec's timing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub listen_ms: u64,
    pub send_after_ms: u64,
    pub rounds: u32,
}

impl Timing {
    /// Every node must be listening before the first frames go out, and agents take a run
    /// only at their next poll: the wait before sending covers the slowest poll of the
    /// nodes checked (`poll_ms`), and the listening lasts the sending rounds beyond it.
    pub fn for_poll(poll_ms: u64) -> Timing {
        let send_after_ms = poll_ms + 1_500;
        Timing {
            listen_ms: send_after_ms + 8_000,
            send_after_ms,
            rounds: 5,
        }
    }

    /// The run's timeout: the probe's window and a margin for taking the run.
    pub fn timeout_s(&self) -> u64 {
        self.listen_ms.div_ceil(1000) + 60
    }
}

/// A node's probe spec (what its agent's `network.verify` step runs, `agent::net_probe`'s
/// `ProbeSpec`), carrying beside it what judging needs: the node's name and each interface's
/// MAC.
pub fn spec(e: &Expected, timing: Timing) -> J {
    serde_json::json!({
        "node": e.uid,
        "name": e.name,
        "interfaces": e.networks.iter().map(|n| serde_json::json!({
            "iface": n.iface, "mac": n.mac, "vlans": n.vlans,
        })).collect::<Vec<_>>(),
        "listen_ms": timing.listen_ms,
        "send_after_ms": timing.send_after_ms,
        "rounds": timing.rounds,
    })
}

/// What node `uid` was asked to probe, read back from its spec ([`spec`]).
pub fn expected_of_spec(uid: i64, spec: &J) -> Expected {
    let networks = spec["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| ExpectedIface {
            iface: i["iface"].as_str().unwrap_or_default().to_string(),
            mac: i["mac"].as_str().unwrap_or_default().to_string(),
            vlans: i["vlans"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_u64().and_then(|v| u16::try_from(v).ok()))
                .collect(),
        })
        .collect();
    Expected {
        uid,
        name: spec["name"].as_str().unwrap_or_default().to_string(),
        networks,
    }
}

/// Node `uid`'s probe report, as its agent sent it; None when it is not one. The node is the
/// run's, whatever the report says it is (an agent speaks only for its own node).
pub fn received_of_report(uid: i64, report: &J) -> Option<Received> {
    let mut r: Received = serde_json::from_value(report.clone()).ok()?;
    r.node = uid;
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spec_carries_what_judging_needs_and_reads_back() {
        let e = Expected {
            uid: 3,
            name: "node-3".into(),
            networks: vec![ExpectedIface {
                iface: "eth1".into(),
                mac: "52:54:00:00:00:03".into(),
                vlans: vec![0, 101],
            }],
        };
        let t = Timing::for_poll(5_000);
        assert!(
            t.send_after_ms > 5_000,
            "every agent polls before the first frame"
        );
        assert!(t.listen_ms > t.send_after_ms);
        assert!(t.timeout_s() * 1000 > t.listen_ms);
        let spec = spec(&e, t);
        assert_eq!(expected_of_spec(3, &spec), e);
        // A report speaks for the run's node, whatever it says.
        let r = received_of_report(
            3,
            &json!({"node": 99, "networks": [{"iface": "eth1", "vlans": {"101": [4]}}]}),
        )
        .unwrap();
        assert_eq!(r.node, 3);
        assert!(received_of_report(3, &json!({"networks": "no"})).is_none());
    }

    fn net(id: i64, name: &str, vlan: Option<i64>, group: Option<i64>, meta: J) -> NetworkGroup {
        NetworkGroup {
            id,
            name: name.into(),
            release: Some(1),
            cidr: None,
            gateway: None,
            vlan_start: vlan,
            ip_ranges: Vec::new(),
            meta,
            group_id: group,
        }
    }

    #[test]
    fn a_node_probes_each_nic_on_its_networks_vlans() {
        let nets = [
            net(1, "fuelweb_admin", None, None, json!({})),
            net(2, "management", Some(101), Some(1), json!({})),
            net(3, "public", None, Some(1), json!({})),
            net(
                4,
                "private",
                None,
                Some(1),
                json!({"neutron_vlan_range": true}),
            ),
        ];
        let ifaces = [
            json!({"type": "ether", "name": "eth0", "mac": "m0",
                   "assigned_networks": [{"id": 1}, {"id": 2}, {"id": 4}]}),
            json!({"type": "ether", "name": "eth1", "mac": "m1",
                   "assigned_networks": [{"id": 3}]}),
            json!({"type": "ether", "name": "eth2", "mac": "m2", "assigned_networks": []}),
        ];
        let e = expected(7, "node-7", &ifaces, &nets, Some((1000, 1002)), false);
        assert_eq!(e.uid, 7);
        assert_eq!(
            e.networks,
            [
                ExpectedIface {
                    iface: "eth0".into(),
                    mac: "m0".into(),
                    vlans: vec![0, 101, 1000, 1001, 1002],
                },
                ExpectedIface {
                    iface: "eth1".into(),
                    mac: "m1".into(),
                    vlans: vec![0],
                }
            ],
            "an interface with no network is not probed"
        );
    }

    #[test]
    fn a_bonds_slaves_are_probed_before_deployment_and_the_bond_after() {
        let nets = [net(2, "management", Some(101), Some(1), json!({}))];
        let bond = |mode: &str| {
            [
                json!({"type": "ether", "name": "eth0", "mac": "m0", "assigned_networks": []}),
                json!({"type": "ether", "name": "eth1", "mac": "m1", "assigned_networks": []}),
                json!({"type": "bond", "name": "bond0", "mode": mode, "mac": null,
                       "slaves": [{"name": "eth0"}, {"name": "eth1"}],
                       "assigned_networks": [{"id": 2}]}),
            ]
        };
        let names =
            |e: &Expected| -> Vec<String> { e.networks.iter().map(|n| n.iface.clone()).collect() };
        let e = expected(1, "n", &bond("active-backup"), &nets, None, false);
        assert_eq!(names(&e), ["eth0", "eth1"]);
        assert_eq!(e.networks[0].vlans, [101]);
        // LACP cannot be set up on a bootstrap: left out until deployed.
        let e = expected(1, "n", &bond("802.3ad"), &nets, None, false);
        assert!(e.networks.is_empty());
        let e = expected(1, "n", &bond("802.3ad"), &nets, None, true);
        assert_eq!(names(&e), ["bond0"]);
    }

    fn exp(uid: i64, iface: &str, vlans: &[u16]) -> Expected {
        Expected {
            uid,
            name: format!("node-{uid}"),
            networks: vec![ExpectedIface {
                iface: iface.into(),
                mac: format!("52:54:00:00:00:0{uid}"),
                vlans: vlans.to_vec(),
            }],
        }
    }

    fn heard(node: i64, iface: &str, vlans: &[(u16, &[i64])]) -> Received {
        Received {
            node,
            networks: vec![ReceivedIface {
                iface: iface.into(),
                vlans: vlans
                    .iter()
                    .map(|(v, p)| (*v, p.iter().copied().collect()))
                    .collect(),
            }],
        }
    }

    #[test]
    fn every_peer_heard_on_every_vlan_is_ready() {
        let e = [exp(1, "eth0", &[0, 100]), exp(2, "eth1", &[0, 100])];
        let r = [
            heard(1, "eth0", &[(0, &[2]), (100, &[2])]),
            heard(2, "eth1", &[(0, &[1]), (100, &[1])]),
        ];
        let v = judge(&e, &r);
        assert_eq!(v.status, "ready");
        assert!(v.result.is_empty());
    }

    #[test]
    fn a_vlan_a_peer_was_not_heard_on_is_absent_on_that_interface() {
        let e = [
            exp(1, "eth0", &[0, 100, 200]),
            exp(2, "eth0", &[0, 100, 200]),
        ];
        let r = [
            heard(1, "eth0", &[(0, &[2]), (100, &[2]), (200, &[])]),
            heard(2, "eth0", &[(0, &[1]), (100, &[1])]),
        ];
        let v = judge(&e, &r);
        assert_eq!(v.status, "error");
        assert_eq!(
            v.result,
            [
                Absent {
                    uid: 1,
                    name: "node-1".into(),
                    interface: "eth0".into(),
                    mac: "52:54:00:00:00:01".into(),
                    absent_vlans: vec![200],
                },
                Absent {
                    uid: 2,
                    name: "node-2".into(),
                    interface: "eth0".into(),
                    mac: "52:54:00:00:00:02".into(),
                    absent_vlans: vec![200],
                }
            ]
        );
    }

    #[test]
    fn a_vlan_only_one_node_carries_has_no_peer_to_hear() {
        // Node 2 does not carry 300: node 1 has nobody to hear on it; not an error.
        let e = [exp(1, "eth0", &[0, 300]), exp(2, "eth0", &[0])];
        let r = [
            heard(1, "eth0", &[(0, &[2])]),
            heard(2, "eth0", &[(0, &[1])]),
        ];
        assert_eq!(judge(&e, &r).status, "ready");
        // Three nodes: one missing peer is enough to be absent.
        let e = [exp(1, "a", &[7]), exp(2, "a", &[7]), exp(3, "a", &[7])];
        let r = [
            heard(1, "a", &[(7, &[2, 3])]),
            heard(2, "a", &[(7, &[1])]),
            heard(3, "a", &[(7, &[1, 2])]),
        ];
        let v = judge(&e, &r);
        assert_eq!(v.result.len(), 1);
        assert_eq!((v.result[0].uid, &v.result[0].absent_vlans), (2, &vec![7]));
    }

    #[test]
    fn a_node_that_returned_nothing_is_named() {
        let e = [exp(1, "eth0", &[0]), exp(2, "eth0", &[0])];
        let v = judge(&e, &[heard(1, "eth0", &[(0, &[2])])]);
        assert_eq!(v.status, "error");
        assert_eq!(
            v.message.as_deref(),
            Some("Node(s) node-2 didn't return data.")
        );
    }
}
