//! An environment's page: its nodes and roles (their forms are `environment_edit`'s), its
//! latest deployment with the timeline and its actions (deploy, abort, retry), its newest
//! deployments, and the plan with its task graph and each node's tasks numbered as the node
//! runs them. The node table and the deployment part are also fragments
//! (`/environments/{id}/members`, `/environments/{id}/timeline`) rendered by the same
//! template parts, which `live.js` swaps in as nodes and deployments move.

use actix_web::{HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::engine::graph::preview::{Preview, PreviewNode, Wait};
use crate::http::pages::confirm;
use crate::http::pages::deployments::History;
use crate::http::pages::notice;
use crate::http::pages::views::Me;
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};

/// One task of one node's plan, as the page shows it.
pub struct PlanRow {
    /// Its number on its node, 1..n in the order the node runs it: the text plan's and the
    /// deployment page's number ([`crate::http::pages::runs`]).
    number: usize,
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
    /// Its nodes, and what the add form offers (`environment_edit`).
    members: crate::http::pages::environment_edit::Members,
    /// Why there is no plan, when there is none.
    plan_error: Option<String>,
    /// When the plan shown (or its refusal) was made, e.g. `just now (2026-01-02 10:00:00 UTC)`.
    plan_made: String,
    /// A deployment runs: the plan shown is the one kept from before it.
    plan_paused: bool,
    /// The plan shown is the kept one while its successor is being made.
    plan_remaking: bool,
    summary: String,
    warnings: Vec<String>,
    picture: String,
    /// The picture's width at 100%, for the zoom buttons.
    picture_width: String,
    plan_nodes: Vec<PlanNode>,
    /// Nodes of the plan whose tasks are not listed (past [`crate::planner::PREVIEW_NODES`]).
    plan_more: usize,
    /// How tasks are numbered, and how they become a deployment's steps.
    numbering: &'static str,
    latest: Option<LatestView>,
    history: History,
    /// A deployment runs: Deploy is not offered.
    running: bool,
}

/// The latest deployment as the environment page shows it (`environment/latest.html`).
pub struct LatestView {
    id: i64,
    status: String,
    badge: &'static str,
    counts: String,
    waiting: Vec<String>,
    timeline: String,
    can_abort: bool,
    can_retry: bool,
}

/// The environment page's deployment part, alone: `GET /environments/{id}/timeline`.
#[derive(Template)]
#[template(path = "environment/latest.html")]
pub struct LatestFragment {
    me: Me,
    id: i64,
    latest: Option<LatestView>,
    history: History,
}

/// The environment page's node table, alone: `GET /environments/{id}/members`.
#[derive(Template)]
#[template(path = "environment/member_table.html")]
pub struct MembersFragment {
    me: Me,
    id: i64,
    members: crate::http::pages::environment_edit::Members,
}

impl EnvironmentPage {
    /// The page with `plan`'s preview shown: its summary, warnings, picture and first nodes'
    /// tasks.
    fn with_plan(mut self, plan: &Preview) -> EnvironmentPage {
        let s = &plan.summary;
        self.summary = format!(
            "{} nodes, {} tasks to run, {} skipped, {} dependencies ({} across nodes)",
            s.nodes, s.run, s.skipped, s.edges, s.cross_node_edges
        );
        self.warnings.clone_from(&plan.warnings);
        self.picture.clone_from(&plan.picture);
        self.picture_width = picture_width(&self.picture);
        self.plan_nodes = plan.nodes.iter().map(plan_node).collect();
        self.plan_more = plan.more;
        self
    }
}

/// One node's tasks as the page lists them, each with what it waits for on other nodes.
fn plan_node(n: &PreviewNode) -> PlanNode {
    use crate::engine::graph::Status;
    PlanNode {
        title: if n.roles.is_empty() {
            n.name.clone()
        } else {
            format!("{} · {}", n.name, n.roles.join(", "))
        },
        runs: n.tasks.iter().filter(|t| t.status == Status::Run).count(),
        rows: n
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let waits: Vec<String> = t
                    .waits
                    .iter()
                    .map(|w| match w {
                        Wait::Stage { task } => format!("stage {task}"),
                        Wait::Task { task, node } => format!("{task} on {node}"),
                        Wait::Group { task, roles, nodes } => {
                            let which = match roles.as_str() {
                                "*" => "every node".to_string(),
                                roles => format!("every {roles} node"),
                            };
                            format!("{task} on {which} ({nodes} nodes)")
                        }
                    })
                    .collect();
                let mut note = t.reason.as_deref().unwrap_or_default().to_string();
                if !waits.is_empty() {
                    if !note.is_empty() {
                        note.push_str("; ");
                    }
                    note.push_str("waits for ");
                    note.push_str(&waits.join(", "));
                }
                PlanRow {
                    number: i + 1,
                    id: t.id.to_string(),
                    ty: t.ty.to_string(),
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
    }
}

/// `GET /environments/{id}`: the environment's nodes, a form to add more, and its plan: the
/// kept one while nothing it is made from changed (the `x-stoker-plan-cached` header says
/// which), so a view does not plan again.
pub async fn environment(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
) -> Result<actix_web::CustomizeResponder<EnvironmentPage>, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let (cluster, release) = state
        .store(move |s| {
            s.read(|tx| {
                let Some(c) = tx.cluster(id)? else {
                    return Ok(None);
                };
                let release = tx.release(c.release_id)?;
                Ok(Some((c, release)))
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("environment {id} not found")))?;
    let now = crate::clock::now();
    let members = crate::http::pages::environment_edit::members(&state, id).await?;
    let mut page = EnvironmentPage {
        nav: "environments",
        version: VERSION,
        me,
        id,
        name: cluster.name.clone(),
        release: release.map_or_else(|| format!("release {}", cluster.release_id), |r| r.name),
        status: cluster.status.clone(),
        members,
        plan_error: None,
        plan_made: String::new(),
        plan_paused: false,
        plan_remaking: false,
        summary: String::new(),
        warnings: Vec::new(),
        picture: String::new(),
        picture_width: String::new(),
        plan_nodes: Vec::new(),
        plan_more: 0,
        numbering: crate::http::pages::runs::EXPLAIN,
        latest: None,
        history: crate::http::pages::deployments::history(
            &state,
            id,
            crate::http::pages::deployments::ON_ENVIRONMENT_PAGE,
            0,
        )
        .await?,
        running: false,
    };
    page.latest = latest_deployment(&state, id, &page.me).await?;
    page.running = page
        .latest
        .as_ref()
        .is_some_and(|l| l.status == "running" || l.status == crate::store::CHAINING);
    // While a deployment runs, every node status it moves is a new input: the page shows the
    // plan kept from before instead of planning again on each view.
    let kept = if page.running {
        state.plans.kept(id, "default")
    } else {
        None
    };
    page.plan_paused = page.running;
    let planned = match kept {
        Some(p) => Ok(p),
        None if page.running => Err(ApiError::Conflict(
            "A deployment is running: the plan is made again when it ends.".to_string(),
        )),
        None => {
            let made = async {
                crate::http::api::environments::make_plan(&state, id, "default".to_string())
                    .await
                    .map(|p| p.shown())
            };
            match state.plans.kept(id, "default") {
                // Another view or call is making the new plan, or a Deploy is being prepared
                // (which makes its own): show the kept one at once, rather than wait (and hold
                // a blocking thread) for it, or read every input again beside the Deploy.
                Some(kept) if state.plans.making(id, "default") || state.plans.is_deploying(id) => {
                    page.plan_remaking = true;
                    Ok(kept)
                }
                // Something may have changed since the kept plan: a new one is made, and waited
                // for briefly; a plan of thousands of nodes takes seconds, and the page shows the
                // kept one meanwhile (the new one is still made and kept for the next view).
                Some(kept) => match tokio::time::timeout(PLAN_WAIT, made).await {
                    Ok(made) => made,
                    Err(_) => {
                        page.plan_remaking = true;
                        Ok(kept)
                    }
                },
                None => made.await,
            }
        }
    };
    let headers = planned
        .as_ref()
        .map(|p| crate::http::api::environments::plan_headers(p.made_at, p.cached))
        .ok();
    if let Ok(p) = &planned {
        page.plan_made = format!(
            "{} ({})",
            crate::http::pages::views::ago(p.made_at, now),
            crate::http::pages::views::utc(p.made_at)
        );
    }
    match planned {
        // A plan's first preview walks every task of every node: off the worker.
        Ok(shown) => match crate::http::off_worker(move || shown.preview()).await? {
            Ok(preview) => page = page.with_plan(&preview),
            Err(e) => page.plan_error = Some(e.to_string()),
        },
        Err(e) => page.plan_error = Some(e.to_string()),
    }
    let mut page = actix_web::Responder::customize(page);
    for h in headers.into_iter().flatten() {
        page = page.insert_header(h);
    }
    Ok(page)
}

/// How long a view waits for a new plan when it can show the kept one instead.
const PLAN_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The `width` attribute of an SVG picture.
fn picture_width(svg: &str) -> String {
    svg.split_once(" width=\"")
        .and_then(|(_, rest)| rest.split('"').next())
        .unwrap_or_default()
        .to_string()
}

/// The newest deployment of an environment: its status, counts, what it waits for, its
/// timeline, and what the caller may do with it.
async fn latest_deployment(
    state: &AppState,
    id: i64,
    me: &Me,
) -> Result<Option<LatestView>, ApiError> {
    let now = crate::clock::now();
    let found = state
        .store(move |s| {
            s.read(|r| {
                let Some(d) = r.deployments(id)?.into_iter().next() else {
                    return Ok(None);
                };
                let runs = r.timeline_runs(d.id, crate::http::pages::timeline::MAX_LANES)?;
                let waiting = r.waiting_agents(&d, now)?;
                // The names of the lanes drawn only (40 at most), not of every node.
                let mut lanes: Vec<i64> = runs.lines.iter().filter_map(|l| l.node_id).collect();
                lanes.dedup();
                let names: std::collections::HashMap<i64, String> =
                    r.node_names(&lanes)?.into_iter().collect();
                Ok(Some((d, runs, waiting, names)))
            })
        })
        .await?;
    let Some((d, runs, waiting, names)) = found else {
        return Ok(None);
    };
    let c = &runs.counts;
    let mut counts = format!("{} of {} steps done", c.done(), c.total);
    for (n, what) in [(c.running, "running"), (c.failed, "failed")] {
        if n > 0 {
            counts.push_str(&format!(" · {n} {what}"));
        }
    }
    let label = |n: i64| {
        names
            .get(&n)
            .cloned()
            .unwrap_or_else(|| format!("node {n}"))
    };
    let timeline = if runs.first_start.is_some() {
        crate::http::pages::timeline::svg_of(&d, &runs, &label, now)
    } else {
        String::new()
    };
    let check = d.is_check() || d.status == crate::store::CHAINING;
    Ok(Some(LatestView {
        id: d.id,
        badge: crate::http::pages::runs::deployment_badge(&d.status),
        counts,
        waiting: waiting.into_iter().map(|w| w.message).collect(),
        timeline,
        can_abort: me.operate && d.status == "running",
        can_retry: me.operate
            && !check
            && d.parent_id.is_none()
            && matches!(d.status.as_str(), "error" | "aborted"),
        status: d.status,
    }))
}

/// `GET /environments/{id}/timeline`: the page's deployment part (the latest deployment with
/// its timeline and actions, the newest deployments), as an HTML fragment the page swaps in
/// while it deploys.
pub async fn timeline(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let latest = latest_deployment(&state, id, &me).await?;
    let history = crate::http::pages::deployments::history(
        &state,
        id,
        crate::http::pages::deployments::ON_ENVIRONMENT_PAGE,
        0,
    )
    .await?;
    fragment(&LatestFragment {
        me,
        id,
        latest,
        history,
    })
}

/// `GET /environments/{id}/members`: the node table with its statuses, as a fragment.
pub async fn members(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let members = crate::http::pages::environment_edit::members(&state, id).await?;
    fragment(&MembersFragment { me, id, members })
}

fn fragment(t: &impl Template) -> Result<HttpResponse, PageError> {
    let body = t
        .render()
        .map_err(|e| ApiError::Internal(format!("fragment failed to render: {e}")))?;
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(body))
}

/// `POST /environments/{id}/deploy`
pub async fn deploy(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let pairs = crate::http::access::url_form(&body);
    if !confirm::given(&pairs) {
        let name = state
            .store(move |s| s.read(|r| r.existing_cluster(id)))
            .await?
            .name;
        let action = format!("/environments/{id}/deploy");
        return Ok(confirm::page(
            me,
            "environments",
            confirm::Ask {
                question: format!("Deploy environment {name}?"),
                detail: "Deploy runs the plan on every node of the environment: nodes without \
                         an installed OS are provisioned (their disks written), the others run \
                         what changed."
                    .to_string(),
                action: &action,
                button: format!("Deploy {name}"),
                cancel: format!("/environments/{id}"),
                danger: false,
            },
            &pairs,
        )?);
    }
    let started = crate::http::api::deploy::start(&state, id, Vec::new()).await;
    Ok(notice::after(
        &state,
        &format!("/environments/{id}"),
        started,
        |d| format!("Deployment {} started.", d.deployment.id),
        "Not deployed",
    ))
}

/// `POST /environments/{id}/deployments/{dep}/{action}` with action `abort` or `retry`.
pub async fn deployment_action(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<(String, String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let (env, dep, action) = path.into_inner();
    let id = crate::http::api::catalog::id_of(&env, "environment")?;
    let dep = crate::http::api::catalog::id_of(&dep, "deployment")?;
    let abort = match action.as_str() {
        "abort" => true,
        "retry" => false,
        other => {
            return Err(ApiError::NotFound(format!("no deployment action {other:?}")).into());
        }
    };
    let back = format!("/environments/{id}");
    let pairs = crate::http::access::url_form(&body);
    if abort && !confirm::given(&pairs) {
        let action = format!("/environments/{id}/deployments/{dep}/abort");
        return Ok(crate::http::pages::deployment::ask_abort(
            me, dep, &action, &back, &pairs,
        )?);
    }
    Ok(crate::http::pages::deployment::act(&state, dep, abort, &back).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::graph::Status;
    use crate::engine::graph::preview::PreviewTask;

    /// A node's rows say why a task is skipped and what it waits for on other nodes: a task by
    /// its node's name, a stage, a group with its size; numbered in the node's order.
    #[test]
    fn a_nodes_rows_name_what_each_task_waits_for() {
        let task = |id: &str, status, reason: Option<&str>, waits| PreviewTask {
            id: id.into(),
            ty: "shell",
            status,
            reason: reason.map(Into::into),
            waits,
        };
        let node = PreviewNode {
            uid: "2".into(),
            name: "cmp-b".into(),
            roles: vec!["compute".into()],
            tasks: vec![
                task("off", Status::Skipped, Some("condition is false"), vec![]),
                task(
                    "nova",
                    Status::Run,
                    None,
                    vec![
                        Wait::Task {
                            task: "db".into(),
                            node: "ctl-a".into(),
                        },
                        Wait::Stage {
                            task: "pre_deployment_end".into(),
                        },
                        Wait::Group {
                            task: "agent".into(),
                            roles: "compute".into(),
                            nodes: 3,
                        },
                        Wait::Group {
                            task: "hiera".into(),
                            roles: "*".into(),
                            nodes: 4,
                        },
                    ],
                ),
            ],
        };
        let shown = plan_node(&node);
        assert_eq!(shown.title, "cmp-b · compute");
        assert_eq!(shown.runs, 1);
        let rows: Vec<(usize, &str, &str, &str)> = shown
            .rows
            .iter()
            .map(|r| (r.number, r.id.as_str(), r.status, r.note.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                (1, "off", "skipped", "condition is false"),
                (
                    2,
                    "nova",
                    "run",
                    "waits for db on ctl-a, stage pre_deployment_end, agent on every compute \
                     node (3 nodes), hiera on every node (4 nodes)"
                ),
            ]
        );
    }
}
