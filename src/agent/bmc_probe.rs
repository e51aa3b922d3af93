//! Finding the node's BMC address for the inventory (its `bmc` field), from two sources tried
//! in this order: the SMBIOS type 42 "Management Controller Host Interface" structure (DSP0134
//! §7.43, DSP0270), whose Redfish-over-IP protocol record names the Redfish service's IP and
//! port, reported as `{"driver": "redfish", "address": "https://IP[:port]"}`; then `ipmitool lan
//! print` on channels 1 to 3 through the machine's IPMI device, reported as `{"driver": "ipmi",
//! "address": "IP"}`. Only an address the master can reach is reported: a host interface
//! usually puts the Redfish service on a link-local address (169.254.0.0/16, fe80::/10) over a
//! USB or PCI NIC only this host sees, so such an address, a loopback, unspecified, multicast or
//! broadcast one is never reported, from either source; the IPMI LAN address (the BMC's own
//! management port) is then what the node reports. Nothing else is: no credentials, no host
//! name (the master takes IP addresses only).
//!
//! The SMBIOS structures come from `/sys/firmware/dmi/entries/42-*/raw` (the dmi-sysfs module),
//! or, when that directory is absent, from walking the whole table in
//! `/sys/firmware/dmi/tables/DMI` (built into the kernel). The service address is read only when
//! its discovery type is Static or AutoConfigure (with DHCP the record carries none). The port
//! is appended when it is not 443 (0 is taken as 443); an IPv6 address is written
//! `https://[IP]:port`, port always, as the master's check wants it.
//!
//! ipmitool runs only when `dev/ipmi0`, `dev/ipmi/0` or `dev/ipmidev/0` exists under the root
//! and the root is `/` (ipmitool talks to this machine's device, never a sandbox's), each run
//! bounded by [`LAN_PRINT_TIMEOUT`] through [`exec::run_shell`] (killed with its process group
//! at the deadline, output kept to the last [`exec::OUTPUT_TAIL_BYTES`]). A run that does not
//! end by itself stops the probe: the next channel would wait on the same BMC.
//!
//! Both inputs are untrusted bytes: files are read up to a cap, every field through a
//! bounds-checked `get`, and a truncated or garbled record gives nothing rather than a panic.
//! Every failure is silent to the master (the field is absent) and logged by the agent; the
//! report is checked with the master's own rule ([`ReportedBmc::check`]), so a probe can never
//! make the hello refused.

use std::fs::{self, File};
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;

use crate::agent::exec::{self, Tail};
use crate::model::node::ReportedBmc;

/// Largest `42-*/raw` entry read: one structure is at most 255 bytes and its strings.
pub const MAX_ENTRY_BYTES: u64 = 64 * 1024;
/// Largest SMBIOS table read (real ones are a few KiB to about a hundred).
pub const MAX_TABLE_BYTES: u64 = 1024 * 1024;
/// At most this many `42-*` entries are read.
const MAX_ENTRIES: usize = 32;
/// How long one `ipmitool lan print` may take (through the local KCS/SSIF interface it takes
/// well under a second).
pub const LAN_PRINT_TIMEOUT: Duration = Duration::from_secs(5);

const ENTRIES_DIR: &str = "sys/firmware/dmi/entries";
const TABLE_FILE: &str = "sys/firmware/dmi/tables/DMI";
const IPMI_DEVICES: [&str; 3] = ["dev/ipmi0", "dev/ipmi/0", "dev/ipmidev/0"];
const IPMI_CHANNELS: std::ops::RangeInclusive<u8> = 1..=3;

/// SMBIOS structure types.
const TYPE_HOST_INTERFACE: u8 = 42;
const TYPE_END_OF_TABLE: u8 = 127;
/// Offsets in a type 42 structure (DSP0134 §7.43): Interface Type, Interface Type Specific
/// Data Length, then that data, the Number of Protocol Records and the records.
const HI_INTERFACE_TYPE: usize = 0x04;
const HI_SPECIFIC_DATA_LENGTH: usize = 0x05;
const HI_SPECIFIC_DATA: usize = 0x06;
/// Interface Type "Network Host Interface" (DSP0134 Table 145, DSP0270).
const NETWORK_HOST_INTERFACE: u8 = 0x40;
/// Protocol Type "Redfish over IP" (DSP0134 Table 146).
const REDFISH_OVER_IP: u8 = 0x04;

/// Offsets in the Redfish-over-IP protocol data (DSP0270 "Redfish over IP Protocol Specific
/// Record Data"): Service UUID 0..16, Host IP Assignment Type 16, Host IP Address Format 17,
/// Host IP Address 18..34, Host IP Mask 34..50, then the service's fields below, Redfish Service
/// VLAN id 86..90, Hostname Length 90, the host name from 91.
const RF_SERVICE_DISCOVERY_TYPE: usize = 50;
const RF_SERVICE_ADDRESS_FORMAT: usize = 51;
const RF_SERVICE_ADDRESS: usize = 52;
const RF_SERVICE_PORT: usize = 84;
/// The record's length without the host name.
const RF_MIN_LENGTH: usize = 91;
/// Discovery types whose address field is set: Static, AutoConfigure.
const DISCOVERY_STATIC: u8 = 0x01;
const DISCOVERY_AUTOCONFIGURE: u8 = 0x03;
const FORMAT_IPV4: u8 = 0x01;
const FORMAT_IPV6: u8 = 0x02;
const HTTPS_PORT: u16 = 443;

/// A Redfish service a host interface record names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedfishService {
    pub ip: IpAddr,
    pub port: u16,
}

impl RedfishService {
    /// The address as the master takes it: `https://IPv4` (`:port` when not 443) or
    /// `https://[IPv6]:port`.
    pub fn address(&self) -> String {
        match (self.ip, self.port) {
            (IpAddr::V4(ip), HTTPS_PORT) => format!("https://{ip}"),
            (IpAddr::V4(ip), port) => format!("https://{ip}:{port}"),
            (IpAddr::V6(ip), port) => format!("https://[{ip}]:{port}"),
        }
    }
}

/// What `ipmitool lan print` said of a channel's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanAddress {
    pub ip: Ipv4Addr,
    /// `IP Address Source`: "Static Address", "DHCP Address", ...
    pub source: Option<String>,
}

/// One `lan print` run: its output (whatever the exit code), or why the probe stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LanPrint {
    Output(String),
    Stop(String),
}

/// The node's BMC, when one of the sources names an address the master can reach. On the
/// node itself (`root` is `/`) it is read once per agent process: the address does not change
/// under a running agent, and ipmitool may take seconds, too long for every heartbeat.
pub fn probe(root: &Path) -> Option<ReportedBmc> {
    if root == Path::new("/") {
        static ONCE: std::sync::OnceLock<Option<ReportedBmc>> = std::sync::OnceLock::new();
        return ONCE.get_or_init(|| probe_now(root)).clone();
    }
    probe_now(root)
}

fn probe_now(root: &Path) -> Option<ReportedBmc> {
    if let Some(bmc) = from_host_interface(root) {
        return Some(bmc);
    }
    from_ipmi(root, &mut |channel| {
        if root != Path::new("/") {
            return LanPrint::Stop(format!(
                "the root is {}, not /: ipmitool would read this machine's BMC",
                root.display()
            ));
        }
        match exec::find_on_path("ipmitool") {
            Some(path) => lan_print(
                &exec::shell_quote(&path.to_string_lossy()),
                channel,
                LAN_PRINT_TIMEOUT,
            ),
            None => LanPrint::Stop("ipmitool is not on PATH".to_string()),
        }
    })
}

/// Whether the master could reach `ip`: not link-local, loopback, unspecified, multicast or
/// broadcast (an IPv4-mapped IPv6 address is judged as the IPv4 one).
pub fn reachable(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_multicast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_unicast_link_local()
                || v6.is_multicast())
        }
    }
}

// ---- SMBIOS host interface -------------------------------------------------------------------

/// The Redfish service of the host interface records under `root`, when one is reachable.
pub fn from_host_interface(root: &Path) -> Option<ReportedBmc> {
    let structures = host_interface_structures(root);
    if structures.is_empty() {
        tracing::debug!("BMC probe: no SMBIOS host interface (type 42) structure");
        return None;
    }
    let services: Vec<RedfishService> = structures
        .iter()
        .flat_map(|s| parse_host_interface(s))
        .collect();
    if services.is_empty() {
        tracing::debug!(
            structures = structures.len(),
            "BMC probe: the SMBIOS host interface names no Redfish-over-IP service address"
        );
    }
    choose_redfish(&services)
}

/// The first reachable service, as the master takes it.
pub fn choose_redfish(services: &[RedfishService]) -> Option<ReportedBmc> {
    for s in services {
        if !reachable(s.ip) {
            tracing::debug!(
                ip = %s.ip,
                "BMC probe: the host interface's Redfish service is at an address only this \
                 host reaches; not reported"
            );
            continue;
        }
        match ReportedBmc::check("redfish", &s.address()) {
            Ok(bmc) => {
                tracing::info!(address = %bmc.address, "BMC probe: Redfish host interface");
                return Some(bmc);
            }
            Err(e) => tracing::debug!("BMC probe: {e}"),
        }
    }
    None
}

/// The type 42 structures: each `42-*/raw` entry, or those of the whole table when there is
/// no entries directory.
fn host_interface_structures(root: &Path) -> Vec<Vec<u8>> {
    let dir = root.join(ENTRIES_DIR);
    match fs::read_dir(&dir) {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with("42-"))
                .collect();
            names.sort();
            names.truncate(MAX_ENTRIES);
            names
                .iter()
                .filter_map(|n| read_capped(&dir.join(n).join("raw"), MAX_ENTRY_BYTES))
                .collect()
        }
        Err(_) => read_capped(&root.join(TABLE_FILE), MAX_TABLE_BYTES)
            .map(|table| {
                structures_of_type(&table, TYPE_HOST_INTERFACE)
                    .into_iter()
                    .map(<[u8]>::to_vec)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A file's bytes, or `None` when it cannot be read or is longer than `cap`.
fn read_capped(path: &Path, cap: u64) -> Option<Vec<u8>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!(path = %path.display(), "BMC probe: cannot open: {e}");
            return None;
        }
    };
    let mut bytes = Vec::new();
    if let Err(e) = file.take(cap.saturating_add(1)).read_to_end(&mut bytes) {
        tracing::debug!(path = %path.display(), "BMC probe: cannot read: {e}");
        return None;
    }
    if bytes.len() as u64 > cap {
        tracing::debug!(path = %path.display(), "BMC probe: longer than {cap} bytes; ignored");
        return None;
    }
    Some(bytes)
}

/// The formatted areas of the structures of type `kind` in an SMBIOS table: each structure is
/// its header (type, length, handle), the rest of its `length` bytes, then strings ending with
/// two NULs. The walk stops at the end-of-table structure, a length below the header's, or
/// anything running past the end.
pub fn structures_of_type(table: &[u8], kind: u8) -> Vec<&[u8]> {
    let mut found = Vec::new();
    let mut at = 0usize;
    while let (Some(&t), Some(&len)) = (table.get(at), table.get(at.saturating_add(1))) {
        let len = usize::from(len);
        if len < 4 {
            break;
        }
        let end = at.saturating_add(len);
        let Some(formatted) = table.get(at..end) else {
            break;
        };
        if t == kind {
            found.push(formatted);
        }
        if t == TYPE_END_OF_TABLE {
            break;
        }
        let Some(strings) = table.get(end..) else {
            break;
        };
        let Some(nuls) = strings.windows(2).position(|w| w == [0, 0]) else {
            break;
        };
        at = end.saturating_add(nuls).saturating_add(2);
    }
    found
}

/// The Redfish-over-IP services one type 42 structure names (its formatted area, with or without
/// the strings after it): none unless it is a Network Host Interface. Records are read up to the
/// first that does not fit in the structure's length.
pub fn parse_host_interface(structure: &[u8]) -> Vec<RedfishService> {
    let mut found = Vec::new();
    let (Some(&kind), Some(&len)) = (structure.first(), structure.get(1)) else {
        return found;
    };
    if kind != TYPE_HOST_INTERFACE {
        return found;
    }
    let Some(f) = structure.get(..usize::from(len)) else {
        return found;
    };
    if f.get(HI_INTERFACE_TYPE) != Some(&NETWORK_HOST_INTERFACE) {
        return found;
    }
    let Some(&specific) = f.get(HI_SPECIFIC_DATA_LENGTH) else {
        return found;
    };
    let count_at = HI_SPECIFIC_DATA + usize::from(specific);
    let Some(&count) = f.get(count_at) else {
        return found;
    };
    let mut at = count_at + 1;
    for _ in 0..count {
        let (Some(&protocol), Some(&plen)) = (f.get(at), f.get(at + 1)) else {
            break;
        };
        let next = at + 2 + usize::from(plen);
        let Some(data) = f.get(at + 2..next) else {
            break;
        };
        if protocol == REDFISH_OVER_IP
            && let Some(service) = parse_redfish_over_ip(data)
        {
            found.push(service);
        }
        at = next;
    }
    found
}

/// The service of one Redfish-over-IP record's data: `None` when the record is short, its
/// discovery type leaves the address unset, its format is unknown or the address unspecified.
pub fn parse_redfish_over_ip(data: &[u8]) -> Option<RedfishService> {
    if data.len() < RF_MIN_LENGTH {
        return None;
    }
    let discovery = *data.get(RF_SERVICE_DISCOVERY_TYPE)?;
    if discovery != DISCOVERY_STATIC && discovery != DISCOVERY_AUTOCONFIGURE {
        return None;
    }
    let raw: [u8; 16] = data
        .get(RF_SERVICE_ADDRESS..RF_SERVICE_ADDRESS + 16)?
        .try_into()
        .ok()?;
    let ip = match *data.get(RF_SERVICE_ADDRESS_FORMAT)? {
        // IPv4 in the first four bytes, the rest zero-filled.
        FORMAT_IPV4 => {
            let [a, b, c, d, ..] = raw;
            IpAddr::V4(Ipv4Addr::new(a, b, c, d))
        }
        FORMAT_IPV6 => IpAddr::V6(Ipv6Addr::from(raw)).to_canonical(),
        _ => return None,
    };
    if ip.is_unspecified() {
        return None;
    }
    let port: [u8; 2] = data
        .get(RF_SERVICE_PORT..RF_SERVICE_PORT + 2)?
        .try_into()
        .ok()?;
    let port = match u16::from_le_bytes(port) {
        0 => HTTPS_PORT,
        p => p,
    };
    Some(RedfishService { ip, port })
}

// ---- IPMI ------------------------------------------------------------------------------------

/// The BMC's LAN address through `lan_print` (channel → output), tried on channels 1 to 3 up to
/// the first with a reachable address; nothing runs when no IPMI device exists under `root`.
pub fn from_ipmi(root: &Path, lan_print: &mut dyn FnMut(u8) -> LanPrint) -> Option<ReportedBmc> {
    let Some(device) = IPMI_DEVICES.iter().find(|d| root.join(d).exists()) else {
        tracing::debug!("BMC probe: no IPMI device (/dev/ipmi0, /dev/ipmi/0, /dev/ipmidev/0)");
        return None;
    };
    for channel in IPMI_CHANNELS {
        let text = match lan_print(channel) {
            LanPrint::Output(text) => text,
            LanPrint::Stop(why) => {
                tracing::debug!(device, channel, "BMC probe: ipmitool lan print: {why}");
                return None;
            }
        };
        match parse_lan_print(&text) {
            Some(lan) if reachable(IpAddr::V4(lan.ip)) => {
                match ReportedBmc::check("ipmi", &lan.ip.to_string()) {
                    Ok(bmc) => {
                        tracing::info!(
                            channel,
                            address = %bmc.address,
                            source = lan.source.as_deref().unwrap_or("unknown"),
                            "BMC probe: IPMI LAN address"
                        );
                        return Some(bmc);
                    }
                    Err(e) => tracing::debug!(channel, "BMC probe: {e}"),
                }
            }
            Some(lan) => tracing::debug!(
                channel,
                ip = %lan.ip,
                "BMC probe: the channel's IP address is not one the master can reach"
            ),
            None => tracing::debug!(channel, "BMC probe: lan print gave no IP address"),
        }
    }
    None
}

/// `IP Address` and `IP Address Source` from `ipmitool lan print`'s output (the first line of
/// each); `None` without an IPv4 address there.
pub fn parse_lan_print(text: &str) -> Option<LanAddress> {
    let (mut ip, mut source) = (None, None);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "IP Address" if ip.is_none() => ip = Some(value.trim().parse::<Ipv4Addr>().ok()),
            "IP Address Source" if source.is_none() => {
                source = Some(value.trim().chars().take(64).collect::<String>())
            }
            _ => {}
        }
    }
    Some(LanAddress {
        ip: ip.flatten()?,
        source: source.filter(|s| !s.is_empty()),
    })
}

/// Run `{command} lan print {channel}` through `sh` under `timeout` (`command`: ipmitool,
/// quoted for the shell).
pub fn lan_print(command: &str, channel: u8, timeout: Duration) -> LanPrint {
    let tail = Tail::default();
    let root = Path::new("/");
    let out = exec::run_shell(
        &format!("{command} lan print {channel}"),
        root,
        root,
        timeout,
        &tail,
    );
    match out.exit_code {
        Some(_) => LanPrint::Output(out.output_tail),
        None => LanPrint::Stop(
            out.error
                .unwrap_or_else(|| "ipmitool did not exit".to_string()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One Redfish-over-IP record's data, laid out as DSP0270 says.
    fn redfish_data(discovery: u8, format: u8, address: &[u8], port: u16, host: &str) -> Vec<u8> {
        let mut d = vec![0x11; 16]; // Service UUID
        d.push(0x01); // Host IP Assignment Type: static
        d.push(0x01); // Host IP Address Format: IPv4
        d.extend([169, 254, 0, 2]);
        d.extend([0; 12]); // Host IP Address
        d.extend([255, 255, 0, 0]);
        d.extend([0; 12]); // Host IP Mask
        d.push(discovery); // Redfish Service IP Discovery Type
        d.push(format); // Redfish Service IP Address Format
        let mut addr = [0u8; 16];
        addr[..address.len()].copy_from_slice(address);
        d.extend(addr); // Redfish Service IP Address
        d.extend([0xff; 16]); // Redfish Service IP Mask
        d.extend(port.to_le_bytes()); // Redfish Service IP Port
        d.extend(7u32.to_le_bytes()); // Redfish Service VLAN id
        d.push(host.len() as u8); // Redfish Service Hostname Length
        d.extend(host.as_bytes());
        assert_eq!(d.len(), RF_MIN_LENGTH + host.len());
        d
    }

    /// A type 42 structure (formatted area, then the empty string set) holding `records`
    /// (protocol type, data).
    fn type42(records: &[(u8, Vec<u8>)]) -> Vec<u8> {
        // Interface Type Specific Data: Device Type 0x02 (USB), idVendor, idProduct, serial
        // number descriptor.
        let specific = [0x02, 0x6b, 0x1d, 0x03, 0x01, 0x00];
        let mut s = vec![TYPE_HOST_INTERFACE, 0, 0x34, 0x12, NETWORK_HOST_INTERFACE];
        s.push(specific.len() as u8);
        s.extend(specific);
        s.push(records.len() as u8);
        for (protocol, data) in records {
            s.push(*protocol);
            s.push(data.len() as u8);
            s.extend(data);
        }
        s[1] = s.len() as u8;
        s.extend([0, 0]);
        s
    }

    fn ipv4_record(ip: [u8; 4], port: u16) -> Vec<u8> {
        type42(&[(
            REDFISH_OVER_IP,
            redfish_data(DISCOVERY_STATIC, FORMAT_IPV4, &ip, port, "bmc"),
        )])
    }

    fn tree_with_entry(raw: &[u8]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join(ENTRIES_DIR).join("42-0");
        fs::create_dir_all(&entry).unwrap();
        fs::write(entry.join("raw"), raw).unwrap();
        dir
    }

    const LAN_PRINT: &str = "\
Set in Progress         : Set Complete
Auth Type Support       : NONE MD2 MD5 PASSWORD 
Auth Type Enable        : Callback : MD2 MD5 PASSWORD 
                        : User     : MD2 MD5 PASSWORD 
                        : Operator : MD2 MD5 PASSWORD 
                        : Admin    : MD2 MD5 PASSWORD 
                        : OEM      : MD2 MD5 PASSWORD 
IP Address Source       : DHCP Address
IP Address              : 10.20.0.5
Subnet Mask             : 255.255.255.0
MAC Address             : 0c:c4:7a:12:34:56
SNMP Community String   : public
IP Header               : TTL=0x00 Flags=0x00 Precedence=0x00 TOS=0x00
BMC ARP Control         : ARP Responses Enabled, Gratuitous ARP Disabled
Default Gateway IP      : 10.20.0.1
Default Gateway MAC     : 00:00:00:00:00:00
Backup Gateway IP       : 0.0.0.0
Backup Gateway MAC      : 00:00:00:00:00:00
802.1q VLAN ID          : Disabled
802.1q VLAN Priority    : 0
RMCP+ Cipher Suites     : 1,2,3,6,7,8,11,12
Cipher Suite Priv Max   : XaaaXXaaaXaaXXX
                        :     X=Cipher Suite Unused
                        :     a=ADMIN
Bad Password Threshold  : Not Available
";

    #[test]
    fn an_ipv4_host_interface_record_is_reported_as_redfish() {
        let raw = ipv4_record([10, 20, 0, 7], 443);
        assert_eq!(
            parse_host_interface(&raw),
            vec![RedfishService {
                ip: "10.20.0.7".parse().unwrap(),
                port: 443
            }]
        );
        let dir = tree_with_entry(&raw);
        let bmc = probe(dir.path()).unwrap();
        assert_eq!(
            (bmc.driver.as_str(), bmc.address.as_str()),
            ("redfish", "https://10.20.0.7")
        );
        // A port other than 443 is kept; 0 means the default.
        let bmc = from_host_interface(tree_with_entry(&ipv4_record([10, 0, 0, 9], 8443)).path());
        assert_eq!(bmc.unwrap().address, "https://10.0.0.9:8443");
        let bmc = from_host_interface(tree_with_entry(&ipv4_record([10, 0, 0, 9], 0)).path());
        assert_eq!(bmc.unwrap().address, "https://10.0.0.9");
    }

    #[test]
    fn an_ipv6_host_interface_record_is_reported_with_brackets_and_port() {
        let ip: Ipv6Addr = "2001:db8::42".parse().unwrap();
        let raw = type42(&[(
            REDFISH_OVER_IP,
            redfish_data(DISCOVERY_AUTOCONFIGURE, FORMAT_IPV6, &ip.octets(), 443, ""),
        )]);
        let dir = tree_with_entry(&raw);
        let bmc = probe(dir.path()).unwrap();
        assert_eq!(bmc.address, "https://[2001:db8::42]:443");
        // The master's own check takes it (it is what the agent sends).
        assert!(ReportedBmc::check("redfish", &bmc.address).is_ok());
    }

    #[test]
    fn link_local_and_loopback_services_are_not_reported() {
        for ip in [
            [169, 254, 0, 1],
            [127, 0, 0, 1],
            [0, 0, 0, 0],
            [255, 255, 255, 255],
        ] {
            let dir = tree_with_entry(&ipv4_record(ip, 443));
            assert_eq!(probe(dir.path()), None, "{ip:?}");
        }
        let fe80: Ipv6Addr = "fe80::1".parse().unwrap();
        let raw = type42(&[(
            REDFISH_OVER_IP,
            redfish_data(DISCOVERY_STATIC, FORMAT_IPV6, &fe80.octets(), 443, ""),
        )]);
        assert_eq!(parse_host_interface(&raw).len(), 1);
        assert_eq!(from_host_interface(tree_with_entry(&raw).path()), None);
        // A link-local service first and a reachable one after it: the reachable one.
        let raw = type42(&[
            (
                REDFISH_OVER_IP,
                redfish_data(DISCOVERY_STATIC, FORMAT_IPV4, &[169, 254, 3, 1], 443, ""),
            ),
            (0x02, vec![1, 2, 3]), // IPMI, skipped
            (
                REDFISH_OVER_IP,
                redfish_data(DISCOVERY_STATIC, FORMAT_IPV4, &[10, 1, 1, 1], 443, ""),
            ),
        ]);
        let bmc = from_host_interface(tree_with_entry(&raw).path()).unwrap();
        assert_eq!(bmc.address, "https://10.1.1.1");
    }

    #[test]
    fn dhcp_discovery_and_other_interfaces_give_nothing() {
        let dhcp = type42(&[(
            REDFISH_OVER_IP,
            redfish_data(0x02, FORMAT_IPV4, &[10, 0, 0, 1], 443, ""),
        )]);
        assert!(parse_host_interface(&dhcp).is_empty());
        let mut kcs = ipv4_record([10, 0, 0, 1], 443);
        kcs[HI_INTERFACE_TYPE] = 0x02; // KCS, not a network host interface
        assert!(parse_host_interface(&kcs).is_empty());
        let unknown_format = type42(&[(
            REDFISH_OVER_IP,
            redfish_data(DISCOVERY_STATIC, 0x00, &[10, 0, 0, 1], 443, ""),
        )]);
        assert!(parse_host_interface(&unknown_format).is_empty());
    }

    #[test]
    fn truncated_and_garbage_records_give_nothing_without_panicking() {
        let good = ipv4_record([10, 20, 0, 7], 443);
        // Every prefix of a good record.
        for n in 0..good.len() - 2 {
            let cut = &good[..n];
            assert!(parse_host_interface(cut).is_empty(), "prefix of {n} bytes");
        }
        // Lengths that lie: the structure's, the specific data's, the record's, the count.
        let mut long = good.clone();
        long[1] = 0xff;
        assert!(parse_host_interface(&long).is_empty());
        let mut specific = good.clone();
        specific[HI_SPECIFIC_DATA_LENGTH] = 0xf0;
        assert!(parse_host_interface(&specific).is_empty());
        let record_len_at = HI_SPECIFIC_DATA + usize::from(good[HI_SPECIFIC_DATA_LENGTH]) + 2;
        for lie in [0u8, 10, 90, 0xff] {
            let mut r = good.clone();
            r[record_len_at] = lie;
            assert!(parse_host_interface(&r).is_empty(), "record length {lie}");
        }
        let mut count = good.clone();
        count[record_len_at - 2] = 0xff;
        assert_eq!(parse_host_interface(&count).len(), 1);
        assert!(parse_redfish_over_ip(&[0xff; 90]).is_none());
        // Pseudo-random garbage, with the header made plausible now and then.
        let mut x: u32 = 0x1234_5678;
        for round in 0..2000 {
            let len = (round % 300) as usize;
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            if round % 2 == 0 && bytes.len() > 5 {
                bytes[0] = TYPE_HOST_INTERFACE;
                bytes[4] = NETWORK_HOST_INTERFACE;
            }
            let _ = parse_host_interface(&bytes);
            let _ = structures_of_type(&bytes, TYPE_HOST_INTERFACE);
            let _ = parse_redfish_over_ip(&bytes);
        }
        // A garbage entry file: nothing reported.
        let dir = tree_with_entry(b"\x2a\x02garbage");
        assert_eq!(probe(dir.path()), None);
        // An entry over the cap is not read at all.
        let mut huge = good.clone();
        huge.resize(MAX_ENTRY_BYTES as usize + 1, 0);
        assert_eq!(probe(tree_with_entry(&huge).path()), None);
    }

    #[test]
    fn without_dmi_sysfs_the_whole_table_is_walked() {
        // Type 1 with strings, the host interface, type 127 (end of table), then junk.
        let mut table = vec![1, 8, 0, 1, 1, 2, 0, 0];
        table.extend(b"Vendor\0Product\0\0");
        table.extend(ipv4_record([10, 20, 0, 8], 443));
        table.extend([TYPE_END_OF_TABLE, 4, 0xff, 0xff, 0, 0]);
        table.extend(ipv4_record([10, 99, 0, 1], 443));
        assert_eq!(structures_of_type(&table, TYPE_HOST_INTERFACE).len(), 1);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(TABLE_FILE);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, &table).unwrap();
        assert_eq!(probe(dir.path()).unwrap().address, "https://10.20.0.8");
        // A header whose length is below four bytes ends the walk.
        assert!(structures_of_type(&[42, 2, 0, 0, 0, 0], 42).is_empty());
        // Strings without their final double NUL end it too, after the structure.
        assert_eq!(structures_of_type(&[42, 4, 0, 0, b'x'], 42).len(), 1);
    }

    #[test]
    fn lan_print_output_gives_the_address_and_its_source() {
        assert_eq!(
            parse_lan_print(LAN_PRINT),
            Some(LanAddress {
                ip: "10.20.0.5".parse().unwrap(),
                source: Some("DHCP Address".to_string())
            })
        );
        let unset = LAN_PRINT.replace("10.20.0.5", "0.0.0.0");
        assert_eq!(
            parse_lan_print(&unset).map(|l| l.ip),
            Some(Ipv4Addr::UNSPECIFIED)
        );
        assert!(!reachable(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
        assert_eq!(parse_lan_print("Channel 2 is not a LAN channel"), None);
        assert_eq!(parse_lan_print("IP Address : 10.20.0.300\n"), None);
        assert_eq!(
            parse_lan_print("IP Address :\nIP Address : 10.0.0.1\n"),
            None
        );
        assert_eq!(parse_lan_print("\u{0}\u{ffff}::::\n:"), None);
    }

    #[test]
    fn ipmi_tries_channels_until_a_reachable_address_and_only_with_a_device() {
        let dir = tempfile::tempdir().unwrap();
        let mut calls = Vec::new();
        let mut never = |c: u8| {
            calls.push(c);
            LanPrint::Output(LAN_PRINT.to_string())
        };
        assert_eq!(from_ipmi(dir.path(), &mut never), None);
        assert!(calls.is_empty(), "ran without a device");
        fs::create_dir_all(dir.path().join("dev/ipmi")).unwrap();
        fs::write(dir.path().join("dev/ipmi/0"), "").unwrap();
        let mut calls = Vec::new();
        let mut lan = |c: u8| {
            calls.push(c);
            match c {
                1 => LanPrint::Output("Channel 1 is not a LAN channel\n".to_string()),
                _ => LanPrint::Output(LAN_PRINT.to_string()),
            }
        };
        let bmc = from_ipmi(dir.path(), &mut lan).unwrap();
        assert_eq!(
            (bmc.driver.as_str(), bmc.address.as_str()),
            ("ipmi", "10.20.0.5")
        );
        assert_eq!(calls, [1, 2]);
        // 0.0.0.0 everywhere: every channel tried, nothing reported.
        let mut calls = Vec::new();
        let mut unset = |c: u8| {
            calls.push(c);
            LanPrint::Output(LAN_PRINT.replace("10.20.0.5", "0.0.0.0"))
        };
        assert_eq!(from_ipmi(dir.path(), &mut unset), None);
        assert_eq!(calls, [1, 2, 3]);
        // A run that had to be killed stops the probe.
        let mut calls = Vec::new();
        let mut hung = |c: u8| {
            calls.push(c);
            LanPrint::Stop("timed out after 5 s".to_string())
        };
        assert_eq!(from_ipmi(dir.path(), &mut hung), None);
        assert_eq!(calls, [1]);
        // Under a root other than `/`, the real probe never runs the machine's ipmitool.
        assert_eq!(probe(dir.path()), None);
    }

    #[test]
    fn the_host_interface_wins_over_ipmi() {
        let dir = tree_with_entry(&ipv4_record([10, 20, 0, 7], 443));
        fs::create_dir_all(dir.path().join("dev")).unwrap();
        fs::write(dir.path().join("dev/ipmi0"), "").unwrap();
        assert_eq!(probe(dir.path()).unwrap().driver, "redfish");
    }

    #[test]
    fn lan_print_runs_the_command_under_a_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("ipmitool");
        fs::write(
            &fake,
            format!("[ \"$*\" = 'lan print 2' ] || exit 3\ncat <<'EOF'\n{LAN_PRINT}EOF\nexit 1\n"),
        )
        .unwrap();
        let command = format!("sh {}", exec::shell_quote(&fake.to_string_lossy()));
        let LanPrint::Output(text) = lan_print(&command, 2, Duration::from_secs(10)) else {
            panic!("expected output");
        };
        assert_eq!(parse_lan_print(&text).unwrap().ip.to_string(), "10.20.0.5");
        let slow = dir.path().join("slow");
        fs::write(&slow, "sleep 30\n").unwrap();
        let command = format!("sh {}", exec::shell_quote(&slow.to_string_lossy()));
        let started = std::time::Instant::now();
        let LanPrint::Stop(why) = lan_print(&command, 1, Duration::from_secs(1)) else {
            panic!("expected a stop");
        };
        assert!(why.contains("timed out"), "{why}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
