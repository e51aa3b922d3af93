//! The background power-state sync, as Ironic's `sync_power_state_interval` and
//! `sync_power_state_workers`: every BMC with credentials is read once per
//! `bmc.sync_interval`, by at most `bmc.sync_workers` requests in flight, and the readings are
//! written in one transaction per sweep. A BMC that does not answer is flagged on its node
//! (`power_error`, a history line when it starts and stops failing) and tried again after
//! twice as long each time, up to 32 intervals: never in a hot loop. A BMC's login is kept
//! from one sweep to the next (`sessions.rs`), so reading it again is one request, and the
//! sweep's threads run at a lower priority than the daemon's others
//! ([`crate::priority::BACKGROUND`]).

use std::time::{Duration, Instant};

use super::actions::Bmcs;
use super::{BmcError, Endpoint, PowerState};
use crate::model::NodeId;
use crate::store::Store;

/// What one sweep did, for logs and the bench.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sweep {
    pub read: usize,
    pub failed: usize,
    /// The most requests that were in flight at once.
    pub peak_in_flight: usize,
    pub elapsed: Duration,
}

/// One BMC's reading: its node, the state or why not, its failures before.
type Reading = (NodeId, Result<PowerState, String>, u32);

/// Seconds until a BMC that failed `failures` times in a row is tried again.
pub fn backoff(interval: u64, failures: u32) -> u64 {
    interval.saturating_mul(1 << failures.min(5))
}

impl Bmcs {
    /// Read the power of every BMC due at `now`; `max` caps how many in one sweep.
    pub fn sweep(&self, store: &Store, now: i64, max: u32) -> Sweep {
        let started = Instant::now();
        let due = match store.read(|r| r.bmcs_due(now, max)) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the BMCs to read");
                return Sweep::default();
            }
        };
        if due.is_empty() {
            return Sweep::default();
        }
        let (readings, peak): (Vec<Reading>, usize) =
            super::pool::map_niced(&due, self.workers, crate::priority::BACKGROUND, |b| {
                let r = self
                    .endpoint(b)
                    .map_err(|e| e.to_string())
                    .and_then(|ep| self.read_power(b.node_id, ep).map_err(|e| e.to_string()));
                (b.node_id, r, b.failures)
            });
        let failed = readings.iter().filter(|(_, r, _)| r.is_err()).count();
        let interval = self.interval;
        let at = crate::clock::now();
        let written = store.write(|tx| {
            for (node, r, failures) in &readings {
                let wait = match r {
                    Ok(_) => interval,
                    Err(_) => backoff(interval, *failures + 1),
                };
                let next_at = at.saturating_add(i64::try_from(wait).unwrap_or(i64::MAX));
                tx.record_power(
                    *node,
                    r.as_ref().copied().map_err(String::as_str),
                    at,
                    next_at,
                )?;
            }
            Ok(())
        });
        if let Err(e) = written {
            tracing::warn!(error = %e, "cannot record the power states read");
        }
        let sweep = Sweep {
            read: readings.len(),
            failed,
            peak_in_flight: peak,
            elapsed: started.elapsed(),
        };
        tracing::info!(
            read = sweep.read,
            failed,
            ms = sweep.elapsed.as_millis() as u64,
            peak_in_flight = sweep.peak_in_flight,
            "power states read"
        );
        self.expire_sessions();
        sweep
    }

    /// Node `node`'s power through its kept session when there is one. A kept session that
    /// fails for any reason but the BMC being unreachable (its token refused after a BMC
    /// reset, the system moved) is dropped and the reading tried once more with a new login:
    /// a stale session must not flag a node. Only a connection that worked is kept.
    fn read_power(&self, node: NodeId, endpoint: Endpoint) -> Result<PowerState, BmcError> {
        let (mut bmc, reused) = self.sessions.take(node, &endpoint);
        let mut read = bmc.power_state();
        if reused && matches!(&read, Err(e) if !matches!(e, BmcError::Unreachable { .. })) {
            bmc = super::connect(&endpoint);
            read = bmc.power_state();
        }
        match &read {
            Ok(_) => self.sessions.park(node, endpoint, bmc),
            // Logging out of a BMC that does not answer would hold this worker for another
            // timeout.
            Err(BmcError::Unreachable { .. }) => bmc.abandon(),
            Err(_) => {}
        }
        read
    }

    /// Log out of the sessions not used for two intervals and a minute (their nodes' BMCs
    /// were removed, changed, or are failing and backing off), `workers` at once.
    fn expire_sessions(&self) {
        let age = Duration::from_secs(self.interval.saturating_mul(2).saturating_add(60));
        let n = self.sessions.expire(age, self.workers);
        if n > 0 {
            tracing::debug!(sessions = n, "idle BMC sessions closed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_32_intervals() {
        assert_eq!(backoff(60, 0), 60);
        assert_eq!(backoff(60, 1), 120);
        assert_eq!(backoff(60, 5), 1920);
        assert_eq!(backoff(60, 40), 1920);
        assert_eq!(backoff(u64::MAX, 3), u64::MAX);
    }
}
