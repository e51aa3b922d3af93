//! Daemon configuration: every option declared once, layered defaults < TOML file < `STOKER_*`
//! environment < command-line flags, and validated into a typed [`Config`].
//!
//! [`OPTIONS`] is the single list of options (key, environment variable, flag, default, help).
//! The clap flags of `stoker serve`, the README's config table (checked by a test) and the error
//! messages are all derived from it. This module parses values; it opens no sockets and does not
//! create the data directory (the daemon does).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The expected form of an option's value, used to parse it and to explain a bad one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Path,
    SocketAddr,
    Seconds,
    Choice(&'static [&'static str]),
    LogFilter,
    /// An `http://` URL, or empty for "not set".
    OptionalUrl,
    /// Free text (may be empty).
    Text,
}

impl Kind {
    /// A human description of the accepted form, used in error messages and the README.
    pub fn expected(self) -> String {
        match self {
            Kind::Path => "a file system path".to_string(),
            Kind::SocketAddr => "an IP address and port, like 127.0.0.1:8000".to_string(),
            Kind::Seconds => "a whole number of seconds, like 30".to_string(),
            Kind::Choice(choices) => format!("one of {}", choices.join(", ")),
            Kind::LogFilter => {
                "a tracing filter, like info or stoker=debug,actix_web=warn".to_string()
            }
            Kind::OptionalUrl => {
                "an http:// URL without a trailing path, like http://10.20.0.2:8000, or empty"
                    .to_string()
            }
            Kind::Text => "text".to_string(),
        }
    }
}

/// One configuration option. The TOML key is dotted (`http.listen` is `[http] listen`).
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    pub key: &'static str,
    pub env: &'static str,
    pub flag: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

pub const LOG_FORMATS: &[&str] = &["human", "json"];

/// What to do with the release plugins shipped in the binary on first start.
pub const BUNDLED_CHOICES: &[&str] = &["install", "skip"];

/// Every option stoker reads. Add an option here and nowhere else.
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "data_dir",
        env: "STOKER_DATA_DIR",
        flag: "data-dir",
        default: "./stoker-data",
        kind: Kind::Path,
        help: "Directory for the SQLite database and installed plugins; created if missing",
    },
    OptionSpec {
        key: "http.listen",
        env: "STOKER_HTTP_LISTEN",
        flag: "http-listen",
        default: "127.0.0.1:8000",
        kind: Kind::SocketAddr,
        help: "Address and port of the dashboard, the REST API and the agent endpoints",
    },
    OptionSpec {
        key: "http.shutdown_timeout",
        env: "STOKER_HTTP_SHUTDOWN_TIMEOUT",
        flag: "http-shutdown-timeout",
        default: "30",
        kind: Kind::Seconds,
        help: "Seconds in-flight requests get to finish after SIGTERM or SIGINT",
    },
    OptionSpec {
        key: "http.public_url",
        env: "STOKER_HTTP_PUBLIC_URL",
        flag: "http-public-url",
        default: "",
        kind: Kind::OptionalUrl,
        help: "URL nodes use to reach this master; empty: the address each boot request came to",
    },
    OptionSpec {
        key: "boot.kernel_args",
        env: "STOKER_BOOT_KERNEL_ARGS",
        flag: "boot-kernel-args",
        default: "console=tty0 console=ttyS0,115200n8",
        kind: Kind::Text,
        help: "Extra kernel command-line arguments for the bootstrap image",
    },
    OptionSpec {
        key: "log.format",
        env: "STOKER_LOG_FORMAT",
        flag: "log-format",
        default: "human",
        kind: Kind::Choice(LOG_FORMATS),
        help: "Log format on standard error: human-readable lines or one JSON object per line",
    },
    OptionSpec {
        key: "log.level",
        env: "STOKER_LOG_LEVEL",
        flag: "log-level",
        default: "info",
        kind: Kind::LogFilter,
        help: "Which log events to print",
    },
    OptionSpec {
        key: "plugins.bundled",
        env: "STOKER_PLUGINS_BUNDLED",
        flag: "plugins-bundled",
        default: "install",
        kind: Kind::Choice(BUNDLED_CHOICES),
        help: "Install the release plugins shipped in the binary on first start (once: a removed one stays removed)",
    },
];

/// Environment variable naming the config file, for `--config`.
pub const CONFIG_FILE_ENV: &str = "STOKER_CONFIG";

/// Where a value came from, so an error can say where to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(&'static str),
    Flag(&'static str),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => write!(f, "the default"),
            Source::File(path) => write!(f, "config file {}", path.display()),
            Source::Env(var) => write!(f, "environment variable {var}"),
            Source::Flag(flag) => write!(f, "flag --{flag}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("config file {path}: unknown key `{key}` (known keys: {known})")]
    UnknownKey {
        path: PathBuf,
        key: String,
        known: String,
    },
    #[error("invalid value {value:?} for `{key}` (from {origin}): expected {expected}")]
    Invalid {
        key: &'static str,
        value: String,
        origin: Source,
        expected: String,
    },
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

/// The validated configuration the daemon runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub http_listen: SocketAddr,
    pub http_shutdown_timeout: u64,
    pub http_public_url: Option<String>,
    pub boot_kernel_args: String,
    pub log_format: LogFormat,
    pub log_level: String,
    /// Install the bundled release plugins on first start.
    pub install_bundled: bool,
}

impl Config {
    /// Path of the SQLite database inside the data directory.
    pub fn database_path(&self) -> PathBuf {
        self.data_dir.join("stoker.db")
    }

    /// Where the bootstrap kernel and initramfs are served from (`images/` in the data dir).
    pub fn images_dir(&self) -> PathBuf {
        self.data_dir.join("images")
    }

    /// The configuration made of defaults only.
    pub fn defaults() -> Config {
        let raw = Layers::default();
        // The defaults are constants checked by a unit test; a failure here is a programming error.
        match raw.resolve() {
            Ok(config) => config,
            Err(err) => unreachable!("built-in defaults are invalid: {err}"),
        }
    }
}

/// The raw string values of each layer, before validation.
#[derive(Debug, Default, Clone)]
pub struct Layers {
    file: Option<(PathBuf, BTreeMap<String, String>)>,
    env: BTreeMap<&'static str, String>,
    flags: BTreeMap<&'static str, String>,
}

impl Layers {
    /// Read a TOML config file. Unknown keys are errors, so a typo is never silently ignored.
    pub fn with_file(mut self, path: PathBuf) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let values = parse_toml(&path, &text)?;
        self.file = Some((path, values));
        Ok(self)
    }

    /// Take `STOKER_*` variables from an environment (a closure so tests need not touch the
    /// process environment).
    pub fn with_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Self {
        for opt in OPTIONS {
            if let Some(value) = lookup(opt.env) {
                self.env.insert(opt.key, value);
            }
        }
        self
    }

    /// Set a value given by a command-line flag.
    pub fn with_flag(mut self, key: &'static str, value: String) -> Self {
        self.flags.insert(key, value);
        self
    }

    fn value_of(&self, opt: &OptionSpec) -> (String, Source) {
        if let Some(v) = self.flags.get(opt.key) {
            return (v.clone(), Source::Flag(opt.flag));
        }
        if let Some(v) = self.env.get(opt.key) {
            return (v.clone(), Source::Env(opt.env));
        }
        if let Some((path, values)) = &self.file
            && let Some(v) = values.get(opt.key)
        {
            return (v.clone(), Source::File(path.clone()));
        }
        (opt.default.to_string(), Source::Default)
    }

    /// Validate every layer into a [`Config`]; the first bad value is reported with its key.
    pub fn resolve(&self) -> Result<Config, ConfigError> {
        let mut values: BTreeMap<&'static str, Parsed> = BTreeMap::new();
        for opt in OPTIONS {
            let (raw, source) = self.value_of(opt);
            let parsed = parse_value(opt, &raw).ok_or_else(|| ConfigError::Invalid {
                key: opt.key,
                value: raw.clone(),
                origin: source,
                expected: opt.kind.expected(),
            })?;
            values.insert(opt.key, parsed);
        }
        let mut take = |key: &str| values.remove(key);
        Ok(Config {
            data_dir: match take("data_dir") {
                Some(Parsed::Path(p)) => p,
                _ => unreachable!("data_dir is declared as a path"),
            },
            http_listen: match take("http.listen") {
                Some(Parsed::Addr(a)) => a,
                _ => unreachable!("http.listen is declared as a socket address"),
            },
            http_shutdown_timeout: match take("http.shutdown_timeout") {
                Some(Parsed::Seconds(s)) => s,
                _ => unreachable!("http.shutdown_timeout is declared as seconds"),
            },
            http_public_url: match take("http.public_url") {
                Some(Parsed::Text(t)) if t.is_empty() => None,
                Some(Parsed::Text(t)) => Some(t),
                _ => unreachable!("http.public_url is declared as an optional URL"),
            },
            boot_kernel_args: match take("boot.kernel_args") {
                Some(Parsed::Text(t)) => t,
                _ => unreachable!("boot.kernel_args is declared as text"),
            },
            log_format: match take("log.format") {
                Some(Parsed::Text(t)) if t == "json" => LogFormat::Json,
                Some(Parsed::Text(_)) => LogFormat::Human,
                _ => unreachable!("log.format is declared as a choice"),
            },
            log_level: match take("log.level") {
                Some(Parsed::Text(t)) => t,
                _ => unreachable!("log.level is declared as a filter"),
            },
            install_bundled: match take("plugins.bundled") {
                Some(Parsed::Text(t)) => t == "install",
                _ => unreachable!("plugins.bundled is declared as a choice"),
            },
        })
    }
}

enum Parsed {
    Path(PathBuf),
    Addr(SocketAddr),
    Seconds(u64),
    Text(String),
}

fn parse_value(opt: &OptionSpec, raw: &str) -> Option<Parsed> {
    let raw = raw.trim();
    match opt.kind {
        Kind::Path => (!raw.is_empty()).then(|| Parsed::Path(PathBuf::from(raw))),
        Kind::SocketAddr => raw.parse().ok().map(Parsed::Addr),
        Kind::Seconds => raw.parse().ok().map(Parsed::Seconds),
        Kind::Choice(choices) => choices
            .contains(&raw)
            .then(|| Parsed::Text(raw.to_string())),
        Kind::LogFilter => tracing_subscriber::EnvFilter::try_new(raw)
            .ok()
            .filter(|_| !raw.is_empty())
            .map(|_| Parsed::Text(raw.to_string())),
        Kind::OptionalUrl => {
            let url = raw.trim_end_matches('/');
            let valid = url.is_empty()
                || url.strip_prefix("http://").is_some_and(|rest| {
                    !rest.is_empty() && !rest.contains('/') && !rest.contains(char::is_whitespace)
                });
            valid.then(|| Parsed::Text(url.to_string()))
        }
        Kind::Text => Some(Parsed::Text(raw.to_string())),
    }
}

/// Flatten a TOML document into dotted keys, refusing keys that are not options.
fn parse_toml(path: &std::path::Path, text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let table: toml::Table = text
        .parse()
        .map_err(|err: toml::de::Error| ConfigError::Toml {
            path: path.to_path_buf(),
            message: err.to_string().trim_end().to_string(),
        })?;
    let mut out = BTreeMap::new();
    flatten(path, "", &table, &mut out)?;
    Ok(out)
}

fn flatten(
    path: &std::path::Path,
    prefix: &str,
    table: &toml::Table,
    out: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for (name, value) in table {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        match value {
            toml::Value::Table(inner) => flatten(path, &key, inner, out)?,
            other => {
                if !OPTIONS.iter().any(|o| o.key == key) {
                    return Err(ConfigError::UnknownKey {
                        path: path.to_path_buf(),
                        key,
                        known: OPTIONS.iter().map(|o| o.key).collect::<Vec<_>>().join(", "),
                    });
                }
                let text = match other {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    v => v.to_string(),
                };
                out.insert(key, text);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_loopback() {
        let config = Config::defaults();
        assert_eq!(config.http_listen.to_string(), "127.0.0.1:8000");
        assert_eq!(
            config.database_path(),
            PathBuf::from("./stoker-data/stoker.db")
        );
        assert_eq!(config.log_format, LogFormat::Human);
    }

    #[test]
    fn every_option_is_unique_and_env_named_after_key() {
        for (i, a) in OPTIONS.iter().enumerate() {
            let expected_env = format!("STOKER_{}", a.key.replace('.', "_").to_uppercase());
            assert_eq!(a.env, expected_env, "{}", a.key);
            assert_eq!(a.flag, a.key.replace(['.', '_'], "-"), "{}", a.key);
            for b in &OPTIONS[i + 1..] {
                assert_ne!(a.key, b.key);
            }
        }
    }

    #[test]
    fn flags_beat_env_beat_file() {
        let mut file = BTreeMap::new();
        file.insert("http.listen".to_string(), "127.0.0.1:1".to_string());
        file.insert("log.level".to_string(), "debug".to_string());
        file.insert("data_dir".to_string(), "/from/file".to_string());
        let layers = Layers {
            file: Some((PathBuf::from("c.toml"), file)),
            ..Layers::default()
        }
        .with_env(|var| match var {
            "STOKER_HTTP_LISTEN" => Some("127.0.0.1:2".to_string()),
            "STOKER_DATA_DIR" => Some("/from/env".to_string()),
            _ => None,
        })
        .with_flag("data_dir", "/from/flag".to_string());
        let config = layers.resolve().unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(config.http_listen.port(), 2);
        assert_eq!(config.log_level, "debug");
    }

    #[test]
    fn bad_value_names_key_source_and_form() {
        let err = Layers::default()
            .with_env(|var| (var == "STOKER_LOG_FORMAT").then(|| "yaml".to_string()))
            .resolve()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"yaml\" for `log.format` (from environment variable STOKER_LOG_FORMAT): expected one of human, json"
        );
    }

    #[test]
    fn toml_unknown_key_is_refused() {
        let err = parse_toml(
            std::path::Path::new("c.toml"),
            "[http]\nlisten = 'x'\nlsten = 1\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("unknown key `http.lsten`"),
            "{err}"
        );
        let ok = parse_toml(
            std::path::Path::new("c.toml"),
            "[http]\nshutdown_timeout = 5\n",
        )
        .unwrap();
        assert_eq!(ok["http.shutdown_timeout"], "5");
    }
}
