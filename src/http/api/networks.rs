//! Nailgun's network API (its `network_manager` extension) over stoker's store: an
//! environment's network configuration (`/clusters/{id}/network_configuration/neutron`), its
//! network template, its virtual IPs, the network groups (`/networks/`) and node groups
//! (`/nodegroups/`: one default group per environment, numbered as the environment). Checks are
//! the engine's (`engine::network::validate`); every refusal names the network and the key.

use actix_web::{HttpResponse, web};
use serde_json::{Map, Value as J, json};

use crate::engine::network::alloc::{Owner, vips_of};
use crate::engine::network::model::{ADMIN, NetworkGroup, ranges_from_cidr};
use crate::engine::network::validate::{self, Problems};
use crate::http::api::catalog::id_of;
use crate::http::{ApiError, AppState};
use crate::store::{ReadTxn, StoreError, WriteTxn};

/// Nailgun's answer to a change while an environment deploys.
const LOCKED: &str = "Network configuration cannot be changed during deployment and after upgrade.";

fn invalid(what: &'static str, fields: Vec<crate::model::FieldError>) -> StoreError {
    StoreError::Invalid { what, fields }
}

/// A change is refused while the environment is being deployed (403, Nailgun's message).
fn check_unlocked(tx: &WriteTxn<'_>, cluster_id: i64, message: &str) -> Result<(), StoreError> {
    let deploying = tx.read().running_deployment(cluster_id)?.is_some()
        || tx
            .read()
            .cluster(cluster_id)?
            .is_some_and(|c| c.status == "deployment");
    if deploying {
        return Err(StoreError::Forbidden(message.to_string()));
    }
    Ok(())
}

fn existing_cluster(tx: &ReadTxn<'_>, id: i64) -> Result<crate::model::Cluster, StoreError> {
    tx.cluster(id)?.ok_or_else(|| StoreError::NotFound {
        entity: "environment",
        id: id.to_string(),
    })
}

/// The network configuration as Nailgun's `NeutronNetworkConfigurationSerializer` answers it:
/// `networks` (the environment's groups, then the admin network), `networking_parameters`,
/// and, as an HA environment, `vips` with each virtual IP's alias (`management_vip` ...).
fn config_json(tx: &ReadTxn<'_>, cluster_id: i64) -> Result<J, StoreError> {
    let cluster = existing_cluster(tx, cluster_id)?;
    let networks = tx.cluster_networks(cluster_id)?;
    let (params, _) = tx.network_config(cluster_id)?.unwrap_or((json!({}), None));
    let mut out = Map::new();
    out.insert(
        "networks".into(),
        J::Array(networks.iter().map(NetworkGroup::to_config_json).collect()),
    );
    out.insert("networking_parameters".into(), params);
    let network_roles = tx.release_value(cluster.release_id, "network_roles_metadata")?;
    let addresses = tx.addresses(cluster_id)?;
    let mut vips = Map::new();
    for (spec, _) in vips_of(&network_roles) {
        let held = addresses
            .iter()
            .find(|a| matches!(&a.owner, Owner::Vip { name, .. } if *name == spec.name));
        let (ip, user, namespace) = match held {
            Some(a) => (
                J::String(a.ip.clone()),
                a.user_defined,
                match &a.owner {
                    Owner::Vip { namespace, .. } => namespace.clone(),
                    Owner::Node(_) => None,
                },
            ),
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

/// `GET /api/v1/clusters/{id}/network_configuration/neutron`
pub async fn configuration(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let body = state
        .store(move |s| {
            s.write(|tx| {
                existing_cluster(&tx.read(), id)?;
                tx.ensure_network_config(id)?;
                config_json(&tx.read(), id)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `PUT /api/v1/clusters/{id}/network_configuration/neutron`: checked as Nailgun checks it
/// (and unknown keys refused); 403 while deploying; the new configuration on success.
pub async fn put_configuration(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let body: J = ApiError::parse(&body)?;
    let answer = state
        .store(move |s| {
            s.write(|tx| {
                existing_cluster(&tx.read(), id)?;
                tx.ensure_network_config(id)?;
                check_unlocked(tx, id, LOCKED)?;
                let networks = tx.read().cluster_networks(id)?;
                let (params, _) = tx.read().network_config(id)?.unwrap_or((json!({}), None));
                let (next, next_params) = validate::apply_config(&networks, &params, &body)
                    .map_err(|f| invalid("network configuration", f))?;
                tx.save_network_config(id, &next, &next_params)?;
                config_json(&tx.read(), id)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// `GET|PUT /api/v1/clusters/{id}/network_configuration/nova_network`: stoker's environments
/// are Neutron's, so Nailgun's refusal.
pub async fn nova_network(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    state
        .store(move |s| s.read(|tx| existing_cluster(tx, id)))
        .await?;
    Err(ApiError::BadRequest(
        "Wrong net provider - environment uses 'neutron'".to_string(),
    ))
}

// ---- network groups and node groups ----

/// `GET /api/v1/networks` (`?cluster_id=` filters, as Nailgun's collection handler).
pub async fn network_groups(
    state: web::Data<AppState>,
    query: web::Query<std::collections::HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let cluster = match query.get("cluster_id") {
        Some(raw) => Some(id_of(raw, "environment")?),
        None => None,
    };
    let nets = state
        .store(move |s| s.read(|tx| tx.all_network_groups()))
        .await?;
    let body: Vec<J> = nets
        .iter()
        .filter(|n| cluster.is_none() || n.group_id == cluster || n.group_id.is_none())
        .map(NetworkGroup::to_json)
        .collect();
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /api/v1/networks/{id}`
pub async fn network_group(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "network")?;
    let net = state
        .store(move |s| s.read(|tx| tx.network_group(id)))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("network {id} not found")))?;
    Ok(HttpResponse::Ok().json(net.to_json()))
}

const NEW_NETWORK_KEYS: &[&str] = &[
    "name",
    "release",
    "vlan_start",
    "cidr",
    "gateway",
    "meta",
    "group_id",
    "ip_ranges",
];

/// `POST /api/v1/networks` (`fuel2 network-group create`): a network in a node group, its
/// range from its CIDR (or `meta.ip_range` with the `ip_ranges` notation), checked alone and
/// with the environment's other networks. 201 with the network.
pub async fn create_network_group(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: J = ApiError::parse(&body)?;
    let obj = body
        .as_object()
        .cloned()
        .ok_or_else(|| ApiError::field("network", "$", "must be an object"))?;
    let mut p = Problems::default();
    for key in obj.keys() {
        if !NEW_NETWORK_KEYS.contains(&key.as_str()) {
            p.add(key.clone(), format!("unknown key {key:?}"));
        }
    }
    let name = match obj.get("name").and_then(J::as_str).map(str::trim) {
        Some(n) if !n.is_empty() && n.len() <= 50 => n.to_string(),
        _ => {
            p.add("name", "is required: 1 to 50 characters");
            String::new()
        }
    };
    let group = obj.get("group_id").and_then(J::as_i64);
    if group.is_none() {
        p.add(
            "group_id",
            "is required: the node group's id (fuel2 --node-group)",
        );
    }
    if !p.is_empty() {
        return Err(ApiError::InvalidInput {
            what: "network",
            fields: p.0,
        });
    }
    let group = group.unwrap_or_default();
    let net = state
        .store(move |s| {
            s.write(|tx| {
                let cluster = tx.read().cluster(group)?.ok_or_else(|| {
                    invalid(
                        "network",
                        vec![crate::model::FieldError {
                            field: "group_id".into(),
                            message: format!("node group {group} does not exist"),
                        }],
                    )
                })?;
                check_unlocked(tx, cluster.id, LOCKED)?;
                tx.ensure_network_config(cluster.id)?;
                let others = tx.read().cluster_networks(cluster.id)?;
                if name == ADMIN || others.iter().any(|n| n.name == name) {
                    return Err(invalid(
                        "network",
                        vec![crate::model::FieldError {
                            field: "name".into(),
                            message: format!(
                                "Network with name {name} already exists in node group default"
                            ),
                        }],
                    ));
                }
                let mut meta = json!({
                    "notation": "cidr", "render_type": null, "map_priority": 2,
                    "configurable": true, "use_gateway": false, "name": name,
                });
                let blank = NetworkGroup {
                    id: 0,
                    name: name.clone(),
                    release: Some(cluster.release_id),
                    cidr: None,
                    gateway: None,
                    vlan_start: None,
                    ip_ranges: Vec::new(),
                    meta: meta.clone(),
                    group_id: Some(cluster.id),
                };
                let mut update = obj.clone();
                update.remove("name");
                // fuel2 sends `release: null` without --release: the environment's release.
                if update.get("release").is_some_and(J::is_null) {
                    update.remove("release");
                }
                if let Some(m) = update.get("meta").and_then(J::as_object)
                    && let Some(o) = meta.as_object_mut()
                {
                    for (k, v) in m {
                        o.insert(k.clone(), v.clone());
                    }
                }
                // fuel2 always sends `use_gateway: false`; a gateway given with the network
                // (`--gateway`) is meant to be used, and its address kept out of the range.
                if update.get("gateway").is_some_and(J::is_string)
                    && let Some(o) = meta.as_object_mut()
                {
                    o.insert("use_gateway".into(), J::Bool(true));
                    if let Some(m) = update.get_mut("meta").and_then(J::as_object_mut) {
                        m.insert("use_gateway".into(), J::Bool(true));
                    }
                }
                let mut current = blank;
                current.meta = meta.clone();
                // The gateway is new here: compare against none so use_gateway applies.
                let mut p = Problems::default();
                let mut next = validate::apply_network(&current, &update, "network", &mut p);
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
                let (params, _) = tx
                    .read()
                    .network_config(cluster.id)?
                    .unwrap_or((json!({}), None));
                let mut all = others.clone();
                all.push(NetworkGroup {
                    id: -1,
                    ..next.clone()
                });
                if p.is_empty() {
                    validate::check_together(&all, &params, &mut p);
                }
                if !p.is_empty() {
                    return Err(invalid("network", p.0));
                }
                let id = tx.create_network_group(cluster.id, &next)?;
                tx.read()
                    .network_group(id)?
                    .ok_or_else(|| StoreError::NotFound {
                        entity: "network",
                        id: id.to_string(),
                    })
            })
        })
        .await?;
    Ok(HttpResponse::Created().json(net.to_json()))
}

/// `PUT /api/v1/networks/{id}` (`fuel2 network-group update`): name, VLAN, CIDR, gateway,
/// meta; the admin network is the master's configuration and is refused.
pub async fn update_network_group(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "network")?;
    let body: J = ApiError::parse(&body)?;
    let mut update = body
        .as_object()
        .cloned()
        .ok_or_else(|| ApiError::field("network", "$", "must be an object"))?;
    let net = state
        .store(move |s| {
            s.write(|tx| {
                let current = tx
                    .read()
                    .network_group(id)?
                    .ok_or_else(|| StoreError::NotFound {
                        entity: "network",
                        id: id.to_string(),
                    })?;
                let Some(cluster_id) = current.group_id else {
                    return Err(StoreError::Forbidden(
                        "the admin network (fuelweb_admin) is the master's PXE subnet: change it \
                         in the master's configuration (dhcp.subnets)"
                            .to_string(),
                    ));
                };
                check_unlocked(tx, cluster_id, LOCKED)?;
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
                                format!(
                                    "Network with name {n} already exists in node group default"
                                ),
                            );
                        }
                        n
                    }
                    Some(_) => {
                        p.add("name", "must be 1 to 50 characters");
                        current.name.clone()
                    }
                };
                let mut next = validate::apply_network(
                    &current,
                    &update,
                    &format!("networks[id={id}]"),
                    &mut p,
                );
                next.name = new_name;
                let (params, _) = tx
                    .read()
                    .network_config(cluster_id)?
                    .unwrap_or((json!({}), None));
                let mut all = others;
                all.push(next.clone());
                if p.is_empty() {
                    validate::check_together(&all, &params, &mut p);
                }
                if !p.is_empty() {
                    return Err(invalid("network", p.0));
                }
                tx.update_network_group(&next)?;
                tx.read()
                    .network_group(id)?
                    .ok_or_else(|| StoreError::NotFound {
                        entity: "network",
                        id: id.to_string(),
                    })
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(net.to_json()))
}

/// `DELETE /api/v1/networks/{id}`: 204; the admin network cannot go.
pub async fn delete_network_group(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "network")?;
    state
        .store(move |s| {
            s.write(|tx| {
                let net = tx
                    .read()
                    .network_group(id)?
                    .ok_or_else(|| StoreError::NotFound {
                        entity: "network",
                        id: id.to_string(),
                    })?;
                let Some(cluster_id) = net.group_id else {
                    return Err(StoreError::Forbidden(
                        "Default Admin-pxe network cannot be deleted".to_string(),
                    ));
                };
                check_unlocked(tx, cluster_id, LOCKED)?;
                tx.delete_network_group(id)
            })
        })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

fn nodegroup_json(c: &crate::model::Cluster) -> J {
    json!({"id": c.id, "cluster_id": c.id, "name": "default", "is_default": true})
}

/// `GET /api/v1/nodegroups` (`?cluster_id=`): each environment's one default group.
pub async fn nodegroups(
    state: web::Data<AppState>,
    query: web::Query<std::collections::HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let only = match query.get("cluster_id") {
        Some(raw) => Some(id_of(raw, "environment")?),
        None => None,
    };
    let clusters = state.store(|s| s.read(|tx| tx.clusters())).await?;
    let body: Vec<J> = clusters
        .iter()
        .filter(|c| only.is_none_or(|id| c.id == id))
        .map(nodegroup_json)
        .collect();
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /api/v1/nodegroups/{id}`
pub async fn nodegroup(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "node group")?;
    let c = state
        .store(move |s| s.read(|tx| tx.cluster(id)))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("node group {id} not found")))?;
    Ok(HttpResponse::Ok().json(nodegroup_json(&c)))
}

// ---- the network template ----

const TEMPLATE_LOCKED: &str =
    "Network template cannot be changed during deployment and after upgrade.";

/// A network template's shape (Nailgun's `NETWORK_TEMPLATE` schema): `adv_net_template`, an
/// object of node groups, each with `nic_mapping` (with `default`), `templates_for_node_role`,
/// `network_assignments` and `network_scheme`, all objects.
fn check_template(t: &J) -> Vec<crate::model::FieldError> {
    let mut p = Problems::default();
    let Some(obj) = t.as_object() else {
        p.add("$", "the network template must be an object");
        return p.0;
    };
    for key in obj.keys() {
        if key != "adv_net_template" {
            p.add(key.clone(), format!("unknown key {key:?}"));
        }
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
                for key in [
                    "nic_mapping",
                    "templates_for_node_role",
                    "network_assignments",
                    "network_scheme",
                ] {
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
                for key in body.keys() {
                    if ![
                        "nic_mapping",
                        "templates_for_node_role",
                        "network_assignments",
                        "network_scheme",
                    ]
                    .contains(&key.as_str())
                    {
                        p.add(format!("{field}.{key}"), format!("unknown key {key:?}"));
                    }
                }
            }
        }
    }
    p.0
}

/// `GET /api/v1/clusters/{id}/network_configuration/template`: the template or `null`.
pub async fn template(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let t = state
        .store(move |s| {
            s.read(|tx| {
                existing_cluster(tx, id)?;
                Ok(tx.network_config(id)?.and_then(|(_, t)| t))
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(t.unwrap_or(J::Null)))
}

/// `PUT /api/v1/clusters/{id}/network_configuration/template`: checked for shape, stored,
/// answered back (200).
pub async fn put_template(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let t: J = ApiError::parse(&body)?;
    let problems = check_template(&t);
    if !problems.is_empty() {
        return Err(ApiError::InvalidInput {
            what: "network template",
            fields: problems,
        });
    }
    let stored = t.clone();
    state
        .store(move |s| {
            s.write(|tx| {
                existing_cluster(&tx.read(), id)?;
                check_unlocked(tx, id, TEMPLATE_LOCKED)?;
                tx.set_network_template(id, Some(&stored))
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(t))
}

/// `DELETE /api/v1/clusters/{id}/network_configuration/template`: 204.
pub async fn delete_template(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    state
        .store(move |s| {
            s.write(|tx| {
                existing_cluster(&tx.read(), id)?;
                check_unlocked(tx, id, TEMPLATE_LOCKED)?;
                tx.set_network_template(id, None)
            })
        })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

// ---- virtual IPs ----

fn vip_json(a: &crate::engine::network::alloc::Address) -> J {
    let (name, namespace) = match &a.owner {
        Owner::Vip { name, namespace } => (J::String(name.clone()), json!(namespace)),
        Owner::Node(_) => (J::Null, J::Null),
    };
    json!({
        "id": a.id,
        "network": a.network_id,
        "node": null,
        "ip_addr": a.ip,
        "vip_name": name,
        "vip_namespace": namespace,
        "is_user_defined": a.user_defined,
    })
}

fn cluster_vips(
    tx: &ReadTxn<'_>,
    cluster_id: i64,
) -> Result<Vec<crate::engine::network::alloc::Address>, StoreError> {
    Ok(tx
        .addresses(cluster_id)?
        .into_iter()
        .filter(|a| matches!(a.owner, Owner::Vip { .. }))
        .collect())
}

/// `GET /api/v1/clusters/{id}/network_configuration/ips/vips` (`fuel2 vip download`):
/// `?network=ID` and `?network-role=ROLE` filter.
pub async fn vips(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<std::collections::HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let network = match query.get("network") {
        Some(raw) => Some(id_of(raw, "network")?),
        None => None,
    };
    let role = query.get("network-role").cloned();
    let body = state
        .store(move |s| {
            s.write(|tx| {
                let cluster = existing_cluster(&tx.read(), id)?;
                tx.ensure_network_config(id)?;
                let roles = tx
                    .read()
                    .release_value(cluster.release_id, "network_roles_metadata")?;
                let role_vips: Option<Vec<String>> = role.map(|r| {
                    vips_of(&roles)
                        .into_iter()
                        .filter(|(s, _)| s.network_role == r)
                        .map(|(s, _)| s.name)
                        .collect()
                });
                Ok(cluster_vips(&tx.read(), id)?
                    .iter()
                    .filter(|a| network.is_none_or(|n| a.network_id == n))
                    .filter(|a| {
                        role_vips.as_ref().is_none_or(|names| {
                            matches!(&a.owner, Owner::Vip { name, .. } if names.contains(name))
                        })
                    })
                    .map(vip_json)
                    .collect::<Vec<_>>())
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

fn parse_ids(path: &(String, String)) -> Result<(i64, i64), ApiError> {
    Ok((
        id_of(&path.0, "environment")?,
        id_of(&path.1, "ip address")?,
    ))
}

/// `GET /api/v1/clusters/{id}/network_configuration/ips/{ip}/vips`
pub async fn vip(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (cluster, ip_id) = parse_ids(&path)?;
    let found = state
        .store(move |s| s.read(|tx| cluster_vips(tx, cluster)))
        .await?
        .into_iter()
        .find(|a| a.id == ip_id)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "IP address {ip_id} is not a VIP of environment {cluster}"
            ))
        })?;
    Ok(HttpResponse::Ok().json(vip_json(&found)))
}

/// One VIP change (`ip_addr`, `vip_namespace`, `is_user_defined` may change; anything else
/// must stay as it is, as Nailgun's `IPAddrValidator.validate_update`).
fn vip_update(
    tx: &WriteTxn<'_>,
    cluster: i64,
    update: &J,
    field: &str,
    p: &mut Problems,
) -> Result<(), StoreError> {
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
    if let Err(e) = crate::engine::network::ip::Ip::parse(&ip) {
        p.add(format!("{field}.ip_addr"), e);
    }
    let namespace = match obj.get("vip_namespace") {
        Some(J::String(s)) => Some(s.clone()),
        Some(J::Null) => None,
        Some(_) => {
            p.add(format!("{field}.vip_namespace"), "must be a string or null");
            None
        }
        None => match &current.owner {
            Owner::Vip { namespace, .. } => namespace.clone(),
            Owner::Node(_) => None,
        },
    };
    if !p.is_empty() {
        return Ok(());
    }
    let Owner::Vip { name, .. } = &current.owner else {
        return Ok(());
    };
    if ip != current.ip || obj.get("is_user_defined") == Some(&J::Bool(true)) || namespace.is_some()
    {
        tx.set_vip(cluster, current.network_id, name, namespace.as_deref(), &ip)?;
    }
    Ok(())
}

/// `PUT /api/v1/clusters/{id}/network_configuration/ips/vips` (`fuel2 vip upload`): a list.
pub async fn put_vips(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let body: J = ApiError::parse(&body)?;
    let list = body
        .as_array()
        .cloned()
        .ok_or_else(|| ApiError::field("VIPs", "$", "must be a list of VIPs"))?;
    let answer = state
        .store(move |s| {
            s.write(|tx| {
                existing_cluster(&tx.read(), id)?;
                check_unlocked(tx, id, LOCKED)?;
                let mut p = Problems::default();
                for (i, v) in list.iter().enumerate() {
                    vip_update(tx, id, v, &format!("[{i}]"), &mut p)?;
                }
                if !p.is_empty() {
                    return Err(invalid("VIPs", p.0));
                }
                Ok(cluster_vips(&tx.read(), id)?
                    .iter()
                    .map(vip_json)
                    .collect::<Vec<_>>())
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// `PUT /api/v1/clusters/{id}/network_configuration/ips/{ip}/vips`: one VIP.
pub async fn put_vip(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (cluster, ip_id) = parse_ids(&path)?;
    let mut body: J = ApiError::parse(&body)?;
    if let Some(o) = body.as_object_mut() {
        o.entry("id").or_insert(json!(ip_id));
    }
    let answer = state
        .store(move |s| {
            s.write(|tx| {
                check_unlocked(tx, cluster, LOCKED)?;
                let mut p = Problems::default();
                vip_update(tx, cluster, &body, "$", &mut p)?;
                if !p.is_empty() {
                    return Err(invalid("VIP", p.0));
                }
                cluster_vips(&tx.read(), cluster)?
                    .into_iter()
                    .find(|a| a.id == ip_id)
                    .map(|a| vip_json(&a))
                    .ok_or_else(|| StoreError::NotFound {
                        entity: "VIP",
                        id: ip_id.to_string(),
                    })
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// `POST /api/v1/clusters/{id}/network_configuration/ips/vips` (`fuel2 vip create`):
/// `{ip_addr, network, vip_name[, vip_namespace]}`, an operator's VIP in one of the
/// environment's networks (200 with it, as Nailgun answers).
pub async fn create_vip(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let body: J = ApiError::parse(&body)?;
    let obj = body
        .as_object()
        .cloned()
        .ok_or_else(|| ApiError::field("VIP", "$", "must be an object"))?;
    let mut p = Problems::default();
    for k in obj.keys() {
        if ![
            "ip_addr",
            "network",
            "vip_name",
            "vip_namespace",
            "is_user_defined",
        ]
        .contains(&k.as_str())
        {
            p.add(k.clone(), format!("unknown key {k:?}"));
        }
    }
    let ip = obj
        .get("ip_addr")
        .and_then(J::as_str)
        .unwrap_or_default()
        .to_string();
    if let Err(e) = crate::engine::network::ip::Ip::parse(&ip) {
        p.add("ip_addr", e);
    }
    let network = obj.get("network").and_then(J::as_i64);
    if network.is_none() {
        p.add("network", "is required: a network id");
    }
    let name = obj
        .get("vip_name")
        .and_then(J::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
        p.add("vip_name", "is required: letters and underscores");
    }
    if obj.get("is_user_defined") == Some(&J::Bool(false)) {
        p.add(
            "is_user_defined",
            "'is_user_defined' flag must be set to true for manually created VIPs",
        );
    }
    let namespace = obj
        .get("vip_namespace")
        .and_then(J::as_str)
        .map(str::to_string);
    if !p.is_empty() {
        return Err(ApiError::InvalidInput {
            what: "VIP",
            fields: p.0,
        });
    }
    let network = network.unwrap_or_default();
    let created = state
        .store(move |s| {
            s.write(|tx| {
                existing_cluster(&tx.read(), id)?;
                tx.ensure_network_config(id)?;
                check_unlocked(tx, id, LOCKED)?;
                let net = tx.read().network_group(network)?;
                let ok = net
                    .as_ref()
                    .is_some_and(|n| n.group_id == Some(id) || n.group_id.is_none());
                if !ok {
                    return Err(invalid(
                        "VIP",
                        vec![crate::model::FieldError {
                            field: "network".into(),
                            message: format!(
                                "VIP cannot be created as there is no network with id {network} \
                             assigned to any of nodegroups of cluster with id {id}"
                            ),
                        }],
                    ));
                }
                if cluster_vips(&tx.read(), id)?
                    .iter()
                    .any(|a| matches!(&a.owner, Owner::Vip { name: n, .. } if *n == name))
                {
                    return Err(StoreError::Conflict(format!(
                        "VIP {name} already exists in environment {id}"
                    )));
                }
                let ip_id = tx.set_vip(id, network, &name, namespace.as_deref(), &ip)?;
                cluster_vips(&tx.read(), id)?
                    .into_iter()
                    .find(|a| a.id == ip_id)
                    .map(|a| vip_json(&a))
                    .ok_or_else(|| StoreError::NotFound {
                        entity: "VIP",
                        id: ip_id.to_string(),
                    })
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(created))
}

// ---- a node's interfaces ----

/// What a node's interfaces are checked against: its NICs (Nailgun's shape), the networks it
/// is on, the release's bond attributes, and its stored assignment if an operator made one.
struct NodeNets {
    base: Vec<J>,
    networks: Vec<NetworkGroup>,
    bond_attributes: J,
    stored: Option<J>,
}

fn node_nets(tx: &WriteTxn<'_>, node_id: i64) -> Result<NodeNets, StoreError> {
    let read = tx.read();
    let node = read.node(node_id)?.ok_or_else(|| StoreError::NotFound {
        entity: "node",
        id: node_id.to_string(),
    })?;
    let (networks, nic_attrs, bond_attrs) = match node.cluster_id {
        Some(cluster_id) => {
            tx.ensure_network_config(cluster_id)?;
            let read = tx.read();
            let cluster = existing_cluster(&read, cluster_id)?;
            let roles = read.release_value(cluster.release_id, "roles_metadata")?;
            let settings = read.cluster_settings(cluster_id)?;
            let public =
                crate::engine::network::alloc::should_have_public(&node.roles, &roles, &settings);
            let all = read.cluster_networks(cluster_id)?;
            let nets = crate::engine::network::alloc::node_networks(&all, public)
                .into_iter()
                .cloned()
                .collect();
            let section = |key: &str| -> Result<J, StoreError> {
                let v = read.release_value(cluster.release_id, &format!("{key}_metadata"))?;
                if v.is_null() {
                    read.release_value(cluster.release_id, key)
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
        None => (
            read.admin_network()?.into_iter().collect(),
            J::Null,
            J::Null,
        ),
    };
    Ok(NodeNets {
        base: crate::engine::network::nic::nics(&node.inventory, node.mac.as_str(), &nic_attrs),
        networks,
        bond_attributes: bond_attrs,
        stored: tx.read().node_interfaces(node_id)?,
    })
}

fn default_of(n: &NodeNets) -> Vec<J> {
    let refs: Vec<&NetworkGroup> = n.networks.iter().collect();
    crate::engine::network::nic::default_assignment(n.base.clone(), &refs)
}

/// `GET /api/v1/nodes/{id}/interfaces` (`fuel2 node interfaces download`): the operator's
/// assignment, else the default one.
pub async fn interfaces(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "node")?;
    let body = state
        .store(move |s| {
            s.write(|tx| {
                let n = node_nets(tx, id)?;
                Ok(match n.stored.clone() {
                    Some(J::Array(list)) => list,
                    _ => default_of(&n),
                })
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /api/v1/nodes/{id}/interfaces/default_assignment` (`fuel2 node interfaces
/// get-default`).
pub async fn default_interfaces(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "node")?;
    let body = state
        .store(move |s| s.write(|tx| Ok(default_of(&node_nets(tx, id)?))))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `PUT /api/v1/nodes/{id}/interfaces` (`fuel2 node interfaces upload`): checked
/// ([`crate::engine::network::nic::check_assignment`]), stored, answered back.
pub async fn put_interfaces(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "node")?;
    let body: J = ApiError::parse(&body)?;
    let answer = state
        .store(move |s| {
            s.write(|tx| {
                let n = node_nets(tx, id)?;
                if let Some(cluster) = tx.read().node(id)?.and_then(|n| n.cluster_id) {
                    check_unlocked(tx, cluster, LOCKED)?;
                }
                let refs: Vec<&NetworkGroup> = n.networks.iter().collect();
                let checked = crate::engine::network::nic::check_assignment(
                    &body,
                    &n.base,
                    &refs,
                    &n.bond_attributes,
                )
                .map_err(|f| invalid("interfaces", f))?;
                let value = J::Array(checked.clone());
                tx.set_node_interfaces(id, Some(&value))?;
                Ok(checked)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}
