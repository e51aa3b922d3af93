//! Nailgun's deployment control, for `fuel2` and the old `fuel` CLI: the calls that start a
//! deployment (`PUT /clusters/{id}/changes` with `dry_run` and `noop_run`, `/changes/redeploy`,
//! `/provision?nodes=`, `/deploy?nodes=`, `POST /graphs/execute/`) or stop one
//! (`/stop_deployment`), mapped onto stoker's deployments ([`crate::deployer::Scope`]), and the
//! deployments read back as Nailgun's transactions (`/transactions`, filtered by status and
//! name; one with its `deployment_history`; deleting a finished one), beside the master's own
//! tasks (the snapshot's `dump`). Thin: parse, call the
//! deployer or the store, answer in Nailgun's shapes.

use std::collections::BTreeSet;

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::deployer::{Request, Scope};
use crate::engine::state::Phase;
use crate::http::api::catalog::id_of;
use crate::http::api::deploy::start_request;
use crate::http::api::query;
use crate::http::{ApiError, AppState};
use crate::model::iso;
use crate::store::{Deployment, Run};

/// A deployment as Nailgun's transaction (`objects/serializers/transaction.py`): status
/// `running`, `ready` or `error` (an aborted one is an error that says so; a dry run is
/// ready at once).
pub fn transaction_json(d: &Deployment, total: u64, finished: u64) -> Value {
    let message = match (&d.message, d.status.as_str()) {
        (Some(m), _) => Some(m.as_str()),
        (None, "dry_run") => Some("dry run: recorded what would run, ran nothing"),
        (None, "aborted") => Some("aborted by the operator"),
        (None, "error") => Some("stopped on a failed step"),
        _ => None,
    };
    let status = nailgun_status(&d.status);
    let progress = if matches!(d.status.as_str(), "done" | "dry_run") || total == 0 {
        100
    } else {
        finished * 100 / total
    };
    json!({
        "id": d.id,
        "uuid": format!("stoker-deployment-{}", d.id),
        "name": d.name,
        "cluster": d.cluster_id,
        "status": status,
        "progress": progress,
        "message": message,
        "result": d.result.clone().unwrap_or_else(|| json!({})),
        "dry_run": d.status == "dry_run",
        "graph_type": d.graph_type,
        "parent_id": d.parent_id,
        "time_start": iso(d.created_at),
        "time_end": d.finished_at.map(iso),
    })
}

/// Nailgun's transaction status of a stoker deployment status.
fn nailgun_status(status: &str) -> &'static str {
    match status {
        "running" | "preparing" | crate::store::CHAINING => "running",
        "done" | "dry_run" => "ready",
        _ => "error",
    }
}

#[derive(Debug, Deserialize)]
pub struct TransactionQuery {
    cluster_id: Option<String>,
    statuses: Option<String>,
    transaction_types: Option<String>,
}

/// `GET /api/v1/transactions[?cluster_id=N&statuses=a,b&transaction_types=x,y]`.
pub async fn transactions(
    state: web::Data<AppState>,
    query: web::Query<TransactionQuery>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let cluster = match q.cluster_id.as_deref() {
        None | Some("") => None,
        Some(raw) => Some(id_of(raw, "environment")?),
    };
    let statuses = query::list(q.statuses.as_deref());
    query::known(
        "statuses",
        &statuses,
        &["pending", "running", "ready", "error"],
    )?;
    let types = query::list(q.transaction_types.as_deref());
    let (all, chains) = state
        .store(move |s| {
            s.read(|r| {
                Ok((
                    r.deployments_with_progress(cluster, None)?,
                    r.chains(cluster, None)?,
                ))
            })
        })
        .await?;
    let body: Vec<Value> = all
        .iter()
        .filter(|(d, _, _)| {
            statuses.is_empty() || statuses.iter().any(|s| s == nailgun_status(&d.status))
        })
        .filter(|(d, _, _)| types.is_empty() || types.contains(&d.name))
        .map(|(d, total, finished)| {
            let chain = chains.iter().find(|c| c.parent.id == d.id);
            with_chain(transaction_json(d, *total, *finished), chain)
        })
        .collect();
    let body = with_master_tasks(&state, body, cluster, &statuses, &types).await?;
    Ok(HttpResponse::Ok().json(body))
}

async fn one(state: &AppState, id: i64) -> Result<(Deployment, u64, u64), ApiError> {
    let found = state
        .store(move |s| s.read(|r| r.deployments_with_progress(None, Some(id))))
        .await?;
    found
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::NotFound(format!("transaction {id} not found")))
}

/// `GET /api/v1/transactions/{id}`
pub async fn transaction(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "transaction")?;
    if let Some(task) = master_task(&state, id).await? {
        return Ok(HttpResponse::Ok().json(task));
    }
    Ok(HttpResponse::Ok().json(shown(&state, id).await?))
}

/// `DELETE /api/v1/transactions/{id}[?force=1]`: forget a finished deployment and its runs
/// (what it deployed stays the environment's deployed state). A running one is refused, as
/// Nailgun refuses it without `force`; with `force`, stoker still refuses: the agents are
/// mid-step for it (abort it first, `PUT /clusters/{id}/stop_deployment`).
pub async fn delete_transaction(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "transaction")?;
    let now = crate::clock::now();
    state
        .store(move |s| s.write(|tx| tx.delete_deployment(id, now)))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Debug, Deserialize)]
pub struct HistoryQuery {
    nodes: Option<String>,
    statuses: Option<String>,
    tasks_names: Option<String>,
    include_summary: Option<String>,
}

/// Nailgun's history status of a run status.
fn history_status(status: &str) -> &'static str {
    match status {
        "ok" => "ready",
        "failed" => "error",
        "running" => "running",
        "skipped" => "skipped",
        _ => "pending",
    }
}

/// `GET /api/v1/transactions/{id}/deployment_history[?nodes=&statuses=&tasks_names=
/// &include_summary=1]`: per node and task (or step), its status and times, as
/// `fuel2 task history show` reads them; the task's type and parameters come along as
/// Nailgun's did (`--show-parameters`).
pub async fn deployment_history(
    state: web::Data<AppState>,
    caller: crate::http::access::Caller,
    path: web::Path<String>,
    query: web::Query<HistoryQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "transaction")?;
    let q = query.into_inner();
    let nodes = query::list(q.nodes.as_deref());
    let statuses = query::list(q.statuses.as_deref());
    query::known(
        "statuses",
        &statuses,
        &["pending", "error", "ready", "running", "skipped"],
    )?;
    let names = query::list(q.tasks_names.as_deref());
    let summary = query::flag("include_summary", q.include_summary.as_deref())?;
    let runs = state
        .store(move |s| {
            s.read(|r| match r.deployment(id)? {
                Some(_) => Ok(Some(r.runs(id)?)),
                None => Ok(None),
            })
        })
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("transaction {id} not found")))?;
    // Every run of the deployment: 200,000 at 10,000 nodes.
    crate::http::big_json(move || {
        Ok(runs
            .iter()
            .map(|r| caller.shown(history_record(r, summary)))
            .filter(|h| nodes.is_empty() || nodes.iter().any(|n| h["node_id"] == n.as_str()))
            .filter(|h| statuses.is_empty() || statuses.iter().any(|s| h["status"] == s.as_str()))
            .filter(|h| names.is_empty() || names.iter().any(|n| h["task_name"] == n.as_str()))
            .collect::<Vec<Value>>())
    })
    .await
}

fn history_record(r: &Run, summary: bool) -> Value {
    let task = r.args.get("task");
    let mut h = json!({
        "task_name": r.task.clone().unwrap_or_else(|| format!("{}.{}", r.interface, r.step)),
        "node_id": r.node_id.map_or("null".to_string(), |n| n.to_string()),
        "status": history_status(&r.status),
        "time_start": r.started_at.map(iso),
        "time_end": r.finished_at.map(iso),
        "type": task.and_then(|t| t.get("type")).cloned().unwrap_or(json!("step")),
        "parameters": task
            .and_then(|t| t.get("parameters"))
            .cloned()
            .unwrap_or_else(|| r.args.clone()),
    });
    if summary {
        h["summary"] = json!({
            "attempt": r.attempt,
            "exit_code": r.exit_code,
            "output": r.output_tail,
            "error": r.error,
            "reason": r.reason,
        });
    }
    h
}

#[derive(Debug, Deserialize, Default)]
pub struct StartQuery {
    dry_run: Option<String>,
    noop_run: Option<String>,
    force: Option<String>,
    nodes: Option<String>,
    power_off: Option<String>,
}

impl StartQuery {
    fn flag(&self, name: &str) -> Result<bool, ApiError> {
        let raw = match name {
            "dry_run" => &self.dry_run,
            "noop_run" => &self.noop_run,
            "power_off" => &self.power_off,
            _ => &self.force,
        };
        query::flag(name, raw.as_deref())
    }

    /// A dry run: `dry_run`, or `noop_run` (stoker's tasks have no no-op mode on the node).
    fn dry(&self) -> Result<bool, ApiError> {
        Ok(self.flag("dry_run")? || self.flag("noop_run")?)
    }

    /// `?nodes=1,2,3`: None when absent; given, at least one id.
    fn nodes(&self) -> Result<Option<BTreeSet<i64>>, ApiError> {
        let Some(raw) = self.nodes.as_deref() else {
            return Ok(None);
        };
        let ids = query::ids("nodes", Some(raw))?;
        if ids.is_empty() {
            return Err(ApiError::field("query", "nodes", "no node given"));
        }
        Ok(Some(ids.into_iter().collect()))
    }
}

/// Start `scope` on environment `cluster_id` and answer with the transaction as Nailgun's
/// deferred task handlers do ([`answer_started`]).
pub(crate) async fn start(
    state: &AppState,
    cluster_id: i64,
    scope: Scope,
) -> Result<HttpResponse, ApiError> {
    let started = start_request(
        state,
        Request {
            cluster_id,
            scope,
            empty_ok: true,
            ..Default::default()
        },
    )
    .await?;
    answer_started(state, started.deployment.id).await
}

/// `PUT /api/v1/clusters/{id}/changes[?dry_run=1&noop_run=1]`: deploy what changed (Deploy);
/// a noop run is a dry run: what would run is recorded, nothing runs.
pub async fn changes(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<StartQuery>,
) -> Result<HttpResponse, ApiError> {
    let scope = Scope {
        dry_run: query.dry()?,
        ..Default::default()
    };
    start(&state, id_of(&path, "environment")?, scope).await
}

/// `PUT /api/v1/clusters/{id}/changes/redeploy`: every task again, changed or not.
pub async fn redeploy(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<StartQuery>,
) -> Result<HttpResponse, ApiError> {
    let scope = Scope {
        force: true,
        dry_run: query.dry()?,
        ..Default::default()
    };
    start(&state, id_of(&path, "environment")?, scope).await
}

/// `PUT /api/v1/clusters/{id}/provision?nodes=1,2`: the provisioning phase only, on those
/// nodes (all of the environment's without `nodes`); they end `provisioned`.
pub async fn provision(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<StartQuery>,
) -> Result<HttpResponse, ApiError> {
    let scope = Scope {
        nodes: query.nodes()?,
        phase: Some(Phase::Provision),
        ..Default::default()
    };
    start(&state, id_of(&path, "environment")?, scope).await
}

/// `PUT /api/v1/clusters/{id}/deploy?nodes=1,2[&force=1&noop_run=1]`: the deployment phase
/// only, on those provisioned nodes.
pub async fn deploy_nodes(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<StartQuery>,
) -> Result<HttpResponse, ApiError> {
    let scope = Scope {
        nodes: query.nodes()?,
        phase: Some(Phase::Deploy),
        force: query.flag("force")?,
        dry_run: query.dry()?,
        ..Default::default()
    };
    start(&state, id_of(&path, "environment")?, scope).await
}

/// `PUT /api/v1/clusters/{id}/stop_deployment`: abort the environment's running deployment
/// (its running steps are left to finish on the nodes, their results ignored), or its chain
/// of graphs (its running graph aborted, the graphs after it never started); 202 with the
/// stopped transaction (a chain's parent). Nothing running: 400, as Nailgun.
pub async fn stop_deployment(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let cluster = id_of(&path, "environment")?;
    let now = crate::clock::now();
    let d = state
        .store(move |s| {
            s.write(|tx| {
                if let Some(chain) = tx.stop_chain(cluster, now)? {
                    return Ok(Some(chain));
                }
                match tx.read().running_deployment(cluster)? {
                    Some(d) => Ok(Some(tx.abort_deployment(d.id, now)?)),
                    None => Ok(None),
                }
            })
        })
        .await?
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "environment {cluster} has no deployment running: nothing to stop"
            ))
        })?;
    Ok(HttpResponse::Accepted().json(shown(&state, d.id).await?))
}

/// `PUT /api/v1/clusters/{id}/reset/[?force=1]` (`fuel2 env reset`): every node back to
/// discover, keeping its roles, the environment back to `new` ([`crate::deployer::reset`]);
/// 202 with the `reset_environment` transaction (200 when it was over at once: no node had an
/// OS to erase). Refused while a deployment runs, `force` or not: stop it first.
/// `power_off=1` (the default with `bmc.power_off_released`) powers the nodes off through their
/// BMCs: after their erase, or at once when they have nothing to erase (in the background; each
/// action is in the node's history and the audit log).
pub async fn reset(
    state: web::Data<AppState>,
    caller: crate::http::access::Caller,
    path: web::Path<String>,
    query: web::Query<StartQuery>,
) -> Result<HttpResponse, ApiError> {
    let cluster = id_of(&path, "environment")?;
    query.flag("force")?;
    let power_off = match query.power_off {
        Some(_) => query.flag("power_off")?,
        None => state.bmc.bmcs.power_off_released,
    };
    let now = crate::clock::now();
    let r = crate::http::api::deploy::on_master(&state, move |m| {
        crate::deployer::reset(m, cluster, power_off, now)
    })
    .await?;
    if !r.power_off_now.is_empty() {
        let (runner, store) = (
            std::sync::Arc::clone(&state.bmc),
            std::sync::Arc::clone(&state.store),
        );
        let actor = caller.0.user.clone();
        tokio::task::spawn_blocking(move || {
            let act = crate::bmc::actions::Act::Off;
            runner.bmcs.act_many(&store, &r.power_off_now, act, &actor)
        });
    }
    answer_started(&state, r.deployment.id).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecuteBody {
    cluster: i64,
    graphs: Vec<crate::chains::GraphItem>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    noop_run: bool,
    #[serde(default)]
    force: bool,
    /// Accepted and ignored: stoker's agents report the same either way.
    #[serde(default)]
    #[allow(dead_code)]
    debug: bool,
}

/// `POST /api/v1/graphs/execute/`: run graph types (a release's, a plugin's or an
/// environment's own; `fuel2 graph execute -t A [B ...] [-n NODES] [--dry-run] [--force]`) on
/// the environment's provisioned nodes, one after another ([`crate::chains`]): one graph is
/// one transaction; several are one parent transaction whose children each run one graph.
/// A subset of a graph's tasks (`-T`) is refused naming the field.
pub async fn execute(
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: ExecuteBody = ApiError::parse_fields(&body, "graph execution")?;
    let graphs = crate::chains::check_graphs(&body.graphs, "graphs").map_err(|fields| {
        ApiError::InvalidInput {
            what: "graph execution",
            fields,
        }
    })?;
    let execution = crate::chains::Execution {
        cluster_id: body.cluster,
        graphs,
        dry_run: body.dry_run || body.noop_run,
        force: body.force,
    };
    let chains = std::sync::Arc::clone(&state.chains);
    let now = crate::clock::now();
    let started = crate::http::api::deploy::on_master(&state, move |m| {
        crate::chains::execute(m, &chains, &execution, now)
    })
    .await?;
    crate::http::api::deploy::record_starter(&state, started.id).await;
    answer_started(&state, started.id).await
}

/// A chain's parent as Nailgun's transaction: the progress of its graphs, no graph type of its
/// own (its message, why it ended, is its row's); anything else as it is.
fn with_chain(mut body: Value, chain: Option<&crate::store::Chain>) -> Value {
    if let Some(c) = chain {
        body["progress"] = json!(c.progress());
        body["dry_run"] = json!(c.dry_run);
        body["graph_type"] = Value::Null;
    }
    body
}

/// Transaction `id` as Nailgun's transaction (a chain's parent with its chain's progress).
pub(crate) async fn shown(state: &AppState, id: i64) -> Result<Value, ApiError> {
    let chain = state.store(move |s| s.read(|r| r.chain(id))).await?;
    let (d, total, finished) = one(state, id).await?;
    Ok(with_chain(
        transaction_json(&d, total, finished),
        chain.as_ref(),
    ))
}

/// The answer to a call that started transaction `id`, as Nailgun's `raise_task`: 200 when it
/// is over already (a dry run, an environment with nothing to do, a refused verification),
/// else 202.
pub(crate) async fn answer_started(state: &AppState, id: i64) -> Result<HttpResponse, ApiError> {
    let body = shown(state, id).await?;
    Ok(
        if matches!(body["status"].as_str(), Some("ready" | "error")) {
            HttpResponse::Ok().json(body)
        } else {
            HttpResponse::Accepted().json(body)
        },
    )
}

// ---- the master's own tasks (`store::MasterTask`: Nailgun's `dump`) among the transactions,
// in one id space with the deployments ----

/// A task of the master as Nailgun's transaction: no environment, no graph.
pub fn master_task_json(t: &crate::store::MasterTask) -> Value {
    json!({
        "id": t.id,
        "uuid": format!("stoker-task-{}", t.id),
        "name": t.name,
        "cluster": null,
        "status": t.status,
        "progress": t.progress,
        "message": t.message,
        "result": t.result,
        "dry_run": false,
        "graph_type": null,
        "parent_id": null,
        "time_start": iso(t.created_at),
        "time_end": t.finished_at.map(iso),
    })
}

/// The deployments' transactions (newest first) with the master's tasks the filters select
/// (none when an environment is asked for: they have none), newest first by id.
async fn with_master_tasks(
    state: &AppState,
    deployments: Vec<Value>,
    cluster: Option<i64>,
    statuses: &[String],
    types: &[String],
) -> Result<Vec<Value>, ApiError> {
    if cluster.is_some() {
        return Ok(deployments);
    }
    let tasks = state.store(|s| s.read(|r| r.master_tasks(None))).await?;
    let mut all: Vec<Value> = tasks
        .iter()
        .filter(|t| statuses.is_empty() || statuses.contains(&t.status))
        .filter(|t| types.is_empty() || types.contains(&t.name))
        .map(master_task_json)
        .chain(deployments)
        .collect();
    all.sort_by_key(|t| std::cmp::Reverse(t["id"].as_i64().unwrap_or(0)));
    Ok(all)
}

/// Task `id` of the master, as a transaction, if it is one.
async fn master_task(state: &AppState, id: i64) -> Result<Option<Value>, ApiError> {
    let tasks = state
        .store(move |s| s.read(|r| r.master_tasks(Some(id))))
        .await?;
    Ok(tasks.first().map(master_task_json))
}
