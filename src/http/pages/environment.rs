//! An environment's page: its nodes and roles (their forms are `environment_edit`'s), its
//! latest deployment with the timeline and its actions (deploy, abort, retry), and the plan
//! with its task graph.

use actix_web::{HttpResponse, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::pages::notice;
use crate::http::pages::views::Me;
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};

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
    /// Its nodes, and what the add form offers (`environment_edit`).
    members: crate::http::pages::environment_edit::Members,
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

/// `POST /environments/{id}/deploy`
pub async fn deploy(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
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
    let done = state
        .store(move |s| {
            s.write(|tx| {
                if abort {
                    tx.abort_deployment(dep, now)
                } else {
                    tx.retry_deployment(dep, now)
                }
            })
        })
        .await;
    Ok(notice::after(
        &state,
        &format!("/environments/{id}"),
        done,
        |d| {
            if abort {
                format!("Deployment {} aborted: no step starts any more.", d.id)
            } else {
                format!("Deployment {}: its failed steps run again.", d.id)
            }
        },
        if abort { "Not aborted" } else { "Not retried" },
    ))
}
