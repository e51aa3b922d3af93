//! A node's page: where it stands (environment, roles and pending roles, status with its error
//! type, its current or last step and last error; also a fragment, `/nodes/{id}/state`, that
//! `live.js` swaps in), its hardware, addresses (its agent's, its DHCP leases, and the ones it
//! holds on each of its environment's networks), BMC and power (with the power buttons and the
//! BMC form), the master's BMC steps on it, the deployments it took part in with its runs there
//! ([`DEPLOYMENTS_SHOWN`] a page, older ones through `?deployments_page=N`, plain links), what
//! its agents reported (the runs' output tails, newest first), its activity, and its delete
//! and approve actions.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::access::Caller;
use crate::http::pages::confirm;
use crate::http::pages::nodes::power_action;
use crate::http::pages::notice::{self, Notice};
use crate::http::pages::runs::{self, RunRow};
use crate::http::pages::views::{HistoryRow, Me, NodeRow, human_bytes};
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::model::Node;

#[derive(Template, WebTemplate)]
#[template(path = "node.html")]
pub struct NodePage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    row: NodeRow,
    node: Node,
    created: String,
    memory: String,
    disks: Vec<(String, String, String, String)>,
    bmc: Option<crate::store::StoredBmc>,
    /// The node's BMC steps, newest first, with when each finished.
    bmc_runs: Vec<(crate::store::MasterRun, String)>,
    state: StateView,
    leases: Vec<LeaseRow>,
    /// Its addresses on its environment's networks.
    addresses: Vec<AddressRow>,
    deployments: Vec<NodeDeployment>,
    /// Which of its deployments the page shows: `1–5 of 12`; empty when all fit one page.
    deployments_range: String,
    /// The pages of newer and older deployments, when there are.
    newer: Option<String>,
    older: Option<String>,
    log: Vec<LogEntry>,
    activity: Vec<HistoryRow>,
    /// How runs are numbered ([`runs::EXPLAIN`]).
    numbering: &'static str,
}

/// Deployments a node's page shows at a time, newest first.
pub const DEPLOYMENTS_SHOWN: u32 = 5;
/// The page's parameter: which page of its deployments (from 1, the newest).
pub const DEPLOYMENTS_PAGE: &str = "deployments_page";
/// Outputs its log tail shows.
pub const LOG_SHOWN: u32 = 10;
/// Activity entries it shows.
pub const ACTIVITY_SHOWN: u32 = 20;

/// Where a node stands (`web/templates/node/state.html`).
pub struct StateView {
    pub node_id: i64,
    /// Its environment: (id, name).
    pub env: Option<(i64, String)>,
    pub roles: String,
    /// Assigned, not deployed yet (Nailgun's pending roles).
    pub pending_roles: String,
    pub pending_deletion: bool,
    pub status: &'static str,
    pub badge: &'static str,
    pub error_type: String,
    /// `Running`, `Last step` or `Next step`, and the run.
    pub step: Option<(&'static str, RunRow)>,
    /// Its newest failed run: the run and when it failed.
    pub last_error: Option<(RunRow, String)>,
    pub online: bool,
    pub last_seen: String,
    pub last_seen_utc: String,
}

/// One DHCP lease of the node's MACs.
pub struct LeaseRow {
    pub ip: String,
    pub mac: String,
    pub state: &'static str,
    /// `in 40 min` / `expired 2 h ago`, and the time.
    pub expires: String,
    pub expires_utc: String,
    pub current: bool,
}

/// An address the node holds on one of its environment's networks.
pub struct AddressRow {
    pub network: String,
    /// `192.168.0.3/24`: the address with its network's prefix length.
    pub ip: String,
    pub cidr: String,
    /// `VLAN 101`, `untagged`.
    pub vlan: String,
    pub gateway: String,
}

impl AddressRow {
    fn new(net: &crate::engine::network::model::NetworkGroup, ip: &str) -> AddressRow {
        let cidr = net.cidr.clone().unwrap_or_default();
        AddressRow {
            network: net.name.clone(),
            ip: match cidr.split_once('/') {
                Some((_, len)) if !ip.contains('/') => format!("{ip}/{len}"),
                _ => ip.to_string(),
            },
            vlan: net
                .vlan_start
                .map_or_else(|| "untagged".to_string(), |v| format!("VLAN {v}")),
            gateway: net.gateway.clone().unwrap_or_default(),
            cidr,
        }
    }
}

/// The page of a node's deployments `query` asks for (`deployments_page`, from 1); other
/// parameters are left to others. A value that is no page number is refused, naming it.
fn deployments_page(query: &str) -> Result<u64, ApiError> {
    let pairs = crate::http::pages::node_query::pairs_of(query)?;
    let mut page = 1;
    for (k, v) in pairs {
        if k == DEPLOYMENTS_PAGE {
            let v = v.trim();
            page = v
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=1_000_000).contains(n))
                .ok_or_else(|| {
                    ApiError::field(
                        "query",
                        DEPLOYMENTS_PAGE,
                        format!("{v:?} is not a page number"),
                    )
                })?;
        }
    }
    Ok(page)
}

/// A deployment the node took part in, with its runs there.
pub struct NodeDeployment {
    pub id: i64,
    pub kind: String,
    pub status: String,
    pub badge: &'static str,
    pub started: String,
    pub started_utc: String,
    pub progress: String,
    pub rows: Vec<RunRow>,
}

/// One output the node's agent reported.
pub struct LogEntry {
    pub when: String,
    pub when_utc: String,
    pub name: String,
    pub deployment: i64,
    pub run: i64,
    pub status: String,
    pub badge: &'static str,
    pub output: String,
}

/// The node's state part, alone: `GET /nodes/{id}/state`.
#[derive(Template)]
#[template(path = "node/state.html")]
pub struct StateFragment {
    state: StateView,
}

/// What the state part is made of, read in one transaction.
struct StateData {
    node: Node,
    env_name: Option<String>,
    /// The newest deployment it took part in, and its runs there.
    newest: Option<(crate::store::Deployment, Vec<crate::store::RunLine>)>,
    last_failed: Option<crate::store::RunLine>,
}

fn read_state(r: &crate::store::ReadTxn<'_>, id: i64) -> crate::store::Result<Option<StateData>> {
    let Some(node) = r.node(id)? else {
        return Ok(None);
    };
    let env_name = match node.cluster_id {
        Some(c) => r.cluster(c)?.map(|c| c.name),
        None => None,
    };
    let newest = match r.node_deployments(id, 1, 0)?.into_iter().next() {
        Some(d) => {
            let lines = r.node_run_lines(d.id, id)?;
            Some((d, lines))
        }
        None => None,
    };
    Ok(Some(StateData {
        node,
        env_name,
        newest,
        last_failed: r.last_failed_run(id)?,
    }))
}

fn state_view(d: &StateData, now: i64) -> StateView {
    let n = &d.node;
    let pending: Vec<&str> = n
        .roles
        .iter()
        .filter(|r| !n.deployed_roles.contains(r))
        .map(String::as_str)
        .collect();
    let step = d.newest.as_ref().and_then(|(_, lines)| {
        let refs: Vec<&crate::store::RunLine> = lines.iter().collect();
        let numbers = runs::numbers(&refs);
        let pick = |label: &'static str, i: usize| {
            Some((label, RunRow::new(&lines[i], numbers[i].clone(), None, now)))
        };
        if let Some(i) = lines.iter().position(|l| l.status == "running") {
            return pick("Running", i);
        }
        let last = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.finished_at.is_some() && l.started_at.is_some())
            .max_by_key(|(_, l)| (l.finished_at, l.seq))
            .map(|(i, _)| i);
        match last {
            Some(i) => pick("Last step", i),
            None => lines
                .iter()
                .position(|l| l.status == "pending")
                .and_then(|i| pick("Next step", i)),
        }
    });
    let last_error = d.last_failed.as_ref().map(|l| {
        let when = l
            .finished_at
            .map(|t| crate::http::pages::views::ago(t, now))
            .unwrap_or_default();
        (RunRow::new(l, String::new(), None, now), when)
    });
    StateView {
        node_id: n.id,
        env: n.cluster_id.map(|c| {
            (
                c,
                d.env_name
                    .clone()
                    .unwrap_or_else(|| format!("environment {c}")),
            )
        }),
        roles: n.roles.join(", "),
        pending_roles: pending.join(", "),
        pending_deletion: n.pending_deletion,
        status: n.status.as_str(),
        badge: crate::http::pages::views::badge(n.status),
        error_type: n.error_type.clone().unwrap_or_default(),
        step,
        last_error,
        online: n.online(now),
        last_seen: crate::http::pages::views::ago(n.last_seen_at, now),
        last_seen_utc: crate::http::pages::views::utc(n.last_seen_at),
    }
}

/// `GET /nodes/{id}/state`: where the node stands, as its page shows it.
pub async fn state(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let data = state
        .store(move |s| s.read(|r| read_state(r, id)))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("node {id} not found")))?;
    let view = state_view(&data, crate::clock::now());
    let body = StateFragment { state: view }
        .render()
        .map_err(|e| ApiError::Internal(format!("fragment failed to render: {e}")))?;
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(body))
}

/// `POST /nodes/{id}/power`: one node's power button; back to its page with what the BMC said.
pub async fn power_node(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let pairs = crate::http::access::url_form(&body);
    let action = pairs
        .iter()
        .find(|(k, _)| k == "action")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    let act = power_action(action)?;
    if act != crate::bmc::actions::Act::On && !confirm::given(&pairs) {
        let name = node_name(&state, id).await?;
        let label = crate::http::pages::bulk::power_label(act);
        let to = format!("/nodes/{id}/power");
        return Ok(confirm::page(
            Me::of(&caller),
            "nodes",
            confirm::Ask {
                question: format!("{label} {name}?"),
                detail: "Whatever the node is running is interrupted.".to_string(),
                action: &to,
                button: format!("{label} {name}"),
                cancel: format!("/nodes/{id}"),
                danger: true,
            },
            &pairs,
        )?);
    }
    let user = caller.0.user.clone();
    let r = crate::http::api::bmc::power_nodes(&state, vec![id], act, user).await?;
    let notice = match r.first() {
        Some(r) => match &r.error {
            Some(e) => Notice::error(format!("Power {} failed: {e}", r.action)),
            None => Notice::ok(format!("Power {} done.", r.action)),
        },
        None => Notice::error("No power action was taken."),
    };
    Ok(notice::redirect(&state, &format!("/nodes/{id}"), notice))
}

/// The BMC form.
#[derive(Debug, serde::Deserialize)]
pub struct BmcForm {
    driver: String,
    address: String,
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    verify_tls: Option<String>,
}

/// `POST /nodes/{id}/bmc`: set the node's BMC (an empty password keeps the stored one).
pub async fn set_bmc(
    state: web::Data<AppState>,
    path: web::Path<String>,
    form: web::Form<BmcForm>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let f = form.into_inner();
    let mut body = serde_json::json!({"driver": f.driver, "address": f.address,
        "username": f.username, "verify_tls": f.verify_tls.is_some()});
    if !f.password.is_empty() {
        body["password"] = f.password.into();
    }
    let result = crate::http::api::bmc::set_bmc(&state, id, body).await;
    Ok(notice::after(
        &state,
        &format!("/nodes/{id}#bmc"),
        result,
        |_| "BMC saved; its power is read within seconds.".to_string(),
        "BMC not saved",
    ))
}

/// Everything else the page shows, read in one transaction.
struct PageData {
    state: StateData,
    bmc: Option<crate::store::StoredBmc>,
    bmc_runs: Vec<crate::store::MasterRun>,
    leases: Vec<crate::dhcp::lease::Lease>,
    addresses: Vec<(crate::engine::network::model::NetworkGroup, String)>,
    deployments: Vec<(crate::store::Deployment, Vec<crate::store::RunLine>)>,
    /// How many deployments it took part in, and the page shown (from 1).
    deployment_count: u64,
    deployments_page: u64,
    outputs: std::collections::HashMap<i64, String>,
    log: Vec<(crate::store::RunLine, String)>,
    activity: Vec<crate::store::HistoryEntry>,
}

/// `GET /nodes/{id}[?deployments_page=N]`
pub async fn node(
    state: web::Data<AppState>,
    me: Me,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<NodePage, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let asked = deployments_page(req.query_string())?;
    let data = state
        .store(move |s| {
            s.read(|tx| {
                let Some(st) = read_state(tx, id)? else {
                    return Ok(None);
                };
                let macs: Vec<&crate::model::Mac> = st
                    .node
                    .inventory
                    .interfaces
                    .iter()
                    .map(|i| &i.mac)
                    .collect();
                let leases = tx.leases_of(&macs)?;
                let addresses = match st.node.cluster_id {
                    Some(c) => tx.node_addresses(c, id)?,
                    None => Vec::new(),
                };
                // A page past the last shows the last (a link kept after deployments went).
                let deployment_count = tx.node_deployment_count(id)?;
                let pages = deployment_count
                    .div_ceil(u64::from(DEPLOYMENTS_SHOWN))
                    .max(1);
                let page = asked.min(pages);
                let skip = (page - 1) * u64::from(DEPLOYMENTS_SHOWN);
                let mut deployments = Vec::new();
                for d in tx.node_deployments(id, DEPLOYMENTS_SHOWN, skip)? {
                    let lines = tx.node_run_lines(d.id, id)?;
                    deployments.push((d, lines));
                }
                let ids: Vec<i64> = deployments
                    .iter()
                    .flat_map(|(_, lines)| lines.iter().map(|l| l.id))
                    .collect();
                Ok(Some(PageData {
                    bmc: tx.bmc(id)?,
                    bmc_runs: tx.master_runs_of(id, 20)?,
                    leases,
                    addresses,
                    deployments,
                    deployment_count,
                    deployments_page: page,
                    outputs: tx.run_outputs(&ids)?,
                    log: tx.node_outputs(id, LOG_SHOWN)?,
                    activity: tx.node_history(id, ACTIVITY_SHOWN)?,
                    state: st,
                }))
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("node {id} not found")))?;
    let now = crate::clock::now();
    let node = data.state.node.clone();
    let view = state_view(&data.state, now);
    let utc = crate::http::pages::views::utc;
    let ago = crate::http::pages::views::ago;
    let (deployments_range, newer, older) = deployment_pages(
        id,
        data.deployments_page,
        data.deployments.len(),
        data.deployment_count,
    );
    Ok(NodePage {
        addresses: data
            .addresses
            .iter()
            .map(|(net, ip)| AddressRow::new(net, ip))
            .collect(),
        deployments_range,
        newer,
        older,
        nav: "nodes",
        version: VERSION,
        me,
        row: NodeRow::new(&node).with_power(data.bmc.as_ref()),
        bmc: data.bmc,
        bmc_runs: data
            .bmc_runs
            .into_iter()
            .map(|r| {
                let finished = r.finished_at.map_or_else(String::new, utc);
                (r, finished)
            })
            .collect(),
        created: utc(node.created_at),
        memory: human_bytes(node.inventory.memory_bytes),
        disks: node
            .inventory
            .disks
            .iter()
            .map(|d| {
                (
                    d.name.clone(),
                    human_bytes(d.size_bytes),
                    d.model.clone().unwrap_or_default(),
                    d.serial.clone().unwrap_or_default(),
                )
            })
            .collect(),
        state: view,
        leases: data
            .leases
            .iter()
            .map(|l| {
                let current =
                    l.state == crate::dhcp::lease::LeaseState::Bound && l.expires_at > now;
                LeaseRow {
                    ip: l.ip.to_string(),
                    mac: l.mac.to_string(),
                    state: l.state.as_str(),
                    expires: if l.expires_at > now {
                        format!(
                            "in {}",
                            crate::http::pages::views::duration(l.expires_at - now)
                        )
                    } else {
                        format!("expired {}", ago(l.expires_at, now))
                    },
                    expires_utc: utc(l.expires_at),
                    current,
                }
            })
            .collect(),
        deployments: data
            .deployments
            .iter()
            .map(|(d, lines)| {
                let refs: Vec<&crate::store::RunLine> = lines.iter().collect();
                let numbers = runs::numbers(&refs);
                let c = crate::store::RunCounts::of_lines(lines);
                NodeDeployment {
                    id: d.id,
                    kind: format!("{} · {}", d.graph_type, d.name),
                    status: d.status.clone(),
                    badge: runs::deployment_badge(&d.status),
                    started: ago(d.created_at, now),
                    started_utc: utc(d.created_at),
                    progress: format!("{} of {} steps done", c.done(), c.total),
                    rows: lines
                        .iter()
                        .zip(numbers)
                        .map(|(l, n)| {
                            RunRow::new(l, n, data.outputs.get(&l.id).map(String::as_str), now)
                        })
                        .collect(),
                }
            })
            .collect(),
        log: data
            .log
            .iter()
            .map(|(l, out)| {
                let at = l.finished_at.or(l.started_at).unwrap_or_default();
                LogEntry {
                    when: ago(at, now),
                    when_utc: utc(at),
                    name: l.name(),
                    deployment: l.deployment,
                    run: l.id,
                    status: l.status.clone(),
                    badge: runs::badge(&l.status),
                    output: out.trim_end().to_string(),
                }
            })
            .collect(),
        activity: data
            .activity
            .iter()
            .map(|e| HistoryRow::new(e, now))
            .collect(),
        numbering: runs::EXPLAIN,
        node,
    })
}

/// What the deployments part says of its page `page` (from 1) showing `shown` of `total`:
/// the range (empty when every one is shown), and the links to the newer and older pages.
fn deployment_pages(
    id: i64,
    page: u64,
    shown: usize,
    total: u64,
) -> (String, Option<String>, Option<String>) {
    let per = u64::from(DEPLOYMENTS_SHOWN);
    let first = (page - 1) * per;
    let last = first + shown as u64;
    let link = |p: u64| {
        if p == 1 {
            format!("/nodes/{id}#deployments")
        } else {
            format!("/nodes/{id}?{DEPLOYMENTS_PAGE}={p}#deployments")
        }
    };
    if total <= per && page == 1 {
        return (String::new(), None, None);
    }
    let range = if shown == 0 {
        format!("none of {total}")
    } else {
        format!("{}–{last} of {total}", first + 1)
    };
    (
        range,
        (page > 1).then(|| link(page - 1)),
        (last < total).then(|| link(page + 1)),
    )
}

/// `POST /nodes/{id}/delete`: delete, then back to the node list.
pub async fn delete_node(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let pairs = crate::http::access::url_form(&body);
    if !confirm::given(&pairs) {
        let name = node_name(&state, id).await?;
        let to = format!("/nodes/{id}/delete");
        return Ok(confirm::page(
            me,
            "nodes",
            confirm::Ask {
                question: format!("Delete {name}?"),
                detail: "It is forgotten until it boots from the network again; its id is \
                         never given to another node."
                    .to_string(),
                action: &to,
                button: format!("Delete {name}"),
                cancel: format!("/nodes/{id}"),
                danger: true,
            },
            &pairs,
        )?);
    }
    let result = crate::http::api::nodes::delete_node(&state, id).await;
    let back = if result.is_ok() {
        "/nodes".to_string()
    } else {
        format!("/nodes/{id}")
    };
    Ok(notice::after(
        &state,
        &back,
        result,
        |n| format!("Node {} ({}) deleted.", n.name, n.mac),
        "Not deleted",
    ))
}

/// `POST /nodes/{id}/name` (`name`): rename it, with the API's rules (`PUT
/// /api/v1/nodes/{id}`: 1 to 100 characters, not blank); back to its page saying so.
pub async fn rename_node(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let pairs = crate::http::access::url_form(&body);
    let before = node_name(&state, id).await?;
    let renamed = async {
        let name = pairs
            .iter()
            .find(|(k, _)| k == "name")
            .map(|(_, v)| v.trim())
            .ok_or_else(|| ApiError::field("form", "name", "give the node's new name"))?;
        let node =
            crate::http::api::nodes::edit(&state, id, &serde_json::json!({ "name": name })).await?;
        Ok((before, node.name))
    }
    .await;
    Ok(notice::after(
        &state,
        &format!("/nodes/{id}"),
        renamed,
        |(before, after)| {
            if before == after {
                format!("{after} keeps its name.")
            } else {
                format!("{before} renamed {after}.")
            }
        },
        "Not renamed",
    ))
}

/// Node `id`'s name, or not found.
async fn node_name(state: &AppState, id: crate::model::NodeId) -> Result<String, ApiError> {
    Ok(state
        .store(move |s| s.read(|r| r.existing_node(id)))
        .await?
        .name)
}

/// `POST /nodes/{id}/approve`: approve, then back to the node.
pub async fn approve_node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let result = crate::http::api::nodes::approve_node(&state, id).await;
    Ok(notice::after(
        &state,
        &format!("/nodes/{id}"),
        result,
        |_| "Approved: the node gets its boot token at its next network boot.".to_string(),
        "Not approved",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deployments_part_pages_with_plain_links() {
        assert_eq!(deployment_pages(3, 1, 4, 4), (String::new(), None, None));
        assert_eq!(deployment_pages(3, 1, 5, 5), (String::new(), None, None));
        assert_eq!(
            deployment_pages(3, 1, 5, 12),
            (
                "1–5 of 12".to_string(),
                None,
                Some("/nodes/3?deployments_page=2#deployments".to_string())
            )
        );
        assert_eq!(
            deployment_pages(3, 2, 5, 12),
            (
                "6–10 of 12".to_string(),
                Some("/nodes/3#deployments".to_string()),
                Some("/nodes/3?deployments_page=3#deployments".to_string())
            )
        );
        assert_eq!(
            deployment_pages(3, 3, 2, 12),
            (
                "11–12 of 12".to_string(),
                Some("/nodes/3?deployments_page=2#deployments".to_string()),
                None
            )
        );
    }

    #[test]
    fn the_page_parameter_is_checked() {
        assert_eq!(deployments_page("").unwrap(), 1);
        assert_eq!(deployments_page("deployments_page=4").unwrap(), 4);
        assert_eq!(deployments_page("other=x&deployments_page=2").unwrap(), 2);
        for bad in [
            "deployments_page=0",
            "deployments_page=x",
            "deployments_page=-1",
        ] {
            assert!(deployments_page(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_address_carries_its_prefix_and_vlan() {
        let net = crate::engine::network::model::NetworkGroup {
            id: 1,
            name: "management".into(),
            release: Some(1),
            cidr: Some("192.168.0.0/24".into()),
            gateway: None,
            vlan_start: Some(101),
            ip_ranges: Vec::new(),
            meta: serde_json::Value::Null,
            group_id: Some(1),
        };
        let a = AddressRow::new(&net, "192.168.0.3");
        assert_eq!(
            (a.ip.as_str(), a.cidr.as_str(), a.vlan.as_str()),
            ("192.168.0.3/24", "192.168.0.0/24", "VLAN 101")
        );
        let untagged = crate::engine::network::model::NetworkGroup {
            vlan_start: None,
            cidr: None,
            ..net
        };
        let a = AddressRow::new(&untagged, "10.0.0.9");
        assert_eq!((a.ip.as_str(), a.vlan.as_str()), ("10.0.0.9", "untagged"));
    }
}
