//! Nailgun's network API (its `network_manager` extension): an environment's network
//! configuration (`/clusters/{id}/network_configuration/neutron`), its network template, its
//! virtual IPs, the network groups (`/networks/`), node groups (`/nodegroups/`: one default
//! group per environment, numbered as the environment) and a node's interfaces. Thin: each
//! handler parses, calls [`crate::networks`] in one store transaction and answers.

use std::collections::HashMap;

use actix_web::{HttpResponse, web};
use serde_json::{Map, Value as J};

use crate::engine::network::ip::Ip;
use crate::engine::network::model::NetworkGroup;
use crate::engine::network::validate::Problems;
use crate::http::api::catalog::id_of;
use crate::http::{ApiError, AppState};
use crate::networks::{self, NewVip};

fn object(body: &[u8], what: &'static str) -> Result<Map<String, J>, ApiError> {
    match ApiError::parse::<J>(body)? {
        J::Object(o) => Ok(o),
        _ => Err(ApiError::field(what, "$", "must be an object")),
    }
}

fn refused(what: &'static str, p: Problems) -> Result<(), ApiError> {
    if p.is_empty() {
        Ok(())
    } else {
        Err(ApiError::InvalidInput { what, fields: p.0 })
    }
}

/// An optional id in the query (`?cluster_id=`, `?network=`).
fn query_id(q: &HashMap<String, String>, key: &str, what: &str) -> Result<Option<i64>, ApiError> {
    q.get(key).map(|raw| id_of(raw, what)).transpose()
}

/// `GET /api/v1/clusters/{id}/network_configuration/neutron`
pub async fn configuration(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let body = state
        .store(move |s| s.read(|r| networks::configuration(r, id)))
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
        .store(move |s| s.write(|tx| networks::put_configuration(tx, id, &body)))
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// `PUT /api/v1/clusters/{id}/network_configuration/neutron/verify`: the configuration sent
/// is checked as an upload (400 naming what is wrong) and verified by the nodes' probes
/// ([`crate::network_check`]); Nailgun's `verify_networks` task, 202 while it runs, 200 when
/// it was refused at once (fewer than two online nodes, the environment deploying).
pub async fn verify(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let body: J = ApiError::parse(&body)?;
    let now = crate::clock::now();
    let d = state
        .store(move |s| crate::network_check::start(s, id, &body, now))
        .await?;
    crate::http::api::transactions::answer_started(&state, d.id).await
}

/// `GET|PUT /api/v1/clusters/{id}/network_configuration/nova_network`: stoker's environments
/// are Neutron's, so Nailgun's refusal.
pub async fn nova_network(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    state
        .store(move |s| s.read(|r| r.existing_cluster(id)))
        .await?;
    Err(ApiError::BadRequest(
        "Wrong net provider - environment uses 'neutron'".to_string(),
    ))
}

// ---- network groups and node groups ----

/// `GET /api/v1/networks` (`?cluster_id=` filters, as Nailgun's collection handler).
pub async fn network_groups(
    state: web::Data<AppState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let cluster = query_id(&query, "cluster_id", "environment")?;
    let nets = state
        .store(move |s| s.read(|r| r.all_network_groups()))
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
        .store(move |s| s.read(|r| r.network_group(id)))
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

/// `POST /api/v1/networks` (`fuel2 network-group create`): 201 with the network.
pub async fn create_network_group(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let obj = object(&body, "network")?;
    let mut p = Problems::default();
    for key in obj
        .keys()
        .filter(|k| !NEW_NETWORK_KEYS.contains(&k.as_str()))
    {
        p.add(key.clone(), format!("unknown key {key:?}"));
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
    refused("network", p)?;
    let group = group.unwrap_or_default();
    let net = state
        .store(move |s| s.write(|tx| networks::create_group(tx, group, &name, &obj)))
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
    let update = object(&body, "network")?;
    let net = state
        .store(move |s| s.write(|tx| networks::update_group(tx, id, update)))
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
        .store(move |s| s.write(|tx| networks::delete_group(tx, id)))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

fn nodegroup_json(c: &crate::model::Cluster) -> J {
    serde_json::json!({"id": c.id, "cluster_id": c.id, "name": "default", "is_default": true})
}

/// `GET /api/v1/nodegroups` (`?cluster_id=`): each environment's one default group.
pub async fn nodegroups(
    state: web::Data<AppState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let only = query_id(&query, "cluster_id", "environment")?;
    let clusters = state.store(|s| s.read(|r| r.clusters())).await?;
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
        .store(move |s| s.read(|r| r.cluster(id)))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("node group {id} not found")))?;
    Ok(HttpResponse::Ok().json(nodegroup_json(&c)))
}

// ---- the network template ----

/// `GET /api/v1/clusters/{id}/network_configuration/template`: the template or `null`.
pub async fn template(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let t = state
        .store(move |s| s.read(|r| networks::template(r, id)))
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
    refused("network template", Problems(networks::check_template(&t)))?;
    let stored = t.clone();
    state
        .store(move |s| s.write(|tx| networks::set_template(tx, id, Some(&stored))))
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
        .store(move |s| s.write(|tx| networks::set_template(tx, id, None)))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

// ---- virtual IPs ----

/// `GET /api/v1/clusters/{id}/network_configuration/ips/vips` (`fuel2 vip download`):
/// `?network=ID` and `?network-role=ROLE` filter.
pub async fn vips(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let network = query_id(&query, "network", "network")?;
    let role = query.get("network-role").cloned();
    let body = state
        .store(move |s| s.read(|r| networks::vips(r, id, network, role.as_deref())))
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
        .store(move |s| s.read(|r| networks::vip(r, cluster, ip_id)))
        .await?;
    Ok(HttpResponse::Ok().json(found))
}

/// `PUT /api/v1/clusters/{id}/network_configuration/ips/vips` (`fuel2 vip upload`): a list,
/// all or none.
pub async fn put_vips(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let J::Array(list) = ApiError::parse::<J>(&body)? else {
        return Err(ApiError::field("VIPs", "$", "must be a list of VIPs"));
    };
    let updates: Vec<(String, J)> = list
        .into_iter()
        .enumerate()
        .map(|(i, v)| (format!("[{i}]"), v))
        .collect();
    let answer = state
        .store(move |s| s.write(|tx| networks::update_vips(tx, id, &updates)))
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
        o.entry("id").or_insert(J::from(ip_id));
    }
    let answer = state
        .store(move |s| {
            s.write(|tx| {
                networks::update_vips(tx, cluster, &[("$".to_string(), body)])?;
                networks::vip(&tx.read(), cluster, ip_id)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}

const NEW_VIP_KEYS: &[&str] = &[
    "ip_addr",
    "network",
    "vip_name",
    "vip_namespace",
    "is_user_defined",
];

/// `POST /api/v1/clusters/{id}/network_configuration/ips/vips` (`fuel2 vip create`):
/// `{ip_addr, network, vip_name[, vip_namespace]}`, an operator's VIP in one of the
/// environment's networks (200 with it, as Nailgun answers).
pub async fn create_vip(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let obj = object(&body, "VIP")?;
    let mut p = Problems::default();
    for k in obj.keys().filter(|k| !NEW_VIP_KEYS.contains(&k.as_str())) {
        p.add(k.clone(), format!("unknown key {k:?}"));
    }
    let text = |key: &str| {
        obj.get(key)
            .and_then(J::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (ip, name) = (text("ip_addr"), text("vip_name"));
    if let Err(e) = Ip::parse(&ip) {
        p.add("ip_addr", e);
    }
    let network = obj.get("network").and_then(J::as_i64);
    if network.is_none() {
        p.add("network", "is required: a network id");
    }
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
        p.add("vip_name", "is required: letters and underscores");
    }
    if obj.get("is_user_defined") == Some(&J::Bool(false)) {
        p.add(
            "is_user_defined",
            "'is_user_defined' flag must be set to true for manually created VIPs",
        );
    }
    refused("VIP", p)?;
    let new = NewVip {
        network: network.unwrap_or_default(),
        name,
        namespace: obj
            .get("vip_namespace")
            .and_then(J::as_str)
            .map(str::to_string),
        ip,
    };
    let created = state
        .store(move |s| s.write(|tx| networks::create_vip(tx, id, &new)))
        .await?;
    Ok(HttpResponse::Ok().json(created))
}

// ---- a node's interfaces ----

/// `GET /api/v1/nodes/{id}/interfaces` (`fuel2 node interfaces download`): the operator's
/// assignment, else the default one.
pub async fn interfaces(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "node")?;
    let body = state
        .store(move |s| s.read(|r| networks::interfaces(r, id)))
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
        .store(move |s| s.read(|r| networks::default_interfaces(r, id)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `PUT /api/v1/nodes/{id}/interfaces` (`fuel2 node interfaces upload`): checked, stored,
/// answered back.
pub async fn put_interfaces(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "node")?;
    let body: J = ApiError::parse(&body)?;
    let answer = state
        .store(move |s| s.write(|tx| networks::put_interfaces(tx, id, &body)))
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}
