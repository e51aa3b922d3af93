//! Logged-in BMC connections kept between power-state sweeps, as Ironic keeps a sushy
//! connection per BMC (its Redfish session cache) instead of logging in for every reading.
//!
//! Without it a reading over Redfish is five requests: the service root, a new session, the
//! Systems collection, the system and the session's deletion. With it, a BMC read again is one
//! GET with the session's token; the token, the system's path and the links learned navigating
//! stay in the parked value. An expired token is renewed by the driver (a 401 logs in again,
//! once).
//!
//! What is parked holds no socket: [`Bmc::park`] lets the driver close its connections, so a
//! master with 10,000 BMCs does not keep 10,000 descriptors open between sweeps, and a BMC
//! that closed an idle connection is never written to on a dead one.
//!
//! A value is taken out to be used ([`Sessions::take`]), so one BMC is used by one caller at a
//! time; it is given back ([`Sessions::park`]) only after it worked. A parked value whose
//! endpoint changed (another address, user, password, certificate check or timeout) is not
//! reused. Values not used for [`Sessions::expire`]'s age are dropped, which deletes their
//! sessions on the BMCs. At most `capacity` are kept. When the daemon stops, the
//! parked sessions are deleted [`CLOSE_WORKERS`] at once for at most [`CLOSE_WITHIN`]; those
//! left then are abandoned (the BMCs expire them), so a stop never waits on BMCs that do not
//! answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Bmc, Endpoint};
use crate::model::NodeId;

/// How many sessions are deleted at once when the daemon stops.
pub const CLOSE_WORKERS: usize = 16;
/// How long a stop spends deleting sessions.
pub const CLOSE_WITHIN: Duration = Duration::from_secs(3);

struct Parked {
    endpoint: Endpoint,
    bmc: Box<dyn Bmc>,
    at: Instant,
}

/// The parked connections, by node.
pub struct Sessions {
    parked: Mutex<HashMap<NodeId, Parked>>,
    capacity: usize,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("parked", &self.len())
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl Sessions {
    pub fn new(capacity: usize) -> Sessions {
        Sessions {
            parked: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, Parked>> {
        // A panic while holding the lock leaves the map whole (every change is one call).
        self.parked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Node `node`'s parked connection when it was made for `endpoint`, and `true`; else a new
    /// one, and `false`. A parked one for another endpoint is dropped (its session deleted).
    pub fn take(&self, node: NodeId, endpoint: &Endpoint) -> (Box<dyn Bmc>, bool) {
        let parked = self.lock().remove(&node);
        match parked {
            Some(p) if p.endpoint == *endpoint => (p.bmc, true),
            // `p` is dropped here, outside the lock: its logout is network I/O.
            _ => (super::connect(endpoint), false),
        }
    }

    /// Keep `bmc`, which just worked for `endpoint`, for node `node`'s next use. When full, it
    /// is dropped instead.
    pub fn park(&self, node: NodeId, endpoint: Endpoint, mut bmc: Box<dyn Bmc>) {
        bmc.park();
        let replaced = {
            let mut parked = self.lock();
            if parked.len() >= self.capacity && !parked.contains_key(&node) {
                Some(bmc)
            } else {
                parked
                    .insert(
                        node,
                        Parked {
                            endpoint,
                            bmc,
                            at: Instant::now(),
                        },
                    )
                    .map(|p| p.bmc)
            }
        };
        drop(replaced);
    }

    /// Log out of the sessions parked for longer than `age`, as [`Sessions::close_all`] does;
    /// returns how many there were.
    pub fn expire(&self, age: Duration, workers: usize) -> usize {
        let old: Vec<Box<dyn Bmc>> = {
            let mut parked = self.lock();
            let nodes: Vec<NodeId> = parked
                .iter()
                .filter(|(_, p)| p.at.elapsed() >= age)
                .map(|(n, _)| *n)
                .collect();
            nodes
                .iter()
                .filter_map(|n| parked.remove(n))
                .map(|p| p.bmc)
                .collect()
        };
        let n = old.len();
        close(old, workers, CLOSE_WITHIN);
        n
    }

    /// Delete every parked session, `workers` at once; once `within` has passed, the rest are
    /// abandoned without a request.
    pub fn close_all(&self, workers: usize, within: Duration) {
        let all: Vec<Box<dyn Bmc>> = self.lock().drain().map(|(_, p)| p.bmc).collect();
        close(all, workers, within);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Drop `bmcs` (each deletes its session), `workers` at once, outside any lock: a value taken
/// after `within` is abandoned instead, so BMCs that do not answer cannot hold this up.
fn close(bmcs: Vec<Box<dyn Bmc>>, workers: usize, within: Duration) {
    if bmcs.is_empty() {
        return;
    }
    let deadline = Instant::now() + within;
    let slots: Vec<Mutex<Option<Box<dyn Bmc>>>> =
        bmcs.into_iter().map(|b| Mutex::new(Some(b))).collect();
    super::pool::map(&slots, workers, |slot| {
        let taken = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(mut bmc) = taken {
            if Instant::now() >= deadline {
                bmc.abandon();
            }
            drop(bmc);
        }
    });
}

impl Drop for Sessions {
    fn drop(&mut self) {
        self.close_all(CLOSE_WORKERS, CLOSE_WITHIN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bmc::Driver;

    fn endpoint(address: &str) -> Endpoint {
        Endpoint {
            driver: Driver::Ipmi,
            address: address.into(),
            username: "admin".into(),
            password: "secret".into(),
            verify_tls: false,
            timeout: Duration::from_secs(1),
        }
    }

    // IPMI values hold no session: dropping them sends nothing, so these tests need no BMC.
    #[test]
    fn a_parked_connection_is_reused_only_for_the_same_endpoint() {
        let s = Sessions::new(2);
        let a = endpoint("10.0.0.1");
        let (bmc, reused) = s.take(1, &a);
        assert!(!reused);
        s.park(1, a.clone(), bmc);
        assert_eq!(s.len(), 1);
        // Taken out while in use: a second caller gets its own.
        let (bmc, reused) = s.take(1, &a);
        assert!(reused);
        assert!(s.is_empty());
        let (_other, reused) = s.take(1, &a);
        assert!(!reused);
        s.park(1, a.clone(), bmc);
        // Another password: not reused, and the old one is gone.
        let mut b = a.clone();
        b.password = "changed".into();
        let (_bmc, reused) = s.take(1, &b);
        assert!(!reused);
        assert!(s.is_empty());
    }

    #[test]
    fn capacity_bounds_what_is_kept_and_expiry_closes_the_old() {
        let s = Sessions::new(2);
        for n in 1..=3 {
            let e = endpoint(&format!("10.0.0.{n}"));
            let (bmc, _) = s.take(n, &e);
            s.park(n, e, bmc);
        }
        assert_eq!(s.len(), 2, "the third is dropped, not kept");
        // Re-parking a node already kept is not refused when full.
        let e = endpoint("10.0.0.1");
        let (bmc, reused) = s.take(1, &e);
        assert!(reused);
        s.park(1, e, bmc);
        assert_eq!(s.len(), 2);
        assert_eq!(s.expire(Duration::from_secs(3600), 2), 0);
        assert_eq!(s.expire(Duration::ZERO, 2), 2);
        assert!(s.is_empty());
    }
}
