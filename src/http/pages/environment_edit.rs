//! An environment's membership and lifecycle forms: its nodes as its page lists them (a page
//! of them, from the store's node list), adding free nodes with the roles picker
//! ([`super::roles`]), removing one, and deleting the environment after a review page that
//! names it, counts its nodes and offers the API's `power_off` choice. Each form ends with a
//! notice; the rules are the API's functions' (`environments::assign_nodes`,
//! `catalog::delete_environment`, the store's `unassign_node`).

use actix_web::{HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::access::Caller;
use crate::http::pages::confirm;
use crate::http::pages::notice::{self, Notice};
use crate::http::pages::roles::{RoleChoice, role_choices};
use crate::http::pages::views::{Me, ago, badge, thousands};
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::store::{InEnvironment, NodeFilter, NodeQuery, SortKey};

/// Members an environment's page lists; the rest are a link to the Nodes page.
const MEMBERS_SHOWN: u64 = 200;

/// Free nodes the add form offers; the rest are on the Nodes page (bulk assign).
const FREE_SHOWN: u64 = 50;

/// A node of an environment, as its page lists it.
pub struct MemberRow {
    pub id: i64,
    pub name: String,
    pub mac: String,
    pub status: &'static str,
    pub badge: &'static str,
    pub roles: String,
    pub pending_deletion: bool,
    /// Its agent answered lately; else `seen` says when it last did.
    pub online: bool,
    pub seen: String,
}

/// What the page's Nodes section shows.
pub struct Members {
    pub rows: Vec<MemberRow>,
    pub count: u64,
    pub count_text: String,
    /// Members beyond those listed.
    pub more: u64,
    /// Free nodes: id and label.
    pub free: Vec<(i64, String)>,
    pub free_count: u64,
    pub roles: Vec<RoleChoice>,
    /// Why the roles cannot be offered (an enabled plugin that cannot be opened).
    pub roles_error: Option<String>,
}

fn in_env(env: InEnvironment, limit: u64) -> NodeQuery {
    NodeQuery {
        filter: NodeFilter {
            environment: Some(env),
            ..NodeFilter::default()
        },
        sort: SortKey::Name,
        descending: false,
        offset: 0,
        limit,
    }
}

/// Environment `id`'s members (a page of them) and what the add form offers.
pub async fn members(state: &AppState, id: i64) -> Result<Members, ApiError> {
    let now = crate::clock::now();
    let (mine, free) = state
        .store(move |s| {
            s.read(|r| {
                Ok((
                    r.node_list(&in_env(InEnvironment::Id(id), MEMBERS_SHOWN), now)?,
                    r.node_list(&in_env(InEnvironment::Unassigned, FREE_SHOWN), now)?,
                ))
            })
        })
        .await?;
    let (roles, roles_error) = match role_choices(state, id, &[]).await {
        Ok(r) => (r, None),
        Err(ApiError::NotFound(m)) => return Err(ApiError::NotFound(m)),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    Ok(Members {
        count: mine.matching,
        count_text: thousands(mine.matching),
        more: mine.matching.saturating_sub(mine.nodes.len() as u64),
        rows: mine
            .nodes
            .iter()
            .map(|n| MemberRow {
                id: n.id,
                name: n.name.clone(),
                mac: n.mac.clone(),
                status: n.status.as_str(),
                badge: badge(n.status),
                roles: n.roles.join(", "),
                pending_deletion: n.pending_deletion,
                online: n.online,
                seen: ago(n.last_seen_at, now),
            })
            .collect(),
        free_count: free.matching,
        free: free
            .nodes
            .iter()
            .map(|n| (n.id, format!("{} · {}", n.name, n.mac)))
            .collect(),
        roles,
        roles_error,
    })
}

/// `POST /environments/{id}/nodes` (`nodes=ID` and `roles=NAME`, each repeated): assign the
/// ticked free nodes with the ticked roles, all or none; back to the environment.
pub async fn add_nodes(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let back = format!("/environments/{id}");
    let added = async {
        let mut nodes = Vec::new();
        let mut roles: Vec<String> = Vec::new();
        for (k, v) in crate::http::access::url_form(&body) {
            match k.as_str() {
                "nodes" => nodes.push(crate::http::api::catalog::id_of(v.trim(), "node")?),
                "roles" if !v.trim().is_empty() && !roles.contains(&v) => roles.push(v),
                _ => {}
            }
        }
        if nodes.is_empty() {
            return Err(ApiError::BadRequest("nodes: tick at least one node".into()));
        }
        if roles.is_empty() {
            return Err(ApiError::BadRequest("roles: tick at least one role".into()));
        }
        let n = nodes.len();
        let list = nodes
            .into_iter()
            .map(|node| (format!("node {node}'s roles"), node, roles.clone()))
            .collect();
        crate::http::api::environments::assign_nodes(&state, id, list).await?;
        Ok((n, roles.join(", ")))
    }
    .await;
    Ok(notice::after(
        &state,
        &back,
        added,
        |(n, roles)| match n {
            1 => format!("1 node added as {roles}."),
            n => format!("{n} nodes added as {roles}."),
        },
        "Not added",
    ))
}

/// `POST /environments/{id}/nodes/{node}/remove`: unassign, then back to the environment.
pub async fn remove_node(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let (env, node) = path.into_inner();
    let id = crate::http::api::catalog::id_of(&env, "environment")?;
    let node = crate::http::api::catalog::id_of(&node, "node")?;
    let pairs = crate::http::access::url_form(&body);
    if !confirm::given(&pairs) {
        let (name, env_name) = state
            .store(move |s| {
                s.read(|r| Ok((r.existing_node(node)?.name, r.existing_cluster(id)?.name)))
            })
            .await?;
        let to = format!("/environments/{id}/nodes/{node}/remove");
        return Ok(confirm::page(
            me,
            "environments",
            confirm::Ask {
                question: format!("Remove {name} from {env_name}?"),
                detail: "A node without an installed OS is free again at once; one with an \
                         installed OS is erased at the next Deploy."
                    .to_string(),
                action: &to,
                button: format!("Remove {name}"),
                cancel: format!("/environments/{id}"),
                danger: true,
            },
            &pairs,
        )?);
    }
    let now = crate::clock::now();
    let removed = state
        .store(move |s| {
            s.write(|tx| {
                let name = tx.read().existing_node(node)?.name;
                tx.remove_from_cluster(id, node, now)?;
                let left = tx
                    .read()
                    .node(node)?
                    .is_some_and(|n| n.cluster_id.is_none());
                Ok((name, left))
            })
        })
        .await;
    Ok(notice::after(
        &state,
        &format!("/environments/{id}"),
        removed,
        |(name, left)| {
            if left {
                format!("{name} removed: it is free again.")
            } else {
                format!("{name} is leaving: its installed OS is erased at the next Deploy.")
            }
        },
        "Not removed",
    ))
}

#[derive(Template, WebTemplate)]
#[template(path = "environment_delete.html")]
pub struct DeletePage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    id: i64,
    name: String,
    status: String,
    nodes: u64,
    with_bmc: usize,
    power_off: bool,
    deployments: usize,
}

/// `GET /environments/{id}/delete`: what deleting it does, and the confirmation.
pub async fn review_delete(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
) -> Result<DeletePage, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let now = crate::clock::now();
    let (cluster, nodes, with_bmc, deployments) = state
        .store(move |s| {
            s.read(|r| {
                let c = r.existing_cluster(id)?;
                let usable = r.nodes_with_usable_bmc()?;
                let members = r.node_ids_matching(
                    &NodeFilter {
                        environment: Some(InEnvironment::Id(id)),
                        ..NodeFilter::default()
                    },
                    now,
                )?;
                let with_bmc = members.iter().filter(|n| usable.contains(n)).count();
                Ok((c, members.len() as u64, with_bmc, r.deployments(id)?.len()))
            })
        })
        .await?;
    Ok(DeletePage {
        nav: "environments",
        version: VERSION,
        me,
        id,
        name: cluster.name,
        status: cluster.status,
        nodes,
        with_bmc,
        power_off: state.bmc.bmcs.power_off_released,
        deployments,
    })
}

/// `POST /environments/{id}/delete` (`power_off=1` to power its nodes off): delete it; to the
/// list saying so (and each power-off that failed), or back to it saying why not.
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let pairs = crate::http::access::url_form(&body);
    if !confirm::given(&pairs) {
        // Not from the review page: the review first.
        return Ok(HttpResponse::SeeOther()
            .insert_header((
                actix_web::http::header::LOCATION,
                format!("/environments/{id}/delete"),
            ))
            .finish());
    }
    let power_off = pairs.iter().any(|(k, v)| k == "power_off" && v == "1");
    let done =
        crate::http::api::catalog::delete_environment(&state, id, power_off, caller.0.user.clone())
            .await;
    Ok(match done {
        Ok((gone, results)) => {
            let mut text = format!(
                "Environment {} deleted; its nodes are free again.",
                gone.name
            );
            if !results.is_empty() {
                let failed: Vec<String> = results
                    .iter()
                    .filter_map(|r| r.error.as_ref().map(|e| format!("node {}: {e}", r.node)))
                    .collect();
                text.push_str(&format!(
                    " Powered off {} of {} nodes.",
                    results.len() - failed.len(),
                    results.len()
                ));
                for f in failed.iter().take(8) {
                    text.push('\n');
                    text.push_str(f);
                }
            }
            notice::redirect(&state, "/environments", Notice::ok(text))
        }
        Err(e) => notice::redirect(
            &state,
            &format!("/environments/{id}"),
            Notice::error(format!("Not deleted: {e}")),
        ),
    })
}
