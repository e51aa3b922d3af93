//! The servers' baseboard management controllers (BMCs): how the master switches a node on and
//! off, chooses what it boots once, and changes its BIOS settings, RAID volumes and firmware, as
//! Ironic's power, management, bios, raid and firmware interfaces do.
//!
//! This module is an edge: it talks to BMCs over the network (Redfish over HTTPS with
//! `redfish.rs`, IPMI 2.0 through Debian's `ipmitool` with `ipmi.rs`). What a node's BMC is
//! (driver, address, credentials) is [`Endpoint`]; the credentials are kept encrypted in the
//! store by `vault.rs`. Every operation is a method of [`Bmc`], blocking, bounded by the
//! endpoint's timeout; a driver that cannot do something answers [`BmcError::Unsupported`]
//! before it changes anything. `sync.rs` keeps each node's power state in the store (bounded
//! concurrency, backoff for unreachable BMCs, sessions kept between sweeps by `sessions.rs`); `runner.rs` runs the master's deploy steps
//! (`bios.apply_configuration`, `raid.*`, `management.update_firmware`, the power steps)
//! against a node's BMC.

pub mod actions;
pub mod ipmi;
pub mod pool;
pub mod redfish;
pub mod runner;
pub mod sessions;
pub mod sync;
pub mod vault;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::engine::raid::Drive;
use crate::engine::raid::RaidPlan;

/// Which protocol a node's BMC speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    Redfish,
    Ipmi,
}

impl Driver {
    pub const ALL: [Driver; 2] = [Driver::Redfish, Driver::Ipmi];

    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Redfish => "redfish",
            Driver::Ipmi => "ipmi",
        }
    }

    pub fn parse(s: &str) -> Option<Driver> {
        Driver::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything needed to reach one BMC. The password is plain here, in memory only; the store
/// keeps it encrypted and the API never returns it.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub driver: Driver,
    /// Redfish: a URL, `https://host[:port]` (the service root is `/redfish/v1/`), optionally
    /// with the path of one system (`https://host/redfish/v1/Systems/1`) when the BMC manages
    /// several; a bare `host[:port]` means `https://host[:port]`.
    /// IPMI: `host` or `host:port` (UDP, default 623).
    pub address: String,
    pub username: String,
    pub password: String,
    /// Redfish over HTTPS: check the BMC's certificate against the system's roots (Ironic's
    /// `redfish_verify_ca`). Most BMCs ship self-signed certificates, so off by default.
    pub verify_tls: bool,
    /// How long one request may take, connect to last byte.
    pub timeout: Duration,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("driver", &self.driver)
            .field("address", &self.address)
            .field("username", &self.username)
            .field("password", &"***")
            .field("verify_tls", &self.verify_tls)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A node's power state as its BMC reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerState {
    On,
    Off,
    PoweringOn,
    PoweringOff,
}

impl PowerState {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerState::On => "on",
            PowerState::Off => "off",
            PowerState::PoweringOn => "powering_on",
            PowerState::PoweringOff => "powering_off",
        }
    }

    pub fn parse(s: &str) -> Option<PowerState> {
        [
            PowerState::On,
            PowerState::Off,
            PowerState::PoweringOn,
            PowerState::PoweringOff,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }

    /// Whether a reading `read`, taken `age` seconds after this state was recorded, only says
    /// that a change an action started has not shown yet: this is `powering_off` (or
    /// `powering_on`), the BMC still says `on` (`off`), and less than [`SETTLE_S`] have passed.
    /// Such a reading must not undo the action's record; after [`SETTLE_S`] the BMC's word wins
    /// (an OS that ignored a graceful shutdown is still on).
    pub fn still_leaving(self, read: PowerState, age: i64) -> bool {
        let leaving = matches!(
            (self, read),
            (PowerState::PoweringOff, PowerState::On) | (PowerState::PoweringOn, PowerState::Off)
        );
        leaving && age < SETTLE_S
    }
}

/// How long a power change an action started outranks readings of the state it leaves: BMCs
/// apply a reset seconds after accepting it (sushy-tools' fake driver 1 to 11 s), and a
/// graceful shutdown takes the OS its time.
pub const SETTLE_S: i64 = 120;
/// How soon a BMC whose change has not shown yet is read again.
pub const SETTLE_RECHECK_S: i64 = 5;

/// What an operator or a deployment asks of a node's power.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerAction {
    /// Power on (nothing if on).
    On,
    /// Hard power off (Redfish `ForceOff`, `ipmitool chassis power off`).
    Off,
    /// Ask the OS to shut down (Redfish `GracefulShutdown`, ACPI: `chassis power soft`).
    SoftOff,
    /// Power-cycle: off then on, or on when off (Redfish `ForceRestart` or `PowerCycle`, or
    /// `ForceOff` then `On` when the BMC allows neither; `chassis power cycle`/`on`).
    Reboot,
}

impl PowerAction {
    pub const ALL: [PowerAction; 4] = [
        PowerAction::On,
        PowerAction::Off,
        PowerAction::SoftOff,
        PowerAction::Reboot,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::On => "on",
            PowerAction::Off => "off",
            PowerAction::SoftOff => "soft_off",
            PowerAction::Reboot => "reboot",
        }
    }

    pub fn parse(s: &str) -> Option<PowerAction> {
        PowerAction::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// A device to boot from at the next boot only (Redfish `BootSourceOverrideEnabled: Once`,
/// `ipmitool chassis bootdev ... options=...` without `persistent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BootDevice {
    Pxe,
    Disk,
}

impl BootDevice {
    pub fn as_str(self) -> &'static str {
        match self {
            BootDevice::Pxe => "pxe",
            BootDevice::Disk => "disk",
        }
    }
}

/// What a BMC can do beyond power and boot device, learned from it (Redfish: which resources
/// the system links to) so a step it cannot run fails before anything changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub bios: bool,
    pub raid: bool,
    pub firmware: bool,
}

/// A logical volume a BMC reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub id: String,
    pub name: String,
    pub raid_type: Option<String>,
    pub capacity_bytes: Option<u64>,
}

/// Why a BMC operation failed. Every variant names the BMC's address, so a message read on its
/// own (a node's history, a step's error) says which machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BmcError {
    /// No connection, a TLS failure, or no answer within the timeout.
    #[error("BMC {address} is unreachable: {reason}")]
    Unreachable { address: String, reason: String },
    /// 401/403, a refused session, or ipmitool's "Unable to establish IPMI v2 / RMCP+ session".
    #[error("BMC {address} refused the credentials for user {username:?}")]
    Credentials { address: String, username: String },
    /// An answer stoker cannot read: HTML where JSON was asked for, a missing required field,
    /// output ipmitool does not give.
    #[error("BMC {address} gave an answer stoker cannot read: {what}")]
    Protocol { address: String, what: String },
    /// The BMC refused the request (4xx/5xx with its Redfish message, ipmitool's error).
    #[error("BMC {address} refused {request}: {message}")]
    Refused {
        address: String,
        request: String,
        message: String,
    },
    /// The BMC does not offer this (no Bios resource, IPMI asked for RAID, a reset type not
    /// among its allowed values); nothing was changed.
    #[error("BMC {address} cannot {what}")]
    Unsupported { address: String, what: String },
    /// The request itself is wrong for this BMC (an unknown BIOS attribute, a layout larger
    /// than the disks); nothing was changed.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// A long operation (a firmware update's task) ended badly or did not end in time.
    #[error("BMC {address}: {message}")]
    Failed { address: String, message: String },
}

/// One line of progress from a long operation (a firmware update's task state and percent),
/// shown as the step's output.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// A connection to one BMC. Blocking; each call is bounded by the endpoint's timeout (a
/// firmware update's wait by its own argument). A driver answers [`BmcError::Unsupported`] for
/// what it cannot do, before sending anything that changes the machine.
pub trait Bmc: Send {
    fn power_state(&mut self) -> Result<PowerState, BmcError>;
    fn power(&mut self, action: PowerAction) -> Result<(), BmcError>;
    /// Boot from `device` at the next boot only.
    fn boot_once(&mut self, device: BootDevice) -> Result<(), BmcError>;
    fn capabilities(&mut self) -> Result<Capabilities, BmcError>;
    /// The BIOS attributes as they are now.
    fn bios(&mut self) -> Result<Map<String, Value>, BmcError>;
    /// Stage `settings` (applied at the next boot on real hardware). Every name must be an
    /// existing attribute, else [`BmcError::Invalid`] naming it, and nothing is sent.
    fn apply_bios(&mut self, settings: &Map<String, Value>) -> Result<(), BmcError>;
    fn drives(&mut self) -> Result<Vec<Drive>, BmcError>;
    fn volumes(&mut self) -> Result<Vec<Volume>, BmcError>;
    /// Create the volumes of a plan made by `engine::raid::plan` over [`Bmc::drives`].
    fn create_volumes(&mut self, plan: &RaidPlan) -> Result<Vec<Volume>, BmcError>;
    /// Delete every logical volume; returns how many.
    fn delete_volumes(&mut self) -> Result<usize, BmcError>;
    /// Redfish `UpdateService.SimpleUpdate` with `image_url`, then follow the task monitor
    /// until it ends or `wait` passes, reporting progress lines.
    fn update_firmware(
        &mut self,
        image_url: &str,
        wait: Duration,
        progress: Progress<'_>,
    ) -> Result<String, BmcError>;
    /// About to be kept idle until the next use ([`sessions`]): close the connections, keep
    /// the login. Nothing to do for a driver that holds none.
    fn park(&mut self) {}
    /// Forget the login without logging out (the BMC does not answer, or there is no time
    /// left): dropping the value then sends nothing. The BMC expires the session itself.
    fn abandon(&mut self) {}
}

/// A connection for `endpoint` with its driver.
pub fn connect(endpoint: &Endpoint) -> Box<dyn Bmc> {
    match endpoint.driver {
        Driver::Redfish => Box::new(redfish::Redfish::new(endpoint.clone())),
        Driver::Ipmi => Box::new(ipmi::Ipmi::new(endpoint.clone())),
    }
}
