//! The deployment data's network keys, as Nailgun's `NeutronNetworkDeploymentSerializer70`
//! and later make them: each node's `network_scheme` (version 1.1, `lnx`: bridges per
//! network, ports or VLAN sub-interfaces on the interfaces its assignment puts them on, bonds,
//! endpoints with the node's addresses and the default gateway, network roles mapped to
//! endpoints), `network_metadata.nodes[*].network_roles` (the role's address on the node),
//! `network_metadata.vips`, and `quantum_settings` (L2, L3, predefined networks). Pure: the
//! planner hands in what the store holds.

use std::collections::BTreeMap;

use serde_json::{Map, Value as J, json};

use super::alloc::VipSpec;
use super::model::{ADMIN, NetworkGroup};

/// One environment's networks as the deployment data needs them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterNets {
    pub networks: Vec<NetworkGroup>,
    pub parameters: J,
    pub network_roles: J,
    /// Each virtual IP with its address, if it has one.
    pub vips: Vec<(VipSpec, Option<String>)>,
    /// The tenant of the environment's `access` settings.
    pub tenant: J,
}

/// One node's: its interfaces (Nailgun's shape, with their networks) and addresses by
/// network name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeNets {
    pub interfaces: Vec<J>,
    pub addresses: BTreeMap<String, String>,
    pub public: bool,
}

fn bridge(name: &str) -> String {
    match name {
        ADMIN => "br-fw-admin".into(),
        "management" => "br-mgmt".into(),
        "storage" => "br-storage".into(),
        "public" => "br-ex".into(),
        "private" => "br-mesh".into(),
        other => {
            let b = format!("br-{other}");
            b.chars().take(15).collect()
        }
    }
}

fn seg(c: &ClusterNets) -> &str {
    c.parameters
        .get("segmentation_type")
        .and_then(J::as_str)
        .unwrap_or("vlan")
}

/// Network name → endpoint of a node (`get_network_to_endpoint_mapping`).
fn endpoints_of(c: &ClusterNets, n: &NodeNets) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for net in &c.networks {
        let skip =
            (net.name == "public" && !n.public) || (net.name == "private" && seg(c) == "vlan");
        if !skip {
            out.insert(net.name.clone(), bridge(&net.name));
        }
    }
    out
}

fn with_prefix(c: &ClusterNets, net: &str, ip: &str) -> String {
    let prefix = c
        .networks
        .iter()
        .find(|n| n.name == net)
        .and_then(NetworkGroup::parsed_cidr)
        .map_or(24, |c| c.prefix);
    format!("{ip}/{prefix}")
}

/// A node's `network_scheme`.
pub fn network_scheme(c: &ClusterNets, n: &NodeNets) -> J {
    let mapping = endpoints_of(c, n);
    let mut roles = Map::new();
    for role in c.network_roles.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        if let (Some(id), Some(net)) = (
            role.get("id").and_then(J::as_str),
            role.get("default_mapping").and_then(J::as_str),
        ) && let Some(ep) = mapping.get(net)
        {
            roles.insert(id.to_string(), J::String(ep.clone()));
        }
    }
    let mut endpoints = Map::new();
    let mut transformations = Vec::new();
    for br in ["br-fw-admin", "br-mgmt", "br-storage"] {
        transformations.push(json!({"action": "add-br", "name": br}));
    }
    if n.public {
        transformations.push(json!({"action": "add-br", "name": "br-ex"}));
        transformations.push(json!({"action": "add-br", "name": "br-floating", "provider": "ovs"}));
        transformations.push(
            json!({"action": "add-patch", "bridges": ["br-floating", "br-ex"],
                                    "provider": "ovs", "mtu": 65000}),
        );
        endpoints.insert("br-ex".into(), json!({"IP": "none"}));
        endpoints.insert("br-floating".into(), json!({"IP": "none"}));
        roles.insert("ex".into(), json!("br-ex"));
        roles.insert("neutron/floating".into(), json!("br-floating"));
    }
    for (net, br) in &mapping {
        if let Some(ip) = n.addresses.get(net) {
            endpoints.insert(br.clone(), json!({"IP": [with_prefix(c, net, ip)]}));
        }
    }
    let gateway = |name: &str| {
        c.networks
            .iter()
            .find(|x| x.name == name)
            .and_then(|x| x.gateway.clone())
    };
    if n.public && n.addresses.contains_key("public") {
        if let Some(e) = endpoints.get_mut("br-ex").and_then(J::as_object_mut) {
            e.insert("gateway".into(), json!(gateway("public")));
        }
    } else if let Some(e) = endpoints.get_mut("br-fw-admin").and_then(J::as_object_mut) {
        e.insert("gateway".into(), json!(gateway(ADMIN)));
    }
    // Which bridges go on which interface, tagged or not.
    let vlan_of = |name: &str| {
        c.networks
            .iter()
            .find(|x| x.name == name)
            .and_then(|x| x.vlan_start)
    };
    let mut on_iface: BTreeMap<String, Vec<(String, Option<i64>)>> = BTreeMap::new();
    let mut prv_iface = None;
    for iface in &n.interfaces {
        let name = iface["name"].as_str().unwrap_or_default().to_string();
        for a in iface["assigned_networks"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let net = a["name"].as_str().unwrap_or_default();
            if net == "private" && seg(c) == "vlan" {
                prv_iface = Some(name.clone());
                continue;
            }
            if let Some(br) = mapping.get(net) {
                on_iface
                    .entry(name.clone())
                    .or_default()
                    .push((br.clone(), vlan_of(net)));
            }
        }
    }
    if seg(c) == "vlan" {
        endpoints.insert("br-prv".into(), json!({"IP": "none"}));
        roles.insert("neutron/private".into(), json!("br-prv"));
        roles.remove("neutron/mesh");
        transformations.push(json!({"action": "add-br", "name": "br-prv", "provider": "ovs"}));
        let base = prv_iface
            .as_ref()
            .and_then(|i| on_iface.get(i))
            .and_then(|eps| {
                eps.iter()
                    .find(|(_, v)| v.is_none())
                    .map(|(b, _)| b.clone())
            });
        let base = match base {
            Some(b) => b,
            None => {
                transformations.push(json!({"action": "add-br", "name": "br-aux"}));
                if let Some(i) = &prv_iface {
                    on_iface
                        .entry(i.clone())
                        .or_default()
                        .push(("br-aux".into(), None));
                }
                "br-aux".into()
            }
        };
        transformations.push(json!({"action": "add-patch", "bridges": ["br-prv", base],
                                    "provider": "ovs", "mtu": 65000}));
    } else {
        transformations.push(json!({"action": "add-br", "name": "br-mesh"}));
        endpoints.entry("br-mesh").or_insert_with(|| json!({}));
        roles.insert("neutron/mesh".into(), json!("br-mesh"));
        roles.remove("neutron/private");
    }
    let mut interfaces = Map::new();
    for iface in &n.interfaces {
        let name = iface["name"].as_str().unwrap_or_default().to_string();
        let eps = on_iface.get(&name).cloned().unwrap_or_default();
        let port = |br: &str, vlan: Option<i64>| {
            let port = match vlan {
                Some(v) => format!("{name}.{v}"),
                None => name.clone(),
            };
            json!({"action": "add-port", "name": port, "bridge": br})
        };
        if iface["type"] == "bond" {
            let slaves: Vec<J> = iface["slaves"]
                .as_array()
                .map(|l| l.iter().map(|s| s["name"].clone()).collect())
                .unwrap_or_default();
            let mut bond = json!({"action": "add-bond", "name": name, "interfaces": slaves,
                                  "bond_properties": {"mode": iface["mode"]},
                                  "interface_properties": {}});
            for (br, vlan) in &eps {
                if vlan.is_none() {
                    bond["bridge"] = json!(br);
                }
            }
            transformations.push(bond);
            for (br, vlan) in eps.iter().filter(|(_, v)| v.is_some()) {
                transformations.push(port(br, *vlan));
            }
        } else {
            interfaces.insert(name.clone(), json!({}));
            let (untagged, tagged): (Vec<_>, Vec<_>) = eps.iter().partition(|(_, v)| v.is_none());
            for (br, vlan) in untagged.into_iter().chain(tagged) {
                transformations.push(port(br, *vlan));
            }
        }
    }
    json!({
        "version": "1.1",
        "provider": "lnx",
        "interfaces": interfaces,
        "endpoints": endpoints,
        "roles": roles,
        "transformations": transformations,
    })
}

/// A node's `network_metadata.nodes[*].network_roles`: each role's address on the node
/// (`get_network_role_mapping_to_ip`).
pub fn network_roles_ips(c: &ClusterNets, n: &NodeNets) -> J {
    let mapping = endpoints_of(c, n);
    let mut out = Map::new();
    for role in c.network_roles.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        if let (Some(id), Some(net)) = (
            role.get("id").and_then(J::as_str),
            role.get("default_mapping").and_then(J::as_str),
        ) && mapping.contains_key(net)
            && let Some(ip) = n.addresses.get(net)
        {
            out.insert(id.to_string(), J::String(ip.clone()));
        }
    }
    out.insert("neutron/floating".into(), J::Null);
    out.insert("neutron/private".into(), J::Null);
    J::Object(out)
}

/// `network_metadata.vips` (`assign_vips_for_net_groups`).
pub fn vips(c: &ClusterNets) -> J {
    let mut out = Map::new();
    for (spec, ip) in &c.vips {
        out.insert(
            spec.name.clone(),
            json!({
                "network_role": spec.network_role,
                "namespace": spec.namespace,
                "ipaddr": ip,
                "node_roles": spec.node_roles,
                "is_user_defined": false,
            }),
        );
    }
    J::Object(out)
}

fn join_range(v: Option<&J>) -> J {
    match v.and_then(J::as_array).map(Vec::as_slice) {
        Some([a, b]) => {
            let t = |x: &J| x.as_str().map_or_else(|| x.to_string(), str::to_string);
            J::String(format!("{}:{}", t(a), t(b)))
        }
        _ => J::Null,
    }
}

/// `quantum_settings` (`neutron_attrs`: L2, L3, predefined networks, default names).
pub fn quantum_settings(c: &ClusterNets) -> J {
    let p = &c.parameters;
    let mut phys = json!({"physnet1": {"bridge": "br-ex", "vlan_range": null}});
    let mut l2 = json!({"base_mac": p["base_mac"], "segmentation_type": seg(c)});
    if seg(c) == "vlan" {
        phys["physnet2"] =
            json!({"bridge": "br-prv", "vlan_range": join_range(p.get("vlan_range"))});
    } else {
        l2["tunnel_id_ranges"] = join_range(p.get("gre_id_range"));
    }
    l2["phys_nets"] = phys;
    let floating = p
        .get("floating_ranges")
        .and_then(J::as_array)
        .and_then(|l| l.first())
        .cloned();
    let public = c.networks.iter().find(|n| n.name == "public");
    let internal = p["internal_name"]
        .as_str()
        .unwrap_or("admin_internal_net")
        .to_string();
    let external = p["floating_name"]
        .as_str()
        .unwrap_or("admin_floating_net")
        .to_string();
    json!({
        "L2": l2,
        "L3": {"use_namespaces": true},
        "predefined_networks": {
            internal.clone(): {
                "L3": {"subnet": p["internal_cidr"], "gateway": p["internal_gateway"],
                       "nameservers": p["dns_nameservers"], "floating": null, "enable_dhcp": true},
                "L2": {"network_type": seg(c), "segment_id": null, "router_ext": false,
                       "physnet": if seg(c) == "vlan" { json!("physnet2") } else { J::Null }},
                "tenant": c.tenant, "shared": false,
            },
            external.clone(): {
                "L3": {"subnet": public.and_then(|n| n.cidr.clone()),
                       "gateway": public.and_then(|n| n.gateway.clone()),
                       "nameservers": [], "floating": join_range(floating.as_ref()),
                       "enable_dhcp": false},
                "L2": {"network_type": "flat", "segment_id": null, "router_ext": true,
                       "physnet": "physnet1"},
                "tenant": c.tenant, "shared": false,
            },
        },
        "default_private_net": internal.clone(),
        "default_floating_net": external.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::network::ip::{Cidr, Ip, Range};
    use crate::engine::network::model::{admin_network, release_networks};

    #[test]
    fn a_compute_gets_bridges_ports_and_its_addresses() {
        let meta = json!({"neutron": {"networks": [
            {"name": "public", "cidr": "172.16.0.0/24", "ip_range": ["172.16.0.2", "172.16.0.126"],
             "gateway": "172.16.0.1", "use_gateway": true, "notation": "ip_ranges", "map_priority": 1},
            {"name": "management", "cidr": "192.168.0.0/24", "vlan_start": 101, "notation": "cidr", "map_priority": 2},
            {"name": "private", "seg_type": "vlan", "notation": null, "map_priority": 2}]}});
        let mut networks = release_networks(&meta, 1, "vlan", 1);
        networks.push(admin_network(
            &Cidr::parse("10.20.0.0/24").unwrap(),
            Some(Range::parse("10.20.0.3", "10.20.0.254").unwrap()),
            Some(Ip::parse("10.20.0.2").unwrap()),
        ));
        let c = ClusterNets {
            networks,
            parameters: json!({"segmentation_type": "vlan", "vlan_range": [1000, 1030],
                               "floating_ranges": [["172.16.0.130", "172.16.0.254"]]}),
            network_roles: json!([{"id": "management", "default_mapping": "management"},
                                  {"id": "admin/pxe", "default_mapping": "fuelweb_admin"}]),
            ..ClusterNets::default()
        };
        let n = NodeNets {
            interfaces: vec![
                json!({"name": "eno1", "type": "ether", "assigned_networks": [
                    {"name": "fuelweb_admin"}, {"name": "management"}]}),
                json!({"name": "eno2", "type": "ether", "assigned_networks": [{"name": "private"}]}),
            ],
            addresses: [
                ("management".into(), "192.168.0.3".into()),
                (ADMIN.into(), "10.20.0.5".into()),
            ]
            .into_iter()
            .collect(),
            public: false,
        };
        let s = network_scheme(&c, &n);
        // The facts hold it as text and give it back as it was made; a node they do not have
        // has none.
        let f = facts(&c, &[("3".to_string(), n.clone(), false)]);
        assert_eq!(f.scheme("3").as_ref(), Some(&s));
        assert_eq!(f.scheme("4"), None);
        assert_eq!(
            f.common["network_metadata"]["nodes"]["node-3"]["network_roles"]["management"],
            "192.168.0.3"
        );
        assert_eq!(s["endpoints"]["br-mgmt"]["IP"], json!(["192.168.0.3/24"]));
        assert_eq!(s["endpoints"]["br-fw-admin"]["gateway"], "10.20.0.2");
        assert_eq!(s["roles"]["management"], "br-mgmt");
        assert_eq!(s["roles"]["neutron/private"], "br-prv");
        let t = s["transformations"].to_string();
        assert!(t.contains(r#""name":"eno1.101""#), "{t}");
        assert!(t.contains(r#""bridges":["br-prv","br-aux"]"#), "{t}");
        assert!(
            t.contains(r#"{"action":"add-port","bridge":"br-aux","name":"eno2"}"#),
            "{t}"
        );
        let ips = network_roles_ips(&c, &n);
        assert_eq!(ips["management"], "192.168.0.3");
        assert_eq!(ips["admin/pxe"], "10.20.0.5");
        let q = quantum_settings(&c);
        assert_eq!(q["L2"]["phys_nets"]["physnet2"]["vlan_range"], "1000:1030");
        assert_eq!(
            q["predefined_networks"]["admin_floating_net"]["L3"]["floating"],
            "172.16.0.130:172.16.0.254"
        );
    }
}

/// What the deployment data takes from the networks: a common part (`quantum_settings`,
/// `network_metadata.vips`, each node's `network_metadata.nodes[*].network_roles`) and each
/// node's `network_scheme`, by uid ([`Facts::scheme`]). A plan holds these until it is made,
/// though only the nodes' parts read the schemes, once each: they are kept as compact JSON
/// text, not values (at 10,000 nodes the values were about 95 MB of a plan's peak, heaptrack).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    pub common: J,
    schemes: BTreeMap<String, Box<str>>,
}

impl Facts {
    /// Node `uid`'s `network_scheme`, read back from its text.
    pub fn scheme(&self, uid: &str) -> Option<J> {
        // Written by `facts` from a value: it always reads back.
        self.schemes
            .get(uid)
            .map(|text| serde_json::from_str(text).unwrap_or(J::Null))
    }
}

/// The facts of an environment from its networks and each node's (`(uid, nets, deleted)`).
pub fn facts(c: &ClusterNets, nodes: &[(String, NodeNets, bool)]) -> Facts {
    let mut meta_nodes = Map::new();
    let mut schemes = BTreeMap::new();
    for (uid, n, deleted) in nodes {
        if !deleted {
            meta_nodes.insert(
                format!("node-{uid}"),
                json!({"network_roles": network_roles_ips(c, n)}),
            );
        }
        schemes.insert(
            uid.clone(),
            network_scheme(c, n).to_string().into_boxed_str(),
        );
    }
    Facts {
        common: json!({
            "quantum": true,
            "quantum_settings": quantum_settings(c),
            "network_metadata": {"nodes": meta_nodes, "vips": vips(c)},
        }),
        schemes,
    }
}
