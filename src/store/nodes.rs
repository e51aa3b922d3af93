//! Queries on `nodes` and `node_macs`: discovery, listings and counts, approval and deletion.
//! A node is identified by any of its MACs, so a hello from a second NIC finds the same node. A
//! MAC belongs to one node and never moves to another here (writing one that another node owns
//! is a conflict); who may change what is decided before, in `engine::hello`.

use rusqlite::{OptionalExtension, Row, params};

use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::engine::hello::{Known, Macs};
use crate::engine::state::{ErrorType, InvalidTransition, NodeState};
use crate::engine::steps::Location;
use crate::model::{Inventory, Mac, Node, NodeId, NodeStatus};

/// Whether a hello created a node or refreshed a known one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloOutcome {
    Created,
    Updated,
}

/// How many nodes are in each status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCounts {
    pub total: u64,
    pub by_status: Vec<(NodeStatus, u64)>,
}

impl NodeCounts {
    pub fn get(&self, status: NodeStatus) -> u64 {
        self.by_status
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n)
    }
}

const NODE_COLUMNS: &str = "n.id, n.mac, n.name, n.status, i.inventory, n.created_at, \
     n.last_seen_at, n.cluster_id, n.roles, n.error_type, n.approved, n.address, \
     n.pending_deletion, n.deployed_roles, n.hostname, n.labels";

/// [`NODE_COLUMNS`] for planning, which never reads when a node was last seen (0 in its place):
/// every agent call writes it, and the plan revision does not watch it (`store::revision`).
const PLANNED_NODE_COLUMNS: &str = "n.id, n.mac, n.name, n.status, i.inventory, n.created_at, \
     0, n.cluster_id, n.roles, n.error_type, n.approved, n.address, \
     n.pending_deletion, n.deployed_roles, n.hostname, n.labels";

/// Where [`NODE_COLUMNS`] come from: a node's inventory is kept apart from its hot row.
const NODE_FROM: &str = "nodes n JOIN node_inventories i ON i.node_id = n.id";

/// A `nodes` row as stored, decoded into a [`Node`] by [`NodeRow::decode`].
struct NodeRow {
    id: NodeId,
    mac: String,
    name: String,
    status: String,
    inventory: String,
    created_at: i64,
    last_seen_at: i64,
    cluster_id: Option<i64>,
    roles: String,
    error_type: Option<String>,
    approved: bool,
    address: Option<String>,
    pending_deletion: bool,
    deployed_roles: String,
    hostname: Option<String>,
    labels: String,
}

fn node_from_row(row: &Row<'_>) -> rusqlite::Result<NodeRow> {
    Ok(NodeRow {
        id: row.get(0)?,
        mac: row.get(1)?,
        name: row.get(2)?,
        status: row.get(3)?,
        inventory: row.get(4)?,
        created_at: row.get(5)?,
        last_seen_at: row.get(6)?,
        cluster_id: row.get(7)?,
        roles: row.get(8)?,
        error_type: row.get(9)?,
        approved: row.get(10)?,
        address: row.get(11)?,
        pending_deletion: row.get(12)?,
        deployed_roles: row.get(13)?,
        hostname: row.get(14)?,
        labels: row.get(15)?,
    })
}

impl NodeRow {
    fn decode(self) -> Result<Node> {
        let corrupt = |what, detail: String| StoreError::Corrupt {
            what,
            detail: format!("node {}: {detail}", self.id),
        };
        Ok(Node {
            id: self.id,
            mac: self.mac.parse().map_err(|e| corrupt("node MAC", e))?,
            status: self.status.parse().map_err(|e| corrupt("node status", e))?,
            inventory: serde_json::from_str(&self.inventory)
                .map_err(|e| corrupt("node inventory", e.to_string()))?,
            roles: serde_json::from_str(&self.roles)
                .map_err(|e| corrupt("node roles", e.to_string()))?,
            deployed_roles: serde_json::from_str(&self.deployed_roles)
                .map_err(|e| corrupt("node deployed roles", e.to_string()))?,
            name: self.name,
            created_at: self.created_at,
            last_seen_at: self.last_seen_at,
            cluster_id: self.cluster_id,
            error_type: self.error_type,
            approved: self.approved,
            address: self.address,
            pending_deletion: self.pending_deletion,
            hostname: self.hostname.unwrap_or_else(|| default_hostname(self.id)),
            labels: serde_json::from_str(&self.labels)
                .map_err(|e| corrupt("node labels", e.to_string()))?,
        })
    }
}

impl ReadTxn<'_> {
    /// The node whose service-agent credential hashes to `hash`.
    pub fn node_by_os_credential(&self, hash: &str) -> Result<Option<NodeId>> {
        Ok(self
            .conn
            .prepare_cached("SELECT id FROM nodes WHERE os_credential_hash = ?1")?
            .query_row([hash], |r| r.get(0))
            .optional()?)
    }

    /// The hash of the node's service-agent credential, if one is bound; `None` also when there
    /// is no such node.
    pub fn os_credential_hash(&self, id: NodeId) -> Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached("SELECT os_credential_hash FROM nodes WHERE id = ?1")?
            .query_row([id], |r| r.get(0))
            .optional()?
            .flatten())
    }

    pub fn node(&self, id: NodeId) -> Result<Option<Node>> {
        let sql = format!("SELECT {NODE_COLUMNS} FROM {NODE_FROM} WHERE n.id = ?1");
        self.conn
            .query_row(&sql, [id], node_from_row)
            .optional()?
            .map(NodeRow::decode)
            .transpose()
    }

    /// The node that owns `mac` on any of its interfaces.
    pub fn node_by_mac(&self, mac: &Mac) -> Result<Option<Node>> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM {NODE_FROM}
             WHERE n.id = (SELECT node_id FROM node_macs WHERE mac = ?1)"
        );
        self.conn
            .query_row(&sql, [mac.as_str()], node_from_row)
            .optional()?
            .map(NodeRow::decode)
            .transpose()
    }

    /// Every MAC of `macs` that a node owns, with its owner, in the order given (each once).
    pub fn mac_owners<'m>(
        &self,
        macs: impl IntoIterator<Item = &'m Mac>,
    ) -> Result<Vec<(Mac, NodeId)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT node_id FROM node_macs WHERE mac = ?1")?;
        let mut out: Vec<(Mac, NodeId)> = Vec::new();
        for mac in macs {
            if out.iter().any(|(m, _)| m == mac) {
                continue;
            }
            if let Some(id) = stmt
                .query_row([mac.as_str()], |r| r.get::<_, NodeId>(0))
                .optional()?
            {
                out.push((mac.clone(), id));
            }
        }
        Ok(out)
    }

    /// What the hello policy needs to know about node `id`.
    pub fn known_node(&self, id: NodeId) -> Result<Option<Known>> {
        let row: Option<(String, bool)> = self
            .conn
            .prepare_cached("SELECT status, approved FROM nodes WHERE id = ?1")?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        row.map(|(status, approved)| {
            Ok(Known {
                id,
                status: status.parse().map_err(|e| StoreError::Corrupt {
                    what: "node status",
                    detail: format!("node {id}: {e}"),
                })?,
                approved,
            })
        })
        .transpose()
    }

    /// How many nodes there are.
    pub fn node_total(&self) -> Result<u64> {
        let n: i64 = self
            .conn
            .prepare_cached("SELECT COUNT(*) FROM nodes")?
            .query_row([], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The node whose current agent token hashes to `token_hash`, or whose pending (rotated)
    /// one does; with whether it was the pending one.
    pub fn node_by_agent_token(&self, token_hash: &str) -> Result<Option<(NodeId, bool)>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT id, agent_token_pending_hash = ?1 FROM nodes
                 WHERE agent_token_hash = ?1 OR agent_token_pending_hash = ?1",
            )?
            .query_row([token_hash], |r| {
                Ok((r.get(0)?, r.get::<_, Option<bool>>(1)?.unwrap_or(false)))
            })
            .optional()?)
    }

    /// The nodes assigned to an environment, by id.
    pub fn cluster_nodes(&self, cluster_id: i64) -> Result<Vec<Node>> {
        let sql =
            format!("SELECT {NODE_COLUMNS} FROM {NODE_FROM} WHERE n.cluster_id = ?1 ORDER BY n.id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([cluster_id], node_from_row)?;
        rows.map(|r| r?.decode()).collect()
    }

    /// An environment's nodes as planning reads them: without their last call's time, which
    /// is 0 (see [`PLANNED_NODE_COLUMNS`]).
    pub fn nodes_to_plan(&self, cluster_id: i64) -> Result<Vec<Node>> {
        let sql = format!(
            "SELECT {PLANNED_NODE_COLUMNS} FROM {NODE_FROM} WHERE n.cluster_id = ?1 ORDER BY n.id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([cluster_id], node_from_row)?;
        rows.map(|r| r?.decode()).collect()
    }

    /// Every node, by id.
    pub fn nodes(&self) -> Result<Vec<Node>> {
        let sql = format!("SELECT {NODE_COLUMNS} FROM {NODE_FROM} ORDER BY n.id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], node_from_row)?;
        rows.map(|r| r?.decode()).collect()
    }

    pub fn node_counts(&self) -> Result<NodeCounts> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT status, COUNT(*) FROM nodes GROUP BY status")?;
        let mut counts = NodeCounts::default();
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        for row in rows {
            let (status, n) = row?;
            let status = status.parse().map_err(|detail| StoreError::Corrupt {
                what: "node status",
                detail,
            })?;
            let n = u64::try_from(n).unwrap_or(0);
            counts.total += n;
            counts.by_status.push((status, n));
        }
        counts
            .by_status
            .sort_by_key(|(s, _)| NodeStatus::ALL.iter().position(|x| x == s));
        Ok(counts)
    }
}

/// Fuel's default name for a discovered node: "Untitled (" + the MAC's last two octets + ")".
/// Nailgun's default host name (`Node.default_slave_name`).
pub(crate) fn default_hostname(id: NodeId) -> String {
    format!("node-{id}")
}

pub(super) fn default_name(mac: &Mac) -> String {
    let s = mac.as_str();
    format!("Untitled ({})", &s[s.len().saturating_sub(5)..])
}

/// Which node a hello writes, as `engine::hello` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloTarget {
    /// A new node in `discover`, approved or waiting for an operator.
    Create { approved: bool },
    /// A known node; its MACs are replaced by the inventory's or kept.
    Refresh { node: NodeId, macs: Macs },
}

/// One hello to record.
#[derive(Debug, Clone, Copy)]
pub struct HelloWrite<'a> {
    pub inventory: &'a Inventory,
    pub target: HelloTarget,
    /// When given, becomes the node's agent token.
    pub token_hash: Option<&'a str>,
    /// The address the hello came from, kept as the node's address.
    pub address: Option<&'a str>,
    pub now: i64,
}

/// What a new node row starts with besides its MAC, name and inventory.
#[derive(Debug, Clone, Copy)]
pub(super) struct NewNode<'a> {
    pub now: i64,
    pub last_seen_at: i64,
    pub approved: bool,
    pub address: Option<&'a str>,
}

impl WriteTxn<'_> {
    /// A new node with `mac` as its primary MAC (refused when another node has it), under an
    /// id never used before, not even the highest one after its node was deleted: Fuel
    /// clients and deployed state name nodes by id. Its MACs are the caller's to record.
    pub(super) fn insert_node(
        &self,
        mac: &Mac,
        name: &str,
        inventory: &Inventory,
        n: NewNode<'_>,
    ) -> Result<NodeId> {
        if let Some((mac, owner)) = self.read().mac_owners([mac])?.pop() {
            return Err(StoreError::Conflict(format!(
                "MAC {mac} belongs to node {owner}"
            )));
        }
        let id = self.conn.query_row(
            "INSERT INTO nodes (id, mac, name, status, created_at, last_seen_at, approved,
               address)
             VALUES (max(coalesce((SELECT max(id) FROM nodes), 0),
                         coalesce((SELECT CAST(value AS INTEGER) FROM settings
                                   WHERE key = 'nodes.deleted_max_id'), 0)) + 1,
                     ?1, ?2, ?3, ?4, ?5, ?6, ?7)
             RETURNING id",
            params![
                mac.as_str(),
                name,
                NodeStatus::Discover.as_str(),
                n.now,
                n.last_seen_at,
                n.approved,
                n.address
            ],
            |r| r.get::<_, i64>(0),
        )?;
        let json = serde_json::to_string(inventory).map_err(|e| StoreError::Corrupt {
            what: "inventory",
            detail: e.to_string(),
        })?;
        self.write_inventory(id, inventory, &json)?;
        Ok(id)
    }

    /// Record an agent's hello the way discovery always did: create the node, or refresh the
    /// one that owns the inventory's first known MAC (replacing its MACs while in `discover`).
    /// For callers that made no decision of their own (tools, tests); the HTTP handlers decide
    /// with `engine::hello` and call [`WriteTxn::apply_hello`].
    pub fn record_hello(
        &self,
        inventory: &Inventory,
        new_token_hash: Option<&str>,
        now: i64,
    ) -> Result<(Node, HelloOutcome)> {
        let owners = self
            .read()
            .mac_owners(inventory.interfaces.iter().map(|n| &n.mac))?;
        let target = match owners.first() {
            None => HelloTarget::Create { approved: true },
            Some((_, id)) => {
                let known = self.read().known_node(*id)?;
                let keep = known.is_some_and(|k| k.status != NodeStatus::Discover);
                HelloTarget::Refresh {
                    node: *id,
                    macs: if keep { Macs::Keep } else { Macs::Replace },
                }
            }
        };
        self.apply_hello(&HelloWrite {
            inventory,
            target,
            token_hash: new_token_hash,
            address: None,
            now,
        })
    }

    /// Record a hello: create the node in `discover`, or refresh a known node's inventory,
    /// last-seen time and address. Its status is left alone: a node that is being deployed
    /// keeps its state when its agent says hello again. A MAC that another node owns is a
    /// conflict and nothing is written (the caller's transaction rolls back).
    pub fn apply_hello(&self, w: &HelloWrite<'_>) -> Result<(Node, HelloOutcome)> {
        let inventory = w.inventory;
        let now = w.now;
        let primary = inventory.primary_mac().ok_or_else(|| StoreError::Corrupt {
            what: "inventory",
            detail: "no interface".to_string(),
        })?;
        let (id, outcome, macs) = match w.target {
            HelloTarget::Refresh { node, macs } => {
                let n = self.conn.execute(
                    "UPDATE nodes SET last_seen_at = ?1, address = coalesce(?2, address)
                     WHERE id = ?3",
                    params![now, w.address, node],
                )?;
                if n == 0 {
                    return Err(StoreError::NotFound {
                        entity: "node",
                        id: node.to_string(),
                    });
                }
                let json = serde_json::to_string(inventory).map_err(|e| StoreError::Corrupt {
                    what: "inventory",
                    detail: e.to_string(),
                })?;
                self.write_inventory(node, inventory, &json)?;
                (node, HelloOutcome::Updated, macs)
            }
            HelloTarget::Create { approved } => {
                let id = self.insert_node(
                    primary,
                    &default_name(primary),
                    inventory,
                    NewNode {
                        now,
                        last_seen_at: now,
                        approved,
                        address: w.address,
                    },
                )?;
                (id, HelloOutcome::Created, Macs::Replace)
            }
        };
        if macs == Macs::Replace {
            self.replace_macs(id, inventory)?;
        }
        let (kind, message) = match outcome {
            HelloOutcome::Created => ("node.discovered", format!("discovered {primary}")),
            HelloOutcome::Updated => ("node.hello", format!("hello from {primary}")),
        };
        if let Some(hash) = w.token_hash {
            self.conn.execute(
                "UPDATE nodes SET agent_token_hash = ?1, agent_token_pending_hash = NULL,
                   agent_kind = 'ramdisk' WHERE id = ?2",
                params![hash, id],
            )?;
        }
        self.add_history(now, Some(id), kind, &message)?;
        if let Some(b) = &inventory.bmc
            && let Some(driver) = crate::bmc::Driver::parse(&b.driver)
        {
            self.learn_bmc(id, driver, &b.address, now)?;
        }
        let node = self.read().existing_node(id)?;
        Ok((node, outcome))
    }

    /// The node's MACs become those the inventory lists, and the one it was discovered by
    /// (its name in `nodes.mac`), which it keeps. A MAC another node owns is a conflict.
    pub(super) fn replace_macs(&self, id: NodeId, inventory: &Inventory) -> Result<()> {
        let own: String = self
            .conn
            .prepare_cached("SELECT mac FROM nodes WHERE id = ?1")?
            .query_row([id], |r| r.get(0))?;
        self.conn.execute(
            "DELETE FROM node_macs WHERE node_id = ?1 AND mac <> ?2",
            params![id, own],
        )?;
        let mut insert = self.conn.prepare_cached(
            "INSERT INTO node_macs (mac, node_id) VALUES (?1, ?2) ON CONFLICT(mac) DO NOTHING",
        )?;
        let macs = std::iter::once(own.as_str())
            .chain(inventory.interfaces.iter().map(|n| n.mac.as_str()));
        for mac in macs {
            if insert.execute(params![mac, id])? == 0 {
                let owner: NodeId = self
                    .conn
                    .prepare_cached("SELECT node_id FROM node_macs WHERE mac = ?1")?
                    .query_row([mac], |r| r.get(0))?;
                if owner != id {
                    return Err(StoreError::Conflict(format!(
                        "MAC {mac} belongs to node {owner}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// An operator approves a node that waits (`discovery.approval = manual`): from now on its
    /// boot script carries a boot token. Returns whether it was waiting.
    pub fn approve_node(&self, id: NodeId, now: i64) -> Result<bool> {
        let approved: Option<bool> = self
            .conn
            .prepare_cached("SELECT approved FROM nodes WHERE id = ?1")?
            .query_row([id], |r| r.get(0))
            .optional()?;
        match approved {
            None => Err(StoreError::NotFound {
                entity: "node",
                id: id.to_string(),
            }),
            Some(true) => Ok(false),
            Some(false) => {
                self.conn
                    .execute("UPDATE nodes SET approved = 1 WHERE id = ?1", [id])?;
                self.add_history(now, Some(id), "node.approved", "approved by an operator")?;
                Ok(true)
            }
        }
    }

    /// An operator deletes a node, as Nailgun does only for a node in no environment: refused
    /// (conflict) while it is assigned to one or has steps in a running deployment. Its MACs,
    /// inventory, boot tokens and its steps in finished deployments go with it (each deployment
    /// keeps their count by status, `removed_runs`); its history stays, no longer linked to
    /// it. A node that boots again is discovered anew, under a new id (the highest deleted id
    /// is kept in `settings`, so no id is ever reused).
    pub fn delete_node(&self, id: NodeId, now: i64) -> Result<Node> {
        let node = self.read().existing_node(id)?;
        if let Some(cluster) = node.cluster_id {
            return Err(StoreError::Conflict(format!(
                "node {id} is assigned to environment {cluster}; remove it from the \
                 environment first"
            )));
        }
        let running: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT d.id FROM step_runs r JOIN deployments d ON d.id = r.deployment
                 WHERE r.node_id = ?1 AND d.status = 'running' LIMIT 1",
            )?
            .query_row([id], |r| r.get(0))
            .optional()?;
        if let Some(deployment) = running {
            return Err(StoreError::Conflict(format!(
                "node {id} has steps in running deployment {deployment}; abort it first"
            )));
        }
        self.conn.execute(
            "DELETE FROM boot_tokens WHERE mac IN (SELECT mac FROM node_macs WHERE node_id = ?1)
               OR mac = ?2",
            params![id, node.mac.as_str()],
        )?;
        // Its runs go with it; each deployment keeps how many it had in each status.
        self.conn.execute(
            "INSERT INTO removed_runs (deployment, node_id, status, n)
             SELECT deployment, node_id, status, COUNT(*) FROM step_runs WHERE node_id = ?1
             GROUP BY deployment, status",
            [id],
        )?;
        self.conn.execute("DELETE FROM nodes WHERE id = ?1", [id])?;
        self.conn.execute(
            "INSERT INTO settings (key, value) VALUES ('nodes.deleted_max_id', ?1)
             ON CONFLICT(key) DO UPDATE SET value = CAST(max(CAST(value AS INTEGER),
                                                             CAST(excluded.value AS INTEGER))
                                                         AS TEXT)",
            [id.to_string()],
        )?;
        self.add_history(
            now,
            None,
            "node.deleted",
            &format!("node {id} ({}, {}) deleted", node.name, node.mac),
        )?;
        self.emit(crate::events::Change::Node {
            id,
            what: "node.deleted".into(),
            status: None,
            cluster: None,
        });
        Ok(node)
    }

    /// The node whose agent token (current or pending) hashes to `token_hash`; when the agent
    /// used its pending token, that one becomes its token and the old one stops working.
    /// Every call also marks the node seen (at most one write a second).
    pub fn authenticate_agent(
        &self,
        token_hash: &str,
        now: i64,
    ) -> Result<Option<(NodeId, Location)>> {
        let found: Option<(NodeId, bool, String)> = self
            .conn
            .prepare_cached(
                "SELECT id, agent_token_pending_hash = ?1, agent_kind FROM nodes
                 WHERE agent_token_hash = ?1 OR agent_token_pending_hash = ?1",
            )?
            .query_row([token_hash], |r| {
                Ok((
                    r.get(0)?,
                    r.get::<_, Option<bool>>(1)?.unwrap_or(false),
                    r.get(2)?,
                ))
            })
            .optional()?;
        let Some((id, pending, kind)) = found else {
            return Ok(None);
        };
        if pending {
            self.promote_agent_token(id, now)?;
        }
        self.conn
            .prepare_cached(
                "UPDATE nodes SET last_seen_at = ?2 WHERE id = ?1 AND last_seen_at < ?2",
            )?
            .execute(params![id, now])?;
        let kind = if kind == "os" {
            Location::Os
        } else {
            Location::Ramdisk
        };
        Ok(Some((id, kind)))
    }

    /// The node whose service-agent credential hashes to `hash`, marked seen now as every
    /// agent call marks it (at most one write a second): fetching the agent binary with the
    /// credential is its installed OS's first call.
    pub fn os_credential_call(&self, hash: &str, now: i64) -> Result<Option<NodeId>> {
        let Some(id) = self.read().node_by_os_credential(hash)? else {
            return Ok(None);
        };
        self.conn
            .prepare_cached(
                "UPDATE nodes SET last_seen_at = ?2 WHERE id = ?1 AND last_seen_at < ?2",
            )?
            .execute(params![id, now])?;
        Ok(Some(id))
    }

    /// Bind a service-agent credential to the node (its hash): the one its configure step is
    /// installing. The last one bound is the only one that works.
    pub fn bind_os_credential(&self, id: NodeId, hash: &str, now: i64) -> Result<()> {
        // Cached, like every statement of the agents' calls: each node's configure binds one.
        let n = self
            .conn
            .prepare_cached(
                "UPDATE nodes SET os_credential_hash = ?1 WHERE id = ?2 AND os_credential_hash IS NOT ?1",
            )?
            .execute(params![hash, id])?;
        if n > 0 {
            self.add_history(
                now,
                Some(id),
                "node.credential",
                "service-agent credential bound for the installed OS",
            )?;
        }
        Ok(())
    }

    /// Forget the node's service-agent credential (the node was removed from its environment):
    /// the agent on its old OS can no longer call.
    pub fn erase_os_credential(&self, id: NodeId, now: i64) -> Result<()> {
        let n = self.conn.execute(
            "UPDATE nodes SET os_credential_hash = NULL,
               agent_token_hash = CASE agent_kind WHEN 'os' THEN NULL ELSE agent_token_hash END,
               agent_token_pending_hash = CASE agent_kind WHEN 'os' THEN NULL
                 ELSE agent_token_pending_hash END
             WHERE id = ?1 AND os_credential_hash IS NOT NULL",
            [id],
        )?;
        if n > 0 {
            self.add_history(
                now,
                Some(id),
                "node.credential",
                "service-agent credential erased",
            )?;
        }
        Ok(())
    }

    /// The service agent said hello with the node's credential: it gets the node's agent token
    /// (`token_hash`), replacing the ramdisk agent's, and its version is kept.
    pub fn service_hello(
        &self,
        id: NodeId,
        token_hash: &str,
        version: &str,
        now: i64,
    ) -> Result<()> {
        // Cached: a rack rebooting into its installed OS says thousands of these at once.
        self.conn
            .prepare_cached(
                "UPDATE nodes SET agent_token_hash = ?1, agent_token_pending_hash = NULL,
                   agent_kind = 'os', agent_version = ?2, last_seen_at = MAX(last_seen_at, ?3)
                 WHERE id = ?4",
            )?
            .execute(params![token_hash, version, now, id])?;
        self.add_history(
            now,
            Some(id),
            "node.service",
            &format!("service agent {version} said hello from the installed OS"),
        )
    }

    /// The agent used its pending token: it becomes the node's token, the old one stops working.
    pub fn promote_agent_token(&self, id: NodeId, now: i64) -> Result<()> {
        self.conn
            .prepare_cached(
                "UPDATE nodes SET agent_token_hash = agent_token_pending_hash,
                   agent_token_pending_hash = NULL
                 WHERE id = ?1 AND agent_token_pending_hash IS NOT NULL",
            )?
            .execute([id])?;
        self.add_history(now, Some(id), "node.token", "agent token rotated")
    }

    /// Give the node a new (pending) agent token for `deployment`, once per deployment, and
    /// again while the agent has not used the last one (its answer may have been lost).
    /// Returns whether `new_hash` was stored, so the caller hands out its token.
    pub fn rotate_agent_token(&self, id: NodeId, deployment: i64, new_hash: &str) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE nodes SET agent_token_pending_hash = ?1, token_deployment = ?2
                 WHERE id = ?3
                   AND (token_deployment IS NOT ?2 OR agent_token_pending_hash IS NOT NULL)",
            )?
            .execute(params![new_hash, deployment, id])?;
        Ok(n > 0)
    }

    /// Move a node through the state machine ([`crate::engine::state`]): `to` takes the node's
    /// state and gives the next one, or the transition the table does not allow, which is
    /// refused as a conflict and changes nothing. Statuses are written only this way. `by`: the
    /// deployment that moves it, which the activity feed's line links beside the node.
    pub fn move_node(
        &self,
        id: NodeId,
        by: Option<i64>,
        now: i64,
        to: impl FnOnce(NodeState) -> std::result::Result<NodeState, InvalidTransition>,
    ) -> Result<NodeState> {
        let (status, error_type): (String, Option<String>) = self
            .conn
            .prepare_cached("SELECT status, error_type FROM nodes WHERE id = ?1")?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
            .ok_or_else(|| StoreError::NotFound {
                entity: "node",
                id: id.to_string(),
            })?;
        let from = stored_state(id, &status, error_type.as_deref())?;
        self.move_node_from(id, from, by, now, to)
    }

    /// [`WriteTxn::move_node`] for a caller that has just read the node's state.
    pub(super) fn move_node_from(
        &self,
        id: NodeId,
        from: NodeState,
        by: Option<i64>,
        now: i64,
        to: impl FnOnce(NodeState) -> std::result::Result<NodeState, InvalidTransition>,
    ) -> Result<NodeState> {
        let next = to(from).map_err(|e| StoreError::Conflict(format!("node {id}: {e}")))?;
        if next.status() != from.status() || next.error_type() != from.error_type() {
            self.conn
                .prepare_cached("UPDATE nodes SET status = ?1, error_type = ?2 WHERE id = ?3")?
                .execute(params![
                    next.status(),
                    next.error_type().map(ErrorType::as_str),
                    id
                ])?;
            self.add_event(
                now,
                super::history::About {
                    node: Some(id),
                    cluster: None,
                    deployment: by,
                },
                "node.status",
                &format!("status is now {next}"),
            )?;
        }
        Ok(next)
    }
}

/// A node's state from its stored `status` and `error_type` columns.
pub(super) fn stored_state(
    id: NodeId,
    status: &str,
    error_type: Option<&str>,
) -> Result<NodeState> {
    let status: NodeStatus = status.parse().map_err(|e| StoreError::Corrupt {
        what: "node status",
        detail: format!("node {id}: {e}"),
    })?;
    Ok(NodeState::of(
        status,
        false,
        error_type.and_then(ErrorType::parse),
    ))
}
