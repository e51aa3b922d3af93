//! The rest of Nailgun's release, extension and VM endpoints `fuel2` calls: a release's
//! components (`/releases/{id}/components`, its `components.yaml`), the extensions
//! (`/extensions`, `/clusters/{id}/extensions`: stoker's volume and network managers are built
//! in and always on; other names are refused by name), a node's VMs' configuration
//! (`/nodes/{id}/vms_conf`, Nailgun's `NODE_VM_SCHEMA`, stored and carried in the deployment
//! data's `vms_conf`), `PUT /clusters/{id}/spawn_vms`, which answers Nailgun's refusal: no
//! node has the `virt` role (stoker's releases have none), and a release's
//! `attributes_metadata` (`fuel2 release repos list|update`, over [`crate::release_repos`]).

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use serde_json::{Value, json};

use crate::http::api::catalog::id_of;
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::model::FieldError;
use crate::store::NodeDocument;

/// The extensions built into stoker, as Nailgun's `BaseExtension.to_dict` shows them.
const EXTENSIONS: &[(&str, &str)] = &[
    (
        "volume_manager",
        "Volume Manager Extension: nodes' disks and volumes (built in, always enabled)",
    ),
    (
        "network_manager",
        "Network Manager Extension: networks, interfaces and VIPs (built in, always enabled)",
    ),
];

fn extensions_json() -> Value {
    Value::Array(
        EXTENSIONS
            .iter()
            .map(|(name, description)| {
                json!({"name": name, "version": "1.0.0", "description": description,
                       "provides": []})
            })
            .collect(),
    )
}

/// `GET /api/v1/extensions`
pub async fn extensions() -> HttpResponse {
    HttpResponse::Ok().json(extensions_json())
}

async fn cluster_exists(state: &AppState, id: i64) -> Result<(), ApiError> {
    state
        .store(move |s| s.read(|r| r.existing_cluster(id).map(|_| ())))
        .await
}

/// `GET /api/v1/clusters/{id}/extensions`: the names enabled (every built-in one).
pub async fn cluster_extensions(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    cluster_exists(&state, id).await?;
    Ok(HttpResponse::Ok().json(EXTENSIONS.iter().map(|(n, _)| *n).collect::<Vec<_>>()))
}

fn unknown(names: &[String], field: &str) -> Result<(), ApiError> {
    let known: Vec<&str> = EXTENSIONS.iter().map(|(n, _)| *n).collect();
    query::known(field, names, &known).map_err(|_| {
        let bad: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| !known.contains(n))
            .collect();
        ApiError::field(
            "extensions",
            field,
            format!(
                "no such extensions: {} (stoker has {}, built in)",
                bad.join(", "),
                known.join(", ")
            ),
        )
    })
}

/// `PUT /api/v1/clusters/{id}/extensions` (`fuel2 env extension enable`): a list of names;
/// the built-in ones are enabled already, any other is refused by name.
pub async fn enable_extensions(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let names: Vec<String> = ApiError::parse_fields(&body, "extensions")?;
    unknown(&names, "$")?;
    cluster_exists(&state, id).await?;
    Ok(HttpResponse::Ok().json(EXTENSIONS.iter().map(|(n, _)| *n).collect::<Vec<_>>()))
}

/// `DELETE /api/v1/clusters/{id}/extensions?extension_names=` (`fuel2 env extension
/// disable`): refused, naming them: unknown names, and the built-in ones, which cannot be.
pub async fn disable_extensions(
    state: web::Data<AppState>,
    path: web::Path<String>,
    q: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let names = query::list(q.get("extension_names").map(String::as_str));
    if names.is_empty() {
        return Err(ApiError::field(
            "query",
            "extension_names",
            "name at least one extension",
        ));
    }
    unknown(&names, "extension_names")?;
    cluster_exists(&state, id).await?;
    Err(ApiError::field(
        "query",
        "extension_names",
        format!(
            "{} built into stoker and cannot be disabled",
            names.join(", ")
        ),
    ))
}

/// `GET /api/v1/releases/{id}/components` (`fuel2 release component list`): its
/// `components.yaml`.
pub async fn components(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "release")?;
    let found = state
        .store(move |s| s.read(|r| r.release_section(id, "components_metadata")))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("release {id} not found")))?;
    Ok(HttpResponse::Ok().json(if found.is_array() { found } else { json!([]) }))
}

/// Nailgun's `NODE_VM_SCHEMA`: `{"vms_conf": [{id, mem?, cpu?, vda_size?}]}`, ids, memory and
/// CPUs positive integers, `vda_size` like `20G`, nothing else.
fn parse_vms(doc: &Value) -> Result<Value, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut bad = |field: String, message: &str| {
        errors.push(FieldError {
            field,
            message: message.to_string(),
        })
    };
    let Some(obj) = doc.as_object() else {
        bad("$".into(), "expected {\"vms_conf\": [...]}");
        return Err(errors);
    };
    for key in obj.keys().filter(|k| *k != "vms_conf") {
        bad(key.clone(), "unknown key (only vms_conf)");
    }
    match obj.get("vms_conf").and_then(Value::as_array) {
        None => bad("vms_conf".into(), "is required: a list of {id, cpu, mem}"),
        Some(list) => {
            for (i, vm) in list.iter().enumerate() {
                let Some(vm) = vm.as_object() else {
                    bad(format!("vms_conf[{i}]"), "expected an object");
                    continue;
                };
                if !vm.contains_key("id") {
                    bad(format!("vms_conf[{i}].id"), "is required");
                }
                for (k, v) in vm {
                    let ok = match k.as_str() {
                        "id" | "mem" | "cpu" => v.as_i64().is_some_and(|n| n > 0),
                        "vda_size" => v.as_str().is_some_and(|s| {
                            let digits = s.trim_end_matches(['b', 'k', 'K', 'M', 'G', 'T']);
                            !digits.is_empty()
                                && digits.bytes().all(|b| b.is_ascii_digit())
                                && s.len() - digits.len() <= 1
                        }),
                        _ => true,
                    };
                    if !ok {
                        bad(
                            format!("vms_conf[{i}].{k}"),
                            if k == "vda_size" {
                                "must be a size like 20G"
                            } else {
                                "must be a positive integer"
                            },
                        );
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(obj.get("vms_conf").cloned().unwrap_or_else(|| json!([])))
    } else {
        Err(errors)
    }
}

/// `GET /api/v1/nodes/{id}/vms_conf`
pub async fn vms_conf(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let conf = state
        .store(move |s| {
            s.read(|r| {
                r.existing_node(id)?;
                r.node_document(id, NodeDocument::VmsConf)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(json!({"vms_conf": conf.unwrap_or_else(|| json!([]))})))
}

/// `PUT /api/v1/nodes/{id}/vms_conf` (`fuel2 node create-vms-conf`)
pub async fn set_vms_conf(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let doc: Value = ApiError::parse(&body)?;
    let conf = parse_vms(&doc).map_err(|fields| ApiError::InvalidInput {
        what: "vms_conf",
        fields,
    })?;
    let stored = conf.clone();
    state
        .store(move |s| {
            s.write(|tx| {
                tx.read().existing_node(id)?;
                tx.set_node_document(id, NodeDocument::VmsConf, Some(&stored))
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(json!({"vms_conf": conf})))
}

/// `GET /api/v1/nodes/{id}/attributes` (`fuel2 node attributes-download`)
pub async fn node_attributes(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let body = state
        .store(move |s| s.read(|r| crate::node_attributes::of_node(r, id)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /api/v1/nodes/{id}/attributes/defaults`
pub async fn node_attributes_defaults(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let body = state
        .store(move |s| s.read(|r| crate::node_attributes::defaults_of(r, id)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `PUT /api/v1/nodes/{id}/attributes` (`fuel2 node attributes-upload`): merged over the
/// node's attributes, checked by field (`crate::node_attributes`).
pub async fn set_node_attributes(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::node_id(&path)?;
    let doc: Value = ApiError::parse(&body)?;
    let body = state
        .store(move |s| s.write(|tx| crate::node_attributes::update(tx, id, &doc)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `PUT /api/v1/clusters/{id}/spawn_vms` (`fuel2 env spawn-vms`): Nailgun's answer when no node
/// has the `virt` role, which no release of stoker's has.
pub async fn spawn_vms(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let virt = state
        .store(move |s| {
            s.read(|r| {
                r.existing_cluster(id)?;
                Ok(r.cluster_nodes(id)?
                    .iter()
                    .any(|n| n.roles.iter().any(|role| role == "virt")))
            })
        })
        .await?;
    Err(ApiError::BadRequest(if virt {
        "No VMs to spawn: stoker does not spawn virtual machines".to_string()
    } else {
        format!("No VMs to spawn: no node of environment {id} has the virt role")
    }))
}

/// `GET /api/v1/releases/{id}/attributes_metadata`: the release's attributes, with the
/// repositories set through the API.
pub async fn attributes_metadata(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "release")?;
    let body = state
        .store(move |s| s.read(|r| crate::release_repos::attributes_metadata(r, id)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `PUT /api/v1/releases/{id}/attributes_metadata`: the whole document back with new
/// repositories (`fuel2 release repos update`); any other change refused, naming where.
pub async fn update_attributes_metadata(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "release")?;
    let doc: Value = ApiError::parse(&body)?;
    let now = crate::clock::now();
    let body = state
        .store(move |s| s.write(|tx| crate::release_repos::update(tx, id, &doc, now)))
        .await?;
    Ok(HttpResponse::Ok().json(body))
}
