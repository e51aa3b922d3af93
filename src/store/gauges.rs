//! What `/metrics` reads from the database at scrape time: nodes by status and whether they
//! are online, deployments by status, the step runs of the deployments in progress by status,
//! and the unexpired DHCP leases. Counts computed on the reader with `COUNT … GROUP BY`, never
//! tracked incrementally, so they cannot drift from the rows; the one list read whole is the
//! leases' addresses, which the pools bound.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use super::{ReadTxn, Result, StoreError};
use crate::dhcp::lease::LeaseState;
use crate::engine::orchestrate::RunStatus;
use crate::model::NodeStatus;
use crate::model::node::ONLINE_WINDOW_S;

/// One scrape's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Nodes by status and online (an agent called within `ONLINE_WINDOW_S`): every status
    /// and both values, zeros included.
    pub nodes: Vec<(NodeStatus, bool, u64)>,
    /// Deployments by status (`preparing` ones, invisible everywhere, left out).
    pub deployments: Vec<(String, u64)>,
    /// Step runs of the deployments in progress (status `running`), by run status, every
    /// status counted.
    pub runs: Vec<(RunStatus, u64)>,
    /// Unexpired leases by state, every state counted.
    pub leases: Vec<(LeaseState, u64)>,
    /// The addresses of the unexpired leases.
    pub held: BTreeSet<Ipv4Addr>,
    /// The agents' `next` calls held now until they have work (long-poll; not from the
    /// database: the caller fills it in from `Store::held_calls`).
    pub held_calls: u64,
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl ReadTxn<'_> {
    /// The counts `/metrics` shows, as of `now`.
    pub fn gauges(&self, now: i64) -> Result<Gauges> {
        let mut g = Gauges::default();
        for status in NodeStatus::ALL {
            for online in [true, false] {
                g.nodes.push((status, online, 0));
            }
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT status, last_seen_at >= ?1, COUNT(*) FROM nodes GROUP BY 1, 2",
        )?;
        let rows = stmt.query_map([now.saturating_sub(ONLINE_WINDOW_S)], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, bool>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        for row in rows {
            let (status, online, n) = row?;
            let status: NodeStatus = status.parse().map_err(|detail| StoreError::Corrupt {
                what: "node status",
                detail,
            })?;
            if let Some(slot) = g
                .nodes
                .iter_mut()
                .find(|(s, o, _)| *s == status && *o == online)
            {
                slot.2 += count(n);
            }
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT status, COUNT(*) FROM deployments WHERE status <> 'preparing'
             GROUP BY status ORDER BY status",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        for row in rows {
            let (status, n) = row?;
            g.deployments.push((status, count(n)));
        }
        g.runs = RunStatus::ALL.iter().map(|s| (*s, 0)).collect();
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.status, COUNT(*) FROM deployments d
             JOIN step_runs r ON r.deployment = d.id
             WHERE d.status = 'running' GROUP BY r.status",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        for row in rows {
            let (status, n) = row?;
            if let Some(slot) = g.runs.iter_mut().find(|(s, _)| s.as_str() == status) {
                slot.1 += count(n);
            }
        }
        g.leases = [LeaseState::Offered, LeaseState::Bound, LeaseState::Declined]
            .into_iter()
            .map(|s| (s, 0))
            .collect();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT ip, state FROM leases WHERE expires_at > ?1")?;
        let rows = stmt.query_map([now], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        for row in rows {
            let (ip, state) = row?;
            let corrupt = |what: &'static str| StoreError::Corrupt {
                what,
                detail: format!("lease {ip}"),
            };
            let state = LeaseState::parse(&state).ok_or_else(|| corrupt("lease state"))?;
            if let Some(slot) = g.leases.iter_mut().find(|(s, _)| *s == state) {
                slot.1 += 1;
            }
            g.held
                .insert(ip.parse().map_err(|_| corrupt("lease address"))?);
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn an_empty_database_counts_zeros_for_every_known_value() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("stoker.db")).unwrap();
        let g = store.read(|tx| tx.gauges(1_000)).unwrap();
        assert_eq!(g.nodes.len(), NodeStatus::ALL.len() * 2);
        assert!(g.nodes.iter().all(|(_, _, n)| *n == 0));
        assert!(g.deployments.is_empty());
        assert_eq!(g.runs.len(), RunStatus::ALL.len());
        assert_eq!(g.leases.len(), 3);
        assert!(g.held.is_empty());
    }
}
