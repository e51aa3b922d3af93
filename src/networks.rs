//! Nailgun's networks as the master holds them, each operation in one store transaction: an
//! environment's network configuration (its groups, Neutron parameters and virtual IPs, as
//! Nailgun's `NeutronNetworkConfigurationSerializer` answered), network groups, the network
//! template, virtual IPs and a node's interfaces. The rules are the engine's
//! (`engine::network`: `validate`, `alloc`, `nic`); the rows are `store::networks`'s; the
//! network API (`http::api::networks`) parses and answers. Every change is refused while the
//! environment deploys (403, Nailgun's message) and every refusal names the network and key.
//!
//! An environment's networks are made with it (`store::create_cluster`); those that predate
//! them get theirs when the daemon starts ([`crate::store::WriteTxn::ensure_network_configs`]),
//! so reading them never writes.

use serde_json::{Map, Value as J, json};

use crate::engine::network::alloc::{Address, Owner, vips_of};
use crate::engine::network::ip::Ip;
use crate::engine::network::model::{ADMIN, NetworkGroup, ranges_from_cidr};
use crate::engine::network::nic;
use crate::engine::network::validate::{self, Problems};
use crate::model::{Cluster, FieldError};
use crate::store::{ReadTxn, StoreError, WriteTxn};

type Result<T> = std::result::Result<T, StoreError>;

/// Nailgun's answer to a change while an environment deploys.
pub const LOCKED: &str =
    "Network configuration cannot be changed during deployment and after upgrade.";
const TEMPLATE_LOCKED: &str =
    "Network template cannot be changed during deployment and after upgrade.";

fn invalid(what: &'static str, fields: Vec<FieldError>) -> StoreError {
    StoreError::Invalid { what, fields }
}

fn one(what: &'static str, field: &str, message: String) -> StoreError {
    invalid(
        what,
        vec![FieldError {
            field: field.to_string(),
            message,
        }],
    )
}

/// A change is refused while the environment is being deployed (403, Nailgun's message).
fn check_unlocked(r: &ReadTxn<'_>, cluster_id: i64, message: &str) -> Result<()> {
    let deploying = r.busy(cluster_id)?.is_some()
        || r.cluster(cluster_id)?
            .is_some_and(|c| c.status == "deployment");
    if deploying {
        return Err(StoreError::Forbidden(message.to_string()));
    }
    Ok(())
}

/// An unlocked environment, for a change.
fn changeable(r: &ReadTxn<'_>, id: i64, message: &str) -> Result<Cluster> {
    let c = r.existing_cluster(id)?;
    check_unlocked(r, id, message)?;
    Ok(c)
}

fn group(r: &ReadTxn<'_>, id: i64) -> Result<NetworkGroup> {
    r.network_group(id)?.ok_or_else(|| StoreError::NotFound {
        entity: "network",
        id: id.to_string(),
    })
}

/// Environment `cluster_id`'s Neutron parameters (`{}` when it has none).
pub fn parameters(r: &ReadTxn<'_>, cluster_id: i64) -> Result<J> {
    Ok(r.network_config(cluster_id)?
        .map_or_else(|| json!({}), |(params, _)| params))
}

/// The network configuration as Nailgun's `NeutronNetworkConfigurationSerializer` answers it:
/// `networks` (the environment's groups, then the admin network), `networking_parameters`,
/// and, as an HA environment, `vips` with each virtual IP's alias (`management_vip` ...).
pub fn configuration(r: &ReadTxn<'_>, cluster_id: i64) -> Result<J> {
    let cluster = r.existing_cluster(cluster_id)?;
    let networks = r.cluster_networks(cluster_id)?;
    let mut out = Map::new();
    out.insert(
        "networks".into(),
        J::Array(networks.iter().map(NetworkGroup::to_config_json).collect()),
    );
    out.insert("networking_parameters".into(), parameters(r, cluster_id)?);
    let network_roles = r.release_value(cluster.release_id, "network_roles_metadata")?;
    let addresses = r.addresses(cluster_id)?;
    let mut vips = Map::new();
    for (spec, _) in vips_of(&network_roles) {
        let held = addresses
            .iter()
            .find(|a| matches!(&a.owner, Owner::Vip { name, .. } if *name == spec.name));
        let (ip, user, namespace) = match held {
            Some(a) => (J::String(a.ip.clone()), a.user_defined, namespace_of(a)),
            None => (J::Null, false, spec.namespace.clone()),
        };
        vips.insert(
            spec.name.clone(),
            json!({
                "network_role": spec.network_role,
                "namespace": namespace,
                "ipaddr": ip,
                "is_user_defined": user,
                "node_roles": spec.node_roles,
            }),
        );
        if let Some(alias) = &spec.alias {
            out.insert(alias.clone(), ip);
        }
    }
    out.insert("vips".into(), J::Object(vips));
    Ok(J::Object(out))
}

/// A configuration sent back (Nailgun's checks, unknown keys refused), stored; the new one.
pub fn put_configuration(tx: &WriteTxn<'_>, cluster_id: i64, body: &J) -> Result<J> {
    changeable(&tx.read(), cluster_id, LOCKED)?;
    let networks = tx.read().cluster_networks(cluster_id)?;
    let params = parameters(&tx.read(), cluster_id)?;
    let (next, next_params) = validate::apply_config(&networks, &params, body)
        .map_err(|f| invalid("network configuration", f))?;
    tx.save_network_config(cluster_id, &next, &next_params)?;
    configuration(&tx.read(), cluster_id)
}

/// `next` checked with the environment's `others` (overlaps, VLANs, names), after the checks
/// of `p` on its own passed.
fn check_with(
    r: &ReadTxn<'_>,
    cluster_id: i64,
    others: Vec<NetworkGroup>,
    next: &NetworkGroup,
    mut p: Problems,
) -> Result<()> {
    if p.is_empty() {
        let mut all = others;
        all.push(next.clone());
        validate::check_together(&all, &parameters(r, cluster_id)?, &mut p);
    }
    if p.is_empty() {
        Ok(())
    } else {
        Err(invalid("network", p.0))
    }
}

/// A new network `name` in node group `node_group` (the environment of that id) from what
/// `fuel2 network-group create` sends: its range from its CIDR, or `meta.ip_range` with the
/// `ip_ranges` notation; checked alone and with the environment's other networks.
pub fn create_group(
    tx: &WriteTxn<'_>,
    node_group: i64,
    name: &str,
    body: &Map<String, J>,
) -> Result<NetworkGroup> {
    let cluster = tx.read().cluster(node_group)?.ok_or_else(|| {
        one(
            "network",
            "group_id",
            format!("node group {node_group} does not exist"),
        )
    })?;
    check_unlocked(&tx.read(), cluster.id, LOCKED)?;
    let others = tx.read().cluster_networks(cluster.id)?;
    if name == ADMIN || others.iter().any(|n| n.name == name) {
        return Err(one(
            "network",
            "name",
            format!("Network with name {name} already exists in node group default"),
        ));
    }
    let mut meta = json!({
        "notation": "cidr", "render_type": null, "map_priority": 2,
        "configurable": true, "use_gateway": false, "name": name,
    });
    let mut update = body.clone();
    update.remove("name");
    // fuel2 sends `release: null` without --release: the environment's release.
    if update.get("release").is_some_and(J::is_null) {
        update.remove("release");
    }
    if let (Some(m), Some(o)) = (
        update.get("meta").and_then(J::as_object),
        meta.as_object_mut(),
    ) {
        o.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    // fuel2 always sends `use_gateway: false`; a gateway given with the network
    // (`--gateway`) is meant to be used, and its address kept out of the range.
    if update.get("gateway").is_some_and(J::is_string) {
        meta["use_gateway"] = J::Bool(true);
        if let Some(m) = update.get_mut("meta").and_then(J::as_object_mut) {
            m.insert("use_gateway".into(), J::Bool(true));
        }
    }
    let blank = NetworkGroup {
        id: 0,
        name: name.to_string(),
        release: Some(cluster.release_id),
        cidr: None,
        gateway: None,
        vlan_start: None,
        ip_ranges: Vec::new(),
        meta: meta.clone(),
        group_id: Some(cluster.id),
    };
    let mut p = Problems::default();
    let mut next = validate::apply_network(&blank, &update, "network", &mut p);
    next.meta = meta;
    if next.meta_str("notation") == Some("ip_ranges") && next.ip_ranges.is_empty() {
        if let Some([J::String(a), J::String(b)]) = next
            .meta
            .get("ip_range")
            .and_then(J::as_array)
            .map(Vec::as_slice)
        {
            next.ip_ranges = vec![[a.clone(), b.clone()]];
        }
    } else if next.meta_str("notation") == Some("cidr")
        && let Some(c) = next.parsed_cidr()
    {
        next.ip_ranges = ranges_from_cidr(&c, next.meta_bool("use_gateway"));
    }
    if next.cidr.is_none() {
        p.add("cidr", "is required: the network's CIDR");
    }
    check_with(&tx.read(), cluster.id, others, &next, p)?;
    let id = tx.create_network_group(cluster.id, &next)?;
    group(&tx.read(), id)
}

/// Network `id` changed by `update` (name, VLAN, CIDR, gateway, meta); the admin network is
/// the master's configuration and is refused.
pub fn update_group(
    tx: &WriteTxn<'_>,
    id: i64,
    mut update: Map<String, J>,
) -> Result<NetworkGroup> {
    let current = group(&tx.read(), id)?;
    let Some(cluster_id) = current.group_id else {
        return Err(StoreError::Forbidden(
            "the admin network (fuelweb_admin) is the master's PXE subnet: change it in the \
             master's configuration (dhcp.subnets)"
                .to_string(),
        ));
    };
    check_unlocked(&tx.read(), cluster_id, LOCKED)?;
    let others: Vec<NetworkGroup> = tx
        .read()
        .cluster_networks(cluster_id)?
        .into_iter()
        .filter(|n| n.id != id)
        .collect();
    let mut p = Problems::default();
    let new_name = match update.remove("name") {
        None => current.name.clone(),
        Some(J::String(n)) if !n.trim().is_empty() && n.len() <= 50 => {
            if n != current.name && others.iter().any(|o| o.name == n) {
                p.add(
                    "name",
                    format!("Network with name {n} already exists in node group default"),
                );
            }
            n
        }
        Some(_) => {
            p.add("name", "must be 1 to 50 characters");
            current.name.clone()
        }
    };
    let mut next =
        validate::apply_network(&current, &update, &format!("networks[id={id}]"), &mut p);
    next.name = new_name;
    check_with(&tx.read(), cluster_id, others, &next, p)?;
    tx.update_network_group(&next)?;
    group(&tx.read(), id)
}

/// Delete network `id`; the admin network cannot go.
pub fn delete_group(tx: &WriteTxn<'_>, id: i64) -> Result<()> {
    let Some(cluster_id) = group(&tx.read(), id)?.group_id else {
        return Err(StoreError::Forbidden(
            "Default Admin-pxe network cannot be deleted".to_string(),
        ));
    };
    check_unlocked(&tx.read(), cluster_id, LOCKED)?;
    tx.delete_network_group(id)
}

const TEMPLATE_KEYS: [&str; 4] = [
    "nic_mapping",
    "templates_for_node_role",
    "network_assignments",
    "network_scheme",
];

/// A network template's shape (Nailgun's `NETWORK_TEMPLATE` schema): `adv_net_template`, an
/// object of node groups, each with `nic_mapping` (with `default`), `templates_for_node_role`,
/// `network_assignments` and `network_scheme`, all objects.
pub fn check_template(t: &J) -> Vec<FieldError> {
    let mut p = Problems::default();
    let Some(obj) = t.as_object() else {
        p.add("$", "the network template must be an object");
        return p.0;
    };
    for key in obj.keys().filter(|k| *k != "adv_net_template") {
        p.add(key.clone(), format!("unknown key {key:?}"));
    }
    match obj.get("adv_net_template").and_then(J::as_object) {
        None => p.add("adv_net_template", "is required: an object of node groups"),
        Some(groups) if groups.is_empty() => {
            p.add("adv_net_template", "needs at least one node group")
        }
        Some(groups) => {
            for (group, body) in groups {
                let field = format!("adv_net_template.{group}");
                let Some(body) = body.as_object() else {
                    p.add(field, "must be an object");
                    continue;
                };
                for key in TEMPLATE_KEYS {
                    match body.get(key) {
                        Some(v) if v.is_object() => {}
                        Some(_) => p.add(format!("{field}.{key}"), "must be an object"),
                        None => p.add(format!("{field}.{key}"), "is required"),
                    }
                }
                if body
                    .get("nic_mapping")
                    .and_then(J::as_object)
                    .is_some_and(|m| !m.contains_key("default"))
                {
                    p.add(format!("{field}.nic_mapping.default"), "is required");
                }
                for key in body.keys().filter(|k| !TEMPLATE_KEYS.contains(&k.as_str())) {
                    p.add(format!("{field}.{key}"), format!("unknown key {key:?}"));
                }
            }
        }
    }
    p.0
}

/// An environment's network template, if it has one.
pub fn template(r: &ReadTxn<'_>, cluster_id: i64) -> Result<Option<J>> {
    r.existing_cluster(cluster_id)?;
    Ok(r.network_config(cluster_id)?.and_then(|(_, t)| t))
}

/// Store a checked template ([`check_template`]), or remove it (`None`).
pub fn set_template(tx: &WriteTxn<'_>, cluster_id: i64, t: Option<&J>) -> Result<()> {
    changeable(&tx.read(), cluster_id, TEMPLATE_LOCKED)?;
    tx.set_network_template(cluster_id, t)
}

fn namespace_of(a: &Address) -> Option<String> {
    match &a.owner {
        Owner::Vip { namespace, .. } => namespace.clone(),
        Owner::Node(_) => None,
    }
}

/// A VIP in Nailgun's `IPAddr` shape.
pub fn vip_json(a: &Address) -> J {
    let name = match &a.owner {
        Owner::Vip { name, .. } => J::String(name.clone()),
        Owner::Node(_) => J::Null,
    };
    json!({
        "id": a.id,
        "network": a.network_id,
        "node": null,
        "ip_addr": a.ip,
        "vip_name": name,
        "vip_namespace": namespace_of(a),
        "is_user_defined": a.user_defined,
    })
}

fn cluster_vips(r: &ReadTxn<'_>, cluster_id: i64) -> Result<Vec<Address>> {
    Ok(r.addresses(cluster_id)?
        .into_iter()
        .filter(|a| matches!(a.owner, Owner::Vip { .. }))
        .collect())
}

/// VIP `ip_id` of the environment, as JSON, or 404.
pub fn vip(r: &ReadTxn<'_>, cluster_id: i64, ip_id: i64) -> Result<J> {
    cluster_vips(r, cluster_id)?
        .iter()
        .find(|a| a.id == ip_id)
        .map(vip_json)
        .ok_or_else(|| StoreError::NotFound {
            entity: "VIP",
            id: ip_id.to_string(),
        })
}

/// An environment's VIPs, only those in `network` or of `role` when given.
pub fn vips(
    r: &ReadTxn<'_>,
    cluster_id: i64,
    network: Option<i64>,
    role: Option<&str>,
) -> Result<Vec<J>> {
    let c = r.existing_cluster(cluster_id)?;
    let roles = r.release_value(c.release_id, "network_roles_metadata")?;
    let role_vips: Option<Vec<String>> = role.map(|role| {
        vips_of(&roles)
            .into_iter()
            .filter(|(s, _)| s.network_role == role)
            .map(|(s, _)| s.name)
            .collect()
    });
    Ok(cluster_vips(r, cluster_id)?
        .iter()
        .filter(|a| network.is_none_or(|n| a.network_id == n))
        .filter(|a| {
            role_vips.as_ref().is_none_or(
                |names| matches!(&a.owner, Owner::Vip { name, .. } if names.contains(name)),
            )
        })
        .map(vip_json)
        .collect())
}

/// VIP changes (`fuel2 vip upload`, or one with `field` `$`), all or none: `ip_addr`,
/// `vip_namespace` and `is_user_defined` may change; anything else must stay as it is, as
/// Nailgun's `IPAddrValidator.validate_update`. The environment's VIPs after.
pub fn update_vips(tx: &WriteTxn<'_>, cluster_id: i64, updates: &[(String, J)]) -> Result<Vec<J>> {
    changeable(&tx.read(), cluster_id, LOCKED)?;
    let mut p = Problems::default();
    for (field, update) in updates {
        vip_update(tx, cluster_id, update, field, &mut p)?;
    }
    if !p.is_empty() {
        return Err(invalid("VIPs", p.0));
    }
    Ok(cluster_vips(&tx.read(), cluster_id)?
        .iter()
        .map(vip_json)
        .collect())
}

fn vip_update(
    tx: &WriteTxn<'_>,
    cluster: i64,
    update: &J,
    field: &str,
    p: &mut Problems,
) -> Result<()> {
    let Some(obj) = update.as_object() else {
        p.add(field, "must be an object");
        return Ok(());
    };
    let Some(id) = obj.get("id").and_then(J::as_i64) else {
        p.add(format!("{field}.id"), "is required");
        return Ok(());
    };
    let Some(current) = cluster_vips(&tx.read(), cluster)?
        .into_iter()
        .find(|a| a.id == id)
    else {
        p.add(
            format!("{field}.id"),
            format!("IP address {id} is not a VIP of this environment"),
        );
        return Ok(());
    };
    let now = vip_json(&current);
    for (k, v) in obj {
        if !["ip_addr", "vip_namespace", "is_user_defined"].contains(&k.as_str())
            && now.get(k) != Some(v)
        {
            p.add(
                format!("{field}.{k}"),
                format!(
                    "The following fields: '{k}' are not allowed to be updated for record: {id}"
                ),
            );
        }
    }
    let ip = obj
        .get("ip_addr")
        .and_then(J::as_str)
        .unwrap_or(&current.ip)
        .to_string();
    if let Err(e) = Ip::parse(&ip) {
        p.add(format!("{field}.ip_addr"), e);
    }
    let namespace = match obj.get("vip_namespace") {
        Some(J::String(s)) => Some(s.clone()),
        Some(J::Null) => None,
        Some(_) => {
            p.add(format!("{field}.vip_namespace"), "must be a string or null");
            None
        }
        None => namespace_of(&current),
    };
    let Owner::Vip { name, .. } = &current.owner else {
        return Ok(());
    };
    if p.is_empty()
        && (ip != current.ip
            || obj.get("is_user_defined") == Some(&J::Bool(true))
            || namespace.is_some())
    {
        tx.set_vip(cluster, current.network_id, name, namespace.as_deref(), &ip)?;
    }
    Ok(())
}

/// An operator's VIP (`fuel2 vip create`), its fields checked by the API.
#[derive(Debug, Clone)]
pub struct NewVip {
    pub network: i64,
    pub name: String,
    pub namespace: Option<String>,
    pub ip: String,
}

/// Create `new` in one of the environment's networks (or the admin network).
pub fn create_vip(tx: &WriteTxn<'_>, cluster_id: i64, new: &NewVip) -> Result<J> {
    changeable(&tx.read(), cluster_id, LOCKED)?;
    let net = tx.read().network_group(new.network)?;
    if !net.is_some_and(|n| n.group_id == Some(cluster_id) || n.group_id.is_none()) {
        return Err(one(
            "VIP",
            "network",
            format!(
                "VIP cannot be created as there is no network with id {} assigned to any of \
                 nodegroups of cluster with id {cluster_id}",
                new.network
            ),
        ));
    }
    if cluster_vips(&tx.read(), cluster_id)?
        .iter()
        .any(|a| matches!(&a.owner, Owner::Vip { name, .. } if *name == new.name))
    {
        return Err(StoreError::Conflict(format!(
            "VIP {} already exists in environment {cluster_id}",
            new.name
        )));
    }
    let ip_id = tx.set_vip(
        cluster_id,
        new.network,
        &new.name,
        new.namespace.as_deref(),
        &new.ip,
    )?;
    vip(&tx.read(), cluster_id, ip_id)
}

/// What a node's interfaces are checked against: its NICs (Nailgun's shape), the networks it
/// is on, the release's bond attributes, and its stored assignment if an operator made one.
struct NodeNets {
    base: Vec<J>,
    networks: Vec<NetworkGroup>,
    bond_attributes: J,
    stored: Option<J>,
    cluster_id: Option<i64>,
}

impl NodeNets {
    fn of(r: &ReadTxn<'_>, node_id: i64) -> Result<NodeNets> {
        let node = r.existing_node(node_id)?;
        let (networks, nic_attrs, bond_attrs) = match node.cluster_id {
            Some(cluster_id) => {
                let cluster = r.existing_cluster(cluster_id)?;
                let roles = r.release_value(cluster.release_id, "roles_metadata")?;
                let settings = r.cluster_settings(cluster_id)?;
                let public = crate::engine::network::alloc::should_have_public(
                    &node.roles,
                    &roles,
                    &settings,
                );
                let all = r.cluster_networks(cluster_id)?;
                let nets = crate::engine::network::alloc::node_networks(&all, public)
                    .into_iter()
                    .cloned()
                    .collect();
                let section = |key: &str| -> Result<J> {
                    let v = r.release_value(cluster.release_id, &format!("{key}_metadata"))?;
                    if v.is_null() {
                        r.release_value(cluster.release_id, key)
                    } else {
                        Ok(v)
                    }
                };
                (
                    nets,
                    section("nic_attributes")?,
                    section("bond_attributes")?,
                )
            }
            None => (r.admin_network()?.into_iter().collect(), J::Null, J::Null),
        };
        Ok(NodeNets {
            base: nic::nics(&node.inventory, node.mac.as_str(), &nic_attrs),
            networks,
            bond_attributes: bond_attrs,
            stored: r.node_interfaces(node_id)?,
            cluster_id: node.cluster_id,
        })
    }

    fn default_assignment(&self) -> Vec<J> {
        let refs: Vec<&NetworkGroup> = self.networks.iter().collect();
        nic::default_assignment(self.base.clone(), &refs)
    }
}

/// A node's interfaces: the operator's assignment, else the default one.
pub fn interfaces(r: &ReadTxn<'_>, node_id: i64) -> Result<Vec<J>> {
    let n = NodeNets::of(r, node_id)?;
    Ok(match n.stored {
        Some(J::Array(list)) => list,
        _ => n.default_assignment(),
    })
}

/// A node's default interface assignment (Nailgun's: the admin network on the PXE NIC, the
/// others by `map_priority`).
pub fn default_interfaces(r: &ReadTxn<'_>, node_id: i64) -> Result<Vec<J>> {
    Ok(NodeNets::of(r, node_id)?.default_assignment())
}

/// An assignment sent for a node, checked ([`nic::check_assignment`]) and stored; as stored.
pub fn put_interfaces(tx: &WriteTxn<'_>, node_id: i64, body: &J) -> Result<Vec<J>> {
    let n = NodeNets::of(&tx.read(), node_id)?;
    if let Some(cluster_id) = n.cluster_id {
        check_unlocked(&tx.read(), cluster_id, LOCKED)?;
    }
    let refs: Vec<&NetworkGroup> = n.networks.iter().collect();
    let checked = nic::check_assignment(body, &n.base, &refs, &n.bond_attributes)
        .map_err(|f| invalid("interfaces", f))?;
    tx.set_node_interfaces(node_id, Some(&J::Array(checked.clone())))?;
    Ok(checked)
}
