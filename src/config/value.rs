//! Parsing one option's raw text into a value of its [`Kind`]: addresses, URLs, sizes, seconds,
//! choices, DHCP subnet and reservation lines. Pure; the error says what exactly is wrong.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use super::options::{Kind, OptionSpec};
use crate::dhcp::reply::Subnet;
use crate::dhcp::spec;
use crate::model::Mac;

pub(super) enum Parsed {
    Path(PathBuf),
    OptPath(Option<PathBuf>),
    Addr(SocketAddr),
    OptAddr(Option<SocketAddr>),
    Ip(Option<Ipv4Addr>),
    Seconds(u64),
    Count(u64),
    Bool(bool),
    Text(String),
    Subnets(Vec<Subnet>),
    Reservations(Vec<(Mac, Ipv4Addr)>),
}

/// Parse one value; the error may carry a detail that says what exactly is wrong.
pub(super) fn parse_value(opt: &OptionSpec, raw: &str) -> Result<Parsed, Option<String>> {
    let raw = raw.trim();
    match opt.kind {
        Kind::Subnets => spec::parse_subnets(raw).map(Parsed::Subnets).map_err(Some),
        Kind::Reservations => spec::parse_reservations(raw)
            .map(Parsed::Reservations)
            .map_err(Some),
        _ => parse_simple(opt.kind, raw).ok_or(None),
    }
}

fn parse_simple(kind: Kind, raw: &str) -> Option<Parsed> {
    match kind {
        Kind::Subnets | Kind::Reservations => None,
        Kind::Bool => match raw {
            "true" => Some(Parsed::Bool(true)),
            "false" => Some(Parsed::Bool(false)),
            _ => None,
        },
        Kind::Count => raw.parse().ok().filter(|n| *n > 0).map(Parsed::Count),
        Kind::Size => parse_size(raw).filter(|n| *n > 0).map(Parsed::Count),
        Kind::OptionalIpv4 if raw.is_empty() => Some(Parsed::Ip(None)),
        Kind::OptionalIpv4 => raw
            .parse::<Ipv4Addr>()
            .ok()
            .filter(|ip| !ip.is_unspecified() && !ip.is_broadcast())
            .map(|ip| Parsed::Ip(Some(ip))),
        Kind::OptionalSocketAddr if raw.is_empty() => Some(Parsed::OptAddr(None)),
        Kind::OptionalSocketAddr => raw.parse().ok().map(|a| Parsed::OptAddr(Some(a))),
        Kind::OptionalPath if raw.is_empty() => Some(Parsed::OptPath(None)),
        Kind::OptionalPath => Some(Parsed::OptPath(Some(PathBuf::from(raw)))),
        Kind::Path => (!raw.is_empty()).then(|| Parsed::Path(PathBuf::from(raw))),
        Kind::SocketAddr => raw.parse().ok().map(Parsed::Addr),
        Kind::Seconds => raw.parse().ok().map(Parsed::Seconds),
        Kind::Choice(choices) => choices
            .contains(&raw)
            .then(|| Parsed::Text(raw.to_string())),
        Kind::LogFilter => tracing_subscriber::EnvFilter::try_new(raw)
            .ok()
            .filter(|_| !raw.is_empty())
            .map(|_| Parsed::Text(raw.to_string())),
        Kind::OptionalUrl => {
            let url = raw.trim_end_matches('/');
            let valid = url.is_empty()
                || url
                    .strip_prefix("http://")
                    .or_else(|| url.strip_prefix("https://"))
                    .is_some_and(|rest| {
                        !rest.is_empty()
                            && !rest.contains('/')
                            && !rest.contains(char::is_whitespace)
                    });
            valid.then(|| Parsed::Text(url.to_string()))
        }
        Kind::OptionalFileUrl => {
            // The agent downloads over plain HTTP (no TLS in the bootstrap image).
            let valid = raw.is_empty()
                || raw.strip_prefix("http://").is_some_and(|rest| {
                    rest.split_once('/').is_some_and(|(host, path)| {
                        !host.is_empty() && !path.is_empty() && !path.ends_with('/')
                    }) && !rest.contains(char::is_whitespace)
                });
            valid.then(|| Parsed::Text(raw.to_string()))
        }
        Kind::OptionalChecksum => (raw.is_empty() || crate::model::Checksum::parse(raw).is_ok())
            .then(|| Parsed::Text(raw.to_string())),
        Kind::Text => Some(Parsed::Text(raw.to_string())),
    }
}

/// `268435456`, `512KiB`, `256MiB`, `1GiB` (also `K`, `M`, `G`, `KB`...: binary either way).
fn parse_size(raw: &str) -> Option<u64> {
    let digits = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    number.checked_mul(1 << shift)
}
