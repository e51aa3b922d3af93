//! The DHCP server's socket loop: receive, decode (a datagram without the magic cookie is
//! dropped), rate-limit per MAC and globally, let the pure [`reply::handle`] decide, and hand
//! the lease changes and the replies to the durability stage ([`super::durable`]), which sends
//! the replies once the changes would survive a power loss. It owns the UDP socket, the
//! in-memory lease table, the limiters, the counters and the pool-exhaustion warning (logged
//! once a minute at most, not per packet); it never decides what to answer (that is `reply`)
//! and never writes SQL (that is `store::leases`).
//!
//! Packets are handled in batches: whatever is queued on the socket (up to [`BATCH`]) is decided
//! in one pass and handed over, and the loop goes back to the socket while the stage commits
//! and flushes: deciding, storing and flushing overlap, and a boot storm costs one flush per
//! group of batches instead of one per client.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dhcproto::Encodable;
use serde::Serialize;
use tokio::net::UdpSocket;

use super::durable::{Decided, Health, Stage};
use super::lease::{LeaseChange, LeaseTable};
use super::reply::{self, Destination, DhcpConfig, Ignored};
use crate::model::Mac;
use crate::store::{Store, StoreError};

/// Most packets decided and committed together.
pub const BATCH: usize = 256;

/// Per-MAC limit: a burst of this many packets...
const MAC_BURST: f64 = 20.0;
/// ...refilled at this many per second. A client that retries by the book (RFC 2131 §4.1:
/// 4, 8, 16 s) never comes near it; a looping ROM or a flood from one MAC does.
const MAC_RATE: f64 = 5.0;
/// Remembered MACs beyond which idle buckets are forgotten.
const MAX_MACS: usize = 65_536;
/// Global limit, all clients together (`dhcp.max_rate`, 2,000 by default): a burst of this
/// many seconds' worth of packets, then the rate. A rack of servers booting at once sends a few
/// packets each (two DORAs: the ROM's and iPXE's); a flood of made-up MACs, which the per-MAC
/// limit cannot stop, is held to the rate in lease decisions a second.
const GLOBAL_BURST_SECONDS: f64 = 5.0;
/// What the socket's receive buffer is asked to hold (the kernel caps it at
/// `net.core.rmem_max` unless the daemon may force it): a boot storm's burst waits there while
/// the server decides, instead of being dropped.
const RECEIVE_BUFFER: usize = 4 << 20;
/// Pool exhaustion is logged at most this often.
const EXHAUSTED_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// A DHCP packet's message type (option 53) as counted; `none` when it has none (or it could
/// not be decoded at all), `other` for the types a server is never sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketType {
    Discover,
    Request,
    Decline,
    Release,
    Inform,
    Other,
    None,
}

impl PacketType {
    pub const ALL: [PacketType; 7] = [
        PacketType::Discover,
        PacketType::Request,
        PacketType::Decline,
        PacketType::Release,
        PacketType::Inform,
        PacketType::Other,
        PacketType::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PacketType::Discover => "discover",
            PacketType::Request => "request",
            PacketType::Decline => "decline",
            PacketType::Release => "release",
            PacketType::Inform => "inform",
            PacketType::Other => "other",
            PacketType::None => "none",
        }
    }

    fn of(msg: &dhcproto::v4::Message) -> PacketType {
        use dhcproto::v4::MessageType as T;
        match msg.opts().msg_type() {
            Some(T::Discover) => PacketType::Discover,
            Some(T::Request) => PacketType::Request,
            Some(T::Decline) => PacketType::Decline,
            Some(T::Release) => PacketType::Release,
            Some(T::Inform) => PacketType::Inform,
            Some(_) => PacketType::Other,
            None => PacketType::None,
        }
    }
}

/// What became of one received packet: exactly one of these per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketResult {
    /// Answered with an OFFER.
    Offered,
    /// Answered with an ACK (a REQUEST's, or an INFORM's).
    Acked,
    /// Answered with a NAK.
    Naked,
    /// A lease change and no answer, by design (DECLINE, RELEASE, a REQUEST to another server).
    Recorded,
    /// Decided on and not answered ([`Ignored`]: no subnet, not reserved, pool exhausted...).
    Ignored,
    /// Dropped by the per-MAC or global rate limit before any decision.
    RateLimited,
    /// Not a DHCP message (no magic cookie, bad options), or it made a parser panic.
    Malformed,
    /// Not decided because leases cannot be kept right now (a full disk, a failed flush): the
    /// server answers nothing it could not keep.
    Unavailable,
}

impl PacketResult {
    pub const ALL: [PacketResult; 8] = [
        PacketResult::Offered,
        PacketResult::Acked,
        PacketResult::Naked,
        PacketResult::Recorded,
        PacketResult::Ignored,
        PacketResult::RateLimited,
        PacketResult::Malformed,
        PacketResult::Unavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PacketResult::Offered => "offered",
            PacketResult::Acked => "acked",
            PacketResult::Naked => "naked",
            PacketResult::Recorded => "recorded",
            PacketResult::Ignored => "ignored",
            PacketResult::RateLimited => "rate_limited",
            PacketResult::Malformed => "malformed",
            PacketResult::Unavailable => "unavailable",
        }
    }
}

const TYPES: usize = PacketType::ALL.len();
const RESULTS: usize = PacketResult::ALL.len();

/// What the server has seen since it started; read by the API, the dashboard and `/metrics`.
/// Every received packet is counted once, by its type and what became of it (one atomic
/// increment); the totals the API shows are sums of those.
#[derive(Debug, Default)]
pub struct DhcpStats {
    packets: [[AtomicU64; RESULTS]; TYPES],
    pub replied: AtomicU64,
    pub store_errors: AtomicU64,
    /// Requests that got no address because the pool was full.
    pub pool_exhausted: AtomicU64,
    /// Groups of lease changes committed and flushed to disk (one `fdatasync` each).
    pub lease_groups: AtomicU64,
    /// Time spent committing lease changes (holding the store's writer), in nanoseconds.
    pub lease_commit_nanos: AtomicU64,
    /// Time spent flushing them (`fdatasync`, holding no lock), in nanoseconds.
    pub lease_sync_nanos: AtomicU64,
}

/// A snapshot of [`DhcpStats`] for JSON.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct DhcpCounters {
    pub received: u64,
    pub replied: u64,
    pub malformed: u64,
    pub ignored: u64,
    pub rate_limited: u64,
    pub store_errors: u64,
    pub pool_exhausted: u64,
}

impl DhcpStats {
    /// Count one packet.
    fn count(&self, kind: PacketType, result: PacketResult) {
        bump(&self.packets[kind as usize][result as usize]);
    }

    /// Packets of `kind` that ended as `result`.
    pub fn packets(&self, kind: PacketType, result: PacketResult) -> u64 {
        self.packets[kind as usize][result as usize].load(Ordering::Relaxed)
    }

    fn ended_as(&self, result: PacketResult) -> u64 {
        PacketType::ALL
            .iter()
            .map(|k| self.packets(*k, result))
            .sum()
    }

    pub fn snapshot(&self) -> DhcpCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DhcpCounters {
            received: PacketResult::ALL.iter().map(|r| self.ended_as(*r)).sum(),
            replied: get(&self.replied),
            malformed: self.ended_as(PacketResult::Malformed),
            ignored: self.ended_as(PacketResult::Ignored),
            rate_limited: self.ended_as(PacketResult::RateLimited),
            store_errors: get(&self.store_errors),
            pool_exhausted: get(&self.pool_exhausted),
        }
    }
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

#[derive(Debug, thiserror::Error)]
pub enum DhcpServerError {
    #[error("cannot bind the DHCP socket to {addr} (dhcp.listen): {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "cannot bind the DHCP socket to interface {interface} (dhcp.interface): {source}; \
         binding to a device needs root or CAP_NET_RAW"
    )]
    Device {
        interface: String,
        source: std::io::Error,
    },
    #[error(
        "no network interface holds dhcp.server_ip {0}; set it to an address of this host, \
         or name the interface with dhcp.interface"
    )]
    NoInterface(Ipv4Addr),
    #[error("cannot list network interfaces: {0}")]
    Interfaces(std::io::Error),
    #[error("cannot load DHCP leases: {0}")]
    Load(#[from] StoreError),
    #[error("cannot share the DHCP socket with the lease thread: {0}")]
    Clone(std::io::Error),
}

/// The interface that holds `ip`.
pub fn interface_of(ip: Ipv4Addr) -> Result<String, DhcpServerError> {
    if_addrs::get_if_addrs()
        .map_err(DhcpServerError::Interfaces)?
        .into_iter()
        .find(|i| i.ip() == std::net::IpAddr::V4(ip))
        .map(|i| i.name)
        .ok_or(DhcpServerError::NoInterface(ip))
}

/// Bind the DHCP socket: broadcast allowed (replies to clients without an address go to
/// 255.255.255.255) and, when `device` is given, tied to that interface. The tie matters: a
/// socket on 0.0.0.0 cannot route a limited broadcast on a host without a default route, and
/// on a host with several networks it must leave through the PXE one.
pub fn bind(addr: SocketAddr, device: Option<&str>) -> Result<UdpSocket, DhcpServerError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let err = |source| DhcpServerError::Bind { addr, source };
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(err)?;
    socket.set_reuse_address(true).map_err(err)?;
    socket.set_broadcast(true).map_err(err)?;
    receive_buffer(&socket);
    if let Some(name) = device {
        socket
            .bind_device(Some(name.as_bytes()))
            .map_err(|source| DhcpServerError::Device {
                interface: name.to_string(),
                source,
            })?;
    }
    socket.bind(&addr.into()).map_err(err)?;
    socket.set_nonblocking(true).map_err(err)?;
    UdpSocket::from_std(socket.into()).map_err(err)
}

/// Ask for [`RECEIVE_BUFFER`]: forced past `net.core.rmem_max` when the daemon may
/// (CAP_NET_ADMIN), else as much as the limit allows. Best effort: a smaller buffer only drops
/// more of a burst.
fn receive_buffer(socket: &socket2::Socket) {
    use nix::sys::socket::{setsockopt, sockopt::RcvBufForce};
    if setsockopt(socket, RcvBufForce, &RECEIVE_BUFFER).is_err() {
        let _ = socket.set_recv_buffer_size(RECEIVE_BUFFER);
    }
    tracing::debug!(
        bytes = socket.recv_buffer_size().unwrap_or(0),
        "DHCP receive buffer"
    );
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn take(&mut self, burst: f64, rate: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Token buckets per MAC, and one for every packet.
#[derive(Debug)]
struct Limiter {
    buckets: HashMap<Mac, Bucket>,
    global: Bucket,
    global_burst: f64,
    global_rate: f64,
}

impl Limiter {
    fn new(global_burst: f64, global_rate: f64, now: Instant) -> Limiter {
        Limiter {
            buckets: HashMap::new(),
            global: Bucket {
                tokens: global_burst,
                at: now,
            },
            global_burst,
            global_rate,
        }
    }

    /// Whether a packet (from `mac`, when it names one) may be decided on now. A MAC over its
    /// own limit does not spend the global budget.
    fn allow(&mut self, mac: Option<&Mac>, now: Instant) -> bool {
        if let Some(mac) = mac {
            if self.buckets.len() >= MAX_MACS {
                self.buckets.retain(|_, b| {
                    b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * MAC_RATE
                        < MAC_BURST
                });
            }
            let bucket = self.buckets.entry(mac.clone()).or_insert(Bucket {
                tokens: MAC_BURST,
                at: now,
            });
            if !bucket.take(MAC_BURST, MAC_RATE, now) {
                return false;
            }
        }
        self.global.take(self.global_burst, self.global_rate, now)
    }
}

/// Pool exhaustion, logged once per [`EXHAUSTED_LOG_EVERY`] with how often it happened.
#[derive(Debug, Default)]
struct Exhaustion {
    logged_at: Option<Instant>,
    since: u64,
}

impl Exhaustion {
    /// Count one client turned away; true when this one should be logged (with the count).
    fn note(&mut self, now: Instant) -> Option<u64> {
        self.since += 1;
        let due = self
            .logged_at
            .is_none_or(|at| now.saturating_duration_since(at) >= EXHAUSTED_LOG_EVERY);
        if due {
            self.logged_at = Some(now);
            return Some(std::mem::take(&mut self.since));
        }
        None
    }
}

/// What a decided packet's outcome is, as counted: the answer's message type, or a lease
/// change without one.
fn answered(outcome: &reply::Outcome) -> PacketResult {
    use dhcproto::v4::MessageType as T;
    match outcome.reply.as_ref().map(|(m, _)| m.opts().msg_type()) {
        None => PacketResult::Recorded,
        Some(Some(T::Offer)) => PacketResult::Offered,
        Some(Some(T::Nak)) => PacketResult::Naked,
        Some(_) => PacketResult::Acked,
    }
}

/// The running server.
pub struct DhcpServer {
    socket: UdpSocket,
    config: DhcpConfig,
    reply_to: Option<SocketAddr>,
    stage: Stage,
    leases: LeaseTable,
    limiter: Limiter,
    exhaustion: Exhaustion,
    stats: Arc<DhcpStats>,
}

impl DhcpServer {
    /// Load the durable leases, start the durability stage and get ready to serve on `socket`.
    /// `reply_to` sends every reply to one address instead (tests on loopback); `max_rate` is
    /// the global limit in packets per second.
    pub fn new(
        socket: UdpSocket,
        config: DhcpConfig,
        reply_to: Option<SocketAddr>,
        max_rate: u64,
        store: Arc<Store>,
        stats: Arc<DhcpStats>,
    ) -> Result<DhcpServer, DhcpServerError> {
        let started = Instant::now();
        let leases = LeaseTable::new(store.read(|tx| tx.leases())?);
        tracing::info!(
            leases = leases.len(),
            ms = started.elapsed().as_millis(),
            "DHCP leases loaded"
        );
        let replies = socket2::SockRef::from(&socket)
            .try_clone()
            .map_err(DhcpServerError::Clone)?;
        let stage = Stage::start(store, replies.into(), Arc::clone(&stats))?;
        #[allow(clippy::cast_precision_loss)] // a rate in packets per second
        let rate = max_rate as f64;
        Ok(DhcpServer {
            socket,
            config,
            reply_to,
            stage,
            leases,
            limiter: Limiter::new(rate * GLOBAL_BURST_SECONDS, rate, Instant::now()),
            exhaustion: Exhaustion::default(),
            stats,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Serve until `shutdown` resolves. Errors on single packets are counted, never fatal.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        tracing::info!(
            addr = %self.local_addr().map_or_else(|e| e.to_string(), |a| a.to_string()),
            leases = self.leases.len(),
            subnets = self.config.subnets.len(),
            "DHCP server listening"
        );
        tokio::pin!(shutdown);
        let mut buf = vec![0u8; 1500];
        let mut batch: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                res = self.socket.recv_from(&mut buf) => match res {
                    Ok((n, _)) => batch.push(buf[..n].to_vec()),
                    Err(err) => {
                        // ICMP errors from earlier sends surface here on Linux; keep serving.
                        tracing::debug!(%err, "DHCP receive error");
                        continue;
                    }
                },
            }
            while batch.len() < BATCH {
                match self.socket.try_recv_from(&mut buf) {
                    Ok((n, _)) => batch.push(buf[..n].to_vec()),
                    Err(_) => break,
                }
            }
            if !self.serve_batch(&batch).await {
                tracing::error!("the DHCP lease thread is gone; the DHCP server stops");
                break;
            }
            batch.clear();
        }
        self.stage.finish().await;
        let groups = self.stats.lease_groups.load(Ordering::Relaxed);
        let per_group = |nanos: &AtomicU64| {
            let total = nanos.load(Ordering::Relaxed);
            format!("{:.2}", total as f64 / groups.max(1) as f64 / 1e6)
        };
        tracing::info!(
            groups,
            commit_ms_per_group = per_group(&self.stats.lease_commit_nanos),
            sync_ms_per_group = per_group(&self.stats.lease_sync_nanos),
            replied = self.stats.replied.load(Ordering::Relaxed),
            "DHCP server stopped"
        );
    }

    /// Decide `packets` and hand the outcome to the durability stage; false if it is gone.
    async fn serve_batch(&mut self, packets: &[Vec<u8>]) -> bool {
        let now = crate::clock::now();
        let instant = Instant::now();
        let accepting = self.stage.health() == Health::Ok;
        let mut changes: Vec<LeaseChange> = Vec::new();
        // Replies that announce a change to keep wait for its flush; the rest (OFFERs, NAKs,
        // INFORM's ACKs) leave now.
        let mut replies: Vec<(Vec<u8>, SocketAddr)> = Vec::new();
        let mut now_replies: Vec<(Vec<u8>, SocketAddr)> = Vec::new();
        for bytes in packets {
            // A packet that trips a bug in the decoder (dhcproto's, or `decode`'s checks in
            // front of it) costs that packet, not the DHCP service: the same guard as `handle`.
            let decoded = std::panic::catch_unwind(|| reply::decode(bytes));
            let msg = match decoded {
                Ok(Ok(msg)) => msg,
                Ok(Err(err)) => {
                    self.stats.count(PacketType::None, PacketResult::Malformed);
                    tracing::debug!(%err, len = bytes.len(), "malformed DHCP packet dropped");
                    continue;
                }
                Err(_) => {
                    self.stats.count(PacketType::None, PacketResult::Malformed);
                    tracing::error!(
                        len = bytes.len(),
                        "a DHCP packet made the decoder panic; dropped"
                    );
                    continue;
                }
            };
            let kind = PacketType::of(&msg);
            if !accepting {
                self.stats.count(kind, PacketResult::Unavailable);
                continue;
            }
            let mac = reply::client_mac(&msg);
            if !self.limiter.allow(mac.as_ref(), instant) {
                self.stats.count(kind, PacketResult::RateLimited);
                tracing::debug!(?mac, "DHCP rate limit");
                continue;
            }
            // Defence in depth: a packet that trips a bug in a parser must cost one answer, not
            // the DHCP service. The table is only changed by `apply` below, after `handle`.
            let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                reply::handle(&msg, &self.config, &mut self.leases, now)
            }));
            let Ok(decided) = decided else {
                self.stats.count(kind, PacketResult::Malformed);
                tracing::error!(
                    xid = msg.xid(),
                    "a DHCP packet made the reply logic panic; dropped"
                );
                continue;
            };
            match decided {
                Err(why) => {
                    self.stats.count(kind, PacketResult::Ignored);
                    tracing::debug!(?why, xid = msg.xid(), "DHCP request not answered");
                    if why == Ignored::PoolExhausted {
                        bump(&self.stats.pool_exhausted);
                        if let Some(turned_away) = self.exhaustion.note(instant) {
                            tracing::warn!(
                                ?mac,
                                turned_away,
                                "DHCP pool exhausted: clients get no address; widen \
                                 dhcp.subnets pools (logged at most once a minute)"
                            );
                        }
                    }
                }
                Ok(outcome) => {
                    self.stats.count(kind, answered(&outcome));
                    let kept = outcome
                        .change
                        .as_ref()
                        .is_some_and(|c| c.kept(&self.leases));
                    if let Some(change) = outcome.change {
                        self.leases.apply(&change);
                        if kept {
                            changes.push(change);
                        }
                    }
                    if let Some((reply, to)) = outcome.reply {
                        match reply.to_vec() {
                            Ok(bytes) if kept => replies.push((bytes, self.address(to))),
                            Ok(bytes) => now_replies.push((bytes, self.address(to))),
                            Err(err) => tracing::warn!(%err, "cannot encode a DHCP reply"),
                        }
                    }
                }
            }
        }
        for (bytes, to) in now_replies {
            match self.socket.try_send_to(&bytes, to) {
                Ok(_) => bump(&self.stats.replied),
                // A full send buffer: the stage's thread sends it, waiting a little for room.
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    replies.push((bytes, to));
                }
                Err(err) => tracing::warn!(%err, %to, "cannot send a DHCP reply"),
            }
        }
        if changes.is_empty() && replies.is_empty() {
            return true;
        }
        self.stage.submit(Decided { changes, replies }).await
    }

    fn address(&self, to: Destination) -> SocketAddr {
        if let Some(addr) = self.reply_to {
            return addr;
        }
        let v4 = match to {
            Destination::Relay(ip) => SocketAddrV4::new(ip, 67),
            Destination::Client(ip) => SocketAddrV4::new(ip, 68),
            Destination::Broadcast => SocketAddrV4::new(Ipv4Addr::BROADCAST, 68),
        };
        SocketAddr::V4(v4)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_limiter_allows_a_burst_then_a_trickle() {
        let t0 = Instant::now();
        let mut l = Limiter::new(10_000.0, 2_000.0, t0);
        let mac: Mac = "52:54:00:00:00:01".parse().unwrap();
        let allowed = (0..30).filter(|_| l.allow(Some(&mac), t0)).count();
        assert_eq!(allowed, 20);
        assert!(l.allow(Some(&mac), t0 + Duration::from_millis(250)));
        assert!(!l.allow(Some(&mac), t0 + Duration::from_millis(250)));
        let other: Mac = "52:54:00:00:00:02".parse().unwrap();
        assert!(l.allow(Some(&other), t0), "one MAC does not starve another");
    }

    #[test]
    fn the_global_limit_holds_many_macs_and_spares_one_macs_flood() {
        let t0 = Instant::now();
        let mut l = Limiter::new(100.0, 10.0, t0);
        let mac = |i: u32| -> Mac {
            let b = i.to_be_bytes();
            format!("52:54:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3])
                .parse()
                .unwrap()
        };
        // One MAC flooding spends its own bucket (20), not the global one.
        let flood = (0..1000).filter(|_| l.allow(Some(&mac(0)), t0)).count();
        assert_eq!(flood, 20);
        // Made-up MACs, one packet each: the global bucket (100, 20 already spent) stops them.
        let fresh = (1..1000).filter(|i| l.allow(Some(&mac(*i)), t0)).count();
        assert_eq!(fresh, 80);
        assert!(!l.allow(None, t0), "packets without a MAC count too");
        assert!(l.allow(Some(&mac(5000)), t0 + Duration::from_millis(100)));
    }

    #[test]
    fn pool_exhaustion_is_logged_once_a_minute() {
        let t0 = Instant::now();
        let mut e = Exhaustion::default();
        assert_eq!(e.note(t0), Some(1));
        for s in 1..60 {
            assert_eq!(e.note(t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(e.note(t0 + Duration::from_secs(60)), Some(60));
    }
}
