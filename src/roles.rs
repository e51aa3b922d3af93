//! Roles and tags as the master holds them, per release and per environment, as Nailgun 11
//! had them: a release's are its package's (`roles_metadata`, `tags_metadata`) with what was
//! created, changed or deleted through the API over them (`store::roles`); an environment's
//! are its release's and its own (created on it). A release without `tags_metadata` has the
//! tags its roles name, each primary when the role of that name is. The role and tag API
//! (`http::api::roles`), role assignment (`planner::accepts`) and the planner read them here.

use serde_json::{Map, Value as J, json};

use crate::store::{MetaKind, MetaOwner, ReadTxn, StoreError};

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

/// The overrides a planner applies: a release's roles and tags after the API's changes, and
/// an environment's own.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PlanMeta {
    pub release_roles: Option<J>,
    pub release_tags: Option<J>,
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
        cluster_roles: J::Object(own(r, MetaOwner::Cluster(cluster), MetaKind::Role)?),
        cluster_tags: J::Object(own(r, MetaOwner::Cluster(cluster), MetaKind::Tag)?),
    })
}
