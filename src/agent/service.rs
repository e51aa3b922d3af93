//! The agent as a service on the installed OS (`stoker agent --service /etc/stoker/agent.json`,
//! started by systemd at every boot): it says hello with the credential its node was given at
//! provisioning (installed by `deploy.configure`), gets the node's agent token, and then keeps
//! the same deploy loop as the ramdisk's ([`super::deploy`]) forever: its polls are its
//! heartbeat. Its hello asks for the node's next run (`claim_next`) unless a result waits to be
//! reported, and runs what it is handed without asking `next`. A master that needs another
//! version is answered by fetching that version's binary from the master (with the
//! credential), checking its SHA-256, replacing this executable and starting it again. A
//! refused credential is retried slowly, never in a hot loop: the node may have been removed,
//! or provisioned again with a new one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::client::{Backoff, Master};
use super::deploy::{DeployError, HttpMaster, LoopConfig, LoopEnd, drive_from};
use super::exec::Executor;
use super::inventory;
use super::protocol::NextReply;

/// The version this agent reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the service agent's state lives between boots, under the root.
pub const STATE_DIR: &str = "var/lib/stoker";

/// The file the service agent reads: what `deploy.configure` installed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    pub master: String,
    #[serde(default)]
    pub fingerprint: Option<String>,
    pub node_id: i64,
    pub credential: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("cannot read the service agent's configuration {path}: {source}")]
    Config {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the service agent's configuration {path} is not valid: {detail}")]
    BadConfig { path: PathBuf, detail: String },
    #[error(transparent)]
    Master(#[from] super::AgentError),
    #[error(transparent)]
    Deploy(#[from] DeployError),
    #[error("cannot update the agent from {url}: {detail}")]
    Update { url: String, detail: String },
}

impl ServiceConfig {
    pub fn load(path: &Path) -> Result<ServiceConfig, ServiceError> {
        let text = std::fs::read_to_string(path).map_err(|source| ServiceError::Config {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| ServiceError::BadConfig {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
    }
}

/// What the master answered a service hello.
#[derive(Debug)]
enum Hello {
    /// The node's agent token, and the run handed out with it when the hello asked.
    Token(String, Option<NextReply>),
    /// 400 naming `claim_next`: a master older than the field; say hello again without it.
    NoClaimNext,
    /// 426: fetch `binary` (whose SHA-256 is `sha256`) and run it instead.
    Outdated {
        required: String,
        binary: String,
        sha256: Option<String>,
    },
    /// 401/403: the credential is not (or no longer) this node's.
    Refused(u16, String),
    /// Unreachable, 5xx, 429: try again soon.
    Retry(String),
}

/// Say hello; with `claim_next`, ask for the node's next run in the answer (never when a
/// result waits to be reported, which goes first).
fn say_hello(master: &Master, cfg: &ServiceConfig, root: &Path, claim_next: bool) -> Hello {
    let url = format!("{}/api/v1/agent/service/hello", master.url());
    let agent = master.agent(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30))),
    );
    let inv = inventory::gather(root);
    let macs: Vec<Value> = inv["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i.get("mac").cloned())
        .collect();
    let mut body = json!({
        "node_id": cfg.node_id,
        "credential": cfg.credential,
        "version": claimed_version(),
        "macs": macs,
    });
    if claim_next {
        body["claim_next"] = json!(true);
    }
    let mut resp = match agent
        .post(&url)
        .header("content-type", "application/json")
        .send(body.to_string())
    {
        Ok(r) => r,
        Err(e) => return Hello::Retry(e.to_string()),
    };
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let message = v["message"].as_str().unwrap_or(&text).to_string();
    match status {
        200 => match v["agent_token"].as_str() {
            // A handed-out run that cannot be read is asked for again by `next` (the master
            // hands it out as the next attempt).
            Some(t) => Hello::Token(
                t.to_string(),
                v.get("next")
                    .and_then(|n| serde_json::from_value(n.clone()).ok()),
            ),
            None => Hello::Retry("the master's answer has no agent_token".into()),
        },
        400 if claim_next && text.contains("claim_next") => Hello::NoClaimNext,
        426 => Hello::Outdated {
            required: v["required_version"].as_str().unwrap_or("?").to_string(),
            binary: v["binary"]
                .as_str()
                .unwrap_or("/api/v1/agent/service/binary")
                .to_string(),
            sha256: v["sha256"].as_str().map(str::to_string),
        },
        401 | 403 => Hello::Refused(status, message),
        _ => Hello::Retry(format!("HTTP {status}: {message}")),
    }
}

/// The version this agent says it runs. `STOKER_AGENT_CLAIM_VERSION` makes a test's agent
/// claim an older one (it is dropped before the updated binary starts).
fn claimed_version() -> String {
    std::env::var("STOKER_AGENT_CLAIM_VERSION").unwrap_or_else(|_| VERSION.to_string())
}

/// Fetch the master's agent binary with the node's credential, check its SHA-256 and put it
/// in place of `exe` (a new file renamed over it, so a failure leaves the old one).
fn update(
    master: &Master,
    cfg: &ServiceConfig,
    path: &str,
    sha256: Option<&str>,
    exe: &Path,
) -> Result<(), ServiceError> {
    use sha2::Digest;
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    let url = format!("{}{path}", master.url());
    let fail = |detail: String| ServiceError::Update {
        url: url.clone(),
        detail,
    };
    let agent = master.agent(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(600))),
    );
    let mut resp = agent
        .get(&url)
        .header("authorization", &format!("Bearer {}", cfg.credential))
        .call()
        .map_err(|e| fail(e.to_string()))?;
    if resp.status().as_u16() != 200 {
        return Err(fail(format!("HTTP {}", resp.status().as_u16())));
    }
    let tmp = exe.with_extension("new");
    let mut out = std::fs::File::create(&tmp)
        .map_err(|e| fail(format!("cannot create {}: {e}", tmp.display())))?;
    let mut hasher = sha2::Sha256::new();
    let mut reader = resp.body_mut().with_config().limit(1 << 30).reader();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| fail(format!("download: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| fail(format!("cannot write {}: {e}", tmp.display())))?;
    }
    out.sync_all()
        .map_err(|e| fail(format!("cannot sync {}: {e}", tmp.display())))?;
    let got = crate::model::hex(&hasher.finalize());
    if let Some(want) = sha256
        && !want.eq_ignore_ascii_case(&got)
    {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(format!(
            "the download's SHA-256 is {got}, the master said {want}"
        )));
    }
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| fail(format!("cannot make {} executable: {e}", tmp.display())))?;
    std::fs::rename(&tmp, exe).map_err(|e| fail(format!("cannot replace {}: {e}", exe.display())))
}

/// Replace this process with `exe` and the same arguments, without the claimed version.
fn restart(exe: &Path) -> ServiceError {
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env_remove("STOKER_AGENT_CLAIM_VERSION")
        .exec();
    ServiceError::Update {
        url: exe.display().to_string(),
        detail: format!("cannot start the updated agent: {err}"),
    }
}

/// How the service runs: where its OS's root is (`/` on a node, the installed root in a
/// sandbox), its state, how long a refused credential waits.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    pub root: PathBuf,
    pub sandbox: bool,
    pub run_commands: bool,
    pub refused_wait: Duration,
    pub max_backoff: Duration,
}

/// Serve the node from its installed OS until `stop` is set or a `reboot` task reboots it.
pub fn run(
    cfg: &ServiceConfig,
    opts: &ServiceOptions,
    stop: &AtomicBool,
) -> Result<LoopEnd, ServiceError> {
    let master = Master::connect(&cfg.master, cfg.fingerprint.as_deref(), 0, opts.max_backoff)?;
    let executor = if opts.sandbox {
        Executor::sandbox(opts.root.clone()).running_commands(opts.run_commands)
    } else {
        Executor::node()
    };
    let state_dir = opts.root.join(STATE_DIR);
    std::fs::create_dir_all(&state_dir).map_err(|source| ServiceError::Config {
        path: state_dir.clone(),
        source,
    })?;
    let mut backoff = Backoff::new(Duration::from_secs(1), opts.max_backoff);
    let mut claim_next = true;
    while !stop.load(Ordering::Relaxed) {
        let ask = claim_next && !super::deploy::unreported_result(&state_dir);
        match say_hello(&master, cfg, &opts.root, ask) {
            Hello::NoClaimNext => {
                tracing::info!("the master does not hand out runs with the hello; asking next");
                claim_next = false;
            }
            Hello::Token(token, first) => {
                backoff.reset();
                println!(
                    "STOKER-AGENT service node={} version={VERSION}",
                    cfg.node_id
                );
                let api = HttpMaster::new(&master, &token, None);
                match drive_from(
                    &api,
                    cfg.node_id,
                    &executor,
                    &state_dir,
                    stop,
                    &LoopConfig::default(),
                    first,
                ) {
                    Ok(end) => return Ok(end),
                    // The token was refused (the node was removed, or another agent took it):
                    // say hello again, which tells.
                    Err(DeployError::Unauthorized { message, .. }) => {
                        tracing::warn!("agent token refused: {message}; saying hello again");
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Hello::Outdated {
                required,
                binary,
                sha256,
            } => {
                if opts.sandbox {
                    return Err(ServiceError::Update {
                        url: binary,
                        detail: format!(
                            "the master needs version {required}; a sandbox cannot update itself"
                        ),
                    });
                }
                let exe = std::env::current_exe().map_err(|e| ServiceError::Update {
                    url: binary.clone(),
                    detail: format!("cannot find this executable: {e}"),
                })?;
                tracing::info!(%required, "the master needs agent {required}; updating {}", exe.display());
                update(&master, cfg, &binary, sha256.as_deref(), &exe)?;
                println!("STOKER-AGENT updated to {required}; restarting");
                return Err(restart(&exe));
            }
            Hello::Refused(status, message) => {
                tracing::warn!(
                    status,
                    "service hello refused: {message}; trying again in {:?}",
                    opts.refused_wait
                );
                eprintln!("stoker-agent: the master refused this node's credential: {message}");
                super::deploy::nap(opts.refused_wait, stop);
            }
            Hello::Retry(why) => {
                let delay = backoff.next_delay();
                tracing::warn!("service hello failed: {why}; retrying in {delay:?}");
                super::deploy::nap(delay, stop);
            }
        }
    }
    Ok(LoopEnd::Stopped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};

    /// A one-request HTTP server answering `status` with `body`; returns its URL and a handle
    /// giving the Authorization header it saw.
    fn serve_once(status: u16, body: Vec<u8>) -> (String, std::thread::JoinHandle<String>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut auth = String::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("authorization:") {
                    auth = v.trim().to_string();
                }
            }
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            conn.write_all(head.as_bytes()).unwrap();
            conn.write_all(&body).unwrap();
            auth
        });
        (url, handle)
    }

    fn cfg(master: &str) -> ServiceConfig {
        ServiceConfig {
            master: master.to_string(),
            fingerprint: None,
            node_id: 7,
            credential: "skn_secret".into(),
        }
    }

    /// What a hello's answer means: the token and the run handed out with it (none when the
    /// answer has none, or one the agent cannot read: `next` then hands it out again), and a
    /// master older than `claim_next` refusing the field by name, which only a hello that
    /// asked takes as such.
    #[test]
    fn a_hellos_answer_gives_the_token_and_the_run_handed_out_with_it() {
        let root = tempfile::tempdir().unwrap();
        let hello = |status: u16, body: serde_json::Value, claim_next: bool| {
            let (url, _) = serve_once(status, body.to_string().into_bytes());
            say_hello(&Master::plain(&url), &cfg(&url), root.path(), claim_next)
        };
        let run = json!({"id": 5, "attempt": 1, "deployment": 2, "timeout_s": 60,
                         "step": {"interface": "deploy", "name": "shell", "args": {}}});
        let handed = hello(
            200,
            json!({"agent_token": "t1", "next": {"action": "run", "run": run}}),
            true,
        );
        let Hello::Token(token, Some(NextReply::Run { run, agent_token })) = handed else {
            panic!("{handed:?}")
        };
        assert_eq!((token.as_str(), run.id, agent_token), ("t1", 5, None));
        let plain = hello(200, json!({"agent_token": "t2"}), true);
        assert!(
            matches!(&plain, Hello::Token(t, None) if t == "t2"),
            "{plain:?}"
        );
        let unreadable = hello(
            200,
            json!({"agent_token": "t3", "next": {"action": "run"}}),
            true,
        );
        assert!(
            matches!(&unreadable, Hello::Token(t, None) if t == "t3"),
            "{unreadable:?}"
        );
        let old = json!({"code": "invalid_json", "message": "request body is not valid JSON: \
                         unknown field `claim_next`, expected one of `node_id`"});
        let refused = hello(400, old.clone(), true);
        assert!(matches!(refused, Hello::NoClaimNext), "{refused:?}");
        let other = hello(400, old, false);
        assert!(matches!(other, Hello::Retry(_)), "{other:?}");
    }

    #[test]
    fn an_outdated_agent_replaces_itself_with_the_masters_binary_checked_by_digest() {
        use sha2::Digest;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("stoker");
        std::fs::write(&exe, b"old agent").unwrap();
        let new = b"#!/bin/sh\necho new agent\n".to_vec();
        let sum = crate::model::hex(&sha2::Sha256::digest(&new));

        // The download's digest is not the one the master announced: refused, old one kept.
        let (url, seen) = serve_once(200, new.clone());
        let master = Master::plain(&url);
        let err = update(&master, &cfg(&url), "/bin", Some(&"0".repeat(64)), &exe).unwrap_err();
        assert!(err.to_string().contains("SHA-256"), "{err}");
        assert_eq!(seen.join().unwrap(), "bearer skn_secret");
        assert_eq!(std::fs::read(&exe).unwrap(), b"old agent");
        assert!(!exe.with_extension("new").exists());

        // The master refuses the credential: refused, old one kept.
        let (url, _) = serve_once(401, b"{}".to_vec());
        let err = update(&Master::plain(&url), &cfg(&url), "/bin", Some(&sum), &exe).unwrap_err();
        assert!(err.to_string().contains("HTTP 401"), "{err}");
        assert_eq!(std::fs::read(&exe).unwrap(), b"old agent");

        // The right one: in place, executable.
        let (url, _) = serve_once(200, new.clone());
        update(&Master::plain(&url), &cfg(&url), "/bin", Some(&sum), &exe).unwrap();
        assert_eq!(std::fs::read(&exe).unwrap(), new);
        let mode = std::fs::metadata(&exe).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }
}
