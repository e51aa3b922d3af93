//! What operators and deployments do through nodes' BMCs, with the store around each call: a
//! BMC set from an API body (checked by field, the password sealed), power actions on one
//! node or many (bounded concurrency, a result per node), each recorded in the node's history
//! and in the audit log, and the power state read back. Blocking: callers on the async
//! runtime run these on a blocking thread.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::sessions::Sessions;
use super::vault::{Vault, VaultError};
use super::{BmcError, BootDevice, Driver, Endpoint, PowerAction, PowerState};
use crate::model::{FieldError, NodeId};
use crate::store::{AuditEntry, BmcWrite, Store, StoreError, StoredBmc, WriteTxn};

/// Why a BMC action could not even be tried, or what the BMC said.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("node {0} has no BMC; set one (driver, address, username, password) first")]
    NoBmc(NodeId),
    #[error(
        "node {0}'s BMC was reported by its agent but has no credentials; set its username and \
         password"
    )]
    NoCredentials(NodeId),
    #[error(transparent)]
    Vault(#[from] VaultError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Bmc(#[from] BmcError),
}

/// An operator's power request: a power action, or a boot device once and then power on or
/// power-cycle (what `stoker node power pxe` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Act {
    On,
    Off,
    SoftOff,
    Reboot,
    /// Boot from the network once, then on (or reboot when on).
    Pxe,
    /// Boot from the disk once, then on (or reboot when on).
    Disk,
}

impl Act {
    pub const ALL: [Act; 6] = [
        Act::On,
        Act::Off,
        Act::SoftOff,
        Act::Reboot,
        Act::Pxe,
        Act::Disk,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Act::On => "on",
            Act::Off => "off",
            Act::SoftOff => "soft_off",
            Act::Reboot => "reboot",
            Act::Pxe => "pxe",
            Act::Disk => "disk",
        }
    }

    pub fn parse(s: &str) -> Option<Act> {
        Act::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The state it leaves the machine in once the BMC has done it.
    fn target(self) -> PowerState {
        match self {
            Act::Off | Act::SoftOff => PowerState::Off,
            _ => PowerState::On,
        }
    }
}

/// What one node's action gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActResult {
    pub node: NodeId,
    pub action: &'static str,
    pub ok: bool,
    /// The power state read after the action (or the one it is moving to).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_state: Option<PowerState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The master's BMC access: the credentials key, and how long and how many at once.
#[derive(Debug)]
pub struct Bmcs {
    vault: Vault,
    pub timeout: Duration,
    pub workers: usize,
    /// Seconds between two power readings of one BMC.
    pub interval: u64,
    /// Whether nodes leaving an environment (deleted or reset) are powered off by default.
    pub power_off_released: bool,
    /// The power sync's logged-in connections, kept between sweeps.
    pub sessions: Sessions,
}

/// The most BMC connections kept between sweeps (as many as one sweep reads).
pub const KEPT_SESSIONS: usize = 100_000;

const MAX_USER: usize = 64;
const MAX_PASSWORD: usize = 256;
const MAX_ADDRESS: usize = 512;

/// A BMC from an API body, checked; the password still plain.
#[derive(Debug, Clone)]
pub struct BmcInput {
    pub driver: Driver,
    pub address: String,
    pub username: String,
    pub password: Option<String>,
    pub verify_tls: bool,
}

fn problem(field: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// Whether `host` is a host name or an IP address (IPv6 in brackets when a port follows).
fn host_ok(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !host.is_empty()
        && host.len() <= 253
        && !host.starts_with('-')
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
}

/// `host[:port]` with a valid host and port.
fn host_port_ok(s: &str) -> bool {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.ends_with(']') => (h, Some(p)),
        _ => (s, None),
    };
    host_ok(host) && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

/// Check an address for a driver: Redfish `http(s)://host[:port][/redfish/v1/Systems/ID]`
/// or `host[:port]`; IPMI `host[:port]`.
pub fn check_address(driver: Driver, address: &str) -> Result<(), String> {
    if address.len() > MAX_ADDRESS || address.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "expected an address of at most {MAX_ADDRESS} characters, without spaces"
        ));
    }
    match driver {
        Driver::Ipmi => host_port_ok(address).then_some(()).ok_or_else(|| {
            "expected host or host:port (IPMI over LAN, UDP 623 by default)".to_string()
        }),
        Driver::Redfish => {
            let rest = address
                .strip_prefix("https://")
                .or_else(|| address.strip_prefix("http://"))
                .unwrap_or(address);
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            };
            if !host_port_ok(authority) {
                return Err(
                    "expected https://host[:port], optionally with a system's path \
                            (/redfish/v1/Systems/ID)"
                        .to_string(),
                );
            }
            if !path.is_empty() && path != "/" && !path.starts_with("/redfish/v1/") {
                return Err(format!("the path {path:?} is not under /redfish/v1/"));
            }
            Ok(())
        }
    }
}

/// A BMC from an API body: `driver`, `address`, `username`, `password` (absent: keep the
/// stored one), `verify_tls`. Every bad field named; unknown fields refused.
pub fn parse_input(body: &Value, has_password: bool) -> Result<BmcInput, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(obj) = body.as_object() else {
        return Err(vec![problem("", "expected a JSON object")]);
    };
    const KEYS: [&str; 5] = ["driver", "address", "username", "password", "verify_tls"];
    for k in obj.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        errors.push(problem(
            k,
            format!("unknown field; the fields are: {}", KEYS.join(", ")),
        ));
    }
    let driver = match obj.get("driver").and_then(Value::as_str) {
        Some(d) => Driver::parse(d).or_else(|| {
            errors.push(problem(
                "driver",
                format!("{d:?} is not one of: redfish, ipmi"),
            ));
            None
        }),
        None => {
            errors.push(problem("driver", "required: redfish or ipmi"));
            None
        }
    };
    let address = match obj.get("address").and_then(Value::as_str) {
        Some(a) => {
            if let Some(d) = driver
                && let Err(e) = check_address(d, a)
            {
                errors.push(problem("address", e));
            }
            a.to_string()
        }
        None => {
            errors.push(problem("address", "required"));
            String::new()
        }
    };
    let username = match obj.get("username") {
        Some(Value::String(u))
            if !u.is_empty()
                && u.len() <= MAX_USER
                && !u.starts_with('-')
                && !u.chars().any(char::is_control) =>
        {
            u.clone()
        }
        Some(_) => {
            errors.push(problem(
                "username",
                format!("expected a name of 1 to {MAX_USER} characters, not starting with '-'"),
            ));
            String::new()
        }
        None => {
            errors.push(problem("username", "required"));
            String::new()
        }
    };
    let password = match obj.get("password") {
        Some(Value::String(p)) if p.len() <= MAX_PASSWORD && !p.contains('\0') => Some(p.clone()),
        Some(_) => {
            errors.push(problem(
                "password",
                format!("expected a string of at most {MAX_PASSWORD} bytes"),
            ));
            None
        }
        None if has_password => None,
        None => {
            errors.push(problem("password", "required"));
            None
        }
    };
    let verify_tls = match obj.get("verify_tls") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            errors.push(problem("verify_tls", "expected a boolean"));
            false
        }
    };
    match (driver, errors.is_empty()) {
        (Some(driver), true) => Ok(BmcInput {
            driver,
            address,
            username,
            password,
            verify_tls,
        }),
        _ => Err(errors),
    }
}

/// The audit log's line for a BMC action of `actor` on `node`.
fn audit_entry(
    actor: &str,
    node: NodeId,
    what: &str,
    ok: bool,
    detail: String,
    now: i64,
) -> AuditEntry {
    AuditEntry {
        id: 0,
        at: now,
        actor: actor.to_string(),
        role: "bmc".to_string(),
        source: "master".to_string(),
        method: "BMC".to_string(),
        path: format!("/api/v1/nodes/{node}/{what}"),
        status: if ok { 200 } else { 502 },
        detail,
    }
}

impl Bmcs {
    pub fn new(
        data_dir: &std::path::Path,
        cfg: &crate::config::BmcConfig,
    ) -> Result<Bmcs, VaultError> {
        Ok(Bmcs {
            vault: Vault::open(data_dir)?,
            timeout: Duration::from_secs(cfg.timeout),
            workers: cfg.sync_workers,
            interval: cfg.sync_interval,
            power_off_released: cfg.power_off_released,
            sessions: Sessions::new(KEPT_SESSIONS),
        })
    }

    /// Store node `node`'s BMC from an API body, in one transaction.
    pub fn set(
        &self,
        store: &Store,
        node: NodeId,
        body: &Value,
        now: i64,
    ) -> Result<StoredBmc, StoreError> {
        store.write(|tx| self.set_in(tx, node, body, now))
    }

    /// Node `node`'s BMC from an API body, inside `tx`: checked against what is stored (a
    /// password may be left out once one is), sealed, written and read back. A bad body is
    /// [`StoreError::Invalid`], by field; the transaction is then rolled back.
    pub fn set_in(
        &self,
        tx: &WriteTxn<'_>,
        node: NodeId,
        body: &Value,
        now: i64,
    ) -> Result<StoredBmc, StoreError> {
        let read = tx.read();
        read.existing_node(node)?;
        let has_password = read.bmc(node)?.as_ref().is_some_and(StoredBmc::usable);
        let input = parse_input(body, has_password).map_err(|fields| StoreError::Invalid {
            what: "BMC",
            fields,
        })?;
        let sealed = match &input.password {
            // Sealing fails only without randomness; nothing is written then.
            Some(p) => Some(
                self.vault
                    .seal(node, p)
                    .map_err(|e| StoreError::Commit(e.to_string()))?,
            ),
            None => None,
        };
        let w = BmcWrite {
            driver: input.driver,
            address: input.address,
            username: input.username,
            sealed_password: sealed,
            verify_tls: input.verify_tls,
        };
        tx.set_bmc(node, &w, now)?;
        read.bmc(node)?.ok_or_else(|| StoreError::NotFound {
            entity: "BMC of node",
            id: node.to_string(),
        })
    }

    /// How to reach a stored BMC.
    pub fn endpoint(&self, b: &StoredBmc) -> Result<Endpoint, ActionError> {
        let sealed = b
            .sealed_password
            .as_ref()
            .ok_or(ActionError::NoCredentials(b.node_id))?;
        Ok(Endpoint {
            driver: b.driver,
            address: b.address.clone(),
            username: b.username.clone(),
            password: self.vault.open_for(b.node_id, sealed)?,
            verify_tls: b.verify_tls,
            timeout: self.timeout,
        })
    }

    /// Node `node`'s endpoint from the store.
    pub fn endpoint_of(&self, store: &Store, node: NodeId) -> Result<Endpoint, ActionError> {
        let b = store
            .read(|r| r.bmc(node))?
            .ok_or(ActionError::NoBmc(node))?;
        self.endpoint(&b)
    }

    /// Do `act` on `node` through its BMC; recorded in its history and the audit log as done
    /// by `actor`, and its power state noted (read back, or the one it is moving to).
    pub fn act(&self, store: &Store, node: NodeId, act: Act, actor: &str) -> ActResult {
        let now = crate::clock::now();
        let outcome = self.try_act(store, node, act);
        let (ok, power_state, error) = match &outcome {
            Ok(p) => (true, Some(*p), None),
            Err(e) => (false, None, Some(e.to_string())),
        };
        let message = match &outcome {
            Ok(p) => format!(
                "power {} by {actor}: done, power {}",
                act.as_str(),
                p.as_str()
            ),
            Err(e) => format!("power {} by {actor} failed: {e}", act.as_str()),
        };
        let kind = if ok { "power.action" } else { "power.failed" };
        let next = now
            + if ok {
                5
            } else {
                i64::try_from(self.interval).unwrap_or(60)
            };
        // A BMC that cannot be reached or refuses the credentials is flagged on its node at
        // once, as the sync would on its next round; a refused request is not such a sign.
        let flag = match &outcome {
            Err(ActionError::Bmc(
                e @ (BmcError::Unreachable { .. } | BmcError::Credentials { .. }),
            )) => Some(e.to_string()),
            _ => None,
        };
        let entry = audit_entry(actor, node, "power", ok, message.clone(), now);
        let recorded = store.write(|tx| {
            tx.add_history(now, Some(node), kind, &message)?;
            tx.add_audit(&entry)?;
            match (power_state, &flag) {
                (Some(p), _) => tx.record_power(node, Ok(p), now, next)?,
                (None, Some(why)) => tx.record_power(node, Err(why), now, next)?,
                (None, None) => {}
            }
            Ok(())
        });
        if let Err(e) = recorded {
            tracing::warn!(node, error = %e, "cannot record the power action");
        }
        if ok {
            tracing::info!(node, action = act.as_str(), actor, "power action done");
        } else {
            tracing::warn!(
                node,
                action = act.as_str(),
                actor,
                error = error.as_deref().unwrap_or(""),
                "power action failed"
            );
        }
        ActResult {
            node,
            action: act.as_str(),
            ok,
            power_state,
            error,
        }
    }

    fn try_act(&self, store: &Store, node: NodeId, act: Act) -> Result<PowerState, ActionError> {
        let endpoint = self.endpoint_of(store, node)?;
        let mut bmc = super::connect(&endpoint);
        match act {
            Act::On => bmc.power(PowerAction::On)?,
            Act::Off => bmc.power(PowerAction::Off)?,
            Act::SoftOff => bmc.power(PowerAction::SoftOff)?,
            Act::Reboot => bmc.power(PowerAction::Reboot)?,
            Act::Pxe | Act::Disk => {
                let device = if act == Act::Pxe {
                    BootDevice::Pxe
                } else {
                    BootDevice::Disk
                };
                bmc.boot_once(device)?;
                let now = bmc.power_state()?;
                bmc.power(if now == PowerState::Off {
                    PowerAction::On
                } else {
                    PowerAction::Reboot
                })?;
            }
        }
        // Many BMCs take seconds to act: what they say now, or where they are going.
        Ok(match bmc.power_state() {
            Ok(p) if p == act.target() => p,
            _ if act.target() == PowerState::On => PowerState::PoweringOn,
            _ => PowerState::PoweringOff,
        })
    }

    /// [`Bmcs::act`] on each of `nodes`, at most `workers` at once; results in `nodes`' order.
    pub fn act_many(
        self: &Arc<Self>,
        store: &Arc<Store>,
        nodes: &[NodeId],
        act: Act,
        actor: &str,
    ) -> Vec<ActResult> {
        super::pool::map(nodes, self.workers, |&node| {
            self.act(store, node, act, actor)
        })
        .0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_is_checked_by_field() {
        let ok = parse_input(
            &json!({"driver": "redfish", "address": "https://10.0.0.5/redfish/v1/Systems/1",
                    "username": "root", "password": "calvin"}),
            false,
        )
        .unwrap();
        assert_eq!(ok.driver, Driver::Redfish);
        let e = parse_input(
            &json!({"driver": "ilo", "address": "x y", "username": "-oProxyCommand", "colour": 1}),
            false,
        )
        .unwrap_err();
        let fields: Vec<_> = e.iter().map(|p| p.field.as_str()).collect();
        for f in ["colour", "driver", "username", "password"] {
            assert!(fields.contains(&f), "{f}: {e:?}");
        }
        let e = parse_input(
            &json!({"driver": "ipmi", "address": "-H evil", "username": "a", "password": "b"}),
            false,
        )
        .unwrap_err();
        assert_eq!(e[0].field, "address");
        // The stored password is kept when none is sent.
        assert!(
            parse_input(
                &json!({"driver": "ipmi", "address": "10.0.0.5:623", "username": "a"}),
                true
            )
            .is_ok()
        );
        assert!(check_address(Driver::Redfish, "https://[fe80::1]:8443").is_ok());
        assert!(check_address(Driver::Redfish, "https://bmc/other").is_err());
        assert!(check_address(Driver::Ipmi, "bmc.example:70000").is_err());
    }
}
