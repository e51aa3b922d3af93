//! Daemon configuration: every option declared once, layered defaults < TOML file < `STOKER_*`
//! environment < command-line flags, and validated into a typed [`Config`].
//!
//! [`OPTIONS`] is the single list of options (key, environment variable, flag, default, help).
//! The clap flags of `stoker serve`, the README's config table (checked by a test) and the error
//! messages are all derived from it. This module parses values; it opens no sockets and does not
//! create the data directory (the daemon does).
//!
//! `options.rs` holds the table, `value.rs` parses one value; this module layers and types them.

mod options;
mod value;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use crate::dhcp::reply::{Mode as DhcpMode, Subnet};
use crate::dhcp::spec;
use crate::engine::hello::{Approval, Binding};
pub use options::*;
use value::{Parsed, parse_value};

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
    #[error("`{key}` must be set when {because}")]
    Missing {
        key: &'static str,
        because: &'static str,
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
    /// Whether and how the dashboard, API and agents are served over HTTPS.
    pub http_tls: TlsMode,
    /// Under TLS, the plain-HTTP listener for iPXE's boot files.
    pub http_boot_listen: SocketAddr,
    pub boot_kernel_args: String,
    /// `boot.token_binding`, with `auto` resolved.
    pub boot_token_binding: Binding,
    pub discovery: DiscoverySettings,
    pub log_format: LogFormat,
    pub log_level: String,
    pub dhcp: DhcpSettings,
    pub tftp: TftpSettings,
    /// Install the bundled release plugins on first start.
    pub install_bundled: bool,
    /// Limits on uploaded packages.
    pub package_limits: crate::package::PackageLimits,
    pub deploy: crate::deployer::DeploySettings,
    /// `plan.yaql_budget`: the YAQL steps one plan may take in all.
    pub plan_yaql_budget: u64,
    /// `deploy.agent_binary`: the service agent's binary, when not the master's own.
    pub agent_binary: Option<PathBuf>,
    pub auth: AuthConfig,
    pub bmc: BmcConfig,
}

/// `http.tls` with `auto` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain HTTP everywhere.
    Off,
    /// A certificate made on first start and kept in `data_dir/tls/`.
    SelfSigned,
    /// The operator's certificate chain and key.
    Files { cert: PathBuf, key: PathBuf },
}

impl TlsMode {
    pub fn is_on(&self) -> bool {
        *self != TlsMode::Off
    }
}

/// Sessions, sign-in tokens and the audit log.
#[derive(Debug, Clone, Copy)]
pub struct AuthConfig {
    /// Seconds of inactivity that end a dashboard session.
    pub session_idle: i64,
    /// Seconds after sign-in that end a dashboard session.
    pub session_lifetime: i64,
    /// Seconds a password-bought token lasts.
    pub login_token_lifetime: i64,
    /// Days the audit log keeps an entry.
    pub audit_retention_days: i64,
}

/// How the master talks to BMCs.
#[derive(Debug, Clone, Copy)]
pub struct BmcConfig {
    /// Seconds between two power readings of one BMC.
    pub sync_interval: u64,
    /// Requests in flight at most, sweeps and bulk actions alike (at least 1).
    pub sync_workers: usize,
    /// Seconds one request may take.
    pub timeout: u64,
    /// Power off the nodes of an environment deleted or reset, unless the request says not to.
    pub power_off_released: bool,
}

/// Who discovery lets in.
#[derive(Debug, Clone, Copy)]
pub struct DiscoverySettings {
    pub approval: Approval,
    pub max_nodes: u64,
}

/// The DHCP server's settings.
#[derive(Debug, Clone)]
pub struct DhcpSettings {
    pub enabled: bool,
    pub listen: SocketAddr,
    pub server_ip: Option<Ipv4Addr>,
    /// Interface name; `None`: the one holding `server_ip`.
    pub interface: Option<String>,
    /// Subnets with their reservations attached.
    pub subnets: Vec<Subnet>,
    pub mode: DhcpMode,
    pub reply_to: Option<SocketAddr>,
    /// Packets decided per second, all clients together (a burst of five seconds' worth).
    pub max_rate: u64,
}

/// The TFTP server's settings.
#[derive(Debug, Clone)]
pub struct TftpSettings {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// `None`: `tftp/` in the data directory.
    pub root: Option<PathBuf>,
    pub max_transfers: usize,
    /// Largest TFTP block that fits one frame of the PXE network.
    pub max_blksize: u16,
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

    /// The directory served over TFTP.
    pub fn tftp_root(&self) -> PathBuf {
        self.tftp
            .root
            .clone()
            .unwrap_or_else(|| self.data_dir.join("tftp"))
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

    /// Where `key`'s value comes from.
    fn origin(&self, key: &str) -> Source {
        OPTIONS
            .iter()
            .find(|o| o.key == key)
            .map_or(Source::Default, |o| self.value_of(o).1)
    }

    /// `http.tls`, `http.tls_cert` and `http.tls_key` resolved: `auto` is on for any
    /// `http.listen` but a loopback address; a certificate needs its key and the other way round.
    fn tls_mode(v: &mut Values, listen: SocketAddr) -> Result<TlsMode, ConfigError> {
        let mode = v.text("http.tls");
        let files = match (v.opt_path("http.tls_cert"), v.opt_path("http.tls_key")) {
            (Some(cert), Some(key)) => Some(TlsMode::Files { cert, key }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ConfigError::Missing {
                    key: "http.tls_key",
                    because: "`http.tls_cert` is set",
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::Missing {
                    key: "http.tls_cert",
                    because: "`http.tls_key` is set",
                });
            }
        };
        Ok(match (mode.as_str(), files) {
            ("off", _) => TlsMode::Off,
            (_, Some(files)) => files,
            ("on", None) => TlsMode::SelfSigned,
            (_, None) if listen.ip().is_loopback() => TlsMode::Off,
            (_, None) => TlsMode::SelfSigned,
        })
    }

    /// Validate every layer into a [`Config`]; the first bad value is reported with its key.
    pub fn resolve(&self) -> Result<Config, ConfigError> {
        let mut values: BTreeMap<&'static str, Parsed> = BTreeMap::new();
        let mut origins: BTreeMap<&'static str, (String, Source)> = BTreeMap::new();
        for opt in OPTIONS {
            let (raw, source) = self.value_of(opt);
            let parsed = parse_value(opt, &raw).map_err(|detail| ConfigError::Invalid {
                key: opt.key,
                value: raw.clone(),
                origin: source.clone(),
                expected: match detail {
                    Some(detail) => format!("{} ({detail})", opt.kind.expected()),
                    None => opt.kind.expected(),
                },
            })?;
            values.insert(opt.key, parsed);
            origins.insert(opt.key, (raw, source));
        }
        let mut v = Values(values);
        let v = &mut v;
        let dhcp = {
            let enabled = v.bool("dhcp.enabled");
            let listen = v.addr("dhcp.listen");
            let server_ip = v.ip("dhcp.server_ip");
            let interface = v.opt_text("dhcp.interface");
            let mut subnets = v.subnets("dhcp.subnets");
            let reservations = v.reservations("dhcp.reservations");
            spec::attach_reservations(&mut subnets, reservations).map_err(|detail| {
                let (value, origin) = origins
                    .get("dhcp.reservations")
                    .cloned()
                    .unwrap_or((String::new(), Source::Default));
                ConfigError::Invalid {
                    key: "dhcp.reservations",
                    value,
                    origin,
                    expected: format!("{} ({detail})", Kind::Reservations.expected()),
                }
            })?;
            let mode = if v.text("dhcp.mode") == "reservation-only" {
                DhcpMode::ReservationOnly
            } else {
                DhcpMode::Authoritative
            };
            let reply_to = v.opt_addr("dhcp.reply_to");
            let max_rate = v.count("dhcp.max_rate");
            if enabled && server_ip.is_none() {
                return Err(ConfigError::Missing {
                    key: "dhcp.server_ip",
                    because: "dhcp.enabled is true",
                });
            }
            if enabled && subnets.is_empty() {
                return Err(ConfigError::Missing {
                    key: "dhcp.subnets",
                    because: "dhcp.enabled is true",
                });
            }
            DhcpSettings {
                enabled,
                listen,
                server_ip,
                interface,
                subnets,
                mode,
                reply_to,
                max_rate,
            }
        };
        let tftp = TftpSettings {
            enabled: v.bool("tftp.enabled"),
            listen: v.addr("tftp.listen"),
            root: v.opt_path("tftp.root"),
            max_transfers: usize::try_from(v.count("tftp.max_transfers")).unwrap_or(usize::MAX),
            // IP (20) + UDP (8) + TFTP (4) headers; RFC 2348 allows 8..=65464.
            max_blksize: u16::try_from(v.count("tftp.mtu").saturating_sub(32).clamp(8, 65464))
                .unwrap_or(1468),
        };
        let secs = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let auth = AuthConfig {
            session_idle: secs(v.seconds("auth.session_idle")),
            session_lifetime: secs(v.seconds("auth.session_lifetime")),
            login_token_lifetime: secs(v.seconds("auth.login_token_lifetime")),
            audit_retention_days: secs(v.count("audit.retention_days")),
        };
        let bmc = BmcConfig {
            sync_interval: v.seconds("bmc.sync_interval").max(1),
            sync_workers: usize::try_from(v.count("bmc.sync_workers").clamp(1, 256)).unwrap_or(8),
            timeout: v.seconds("bmc.timeout").max(1),
            power_off_released: v.bool("bmc.power_off_released"),
        };
        let boot_token_binding = match v.text("boot.token_binding").as_str() {
            "lease" => Binding::Lease,
            "address" => Binding::Address,
            "none" => Binding::None,
            _ if dhcp.enabled => Binding::Lease,
            _ => Binding::Address,
        };
        let discovery = DiscoverySettings {
            approval: if v.text("discovery.approval") == "manual" {
                Approval::Manual
            } else {
                Approval::Auto
            },
            max_nodes: v.count("discovery.max_nodes"),
        };
        let http_listen = v.addr("http.listen");
        let http_public_url = v.opt_text("http.public_url");
        let http_tls = Self::tls_mode(v, http_listen)?;
        if http_tls.is_on()
            && let Some(url) = http_public_url
                .as_ref()
                .filter(|u| u.starts_with("http://"))
        {
            return Err(ConfigError::Invalid {
                key: "http.public_url",
                value: url.clone(),
                origin: self.origin("http.public_url"),
                expected: "an https:// URL: the master serves HTTPS (http.tls)".to_string(),
            });
        }
        let http_boot_listen = v.opt_addr("http.boot_listen").unwrap_or_else(|| {
            SocketAddr::new(
                http_listen.ip(),
                if http_listen.port() == 0 { 0 } else { 8080 },
            )
        });
        if http_tls.is_on()
            && http_boot_listen.port() != 0
            && http_boot_listen.port() == http_listen.port()
            && (http_boot_listen.ip() == http_listen.ip()
                || http_boot_listen.ip().is_unspecified()
                || http_listen.ip().is_unspecified())
        {
            return Err(ConfigError::Invalid {
                key: "http.boot_listen",
                value: http_boot_listen.to_string(),
                origin: self.origin("http.boot_listen"),
                expected: format!(
                    "an address other than http.listen's ({http_listen}): under TLS, iPXE's \
                     plain-HTTP boot files need a port of their own"
                ),
            });
        }
        Ok(Config {
            http_listen,
            http_public_url,
            http_tls,
            http_boot_listen,
            auth,
            bmc,
            boot_token_binding,
            discovery,
            dhcp,
            tftp,
            data_dir: v.path("data_dir"),
            http_shutdown_timeout: v.seconds("http.shutdown_timeout"),
            boot_kernel_args: v.text("boot.kernel_args"),
            log_format: if v.text("log.format") == "json" {
                LogFormat::Json
            } else {
                LogFormat::Human
            },
            log_level: v.text("log.level"),
            install_bundled: v.text("plugins.bundled") == "install",
            package_limits: crate::package::PackageLimits {
                max_upload: v.count("plugins.max_upload_bytes"),
                archive: crate::package::archive::Limits {
                    max_unpacked: v.count("plugins.max_unpacked_bytes"),
                    max_file: v.count("plugins.max_file_bytes"),
                    max_entries: v.count("plugins.max_entries"),
                    max_ratio: v.count("plugins.max_ratio"),
                },
            },
            plan_yaql_budget: v.count("plan.yaql_budget"),
            agent_binary: v.opt_path("deploy.agent_binary"),
            deploy: crate::deployer::DeploySettings {
                image_url: v.opt_text("deploy.image_url"),
                image_checksum: v.opt_text("deploy.image_checksum"),
                agent_install: crate::engine::steps::AgentInstall::parse(
                    &v.text("deploy.agent_install"),
                )
                .unwrap_or_default(),
                runs: crate::engine::orchestrate::RunOptions {
                    default_timeout_s: v.seconds("deploy.step_timeout"),
                    max_provisioning: v.count("deploy.max_provisioning"),
                    ..crate::engine::orchestrate::RunOptions::default()
                },
                boot_timeout_s: v.seconds("deploy.boot_timeout"),
            },
        })
    }
}

/// The parsed options, each taken once, as the kind [`OPTIONS`] declares it. A key taken twice,
/// or as another kind than its declaration, is a bug in this file: it panics, naming the key.
struct Values(BTreeMap<&'static str, Parsed>);

macro_rules! typed {
    ($($name:ident: $variant:ident => $ty:ty, $kind:literal;)*) => {
        impl Values {
            $(
                fn $name(&mut self, key: &str) -> $ty {
                    match self.0.remove(key) {
                        Some(Parsed::$variant(x)) => x,
                        other => unreachable!(
                            "option {key} is not declared as {} (or was taken twice): {}",
                            $kind,
                            if other.is_some() { "another kind" } else { "absent" }
                        ),
                    }
                }
            )*
        }
    };
}

typed! {
    addr: Addr => SocketAddr, "a socket address";
    opt_addr: OptAddr => Option<SocketAddr>, "an optional socket address";
    ip: Ip => Option<std::net::Ipv4Addr>, "an optional IPv4 address";
    path: Path => PathBuf, "a path";
    opt_path: OptPath => Option<PathBuf>, "an optional path";
    seconds: Seconds => u64, "seconds";
    count: Count => u64, "a count or a size";
    bool: Bool => bool, "a boolean";
    text: Text => String, "text or a choice";
    subnets: Subnets => Vec<crate::dhcp::reply::Subnet>, "subnets";
    reservations: Reservations => Vec<(crate::model::Mac, std::net::Ipv4Addr)>, "reservations";
}

impl Values {
    /// Text where empty means "not set".
    fn opt_text(&mut self, key: &str) -> Option<String> {
        Some(self.text(key)).filter(|t| !t.is_empty())
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
                    // Lists (subnets, reservations) are `;`-separated in their text form.
                    toml::Value::Array(items) => items
                        .iter()
                        .map(|i| match i {
                            toml::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join(";"),
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
        assert_eq!(
            config.boot_token_binding,
            Binding::Address,
            "no DHCP: address"
        );
        assert_eq!(config.discovery.approval, Approval::Auto);
        assert_eq!(config.discovery.max_nodes, 10_000);
    }

    #[test]
    fn token_binding_auto_follows_dhcp() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            Layers::default()
                .with_env(move |var| {
                    pairs
                        .iter()
                        .find(|(k, _)| *k == var)
                        .map(|(_, v)| (*v).to_string())
                })
                .resolve()
                .unwrap()
                .boot_token_binding
        };
        const DHCP: &[(&str, &str)] = &[
            ("STOKER_DHCP_ENABLED", "true"),
            ("STOKER_DHCP_SERVER_IP", "10.20.0.2"),
            (
                "STOKER_DHCP_SUBNETS",
                "10.20.0.0/24 pool=10.20.0.100-10.20.0.199",
            ),
        ];
        assert_eq!(with(DHCP), Binding::Lease);
        assert_eq!(
            with(&[("STOKER_BOOT_TOKEN_BINDING", "none")]),
            Binding::None
        );
        assert_eq!(
            with(&[("STOKER_BOOT_TOKEN_BINDING", "lease")]),
            Binding::Lease
        );
    }

    #[test]
    fn tls_is_on_off_loopback_and_its_settings_fit_together() {
        let resolve = |flags: &[(&'static str, &str)]| {
            flags
                .iter()
                .fold(Layers::default(), |l, (k, v)| {
                    l.with_flag(k, (*v).to_string())
                })
                .resolve()
        };
        let tls = |flags: &[(&'static str, &str)]| resolve(flags).unwrap().http_tls;
        assert_eq!(tls(&[]), TlsMode::Off, "loopback: plain");
        assert_eq!(
            tls(&[("http.listen", "10.20.0.2:8000")]),
            TlsMode::SelfSigned
        );
        assert_eq!(tls(&[("http.listen", "0.0.0.0:8000")]), TlsMode::SelfSigned);
        assert_eq!(tls(&[("http.tls", "on")]), TlsMode::SelfSigned);
        assert_eq!(
            tls(&[("http.listen", "10.20.0.2:8000"), ("http.tls", "off")]),
            TlsMode::Off
        );
        assert_eq!(
            tls(&[("http.tls_cert", "c.pem"), ("http.tls_key", "k.pem")]),
            TlsMode::Files {
                cert: "c.pem".into(),
                key: "k.pem".into()
            },
            "a certificate given is served, on loopback too"
        );
        let err = |flags: &[(&'static str, &str)]| resolve(flags).unwrap_err().to_string();
        assert!(err(&[("http.tls_cert", "c.pem")]).contains("`http.tls_key` must be set"));
        assert!(err(&[("http.tls_key", "k.pem")]).contains("`http.tls_cert` must be set"));
        let e = err(&[
            ("http.tls", "on"),
            ("http.public_url", "http://master.lab:8000"),
        ]);
        assert!(
            e.contains("http.public_url") && e.contains("https://"),
            "{e}"
        );
        assert!(
            resolve(&[
                ("http.tls", "on"),
                ("http.public_url", "https://master.lab")
            ])
            .is_ok()
        );
        // The boot listener: 8080 on the same address, 0 with 0, never the HTTPS port.
        let c = resolve(&[("http.listen", "10.20.0.2:8000")]).unwrap();
        assert_eq!(c.http_boot_listen.to_string(), "10.20.0.2:8080");
        let c = resolve(&[("http.listen", "127.0.0.1:0"), ("http.tls", "on")]).unwrap();
        assert_eq!(c.http_boot_listen.to_string(), "127.0.0.1:0");
        let e = err(&[("http.listen", "10.20.0.2:8080")]);
        assert!(
            e.contains("http.boot_listen") && e.contains("10.20.0.2:8080"),
            "{e}"
        );
        let e = err(&[
            ("http.listen", "0.0.0.0:8443"),
            ("http.boot_listen", "10.0.0.1:8443"),
        ]);
        assert!(e.contains("http.boot_listen"), "{e}");
        assert!(resolve(&[("http.listen", "10.20.0.2:8080"), ("http.tls", "off")]).is_ok());
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

    #[test]
    fn dhcp_needs_its_address_and_subnets_and_explains_bad_lines() {
        let on = |extra: &'static str| {
            Layers::default().with_env(move |var| match var {
                "STOKER_DHCP_ENABLED" => Some("true".to_string()),
                "STOKER_DHCP_SERVER_IP" if extra != "no-ip" => Some("10.20.0.2".to_string()),
                "STOKER_DHCP_SUBNETS" if extra != "no-subnet" => {
                    Some("10.20.0.0/24 pool=10.20.0.100-10.20.0.199 router=10.20.0.1".to_string())
                }
                "STOKER_DHCP_RESERVATIONS" if extra == "lost" => {
                    Some("52:54:00:00:00:01=10.99.0.5".to_string())
                }
                _ => None,
            })
        };
        let config = on("").resolve().unwrap();
        assert!(config.dhcp.enabled);
        assert_eq!(config.dhcp.subnets.len(), 1);
        assert_eq!(
            on("no-ip").resolve().unwrap_err().to_string(),
            "`dhcp.server_ip` must be set when dhcp.enabled is true"
        );
        assert!(matches!(
            on("no-subnet").resolve(),
            Err(ConfigError::Missing {
                key: "dhcp.subnets",
                ..
            })
        ));
        let lost = on("lost").resolve().unwrap_err().to_string();
        assert!(
            lost.contains("`dhcp.reservations`")
                && lost.contains("10.99.0.5 (for 52:54:00:00:00:01) is in no subnet"),
            "{lost}"
        );
        let bad = Layers::default()
            .with_flag(
                "dhcp.subnets",
                "10.20.0.0/24 pool=10.20.0.1-10.20.1.9".to_string(),
            )
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("`dhcp.subnets` (from flag --dhcp-subnets)")
                && bad.contains("pool address 10.20.1.9 is outside 10.20.0.0/24"),
            "{bad}"
        );
    }

    #[test]
    fn toml_arrays_become_lists() {
        let values = parse_toml(
            std::path::Path::new("c.toml"),
            "[dhcp]\nsubnets = ['10.1.0.0/24 pool=10.1.0.5-10.1.0.9', '10.2.0.0/24 pool=10.2.0.5-10.2.0.9']\n",
        )
        .unwrap();
        let layers = Layers {
            file: Some((PathBuf::from("c.toml"), values)),
            ..Layers::default()
        };
        assert_eq!(layers.resolve().unwrap().dhcp.subnets.len(), 2);
    }
}
