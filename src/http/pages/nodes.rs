//! The Nodes page at rack scale: one page of the nodes a search and filters select, sorted by
//! any column, 50 to 500 at a time, all from GET parameters ([`super::node_query`]) so a list
//! is a link and works without JavaScript; the store filters, sorts and pages in SQL and reads
//! no inventory. Ticked nodes, or all the filter selects, take a bulk action (assign into an
//! environment with its roles, remove, delete, power) after a review page that names them
//! ([`super::bulk`]).

use actix_web::{HttpRequest, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::pages::node_query::{ListQuery, PER_PAGE, pairs_of};
use crate::http::pages::views::{Me, ago, badge, human_bytes, thousands, utc};
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::model::NodeStatus;
use crate::store::{InEnvironment, ListedNode, Power, SortKey};

/// One row of the list.
pub struct ListRow {
    pub id: i64,
    pub name: String,
    pub hostname: String,
    pub mac: String,
    pub status: &'static str,
    pub badge: &'static str,
    /// Its environment: id and name.
    pub env: Option<(i64, String)>,
    pub roles: String,
    pub cpu: String,
    pub ram: String,
    pub disks: String,
    pub hardware: String,
    pub last_seen: String,
    pub last_seen_utc: String,
    pub online: bool,
    pub power: &'static str,
    pub power_badge: &'static str,
    pub pending_deletion: bool,
    pub approved: bool,
}

/// The badge class of a power reading.
pub fn power_badge(p: Power) -> &'static str {
    match p {
        Power::On => "badge-ok",
        Power::Off | Power::NoCredentials | Power::Unknown => "badge-neutral",
        Power::Changing => "badge-progress",
        Power::Unreachable => "badge-error",
        Power::NoBmc => "",
    }
}

impl ListRow {
    pub fn new(n: &ListedNode, now: i64) -> ListRow {
        ListRow {
            id: n.id,
            name: n.name.clone(),
            hostname: n.hostname.clone(),
            mac: n.mac.clone(),
            status: n.status.as_str(),
            badge: badge(n.status),
            env: n.cluster.clone(),
            roles: n.roles.join(", "),
            cpu: match n.cpus {
                1 => "1 CPU".to_string(),
                c => format!("{c} CPUs"),
            },
            ram: human_bytes(n.memory_bytes),
            disks: match n.disk_count {
                0 => "no disks".to_string(),
                1 => format!("1 disk, {}", human_bytes(n.disk_bytes)),
                c => format!("{c} disks, {}", human_bytes(n.disk_bytes)),
            },
            hardware: n.hardware.clone(),
            last_seen: ago(n.last_seen_at, now),
            last_seen_utc: utc(n.last_seen_at),
            online: n.online,
            power: n.power.label(),
            power_badge: power_badge(n.power),
            pending_deletion: n.pending_deletion,
            approved: n.approved,
        }
    }
}

/// An option of a select: value, label, selected.
pub struct Opt {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

impl Opt {
    fn new(value: impl Into<String>, label: impl Into<String>, selected: bool) -> Opt {
        Opt {
            value: value.into(),
            label: label.into(),
            selected,
        }
    }
}

/// A column's heading: its sort link and state.
pub struct Heading {
    pub label: &'static str,
    pub href: String,
    /// `ascending`, `descending` or `none` (`aria-sort`).
    pub sorted: &'static str,
    /// Dropped on narrow screens (`opt1` first, then `opt2`), or empty.
    pub class: &'static str,
}

/// A link of the pager: label, target (none for the current page or a gap).
pub struct PageLink {
    pub label: String,
    pub href: Option<String>,
    pub current: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "nodes.html")]
pub struct NodesPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    /// Nodes there are at all.
    total: u64,
    /// Nodes the filter selects.
    matching: u64,
    matching_text: String,
    /// "1–50 of 1,234".
    range: String,
    rows: Vec<ListRow>,
    /// The list's own link and its filter's parameters (hidden fields of the bulk form).
    here: String,
    filter_pairs: Vec<(&'static str, String)>,
    filtered: bool,
    search: String,
    statuses: Vec<Opt>,
    roles: Vec<Opt>,
    envs: Vec<Opt>,
    online: Vec<Opt>,
    powers: Vec<Opt>,
    pers: Vec<Opt>,
    sort: String,
    dir: String,
    headings: Vec<Heading>,
    pages: Vec<PageLink>,
    prev: Option<String>,
    next: Option<String>,
    /// Environments a bulk assignment may go to.
    targets: Vec<(i64, String)>,
}

/// The pager's links: first, last, and two either side of the current page.
fn page_links(q: &ListQuery, page: u64, last: u64) -> Vec<PageLink> {
    let mut out = Vec::new();
    let mut previous = 0;
    for p in 1..=last {
        if p != 1 && p != last && p.abs_diff(page) > 2 {
            continue;
        }
        if p > previous + 1 {
            out.push(PageLink {
                label: "…".to_string(),
                href: None,
                current: false,
            });
        }
        out.push(PageLink {
            label: thousands(p),
            href: (p != page).then(|| q.with(|q| q.page = p)),
            current: p == page,
        });
        previous = p;
    }
    out
}

fn headings(q: &ListQuery) -> Vec<Heading> {
    [
        ("Name", SortKey::Name, ""),
        ("Status", SortKey::Status, ""),
        ("Environment", SortKey::Environment, ""),
        ("CPU", SortKey::Cpus, "opt1"),
        ("RAM", SortKey::Memory, "opt1"),
        ("Disks", SortKey::Disks, "opt2"),
        ("Last seen", SortKey::LastSeen, "opt1"),
        ("Power", SortKey::Power, ""),
    ]
    .into_iter()
    .map(|(label, key, class)| {
        let current = q.sort == key;
        Heading {
            label,
            href: q.with(|q| {
                q.descending = current && !q.descending;
                q.sort = key;
                q.page = 1;
            }),
            sorted: match (current, q.descending) {
                (false, _) => "none",
                (true, false) => "ascending",
                (true, true) => "descending",
            },
            class,
        }
    })
    .collect()
}

/// `GET /nodes[?q=&status=&role=&env=&online=&power=&sort=&dir=&per=&page=]`
pub async fn nodes(
    state: web::Data<AppState>,
    me: Me,
    req: HttpRequest,
) -> Result<NodesPage, PageError> {
    let q = ListQuery::parse(&pairs_of(req.query_string())?, &[])?;
    let now = crate::clock::now();
    let store_q = q.store_query(q.page);
    let (total, listing, roles_in_use, clusters, store_q) = state
        .store(move |s| {
            s.read(|r| {
                let total = r.node_total()?;
                let mut store_q = store_q;
                let mut listing = r.node_list(&store_q, now)?;
                // A page past the end shows the last one.
                if listing.nodes.is_empty() && listing.matching > 0 {
                    let last = listing.matching.div_ceil(store_q.limit.max(1));
                    store_q.offset = (last - 1) * store_q.limit;
                    listing = r.node_list(&store_q, now)?;
                }
                Ok((
                    total,
                    listing,
                    r.node_roles_in_use()?,
                    r.clusters()?,
                    store_q,
                ))
            })
        })
        .await?;
    let page = store_q.offset / q.per.max(1) + 1;
    let mut q = q;
    q.page = page;
    let last = listing.matching.div_ceil(q.per.max(1)).max(1);
    let first_shown = if listing.nodes.is_empty() {
        0
    } else {
        store_q.offset + 1
    };
    let last_shown = store_q.offset + listing.nodes.len() as u64;
    let f = &q.filter;
    let mut roles: Vec<Opt> = roles_in_use
        .iter()
        .map(|r| Opt::new(r.clone(), r.clone(), f.role.as_deref() == Some(r)))
        .collect();
    if let Some(r) = &f.role
        && !roles_in_use.contains(r)
    {
        roles.push(Opt::new(r.clone(), r.clone(), true));
    }
    let mut envs = vec![Opt::new(
        "none",
        "no environment",
        f.environment == Some(InEnvironment::Unassigned),
    )];
    envs.extend(clusters.iter().map(|c| {
        Opt::new(
            c.id.to_string(),
            c.name.clone(),
            f.environment == Some(InEnvironment::Id(c.id)),
        )
    }));
    let here = q.href();
    Ok(NodesPage {
        nav: "nodes",
        version: VERSION,
        me,
        total,
        matching: listing.matching,
        matching_text: thousands(listing.matching),
        range: format!(
            "{}–{} of {}",
            thousands(first_shown),
            thousands(last_shown),
            thousands(listing.matching)
        ),
        rows: listing.nodes.iter().map(|n| ListRow::new(n, now)).collect(),
        here,
        filter_pairs: q.filter_pairs(),
        filtered: !q.filter_pairs().is_empty(),
        search: f.search.clone().unwrap_or_default(),
        statuses: NodeStatus::ALL
            .iter()
            .map(|s| Opt::new(s.as_str(), s.as_str(), f.status == Some(*s)))
            .collect(),
        roles,
        envs,
        online: [("yes", "online"), ("no", "offline")]
            .into_iter()
            .map(|(v, l)| Opt::new(v, l, f.online == Some(v == "yes")))
            .collect(),
        powers: Power::ALL
            .iter()
            .map(|p| Opt::new(p.as_str(), p.label(), f.power == Some(*p)))
            .collect(),
        pers: PER_PAGE
            .iter()
            .map(|n| Opt::new(n.to_string(), format!("{n} a page"), q.per == *n))
            .collect(),
        sort: q.sort.as_str().to_string(),
        dir: if q.descending { "desc" } else { "asc" }.to_string(),
        headings: headings(&q),
        pages: page_links(&q, page, last),
        prev: (page > 1).then(|| q.with(|q| q.page = page - 1)),
        next: (page < last).then(|| q.with(|q| q.page = page + 1)),
        targets: clusters.iter().map(|c| (c.id, c.name.clone())).collect(),
    })
}

pub(super) fn power_action(action: &str) -> Result<crate::bmc::actions::Act, ApiError> {
    crate::bmc::actions::Act::parse(action)
        .ok_or_else(|| ApiError::BadRequest(format!("action: no power action {action:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pager_shows_the_ends_and_the_neighbourhood() {
        let q = ListQuery::default();
        let labels = |page, last| {
            page_links(&q, page, last)
                .iter()
                .map(|l| {
                    if l.current {
                        format!("[{}]", l.label)
                    } else {
                        l.label.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(labels(1, 1), "[1]");
        assert_eq!(labels(1, 200), "[1] 2 3 … 200");
        assert_eq!(labels(100, 200), "1 … 98 99 [100] 101 102 … 200");
        assert_eq!(labels(4, 6), "1 2 3 [4] 5 6");
    }
}
