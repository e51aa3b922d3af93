//! A windowsize-capable TFTP download client for `benches/pxe.sh` (issue 6, item 7): RRQ with
//! blksize, windowsize (RFC 7440) and tsize, OACK, one ACK per window, an ACK of the last good
//! block on a gap or a timeout (RFC 7440 §4), block-number rollover, the server's transfer ID
//! kept by a connected socket. It exists because atftp, the Debian client with windowsize,
//! spends a `pselect` and a `recvmsg` per packet and caps what a windowed server can show on
//! this machine; this one does a blocking `recv` per packet and writes through a 1 MiB buffer.
//! It is a real client over real UDP: the same packets any RFC 7440 client exchanges.
//!
//! `cargo bench --bench tftp_get --no-run` builds it; then
//! `tftp_get SERVER[:PORT] REMOTE LOCAL [--blksize N] [--windowsize N]` (windowsize 1 is
//! lock-step). Exit status 0 when the whole file arrived. Not part of CI.

use std::io::{BufWriter, Write};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use stoker::tftp::session::Packet;

const USAGE: &str = "usage: tftp_get SERVER[:PORT] REMOTE LOCAL [--blksize N] [--windowsize N]";

struct Args {
    server: SocketAddr,
    remote: String,
    local: String,
    blksize: u16,
    windowsize: u16,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut positional = Vec::new();
    let (mut blksize, mut windowsize) = (1468u16, 1u16);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<u16, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{name} needs a number"))
        };
        match a.as_str() {
            "--blksize" => blksize = number("--blksize")?,
            "--windowsize" => windowsize = number("--windowsize")?.max(1),
            _ => positional.push(a.clone()),
        }
    }
    let [server, remote, local] = positional.as_slice() else {
        return Err(USAGE.into());
    };
    let server = server
        .parse::<SocketAddr>()
        .or_else(|_| server.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 69)))
        .map_err(|_| format!("{server}: not an address"))?;
    Ok(Args {
        server,
        remote: remote.clone(),
        local: local.clone(),
        blksize,
        windowsize,
    })
}

fn rrq(args: &Args) -> Vec<u8> {
    let mut p = vec![0, 1];
    let (blk, win) = (args.blksize.to_string(), args.windowsize.to_string());
    let mut fields = vec![args.remote.as_str(), "octet", "blksize", &blk, "tsize", "0"];
    if args.windowsize > 1 {
        fields.extend(["windowsize", &win]);
    }
    for f in fields {
        p.extend_from_slice(f.as_bytes());
        p.push(0);
    }
    p
}

fn ack(block: u16) -> [u8; 4] {
    let b = block.to_be_bytes();
    [0, 4, b[0], b[1]]
}

/// The options of an OACK packet, names lower-cased.
fn oack_options(packet: &[u8]) -> Vec<(String, String)> {
    let fields: Vec<String> = packet[2..]
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    fields
        .chunks(2)
        .filter(|kv| kv.len() == 2 && !kv[0].is_empty())
        .map(|kv| (kv[0].to_ascii_lowercase(), kv[1].clone()))
        .collect()
}

/// What a download saw besides the data.
#[derive(Default)]
struct Trouble {
    timeouts: u32,
    gaps: u32,
}

fn download(args: &Args, trouble: &mut Trouble) -> Result<u64, String> {
    let any: IpAddr = if args.server.is_ipv4() {
        [0, 0, 0, 0].into()
    } else {
        [0u16; 8].into()
    };
    let io = |what: &'static str| move |e: std::io::Error| format!("{what}: {e}");
    let socket = UdpSocket::bind(SocketAddr::new(any, 0)).map_err(io("bind"))?;
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .map_err(io("socket"))?;
    let file = std::fs::File::create(&args.local).map_err(io("create"))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let request = rrq(args);
    socket
        .send_to(&request, args.server)
        .map_err(io("send RRQ"))?;
    let (mut blksize, mut window) = (512usize, 1u32);
    let mut buf = vec![0u8; 65_536];
    let mut peer: Option<SocketAddr> = None;
    let (mut expected, mut in_window, mut timeouts, mut bytes) = (1u16, 0u32, 0u32, 0u64);
    loop {
        let received = match peer {
            // Connected to the server's transfer ID: other sources never reach us.
            Some(p) => socket.recv(&mut buf).map(|n| (n, p)),
            None => socket.recv_from(&mut buf),
        };
        let (n, from) = match received {
            Ok(got) => got,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                timeouts += 1;
                trouble.timeouts += 1;
                if timeouts > 5 {
                    return Err("the server stopped answering".into());
                }
                match peer {
                    None => socket.send_to(&request, args.server),
                    Some(_) => socket.send(&ack(expected.wrapping_sub(1))),
                }
                .map_err(io("send"))?;
                continue;
            }
            Err(e) => return Err(format!("receive: {e}")),
        };
        timeouts = 0;
        let first = peer.is_none();
        if first {
            socket.connect(from).map_err(io("connect"))?;
            peer = Some(from);
        }
        match Packet::parse(&buf[..n]) {
            Ok(Packet::OptionAck) if first => {
                for (k, v) in oack_options(&buf[..n]) {
                    match k.as_str() {
                        "blksize" => blksize = v.parse().map_err(|_| "bad blksize in OACK")?,
                        "windowsize" => window = v.parse().map_err(|_| "bad windowsize")?,
                        _ => {}
                    }
                }
                socket.send(&ack(0)).map_err(io("send ACK"))?;
            }
            Ok(Packet::Data { block, len }) if block == expected => {
                out.write_all(&buf[4..4 + len]).map_err(io("write"))?;
                bytes += len as u64;
                expected = expected.wrapping_add(1);
                in_window += 1;
                let last = len < blksize;
                if last || in_window >= window {
                    socket.send(&ack(block)).map_err(io("send ACK"))?;
                    in_window = 0;
                }
                if last {
                    out.flush().map_err(io("write"))?;
                    return Ok(bytes);
                }
            }
            Ok(Packet::Data { .. }) => {
                // A gap (a lost packet): acknowledge the last good block; the server sends
                // again from there and ignores the same ACK repeated.
                trouble.gaps += 1;
                socket
                    .send(&ack(expected.wrapping_sub(1)))
                    .map_err(io("send ACK"))?;
                in_window = 0;
            }
            Ok(Packet::Error { code, message }) => {
                return Err(format!("server error {code}: {message}"));
            }
            _ => {}
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--bench") {
        // `cargo bench` runs every bench target; this one only runs from benches/pxe.sh.
        println!("tftp_get: a TFTP client for benches/pxe.sh; {USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse_args(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tftp_get: {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let mut trouble = Trouble::default();
    match download(&args, &mut trouble) {
        Ok(bytes) => {
            let secs = started.elapsed().as_secs_f64();
            println!(
                "tftp_get: {bytes} bytes in {secs:.3} s = {:.1} MB/s; {} timeouts, {} out-of-order packets",
                bytes as f64 / secs / 1e6,
                trouble.timeouts,
                trouble.gaps
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tftp_get: {e}");
            ExitCode::FAILURE
        }
    }
}
