//! The one place that reads the wall clock. Everything else receives `now` (Unix seconds) as an
//! argument, so the engine stays pure and tests can pin time.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch; 0 if the system clock is set before 1970.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
