//! The agent's HTTP client: says hello to the master and retries with capped exponential
//! backoff while the master is unreachable or failing (5xx), so a node that boots before the
//! master is up, or across a master restart, still registers. A 4xx answer other than 429 is
//! final: retrying a refused token or a rejected document would not change the answer.
//! [`Master`] is the master's URL with how to trust it: over `https://`, the certificate whose
//! fingerprint the node was given (`stoker.fingerprint=`), fetched and checked once at start.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("master {url} refused every credential: {last}")]
    NoCredential { url: String, last: String },
    #[error("master {url} refused the hello ({status}): {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    #[error("master {url} unreachable after {attempts} attempts: {last}")]
    Unreachable {
        url: String,
        attempts: u32,
        last: String,
    },
    #[error("master {url} cannot be trusted: {detail}")]
    Untrusted { url: String, detail: String },
    #[error("master {url} answered something that is not a hello reply: {detail}")]
    BadReply { url: String, detail: String },
}

/// The master: its URL, and over `https://` the TLS configuration pinned to its certificate.
#[derive(Debug, Clone)]
pub struct Master {
    url: String,
    tls: Option<ureq::tls::TlsConfig>,
}

impl Master {
    /// A master over plain `http://`.
    pub fn plain(url: &str) -> Master {
        Master {
            url: url.trim_end_matches('/').to_string(),
            tls: None,
        }
    }

    /// The master at `url`: over `https://` it needs `fingerprint`, and its chain is fetched
    /// and checked now, retried like hello (`attempts`, 0: forever) while it is unreachable.
    pub fn connect(
        url: &str,
        fingerprint: Option<&str>,
        attempts: u32,
        max_backoff: Duration,
    ) -> Result<Master, AgentError> {
        let mut master = Master::plain(url);
        if !master.url.starts_with("https://") {
            return Ok(master);
        }
        let untrusted = |detail: String| AgentError::Untrusted {
            url: master.url.clone(),
            detail,
        };
        let fingerprint = fingerprint.ok_or_else(|| {
            untrusted(
                "no certificate fingerprint to check it by (stoker.fingerprint= on the kernel \
                 command line, or --fingerprint)"
                    .to_string(),
            )
        })?;
        let fingerprint =
            crate::tls::Fingerprint::parse(fingerprint).map_err(|e| untrusted(e.to_string()))?;
        let mut backoff = Backoff::new(Duration::from_secs(1), max_backoff);
        let mut n = 0u32;
        loop {
            n += 1;
            match crate::tls::pinned(&master.url, &fingerprint, Duration::from_secs(30)) {
                Ok(tls) => {
                    master.tls = Some(tls);
                    return Ok(master);
                }
                // The master answered with another certificate: retrying changes nothing.
                Err(e @ crate::tls::TlsError::Mismatch { .. }) => {
                    return Err(untrusted(e.to_string()));
                }
                Err(e) if attempts != 0 && n >= attempts => {
                    return Err(AgentError::Unreachable {
                        url: master.url.clone(),
                        attempts: n,
                        last: e.to_string(),
                    });
                }
                Err(e) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(attempt = n, "{e}; retrying in {delay:?}");
                    std::thread::sleep(delay);
                }
            }
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// An HTTP client for the master from `config`, with the master's TLS trust.
    pub fn agent(
        &self,
        config: ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
    ) -> ureq::Agent {
        let tls = self
            .tls
            .clone()
            .unwrap_or_else(crate::tls::trusting_nothing);
        config.tls_config(tls).build().into()
    }
}

/// What the master said.
#[derive(Debug, Clone, Deserialize)]
pub struct HelloReply {
    pub created: bool,
    pub node: HelloNode,
    /// A new agent token, when the master issued one: keep it for every later call.
    #[serde(default)]
    pub agent_token: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct HelloNode {
    pub id: i64,
    pub mac: String,
    pub status: String,
}

/// The retry policy shared by hello and the deploy loop: wait `initial`, then twice as long
/// each time, up to `max`; `reset` after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            max,
            next: initial.min(max),
        }
    }

    /// The delay to wait now; the following one doubles.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    pub fn reset(&mut self) {
        self.next = self.initial.min(self.max);
    }
}

enum Attempt {
    Done(HelloReply),
    Final(AgentError),
    Retry(String),
}

fn attempt(agent: &ureq::Agent, url: &str, token: Option<&str>, inventory: &Value) -> Attempt {
    let mut req = agent.post(url).header("content-type", "application/json");
    if let Some(token) = token {
        req = req.header("authorization", &format!("Bearer {token}"));
    }
    let mut resp = match req.send(inventory.to_string()) {
        Ok(r) => r,
        Err(e) => return Attempt::Retry(e.to_string()),
    };
    let status = resp.status().as_u16();
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    match status {
        200 | 201 => match serde_json::from_str(&body) {
            Ok(reply) => Attempt::Done(reply),
            Err(e) => Attempt::Final(AgentError::BadReply {
                url: url.to_string(),
                detail: e.to_string(),
            }),
        },
        // Rate-limited: the master is fine, just busy; come back later.
        429 => Attempt::Retry("HTTP 429 (rate-limited)".to_string()),
        400..=499 => {
            let message = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or(body);
            Attempt::Final(AgentError::Refused {
                url: url.to_string(),
                status,
                message,
            })
        }
        _ => Attempt::Retry(format!("HTTP {status}")),
    }
}

/// POST the inventory to `{master}/api/v1/agent/hello`, up to `attempts` times (0: forever),
/// waiting 1 s, 2 s, 4 s ... up to `max_backoff` between attempts.
pub fn hello_with_retry(
    master: &Master,
    token: Option<&str>,
    inventory: &Value,
    attempts: u32,
    max_backoff: Duration,
) -> Result<HelloReply, AgentError> {
    let url = format!("{}/api/v1/agent/hello", master.url());
    let agent = master.agent(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30))),
    );
    let mut backoff = Backoff::new(Duration::from_secs(1), max_backoff);
    let mut n = 0u32;
    loop {
        n += 1;
        match attempt(&agent, &url, token, inventory) {
            Attempt::Done(reply) => return Ok(reply),
            Attempt::Final(err) => return Err(err),
            Attempt::Retry(last) => {
                if attempts != 0 && n >= attempts {
                    return Err(AgentError::Unreachable {
                        url,
                        attempts: n,
                        last,
                    });
                }
                let delay = backoff.next_delay();
                tracing::warn!(attempt = n, %url, "hello failed: {last}; retrying in {delay:?}");
                std::thread::sleep(delay);
            }
        }
    }
}

/// Say hello with the first credential the master accepts: each of `tokens` in turn (a saved
/// agent token, then the boot token), then none (plain discovery). A 401 moves on to the next;
/// any other refusal is final.
pub fn hello_with_credentials(
    master: &Master,
    tokens: &[String],
    inventory: &Value,
    attempts: u32,
    max_backoff: Duration,
) -> Result<HelloReply, AgentError> {
    let mut last = String::new();
    for token in tokens.iter().map(|t| Some(t.as_str())).chain([None]) {
        match hello_with_retry(master, token, inventory, attempts, max_backoff) {
            Err(AgentError::Refused {
                status: 401,
                message,
                ..
            }) => {
                tracing::warn!("hello refused a token: {message}; trying the next credential");
                last = message;
            }
            other => return other,
        }
    }
    Err(AgentError::NoCredential {
        url: master.url().to_string(),
        last,
    })
}
