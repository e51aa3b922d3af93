//! `stoker serve --demo-nodes N`: N simulated nodes beside the daemon, so a newcomer sees
//! discovery and a whole deployment without hardware. Each one walks the real boot chain over
//! loopback: a DHCP DISCOVER/REQUEST to the daemon's DHCP server and a TFTP read of its boot
//! file when those services run, then its iPXE script over HTTP (which carries its one-time boot
//! token; asked for from the leased address when that is a loopback one), then the agent itself ([`crate::agent::deploy::simulate`]) in a sandbox directory
//! under the data directory: hello with the boot token, and the deploy loop. Shell commands of
//! the release are recorded, not run (they are written for real nodes). The demo serves a small
//! OS image of its own ([`write_os_image`]) unless `deploy.image_url` names one; after
//! `reboot_to_disk` a node "boots its installed OS" ([`crate::agent::deploy::installed_os`]):
//! the service agent starts in the root filesystem `deploy.configure` wrote, with the
//! credential installed there, and takes the later deployments (day 2).

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;
use std::time::Duration;

use dhcproto::v4::{self, Message, MessageType};
use dhcproto::{Decodable, Encodable, Encoder};

use crate::tftp::session::Packet;

/// Where the simulated nodes find the master's services.
#[derive(Debug, Clone)]
pub struct Services {
    pub http: String,
    pub dhcp: Option<SocketAddr>,
    pub tftp: Option<SocketAddr>,
}

/// The MAC of demo node `i` (locally administered, 52:54:00:de:xx:xx).
pub fn mac(i: usize) -> String {
    format!("52:54:00:de:{:02x}:{:02x}", (i >> 8) & 0xff, i & 0xff)
}

/// Start `n` simulated nodes; they stop when `stop` is set.
pub fn start(
    n: usize,
    services: &Services,
    data_dir: &Path,
    stop: &Arc<AtomicBool>,
) -> Vec<JoinHandle<()>> {
    (1..=n)
        .map(|i| {
            let services = services.clone();
            let sandbox: PathBuf = data_dir.join("demo").join(format!("node-{i}"));
            let stop = Arc::clone(stop);
            std::thread::Builder::new()
                .name(format!("demo-node-{i}"))
                .spawn(move || node(i, &services, &sandbox, stop))
                .unwrap_or_else(|e| {
                    tracing::error!(%e, "cannot start a demo node");
                    std::thread::spawn(|| {})
                })
        })
        .collect()
}

fn node(i: usize, services: &Services, sandbox: &Path, stop: Arc<AtomicBool>) {
    let mac = mac(i);
    // Only a DHCP server on loopback is asked: anything else is a real network.
    let mut leased = None;
    if let Some(dhcp) = services.dhcp.filter(|a| a.ip().is_loopback()) {
        match dhcp_lease(dhcp, &mac) {
            Ok(ip) => {
                tracing::info!(%mac, %ip, "demo node leased an address");
                leased = Some(ip);
            }
            Err(e) => tracing::warn!(%mac, "demo node DHCP: {e}"),
        }
    }
    if let Some(tftp) = services.tftp {
        match tftp_get(tftp, "stoker.ipxe") {
            Ok(n) => tracing::info!(%mac, bytes = n, "demo node fetched its boot file over TFTP"),
            Err(e) => tracing::warn!(%mac, "demo node TFTP: {e}"),
        }
    }
    // The boot script carries the one-time boot token; keep it as the node's first credential.
    // It is asked for from the leased address when that is a loopback one, as a real node does:
    // the token goes only to the address the node is known by (`boot.token_binding`).
    let script = match boot_script(&services.http, &mac, leased.filter(|ip| ip.is_loopback())) {
        Ok(script) => script,
        Err(e) => {
            tracing::warn!(%mac, "demo node boot script: {e}; saying hello without a token");
            String::new()
        }
    };
    let token = script
        .split_whitespace()
        .find_map(|w| w.strip_prefix("stoker.token="))
        .map(str::to_string);
    let run = sandbox.join("run");
    if let Some(t) = token
        && std::fs::create_dir_all(&run).is_ok()
        && !run.join("stoker-agent.token").exists()
    {
        let _ = std::fs::write(run.join("stoker-agent.token"), t);
    }
    match crate::agent::deploy::simulate(&services.http, sandbox, &mac, stop) {
        Ok(end) => tracing::info!(%mac, ?end, "demo node finished"),
        Err(e) => tracing::warn!(%mac, "demo node stopped: {e}"),
    }
}

/// The demo's OS image: a sparse 16 MiB disk with an MBR and one 11 MiB partition holding the
/// superblock of an ext4 filesystem labelled `stoker-root` (no more of a filesystem: in a
/// sandbox the root filesystem "mounted" by `deploy.configure` is a directory beside the
/// disk). Served under `/boot/images/` so the demo's nodes run `deploy.write_image` for real.
pub fn write_os_image(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const SECTOR: u64 = 512;
    const START: u64 = 2048;
    const SIZE: u64 = 16 * 1024 * 1024;
    // The root partition ends 4 MiB before the image does: a sandbox's disk is only as large
    // as the image written to it, and the config drive goes after the last partition.
    let sectors = (SIZE - 4 * 1024 * 1024) / SECTOR - START;
    let mut mbr = [0u8; 512];
    let entry = &mut mbr[446..462];
    entry[4] = 0x83;
    entry[8..12].copy_from_slice(&(START as u32).to_le_bytes());
    entry[12..16].copy_from_slice(&(sectors as u32).to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xAA;
    let mut sb = [0u8; 1024];
    sb[56..58].copy_from_slice(&0xEF53u16.to_le_bytes());
    // extents: an ext4 feature.
    sb[0x60..0x64].copy_from_slice(&0x40u32.to_le_bytes());
    sb[120..131].copy_from_slice(b"stoker-root");
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let f = std::fs::File::create(&tmp)?;
    f.set_len(SIZE)?;
    f.write_all_at(&mbr, 0)?;
    f.write_all_at(&sb, START * SECTOR + 1024)?;
    f.sync_all()?;
    std::fs::rename(tmp, path)
}

/// `GET /boot/{mac}.ipxe` over plain HTTP/1.0, from `from` when given (any 127/8 address is
/// this host's), again after a rate-limit answer; the script.
fn boot_script(http: &str, mac: &str, from: Option<std::net::Ipv4Addr>) -> Result<String, String> {
    use std::io::{Read, Write};
    let authority = http.strip_prefix("http://").unwrap_or(http);
    let server: SocketAddr = authority
        .parse()
        .map_err(|e| format!("master address {authority}: {e}"))?;
    for _ in 0..10 {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(server),
            socket2::Type::STREAM,
            None,
        )
        .map_err(|e| e.to_string())?;
        if let Some(ip) = from {
            socket
                .bind(&SocketAddr::from((ip, 0)).into())
                .map_err(|e| format!("cannot send from {ip}: {e}"))?;
        }
        socket
            .connect_timeout(&server.into(), Duration::from_secs(5))
            .map_err(|e| e.to_string())?;
        let mut stream: std::net::TcpStream = socket.into();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        write!(
            stream,
            "GET /boot/{mac}.ipxe HTTP/1.0\r\nHost: {authority}\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .map_err(|e| e.to_string())?;
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head.split_whitespace().nth(1).unwrap_or("");
        match status {
            "200" => return Ok(body.to_string()),
            "429" => std::thread::sleep(Duration::from_secs(1)),
            other => return Err(format!("HTTP {other}: {}", body.trim())),
        }
    }
    Err("rate-limited ten times".to_string())
}

fn chaddr(mac: &str) -> Vec<u8> {
    mac.split(':')
        .filter_map(|b| u8::from_str_radix(b, 16).ok())
        .collect()
}

/// DISCOVER, OFFER, REQUEST, ACK with the daemon's DHCP server; the leased address.
fn dhcp_lease(server: SocketAddr, mac: &str) -> Result<std::net::Ipv4Addr, String> {
    let sock = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let hw = chaddr(mac);
    let xid = u32::from_be_bytes([hw[2], hw[3], hw[4], hw[5]]);
    let send = |ty: MessageType, req: Option<std::net::Ipv4Addr>| -> Result<Message, String> {
        let mut m = Message::default();
        m.set_xid(xid)
            .set_flags(v4::Flags::default().set_broadcast());
        m.set_chaddr(&hw);
        m.opts_mut().insert(v4::DhcpOption::MessageType(ty));
        if let Some(ip) = req {
            m.opts_mut().insert(v4::DhcpOption::RequestedIpAddress(ip));
        }
        m.opts_mut().insert(v4::DhcpOption::ClassIdentifier(
            b"PXEClient:Arch:00000".to_vec(),
        ));
        let mut buf = Vec::new();
        m.encode(&mut Encoder::new(&mut buf))
            .map_err(|e| e.to_string())?;
        sock.send_to(&buf, server).map_err(|e| e.to_string())?;
        let mut rx = [0u8; 1500];
        let (n, _) = sock.recv_from(&mut rx).map_err(|e| e.to_string())?;
        Message::decode(&mut dhcproto::Decoder::new(&rx[..n])).map_err(|e| e.to_string())
    };
    let offer = send(MessageType::Discover, None)?;
    let ack = send(MessageType::Request, Some(offer.yiaddr()))?;
    Ok(ack.yiaddr())
}

/// Read `file` over TFTP (octet, default block size); the number of bytes.
fn tftp_get(server: SocketAddr, file: &str) -> Result<usize, String> {
    let sock = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let mut rrq = vec![0, 1];
    rrq.extend_from_slice(file.as_bytes());
    rrq.push(0);
    rrq.extend_from_slice(b"octet\0");
    sock.send_to(&rrq, server).map_err(|e| e.to_string())?;
    let mut total = 0;
    let mut buf = [0u8; 516];
    loop {
        let (n, from) = sock.recv_from(&mut buf).map_err(|e| e.to_string())?;
        match Packet::parse(&buf[..n]).map_err(|e| e.to_string())? {
            Packet::Data { block, len } => {
                total += len;
                let mut ack = vec![0, 4];
                ack.extend_from_slice(&block.to_be_bytes());
                sock.send_to(&ack, from).map_err(|e| e.to_string())?;
                if len < 512 {
                    return Ok(total);
                }
            }
            Packet::Error { message, .. } => return Err(message),
            other => return Err(format!("unexpected TFTP packet {other:?}")),
        }
    }
}
