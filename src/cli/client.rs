//! How the CLI reaches a running master: its base URL (from `--url` or the configuration's
//! `http.listen`) and the API token it sends, from `--token`, `STOKER_TOKEN`, or the file
//! `stoker login` writes (`$XDG_CONFIG_HOME/stoker/token`, else `~/.config/stoker/token`).
//! An `https://` master is trusted by its certificate's fingerprint (`--fingerprint`,
//! `STOKER_FINGERPRINT`), else by the certificate file of the master this machine's
//! configuration describes (the CLI on the master itself needs nothing more).
//!
//! [`Api`] is the one way the commands call the master: one HTTP client per command, the
//! token on every call, and every failure an [`ApiFailure`] that says what happened in terms
//! the exit code can tell apart (unreachable, not authorized, not found, refused).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Command, FromArgMatches};
use serde_json::Value;

use super::ConfigArgs;
use super::output::OutputArgs;

/// The configuration flags of `stoker serve`, taken by client commands to find a master on
/// this machine (its `http.listen`, its TLS certificate) but hidden from their help: only
/// `--config` shows.
#[derive(Debug, Clone, Default)]
pub struct LocalConfig(pub ConfigArgs);

impl std::ops::Deref for LocalConfig {
    type Target = ConfigArgs;
    fn deref(&self) -> &ConfigArgs {
        &self.0
    }
}

impl Args for LocalConfig {
    fn augment_args(cmd: Command) -> Command {
        ConfigArgs::augment_args(cmd).mut_args(|arg| {
            if crate::config::OPTIONS
                .iter()
                .any(|o| o.key == arg.get_id().as_str())
            {
                arg.hide(true)
            } else {
                arg
            }
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for LocalConfig {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        ConfigArgs::from_arg_matches(matches).map(LocalConfig)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

/// How to reach the daemon.
#[derive(Debug, Args)]
pub struct ClientArgs {
    #[command(flatten)]
    pub config: LocalConfig,
    /// Base URL of the daemon; default: derived from `http.listen` (the configuration of a
    /// master on this machine: `--config`, STOKER_* variables, or `stoker serve`'s flags)
    #[arg(long, env = "STOKER_URL")]
    pub url: Option<String>,
    /// Seconds to wait for an answer
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// API token; default: STOKER_TOKEN, else the file `stoker login` wrote
    #[arg(long, env = "STOKER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The master's certificate fingerprint (sha256:HEX, logged when it starts), to trust an
    /// https:// master from another machine; default: the certificate file of the master
    /// configured here
    #[arg(long, env = "STOKER_FINGERPRINT")]
    pub fingerprint: Option<String>,
}

/// How the CLI trusts the master at `base`: nothing to do over `http://`; over `https://`, pin
/// `fingerprint`, else trust the certificate file of the master `config` describes.
pub fn trust(
    base: &str,
    fingerprint: Option<&str>,
    config: impl FnOnce() -> Option<crate::config::Config>,
    timeout: Duration,
) -> anyhow::Result<Option<ureq::tls::TlsConfig>> {
    use crate::config::TlsMode;
    if !base.starts_with("https://") {
        return Ok(None);
    }
    if let Some(fp) = fingerprint.map(str::trim).filter(|f| !f.is_empty()) {
        let fp = crate::tls::Fingerprint::parse(fp)?;
        return Ok(Some(crate::tls::pinned(base, &fp, timeout)?));
    }
    let local_cert = config().and_then(|c| match c.http_tls {
        TlsMode::Files { cert, .. } => Some(cert),
        TlsMode::SelfSigned => Some(c.data_dir.join("tls").join("master.crt")),
        TlsMode::Off => None,
    });
    if let Some(path) = local_cert
        && let Ok(pem) = std::fs::read_to_string(&path)
    {
        let anchor = crate::tls::anchor(&pem, None, base)
            .with_context(|| format!("cannot trust the certificate in {}", path.display()))?;
        return Ok(Some(crate::tls::client_config(&anchor)));
    }
    anyhow::bail!(
        "{base} serves HTTPS: pass --fingerprint sha256:... or set STOKER_FINGERPRINT (the \
         master logs its fingerprint when it starts)"
    )
}

/// An agent only for asking whether something answers at all (it checks no certificate, so
/// it must never carry a credential).
pub fn probe_agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .provider(ureq::tls::TlsProvider::Rustls)
                .unversioned_rustls_crypto_provider(crate::tls::provider())
                .disable_verification(true)
                .build(),
        )
        .build()
        .into()
}

/// Where `stoker login` keeps its token.
pub fn token_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("stoker").join("token"))
}

impl ClientArgs {
    pub fn base(&self) -> anyhow::Result<String> {
        if let Some(u) = &self.url {
            return Ok(u.trim_end_matches('/').to_string());
        }
        let config = self
            .config
            .layers()
            .and_then(|l| l.resolve())
            .context("cannot resolve the configuration to find the daemon")?;
        Ok(super::serve::local_url(&config))
    }

    /// An HTTP client for the master, trusting its certificate over `https://` (see [`trust`]).
    pub fn agent(&self) -> anyhow::Result<ureq::Agent> {
        let base = self.base()?;
        let tls = trust(
            &base,
            self.fingerprint.as_deref(),
            || self.config.layers().and_then(|l| l.resolve()).ok(),
            Duration::from_secs(self.timeout.min(30)),
        )?;
        Ok(ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(self.timeout)))
            .http_status_as_error(false)
            .tls_config(tls.unwrap_or_else(crate::tls::trusting_nothing))
            .build()
            .into())
    }

    /// The token to send, if any.
    pub fn token(&self) -> Option<String> {
        if let Some(t) = self
            .token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            return Some(t.to_string());
        }
        let file = token_file()?;
        std::fs::read_to_string(file)
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
    }

    /// Add the token to a request; without one, say how to get one.
    pub fn authorized<B>(
        &self,
        req: ureq::RequestBuilder<B>,
    ) -> Result<ureq::RequestBuilder<B>, ApiFailure> {
        match self.token() {
            Some(t) => Ok(req.header("authorization", &format!("Bearer {t}"))),
            None => Err(ApiFailure::NoToken),
        }
    }
}

/// What every API command takes: how to reach the master and how to print its answers.
#[derive(Debug, Args)]
pub struct ApiArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// One field the master named in a refusal (`access.user`: expected a string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub field: String,
    pub message: String,
}

/// Why a call to the master failed, as the exit code tells them apart
/// ([`super::exit::code_of`]).
#[derive(Debug, thiserror::Error)]
pub enum ApiFailure {
    #[error(
        "no API token: run `stoker login`, or set STOKER_TOKEN (create one on the dashboard's \
         Account page or with `stoker token create`)"
    )]
    NoToken,
    #[error("cannot reach the master at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// An answer other than 2xx: `code` and `message` from its `{"code", "message"}` body,
    /// `fields` each bad field it names.
    #[error("{}", refusal(*.status, .code, .message, .fields))]
    Refused {
        status: u16,
        code: String,
        message: String,
        fields: Vec<Field>,
    },
    #[error("the master's answer to {path} is not what this stoker expects: {reason}")]
    BadAnswer { path: String, reason: String },
}

/// `refused (409 conflict): message`, then a line per named field.
fn refusal(status: u16, code: &str, message: &str, fields: &[Field]) -> String {
    let what = match status {
        401 | 403 => "not authorized",
        404 => "not found",
        500.. => "the master failed",
        _ => "refused",
    };
    // An input error's message joins its fields ("invalid settings: a: x; b: y"): keep its
    // headline and put each field on its own line.
    let message = fields
        .first()
        .and_then(|f| message.find(&format!(": {}", f.field)))
        .map_or(message, |at| &message[..at]);
    let mut out = if code.is_empty() {
        format!("{what} ({status}): {message}")
    } else {
        format!("{what} ({status} {code}): {message}")
    };
    for f in fields {
        out.push_str(&format!("\n  {}: {}", f.field, f.message));
    }
    if status == 401 {
        out.push_str("\n  (sign in again with `stoker login`, or pass a valid --token)");
    }
    out
}

impl ApiFailure {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiFailure::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The largest answer read (a deployment of a thousand nodes with every run's output).
const ANSWER_LIMIT: u64 = 512 * 1024 * 1024;

/// A client of one master for one command: its base URL, an HTTP agent that trusts it, and
/// the token.
pub struct Api {
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
}

impl Api {
    pub fn new(args: &ClientArgs) -> anyhow::Result<Api> {
        Ok(Api {
            base: args.base()?,
            agent: args.agent()?,
            token: args.token(),
        })
    }

    /// `GET path`: the JSON answer.
    pub fn get(&self, path: &str) -> Result<Value, ApiFailure> {
        self.call("GET", path, None)
    }

    /// `GET path` of a deployment's runs (`/api/v1/deployments/{id}/runs?...`), every page.
    pub fn runs(&self, path: &str) -> Result<Value, ApiFailure> {
        self.all_pages(path, "runs")
    }

    /// `GET path` of a paged answer, every page of it: the first page's answer with the later
    /// pages' `key` lists appended (the daemon sends at most 10,000 runs a page and says where
    /// the next starts in `next_offset`, null after the last).
    pub fn all_pages(&self, path: &str, key: &str) -> Result<Value, ApiFailure> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut doc = self.get(path)?;
        let mut next = doc["next_offset"].as_u64();
        while let Some(offset) = next {
            let page = self.get(&format!("{path}{sep}offset={offset}"))?;
            next = page["next_offset"].as_u64().filter(|n| *n > offset);
            if let (Some(all), Some(more)) = (doc[key].as_array_mut(), page[key].as_array()) {
                all.extend(more.iter().cloned());
            }
        }
        if doc.get("next_offset").is_some() {
            doc["next_offset"] = Value::Null;
        }
        Ok(doc)
    }

    /// `GET path`: the answer as text (a plan as text or Graphviz).
    pub fn get_text(&self, path: &str) -> Result<String, ApiFailure> {
        self.exchange("GET", path, None)
    }

    pub fn post(&self, path: &str, body: Option<Value>) -> Result<Value, ApiFailure> {
        self.call("POST", path, body)
    }

    pub fn put(&self, path: &str, body: Option<Value>) -> Result<Value, ApiFailure> {
        self.call("PUT", path, body)
    }

    pub fn delete(&self, path: &str) -> Result<Value, ApiFailure> {
        self.call("DELETE", path, None)
    }

    /// Call the API: the JSON answer of a 2xx (`null` for an empty one), else an
    /// [`ApiFailure`] naming the status, the code, the message and each bad field.
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, ApiFailure> {
        let text = self.exchange(method, path, body)?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| ApiFailure::BadAnswer {
            path: path.to_string(),
            reason: e.to_string(),
        })
    }

    fn exchange(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<String, ApiFailure> {
        let token = self.token.as_deref().ok_or(ApiFailure::NoToken)?;
        let url = format!("{}{path}", self.base);
        let bearer = format!("Bearer {token}");
        let a = &self.agent;
        let sent = match (method, body) {
            ("GET", _) => a.get(&url).header("authorization", &bearer).call(),
            ("DELETE", _) => a.delete(&url).header("authorization", &bearer).call(),
            ("PUT", Some(b)) => a.put(&url).header("authorization", &bearer).send_json(b),
            ("PUT", None) => a.put(&url).header("authorization", &bearer).send_empty(),
            (_, Some(b)) => a.post(&url).header("authorization", &bearer).send_json(b),
            (_, None) => a.post(&url).header("authorization", &bearer).send_empty(),
        };
        let mut resp = sent.map_err(|e| ApiFailure::Unreachable {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(ANSWER_LIMIT)
            .read_to_string()
            .map_err(|e| ApiFailure::Unreachable {
                url: url.clone(),
                reason: format!("reading the answer: {e}"),
            })?;
        if (200..300).contains(&status) {
            return Ok(text);
        }
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let fields = value["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| Field {
                field: f["field"].as_str().unwrap_or("?").to_string(),
                message: f["message"].as_str().unwrap_or("").to_string(),
            })
            .collect();
        Err(ApiFailure::Refused {
            status,
            code: value["code"].as_str().unwrap_or("").to_string(),
            message: value["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| text.trim().chars().take(300).collect()),
            fields,
        })
    }
}

/// `s` percent-encoded for a query string or a path segment.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Call the API with a client made for this one call (the older commands' way; new ones keep
/// an [`Api`]).
pub fn call(
    client: &ClientArgs,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    Ok(Api::new(client)?.call(method, path, body)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_escaped() {
        assert_eq!(encode("deploy.configure"), "deploy.configure");
        assert_eq!(encode("a b&c/é"), "a%20b%26c%2F%C3%A9");
    }

    #[test]
    fn a_refusal_names_each_field_on_its_own_line() {
        let e = ApiFailure::Refused {
            status: 400,
            code: "invalid_input".into(),
            message: "invalid settings: access.user: expected a string".into(),
            fields: vec![Field {
                field: "access.user".into(),
                message: "expected a string".into(),
            }],
        };
        assert_eq!(
            e.to_string(),
            "refused (400 invalid_input): invalid settings\n  access.user: expected a string"
        );
    }
}
