//! The TFTP server over real UDP on loopback: fetched with curl (a real client) and with a small
//! client written here for what curl does not do (windowsize, netascii, hostile requests).

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use stoker::config::Layers;

use crate::common::TestDaemon;

fn daemon(extra: &[(&'static str, &str)]) -> (TestDaemon, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tftproot");
    std::fs::create_dir_all(root.join("pxe")).unwrap();
    let mut layers = Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("http.shutdown_timeout", "5".to_string())
        .with_flag("tftp.enabled", "true".to_string())
        .with_flag("tftp.listen", "127.0.0.1:0".to_string())
        .with_flag("tftp.root", root.display().to_string());
    for (k, v) in extra {
        layers = layers.with_flag(k, (*v).to_string());
    }
    let d = TestDaemon::start_with(layers.resolve().unwrap(), dir);
    (d, root)
}

/// Deterministic bytes that are not a repeating pattern of any block size.
fn content(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

fn curl(url: &str, args: &[&str]) -> (bool, Vec<u8>, String) {
    let (code, out, err) = curl_code(url, args);
    (code == 0, out, err)
}

fn curl_code(url: &str, args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl is installed (it is the real TFTP client of these tests)");
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(root: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(root.join(name), bytes).unwrap();
}

#[test]
fn curl_fetches_files_with_and_without_blksize() {
    let (d, root) = daemon(&[]);
    let port = d.tftp.unwrap().port();
    let data = content(300_000);
    write(&root, "pxe/undionly.kpxe", &data);
    write(&root, "exact.bin", &content(1024)); // a multiple of 512: ends with an empty block
    write(&root, "empty", b"");
    let url = |f: &str| format!("tftp://127.0.0.1:{port}/{f}");
    let (ok, got, err) = curl(&url("pxe/undionly.kpxe"), &[]);
    assert!(ok, "{err}");
    assert_eq!(got, data);
    let (ok, got, err) = curl(&url("pxe/undionly.kpxe"), &["--tftp-blksize", "1468"]);
    assert!(ok, "{err}");
    assert_eq!(got, data);
    let (ok, got, _) = curl(&url("exact.bin"), &["--tftp-no-options"]);
    assert!(ok);
    assert_eq!(got, content(1024));
    let (ok, got, _) = curl(&url("empty"), &[]);
    assert!(ok);
    assert!(got.is_empty());
    // curl's exit code 68 is CURLE_TFTP_NOTFOUND: it got our "file not found" error packet.
    let (code, _, err) = curl_code(&url("missing.bin"), &[]);
    assert_eq!(code, 68, "{err}");
    let counters = d.http().get("/api/v1/pxe").json()["tftp"]["counters"].clone();
    assert!(counters["completed"].as_u64().unwrap() >= 4, "{counters}");
    assert!(
        counters["bytes_sent"].as_u64().unwrap() >= 600_000,
        "{counters}"
    );
}

#[test]
fn the_embedded_chain_script_is_served() {
    let (d, _root) = daemon(&[]);
    let port = d.tftp.unwrap().port();
    let (ok, got, err) = curl(&format!("tftp://127.0.0.1:{port}/stoker.ipxe"), &[]);
    assert!(ok, "{err}");
    let script = String::from_utf8(got).unwrap();
    assert!(script.starts_with("#!ipxe\nchain http://"), "{script}");
    assert!(script.contains("/boot/${mac}.ipxe"), "{script}");
}

/// A minimal TFTP reader: RRQ with options, OACK handling, windowed ACKs (RFC 7440).
struct Reader {
    socket: UdpSocket,
}

#[derive(Debug)]
enum Outcome {
    Data(Vec<u8>, Vec<(String, String)>),
    Error(u16, String),
}

fn rrq(name: &str, mode: &str, opts: &[(&str, &str)]) -> Vec<u8> {
    let mut p = vec![0, 1];
    for s in [name, mode]
        .into_iter()
        .chain(opts.iter().flat_map(|(a, b)| [*a, *b]))
    {
        p.extend_from_slice(s.as_bytes());
        p.push(0);
    }
    p
}

fn cstrings(b: &[u8]) -> Vec<String> {
    b.split(|c| *c == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

impl Reader {
    fn new() -> Reader {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        Reader { socket }
    }

    fn get(&self, server: SocketAddr, name: &str, mode: &str, opts: &[(&str, &str)]) -> Outcome {
        self.socket.send_to(&rrq(name, mode, opts), server).unwrap();
        let window: u64 = opts
            .iter()
            .find(|(k, _)| *k == "windowsize")
            .map_or(1, |(_, v)| v.parse().unwrap());
        let mut blksize = 512usize;
        let mut window = window;
        let mut out = Vec::new();
        let mut oack = Vec::new();
        let mut expected: u16 = 1;
        let mut in_window = 0;
        let mut buf = vec![0u8; 70_000];
        let mut peer: Option<SocketAddr> = None;
        loop {
            let (n, from) = self.socket.recv_from(&mut buf).expect("server answers");
            if let Some(p) = peer {
                assert_eq!(p, from, "one transfer ID");
            }
            peer = Some(from);
            let op = u16::from_be_bytes([buf[0], buf[1]]);
            match op {
                5 => {
                    let code = u16::from_be_bytes([buf[2], buf[3]]);
                    return Outcome::Error(code, cstrings(&buf[4..n]).join(""));
                }
                6 => {
                    let fields = cstrings(&buf[2..n]);
                    for kv in fields.chunks(2) {
                        oack.push((kv[0].clone(), kv[1].clone()));
                        match kv[0].as_str() {
                            "blksize" => blksize = kv[1].parse().unwrap(),
                            "windowsize" => window = kv[1].parse().unwrap(),
                            _ => {}
                        }
                    }
                    self.socket.send_to(&[0, 4, 0, 0], from).unwrap();
                }
                3 => {
                    let block = u16::from_be_bytes([buf[2], buf[3]]);
                    if block != expected {
                        // Out of order (a loss): ACK the last good block to restart the window.
                        let last = expected.wrapping_sub(1).to_be_bytes();
                        self.socket
                            .send_to(&[0, 4, last[0], last[1]], from)
                            .unwrap();
                        in_window = 0;
                        continue;
                    }
                    out.extend_from_slice(&buf[4..n]);
                    expected = expected.wrapping_add(1);
                    in_window += 1;
                    let last = n - 4 < blksize;
                    if last || in_window == window {
                        let b = block.to_be_bytes();
                        self.socket.send_to(&[0, 4, b[0], b[1]], from).unwrap();
                        in_window = 0;
                    }
                    if last {
                        return Outcome::Data(out, oack);
                    }
                }
                other => panic!("unexpected opcode {other}"),
            }
        }
    }
}

fn data(o: Outcome) -> (Vec<u8>, Vec<(String, String)>) {
    match o {
        Outcome::Data(d, oack) => (d, oack),
        Outcome::Error(c, m) => panic!("error {c}: {m}"),
    }
}

#[test]
fn windowsize_blksize_tsize_and_rollover() {
    let (d, root) = daemon(&[]);
    let server = d.tftp.unwrap();
    let big = content(600_000);
    write(&root, "big.bin", &big);
    let (got, oack) = data(Reader::new().get(
        server,
        "big.bin",
        "octet",
        &[("blksize", "1468"), ("windowsize", "16"), ("tsize", "0")],
    ));
    assert_eq!(got, big);
    assert_eq!(
        oack,
        vec![
            ("blksize".into(), "1468".into()),
            ("windowsize".into(), "16".into()),
            ("tsize".into(), "600000".into())
        ]
    );
    // 600,000 bytes in 8-byte blocks: 75,001 blocks, so block numbers wrap past 65535 to 0.
    let (got, _) = data(Reader::new().get(
        server,
        "big.bin",
        "octet",
        &[("blksize", "8"), ("windowsize", "32")],
    ));
    assert_eq!(got, big);
    // A client asking for jumbo blocks gets what fits one 1500-byte frame.
    let (_, oack) = data(Reader::new().get(server, "big.bin", "octet", &[("blksize", "65464")]));
    assert_eq!(oack, vec![("blksize".into(), "1468".into())]);
}

#[test]
fn netascii_converts_line_ends() {
    let (d, root) = daemon(&[]);
    write(&root, "menu.txt", b"line one\nline two\r\n");
    let (got, oack) =
        data(Reader::new().get(d.tftp.unwrap(), "menu.txt", "NETASCII", &[("tsize", "0")]));
    assert_eq!(got, b"line one\r\nline two\r\0\r\n");
    assert_eq!(oack, vec![("tsize".into(), "22".into())]);
}

#[test]
fn escapes_from_the_root_are_refused_with_an_error_packet() {
    let (d, root) = daemon(&[]);
    let server = d.tftp.unwrap();
    let outside = root.parent().unwrap().join("secret.txt");
    std::fs::write(&outside, b"secret").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
    for name in [
        "../secret.txt",
        "pxe/../../secret.txt",
        "..\\secret.txt",
        "/etc/passwd",
        "link.txt",
        "etc/passwd",
    ] {
        match Reader::new().get(server, name, "octet", &[]) {
            Outcome::Error(code, msg) => assert_eq!(code, 2, "{name}: {msg}"),
            Outcome::Data(..) => panic!("{name} was served"),
        }
    }
    match Reader::new().get(server, "x", "octet", &[]) {
        Outcome::Error(1, _) => {}
        other => panic!("{other:?}"),
    }
    // Writes are refused too.
    let r = Reader::new();
    let mut wrq = rrq("up.bin", "octet", &[]);
    wrq[1] = 2;
    r.socket.send_to(&wrq, server).unwrap();
    let mut buf = [0u8; 600];
    let (n, _) = r.socket.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..4], &[0, 5, 0, 2], "{:?}", &buf[..n]);
    assert!(!root.join("up.bin").exists());
}

#[test]
fn garbage_is_survived_and_counted() {
    let (d, root) = daemon(&[]);
    let server = d.tftp.unwrap();
    write(&root, "ok.bin", b"fine");
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    for j in [
        &b""[..],
        b"\x00",
        b"\x00\x01",
        b"\x00\x01name-without-nul",
        b"\x00\x09\x00\x00",
        b"\x00\x01f\x00octet\x00blksize\x00",
        &[0xff; 1400],
    ] {
        junk.send_to(j, server).unwrap();
    }
    let (got, _) = data(Reader::new().get(server, "ok.bin", "octet", &[]));
    assert_eq!(got, b"fine");
    let counters = d.http().get("/api/v1/pxe").json()["tftp"]["counters"].clone();
    assert!(counters["malformed"].as_u64().unwrap() >= 5, "{counters}");
}

#[test]
fn lost_acks_are_retransmitted_and_transfers_are_capped() {
    let (d, root) = daemon(&[("tftp.max_transfers", "1")]);
    let server = d.tftp.unwrap();
    write(&root, "f.bin", &content(2000));
    // A client that never acknowledges: it receives block 1 again after the timeout.
    let silent = Reader::new();
    silent
        .socket
        .send_to(&rrq("f.bin", "octet", &[]), server)
        .unwrap();
    let mut buf = [0u8; 600];
    let (_, first_from) = silent.socket.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..4], &[0, 3, 0, 1]);
    let t0 = Instant::now();
    // While it holds the only slot, another request is told the server is busy.
    match Reader::new().get(server, "f.bin", "octet", &[]) {
        Outcome::Error(0, msg) => assert!(msg.contains("busy"), "{msg}"),
        other => panic!("{other:?}"),
    }
    let (_, again_from) = silent.socket.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..4], &[0, 3, 0, 1], "block 1 is sent again");
    assert_eq!(first_from, again_from);
    assert!(t0.elapsed() >= Duration::from_millis(500));
    let counters = d.http().get("/api/v1/pxe").json()["tftp"]["counters"].clone();
    assert_eq!(counters["busy"], 1, "{counters}");
    // The silent transfer still waits for its ACK (for seconds, with backoff): stopping the
    // daemon does not wait for it.
    let stopping = Instant::now();
    drop(d);
    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "{:?}",
        stopping.elapsed()
    );
}

#[test]
fn clients_that_never_ack_give_their_slots_up_under_pressure() {
    let (d, root) = daemon(&[("tftp.max_transfers", "2")]);
    let server = d.tftp.unwrap();
    write(&root, "f.bin", &content(5000));
    // Two clients take both slots and never acknowledge anything.
    let silent: Vec<Reader> = (0..2).map(|_| Reader::new()).collect();
    for s in &silent {
        s.socket
            .send_to(&rrq("f.bin", "octet", &[]), server)
            .unwrap();
        let mut buf = [0u8; 600];
        s.socket.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..4], &[0, 3, 0, 1], "first block");
    }
    // A new client is turned away at first, and served within a few seconds as it retries:
    // the silent transfers give their slots up after STALL_UNDER_PRESSURE without an ACK,
    // where they used to hold them through half a minute of retransmissions.
    let t0 = Instant::now();
    let fresh = Reader::new();
    let got = loop {
        match fresh.get(server, "f.bin", "octet", &[]) {
            Outcome::Data(bytes, _) => break bytes,
            Outcome::Error(0, msg) => assert!(msg.contains("busy"), "{msg}"),
            other => panic!("{other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(6), "still busy");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(got, content(5000));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    // A silent client that gave its slot up was told so, and counted. (The other one may keep
    // its slot: once one is free there is no pressure until someone takes it.)
    let mut told = 0;
    for s in &silent {
        s.socket
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 600];
        while let Ok((n, _)) = s.socket.recv_from(&mut buf) {
            if buf[1] == 5 {
                let error = cstrings(&buf[4..n]).join("");
                assert!(error.contains("busy"), "{error}");
                told += 1;
                break;
            }
        }
    }
    let counters = d.http().get("/api/v1/pxe").json()["tftp"]["counters"].clone();
    assert!(told >= 1, "{counters}");
    assert_eq!(counters["evicted"], told, "{counters}");
}

#[test]
fn a_slow_client_keeps_its_slot_while_others_are_free() {
    let (d, root) = daemon(&[("tftp.max_transfers", "2")]);
    let server = d.tftp.unwrap();
    write(&root, "f.bin", &content(5000));
    let silent = Reader::new();
    silent
        .socket
        .send_to(&rrq("f.bin", "octet", &[]), server)
        .unwrap();
    // Without pressure it is retransmitted to (at 1 s and 3 s), past STALL_UNDER_PRESSURE.
    let t0 = Instant::now();
    let mut buf = [0u8; 600];
    let mut sends = 0;
    silent
        .socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    while t0.elapsed() < Duration::from_millis(3500) {
        if silent.socket.recv_from(&mut buf).is_ok() {
            assert_eq!(&buf[..4], &[0, 3, 0, 1], "block 1 again, no error");
            sends += 1;
        }
    }
    assert_eq!(sends, 3, "the first send and two retransmissions");
    let counters = d.http().get("/api/v1/pxe").json()["tftp"]["counters"].clone();
    assert_eq!(counters["evicted"], 0, "{counters}");
}
