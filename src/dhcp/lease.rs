//! The lease table: which address belongs to which MAC until when, kept in memory for speed and
//! mirrored to durable storage by the server after every change that a client may rely on
//! ([`LeaseChange::kept`]). Allocation scans the pool from
//! a cursor, so handing out many addresses in a row stays cheap. Pure: time is an argument.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use crate::model::Mac;

/// What a lease is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseState {
    /// Offered, not yet requested; held briefly so a second DISCOVER gets the same address.
    Offered,
    /// Acknowledged.
    Bound,
    /// A client said the address is in use by someone else (DECLINE): kept out of the pool.
    Declined,
}

impl LeaseState {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Offered => "offered",
            LeaseState::Bound => "bound",
            LeaseState::Declined => "declined",
        }
    }

    pub fn parse(s: &str) -> Option<LeaseState> {
        match s {
            "offered" => Some(LeaseState::Offered),
            "bound" => Some(LeaseState::Bound),
            "declined" => Some(LeaseState::Declined),
            _ => None,
        }
    }
}

/// One lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub ip: Ipv4Addr,
    pub mac: Mac,
    /// Unix seconds.
    pub expires_at: i64,
    pub state: LeaseState,
}

/// A change to apply to the table and to storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseChange {
    Upsert(Lease),
    Remove(Ipv4Addr),
}

impl LeaseChange {
    /// Whether the change must be on stable storage before the reply that announces it leaves,
    /// judged against `table` as it is before the change. An offer's hold is not, whether made
    /// or dropped (the client chose another server): no client relies on an OFFER (RFC 2131
    /// §4.3.1: the server need not reserve the address; dnsmasq, ISC dhcpd and Kea keep offers
    /// in memory), and a hold lost with the process only makes the client's REQUEST get a NAK
    /// and start again. What the hold changed in the table (another MAC's expired lease taken
    /// over, the client's old address freed) reaches storage with the ACK that follows it,
    /// whose upsert replaces the address's row and removes the MAC's other addresses.
    pub fn kept(&self, table: &LeaseTable) -> bool {
        match self {
            LeaseChange::Upsert(l) => l.state != LeaseState::Offered,
            LeaseChange::Remove(ip) => table
                .by_ip(*ip)
                .is_none_or(|l| l.state != LeaseState::Offered),
        }
    }
}

/// All leases, indexed by address and by MAC.
#[derive(Debug, Default, Clone)]
pub struct LeaseTable {
    by_ip: BTreeMap<Ipv4Addr, Lease>,
    by_mac: HashMap<Mac, Ipv4Addr>,
    cursor: u32,
}

impl LeaseTable {
    pub fn new(leases: impl IntoIterator<Item = Lease>) -> LeaseTable {
        let mut table = LeaseTable::default();
        for lease in leases {
            table.apply(&LeaseChange::Upsert(lease));
        }
        table
    }

    pub fn len(&self) -> usize {
        self.by_ip.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_ip.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Lease> {
        self.by_ip.values()
    }

    /// The MAC's current (offered or bound) lease, expired or not.
    pub fn by_mac(&self, mac: &Mac) -> Option<&Lease> {
        self.by_mac.get(mac).and_then(|ip| self.by_ip.get(ip))
    }

    pub fn by_ip(&self, ip: Ipv4Addr) -> Option<&Lease> {
        self.by_ip.get(&ip)
    }

    /// Whether `mac` may have `ip` now: nobody holds it, or its holder's lease has expired, or
    /// `mac` holds it.
    pub fn available(&self, ip: Ipv4Addr, mac: &Mac, now: i64) -> bool {
        match self.by_ip.get(&ip) {
            None => true,
            Some(l) if l.state == LeaseState::Declined => l.expires_at <= now,
            Some(l) => &l.mac == mac || l.expires_at <= now,
        }
    }

    /// The first available address in `start..=end`, scanning from where the last search
    /// stopped; `reserved` excludes addresses kept for other MACs.
    pub fn next_free(
        &mut self,
        start: Ipv4Addr,
        end: Ipv4Addr,
        mac: &Mac,
        now: i64,
        reserved: impl Fn(Ipv4Addr) -> bool,
    ) -> Option<Ipv4Addr> {
        let (lo, hi) = (u32::from(start), u32::from(end));
        if lo > hi {
            return None;
        }
        let size = hi - lo + 1;
        let first = if (lo..=hi).contains(&self.cursor) {
            self.cursor
        } else {
            lo
        };
        for i in 0..size {
            let n = lo + (first - lo + i) % size;
            let ip = Ipv4Addr::from(n);
            if !reserved(ip) && self.available(ip, mac, now) {
                self.cursor = if n == hi { lo } else { n + 1 };
                return Some(ip);
            }
        }
        None
    }

    pub fn apply(&mut self, change: &LeaseChange) {
        match change {
            LeaseChange::Upsert(lease) => {
                // One address per MAC: moving a MAC frees its old address.
                if lease.state != LeaseState::Declined
                    && let Some(old) = self.by_mac.get(&lease.mac).copied()
                    && old != lease.ip
                {
                    self.by_ip.remove(&old);
                }
                if let Some(previous) = self.by_ip.insert(lease.ip, lease.clone())
                    && previous.mac != lease.mac
                    && self.by_mac.get(&previous.mac) == Some(&lease.ip)
                {
                    self.by_mac.remove(&previous.mac);
                }
                if lease.state == LeaseState::Declined {
                    if self.by_mac.get(&lease.mac) == Some(&lease.ip) {
                        self.by_mac.remove(&lease.mac);
                    }
                } else {
                    self.by_mac.insert(lease.mac.clone(), lease.ip);
                }
            }
            LeaseChange::Remove(ip) => {
                if let Some(old) = self.by_ip.remove(ip)
                    && self.by_mac.get(&old.mac) == Some(ip)
                {
                    self.by_mac.remove(&old.mac);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(n: u8) -> Mac {
        format!("52:54:00:00:00:{n:02x}").parse().unwrap()
    }

    fn ip(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, n)
    }

    fn lease(n: u8, m: u8, expires_at: i64, state: LeaseState) -> Lease {
        Lease {
            ip: ip(n),
            mac: mac(m),
            expires_at,
            state,
        }
    }

    #[test]
    fn allocation_skips_held_reserved_and_declined_then_wraps() {
        let mut t = LeaseTable::new([
            lease(10, 1, 100, LeaseState::Bound),
            lease(11, 2, 100, LeaseState::Declined),
        ]);
        let none = |_| false;
        assert_eq!(
            t.next_free(ip(10), ip(13), &mac(9), 50, |a| a == ip(13)),
            Some(ip(12))
        );
        // The cursor moves on, so a burst of new clients does not rescan the pool each time.
        assert_eq!(t.next_free(ip(10), ip(13), &mac(9), 50, none), Some(ip(13)));
        assert_eq!(
            t.next_free(ip(10), ip(13), &mac(9), 50, none),
            Some(ip(12)),
            "wraps"
        );
        t.apply(&LeaseChange::Upsert(lease(12, 9, 100, LeaseState::Bound)));
        assert_eq!(
            t.next_free(ip(10), ip(12), &mac(8), 50, none),
            None,
            "pool exhausted"
        );
        assert_eq!(
            t.next_free(ip(10), ip(12), &mac(8), 150, none),
            Some(ip(10)),
            "expired"
        );
        assert!(t.available(ip(10), &mac(1), 50), "its holder may keep it");
    }

    #[test]
    fn a_mac_holds_one_address_and_removal_cleans_both_indexes() {
        let mut t = LeaseTable::default();
        t.apply(&LeaseChange::Upsert(lease(10, 1, 100, LeaseState::Offered)));
        t.apply(&LeaseChange::Upsert(lease(11, 1, 100, LeaseState::Bound)));
        assert_eq!(t.len(), 1);
        assert_eq!(t.by_mac(&mac(1)).map(|l| l.ip), Some(ip(11)));
        // Another MAC takes over an expired address.
        t.apply(&LeaseChange::Upsert(lease(11, 2, 200, LeaseState::Bound)));
        assert!(t.by_mac(&mac(1)).is_none());
        t.apply(&LeaseChange::Remove(ip(11)));
        assert!(t.is_empty() && t.by_mac(&mac(2)).is_none());
        // A declined address belongs to no MAC.
        t.apply(&LeaseChange::Upsert(lease(12, 3, 100, LeaseState::Offered)));
        t.apply(&LeaseChange::Upsert(lease(
            12,
            3,
            300,
            LeaseState::Declined,
        )));
        assert!(t.by_mac(&mac(3)).is_none());
        assert!(!t.available(ip(12), &mac(3), 200));
    }

    #[test]
    fn only_an_offers_hold_stays_out_of_storage() {
        let mut t = LeaseTable::default();
        let offer = LeaseChange::Upsert(lease(10, 1, 100, LeaseState::Offered));
        assert!(!offer.kept(&t));
        t.apply(&offer);
        // Dropping the hold (the client chose another server) is not stored either.
        assert!(!LeaseChange::Remove(ip(10)).kept(&t));
        let bound = LeaseChange::Upsert(lease(10, 1, 100, LeaseState::Bound));
        assert!(bound.kept(&t));
        t.apply(&bound);
        // Releasing a bound lease is.
        assert!(LeaseChange::Remove(ip(10)).kept(&t));
        assert!(LeaseChange::Upsert(lease(10, 1, 100, LeaseState::Declined)).kept(&t));
        assert!(LeaseChange::Remove(ip(11)).kept(&t));
    }
}
