//! What operators read of deployments beyond one environment's list (the CLI's `deployment
//! list|logs` and `--follow`): every deployment with its runs counted, and one deployment's
//! runs filtered by node, task or step, and status, with their output (a node's logs) or
//! without it (`brief`: a follower's poll). Runs come in pages of at most [`MAX_PAGE`]
//! (`offset`, `limit`; `next_offset` says where the next page starts, null after the last), so
//! a 10,000-node deployment's 200,000 runs never make one answer. Thin: parse the query, one
//! store read, render.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use crate::http::api::catalog::id_of;
use crate::http::api::deploy::{deployment_counted, deployment_json_waiting};
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::store::RunFilter;

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    cluster_id: Option<String>,
}

/// `GET /api/v1/deployments[?cluster_id=N]`: deployments newest first, of one environment or
/// of all, each with its runs counted by status.
pub async fn list(
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let cluster = match query.cluster_id.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(raw) => Some(
            raw.parse::<i64>()
                .ok()
                .filter(|id| *id > 0)
                .ok_or_else(|| {
                    ApiError::field(
                        "query",
                        "cluster_id",
                        format!("{raw:?} is not an environment id"),
                    )
                })?,
        ),
    };
    let all = state
        .store(move |s| s.read(|r| r.deployments_counted(cluster)))
        .await?;
    let body: Vec<_> = all
        .iter()
        .map(|(d, counts)| deployment_counted(d, *counts))
        .collect();
    Ok(HttpResponse::Ok().json(body))
}

#[derive(Debug, Deserialize)]
pub struct RunsQuery {
    node_id: Option<String>,
    task: Option<String>,
    status: Option<String>,
    brief: Option<String>,
    offset: Option<String>,
    limit: Option<String>,
}

/// Most runs one answer carries (and the page size when `limit` is not given): a page of full
/// runs is a few MB of JSON.
pub const MAX_PAGE: usize = 10_000;

/// `offset` and `limit` from the query: non-negative integers, `limit` at most [`MAX_PAGE`]
/// (default [`MAX_PAGE`]).
pub fn page(offset: Option<&str>, limit: Option<&str>) -> Result<(usize, usize), ApiError> {
    let number = |name: &str, raw: Option<&str>| -> Result<Option<usize>, ApiError> {
        match raw.map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => v.parse::<usize>().map(Some).map_err(|_| {
                ApiError::field(
                    "query",
                    name,
                    format!("{v:?} is not a non-negative integer"),
                )
            }),
        }
    };
    let offset = number("offset", offset)?.unwrap_or(0);
    let limit = match number("limit", limit)? {
        None => MAX_PAGE,
        Some(0) => return Err(ApiError::field("query", "limit", "must be at least 1")),
        Some(n) if n > MAX_PAGE => {
            return Err(ApiError::field(
                "query",
                "limit",
                format!("{n} is more than {MAX_PAGE} runs a page"),
            ));
        }
        Some(n) => n,
    };
    Ok((offset, limit))
}

/// The page `runs_where` read with one run more than `limit` asked for: the runs to show and
/// where the next page starts (none after the last).
pub fn paged<T>(mut runs: Vec<T>, offset: usize, limit: usize) -> (Vec<T>, Option<usize>) {
    if runs.len() > limit {
        runs.truncate(limit);
        (runs, Some(offset.saturating_add(limit)))
    } else {
        (runs, None)
    }
}

/// The run statuses a filter may name.
const STATUSES: &[&str] = &["pending", "running", "ok", "failed", "skipped"];

fn filter(q: RunsQuery) -> Result<RunFilter, ApiError> {
    let node_id = match q.node_id.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(raw) => match query::ids("node_id", Some(raw))?.as_slice() {
            [one] => Some(*one),
            _ => {
                return Err(ApiError::field(
                    "query",
                    "node_id",
                    format!("expected one node id, found {raw:?}"),
                ));
            }
        },
    };
    let statuses = query::list(q.status.as_deref());
    query::known("status", &statuses, STATUSES)?;
    let task = q
        .task
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    if let Some(t) = &task
        && t.len() > 200
    {
        return Err(ApiError::field("query", "task", "longer than 200 bytes"));
    }
    let (offset, limit) = page(q.offset.as_deref(), q.limit.as_deref())?;
    Ok(RunFilter {
        node_id,
        task,
        statuses,
        brief: query::flag("brief", q.brief.as_deref())?,
        offset,
        // one more than shown: whether there is a next page
        limit: Some(limit + 1),
    })
}

/// `GET /api/v1/deployments/{id}/runs[?node_id=N&task=NAME&status=failed,running&brief=1
/// &offset=M&limit=L]`: `{"deployment": {..., "runs": counts, "waiting"}, "runs": [...],
/// "next_offset": N|null}`, the runs that match (`task` a graph task's id or a step's
/// `interface.step`), by node then order, one page of them; `brief` leaves out each run's
/// arguments, dependencies, output tail and report. Task data holds the environment's
/// secrets: masked for roles below admin.
pub async fn runs(
    state: web::Data<AppState>,
    caller: crate::http::access::Caller,
    path: web::Path<String>,
    query: web::Query<RunsQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "deployment")?;
    let filter = filter(query.into_inner())?;
    let (brief, offset) = (filter.brief, filter.offset);
    let limit = filter.limit.unwrap_or(MAX_PAGE + 1) - 1;
    let found = state
        .store(move |s| {
            s.read(|r| match r.deployment(id)? {
                Some(d) => {
                    let waiting = r.waiting_agents(&d, crate::clock::now())?;
                    Ok(Some((
                        d,
                        r.run_counts(id)?,
                        waiting,
                        r.runs_where(id, &filter)?,
                    )))
                }
                None => Ok(None),
            })
        })
        .await?;
    let (d, counts, waiting, runs) =
        found.ok_or_else(|| ApiError::NotFound(format!("deployment {id} not found")))?;
    crate::http::big_json(move || {
        let (runs, next) = paged(runs, offset, limit);
        let deployment = deployment_json_waiting(&d, counts, &waiting);
        let mut runs =
            serde_json::to_value(&runs).map_err(|e| ApiError::Internal(e.to_string()))?;
        if brief && let Some(items) = runs.as_array_mut() {
            for run in items.iter_mut().filter_map(|r| r.as_object_mut()) {
                for heavy in ["args", "deps", "output_tail", "report"] {
                    run.remove(heavy);
                }
            }
        }
        Ok(caller.shown(json!({"deployment": deployment, "runs": runs, "next_offset": next})))
    })
    .await
}
