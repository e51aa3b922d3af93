//! A node's volumes as the master holds them: the layout an operator uploaded
//! (`node_documents`, Nailgun's full format), else the defaults the pure volume manager
//! ([`crate::engine::volumes`]) makes from the node's inventory disks and memory, its roles and
//! its release's `volumes_metadata` (with the roles created through the API). The disks API
//! and the planner (`node_volumes` in the deployment data) read them here.

use std::collections::HashMap;

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

/// What a node's volumes depend on besides the node itself: its environment's release and
/// volumes metadata and whether Glance's images live on Ceph, read once per environment.
pub struct Context {
    release: Option<crate::model::Release>,
    metadata: J,
    images_ceph: bool,
}

impl Context {
    /// The context of environment `cluster` (`None`: a node in no environment, which has no
    /// volumes).
    pub fn of(r: &ReadTxn<'_>, cluster: Option<i64>) -> Result<Context, StoreError> {
        let found = match cluster {
            Some(c) => r.cluster_with_release(c)?,
            None => None,
        };
        let Some((cluster, release)) = found else {
            return Ok(Context {
                release: None,
                metadata: J::Null,
                images_ceph: false,
            });
        };
        let metadata = volumes_metadata(r, release.id, Some(cluster.id))?;
        let images_ceph = r
            .cluster_settings(cluster.id)?
            .pointer("/storage/images_ceph")
            .and_then(J::as_bool)
            .unwrap_or(false);
        Ok(Context {
            release: Some(release),
            metadata,
            images_ceph,
        })
    }

    fn error(&self, source: VolumeError) -> VolumesError {
        VolumesError::Metadata {
            release: self
                .release
                .as_ref()
                .map(|r| r.name.clone())
                .unwrap_or_default(),
            source,
        }
    }

    fn rules(&self) -> J {
        self.metadata
            .get("rule_to_pick_boot_disk")
            .cloned()
            .unwrap_or(J::Null)
    }

    /// The spaces node `node`'s roles may have on its disks.
    fn spaces(&self, node: &Node) -> Result<Vec<J>, VolumesError> {
        match &self.release {
            Some(_) => node_spaces(
                &self.metadata,
                &node.roles,
                node.inventory.disks.len(),
                self.images_ceph,
            )
            .map_err(|e| self.error(e)),
            None => Ok(Vec::new()),
        }
    }

    /// Node `node`'s default volumes (Nailgun's full format).
    pub fn defaults(&self, node: &Node) -> Result<Vec<J>, VolumesError> {
        VolumeManager::new(
            &disks_of(node),
            node.inventory.memory_bytes,
            self.spaces(node)?,
            &self.rules(),
            &[],
        )
        .generate()
        .map_err(|e| self.error(e))
    }
}

/// What makes two nodes' default volumes the same: roles, disks (name, size), memory.
type Alike = (Vec<String>, Vec<(String, u64)>, u64);

/// Every node's volumes for a plan: the distinct layouts once, and each node's among them.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Volumes {
    pub layouts: Vec<Vec<J>>,
    /// Per node, in the order asked, its index in `layouts`.
    pub of_node: Vec<usize>,
}

impl Volumes {
    /// Node `i`'s volumes.
    pub fn node(&self, i: usize) -> &[J] {
        self.layout_of(i).map_or(&[], |(_, v)| v)
    }

    /// Node `i`'s layout: its index in `layouts` (shared by nodes alike) and its volumes.
    pub fn layout_of(&self, i: usize) -> Option<(usize, &[J])> {
        let l = *self.of_node.get(i)?;
        Some((l, self.layouts.get(l)?))
    }
}

/// Every node's volumes for a plan of environment `cluster`, in `nodes`' order: the uploaded
/// layout, else the defaults (none when the release's metadata cannot make them: the disks
/// API names the problem, as Nailgun's `set_default_node_volumes` left them empty). Nodes
/// alike in roles, disks and memory share one computation and one copy of the defaults.
pub fn of_nodes(r: &ReadTxn<'_>, cluster: i64, nodes: &[Node]) -> Result<Volumes, StoreError> {
    let ctx = Context::of(r, Some(cluster))?;
    let mut uploaded = r.node_documents(cluster, NodeDocument::Disks)?;
    let mut alike: HashMap<Alike, usize> = HashMap::new();
    let mut out = Volumes::default();
    for node in nodes {
        if let Some(J::Array(v)) = uploaded.remove(&node.id) {
            out.of_node.push(out.layouts.len());
            out.layouts.push(v);
            continue;
        }
        let key = (
            node.roles.clone(),
            disks_of(node)
                .into_iter()
                .map(|d| (d.name, d.size_bytes))
                .collect(),
            node.inventory.memory_bytes,
        );
        let index = match alike.get(&key) {
            Some(i) => *i,
            None => {
                let v = match ctx.defaults(node) {
                    Ok(v) => v,
                    Err(VolumesError::Store(e)) => return Err(e),
                    Err(VolumesError::Metadata { .. }) => Vec::new(),
                };
                out.layouts.push(v);
                alike.insert(key, out.layouts.len() - 1);
                out.layouts.len() - 1
            }
        };
        out.of_node.push(index);
    }
    Ok(out)
}

/// Node `node`'s layout inputs from the store. `stored` is left out when `fresh` (the
/// defaults endpoint).
pub fn layout(r: &ReadTxn<'_>, node: &Node, fresh: bool) -> Result<Layout, VolumesError> {
    let ctx = Context::of(r, node.cluster_id)?;
    let ubuntu = ctx
        .release
        .as_ref()
        .is_some_and(|r| r.operating_system.eq_ignore_ascii_case("ubuntu"));
    let stored = if fresh {
        None
    } else {
        r.node_document(node.id, NodeDocument::Disks)?
            .and_then(|v| v.as_array().cloned())
    };
    let current = match stored {
        Some(v) => v,
        None => ctx.defaults(node)?,
    };
    let (disks, memory, spaces, rules) = (
        disks_of(node),
        node.inventory.memory_bytes,
        ctx.spaces(node)?,
        ctx.rules(),
    );
    let over: &[J] = if fresh { &[] } else { &current };
    let manager = VolumeManager::new(&disks, memory, spaces, &rules, over);
    Ok(Layout {
        manager,
        current,
        ubuntu,
    })
}
