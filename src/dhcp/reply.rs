//! The DHCP server's decisions (RFC 2131): for each request, the reply to send, where to send
//! it, and the lease change to record. DISCOVER/OFFER, REQUEST/ACK or NAK (selecting,
//! init-reboot, renewing, rebinding), DECLINE, RELEASE and INFORM; relays (`giaddr`); the two
//! modes; and the network-boot answer for each kind of client; and what counts as a DHCP
//! message at all (the magic cookie). Pure: data in, data out.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use dhcproto::Decodable;
use dhcproto::v4::{DhcpOption, Flags, Message, MessageType, Opcode, OptionCode, UnknownOption};

use super::classify::{ClientKind, Firmware, classify};
use super::lease::{Lease, LeaseChange, LeaseState, LeaseTable};
use crate::model::Mac;

/// Which clients the server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every client on a configured subnet; NAK requests for addresses that are not theirs.
    Authoritative,
    /// Only MACs with a reservation; stay silent to everyone else (another DHCP server may
    /// serve them).
    ReservationOnly,
}

/// One served subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    pub network: Ipv4Addr,
    pub prefix: u8,
    pub pool_start: Ipv4Addr,
    pub pool_end: Ipv4Addr,
    pub router: Option<Ipv4Addr>,
    pub dns: Vec<Ipv4Addr>,
    /// Seconds.
    pub lease_time: u32,
    pub reservations: BTreeMap<Mac, Ipv4Addr>,
}

impl Subnet {
    pub fn mask(&self) -> Ipv4Addr {
        Ipv4Addr::from(
            u32::MAX
                .checked_shl(32 - u32::from(self.prefix))
                .unwrap_or(0),
        )
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::from(self.mask());
        u32::from(ip) & mask == u32::from(self.network) & mask
    }

    fn in_pool(&self, ip: Ipv4Addr) -> bool {
        (u32::from(self.pool_start)..=u32::from(self.pool_end)).contains(&u32::from(ip))
    }

    fn reserved_for_other(&self, ip: Ipv4Addr, mac: &Mac) -> bool {
        self.reservations.iter().any(|(m, r)| *r == ip && m != mac)
    }
}

/// The dynamic pools' size and how much of it is free, for the metrics: `(addresses, free)`,
/// where `addresses` leaves out the pool addresses a reservation keeps for its MAC, and `free`
/// those of the rest that no lease in `held` (the unexpired ones, of any state) holds.
pub fn pool_usage(subnets: &[Subnet], held: &std::collections::BTreeSet<Ipv4Addr>) -> (u64, u64) {
    let (mut addresses, mut free) = (0u64, 0u64);
    for s in subnets {
        let (lo, hi) = (u32::from(s.pool_start), u32::from(s.pool_end));
        if lo > hi {
            continue;
        }
        let reserved: std::collections::BTreeSet<Ipv4Addr> = s
            .reservations
            .values()
            .copied()
            .filter(|ip| s.in_pool(*ip))
            .collect();
        let size = u64::from(hi - lo) + 1 - reserved.len() as u64;
        let taken = held
            .range(s.pool_start..=s.pool_end)
            .filter(|ip| !reserved.contains(ip))
            .count() as u64;
        addresses += size;
        free += size.saturating_sub(taken);
    }
    (addresses, free)
}

/// Boot files and URLs handed to network-boot clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootFiles {
    /// Base URL of the master's HTTP server, like `http://10.20.0.2:8000`.
    pub http_base: String,
    pub bios: String,
    pub uefi_x64: String,
    pub uefi_arm64: String,
}

/// Everything the decisions depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpConfig {
    /// This server's address on the provisioning network (option 54 and next-server).
    pub server_ip: Ipv4Addr,
    pub mode: Mode,
    pub subnets: Vec<Subnet>,
    pub boot: BootFiles,
    /// How long an offer holds its address, in seconds.
    pub offer_hold: u32,
}

/// Where a reply goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// To the relay agent, port 67.
    Relay(Ipv4Addr),
    /// Unicast to a client that has an address, port 68.
    Client(Ipv4Addr),
    /// 255.255.255.255:68.
    Broadcast,
}

/// What to do about one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub reply: Option<(Message, Destination)>,
    pub change: Option<LeaseChange>,
}

/// Why a request got no answer (counted and logged at debug level).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    NotARequest,
    NoMessageType,
    NotEthernet,
    NoSubnet,
    NotReserved,
    PoolExhausted,
    OtherServer,
    UnknownLease,
    UnsupportedType,
}

/// Why a datagram is not a DHCP request to decide on (dropped, counted as malformed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("no DHCP magic cookie after the BOOTP header")]
    BadCookie,
    #[error("option {code} is {len} bytes long; {expected}")]
    OptionLength {
        code: u8,
        len: usize,
        expected: &'static str,
    },
    #[error("{0}")]
    Decode(String),
}

/// Where the magic cookie sits: after the fixed BOOTP header (RFC 2131 §3).
const COOKIE_AT: usize = 236;

/// Decode a datagram as a DHCP message. dhcproto reads the magic cookie (99.130.83.99) but does
/// not check it; a datagram without it is plain BOOTP or garbage and is never answered.
pub fn decode(bytes: &[u8]) -> Result<Message, Malformed> {
    match bytes.get(COOKIE_AT..COOKIE_AT + 4) {
        Some(cookie) if cookie == dhcproto::v4::MAGIC => {}
        Some(_) => return Err(Malformed::BadCookie),
        None => {
            return Err(Malformed::Decode(format!(
                "{} bytes is too short",
                bytes.len()
            )));
        }
    }
    check_option_lengths(&bytes[COOKIE_AT + 4..])?;
    Message::decode(&mut dhcproto::Decoder::new(bytes))
        .map_err(|e| Malformed::Decode(e.to_string()))
}

/// Options whose length dhcproto asserts (`debug_assert!`) or subtracts from without a check,
/// and the lengths it can read: outside them a debug build panics in the decoder, and a release
/// build reads a wrapped-around length.
fn option_length_ok(code: u8, len: usize) -> Option<&'static str> {
    let (ok, expected) = match code {
        80 => (len == 0, "Rapid Commit has no value"),
        81 => (len >= 3, "Client FQDN needs at least 3"),
        94 => (len == 3, "Client Network Interface needs exactly 3"),
        151 => (len >= 1, "a bulk lease query status code needs at least 1"),
        152..=155 => (len == 4, "a bulk lease query time needs exactly 4"),
        _ => return None,
    };
    (!ok).then_some(expected)
}

/// Walk the options after the magic cookie as dhcproto's decoder reads them, and refuse one
/// that [`option_length_ok`] knows at a length the decoder cannot take. Like the decoder, the
/// walk joins consecutive options with the same code into one value (RFC 3396), skips pads,
/// ends at End or at the end of the datagram, and stops without reading further at an option
/// that runs past the datagram (the decoder drops it and what it would have joined).
fn check_option_lengths(mut opts: &[u8]) -> Result<(), Malformed> {
    let check = |run: Option<(u8, usize)>| match run {
        Some((code, len)) => match option_length_ok(code, len) {
            Some(expected) => Err(Malformed::OptionLength {
                code,
                len,
                expected,
            }),
            None => Ok(()),
        },
        None => Ok(()),
    };
    // The option being read: its code and the length of its value so far.
    let mut run: Option<(u8, usize)> = None;
    while let Some(&code) = opts.first() {
        if run.is_some_and(|(c, _)| c != code) {
            check(run.take())?;
        }
        match code {
            0 => opts = &opts[1..],
            255 => return Ok(()),
            _ => {
                let Some(len) = opts.get(1).map(|l| usize::from(*l)) else {
                    return Ok(());
                };
                let Some(next) = opts.get(2 + len..) else {
                    return Ok(());
                };
                run = Some((code, run.map_or(0, |(_, joined)| joined) + len));
                opts = next;
            }
        }
    }
    check(run)
}

/// The client's Ethernet address. `hlen` is checked before `chaddr` is read: dhcproto slices
/// `chaddr` by `hlen`, and a forged `hlen` above 16 would otherwise panic.
pub fn client_mac(req: &Message) -> Option<Mac> {
    if req.hlen() != 6 {
        return None;
    }
    let octets: [u8; 6] = req.chaddr().get(..6)?.try_into().ok()?;
    Some(Mac::from_octets(octets))
}

fn requested_ip(req: &Message) -> Option<Ipv4Addr> {
    match req.opts().get(OptionCode::RequestedIpAddress) {
        Some(DhcpOption::RequestedIpAddress(ip)) => Some(*ip),
        _ => None,
    }
}

fn server_id(req: &Message) -> Option<Ipv4Addr> {
    match req.opts().get(OptionCode::ServerIdentifier) {
        Some(DhcpOption::ServerIdentifier(ip)) => Some(*ip),
        _ => None,
    }
}

/// The subnet a request belongs to: the relay's, else the renewing client's, else ours.
fn subnet_for<'a>(cfg: &'a DhcpConfig, req: &Message) -> Option<&'a Subnet> {
    let anchor = if !req.giaddr().is_unspecified() {
        req.giaddr()
    } else if !req.ciaddr().is_unspecified() {
        req.ciaddr()
    } else {
        cfg.server_ip
    };
    cfg.subnets.iter().find(|s| s.contains(anchor))
}

/// The boot file (BOOTP `file` and option 67) for a client, if it network-boots.
pub fn boot_file(kind: ClientKind, mac: &Mac, boot: &BootFiles) -> Option<String> {
    let base = boot.http_base.trim_end_matches('/');
    match kind {
        ClientKind::Plain => None,
        ClientKind::Ipxe(_) => Some(format!("{base}/boot/{mac}.ipxe")),
        ClientKind::HttpBoot(Firmware::UefiArm64) => {
            Some(format!("{base}/boot/ipxe/{}", boot.uefi_arm64))
        }
        ClientKind::HttpBoot(_) => Some(format!("{base}/boot/ipxe/{}", boot.uefi_x64)),
        ClientKind::Pxe(Firmware::Bios) => Some(boot.bios.clone()),
        ClientKind::Pxe(Firmware::UefiX64) => Some(boot.uefi_x64.clone()),
        ClientKind::Pxe(Firmware::UefiArm64) => Some(boot.uefi_arm64.clone()),
        ClientKind::Pxe(Firmware::UefiIa32 | Firmware::Other(_)) => None,
    }
}

fn base_reply(req: &Message, cfg: &DhcpConfig, kind: MessageType) -> Message {
    let mut m = Message::default();
    m.set_opcode(Opcode::BootReply)
        .set_htype(req.htype())
        .set_xid(req.xid())
        .set_flags(req.flags())
        .set_giaddr(req.giaddr())
        .set_chaddr(req.chaddr());
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    m.opts_mut()
        .insert(DhcpOption::ServerIdentifier(cfg.server_ip));
    m
}

/// Add the subnet's parameters and the boot answer to an OFFER, ACK or INFORM reply.
fn configure(m: &mut Message, req: &Message, cfg: &DhcpConfig, subnet: &Subnet, mac: &Mac) {
    m.opts_mut().insert(DhcpOption::SubnetMask(subnet.mask()));
    if let Some(r) = subnet.router {
        m.opts_mut().insert(DhcpOption::Router(vec![r]));
    }
    if !subnet.dns.is_empty() {
        m.opts_mut()
            .insert(DhcpOption::DomainNameServer(subnet.dns.clone()));
    }
    let kind = classify(req);
    let Some(file) = boot_file(kind, mac, &cfg.boot) else {
        return;
    };
    m.set_siaddr(cfg.server_ip);
    m.set_fname_str(&file);
    m.set_sname_str(cfg.server_ip.to_string());
    m.opts_mut().insert(DhcpOption::TFTPServerName(
        cfg.server_ip.to_string().into_bytes(),
    ));
    m.opts_mut()
        .insert(DhcpOption::BootfileName(file.into_bytes()));
    match kind {
        // No option 60 for PXE ROMs: "PXEClient" in an offer announces a PXE boot server, and
        // without option 43 OVMF then goes looking for one (boot server discovery) instead of
        // loading `file` (seen in the lab: "UEFI PXEv4 ... Not Found"). A plain offer with
        // siaddr and file is what every ROM takes. HTTP boot, however, needs HTTPClient.
        ClientKind::Pxe(_) => {}
        ClientKind::HttpBoot(_) => {
            m.opts_mut()
                .insert(DhcpOption::ClassIdentifier(b"HTTPClient".to_vec()));
        }
        // iPXE: no-pxedhcp (175.176 = 1), so it does not wait for ProxyDHCP offers.
        ClientKind::Ipxe(_) => {
            m.opts_mut().insert(DhcpOption::Unknown(UnknownOption::new(
                OptionCode::Unknown(175),
                vec![176, 1, 1],
            )));
        }
        ClientKind::Plain => {}
    }
}

fn lease_times(m: &mut Message, lease_time: u32) {
    m.opts_mut()
        .insert(DhcpOption::AddressLeaseTime(lease_time));
    m.opts_mut().insert(DhcpOption::Renewal(lease_time / 2));
    m.opts_mut()
        .insert(DhcpOption::Rebinding(lease_time / 8 * 7));
}

/// RFC 2131 §4.1: to the relay; else to a client that has an address; else broadcast (we cannot
/// unicast to an address the client does not have yet without writing the ARP table).
fn destination(req: &Message) -> Destination {
    if !req.giaddr().is_unspecified() {
        Destination::Relay(req.giaddr())
    } else if !req.ciaddr().is_unspecified() {
        Destination::Client(req.ciaddr())
    } else {
        Destination::Broadcast
    }
}

fn nak(req: &Message, cfg: &DhcpConfig, why: &str) -> Outcome {
    let mut m = base_reply(req, cfg, MessageType::Nak);
    m.opts_mut().insert(DhcpOption::Message(why.to_string()));
    // A NAK is broadcast unless relayed (§4.3.2): the client's address is the problem.
    let mut flags = req.flags();
    if req.giaddr().is_unspecified() {
        flags = Flags::default().set_broadcast();
    }
    m.set_flags(flags);
    let to = if req.giaddr().is_unspecified() {
        Destination::Broadcast
    } else {
        Destination::Relay(req.giaddr())
    };
    Outcome {
        reply: Some((m, to)),
        change: None,
    }
}

fn ack(
    req: &Message,
    cfg: &DhcpConfig,
    subnet: &Subnet,
    mac: &Mac,
    ip: Ipv4Addr,
    now: i64,
) -> Outcome {
    let mut m = base_reply(req, cfg, MessageType::Ack);
    m.set_yiaddr(ip).set_ciaddr(req.ciaddr());
    lease_times(&mut m, subnet.lease_time);
    configure(&mut m, req, cfg, subnet, mac);
    Outcome {
        reply: Some((m, destination(req))),
        change: Some(LeaseChange::Upsert(Lease {
            ip,
            mac: mac.clone(),
            expires_at: now + i64::from(subnet.lease_time),
            state: LeaseState::Bound,
        })),
    }
}

/// Decide what to answer to `req`.
pub fn handle(
    req: &Message,
    cfg: &DhcpConfig,
    leases: &mut LeaseTable,
    now: i64,
) -> Result<Outcome, Ignored> {
    if req.opcode() != Opcode::BootRequest {
        return Err(Ignored::NotARequest);
    }
    let kind = req.opts().msg_type().ok_or(Ignored::NoMessageType)?;
    let mac = client_mac(req).ok_or(Ignored::NotEthernet)?;
    let subnet = subnet_for(cfg, req).ok_or(Ignored::NoSubnet)?;
    let reservation = subnet.reservations.get(&mac).copied();
    if cfg.mode == Mode::ReservationOnly && reservation.is_none() {
        return Err(Ignored::NotReserved);
    }
    match kind {
        MessageType::Discover => {
            let ip = reservation
                .or_else(|| {
                    leases
                        .by_mac(&mac)
                        .map(|l| l.ip)
                        .filter(|ip| subnet.in_pool(*ip) && leases.available(*ip, &mac, now))
                })
                .or_else(|| {
                    requested_ip(req).filter(|ip| {
                        subnet.in_pool(*ip)
                            && !subnet.reserved_for_other(*ip, &mac)
                            && leases.available(*ip, &mac, now)
                    })
                })
                .or_else(|| {
                    leases.next_free(subnet.pool_start, subnet.pool_end, &mac, now, |ip| {
                        subnet.reserved_for_other(ip, &mac)
                    })
                })
                .ok_or(Ignored::PoolExhausted)?;
            let mut m = base_reply(req, cfg, MessageType::Offer);
            m.set_yiaddr(ip);
            lease_times(&mut m, subnet.lease_time);
            configure(&mut m, req, cfg, subnet, &mac);
            // Keep a bound lease bound; otherwise hold the address for the offer.
            let change = match leases.by_ip(ip) {
                Some(l) if l.mac == mac && l.state == LeaseState::Bound && l.expires_at > now => {
                    None
                }
                _ => Some(LeaseChange::Upsert(Lease {
                    ip,
                    mac: mac.clone(),
                    expires_at: now + i64::from(cfg.offer_hold),
                    state: LeaseState::Offered,
                })),
            };
            Ok(Outcome {
                reply: Some((m, destination(req))),
                change,
            })
        }
        MessageType::Request => {
            match (server_id(req), requested_ip(req), req.ciaddr()) {
                // SELECTING: the client picked a server.
                (Some(sid), requested, _) => {
                    if sid != cfg.server_ip {
                        // It chose another server: free what we offered it.
                        let change = leases
                            .by_mac(&mac)
                            .filter(|l| l.state == LeaseState::Offered)
                            .map(|l| LeaseChange::Remove(l.ip));
                        return match change {
                            Some(c) => Ok(Outcome {
                                reply: None,
                                change: Some(c),
                            }),
                            None => Err(Ignored::OtherServer),
                        };
                    }
                    let ip = requested.unwrap_or(req.ciaddr());
                    let ours = leases.by_mac(&mac).is_some_and(|l| l.ip == ip);
                    if ours && leases.available(ip, &mac, now) {
                        Ok(ack(req, cfg, subnet, &mac, ip, now))
                    } else {
                        Ok(nak(req, cfg, "requested address was not offered to you"))
                    }
                }
                // INIT-REBOOT: a client that remembers an address.
                (None, Some(ip), ciaddr) if ciaddr.is_unspecified() => {
                    let allowed = subnet.contains(ip)
                        && reservation.is_none_or(|r| r == ip)
                        && !subnet.reserved_for_other(ip, &mac);
                    let ours = leases.by_mac(&mac).is_some_and(|l| l.ip == ip);
                    if allowed
                        && (ours || (subnet.in_pool(ip) || reservation == Some(ip)))
                        && leases.available(ip, &mac, now)
                    {
                        Ok(ack(req, cfg, subnet, &mac, ip, now))
                    } else {
                        Ok(nak(req, cfg, "address not valid on this network"))
                    }
                }
                // RENEWING (unicast) or REBINDING (broadcast): ciaddr is the address.
                (None, _, ciaddr) if !ciaddr.is_unspecified() => {
                    let ours = leases.by_mac(&mac).is_some_and(|l| l.ip == ciaddr);
                    if ours && leases.available(ciaddr, &mac, now) {
                        Ok(ack(req, cfg, subnet, &mac, ciaddr, now))
                    } else if subnet.contains(ciaddr) {
                        Ok(nak(req, cfg, "lease unknown or taken"))
                    } else {
                        Err(Ignored::UnknownLease)
                    }
                }
                _ => Ok(nak(req, cfg, "request names no address")),
            }
        }
        MessageType::Decline => {
            let ip = requested_ip(req).ok_or(Ignored::UnknownLease)?;
            let held = leases.by_ip(ip).is_some_and(|l| l.mac == mac);
            if !held {
                return Err(Ignored::UnknownLease);
            }
            Ok(Outcome {
                reply: None,
                change: Some(LeaseChange::Upsert(Lease {
                    ip,
                    mac,
                    expires_at: now + i64::from(subnet.lease_time),
                    state: LeaseState::Declined,
                })),
            })
        }
        MessageType::Release => {
            let ip = req.ciaddr();
            match leases.by_ip(ip) {
                Some(l) if l.mac == mac && l.state != LeaseState::Declined => Ok(Outcome {
                    reply: None,
                    change: Some(LeaseChange::Remove(ip)),
                }),
                _ => Err(Ignored::UnknownLease),
            }
        }
        MessageType::Inform => {
            let mut m = base_reply(req, cfg, MessageType::Ack);
            m.set_ciaddr(req.ciaddr());
            configure(&mut m, req, cfg, subnet, &mac);
            Ok(Outcome {
                reply: Some((m, destination(req))),
                change: None,
            })
        }
        _ => Err(Ignored::UnsupportedType),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dhcproto::Encodable;
    use dhcproto::v4::Architecture;

    #[test]
    fn pool_usage_leaves_reservations_out_and_counts_held_addresses() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let mac: Mac = "52:54:00:00:00:01".parse().unwrap();
        let subnet = Subnet {
            network: ip("10.0.0.0"),
            prefix: 24,
            pool_start: ip("10.0.0.10"),
            pool_end: ip("10.0.0.19"),
            router: None,
            dns: vec![],
            lease_time: 600,
            reservations: BTreeMap::from([(mac, ip("10.0.0.12"))]),
        };
        let held =
            std::collections::BTreeSet::from([ip("10.0.0.10"), ip("10.0.0.12"), ip("10.0.0.30")]);
        assert_eq!(pool_usage(&[subnet], &held), (9, 8));
        assert_eq!(pool_usage(&[], &held), (0, 0));
    }

    #[test]
    fn decode_wants_the_magic_cookie() {
        let mut m = Message::default();
        m.opts_mut()
            .insert(DhcpOption::MessageType(MessageType::Discover));
        let mut bytes = m.to_vec().unwrap();
        assert!(decode(&bytes).is_ok());
        bytes[COOKIE_AT + 3] ^= 0xff;
        assert_eq!(decode(&bytes).unwrap_err(), Malformed::BadCookie);
        assert!(matches!(decode(&bytes[..100]), Err(Malformed::Decode(_))));
    }

    /// The fuzzer's (`fuzz/run.sh dhcp`) first finds: options at lengths dhcproto's decoder
    /// asserts against (a debug build panicked in `decode`, outside the server's catch_unwind),
    /// also when two right-sized halves of one are joined.
    #[test]
    fn options_at_lengths_the_decoder_cannot_take_are_malformed() {
        let mut m = Message::default();
        m.set_opcode(Opcode::BootRequest)
            .set_chaddr(&[0x52, 0x54, 0, 0, 0, 1]);
        m.opts_mut()
            .insert(DhcpOption::MessageType(MessageType::Discover));
        let good = m.to_vec().unwrap();
        assert_eq!(good[good.len() - 1], 255);
        let with = |option: &[u8]| {
            let mut bytes = good[..good.len() - 1].to_vec();
            bytes.extend_from_slice(option);
            bytes.push(255);
            decode(&bytes)
        };
        for (option, code, len) in [
            (&[80, 1, 0][..], 80, 1),
            // Two right-sized halves joined (RFC 3396), as the decoder joins them.
            (&[94, 3, 1, 2, 0, 94, 3, 1, 2, 0][..], 94, 6),
            (&[80, 0, 80, 1, 7][..], 80, 1),
            (&[81, 1, 0][..], 81, 1),
            (&[94, 2, 1, 2][..], 94, 2),
            (&[151, 0][..], 151, 0),
            (&[152, 2, 0, 0][..], 152, 2),
            (&[155, 5, 0, 0, 0, 0, 0][..], 155, 5),
        ] {
            match with(option) {
                Err(Malformed::OptionLength {
                    code: c, len: l, ..
                }) => {
                    assert_eq!((c, l), (code, len), "{option:?}")
                }
                other => panic!("{option:?}: {other:?}"),
            }
        }
        // The right lengths decode, and pads, End and a truncated last option stop the walk
        // as they stop the decoder.
        for option in [
            &[80, 0][..],
            &[94, 3, 1, 2, 0],
            &[152, 4, 0, 0, 0, 1],
            &[0, 0, 12, 1, b'h'],
            &[94, 3, 1, 2, 0, 0, 94, 3, 1, 2, 0],
            &[81, 1, 0, 81, 2, 0, 0, 12, 1, b'h'],
            &[80, 0, 94, 200, 1],
            &[255, 80, 9],
            &[12, 200, b'h'],
        ] {
            assert!(with(option).is_ok(), "{option:?}");
        }
    }

    fn cfg(mode: Mode) -> DhcpConfig {
        let mut reservations = BTreeMap::new();
        reservations.insert(
            "52:54:00:00:00:99".parse().unwrap(),
            Ipv4Addr::new(10, 77, 0, 50),
        );
        DhcpConfig {
            server_ip: Ipv4Addr::new(10, 77, 0, 1),
            mode,
            subnets: vec![
                Subnet {
                    network: Ipv4Addr::new(10, 77, 0, 0),
                    prefix: 24,
                    pool_start: Ipv4Addr::new(10, 77, 0, 100),
                    pool_end: Ipv4Addr::new(10, 77, 0, 102),
                    router: Some(Ipv4Addr::new(10, 77, 0, 1)),
                    dns: vec![],
                    lease_time: 3600,
                    reservations,
                },
                Subnet {
                    network: Ipv4Addr::new(10, 88, 0, 0),
                    prefix: 16,
                    pool_start: Ipv4Addr::new(10, 88, 1, 0),
                    pool_end: Ipv4Addr::new(10, 88, 1, 10),
                    router: Some(Ipv4Addr::new(10, 88, 0, 1)),
                    dns: vec![Ipv4Addr::new(10, 88, 0, 53)],
                    lease_time: 600,
                    reservations: BTreeMap::new(),
                },
            ],
            boot: BootFiles {
                http_base: "http://10.77.0.1:8000".into(),
                bios: "undionly.kpxe".into(),
                uefi_x64: "ipxe.efi".into(),
                uefi_arm64: "ipxe-arm64.efi".into(),
            },
            offer_hold: 60,
        }
    }

    fn req(kind: MessageType, mac: u8, opts: Vec<DhcpOption>) -> Message {
        let mut m = Message::default();
        m.set_opcode(Opcode::BootRequest)
            .set_xid(0x1234)
            .set_chaddr(&[0x52, 0x54, 0, 0, 0, mac]);
        m.opts_mut().insert(DhcpOption::MessageType(kind));
        for o in opts {
            m.opts_mut().insert(o);
        }
        m
    }

    fn reply(o: &Outcome) -> &Message {
        &o.reply.as_ref().unwrap().0
    }

    fn apply(t: &mut LeaseTable, o: &Outcome) {
        if let Some(c) = &o.change {
            t.apply(c);
        }
    }

    #[test]
    fn dora_then_renew_then_release() {
        let c = cfg(Mode::Authoritative);
        let mut t = LeaseTable::default();
        let offer = handle(&req(MessageType::Discover, 1, vec![]), &c, &mut t, 1000).unwrap();
        let ip = reply(&offer).yiaddr();
        assert_eq!(ip, Ipv4Addr::new(10, 77, 0, 100));
        assert_eq!(reply(&offer).opts().msg_type(), Some(MessageType::Offer));
        assert_eq!(offer.reply.as_ref().unwrap().1, Destination::Broadcast);
        assert!(
            reply(&offer)
                .fname()
                .is_none_or(|f| f.iter().all(|b| *b == 0)),
            "plain client: no boot file"
        );
        apply(&mut t, &offer);
        // A second DISCOVER gets the same offer.
        let again = handle(&req(MessageType::Discover, 1, vec![]), &c, &mut t, 1001).unwrap();
        assert_eq!(reply(&again).yiaddr(), ip);
        let ackd = handle(
            &req(
                MessageType::Request,
                1,
                vec![
                    DhcpOption::ServerIdentifier(c.server_ip),
                    DhcpOption::RequestedIpAddress(ip),
                ],
            ),
            &c,
            &mut t,
            1002,
        )
        .unwrap();
        assert_eq!(reply(&ackd).opts().msg_type(), Some(MessageType::Ack));
        assert_eq!(
            reply(&ackd).opts().get(OptionCode::AddressLeaseTime),
            Some(&DhcpOption::AddressLeaseTime(3600))
        );
        apply(&mut t, &ackd);
        assert_eq!(
            t.by_mac(&"52:54:00:00:00:01".parse().unwrap())
                .unwrap()
                .state,
            LeaseState::Bound
        );
        // Renewing: unicast from the client's address.
        let mut renew = req(MessageType::Request, 1, vec![]);
        renew.set_ciaddr(ip);
        let renewed = handle(&renew, &c, &mut t, 2000).unwrap();
        assert_eq!(renewed.reply.as_ref().unwrap().1, Destination::Client(ip));
        apply(&mut t, &renewed);
        assert_eq!(t.by_ip(ip).unwrap().expires_at, 2000 + 3600);
        let mut release = req(MessageType::Release, 1, vec![]);
        release.set_ciaddr(ip);
        let released = handle(&release, &c, &mut t, 2100).unwrap();
        assert!(released.reply.is_none());
        apply(&mut t, &released);
        assert!(t.is_empty());
    }

    #[test]
    fn naks_and_other_servers() {
        let c = cfg(Mode::Authoritative);
        let mut t = LeaseTable::default();
        // INIT-REBOOT with an address from another network.
        let o = handle(
            &req(
                MessageType::Request,
                2,
                vec![DhcpOption::RequestedIpAddress(Ipv4Addr::new(
                    192, 168, 1, 5,
                ))],
            ),
            &c,
            &mut t,
            10,
        )
        .unwrap();
        assert_eq!(reply(&o).opts().msg_type(), Some(MessageType::Nak));
        assert_eq!(o.reply.as_ref().unwrap().1, Destination::Broadcast);
        // SELECTING an address never offered.
        let o = handle(
            &req(
                MessageType::Request,
                2,
                vec![
                    DhcpOption::ServerIdentifier(c.server_ip),
                    DhcpOption::RequestedIpAddress(Ipv4Addr::new(10, 77, 0, 101)),
                ],
            ),
            &c,
            &mut t,
            10,
        )
        .unwrap();
        assert_eq!(reply(&o).opts().msg_type(), Some(MessageType::Nak));
        // The client chose another server: our offer is withdrawn.
        let offer = handle(&req(MessageType::Discover, 3, vec![]), &c, &mut t, 10).unwrap();
        apply(&mut t, &offer);
        let o = handle(
            &req(
                MessageType::Request,
                3,
                vec![DhcpOption::ServerIdentifier(Ipv4Addr::new(10, 77, 0, 9))],
            ),
            &c,
            &mut t,
            11,
        )
        .unwrap();
        assert!(o.reply.is_none());
        apply(&mut t, &o);
        assert!(t.is_empty());
    }

    #[test]
    fn reservations_modes_exhaustion_and_decline() {
        let mut t = LeaseTable::default();
        let c = cfg(Mode::ReservationOnly);
        assert_eq!(
            handle(&req(MessageType::Discover, 1, vec![]), &c, &mut t, 0),
            Err(Ignored::NotReserved)
        );
        let o = handle(&req(MessageType::Discover, 0x99, vec![]), &c, &mut t, 0).unwrap();
        assert_eq!(reply(&o).yiaddr(), Ipv4Addr::new(10, 77, 0, 50));

        let c = cfg(Mode::Authoritative);
        let mut t = LeaseTable::default();
        for mac in 1..=3 {
            let o = handle(&req(MessageType::Discover, mac, vec![]), &c, &mut t, 0).unwrap();
            apply(&mut t, &o);
        }
        assert_eq!(
            handle(&req(MessageType::Discover, 4, vec![]), &c, &mut t, 0),
            Err(Ignored::PoolExhausted)
        );
        // Offers expire after the hold time.
        assert!(handle(&req(MessageType::Discover, 4, vec![]), &c, &mut t, 61).is_ok());
        // DECLINE takes an address out of the pool.
        let ip = t.by_mac(&"52:54:00:00:00:01".parse().unwrap()).unwrap().ip;
        let o = handle(
            &req(
                MessageType::Decline,
                1,
                vec![DhcpOption::RequestedIpAddress(ip)],
            ),
            &c,
            &mut t,
            62,
        )
        .unwrap();
        apply(&mut t, &o);
        assert!(!t.available(ip, &"52:54:00:00:00:05".parse().unwrap(), 100));
    }

    #[test]
    fn relays_pick_their_subnet_and_get_unicast() {
        let c = cfg(Mode::Authoritative);
        let mut t = LeaseTable::default();
        let mut r = req(MessageType::Discover, 7, vec![]);
        r.set_giaddr(Ipv4Addr::new(10, 88, 0, 1));
        let o = handle(&r, &c, &mut t, 0).unwrap();
        assert_eq!(reply(&o).yiaddr(), Ipv4Addr::new(10, 88, 1, 0));
        assert_eq!(reply(&o).giaddr(), Ipv4Addr::new(10, 88, 0, 1));
        assert_eq!(
            o.reply.as_ref().unwrap().1,
            Destination::Relay(Ipv4Addr::new(10, 88, 0, 1))
        );
        assert_eq!(
            reply(&o).opts().get(OptionCode::SubnetMask),
            Some(&DhcpOption::SubnetMask(Ipv4Addr::new(255, 255, 0, 0)))
        );
        let mut r = req(MessageType::Discover, 7, vec![]);
        r.set_giaddr(Ipv4Addr::new(172, 16, 0, 1));
        assert_eq!(handle(&r, &c, &mut t, 0), Err(Ignored::NoSubnet));
    }

    #[test]
    fn boot_answers_break_the_ipxe_loop() {
        let c = cfg(Mode::Authoritative);
        let mut t = LeaseTable::default();
        let pxe = vec![
            DhcpOption::ClassIdentifier(b"PXEClient:Arch:00000:UNDI:002001".to_vec()),
            DhcpOption::ClientSystemArchitecture(Architecture::from(0)),
        ];
        let o = handle(&req(MessageType::Discover, 1, pxe), &c, &mut t, 0).unwrap();
        let m = reply(&o);
        assert_eq!(m.fname_str().unwrap().unwrap(), "undionly.kpxe");
        assert_eq!(m.siaddr(), c.server_ip);
        assert_eq!(
            m.opts().get(OptionCode::BootfileName),
            Some(&DhcpOption::BootfileName(b"undionly.kpxe".to_vec()))
        );
        assert_eq!(
            m.opts().get(OptionCode::ClassIdentifier),
            None,
            "PXEClient without option 43 sends OVMF to boot-server discovery"
        );

        let uefi = vec![DhcpOption::ClientSystemArchitecture(Architecture::from(7))];
        let o = handle(&req(MessageType::Discover, 2, uefi), &c, &mut t, 0).unwrap();
        assert_eq!(reply(&o).fname_str().unwrap().unwrap(), "ipxe.efi");

        let ipxe = vec![
            DhcpOption::UserClass(b"iPXE".to_vec()),
            DhcpOption::ClientSystemArchitecture(Architecture::from(7)),
        ];
        let o = handle(&req(MessageType::Discover, 3, ipxe), &c, &mut t, 0).unwrap();
        let m = reply(&o);
        assert_eq!(
            m.fname_str().unwrap().unwrap(),
            "http://10.77.0.1:8000/boot/52:54:00:00:00:03.ipxe"
        );
        match m.opts().get(OptionCode::Unknown(175)) {
            Some(DhcpOption::Unknown(u)) => assert_eq!(u.data(), [176, 1, 1]),
            other => panic!("no option 175: {other:?}"),
        }

        let http = vec![DhcpOption::ClassIdentifier(
            b"HTTPClient:Arch:00016".to_vec(),
        )];
        let o = handle(&req(MessageType::Discover, 4, http), &c, &mut t, 0).unwrap();
        assert_eq!(
            reply(&o).fname_str().unwrap().unwrap(),
            "http://10.77.0.1:8000/boot/ipxe/ipxe.efi"
        );
    }

    #[test]
    fn inform_and_garbage() {
        let c = cfg(Mode::Authoritative);
        let mut t = LeaseTable::default();
        let mut inform = req(MessageType::Inform, 1, vec![]);
        inform.set_ciaddr(Ipv4Addr::new(10, 77, 0, 7));
        let o = handle(&inform, &c, &mut t, 0).unwrap();
        assert_eq!(reply(&o).yiaddr(), Ipv4Addr::UNSPECIFIED);
        assert!(o.change.is_none());
        let mut not_req = req(MessageType::Discover, 1, vec![]);
        not_req.set_opcode(Opcode::BootReply);
        assert_eq!(handle(&not_req, &c, &mut t, 0), Err(Ignored::NotARequest));
        assert_eq!(
            handle(&Message::default(), &c, &mut t, 0),
            Err(Ignored::NoMessageType)
        );
        // A forged hardware length (dhcproto slices chaddr by it) is refused, not a panic.
        use dhcproto::{Decodable, Encodable};
        let mut bytes = req(MessageType::Discover, 1, vec![]).to_vec().unwrap();
        bytes[2] = 255;
        let forged = Message::decode(&mut dhcproto::Decoder::new(&bytes)).unwrap();
        assert_eq!(handle(&forged, &c, &mut t, 0), Err(Ignored::NotEthernet));
    }
}
