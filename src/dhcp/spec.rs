//! How operators write DHCP subnets and reservations in the config: one line per subnet,
//! `10.20.0.0/24 pool=10.20.0.100-10.20.0.199 router=10.20.0.1 dns=10.20.0.1 lease=3600`, and
//! `MAC=IP` per reservation. Parsing is pure and every error says which word is wrong and why;
//! the config module turns these into its own errors naming the option.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::reply::Subnet;
use crate::model::Mac;

/// Lease time when a subnet line has no `lease=`.
pub const DEFAULT_LEASE_TIME: u32 = 3600;

/// The accepted form of a subnet line, for error messages and the README.
pub const SUBNET_FORM: &str = "`NETWORK/PREFIX pool=FIRST-LAST [router=IP] [dns=IP,IP] [lease=SECONDS]`, subnets separated by `;`";

/// The accepted form of a reservation, for error messages and the README.
pub const RESERVATION_FORM: &str =
    "`MAC=IP` pairs separated by `;` or `,`, like 52:54:00:12:34:56=10.20.0.50";

fn ip(word: &str, what: &str) -> Result<Ipv4Addr, String> {
    word.parse()
        .map_err(|_| format!("{what} {word:?} is not an IPv4 address"))
}

/// Parse one subnet line (without reservations; see [`attach_reservations`]).
pub fn parse_subnet(line: &str) -> Result<Subnet, String> {
    let mut words = line.split_whitespace();
    let cidr = words.next().ok_or("empty subnet")?;
    let (net, prefix) = cidr
        .split_once('/')
        .ok_or_else(|| format!("{cidr:?} lacks a /PREFIX"))?;
    let network = ip(net, "network")?;
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| (8..=30).contains(p))
        .ok_or_else(|| format!("prefix {prefix:?} is not a number from 8 to 30"))?;
    let mut subnet = Subnet {
        network,
        prefix,
        pool_start: Ipv4Addr::UNSPECIFIED,
        pool_end: Ipv4Addr::UNSPECIFIED,
        router: None,
        dns: Vec::new(),
        lease_time: DEFAULT_LEASE_TIME,
        reservations: BTreeMap::new(),
    };
    if u32::from(network) & !u32::from(subnet.mask()) != 0 {
        return Err(format!("{cidr} has host bits set"));
    }
    let mut pool = false;
    for word in words {
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| format!("{word:?} is not KEY=VALUE"))?;
        match key {
            "pool" => {
                let (a, b) = value
                    .split_once('-')
                    .ok_or_else(|| format!("pool {value:?} is not FIRST-LAST"))?;
                subnet.pool_start = ip(a, "pool start")?;
                subnet.pool_end = ip(b, "pool end")?;
                if u32::from(subnet.pool_start) > u32::from(subnet.pool_end) {
                    return Err(format!("pool {value} ends before it starts"));
                }
                for end in [subnet.pool_start, subnet.pool_end] {
                    if !subnet.contains(end) {
                        return Err(format!("pool address {end} is outside {cidr}"));
                    }
                }
                pool = true;
            }
            "router" => {
                let r = ip(value, "router")?;
                if !subnet.contains(r) {
                    return Err(format!("router {r} is outside {cidr}"));
                }
                subnet.router = Some(r);
            }
            "dns" => {
                subnet.dns = value
                    .split(',')
                    .map(|d| ip(d, "dns"))
                    .collect::<Result<_, _>>()?;
            }
            "lease" => {
                subnet.lease_time =
                    value.parse().ok().filter(|t| *t >= 60).ok_or_else(|| {
                        format!("lease {value:?} is not a number of seconds >= 60")
                    })?;
            }
            other => {
                return Err(format!(
                    "unknown word {other:?} (known: pool, router, dns, lease)"
                ));
            }
        }
    }
    if !pool {
        return Err(format!("{cidr} has no pool=FIRST-LAST"));
    }
    Ok(subnet)
}

/// Parse `;`-separated subnet lines. Overlapping subnets are refused.
pub fn parse_subnets(text: &str) -> Result<Vec<Subnet>, String> {
    let mut subnets: Vec<Subnet> = Vec::new();
    for (n, line) in text
        .split([';', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let subnet = parse_subnet(line).map_err(|e| format!("subnet {}: {e}", n + 1))?;
        if let Some(other) = subnets
            .iter()
            .find(|s| s.contains(subnet.network) || subnet.contains(s.network))
        {
            return Err(format!(
                "subnet {} ({}/{}) overlaps {}/{}",
                n + 1,
                subnet.network,
                subnet.prefix,
                other.network,
                other.prefix
            ));
        }
        subnets.push(subnet);
    }
    Ok(subnets)
}

/// Parse reservations.
pub fn parse_reservations(text: &str) -> Result<Vec<(Mac, Ipv4Addr)>, String> {
    let mut out: Vec<(Mac, Ipv4Addr)> = Vec::new();
    for pair in text
        .split([';', ',', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (mac, addr) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not MAC=IP"))?;
        let mac: Mac = mac
            .trim()
            .parse()
            .map_err(|_| format!("{mac:?} is not a MAC address"))?;
        let addr = ip(addr.trim(), "reserved address")?;
        if let Some((m, _)) = out.iter().find(|(m, a)| *m == mac || *a == addr) {
            return Err(format!("reservation {pair:?} clashes with the one for {m}"));
        }
        out.push((mac, addr));
    }
    Ok(out)
}

/// Give each reservation to the subnet that contains its address.
pub fn attach_reservations(
    subnets: &mut [Subnet],
    reservations: Vec<(Mac, Ipv4Addr)>,
) -> Result<(), String> {
    for (mac, addr) in reservations {
        let subnet = subnets
            .iter_mut()
            .find(|s| s.contains(addr))
            .ok_or_else(|| format!("reserved address {addr} (for {mac}) is in no subnet"))?;
        subnet.reservations.insert(mac, addr);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_line_parses() {
        let s = parse_subnet(
            "10.20.0.0/24 pool=10.20.0.100-10.20.0.199 router=10.20.0.1 dns=10.20.0.1,9.9.9.9 lease=600",
        )
        .unwrap();
        assert_eq!(s.prefix, 24);
        assert_eq!(s.pool_end, Ipv4Addr::new(10, 20, 0, 199));
        assert_eq!(s.dns.len(), 2);
        assert_eq!(s.lease_time, 600);
    }

    #[test]
    fn errors_name_the_word() {
        let cases = [
            ("10.20.0.0 pool=1.1.1.1-1.1.1.2", "lacks a /PREFIX"),
            ("10.20.0.1/24 pool=10.20.0.2-10.20.0.3", "host bits"),
            ("10.20.0.0/24", "no pool"),
            ("10.20.0.0/24 pool=10.20.0.9-10.20.0.3", "ends before"),
            ("10.20.0.0/24 pool=10.20.0.9-10.20.1.3", "outside"),
            (
                "10.20.0.0/24 pool=10.20.0.2-10.20.0.3 lease=5",
                "lease \"5\"",
            ),
            (
                "10.20.0.0/24 pool=10.20.0.2-10.20.0.3 gw=1",
                "unknown word \"gw\"",
            ),
            ("10.20.0.0/24 pool=10.20.0.2-10.20.0.x", "pool end"),
        ];
        for (line, want) in cases {
            let err = parse_subnet(line).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
        let err = parse_subnets(
            "10.20.0.0/24 pool=10.20.0.2-10.20.0.3; 10.20.0.0/16 pool=10.20.1.2-10.20.1.3",
        )
        .unwrap_err();
        assert!(
            err.contains("subnet 2") && err.contains("overlaps"),
            "{err}"
        );
    }

    #[test]
    fn reservations_go_to_their_subnet() {
        let mut subnets = parse_subnets(
            "10.20.0.0/24 pool=10.20.0.2-10.20.0.3;10.30.0.0/24 pool=10.30.0.2-10.30.0.3",
        )
        .unwrap();
        let r = parse_reservations("52:54:00:00:00:01=10.30.0.50, 52:54:00:00:00:02=10.20.0.9")
            .unwrap();
        attach_reservations(&mut subnets, r).unwrap();
        assert_eq!(subnets[1].reservations.len(), 1);
        assert!(
            parse_reservations("52:54:00:00:00:01=10.30.0.50;52:54:00:00:00:01=10.30.0.51")
                .unwrap_err()
                .contains("clashes")
        );
        let lost = parse_reservations("52:54:00:00:00:03=192.168.9.9").unwrap();
        assert!(
            attach_reservations(&mut subnets, lost)
                .unwrap_err()
                .contains("in no subnet")
        );
    }
}
