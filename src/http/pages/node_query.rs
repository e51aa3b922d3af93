//! The Nodes page's GET parameters: search, filters, sort and paging, each checked and refused
//! with a message naming it (`status: no node status "bogus"; …`), so a list is linkable and
//! works without JavaScript; and the links that change one of them and keep the others.
//!
//! | parameter | values |
//! |---|---|
//! | `q` | a substring of the name, host name, serial, address or any MAC |
//! | `status` | a node status |
//! | `role` | a role name |
//! | `env` | an environment id, or `none` |
//! | `online` | `yes`, `no` |
//! | `power` | `on`, `off`, `changing`, `unreachable`, `no_credentials`, `unknown`, `no_bmc` |
//! | `sort`, `dir` | a column (`name`, `id`, `mac`, `status`, `environment`, `cpus`, `memory`, `disks`, `last_seen`, `power`), `asc` or `desc` |
//! | `per`, `page` | 50, 100 or 500 a page; the page from 1 |
//!
//! An empty value is "any" (a filter form's first option sends one).

use crate::http::ApiError;
use crate::model::NodeStatus;
use crate::store::{InEnvironment, NodeFilter, NodeQuery, Power, SortKey};

/// How many nodes a page may show.
pub const PER_PAGE: [u64; 3] = [50, 100, 500];

/// The parameters of the filter (what a bulk action "on all matching" carries along).
pub const FILTER_KEYS: [&str; 6] = ["q", "status", "role", "env", "online", "power"];

/// The longest search accepted.
const MAX_SEARCH: usize = 200;

/// The list the Nodes page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub filter: NodeFilter,
    pub sort: SortKey,
    pub descending: bool,
    pub per: u64,
    /// From 1.
    pub page: u64,
}

impl Default for ListQuery {
    fn default() -> ListQuery {
        ListQuery {
            filter: NodeFilter::default(),
            sort: SortKey::Name,
            descending: false,
            per: PER_PAGE[0],
            page: 1,
        }
    }
}

fn bad(key: &str, message: String) -> ApiError {
    ApiError::BadRequest(format!("{key}: {message}"))
}

/// A role name as roles are named (`^[0-9a-zA-Z_-]+$`, 1 to 100 characters).
fn role_name(v: &str) -> Result<String, ApiError> {
    if (1..=100).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Ok(v.to_string())
    } else {
        Err(bad(
            "role",
            format!("{v:?} is not a role name (letters, digits, - and _)"),
        ))
    }
}

/// The filter's part of `pairs`; a key not of the filter is left for the caller.
pub fn filter_of(pairs: &[(String, String)]) -> Result<NodeFilter, ApiError> {
    let mut f = NodeFilter::default();
    for (k, v) in pairs {
        let v = v.trim();
        if v.is_empty() {
            continue;
        }
        match k.as_str() {
            "q" => {
                if v.chars().count() > MAX_SEARCH {
                    return Err(bad(
                        "q",
                        format!("a search has at most {MAX_SEARCH} characters"),
                    ));
                }
                f.search = Some(v.to_string());
            }
            "status" => {
                f.status = Some(v.parse::<NodeStatus>().map_err(|_| {
                    bad(
                        "status",
                        format!(
                            "no node status {v:?}; the statuses are {}",
                            NodeStatus::ALL.map(NodeStatus::as_str).join(", ")
                        ),
                    )
                })?);
            }
            "role" => f.role = Some(role_name(v)?),
            "env" => {
                f.environment = Some(if v == "none" {
                    InEnvironment::Unassigned
                } else {
                    InEnvironment::Id(v.parse::<i64>().ok().filter(|i| *i > 0).ok_or_else(
                        || {
                            bad(
                                "env",
                                format!("{v:?} is neither an environment id nor none"),
                            )
                        },
                    )?)
                });
            }
            "online" => {
                f.online = Some(match v {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(bad("online", format!("{v:?} is neither yes nor no"))),
                });
            }
            "power" => {
                f.power = Some(Power::parse(v).ok_or_else(|| {
                    bad(
                        "power",
                        format!(
                            "no power state {v:?}; the states are {}",
                            Power::ALL.map(Power::as_str).join(", ")
                        ),
                    )
                })?);
            }
            _ => {}
        }
    }
    Ok(f)
}

impl ListQuery {
    /// The list `pairs` (a query string's) ask for; `extra` are keys a caller takes besides.
    pub fn parse(pairs: &[(String, String)], extra: &[&str]) -> Result<ListQuery, ApiError> {
        let mut q = ListQuery {
            filter: filter_of(pairs)?,
            ..ListQuery::default()
        };
        for (k, v) in pairs {
            let v = v.trim();
            match k.as_str() {
                k if FILTER_KEYS.contains(&k) || extra.contains(&k) => {}
                _ if v.is_empty() => {}
                "sort" => {
                    q.sort = SortKey::parse(v).ok_or_else(|| {
                        bad(
                            "sort",
                            format!(
                                "no column {v:?}; the list sorts by {}",
                                SortKey::ALL.map(SortKey::as_str).join(", ")
                            ),
                        )
                    })?;
                }
                "dir" => {
                    q.descending = match v {
                        "asc" => false,
                        "desc" => true,
                        _ => return Err(bad("dir", format!("{v:?} is neither asc nor desc"))),
                    };
                }
                "per" => {
                    q.per = v
                        .parse::<u64>()
                        .ok()
                        .filter(|n| PER_PAGE.contains(n))
                        .ok_or_else(|| {
                            bad(
                                "per",
                                format!(
                                    "{v:?}: a page shows {} nodes",
                                    PER_PAGE.map(|n| n.to_string()).join(", ")
                                ),
                            )
                        })?;
                }
                "page" => {
                    q.page = v
                        .parse::<u64>()
                        .ok()
                        .filter(|n| (1..=1_000_000).contains(n))
                        .ok_or_else(|| bad("page", format!("{v:?} is not a page number")))?;
                }
                other => {
                    let mut known: Vec<&str> = FILTER_KEYS.to_vec();
                    known.extend(["sort", "dir", "per", "page"]);
                    return Err(bad(
                        other,
                        format!(
                            "the node list takes no parameter {other:?}; it takes {}",
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(q)
    }

    /// The store's query for page `page` (from 1).
    pub fn store_query(&self, page: u64) -> NodeQuery {
        NodeQuery {
            filter: self.filter.clone(),
            sort: self.sort,
            descending: self.descending,
            offset: page.saturating_sub(1).saturating_mul(self.per),
            limit: self.per,
        }
    }

    /// The filter's parameters that are set, as `(key, value)`.
    pub fn filter_pairs(&self) -> Vec<(&'static str, String)> {
        let f = &self.filter;
        let mut out = Vec::new();
        if let Some(s) = &f.search {
            out.push(("q", s.clone()));
        }
        if let Some(s) = f.status {
            out.push(("status", s.as_str().to_string()));
        }
        if let Some(r) = &f.role {
            out.push(("role", r.clone()));
        }
        match f.environment {
            Some(InEnvironment::Id(id)) => out.push(("env", id.to_string())),
            Some(InEnvironment::Unassigned) => out.push(("env", "none".to_string())),
            None => {}
        }
        if let Some(o) = f.online {
            out.push(("online", if o { "yes" } else { "no" }.to_string()));
        }
        if let Some(p) = f.power {
            out.push(("power", p.as_str().to_string()));
        }
        out
    }

    /// Every parameter that differs from the default, as `(key, value)`.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = self.filter_pairs();
        let d = ListQuery::default();
        if self.sort != d.sort {
            out.push(("sort", self.sort.as_str().to_string()));
        }
        if self.descending {
            out.push(("dir", "desc".to_string()));
        }
        if self.per != d.per {
            out.push(("per", self.per.to_string()));
        }
        if self.page != 1 {
            out.push(("page", self.page.to_string()));
        }
        out
    }

    /// The Nodes page's link for this list.
    pub fn href(&self) -> String {
        let pairs = self.pairs();
        if pairs.is_empty() {
            return "/nodes".to_string();
        }
        format!("/nodes?{}", encode_pairs(&pairs))
    }

    /// The link after `change` (which usually also resets the page).
    pub fn with(&self, change: impl FnOnce(&mut ListQuery)) -> String {
        let mut q = self.clone();
        change(&mut q);
        q.href()
    }
}

/// `k=v&k=v`, percent-encoded.
pub fn encode_pairs(pairs: &[(&str, String)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap_or_default()
}

/// The pairs of a query string or form body; a malformed one is refused.
pub fn pairs_of(raw: &str) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw)
        .map_err(|e| ApiError::BadRequest(format!("the parameters cannot be read: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<ListQuery, ApiError> {
        ListQuery::parse(&pairs_of(raw).unwrap(), &[])
    }

    #[test]
    fn every_parameter_round_trips_through_its_link() {
        let q = parse(
            "q=r650+a%26b&status=ready&role=compute&env=3&online=no&power=no_bmc&sort=memory\
             &dir=desc&per=500&page=4",
        )
        .unwrap();
        assert_eq!(q.filter.search.as_deref(), Some("r650 a&b"));
        assert_eq!(q.filter.environment, Some(InEnvironment::Id(3)));
        assert_eq!(q.filter.power, Some(Power::NoBmc));
        assert_eq!(
            (q.sort, q.descending, q.per, q.page),
            (SortKey::Memory, true, 500, 4)
        );
        let again = parse(q.href().trim_start_matches("/nodes?")).unwrap();
        assert_eq!(again, q);
        assert_eq!(parse("").unwrap().href(), "/nodes");
        assert_eq!(
            parse("env=none&status=&q=").unwrap().filter,
            NodeFilter {
                environment: Some(InEnvironment::Unassigned),
                ..NodeFilter::default()
            }
        );
    }

    #[test]
    fn a_bad_parameter_is_named() {
        for (raw, starts) in [
            (
                "status=bogus",
                "status: no node status \"bogus\"; the statuses are discover",
            ),
            ("role=a%20b", "role: \"a b\" is not a role name"),
            ("env=0", "env: \"0\" is neither an environment id nor none"),
            ("online=maybe", "online: \"maybe\" is neither yes nor no"),
            ("power=sideways", "power: no power state \"sideways\""),
            ("sort=colour", "sort: no column \"colour\""),
            ("dir=up", "dir: \"up\" is neither asc nor desc"),
            ("per=7", "per: \"7\": a page shows 50, 100, 500 nodes"),
            ("page=0", "page: \"0\" is not a page number"),
            (
                "colour=red",
                "colour: the node list takes no parameter \"colour\"",
            ),
        ] {
            let e = parse(raw).unwrap_err().to_string();
            assert!(e.starts_with(starts), "{raw}: {e}");
        }
        let long = format!("q={}", "x".repeat(201));
        assert!(
            parse(&long)
                .unwrap_err()
                .to_string()
                .starts_with("q: a search has at most")
        );
    }
}
