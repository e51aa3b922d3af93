//! The function library: yaql 3.2.0's standard library (non-legacy) and Nailgun's helpers,
//! registered with the parameter types the reference declares so overload resolution picks
//! the same function. Must not do I/O.
//!
//! Modules: `system` (let/def/with/unpack/`->`/assert/call, equality, boolean, branching),
//! `collections`, `queries`, `strings`, `math`, `regex`, `nailgun`. Not provided: the
//! `date_time` module (no clock in the pure core; Fuel does not use it), `random`, the
//! delegate functions `#call`/`lambda` (delegates are off in Fuel) and yaqlization.

mod collections;
mod math;
mod nailgun;
mod queries;
mod regex;
mod strings;
mod system;

use super::error::Result;
use super::interp::Interp;
use super::registry::Registry;
use super::value::Value;

pub fn register_all(r: &mut Registry) {
    system::register(r);
    strings::register(r);
    math::register(r);
    collections::register(r);
    queries::register(r);
    regex::register(r);
    nailgun::register(r);
}

/// `#property#name` functions (only date/time values have them in yaql).
pub fn property(_it: &Interp, _obj: &Value, _name: &str) -> Option<Result<Value>> {
    None
}
