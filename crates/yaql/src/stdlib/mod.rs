//! The function library: yaql 3.2.0's standard library (non-legacy) and Nailgun's helpers,
//! registered with the parameter types the reference declares so overload resolution picks
//! the same function. Must not do I/O.
//!
//! Modules: `system` (let/def/with/unpack/`->`/assert/call, equality, boolean, branching),
//! `collections`, `queries`, `strings`, `math`, `regex`, `nailgun`. Of yaql's 144 public names
//! 138 are here. Not provided: `now`, `datetime`, `timespan`, `localtz`, `utctz` (date/time
//! values need a clock the pure core does not read, and Fuel does not use them; the date/time
//! methods and properties exist only as shapes that match no value, so other receivers fail
//! as in the reference) and `random` (not deterministic). Also left out: the delegate
//! functions `#call`/`lambda` (delegates are off in Fuel) and yaqlization (Python objects).

mod collections;
mod math;
mod nailgun;
mod queries;
mod regex;
mod strings;
mod system;

pub use regex::Compiled;

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
    date_time_shapes(r);
}

/// The date/time module's methods and type tests, with parameter types no stoker value has:
/// calls on other values fail as in the reference (`'{0}'.format(1)` is
/// NoMatchingMethodException), and `isDatetime`/`isTimespan` are always false.
fn date_time_shapes(r: &mut Registry) {
    use super::registry::{Def, Form, Ty, p};
    r.add(
        "format",
        Form::Method,
        vec![p("dt", Ty::DateTime), p("format", Ty::Str)],
        |_, _| Ok(Value::Null),
    );
    let mut params = vec![p("dt", Ty::DateTime)];
    for n in [
        "year",
        "month",
        "day",
        "hour",
        "minute",
        "second",
        "microsecond",
    ] {
        params.push(p(n, Ty::PyInt).null().def(Def::Null));
    }
    params.push(p("offset", Ty::TimeSpan).null().def(Def::Null));
    r.add("replace", Form::Method, params, |_, _| Ok(Value::Null));
    r.add(
        "isDatetime",
        Form::Function,
        vec![p("value", Ty::Any)],
        |_, _| Ok(Value::Bool(false)),
    );
    r.add(
        "isTimespan",
        Form::Function,
        vec![p("value", Ty::Any)],
        |_, _| Ok(Value::Bool(false)),
    );
}

/// Names of yaql's date/time properties (`#property#year`...). stoker has no date/time
/// values, so these exist only to fail the way the reference does for other receivers.
const DATE_PROPERTIES: &[&str] = &[
    "year",
    "month",
    "day",
    "hour",
    "minute",
    "second",
    "microsecond",
    "weekday",
    "date",
    "time",
    "offset",
    "timestamp",
    "utc",
    "days",
    "hours",
    "minutes",
    "seconds",
    "milliseconds",
    "microseconds",
];

/// `#property#name` functions (only date/time values have them in yaql).
pub fn property(_it: &Interp, _obj: &Value, name: &str) -> Option<Result<Value>> {
    DATE_PROPERTIES.contains(&name).then(|| {
        Err(super::error::YaqlError::new(
            super::error::ErrorKind::NoMatchingFunctionException,
            format!("No function \"#property#{name}\" matches supplied arguments"),
        ))
    })
}
