//! Nailgun 11's role and tag API, per release and per environment (`fuel2 role ... -r|-e`,
//! `fuel2 tag ...`): `GET/POST /{releases|clusters}/{id}/{roles|tags}`,
//! `GET/PUT/DELETE /{releases|clusters}/{id}/{roles|tags}/{name}`, validated as Nailgun's
//! `RoleValidator` and `TagValidator` (the schema's required keys, a role's tags known, its
//! `volumes_roles_mapping` naming known volumes, a name taken is 409, a role a node has is not
//! deleted), each problem named by field. What is stored is what [`crate::roles`] gives the
//! planner and role assignment.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use crate::http::api::catalog::id_of;
use crate::http::{ApiError, AppState};
use crate::model::FieldError;
use crate::roles::{all, own, volumes};
use crate::store::{MetaKind, MetaOwner, ReadTxn, StoreError};

/// The owner, kind and name a request's path names: `/api/v1/{releases|clusters}/{id}/
/// {roles|tags}[/{name}]`.
fn target(req: &HttpRequest) -> Result<(MetaOwner, MetaKind, Option<String>), ApiError> {
    let parts: Vec<&str> = req.path().trim_end_matches('/').split('/').collect();
    let (Some(o), Some(id), Some(k)) = (parts.get(3), parts.get(4), parts.get(5)) else {
        return Err(ApiError::NotFound(format!(
            "no role endpoint {}",
            req.path()
        )));
    };
    let name = req.match_info().get("name").map(str::to_string);
    Ok((owner(o, id)?, kind_of(k), name))
}

fn owner(kind: &str, raw: &str) -> Result<MetaOwner, ApiError> {
    Ok(match kind {
        "releases" => MetaOwner::Release(id_of(raw, "release")?),
        _ => MetaOwner::Cluster(id_of(raw, "environment")?),
    })
}

fn what(owner: MetaOwner) -> String {
    match owner {
        MetaOwner::Release(id) => format!("release {id}"),
        MetaOwner::Cluster(id) => format!("environment {id}"),
    }
}

fn exists(r: &ReadTxn<'_>, owner: MetaOwner) -> Result<(), StoreError> {
    let found = match owner {
        MetaOwner::Release(id) => r.release(id)?.is_some(),
        MetaOwner::Cluster(id) => r.cluster(id)?.is_some(),
    };
    if found {
        Ok(())
    } else {
        Err(StoreError::NotFound {
            entity: match owner {
                MetaOwner::Release(_) => "release",
                MetaOwner::Cluster(_) => "environment",
            },
            id: what(owner)
                .rsplit(' ')
                .next()
                .unwrap_or_default()
                .to_string(),
        })
    }
}

/// A role or tag as Nailgun's serializers show it.
fn shown(
    r: &ReadTxn<'_>,
    owner: MetaOwner,
    kind: MetaKind,
    name: &str,
    meta: &Value,
) -> Result<Value, StoreError> {
    Ok(match kind {
        MetaKind::Role => {
            let (_, mapping) = volumes(r, owner, name)?;
            json!({"name": name, "meta": meta, "volumes_roles_mapping": mapping})
        }
        _ => json!({"name": name, "meta": meta}),
    })
}

fn kind_of(raw: &str) -> MetaKind {
    if raw == "tags" {
        MetaKind::Tag
    } else {
        MetaKind::Role
    }
}

fn noun(kind: MetaKind) -> &'static str {
    if kind == MetaKind::Tag { "tag" } else { "role" }
}

/// `GET /{owner}/{id}/{roles|tags}`: everything the owner offers.
pub async fn list(state: web::Data<AppState>, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let (owner, kind, _) = target(&req)?;
    let body = state
        .store(move |s| {
            s.read(|r| {
                exists(r, owner)?;
                all(r, owner, kind)?
                    .iter()
                    .map(|(name, meta)| shown(r, owner, kind, name, meta))
                    .collect::<Result<Vec<_>, _>>()
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /{owner}/{id}/{roles|tags}/{name}`: one of the owner's own.
pub async fn show(state: web::Data<AppState>, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let (owner, kind, name) = target(&req)?;
    let name = name.unwrap_or_default();
    let body = state
        .store(move |s| {
            s.read(|r| {
                exists(r, owner)?;
                let meta = own(r, owner, kind)?.get(&name).cloned().ok_or_else(|| {
                    StoreError::NotFound {
                        entity: noun(kind),
                        id: format!("{name:?} of {}", what(owner)),
                    }
                })?;
                shown(r, owner, kind, &name, &meta)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(body))
}

/// Nailgun's role and tag schemas; `tags` and `volume_ids` are what the owner has.
fn check(kind: MetaKind, doc: &Value, tags: &[String], volume_ids: &[String]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut bad = |field: &str, message: String| {
        errors.push(FieldError {
            field: field.to_string(),
            message,
        })
    };
    if !doc.is_object() {
        bad("$", format!("expected a {} object", noun(kind)));
        return errors;
    }
    match doc.get("name").and_then(Value::as_str) {
        Some(n)
            if !n.is_empty()
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') => {}
        _ => bad("name", "is required: letters, digits, _ and - only".into()),
    }
    let meta = doc.get("meta");
    match kind {
        MetaKind::Role => {
            match meta {
                Some(Value::Object(m)) => {
                    for key in ["name", "description"] {
                        if !m.get(key).is_some_and(Value::is_string) {
                            bad(
                                &format!("meta.{key}"),
                                "is required and must be a string".into(),
                            );
                        }
                    }
                    match m.get("tags").and_then(Value::as_array) {
                        None => bad(
                            "meta.tags",
                            "is required and must be a list of tag names".into(),
                        ),
                        Some(list) => {
                            for (i, t) in list.iter().enumerate() {
                                match t.as_str() {
                                    Some(t) if tags.iter().any(|k| k == t) => {}
                                    Some(t) => bad(
                                        &format!("meta.tags[{i}]"),
                                        format!(
                                            "non-existent tag {t:?} (known: {})",
                                            tags.join(", ")
                                        ),
                                    ),
                                    None => {
                                        bad(&format!("meta.tags[{i}]"), "must be a tag name".into())
                                    }
                                }
                            }
                        }
                    }
                    if m.get("has_primary").is_some_and(|v| !v.is_boolean()) {
                        bad("meta.has_primary", "must be true or false".into());
                    }
                }
                _ => bad("meta", "is required and must be an object".into()),
            }
            match doc.get("volumes_roles_mapping").and_then(Value::as_array) {
                Some(list) if !list.is_empty() => {
                    for (i, v) in list.iter().enumerate() {
                        if !matches!(
                            v.get("allocate_size").and_then(Value::as_str),
                            Some("all" | "min" | "full-disk")
                        ) {
                            bad(
                                &format!("volumes_roles_mapping[{i}].allocate_size"),
                                "is required: all, min or full-disk".into(),
                            );
                        }
                        match v.get("id").and_then(Value::as_str) {
                            Some(id) if volume_ids.iter().any(|k| k == id) => {}
                            other => bad(
                                &format!("volumes_roles_mapping[{i}].id"),
                                format!(
                                    "{} is not one of the allowed volumes {}",
                                    other.map_or("a missing id".to_string(), |o| format!("{o:?}")),
                                    volume_ids.join(", ")
                                ),
                            ),
                        }
                    }
                }
                _ => bad(
                    "volumes_roles_mapping",
                    "is required: a list of at least one {id, allocate_size}".into(),
                ),
            }
        }
        _ => match meta {
            None => {}
            Some(Value::Object(m)) if m.get("has_primary").is_some_and(Value::is_boolean) => {}
            Some(_) => bad(
                "meta.has_primary",
                "is required in meta and must be true or false".into(),
            ),
        },
    }
    errors
}

/// Validate `doc` for `owner` and store it as `name` (`create`: refused when the owner has
/// it). Returns what is shown.
fn write(
    s: &crate::store::Store,
    owner: MetaOwner,
    kind: MetaKind,
    path_name: Option<String>,
    doc: Value,
) -> Result<Result<Value, ApiError>, StoreError> {
    s.write(|tx| {
        let r = tx.read();
        exists(&r, owner)?;
        let owned = own(&r, owner, kind)?;
        if let Some(n) = &path_name
            && !owned.contains_key(n)
        {
            return Err(StoreError::NotFound {
                entity: noun(kind),
                id: format!("{n:?} of {}", what(owner)),
            });
        }
        let tags: Vec<String> = all(&r, owner, MetaKind::Tag)?.keys().cloned().collect();
        let (ids, _) = volumes(&r, owner, "")?;
        let mut fields = check(kind, &doc, &tags, &ids);
        let name = doc
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(n) = &path_name
            && fields.iter().all(|f| f.field != "name")
            && *n != name
        {
            fields.push(FieldError {
                field: "name".into(),
                message: format!("the body names {name:?}, the path {n:?}"),
            });
        }
        if !fields.is_empty() {
            return Ok(Err(ApiError::InvalidInput {
                what: noun(kind),
                fields,
            }));
        }
        if path_name.is_none() && owned.contains_key(&name) {
            return Ok(Err(ApiError::Conflict(format!(
                "{} with name {name} already exists for {}",
                noun(kind),
                what(owner)
            ))));
        }
        let meta = doc
            .get("meta")
            .cloned()
            .unwrap_or_else(|| json!({"has_primary": false}));
        let mut body = json!({"name": name, "meta": meta});
        if kind == MetaKind::Role {
            body["volumes_roles_mapping"] = doc["volumes_roles_mapping"].clone();
        }
        tx.set_override(owner, kind, &name, Some(&body))?;
        Ok(Ok(shown(&tx.read(), owner, kind, &name, &meta)?))
    })
}

/// `POST /{owner}/{id}/{roles|tags}`: 201 with what was created.
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (owner, kind, _) = target(&req)?;
    let doc: Value = ApiError::parse(&body)?;
    let shown = state
        .store(move |s| write(s, owner, kind, None, doc))
        .await??;
    Ok(HttpResponse::Created().json(shown))
}

/// `PUT /{owner}/{id}/{roles|tags}/{name}`: what it is now.
pub async fn update(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (owner, kind, name) = target(&req)?;
    let name = name.unwrap_or_default();
    let doc: Value = ApiError::parse(&body)?;
    let shown = state
        .store(move |s| write(s, owner, kind, Some(name), doc))
        .await??;
    Ok(HttpResponse::Ok().json(shown))
}

/// `DELETE /{owner}/{id}/{roles|tags}/{name}`: 204. A role a node has (in the environment,
/// or in any environment of the release) is refused (400, naming the node, as Nailgun); a
/// deleted tag leaves the owner's roles (Nailgun's `remove_tag_from_roles`).
pub async fn delete(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (owner, kind, name) = target(&req)?;
    let name = name.unwrap_or_default();
    let refused = state
        .store(move |s| {
            s.write(|tx| {
                let r = tx.read();
                exists(&r, owner)?;
                let owned = own(&r, owner, kind)?;
                if !owned.contains_key(&name) {
                    return Err(StoreError::NotFound {
                        entity: noun(kind),
                        id: format!("{name:?} of {}", what(owner)),
                    });
                }
                if kind == MetaKind::Role {
                    let holder = r.nodes()?.into_iter().find(|n| {
                        n.roles.contains(&name)
                            && match (owner, n.cluster_id) {
                                (MetaOwner::Cluster(c), Some(nc)) => c == nc,
                                (MetaOwner::Release(rel), Some(nc)) => r
                                    .cluster(nc)
                                    .ok()
                                    .flatten()
                                    .is_some_and(|c| c.release_id == rel),
                                _ => false,
                            }
                    });
                    if let Some(n) = holder {
                        return Ok(Some(format!(
                            "can't delete role {name} that is assigned to node {}",
                            n.id
                        )));
                    }
                } else {
                    for (role, meta) in own(&r, owner, MetaKind::Role)? {
                        let tags = meta.get("tags").and_then(Value::as_array);
                        if tags.is_some_and(|t| t.iter().any(|x| x.as_str() == Some(name.as_str())))
                        {
                            let mut meta = meta.clone();
                            if let Some(t) = meta.get_mut("tags").and_then(Value::as_array_mut) {
                                t.retain(|x| x.as_str() != Some(name.as_str()));
                            }
                            let (_, mapping) = volumes(&r, owner, &role)?;
                            let body = json!({"name": role, "meta": meta,
                                              "volumes_roles_mapping": mapping});
                            tx.set_override(owner, MetaKind::Role, &role, Some(&body))?;
                        }
                    }
                }
                match owner {
                    MetaOwner::Release(_) => tx.set_override(owner, kind, &name, None)?,
                    MetaOwner::Cluster(_) => tx.drop_override(owner, kind, &name)?,
                }
                Ok(None)
            })
        })
        .await?;
    match refused {
        Some(message) => Err(ApiError::BadRequest(message)),
        None => Ok(HttpResponse::NoContent().finish()),
    }
}
