//! Dashboard pages: one handler and one askama view per page. Handlers fetch through the store
//! on a blocking thread and hand pre-formatted view models to templates in `web/templates`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::access::Caller;
use crate::http::pages::views::{CountTile, HistoryRow, Me, NodeRow, human_bytes};
use crate::http::{ApiError, AppState};
use crate::model::{Node, Release};
use crate::store::NO_RELEASE_MESSAGE;

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    tiles: Vec<CountTile>,
    history: Vec<HistoryRow>,
    has_nodes: bool,
    no_release: bool,
    no_release_message: &'static str,
}

#[derive(Template, WebTemplate)]
#[template(path = "nodes.html")]
pub struct NodesPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    rows: Vec<NodeRow>,
    /// After a bulk power action: a line per node.
    results: Vec<(i64, bool, String)>,
}

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
    /// The master's BMC steps on this node, newest first.
    /// The node's BMC steps, newest first, with when each finished.
    bmc_runs: Vec<(crate::store::MasterRun, String)>,
    /// What the last power action or BMC change said.
    message: Option<String>,
}

/// One row of the environments table.
pub struct EnvironmentRow {
    id: i64,
    name: String,
    release: String,
    status: String,
    created: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "environments.html")]
pub struct EnvironmentsPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    rows: Vec<EnvironmentRow>,
    releases: Vec<Release>,
    no_release_message: &'static str,
}

/// One installed plugin with its validator findings, as text lines.
pub struct PluginRow {
    name: String,
    title: String,
    version: String,
    package_version: String,
    kind: &'static str,
    installed: String,
    diagnostics: Vec<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "releases.html")]
pub struct ReleasesPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    releases: Vec<Release>,
    plugins: Vec<PluginRow>,
    no_release_message: &'static str,
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    status: u16,
    title: &'static str,
    message: String,
}

/// An error on a dashboard route, rendered as a page rather than JSON.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct PageError(#[from] ApiError);

impl ResponseError for PageError {
    fn status_code(&self) -> StatusCode {
        self.0.status_code()
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if status.is_server_error() {
            tracing::error!(error = %self.0, "page failed");
        }
        error_page(status, self.0.to_string())
    }
}

fn error_page(status: StatusCode, message: String) -> HttpResponse {
    let page = ErrorPage {
        nav: "",
        version: VERSION,
        me: Me::default(),
        status: status.as_u16(),
        title: status.canonical_reason().unwrap_or("Error"),
        message,
    };
    match page.render() {
        Ok(html) => HttpResponse::build(status)
            .content_type("text/html; charset=utf-8")
            .body(html),
        Err(e) => HttpResponse::build(status)
            .content_type("text/plain; charset=utf-8")
            .body(format!(
                "{message}\n(error page failed: {e})",
                message = page.message
            )),
    }
}

/// `GET /`
pub async fn overview(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<OverviewPage, PageError> {
    let now = crate::clock::now();
    let (counts, history, releases) = state
        .store(|s| {
            s.read(|tx| {
                Ok((
                    tx.node_counts()?,
                    tx.recent_history(15)?,
                    tx.releases()?.len(),
                ))
            })
        })
        .await?;
    Ok(OverviewPage {
        nav: "overview",
        version: VERSION,
        me: Me::of(&caller),
        no_release: releases == 0,
        no_release_message: NO_RELEASE_MESSAGE,
        has_nodes: counts.total > 0,
        tiles: CountTile::from_counts(&counts),
        history: history.iter().map(|h| HistoryRow::new(h, now)).collect(),
    })
}

/// `GET /nodes`
pub async fn nodes(state: web::Data<AppState>, caller: Caller) -> Result<NodesPage, PageError> {
    let now = crate::clock::now();
    nodes_page(&state, caller, now, Vec::new()).await
}

async fn nodes_page(
    state: &AppState,
    caller: Caller,
    now: i64,
    results: Vec<(i64, bool, String)>,
) -> Result<NodesPage, PageError> {
    let (nodes, bmcs) = state
        .store(|s| s.read(|tx| Ok((tx.nodes()?, tx.bmcs()?))))
        .await?;
    let bmcs: std::collections::BTreeMap<i64, crate::store::StoredBmc> =
        bmcs.into_iter().map(|b| (b.node_id, b)).collect();
    Ok(NodesPage {
        nav: "nodes",
        version: VERSION,
        me: Me::of(&caller),
        rows: nodes
            .iter()
            .map(|n| NodeRow::new(n, now).with_power(bmcs.get(&n.id)))
            .collect(),
        results,
    })
}

/// A node page's power button.
#[derive(Debug, serde::Deserialize)]
pub struct PowerForm {
    action: String,
}

fn power_action(action: &str) -> Result<crate::bmc::actions::Act, ApiError> {
    crate::bmc::actions::Act::parse(action)
        .ok_or_else(|| ApiError::BadRequest(format!("action: no power action {action:?}")))
}

/// `POST /nodes/power`: a power action on the nodes ticked; the list again with a line per
/// node.
pub async fn power_nodes(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Bytes,
) -> Result<NodesPage, PageError> {
    // Repeated `nodes=` fields: serde_urlencoded takes them as a sequence only by hand.
    let mut action = String::new();
    let mut nodes = Vec::new();
    for (k, v) in serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body)
        .map_err(|e| ApiError::BadRequest(format!("form: {e}")))?
    {
        match k.as_str() {
            "action" => action = v,
            "nodes" => nodes.push(crate::http::api::node_id(&v)?),
            _ => {}
        }
    }
    let act = power_action(&action)?;
    if nodes.is_empty() {
        return Err(ApiError::BadRequest("tick at least one node".into()).into());
    }
    let user = caller.0.user.clone();
    let results = crate::http::api::bmc::power_nodes(&state, nodes, act, user).await?;
    let lines = results
        .into_iter()
        .map(|r| {
            let text = match (&r.error, r.power_state) {
                (Some(e), _) => format!("{} failed: {e}", r.action),
                (None, p) => format!(
                    "{} done, power {}",
                    r.action,
                    p.map_or("unknown", crate::bmc::PowerState::as_str)
                ),
            };
            (r.node, r.ok, text)
        })
        .collect();
    nodes_page(&state, caller, crate::clock::now(), lines).await
}

/// `POST /nodes/{id}/power`: one node's power button; its page with what the BMC said.
pub async fn power_node(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    form: web::Form<PowerForm>,
) -> Result<NodePage, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let act = power_action(&form.action)?;
    let user = caller.0.user.clone();
    let r = crate::http::api::bmc::power_nodes(&state, vec![id], act, user).await?;
    let message = r.first().map(|r| match &r.error {
        Some(e) => format!("Power {} failed: {e}", r.action),
        None => format!("Power {} done.", r.action),
    });
    node_page(&state, caller, id, message).await
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
    caller: Caller,
    path: web::Path<String>,
    form: web::Form<BmcForm>,
) -> Result<NodePage, PageError> {
    let id = crate::http::api::node_id(&path)?;
    let f = form.into_inner();
    let mut body = serde_json::json!({"driver": f.driver, "address": f.address,
        "username": f.username, "verify_tls": f.verify_tls.is_some()});
    if !f.password.is_empty() {
        body["password"] = f.password.into();
    }
    let message = match crate::http::api::bmc::set_bmc(&state, id, body).await {
        Ok(_) => "BMC saved; its power is read within seconds.".to_string(),
        Err(e) => format!("BMC not saved: {e}"),
    };
    node_page(&state, caller, id, Some(message)).await
}

/// `GET /nodes/{id}`
pub async fn node(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<NodePage, PageError> {
    let id = crate::http::api::node_id(&path)?;
    node_page(&state, caller, id, None).await
}

async fn node_page(
    state: &AppState,
    caller: Caller,
    id: i64,
    message: Option<String>,
) -> Result<NodePage, PageError> {
    let (node, bmc, bmc_runs) = state
        .store(move |s| s.read(|tx| Ok((tx.node(id)?, tx.bmc(id)?, tx.master_runs_of(id, 20)?))))
        .await?;
    let node = node.ok_or_else(|| ApiError::NotFound(format!("node {id} not found")))?;
    let now = crate::clock::now();
    Ok(NodePage {
        nav: "nodes",
        version: VERSION,
        me: Me::of(&caller),
        row: NodeRow::new(&node, now).with_power(bmc.as_ref()),
        bmc,
        bmc_runs: bmc_runs
            .into_iter()
            .map(|r| {
                let finished = r
                    .finished_at
                    .map_or_else(String::new, crate::http::pages::views::utc);
                (r, finished)
            })
            .collect(),
        message,
        created: crate::http::pages::views::utc(node.created_at),
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
        node,
    })
}

/// `POST /nodes/{id}/delete`: delete, then back to the node list.
pub async fn delete_node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    crate::http::api::nodes::delete_node(&state, id).await?;
    Ok(HttpResponse::SeeOther()
        .insert_header(("Location", "/nodes"))
        .finish())
}

/// `POST /nodes/{id}/approve`: approve, then back to the node.
pub async fn approve_node(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::node_id(&path)?;
    crate::http::api::nodes::approve_node(&state, id).await?;
    Ok(HttpResponse::SeeOther()
        .insert_header(("Location", format!("/nodes/{id}")))
        .finish())
}

/// `GET /environments`
pub async fn environments(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<EnvironmentsPage, PageError> {
    let (clusters, releases) = state
        .store(|s| s.read(|tx| Ok((tx.clusters()?, tx.releases()?))))
        .await?;
    let rows = clusters
        .iter()
        .map(|c| EnvironmentRow {
            id: c.id,
            name: c.name.clone(),
            release: releases
                .iter()
                .find(|r| r.id == c.release_id)
                .map_or_else(|| format!("release {}", c.release_id), |r| r.name.clone()),
            status: c.status.clone(),
            created: crate::http::pages::views::utc(c.created_at),
        })
        .collect();
    Ok(EnvironmentsPage {
        nav: "environments",
        version: VERSION,
        me: Me::of(&caller),
        rows,
        releases: releases
            .into_iter()
            .filter(Release::is_deployable)
            .collect(),
        no_release_message: NO_RELEASE_MESSAGE,
    })
}

/// A node of an environment, as its page lists it.
pub struct MemberRow {
    row: NodeRow,
    roles: String,
}

/// One task of one node's plan, as the page shows it.
pub struct PlanRow {
    order: usize,
    id: String,
    ty: String,
    status: &'static str,
    badge: &'static str,
    note: String,
}

/// One node's part of the plan.
pub struct PlanNode {
    title: String,
    runs: usize,
    rows: Vec<PlanRow>,
}

#[derive(Template, WebTemplate)]
#[template(path = "environment.html")]
pub struct EnvironmentPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    id: i64,
    name: String,
    release: String,
    status: String,
    members: Vec<MemberRow>,
    /// Discovered nodes in no environment: (id, label).
    free: Vec<(i64, String)>,
    roles: Vec<String>,
    /// Why there is no plan, when there is none.
    plan_error: Option<String>,
    /// When the plan shown (or its refusal) was made, e.g. `just now (2026-01-02 10:00:00 UTC)`.
    plan_made: String,
    summary: String,
    warnings: Vec<String>,
    picture: String,
    plan_nodes: Vec<PlanNode>,
    /// The latest deployment: (id, status, counts line), and its timeline.
    deployment: Option<(i64, String, String)>,
    timeline: String,
    live: bool,
}

fn plan_nodes(plan: &crate::engine::graph::Plan) -> Vec<PlanNode> {
    use crate::engine::graph::Status;
    let names: std::collections::HashMap<&str, String> = plan
        .nodes
        .iter()
        .map(|n| (n.uid.as_str(), n.name.clone()))
        .collect();
    plan.nodes
        .iter()
        .filter(|n| n.uid != "null")
        .map(|n| PlanNode {
            title: if n.roles.is_empty() {
                n.name.clone()
            } else {
                format!("{} · {}", n.name, n.roles.join(", "))
            },
            runs: n.tasks.iter().filter(|t| t.status == Status::Run).count(),
            rows: n
                .tasks
                .iter()
                .map(|t| {
                    let groups = t
                        .requires_groups
                        .iter()
                        .filter_map(|g| plan.groups.get(g.index))
                        .map(|g| {
                            let which = match g.roles.as_str() {
                                "*" => "every node".to_string(),
                                roles => format!("every {roles} node"),
                            };
                            format!("{} on {which} ({} nodes)", g.task, g.nodes.len())
                        });
                    let waits: Vec<String> = t
                        .requires
                        .iter()
                        .filter(|r| *r.node != *n.uid)
                        .map(|r| match &*r.node {
                            "null" => format!("stage {}", r.task),
                            uid => {
                                let who = names.get(uid).map_or(uid, |s| s.as_str());
                                format!("{} on {who}", r.task)
                            }
                        })
                        .chain(groups)
                        .collect();
                    let mut note = t.reason.clone().unwrap_or_default();
                    if !waits.is_empty() {
                        if !note.is_empty() {
                            note.push_str("; ");
                        }
                        note.push_str("waits for ");
                        note.push_str(&waits.join(", "));
                    }
                    PlanRow {
                        order: t.order,
                        id: t.id.clone(),
                        ty: t.ty.clone(),
                        status: t.status.as_str(),
                        badge: match t.status {
                            Status::Run => "badge-info",
                            Status::Skipped => "badge-neutral",
                            Status::Stage => "badge-progress",
                        },
                        note,
                    }
                })
                .collect(),
        })
        .collect()
}

/// `GET /environments/{id}`: the environment's nodes, a form to add more, and its plan: the
/// kept one while nothing it is made from changed (the `x-stoker-plan-cached` header says
/// which), so a view does not plan again.
pub async fn environment(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<actix_web::CustomizeResponder<EnvironmentPage>, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let (cluster, release, nodes, roles) = state
        .store(move |s| {
            s.read(|tx| {
                let Some(c) = tx.cluster(id)? else {
                    return Ok(None);
                };
                let release = tx.release(c.release_id)?;
                let data = tx.release_data(c.release_id)?;
                let mut roles: Vec<String> = data
                    .as_ref()
                    .and_then(|d| d.get("roles_metadata"))
                    .and_then(|m| m.as_object())
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                roles.sort();
                Ok(Some((c, release, tx.nodes()?, roles)))
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("environment {id} not found")))?;
    let now = crate::clock::now();
    let members: Vec<MemberRow> = nodes
        .iter()
        .filter(|n| n.cluster_id == Some(id))
        .map(|n| MemberRow {
            row: NodeRow::new(n, now),
            roles: n.roles.join(", "),
        })
        .collect();
    let free = nodes
        .iter()
        .filter(|n| n.cluster_id.is_none())
        .map(|n| (n.id, format!("{} ({})", n.name, n.mac)))
        .collect();
    let mut page = EnvironmentPage {
        nav: "environments",
        version: VERSION,
        me: Me::of(&caller),
        id,
        name: cluster.name.clone(),
        release: release.map_or_else(|| format!("release {}", cluster.release_id), |r| r.name),
        status: cluster.status.clone(),
        members,
        free,
        roles,
        plan_error: None,
        plan_made: String::new(),
        summary: String::new(),
        warnings: Vec::new(),
        picture: String::new(),
        plan_nodes: Vec::new(),
        deployment: None,
        timeline: String::new(),
        live: false,
    };
    if let Some((dep, line, svg)) = latest_deployment(&state, id).await? {
        page.live = dep.status == "running";
        page.deployment = Some((dep.id, dep.status.clone(), line));
        page.timeline = svg;
    }
    let planned =
        crate::http::api::environments::make_plan(&state, id, "default".to_string()).await;
    let headers = planned
        .as_ref()
        .map(crate::http::api::environments::plan_headers)
        .ok();
    if let Ok(p) = &planned {
        page.plan_made = format!(
            "{} ({})",
            crate::http::pages::views::ago(p.made_at, now),
            crate::http::pages::views::utc(p.made_at)
        );
    }
    match planned.map(|p| p.plan) {
        Ok(Ok(env)) => {
            let s = &env.plan.summary;
            page.summary = format!(
                "{} nodes, {} tasks to run, {} skipped, {} dependencies ({} across nodes)",
                s.nodes, s.run, s.skipped, s.edges, s.cross_node_edges
            );
            page.warnings.clone_from(&env.plan.warnings);
            page.picture = crate::engine::graph::picture::svg(&env.plan);
            page.plan_nodes = plan_nodes(&env.plan);
        }
        Ok(Err(e)) => page.plan_error = Some(e.to_string()),
        Err(e) => page.plan_error = Some(e.to_string()),
    }
    let mut page = actix_web::Responder::customize(page);
    for h in headers.into_iter().flatten() {
        page = page.insert_header(h);
    }
    Ok(page)
}

/// The newest deployment of an environment, a one-line summary and its timeline picture.
async fn latest_deployment(
    state: &AppState,
    id: i64,
) -> Result<Option<(crate::store::Deployment, String, String)>, ApiError> {
    let found = state
        .store(move |s| {
            s.read(|r| {
                let Some(d) = r.deployments(id)?.into_iter().next() else {
                    return Ok(None);
                };
                let runs = r.runs(d.id)?;
                let waiting = r.waiting_agents(&d, crate::clock::now())?;
                let names: std::collections::HashMap<i64, String> =
                    r.nodes()?.into_iter().map(|n| (n.id, n.name)).collect();
                Ok(Some((d, runs, waiting, names)))
            })
        })
        .await?;
    let Some((d, runs, waiting, names)) = found else {
        return Ok(None);
    };
    let c = crate::store::RunCounts::of(&runs);
    let mut line = format!(
        "{} of {} steps done, {} running, {} failed, {} skipped",
        c.ok, c.total, c.running, c.failed, c.skipped
    );
    // What it waits on, when agents have gone silent (fixed words, numbers and times only).
    for w in &waiting {
        line.push_str(" · ");
        line.push_str(&w.message);
    }
    let label = |n: i64| {
        names
            .get(&n)
            .cloned()
            .unwrap_or_else(|| format!("node {n}"))
    };
    let svg = crate::http::pages::timeline::svg(&d, &runs, &label, crate::clock::now());
    Ok(Some((d, line, svg)))
}

/// `GET /environments/{id}/timeline`: the latest deployment's status and timeline, as an HTML
/// fragment the page swaps in while the deployment runs.
pub async fn timeline(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let body = match latest_deployment(&state, id).await? {
        Some((d, line, svg)) => format!(
            r#"<p data-status="{}"><span class="badge {}">{}</span> Deployment {} · {}</p><div class="timeline-box">{}</div>"#,
            d.status,
            deployment_badge(&d.status),
            d.status,
            d.id,
            line,
            svg
        ),
        None => String::new(),
    };
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(body))
}

fn deployment_badge(status: &str) -> &'static str {
    match status {
        "running" => "badge-progress",
        "done" => "badge-ok",
        "error" => "badge-error",
        _ => "badge-neutral",
    }
}

fn back_to(id: i64) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header(("Location", format!("/environments/{id}")))
        .finish()
}

/// `POST /environments/{id}/deploy`
pub async fn deploy(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    crate::http::api::deploy::start(&state, id, Vec::new()).await?;
    Ok(back_to(id))
}

/// `POST /environments/{id}/deployments/{dep}/{action}` with action `abort` or `retry`.
pub async fn deployment_action(
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, PageError> {
    let (env, dep, action) = path.into_inner();
    let id = crate::http::api::catalog::id_of(&env, "environment")?;
    let dep = crate::http::api::catalog::id_of(&dep, "deployment")?;
    let now = crate::clock::now();
    let abort = match action.as_str() {
        "abort" => true,
        "retry" => false,
        other => {
            return Err(ApiError::NotFound(format!("no deployment action {other:?}")).into());
        }
    };
    state
        .store(move |s| {
            s.write(|tx| {
                if abort {
                    tx.abort_deployment(dep, now)
                } else {
                    tx.retry_deployment(dep, now)
                }
            })
        })
        .await?;
    Ok(back_to(id))
}

/// The add-node form's fields: a node and its roles, comma-separated.
#[derive(Debug, serde::Deserialize)]
pub struct AssignForm {
    node_id: String,
    roles: String,
}

/// `POST /environments/{id}/nodes`: assign, then back to the environment.
pub async fn assign_node(
    state: web::Data<AppState>,
    path: web::Path<String>,
    form: web::Form<AssignForm>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let form = form.into_inner();
    let node = crate::http::api::catalog::id_of(&form.node_id, "node")?;
    let roles: Vec<&str> = form
        .roles
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .collect();
    let roles = crate::http::api::environments::parse_roles(
        serde_json::json!({ "roles": roles }).to_string().as_bytes(),
    )?;
    crate::http::api::environments::check_roles(&state, id, &[("roles".to_string(), &roles)])
        .await?;
    let now = crate::clock::now();
    state
        .store(move |s| s.write(|tx| tx.assign_node(id, node, &roles, now).map(|_| ())))
        .await?;
    Ok(HttpResponse::SeeOther()
        .insert_header(("Location", format!("/environments/{id}")))
        .finish())
}

/// `POST /environments/{id}/nodes/{node}/remove`: unassign, then back to the environment.
pub async fn remove_node(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (env, node) = path.into_inner();
    let id = crate::http::api::catalog::id_of(&env, "environment")?;
    let node = crate::http::api::catalog::id_of(&node, "node")?;
    let now = crate::clock::now();
    state
        .store(move |s| s.write(|tx| tx.unassign_node(node, now)))
        .await?;
    Ok(HttpResponse::SeeOther()
        .insert_header(("Location", format!("/environments/{id}")))
        .finish())
}

/// The create-environment form's fields.
#[derive(Debug, serde::Deserialize)]
pub struct EnvironmentForm {
    name: String,
    release_id: String,
}

/// `POST /environments`: create, then back to the list (post/redirect/get).
pub async fn create_environment(
    state: web::Data<AppState>,
    form: web::Form<EnvironmentForm>,
) -> Result<HttpResponse, PageError> {
    let form = form.into_inner();
    let body = serde_json::json!({
        "name": form.name,
        "release_id": form.release_id.trim().parse::<i64>().unwrap_or(0),
    });
    let new = crate::http::api::catalog::parse_new_cluster(body.to_string().as_bytes())?;
    let now = crate::clock::now();
    state
        .store(move |s| {
            s.write(|tx| tx.create_cluster(&new.name, new.release_id, &new.net_segment_type, now))
        })
        .await?;
    Ok(HttpResponse::SeeOther()
        .insert_header(("Location", "/environments"))
        .finish())
}

/// `GET /releases`
pub async fn releases(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<ReleasesPage, PageError> {
    let now = crate::clock::now();
    let (releases, plugins) = state
        .store(|s| s.read(|tx| Ok((tx.releases()?, tx.plugins()?))))
        .await?;
    let plugins = plugins
        .into_iter()
        .map(|p| PluginRow {
            diagnostics: p
                .diagnostics
                .as_array()
                .map(|list| list.iter().map(diagnostic_line).collect())
                .unwrap_or_default(),
            kind: if p.is_release { "release" } else { "plugin" },
            installed: crate::http::pages::views::ago(p.installed_at, now),
            name: p.name,
            title: p.title,
            version: p.version,
            package_version: p.package_version,
        })
        .collect();
    Ok(ReleasesPage {
        nav: "releases",
        version: VERSION,
        me: Me::of(&caller),
        releases,
        plugins,
        no_release_message: NO_RELEASE_MESSAGE,
    })
}

/// A stored diagnostic as one line: `warning metadata.yaml:3:1 fuel_version: deprecated`.
fn diagnostic_line(d: &serde_json::Value) -> String {
    let text = |k: &str| d.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let num = |k: &str| d.get(k).and_then(serde_json::Value::as_u64);
    let place = match (num("line"), num("column")) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}", text("file")),
        _ => text("file").to_string(),
    };
    format!(
        "{} {place} {}: {}",
        text("level"),
        text("field"),
        text("message")
    )
}

/// Any path that is not a page.
pub async fn not_found(req: actix_web::HttpRequest) -> HttpResponse {
    error_page(
        StatusCode::NOT_FOUND,
        format!("There is no page at {}.", req.path()),
    )
}
