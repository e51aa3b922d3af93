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
    let network_roles = tx.release_section(cluster.release_id, "network_roles_metadata")?;
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
                if let Some(m) = update.get("meta").and_then(J::as_object)
                    && let Some(o) = meta.as_object_mut()
                {
                    for (k, v) in m {
                        o.insert(k.clone(), v.clone());
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
