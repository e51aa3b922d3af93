//! The table of every option stoker reads ([`OPTIONS`]: key, environment variable, flag,
//! default, kind and help) and the kinds of value an option takes. Declarative only: values
//! are parsed in `value.rs`, layered and typed in the parent module.

use crate::dhcp::spec;

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
                "an http:// or https:// URL without a path, like https://10.20.0.2:8000, or empty"
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
/// `deploy.agent_install`'s values (`engine::steps::AgentInstall`).
pub const AGENT_INSTALLS: &[&str] = &["config-2", "nocloud", "inject"];
/// `http.tls` values.
pub const TLS_MODES: &[&str] = &["auto", "on", "off"];

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
        help: "URL nodes use to reach this master (`https://` under TLS), also the name the dashboard answers to; empty: the address each boot request came to",
    },
    OptionSpec {
        key: "http.tls",
        env: "STOKER_HTTP_TLS",
        flag: "http-tls",
        default: "auto",
        kind: Kind::Choice(TLS_MODES),
        help: "HTTPS for the dashboard, the API and the agents: `auto` (on unless `http.listen` is a loopback address), `on`, or `off` (plain HTTP, for a master behind a TLS proxy). Without `http.tls_cert` a self-signed certificate is made on first start in data_dir/tls/; its SHA-256 fingerprint is logged and put on nodes' kernel command line, and agents pin it",
    },
    OptionSpec {
        key: "http.tls_cert",
        env: "STOKER_HTTP_TLS_CERT",
        flag: "http-tls-cert",
        default: "",
        kind: Kind::OptionalPath,
        help: "PEM certificate chain for HTTPS: the master's certificate first, then its issuers up to the one agents should trust; empty: self-signed",
    },
    OptionSpec {
        key: "http.tls_key",
        env: "STOKER_HTTP_TLS_KEY",
        flag: "http-tls-key",
        default: "",
        kind: Kind::OptionalPath,
        help: "PEM private key of `http.tls_cert` (PKCS#8, PKCS#1 or SEC1)",
    },
    OptionSpec {
        key: "http.boot_listen",
        env: "STOKER_HTTP_BOOT_LISTEN",
        flag: "http-boot-listen",
        default: "",
        kind: Kind::OptionalSocketAddr,
        help: "Under TLS, where iPXE fetches its scripts, kernel and initramfs over plain HTTP (iPXE cannot check a self-signed certificate); only `/boot/` is served there. Empty: `http.listen`'s address on port 8080 (port 0 when `http.listen`'s is 0)",
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
        key: "dhcp.max_rate",
        env: "STOKER_DHCP_MAX_RATE",
        flag: "dhcp-max-rate",
        default: "2000",
        kind: Kind::Count,
        help: "Most DHCP packets decided per second, all clients together, after a burst of five seconds' worth: holds a flood of made-up MACs, which the per-MAC limit cannot stop",
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
        key: "deploy.agent_install",
        env: "STOKER_DEPLOY_AGENT_INSTALL",
        flag: "deploy-agent-install",
        default: "config-2",
        kind: Kind::Choice(AGENT_INSTALLS),
        help: "How deploy.configure puts the service agent onto the installed OS: a config drive for the image's cloud-init (config-2 or nocloud), or inject (into the image's root filesystem, for images without cloud-init)",
    },
    OptionSpec {
        key: "deploy.agent_binary",
        env: "STOKER_DEPLOY_AGENT_BINARY",
        flag: "deploy-agent-binary",
        default: "",
        kind: Kind::OptionalPath,
        help: "The stoker binary served to installed OSes as their service agent (GET /api/v1/agent/service/binary; a config drive's user data fetches it), of the master's version; empty: the master's own executable (which may carry debug information: a release build's is ~130 MB)",
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
        key: "deploy.boot_timeout",
        env: "STOKER_DEPLOY_BOOT_TIMEOUT",
        flag: "deploy-boot-timeout",
        default: "1800",
        kind: Kind::Seconds,
        help: "How long a node may take to boot (after a power step, the network; after reboot_to_disk, its disk) before the first step it boots for fails as not taken, when that step's own timeout is shorter",
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
        key: "bmc.sync_interval",
        env: "STOKER_BMC_SYNC_INTERVAL",
        flag: "bmc-sync-interval",
        default: "60",
        kind: Kind::Seconds,
        help: "Seconds between two readings of a BMC's power state (Ironic's sync_power_state_interval); a BMC that does not answer is tried again after twice as long each time, up to 32 times this",
    },
    OptionSpec {
        key: "bmc.sync_workers",
        env: "STOKER_BMC_SYNC_WORKERS",
        flag: "bmc-sync-workers",
        default: "8",
        kind: Kind::Count,
        help: "BMC requests in flight at most while power states are read (Ironic's sync_power_state_workers); also bounds bulk power actions",
    },
    OptionSpec {
        key: "bmc.timeout",
        env: "STOKER_BMC_TIMEOUT",
        flag: "bmc-timeout",
        default: "10",
        kind: Kind::Seconds,
        help: "Seconds one request to a BMC may take, connect to last byte",
    },
    OptionSpec {
        key: "bmc.power_off_released",
        env: "STOKER_BMC_POWER_OFF_RELEASED",
        flag: "bmc-power-off-released",
        default: "false",
        kind: Kind::Bool,
        help: "Power off, through their BMCs, the nodes of an environment that is deleted or reset (after their disks are erased), unless the request says `power_off=0`; without it only `power_off=1` does",
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
