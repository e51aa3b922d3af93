//! An environment's deployment history: every deployment with its id, kind, status, start,
//! duration and counts, linking to its page. The environment page shows the newest few
//! (`web/templates/parts/deployments.html`); `/environments/{id}/deployments` pages through
//! all of them.

use actix_web::{HttpRequest, web};
use askama::Template;
use askama_web::WebTemplate;

use crate::http::pages::runs::deployment_badge;
use crate::http::pages::views::{Me, ago, duration, utc};
use crate::http::pages::{PageError, VERSION};
use crate::http::{ApiError, AppState};
use crate::store::DeploymentSummary;

/// Deployments on one page of the history.
pub const PER_PAGE: u32 = 50;

/// How many the environment page shows.
pub const ON_ENVIRONMENT_PAGE: u32 = 5;

/// One deployment of the history.
pub struct DeploymentRow {
    pub id: i64,
    /// `default · deployment`.
    pub kind: String,
    pub status: String,
    pub badge: &'static str,
    pub started: String,
    pub started_utc: String,
    pub started_by: String,
    pub took: String,
    /// `20 of 20 steps done · 1 failed`.
    pub counts: String,
}

impl DeploymentRow {
    pub fn new(s: &DeploymentSummary, now: i64) -> DeploymentRow {
        let d = &s.deployment;
        let c = &s.counts;
        let mut counts = if c.total == 0 {
            "no steps".to_string()
        } else {
            format!("{} of {} steps done", c.done(), c.total)
        };
        for (n, what) in [
            (c.running, "running"),
            (c.failed, "failed"),
            (c.of_deleted_nodes, "of deleted nodes"),
        ] {
            if n > 0 {
                counts.push_str(&format!(" · {n} {what}"));
            }
        }
        DeploymentRow {
            id: d.id,
            kind: if d.status == crate::store::CHAINING || d.name == crate::store::CHAIN_NAME {
                "graphs one after another".to_string()
            } else {
                format!("{} · {}", d.graph_type, d.name)
            },
            status: d.status.clone(),
            badge: deployment_badge(&d.status),
            started: ago(d.created_at, now),
            started_utc: utc(d.created_at),
            started_by: s.started_by.clone().unwrap_or_default(),
            took: match d.finished_at {
                Some(f) => duration(f - d.created_at),
                None if d.status == "running" => format!("{} so far", duration(now - d.created_at)),
                None => String::new(),
            },
            counts,
        }
    }
}

/// A page of an environment's deployments.
pub struct History {
    pub rows: Vec<DeploymentRow>,
    pub total: u64,
}

impl History {
    /// It holds fewer deployments than the environment has.
    pub fn more(&self) -> bool {
        self.total > self.rows.len() as u64
    }
}

/// Deployments `offset..offset+limit` of environment `id`, newest first.
pub async fn history(
    state: &AppState,
    id: i64,
    limit: u32,
    offset: u32,
) -> Result<History, ApiError> {
    let (found, total) = state
        .store(move |s| s.read(|r| r.deployment_history(id, limit, offset)))
        .await?;
    let now = crate::clock::now();
    Ok(History {
        rows: found.iter().map(|s| DeploymentRow::new(s, now)).collect(),
        total,
    })
}

#[derive(Template, WebTemplate)]
#[template(path = "deployments.html")]
pub struct DeploymentsPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    id: i64,
    name: String,
    history: History,
    /// `Deployments 51–100 of 230`.
    range: String,
    prev: Option<u32>,
    next: Option<u32>,
}

/// `GET /environments/{id}/deployments[?page=N]`: every deployment of the environment, newest
/// first, [`PER_PAGE`] to a page.
pub async fn deployments(
    state: web::Data<AppState>,
    me: Me,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result<DeploymentsPage, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "environment")?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(req.query_string())
        .map_err(|e| ApiError::BadRequest(format!("the query string is not readable: {e}")))?;
    let mut page = 1u32;
    for (k, v) in pairs {
        match k.as_str() {
            "page" if v.is_empty() => {}
            "page" => {
                page = v
                    .parse()
                    .ok()
                    .filter(|p| (1..=1_000_000).contains(p))
                    .ok_or_else(|| {
                        ApiError::BadRequest(format!("page: {v:?} is not a page number"))
                    })?;
            }
            other => {
                return Err(ApiError::BadRequest(format!(
                    "{other}: not a parameter of this page (page)"
                ))
                .into());
            }
        }
    }
    let name = state
        .store(move |s| s.read(|r| r.cluster(id)))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("environment {id} not found")))?
        .name;
    let offset = (page - 1).saturating_mul(PER_PAGE);
    let history = history(&state, id, PER_PAGE, offset).await?;
    if page > 1 && history.rows.is_empty() {
        return Err(ApiError::NotFound(format!(
            "page {page}: environment {id} has {} deployments, {PER_PAGE} to a page",
            history.total
        ))
        .into());
    }
    let shown = history.rows.len() as u64;
    let range = if history.total > u64::from(PER_PAGE) {
        format!(
            "Deployments {}–{} of {}",
            u64::from(offset) + 1,
            u64::from(offset) + shown,
            history.total
        )
    } else {
        String::new()
    };
    let next = (u64::from(offset) + shown < history.total).then_some(page + 1);
    Ok(DeploymentsPage {
        nav: "environments",
        version: VERSION,
        me,
        id,
        name,
        history,
        range,
        prev: (page > 1).then(|| page - 1),
        next,
    })
}
