//! View models for the dashboard: what a template shows, already formatted (sizes, relative
//! times, badge classes), so templates stay free of logic and of database access.

use crate::model::{Node, NodeStatus};
use crate::store::{HistoryEntry, NodeCounts};

/// Bytes in binary units with one decimal, as operators read RAM and disk sizes: `7.8 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A count with thousands separated, as a person reads it: `10,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A coarse relative time: `just now`, `35 s ago`, `5 min ago`, `3 h ago`, `2 days ago`.
/// Seconds under a minute are said as such: an agent flagged gone after 30 s of silence must
/// not read "last seen just now".
pub fn ago(then: i64, now: i64) -> String {
    let secs = now.saturating_sub(then);
    match secs {
        i64::MIN..=0 => "just now".to_string(),
        1..=59 => format!("{secs} s ago"),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=86_399 => format!("{} h ago", secs / 3600),
        _ => match secs / 86_400 {
            1 => "1 day ago".to_string(),
            days => format!("{days} days ago"),
        },
    }
}

pub use crate::model::utc;

/// A span of seconds as people read it: `0 s`, `45 s`, `3 min 20 s`, `2 h 5 min`, `3 days 4 h`.
pub fn duration(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => match s % 60 {
            0 => format!("{} min", s / 60),
            r => format!("{} min {r} s", s / 60),
        },
        3600..=86_399 => match s / 60 % 60 {
            0 => format!("{} h", s / 3600),
            m => format!("{} h {m} min", s / 3600),
        },
        _ => {
            let days = s / 86_400;
            let unit = if days == 1 { "day" } else { "days" };
            match s / 3600 % 24 {
                0 => format!("{days} {unit}"),
                h => format!("{days} {unit} {h} h"),
            }
        }
    }
}

/// The time of day of `ts` in UTC, `10:04:05`, for lists whose full time is in a tooltip.
pub fn clock(ts: i64) -> String {
    let secs = ts.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// The badge colour class of a status; the CSS defines one per class.
pub fn badge(status: NodeStatus) -> &'static str {
    match status {
        NodeStatus::Discover => "badge-info",
        NodeStatus::Provisioning | NodeStatus::Deploying => "badge-progress",
        NodeStatus::Provisioned => "badge-neutral",
        NodeStatus::Ready => "badge-ok",
        NodeStatus::Error => "badge-error",
    }
}

/// One row of the nodes table.
pub struct NodeRow {
    pub name: String,
    pub mac: String,
    pub status: &'static str,
    pub badge: &'static str,
    pub cpu: String,
    pub vendor: String,
    /// Its power as its BMC last said (`on`, `off`, `unreachable`), empty without a BMC.
    pub power: String,
}

impl NodeRow {
    /// The row with its BMC's power reading.
    pub fn with_power(mut self, bmc: Option<&crate::store::StoredBmc>) -> NodeRow {
        self.power = match bmc {
            None => String::new(),
            Some(b) if b.power_error.is_some() => "unreachable".to_string(),
            Some(b) if !b.usable() => "no credentials".to_string(),
            Some(b) => b
                .power_state
                .map_or("unknown", crate::bmc::PowerState::as_str)
                .to_string(),
        };
        self
    }

    pub fn new(node: &Node) -> NodeRow {
        let inv = &node.inventory;
        let vendor = [&inv.system.vendor, &inv.system.product]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ");
        NodeRow {
            name: node.name.clone(),
            mac: node.mac.to_string(),
            status: node.status.as_str(),
            badge: badge(node.status),
            cpu: match inv.cpu.count {
                1 => "1 CPU".to_string(),
                n => format!("{n} CPUs"),
            },
            vendor,
            power: String::new(),
        }
    }
}

/// One tile of the Overview.
pub struct CountTile {
    pub label: &'static str,
    pub value: u64,
    pub badge: &'static str,
}

impl CountTile {
    pub fn from_counts(counts: &NodeCounts) -> Vec<CountTile> {
        let mut tiles = vec![CountTile {
            label: "nodes",
            value: counts.total,
            badge: "",
        }];
        tiles.extend(NodeStatus::ALL.into_iter().map(|s| CountTile {
            label: s.as_str(),
            value: counts.get(s),
            badge: badge(s),
        }));
        tiles
    }
}

/// One line of the activity feed: what happened, and links to what it was about while each
/// exists (a deleted one's name stays in the message).
pub struct HistoryRow {
    pub when: String,
    pub when_utc: String,
    pub message: String,
    /// Its node: id and current name.
    pub node: Option<(i64, String)>,
    /// Its environment: id and current name.
    pub env: Option<(i64, String)>,
    /// Its deployment: id and its page.
    pub deployment: Option<(i64, String)>,
}

/// A deployment's page.
pub fn deployment_href(id: i64) -> String {
    format!("/deployments/{id}")
}

impl HistoryRow {
    pub fn new(entry: &HistoryEntry, now: i64) -> HistoryRow {
        HistoryRow {
            when: ago(entry.at, now),
            when_utc: utc(entry.at),
            message: entry.message.clone(),
            node: entry.node_id.map(|id| {
                (
                    id,
                    entry
                        .node_name
                        .clone()
                        .unwrap_or_else(|| format!("node {id}")),
                )
            }),
            env: entry.cluster_id.map(|id| {
                (
                    id,
                    entry
                        .cluster_name
                        .clone()
                        .unwrap_or_else(|| format!("environment {id}")),
                )
            }),
            deployment: entry.deployment_id.map(|id| (id, deployment_href(id))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(8 * 1024 * 1024 * 1024), "8.0 GiB");
        assert_eq!(human_bytes(500_107_862_016), "465.8 GiB");
    }

    #[test]
    fn counts() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(-3), "0 s");
        assert_eq!(duration(45), "45 s");
        assert_eq!(duration(120), "2 min");
        assert_eq!(duration(200), "3 min 20 s");
        assert_eq!(duration(7500), "2 h 5 min");
        assert_eq!(duration(86_400 + 3600 * 4), "1 day 4 h");
        assert_eq!(clock(1_795_000_000), "11:06:40");
    }

    #[test]
    fn times() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_795_000_000), "2026-11-18 11:06:40 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(ago(100, 100), "just now");
        assert_eq!(
            ago(100, 90),
            "just now",
            "a clock step back is not the future"
        );
        assert_eq!(ago(100, 101), "1 s ago");
        assert_eq!(ago(100, 135), "35 s ago");
        assert_eq!(ago(100, 159), "59 s ago");
        assert_eq!(ago(100, 160), "1 min ago");
        assert_eq!(ago(0, 600), "10 min ago");
        assert_eq!(ago(0, 7200), "2 h ago");
        assert_eq!(ago(0, 86_400), "1 day ago");
        assert_eq!(ago(0, 3 * 86_400), "3 days ago");
    }
}

/// Who is signed in, as every page shows it: name and role, the CSRF token its forms carry,
/// and what the role may do (actions it may not take are not offered).
#[derive(Debug, Clone, Default)]
pub struct Me {
    pub name: String,
    pub role: &'static str,
    pub csrf: String,
    /// May change environments, nodes and deployments.
    pub operate: bool,
    /// May manage plugins and users, and read the audit log.
    pub admin: bool,
    /// What the last action said, shown once at the top of the page.
    pub notice: Option<crate::http::pages::notice::Notice>,
}

impl Me {
    pub fn of(caller: &crate::http::access::Caller) -> Me {
        use crate::auth::Role;
        let p = &caller.0;
        Me {
            name: p.user.clone(),
            role: p.role.as_str(),
            csrf: p.csrf().to_string(),
            operate: p.role.allows(Role::Operator),
            admin: p.role.allows(Role::Admin),
            notice: None,
        }
    }
}

/// A page handler takes `Me` for the signed-in caller and the notice its request carried.
impl actix_web::FromRequest for Me {
    type Error = crate::http::ApiError;
    type Future = std::future::Ready<Result<Me, crate::http::ApiError>>;

    fn from_request(req: &actix_web::HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        use actix_web::HttpMessage;
        let me = req
            .extensions()
            .get::<crate::auth::Principal>()
            .cloned()
            .map(|p| Me {
                notice: crate::http::pages::notice::Notice::take(req),
                ..Me::of(&crate::http::access::Caller(p))
            })
            .ok_or_else(|| crate::http::ApiError::Unauthorized("sign in first".to_string()));
        std::future::ready(me)
    }
}
