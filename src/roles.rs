//! Roles and tags as the master holds them, per release and per environment, as Nailgun 11
//! had them: a release's are its package's (`roles_metadata`, `tags_metadata`) with what was
//! created, changed or deleted through the API over them (`store::roles`); an environment's
//! are its release's and its own (created on it). A release without `tags_metadata` has the
//! tags its roles name, each primary when the role of that name is. The role and tag API
//! (`http::api::roles`), role assignment (`planner::accepts`) and the planner read them here,
//! and the API's changes are made here, checked as Nailgun's `RoleValidator` and
//! `TagValidator` (the schema's required keys, a role's tags known, its
//! `volumes_roles_mapping` naming known volumes, a name taken is 409, a role a node has is
//! not deleted), each problem named by field.

use serde_json::{Map, Value as J, json};

use crate::model::FieldError;
use crate::store::{MetaKind, MetaOwner, ReadTxn, StoreError, WriteTxn};

/// A name to its metadata, in name order.
pub type Metas = Map<String, J>;

fn apply(base: &mut Metas, overrides: Vec<(String, Option<J>)>) {
    for (name, body) in overrides {
        match body.and_then(|b| b.get("meta").cloned()) {
            Some(meta) => {
                base.insert(name, meta);
            }
            None => {
                base.remove(&name);
            }
        }
    }
}

fn object(v: Option<J>) -> Metas {
    match v {
        Some(J::Object(o)) => o,
        _ => Map::new(),
    }
}

/// The tags a role list names when a release has no `tags_metadata`.
fn derived_tags(roles: &Metas) -> Metas {
    let mut out = Map::new();
    for meta in roles.values() {
        for tag in meta
            .get("tags")
            .and_then(J::as_array)
            .into_iter()
            .flatten()
            .filter_map(J::as_str)
        {
            let primary = roles
                .get(tag)
                .and_then(|m| m.get("has_primary"))
                .and_then(J::as_bool)
                .unwrap_or(false);
            out.insert(tag.to_string(), json!({"has_primary": primary}));
        }
    }
    out
}

/// Release `id`'s roles: its package's with the API's changes.
pub fn release_roles(r: &ReadTxn<'_>, id: i64) -> Result<Metas, StoreError> {
    let mut roles = object(r.release_section(id, "roles_metadata")?);
    apply(
        &mut roles,
        r.overrides(MetaOwner::Release(id), MetaKind::Role)?,
    );
    Ok(roles)
}

/// Release `id`'s tags: its package's (or those its roles name) with the API's changes.
pub fn release_tags(r: &ReadTxn<'_>, id: i64) -> Result<Metas, StoreError> {
    let mut tags = match r.release_section(id, "tags_metadata")? {
        Some(J::Object(o)) => o,
        _ => derived_tags(&object(r.release_section(id, "roles_metadata")?)),
    };
    apply(
        &mut tags,
        r.overrides(MetaOwner::Release(id), MetaKind::Tag)?,
    );
    Ok(tags)
}

/// What `owner` itself holds of `kind`: a release's all, an environment's those created on it.
pub fn own(r: &ReadTxn<'_>, owner: MetaOwner, kind: MetaKind) -> Result<Metas, StoreError> {
    match (owner, kind) {
        (MetaOwner::Release(id), MetaKind::Role) => release_roles(r, id),
        (MetaOwner::Release(id), _) => release_tags(r, id),
        (MetaOwner::Cluster(_), _) => {
            let mut out = Map::new();
            apply(&mut out, r.overrides(owner, kind)?);
            Ok(out)
        }
    }
}

/// The release of environment `cluster`.
fn release_of(r: &ReadTxn<'_>, cluster: i64) -> Result<i64, StoreError> {
    Ok(r.existing_cluster(cluster)?.release_id)
}

/// Everything `owner` offers of `kind`: a release's own, an environment's its release's and
/// its own (Nailgun's `get_roles`, `get_tags_metadata`).
pub fn all(r: &ReadTxn<'_>, owner: MetaOwner, kind: MetaKind) -> Result<Metas, StoreError> {
    match owner {
        MetaOwner::Release(_) => own(r, owner, kind),
        MetaOwner::Cluster(c) => {
            let mut out = own(r, MetaOwner::Release(release_of(r, c)?), kind)?;
            out.extend(own(r, owner, kind)?);
            Ok(out)
        }
    }
}

/// The volume ids `owner`'s volumes metadata has (what a role's `volumes_roles_mapping` may
/// name) and its mapping of role `role`.
pub fn volumes(
    r: &ReadTxn<'_>,
    owner: MetaOwner,
    role: &str,
) -> Result<(Vec<String>, J), StoreError> {
    let (release, cluster) = match owner {
        MetaOwner::Release(id) => (id, None),
        MetaOwner::Cluster(c) => (release_of(r, c)?, Some(c)),
    };
    let md = crate::volumes::volumes_metadata(r, release, cluster)?;
    let ids = md
        .get("volumes")
        .and_then(J::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("id").and_then(J::as_str).map(str::to_string))
        .collect();
    let mapping = md
        .get("volumes_roles_mapping")
        .and_then(|m| m.get(role))
        .cloned()
        .unwrap_or_else(|| json!([]));
    Ok((ids, mapping))
}

/// The overrides a planner applies: a release's roles, tags and repositories after the API's
/// changes, and an environment's own roles and tags.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PlanMeta {
    pub release_roles: Option<J>,
    pub release_tags: Option<J>,
    /// The repositories set with `fuel2 release repos update` ([`crate::release_repos`]).
    pub release_repos: Option<J>,
    pub cluster_roles: J,
    pub cluster_tags: J,
}

/// What the planner needs of environment `cluster`'s roles and tags: the release's only when
/// the API changed them (else the package's stand), the environment's own.
pub fn plan_meta(r: &ReadTxn<'_>, release: i64, cluster: i64) -> Result<PlanMeta, StoreError> {
    let changed = |kind| -> Result<bool, StoreError> {
        Ok(!r.overrides(MetaOwner::Release(release), kind)?.is_empty())
    };
    Ok(PlanMeta {
        release_roles: if changed(MetaKind::Role)? {
            Some(J::Object(release_roles(r, release)?))
        } else {
            None
        },
        release_tags: if changed(MetaKind::Tag)? {
            Some(J::Object(release_tags(r, release)?))
        } else {
            None
        },
        release_repos: crate::release_repos::stored(r, release)?,
        cluster_roles: J::Object(own(r, MetaOwner::Cluster(cluster), MetaKind::Role)?),
        cluster_tags: J::Object(own(r, MetaOwner::Cluster(cluster), MetaKind::Tag)?),
    })
}

// ---- the role and tag API's operations (`http::api::roles`) ----

/// `owner` as messages name it.
fn what(owner: MetaOwner) -> String {
    match owner {
        MetaOwner::Release(id) => format!("release {id}"),
        MetaOwner::Cluster(id) => format!("environment {id}"),
    }
}

fn noun(kind: MetaKind) -> &'static str {
    if kind == MetaKind::Tag { "tag" } else { "role" }
}

/// The release or environment, or `NotFound`.
fn exists(r: &ReadTxn<'_>, owner: MetaOwner) -> Result<(), StoreError> {
    match owner {
        MetaOwner::Release(id) if r.release(id)?.is_none() => Err(StoreError::NotFound {
            entity: "release",
            id: id.to_string(),
        }),
        MetaOwner::Release(_) => Ok(()),
        MetaOwner::Cluster(id) => r.existing_cluster(id).map(|_| ()),
    }
}

/// The owner's own role or tag `name`, or `NotFound`.
fn owned(r: &ReadTxn<'_>, owner: MetaOwner, kind: MetaKind, name: &str) -> Result<J, StoreError> {
    exists(r, owner)?;
    own(r, owner, kind)?
        .get(name)
        .cloned()
        .ok_or_else(|| StoreError::NotFound {
            entity: noun(kind),
            id: format!("{name:?} of {}", what(owner)),
        })
}

/// A role or tag as Nailgun's serializers show it.
fn shown(
    r: &ReadTxn<'_>,
    owner: MetaOwner,
    kind: MetaKind,
    name: &str,
    meta: &J,
) -> Result<J, StoreError> {
    Ok(match kind {
        MetaKind::Role => {
            let (_, mapping) = volumes(r, owner, name)?;
            json!({"name": name, "meta": meta, "volumes_roles_mapping": mapping})
        }
        _ => json!({"name": name, "meta": meta}),
    })
}

/// Everything `owner` offers (an environment: its release's and its own), as shown.
pub fn list(r: &ReadTxn<'_>, owner: MetaOwner, kind: MetaKind) -> Result<Vec<J>, StoreError> {
    exists(r, owner)?;
    all(r, owner, kind)?
        .iter()
        .map(|(name, meta)| shown(r, owner, kind, name, meta))
        .collect()
}

/// One of `owner`'s own, as shown.
pub fn show(
    r: &ReadTxn<'_>,
    owner: MetaOwner,
    kind: MetaKind,
    name: &str,
) -> Result<J, StoreError> {
    let meta = owned(r, owner, kind, name)?;
    shown(r, owner, kind, name, &meta)
}

/// Nailgun's role and tag schemas; `tags` and `volume_ids` are what the owner has.
fn check(kind: MetaKind, doc: &J, tags: &[String], volume_ids: &[String]) -> Vec<FieldError> {
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
    match doc.get("name").and_then(J::as_str) {
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
                Some(J::Object(m)) => {
                    for key in ["name", "description"] {
                        if !m.get(key).is_some_and(J::is_string) {
                            bad(
                                &format!("meta.{key}"),
                                "is required and must be a string".into(),
                            );
                        }
                    }
                    match m.get("tags").and_then(J::as_array) {
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
            match doc.get("volumes_roles_mapping").and_then(J::as_array) {
                Some(list) if !list.is_empty() => {
                    for (i, v) in list.iter().enumerate() {
                        if !matches!(
                            v.get("allocate_size").and_then(J::as_str),
                            Some("all" | "min" | "full-disk")
                        ) {
                            bad(
                                &format!("volumes_roles_mapping[{i}].allocate_size"),
                                "is required: all, min or full-disk".into(),
                            );
                        }
                        match v.get("id").and_then(J::as_str) {
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
            Some(J::Object(m)) if m.get("has_primary").is_some_and(J::is_boolean) => {}
            Some(_) => bad(
                "meta.has_primary",
                "is required in meta and must be true or false".into(),
            ),
        },
    }
    errors
}

/// Store role or tag `doc` for `owner`, checked as Nailgun's `RoleValidator` / `TagValidator`
/// (each problem named by field): a new one (`name` None; 409 when the owner has one of its
/// name), or the owner's own `name` replaced. What is stored, as shown.
pub fn put(
    tx: &WriteTxn<'_>,
    owner: MetaOwner,
    kind: MetaKind,
    name: Option<&str>,
    doc: &J,
) -> Result<J, StoreError> {
    let r = tx.read();
    if let Some(n) = name {
        owned(&r, owner, kind, n)?;
    } else {
        exists(&r, owner)?;
    }
    let tags: Vec<String> = all(&r, owner, MetaKind::Tag)?.keys().cloned().collect();
    let (ids, _) = volumes(&r, owner, "")?;
    let mut fields = check(kind, doc, &tags, &ids);
    let sent = doc.get("name").and_then(J::as_str).unwrap_or_default();
    if let Some(n) = name
        && fields.iter().all(|f| f.field != "name")
        && n != sent
    {
        fields.push(FieldError {
            field: "name".into(),
            message: format!("the body names {sent:?}, the path {n:?}"),
        });
    }
    if !fields.is_empty() {
        return Err(StoreError::Invalid {
            what: noun(kind),
            fields,
        });
    }
    if name.is_none() && own(&r, owner, kind)?.contains_key(sent) {
        return Err(StoreError::Conflict(format!(
            "{} with name {sent} already exists for {}",
            noun(kind),
            what(owner)
        )));
    }
    let meta = doc
        .get("meta")
        .cloned()
        .unwrap_or_else(|| json!({"has_primary": false}));
    let mut body = json!({"name": sent, "meta": meta});
    if kind == MetaKind::Role {
        body["volumes_roles_mapping"] = doc["volumes_roles_mapping"].clone();
    }
    tx.set_override(owner, kind, sent, Some(&body))?;
    shown(&tx.read(), owner, kind, sent, &meta)
}

/// The first node holding role `name` where `owner` applies (the environment, or any
/// environment of the release).
fn holder(r: &ReadTxn<'_>, owner: MetaOwner, name: &str) -> Result<Option<i64>, StoreError> {
    let clusters: Vec<i64> = match owner {
        MetaOwner::Cluster(c) => vec![c],
        MetaOwner::Release(rel) => r
            .clusters()?
            .into_iter()
            .filter(|c| c.release_id == rel)
            .map(|c| c.id)
            .collect(),
    };
    for c in clusters {
        if let Some(n) = r
            .cluster_nodes(c)?
            .iter()
            .find(|n| n.roles.iter().any(|x| x == name))
        {
            return Ok(Some(n.id));
        }
    }
    Ok(None)
}

/// Delete `owner`'s own role or tag `name`: a role a node has is refused, naming the node (as
/// Nailgun); a deleted tag leaves the owner's roles that named it (Nailgun's
/// `remove_tag_from_roles`).
pub fn delete(
    tx: &WriteTxn<'_>,
    owner: MetaOwner,
    kind: MetaKind,
    name: &str,
) -> Result<(), StoreError> {
    let r = tx.read();
    owned(&r, owner, kind, name)?;
    match kind {
        MetaKind::Role => {
            if let Some(node) = holder(&r, owner, name)? {
                return Err(StoreError::Invalid {
                    what: "role",
                    fields: vec![FieldError {
                        field: "name".into(),
                        message: format!(
                            "can't delete role {name} that is assigned to node {node}"
                        ),
                    }],
                });
            }
        }
        MetaKind::Tag | MetaKind::Repos => {
            for (role, mut meta) in own(&r, owner, MetaKind::Role)? {
                let Some(tags) = meta.get_mut("tags").and_then(J::as_array_mut) else {
                    continue;
                };
                let before = tags.len();
                tags.retain(|x| x.as_str() != Some(name));
                if tags.len() != before {
                    let (_, mapping) = volumes(&r, owner, &role)?;
                    let body =
                        json!({"name": role, "meta": meta, "volumes_roles_mapping": mapping});
                    tx.set_override(owner, MetaKind::Role, &role, Some(&body))?;
                }
            }
        }
    }
    match owner {
        MetaOwner::Release(_) => tx.set_override(owner, kind, name, None),
        MetaOwner::Cluster(_) => tx.drop_override(owner, kind, name),
    }
}
