//! The operator's deployment endpoints: Deploy an environment (with optional per-deployment
//! user steps, like Ironic's deploy templates), list its deployments, read one with its runs
//! (start, end, result, output tail; a page of them at a time), abort it and retry it. Thin: parse, call
//! [`crate::deployer`] or the store, answer.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::liveness::Waiting;
use crate::engine::steps::UserStep;
use crate::http::api::catalog::id_of;
use crate::http::api::{query, runs};
use crate::http::{ApiError, AppState};
use crate::store::{Deployment, RunCounts, RunFilter};

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DeployBody {
    #[serde(default)]
    steps: Vec<UserStep>,
}

/// A deployment with its runs counted by status (`runs`: the runs of nodes deleted since
/// included, `of_deleted_nodes` of them; see [`RunCounts`]), what it ran (`name`:
/// `deployment`, `provision`, ...; `graph_type`) and when.
pub fn deployment_counted(d: &Deployment, counts: RunCounts) -> Value {
    json!({
        "id": d.id,
        "cluster_id": d.cluster_id,
        "name": d.name,
        "graph_type": d.graph_type,
        "status": d.status,
        "created_at": d.created_at,
        "finished_at": d.finished_at,
        "runs": counts,
    })
}

/// [`deployment_counted`] with `waiting`: the nodes whose due step waits for an agent that has
/// gone silent, each with its node's id and name and its `message` ("waiting for the agent of
/// node-3 since …", by the node's name), and
/// `message`, those joined (absent when nothing waits).
pub fn deployment_json_waiting(d: &Deployment, counts: RunCounts, waiting: &[Waiting]) -> Value {
    let mut body = deployment_counted(d, counts);
    body["waiting"] = json!(waiting);
    if !waiting.is_empty() {
        body["message"] = json!(
            waiting
                .iter()
                .map(|w| w.message.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    body
}

/// The Deploy body: empty, or `{"steps": [...]}`. A malformed step is refused with its path
/// (`steps[0].priority: invalid type ...`); its arguments are checked against the steps'
/// `argsinfo` when the deployment is planned ([`crate::engine::steps::plan`]).
fn parse_body(body: &[u8]) -> Result<DeployBody, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(DeployBody::default());
    }
    ApiError::parse_fields(body, "deploy request")
}

/// `POST /api/v1/clusters/{id}/deploy`
pub async fn deploy(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let body = parse_body(&body)?;
    let started = start(&state, id, body.steps).await?;
    let d = started.deployment;
    // The counts from the store's tallies, not from every run read back: at 10,000 nodes that
    // is 200,000 runs with their arguments, about 480 MB for a moment (heaptrack).
    let deployment = d.id;
    let counts = state
        .store(move |s| s.read(|r| r.run_counts(deployment)))
        .await?;
    Ok(HttpResponse::Accepted()
        // As the plan's own answer says it: whether the plan was the kept one.
        .insert_header(("x-stoker-plan-cached", started.plan_cached.to_string()))
        .json(deployment_counted(&d, counts)))
}

/// Start deploying environment `id` (everything that changed, on every node) off the async
/// runtime (planning takes a while); shared by the API and the dashboard's Deploy button.
pub async fn start(
    state: &AppState,
    id: i64,
    steps: Vec<UserStep>,
) -> Result<crate::deployer::Started, ApiError> {
    start_request(
        state,
        crate::deployer::Request {
            cluster_id: id,
            steps,
            ..Default::default()
        },
    )
    .await
}

/// Start `req` off the async runtime; `req.now` is set here.
/// Run `f` with the master's deployment parts, off the async runtime (it plans and writes).
pub async fn on_master<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&crate::deployer::Master<'_>) -> Result<T, crate::deployer::DeployError>
    + Send
    + 'static,
) -> Result<T, ApiError> {
    let store = std::sync::Arc::clone(&state.store);
    let data_dir = state.data_dir.clone();
    let settings = state.deploy.clone();
    let plans = std::sync::Arc::clone(&state.plans);
    let writer = state.writer.clone();
    Ok(crate::http::off_worker(move || {
        f(&crate::deployer::Master {
            store: &store,
            writer: &writer,
            data_dir: &data_dir,
            settings: &settings,
            plans: &plans,
        })
    })
    .await??)
}

pub async fn start_request(
    state: &AppState,
    mut req: crate::deployer::Request,
) -> Result<crate::deployer::Started, ApiError> {
    req.now = crate::clock::now();
    let cluster = req.cluster_id;
    let d = on_master(state, move |master| crate::deployer::start(master, &req)).await?;
    record_starter(state, d.deployment.id).await;
    tracing::info!(
        cluster,
        deployment = d.deployment.id,
        plan_cached = d.plan_cached,
        status = d.deployment.status,
        "deployment started"
    );
    Ok(d)
}

/// Record the request's user as who started deployment (or chain) `id`, for its page; a
/// failure is logged, never the request's answer.
pub async fn record_starter(state: &AppState, id: i64) {
    let Some(user) = crate::http::access::acting_user() else {
        return;
    };
    if let Err(e) = state
        .store(move |s| s.write(|tx| tx.set_deployment_starter(id, &user)))
        .await
    {
        tracing::warn!(deployment = id, error = %e, "who started the deployment is not recorded");
    }
}

/// `GET /api/v1/clusters/{id}/deployments`, newest first.
pub async fn list(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "environment")?;
    let all = state
        .store(move |s| {
            s.read(|r| {
                let mut out = Vec::new();
                let now = crate::clock::now();
                for (d, counts) in r.deployments_counted(Some(id))? {
                    let waiting = r.waiting_agents(&d, now)?;
                    out.push(deployment_json_waiting(&d, counts, &waiting));
                }
                Ok(out)
            })
        })
        .await?;
    Ok(HttpResponse::Ok().json(all))
}

/// `GET /api/v1/deployments/{id}[?brief=1&offset=M&limit=L]`: the deployment, its runs
/// counted by status (`runs`) and as `steps` (by node then order, a page of at most
/// [`runs::MAX_PAGE`]: every run of a deployment of up to 500 nodes of 20 steps), with
/// `steps_total` and `next_offset` (null after the last page).
/// Task data holds the environment's secrets: masked for roles below admin.
pub async fn show(
    state: web::Data<AppState>,
    caller: crate::http::access::Caller,
    path: web::Path<String>,
    query: web::Query<ShowQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "deployment")?;
    let (offset, limit) = runs::page(query.offset.as_deref(), query.limit.as_deref())?;
    let filter = RunFilter {
        brief: query::flag("brief", query.brief.as_deref())?,
        offset,
        limit: Some(limit + 1),
        ..RunFilter::default()
    };
    let found = state
        .store(move |s| {
            s.read(|r| match r.deployment(id)? {
                Some(d) => {
                    let waiting = r.waiting_agents(&d, crate::clock::now())?;
                    Ok(Some((
                        d,
                        r.run_counts(id)?,
                        r.runs_where(id, &filter)?,
                        waiting,
                    )))
                }
                None => Ok(None),
            })
        })
        .await?;
    let (d, counts, steps, waiting) =
        found.ok_or_else(|| ApiError::NotFound(format!("deployment {id} not found")))?;
    crate::http::big_json(move || {
        let (steps, next) = runs::paged(steps, offset, limit);
        let mut body = deployment_json_waiting(&d, counts, &waiting);
        // The steps listed: deleted nodes' runs are counted, not listed.
        body["steps_total"] = json!(counts.listed());
        body["next_offset"] = json!(next);
        if caller.reads_whole() {
            // Written straight from the runs: a page of 10,000 is not made a tree first.
            return Ok(Shown::Whole { doc: body, steps });
        }
        body["steps"] =
            serde_json::to_value(&steps).map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(Shown::Masked(caller.shown(body)))
    })
    .await
}

/// A deployment with its page of runs, as [`show`] answers it: for an admin, the runs
/// serialized as they are; for any other role, the whole document masked.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Shown {
    Whole {
        #[serde(flatten)]
        doc: serde_json::Value,
        steps: Vec<crate::store::Run>,
    },
    Masked(serde_json::Value),
}

/// `GET /api/v1/deployments/{id}` takes the runs' paging and `brief` as `/runs` does.
#[derive(Debug, serde::Deserialize)]
pub struct ShowQuery {
    brief: Option<String>,
    offset: Option<String>,
    limit: Option<String>,
}

/// `POST /api/v1/deployments/{id}/abort`
pub async fn abort(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    change(&state, &path, |tx, id, now| tx.abort_deployment(id, now)).await
}

/// `POST /api/v1/deployments/{id}/retry`: failed runs again, the rest where they were.
pub async fn retry(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    change(&state, &path, |tx, id, now| tx.retry_deployment(id, now)).await
}

/// Apply `f` (abort or retry) to deployment `path` and answer with it and its runs.
async fn change(
    state: &AppState,
    path: &str,
    f: fn(&crate::store::WriteTxn<'_>, i64, i64) -> crate::store::Result<crate::store::Deployment>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(path, "deployment")?;
    let now = crate::clock::now();
    let (d, counts) = state
        .store(move |s| s.write(|tx| Ok((f(tx, id, now)?, tx.read().run_counts(id)?))))
        .await?;
    Ok(HttpResponse::Ok().json(deployment_counted(&d, counts)))
}
