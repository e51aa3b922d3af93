//! How the CLI reaches a running master: its base URL (from `--url` or the configuration's
//! `http.listen`) and the API token it sends, from `--token`, `STOKER_TOKEN`, or the file
//! `stoker login` writes (`$XDG_CONFIG_HOME/stoker/token`, else `~/.config/stoker/token`).

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

    pub fn agent(&self) -> ureq::Agent {
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(self.timeout)))
            .http_status_as_error(false)
            .build()
            .into()
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
