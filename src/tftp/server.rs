//! The TFTP server's sockets and files: the listening socket takes read requests, each transfer
//! runs on its own ephemeral socket (its transfer ID) in a blocking thread of tokio's pool,
//! driven by the pure [`session::Sender`] and sending each window with [`Burst`], files come
//! from the root directory or from files compiled into the binary, and a semaphore caps
//! concurrent transfers. When every slot is taken, a transfer whose client has not ACKed for
//! [`STALL_UNDER_PRESSURE`] gives its slot up, so clients that open transfers and never answer
//! cannot keep the rest out for the half minute of retransmissions. It decides nothing about
//! the protocol itself (that is `session`).
//!
//! Path safety is layered: `session::safe_components` refuses absolute names and `..`, and the
//! file actually opened is canonicalized and must still be inside the canonical root, so a
//! symlink that points out of the root is refused too.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::net::UdpSocket;
use tokio::sync::Semaphore;

use super::burst::Burst;
use super::session::{
    self, Action, ErrorCode, Limits, Mode, Packet, Request, Sender, error_packet, oack_packet,
};

/// What the server has done since it started.
#[derive(Debug, Default)]
pub struct TftpStats {
    pub requests: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    /// Ended by the client with an ERROR packet (firmware probing tsize aborts on purpose).
    pub aborted: AtomicU64,
    pub refused: AtomicU64,
    pub busy: AtomicU64,
    pub malformed: AtomicU64,
    pub bytes_sent: AtomicU64,
    /// Dropped for want of an ACK while every slot was taken.
    pub evicted: AtomicU64,
}

/// A snapshot of [`TftpStats`] for JSON.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct TftpCounters {
    pub requests: u64,
    pub completed: u64,
    pub failed: u64,
    pub aborted: u64,
    pub refused: u64,
    pub busy: u64,
    pub malformed: u64,
    pub bytes_sent: u64,
    pub evicted: u64,
}

impl TftpStats {
    pub fn snapshot(&self) -> TftpCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TftpCounters {
            requests: get(&self.requests),
            completed: get(&self.completed),
            failed: get(&self.failed),
            aborted: get(&self.aborted),
            refused: get(&self.refused),
            busy: get(&self.busy),
            malformed: get(&self.malformed),
            bytes_sent: get(&self.bytes_sent),
            evicted: get(&self.evicted),
        }
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

#[derive(Debug, thiserror::Error)]
pub enum TftpServerError {
    #[error("cannot bind the TFTP socket to {addr} (tftp.listen): {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Where files come from: the root directory first, then the embedded files.
#[derive(Debug, Clone)]
pub struct FileSource {
    root: PathBuf,
    embedded: BTreeMap<String, Arc<[u8]>>,
}

/// An open file's bytes.
enum Content {
    File(File, u64),
    Memory(Arc<[u8]>),
}

impl Content {
    fn len(&self) -> u64 {
        match self {
            Content::File(_, len) => *len,
            Content::Memory(bytes) => bytes.len() as u64,
        }
    }

    /// Append bytes `start..end` to `out`.
    fn read(&self, start: u64, end: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
        match self {
            Content::Memory(bytes) => {
                out.extend_from_slice(memory_slice(bytes, start, end));
                Ok(())
            }
            Content::File(file, _) => read_file_at(file, start, end, out),
        }
    }

    /// Bytes `start..end`, fewer if the file shrank. A file is read ahead in pieces of
    /// [`READ_AHEAD`] kept in `ahead`, so a transfer costs one read per piece rather than one
    /// per window (one per block in lock-step).
    fn slice<'a>(
        &'a self,
        start: u64,
        end: u64,
        ahead: &'a mut ReadAhead,
    ) -> std::io::Result<&'a [u8]> {
        match self {
            Content::Memory(bytes) => Ok(memory_slice(bytes, start, end)),
            Content::File(file, len) => {
                if start < ahead.at || end > ahead.at + ahead.bytes.len() as u64 {
                    ahead.bytes.clear();
                    ahead.at = start;
                    let until = start.saturating_add(READ_AHEAD).min(*len).max(end);
                    read_file_at(file, start, until, &mut ahead.bytes)?;
                }
                let lo = usize::try_from(start - ahead.at).unwrap_or(usize::MAX);
                let hi = usize::try_from(end - ahead.at).unwrap_or(usize::MAX);
                let n = ahead.bytes.len();
                Ok(&ahead.bytes[lo.min(n)..hi.min(n)])
            }
        }
    }
}

/// How much of a file one read brings in.
const READ_AHEAD: u64 = 256 * 1024;

/// The piece of a file read last: its bytes and where they start.
#[derive(Default)]
struct ReadAhead {
    bytes: Vec<u8>,
    at: u64,
}

fn memory_slice(bytes: &[u8], start: u64, end: u64) -> &[u8] {
    let clamp = |at: u64| usize::try_from(at).unwrap_or(usize::MAX).min(bytes.len());
    let (s, e) = (clamp(start), clamp(end));
    &bytes[s.min(e)..e]
}

/// Append bytes `start..end` of `file` to `out`; fewer if the file shrank.
fn read_file_at(file: &File, start: u64, end: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
    let at = out.len();
    let want = usize::try_from(end.saturating_sub(start)).unwrap_or(0);
    out.resize(at + want, 0);
    let mut done = 0;
    while done < want {
        let n = file.read_at(&mut out[at + done..], start + done as u64)?;
        if n == 0 {
            break; // the file shrank: send what there is
        }
        done += n;
    }
    out.truncate(at + done);
    Ok(())
}

/// Why a file is not served.
struct Refusal(ErrorCode, String);

impl FileSource {
    pub fn new(root: PathBuf, embedded: BTreeMap<String, Arc<[u8]>>) -> FileSource {
        FileSource { root, embedded }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn open(&self, name: &str, mode: Mode) -> Result<Content, Refusal> {
        let parts = session::safe_components(name)
            .map_err(|e| Refusal(ErrorCode::AccessViolation, e.to_string()))?;
        let mut path = self.root.clone();
        path.extend(&parts);
        let content = match std::fs::canonicalize(&path) {
            Ok(real) => {
                let root = std::fs::canonicalize(&self.root)
                    .map_err(|_| Refusal(ErrorCode::FileNotFound, "no TFTP root".into()))?;
                if !real.starts_with(&root) {
                    return Err(Refusal(
                        ErrorCode::AccessViolation,
                        "path leaves the TFTP root".into(),
                    ));
                }
                let file = File::open(&real)
                    .map_err(|_| Refusal(ErrorCode::AccessViolation, "cannot open file".into()))?;
                let meta = file
                    .metadata()
                    .map_err(|_| Refusal(ErrorCode::AccessViolation, "cannot open file".into()))?;
                if !meta.is_file() {
                    return Err(Refusal(ErrorCode::FileNotFound, "not a file".into()));
                }
                Content::File(file, meta.len())
            }
            Err(_) => match self.embedded.get(&parts.join("/")) {
                Some(bytes) => Content::Memory(Arc::clone(bytes)),
                None => return Err(Refusal(ErrorCode::FileNotFound, "file not found".into())),
            },
        };
        Ok(match mode {
            Mode::Octet => content,
            Mode::Netascii => {
                let mut raw = Vec::new();
                content
                    .read(0, content.len(), &mut raw)
                    .map_err(|_| Refusal(ErrorCode::AccessViolation, "cannot read file".into()))?;
                Content::Memory(session::to_netascii(&raw).into())
            }
        })
    }
}

/// Bind the listening socket.
pub fn bind(addr: SocketAddr) -> Result<UdpSocket, TftpServerError> {
    let err = |source| TftpServerError::Bind { addr, source };
    let socket = std::net::UdpSocket::bind(addr).map_err(err)?;
    socket.set_nonblocking(true).map_err(err)?;
    UdpSocket::from_std(socket).map_err(err)
}

/// The running server.
pub struct TftpServer {
    socket: UdpSocket,
    source: Arc<FileSource>,
    limits: Limits,
    slots: Arc<Semaphore>,
    stats: Arc<TftpStats>,
}

impl TftpServer {
    pub fn new(
        socket: UdpSocket,
        source: FileSource,
        limits: Limits,
        max_transfers: usize,
        stats: Arc<TftpStats>,
    ) -> TftpServer {
        TftpServer {
            socket,
            source: Arc::new(source),
            limits,
            slots: Arc::new(Semaphore::new(max_transfers.max(1))),
            stats,
        }
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Serve until `shutdown` resolves; transfers under way stop within [`STOP_POLL`] of it.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let local = self.local_addr().ok();
        tracing::info!(
            addr = %local.map_or_else(String::new, |a| a.to_string()),
            root = %self.source.root().display(),
            "TFTP server listening"
        );
        let local_ip = local.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip());
        tokio::pin!(shutdown);
        let mut transfers = tokio::task::JoinSet::new();
        let stop = Arc::new(AtomicBool::new(false));
        let mut buf = vec![0u8; 2048];
        loop {
            let (n, peer) = tokio::select! {
                () = &mut shutdown => break,
                Some(_) = transfers.join_next(), if !transfers.is_empty() => continue,
                res = self.socket.recv_from(&mut buf) => match res {
                    Ok(got) => got,
                    Err(err) => {
                        tracing::debug!(%err, "TFTP receive error");
                        continue;
                    }
                },
            };
            let reply = |code, msg: &str| {
                let packet = error_packet(code, msg);
                let socket = &self.socket;
                async move {
                    let _ = socket.send_to(&packet, peer).await;
                }
            };
            match Packet::parse(&buf[..n]) {
                Ok(Packet::Read(req)) => {
                    bump(&self.stats.requests);
                    let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() else {
                        bump(&self.stats.busy);
                        reply(ErrorCode::NotDefined, "server busy, try again").await;
                        continue;
                    };
                    let source = Arc::clone(&self.source);
                    let stats = Arc::clone(&self.stats);
                    let limits = self.limits;
                    let stop = Arc::clone(&stop);
                    let slots = Arc::clone(&self.slots);
                    transfers.spawn_blocking(move || {
                        let shared = Shared {
                            source: &source,
                            stats: &stats,
                            stop: &stop,
                            slots: &slots,
                        };
                        transfer(local_ip, peer, req, limits, &shared);
                        drop(permit);
                    });
                }
                Ok(Packet::Write { filename }) => {
                    bump(&self.stats.refused);
                    tracing::info!(%peer, %filename, "TFTP write refused");
                    reply(ErrorCode::AccessViolation, "read-only server").await;
                }
                Ok(_) => {
                    // A stray DATA/ACK/ERROR to the listening port: no transfer has this ID.
                    reply(ErrorCode::UnknownTransferId, "unknown transfer").await;
                }
                Err(err @ session::ParseError::Mode(_)) => {
                    bump(&self.stats.malformed);
                    reply(ErrorCode::IllegalOperation, &err.to_string()).await;
                }
                Err(err) => {
                    // Garbage is dropped without an answer, so the server cannot be used to
                    // reflect traffic at a forged source.
                    bump(&self.stats.malformed);
                    tracing::debug!(%peer, %err, "malformed TFTP packet dropped");
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        transfers.shutdown().await;
        tracing::info!("TFTP server stopped");
    }
}

/// How often a transfer waiting for an ACK looks at the stop flag (and at the slots).
const STOP_POLL: Duration = Duration::from_millis(100);

/// How long a transfer may wait for an ACK while every slot is taken before it gives its slot
/// up. A client that answers at all ACKs within milliseconds; one retransmission (1 s) and a
/// second of grace.
pub const STALL_UNDER_PRESSURE: Duration = Duration::from_secs(2);

/// What every transfer shares with the server.
struct Shared<'a> {
    source: &'a FileSource,
    stats: &'a TftpStats,
    /// Set when the server is shutting down.
    stop: &'a AtomicBool,
    /// The transfer slots: none left is the pressure that evicts stalled transfers.
    slots: &'a Semaphore,
}

/// One read transfer on its own blocking socket, on a thread of its own: a window is sent in
/// one go ([`Burst`]) and the ACK is awaited with a plain blocking receive, so no packet waits
/// for a scheduler. Returns early when `stop` is set (the server is shutting down), and when
/// every slot is taken and the client has not ACKed for [`STALL_UNDER_PRESSURE`].
fn transfer(local_ip: IpAddr, peer: SocketAddr, req: Request, limits: Limits, shared: &Shared<'_>) {
    let Shared {
        source,
        stats,
        stop,
        slots,
    } = *shared;
    let socket = match std::net::UdpSocket::bind(SocketAddr::new(local_ip, 0)) {
        Ok(s) => s,
        Err(err) => {
            tracing::warn!(%err, "cannot open a TFTP transfer socket");
            bump(&stats.failed);
            return;
        }
    };
    if let Err(err) = socket.connect(peer) {
        tracing::warn!(%err, %peer, "cannot reach TFTP client");
        bump(&stats.failed);
        return;
    }
    let content = match source.open(&req.filename, req.mode) {
        Ok(c) => c,
        Err(Refusal(code, message)) => {
            bump(&stats.refused);
            tracing::info!(%peer, file = %req.filename, %message, "TFTP request refused");
            let _ = socket.send(&error_packet(code, &message));
            return;
        }
    };
    let size = content.len();
    let negotiated = session::negotiate(&req.options, size, &limits);
    let mut sender = Sender::new(size, &negotiated, &limits);
    let mut action = sender.start();
    let mut burst = Burst::new(negotiated.blksize, negotiated.windowsize);
    let mut ahead = ReadAhead::default();
    let mut rbuf = vec![0u8; 1024];
    let mut read_timeout = None;
    let started = Instant::now();
    let mut last_ack = started;
    loop {
        match action {
            Action::SendOack => {
                let _ = socket.send(&oack_packet(&negotiated.oack));
            }
            Action::Send(window) => {
                // The window's bytes (read ahead), then its packets in one burst.
                let last = window.first + window.count - 1;
                let (from, _) = sender.range(window.first, size);
                let (_, to) = sender.range(last, size);
                let chunk = match content.slice(from, to, &mut ahead) {
                    Ok(bytes) => bytes,
                    Err(err) => {
                        tracing::warn!(%err, file = %req.filename, "TFTP read failed");
                        let _ = socket.send(&error_packet(ErrorCode::NotDefined, "read error"));
                        bump(&stats.failed);
                        return;
                    }
                };
                burst.clear();
                for k in window.first..=last {
                    let (start, end) = sender.range(k, size);
                    let lo = usize::try_from(start - from)
                        .unwrap_or(usize::MAX)
                        .min(chunk.len());
                    let hi = usize::try_from(end - from)
                        .unwrap_or(usize::MAX)
                        .min(chunk.len());
                    burst.push((k % 65536) as u16, &chunk[lo..hi]);
                }
                if burst.send(&socket).is_err() {
                    bump(&stats.failed);
                    return;
                }
                stats
                    .bytes_sent
                    .fetch_add(burst.payload_len() as u64, Ordering::Relaxed);
            }
            Action::Wait => {}
            Action::Done => {
                bump(&stats.completed);
                tracing::debug!(
                    %peer,
                    file = %req.filename,
                    bytes = size,
                    blksize = negotiated.blksize,
                    windowsize = negotiated.windowsize,
                    gso = burst.uses_gso(),
                    ms = started.elapsed().as_millis() as u64,
                    "TFTP transfer done"
                );
                return;
            }
            Action::GiveUp => {
                bump(&stats.failed);
                tracing::info!(%peer, file = %req.filename, "TFTP client stopped answering");
                let _ = socket.send(&error_packet(ErrorCode::NotDefined, "timed out"));
                return;
            }
        }
        let deadline = Instant::now() + sender.wait();
        action = loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if slots.available_permits() == 0 && last_ack.elapsed() >= STALL_UNDER_PRESSURE {
                bump(&stats.evicted);
                tracing::info!(
                    %peer,
                    file = %req.filename,
                    "TFTP transfer dropped: no ACK while every slot is taken"
                );
                let _ = socket.send(&error_packet(ErrorCode::NotDefined, "server busy"));
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break sender.on_timeout();
            }
            // The timeout is a system call to change: only when it does (near a deadline).
            let want = Some(left.min(STOP_POLL));
            if read_timeout != want {
                if let Err(err) = socket.set_read_timeout(want) {
                    tracing::warn!(%err, "cannot set the TFTP receive timeout");
                    bump(&stats.failed);
                    return;
                }
                read_timeout = want;
            }
            match socket.recv(&mut rbuf) {
                Err(err)
                    if matches!(
                        err.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    continue;
                }
                Err(_) => {
                    // ICMP port unreachable: the client is gone.
                    bump(&stats.failed);
                    return;
                }
                Ok(n) => match Packet::parse(&rbuf[..n]) {
                    Ok(Packet::Ack { block }) => {
                        last_ack = Instant::now();
                        match sender.on_ack(block) {
                            Action::Wait => continue,
                            next => break next,
                        }
                    }
                    Ok(Packet::Error { code, message }) => {
                        // Clients abort on purpose (iPXE and curl after a tsize check).
                        tracing::debug!(%peer, code, %message, "TFTP client ended the transfer");
                        bump(&stats.aborted);
                        return;
                    }
                    _ => continue,
                },
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_read_ahead_of_a_file_match_its_bytes() {
        let bytes: Vec<u8> = (0..700_000u32).map(|i| (i % 253) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, &bytes).unwrap();
        let content = Content::File(file, bytes.len() as u64);
        let mut ahead = ReadAhead::default();
        // Forward windows, one across the end of the read-ahead, a step back (a
        // retransmission), the end of the file and the empty range after it.
        for (start, end) in [
            (0, 23_488),
            (23_488, 46_976),
            (250_000, 270_000),
            (1_000, 2_000),
            (699_000, 700_000),
            (700_000, 700_000),
        ] {
            let got = content.slice(start, end, &mut ahead).unwrap();
            assert_eq!(got, &bytes[start as usize..end as usize], "{start}..{end}");
        }
        // A file that shrank under the transfer yields what is left.
        let Content::File(file, _) = &content else {
            unreachable!()
        };
        file.set_len(650_000).unwrap();
        let mut fresh = ReadAhead::default();
        assert_eq!(
            content.slice(640_000, 660_000, &mut fresh).unwrap().len(),
            10_000
        );
        let memory = Content::Memory(bytes[..100].into());
        assert_eq!(memory.slice(90, 110, &mut fresh).unwrap(), &bytes[90..100]);
    }
}
