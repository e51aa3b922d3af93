//! Bulk actions on nodes: the ticked ones (`nodes=ID`, repeated) or every node a filter
//! selects (`all=1` with the filter's parameters). The Nodes page's toolbar is a GET form that
//! opens a review page (`GET /nodes/bulk`): what will be done to how many nodes, their names,
//! what will be refused and why, and for an assignment the environment's roles picker; its
//! form posts (`POST /nodes/bulk`), the action runs through the same functions the API's
//! handlers call, and the list comes back with a notice saying what was done and listing each
//! node that was not, with why. Works without JavaScript; the review is the confirmation.
//!
//! Actions (`do`): `assign` (into `to_env`, with `roles`), `unassign`, `delete`, `power`
//! (with `act`: `on`, `off`, `soft_off`, `reboot`, `pxe`, `disk`).

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::bmc::actions::Act;
use crate::http::access::Caller;
use crate::http::pages::node_query::{FILTER_KEYS, filter_of, pairs_of};
use crate::http::pages::notice::{self, Notice};
use crate::http::pages::roles::{RoleChoice, role_choices};
use crate::http::pages::views::{Me, thousands};
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::model::NodeId;
use crate::store::{ListedNode, NodeFilter, NodeQuery, Power, SortKey};

/// The most nodes a review page names (the rest are counted).
const NAMED: usize = 50;

/// The most node names a notice lists.
const NOTICE_NAMES: usize = 8;

/// What a bulk action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Assign,
    Unassign,
    Delete,
    Power(Act),
}

impl Action {
    fn verb(self) -> String {
        match self {
            Action::Assign => "Assign".into(),
            Action::Unassign => "Remove from its environment".into(),
            Action::Delete => "Delete".into(),
            Action::Power(a) => power_label(a).into(),
        }
    }

    fn destructive(self) -> bool {
        matches!(
            self,
            Action::Unassign
                | Action::Delete
                | Action::Power(Act::Off | Act::SoftOff | Act::Reboot | Act::Pxe | Act::Disk)
        )
    }
}

/// How a person reads a power action.
pub fn power_label(a: Act) -> &'static str {
    match a {
        Act::On => "Power on",
        Act::Off => "Power off",
        Act::SoftOff => "Soft power off",
        Act::Reboot => "Power-cycle",
        Act::Pxe => "Boot from the network once",
        Act::Disk => "Boot from disk once",
    }
}

/// A bulk request, from the review's query string or the confirmation's form.
#[derive(Debug, Clone)]
pub struct Request {
    pub action: Action,
    /// The nodes: `ids` for the ticked ones, or the filter's parts.
    pub selection: NodeFilter,
    pub to_env: Option<i64>,
    pub roles: Vec<String>,
    /// Where to go back to: a local path of the dashboard.
    pub back: String,
    /// What the confirmation form carries again (all but `csrf` and `roles`).
    pub carried: Vec<(String, String)>,
}

/// `raw` if it is a path of this dashboard (one leading `/`, no scheme or host), else `/nodes`.
pub fn local_path(raw: &str) -> String {
    let ok = raw.starts_with('/')
        && !raw.starts_with("//")
        && raw.len() <= 2000
        && !raw.contains('\\')
        && !raw.chars().any(char::is_control);
    if ok {
        raw.to_string()
    } else {
        "/nodes".to_string()
    }
}

fn bad(key: &str, message: String) -> ApiError {
    ApiError::BadRequest(format!("{key}: {message}"))
}

impl Request {
    pub fn parse(pairs: &[(String, String)]) -> Result<Request, ApiError> {
        let mut action = None;
        let mut act = None;
        let mut ids: Vec<NodeId> = Vec::new();
        let mut all = false;
        let mut to_env = None;
        let mut roles: Vec<String> = Vec::new();
        let mut back = "/nodes".to_string();
        let mut carried = Vec::new();
        for (k, v) in pairs {
            let v = v.trim();
            if !matches!(k.as_str(), "csrf" | "roles" | "confirmed") {
                carried.push((k.clone(), v.to_string()));
            }
            match k.as_str() {
                "do" => action = Some(v.to_string()),
                "act" => act = Some(v.to_string()),
                "nodes" => ids.push(
                    v.parse::<i64>()
                        .ok()
                        .filter(|i| *i > 0)
                        .ok_or_else(|| bad("nodes", format!("{v:?} is not a node id")))?,
                ),
                "all" => all = v == "1",
                "to_env" if !v.is_empty() => {
                    to_env =
                        Some(v.parse::<i64>().ok().filter(|i| *i > 0).ok_or_else(|| {
                            bad("to_env", format!("{v:?} is not an environment id"))
                        })?);
                }
                "roles" if !v.is_empty() => {
                    if !roles.iter().any(|r| r == v) {
                        roles.push(v.to_string());
                    }
                }
                "back" => back = local_path(v),
                "csrf" | "confirmed" | "to_env" | "roles" => {}
                k if FILTER_KEYS.contains(&k) => {}
                // The list's own order and page, carried back.
                "sort" | "dir" | "per" | "page" => {}
                other => {
                    return Err(bad(
                        other,
                        "a bulk action takes do, act, nodes, all, to_env, roles, back and the \
                         list's filter"
                            .to_string(),
                    ));
                }
            }
        }
        let action = match action.as_deref() {
            Some("assign") => Action::Assign,
            Some("unassign") => Action::Unassign,
            Some("delete") => Action::Delete,
            Some("power") => {
                let a = act.unwrap_or_default();
                Action::Power(Act::parse(&a).ok_or_else(|| {
                    bad(
                        "act",
                        format!(
                            "no power action {a:?}; the actions are {}",
                            Act::ALL.map(Act::as_str).join(", ")
                        ),
                    )
                })?)
            }
            Some(other) => {
                return Err(bad(
                    "do",
                    format!(
                        "no bulk action {other:?}; the actions are assign, unassign, delete, power"
                    ),
                ));
            }
            None => return Err(bad("do", "say which action".to_string())),
        };
        let selection = if all {
            filter_of(pairs)?
        } else if ids.is_empty() {
            return Err(ApiError::BadRequest(
                "tick at least one node, or choose all the nodes the filter selects".to_string(),
            ));
        } else {
            ids.sort_unstable();
            ids.dedup();
            NodeFilter {
                ids: Some(ids),
                ..NodeFilter::default()
            }
        };
        if action == Action::Assign && to_env.is_none() {
            return Err(bad(
                "to_env",
                "choose the environment to assign the nodes to".to_string(),
            ));
        }
        Ok(Request {
            action,
            selection,
            to_env,
            roles,
            back,
            carried,
        })
    }
}

/// Every node the request selects, as the list shows them, by id.
async fn selected(state: &AppState, selection: &NodeFilter) -> Result<Vec<ListedNode>, ApiError> {
    let q = NodeQuery {
        filter: selection.clone(),
        sort: SortKey::Id,
        descending: false,
        offset: 0,
        limit: u64::MAX >> 1,
    };
    let now = crate::clock::now();
    Ok(state
        .store(move |s| s.read(|r| r.node_list(&q, now)))
        .await?
        .nodes)
}

/// Why `n` will not take `action`, if it will not.
fn refusal(action: Action, n: &ListedNode, to_env: Option<i64>) -> Option<String> {
    match action {
        Action::Delete => n
            .cluster
            .as_ref()
            .map(|(_, env)| format!("in environment {env}: remove it from there first")),
        Action::Unassign => n.cluster.is_none().then(|| "in no environment".to_string()),
        Action::Assign => n
            .cluster
            .as_ref()
            .filter(|(id, _)| Some(*id) != to_env)
            .map(|(_, env)| format!("in environment {env}: remove it from there first")),
        Action::Power(_) => match n.power {
            Power::NoBmc => Some("no BMC".to_string()),
            Power::NoCredentials => Some("its BMC has no credentials".to_string()),
            _ => None,
        },
    }
}

/// One node of the review.
pub struct Named {
    id: i64,
    name: String,
    env: String,
    refused: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "nodes_bulk.html")]
pub struct BulkPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    title: String,
    button: String,
    destructive: bool,
    count: usize,
    refused: usize,
    named: Vec<Named>,
    more: usize,
    carried: Vec<(String, String)>,
    back: String,
    assign: bool,
    env_name: String,
    roles: Vec<RoleChoice>,
}

/// `GET /nodes/bulk?do=…`: the review of a bulk action, its confirmation form. A request that
/// cannot be reviewed goes back to the list saying why.
pub async fn review(
    state: web::Data<AppState>,
    me: Me,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    let pairs = pairs_of(req.query_string())?;
    let request = match parsed(&pairs) {
        Ok(r) => r,
        Err((back, e)) => {
            return Ok(notice::redirect(
                &state,
                &back,
                Notice::error(format!("Nothing done: {e}")),
            ));
        }
    };
    let nodes = selected(&state, &request.selection).await?;
    if nodes.is_empty() {
        return Ok(notice::redirect(
            &state,
            &request.back,
            Notice::error("Nothing done: no node is selected (any more)."),
        ));
    }
    let mut env_name = String::new();
    let mut roles = Vec::new();
    if let (Action::Assign, Some(env)) = (request.action, request.to_env) {
        let found = state
            .store(move |s| s.read(|r| r.cluster(env)))
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("environment {env} not found")))?;
        env_name = found.name;
        // Nodes already there with one set of roles: those are ticked (editing their roles).
        let current: Vec<&Vec<String>> = nodes
            .iter()
            .filter(|n| n.cluster.as_ref().map(|c| c.0) == Some(env))
            .map(|n| &n.roles)
            .collect();
        let checked = if current.len() == nodes.len() && current.windows(2).all(|w| w[0] == w[1]) {
            current.first().map(|r| r.to_vec()).unwrap_or_default()
        } else {
            request.roles.clone()
        };
        roles = role_choices(&state, env, &checked).await?;
    }
    let count = nodes.len();
    let refused = nodes
        .iter()
        .filter(|n| refusal(request.action, n, request.to_env).is_some())
        .count();
    let noun = if count == 1 {
        "1 node".to_string()
    } else {
        format!("{} nodes", thousands(count as u64))
    };
    let title = match request.action {
        Action::Assign => format!("Assign {noun} to {env_name}"),
        Action::Unassign => format!("Remove {noun} from their environments?"),
        Action::Delete => format!("Delete {noun}?"),
        Action::Power(a) => format!("{} {noun}?", power_label(a)),
    };
    let page = BulkPage {
        nav: "nodes",
        version: VERSION,
        me,
        button: match request.action {
            Action::Assign => format!("Assign {noun}"),
            a => format!("{} {noun}", a.verb()),
        },
        title,
        destructive: request.action.destructive(),
        count,
        refused,
        more: count.saturating_sub(NAMED),
        named: nodes
            .iter()
            .take(NAMED)
            .map(|n| Named {
                id: n.id,
                name: n.name.clone(),
                env: n.cluster.as_ref().map(|c| c.1.clone()).unwrap_or_default(),
                refused: refusal(request.action, n, request.to_env),
            })
            .collect(),
        carried: request.carried,
        back: request.back,
        assign: request.action == Action::Assign,
        env_name,
        roles,
    };
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(
            page.render()
                .map_err(|e| ApiError::Internal(e.to_string()))?,
        ))
}

/// `a, b, c and 4 more`.
fn some_names(names: &[String]) -> String {
    let mut s = names
        .iter()
        .take(NOTICE_NAMES)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NOTICE_NAMES {
        s.push_str(&format!(" and {} more", names.len() - NOTICE_NAMES));
    }
    s
}

/// What a bulk action did: done, and each refused node's name with why.
struct Outcome {
    done: Vec<String>,
    refused: Vec<(String, String)>,
}

impl Outcome {
    fn notice(&self, what: &str) -> Notice {
        let mut text = format!("{what}: {} done", thousands(self.done.len() as u64));
        if !self.done.is_empty() {
            text.push_str(&format!(" ({})", some_names(&self.done)));
        }
        text.push('.');
        if self.refused.is_empty() {
            return Notice::ok(text);
        }
        text.push_str(&format!(" {} not:", thousands(self.refused.len() as u64)));
        for (name, why) in self.refused.iter().take(NOTICE_NAMES) {
            text.push_str(&format!("\n{name}: {why}"));
        }
        if self.refused.len() > NOTICE_NAMES {
            text.push_str(&format!("\nand {} more", self.refused.len() - NOTICE_NAMES));
        }
        if self.done.is_empty() {
            Notice::error(text)
        } else {
            Notice::ok(text)
        }
    }
}

/// The request `pairs` make, or where to go back to (a local path, `/nodes` by default) and
/// why there is none.
fn parsed(pairs: &[(String, String)]) -> Result<Request, (String, ApiError)> {
    Request::parse(pairs).map_err(|e| {
        let back = pairs
            .iter()
            .find(|(k, _)| k == "back")
            .map_or_else(|| "/nodes".to_string(), |(_, v)| local_path(v));
        (back, e)
    })
}

/// `POST /nodes/bulk`: run a reviewed bulk action; back to the list with what it did.
pub async fn act(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let pairs = crate::http::access::url_form(&body);
    let request = match parsed(&pairs) {
        Ok(r) => r,
        Err((back, e)) => {
            return Ok(notice::redirect(
                &state,
                &back,
                Notice::error(format!("Nothing done: {e}")),
            ));
        }
    };
    if !crate::http::pages::confirm::given(&pairs) {
        // Not from the review page: the review first, with what was asked.
        let query = serde_urlencoded::to_string(&request.carried).unwrap_or_default();
        return Ok(HttpResponse::SeeOther()
            .insert_header((
                actix_web::http::header::LOCATION,
                format!("/nodes/bulk?{query}"),
            ))
            .finish());
    }
    let nodes = selected(&state, &request.selection).await?;
    let name_of = |id: NodeId| {
        nodes
            .iter()
            .find(|n| n.id == id)
            .map_or_else(|| format!("node {id}"), |n| n.name.clone())
    };
    let (take, mut refused): (Vec<&ListedNode>, Vec<&ListedNode>) = nodes
        .iter()
        .partition(|n| refusal(request.action, n, request.to_env).is_none());
    let mut out = Outcome {
        done: Vec::new(),
        refused: refused
            .drain(..)
            .map(|n| {
                (
                    n.name.clone(),
                    refusal(request.action, n, request.to_env).unwrap_or_default(),
                )
            })
            .collect(),
    };
    let ids: Vec<NodeId> = take.iter().map(|n| n.id).collect();
    let what = match request.action {
        Action::Assign => {
            let env = request.to_env.unwrap_or_default();
            let nodes = take
                .iter()
                .map(|n| (format!("{} roles", n.name), n.id, request.roles.clone()))
                .collect();
            let assigned = if request.roles.is_empty() {
                Err(ApiError::BadRequest("tick at least one role".to_string()))
            } else {
                crate::http::api::environments::assign_nodes(&state, env, nodes).await
            };
            if let Err(e) = assigned {
                return Ok(notice::redirect(
                    &state,
                    &request.back,
                    Notice::error(format!("Not assigned: {e}")),
                ));
            }
            out.done = take.iter().map(|n| n.name.clone()).collect();
            format!("Assigned as {}", request.roles.join(", "))
        }
        Action::Unassign => {
            for id in ids {
                let now = crate::clock::now();
                match state
                    .store(move |s| s.write(|tx| tx.unassign_node(id, now)))
                    .await
                {
                    Ok(()) => out.done.push(name_of(id)),
                    Err(e) => out.refused.push((name_of(id), e.to_string())),
                }
            }
            "Removed from their environments (a node with an installed OS is erased at the next \
             Deploy)"
                .to_string()
        }
        Action::Delete => {
            for id in ids {
                match crate::http::api::nodes::delete_node(&state, id).await {
                    Ok(_) => out.done.push(name_of(id)),
                    Err(e) => out.refused.push((name_of(id), e.to_string())),
                }
            }
            "Deleted".to_string()
        }
        Action::Power(a) => {
            if !ids.is_empty() {
                let results =
                    crate::http::api::bmc::power_nodes(&state, ids, a, caller.0.user.clone())
                        .await?;
                for r in results {
                    match r.error {
                        None => out.done.push(name_of(r.node)),
                        Some(e) => out.refused.push((name_of(r.node), e)),
                    }
                }
            }
            power_label(a).to_string()
        }
    };
    Ok(notice::redirect(&state, &request.back, out.notice(&what)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(raw: &str) -> Vec<(String, String)> {
        pairs_of(raw).unwrap()
    }

    #[test]
    fn a_request_names_its_nodes_or_its_filter() {
        let r = Request::parse(&pairs(
            "do=delete&nodes=3&nodes=1&nodes=3&back=%2Fnodes%3Fpage%3D2",
        ))
        .unwrap();
        assert_eq!(r.action, Action::Delete);
        assert_eq!(r.selection.ids, Some(vec![1, 3]));
        assert_eq!(r.back, "/nodes?page=2");
        let r = Request::parse(&pairs("do=power&act=off&all=1&status=ready&nodes=9")).unwrap();
        assert_eq!(r.action, Action::Power(Act::Off));
        assert!(r.selection.ids.is_none());
        assert_eq!(r.selection.status, Some(crate::model::NodeStatus::Ready));
        for (raw, starts) in [
            ("do=delete", "tick at least one node"),
            ("do=explode&nodes=1", "do: no bulk action \"explode\""),
            (
                "do=power&act=dance&nodes=1",
                "act: no power action \"dance\"",
            ),
            ("do=assign&nodes=1", "to_env: choose the environment"),
            ("do=delete&nodes=x", "nodes: \"x\" is not a node id"),
            (
                "do=delete&nodes=1&colour=red",
                "colour: a bulk action takes",
            ),
            ("do=delete&all=1&status=gone", "status: no node status"),
        ] {
            let e = Request::parse(&pairs(raw)).unwrap_err().to_string();
            assert!(e.starts_with(starts), "{raw}: {e}");
        }
    }

    #[test]
    fn only_local_paths_are_gone_back_to() {
        assert_eq!(local_path("/environments/3"), "/environments/3");
        for bad in [
            "//evil.example/",
            "https://evil.example/",
            "/\\evil",
            "nodes",
            "/a\nb",
        ] {
            assert_eq!(local_path(bad), "/nodes", "{bad:?}");
        }
    }

    #[test]
    fn a_notice_counts_and_names() {
        let o = Outcome {
            done: (1..=10).map(|i| format!("n{i}")).collect(),
            refused: vec![(
                "x".into(),
                "in environment prod: remove it from there first".into(),
            )],
        };
        let n = o.notice("Deleted");
        assert!(n.ok);
        assert_eq!(
            n.text,
            "Deleted: 10 done (n1, n2, n3, n4, n5, n6, n7, n8 and 2 more). 1 not:\n\
             x: in environment prod: remove it from there first"
        );
        let none = Outcome {
            done: vec![],
            refused: vec![("x".into(), "no BMC".into())],
        };
        assert!(!none.notice("Power on").ok);
    }
}
