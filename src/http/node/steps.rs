//! Endpoints the node agent calls while its environment deploys: ask for the next run
//! (`/agent/next`), stream a run's output tail, report its result (idempotent by run and
//! attempt; with `claim_next`, the answer also hands out the node's next run when one is due
//! at once, so a chain of steps costs one call a step instead of two), and fetch what graph
//! tasks copy from the master (`/agent/sync` a directory as tar, `/agent/file` one file).
//! Every call needs the node's agent token; a wrong one is refused and logged. Thin:
//! authenticate, call the store, answer.

use std::path::{Component, Path, PathBuf};

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::steps::Location;
use crate::http::{ApiError, AppState};
use crate::store::{Claim, Report, Run, RunResult};

/// How long an agent waits before asking again when nothing is runnable.
const RETRY_AFTER_MS: u64 = 1000;

/// The hash of the request's agent token (`Authorization: Bearer ...`).
fn token_hash(req: &HttpRequest) -> Result<String, ApiError> {
    let token = crate::http::node::agent::bearer(req)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::Unauthorized("an agent token is required (Authorization: Bearer ...)".into())
        })?;
    Ok(crate::http::node::boot::hash_token(&token))
}

/// A token no node has: refused, and logged.
fn refused(req: &HttpRequest) -> ApiError {
    tracing::warn!(peer = ?req.peer_addr(), path = req.path(), "agent token refused");
    ApiError::Unauthorized("the agent token is not valid".into())
}

/// Authenticate the agent and run `f` for its node, in one write of the group writer (an agent
/// call is one trip to the store, committed with the other agents' calls of the moment).
async fn as_agent<T, F>(state: &AppState, req: &HttpRequest, f: F) -> Result<(i64, T), ApiError>
where
    F: FnOnce(&crate::store::WriteTxn<'_>, i64, Location) -> crate::store::Result<T>
        + Send
        + 'static,
    T: Send + 'static,
{
    let hash = token_hash(req)?;
    let now = crate::clock::now();
    let done = state
        .writer
        .write(move |tx| match tx.authenticate_agent(&hash, now)? {
            Some((node, kind)) => Ok(Some((node, f(tx, node, kind)?))),
            None => Ok(None),
        })
        .await?;
    done.ok_or_else(|| refused(req))
}

/// The node the request's agent token belongs to.
async fn authenticate(state: &AppState, req: &HttpRequest) -> Result<i64, ApiError> {
    as_agent(state, req, |_, _, _| Ok(()))
        .await
        .map(|(n, ())| n)
}

/// What an agent gets to run.
pub fn run_json(run: &Run) -> Value {
    let task = run.args.get("task").cloned().unwrap_or(Value::Null);
    json!({
        "id": run.id,
        "attempt": run.attempt,
        "deployment": run.deployment,
        "timeout_s": run.timeout_s,
        "step": {"interface": run.interface, "name": run.step, "args": run.step_args(),
                 "runs_on": run.runs_on.as_str()},
        "task": task,
    })
}

#[derive(Debug, Deserialize)]
struct NextBody {
    node_id: Option<i64>,
    /// How long the agent lets the master hold the call while nothing is due for it, in
    /// seconds (long-poll; at most [`MAX_HOLD_S`]). Without it the answer comes at once and
    /// the agent polls.
    #[serde(default)]
    wait_s: Option<u64>,
}

/// The longest a `next` is held: well within the online window, since the agent's next call
/// is its next sign of life (the node's `last_seen`), and within the agent's own 30 s timeout.
pub const MAX_HOLD_S: u64 = 20;

/// What one claim found, and the call held when nothing was due and the agent let it be.
struct Claimed {
    claim: Claim,
    rotated: bool,
    kind: Location,
    held: Option<tokio::sync::oneshot::Receiver<crate::store::Wake>>,
}

/// What handing out a run may give the agent, minted before the write so that the writer spends
/// no time on randomness or hashing: the installed OS's credential (a configure step binds it
/// to the node) and the node's next agent token (the first run of a deployment rotates to it).
/// One per request (`next`, however often a held call claims again, or `result`); only the
/// hashes ([`HandoutHashes`]) go into the write. The service agent's hello hands out a run the
/// same way ([`super::service`]).
pub(super) struct Handout {
    credential: String,
    token: String,
}

/// The hashes of a [`Handout`], which is all the store keeps.
#[derive(Clone)]
pub(super) struct HandoutHashes {
    credential: String,
    token: String,
}

impl Handout {
    fn mint() -> Result<(Handout, HandoutHashes), ApiError> {
        let (credential, credential_hash) = crate::http::node::service::new_credential()?;
        let (token, token_hash) = crate::http::node::boot::new_token()?;
        Ok((
            Handout { credential, token },
            HandoutHashes {
                credential: credential_hash,
                token: token_hash,
            },
        ))
    }
}

/// A call that may ask for the node's next run in its answer (`claim_next`: a result, the
/// service agent's hello): its [`Handout`], minted only when it asks, and the hashes that go
/// into its write ([`claim_next`]); [`answer_next`] puts what was handed out into its answer.
pub(super) fn asked_next(asks: bool) -> Result<(Option<Handout>, Option<HandoutHashes>), ApiError> {
    if !asks {
        return Ok((None, None));
    }
    let (handout, hashes) = Handout::mint()?;
    Ok((Some(handout), Some(hashes)))
}

/// Inside the write of a call that asked (`hashes`, from [`asked_next`]): the node's next run
/// for its agent of `kind` and whether it rotated the token, when one is due at once.
pub(super) fn claim_next(
    tx: &crate::store::WriteTxn<'_>,
    node: i64,
    kind: Location,
    now: i64,
    hashes: Option<&HandoutHashes>,
) -> crate::store::Result<Option<(Box<Run>, bool)>> {
    let Some(hashes) = hashes else {
        return Ok(None);
    };
    Ok(match claim_for(tx, node, kind, now, hashes)? {
        (Claim::Run(run), rotated) => Some((run, rotated)),
        // Nothing due for this agent at once: it asks `next`, and is held there.
        (Claim::Idle | Claim::Elsewhere { .. }, _) => None,
    })
}

/// Put the run [`claim_next`] handed out into the call's `answer` as `next`.
pub(super) fn answer_next(
    answer: &mut Value,
    state: &AppState,
    req: &HttpRequest,
    node: i64,
    next: Option<(Box<Run>, bool)>,
    handout: Option<&Handout>,
) {
    if let (Some((run, rotated)), Some(handout)) = (next, handout) {
        answer["next"] = run_answer(state, req, node, &run, rotated, handout);
    }
}

/// Claim the node's next run for its agent of `kind`, inside the caller's write: a configure
/// step binds the installed OS's credential, and the first run of a deployment gives the node
/// its next token as pending. Returns the claim and whether the token was rotated (then the
/// answer carries the [`Handout`]'s token).
fn claim_for(
    tx: &crate::store::WriteTxn<'_>,
    node: i64,
    kind: Location,
    now: i64,
    hashes: &HandoutHashes,
) -> crate::store::Result<(Claim, bool)> {
    let claim = tx.claim_run(node, kind, now)?;
    let rotated = match &claim {
        Claim::Run(r) => {
            if r.interface == "deploy" && r.step == "configure" {
                // The installed OS's agent gets its own credential, bound to this node now;
                // only the agent that runs this configure ever sees it.
                tx.bind_os_credential(node, &hashes.credential, now)?;
            }
            tx.rotate_agent_token(node, r.deployment, &hashes.token)?
        }
        Claim::Idle | Claim::Elsewhere { .. } => false,
    };
    Ok((claim, rotated))
}

/// The answer that hands `run` to the node's agent: the run, the installed OS's agent
/// configuration with the handout's credential for a configure step, and the handout's token
/// when the claim rotated it.
fn run_answer(
    state: &AppState,
    req: &HttpRequest,
    node: i64,
    run: &Run,
    rotated: bool,
    handout: &Handout,
) -> Value {
    tracing::debug!(node, run = run.id, attempt = run.attempt, step = %run.step_id(),
        task = run.task.as_deref().unwrap_or(""), rotated, "run handed out");
    let mut json_run = run_json(run);
    if run.interface == "deploy" && run.step == "configure" {
        json_run["step"]["args"]["os_agent"] = crate::http::node::service::os_agent(
            state,
            req.app_config().local_addr(),
            node,
            &handout.credential,
        );
    }
    let mut reply = json!({"action": "run", "run": json_run});
    if rotated {
        // Each deployment gets the node a new token; the current one works until the agent
        // first uses this one.
        reply["agent_token"] = json!(handout.token);
    }
    reply
}

/// Claim the node's next run as its agent (one write of the group writer); with `hold`, a
/// call that finds nothing for this agent is parked in that same write, so that a run made due
/// by any later commit wakes it.
async fn claim(
    state: &AppState,
    req: &HttpRequest,
    claimed: Option<i64>,
    hold: bool,
    hashes: HandoutHashes,
) -> Result<(i64, Claimed), ApiError> {
    let now = crate::clock::now();
    let (node, outcome) = as_agent(state, req, move |tx, node, kind| {
        if claimed.is_some_and(|id| id != node) {
            return Ok(None);
        }
        let (claim, rotated) = claim_for(tx, node, kind, now, &hashes)?;
        // Nothing for this agent until something else happens: a run becomes due, or the
        // master's own step (a BMC's) ends.
        let waits = matches!(
            claim,
            Claim::Idle
                | Claim::Elsewhere {
                    runs_on: Location::Master,
                    ..
                }
        );
        let held = if hold && waits { tx.park(node) } else { None };
        Ok(Some(Claimed {
            claim,
            rotated,
            kind,
            held,
        }))
    })
    .await?;
    let claimed = outcome
        .ok_or_else(|| ApiError::Unauthorized("node_id does not match the agent token".into()))?;
    Ok((node, claimed))
}

/// `POST /api/v1/agent/next`: the node's next run, or `wait`. With `wait_s`, a call that finds
/// nothing due is held until a run becomes due for the node (then claimed again), the time
/// passes (`wait` with `retry_after_ms` 0: ask again), or the daemon stops; the time held is in
/// `Server-Timing: held;dur=MS`.
pub async fn next(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (claimed, wait_s) = if body.is_empty() {
        (None, None)
    } else {
        let b: NextBody = ApiError::parse_fields(&body, "next request")?;
        (b.node_id, b.wait_s)
    };
    // A held call need not keep its body while it waits (the agents bench showed no change
    // in the daemon's peak from this alone).
    drop(body);
    let hold = wait_s
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s.min(MAX_HOLD_S)));
    let deadline = hold.map(|h| tokio::time::Instant::now() + h);
    let (handout, hashes) = Handout::mint()?;
    let mut held = std::time::Duration::ZERO;
    let mut timed_out = false;
    let (node, claim, rotated, kind) = loop {
        let open = deadline.is_some_and(|d| tokio::time::Instant::now() < d);
        let (node, c) = claim(&state, &req, claimed, open, hashes.clone()).await?;
        let (Some(woken), Some(deadline)) = (c.held, deadline) else {
            break (node, c.claim, c.rotated, c.kind);
        };
        let since = std::time::Instant::now();
        let wake = tokio::select! {
            w = woken => w.ok(),
            () = tokio::time::sleep_until(deadline) => None,
        };
        held += since.elapsed();
        match wake {
            // Something may be due: claim again (held again while time is left).
            Some(crate::store::Wake::Due) => continue,
            Some(crate::store::Wake::Answer) => {}
            None => timed_out = true,
        }
        break (node, c.claim, c.rotated, c.kind);
    };
    if kind == Location::Ramdisk
        && let Claim::Elsewhere {
            runs_on: Location::Os,
            ..
        } = &claim
    {
        // The bootstrap's agent asks while the node's next run waits for the installed OS:
        // it did not reboot to its disk. A node with a BMC is rebooted through it.
        state.bmc.reboot_to_disk(node);
    }
    let idle_ms = match kind {
        Location::Os => crate::http::node::service::HEARTBEAT_S * 1000,
        _ => RETRY_AFTER_MS,
    };
    // Held until its time was up: it may ask again at once (and be held again).
    let retry_ms = if timed_out { 0 } else { idle_ms };
    let mut answer = HttpResponse::Ok();
    if !held.is_zero() {
        answer.insert_header((
            "server-timing",
            format!("held;dur={:.1}", held.as_secs_f64() * 1000.0),
        ));
        answer
            .extensions_mut()
            .insert(crate::http::measure::Held(held));
    }
    Ok(answer.json(match claim {
        Claim::Run(run) => run_answer(&state, &req, node, &run, rotated, &handout),
        Claim::Idle => json!({"action": "wait", "retry_after_ms": retry_ms}),
        Claim::Elsewhere { run_id, runs_on } => {
            let why = format!(
                "run {run_id} is due on {}, and this agent runs on {}",
                runs_on.describe(),
                kind.describe()
            );
            tracing::info!(node, run = run_id, "{why}");
            json!({"action": "wait", "retry_after_ms": retry_ms, "reason": why})
        }
    }))
}

#[derive(Debug, Deserialize)]
struct ResultBody {
    attempt: u32,
    ok: bool,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    output_tail: String,
    #[serde(default)]
    error: Option<String>,
    /// What the step reported beside its output (a network probe: the frames it heard).
    #[serde(default)]
    report: Option<Value>,
    /// Hand out the node's next run in the answer when one is due for this agent at once
    /// (`next`, as `/agent/next` would answer it, never held): the agent's next call saved.
    /// An agent about to reboot does not ask, since it would not run what it was handed.
    #[serde(default)]
    claim_next: bool,
}

fn run_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::BadRequest(format!("run id must be a number, not {raw:?}")))
}

/// `POST /api/v1/agent/runs/{id}/result`
pub async fn result(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let b: ResultBody = ApiError::parse_fields(&body, "result")?;
    let result = RunResult {
        attempt: b.attempt,
        ok: b.ok,
        exit_code: b.exit_code,
        output_tail: b.output_tail,
        error: b.error.clone(),
        report: b.report,
    };
    let now = crate::clock::now();
    let (handout, hashes) = asked_next(b.claim_next)?;
    let (node, (report, next)) = as_agent(&state, &req, move |tx, node, kind| {
        let report = tx.report_run(id, node, &result, now)?;
        let next = match report {
            Report::Accepted | Report::Duplicate => {
                claim_next(tx, node, kind, now, hashes.as_ref())?
            }
            Report::Stale => None,
        };
        Ok((report, next))
    })
    .await?;
    match report {
        Report::Accepted | Report::Duplicate => {
            let duplicate = report == Report::Duplicate;
            if b.ok {
                tracing::debug!(node, run = id, duplicate, "run succeeded");
            } else {
                tracing::warn!(node, run = id, duplicate, exit_code = ?b.exit_code,
                    error = b.error.as_deref().unwrap_or(""), "run failed");
            }
            let mut answer = json!({"accepted": true});
            answer_next(&mut answer, &state, &req, node, next, handout.as_ref());
            Ok(HttpResponse::Ok().json(answer))
        }
        Report::Stale => Err(ApiError::Conflict(format!(
            "run {id} attempt {} is not the run's current attempt, or the run is no longer active",
            b.attempt
        ))),
    }
}

#[derive(Debug, Deserialize)]
struct OutputBody {
    attempt: u32,
    tail: String,
}

/// `POST /api/v1/agent/runs/{id}/output`
pub async fn output(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    let b: OutputBody = ApiError::parse(&body)?;
    as_agent(&state, &req, move |tx, node, _| {
        tx.run_output(id, node, b.attempt, &b.tail)
    })
    .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A path under the data directory's `plugins/` from what a task names: `rsync://HOST:/plugins/
/// NAME/DIR/`, `/plugins/NAME/...`, or `plugins/NAME/...`. `..` and other escapes are refused.
fn plugin_path(data_dir: &Path, src: &str) -> Result<PathBuf, ApiError> {
    let rest = match src.strip_prefix("rsync://") {
        Some(r) => r.split_once(':').map_or(r, |(_, p)| p),
        None => src,
    };
    let rest = rest.trim_start_matches('/');
    let Some(inner) = rest.strip_prefix("plugins/") else {
        return Err(ApiError::BadRequest(format!(
            "src: only files under /plugins/ are served, not {src:?}"
        )));
    };
    let rel = Path::new(inner);
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(ApiError::BadRequest(format!(
            "src: {src:?} leaves the plugins directory"
        )));
    }
    let root = data_dir.join("plugins");
    let path = root.join(rel);
    // Symlinks must not lead out either.
    if let (Ok(real), Ok(root)) = (path.canonicalize(), root.canonicalize())
        && !real.starts_with(&root)
    {
        return Err(ApiError::BadRequest(format!(
            "src: {src:?} leaves the plugins directory"
        )));
    }
    Ok(path)
}

#[derive(Debug, Deserialize)]
pub struct SrcQuery {
    src: Option<String>,
    path: Option<String>,
}

/// `GET /api/v1/agent/sync?src=rsync://MASTER:/plugins/NAME/DIR/`: the directory as a tar.
pub async fn sync(
    state: web::Data<AppState>,
    req: HttpRequest,
    query: web::Query<SrcQuery>,
) -> Result<HttpResponse, ApiError> {
    authenticate(&state, &req).await?;
    let src = query
        .into_inner()
        .src
        .ok_or_else(|| ApiError::BadRequest("src: missing".into()))?;
    let dir = plugin_path(&state.data_dir, &src)?;
    if !dir.is_dir() {
        return Err(ApiError::NotFound(format!(
            "{src} is not a directory on the master"
        )));
    }
    let bytes = crate::http::off_worker(move || -> std::io::Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        b.follow_symlinks(false);
        b.append_dir_all(".", &dir)?;
        b.into_inner()
    })
    .await?
    .map_err(|e| ApiError::Internal(format!("cannot pack {src}: {e}")))?;
    Ok(HttpResponse::Ok()
        .content_type("application/x-tar")
        .body(bytes))
}

/// `GET /api/v1/agent/file?path=/plugins/NAME/FILE`: one file's bytes.
pub async fn file(
    state: web::Data<AppState>,
    req: HttpRequest,
    query: web::Query<SrcQuery>,
) -> Result<HttpResponse, ApiError> {
    authenticate(&state, &req).await?;
    let q = query.into_inner();
    let src = q
        .path
        .or(q.src)
        .ok_or_else(|| ApiError::BadRequest("path: missing".into()))?;
    let path = plugin_path(&state.data_dir, &src)?;
    let bytes = crate::http::off_worker(move || std::fs::read(path))
        .await?
        .map_err(|_| ApiError::NotFound(format!("{src} is not a file on the master")))?;
    Ok(HttpResponse::Ok()
        .content_type("application/octet-stream")
        .body(bytes))
}
