//! Queries on `node_bmcs`: each node's BMC (driver, address, user, the password sealed by
//! `bmc::vault`, whether its TLS certificate is checked, who set it), the power state the
//! background sync last read and, for a BMC that does not answer, the failure, how many in a
//! row and when to try again. Also enrolling a node by its MAC before it ever booted, so its
//! BMC can power it on into discovery.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{ReadTxn, Result, WriteTxn};
use crate::bmc::{Driver, PowerState};
use crate::model::node::{Cpu, Nic, System};
use crate::model::{Inventory, Mac, NodeId};

/// A node's BMC as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredBmc {
    pub node_id: NodeId,
    pub driver: Driver,
    pub address: String,
    pub username: String,
    /// The password sealed by `bmc::vault`; never serialized.
    #[serde(skip)]
    pub sealed_password: Option<Vec<u8>>,
    pub verify_tls: bool,
    /// `operator` (the API, the dashboard, the CLI, enrollment) or `discovered` (the agent
    /// reported the address; no credentials yet).
    pub source: String,
    pub power_state: Option<PowerState>,
    pub power_checked_at: Option<i64>,
    /// Why the last reading failed, while it fails.
    pub power_error: Option<String>,
    pub failures: u32,
    pub next_check_at: i64,
    pub updated_at: i64,
}

impl StoredBmc {
    /// Whether the master can act on it: a password is set (IPMI and Redfish both need one).
    pub fn usable(&self) -> bool {
        self.sealed_password.is_some()
    }
}

const COLUMNS: &str = "node_id, driver, address, username, sealed_password, verify_tls, source,
    power_state, power_checked_at, power_error, failures, next_check_at, updated_at";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredBmc> {
    let driver: String = r.get(1)?;
    let power: Option<String> = r.get(7)?;
    Ok(StoredBmc {
        node_id: r.get(0)?,
        driver: Driver::parse(&driver).unwrap_or(Driver::Redfish),
        address: r.get(2)?,
        username: r.get(3)?,
        sealed_password: r.get(4)?,
        verify_tls: r.get(5)?,
        source: r.get(6)?,
        power_state: power.as_deref().and_then(PowerState::parse),
        power_checked_at: r.get(8)?,
        power_error: r.get(9)?,
        failures: r.get(10)?,
        next_check_at: r.get(11)?,
        updated_at: r.get(12)?,
    })
}

/// A BMC set by an operator. `sealed_password: None` keeps the stored one (a form that
/// changes the address only).
#[derive(Debug, Clone)]
pub struct BmcWrite {
    pub driver: Driver,
    pub address: String,
    pub username: String,
    pub sealed_password: Option<Vec<u8>>,
    pub verify_tls: bool,
}

/// A BMC step as a node's page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MasterRun {
    pub id: i64,
    pub deployment: i64,
    /// The environment the deployment belongs to.
    pub cluster: i64,
    pub step: String,
    pub status: String,
    pub finished_at: Option<i64>,
    pub output_tail: String,
    pub error: Option<String>,
}

impl ReadTxn<'_> {
    /// The master's runs (BMC steps) on `node`, newest first.
    pub fn master_runs_of(&self, node: NodeId, limit: u32) -> Result<Vec<MasterRun>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.id, r.deployment, d.cluster_id, r.interface || '.' || r.step, r.status,
               r.finished_at, r.output_tail, r.error
             FROM step_runs r JOIN deployments d ON d.id = r.deployment
             WHERE r.node_id = ?1 AND r.runs_on = 'master' ORDER BY r.id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![node, limit], |r| {
            Ok(MasterRun {
                id: r.get(0)?,
                deployment: r.get(1)?,
                cluster: r.get(2)?,
                step: r.get(3)?,
                status: r.get(4)?,
                finished_at: r.get(5)?,
                output_tail: r.get(6)?,
                error: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn bmc(&self, node: NodeId) -> Result<Option<StoredBmc>> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM node_bmcs WHERE node_id = ?1"
            ))?
            .query_row([node], row)
            .optional()?)
    }

    /// Every node's BMC, by node id.
    pub fn bmcs(&self) -> Result<Vec<StoredBmc>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM node_bmcs ORDER BY node_id"))?;
        let rows = stmt.query_map([], row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The nodes whose BMC has credentials ([`StoredBmc::usable`]): those the master can
    /// power and run BMC steps on.
    pub fn nodes_with_usable_bmc(&self) -> Result<std::collections::BTreeSet<NodeId>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT node_id FROM node_bmcs WHERE sealed_password IS NOT NULL")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Up to `limit` BMCs with credentials whose power is due to be read at `now`, the most
    /// overdue first.
    pub fn bmcs_due(&self, now: i64, limit: u32) -> Result<Vec<StoredBmc>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM node_bmcs
             WHERE next_check_at <= ?1 AND sealed_password IS NOT NULL
             ORDER BY next_check_at, node_id LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![now, limit], row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

impl WriteTxn<'_> {
    /// Set node `node`'s BMC (an operator's; replaces a discovered one) and read its power at
    /// the next sweep.
    pub fn set_bmc(&self, node: NodeId, w: &BmcWrite, now: i64) -> Result<()> {
        self.read().existing_node(node)?;
        let sealed = match &w.sealed_password {
            Some(s) => Some(s.clone()),
            None => self.read().bmc(node)?.and_then(|b| b.sealed_password),
        };
        self.conn
            .prepare_cached(
                "INSERT INTO node_bmcs (node_id, driver, address, username, sealed_password,
                   verify_tls, source, next_check_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'operator', 0, ?7)
                 ON CONFLICT(node_id) DO UPDATE SET driver = ?2, address = ?3, username = ?4,
                   sealed_password = ?5, verify_tls = ?6, source = 'operator',
                   power_error = NULL, failures = 0, next_check_at = 0, updated_at = ?7",
            )?
            .execute(params![
                node,
                w.driver.as_str(),
                w.address,
                w.username,
                sealed,
                w.verify_tls,
                now
            ])?;
        self.add_history(
            now,
            Some(node),
            "bmc.set",
            &format!("BMC set: {} {} as {:?}", w.driver, w.address, w.username),
        )?;
        Ok(())
    }

    /// Forget node `node`'s BMC; false if it had none.
    pub fn delete_bmc(&self, node: NodeId, now: i64) -> Result<bool> {
        let n = self
            .conn
            .execute("DELETE FROM node_bmcs WHERE node_id = ?1", [node])?;
        if n > 0 {
            self.add_history(now, Some(node), "bmc.removed", "BMC removed")?;
        }
        Ok(n > 0)
    }

    /// The address the node's agent reported: kept when the node has no BMC or only a
    /// discovered one; an operator's is never replaced.
    pub fn learn_bmc(&self, node: NodeId, driver: Driver, address: &str, now: i64) -> Result<()> {
        let n = self
            .conn
            .prepare_cached(
                "INSERT INTO node_bmcs (node_id, driver, address, source, updated_at)
             VALUES (?1, ?2, ?3, 'discovered', ?4)
             ON CONFLICT(node_id) DO UPDATE SET driver = ?2, address = ?3, updated_at = ?4
               WHERE source = 'discovered' AND (driver <> ?2 OR address <> ?3)",
            )?
            .execute(params![node, driver.as_str(), address, now])?;
        if n > 0 {
            self.add_history(
                now,
                Some(node),
                "bmc.discovered",
                &format!("the agent reported a {driver} BMC at {address}; set its credentials"),
            )?;
        }
        Ok(())
    }

    /// What a power reading gave: the state, or why it failed and when to try again. History
    /// gets a line when the state changes and when the BMC stops or starts answering, not on
    /// every sweep. A reading that only says an action's change has not shown yet
    /// ([`PowerState::still_leaving`]) keeps the action's `powering_*` record and is read
    /// again within seconds.
    pub fn record_power(
        &self,
        node: NodeId,
        reading: std::result::Result<PowerState, &str>,
        now: i64,
        next_check_at: i64,
    ) -> Result<()> {
        let Some(before) = self.read().bmc(node)? else {
            return Ok(());
        };
        match reading {
            // An action's change not shown yet: keep its record, look again soon.
            Ok(state)
                if before
                    .power_state
                    .zip(before.power_checked_at)
                    .is_some_and(|(was, at)| was.still_leaving(state, now.saturating_sub(at))) =>
            {
                self.conn
                    .prepare_cached(
                        "UPDATE node_bmcs SET power_error = NULL, failures = 0,
                           next_check_at = MIN(?1, ?2)
                         WHERE node_id = ?3",
                    )?
                    .execute(params![
                        next_check_at,
                        now.saturating_add(crate::bmc::SETTLE_RECHECK_S),
                        node
                    ])?;
                if before.power_error.is_some() {
                    self.add_history(now, Some(node), "bmc.reachable", "BMC answers again")?;
                }
            }
            Ok(state) => {
                self.conn
                    .prepare_cached(
                        "UPDATE node_bmcs SET power_state = ?1, power_checked_at = ?2,
                           power_error = NULL, failures = 0, next_check_at = ?3
                         WHERE node_id = ?4",
                    )?
                    .execute(params![state.as_str(), now, next_check_at, node])?;
                if before.power_error.is_some() {
                    self.add_history(now, Some(node), "bmc.reachable", "BMC answers again")?;
                }
                if before.power_state.is_some_and(|p| p != state) {
                    self.add_history(
                        now,
                        Some(node),
                        "power.changed",
                        &format!(
                            "power is {} (was {})",
                            state.as_str(),
                            before.power_state.map_or("unknown", PowerState::as_str)
                        ),
                    )?;
                }
            }
            Err(why) => {
                self.conn
                    .prepare_cached(
                        "UPDATE node_bmcs SET power_checked_at = ?1, power_error = ?2,
                           failures = failures + 1, next_check_at = ?3
                         WHERE node_id = ?4",
                    )?
                    .execute(params![now, why, next_check_at, node])?;
                if before.power_error.is_none() {
                    self.add_history(now, Some(node), "bmc.unreachable", why)?;
                }
            }
        }
        Ok(())
    }

    /// A node known by its MAC before it booted (Ironic's enroll): in `discover`, approved,
    /// never seen; its first hello from that MAC fills in its inventory.
    pub fn enroll_node(&self, mac: &Mac, name: Option<&str>, now: i64) -> Result<NodeId> {
        let inventory = Inventory {
            interfaces: vec![Nic {
                name: "enrolled".to_string(),
                mac: mac.clone(),
                speed_mbps: None,
                link: None,
            }],
            cpu: Cpu {
                count: 0,
                model: None,
            },
            memory_bytes: 0,
            disks: Vec::new(),
            system: System::default(),
            boot_mode: None,
            bmc: None,
        };
        let name = name.map_or_else(|| super::nodes::default_name(mac), str::to_string);
        let id = self.insert_node(
            mac,
            &name,
            &inventory,
            super::nodes::NewNode {
                now,
                last_seen_at: 0,
                approved: true,
                address: None,
            },
        )?;
        self.replace_macs(id, &inventory)?;
        self.add_history(now, Some(id), "node.enrolled", &format!("enrolled {mac}"))?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_reading_behind_an_action_does_not_undo_it_until_the_change_settles() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("stoker.db")).unwrap();
        let mac: Mac = "52:54:00:00:00:01".parse().unwrap();
        let node = store.write(|tx| tx.enroll_node(&mac, None, 1_000)).unwrap();
        let bmc = BmcWrite {
            driver: Driver::Redfish,
            address: "https://10.0.0.5".into(),
            username: "root".into(),
            sealed_password: Some(vec![1, 2, 3]),
            verify_tls: false,
        };
        let power = |at: i64, read: PowerState, next: i64| {
            store
                .write(|tx| tx.record_power(node, Ok(read), at, next))
                .unwrap();
            store.read(|r| r.bmc(node)).unwrap().unwrap()
        };
        store.write(|tx| tx.set_bmc(node, &bmc, 1_000)).unwrap();
        power(1_000, PowerState::On, 1_060);
        // Powered off by an action; the BMC applies it some seconds later.
        let b = power(1_010, PowerState::PoweringOff, 1_015);
        assert_eq!(b.power_state, Some(PowerState::PoweringOff));
        // A sweep 5 s later still reads On: the record stays, read again within 5 s.
        let b = power(1_015, PowerState::On, 1_075);
        assert_eq!(b.power_state, Some(PowerState::PoweringOff));
        assert_eq!(b.power_checked_at, Some(1_010));
        assert_eq!(b.next_check_at, 1_020);
        // The change shows.
        let b = power(1_020, PowerState::Off, 1_080);
        assert_eq!(b.power_state, Some(PowerState::Off));
        // An action the OS ignored (a graceful shutdown): after SETTLE_S the BMC's word wins.
        power(2_000, PowerState::PoweringOff, 2_005);
        let b = power(2_000 + crate::bmc::SETTLE_S, PowerState::On, 2_200);
        assert_eq!(b.power_state, Some(PowerState::On));
        // A reading of the target or of a third state is news at once.
        power(3_000, PowerState::PoweringOn, 3_005);
        let b = power(3_001, PowerState::On, 3_060);
        assert_eq!(b.power_state, Some(PowerState::On));
    }
}
