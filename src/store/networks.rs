//! Queries on an environment's networks: its network groups and the master's admin network
//! (`network_groups`), its Neutron parameters and template (`network_configs`), the addresses
//! its nodes and virtual IPs hold (`ip_addrs`) and its nodes' interface assignments
//! (`node_interfaces`). What is valid and which address goes where is the engine's
//! (`engine::network`); this file stores its decisions, in the caller's transaction.

use rusqlite::{OptionalExtension, Row, params};
use serde_json::Value as J;

use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::engine::network::alloc::{self, Address, Member, Owner};
use crate::engine::network::ip::Ip;
use crate::engine::network::model::{self, ADMIN, NetworkGroup};

const COLUMNS: &str =
    "id, name, release_id, cidr, gateway, vlan_start, ip_ranges, meta, cluster_id";

fn corrupt(what: &'static str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        what,
        detail: e.to_string(),
    }
}

fn group_from_row(row: &Row<'_>) -> rusqlite::Result<NetworkGroup> {
    let ranges: String = row.get(6)?;
    let ip_ranges: Vec<[String; 2]> = serde_json::from_str(&ranges).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, Box::new(e))
    })?;
    Ok(NetworkGroup {
        id: row.get(0)?,
        name: row.get(1)?,
        release: row.get(2)?,
        cidr: row.get(3)?,
        gateway: row.get(4)?,
        vlan_start: row.get(5)?,
        ip_ranges,
        meta: super::catalog::json_column(row, 7)?,
        // One node group per environment, numbered as the environment.
        group_id: row.get(8)?,
    })
}

fn address_from_row(row: &Row<'_>) -> rusqlite::Result<Address> {
    let node: Option<i64> = row.get(2)?;
    let vip: Option<String> = row.get(3)?;
    let owner = match (node, vip) {
        (Some(n), _) => Owner::Node(n),
        (None, name) => Owner::Vip {
            name: name.unwrap_or_default(),
            namespace: row.get(4)?,
        },
    };
    Ok(Address {
        id: row.get(0)?,
        network_id: row.get(1)?,
        owner,
        ip: row.get(5)?,
        user_defined: row.get(6)?,
    })
}

const ADDRESS_COLUMNS: &str =
    "id, network_id, node_id, vip_name, vip_namespace, ip, is_user_defined";

impl ReadTxn<'_> {
    /// One key of a release's tree (`networks_metadata`, `network_roles_metadata` ...), `null`
    /// when it or the release has none.
    pub fn release_value(&self, release_id: i64, key: &str) -> Result<J> {
        Ok(self.release_section(release_id, key)?.unwrap_or(J::Null))
    }

    /// The master's admin network, once the daemon has set it.
    pub fn admin_network(&self) -> Result<Option<NetworkGroup>> {
        let sql =
            format!("SELECT {COLUMNS} FROM network_groups WHERE cluster_id IS NULL AND name = ?1");
        Ok(self
            .conn
            .query_row(&sql, [ADMIN], group_from_row)
            .optional()?)
    }

    /// An environment's own network groups, by id.
    pub fn network_groups(&self, cluster_id: i64) -> Result<Vec<NetworkGroup>> {
        let sql = format!("SELECT {COLUMNS} FROM network_groups WHERE cluster_id = ?1 ORDER BY id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([cluster_id], group_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// An environment's network groups and then the admin network, as Nailgun lists them.
    pub fn cluster_networks(&self, cluster_id: i64) -> Result<Vec<NetworkGroup>> {
        let mut nets = self.network_groups(cluster_id)?;
        nets.extend(self.admin_network()?);
        Ok(nets)
    }

    /// Every network group (`GET /networks/`).
    pub fn all_network_groups(&self) -> Result<Vec<NetworkGroup>> {
        let sql = format!("SELECT {COLUMNS} FROM network_groups ORDER BY id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], group_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn network_group(&self, id: i64) -> Result<Option<NetworkGroup>> {
        let sql = format!("SELECT {COLUMNS} FROM network_groups WHERE id = ?1");
        Ok(self.conn.query_row(&sql, [id], group_from_row).optional()?)
    }

    /// An environment's `networking_parameters` and network template, once it has them.
    pub fn network_config(&self, cluster_id: i64) -> Result<Option<(J, Option<J>)>> {
        let row: Option<(String, Option<String>)> = self
            .conn
            .query_row(
                "SELECT parameters, template FROM network_configs WHERE cluster_id = ?1",
                [cluster_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((params, template)) = row else {
            return Ok(None);
        };
        let params = serde_json::from_str(&params).map_err(|e| corrupt("network parameters", e))?;
        let template = template
            .map(|t| serde_json::from_str(&t))
            .transpose()
            .map_err(|e| corrupt("network template", e))?;
        Ok(Some((params, template)))
    }

    /// The addresses an environment's nodes and virtual IPs hold.
    pub fn addresses(&self, cluster_id: i64) -> Result<Vec<Address>> {
        let sql =
            format!("SELECT {ADDRESS_COLUMNS} FROM ip_addrs WHERE cluster_id = ?1 ORDER BY id");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([cluster_id], address_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The addresses node `node_id` holds in environment `cluster_id`, each with its network:
    /// the environment's networks by id, then the admin network (as Nailgun lists them).
    pub fn node_addresses(
        &self,
        cluster_id: i64,
        node_id: i64,
    ) -> Result<Vec<(NetworkGroup, String)>> {
        let columns = COLUMNS
            .split(',')
            .map(|c| format!("g.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {columns}, a.ip FROM ip_addrs a JOIN network_groups g ON g.id = a.network_id
             WHERE a.cluster_id = ?1 AND a.node_id = ?2
             ORDER BY g.cluster_id IS NULL, g.id, a.id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([cluster_id, node_id], |r| {
            Ok((group_from_row(r)?, r.get::<_, String>(9)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Addresses other environments hold in shared networks (the admin network).
    fn foreign_addresses(&self, cluster_id: i64) -> Result<Vec<(i64, String)>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT a.network_id, a.ip FROM ip_addrs a JOIN network_groups g ON g.id = a.network_id
             WHERE g.cluster_id IS NULL AND a.cluster_id != ?1",
        )?;
        let rows = stmt.query_map([cluster_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// A node's interfaces as an operator set them; `None`: the default assignment.
    pub fn node_interfaces(&self, node_id: i64) -> Result<Option<J>> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT interfaces FROM node_interfaces WHERE node_id = ?1",
                [node_id],
                |r| r.get(0),
            )
            .optional()?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt("node interfaces", e)))
            .transpose()
    }

    /// The interfaces operators set on environment `cluster_id`'s nodes, by node.
    pub fn cluster_node_interfaces(
        &self,
        cluster_id: i64,
    ) -> Result<std::collections::HashMap<i64, J>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT i.node_id, i.interfaces FROM node_interfaces i JOIN nodes n ON n.id = i.node_id
             WHERE n.cluster_id = ?1",
        )?;
        let rows = stmt.query_map([cluster_id], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = std::collections::HashMap::new();
        for row in rows {
            let (id, text) = row?;
            out.insert(
                id,
                serde_json::from_str(&text).map_err(|e| corrupt("node interfaces", e))?,
            );
        }
        Ok(out)
    }
}

fn insert_group(tx: &WriteTxn<'_>, cluster_id: Option<i64>, n: &NetworkGroup) -> Result<i64> {
    let inserted_id = tx.conn.query_row(
        "INSERT INTO network_groups
           (cluster_id, name, release_id, cidr, gateway, vlan_start, ip_ranges, meta)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             RETURNING id",
        params![
            cluster_id,
            n.name,
            n.release,
            n.cidr,
            n.gateway,
            n.vlan_start,
            serde_json::to_string(&n.ip_ranges).map_err(|e| corrupt("ip ranges", e))?,
            n.meta.to_string()
        ],
        |r| r.get::<_, i64>(0),
    )?;
    Ok(inserted_id)
}

fn update_group(tx: &WriteTxn<'_>, n: &NetworkGroup) -> Result<()> {
    tx.conn.execute(
        "UPDATE network_groups SET name = ?2, cidr = ?3, gateway = ?4, vlan_start = ?5,
           ip_ranges = ?6, meta = ?7 WHERE id = ?1",
        params![
            n.id,
            n.name,
            n.cidr,
            n.gateway,
            n.vlan_start,
            serde_json::to_string(&n.ip_ranges).map_err(|e| corrupt("ip ranges", e))?,
            n.meta.to_string()
        ],
    )?;
    Ok(())
}

impl WriteTxn<'_> {
    /// Make the admin network what the master's configuration says (at every start).
    pub fn set_admin_network(&self, net: &NetworkGroup) -> Result<NetworkGroup> {
        match self.read().admin_network()? {
            Some(old) => {
                let next = NetworkGroup {
                    id: old.id,
                    ..net.clone()
                };
                if next != old {
                    update_group(self, &next)?;
                }
            }
            None => {
                insert_group(self, None, net)?;
            }
        }
        self.read()
            .admin_network()?
            .ok_or_else(|| corrupt("admin network", "missing after it was written"))
    }

    /// Give an environment its networks if it has none yet (a new environment, or one made
    /// before stoker kept networks): its release's network groups of its segmentation type,
    /// its Neutron parameters, and its addresses.
    /// Give every environment without networks its release's (environments made before
    /// stoker kept networks); the daemon calls this at start, so reads never have to.
    pub fn ensure_network_configs(&self) -> Result<()> {
        let missing: Vec<i64> = self
            .conn
            .prepare(
                "SELECT id FROM clusters WHERE id NOT IN (SELECT cluster_id FROM network_configs)",
            )?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        missing
            .into_iter()
            .try_for_each(|id| self.ensure_network_config(id))
    }

    pub(super) fn ensure_network_config(&self, cluster_id: i64) -> Result<()> {
        if self.read().network_config(cluster_id)?.is_some() {
            return Ok(());
        }
        let (cluster, release) =
            self.read()
                .cluster_with_release(cluster_id)?
                .ok_or_else(|| StoreError::NotFound {
                    entity: "environment",
                    id: cluster_id.to_string(),
                })?;
        let metadata = self.read().release_value(release.id, "networks_metadata")?;
        for net in
            model::release_networks(&metadata, release.id, &cluster.net_segment_type, cluster_id)
        {
            insert_group(self, Some(cluster_id), &net)?;
        }
        let params = model::default_parameters(&metadata, &cluster.net_segment_type);
        self.conn.execute(
            "INSERT INTO network_configs (cluster_id, parameters) VALUES (?1, ?2)",
            params![cluster_id, params.to_string()],
        )?;
        self.sync_addresses(cluster_id)
    }

    /// Store a checked network configuration (the environment's groups, not the admin
    /// network) and its parameters, then move addresses that left their ranges.
    pub fn save_network_config(
        &self,
        cluster_id: i64,
        networks: &[NetworkGroup],
        parameters: &J,
    ) -> Result<()> {
        for n in networks.iter().filter(|n| n.group_id == Some(cluster_id)) {
            update_group(self, n)?;
        }
        self.conn.execute(
            "UPDATE network_configs SET parameters = ?2 WHERE cluster_id = ?1",
            params![cluster_id, parameters.to_string()],
        )?;
        self.sync_addresses(cluster_id)
    }

    /// Add a network group to an environment (`POST /networks/`).
    pub fn create_network_group(&self, cluster_id: i64, net: &NetworkGroup) -> Result<i64> {
        let id = insert_group(self, Some(cluster_id), net)?;
        self.sync_addresses(cluster_id)?;
        Ok(id)
    }

    /// Change one network group (`PUT /networks/{id}/`); checked by the caller.
    pub fn update_network_group(&self, net: &NetworkGroup) -> Result<()> {
        update_group(self, net)?;
        if let Some(cluster_id) = net.group_id {
            self.sync_addresses(cluster_id)?;
        }
        Ok(())
    }

    /// Remove a network group with its addresses (`DELETE /networks/{id}/`).
    pub fn delete_network_group(&self, id: i64) -> Result<()> {
        self.conn
            .execute("DELETE FROM network_groups WHERE id = ?1", [id])?;
        Ok(())
    }

    pub fn set_network_template(&self, cluster_id: i64, template: Option<&J>) -> Result<()> {
        self.conn.execute(
            "UPDATE network_configs SET template = ?2 WHERE cluster_id = ?1",
            params![cluster_id, template.map(J::to_string)],
        )?;
        Ok(())
    }

    /// Allocate and free an environment's addresses as the engine decides
    /// ([`alloc::allocate`]): every node on each of its networks, every virtual IP. Running
    /// out of addresses is an invalid configuration naming the network.
    pub fn sync_addresses(&self, cluster_id: i64) -> Result<()> {
        let read = self.read();
        let Some(cluster) = read.cluster(cluster_id)? else {
            return Ok(());
        };
        let networks = read.cluster_networks(cluster_id)?;
        let members: Vec<Member> = read
            .cluster_nodes(cluster_id)?
            .into_iter()
            .map(|n| Member {
                id: n.id,
                roles: n.roles.clone(),
            })
            .collect();
        let roles = read.release_value(cluster.release_id, "roles_metadata")?;
        let network_roles = read.release_value(cluster.release_id, "network_roles_metadata")?;
        let settings = read.cluster_settings(cluster_id)?;
        let wanted = alloc::wanted(&networks, &members, &roles, &settings, &network_roles);
        let existing = read.addresses(cluster_id)?;
        let taken = read
            .foreign_addresses(cluster_id)?
            .into_iter()
            .filter_map(|(net, ip)| Ip::parse(&ip).ok().map(|ip| (net, ip)))
            .collect();
        let changes = alloc::allocate(&networks, &existing, &wanted, &taken).map_err(|e| {
            StoreError::Invalid {
                what: "network configuration",
                fields: vec![crate::model::FieldError {
                    field: "networks".to_string(),
                    message: e,
                }],
            }
        })?;
        for id in &changes.drop {
            self.conn
                .execute("DELETE FROM ip_addrs WHERE id = ?1", [id])?;
        }
        for a in &changes.add {
            self.insert_address(cluster_id, a)?;
        }
        Ok(())
    }

    fn insert_address(&self, cluster_id: i64, a: &Address) -> Result<i64> {
        let (node, vip, namespace) = match &a.owner {
            Owner::Node(n) => (Some(*n), None, None),
            Owner::Vip { name, namespace } => (None, Some(name.as_str()), namespace.as_deref()),
        };
        let inserted_id = self.conn.query_row(
            "INSERT INTO ip_addrs
               (network_id, cluster_id, node_id, vip_name, vip_namespace, ip, is_user_defined)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             RETURNING id",
            params![
                a.network_id,
                cluster_id,
                node,
                vip,
                namespace,
                a.ip,
                a.user_defined
            ],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(inserted_id)
    }

    /// An operator's virtual IP (`fuel2 vip create`), or a new address for an existing one
    /// (`vip upload`): kept as given. A taken address is a conflict.
    pub fn set_vip(
        &self,
        cluster_id: i64,
        network_id: i64,
        name: &str,
        namespace: Option<&str>,
        ip: &str,
    ) -> Result<i64> {
        let clash: Option<String> = self
            .conn
            .query_row(
                "SELECT coalesce(vip_name, 'node-' || node_id) FROM ip_addrs
                 WHERE network_id = ?1 AND ip = ?2 AND NOT (cluster_id = ?3 AND vip_name IS ?4)",
                params![network_id, ip, cluster_id, name],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(holder) = clash {
            return Err(StoreError::Conflict(format!(
                "IP address {ip} is already allocated within network {network_id} (to {holder})"
            )));
        }
        self.conn.execute(
            "DELETE FROM ip_addrs WHERE cluster_id = ?1 AND vip_name = ?2",
            params![cluster_id, name],
        )?;
        self.insert_address(
            cluster_id,
            &Address {
                id: 0,
                network_id,
                owner: Owner::Vip {
                    name: name.to_string(),
                    namespace: namespace.map(str::to_string),
                },
                ip: ip.to_string(),
                user_defined: true,
            },
        )
    }

    /// Replace a node's interface assignment (`None`: back to the default).
    pub fn set_node_interfaces(&self, node_id: i64, interfaces: Option<&J>) -> Result<()> {
        match interfaces {
            Some(i) => self.conn.execute(
                "INSERT INTO node_interfaces (node_id, interfaces) VALUES (?1, ?2)
                 ON CONFLICT (node_id) DO UPDATE SET interfaces = excluded.interfaces",
                params![node_id, i.to_string()],
            )?,
            None => self
                .conn
                .execute("DELETE FROM node_interfaces WHERE node_id = ?1", [node_id])?,
        };
        Ok(())
    }

    /// A node leaves its environment: its addresses are freed and its interfaces go back to
    /// the default assignment.
    pub(super) fn forget_node_networks(&self, node_id: i64) -> Result<()> {
        self.conn
            .execute("DELETE FROM ip_addrs WHERE node_id = ?1", [node_id])?;
        self.set_node_interfaces(node_id, None)
    }
}
