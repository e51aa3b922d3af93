//! A node's volumes as the master holds them: the layout an operator uploaded
//! (`node_documents`, Nailgun's full format), else the defaults the pure volume manager
//! ([`crate::engine::volumes`]) makes from the node's inventory disks and memory, its roles and
//! its release's `volumes_metadata` (with the roles created through the API). The disks API
//! and the planner (`node_volumes` in the deployment data) read them here.

use serde_json::Value as J;

use crate::engine::volumes::{DiskInfo, VolumeError, VolumeManager, node_spaces};
use crate::model::Node;
use crate::store::{NodeDocument, ReadTxn, StoreError};

/// What reading a node's volumes can fail on.
#[derive(Debug, thiserror::Error)]
pub enum VolumesError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("release {release}: {source}")]
    Metadata {
        release: String,
        source: VolumeError,
    },
}

/// What a node's layout is made from, read once.
pub struct Layout {
    /// The volume manager over the node's current volumes (none for the defaults).
    pub manager: VolumeManager,
    /// The node's volumes in Nailgun's full format: the uploaded ones, else the defaults.
    pub current: Vec<J>,
    /// Whether its release is Ubuntu's (one disk for `os`, as Nailgun checks).
    pub ubuntu: bool,
}

fn disks_of(node: &Node) -> Vec<DiskInfo> {
    node.inventory
        .disks
        .iter()
        .map(|d| DiskInfo {
            name: d.name.clone(),
            size_bytes: d.size_bytes,
        })
        .collect()
}

/// The volumes metadata that apply to environment `cluster` of release `release`: the
/// release's, with the `volumes_roles_mapping` of roles created on the release or the
/// environment.
pub fn volumes_metadata(
    r: &ReadTxn<'_>,
    release: i64,
    cluster: Option<i64>,
) -> Result<J, StoreError> {
    let mut md = r
        .release_section(release, "volumes_metadata")?
        .unwrap_or(J::Null);
    if !md.is_object() {
        md = serde_json::json!({});
    }
    for (role, vols) in r.role_volume_mappings(release, cluster)? {
        if let Some(o) = md.as_object_mut() {
            let m = o
                .entry("volumes_roles_mapping")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(m) = m.as_object_mut() {
                match vols {
                    Some(v) => {
                        m.insert(role, v);
                    }
                    None => {
                        m.remove(&role);
                    }
                }
            }
        }
    }
    Ok(md)
}

/// Node `node`'s layout inputs from the store. `stored` is left out when `fresh` (the
/// defaults endpoint).
pub fn layout(r: &ReadTxn<'_>, node: &Node, fresh: bool) -> Result<Layout, VolumesError> {
    let disks = disks_of(node);
    let (release, md, settings) = match node.cluster_id {
        Some(c) => match r.cluster_with_release(c)? {
            Some((_, release)) => {
                let md = volumes_metadata(r, release.id, Some(c))?;
                (Some(release), md, r.cluster_settings(c)?)
            }
            None => (None, J::Null, J::Null),
        },
        None => (None, J::Null, J::Null),
    };
    let images_ceph = settings
        .get("storage")
        .and_then(|s| s.get("images_ceph"))
        .and_then(J::as_bool)
        .unwrap_or(false);
    let spaces = match &release {
        Some(rel) => node_spaces(&md, &node.roles, disks.len(), images_ceph).map_err(|source| {
            VolumesError::Metadata {
                release: rel.name.clone(),
                source,
            }
        })?,
        None => Vec::new(),
    };
    let rules = md.get("rule_to_pick_boot_disk").cloned().unwrap_or(J::Null);
    let ubuntu = release
        .as_ref()
        .is_some_and(|r| r.operating_system.eq_ignore_ascii_case("ubuntu"));
    let metadata_error = |source| VolumesError::Metadata {
        release: release.as_ref().map(|r| r.name.clone()).unwrap_or_default(),
        source,
    };
    let memory = node.inventory.memory_bytes;
    let stored = if fresh {
        None
    } else {
        r.node_document(node.id, NodeDocument::Disks)?
            .and_then(|v| v.as_array().cloned())
    };
    let current = match stored {
        Some(v) => v,
        None => VolumeManager::new(&disks, memory, spaces.clone(), &rules, &[])
            .generate()
            .map_err(metadata_error)?,
    };
    let over: &[J] = if fresh { &[] } else { &current };
    let manager = VolumeManager::new(&disks, memory, spaces, &rules, over);
    Ok(Layout {
        manager,
        current,
        ubuntu,
    })
}
