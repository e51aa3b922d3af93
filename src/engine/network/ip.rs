//! IPv4 addresses, networks (CIDR) and address ranges as Nailgun's network code uses them
//! (netaddr's `IPAddress`, `IPNetwork`, `IPRange`), without the standard library's network module (the engine is pure):
//! parsing with the text that was wrong in the error, containment, intersection, and walking a
//! range for free addresses.

use std::fmt;

/// An IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ip(pub u32);

impl Ip {
    /// Dotted quad only (`10.0.0.1`); no leading zeros that would make it octal elsewhere.
    pub fn parse(text: &str) -> Result<Ip, String> {
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() != 4 {
            return Err(format!("{text:?} is not an IPv4 address"));
        }
        let mut value = 0u32;
        for p in parts {
            let ok = !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p == "0" || !p.starts_with('0'));
            let octet = p.parse::<u32>().ok().filter(|o| ok && *o <= 255);
            let Some(octet) = octet else {
                return Err(format!("{text:?} is not an IPv4 address"));
            };
            value = (value << 8) | octet;
        }
        Ok(Ip(value))
    }

    pub fn next(self) -> Option<Ip> {
        self.0.checked_add(1).map(Ip)
    }
}

impl fmt::Display for Ip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.0.to_be_bytes();
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// An IPv4 network in CIDR notation. Like netaddr, host bits may be set in the text
/// (`10.0.0.5/24`); [`Cidr::network`] is the masked address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    pub addr: Ip,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let bad = || format!("{text:?} is not an IPv4 network in CIDR notation (a.b.c.d/n)");
        let (addr, prefix) = text.split_once('/').ok_or_else(bad)?;
        let addr = Ip::parse(addr).map_err(|_| bad())?;
        let prefix = prefix
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= 32 && !prefix.starts_with('+'))
            .ok_or_else(bad)?;
        Ok(Cidr { addr, prefix })
    }

    pub fn mask(&self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix))
        }
    }

    /// The subnet address.
    pub fn network(&self) -> Ip {
        Ip(self.addr.0 & self.mask())
    }

    pub fn broadcast(&self) -> Ip {
        Ip(self.network().0 | !self.mask())
    }

    pub fn netmask(&self) -> Ip {
        Ip(self.mask())
    }

    pub fn contains(&self, ip: Ip) -> bool {
        ip.0 & self.mask() == self.network().0
    }

    pub fn range(&self) -> Range {
        Range {
            first: self.network(),
            last: self.broadcast(),
        }
    }

    /// `net[index]` as netaddr indexes a network (negative from the end).
    pub fn nth(&self, index: i64) -> Option<Ip> {
        let size = i64::from(!self.mask()) + 1;
        let i = if index < 0 { size + index } else { index };
        (0..size)
            .contains(&i)
            .then(|| Ip(self.network().0.wrapping_add(i as u32)))
    }

    pub fn intersects(&self, other: &Cidr) -> bool {
        self.range().intersects(&other.range())
    }

    /// The canonical text (`192.168.0.0/24`).
    pub fn canonical(&self) -> String {
        format!("{}/{}", self.network(), self.prefix)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// An inclusive range of addresses, `first <= last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Range {
    pub first: Ip,
    pub last: Ip,
}

impl Range {
    /// Two addresses, the first not after the last.
    pub fn parse(first: &str, last: &str) -> Result<Range, String> {
        let (first, last) = (Ip::parse(first)?, Ip::parse(last)?);
        if first > last {
            return Err(format!("the range starts at {first}, after its end {last}"));
        }
        Ok(Range { first, last })
    }

    pub fn contains(&self, ip: Ip) -> bool {
        self.first <= ip && ip <= self.last
    }

    pub fn intersects(&self, other: &Range) -> bool {
        self.first <= other.last && other.first <= self.last
    }

    pub fn inside(&self, cidr: &Cidr) -> bool {
        cidr.contains(self.first) && cidr.contains(self.last)
    }

    pub fn len(&self) -> u64 {
        u64::from(self.last.0 - self.first.0) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The addresses, first to last.
    pub fn iter(&self) -> impl Iterator<Item = Ip> + use<> {
        (self.first.0..=self.last.0).map(Ip)
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// The first `count` addresses of `ranges`, in order, that `used` does not hold (Nailgun's
/// `get_free_ips_from_ranges`), or `None` when the ranges run out.
pub fn free_ips(
    ranges: &[Range],
    used: &std::collections::BTreeSet<Ip>,
    count: usize,
) -> Option<Vec<Ip>> {
    let mut out = Vec::with_capacity(count);
    if count == 0 {
        return Some(out);
    }
    for r in ranges {
        // Skip over used addresses without walking a huge range one by one past them.
        let mut ip = r.first;
        loop {
            if !used.contains(&ip) {
                out.push(ip);
                if out.len() == count {
                    return Some(out);
                }
            }
            if ip == r.last {
                break;
            }
            match ip.next() {
                Some(n) => ip = n,
                None => break,
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_networks_parse_as_netaddr_reads_them() {
        assert_eq!(Ip::parse("10.20.0.1").unwrap().to_string(), "10.20.0.1");
        for bad in [
            "10.20.0",
            "10.20.0.256",
            "a.b.c.d",
            "01.2.3.4",
            "",
            "1.2.3.4.5",
        ] {
            assert!(Ip::parse(bad).is_err(), "{bad}");
        }
        let c = Cidr::parse("192.168.0.7/24").unwrap();
        assert_eq!(c.canonical(), "192.168.0.0/24");
        assert_eq!(c.broadcast().to_string(), "192.168.0.255");
        assert_eq!(c.netmask().to_string(), "255.255.255.0");
        assert_eq!(c.nth(2).unwrap().to_string(), "192.168.0.2");
        assert_eq!(c.nth(-2).unwrap().to_string(), "192.168.0.254");
        assert!(Cidr::parse("192.168.0.0/33").is_err());
        assert!(Cidr::parse("192.168.0.0").is_err());
        assert_eq!(Cidr::parse("0.0.0.0/0").unwrap().mask(), 0);
    }

    #[test]
    fn free_addresses_skip_used_ones_and_run_out() {
        let r = Range::parse("10.0.0.2", "10.0.0.5").unwrap();
        let used = [Ip::parse("10.0.0.3").unwrap()].into_iter().collect();
        let got = free_ips(&[r], &used, 3).unwrap();
        let text: Vec<String> = got.iter().map(Ip::to_string).collect();
        assert_eq!(text, ["10.0.0.2", "10.0.0.4", "10.0.0.5"]);
        assert!(free_ips(&[r], &used, 4).is_none());
        assert!(Range::parse("10.0.0.5", "10.0.0.2").is_err());
    }
}
