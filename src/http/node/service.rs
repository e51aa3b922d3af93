//! The installed OS's service agent: how it gets in and what it fetches. Its hello presents the
//! credential its node was given when the node's configure step was handed out (bound to that
//! node, stored hashed, installed into the OS by a config drive or by injection) and gets the
//! node's agent token, which then works for the same deploy protocol as the ramdisk's (next,
//! output, result). The agent's binary is served only to a caller with a node's credential;
//! an agent of another version is told which one it needs and where to get it. A hello that
//! asks (`claim_next`) is also handed the node's next run when one is due at once, claimed in
//! the same write, as a result's answer hands one out. Thin:
//! authenticate, let `engine::hello` decide, call the store, answer.

use std::path::PathBuf;

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use crate::engine::hello::{self, ServiceHello, ServiceRefusal};
use crate::engine::steps::Location;
use crate::http::node::steps::{answer_next, asked_next, claim_next};
use crate::http::{ApiError, AppState};
use crate::model::Mac;

/// The version a service agent must run: the master's own.
pub const REQUIRED_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the agent's binary is served.
pub const BINARY_PATH: &str = "/api/v1/agent/service/binary";

/// How often a service agent should call when it has nothing to run; its calls are its
/// heartbeat.
pub use crate::model::node::HEARTBEAT_S;

/// The prefix of a node's service credential, so a leaked one is recognisable.
pub const CREDENTIAL_PREFIX: &str = "skn_";

/// A new service credential and its hash.
pub fn new_credential() -> Result<(String, String), ApiError> {
    let (token, _) = crate::http::node::boot::new_token()?;
    let credential = format!("{CREDENTIAL_PREFIX}{token}");
    let hash = crate::http::node::boot::hash_token(&credential);
    Ok((credential, hash))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HelloBody {
    node_id: i64,
    credential: String,
    version: String,
    /// The MACs of the machine's NICs.
    macs: Vec<String>,
    /// Hand out the node's next run for its installed OS in the answer (`next`, as
    /// `/agent/next` would answer it, never held) when one is due at once: a rack rebooting into
    /// its OS mid-deployment saves each node's first `next`. An agent with a result it has not
    /// reported yet does not ask: that result goes first.
    #[serde(default)]
    claim_next: bool,
}

/// `POST /api/v1/agent/service/hello`
pub async fn hello(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    crate::http::node::agent::limit(&state.service_hello_limit, &req)?;
    if body.len() > 64 * 1024 {
        return Err(ApiError::BadRequest(format!(
            "the hello is {} bytes; the limit is 65536",
            body.len()
        )));
    }
    let b: HelloBody = ApiError::parse_fields(&body, "service hello")?;
    if b.macs.len() > 64 || b.version.len() > 64 {
        return Err(ApiError::BadRequest(
            "service hello: at most 64 MACs and a version of at most 64 characters".into(),
        ));
    }
    let macs: Vec<Mac> = b
        .macs
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.parse()
                .map_err(|_| ApiError::BadRequest(format!("macs[{i}]: {m:?} is not a MAC")))
        })
        .collect::<Result<_, _>>()?;
    let presented = crate::http::node::boot::hash_token(&b.credential);
    let (token, token_hash) = crate::http::node::boot::new_token()?;
    let now = crate::clock::now();
    let claimed = b.node_id;
    let version = b.version.clone();
    let peer = crate::http::node::agent::peer_address(&req);
    let (handout, hashes) = asked_next(b.claim_next)?;
    // One write of the group writer, like the agents' step calls: a rack that reboots into
    // its installed OS says hello all at once, and those hellos commit together.
    let (decided, next) = state
        .writer
        .write(move |tx| {
            let r = tx.read();
            let bound = r.os_credential_hash(claimed)?;
            let matches = bound
                .as_deref()
                .is_some_and(|h| crate::auth::secret::constant_time_eq(h, &presented));
            let bound_to = if matches {
                None
            } else {
                r.node_by_os_credential(&presented)?
            };
            let owners = r.mac_owners(macs.iter())?;
            let check = hello::service_hello(&ServiceHello {
                claimed,
                matches,
                bound_to,
                owners: &owners,
                version: &version,
                required: REQUIRED_VERSION,
            });
            let mut next = None;
            match &check {
                Ok(()) => {
                    tx.service_hello(claimed, &token_hash, &version, now)?;
                    next = claim_next(tx, claimed, Location::Os, now, hashes.as_ref())?;
                }
                Err(ServiceRefusal::OtherNode { bound_to }) => tx.add_history(
                    now,
                    Some(*bound_to),
                    "node.credential",
                    &format!(
                        "this node's service credential was presented as node-{claimed} \
                             from {}; refused",
                        peer.as_deref().unwrap_or("an unknown address")
                    ),
                )?,
                Err(_) => {}
            }
            Ok((check, next))
        })
        .await?;
    match decided {
        Ok(()) => {
            tracing::info!(node = claimed, version = %b.version, "service agent hello");
            let mut answer = json!({
                "node_id": claimed,
                "agent_token": token,
                "heartbeat_s": HEARTBEAT_S,
            });
            answer_next(&mut answer, &state, &req, claimed, next, handout.as_ref());
            Ok(HttpResponse::Ok().json(answer))
        }
        Err(why) => {
            tracing::warn!(node = claimed, ?why, "service agent refused");
            let digest = match why {
                ServiceRefusal::Outdated => agent_binary(&state).await?.map(|(_, d)| d),
                _ => None,
            };
            Err(match why {
                ServiceRefusal::Unknown => ApiError::Unauthorized(format!(
                    "this credential is not node-{claimed}'s (the node was removed or \
                     provisioned again since)"
                )),
                ServiceRefusal::OtherNode { bound_to } => ApiError::Forbidden(format!(
                    "this credential belongs to node-{bound_to}, not node-{claimed}"
                )),
                ServiceRefusal::NotThisMachine => ApiError::Forbidden(format!(
                    "node-{claimed}'s credential was presented by a machine with none of its \
                     MACs ({})",
                    b.macs.join(", ")
                )),
                ServiceRefusal::Outdated => ApiError::UpgradeRequired {
                    message: format!(
                        "this agent is version {}; the master needs {REQUIRED_VERSION}: \
                         fetch it from {BINARY_PATH}",
                        b.version
                    ),
                    required: REQUIRED_VERSION,
                    binary: BINARY_PATH,
                    sha256: digest,
                },
            })
        }
    }
}

/// The agent binary the master serves and its SHA-256, hashed off the async runtime (the
/// first time it reads the whole file, ~130 MB for a release build with line tables).
async fn agent_binary(state: &web::Data<AppState>) -> Result<Option<(PathBuf, String)>, ApiError> {
    let state = state.clone();
    crate::http::off_worker(move || binary_digest(&state)).await
}

/// The agent binary the master serves and its SHA-256, computed once per binary (a test
/// process runs several daemons, each with its own).
fn binary_digest(state: &AppState) -> Option<(PathBuf, String)> {
    static DIGESTS: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());
    let path = state.agent_binary.clone()?;
    let mut known = DIGESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = known.iter().find(|(p, _)| *p == path) {
        return Some(found.clone());
    }
    use sha2::Digest;
    use std::io::Read;
    let mut hasher = sha2::Sha256::new();
    let mut file = std::fs::File::open(&path).ok()?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let found = (path, crate::model::hex(&hasher.finalize()));
    known.push(found.clone());
    Some(found)
}

/// `GET /api/v1/agent/service/binary`: the agent binary, for a caller with a node's service
/// credential (`Authorization: Bearer skn_...`) or a node's agent token.
pub async fn binary(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let presented = crate::http::node::agent::bearer(&req)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::Unauthorized(
                "a node's service credential is required (Authorization: Bearer ...)".into(),
            )
        })?;
    let hash = crate::http::node::boot::hash_token(&presented);
    let now = crate::clock::now();
    let node = state
        .store(move |s| {
            s.write(|tx| match tx.os_credential_call(&hash, now)? {
                Some(n) => Ok(Some(n)),
                None => Ok(tx.authenticate_agent(&hash, now)?.map(|(n, _)| n)),
            })
        })
        .await?;
    let Some(node) = node else {
        tracing::warn!(peer = ?req.peer_addr(), "agent binary: credential refused");
        return Err(ApiError::Unauthorized(
            "the credential is not a node's".into(),
        ));
    };
    let digest = agent_binary(&state).await?;
    let Some((path, sha)) = digest else {
        return Err(ApiError::NotFound(
            "the master has no agent binary to serve (deploy.agent_binary)".into(),
        ));
    };
    tracing::info!(node, "agent binary fetched");
    let file = crate::http::off_worker({
        let path = path.clone();
        move || actix_files::NamedFile::open(path)
    })
    .await?
    .map_err(|e| ApiError::Internal(format!("cannot open {}: {e}", path.display())))?;
    // No extension: served as application/octet-stream.
    let mut resp = file.into_response(&req);
    if let Ok(v) = actix_web::http::header::HeaderValue::from_str(&sha) {
        resp.headers_mut().insert(
            actix_web::http::header::HeaderName::from_static("x-stoker-sha256"),
            v,
        );
    }
    Ok(resp)
}

/// The systemd unit of the service agent on the installed OS.
pub const UNIT: &str = "[Unit]
Description=stoker service agent (deployment tasks from the master)
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/local/bin/stoker agent --service /etc/stoker/agent.json
Restart=always
RestartSec=5
# Its status lines on the console too, as the bootstrap agent's are: what an operator (and the
# PXE lab's serial log) sees of a node that does not come back.
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
";

/// What `deploy.configure` installs for the node's service agent (its `os_agent` argument,
/// added when the run is handed out, never stored): the agent's configuration with the
/// node's credential, its unit, and for a config drive the cloud-config user data that
/// writes them, fetches the agent from the master with the credential and starts it.
pub fn os_agent(
    state: &AppState,
    local: std::net::SocketAddr,
    node: i64,
    credential: &str,
) -> serde_json::Value {
    let (_, master) = crate::http::node::boot::bases(&state.boot, local);
    let tls = state.boot.tls.as_ref();
    let config = json!({
        "master": master,
        "fingerprint": tls.map(|t| t.fingerprint.clone()),
        "node_id": node,
        "credential": credential,
    });
    let mut files = vec![
        json!({"path": "/etc/stoker/agent.json", "permissions": "0600",
               "content": format!("{config:#}\n")}),
        json!({"path": "/etc/systemd/system/stoker-agent.service", "permissions": "0644",
               "content": UNIT}),
    ];
    let mut cacert = String::new();
    if let Some(t) = tls {
        files.push(
            json!({"path": "/etc/stoker/master.pem", "permissions": "0644",
                          "content": &*t.chain_pem}),
        );
        cacert = " --cacert /etc/stoker/master.pem".to_string();
    }
    let fetch = format!(
        "curl -fsS --retry 10 --retry-delay 3{cacert} -H 'Authorization: Bearer {credential}' \
         -o /usr/local/bin/stoker.new {master}{BINARY_PATH} && chmod 0755 \
         /usr/local/bin/stoker.new && mv /usr/local/bin/stoker.new /usr/local/bin/stoker"
    );
    let cloud_config = json!({
        "write_files": files,
        "runcmd": [
            ["sh", "-c", fetch],
            ["systemctl", "daemon-reload"],
            ["systemctl", "enable", "--now", "stoker-agent.service"],
        ],
    });
    json!({
        "config": config,
        "unit": UNIT,
        // JSON is YAML: the document needs no YAML writer and no escaping of its own.
        "user_data": format!("#cloud-config\n{cloud_config:#}\n"),
        "meta_data": {
            "uuid": format!("stoker-node-{node}"),
            "meta": {
                "stoker_node_id": node.to_string(),
                "stoker_master": master,
                "stoker_fingerprint": tls.map(|t| t.fingerprint.clone()).unwrap_or_default(),
            },
        },
        "version": REQUIRED_VERSION,
        "binary": BINARY_PATH,
    })
}
