//! No acknowledged DHCP lease is lost when the daemon dies or the machine stops. The built
//! binary serves DHCP on loopback while a pipelined client drives DORAs, each a new MAC, and
//! remembers every ACK it receives; at a random point the daemon is killed (`kill -9`), or
//! stopped (`SIGSTOP`) and its data files copied, or, as root, its data directory's whole file
//! system is copied block by block (what a power cut leaves). A torn frame is written after the
//! last valid frame of the copied WAL, as a write cut short by the power would leave it. A new
//! daemon starts on what is left, and every address acknowledged is still leased to its MAC.
//! The same power cut with `fdatasync` made a no-op loses acknowledged leases: the test can
//! tell a server that flushes before it answers from one that does not.
//!
//! Any ACK the client received was sent before the daemon stopped, and was sent only after the
//! flush that covers its lease: so every one of them must be in the copy, even those that
//! arrived after the signal.

use std::collections::HashMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dhcproto::v4::{DhcpOption, Flags, Message, MessageType, Opcode};
use dhcproto::{Decodable, Decoder, Encodable};

use crate::common::bin::{STOKER, Served};
use crate::common::{Http, sign_in};

/// Exchanges the client keeps in flight.
const WINDOW: usize = 64;

type Acked = Arc<Mutex<Vec<([u8; 6], Ipv4Addr)>>>;

fn mac_of(n: u32) -> [u8; 6] {
    let b = n.to_be_bytes();
    [0x52, 0x54, b[0], b[1], b[2], b[3]]
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn message(kind: MessageType, mac: [u8; 6], xid: u32) -> Message {
    let mut m = Message::default();
    m.set_opcode(Opcode::BootRequest)
        .set_xid(xid)
        .set_flags(Flags::default().set_broadcast())
        .set_chaddr(&mac);
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    m
}

/// The DORA client: keeps [`WINDOW`] exchanges in flight, a new MAC each, until `stop`; then
/// only reads for a while, so ACKs already on their way are counted too.
fn drive(socket: UdpSocket, server: SocketAddr, stop: Arc<AtomicBool>, acked: Acked) {
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut next: u32 = 1;
    let mut flying: HashMap<u32, ([u8; 6], Instant)> = HashMap::new();
    let mut buf = [0u8; 1500];
    let mut stopped_at: Option<Instant> = None;
    loop {
        if stopped_at.is_none() && stop.load(Ordering::Relaxed) {
            stopped_at = Some(Instant::now());
        }
        match stopped_at {
            Some(at) if at.elapsed() > Duration::from_millis(1500) => return,
            Some(_) => {}
            None => {
                flying.retain(|_, (_, at)| at.elapsed() < Duration::from_secs(3));
                while flying.len() < WINDOW {
                    let mac = mac_of(next);
                    let m = message(MessageType::Discover, mac, next);
                    // The daemon may be stopped or gone: a refused send is no failure here.
                    let _ = socket.send_to(&m.to_vec().unwrap(), server);
                    flying.insert(next, (mac, Instant::now()));
                    next += 1;
                }
            }
        }
        let Ok((n, _)) = socket.recv_from(&mut buf) else {
            continue;
        };
        let Ok(reply) = Message::decode(&mut Decoder::new(&buf[..n])) else {
            continue;
        };
        let Some(&(mac, _)) = flying.get(&reply.xid()) else {
            continue;
        };
        match reply.opts().msg_type() {
            Some(MessageType::Offer) if stopped_at.is_none() => {
                let mut req = message(MessageType::Request, mac, reply.xid());
                req.opts_mut()
                    .insert(DhcpOption::RequestedIpAddress(reply.yiaddr()));
                req.opts_mut()
                    .insert(DhcpOption::ServerIdentifier(Ipv4Addr::LOCALHOST));
                let _ = socket.send_to(&req.to_vec().unwrap(), server);
            }
            Some(MessageType::Ack) => {
                acked.lock().unwrap().push((mac, reply.yiaddr()));
                flying.remove(&reply.xid());
            }
            _ => {}
        }
    }
}

/// The arguments of `stoker serve` with DHCP on loopback, its replies sent to `client`.
fn serve_cmd(data: &Path, client: SocketAddr) -> Vec<String> {
    [
        "serve",
        "--data-dir",
        &data.display().to_string(),
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
        "127.0.0.0/16 pool=127.0.1.0-127.0.255.254 lease=3600",
        "--dhcp-max-rate",
        "1000000",
        "--dhcp-reply-to",
        &client.to_string(),
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect()
}

/// The DHCP server's address, from its "DHCP server listening" line.
fn dhcp_addr(served: &mut Served) -> SocketAddr {
    let found = |line: &str| {
        line.contains("DHCP server listening")
            .then(|| line.split("addr=").nth(1))
            .flatten()
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse::<SocketAddr>().ok())
    };
    if let Some(addr) = served.log.iter().find_map(|l| found(l)) {
        return addr;
    }
    loop {
        let line = served
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the DHCP server says where it listens");
        served.log.push(line.clone());
        if let Some(addr) = found(&line) {
            return addr;
        }
    }
}

fn client_socket() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").unwrap()
}

/// A kill point: how many ACKs to wait for, chosen at random (and printed, to replay a run).
fn kill_point(lo: usize, hi: usize) -> usize {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).unwrap();
    let k = lo + (u64::from_le_bytes(seed) % (hi - lo) as u64) as usize;
    eprintln!("kill point: after {k} ACKs");
    k
}

/// Drive DORAs against `served` until `k` ACKs came back, then call `at_kill` (which stops or
/// kills the daemon), let the client read what is still on its way, and return every ACK.
fn load_until(
    socket: UdpSocket,
    server: SocketAddr,
    k: usize,
    at_kill: impl FnOnce(),
) -> Vec<([u8; 6], Ipv4Addr)> {
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Acked = Arc::default();
    let client = {
        let (stop, acked) = (Arc::clone(&stop), Arc::clone(&acked));
        std::thread::spawn(move || drive(socket, server, stop, acked))
    };
    let start = Instant::now();
    while acked.lock().unwrap().len() < k {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "only {} ACKs in 120 s",
            acked.lock().unwrap().len()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    at_kill();
    stop.store(true, Ordering::Relaxed);
    client.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    eprintln!("{} ACKs received in all", acked.len());
    assert!(acked.len() >= k);
    acked
}

/// Every acknowledged address is bound to its MAC in the restarted daemon (through the API).
fn assert_kept(served: &Served, data: &Path, acked: &[([u8; 6], Ipv4Addr)]) {
    sign_in(&format!("http://{}", served.addr), data);
    assert_bound(served, acked);
}

/// Every acknowledged address is bound to its MAC, asked with the credentials of an earlier
/// sign-in.
fn assert_bound(served: &Served, acked: &[([u8; 6], Ipv4Addr)]) {
    let (lost, kept) = lost(served, acked);
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged leases lost, e.g. {:?}; {kept} leases kept",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(5)],
    );
}

/// The acknowledged addresses not bound to their MAC (and how many leases there are), asked
/// with the credentials of an earlier sign-in.
fn lost(served: &Served, acked: &[([u8; 6], Ipv4Addr)]) -> (Vec<String>, usize) {
    let base = format!("http://{}", served.addr);
    let pxe = Http::raw_get_json(&format!("{base}/api/v1/pxe"));
    let leases: HashMap<String, (String, String)> = pxe["dhcp"]["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["ip"].as_str().unwrap().to_string(),
                (
                    l["mac"].as_str().unwrap().to_string(),
                    l["state"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    let lost: Vec<String> = acked
        .iter()
        .filter(|(mac, ip)| {
            leases.get(&ip.to_string()) != Some(&(mac_text(mac), "bound".to_string()))
        })
        .map(|(mac, ip)| format!("{ip} ({})", mac_text(mac)))
        .collect();
    (lost, leases.len())
}

/// Ask the DHCP server at `server` (replying to `socket`) for an address for each of the last
/// acknowledged MACs: each is offered its own address.
fn assert_offered_again(socket: &UdpSocket, server: SocketAddr, acked: &[([u8; 6], Ipv4Addr)]) {
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut buf = [0u8; 1500];
    for (i, (mac, ip)) in acked.iter().rev().take(20).enumerate() {
        let xid = 0x7000_0000 + u32::try_from(i).unwrap();
        let m = message(MessageType::Discover, *mac, xid);
        socket.send_to(&m.to_vec().unwrap(), server).unwrap();
        let offer = loop {
            let (n, _) = socket.recv_from(&mut buf).expect("an OFFER");
            let reply = Message::decode(&mut Decoder::new(&buf[..n])).unwrap();
            if reply.xid() == xid {
                break reply;
            }
        };
        assert_eq!(offer.opts().msg_type(), Some(MessageType::Offer));
        assert_eq!(
            offer.yiaddr(),
            *ip,
            "{} offered another address",
            mac_text(mac)
        );
    }
}

/// Start `stoker serve` on `data`, replying to `socket`'s address.
fn start(data: &Path, socket: &UdpSocket, cwd: &Path) -> (Served, SocketAddr) {
    let mut cmd = crate::common::bin::stoker(cwd);
    cmd.args(serve_cmd(data, socket.local_addr().unwrap()));
    let mut served = Served::spawn(cmd);
    let addr = dhcp_addr(&mut served);
    (served, addr)
}

/// Wait until every thread of process `pid` is stopped (a thread inside `fdatasync` stops only
/// once the call returned).
fn wait_stopped(pid: u32) {
    let start = Instant::now();
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        let all = tasks.filter_map(Result::ok).all(|t| {
            std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
                // pid (comm) STATE ...: comm may hold spaces, so read after the last ')'.
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                state.starts_with('T') || state.starts_with('t')
            })
        });
        if all {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "not stopped");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// SQLite's WAL checksum (its file format's "cumulative checksum") over `data`, from `s`.
fn wal_checksum(big_endian: bool, data: &[u8], mut s: (u32, u32)) -> (u32, u32) {
    for pair in data.chunks_exact(8) {
        let word = |b: &[u8]| {
            let b: [u8; 4] = b.try_into().unwrap();
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        s.0 = s.0.wrapping_add(word(&pair[..4])).wrapping_add(s.1);
        s.1 = s.1.wrapping_add(word(&pair[4..])).wrapping_add(s.0);
    }
    s
}

/// Write a torn frame right after the last valid frame of the WAL at `wal`, as a write cut
/// short by a power loss leaves one: this WAL's salts, a commit marker, page 1 (the
/// database's header page) full of random bytes, and a checksum that does not hold. Returns
/// how many valid frames precede it.
fn tear_wal(wal: &Path) -> usize {
    let mut bytes = std::fs::read(wal).unwrap();
    assert!(bytes.len() >= 32, "the WAL has a header");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let magic = be(0);
    assert!(magic == 0x377f_0682 || magic == 0x377f_0683, "{magic:x}");
    let big_endian = magic & 1 == 1;
    let page = be(8) as usize;
    let salts = (be(16), be(20));
    let mut sum = wal_checksum(big_endian, &bytes[..24], (0, 0));
    assert_eq!(sum, (be(24), be(28)), "the WAL header's checksum");
    let frame = 24 + page;
    let mut at = 32;
    let mut valid = 0;
    while at + frame <= bytes.len() {
        if (be(at + 8), be(at + 12)) != salts {
            break;
        }
        let next = wal_checksum(big_endian, &bytes[at..at + 8], sum);
        let next = wal_checksum(big_endian, &bytes[at + 24..at + frame], next);
        if next != (be(at + 16), be(at + 20)) {
            break;
        }
        sum = next;
        valid += 1;
        at += frame;
    }
    let mut torn = Vec::with_capacity(frame);
    torn.extend_from_slice(&1u32.to_be_bytes());
    torn.extend_from_slice(&1u32.to_be_bytes());
    torn.extend_from_slice(&salts.0.to_be_bytes());
    torn.extend_from_slice(&salts.1.to_be_bytes());
    torn.extend_from_slice(&(sum.0 ^ 0x5a5a_5a5a).to_be_bytes());
    torn.extend_from_slice(&sum.1.to_be_bytes());
    let mut noise = vec![0u8; page];
    getrandom::fill(&mut noise).unwrap();
    torn.extend_from_slice(&noise);
    if bytes.len() < at + frame {
        bytes.resize(at + frame, 0);
    }
    bytes[at..at + frame].copy_from_slice(&torn);
    let mut f = std::fs::File::create(wal).unwrap();
    f.write_all(&bytes).unwrap();
    f.sync_all().unwrap();
    eprintln!(
        "torn frame written after {valid} valid frames of {}",
        wal.display()
    );
    valid
}

#[test]
fn acknowledged_leases_survive_kill_9_mid_load() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let socket = client_socket();
    let reply_socket = socket.try_clone().unwrap();
    let (served, server) = start(&data, &socket, dir.path());
    let pid = served.child.id();
    let acked = load_until(socket, server, kill_point(300, 3000), || {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    });
    let (code, _) = served.wait();
    assert_eq!(code, None, "killed by a signal");

    let (served, server) = start(&data, &reply_socket, dir.path());
    assert_kept(&served, &data, &acked);
    assert_offered_again(&reply_socket, server, &acked);
}

#[test]
fn acknowledged_leases_survive_in_files_copied_at_a_stop_with_a_torn_wal_tail() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let copy = dir.path().join("copy");
    let socket = client_socket();
    let reply_socket = socket.try_clone().unwrap();
    let (served, server) = start(&data, &socket, dir.path());
    let pid = served.child.id();
    let acked = load_until(socket, server, kill_point(300, 3000), || {
        served.signal("STOP");
        wait_stopped(pid);
        copy_dir(&data, &copy);
        served.signal("KILL");
    });
    served.wait();
    tear_wal(&copy.join("stoker.db-wal"));

    let (served, server) = start(&copy, &reply_socket, dir.path());
    assert_kept(&served, &copy, &acked);
    assert_offered_again(&reply_socket, server, &acked);
}

/// Run `script` (`sh -c`, with `args` as `$0`...) in a private mount namespace; the process
/// stays the same PID through `exec`.
fn in_mount_namespace(script: &str, args: &[&Path]) -> std::process::Command {
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", script]);
    cmd.args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("STOKER_") || key == "NOTIFY_SOCKET" {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Wait until no loop device is backed by `image` any more (a mount namespace's mounts go
/// away just after its last process).
fn wait_detached(image: &Path) {
    for _ in 0..200 {
        let out = std::process::Command::new("losetup")
            .arg("-j")
            .arg(image)
            .output()
            .unwrap();
        if out.stdout.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} is still attached to a loop device", image.display());
}

/// Inside `pid`'s mount namespace, `path` (absolute) as seen from outside.
fn inside(pid: u32, path: &Path) -> PathBuf {
    Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(path.strip_prefix("/").unwrap())
}

#[test]
#[ignore = "needs root (loop device, mount namespace): .ci/run runs it"]
fn acknowledged_leases_survive_a_power_cut() {
    let (lost, acked) = power_cut(None);
    assert!(
        lost.is_empty(),
        "{} of {acked} acknowledged leases lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)],
    );
}

/// The power-cut test catches a server that acknowledges before its flush: the same run with
/// `fdatasync` made a no-op (an `LD_PRELOAD` shim, built here with `cc`) loses acknowledged
/// leases. Without this, a copy that somehow held every page written would pass either way.
#[test]
#[ignore = "needs root (loop device, mount namespace) and cc: .ci/run runs it"]
fn the_power_cut_loses_leases_acknowledged_without_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let (source, shim) = (dir.path().join("nosync.c"), dir.path().join("nosync.so"));
    std::fs::write(&source, "int fdatasync(int fd) { (void)fd; return 0; }\n").unwrap();
    crate::common::bin::run_ok(
        std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&shim)
            .arg(&source),
    );
    let (lost, acked) = power_cut(Some(&shim));
    eprintln!(
        "without the flush: {} of {acked} acknowledged leases lost",
        lost.len()
    );
    assert!(!lost.is_empty(), "none of {acked} lost without the flush");
}

/// Drive DORAs against a daemon whose data directory is an ext4 on a loop device, copy the
/// device's image while the daemon is stopped at a random point (what a power cut leaves), tear
/// the copied WAL's tail, start a daemon on the copy and return the acknowledged leases it lost
/// and how many were acknowledged. `preload` is an `LD_PRELOAD` for the first daemon.
fn power_cut(preload: Option<&Path>) -> (Vec<String>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let (image, cut, mnt) = (
        dir.path().join("disk.img"),
        dir.path().join("cut.img"),
        dir.path().join("mnt"),
    );
    std::fs::create_dir(&mnt).unwrap();
    std::fs::File::create(&image)
        .unwrap()
        .set_len(96 << 20)
        .unwrap();
    crate::common::bin::run_ok(
        std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&image),
    );
    let data = mnt.join("data");
    let socket = client_socket();
    // The file system commits its own journal only every 10 minutes and the kernel writes
    // dirty pages back after 30 s: within this test, what is on the block device is what the
    // daemon flushed itself.
    let serve = |img: &Path| {
        let mut cmd = in_mount_namespace(
            "mount -o loop,commit=600 \"$0\" \"$1\" && shift && exec \"$@\"",
            &[img, &mnt, Path::new(STOKER)],
        );
        cmd.args(serve_cmd(&data, socket.local_addr().unwrap()))
            .current_dir(dir.path());
        if let Some(shim) = preload.filter(|_| img == image) {
            cmd.env("LD_PRELOAD", shim);
        }
        let mut served = Served::spawn(cmd);
        let addr = dhcp_addr(&mut served);
        (served, addr)
    };
    let (served, server) = serve(&image);
    let pid = served.child.id();
    let acked = load_until(
        socket.try_clone().unwrap(),
        server,
        kill_point(300, 3000),
        || {
            served.signal("STOP");
            wait_stopped(pid);
            // The block device as it is at this instant: what a power cut leaves.
            std::fs::copy(&image, &cut).unwrap();
            served.signal("KILL");
        },
    );
    served.wait();
    wait_detached(&image);

    // The machine comes back: the file system replays its journal at mount. The WAL gets the
    // torn frame its last write would have left.
    let mut cmd = in_mount_namespace(
        "mount -o loop \"$0\" \"$1\" && echo mounted && exec sleep 600",
        &[&cut, &mnt],
    );
    cmd.stdout(std::process::Stdio::piped());
    let mut mounted = cmd.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(mounted.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "mounted");
    tear_wal(&inside(mounted.id(), &data.join("stoker.db-wal")));
    mounted.kill().unwrap();
    mounted.wait().unwrap();
    wait_detached(&cut);

    let (served, server) = serve(&cut);
    let inner = inside(served.child.id(), &data);
    sign_in(&format!("http://{}", served.addr), &inner);
    let (lost, _) = lost(&served, &acked);
    if lost.is_empty() {
        assert_offered_again(&socket, server, &acked);
    }
    served.signal("TERM");
    served.wait();
    wait_detached(&cut);
    (lost, acked.len())
}

/// One DORA for `mac`, waiting at most `patience` for each answer: the address acknowledged,
/// or `None` when an answer did not come.
fn dora_once(
    socket: &UdpSocket,
    server: SocketAddr,
    mac: [u8; 6],
    xid: u32,
    patience: Duration,
) -> Option<Ipv4Addr> {
    socket.set_read_timeout(Some(patience)).unwrap();
    let mut buf = [0u8; 1500];
    let mut answer = |kind: MessageType| {
        let start = Instant::now();
        while start.elapsed() < patience {
            let Ok((n, _)) = socket.recv_from(&mut buf) else {
                return None;
            };
            let reply = Message::decode(&mut Decoder::new(&buf[..n])).unwrap();
            if reply.xid() == xid && reply.opts().msg_type() == Some(kind) {
                return Some(reply);
            }
        }
        None
    };
    let m = message(MessageType::Discover, mac, xid);
    socket.send_to(&m.to_vec().unwrap(), server).unwrap();
    let offer = answer(MessageType::Offer)?;
    let mut req = message(MessageType::Request, mac, xid);
    req.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(offer.yiaddr()));
    req.opts_mut()
        .insert(DhcpOption::ServerIdentifier(Ipv4Addr::LOCALHOST));
    socket.send_to(&req.to_vec().unwrap(), server).unwrap();
    answer(MessageType::Ack).map(|ack| ack.yiaddr())
}

/// Write zeros to `path` until the file system refuses.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    while f.write_all(&chunk).and_then(|()| f.sync_all()).is_ok() {}
    while f.write_all(&[0u8; 512]).is_ok() {}
}

#[test]
#[ignore = "needs root (mount namespace, tmpfs): .ci/run runs it"]
fn a_full_disk_stops_acknowledgements_until_leases_can_be_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().to_path_buf();
    let socket = client_socket();
    let mut cmd = in_mount_namespace(
        "mount -t tmpfs -o size=16m stoker-leases-full \"$0\" && exec \"$@\"",
        &[&mnt, Path::new(STOKER)],
    );
    let data = mnt.join("data");
    cmd.args(serve_cmd(&data, socket.local_addr().unwrap()))
        .current_dir(&mnt);
    let mut served = Served::spawn(cmd);
    let server = dhcp_addr(&mut served);
    let inner = inside(served.child.id(), &data);
    assert!(
        !dir.path().join("data").exists(),
        "the data directory is on the namespace's tmpfs"
    );
    let patience = Duration::from_millis(1500);
    let mut acked = Vec::new();
    for i in 1..=20u32 {
        let mac = mac_of(i);
        let ip = dora_once(&socket, server, mac, i, patience).expect("answered before the fill");
        acked.push((mac, ip));
    }
    // Signed in, and the token used once, before the disk fills: signing in and a token's
    // first use write to the database, which a full disk refuses (rightly); the reads below
    // write nothing for a minute.
    let base = format!("http://{}", served.addr);
    let token = sign_in(&base, &inner).token;
    assert_bound(&served, &acked);
    fill(&inside(served.child.id(), &mnt.join("filler")));

    // DORAs go on until one needs space the disk no longer has: that one gets no answer.
    let mut refused = None;
    for i in 21..3000u32 {
        let mac = mac_of(i);
        match dora_once(&socket, server, mac, i, patience) {
            Some(ip) => acked.push((mac, ip)),
            None => {
                refused = Some(mac);
                break;
            }
        }
    }
    let refused = refused.expect("a DORA went unanswered for want of space");
    // The reason is in the log.
    let start = Instant::now();
    let mut said = false;
    while !said && start.elapsed() < Duration::from_secs(10) {
        if let Ok(line) = served.lines.recv_timeout(Duration::from_millis(200)) {
            said = line.contains("cannot store DHCP leases") && line.contains("full");
            served.log.push(line);
        }
    }
    assert!(said, "{:#?}", served.log);
    // While the disk is full, whatever is still answered was kept (a commit may still fit
    // in WAL space a failed one had taken): every ACK is bound, none lost.
    for i in 3000..3010u32 {
        if let Some(ip) = dora_once(&socket, server, mac_of(i), i, Duration::from_millis(300)) {
            acked.push((mac_of(i), ip));
        }
    }
    assert_bound(&served, &acked);
    let counters = Http::raw_get_json(&format!("{base}/api/v1/pxe"))["dhcp"]["counters"].clone();
    assert!(
        counters["store_errors"].as_u64().unwrap() >= 1,
        "{counters}"
    );
    let (status, metrics, _) = Http::get_bytes(
        &format!("{base}/metrics"),
        &[("authorization", &format!("Bearer {token}"))],
    );
    assert_eq!(status, 200);
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(
        metrics.contains(r#"stoker_dhcp_packets_total{type="discover",result="unavailable"}"#),
        "{metrics}"
    );

    // Space again: within the retry (a second) the server answers, the refused MAC too.
    std::fs::remove_file(inside(served.child.id(), &mnt.join("filler"))).unwrap();
    let start = Instant::now();
    let ip = loop {
        if let Some(ip) = dora_once(&socket, server, refused, 6000, patience) {
            break ip;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no answer once space is back"
        );
    };
    acked.push((refused, ip));
    assert_bound(&served, &acked);
    served.signal("TERM");
    let (code, log) = served.wait();
    assert_eq!(code, Some(0), "{log:#?}");
}
