//! Nodes as every layer sees them: the validated hardware [`Inventory`] an agent reports, the
//! node's [`NodeStatus`], and the [`Node`] record. Parsing the agent's JSON into these types
//! ([`parse_inventory`], [`RawInventory::validate`]) collects every problem with the path of
//! the field at fault.
//! Plain data only: no storage, no network, no clock (times arrive as Unix seconds).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A MAC address, normalised to lower-case colon-separated hex (`52:54:00:12:34:56`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Mac(String);

impl Mac {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The MAC of six octets (a DHCP packet's `chaddr`), written without a parse.
    pub fn from_octets(octets: [u8; 6]) -> Mac {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(17);
        for (i, b) in octets.iter().enumerate() {
            if i > 0 {
                text.push(':');
            }
            text.push(char::from(HEX[usize::from(b >> 4)]));
            text.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        Mac(text)
    }
}

impl FromStr for Mac {
    type Err = String;

    /// Accepts `aa:bb:cc:dd:ee:ff`, `AA-BB-CC-DD-EE-FF` and `aabb.ccdd.eeff`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Already in the normal form (what the database holds): taken as it is.
        let normal = s.len() == 17
            && s.bytes().enumerate().all(|(i, b)| {
                if i % 3 == 2 {
                    b == b':'
                } else {
                    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
                }
            });
        if normal {
            return Ok(Mac(s.to_string()));
        }
        let hex: String = s
            .trim()
            .chars()
            .filter(|c| !matches!(c, ':' | '-' | '.'))
            .collect();
        if hex.len() != 12 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("{s:?} is not a MAC address"));
        }
        let lower = hex.to_ascii_lowercase();
        let parts: Vec<&str> = (0..6).map(|i| &lower[i * 2..i * 2 + 2]).collect();
        Ok(Mac(parts.join(":")))
    }
}

impl TryFrom<String> for Mac {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Mac> for String {
    fn from(m: Mac) -> String {
        m.0
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a node is in its life. The agent issue adds the transitions; discovery sets `Discover`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    Discover,
    Provisioning,
    Provisioned,
    Deploying,
    Ready,
    Error,
}

impl NodeStatus {
    pub const ALL: [NodeStatus; 6] = [
        NodeStatus::Discover,
        NodeStatus::Provisioning,
        NodeStatus::Provisioned,
        NodeStatus::Deploying,
        NodeStatus::Ready,
        NodeStatus::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Discover => "discover",
            NodeStatus::Provisioning => "provisioning",
            NodeStatus::Provisioned => "provisioned",
            NodeStatus::Deploying => "deploying",
            NodeStatus::Ready => "ready",
            NodeStatus::Error => "error",
        }
    }
}

impl FromStr for NodeStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown node status {s:?}"))
    }
}

impl fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A network interface as the agent saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nic {
    pub name: String,
    pub mac: Mac,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<bool>,
}

/// A block device as the agent saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    pub name: String,
    pub size_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
}

/// The machine's identity from DMI.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct System {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
}

/// CPU summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A validated hardware inventory: at least one NIC, MACs unique, sizes non-negative.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    pub interfaces: Vec<Nic>,
    pub cpu: Cpu,
    pub memory_bytes: u64,
    pub disks: Vec<Disk>,
    #[serde(default)]
    pub system: System,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_mode: Option<String>,
    /// The BMC the agent found on the machine (`ipmitool lan print`, the SMBIOS Redfish host
    /// interface): the master records it as the node's discovered BMC, without credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmc: Option<ReportedBmc>,
}

/// A BMC address an agent reported: its driver (`ipmi`, `redfish`) and an IP address (with
/// a port for Redfish); never a host name, which the master would have to trust.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedBmc {
    pub driver: String,
    pub address: String,
}

impl ReportedBmc {
    /// The report checked: `ipmi` with an IP address, or `redfish` with `https://IP[:port]`.
    pub fn check(driver: &str, address: &str) -> Result<ReportedBmc, String> {
        let ip_port = |s: &str| -> bool {
            s.parse::<core::net::IpAddr>().is_ok() || s.parse::<core::net::SocketAddr>().is_ok()
        };
        let ok = match driver {
            "ipmi" => address.parse::<core::net::IpAddr>().is_ok(),
            "redfish" => address
                .strip_prefix("https://")
                .or_else(|| address.strip_prefix("http://"))
                .is_some_and(ip_port),
            _ => return Err(format!("{driver:?} is not one of: ipmi, redfish")),
        };
        if ok {
            Ok(ReportedBmc {
                driver: driver.to_string(),
                address: address.to_string(),
            })
        } else {
            Err(format!(
                "{address:?} is not an IP address (ipmi) or http(s)://IP[:port] (redfish)"
            ))
        }
    }
}

impl Inventory {
    /// The MAC that identifies the node: the first interface's (`validate` guarantees one).
    pub fn primary_mac(&self) -> Option<&Mac> {
        self.interfaces.first().map(|nic| &nic.mac)
    }

    /// The disks' total size. Saturates: each size is whatever u64 the agent sent, and two
    /// near `u64::MAX` must not overflow (a panic in a debug build, a wrong total otherwise).
    pub fn disk_bytes(&self) -> u64 {
        self.disks
            .iter()
            .fold(0u64, |total, d| total.saturating_add(d.size_bytes))
    }
}

/// The agent's inventory as sent, before validation. Every field is optional here so that a
/// missing one is reported by name rather than as a generic parse error.
#[derive(Debug, Default, Deserialize)]
pub struct RawInventory {
    pub interfaces: Option<Vec<RawNic>>,
    pub cpu: Option<RawCpu>,
    pub memory_bytes: Option<serde_json::Value>,
    pub disks: Option<Vec<RawDisk>>,
    pub system: Option<System>,
    pub boot_mode: Option<String>,
    pub bmc: Option<RawBmc>,
}

#[derive(Debug, Default, Deserialize)]
pub struct RawBmc {
    pub driver: Option<String>,
    pub address: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct RawNic {
    pub name: Option<String>,
    pub mac: Option<String>,
    pub speed_mbps: Option<u64>,
    pub link: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
pub struct RawCpu {
    pub count: Option<serde_json::Value>,
    pub model: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct RawDisk {
    pub name: Option<String>,
    pub size_bytes: Option<serde_json::Value>,
    pub model: Option<String>,
    pub serial: Option<String>,
}

/// One problem in an input document: the dotted path of the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl FieldError {
    /// Several problems as one message: `a.b: why; c: why`.
    pub fn joined(errors: &[FieldError]) -> String {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn count(value: &Option<serde_json::Value>, field: &str, errors: &mut Vec<FieldError>) -> u64 {
    match value {
        None => {
            errors.push(FieldError {
                field: field.to_string(),
                message: "is required".to_string(),
            });
            0
        }
        Some(v) => match v.as_u64() {
            Some(n) => n,
            None => {
                errors.push(FieldError {
                    field: field.to_string(),
                    message: format!("must be a non-negative integer, got {v}"),
                });
                0
            }
        },
    }
}

fn required(value: Option<String>, field: &str, errors: &mut Vec<FieldError>) -> String {
    match value {
        Some(v) if !v.trim().is_empty() => v,
        _ => {
            errors.push(FieldError {
                field: field.to_string(),
                message: "is required".to_string(),
            });
            String::new()
        }
    }
}

impl RawInventory {
    /// Turn the raw document into an [`Inventory`], or every problem found.
    pub fn validate(self) -> Result<Inventory, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut interfaces = Vec::new();
        match self.interfaces {
            Some(nics) if !nics.is_empty() => {
                for (i, nic) in nics.into_iter().enumerate() {
                    let name = required(nic.name, &format!("interfaces[{i}].name"), &mut errors);
                    let field = format!("interfaces[{i}].mac");
                    let mac = match nic.mac.as_deref().map(str::parse::<Mac>) {
                        Some(Ok(mac)) => Some(mac),
                        Some(Err(message)) => {
                            errors.push(FieldError { field, message });
                            None
                        }
                        None => {
                            errors.push(FieldError {
                                field,
                                message: "is required".to_string(),
                            });
                            None
                        }
                    };
                    if let Some(mac) = mac {
                        if interfaces.iter().any(|n: &Nic| n.mac == mac) {
                            errors.push(FieldError {
                                field: format!("interfaces[{i}].mac"),
                                message: format!("{mac} appears on two interfaces"),
                            });
                        }
                        interfaces.push(Nic {
                            name,
                            mac,
                            speed_mbps: nic.speed_mbps,
                            link: nic.link,
                        });
                    }
                }
            }
            _ => errors.push(FieldError {
                field: "interfaces".to_string(),
                message: "must list at least one interface with its MAC".to_string(),
            }),
        }
        let cpu = match self.cpu {
            Some(cpu) => Cpu {
                count: u32::try_from(count(&cpu.count, "cpu.count", &mut errors))
                    .unwrap_or(u32::MAX),
                model: cpu.model,
            },
            None => {
                errors.push(FieldError {
                    field: "cpu".to_string(),
                    message: "is required".to_string(),
                });
                Cpu {
                    count: 0,
                    model: None,
                }
            }
        };
        let memory_bytes = count(&self.memory_bytes, "memory_bytes", &mut errors);
        let mut disks = Vec::new();
        for (i, disk) in self.disks.unwrap_or_default().into_iter().enumerate() {
            disks.push(Disk {
                name: required(disk.name, &format!("disks[{i}].name"), &mut errors),
                size_bytes: count(
                    &disk.size_bytes,
                    &format!("disks[{i}].size_bytes"),
                    &mut errors,
                ),
                model: disk.model,
                serial: disk.serial,
            });
        }
        let bmc = match self.bmc {
            None => None,
            Some(b) => match ReportedBmc::check(
                b.driver.as_deref().unwrap_or(""),
                b.address.as_deref().unwrap_or(""),
            ) {
                Ok(b) => Some(b),
                Err(message) => {
                    errors.push(FieldError {
                        field: "bmc".to_string(),
                        message,
                    });
                    None
                }
            },
        };
        if errors.is_empty() {
            Ok(Inventory {
                interfaces,
                cpu,
                memory_bytes,
                disks,
                system: self.system.unwrap_or_default(),
                boot_mode: self.boot_mode,
                bmc,
            })
        } else {
            Err(errors)
        }
    }
}

/// Largest inventory document accepted, far above a real server's (a few KiB). The HTTP
/// handlers refuse a longer body before parsing it.
pub const MAX_INVENTORY_BYTES: usize = 256 * 1024;

/// Why a document is not an inventory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    /// Not JSON (a syntax error or a truncated document): serde's message, with line and column.
    #[error("{0}")]
    Json(String),
    /// JSON, but not a valid inventory: every field at fault, by its path (`$` for the whole
    /// document).
    #[error("{}", FieldError::joined(.0))]
    Fields(Vec<FieldError>),
}

/// Parse the agent's inventory document (the hello's body), naming the field at fault for type
/// errors as well as for semantic ones.
pub fn parse_inventory(body: &[u8]) -> Result<Inventory, InventoryError> {
    from_deserializer(&mut serde_json::Deserializer::from_slice(body))
}

/// [`parse_inventory`] of a document already read as JSON (Fuel's, translated).
pub fn inventory_from_value(doc: &serde_json::Value) -> Result<Inventory, InventoryError> {
    from_deserializer(doc)
}

fn from_deserializer<'de, D>(de: D) -> Result<Inventory, InventoryError>
where
    D: serde::Deserializer<'de, Error = serde_json::Error>,
{
    let raw: RawInventory = serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            InventoryError::Json(inner.to_string())
        } else if path == "." {
            InventoryError::Fields(vec![FieldError {
                field: "$".to_string(),
                message: format!("the document must be a JSON object ({inner})"),
            }])
        } else {
            InventoryError::Fields(vec![FieldError {
                field: path,
                message: inner.to_string(),
            }])
        }
    })?;
    raw.validate().map_err(InventoryError::Fields)
}

/// Database id of a node.
pub type NodeId = i64;

/// A node known to the master.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    pub id: NodeId,
    pub mac: Mac,
    pub name: String,
    pub status: NodeStatus,
    pub inventory: Inventory,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds of the last message from the node's agent.
    pub last_seen_at: i64,
    /// The environment the node is assigned to, if any.
    pub cluster_id: Option<i64>,
    /// Its roles there (`controller`, `compute`, ...); empty when unassigned.
    pub roles: Vec<String>,
    /// The roles it was last deployed with there (Nailgun's `roles`; the assigned ones not in
    /// it are Nailgun's `pending_roles`); empty until its first successful deployment.
    #[serde(default)]
    pub deployed_roles: Vec<String>,
    /// In `error`: why (`provision`, `deploy`, `deletion`), as Nailgun's `error_type`.
    #[serde(default)]
    pub error_type: Option<String>,
    /// False while an operator has not approved it (`discovery.approval = manual`): it gets no
    /// agent token until then.
    pub approved: bool,
    /// The address its agent last said hello from, if it has since stoker recorded that.
    #[serde(default)]
    pub address: Option<String>,
    /// Removed from its environment while it has an installed OS: the next Deploy erases it
    /// (the release's deletion graph) and returns it to discover (Nailgun's flag).
    #[serde(default)]
    pub pending_deletion: bool,
    /// Its host name (Nailgun's `hostname`): `node-<id>` until an operator sets one, and
    /// again when it leaves its environment.
    pub hostname: String,
    /// An operator's labels (Nailgun's `labels`): a name to a value or null.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, Option<String>>,
}

impl Node {
    /// Whether the node's agent (the bootstrap's or the installed OS's service agent, whose
    /// calls are its heartbeat) called within [`ONLINE_WINDOW_S`] of `now`.
    pub fn online(&self, now: i64) -> bool {
        now.saturating_sub(self.last_seen_at) <= ONLINE_WINDOW_S
    }

    /// Whether the node has an installed OS to boot at its next network boot: once provisioned
    /// (also while deploying, when ready, and when deploying failed), but not while discovered,
    /// provisioning, or after provisioning failed.
    pub fn boots_from_disk(&self) -> bool {
        match self.status {
            NodeStatus::Provisioned | NodeStatus::Deploying | NodeStatus::Ready => true,
            NodeStatus::Error => self.error_type.as_deref() == Some("deploy"),
            NodeStatus::Discover | NodeStatus::Provisioning => false,
        }
    }
}

/// How often the installed OS's service agent calls when it has nothing to run; its calls
/// are its heartbeat (the bootstrap's agent asks every second).
pub const HEARTBEAT_S: u64 = 5;

/// How recently a node's agent must have called for the node to count as online: six of the
/// service agent's 5 s heartbeats, so a lost call or two does not flap it.
pub const ONLINE_WINDOW_S: i64 = 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_in_every_form_parse_to_the_normal_one() {
        for text in [
            "52:54:00:ab:cd:ef",
            "52:54:00:AB:CD:EF",
            "52-54-00-ab-cd-ef",
            "5254.00ab.cdef",
            " 52:54:00:ab:cd:ef ",
        ] {
            assert_eq!(text.parse::<Mac>().unwrap().as_str(), "52:54:00:ab:cd:ef");
        }
        for bad in [
            "52:54:00:ab:cd:eg",
            "52:54:00:ab:cd",
            "52:54:00:ab:cd:ef:01",
            "52;54;00;ab;cd;ef",
        ] {
            assert!(bad.parse::<Mac>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_mac_from_octets_is_the_parsed_one() {
        for octets in [[0u8; 6], [0x52, 0x54, 0x00, 0xab, 0xcd, 0xef], [0xff; 6]] {
            let text = octets.map(|b| format!("{b:02X}")).join("-");
            assert_eq!(Mac::from_octets(octets), text.parse::<Mac>().unwrap());
        }
    }

    #[test]
    fn a_node_is_online_while_its_agent_calls() {
        let node = Node {
            id: 1,
            mac: "52:54:00:00:00:01".parse().unwrap(),
            name: "n".into(),
            status: NodeStatus::Ready,
            inventory: parse_inventory(
                br#"{"interfaces": [{"name": "eth0", "mac": "52:54:00:00:00:01"}],
                     "cpu": {"count": 1}, "memory_bytes": 1}"#,
            )
            .unwrap(),
            created_at: 0,
            last_seen_at: 1_000,
            cluster_id: None,
            roles: vec![],
            deployed_roles: vec![],
            error_type: None,
            approved: true,
            address: None,
            pending_deletion: false,
            hostname: "node-1".into(),
            labels: Default::default(),
        };
        assert!(node.online(1_000 + ONLINE_WINDOW_S));
        assert!(!node.online(1_001 + ONLINE_WINDOW_S));
    }

    fn raw(json: &str) -> RawInventory {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn mac_forms_normalise() {
        for form in ["52:54:00:AB:cd:01", "52-54-00-ab-cd-01", "5254.00ab.cd01"] {
            assert_eq!(form.parse::<Mac>().unwrap().as_str(), "52:54:00:ab:cd:01");
        }
        assert!("52:54:00:ab:cd".parse::<Mac>().is_err());
        assert!("zz:54:00:ab:cd:01".parse::<Mac>().is_err());
    }

    #[test]
    fn valid_inventory() {
        let inv = raw(
            r#"{"interfaces":[{"name":"eth0","mac":"52:54:00:00:00:01"}],
            "cpu":{"count":4},"memory_bytes":8589934592,
            "disks":[{"name":"sda","size_bytes":100},{"name":"sdb","size_bytes":50}]}"#,
        )
        .validate()
        .unwrap();
        assert_eq!(inv.primary_mac().unwrap().as_str(), "52:54:00:00:00:01");
        assert_eq!(inv.disk_bytes(), 150);
    }

    #[test]
    fn every_problem_is_named() {
        let errors = raw(
            r#"{"interfaces":[{"name":"eth0","mac":"nope"},{"mac":"52:54:00:00:00:01"}],
            "cpu":{"count":-1},"disks":[{"name":"sda","size_bytes":"big"}]}"#,
        )
        .validate()
        .unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "interfaces[0].mac",
                "interfaces[1].name",
                "cpu.count",
                "memory_bytes",
                "disks[0].size_bytes"
            ]
        );
    }

    #[test]
    fn parse_inventory_tells_syntax_from_fields() {
        assert!(matches!(
            parse_inventory(b"{\"interfaces\": ["),
            Err(InventoryError::Json(_))
        ));
        let fields = |body: &[u8]| match parse_inventory(body) {
            Err(InventoryError::Fields(f)) => f.into_iter().map(|e| e.field).collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(fields(b"\"text\""), ["$"]);
        assert_eq!(
            fields(b"{\"interfaces\": [{\"link\": 3}]}"),
            ["interfaces[0].link"]
        );
        let ok = parse_inventory(
            br#"{"interfaces":[{"name":"eth0","mac":"52:54:00:00:00:01"}],
                 "cpu":{"count":1},"memory_bytes":1}"#,
        )
        .unwrap();
        assert_eq!(ok.primary_mac().unwrap().as_str(), "52:54:00:00:00:01");
    }

    /// Found with the `inventory` fuzz target's harness: sizes that add up past u64 (the nodes
    /// page shows the total).
    #[test]
    fn disk_sizes_past_u64_saturate() {
        let inv = parse_inventory(
            br#"{"interfaces":[{"name":"eth0","mac":"52:54:00:00:00:01"}],"cpu":{"count":1},
                 "memory_bytes":1,"disks":[{"name":"a","size_bytes":18446744073709551615},
                 {"name":"b","size_bytes":1}]}"#,
        )
        .unwrap();
        assert_eq!(inv.disk_bytes(), u64::MAX);
    }

    #[test]
    fn status_round_trips() {
        for st in NodeStatus::ALL {
            assert_eq!(st.as_str().parse::<NodeStatus>().unwrap(), st);
        }
    }
}
