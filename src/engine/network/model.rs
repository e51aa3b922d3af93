//! An environment's networks as Nailgun's network manager holds them: network groups (one per
//! release network of the environment's segmentation type, plus the master's admin network,
//! `fuelweb_admin`), Neutron's `networking_parameters`, and their shapes in Nailgun's API
//! (`NetworkConfigurationSerializer`, `NetworkGroupSerializer`). Creating them from a release's
//! `networks_metadata` follows `NetworkManager.create_network_group` and
//! `NeutronManager.create_neutron_config`.

use serde_json::{Map, Value as J, json};

use super::ip::{Cidr, Ip, Range};

/// The admin (PXE) network's name.
pub const ADMIN: &str = "fuelweb_admin";

/// One network group.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkGroup {
    pub id: i64,
    pub name: String,
    /// The release it was made from (`None` for the master's admin network).
    pub release: Option<i64>,
    pub cidr: Option<String>,
    pub gateway: Option<String>,
    pub vlan_start: Option<i64>,
    /// `[first, last]` pairs.
    pub ip_ranges: Vec<[String; 2]>,
    /// The release's network metadata (`notation`, `map_priority`, `use_gateway` ...).
    pub meta: J,
    /// The node group (`None` for the admin network, shared by all).
    pub group_id: Option<i64>,
}

impl NetworkGroup {
    /// Nailgun's `NetworkGroupSerializer` (`/networks/`).
    pub fn to_json(&self) -> J {
        json!({
            "id": self.id,
            "name": self.name,
            "release": self.release,
            "vlan_start": self.vlan_start,
            "cidr": self.cidr,
            "gateway": self.gateway,
            "meta": self.meta,
            "group_id": self.group_id,
            "ip_ranges": self.ip_ranges,
        })
    }

    /// Nailgun's `NetworkConfigurationSerializer.serialize_network_group` (plus `release`):
    /// the group's shape with the gateway an empty string when there is none.
    pub fn to_config_json(&self) -> J {
        let mut v = self.to_json();
        v["gateway"] = J::String(self.gateway.clone().unwrap_or_default());
        v
    }

    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta.get(key).and_then(J::as_str)
    }

    pub fn meta_bool(&self, key: &str) -> bool {
        self.meta.get(key).and_then(J::as_bool).unwrap_or(false)
    }

    pub fn map_priority(&self) -> i64 {
        self.meta
            .get("map_priority")
            .and_then(J::as_i64)
            .unwrap_or(0)
    }

    /// Nailgun's `NetworkGroup.is_untagged`.
    pub fn is_untagged(&self) -> bool {
        self.vlan_start.is_none()
            && !self.meta_bool("neutron_vlan_range")
            && self.meta.get("ext_net_data").is_none_or(J::is_null)
    }

    pub fn parsed_cidr(&self) -> Option<Cidr> {
        self.cidr.as_deref().and_then(|c| Cidr::parse(c).ok())
    }

    pub fn parsed_ranges(&self) -> Vec<Range> {
        self.ip_ranges
            .iter()
            .filter_map(|[a, b]| Range::parse(a, b).ok())
            .collect()
    }

    pub fn parsed_gateway(&self) -> Option<Ip> {
        self.gateway.as_deref().and_then(|g| Ip::parse(g).ok())
    }
}

/// Ranges from a CIDR (`NetworkGroup._update_range_from_cidr`): from the second host (the
/// first is the gateway) or the first, to the last before the broadcast address.
pub fn ranges_from_cidr(cidr: &Cidr, use_gateway: bool) -> Vec<[String; 2]> {
    let first = cidr.nth(if use_gateway { 2 } else { 1 });
    let last = cidr.nth(-2);
    match (first, last) {
        (Some(a), Some(b)) if a <= b => vec![[a.to_string(), b.to_string()]],
        _ => Vec::new(),
    }
}

/// A network group to create (no id yet).
pub type NewNetwork = NetworkGroup;

/// The network groups of a new environment from its release's `networks_metadata`: each of
/// `neutron.networks` but `fuelweb_admin` (the master's), skipping those of another
/// `seg_type` (`NetworkManager.create_network_groups`, `create_network_group`).
pub fn release_networks(
    networks_metadata: &J,
    release_id: i64,
    segment_type: &str,
    group_id: i64,
) -> Vec<NewNetwork> {
    let list = networks_metadata
        .pointer("/neutron/networks")
        .and_then(J::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for net in list {
        let Some(name) = net.get("name").and_then(J::as_str) else {
            continue;
        };
        if name == ADMIN {
            continue;
        }
        if let Some(seg) = net.get("seg_type").and_then(J::as_str)
            && seg != segment_type
        {
            continue;
        }
        let notation = net.get("notation").and_then(J::as_str);
        let use_gateway = net.get("use_gateway").and_then(J::as_bool).unwrap_or(false);
        let cidr = notation
            .and_then(|_| net.get("cidr").and_then(J::as_str))
            .and_then(|c| Cidr::parse(c).ok());
        let gateway = match (cidr, notation, use_gateway) {
            (Some(c), Some("cidr"), true) => c.nth(1).map(|g| g.to_string()),
            (Some(c), Some("ip_ranges"), true) => net
                .get("gateway")
                .and_then(J::as_str)
                .map(str::to_string)
                .or_else(|| c.nth(1).map(|g| g.to_string())),
            _ => None,
        };
        let ip_ranges = match (cidr, notation) {
            (Some(c), Some("cidr")) => ranges_from_cidr(&c, use_gateway),
            (_, Some("ip_ranges")) => net
                .get("ip_range")
                .and_then(J::as_array)
                .and_then(|r| match r.as_slice() {
                    [J::String(a), J::String(b)] => Some(vec![[a.clone(), b.clone()]]),
                    _ => None,
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        out.push(NetworkGroup {
            id: 0,
            name: name.to_string(),
            release: Some(release_id),
            cidr: cidr.map(|c| c.canonical()),
            gateway,
            vlan_start: net.get("vlan_start").and_then(J::as_i64),
            ip_ranges,
            meta: net.clone(),
            group_id: Some(group_id),
        });
    }
    out
}

/// The master's admin network (`fuelweb_admin`, shared by every environment) from the PXE
/// subnet it serves: its CIDR, its DHCP pool as the range, its router as the gateway.
pub fn admin_network(cidr: &Cidr, pool: Option<Range>, gateway: Option<Ip>) -> NewNetwork {
    let ranges = match pool {
        Some(r) => vec![[r.first.to_string(), r.last.to_string()]],
        None => ranges_from_cidr(cidr, gateway.is_some()),
    };
    NetworkGroup {
        id: 0,
        name: ADMIN.to_string(),
        release: None,
        cidr: Some(cidr.canonical()),
        gateway: gateway.map(|g| g.to_string()),
        vlan_start: None,
        ip_ranges: ranges,
        meta: json!({
            "notation": "ip_ranges",
            "render_type": null,
            "map_priority": 0,
            "configurable": false,
            "use_gateway": gateway.is_some(),
            "unmovable": true,
        }),
        group_id: None,
    }
}

/// The keys of Neutron's `networking_parameters` (`NeutronNetworkConfigurationSerializer`).
pub const PARAMETER_KEYS: &[&str] = &[
    "base_mac",
    "configuration_template",
    "dns_nameservers",
    "floating_name",
    "floating_ranges",
    "gre_id_range",
    "internal_cidr",
    "internal_gateway",
    "internal_name",
    "net_l23_provider",
    "segmentation_type",
    "vlan_range",
];

/// A new environment's `networking_parameters`: the release's `neutron.config` keys Nailgun's
/// `NeutronConfig` has, the segmentation type, `ovs`, and Nailgun's column defaults.
pub fn default_parameters(networks_metadata: &J, segment_type: &str) -> J {
    let mut out = Map::new();
    let defaults = json!({
        "base_mac": "fa:16:3e:00:00:00",
        "configuration_template": null,
        "dns_nameservers": ["8.8.4.4", "8.8.8.8"],
        "floating_name": "admin_floating_net",
        "floating_ranges": [],
        "gre_id_range": [2, 65535],
        "internal_cidr": "192.168.111.0/24",
        "internal_gateway": "192.168.111.1",
        "internal_name": "admin_internal_net",
        "net_l23_provider": "ovs",
        "segmentation_type": segment_type,
        "vlan_range": [1000, 1030],
    });
    if let Some(d) = defaults.as_object() {
        out.extend(d.clone());
    }
    if let Some(config) = networks_metadata
        .pointer("/neutron/config")
        .and_then(J::as_object)
    {
        for (k, v) in config {
            if PARAMETER_KEYS.contains(&k.as_str()) && k != "segmentation_type" {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    J::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> J {
        json!({"neutron": {
            "networks": [
                {"name": "public", "cidr": "172.16.0.0/24", "ip_range": ["172.16.0.2", "172.16.0.126"],
                 "gateway": "172.16.0.1", "vlan_start": null, "use_gateway": true,
                 "notation": "ip_ranges", "map_priority": 1},
                {"name": "management", "cidr": "192.168.0.0/24", "vlan_start": 101,
                 "use_gateway": false, "notation": "cidr", "map_priority": 2},
                {"name": "private", "seg_type": "vlan", "vlan_start": null, "notation": null,
                 "map_priority": 2},
                {"name": "private", "seg_type": "tun", "cidr": "192.168.2.0/24",
                 "vlan_start": 103, "notation": "cidr", "map_priority": 2},
                {"name": "fuelweb_admin", "notation": "ip_ranges", "map_priority": 0}
            ],
            "config": {"vlan_range": [1000, 1030], "floating_ranges": [["172.16.0.130", "172.16.0.254"]],
                       "parameters": {"amqp": {}}}
        }})
    }

    #[test]
    fn a_release_gives_the_networks_of_its_segmentation_type() {
        let nets = release_networks(&metadata(), 7, "vlan", 3);
        let names: Vec<&str> = nets.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["public", "management", "private"]);
        assert_eq!(nets[0].gateway.as_deref(), Some("172.16.0.1"));
        assert_eq!(nets[0].ip_ranges, [["172.16.0.2", "172.16.0.126"]]);
        assert_eq!(nets[1].ip_ranges, [["192.168.0.1", "192.168.0.254"]]);
        assert_eq!(nets[1].vlan_start, Some(101));
        assert!(nets[2].cidr.is_none() && nets[2].ip_ranges.is_empty());
        let tun = release_networks(&metadata(), 7, "tun", 3);
        assert_eq!(tun[2].cidr.as_deref(), Some("192.168.2.0/24"));
        let p = default_parameters(&metadata(), "vlan");
        assert_eq!(p["segmentation_type"], "vlan");
        assert_eq!(
            p["floating_ranges"],
            json!([["172.16.0.130", "172.16.0.254"]])
        );
        assert!(p.get("parameters").is_none());
    }
}
