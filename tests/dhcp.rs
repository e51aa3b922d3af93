//! The DHCP server over real UDP on loopback: packets built with dhcproto, replies unicast to the
//! test's socket (`dhcp.reply_to`), leases read back through the API and across a restart.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use dhcproto::v4::{
    self, DhcpOption, Flags, Message, MessageType, Opcode, OptionCode, UnknownOption,
};
use dhcproto::{Decodable, Decoder, Encodable};
use stoker::config::Layers;

use crate::common::TestDaemon;

pub(crate) struct Client {
    socket: UdpSocket,
    server: SocketAddr,
}

fn daemon_with(
    dir: tempfile::TempDir,
    client: SocketAddr,
    extra: &[(&'static str, &str)],
) -> TestDaemon {
    let mut layers = Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("http.shutdown_timeout", "5".to_string())
        .with_flag("dhcp.enabled", "true".to_string())
        .with_flag("dhcp.listen", "127.0.0.1:0".to_string())
        .with_flag("dhcp.server_ip", "127.0.0.1".to_string())
        .with_flag(
            "dhcp.subnets",
            "127.0.0.0/24 pool=127.0.0.100-127.0.0.102 router=127.0.0.1 dns=127.0.0.53 lease=600; \
             10.30.0.0/24 pool=10.30.0.10-10.30.0.20 router=10.30.0.1"
                .to_string(),
        )
        .with_flag("dhcp.reply_to", client.to_string());
    for (k, v) in extra {
        layers = layers.with_flag(k, (*v).to_string());
    }
    TestDaemon::start_with(layers.resolve().unwrap(), dir)
}

pub(crate) fn client_socket() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    socket
}

impl Client {
    /// A client on `socket` (where the server is told to reply) of the server at `server`.
    pub(crate) fn new(socket: UdpSocket, server: SocketAddr) -> Client {
        Client { socket, server }
    }

    fn send(&self, msg: &Message) {
        self.socket
            .send_to(&msg.to_vec().unwrap(), self.server)
            .unwrap();
    }

    fn recv(&self) -> Option<Message> {
        let mut buf = [0u8; 1500];
        let (n, _) = self.socket.recv_from(&mut buf).ok()?;
        Some(Message::decode(&mut Decoder::new(&buf[..n])).unwrap())
    }

    fn exchange(&self, msg: &Message) -> Message {
        self.send(msg);
        self.recv().expect("the server answers")
    }

    /// Nothing arrives within a short wait.
    fn silent(&self) -> bool {
        self.socket
            .set_read_timeout(Some(Duration::from_millis(400)))
            .unwrap();
        let quiet = self.recv().is_none();
        self.socket
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        quiet
    }
}

pub(crate) fn mac(last: u8) -> [u8; 6] {
    [0x52, 0x54, 0x00, 0xaa, 0x00, last]
}

fn request(kind: MessageType, mac: [u8; 6], xid: u32) -> Message {
    let mut m = Message::default();
    m.set_opcode(Opcode::BootRequest)
        .set_xid(xid)
        .set_flags(Flags::default().set_broadcast())
        .set_chaddr(&mac);
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    m
}

/// The BOOTP `file` field without its NUL padding.
fn fname(m: &Message) -> String {
    let raw = m.fname().unwrap_or_default();
    String::from_utf8(raw.iter().copied().take_while(|b| *b != 0).collect()).unwrap()
}

fn msg_type(m: &Message) -> MessageType {
    m.opts().msg_type().unwrap()
}

fn option(m: &Message, code: OptionCode) -> Option<&DhcpOption> {
    m.opts().get(code)
}

/// DISCOVER → OFFER → REQUEST → ACK; returns the address.
pub(crate) fn dora(c: &Client, mac: [u8; 6], xid: u32) -> Ipv4Addr {
    let offer = c.exchange(&request(MessageType::Discover, mac, xid));
    assert_eq!(msg_type(&offer), MessageType::Offer);
    assert_eq!(offer.xid(), xid);
    let mut req = request(MessageType::Request, mac, xid + 1);
    req.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(offer.yiaddr()));
    req.opts_mut()
        .insert(DhcpOption::ServerIdentifier(Ipv4Addr::LOCALHOST));
    let ack = c.exchange(&req);
    assert_eq!(msg_type(&ack), MessageType::Ack, "{ack:?}");
    assert_eq!(ack.yiaddr(), offer.yiaddr());
    ack.yiaddr()
}

pub(crate) fn start() -> (TestDaemon, Client) {
    let socket = client_socket();
    let d = daemon_with(
        tempfile::tempdir().unwrap(),
        socket.local_addr().unwrap(),
        &[],
    );
    let server = d.dhcp.expect("DHCP is enabled");
    (d, Client::new(socket, server))
}

#[test]
fn dora_gives_an_address_with_the_subnets_parameters() {
    let (d, c) = start();
    let offer = c.exchange(&request(MessageType::Discover, mac(1), 7));
    assert_eq!(msg_type(&offer), MessageType::Offer);
    assert_eq!(offer.yiaddr(), Ipv4Addr::new(127, 0, 0, 100));
    assert_eq!(
        option(&offer, OptionCode::SubnetMask),
        Some(&DhcpOption::SubnetMask(Ipv4Addr::new(255, 255, 255, 0)))
    );
    assert_eq!(
        option(&offer, OptionCode::Router),
        Some(&DhcpOption::Router(vec![Ipv4Addr::LOCALHOST]))
    );
    assert_eq!(
        option(&offer, OptionCode::ServerIdentifier),
        Some(&DhcpOption::ServerIdentifier(Ipv4Addr::LOCALHOST))
    );
    assert_eq!(
        option(&offer, OptionCode::AddressLeaseTime),
        Some(&DhcpOption::AddressLeaseTime(600))
    );
    // A plain DHCP client (no PXE options) gets no boot file.
    assert!(option(&offer, OptionCode::BootfileName).is_none());
    let ip = dora(&c, mac(1), 9);
    assert_eq!(ip, Ipv4Addr::new(127, 0, 0, 100));
    // The server counts a reply once its send returns, which may be just after the client
    // has read it: give the counter a moment.
    let mut pxe = d.http().get("/api/v1/pxe").json();
    for _ in 0..50 {
        if pxe["dhcp"]["counters"]["replied"].as_u64().unwrap() >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        pxe = d.http().get("/api/v1/pxe").json();
    }
    assert_eq!(pxe["dhcp"]["enabled"], true);
    assert_eq!(pxe["dhcp"]["leases"][0]["ip"], "127.0.0.100");
    assert_eq!(pxe["dhcp"]["leases"][0]["mac"], "52:54:00:aa:00:01");
    assert_eq!(pxe["dhcp"]["leases"][0]["state"], "bound");
    assert!(pxe["dhcp"]["counters"]["replied"].as_u64().unwrap() >= 3);
}

#[test]
fn pxe_clients_get_their_loader_and_ipxe_gets_its_script_url() {
    let (d, c) = start();
    // A BIOS PXE ROM.
    let mut bios = request(MessageType::Discover, mac(2), 20);
    bios.opts_mut().insert(DhcpOption::ClassIdentifier(
        b"PXEClient:Arch:00000:UNDI:002001".to_vec(),
    ));
    bios.opts_mut().insert(DhcpOption::ClientSystemArchitecture(
        v4::Architecture::from(0),
    ));
    let offer = c.exchange(&bios);
    assert_eq!(fname(&offer), "undionly.kpxe");
    assert_eq!(offer.siaddr(), Ipv4Addr::LOCALHOST);
    assert_eq!(
        option(&offer, OptionCode::BootfileName),
        Some(&DhcpOption::BootfileName(b"undionly.kpxe".to_vec()))
    );
    // No "PXEClient" echo: without option 43 it would send UEFI ROMs to boot-server discovery.
    assert_eq!(option(&offer, OptionCode::ClassIdentifier), None);
    // A UEFI x64 ROM.
    let mut uefi = request(MessageType::Discover, mac(3), 21);
    uefi.opts_mut().insert(DhcpOption::ClassIdentifier(
        b"PXEClient:Arch:00007:UNDI:003016".to_vec(),
    ));
    uefi.opts_mut().insert(DhcpOption::ClientSystemArchitecture(
        v4::Architecture::from(7),
    ));
    assert_eq!(fname(&c.exchange(&uefi)), "ipxe.efi");
    // iPXE (option 175 present): the HTTP URL of this node's script, and no ProxyDHCP wait.
    let mut ipxe = request(MessageType::Discover, mac(2), 22);
    ipxe.opts_mut().insert(DhcpOption::ClassIdentifier(
        b"PXEClient:Arch:00000:UNDI:002001".to_vec(),
    ));
    ipxe.opts_mut()
        .insert(DhcpOption::Unknown(UnknownOption::new(
            OptionCode::Unknown(175),
            vec![19, 1, 1],
        )));
    let offer = c.exchange(&ipxe);
    let file = fname(&offer);
    assert_eq!(
        file,
        format!(
            "http://127.0.0.1:{}/boot/52:54:00:aa:00:02.ipxe",
            d.addr.port()
        )
    );
    match option(&offer, OptionCode::Unknown(175)) {
        Some(DhcpOption::Unknown(o)) => assert_eq!(o.data(), &[176, 1, 1]),
        other => panic!("option 175 missing: {other:?}"),
    }
    // The URL it got really serves a script, to the address iPXE was leased.
    let mut req = request(MessageType::Request, mac(2), 23);
    req.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(offer.yiaddr()));
    req.opts_mut()
        .insert(DhcpOption::ServerIdentifier(Ipv4Addr::LOCALHOST));
    let leased = c.exchange(&req).yiaddr();
    let path = file.replace(&format!("http://127.0.0.1:{}", d.addr.port()), "");
    let (status, script) = crate::identity::get_from(d.addr, &leased.to_string(), &path);
    assert_eq!(status, 200, "{script}");
    assert!(script.starts_with("#!ipxe"), "{script}");
}

#[test]
fn boot_tokens_go_only_to_the_leased_address() {
    let (d, c) = start();
    let leased = dora(&c, mac(30), 500);
    let script = "/boot/52:54:00:aa:00:1e.ipxe";
    // With stoker's DHCP the binding is `lease`: another address gets no token...
    let (status, body) = crate::identity::get_from(d.addr, "127.0.0.1", script);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains(&format!("known at {leased}")), "{body}");
    // ...and spoils nothing: the leased address gets one, which works.
    let (status, body) = crate::identity::get_from(d.addr, &leased.to_string(), script);
    assert_eq!(status, 200, "{body}");
    let token = crate::boot::kernel_arg(&body, "stoker.token");
    let (status, _) = crate::identity::get_from(d.addr, "127.0.0.2", script);
    assert_eq!(status, 403);
    let r = crate::common::Http::raw_post(
        &d.url("/api/v1/agent/hello"),
        &crate::common::inventory("52:54:00:aa:00:1e").to_string(),
        &[("authorization", &format!("Bearer {token}"))],
    );
    assert_eq!(r.status, 201, "{}", r.body);
    // A MAC stoker's DHCP never leased gets no token anywhere.
    let (status, body) =
        crate::identity::get_from(d.addr, "127.0.0.1", "/boot/52:54:00:aa:00:1f.ipxe");
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("leased 52:54:00:aa:00:1f no address"),
        "{body}"
    );
}

#[test]
fn a_packet_without_the_magic_cookie_is_ignored() {
    let (d, c) = start();
    let mut bytes = request(MessageType::Discover, mac(31), 600)
        .to_vec()
        .unwrap();
    assert_eq!(&bytes[236..240], &[99, 130, 83, 99]);
    bytes[236..240].copy_from_slice(&[1, 2, 3, 4]);
    c.socket.send_to(&bytes, c.server).unwrap();
    assert!(c.silent(), "no answer without the cookie");
    let counters = d.http().get("/api/v1/pxe").json()["dhcp"]["counters"].clone();
    assert_eq!(counters["malformed"], 1, "{counters}");
    assert_eq!(counters["replied"], 0, "{counters}");
    // The same packet with its cookie is answered.
    let answer = c.exchange(&request(MessageType::Discover, mac(31), 601));
    assert_eq!(msg_type(&answer), MessageType::Offer);
}

#[test]
fn pool_exhaustion_is_logged_once_not_per_packet() {
    let socket = client_socket();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = crate::common::bin::stoker(dir.path());
    cmd.args([
        "serve",
        "--http-listen",
        "127.0.0.1:0",
        "--plugins-bundled",
        "skip",
        "--dhcp-enabled",
        "true",
        "--dhcp-listen",
        "127.0.0.1:0",
        "--dhcp-server-ip",
        "127.0.0.1",
        "--dhcp-subnets",
        "127.0.0.0/24 pool=127.0.0.100-127.0.0.101",
        "--dhcp-reply-to",
        &socket.local_addr().unwrap().to_string(),
    ]);
    let served = crate::common::bin::Served::spawn(cmd);
    let mut log = Vec::new();
    let addr = loop {
        let line = served
            .lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the DHCP server says where it listens");
        log.push(line.clone());
        if line.contains("DHCP server listening")
            && let Some(rest) = line.split("addr=").nth(1)
        {
            break rest
                .split_whitespace()
                .next()
                .unwrap()
                .parse::<SocketAddr>()
                .unwrap();
        }
    };
    let c = Client {
        socket,
        server: addr,
    };
    // Two addresses: two clients get offers, twenty more get nothing.
    for i in 0..22u8 {
        c.send(&request(
            MessageType::Discover,
            mac(40 + i),
            700 + u32::from(i),
        ));
    }
    let mut offers = 0;
    while c.recv_quick() {
        offers += 1;
    }
    assert_eq!(offers, 2);
    let base = format!("http://{}", served.addr);
    crate::common::sign_in(&base, &dir.path().join("stoker-data"));
    let counters =
        crate::common::Http::raw_get_json(&format!("{base}/api/v1/pxe"))["dhcp"]["counters"]
            .clone();
    assert_eq!(counters["pool_exhausted"], 20, "{counters}");
    served.signal("TERM");
    let (code, rest) = served.wait();
    assert_eq!(code, Some(0));
    log.extend(rest);
    let warnings: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("pool exhausted"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("WARN"), "{}", warnings[0]);
}

#[test]
fn garbage_is_dropped_and_counted_and_service_goes_on() {
    let (d, c) = start();
    let junk: [&[u8]; 4] = [
        b"",
        b"hello",
        &[0xff; 300],
        &[
            1, 1, 6, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
    ];
    for j in junk {
        c.socket.send_to(j, c.server).unwrap();
    }
    // A BOOTREPLY sent to the server, a request without a message type, a non-Ethernet one.
    let mut reply = request(MessageType::Offer, mac(9), 1);
    reply.set_opcode(Opcode::BootReply);
    c.send(&reply);
    let mut untyped = request(MessageType::Discover, mac(9), 2);
    untyped.opts_mut().remove(OptionCode::MessageType);
    c.send(&untyped);
    assert!(c.silent(), "nothing answers garbage");
    assert_eq!(dora(&c, mac(4), 30), Ipv4Addr::new(127, 0, 0, 100));
    let counters = d.http().get("/api/v1/pxe").json()["dhcp"]["counters"].clone();
    assert!(counters["malformed"].as_u64().unwrap() >= 3, "{counters}");
    assert!(counters["ignored"].as_u64().unwrap() >= 2, "{counters}");
}

#[test]
fn a_flooding_mac_is_rate_limited_without_starving_others() {
    let (d, c) = start();
    for i in 0..60 {
        c.send(&request(MessageType::Discover, mac(5), 100 + i));
    }
    let mut answered = 0;
    while c.recv_quick() {
        answered += 1;
    }
    assert!(
        (15..=30).contains(&answered),
        "{answered} answers to 60 DISCOVERs"
    );
    assert_eq!(dora(&c, mac(6), 300), Ipv4Addr::new(127, 0, 0, 101));
    let counters = d.http().get("/api/v1/pxe").json()["dhcp"]["counters"].clone();
    assert!(
        counters["rate_limited"].as_u64().unwrap() >= 30,
        "{counters}"
    );
}

impl Client {
    fn recv_quick(&self) -> bool {
        self.socket
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let got = self.recv().is_some();
        self.socket
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        got
    }
}

#[test]
fn requests_for_foreign_addresses_are_naked_and_pools_run_out() {
    let (_d, c) = start();
    let mut wrong = request(MessageType::Request, mac(7), 40);
    wrong
        .opts_mut()
        .insert(DhcpOption::RequestedIpAddress(Ipv4Addr::new(127, 0, 0, 9)));
    let nak = c.exchange(&wrong);
    assert_eq!(msg_type(&nak), MessageType::Nak);
    // Three addresses in the pool: the fourth client gets nothing.
    for i in 0..3 {
        dora(&c, mac(10 + i), 50 + u32::from(i) * 2);
    }
    c.send(&request(MessageType::Discover, mac(20), 70));
    assert!(c.silent(), "an exhausted pool makes no offer");
    // RELEASE gives one back.
    let mut release = request(MessageType::Release, mac(10), 80);
    release.set_ciaddr(Ipv4Addr::new(127, 0, 0, 100));
    release
        .opts_mut()
        .insert(DhcpOption::ServerIdentifier(Ipv4Addr::LOCALHOST));
    c.send(&release);
    assert_eq!(dora(&c, mac(20), 90), Ipv4Addr::new(127, 0, 0, 100));
}

#[test]
fn relayed_requests_get_the_relays_subnet() {
    let (_d, c) = start();
    let mut relayed = request(MessageType::Discover, mac(30), 500);
    relayed.set_giaddr(Ipv4Addr::new(10, 30, 0, 1)).set_hops(1);
    let offer = c.exchange(&relayed);
    assert_eq!(offer.yiaddr(), Ipv4Addr::new(10, 30, 0, 10));
    assert_eq!(offer.giaddr(), Ipv4Addr::new(10, 30, 0, 1));
    assert_eq!(
        option(&offer, OptionCode::Router),
        Some(&DhcpOption::Router(vec![Ipv4Addr::new(10, 30, 0, 1)]))
    );
    // A relay from a network we do not serve gets silence.
    let mut stranger = request(MessageType::Discover, mac(31), 501);
    stranger.set_giaddr(Ipv4Addr::new(192, 168, 77, 1));
    c.send(&stranger);
    assert!(c.silent());
}

#[test]
fn reservation_only_mode_answers_reserved_macs_alone() {
    let socket = client_socket();
    let d = daemon_with(
        tempfile::tempdir().unwrap(),
        socket.local_addr().unwrap(),
        &[
            ("dhcp.mode", "reservation-only"),
            ("dhcp.reservations", "52:54:00:aa:00:28=127.0.0.50"),
        ],
    );
    let c = Client {
        socket,
        server: d.dhcp.unwrap(),
    };
    c.send(&request(MessageType::Discover, mac(41), 600));
    assert!(c.silent(), "an unknown MAC is left to other servers");
    assert_eq!(dora(&c, mac(40), 610), Ipv4Addr::new(127, 0, 0, 50));
}

/// The daemon stopped and started again on its data directory; the client, pointed at it.
fn restart(d: TestDaemon, c: Client) -> (TestDaemon, Client) {
    let dir = d.stop().unwrap();
    let d = daemon_with(dir, c.socket.local_addr().unwrap(), &[]);
    let c = Client {
        server: d.dhcp.unwrap(),
        ..c
    };
    (d, c)
}

#[test]
fn leases_survive_a_restart() {
    let (d, c) = start();
    let first = dora(&c, mac(50), 700);
    let second = dora(&c, mac(51), 710);
    assert_ne!(first, second);

    let (_d, c) = restart(d, c);
    // The second client comes back first and still gets its own address, not the first's.
    let offer = c.exchange(&request(MessageType::Discover, mac(51), 720));
    assert_eq!(offer.yiaddr(), second);
    // A newcomer does not get either of them.
    let offer = c.exchange(&request(MessageType::Discover, mac(52), 730));
    assert!(
        ![first, second].contains(&offer.yiaddr()),
        "{}",
        offer.yiaddr()
    );
}

#[test]
fn an_offers_hold_is_kept_in_memory_only() {
    let (d, c) = start();
    // Held while the daemon runs: a second DISCOVER is offered the same address, another
    // client a different one.
    let offer = c.exchange(&request(MessageType::Discover, mac(60), 800));
    assert_eq!(msg_type(&offer), MessageType::Offer);
    let again = c.exchange(&request(MessageType::Discover, mac(60), 801));
    assert_eq!(again.yiaddr(), offer.yiaddr());
    let other = c.exchange(&request(MessageType::Discover, mac(61), 802));
    assert_ne!(other.yiaddr(), offer.yiaddr());

    // Gone with the process: the REQUEST for it is refused, and the client starts again.
    let (d, c) = restart(d, c);
    let mut req = request(MessageType::Request, mac(60), 803);
    req.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(offer.yiaddr()));
    req.opts_mut()
        .insert(DhcpOption::ServerIdentifier(Ipv4Addr::LOCALHOST));
    assert_eq!(msg_type(&c.exchange(&req)), MessageType::Nak);
    let ip = dora(&c, mac(60), 810);
    // The acknowledged lease is the one stored, and it is kept across the next restart.
    let (_d, c) = restart(d, c);
    let offer = c.exchange(&request(MessageType::Discover, mac(60), 820));
    assert_eq!(offer.yiaddr(), ip);
}
