//! Network verification at the master (Nailgun's `PUT /clusters/{id}/network_configuration/
//! neutron/verify`, `fuel2 env network verify`, old `fuel network --verify`). The configuration
//! sent is checked as an upload is (and not saved): its VLANs are the ones probed. Each online
//! node of the environment is asked to probe the VLANs of the networks on each of its
//! interfaces ([`crate::engine::network::verify::expected`], from its interface assignment),
//! as one run of a check ([`crate::store::VERIFY`]) that its agent takes where it runs now; the
//! store judges the probes' reports when the runs are over.
//!
//! Refused as Nailgun refuses it, recorded as a task finished in error that says why: fewer
//! than two online nodes, more than one node group, the environment deploying. As Nailgun,
//! the public network is probed only between the nodes that have it (and not at all when only
//! one does).

use serde_json::Value as J;

use crate::engine::network::alloc;
use crate::engine::network::verify::{self, Timing};
use crate::engine::network::{NetworkGroup, validate};
use crate::model::NodeStatus;
use crate::store::{Deployment, Probe, ReadTxn, Result, Store, StoreError};

/// How often an agent asks for work: the bootstrap's agent every second, the installed OS's
/// service agent at its heartbeat.
const RAMDISK_POLL_MS: u64 = 1_000;
const OS_POLL_MS: u64 = crate::model::node::HEARTBEAT_S * 1_000;

/// Start verifying environment `cluster_id`'s networks as `body` (a network configuration in
/// Nailgun's shape) describes them; the check's transaction. What each node probes is worked
/// out in a read, off the writer; the check is written in one short write, which refuses it
/// if something of the environment started meanwhile.
pub fn start(store: &Store, cluster_id: i64, body: &J, now: i64) -> Result<Deployment> {
    let (probes, refusal) = store.read(|r| probes(r, cluster_id, body, now))?;
    store.write(|tx| tx.create_check(cluster_id, &probes, refusal.as_deref(), now))
}

/// Each online node's probe, or why there is no check.
fn probes(
    r: &ReadTxn<'_>,
    cluster_id: i64,
    body: &J,
    now: i64,
) -> Result<(Vec<Probe>, Option<String>)> {
    let cluster = r.existing_cluster(cluster_id)?;
    let networks = r.cluster_networks(cluster_id)?;
    let params = crate::networks::parameters(r, cluster_id)?;
    let (networks, params) =
        validate::apply_config(&networks, &params, body).map_err(|fields| StoreError::Invalid {
            what: "network configuration",
            fields,
        })?;
    let nodes: Vec<_> = r
        .cluster_nodes(cluster_id)?
        .into_iter()
        .filter(|n| n.online(now))
        .collect();
    let refusal = if nodes.len() < 2 {
        Some(
            "At least two online nodes are required to be in the environment for network \
             verification."
                .to_string(),
        )
    } else if cluster.status == "deployment" || r.busy(cluster_id)?.is_some() {
        Some(format!(
            "Environment is not ready to run network verification because it is in '{}' \
             state.",
            cluster.status
        ))
    } else {
        None
    };
    if refusal.is_some() {
        return Ok((Vec::new(), refusal));
    }
    let roles = r.release_value(cluster.release_id, "roles_metadata")?;
    let settings = r.cluster_settings(cluster_id)?;
    let with_public: Vec<bool> = nodes
        .iter()
        .map(|n| alloc::should_have_public(&n.roles, &roles, &settings))
        .collect();
    let public_checked = with_public.iter().filter(|p| **p).count() > 1;
    let vlan_range = validate::private_vlan_range(&params)
        .and_then(|[lo, hi]| Some((u16::try_from(lo).ok()?, u16::try_from(hi).ok()?)));
    let poll_ms = if nodes.iter().any(|n| n.boots_from_disk()) {
        OS_POLL_MS
    } else {
        RAMDISK_POLL_MS
    };
    let timing = Timing::for_poll(poll_ms);
    let mut probes = Vec::with_capacity(nodes.len());
    for (node, public) in nodes.iter().zip(with_public) {
        let skip_public = !(public && public_checked);
        let probed: Vec<NetworkGroup> = networks
            .iter()
            .filter(|n| !(skip_public && n.name == "public"))
            .cloned()
            .collect();
        let interfaces = crate::networks::interfaces(r, node.id)?;
        let expected = verify::expected(
            node.id,
            &node.name,
            &interfaces,
            &probed,
            vlan_range,
            node.status == NodeStatus::Ready,
        );
        probes.push(Probe {
            node: node.id,
            args: verify::spec(&expected, timing),
            timeout_s: timing.timeout_s(),
        });
    }
    Ok((probes, None))
}
