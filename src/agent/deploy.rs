//! The agent's deploy loop: ask the master for work (`next`), execute the run it hands out,
//! stream the output tail while it runs, report the result, repeat (protocol in issue 7). It
//! survives a master that restarts or loses responses: network errors, 5xx and 429 are retried
//! with capped backoff forever, a result is kept (and persisted in the state directory) until
//! the master acknowledges it, so no step runs twice because a report was lost. A refused token
//! (401) ends the loop after a few tries. Also [`simulate`], a whole simulated node for demos and
//! tests. The HTTP layer is the small [`MasterApi`] trait, so failure injection can drive the
//! loop with a fake master; steps themselves live in `steps` and `exec`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::agent::client::{AgentError, Backoff, Master, hello_with_credentials};
use crate::agent::exec::{Context, Executor, Fetch, FetchError, Tail};
use crate::agent::inventory;
use crate::agent::protocol::{
    NextReply, NextRequest, OutputReport, ResultAck, ResultRequest, Run, RunResult,
};

/// The token file, in the state directory.
pub const TOKEN_FILE: &str = "stoker-agent.token";
/// The last run's result and whether the master has it, in the state directory.
pub const RUN_STATE_FILE: &str = "stoker-agent.run.json";

/// How long the master may hold an ask for work while nothing is due (long-poll), in seconds:
/// well within the API calls' 30 s timeout. The master answers as soon as a run is due.
pub const HOLD_S: u64 = 20;

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("simulated node {sandbox}: its installed OS cannot start: {detail}")]
    InstalledOs { sandbox: PathBuf, detail: String },
    #[error("master {url} refused the agent token {tries} times: {message}")]
    Unauthorized {
        url: String,
        tries: u32,
        message: String,
    },
    #[error("master {url} refused {what} {tries} times (HTTP {status}): {message}")]
    Refused {
        url: String,
        what: &'static str,
        status: u16,
        tries: u32,
        message: String,
    },
    #[error("cannot keep the agent state in {path}: {source}")]
    State {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the master gave no agent token, so the node cannot ask for work")]
    NoToken,
    #[error(transparent)]
    Hello(#[from] AgentError),
}

/// One call's outcome, as the loop cares about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call<T> {
    Ok(T),
    /// 401: the token was refused.
    Unauthorized(String),
    /// 409: the run is no longer active or the attempt is stale.
    Conflict(String),
    /// Another 4xx: retrying the same request would not help.
    Refused(u16, String),
    /// Network error, 5xx, 429: the master may be restarting; try again later.
    Retry(String),
}

/// The master as the loop sees it. [`HttpMaster`] is the real one.
pub trait MasterApi: Fetch {
    /// Where the master is, for messages.
    fn url(&self) -> String;
    fn next(&self, node_id: i64) -> Call<NextReply>;
    /// Send the output tail so far; failures are ignored by the loop.
    fn output(&self, run_id: i64, report: &OutputReport);
    /// Report a result; with `claim_next`, the answer may hand out the node's next run
    /// ([`ResultAck::next`]), which saves the agent its `next` call.
    fn result(&self, run_id: i64, result: &RunResult, claim_next: bool) -> Call<ResultAck>;
    /// Close the connections kept open to the master: the machine is about to reboot. A
    /// forced reboot sends no FIN, so the master would keep each dead connection, with its
    /// buffers and file descriptor, for its keep-alive (30 s) while a whole rack reboots. Later
    /// calls open new ones (a reboot that failed is reported).
    fn hang_up(&self) {}
    /// Called after a 401: pick up a token saved meanwhile (by a heartbeat hello); true when
    /// the token changed, so the call is worth repeating at once.
    fn reload_token(&self) -> bool {
        false
    }
    /// The master rotated the node's token: keep it (and save it) for every later call.
    fn adopt_token(&self, _token: &str) {}
}

/// How the loop waits and gives up.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Consecutive refusals (401, other 4xx on `next`) before the loop gives up.
    pub refusals: u32,
    /// The least time between two output reports of one run.
    pub output_every: Duration,
    /// The longest `retry_after_ms` honoured.
    pub max_wait: Duration,
}

impl Default for LoopConfig {
    fn default() -> LoopConfig {
        LoopConfig {
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            refusals: 3,
            output_every: Duration::from_secs(1),
            max_wait: Duration::from_secs(60),
        }
    }
}

/// Why the loop ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopEnd {
    /// `stop` was set.
    Stopped,
    /// `power.reboot_to_disk` was reported: a sandboxed node's life ends here; a real node is
    /// rebooting.
    RebootedToDisk,
    /// A graph task of type `reboot` was reported: the node is rebooting, and comes back
    /// through the network boot to carry on with its next run.
    Rebooted,
    /// An `erase_node` task (the deletion graph) was reported: the node's disk has no OS
    /// left; it reboots into the network boot and is discovered again.
    Erased,
}

/// The last run's result, kept until the master acknowledged it and then as a guard against
/// executing the same `(id, attempt)` twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Kept {
    run_id: i64,
    attempt: u32,
    result: RunResult,
    reported: bool,
    /// The run was a successful `power.reboot_to_disk` or `reboot` task: once reported, the
    /// node reboots (never before: a reboot whose result was never sent would be handed out,
    /// and reboot the node, again and again).
    reboot: bool,
    /// The reboot is a graph task's, not the last step's.
    #[serde(default)]
    task_reboot: bool,
    /// A `reboot` task's result waits, unreported, for the node to come back: the boot id
    /// before the reboot. Once the agent starts under another one, it reports the task done.
    #[serde(default)]
    boot_before: Option<String>,
    /// An `erase_node` task: once reported, the node reboots into the network boot.
    #[serde(default)]
    erase: bool,
}

struct StateDir {
    path: PathBuf,
}

impl StateDir {
    fn file(&self) -> PathBuf {
        self.path.join(RUN_STATE_FILE)
    }

    fn err(&self, source: std::io::Error) -> DeployError {
        DeployError::State {
            path: self.path.clone(),
            source,
        }
    }

    fn load(&self) -> Option<Kept> {
        let text = std::fs::read_to_string(self.file()).ok()?;
        match serde_json::from_str(&text) {
            Ok(kept) => Some(kept),
            Err(e) => {
                tracing::warn!(file = %self.file().display(), "ignoring an unreadable run state: {e}");
                None
            }
        }
    }

    /// Write and fsync beside, then rename: a crash leaves the old or the new state.
    fn save(&self, kept: &Kept) -> Result<(), DeployError> {
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.path)?;
            let tmp = self.path.join(format!("{RUN_STATE_FILE}.tmp"));
            let mut file = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut file, &serde_json::to_vec(kept)?)?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&tmp, self.file())
        };
        write().map_err(|e| self.err(e))
    }
}

/// Sleep `d`, waking early when `stop` is set. Returns false when stopped.
pub(crate) fn nap(d: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + d;
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

/// The loop with its collaborators.
struct Driver<'a, M: MasterApi> {
    api: &'a M,
    node_id: i64,
    executor: &'a Executor,
    state: StateDir,
    stop: &'a AtomicBool,
    cfg: &'a LoopConfig,
    backoff: Backoff,
    refusals: u32,
    /// A run the master handed out before the loop began (with the service agent's hello).
    first: Option<NextReply>,
}

// Lives for one report, as `NextReply` lives for one poll; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Reported {
    /// Taken (or dropped as stale); the next run, when the master handed it out in its answer.
    Done(Option<NextReply>),
    Stopped,
}

impl<M: MasterApi> Driver<'_, M> {
    /// Count a refusal; an error once there were too many in a row.
    fn refused(
        &mut self,
        what: &'static str,
        status: u16,
        message: String,
    ) -> Result<(), DeployError> {
        if status == 401 && self.api.reload_token() {
            tracing::info!("the agent token changed; retrying with the new one");
            return Ok(());
        }
        self.refusals += 1;
        tracing::warn!(
            status,
            tries = self.refusals,
            "master refused {what}: {message}"
        );
        if self.refusals >= self.cfg.refusals {
            let (url, tries) = (self.api.url(), self.refusals);
            return Err(if status == 401 {
                DeployError::Unauthorized {
                    url,
                    tries,
                    message,
                }
            } else {
                DeployError::Refused {
                    url,
                    what,
                    status,
                    tries,
                    message,
                }
            });
        }
        nap(self.backoff.next_delay(), self.stop);
        Ok(())
    }

    /// Send the kept result until the master takes it (2xx) or says it is stale (409).
    fn report(&mut self, kept: &mut Kept) -> Result<Reported, DeployError> {
        let mut handed = None;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(Reported::Stopped);
            }
            // A node about to reboot does not ask for its next run: it would not run it.
            match self.api.result(kept.run_id, &kept.result, !kept.reboot) {
                Call::Ok(ack) => {
                    tracing::info!(
                        run = kept.run_id,
                        attempt = kept.attempt,
                        ok = kept.result.ok,
                        "result reported"
                    );
                    handed = ack.next.filter(|_| !kept.reboot);
                    break;
                }
                Call::Conflict(message) => {
                    tracing::warn!(
                        run = kept.run_id,
                        attempt = kept.attempt,
                        "master dropped the result (409): {message}"
                    );
                    kept.reboot = false;
                    break;
                }
                Call::Refused(status, message) => {
                    tracing::warn!(
                        run = kept.run_id,
                        status,
                        "master refused the result; dropping it: {message}"
                    );
                    kept.reboot = false;
                    break;
                }
                Call::Unauthorized(message) => self.refused("the result", 401, message)?,
                Call::Retry(why) => {
                    let delay = self.backoff.next_delay();
                    tracing::warn!(
                        run = kept.run_id,
                        "cannot report the result: {why}; retrying in {delay:?}"
                    );
                    nap(delay, self.stop);
                }
            }
        }
        self.refusals = 0;
        self.backoff.reset();
        kept.reported = true;
        self.state.save(kept)?;
        Ok(Reported::Done(handed))
    }

    /// Execute a run, streaming its output from a second thread.
    fn execute(&self, run: &Run) -> RunResult {
        let tail = Tail::default();
        let finished = AtomicBool::new(false);
        let started = Instant::now();
        tracing::info!(run = run.id, attempt = run.attempt, step = %format!("{}.{}", run.step.interface, run.step.name), task = ?run.task.as_ref().map(|t| &t.id), "executing");
        let outcome = std::thread::scope(|s| {
            s.spawn(|| {
                let mut sent = 0u64;
                let mut last = Instant::now();
                while !finished.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    if last.elapsed() < self.cfg.output_every {
                        continue;
                    }
                    last = Instant::now();
                    let (version, text) = tail.snapshot();
                    if version != sent {
                        sent = version;
                        self.api.output(
                            run.id,
                            &OutputReport {
                                attempt: run.attempt,
                                tail: text,
                            },
                        );
                    }
                }
            });
            let cx = Context {
                fetch: self.api,
                tail: &tail,
                timeout: Duration::from_secs(run.timeout_s.max(1)),
            };
            let outcome = self.executor.run_step(run, &cx);
            finished.store(true, Ordering::Relaxed);
            outcome
        });
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(run = run.id, ok = outcome.ok, error = ?outcome.error, duration_ms, "executed");
        RunResult {
            attempt: run.attempt,
            ok: outcome.ok,
            exit_code: outcome.exit_code,
            output_tail: outcome.output_tail,
            error: outcome.error,
            duration_ms,
            report: outcome.report,
        }
    }

    fn run(&mut self) -> Result<LoopEnd, DeployError> {
        let mut kept = self.state.load();
        // A run handed out before the loop goes first, unless a result waits to be reported:
        // the agent did not ask then (see [`unreported_result`]); should one come anyway, the
        // result goes first and `next` hands the run out again.
        let mut first = self
            .first
            .take()
            .filter(|_| kept.as_ref().is_none_or(|k| k.reported));
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(LoopEnd::Stopped);
            }
            // A reboot task's result is reported from the next boot, which proves the node
            // came back; in the same boot, the reboot has not happened yet.
            if let Some(k) = kept
                .as_mut()
                .filter(|k| !k.reported && k.boot_before.is_some())
            {
                let now = self.executor.boot_id();
                if now.is_some() && now == k.boot_before {
                    self.api.hang_up();
                    let out = self.executor.reboot_now();
                    if !out.ok {
                        k.result.ok = false;
                        k.result.error = out.error.or(Some("the reboot failed".into()));
                        k.boot_before = None;
                        k.reboot = false;
                        self.state.save(k)?;
                        continue;
                    }
                    return Ok(LoopEnd::Rebooted);
                }
                let line = format!(
                    "back after the reboot (boot {} → {})\n",
                    k.boot_before.as_deref().unwrap_or("?"),
                    now.as_deref().unwrap_or("unknown")
                );
                k.result.output_tail.push_str(&line);
                k.boot_before = None;
                k.reboot = false;
                self.state.save(k)?;
            }
            // A result the master has not acknowledged goes first, before asking for more; its
            // answer may carry the next run.
            let mut handed = first.take();
            if let Some(k) = kept.as_mut().filter(|k| !k.reported) {
                match self.report(k)? {
                    Reported::Stopped => return Ok(LoopEnd::Stopped),
                    Reported::Done(next) => handed = next,
                }
                if k.reboot {
                    self.api.hang_up();
                    self.executor.reboot_now();
                    if k.erase {
                        return Ok(LoopEnd::Erased);
                    }
                    return Ok(if k.task_reboot {
                        LoopEnd::Rebooted
                    } else {
                        LoopEnd::RebootedToDisk
                    });
                }
            }
            let reply = match handed {
                Some(next) => Call::Ok(next),
                None => self.api.next(self.node_id),
            };
            match reply {
                Call::Ok(NextReply::Wait { retry_after_ms }) => {
                    self.refusals = 0;
                    self.backoff.reset();
                    let wait = Duration::from_millis(retry_after_ms.max(20)).min(self.cfg.max_wait);
                    nap(wait, self.stop);
                }
                Call::Ok(NextReply::Run { run, agent_token }) => {
                    self.refusals = 0;
                    self.backoff.reset();
                    if let Some(token) = agent_token {
                        tracing::info!("the master rotated this node's agent token");
                        self.api.adopt_token(&token);
                    }
                    if let Some(k) = kept
                        .as_mut()
                        .filter(|k| (k.run_id, k.attempt) == (run.id, run.attempt))
                    {
                        // Executed already: the master has not seen the result. Send it again.
                        tracing::warn!(
                            run = run.id,
                            attempt = run.attempt,
                            "run handed again; re-sending its result instead of executing it twice"
                        );
                        k.reported = false;
                        continue;
                    }
                    let result = self.execute(&run);
                    let to_disk = result.ok
                        && run.step.interface == "power"
                        && run.step.name == "reboot_to_disk";
                    let task_reboot =
                        result.ok && run.task.as_ref().is_some_and(|t| t.kind == "reboot");
                    let erase =
                        result.ok && run.task.as_ref().is_some_and(|t| t.kind == "erase_node");
                    let boot_before = if task_reboot {
                        self.executor.boot_id().or_else(|| Some("unknown".into()))
                    } else {
                        None
                    };
                    let k = Kept {
                        run_id: run.id,
                        attempt: run.attempt,
                        result,
                        reported: false,
                        reboot: to_disk || task_reboot || erase,
                        task_reboot,
                        boot_before,
                        erase,
                    };
                    self.state.save(&k)?;
                    kept = Some(k);
                }
                Call::Unauthorized(message) => self.refused("next", 401, message)?,
                Call::Refused(status, message) => self.refused("next", status, message)?,
                Call::Conflict(why) | Call::Retry(why) => {
                    let delay = self.backoff.next_delay();
                    tracing::warn!("cannot ask for work: {why}; retrying in {delay:?}");
                    nap(delay, self.stop);
                }
            }
        }
    }
}

/// Run the loop against any [`MasterApi`] (tests use a fake one).
pub fn drive<M: MasterApi>(
    api: &M,
    node_id: i64,
    executor: &Executor,
    state_dir: &Path,
    stop: &AtomicBool,
    cfg: &LoopConfig,
) -> Result<LoopEnd, DeployError> {
    drive_from(api, node_id, executor, state_dir, stop, cfg, None)
}

/// [`drive`], beginning with `first` when the master has already handed out a run (the
/// service agent's hello with `claim_next`) instead of asking `next`.
pub fn drive_from<M: MasterApi>(
    api: &M,
    node_id: i64,
    executor: &Executor,
    state_dir: &Path,
    stop: &AtomicBool,
    cfg: &LoopConfig,
    first: Option<NextReply>,
) -> Result<LoopEnd, DeployError> {
    Driver {
        api,
        node_id,
        executor,
        state: StateDir {
            path: state_dir.to_path_buf(),
        },
        stop,
        cfg,
        backoff: Backoff::new(cfg.backoff_initial, cfg.backoff_max),
        refusals: 0,
        first,
    }
    .run()
}

/// Whether `state_dir` keeps a result the master has not acknowledged (a reboot task's, which
/// is reported from the next boot): then the agent must not be handed a run before it reports
/// it, since the master would hand out that same run again.
pub fn unreported_result(state_dir: &Path) -> bool {
    StateDir {
        path: state_dir.to_path_buf(),
    }
    .load()
    .is_some_and(|k| !k.reported)
}

/// Ask `master` for work as node `node_id` with the agent `token` until told to stop, the
/// token is refused, or the node rebooted to disk. State (the pending result; the token after a
/// refresh) lives in `state_dir`.
pub fn run_loop(
    master: &Master,
    token: &str,
    node_id: i64,
    executor: &Executor,
    state_dir: &Path,
    stop: &AtomicBool,
) -> Result<LoopEnd, DeployError> {
    let api = HttpMaster::new(master, token, Some(state_dir.join(TOKEN_FILE)));
    drive(
        &api,
        node_id,
        executor,
        state_dir,
        stop,
        &LoopConfig::default(),
    )
}

/// The master over HTTP (ureq, blocking).
pub struct HttpMaster {
    master: Master,
    base: String,
    token: std::sync::Mutex<String>,
    token_file: Option<PathBuf>,
    /// Replaced by new ones at [`MasterApi::hang_up`], which closes these.
    clients: std::sync::Mutex<Clients>,
}

/// The HTTP clients of one [`HttpMaster`], each with its pool of kept connections.
#[derive(Clone)]
struct Clients {
    /// The protocol's calls.
    api: ureq::Agent,
    /// Images and files, with longer timeouts.
    download: ureq::Agent,
}

impl Clients {
    fn new(master: &Master) -> Clients {
        let api = master.agent(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(30))),
        );
        let download = master.agent(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(15)))
                .timeout_recv_response(Some(Duration::from_secs(120)))
                .timeout_recv_body(Some(Duration::from_secs(6 * 3600))),
        );
        Clients { api, download }
    }
}

impl HttpMaster {
    /// `token_file`: where a refreshed token may appear (see [`MasterApi::reload_token`]).
    pub fn new(master: &Master, token: &str, token_file: Option<PathBuf>) -> HttpMaster {
        HttpMaster {
            master: master.clone(),
            base: master.url().to_string(),
            token: std::sync::Mutex::new(token.to_string()),
            token_file,
            clients: std::sync::Mutex::new(Clients::new(master)),
        }
    }

    fn clients(&self) -> Clients {
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn bearer(&self) -> String {
        format!(
            "Bearer {}",
            self.token.lock().unwrap_or_else(|e| e.into_inner())
        )
    }

    fn post<T: serde::de::DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> Call<T> {
        let body = match serde_json::to_string(body) {
            Ok(b) => b,
            Err(e) => return Call::Refused(0, format!("cannot encode the request: {e}")),
        };
        let resp = self
            .clients()
            .api
            .post(format!("{}{path}", self.base))
            .header("authorization", &self.bearer())
            .header("content-type", "application/json")
            .send(body);
        let mut resp = match resp {
            Ok(r) => r,
            Err(e) => return Call::Retry(e.to_string()),
        };
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let message = || {
            serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| text.clone())
        };
        match status {
            200..=299 => match serde_json::from_str(if text.is_empty() { "null" } else { &text }) {
                Ok(v) => Call::Ok(v),
                // A garbled answer is like a lost one: ask again.
                Err(e) => Call::Retry(format!("unreadable answer from {path}: {e}")),
            },
            401 => Call::Unauthorized(message()),
            409 => Call::Conflict(message()),
            429 => Call::Retry("HTTP 429 (rate-limited)".into()),
            400..=499 => Call::Refused(status, message()),
            _ => Call::Retry(format!("HTTP {status} from {path}")),
        }
    }
}

impl Fetch for HttpMaster {
    fn get(&self, url: &str, query: &[(&str, &str)]) -> Result<Box<dyn Read + Send>, FetchError> {
        let full = if url.starts_with('/') {
            format!("{}{url}", self.base)
        } else {
            url.to_string()
        };
        let mut req = self.clients().download.get(&full);
        // The token goes to the master only, never to a third-party image server.
        if full.starts_with(&format!("{}/", self.base)) {
            req = req.header("authorization", &self.bearer());
        }
        for (k, v) in query {
            req = req.query(*k, *v);
        }
        let failed = |reason: String| FetchError::Failed {
            url: full.clone(),
            reason,
        };
        let resp = req.call().map_err(|e| failed(e.to_string()))?;
        match resp.status().as_u16() {
            200..=299 => Ok(Box::new(resp.into_body().into_reader())),
            404 => Err(FetchError::NotFound(full.clone())),
            status => {
                let mut resp = resp;
                let text = resp.body_mut().read_to_string().unwrap_or_default();
                let text: String = text.chars().take(300).collect();
                Err(failed(format!("HTTP {status}: {text}")))
            }
        }
    }
}

impl MasterApi for HttpMaster {
    fn url(&self) -> String {
        self.base.clone()
    }

    fn next(&self, node_id: i64) -> Call<NextReply> {
        self.post(
            "/api/v1/agent/next",
            &NextRequest {
                node_id,
                wait_s: Some(HOLD_S),
            },
        )
    }

    fn output(&self, run_id: i64, report: &OutputReport) {
        let _: Call<serde_json::Value> =
            self.post(&format!("/api/v1/agent/runs/{run_id}/output"), report);
    }

    fn result(&self, run_id: i64, result: &RunResult, claim_next: bool) -> Call<ResultAck> {
        self.post(
            &format!("/api/v1/agent/runs/{run_id}/result"),
            &ResultRequest { result, claim_next },
        )
    }

    fn hang_up(&self) {
        let fresh = Clients::new(&self.master);
        let old = std::mem::replace(
            &mut *self.clients.lock().unwrap_or_else(|e| e.into_inner()),
            fresh,
        );
        old.api.shutdown();
        old.download.shutdown();
    }

    fn adopt_token(&self, token: &str) {
        if let Some(file) = &self.token_file
            && let Err(e) = save_token(file, token)
        {
            tracing::warn!(file = %file.display(), "cannot save the rotated agent token: {e}");
        }
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = token.to_string();
    }

    fn reload_token(&self) -> bool {
        let Some(saved) = self
            .token_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
        else {
            return false;
        };
        let mut token = self.token.lock().unwrap_or_else(|e| e.into_inner());
        if *token == saved {
            return false;
        }
        *token = saved;
        true
    }
}

/// Keep the agent token for later runs in this boot, readable by its owner only.
pub fn save_token(path: &Path, token: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    std::io::Write::write_all(&mut file, token.as_bytes())
}

/// A simulated machine's /proc and /sys under `root`: two CPUs, 2 GiB, one NIC with `mac`, one
/// 20 GiB disk `vda`. Existing files are kept, so a restarted node keeps its identity.
pub fn fake_machine(root: &Path, mac: &str) -> std::io::Result<()> {
    let serial: String = mac.chars().filter(char::is_ascii_hexdigit).collect();
    let files = [
        ("proc/cpuinfo", "processor\t: 0\nmodel name\t: stoker simulated CPU\n\nprocessor\t: 1\nmodel name\t: stoker simulated CPU\n".to_string()),
        ("proc/meminfo", "MemTotal:        2097152 kB\n".to_string()),
        ("sys/class/net/eth0/address", format!("{mac}\n")),
        ("sys/class/net/eth0/speed", "1000\n".to_string()),
        ("sys/class/net/eth0/carrier", "1\n".to_string()),
        ("sys/class/net/eth0/device/vendor", "0x1af4\n".to_string()),
        ("sys/block/vda/size", format!("{}\n", 20u64 << 21)),
        ("sys/block/vda/removable", "0\n".to_string()),
        ("sys/block/vda/device/model", "stoker simulated disk\n".to_string()),
        ("sys/class/dmi/id/sys_vendor", "stoker\n".to_string()),
        ("sys/class/dmi/id/product_name", "simulated node\n".to_string()),
        ("sys/class/dmi/id/product_serial", format!("SIM-{serial}\n")),
    ];
    for (rel, text) in files {
        let path = root.join(rel);
        if path.exists() {
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, text)?;
    }
    Ok(())
}

/// A simulated node: a fake machine with `mac` under `sandbox`, hello without a token (or with
/// the token it saved in an earlier life), then the deploy loop with every step confined to the
/// sandbox. Ends when `stop` is set or the node rebooted to disk.
pub fn simulate(
    master: &str,
    sandbox: &Path,
    mac: &str,
    stop: Arc<AtomicBool>,
) -> Result<LoopEnd, DeployError> {
    simulate_with(master, sandbox, mac, stop, false)
}

/// What `erase_node` does to a real disk, done to the sandbox's `dev/vda` (the installed OS's
/// agent sees only its root): the first MiB zeroed, so nothing boots from it, and the
/// installed root removed.
fn erase_sandbox_disk(sandbox: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let disk = sandbox.join("dev/vda");
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&disk) {
        f.write_all_at(&vec![0u8; 1 << 20], 0)?;
        f.sync_all()?;
    }
    match std::fs::remove_dir_all(sandbox.join("installed")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// [`simulate`], choosing whether shell and puppet commands run for real inside the sandbox
/// (see [`Executor::running_commands`]).
pub fn simulate_with(
    master: &str,
    sandbox: &Path,
    mac: &str,
    stop: Arc<AtomicBool>,
    run_commands: bool,
) -> Result<LoopEnd, DeployError> {
    let state_dir = sandbox.join("run");
    let state_err = |source| DeployError::State {
        path: state_dir.clone(),
        source,
    };
    fake_machine(sandbox, mac).map_err(state_err)?;
    let token_file = state_dir.join(TOKEN_FILE);
    let saved: Vec<String> = std::fs::read_to_string(&token_file)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .into_iter()
        .collect();
    let master = &Master::plain(master);
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    let reply = loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(LoopEnd::Stopped);
        }
        let inventory = inventory::gather(sandbox);
        match hello_with_credentials(master, &saved, &inventory, 1, Duration::from_secs(1)) {
            Ok(reply) => break reply,
            Err(AgentError::Unreachable { last, .. }) => {
                tracing::debug!(%mac, "simulated node: master unreachable: {last}");
                nap(backoff.next_delay(), &stop);
            }
            Err(e) => return Err(e.into()),
        }
    };
    let token = match (&reply.agent_token, saved.first()) {
        (Some(new), _) => {
            save_token(&token_file, new).map_err(state_err)?;
            new.clone()
        }
        (None, Some(old)) => old.clone(),
        (None, None) => return Err(DeployError::NoToken),
    };
    tracing::info!(%mac, node = reply.node.id, "simulated node registered");
    let executor = Executor::sandbox(sandbox.to_path_buf()).running_commands(run_commands);
    match run_loop(master, &token, reply.node.id, &executor, &state_dir, &stop)? {
        LoopEnd::RebootedToDisk => {
            tracing::info!(%mac, "simulated node rebooted to disk; booting its installed OS");
            match installed_os(sandbox, mac, &stop, run_commands)? {
                LoopEnd::Erased => {
                    // Its deletion graph erased it: the disk's tables go, and it boots from
                    // the network again, to be discovered.
                    tracing::info!(%mac, "simulated node erased; booting from the network");
                    erase_sandbox_disk(sandbox).map_err(state_err)?;
                    simulate_with(master.url(), sandbox, mac, stop.clone(), run_commands)
                }
                end => Ok(end),
            }
        }
        end => Ok(end),
    }
}

/// A sandboxed node "boots its installed OS": the root filesystem `deploy.configure` wrote
/// (the directory standing for the disk's root partition), with the service agent's
/// configuration either injected there or, from a config drive, written by a stand-in for
/// cloud-init that reads the drive off the disk ([`crate::agent::disk::cloud`]); then the
/// service agent runs there until `stop`.
pub fn installed_os(
    sandbox: &Path,
    mac: &str,
    stop: &AtomicBool,
    run_commands: bool,
) -> Result<LoopEnd, DeployError> {
    use crate::agent::disk::{Disk, cloud, fs, mount};
    let os = |detail: String| DeployError::InstalledOs {
        sandbox: sandbox.to_path_buf(),
        detail,
    };
    // The disk the image went to, and its root filesystem as the sandbox "mounts" it.
    let disk_path = sandbox.join("dev/vda");
    let disk = Disk::open_read_only(&disk_path).map_err(|e| os(e.to_string()))?;
    let (part, found) = fs::find_root(&disk, fs::ROOT_LABELS).map_err(|e| os(e.to_string()))?;
    let mounted =
        mount::mount(&disk_path, &part, &found, Some(sandbox)).map_err(|e| os(e.to_string()))?;
    let root = mounted.path().to_path_buf();
    mounted.finish().map_err(|e| os(e.to_string()))?;
    let config = root.join("etc/stoker/agent.json");
    if !config.exists() {
        cloud::first_boot(&disk_path, &root).map_err(|e| os(e.to_string()))?;
    }
    fake_machine(&root, mac).map_err(|e| os(e.to_string()))?;
    let cfg = crate::agent::service::ServiceConfig::load(&config).map_err(|e| os(e.to_string()))?;
    let opts = crate::agent::service::ServiceOptions {
        root,
        sandbox: true,
        run_commands,
        refused_wait: Duration::from_secs(5),
        max_backoff: Duration::from_secs(5),
    };
    // A `reboot` task "reboots" the sandbox: the service agent starts again, as systemd would
    // start it on the next boot.
    loop {
        match crate::agent::service::run(&cfg, &opts, stop).map_err(|e| os(e.to_string()))? {
            LoopEnd::Rebooted if !stop.load(Ordering::Relaxed) => {
                tracing::info!(%mac, "simulated node rebooted; its service agent starts again");
            }
            end => return Ok(end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::{Step, TaskSpec};
    use serde_json::json;
    use std::collections::VecDeque;
    use std::sync::Mutex;

    /// How the fake master answers one result call.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum OnResult {
        Accept,
        /// The master stores it but the answer never arrives.
        LoseAnswer,
        Down,
        Conflict,
        Unauthorized,
    }

    #[derive(Default)]
    struct Fake {
        /// Answers to `next`, in order; when exhausted the fake sets `stop`.
        next: Mutex<VecDeque<Call<NextReply>>>,
        on_result: Mutex<VecDeque<OnResult>>,
        /// Results the master stored, by (run, attempt).
        stored: Mutex<Vec<(i64, RunResult)>>,
        result_calls: Mutex<u32>,
        /// The results reported (by run) and the hang-ups, in order.
        calls: Mutex<Vec<String>>,
        outputs: Mutex<Vec<(i64, OutputReport)>>,
        stop: Arc<AtomicBool>,
        /// Hand out the next queued run in the answer to a result that asks for it, as the
        /// master does when one is due at once.
        hands: bool,
        /// Each result call's run and whether it asked for the next run.
        claims: Mutex<Vec<(i64, bool)>>,
        next_calls: Mutex<u32>,
        adopted: Mutex<Vec<String>>,
    }

    impl Fake {
        fn new(next: Vec<Call<NextReply>>, on_result: Vec<OnResult>) -> Fake {
            Fake {
                next: Mutex::new(next.into()),
                on_result: Mutex::new(on_result.into()),
                ..Fake::default()
            }
        }

        fn stored(&self) -> Vec<(i64, u32, bool)> {
            self.stored
                .lock()
                .unwrap()
                .iter()
                .map(|(id, r)| (*id, r.attempt, r.ok))
                .collect()
        }
    }

    impl Fetch for Fake {
        fn get(&self, url: &str, _q: &[(&str, &str)]) -> Result<Box<dyn Read + Send>, FetchError> {
            Err(FetchError::NotFound(url.into()))
        }
    }

    impl MasterApi for Fake {
        fn url(&self) -> String {
            "fake".into()
        }
        fn next(&self, _node_id: i64) -> Call<NextReply> {
            *self.next_calls.lock().unwrap() += 1;
            match self.next.lock().unwrap().pop_front() {
                Some(c) => c,
                None => {
                    self.stop.store(true, Ordering::Relaxed);
                    Call::Ok(NextReply::Wait { retry_after_ms: 1 })
                }
            }
        }
        fn output(&self, run_id: i64, report: &OutputReport) {
            self.outputs.lock().unwrap().push((run_id, report.clone()));
        }
        fn hang_up(&self) {
            self.calls.lock().unwrap().push("hang up".into());
        }
        fn adopt_token(&self, token: &str) {
            self.adopted.lock().unwrap().push(token.into());
        }
        fn result(&self, run_id: i64, result: &RunResult, claim_next: bool) -> Call<ResultAck> {
            *self.result_calls.lock().unwrap() += 1;
            self.claims.lock().unwrap().push((run_id, claim_next));
            self.calls.lock().unwrap().push(format!("result {run_id}"));
            let how = self
                .on_result
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(OnResult::Accept);
            let mut stored = self.stored.lock().unwrap();
            let store = |stored: &mut Vec<(i64, RunResult)>| {
                // Idempotent by (id, attempt).
                if !stored
                    .iter()
                    .any(|(i, r)| *i == run_id && r.attempt == result.attempt)
                {
                    stored.push((run_id, result.clone()));
                }
            };
            match how {
                OnResult::Accept => {
                    store(&mut stored);
                    let mut queue = self.next.lock().unwrap();
                    let next = match queue.front() {
                        Some(Call::Ok(NextReply::Run { .. })) if self.hands && claim_next => {
                            queue.pop_front().and_then(|c| match c {
                                Call::Ok(reply) => Some(reply),
                                _ => None,
                            })
                        }
                        _ => None,
                    };
                    Call::Ok(ResultAck {
                        accepted: true,
                        next,
                    })
                }
                OnResult::LoseAnswer => {
                    store(&mut stored);
                    Call::Retry("connection reset".into())
                }
                OnResult::Down => Call::Retry("connection refused".into()),
                OnResult::Conflict => Call::Conflict("stale attempt".into()),
                OnResult::Unauthorized => Call::Unauthorized("bad token".into()),
            }
        }
    }

    fn cfg() -> LoopConfig {
        LoopConfig {
            backoff_initial: Duration::from_millis(1),
            backoff_max: Duration::from_millis(5),
            refusals: 3,
            output_every: Duration::from_millis(100),
            max_wait: Duration::from_millis(10),
        }
    }

    fn shell(id: i64, attempt: u32, cmd: &str) -> Call<NextReply> {
        Call::Ok(NextReply::Run {
            agent_token: None,
            run: Run {
                id,
                attempt,
                deployment: 1,
                timeout_s: 60,
                step: Step {
                    interface: "deploy".into(),
                    name: "run_tasks".into(),
                    args: json!({}),
                },
                task: Some(TaskSpec {
                    id: format!("task-{id}"),
                    kind: "shell".into(),
                    parameters: json!({"cmd": cmd}),
                }),
            },
        })
    }

    fn step(id: i64, interface: &str, name: &str, args: serde_json::Value) -> Call<NextReply> {
        Call::Ok(NextReply::Run {
            agent_token: None,
            run: Run {
                id,
                attempt: 1,
                deployment: 1,
                timeout_s: 60,
                step: Step {
                    interface: interface.into(),
                    name: name.into(),
                    args,
                },
                task: None,
            },
        })
    }

    fn wait() -> Call<NextReply> {
        Call::Ok(NextReply::Wait { retry_after_ms: 1 })
    }

    struct Node {
        dir: tempfile::TempDir,
        ex: Executor,
    }

    fn node() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().join("root")).running_commands(true);
        Node { dir, ex }
    }

    impl Node {
        fn drive(&self, fake: &Fake) -> Result<LoopEnd, DeployError> {
            drive(
                fake,
                7,
                &self.ex,
                &self.dir.path().join("state"),
                &fake.stop,
                &cfg(),
            )
        }
        fn count(&self) -> String {
            std::fs::read_to_string(self.dir.path().join("root/count")).unwrap_or_default()
        }
    }

    const COUNT: &str = "echo x >> count";

    #[test]
    fn runs_steps_streams_output_and_ends_after_reboot_to_disk() {
        let n = node();
        let fake = Fake::new(
            vec![
                wait(),
                shell(1, 1, COUNT),
                shell(2, 1, "echo started; sleep 0.5; echo done"),
                shell(3, 1, "echo bad; exit 4"),
                step(4, "deploy", "collect_logs", json!({})),
                step(5, "bios", "apply", json!({})),
                step(6, "power", "reboot_to_disk", json!({})),
                shell(7, 1, COUNT),
            ],
            vec![],
        );
        assert_eq!(n.drive(&fake).unwrap(), LoopEnd::RebootedToDisk);
        // The connections close once, after the reboot's result and before the reboot.
        assert_eq!(
            *fake.calls.lock().unwrap(),
            [
                "result 1", "result 2", "result 3", "result 4", "result 5", "result 6", "hang up"
            ]
        );
        assert_eq!(
            fake.stored(),
            vec![
                (1, 1, true),
                (2, 1, true),
                (3, 1, false),
                (4, 1, true),
                (5, 1, false),
                (6, 1, true)
            ]
        );
        let stored = fake.stored.lock().unwrap();
        assert_eq!(stored[2].1.exit_code, Some(4));
        assert_eq!(stored[2].1.output_tail, "bad\n");
        assert_eq!(
            stored[4].1.error.as_deref(),
            Some("unknown step bios.apply")
        );
        assert!(stored[1].1.duration_ms >= 500);
        let outputs = fake.outputs.lock().unwrap();
        assert!(
            outputs
                .iter()
                .any(|(id, o)| *id == 2 && o.tail == "started\n" && o.attempt == 1),
            "the tail of run 2 was streamed while it ran: {outputs:?}"
        );
        let root = n.dir.path().join("root");
        assert!(root.join(crate::agent::steps::REBOOTED_TO_DISK).exists());
        assert_eq!(
            n.count(),
            "x\n",
            "run 7 came after the reboot and was not executed"
        );
    }

    /// A master that hands out the next run with each result's answer: a chain of steps costs
    /// one call a step, the first run still comes from `next`, a result before a reboot does
    /// not ask (the run after `reboot_to_disk` is not taken by the rebooting agent), and a
    /// rotated token handed out this way is adopted as one from `next` is.
    #[test]
    fn a_run_handed_out_with_a_results_answer_is_run_without_asking_next() {
        let n = node();
        let Call::Ok(NextReply::Run { run, .. }) = shell(2, 1, COUNT) else {
            unreachable!()
        };
        let rotated = Call::Ok(NextReply::Run {
            run,
            agent_token: Some("new-token".into()),
        });
        let mut fake = Fake::new(
            vec![
                shell(1, 1, COUNT),
                rotated,
                shell(3, 1, COUNT),
                step(4, "power", "reboot_to_disk", json!({})),
                shell(5, 1, COUNT),
            ],
            vec![],
        );
        fake.hands = true;
        assert_eq!(n.drive(&fake).unwrap(), LoopEnd::RebootedToDisk);
        assert_eq!(
            *fake.next_calls.lock().unwrap(),
            1,
            "only the first run came from next"
        );
        assert_eq!(
            *fake.claims.lock().unwrap(),
            [(1, true), (2, true), (3, true), (4, false)]
        );
        assert_eq!(
            fake.stored(),
            vec![(1, 1, true), (2, 1, true), (3, 1, true), (4, 1, true)]
        );
        assert_eq!(
            n.count(),
            "x\nx\nx\n",
            "runs 1-3 ran once each, run 5 never"
        );
        assert_eq!(*fake.adopted.lock().unwrap(), ["new-token"]);
    }

    /// A run handed out before the loop (the service agent's hello) is run first, without
    /// asking `next`; with a result still to report it is dropped instead: the result goes
    /// first, and `next` hands the run out again (`unreported_result` is why the service
    /// agent does not ask then).
    #[test]
    fn a_run_handed_out_with_the_hello_runs_first_unless_a_result_waits() {
        let first = |id| {
            let Call::Ok(reply) = shell(id, 1, COUNT) else {
                unreachable!()
            };
            reply
        };
        let n = node();
        let state = n.dir.path().join("state");
        assert!(!unreported_result(&state), "nothing kept yet");
        let fake = Fake::new(
            vec![
                shell(2, 1, COUNT),
                step(3, "power", "reboot_to_disk", json!({})),
            ],
            vec![],
        );
        let end = drive_from(&fake, 7, &n.ex, &state, &fake.stop, &cfg(), Some(first(1)));
        assert_eq!(end.unwrap(), LoopEnd::RebootedToDisk);
        assert_eq!(
            fake.stored(),
            vec![(1, 1, true), (2, 1, true), (3, 1, true)]
        );
        assert_eq!(
            *fake.next_calls.lock().unwrap(),
            2,
            "run 1 came with the hello"
        );
        assert_eq!(n.count(), "x\nx\n");

        // A result kept from before a reboot, not yet reported.
        let n = node();
        let state = n.dir.path().join("state");
        let kept = Kept {
            run_id: 9,
            attempt: 1,
            result: RunResult {
                attempt: 1,
                ok: true,
                exit_code: Some(0),
                output_tail: String::new(),
                error: None,
                duration_ms: 1,
                report: None,
            },
            reported: false,
            reboot: false,
            task_reboot: false,
            boot_before: None,
            erase: false,
        };
        StateDir {
            path: state.clone(),
        }
        .save(&kept)
        .unwrap();
        assert!(unreported_result(&state));
        let fake = Fake::new(vec![step(3, "power", "reboot_to_disk", json!({}))], vec![]);
        let end = drive_from(&fake, 7, &n.ex, &state, &fake.stop, &cfg(), Some(first(1)));
        assert_eq!(end.unwrap(), LoopEnd::RebootedToDisk);
        assert_eq!(
            fake.stored(),
            vec![(9, 1, true), (3, 1, true)],
            "the kept result went first; the handed run was left for next"
        );
        assert_eq!(n.count(), "", "run 1 was not executed");
        assert!(!unreported_result(&state), "the kept result was reported");
    }

    fn reboot_task(id: i64) -> Call<NextReply> {
        let Call::Ok(NextReply::Run { mut run, .. }) = shell(id, 1, "") else {
            unreachable!()
        };
        run.task = Some(TaskSpec {
            id: "reboot".into(),
            kind: "reboot".into(),
            parameters: json!({"timeout": 900}),
        });
        Call::Ok(NextReply::Run {
            agent_token: None,
            run,
        })
    }

    #[test]
    fn a_reboot_task_is_reported_from_the_next_boot_never_before() {
        let n = node();
        let fake = Fake::new(vec![shell(1, 1, COUNT), reboot_task(2)], vec![]);
        let boot = |n: &Node| n.ex.boot_id().unwrap();
        let first = boot(&n);
        // The reboot happens with its result kept, not reported: the master's run stays
        // running until the node is back.
        assert_eq!(n.drive(&fake).unwrap(), LoopEnd::Rebooted);
        assert_eq!(fake.stored(), vec![(1, 1, true)]);
        // Its connections closed before the reboot, though its result waits.
        assert_eq!(*fake.calls.lock().unwrap(), ["result 1", "hang up"]);
        let second = boot(&n);
        assert_ne!(first, second, "the sandbox rebooted");
        // The agent starts again on the new boot: the reboot's result goes first.
        let fake2 = Fake::new(vec![shell(3, 1, COUNT)], vec![]);
        assert_eq!(n.drive(&fake2).unwrap(), LoopEnd::Stopped);
        assert_eq!(fake2.stored(), vec![(2, 1, true), (3, 1, true)]);
        let stored = fake2.stored.lock().unwrap();
        assert!(
            stored[0]
                .1
                .output_tail
                .contains(&format!("back after the reboot (boot {first} → {second})")),
            "{:?}",
            stored[0].1.output_tail
        );
        drop(stored);
        // An agent restarted in the same boot (it crashed before the reboot) reboots first.
        let n = node();
        let fake = Fake::new(vec![reboot_task(4)], vec![]);
        assert_eq!(n.drive(&fake).unwrap(), LoopEnd::Rebooted);
        let state: Kept = serde_json::from_str(
            &std::fs::read_to_string(n.dir.path().join("state").join(RUN_STATE_FILE)).unwrap(),
        )
        .unwrap();
        assert!(!state.reported && state.boot_before.is_some());
        // Pretend the reboot never happened: restore the old boot id.
        std::fs::write(
            n.dir.path().join("root/proc/sys/kernel/random/boot_id"),
            state.boot_before.clone().unwrap(),
        )
        .unwrap();
        let fake2 = Fake::new(vec![], vec![]);
        assert_eq!(n.drive(&fake2).unwrap(), LoopEnd::Rebooted);
        assert!(fake2.stored().is_empty(), "not reported from the same boot");
    }

    #[test]
    fn a_lost_answer_is_resent_and_the_step_runs_once() {
        let n = node();
        let fake = Fake::new(
            vec![shell(1, 1, COUNT), shell(2, 1, COUNT)],
            vec![OnResult::LoseAnswer, OnResult::LoseAnswer, OnResult::Accept],
        );
        assert_eq!(n.drive(&fake).unwrap(), LoopEnd::Stopped);
        assert_eq!(n.count(), "x\nx\n");
        assert_eq!(fake.stored(), vec![(1, 1, true), (2, 1, true)]);
        assert_eq!(*fake.result_calls.lock().unwrap(), 4);
    }

    #[test]
    fn a_run_handed_again_with_the_same_attempt_is_not_executed_twice() {
        let n = node();
        let fake = Fake::new(
            vec![shell(1, 1, COUNT), shell(1, 1, COUNT), shell(1, 2, COUNT)],
            vec![],
        );
        n.drive(&fake).unwrap();
        // The duplicate re-sent the result; attempt 2 (the master thought it was lost) ran.
        assert_eq!(n.count(), "x\nx\n");
        assert_eq!(*fake.result_calls.lock().unwrap(), 3);
        assert_eq!(fake.stored(), vec![(1, 1, true), (1, 2, true)]);
    }

    #[test]
    fn a_stale_result_is_dropped_and_the_loop_goes_on() {
        let n = node();
        let fake = Fake::new(
            vec![
                shell(1, 1, COUNT),
                shell(2, 1, COUNT),
                step(3, "power", "reboot_to_disk", json!({})),
            ],
            vec![OnResult::Conflict, OnResult::Accept, OnResult::Conflict],
        );
        // A 409 on reboot_to_disk means the master no longer wants it: no exit.
        assert_eq!(n.drive(&fake).unwrap(), LoopEnd::Stopped);
        assert_eq!(fake.stored(), vec![(2, 1, true)]);
        assert_eq!(n.count(), "x\nx\n");
    }

    #[test]
    fn master_down_then_up_and_a_restarted_agent_resends_its_pending_result() {
        let n = node();
        let down = || Call::Retry("connection refused".into());
        let fake = Fake::new(
            vec![
                down(),
                down(),
                Call::Retry("HTTP 503".into()),
                shell(1, 1, COUNT),
            ],
            // Down until the agent is stopped, however late the stopper runs.
            vec![OnResult::Down; 10_000],
        );
        // Stop the agent while the master is down and the result not yet delivered.
        let stopper = {
            let stop = fake.stop.clone();
            let calls = &fake.result_calls;
            move || {
                while *calls.lock().unwrap() < 2 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                stop.store(true, Ordering::Relaxed);
            }
        };
        let end = std::thread::scope(|s| {
            s.spawn(stopper);
            n.drive(&fake)
        });
        assert_eq!(end.unwrap(), LoopEnd::Stopped);
        assert!(fake.stored().is_empty());
        let state = n.dir.path().join("state").join(RUN_STATE_FILE);
        assert!(
            std::fs::read_to_string(&state)
                .unwrap()
                .contains("\"reported\":false")
        );

        // The agent restarts; the master is up and would hand the run again (attempt 2) if it
        // had not heard of it: the pending result goes first, so it never does.
        fake.stop.store(false, Ordering::Relaxed);
        fake.on_result.lock().unwrap().clear();
        n.drive(&fake).unwrap();
        assert_eq!(fake.stored(), vec![(1, 1, true)]);
        assert_eq!(n.count(), "x\n");
        assert!(
            std::fs::read_to_string(&state)
                .unwrap()
                .contains("\"reported\":true")
        );
    }

    #[test]
    fn a_refused_token_ends_the_loop_after_a_few_tries() {
        let n = node();
        let no = || Call::Unauthorized("agent token refused".into());
        let fake = Fake::new(vec![no(), wait(), no(), no(), no(), wait()], vec![]);
        let err = n.drive(&fake).unwrap_err().to_string();
        assert_eq!(
            err,
            "master fake refused the agent token 3 times: agent token refused"
        );
        // A refused result counts too; other 4xx on next as well.
        let fake = Fake::new(
            vec![shell(1, 1, COUNT)],
            vec![
                OnResult::Unauthorized,
                OnResult::Unauthorized,
                OnResult::Unauthorized,
            ],
        );
        assert!(matches!(
            n.drive(&fake),
            Err(DeployError::Unauthorized { .. })
        ));
        let gone = || Call::Refused(404, "no such node".into());
        let fake = Fake::new(vec![gone(), gone(), gone()], vec![]);
        let err = n.drive(&fake).unwrap_err().to_string();
        assert_eq!(
            err,
            "master fake refused next 3 times (HTTP 404): no such node"
        );
    }
}
