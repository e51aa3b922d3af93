//! Daemon configuration: every option declared once, layered defaults < TOML file < `STOKER_*`
//! environment < command-line flags, and validated into a typed [`Config`].
//!
//! [`OPTIONS`] is the single list of options (key, environment variable, flag, default, help).
//! The clap flags of `stoker serve`, the README's config table (checked by a test) and the error
//! messages are all derived from it. This module parses values; it opens no sockets and does not
//! create the data directory (the daemon does).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use crate::dhcp::reply::{Mode as DhcpMode, Subnet};
use crate::dhcp::spec;
use crate::engine::hello::{Approval, Binding};
use crate::model::Mac;

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
    /// An `http://` URL of one file (host and path), or empty for "not set".
    OptionalFileUrl,
    /// Free text (may be empty).
    Text,
    /// `true` or `false`.
    Bool,
    /// A positive whole number.
    Count,
    /// A positive number of bytes, with an optional binary unit: `268435456`, `256MiB`, `1GiB`.
    Size,
    /// An IPv4 address, or empty for "not set".
    OptionalIpv4,
    /// An IP address and port, or empty for "not set".
    OptionalSocketAddr,
    /// A file system path, or empty for "the default under the data directory".
    OptionalPath,
    /// An image checksum (`sha256:HEX`, `md5:HEX` or bare hex), or empty for "not verified".
    OptionalChecksum,
    /// DHCP subnet lines (see `dhcp::spec`).
    Subnets,
    /// DHCP reservations (see `dhcp::spec`).
    Reservations,
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
            Kind::OptionalFileUrl => {
                "an http:// URL of a file, like http://10.20.0.2:8000/boot/images/os.img, or empty"
                    .to_string()
            }
            Kind::Text => "text".to_string(),
            Kind::Bool => "true or false".to_string(),
            Kind::Count => "a whole number from 1 up".to_string(),
            Kind::Size => {
                "a size from 1 byte up, like 268435456, 512KiB, 256MiB or 1GiB".to_string()
            }
            Kind::OptionalIpv4 => "an IPv4 address, like 10.20.0.2, or empty".to_string(),
            Kind::OptionalSocketAddr => {
                "an IP address and port, like 127.0.0.1:6868, or empty".to_string()
            }
            Kind::OptionalPath => "a file system path, or empty".to_string(),
            Kind::OptionalChecksum => {
                "sha256:HEX (64 hex digits) or md5:HEX (32), or empty".to_string()
            }
            Kind::Subnets => spec::SUBNET_FORM.to_string(),
            Kind::Reservations => spec::RESERVATION_FORM.to_string(),
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
pub const DHCP_MODES: &[&str] = &["authoritative", "reservation-only"];

/// `boot.token_binding` values.
pub const TOKEN_BINDINGS: &[&str] = &["auto", "lease", "address", "none"];
/// `discovery.approval` values.
pub const APPROVALS: &[&str] = &["auto", "manual"];

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
        default: "console=tty0 console=ttyS0,115200n8 quiet",
        kind: Kind::Text,
        help: "Extra kernel command-line arguments for the bootstrap image",
    },
    OptionSpec {
        key: "boot.token_binding",
        env: "STOKER_BOOT_TOKEN_BINDING",
        flag: "boot-token-binding",
        default: "auto",
        kind: Kind::Choice(TOKEN_BINDINGS),
        help: "Who may receive a node's boot token: `lease` (only the address stoker's DHCP leased to that MAC), `address` (its lease, else the address its agent last said hello from, else the first to ask), `none` (anyone); an unused token is never replaced from another address; `auto` is `lease` when `dhcp.enabled` is true and `address` otherwise",
    },
    OptionSpec {
        key: "discovery.approval",
        env: "STOKER_DISCOVERY_APPROVAL",
        flag: "discovery-approval",
        default: "auto",
        kind: Kind::Choice(APPROVALS),
        help: "Whether a discovered node needs an operator: `auto` (it gets its agent token at once) or `manual` (it waits, without any token, until approved on its page or with POST /api/v1/nodes/{id}/approve)",
    },
    OptionSpec {
        key: "discovery.max_nodes",
        env: "STOKER_DISCOVERY_MAX_NODES",
        flag: "discovery-max-nodes",
        default: "10000",
        kind: Kind::Count,
        help: "Most nodes stoker keeps (and most unused boot tokens); past it discovery is refused until nodes are deleted",
    },
    OptionSpec {
        key: "dhcp.enabled",
        env: "STOKER_DHCP_ENABLED",
        flag: "dhcp-enabled",
        default: "false",
        kind: Kind::Bool,
        help: "Run the DHCP server (needs `dhcp.server_ip` and `dhcp.subnets`; port 67 needs CAP_NET_BIND_SERVICE)",
    },
    OptionSpec {
        key: "dhcp.listen",
        env: "STOKER_DHCP_LISTEN",
        flag: "dhcp-listen",
        default: "0.0.0.0:67",
        kind: Kind::SocketAddr,
        help: "Where the DHCP server listens; keep 0.0.0.0 so clients' broadcasts arrive",
    },
    OptionSpec {
        key: "dhcp.server_ip",
        env: "STOKER_DHCP_SERVER_IP",
        flag: "dhcp-server-ip",
        default: "",
        kind: Kind::OptionalIpv4,
        help: "This master's address on the PXE network: server identifier, next-server, TFTP and HTTP host",
    },
    OptionSpec {
        key: "dhcp.interface",
        env: "STOKER_DHCP_INTERFACE",
        flag: "dhcp-interface",
        default: "",
        kind: Kind::Text,
        help: "Network interface of the PXE network; empty: the one holding `dhcp.server_ip` (broadcast replies leave through it)",
    },
    OptionSpec {
        key: "dhcp.subnets",
        env: "STOKER_DHCP_SUBNETS",
        flag: "dhcp-subnets",
        default: "",
        kind: Kind::Subnets,
        help: "Subnets served, such as `10.20.0.0/24 pool=10.20.0.100-10.20.0.199 router=10.20.0.1 dns=10.20.0.1 lease=3600`; `;` between subnets (a TOML array works too)",
    },
    OptionSpec {
        key: "dhcp.reservations",
        env: "STOKER_DHCP_RESERVATIONS",
        flag: "dhcp-reservations",
        default: "",
        kind: Kind::Reservations,
        help: "Fixed addresses, `MAC=IP` separated by `;` (a TOML array works too)",
    },
    OptionSpec {
        key: "dhcp.mode",
        env: "STOKER_DHCP_MODE",
        flag: "dhcp-mode",
        default: "authoritative",
        kind: Kind::Choice(DHCP_MODES),
        help: "Who gets answers: `authoritative` (every client on a served subnet) or `reservation-only` (reserved MACs only)",
    },
    OptionSpec {
        key: "dhcp.reply_to",
        env: "STOKER_DHCP_REPLY_TO",
        flag: "dhcp-reply-to",
        default: "",
        kind: Kind::OptionalSocketAddr,
        help: "Send every reply to this address instead of broadcasting (tests on loopback); empty in production",
    },
    OptionSpec {
        key: "tftp.enabled",
        env: "STOKER_TFTP_ENABLED",
        flag: "tftp-enabled",
        default: "false",
        kind: Kind::Bool,
        help: "Run the read-only TFTP server for the iPXE loaders (port 69 needs CAP_NET_BIND_SERVICE)",
    },
    OptionSpec {
        key: "tftp.listen",
        env: "STOKER_TFTP_LISTEN",
        flag: "tftp-listen",
        default: "0.0.0.0:69",
        kind: Kind::SocketAddr,
        help: "Where the TFTP server listens",
    },
    OptionSpec {
        key: "tftp.root",
        env: "STOKER_TFTP_ROOT",
        flag: "tftp-root",
        default: "",
        kind: Kind::OptionalPath,
        help: "Directory served over TFTP; empty: `tftp/` in the data directory (embedded files fill the gaps)",
    },
    OptionSpec {
        key: "tftp.max_transfers",
        env: "STOKER_TFTP_MAX_TRANSFERS",
        flag: "tftp-max-transfers",
        default: "64",
        kind: Kind::Count,
        help: "Concurrent TFTP transfers; more requests get a busy error and retry",
    },
    OptionSpec {
        key: "tftp.mtu",
        env: "STOKER_TFTP_MTU",
        flag: "tftp-mtu",
        default: "1500",
        kind: Kind::Count,
        help: "MTU of the PXE network; TFTP block sizes are clamped so a block fits one frame (1500: 1468 bytes)",
    },
    OptionSpec {
        key: "deploy.image_url",
        env: "STOKER_DEPLOY_IMAGE_URL",
        flag: "deploy-image-url",
        default: "",
        kind: Kind::OptionalFileUrl,
        help: "Disk image (raw or qcow2) the deploy.write_image step writes to every node; empty: the step is off",
    },
    OptionSpec {
        key: "deploy.image_checksum",
        env: "STOKER_DEPLOY_IMAGE_CHECKSUM",
        flag: "deploy-image-checksum",
        default: "",
        kind: Kind::OptionalChecksum,
        help: "Checksum of that image, sha256:HEX or md5:HEX; empty: not verified",
    },
    OptionSpec {
        key: "deploy.max_provisioning",
        env: "STOKER_DEPLOY_MAX_PROVISIONING",
        flag: "deploy-max-provisioning",
        default: "10",
        kind: Kind::Count,
        help: "How many nodes may write their disk image at the same time",
    },
    OptionSpec {
        key: "deploy.step_timeout",
        env: "STOKER_DEPLOY_STEP_TIMEOUT",
        flag: "deploy-step-timeout",
        default: "600",
        kind: Kind::Seconds,
        help: "Timeout of a deploy step or graph task that sets none; a step over it fails",
    },
    OptionSpec {
        key: "plan.yaql_budget",
        env: "STOKER_PLAN_YAQL_BUDGET",
        flag: "plan-yaql-budget",
        default: "10000000",
        kind: Kind::Count,
        help: "YAQL work one plan may do in all its expressions, in interpreter steps (function calls); past it the plan is refused, naming the tasks that spent the most",
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
    OptionSpec {
        key: "auth.session_idle",
        env: "STOKER_AUTH_SESSION_IDLE",
        flag: "auth-session-idle",
        default: "3600",
        kind: Kind::Seconds,
        help: "A dashboard session unused this many seconds ends; the user signs in again",
    },
    OptionSpec {
        key: "auth.session_lifetime",
        env: "STOKER_AUTH_SESSION_LIFETIME",
        flag: "auth-session-lifetime",
        default: "43200",
        kind: Kind::Seconds,
        help: "A dashboard session ends this many seconds after sign-in, however busy",
    },
    OptionSpec {
        key: "auth.login_token_lifetime",
        env: "STOKER_AUTH_LOGIN_TOKEN_LIFETIME",
        flag: "auth-login-token-lifetime",
        default: "43200",
        kind: Kind::Seconds,
        help: "Seconds a token bought with a password lasts (fuel2's Keystone login, `stoker login`)",
    },
    OptionSpec {
        key: "audit.retention_days",
        env: "STOKER_AUDIT_RETENTION_DAYS",
        flag: "audit-retention-days",
        default: "90",
        kind: Kind::Count,
        help: "Days the audit log keeps each state-changing request",
    },
    OptionSpec {
        key: "plugins.max_upload_bytes",
        env: "STOKER_PLUGINS_MAX_UPLOAD_BYTES",
        flag: "plugins-max-upload-bytes",
        default: "256MiB",
        kind: Kind::Size,
        help: "Largest package (`.fp`, compressed) `POST /api/v1/plugins` accepts; a bigger one is refused with 413 as it arrives",
    },
    OptionSpec {
        key: "plugins.max_unpacked_bytes",
        env: "STOKER_PLUGINS_MAX_UNPACKED_BYTES",
        flag: "plugins-max-unpacked-bytes",
        default: "1GiB",
        kind: Kind::Size,
        help: "Most a package may decompress to (counted as it unpacks, tar headers included)",
    },
    OptionSpec {
        key: "plugins.max_file_bytes",
        env: "STOKER_PLUGINS_MAX_FILE_BYTES",
        flag: "plugins-max-file-bytes",
        default: "256MiB",
        kind: Kind::Size,
        help: "Largest single file in a package",
    },
    OptionSpec {
        key: "plugins.max_entries",
        env: "STOKER_PLUGINS_MAX_ENTRIES",
        flag: "plugins-max-entries",
        default: "100000",
        kind: Kind::Count,
        help: "Most members (files, directories, tar headers) a package may hold",
    },
    OptionSpec {
        key: "plugins.max_ratio",
        env: "STOKER_PLUGINS_MAX_RATIO",
        flag: "plugins-max-ratio",
        default: "100",
        kind: Kind::Count,
        help: "Most bytes a package may unpack to per compressed byte, checked past its first MiB (a gzip bomb is refused here)",
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
    pub auth: AuthConfig,
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
        let mut take = |key: &str| values.remove(key);
        let dhcp = {
            let enabled = matches!(take("dhcp.enabled"), Some(Parsed::Bool(true)));
            let listen = match take("dhcp.listen") {
                Some(Parsed::Addr(a)) => a,
                _ => unreachable!("dhcp.listen is declared as a socket address"),
            };
            let server_ip = match take("dhcp.server_ip") {
                Some(Parsed::Ip(ip)) => ip,
                _ => unreachable!("dhcp.server_ip is declared as an optional IPv4 address"),
            };
            let interface = match take("dhcp.interface") {
                Some(Parsed::Text(t)) if t.is_empty() => None,
                Some(Parsed::Text(t)) => Some(t),
                _ => unreachable!("dhcp.interface is declared as text"),
            };
            let mut subnets = match take("dhcp.subnets") {
                Some(Parsed::Subnets(s)) => s,
                _ => unreachable!("dhcp.subnets is declared as subnets"),
            };
            let reservations = match take("dhcp.reservations") {
                Some(Parsed::Reservations(r)) => r,
                _ => unreachable!("dhcp.reservations is declared as reservations"),
            };
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
            let mode = match take("dhcp.mode") {
                Some(Parsed::Text(t)) if t == "reservation-only" => DhcpMode::ReservationOnly,
                Some(Parsed::Text(_)) => DhcpMode::Authoritative,
                _ => unreachable!("dhcp.mode is declared as a choice"),
            };
            let reply_to = match take("dhcp.reply_to") {
                Some(Parsed::OptAddr(a)) => a,
                _ => unreachable!("dhcp.reply_to is declared as an optional socket address"),
            };
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
            }
        };
        let tftp = TftpSettings {
            enabled: matches!(take("tftp.enabled"), Some(Parsed::Bool(true))),
            listen: match take("tftp.listen") {
                Some(Parsed::Addr(a)) => a,
                _ => unreachable!("tftp.listen is declared as a socket address"),
            },
            root: match take("tftp.root") {
                Some(Parsed::OptPath(p)) => p,
                _ => unreachable!("tftp.root is declared as an optional path"),
            },
            max_transfers: match take("tftp.max_transfers") {
                Some(Parsed::Count(n)) => usize::try_from(n).unwrap_or(usize::MAX),
                _ => unreachable!("tftp.max_transfers is declared as a count"),
            },
            // IP (20) + UDP (8) + TFTP (4) headers; RFC 2348 allows 8..=65464.
            max_blksize: match take("tftp.mtu") {
                Some(Parsed::Count(mtu)) => {
                    u16::try_from(mtu.saturating_sub(32).clamp(8, 65464)).unwrap_or(1468)
                }
                _ => unreachable!("tftp.mtu is declared as a count"),
            },
        };
        let secs = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let auth = AuthConfig {
            session_idle: match take("auth.session_idle") {
                Some(Parsed::Seconds(s)) => secs(s),
                _ => unreachable!("auth.session_idle is declared as seconds"),
            },
            session_lifetime: match take("auth.session_lifetime") {
                Some(Parsed::Seconds(s)) => secs(s),
                _ => unreachable!("auth.session_lifetime is declared as seconds"),
            },
            login_token_lifetime: match take("auth.login_token_lifetime") {
                Some(Parsed::Seconds(s)) => secs(s),
                _ => unreachable!("auth.login_token_lifetime is declared as seconds"),
            },
            audit_retention_days: match take("audit.retention_days") {
                Some(Parsed::Count(n)) => secs(n),
                _ => unreachable!("audit.retention_days is declared as a count"),
            },
        };
        let boot_token_binding = match take("boot.token_binding") {
            Some(Parsed::Text(t)) => match t.as_str() {
                "lease" => Binding::Lease,
                "address" => Binding::Address,
                "none" => Binding::None,
                _ if dhcp.enabled => Binding::Lease,
                _ => Binding::Address,
            },
            _ => unreachable!("boot.token_binding is declared as a choice"),
        };
        let discovery = DiscoverySettings {
            approval: match take("discovery.approval") {
                Some(Parsed::Text(t)) if t == "manual" => Approval::Manual,
                Some(Parsed::Text(_)) => Approval::Auto,
                _ => unreachable!("discovery.approval is declared as a choice"),
            },
            max_nodes: match take("discovery.max_nodes") {
                Some(Parsed::Count(n)) => n,
                _ => unreachable!("discovery.max_nodes is declared as a count"),
            },
        };
        Ok(Config {
            auth,
            boot_token_binding,
            discovery,
            dhcp,
            tftp,
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
            package_limits: {
                let mut count = |key: &str| match take(key) {
                    Some(Parsed::Count(n)) => n,
                    _ => unreachable!("{key} is declared as a count or a size"),
                };
                crate::package::PackageLimits {
                    max_upload: count("plugins.max_upload_bytes"),
                    archive: crate::package::archive::Limits {
                        max_unpacked: count("plugins.max_unpacked_bytes"),
                        max_file: count("plugins.max_file_bytes"),
                        max_entries: count("plugins.max_entries"),
                        max_ratio: count("plugins.max_ratio"),
                    },
                }
            },
            plan_yaql_budget: match take("plan.yaql_budget") {
                Some(Parsed::Count(n)) => n,
                _ => unreachable!("plan.yaql_budget is declared as a count"),
            },
            deploy: crate::deployer::DeploySettings {
                image_url: match take("deploy.image_url") {
                    Some(Parsed::Text(t)) if t.is_empty() => None,
                    Some(Parsed::Text(t)) => Some(t),
                    _ => unreachable!("deploy.image_url is declared as an optional file URL"),
                },
                image_checksum: match take("deploy.image_checksum") {
                    Some(Parsed::Text(t)) if t.is_empty() => None,
                    Some(Parsed::Text(t)) => Some(t),
                    _ => unreachable!("deploy.image_checksum is declared as a checksum"),
                },
                runs: crate::engine::orchestrate::RunOptions {
                    default_timeout_s: match take("deploy.step_timeout") {
                        Some(Parsed::Seconds(s)) => s,
                        _ => unreachable!("deploy.step_timeout is declared as seconds"),
                    },
                    max_provisioning: match take("deploy.max_provisioning") {
                        Some(Parsed::Count(n)) => n,
                        _ => unreachable!("deploy.max_provisioning is declared as a count"),
                    },
                    ..crate::engine::orchestrate::RunOptions::default()
                },
            },
        })
    }
}

enum Parsed {
    Path(PathBuf),
    OptPath(Option<PathBuf>),
    Addr(SocketAddr),
    OptAddr(Option<SocketAddr>),
    Ip(Option<Ipv4Addr>),
    Seconds(u64),
    Count(u64),
    Bool(bool),
    Text(String),
    Subnets(Vec<Subnet>),
    Reservations(Vec<(Mac, Ipv4Addr)>),
}

/// Parse one value; the error may carry a detail that says what exactly is wrong.
fn parse_value(opt: &OptionSpec, raw: &str) -> Result<Parsed, Option<String>> {
    let raw = raw.trim();
    match opt.kind {
        Kind::Subnets => spec::parse_subnets(raw).map(Parsed::Subnets).map_err(Some),
        Kind::Reservations => spec::parse_reservations(raw)
            .map(Parsed::Reservations)
            .map_err(Some),
        _ => parse_simple(opt.kind, raw).ok_or(None),
    }
}

fn parse_simple(kind: Kind, raw: &str) -> Option<Parsed> {
    match kind {
        Kind::Subnets | Kind::Reservations => None,
        Kind::Bool => match raw {
            "true" => Some(Parsed::Bool(true)),
            "false" => Some(Parsed::Bool(false)),
            _ => None,
        },
        Kind::Count => raw.parse().ok().filter(|n| *n > 0).map(Parsed::Count),
        Kind::Size => parse_size(raw).filter(|n| *n > 0).map(Parsed::Count),
        Kind::OptionalIpv4 if raw.is_empty() => Some(Parsed::Ip(None)),
        Kind::OptionalIpv4 => raw
            .parse::<Ipv4Addr>()
            .ok()
            .filter(|ip| !ip.is_unspecified() && !ip.is_broadcast())
            .map(|ip| Parsed::Ip(Some(ip))),
        Kind::OptionalSocketAddr if raw.is_empty() => Some(Parsed::OptAddr(None)),
        Kind::OptionalSocketAddr => raw.parse().ok().map(|a| Parsed::OptAddr(Some(a))),
        Kind::OptionalPath if raw.is_empty() => Some(Parsed::OptPath(None)),
        Kind::OptionalPath => Some(Parsed::OptPath(Some(PathBuf::from(raw)))),
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
        Kind::OptionalFileUrl => {
            // The agent downloads over plain HTTP (no TLS in the bootstrap image).
            let valid = raw.is_empty()
                || raw.strip_prefix("http://").is_some_and(|rest| {
                    rest.split_once('/').is_some_and(|(host, path)| {
                        !host.is_empty() && !path.is_empty() && !path.ends_with('/')
                    }) && !rest.contains(char::is_whitespace)
                });
            valid.then(|| Parsed::Text(raw.to_string()))
        }
        Kind::OptionalChecksum => (raw.is_empty()
            || crate::agent::image::Checksum::parse(raw).is_ok())
        .then(|| Parsed::Text(raw.to_string())),
        Kind::Text => Some(Parsed::Text(raw.to_string())),
    }
}

/// `268435456`, `512KiB`, `256MiB`, `1GiB` (also `K`, `M`, `G`, `KB`...: binary either way).
fn parse_size(raw: &str) -> Option<u64> {
    let digits = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    number.checked_mul(1 << shift)
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
