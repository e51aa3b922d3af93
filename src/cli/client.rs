//! How the CLI reaches a running master: its base URL (from `--url` or the configuration's
//! `http.listen`) and the API token it sends, from `--token`, `STOKER_TOKEN`, or the file
//! `stoker login` writes (`$XDG_CONFIG_HOME/stoker/token`, else `~/.config/stoker/token`).
//! An `https://` master is trusted by its certificate's fingerprint (`--fingerprint`,
//! `STOKER_FINGERPRINT`), else by the certificate file of the master this machine's
//! configuration describes (the CLI on the master itself needs nothing more).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::ConfigArgs;

/// How to reach the daemon.
#[derive(Debug, Args)]
pub struct ClientArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Base URL of the daemon; default: derived from `http.listen`
    #[arg(long)]
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
    ) -> anyhow::Result<ureq::RequestBuilder<B>> {
        match self.token() {
            Some(t) => Ok(req.header("authorization", &format!("Bearer {t}"))),
            None => anyhow::bail!(
                "no API token: run `stoker login`, or set STOKER_TOKEN (create one on the \
                 dashboard's Account page or with `stoker token create`)"
            ),
        }
    }
}
