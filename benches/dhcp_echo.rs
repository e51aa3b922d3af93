//! A DHCP server that keeps nothing, for `benches/pxe.sh`: it answers every DISCOVER with an
//! OFFER and every REQUEST with an ACK at once, from one thread with a blocking socket, the
//! address made from the client's MAC (no lease table, no disk, no rate limit). perfdhcp's DORA
//! rate against it is the ceiling of the bench itself (the client, the lab's veth, the cores
//! left), against which stoker's and dnsmasq's figures are read.
//!
//! `cargo build --release --bench dhcp_echo` builds it; then `dhcp_echo IFACE SERVER_IP
//! PREFIX_LEN`: bound to 0.0.0.0:67 on IFACE (needs root), replies to the relay (`giaddr`, port
//! 67), else broadcast to port 68; runs
//! until killed. Not part of CI.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::process::ExitCode;

use dhcproto::v4::{DhcpOption, Message, MessageType, Opcode};
use dhcproto::{Decodable, Decoder, Encodable};

const USAGE: &str = "usage: dhcp_echo IFACE SERVER_IP PREFIX_LEN";

fn socket(iface: &str) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_broadcast(true)?;
    s.bind_device(Some(iface.as_bytes()))?;
    s.set_recv_buffer_size(4 << 20)?;
    s.bind(&SocketAddr::from(([0, 0, 0, 0], 67)).into())?;
    Ok(s.into())
}

/// The address for `mac` inside `net`/`prefix`: its host part from the MAC's last bytes,
/// never the network, the broadcast or the server's own address.
fn address_for(mac: &[u8], net: u32, prefix: u32, server: Ipv4Addr) -> Ipv4Addr {
    let host_bits = 32 - prefix;
    let span = (1u64 << host_bits) - 3;
    let tail = mac
        .iter()
        .rev()
        .take(4)
        .enumerate()
        .fold(0u64, |acc, (i, b)| acc | (u64::from(*b) << (8 * i)));
    let mut host = u32::try_from(tail % span).unwrap_or(0) + 2;
    if net | host == u32::from(server) {
        host += 1;
    }
    Ipv4Addr::from(net | host)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(iface), Some(server), Some(prefix)) = (
        args.first(),
        args.get(1).and_then(|s| s.parse::<Ipv4Addr>().ok()),
        args.get(2).and_then(|s| s.parse::<u32>().ok()),
    ) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if !(8..=30).contains(&prefix) {
        eprintln!("{USAGE}: PREFIX_LEN between 8 and 30");
        return ExitCode::from(2);
    }
    let mask = u32::MAX << (32 - prefix);
    let net = u32::from(server) & mask;
    let sock = match socket(iface) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dhcp_echo: cannot bind 0.0.0.0:67 on {iface}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let broadcast = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::BROADCAST, 68));
    let mut buf = [0u8; 1500];
    loop {
        let Ok((n, _)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Ok(req) = Message::decode(&mut Decoder::new(&buf[..n])) else {
            continue;
        };
        let kind = match req.opts().msg_type() {
            Some(MessageType::Discover) => MessageType::Offer,
            Some(MessageType::Request) => MessageType::Ack,
            _ => continue,
        };
        let ip = match req.opts().get(dhcproto::v4::OptionCode::RequestedIpAddress) {
            Some(DhcpOption::RequestedIpAddress(ip)) if kind == MessageType::Ack => *ip,
            _ => address_for(req.chaddr(), net, prefix, server),
        };
        let mut m = Message::default();
        m.set_opcode(Opcode::BootReply)
            .set_xid(req.xid())
            .set_flags(req.flags())
            .set_yiaddr(ip)
            .set_siaddr(server)
            .set_giaddr(req.giaddr())
            .set_chaddr(req.chaddr());
        let opts = m.opts_mut();
        opts.insert(DhcpOption::MessageType(kind));
        opts.insert(DhcpOption::ServerIdentifier(server));
        opts.insert(DhcpOption::AddressLeaseTime(3600));
        opts.insert(DhcpOption::SubnetMask(Ipv4Addr::from(mask)));
        // A relay (perfdhcp plays one: it sets giaddr) gets the reply on its port 67.
        let to = if req.giaddr().is_unspecified() {
            broadcast
        } else {
            SocketAddr::V4(SocketAddrV4::new(req.giaddr(), 67))
        };
        if let Ok(bytes) = m.to_vec() {
            let _ = sock.send_to(&bytes, to);
        }
    }
}
