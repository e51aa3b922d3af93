//! The Redfish driver: a node's BMC over Redfish (DMTF DSP0266), as Ironic's `redfish` hardware
//! type does it through sushy. [`Redfish`] implements [`Bmc`] for one endpoint.
//!
//! A connection is made on the first call and kept by the `Redfish` value: the service root
//! read, a session made (or Basic auth when the BMC has no SessionService, as sushy-tools), the
//! system found (the address's path, else the only member of `Systems`). Everything past the
//! service root is reached through the `@odata.id` links the BMC gives, never through paths
//! written here, because vendors place resources differently. Dropping the value deletes the
//! session.
//!
//! The files split by idea: `http.rs` (address, login, answers and errors), `tls.rs` (the
//! agent and its certificate checks), `system.rs` (power and boot device), `bios.rs`,
//! `storage.rs` (drives and RAID volumes), `update.rs` (firmware) and `task.rs` (following a
//! long operation's task monitor).

mod bios;
mod http;
mod storage;
mod system;
mod task;
pub(crate) mod tls;
mod update;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{
    Bmc, BmcError, BootDevice, Capabilities, Drive, Endpoint, PowerAction, PowerState, Progress,
    Volume,
};
use crate::engine::raid::RaidPlan;
use http::{Base, Client};

/// The most members read from one collection (all its pages), and the most drives or volumes
/// walked over all storage: a hostile BMC must not keep the daemon walking.
const MAX_MEMBERS: usize = 1024;
/// The most pages (`Members@odata.nextLink`) of one collection followed.
const MAX_PAGES: usize = 64;

/// A node's BMC over Redfish.
pub struct Redfish {
    endpoint: Endpoint,
    poll_interval: Duration,
    conn: Option<Conn>,
}

impl Redfish {
    pub fn new(endpoint: Endpoint) -> Redfish {
        Redfish {
            endpoint,
            poll_interval: Duration::from_secs(1),
            conn: None,
        }
    }

    /// How often a task monitor or a power change is polled (1 s; tests go faster).
    pub fn with_poll_interval(mut self, every: Duration) -> Redfish {
        self.poll_interval = every;
        if let Some(c) = &mut self.conn {
            c.poll_interval = every;
        }
        self
    }

    /// The connection, made on first use and kept.
    fn conn(&mut self) -> Result<&mut Conn, BmcError> {
        let conn = match self.conn.take() {
            Some(c) => c,
            None => Conn::open(&self.endpoint, self.poll_interval)?,
        };
        Ok(self.conn.insert(conn))
    }
}

/// One logged-in connection and what was learned navigating.
struct Conn {
    client: Client,
    /// The service root's `Systems` and `UpdateService` links as the BMC wrote them (checked
    /// when used); the root itself is not kept, so a parked connection stays small.
    root_systems: Option<String>,
    root_update_service: Option<String>,
    /// The system's `@odata.id`.
    system: String,
    /// The system document read while connecting, given to the first reader instead of
    /// fetching it again (a power-state sweep then costs one GET of it, not two).
    fresh: Option<Value>,
    /// Links of the system document read once (`Bios`, `Storage`): they do not move.
    links: BTreeMap<&'static str, Option<String>>,
    /// The UpdateService's SimpleUpdate (target, action), once looked for.
    simple_update: Option<Option<(String, Value)>>,
    poll_interval: Duration,
    /// The endpoint's timeout, also the bound of waiting for a power change.
    timeout: Duration,
}

impl Conn {
    fn open(endpoint: &Endpoint, poll_interval: Duration) -> Result<Conn, BmcError> {
        let base: Base = http::parse_address(&endpoint.address).map_err(|m| BmcError::Invalid {
            field: "address".into(),
            message: m,
        })?;
        let (client, root) = Client::connect(endpoint, &base)?;
        let link = |key: &str| root[key]["@odata.id"].as_str().map(str::to_string);
        let mut conn = Conn {
            client,
            root_systems: link("Systems"),
            root_update_service: link("UpdateService"),
            system: String::new(),
            fresh: None,
            links: BTreeMap::new(),
            simple_update: None,
            poll_interval,
            timeout: endpoint.timeout,
        };
        let given = base.system.clone();
        let path = match given {
            Some(p) => p,
            None => conn.only_system()?,
        };
        // The system's own @odata.id from here on: a path by name may be an alias.
        let doc = conn.client.get(&path)?;
        conn.system = match doc["@odata.id"].as_str() {
            Some(id) => conn.client.path(id)?,
            None => path,
        };
        conn.fresh = Some(doc);
        Ok(conn)
    }

    /// The one system of the service; several are refused naming them.
    fn only_system(&mut self) -> Result<String, BmcError> {
        let Some(systems) = self.root_link(self.root_systems.clone())? else {
            return Err(self
                .client
                .protocol("the service root links no Systems collection"));
        };
        let members = self.members(&systems)?;
        match members.as_slice() {
            [] => Err(self.client.protocol(format!("{systems} has no members"))),
            [one] => Ok(one.clone()),
            several => Err(BmcError::Invalid {
                field: "address".into(),
                message: format!(
                    "BMC {} manages {} systems; add the path of one to the address: {}",
                    self.client.address(),
                    several.len(),
                    several
                        .iter()
                        .take(16)
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    /// A link kept from the service root as a path of the BMC.
    fn root_link(&self, link: Option<String>) -> Result<Option<String>, BmcError> {
        link.map(|l| self.client.path(&l)).transpose()
    }

    /// `doc[key]["@odata.id"]` as a path of the BMC, when the document links it.
    fn link_of(&self, doc: &Value, key: &str) -> Result<Option<String>, BmcError> {
        match doc[key]["@odata.id"].as_str() {
            Some(l) => self.client.path(l).map(Some),
            None => Ok(None),
        }
    }

    fn system_doc(&mut self) -> Result<Value, BmcError> {
        if let Some(doc) = self.fresh.take() {
            return Ok(doc);
        }
        let path = self.system.clone();
        self.client.get(&path)
    }

    /// The system's link `key` (`Bios`, `Storage`), read from its document once.
    fn system_link(&mut self, key: &'static str) -> Result<Option<String>, BmcError> {
        if let Some(known) = self.links.get(key) {
            return Ok(known.clone());
        }
        let doc = self.system_doc()?;
        let link = self.link_of(&doc, key)?;
        self.links.insert(key, link.clone());
        Ok(link)
    }

    /// The members of a collection, all pages, at most [`MAX_MEMBERS`].
    fn members(&mut self, collection: &str) -> Result<Vec<String>, BmcError> {
        let mut out = Vec::new();
        let mut page = Some(collection.to_string());
        let mut pages = 0;
        while let Some(path) = page.take() {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(self.client.protocol(format!(
                    "{collection} has more than {MAX_PAGES} pages of members"
                )));
            }
            let doc = self.client.get(&path)?;
            let Some(members) = doc["Members"].as_array() else {
                return Err(self
                    .client
                    .protocol(format!("{path} is not a collection (no Members)")));
            };
            if out.len() + members.len() > MAX_MEMBERS {
                return Err(self
                    .client
                    .protocol(format!("{collection} has more than {MAX_MEMBERS} members")));
            }
            for m in members {
                let Some(id) = m["@odata.id"].as_str() else {
                    return Err(self
                        .client
                        .protocol(format!("a member of {path} has no @odata.id")));
                };
                out.push(self.client.path(id)?);
            }
            if let Some(next) = doc["Members@odata.nextLink"].as_str() {
                page = Some(self.client.path(next)?);
            }
        }
        Ok(out)
    }

    fn capabilities(&mut self) -> Result<Capabilities, BmcError> {
        Ok(Capabilities {
            bios: self.system_link("Bios")?.is_some(),
            raid: self.can_raid()?,
            firmware: self.can_update()?,
        })
    }
}

/// A refusal means the BMC cannot do it; other errors (unreachable, credentials) stay errors.
fn refused_is_no(result: Result<bool, BmcError>) -> Result<bool, BmcError> {
    match result {
        Err(BmcError::Refused { .. }) => Ok(false),
        other => other,
    }
}

impl Bmc for Redfish {
    fn power_state(&mut self) -> Result<PowerState, BmcError> {
        self.conn()?.power_state()
    }

    fn power(&mut self, action: PowerAction) -> Result<(), BmcError> {
        self.conn()?.power(action)
    }

    fn boot_once(&mut self, device: BootDevice) -> Result<(), BmcError> {
        self.conn()?.boot_once(device)
    }

    fn capabilities(&mut self) -> Result<Capabilities, BmcError> {
        self.conn()?.capabilities()
    }

    fn bios(&mut self) -> Result<Map<String, Value>, BmcError> {
        self.conn()?.bios()
    }

    fn apply_bios(&mut self, settings: &Map<String, Value>) -> Result<(), BmcError> {
        self.conn()?.apply_bios(settings)
    }

    fn drives(&mut self) -> Result<Vec<Drive>, BmcError> {
        self.conn()?.drives()
    }

    fn volumes(&mut self) -> Result<Vec<Volume>, BmcError> {
        Ok(self
            .conn()?
            .volumes()?
            .into_iter()
            .map(|(v, _)| v)
            .collect())
    }

    fn create_volumes(&mut self, plan: &RaidPlan) -> Result<Vec<Volume>, BmcError> {
        self.conn()?.create_volumes(plan)
    }

    fn delete_volumes(&mut self) -> Result<usize, BmcError> {
        self.conn()?.delete_volumes()
    }

    fn update_firmware(
        &mut self,
        image_url: &str,
        wait: Duration,
        progress: Progress<'_>,
    ) -> Result<String, BmcError> {
        self.conn()?.update_firmware(image_url, wait, progress)
    }

    fn park(&mut self) {
        if let Some(c) = &mut self.conn {
            c.fresh = None;
            c.client.close_connections();
        }
    }

    fn abandon(&mut self) {
        if let Some(c) = &mut self.conn {
            c.client.abandon();
        }
    }
}
