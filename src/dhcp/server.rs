//! The DHCP server's socket loop: receive, decode, rate-limit per MAC, let the pure
//! [`reply::handle`] decide, make the lease changes durable, then send the replies. It owns the
//! UDP socket, the in-memory lease table, the per-MAC limiter and the counters; it never decides
//! what to answer (that is `reply`) and never writes SQL (that is `store::leases`).
//!
//! Packets are handled in batches: whatever is queued on the socket (up to [`BATCH`]) is decided
//! in one pass and its lease changes are committed in one transaction before any reply of the
//! batch leaves, so an acknowledged address is always on disk and a boot storm costs one commit
//! per batch instead of one per client.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dhcproto::v4::Message;
use dhcproto::{Decodable, Decoder, Encodable};
use serde::Serialize;
use tokio::net::UdpSocket;

use super::lease::{LeaseChange, LeaseTable};
use super::reply::{self, Destination, DhcpConfig};
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

/// What the server has seen since it started; read by the API and the dashboard.
#[derive(Debug, Default)]
pub struct DhcpStats {
    pub received: AtomicU64,
    pub replied: AtomicU64,
    pub malformed: AtomicU64,
    pub ignored: AtomicU64,
    pub rate_limited: AtomicU64,
    pub store_errors: AtomicU64,
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
}

impl DhcpStats {
    pub fn snapshot(&self) -> DhcpCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DhcpCounters {
            received: get(&self.received),
            replied: get(&self.replied),
            malformed: get(&self.malformed),
            ignored: get(&self.ignored),
            rate_limited: get(&self.rate_limited),
            store_errors: get(&self.store_errors),
        }
    }
}

fn bump(c: &AtomicU64) {
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

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets per MAC.
#[derive(Debug, Default)]
struct MacLimiter {
    buckets: HashMap<Mac, Bucket>,
}

impl MacLimiter {
    fn allow(&mut self, mac: &Mac, now: Instant) -> bool {
        if self.buckets.len() >= MAX_MACS {
            self.buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * MAC_RATE < MAC_BURST
            });
        }
        let bucket = self.buckets.entry(mac.clone()).or_insert(Bucket {
            tokens: MAC_BURST,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * MAC_RATE).min(MAC_BURST);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The running server.
pub struct DhcpServer {
    socket: UdpSocket,
    config: DhcpConfig,
    reply_to: Option<SocketAddr>,
    store: Arc<Store>,
    leases: LeaseTable,
    limiter: MacLimiter,
    stats: Arc<DhcpStats>,
}

impl DhcpServer {
    /// Load the durable leases and get ready to serve on `socket`. `reply_to` sends every reply
    /// to one address instead (tests on loopback).
    pub fn new(
        socket: UdpSocket,
        config: DhcpConfig,
        reply_to: Option<SocketAddr>,
        store: Arc<Store>,
        stats: Arc<DhcpStats>,
    ) -> Result<DhcpServer, DhcpServerError> {
        let leases = LeaseTable::new(store.read(|tx| tx.leases())?);
        Ok(DhcpServer {
            socket,
            config,
            reply_to,
            store,
            leases,
            limiter: MacLimiter::default(),
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
            self.serve_batch(&batch).await;
            batch.clear();
        }
        tracing::info!("DHCP server stopped");
    }

    async fn serve_batch(&mut self, packets: &[Vec<u8>]) {
        let now = crate::clock::now();
        let instant = Instant::now();
        let mut changes: Vec<LeaseChange> = Vec::new();
        let mut replies: Vec<(Vec<u8>, SocketAddr)> = Vec::new();
        for bytes in packets {
            bump(&self.stats.received);
            let msg = match Message::decode(&mut Decoder::new(bytes)) {
                Ok(msg) => msg,
                Err(err) => {
                    bump(&self.stats.malformed);
                    tracing::debug!(%err, len = bytes.len(), "malformed DHCP packet dropped");
                    continue;
                }
            };
            if let Some(mac) = reply::client_mac(&msg)
                && !self.limiter.allow(&mac, instant)
            {
                bump(&self.stats.rate_limited);
                tracing::debug!(%mac, "DHCP rate limit");
                continue;
            }
            // Defence in depth: a packet that trips a bug in a parser must cost one answer, not
            // the DHCP service. The table is only changed by `apply` below, after `handle`.
            let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                reply::handle(&msg, &self.config, &mut self.leases, now)
            }));
            let Ok(decided) = decided else {
                bump(&self.stats.malformed);
                tracing::error!(
                    xid = msg.xid(),
                    "a DHCP packet made the decoder panic; dropped"
                );
                continue;
            };
            match decided {
                Err(why) => {
                    bump(&self.stats.ignored);
                    tracing::debug!(?why, xid = msg.xid(), "DHCP request not answered");
                }
                Ok(outcome) => {
                    if let Some(change) = outcome.change {
                        self.leases.apply(&change);
                        changes.push(change);
                    }
                    if let Some((reply, to)) = outcome.reply {
                        match reply.to_vec() {
                            Ok(bytes) => replies.push((bytes, self.address(to))),
                            Err(err) => tracing::warn!(%err, "cannot encode a DHCP reply"),
                        }
                    }
                }
            }
        }
        if !changes.is_empty() && !self.persist(changes).await {
            // Nothing was promised: the clients retry, and the table is back to what is on disk.
            return;
        }
        for (bytes, to) in replies {
            match self.socket.send_to(&bytes, to).await {
                Ok(_) => bump(&self.stats.replied),
                Err(err) => tracing::warn!(%err, %to, "cannot send a DHCP reply"),
            }
        }
    }

    /// Commit a batch of lease changes; on failure reload the table from the database.
    async fn persist(&mut self, changes: Vec<LeaseChange>) -> bool {
        let store = Arc::clone(&self.store);
        let written =
            tokio::task::spawn_blocking(move || store.write(|tx| tx.apply_lease_changes(&changes)))
                .await;
        match written {
            Ok(Ok(())) => true,
            failed => {
                bump(&self.stats.store_errors);
                match failed {
                    Ok(Err(err)) => {
                        tracing::error!(%err, "cannot store DHCP leases; replies held back")
                    }
                    _ => tracing::error!("lease writer failed; replies held back"),
                }
                let store = Arc::clone(&self.store);
                if let Ok(Ok(leases)) =
                    tokio::task::spawn_blocking(move || store.read(|tx| tx.leases())).await
                {
                    self.leases = LeaseTable::new(leases);
                }
                false
            }
        }
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
        let mut l = MacLimiter::default();
        let mac: Mac = "52:54:00:00:00:01".parse().unwrap();
        let t0 = Instant::now();
        let allowed = (0..30).filter(|_| l.allow(&mac, t0)).count();
        assert_eq!(allowed, 20);
        assert!(l.allow(&mac, t0 + Duration::from_millis(250)));
        assert!(!l.allow(&mac, t0 + Duration::from_millis(250)));
        let other: Mac = "52:54:00:00:00:02".parse().unwrap();
        assert!(l.allow(&other, t0), "one MAC does not starve another");
    }
}
