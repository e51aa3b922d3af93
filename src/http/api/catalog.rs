//! JSON endpoints for what the master holds: releases, plugins and environments (`/clusters`,
//! shaped as Nailgun serialises them so Fuel's clients can read them).

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{ApiError, AppState};
use crate::model::{Cluster, FieldError, Node, Release};

/// Nailgun's release shape plus stoker's `plugin_id`.
pub fn release_json(r: &Release) -> Value {
    json!({
        "id": r.id,
        "name": r.name,
        "version": r.version,
        "operating_system": r.operating_system,
        "description": r.description,
        "state": r.state,
        "is_deployable": r.is_deployable(),
        "plugin_id": r.plugin_id,
    })
}

/// Nailgun's cluster shape (`objects/serializers/cluster.py`).
pub fn cluster_json(c: &Cluster, release: Option<&Release>) -> Value {
    let fuel_version = release
        .and_then(|r| r.version.split_once('-').map(|(_, fuel)| fuel.to_string()))
        .unwrap_or_default();
    json!({
        "id": c.id,
        "name": c.name,
        "release_id": c.release_id,
        "status": c.status,
        "mode": "ha_compact",
        "net_provider": "neutron",
        "net_segment_type": c.net_segment_type,
        "fuel_version": fuel_version,
        "changes": [],
        "ui_settings": {},
        "is_customized": false,
        "is_locked": c.status != "new",
        "components": [],
        "created_at": c.created_at,
    })
}

/// A node in Nailgun's shape as well as stoker's: its own fields, plus what Fuel's clients read
/// (`cluster`, `meta` from the inventory, `manufacturer`, `platform_name`, the pending flags).
///
/// Roles as Nailgun gave them: `roles` are those the node was deployed with (and still has),
/// `pending_roles` those assigned since and not yet deployed; `assigned_roles` (stoker's) are
/// all of them. `pending_addition`: in an environment and never deployed there. `ip` is the
/// address its agent last called from; `os_platform` is null (Nailgun took it from
/// nailgun-agent; stoker's agents do not report one).
pub fn node_json(node: &Node) -> Value {
    let mut v = serde_json::to_value(node).unwrap_or_else(|_| json!({}));
    if let Some(o) = v.as_object_mut() {
        let system = &node.inventory.system;
        let (deployed, pending): (Vec<&String>, Vec<&String>) = node
            .roles
            .iter()
            .partition(|r| node.deployed_roles.contains(r));
        for (key, value) in [
            ("cluster", json!(node.cluster_id)),
            ("meta", crate::model::fuel::fuel_meta(&node.inventory)),
            ("manufacturer", json!(system.vendor)),
            ("platform_name", json!(system.product)),
            ("assigned_roles", json!(node.roles)),
            ("roles", json!(deployed)),
            ("pending_roles", json!(pending)),
            (
                "pending_addition",
                json!(
                    node.cluster_id.is_some()
                        && node.deployed_roles.is_empty()
                        && !node.pending_deletion
                ),
            ),
            ("pending_deletion", json!(node.pending_deletion)),
            ("online", json!(node.online(crate::clock::now()))),
            ("ip", json!(node.address)),
            ("fqdn", json!(format!("{}.domain.tld", node.hostname))),
            ("os_platform", Value::Null),
            ("kernel_params", Value::Null),
            ("group_id", Value::Null),
            ("progress", json!(0)),
        ] {
            o.insert(key.to_string(), value);
        }
    }
    v
}

/// `GET /api/v1/releases`
pub async fn releases(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let releases = state.store(|s| s.read(|tx| tx.releases())).await?;
    Ok(HttpResponse::Ok().json(releases.iter().map(release_json).collect::<Vec<_>>()))
}

pub(crate) fn id_of(raw: &str, what: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::BadRequest(format!("{what} id {raw:?} is not a positive integer")))
}

/// `GET /api/v1/releases/{id}`: the release with its whole loaded tree under `data`.
pub async fn release(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "release")?;
    let (release, data) = state
        .store(move |s| s.read(|tx| Ok((tx.release(id)?, tx.release_data(id)?))))
        .await?;
    let release = release.ok_or_else(|| ApiError::NotFound(format!("release {id} not found")))?;
    let mut body = release_json(&release);
    body["data"] = data.unwrap_or(Value::Null);
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /api/v1/plugins`
pub async fn plugins(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let plugins = state.store(|s| s.read(|tx| tx.plugins())).await?;
    Ok(HttpResponse::Ok().json(plugins))
}

/// `GET /api/v1/clusters`
pub async fn clusters(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let (clusters, releases) = state
        .store(|s| s.read(|tx| Ok((tx.clusters()?, tx.releases()?))))
        .await?;
    let body: Vec<Value> = clusters
        .iter()
        .map(|c| cluster_json(c, releases.iter().find(|r| r.id == c.release_id)))
        .collect();
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /api/v1/clusters/{id}`
pub async fn cluster(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let found = state
        .store(move |s| {
            s.read(|tx| {
                let cluster = tx.cluster(id)?;
                let release = match &cluster {
                    Some(c) => tx.release(c.release_id)?,
                    None => None,
                };
                Ok(cluster.map(|c| (c, release)))
            })
        })
        .await?;
    let (cluster, release) =
        found.ok_or_else(|| ApiError::NotFound(format!("environment {id} not found")))?;
    Ok(HttpResponse::Ok().json(cluster_json(&cluster, release.as_ref())))
}

/// Delete environment `id` (its nodes are released back to discover); with `power_off` its
/// nodes with a usable BMC are powered off first-hand after, by `actor`, a result each. The
/// environment as it was, and the power results (none when nothing was powered off).
pub async fn delete_environment(
    state: &AppState,
    id: i64,
    power_off: bool,
    actor: String,
) -> Result<(Cluster, Vec<crate::bmc::actions::ActResult>), ApiError> {
    let now = crate::clock::now();
    let (gone, with_bmc) = state
        .store(move |s| {
            s.write(|tx| {
                let read = tx.read();
                let usable = read.nodes_with_usable_bmc()?;
                let with_bmc: Vec<i64> = read
                    .cluster_nodes(id)?
                    .iter()
                    .map(|n| n.id)
                    .filter(|n| usable.contains(n))
                    .collect();
                Ok((tx.delete_cluster(id, now)?, with_bmc))
            })
        })
        .await?;
    let mut results = Vec::new();
    if power_off && !with_bmc.is_empty() {
        let (runner, store) = (
            std::sync::Arc::clone(&state.bmc),
            std::sync::Arc::clone(&state.store),
        );
        results = crate::http::off_worker(move || {
            runner
                .bmcs
                .act_many(&store, &with_bmc, crate::bmc::actions::Act::Off, &actor)
        })
        .await?;
    }
    Ok((gone, results))
}

/// `DELETE /api/v1/clusters/{id}[?power_off=1]` (`fuel2 env delete`): the environment goes at
/// once, so the answer is Nailgun's `cluster_deletion` task, already finished (202, as Nailgun
/// answers). With `power_off=1` (the default with `bmc.power_off_released`) its nodes with a
/// BMC are powered off first-hand, a result each in the task's `result.power_off`.
pub async fn delete_cluster(
    state: web::Data<AppState>,
    caller: crate::http::access::Caller,
    path: web::Path<String>,
    query: web::Query<PowerOffQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let power_off = match &query.power_off {
        Some(v) => crate::http::api::query::flag("power_off", Some(v.as_str()))?,
        None => state.bmc.bmcs.power_off_released,
    };
    let (gone, results) = delete_environment(&state, id, power_off, caller.0.user.clone()).await?;
    let result = if results.is_empty() {
        json!({})
    } else {
        json!({ "power_off": results })
    };
    Ok(HttpResponse::Accepted().json(json!({
        "id": null,
        "uuid": null,
        "name": "cluster_deletion",
        "status": "ready",
        "progress": 100,
        "message": format!("environment {} deleted", gone.name),
        "cluster": id,
        "result": result,
        "parent_id": null,
        "dry_run": false,
        "graph_type": null,
        "time_start": null,
        "time_end": null,
    })))
}

/// `?power_off=` of an environment's deletion.
#[derive(Debug, Deserialize)]
pub struct PowerOffQuery {
    power_off: Option<String>,
}

/// The body of `POST /api/v1/clusters` as fuelclient sends it (`nodes` and `tasks` are legacy
/// keys it always sends empty; they are ignored).
#[derive(Debug, Deserialize)]
struct RawNewCluster {
    name: Option<Value>,
    release_id: Option<Value>,
    release: Option<Value>,
    net_segment_type: Option<Value>,
}

/// A validated request to create an environment.
pub struct NewCluster {
    pub name: String,
    pub release_id: i64,
    pub net_segment_type: String,
}

/// Validate a create-environment document, naming every bad field.
pub fn parse_new_cluster(body: &[u8]) -> Result<NewCluster, ApiError> {
    let raw: RawNewCluster = ApiError::parse(body)?;
    let mut fields = Vec::new();
    let mut bad = |field: &str, message: &str| {
        fields.push(FieldError {
            field: field.to_string(),
            message: message.to_string(),
        })
    };
    let name = match raw.name.as_ref().and_then(Value::as_str).map(str::trim) {
        Some(n) if !n.is_empty() && n.len() <= 100 => n.to_string(),
        Some(_) => {
            bad("name", "must be 1 to 100 characters");
            String::new()
        }
        None => {
            bad("name", "is required and must be a string");
            String::new()
        }
    };
    let release_id = match raw.release_id.or(raw.release) {
        Some(v) => v.as_i64().filter(|id| *id > 0).unwrap_or_else(|| {
            bad("release_id", "must be a positive integer");
            0
        }),
        None => {
            bad("release_id", "is required");
            0
        }
    };
    let net_segment_type = match raw.net_segment_type.as_ref().map(Value::as_str) {
        None => "vlan".to_string(),
        Some(Some(t @ ("vlan" | "gre" | "tun"))) => t.to_string(),
        Some(_) => {
            bad("net_segment_type", "must be one of vlan, gre, tun");
            String::new()
        }
    };
    if fields.is_empty() {
        Ok(NewCluster {
            name,
            release_id,
            net_segment_type,
        })
    } else {
        Err(ApiError::InvalidInput {
            what: "environment",
            fields,
        })
    }
}

/// `POST /api/v1/clusters`: 201 with the environment; 409 `no_release` when no release is
/// installed, 409 `conflict` for a taken name, 404 for an unknown release.
pub async fn create_cluster(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let new = parse_new_cluster(&body)?;
    let now = crate::clock::now();
    let (cluster, release) = state
        .store(move |s| {
            s.write(|tx| {
                let c = tx.create_cluster(&new.name, new.release_id, &new.net_segment_type, now)?;
                let r = tx.read().release(c.release_id)?;
                Ok((c, r))
            })
        })
        .await?;
    Ok(HttpResponse::Created().json(cluster_json(&cluster, release.as_ref())))
}

/// `PUT /api/v1/clusters/{id}` (`fuel2 env update -n NAME`): rename an environment. What
/// Nailgun's form also carries and stoker cannot change (release, segmentation, mode) is
/// accepted only unchanged; any other key is refused by name.
pub async fn update_cluster(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let raw: serde_json::Map<String, Value> = ApiError::parse_fields(&body, "environment")?;
    let (current, release) = state
        .store(move |s| s.read(|r| r.cluster_with_release(id)))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("environment {id} does not exist")))?;
    let shown = cluster_json(&current, Some(&release));
    let mut fields = Vec::new();
    let mut name = current.name.clone();
    for (key, value) in &raw {
        match key.as_str() {
            "name" => match value.as_str().map(str::trim) {
                Some(n) if !n.is_empty() && n.len() <= 100 => name = n.to_string(),
                _ => fields.push(FieldError {
                    field: "name".to_string(),
                    message: "must be a string of 1 to 100 characters".to_string(),
                }),
            },
            "id" | "release_id" | "release" | "net_segment_type" | "mode" | "net_provider"
            | "status" | "fuel_version" => {
                let have = if key == "release" {
                    &shown["release_id"]
                } else {
                    &shown[key.as_str()]
                };
                if value != have {
                    fields.push(FieldError {
                        field: key.clone(),
                        message: format!("cannot be changed (it is {have})"),
                    });
                }
            }
            other => fields.push(FieldError {
                field: other.to_string(),
                message: "unknown key: an environment's name is what can be changed".to_string(),
            }),
        }
    }
    if !fields.is_empty() {
        return Err(ApiError::InvalidInput {
            what: "environment",
            fields,
        });
    }
    let now = crate::clock::now();
    let cluster = state
        .store(move |s| s.write(|tx| tx.rename_cluster(id, &name, now)))
        .await?;
    Ok(HttpResponse::Ok().json(cluster_json(&cluster, Some(&release))))
}

/// Split `NAME` or `NAME@VERSION`.
fn name_and_version(raw: &str) -> (&str, Option<&str>) {
    match raw.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (raw, None),
    }
}

/// Remove the installed plugin `raw` (`NAME` or `NAME@VERSION`), its releases and its files;
/// refused (409) while an environment uses one of its releases, or when a bare name matches
/// several installed versions. The plugin as it was.
pub async fn remove_plugin_named(
    state: &AppState,
    raw: String,
) -> Result<crate::model::PluginSummary, ApiError> {
    let now = crate::clock::now();
    let (removed, dir) = state
        .store(move |s| {
            s.write(|tx| {
                let (name, version) = name_and_version(&raw);
                let found = tx.read().plugin_by_name(name, version)?;
                let plugin = match found.as_slice() {
                    [one] => one.clone(),
                    [] => {
                        return Err(crate::store::StoreError::NotFound {
                            entity: "plugin",
                            id: raw.clone(),
                        });
                    }
                    many => {
                        let versions: Vec<&str> = many.iter().map(|p| p.version.as_str()).collect();
                        return Err(crate::store::StoreError::Conflict(format!(
                            "{name} is installed in versions {}; say which, as {name}@VERSION",
                            versions.join(", ")
                        )));
                    }
                };
                let dir = tx.read().plugin_path(plugin.id)?;
                let removed = tx.remove_plugin(plugin.id, now)?;
                Ok((removed, dir))
            })
        })
        .await?;
    if let Some(dir) = dir {
        let full = state.data_dir.join(&dir);
        // The database no longer knows the files; a leftover directory is only disk space.
        if let Err(e) = std::fs::remove_dir_all(&full)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %full.display(), "cannot remove plugin files: {e}");
        }
    }
    tracing::info!(plugin = %removed.name, version = %removed.version, "plugin removed");
    Ok(removed)
}

/// `DELETE /api/v1/plugins/{name}` or `{name}@{version}`: remove an installed plugin, its
/// releases and its files. Refused (409) while an environment uses one of its releases, or when
/// a bare name matches several installed versions.
pub async fn remove_plugin(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let removed = remove_plugin_named(&state, path.into_inner()).await?;
    Ok(HttpResponse::Ok().json(removed))
}
