//! Queries on `leases`: the durable mirror of the DHCP server's lease table. The server keeps the
//! table in memory and calls [`WriteTxn::apply_lease_changes`] with each batch of changes before
//! it sends the replies that announce them, so an acknowledged address survives a restart. The
//! boot endpoints read a MAC's bound lease: it is the address a boot token may go to.

use std::net::Ipv4Addr;

use rusqlite::{OptionalExtension, params};

use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::dhcp::lease::{Lease, LeaseChange, LeaseState};
use crate::model::Mac;

impl WriteTxn<'_> {
    /// Apply a batch of changes in order.
    pub fn apply_lease_changes(&self, changes: &[LeaseChange]) -> Result<()> {
        let mut upsert = self.conn.prepare_cached(
            "INSERT INTO leases (ip, mac, expires_at, state) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(ip) DO UPDATE SET mac = excluded.mac,
                 expires_at = excluded.expires_at, state = excluded.state",
        )?;
        let mut remove_other = self.conn.prepare_cached(
            "DELETE FROM leases WHERE mac = ?1 AND ip <> ?2 AND state <> 'declined'",
        )?;
        let mut remove = self
            .conn
            .prepare_cached("DELETE FROM leases WHERE ip = ?1")?;
        for change in changes {
            match change {
                LeaseChange::Upsert(lease) => {
                    let ip = lease.ip.to_string();
                    if lease.state != LeaseState::Declined {
                        // One address per MAC, as in the in-memory table.
                        remove_other.execute(params![lease.mac.as_str(), ip])?;
                    }
                    upsert.execute(params![
                        ip,
                        lease.mac.as_str(),
                        lease.expires_at,
                        lease.state.as_str()
                    ])?;
                }
                LeaseChange::Remove(ip) => {
                    remove.execute([ip.to_string()])?;
                }
            }
        }
        Ok(())
    }
}

impl ReadTxn<'_> {
    /// The address stoker's DHCP leased to `mac`: bound and not expired at `now`.
    pub fn lease_of(&self, mac: &Mac, now: i64) -> Result<Option<Ipv4Addr>> {
        let ip: Option<String> = self
            .conn
            .prepare_cached(
                "SELECT ip FROM leases WHERE mac = ?1 AND state = 'bound' AND expires_at > ?2
                 ORDER BY expires_at DESC LIMIT 1",
            )?
            .query_row(params![mac.as_str(), now], |r| r.get(0))
            .optional()?;
        ip.map(|ip| {
            ip.parse::<Ipv4Addr>().map_err(|_| StoreError::Corrupt {
                what: "lease address",
                detail: format!("lease {ip}"),
            })
        })
        .transpose()
    }

    /// The stored leases of `macs` (a node's interfaces), expired ones included, by address.
    pub fn leases_of(&self, macs: &[&Mac]) -> Result<Vec<Lease>> {
        let mut out = Vec::new();
        for mac in macs {
            out.extend(self.lease_rows(
                "SELECT ip, mac, expires_at, state FROM leases WHERE mac = ?1",
                [mac.as_str()],
            )?);
        }
        out.sort_by_key(|l| l.ip);
        Ok(out)
    }

    /// Every stored lease, expired ones included (the table decides what expiry means).
    pub fn leases(&self) -> Result<Vec<Lease>> {
        self.lease_rows(
            "SELECT ip, mac, expires_at, state FROM leases ORDER BY ip",
            [],
        )
    }

    fn lease_rows(&self, sql: &str, p: impl rusqlite::Params) -> Result<Vec<Lease>> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map(p, |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (ip, mac, expires_at, state) = row?;
            let corrupt = |what: &'static str| StoreError::Corrupt {
                what,
                detail: format!("lease {ip}"),
            };
            out.push(Lease {
                ip: ip
                    .parse::<Ipv4Addr>()
                    .map_err(|_| corrupt("lease address"))?,
                mac: mac.parse::<Mac>().map_err(|_| corrupt("lease MAC"))?,
                expires_at,
                state: LeaseState::parse(&state).ok_or_else(|| corrupt("lease state"))?,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn lease(ip: &str, mac: &str, state: LeaseState) -> Lease {
        Lease {
            ip: ip.parse().unwrap(),
            mac: mac.parse().unwrap(),
            expires_at: 100,
            state,
        }
    }

    #[test]
    fn changes_round_trip_and_keep_one_address_per_mac() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let a = "52:54:00:00:00:0a";
        store
            .write(|tx| {
                tx.apply_lease_changes(&[
                    LeaseChange::Upsert(lease("10.0.0.5", a, LeaseState::Offered)),
                    LeaseChange::Upsert(lease("10.0.0.9", "52:54:00:00:00:0b", LeaseState::Bound)),
                    LeaseChange::Upsert(lease("10.0.0.6", a, LeaseState::Bound)),
                    LeaseChange::Remove("10.0.0.9".parse().unwrap()),
                ])
            })
            .unwrap();
        let all = store.read(|tx| tx.leases()).unwrap();
        assert_eq!(all, vec![lease("10.0.0.6", a, LeaseState::Bound)]);
        let a_mac: Mac = a.parse().unwrap();
        let other: Mac = "52:54:00:00:00:0b".parse().unwrap();
        assert_eq!(
            store.read(|tx| tx.leases_of(&[&other, &a_mac])).unwrap(),
            vec![lease("10.0.0.6", a, LeaseState::Bound)]
        );
        let of = |mac: &str, now| {
            store
                .read(|tx| tx.lease_of(&mac.parse().unwrap(), now))
                .unwrap()
        };
        assert_eq!(of(a, 99), Some("10.0.0.6".parse().unwrap()));
        assert_eq!(of(a, 100), None, "expired");
        store
            .write(|tx| {
                tx.apply_lease_changes(&[LeaseChange::Upsert(lease(
                    "10.0.0.7",
                    "52:54:00:00:00:0c",
                    LeaseState::Offered,
                ))])
            })
            .unwrap();
        assert_eq!(of("52:54:00:00:00:0c", 1), None, "only offered");
    }
}
