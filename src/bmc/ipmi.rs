//! The IPMI driver: power and one-time boot device over IPMI 2.0 (RMCP+, `lanplus`) through
//! Debian's `ipmitool`, as Ironic's `ipmitool` power and management interfaces do. This file owns
//! how an [`Endpoint`] becomes an `ipmitool` command line (address, user, cipher suite, retries
//! sized to the endpoint's timeout), running it under a deadline with bounded output, reading
//! what it prints, and turning its failures into [`BmcError`]s by a table of its messages.
//! BIOS settings, RAID and firmware have no IPMI equivalent: those answer
//! [`BmcError::Unsupported`] without running anything.
//!
//! The password goes to `ipmitool` in its environment (`-E` reads `IPMI_PASSWORD`), never on its
//! command line, where any local user could read it in `ps`. `ipmitool` is found on `PATH`, or
//! at `STOKER_IPMITOOL` when that is set (tests and unusual installs).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{
    Bmc, BmcError, BootDevice, Capabilities, Drive, Endpoint, PowerAction, PowerState, Progress,
    Volume,
};
use crate::engine::raid::RaidPlan;

/// IPMI's UDP port (RMCP, "asf-rmcp").
pub const DEFAULT_PORT: u16 = 623;

/// The environment variable naming the `ipmitool` to run instead of the one on `PATH`.
pub const IPMITOOL_ENV: &str = "STOKER_IPMITOOL";

/// How much of each of ipmitool's streams is kept; the rest is read and dropped, so a child that
/// prints without end neither fills memory nor blocks on a full pipe.
const OUTPUT_LIMIT: usize = 64 * 1024;

/// How much of ipmitool's message an error carries.
const MESSAGE_LIMIT: usize = 512;

/// `ipmitool -U` refuses longer names ("Username is too long (> 16 bytes)").
const USERNAME_LIMIT: usize = 16;

/// IPMI 2.0 passwords are 20 bytes; ipmitool silently cuts longer ones, which would then fail as
/// wrong credentials with no hint why.
const PASSWORD_LIMIT: usize = 20;

/// The cipher suite: 3 is RAKP-HMAC-SHA1 authentication, HMAC-SHA1-96 integrity and AES-CBC-128
/// confidentiality, the suite IPMI 2.0 BMCs offer almost universally. Without `-C`, ipmitool
/// 1.8.19 first asks the BMC for its list of suites to pick the best; BMCs that do not answer that
/// (OpenIPMI's simulator among them) cost several seconds of retries on every call before it falls
/// back to 3 anyway.
const CIPHER_SUITE: &str = "3";

/// ipmitool's wait for each answer (`-N`), in seconds; ipmitool adds a second at each retry.
const ANSWER_WAIT_SECS: u64 = 1;

/// ipmitool's own default number of tries (`-R`), the most used when the timeout allows.
const MAX_TRIES: u64 = 4;

pub struct Ipmi {
    endpoint: Endpoint,
    ipmitool: Option<PathBuf>,
}

impl Ipmi {
    /// A driver for `endpoint` with the `ipmitool` of [`locate_ipmitool`].
    pub fn new(endpoint: Endpoint) -> Ipmi {
        Ipmi::with_ipmitool(endpoint, locate_ipmitool())
    }

    /// A driver running the given `ipmitool` (None: it is not installed).
    pub fn with_ipmitool(endpoint: Endpoint, ipmitool: Option<PathBuf>) -> Ipmi {
        Ipmi { endpoint, ipmitool }
    }

    fn address(&self) -> String {
        self.endpoint.address.clone()
    }

    fn unsupported(&self, what: &str) -> BmcError {
        BmcError::Unsupported {
            address: self.address(),
            what: what.to_string(),
        }
    }

    /// The deadline of one [`Bmc`] call: every ipmitool run within it shares the endpoint's
    /// timeout, so a call that reads the power state first still ends in time.
    fn deadline(&self) -> Instant {
        Instant::now() + self.endpoint.timeout
    }

    /// Run `ipmitool ... words` and read its standard output with `read`.
    fn call<T>(
        &self,
        deadline: Instant,
        words: &[&str],
        read: impl Fn(&str) -> Option<T>,
    ) -> Result<T, BmcError> {
        let request = words.join(" ");
        let target = parse_address(&self.endpoint.address)?;
        check_username(&self.endpoint.username, &self.endpoint.address)?;
        check_password(&self.endpoint.password, &self.endpoint.address)?;
        let Some(ipmitool) = self.ipmitool.as_deref() else {
            return Err(self.unsupported(
                "be driven over IPMI: ipmitool is not installed (Debian package ipmitool)",
            ));
        };
        let budget = deadline.saturating_duration_since(Instant::now());
        if budget.is_zero() {
            return Err(BmcError::Unreachable {
                address: self.address(),
                reason: format!("no time left for `{request}` within the timeout"),
            });
        }
        let mut args = session_args(&target, &self.endpoint.username, tries_within(budget));
        args.extend(words.iter().map(|w| w.to_string()));
        let ran = match run_bounded(ipmitool, &args, &self.endpoint.password, budget) {
            Ok(ran) => ran,
            Err(RunError::TimedOut) => {
                return Err(BmcError::Unreachable {
                    address: self.address(),
                    reason: format!(
                        "no answer to `{request}` within {:.1} s (ipmitool was stopped)",
                        budget.as_secs_f64()
                    ),
                });
            }
            Err(RunError::Spawn(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.unsupported(&format!(
                    "be driven over IPMI: ipmitool is not installed (Debian package ipmitool; \
                     no {})",
                    ipmitool.display()
                )));
            }
            Err(RunError::Spawn(e)) => {
                return Err(BmcError::Failed {
                    address: self.address(),
                    message: format!("cannot run {}: {e}", ipmitool.display()),
                });
            }
        };
        if ran.success
            && let Some(value) = read(&ran.stdout)
        {
            return Ok(value);
        }
        Err(self.failure(&request, &ran))
    }

    /// The error for a run that failed, or succeeded without the output it should give (ipmitool
    /// 1.8.19 exits 0 from `chassis bootdev` when the BMC refuses the boot flags).
    fn failure(&self, request: &str, ran: &Ran) -> BmcError {
        let message = message_of(&ran.stderr);
        if message.is_empty() {
            if ran.success {
                return BmcError::Protocol {
                    address: self.address(),
                    what: format!(
                        "`ipmitool {request}` printed {:?}",
                        bounded(ran.stdout.trim())
                    ),
                };
            }
            return BmcError::Refused {
                address: self.address(),
                request: request.to_string(),
                message: match ran.code {
                    Some(code) => format!("ipmitool exited with {code} and no message"),
                    None => "ipmitool was killed by a signal".to_string(),
                },
            };
        }
        match classify(&ran.stderr) {
            Failure::Credentials => BmcError::Credentials {
                address: self.address(),
                username: self.endpoint.username.clone(),
            },
            Failure::Unreachable => BmcError::Unreachable {
                address: self.address(),
                reason: message,
            },
            Failure::NoLanplus => {
                self.unsupported("speak IPMI 2.0 (RMCP+), which this driver needs")
            }
            Failure::Refused => BmcError::Refused {
                address: self.address(),
                request: request.to_string(),
                message,
            },
        }
    }

    fn read_power(&self, deadline: Instant) -> Result<PowerState, BmcError> {
        self.call(deadline, &["chassis", "power", "status"], parse_power)
    }
}

impl Bmc for Ipmi {
    fn power_state(&mut self) -> Result<PowerState, BmcError> {
        self.read_power(self.deadline())
    }

    fn power(&mut self, action: PowerAction) -> Result<(), BmcError> {
        let deadline = self.deadline();
        // Read first, as Ironic does: On and Off are then no-ops when already so, and a reboot of
        // a machine that is off becomes `on`, since BMCs refuse `cycle` with the power off.
        let now = self.read_power(deadline)?;
        let Some(word) = power_word(action, now) else {
            return Ok(());
        };
        self.call(deadline, &["chassis", "power", word], |out| {
            out.lines()
                .any(|l| l.trim_start().starts_with("Chassis Power Control:"))
                .then_some(())
        })
    }

    fn boot_once(&mut self, device: BootDevice) -> Result<(), BmcError> {
        // Without `options=persistent` ipmitool sets the boot flags valid for the next boot only.
        let word = device.as_str();
        let expected = format!("Set Boot Device to {word}");
        self.call(self.deadline(), &["chassis", "bootdev", word], |out| {
            out.lines().any(|l| l.trim() == expected).then_some(())
        })
    }

    fn capabilities(&mut self) -> Result<Capabilities, BmcError> {
        Ok(Capabilities::default())
    }

    fn bios(&mut self) -> Result<Map<String, Value>, BmcError> {
        Err(self.unsupported("read BIOS settings over IPMI (use the redfish driver)"))
    }

    fn apply_bios(&mut self, _settings: &Map<String, Value>) -> Result<(), BmcError> {
        Err(self.unsupported("change BIOS settings over IPMI (use the redfish driver)"))
    }

    fn drives(&mut self) -> Result<Vec<Drive>, BmcError> {
        Err(self.unsupported("list drives over IPMI (use the redfish driver)"))
    }

    fn volumes(&mut self) -> Result<Vec<Volume>, BmcError> {
        Err(self.unsupported("list RAID volumes over IPMI (use the redfish driver)"))
    }

    fn create_volumes(&mut self, _plan: &RaidPlan) -> Result<Vec<Volume>, BmcError> {
        Err(self.unsupported("create RAID volumes over IPMI (use the redfish driver)"))
    }

    fn delete_volumes(&mut self) -> Result<usize, BmcError> {
        Err(self.unsupported("delete RAID volumes over IPMI (use the redfish driver)"))
    }

    fn update_firmware(
        &mut self,
        _image_url: &str,
        _wait: Duration,
        _progress: Progress<'_>,
    ) -> Result<String, BmcError> {
        Err(self.unsupported("update firmware over IPMI (use the redfish driver)"))
    }
}

/// The `ipmitool` to run: `STOKER_IPMITOOL` when set (even if wrong, so a mistyped override is
/// reported rather than silently replaced by another binary), else `ipmitool` on `PATH`.
pub fn locate_ipmitool() -> Option<PathBuf> {
    match std::env::var_os(IPMITOOL_ENV) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => crate::agent::exec::find_on_path("ipmitool"),
    }
}

/// Where ipmitool sends its packets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

fn invalid_address(address: &str, why: &str) -> BmcError {
    BmcError::Invalid {
        field: "address".to_string(),
        message: format!(
            "{address:?} is not an IPMI address (host, host:port or [IPv6]:port): {why}"
        ),
    }
}

/// `host`, `host:port`, `[IPv6]`, `[IPv6]:port` or a bare IPv6 address. The host becomes one
/// argument of ipmitool, so anything that could read as an option (a leading `-`) or is not a
/// host name or address character is refused rather than passed on.
pub fn parse_address(address: &str) -> Result<Target, BmcError> {
    if address.is_empty() {
        return Err(invalid_address(address, "it is empty"));
    }
    if address.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid_address(
            address,
            "it contains spaces or control characters",
        ));
    }
    if address.starts_with('-') {
        return Err(invalid_address(address, "it starts with '-'"));
    }
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(invalid_address(address, "'[' without ']'"));
        };
        if !host.contains(':') {
            return Err(invalid_address(
                address,
                "only IPv6 addresses go in brackets",
            ));
        }
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(invalid_address(address, "text after ']'")),
            },
        }
    } else {
        match address.matches(':').count() {
            0 => (address, None),
            1 => match address.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (address, None),
            },
            // Several colons and no brackets: an IPv6 address on its own, default port.
            _ => (address, None),
        }
    };
    if host.is_empty() {
        return Err(invalid_address(address, "no host"));
    }
    if host.starts_with('-') {
        return Err(invalid_address(address, "the host starts with '-'"));
    }
    let host_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%');
    if !host.chars().all(host_char) {
        return Err(invalid_address(
            address,
            "the host has characters other than letters, digits, '.', '-', '_', ':' and '%'",
        ));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => match p.parse() {
            Ok(0) | Err(_) => return Err(invalid_address(address, "the port is not 1-65535")),
            Ok(port) => port,
        },
        Some(_) => return Err(invalid_address(address, "the port is not a number")),
    };
    Ok(Target {
        host: host.to_string(),
        port,
    })
}

/// The user name becomes ipmitool's `-U` argument; empty means IPMI's null user (no `-U`).
pub fn check_username(username: &str, address: &str) -> Result<(), BmcError> {
    let invalid = |why: &str| BmcError::Invalid {
        field: "username".to_string(),
        message: format!("user {username:?} of BMC {address}: {why}"),
    };
    if username.starts_with('-') {
        return Err(invalid("it starts with '-'"));
    }
    if username.chars().any(char::is_control) {
        return Err(invalid("it contains control characters"));
    }
    if username.len() > USERNAME_LIMIT {
        return Err(invalid("IPMI user names are at most 16 bytes"));
    }
    Ok(())
}

/// The password travels in ipmitool's environment: no NUL (an environment string cannot hold
/// one). The message never repeats the password.
pub fn check_password(password: &str, address: &str) -> Result<(), BmcError> {
    let invalid = |why: &str| BmcError::Invalid {
        field: "password".to_string(),
        message: format!("the password of BMC {address} {why}"),
    };
    if password.contains('\0') {
        return Err(invalid("contains a NUL character"));
    }
    if password.len() > PASSWORD_LIMIT {
        return Err(invalid("is longer than IPMI's 20 bytes"));
    }
    Ok(())
}

/// How many tries (`-R`) fit in `budget`. With no answer at all, ipmitool's lanplus session
/// start sends Get Channel Authentication Capabilities twice (with and without the IPMI 2.0 bit),
/// each waiting 1, 2, ... R seconds over its R tries (the wait grows by a second a retry), so it
/// gives up after about 2 x (R + R(R-1)/2) seconds: 2 s for one try, 6 for two, 12 for three,
/// 20 for four. The largest R that ends within the budget lets ipmitool report why itself; the
/// deadline kill is the backstop for BMCs that answer slowly rather than not at all.
pub fn tries_within(budget: Duration) -> u64 {
    let secs = budget.as_secs();
    let give_up = |r: u64| 2 * (r * ANSWER_WAIT_SECS + r * (r - 1) / 2);
    (1..=MAX_TRIES)
        .rev()
        .find(|&r| give_up(r) <= secs)
        .unwrap_or(1)
}

/// ipmitool's options for one session, without the command.
pub fn session_args(target: &Target, username: &str, tries: u64) -> Vec<String> {
    let mut args: Vec<String> = [
        "-I",
        "lanplus",
        "-H",
        target.host.as_str(),
        "-p",
        &target.port.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !username.is_empty() {
        args.extend(["-U".to_string(), username.to_string()]);
    }
    args.extend(
        [
            // The password from IPMI_PASSWORD, see run_bounded.
            "-E",
            "-C",
            CIPHER_SUITE,
            "-N",
            &ANSWER_WAIT_SECS.to_string(),
            "-R",
            &tries.to_string(),
            // Verbose: only then does ipmitool say why a session failed ("RAKP 2 HMAC is
            // invalid", "Get Auth Capabilities error"); without it a wrong password and a BMC that
            // does not answer both read "Unable to establish IPMI v2 / RMCP+ session". The extra
            // lines go to standard error, so standard output stays parseable.
            "-v",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    args
}

/// What one ipmitool run gave.
#[derive(Debug)]
struct Ran {
    success: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

#[derive(Debug)]
enum RunError {
    Spawn(std::io::Error),
    TimedOut,
}

/// Run `program args` with `password` as `IPMI_PASSWORD` and nothing else in its environment (an
/// `IPMITOOL_PASSWORD` inherited from the daemon would take precedence over it), killing it by
/// its PID if it is still running after `timeout`.
fn run_bounded(
    program: &Path,
    args: &[String],
    password: &str,
    timeout: Duration,
) -> Result<Ran, RunError> {
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .env("IPMI_PASSWORD", password)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(RunError::Spawn)?;
    // Both pipes are drained at once so a child filling one does not block on it.
    let stdout = child
        .stdout
        .take()
        .map(|r| std::thread::spawn(move || read_capped(r)));
    let stderr = child
        .stderr
        .take()
        .map(|r| std::thread::spawn(move || read_capped(r)));
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() >= timeout => {
                // SIGKILL to the child's PID; ipmitool starts no processes of its own.
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Spawn(e));
            }
        }
    };
    let join = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
        h.and_then(|h| h.join().ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let (stdout, stderr) = (join(stdout), join(stderr));
    match status {
        None => Err(RunError::TimedOut),
        Some(status) => Ok(Ran {
            success: status.success(),
            code: status.code(),
            stdout,
            stderr,
        }),
    }
}

/// Read `r` to its end, keeping the first [`OUTPUT_LIMIT`] bytes.
fn read_capped(mut r: impl Read) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    kept
}

/// `chassis power status`: "Chassis Power is on" or "Chassis Power is off".
pub fn parse_power(stdout: &str) -> Option<PowerState> {
    stdout.lines().find_map(|line| match line.trim() {
        "Chassis Power is on" => Some(PowerState::On),
        "Chassis Power is off" => Some(PowerState::Off),
        _ => None,
    })
}

/// The `chassis power` word for `action` with the power `now`, None when nothing is to be done.
pub fn power_word(action: PowerAction, now: PowerState) -> Option<&'static str> {
    let off = now == PowerState::Off;
    match action {
        PowerAction::On => (!matches!(now, PowerState::On)).then_some("on"),
        PowerAction::Off => (!off).then_some("off"),
        PowerAction::SoftOff => (!off).then_some("soft"),
        PowerAction::Reboot if off => Some("on"),
        PowerAction::Reboot => Some("cycle"),
    }
}

/// What an ipmitool failure means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Credentials,
    Unreachable,
    /// The BMC answers but not IPMI 2.0 (RMCP+).
    NoLanplus,
    Refused,
}

/// How a pattern is matched against ipmitool's standard error, ignoring case.
#[derive(Debug, Clone, Copy)]
enum Match {
    Contains,
    /// The whole line, trimmed: "Get Auth Capabilities error" alone means no answer, with ": "
    /// and a completion code after it the BMC did answer.
    Line,
}

/// ipmitool's messages (1.8.19, lanplus, with `-v`) and what they mean, first match wins, so a
/// specific reason beats the generic "Unable to establish IPMI v2 / RMCP+ session" that ends
/// every failed session. The retryable ones of Ironic's IPMITOOL_RETRYABLE_FAILURES
/// (insufficient resources, node busy, timeout, BMC initialization) are Unreachable: the BMC is
/// there but cannot serve now, and the caller backs off and tries again later.
const PATTERNS: &[(&str, Match, Failure)] = &[
    // The password is wrong: the BMC's RAKP 2 HMAC does not verify with ours.
    (
        "RAKP 2 HMAC is invalid",
        Match::Contains,
        Failure::Credentials,
    ),
    (
        "RAKP 4 message has invalid integrity check value",
        Match::Contains,
        Failure::Credentials,
    ),
    // RAKP status codes naming the user or role ("RAKP 2 message indicates an error : ...").
    ("unauthorized name", Match::Contains, Failure::Credentials),
    ("invalid name length", Match::Contains, Failure::Credentials),
    ("unauthorized role", Match::Contains, Failure::Credentials),
    ("invalid role", Match::Contains, Failure::Credentials),
    // IPMI 1.5 and some BMCs' wording.
    ("Invalid user name", Match::Contains, Failure::Credentials),
    // The user exists but may not be ADMINISTRATOR, which power control needs.
    (
        "Set Session Privilege Level to",
        Match::Contains,
        Failure::Credentials,
    ),
    (
        "Insufficient privilege level",
        Match::Contains,
        Failure::Credentials,
    ),
    // Busy: every session slot taken, or the BMC is starting.
    (
        "insufficient resources for session",
        Match::Contains,
        Failure::Unreachable,
    ),
    (
        "insufficient resources for role",
        Match::Contains,
        Failure::Unreachable,
    ),
    ("Node busy", Match::Contains, Failure::Unreachable),
    (
        "BMC initialization in progress",
        Match::Contains,
        Failure::Unreachable,
    ),
    ("failed: Timeout", Match::Contains, Failure::Unreachable),
    // No answer at all, or an answer that stopped halfway through the session.
    (
        "Get Auth Capabilities error",
        Match::Line,
        Failure::Unreachable,
    ),
    (
        "no response from RAKP",
        Match::Contains,
        Failure::Unreachable,
    ),
    (
        "No response from remote controller",
        Match::Contains,
        Failure::Unreachable,
    ),
    // The name does not resolve, or no socket.
    ("Address lookup for", Match::Contains, Failure::Unreachable),
    (
        "Could not open socket",
        Match::Contains,
        Failure::Unreachable,
    ),
    (
        "This BMC does not support IPMI v2 / RMCP+",
        Match::Contains,
        Failure::NoLanplus,
    ),
    // The BMC answered but refused the session for another reason: no matching cipher suite,
    // an error code to Get Channel Authentication Capabilities, a confused exchange.
    (
        "Error in open session response message",
        Match::Contains,
        Failure::Refused,
    ),
    (
        "Get Auth Capabilities error:",
        Match::Contains,
        Failure::Refused,
    ),
    ("Received an Unexpected", Match::Contains, Failure::Refused),
    // A session refused with no reason given is the credentials.
    (
        "Unable to establish IPMI v2 / RMCP+ session",
        Match::Contains,
        Failure::Credentials,
    ),
];

/// What ipmitool's standard error says went wrong; anything the table does not know is the BMC
/// refusing the command.
pub fn classify(stderr: &str) -> Failure {
    let lower = stderr.to_ascii_lowercase();
    PATTERNS
        .iter()
        .find(|(pattern, how, _)| {
            let pattern = pattern.to_ascii_lowercase();
            match how {
                Match::Contains => lower.contains(&pattern),
                Match::Line => lower.lines().any(|l| l.trim() == pattern),
            }
        })
        .map_or(Failure::Refused, |(_, _, failure)| *failure)
}

/// Lines `-v` adds to every run, which say nothing about a failure.
const CHATTER: &[&str] = &[
    "Loading IANA PEN Registry",
    "Running Get VSO Capabilities",
    // The answer to that probe from BMCs that are not VSO ones.
    "Invalid completion code received: Invalid command",
    "Discovered IPMB address",
];

/// ipmitool's standard error as one line for an error message: without `-v`'s chatter, lines
/// joined with "; ", at most [`MESSAGE_LIMIT`] characters.
pub fn message_of(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| {
            !CHATTER
                .iter()
                .any(|c| l.to_ascii_lowercase().starts_with(&c.to_ascii_lowercase()))
        })
        .collect();
    bounded(&lines.join("; "))
}

/// `s` cut to [`MESSAGE_LIMIT`] characters.
fn bounded(s: &str) -> String {
    match s.char_indices().nth(MESSAGE_LIMIT) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bmc::Driver;
    use std::os::unix::fs::PermissionsExt;

    fn endpoint(address: &str) -> Endpoint {
        Endpoint {
            driver: Driver::Ipmi,
            address: address.to_string(),
            username: "admin".to_string(),
            password: "secret".to_string(),
            verify_tls: false,
            timeout: Duration::from_secs(5),
        }
    }

    fn target(host: &str, port: u16) -> Target {
        Target {
            host: host.to_string(),
            port,
        }
    }

    #[test]
    fn addresses_with_and_without_ports_and_ipv6() {
        let ok = |a: &str| parse_address(a).unwrap();
        assert_eq!(ok("10.0.0.5"), target("10.0.0.5", 623));
        assert_eq!(ok("10.0.0.5:6230"), target("10.0.0.5", 6230));
        assert_eq!(
            ok("bmc-3.rack_1.example"),
            target("bmc-3.rack_1.example", 623)
        );
        assert_eq!(ok("bmc3:1"), target("bmc3", 1));
        assert_eq!(ok("[fd00::5]:6231"), target("fd00::5", 6231));
        assert_eq!(ok("[fd00::5]"), target("fd00::5", 623));
        assert_eq!(ok("fd00::5"), target("fd00::5", 623));
        assert_eq!(ok("[fe80::1%eth0]:623"), target("fe80::1%eth0", 623));
    }

    #[test]
    fn addresses_that_could_inject_arguments_or_are_malformed_are_invalid() {
        for bad in [
            "",
            "-oProxyCommand=x",
            "-H",
            "10.0.0.5 -P pw",
            " 10.0.0.5",
            "10.0.0.5\n",
            "10.0.0.5\t",
            "[-fd00::1]:623",
            "[fd00::5",
            "[fd00::5]623",
            "[10.0.0.5]:623",
            ":623",
            "10.0.0.5:",
            "10.0.0.5:0",
            "10.0.0.5:65536",
            "10.0.0.5:+623",
            "10.0.0.5:x",
            "bmc;reboot",
            "bmc$(id)",
            "bmc/1",
        ] {
            match parse_address(bad) {
                Err(BmcError::Invalid { field, message }) => {
                    assert_eq!(field, "address", "{bad:?}");
                    assert!(message.contains(&format!("{bad:?}")), "{bad:?}: {message}");
                }
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn usernames_and_passwords_are_checked_without_echoing_the_password() {
        check_username("admin", "b").unwrap();
        check_username("", "b").unwrap();
        check_username("a-b_c.d@e", "b").unwrap();
        for bad in ["-U", "--help", "ad\nmin", "ad\0min", "seventeen-bytes-x"] {
            match check_username(bad, "bmc1") {
                Err(BmcError::Invalid { field, message }) => {
                    assert_eq!(field, "username");
                    assert!(message.contains("bmc1"), "{message}");
                }
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
        check_username("sixteen-bytes-xx", "b").unwrap();
        check_password("", "b").unwrap();
        // It goes in the environment, so a leading '-' or a space is fine.
        check_password("-a pass word", "b").unwrap();
        check_password("twenty-bytes-exactly", "b").unwrap();
        for bad in ["pass\0word", "twenty-one-bytes-long"] {
            match check_password(bad, "bmc1") {
                Err(BmcError::Invalid { field, message }) => {
                    assert_eq!(field, "password");
                    assert!(!message.contains(bad), "{message}");
                }
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn tries_fit_the_timeout() {
        let tries = |s: u64| tries_within(Duration::from_secs(s));
        assert_eq!(tries(0), 1);
        assert_eq!(tries(3), 1);
        assert_eq!(tries(5), 1);
        assert_eq!(tries(6), 2);
        assert_eq!(tries(11), 2);
        assert_eq!(tries(12), 3);
        assert_eq!(tries(20), 4);
        assert_eq!(tries(600), 4);
    }

    #[test]
    fn arguments_carry_no_password_and_bound_the_session() {
        let args = session_args(&target("10.0.0.5", 6230), "admin", 2);
        assert_eq!(
            args,
            [
                "-I", "lanplus", "-H", "10.0.0.5", "-p", "6230", "-U", "admin", "-E", "-C", "3",
                "-N", "1", "-R", "2", "-v"
            ]
        );
        assert!(!args.iter().any(|a| a == "-P" || a == "-f"));
        // The null user: no -U at all.
        let args = session_args(&target("fd00::5", 623), "", 1);
        assert!(!args.iter().any(|a| a == "-U"), "{args:?}");
        assert_eq!(&args[..6], ["-I", "lanplus", "-H", "fd00::5", "-p", "623"]);
    }

    #[test]
    fn power_status_output_is_read_or_refused() {
        assert_eq!(parse_power("Chassis Power is on\n"), Some(PowerState::On));
        assert_eq!(parse_power("Chassis Power is off\n"), Some(PowerState::Off));
        assert_eq!(
            parse_power("\nChassis Power is off  \n"),
            Some(PowerState::Off)
        );
        assert_eq!(parse_power("Chassis Power is unknown\n"), None);
        assert_eq!(parse_power("System Power : on\n"), None);
        assert_eq!(parse_power(""), None);
    }

    #[test]
    fn power_words_follow_the_state() {
        use PowerAction::*;
        use PowerState as S;
        assert_eq!(power_word(On, S::Off), Some("on"));
        assert_eq!(power_word(On, S::On), None);
        assert_eq!(power_word(Off, S::On), Some("off"));
        assert_eq!(power_word(Off, S::Off), None);
        assert_eq!(power_word(SoftOff, S::On), Some("soft"));
        assert_eq!(power_word(SoftOff, S::Off), None);
        assert_eq!(power_word(Reboot, S::On), Some("cycle"));
        assert_eq!(power_word(Reboot, S::Off), Some("on"));
    }

    /// Standard error of ipmitool 1.8.19 with -v against OpenIPMI's ipmi_sim and a closed port.
    const WRONG_PASSWORD: &str = "Loading IANA PEN Registry...\n> RAKP 2 HMAC is invalid\n\
        Error: Unable to establish IPMI v2 / RMCP+ session\n";
    const UNKNOWN_USER: &str = "Loading IANA PEN Registry...\n\
        RAKP 2 message indicates an error : unauthorized name\n\
        Error: Unable to establish IPMI v2 / RMCP+ session\n";
    const NO_ANSWER: &str = "Loading IANA PEN Registry...\nGet Auth Capabilities error\n\
        Error issuing Get Channel Authentication Capabilities request\n\
        Error: Unable to establish IPMI v2 / RMCP+ session\n";
    const REFUSED_POWER: &str = "Loading IANA PEN Registry...\n\
        Running Get VSO Capabilities my_addr 0x20, transit 0, target 0x20\n\
        Invalid completion code received: Invalid command\nDiscovered IPMB address 0x0\n\
        Set Chassis Power Control to Up/On failed: Unspecified error\n";

    #[test]
    fn failures_are_classified_by_ipmitools_messages() {
        assert_eq!(classify(WRONG_PASSWORD), Failure::Credentials);
        assert_eq!(classify(UNKNOWN_USER), Failure::Credentials);
        assert_eq!(classify(NO_ANSWER), Failure::Unreachable);
        assert_eq!(classify(REFUSED_POWER), Failure::Refused);
        let session = "Error: Unable to establish IPMI v2 / RMCP+ session\n";
        assert_eq!(classify(session), Failure::Credentials);
        for (stderr, want) in [
            (
                "Error in open session response message : insufficient resources for session\n",
                Failure::Unreachable,
            ),
            (
                "Error in open session response message : no matching cipher suite\n",
                Failure::Refused,
            ),
            (
                "Error in open session response message : invalid authentication algorithm\n",
                Failure::Refused,
            ),
            (
                "RAKP 2 message indicates an error : unauthorized role requested\n",
                Failure::Credentials,
            ),
            (
                "> RAKP 4 message has invalid integrity check value\n",
                Failure::Credentials,
            ),
            (
                "Set Session Privilege Level to ADMINISTRATOR failed: Requested privilege level exceeds limit\n",
                Failure::Credentials,
            ),
            (
                "> Error: no response from RAKP 1 message\n",
                Failure::Unreachable,
            ),
            (
                "> Error: no response from RAKP 3 message\n",
                Failure::Unreachable,
            ),
            (
                "Get Auth Capabilities error: Invalid command\n",
                Failure::Refused,
            ),
            (
                "Address lookup for bmc.invalid failed\nCould not open socket!\n",
                Failure::Unreachable,
            ),
            (
                "This BMC does not support IPMI v2 / RMCP+\n",
                Failure::NoLanplus,
            ),
            (
                "Set Chassis Power Control to Cycle failed: Command not supported in present state\n",
                Failure::Refused,
            ),
            (
                "Set Chassis Power Control to Up/On failed: Node busy\n",
                Failure::Unreachable,
            ),
            (
                "Set Chassis Power Control to Up/On failed: Timeout\n",
                Failure::Unreachable,
            ),
            (
                "Set Chassis Boot Parameter 5 failed: Insufficient privilege level\n",
                Failure::Credentials,
            ),
            (
                "Error: Received an Unexpected Open Session Response\n",
                Failure::Refused,
            ),
            ("", Failure::Refused),
        ] {
            assert_eq!(classify(stderr), want, "{stderr}");
        }
        // Every pattern of the table is reachable: none is shadowed by an earlier, broader one.
        for (i, (pattern, _, want)) in PATTERNS.iter().enumerate() {
            assert_eq!(classify(pattern), *want, "pattern {i} {pattern:?}");
        }
    }

    #[test]
    fn messages_drop_verbose_chatter_and_are_bounded() {
        assert_eq!(
            message_of(REFUSED_POWER),
            "Set Chassis Power Control to Up/On failed: Unspecified error"
        );
        assert_eq!(
            message_of(NO_ANSWER),
            "Get Auth Capabilities error; Error issuing Get Channel Authentication Capabilities \
             request; Error: Unable to establish IPMI v2 / RMCP+ session"
        );
        assert_eq!(message_of("Loading IANA PEN Registry...\n\n"), "");
        let long = "é".repeat(2000);
        let m = message_of(&long);
        assert_eq!(m.chars().count(), MESSAGE_LIMIT + 1);
        assert!(m.ends_with('…'));
    }

    /// A stand-in for ipmitool: a shell script in its own directory.
    struct Fake {
        dir: tempfile::TempDir,
    }

    impl Fake {
        fn new(body: &str) -> Fake {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("ipmitool");
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            Fake { dir }
        }

        fn driver(&self, endpoint: Endpoint) -> Ipmi {
            Ipmi::with_ipmitool(endpoint, Some(self.dir.path().join("ipmitool")))
        }

        fn file(&self, name: &str) -> String {
            std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
        }
    }

    #[test]
    fn the_password_goes_in_the_environment_and_nothing_else_is_inherited() {
        let fake = Fake::new(
            r#"d=$(dirname "$0")
printf '%s\n' "$@" > "$d/argv"
printf '%s' "$IPMI_PASSWORD" > "$d/password"
env > "$d/env"
echo "Chassis Power is on""#,
        );
        let mut bmc = fake.driver(endpoint("127.0.0.1:6230"));
        assert_eq!(bmc.power_state().unwrap(), PowerState::On);
        let argv = fake.file("argv");
        assert!(!argv.contains("secret"), "{argv}");
        assert_eq!(
            argv.lines().collect::<Vec<_>>(),
            [
                "-I",
                "lanplus",
                "-H",
                "127.0.0.1",
                "-p",
                "6230",
                "-U",
                "admin",
                "-E",
                "-C",
                "3",
                "-N",
                "1",
                "-R",
                "1",
                "-v",
                "chassis",
                "power",
                "status"
            ]
        );
        assert_eq!(fake.file("password"), "secret");
        let env = fake.file("env");
        assert!(!env.contains("IPMITOOL_PASSWORD"), "{env}");
        assert!(!env.contains("PATH=/"), "{env}");
    }

    #[test]
    fn power_reads_first_and_skips_what_is_already_done() {
        // Answers status from the file `state`, logs every command.
        let fake = Fake::new(
            r#"d=$(dirname "$0")
for last; do :; done
echo "$last" >> "$d/log"
case "$last" in
  status) echo "Chassis Power is $(cat "$d/state")";;
  *) echo "Chassis Power Control: whatever";;
esac"#,
        );
        std::fs::write(fake.dir.path().join("state"), "off").unwrap();
        let mut bmc = fake.driver(endpoint("127.0.0.1"));
        bmc.power(PowerAction::Off).unwrap();
        bmc.power(PowerAction::SoftOff).unwrap();
        bmc.power(PowerAction::Reboot).unwrap();
        bmc.power(PowerAction::On).unwrap();
        assert_eq!(fake.file("log"), "status\nstatus\nstatus\non\nstatus\non\n");
        std::fs::write(fake.dir.path().join("state"), "on").unwrap();
        std::fs::remove_file(fake.dir.path().join("log")).unwrap();
        bmc.power(PowerAction::On).unwrap();
        bmc.power(PowerAction::Reboot).unwrap();
        bmc.power(PowerAction::SoftOff).unwrap();
        bmc.power(PowerAction::Off).unwrap();
        assert_eq!(
            fake.file("log"),
            "status\nstatus\ncycle\nstatus\nsoft\nstatus\noff\n"
        );
    }

    #[test]
    fn an_overrunning_ipmitool_is_killed_at_the_deadline() {
        let fake = Fake::new(r#"echo $$ > "$(dirname "$0")/pid"; exec sleep 30"#);
        let mut ep = endpoint("127.0.0.1");
        ep.timeout = Duration::from_millis(700);
        let started = Instant::now();
        let err = fake.driver(ep).power_state().unwrap_err();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "{took:?}");
        match err {
            BmcError::Unreachable { address, reason } => {
                assert_eq!(address, "127.0.0.1");
                assert!(reason.contains("ipmitool was stopped"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // The process is gone, not left behind: its /proc entry disappears once reaped.
        let pid = fake.file("pid").trim().to_string();
        assert!(!pid.is_empty());
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} survived"
        );
    }

    #[test]
    fn endless_output_is_bounded_and_unreadable_output_is_a_protocol_error() {
        // 1 MiB of nonsense on stdout, then exit 0.
        let fake = Fake::new("head -c 1048576 /dev/zero | tr '\\0' 'x'; echo");
        let err = fake
            .driver(endpoint("127.0.0.1"))
            .power_state()
            .unwrap_err();
        match err {
            BmcError::Protocol { address, what } => {
                assert_eq!(address, "127.0.0.1");
                assert!(what.contains("chassis power status"), "{what}");
                assert!(what.len() < 1000, "{}", what.len());
            }
            other => panic!("{other:?}"),
        }
        let fake = Fake::new("echo 'Chassis Power is sideways'");
        let err = fake
            .driver(endpoint("127.0.0.1"))
            .power_state()
            .unwrap_err();
        assert!(
            matches!(&err, BmcError::Protocol { what, .. } if what.contains("sideways")),
            "{err:?}"
        );
    }

    #[test]
    fn a_bootdev_refused_with_exit_status_0_is_refused() {
        // ipmitool 1.8.19 exits 0 when Set System Boot Options fails.
        let fake = Fake::new(
            "echo 'Loading IANA PEN Registry...' >&2\n\
             echo 'Set Chassis Boot Parameter 5 failed: Unspecified error' >&2",
        );
        let err = fake
            .driver(endpoint("127.0.0.1"))
            .boot_once(BootDevice::Pxe)
            .unwrap_err();
        assert_eq!(
            err,
            BmcError::Refused {
                address: "127.0.0.1".into(),
                request: "chassis bootdev pxe".into(),
                message: "Set Chassis Boot Parameter 5 failed: Unspecified error".into(),
            }
        );
        let fake = Fake::new("echo 'Set Boot Device to disk'");
        fake.driver(endpoint("127.0.0.1"))
            .boot_once(BootDevice::Disk)
            .unwrap();
        // The wrong device echoed back is not success.
        let fake = Fake::new("echo 'Set Boot Device to disk'");
        let err = fake
            .driver(endpoint("127.0.0.1"))
            .boot_once(BootDevice::Pxe)
            .unwrap_err();
        assert!(matches!(err, BmcError::Protocol { .. }), "{err:?}");
    }

    #[test]
    fn exit_status_and_stderr_become_the_errors() {
        let fake = Fake::new(&format!("printf '%s' '{WRONG_PASSWORD}' >&2; exit 1"));
        let err = fake.driver(endpoint("10.1.1.1")).power_state().unwrap_err();
        assert_eq!(
            err,
            BmcError::Credentials {
                address: "10.1.1.1".into(),
                username: "admin".into()
            }
        );
        let fake = Fake::new(&format!("printf '%s' '{NO_ANSWER}' >&2; exit 1"));
        let err = fake.driver(endpoint("10.1.1.1")).power_state().unwrap_err();
        assert!(
            matches!(&err, BmcError::Unreachable { reason, .. } if reason.contains("Get Auth Capabilities error")),
            "{err:?}"
        );
        let fake = Fake::new("exit 3");
        let err = fake.driver(endpoint("10.1.1.1")).power_state().unwrap_err();
        assert!(
            matches!(&err, BmcError::Refused { message, .. } if message.contains("exited with 3")),
            "{err:?}"
        );
    }

    #[test]
    fn without_ipmitool_or_with_bad_input_nothing_runs() {
        let mut bmc = Ipmi::with_ipmitool(endpoint("127.0.0.1"), None);
        match bmc.power_state().unwrap_err() {
            BmcError::Unsupported { address, what } => {
                assert_eq!(address, "127.0.0.1");
                assert!(what.contains("ipmitool"), "{what}");
                assert!(what.contains("Debian package ipmitool"), "{what}");
            }
            other => panic!("{other:?}"),
        }
        let missing = Ipmi::with_ipmitool(
            endpoint("127.0.0.1"),
            Some(PathBuf::from("/nonexistent/ipmitool")),
        )
        .power_state()
        .unwrap_err();
        assert!(
            matches!(&missing, BmcError::Unsupported { what, .. }
                if what.contains("ipmitool is not installed") && what.contains("/nonexistent/ipmitool")),
            "{missing:?}"
        );

        let fake = Fake::new(r#"touch "$(dirname "$0")/ran""#);
        let mut ep = endpoint("-H evil");
        let err = fake.driver(ep.clone()).power_state().unwrap_err();
        assert!(
            matches!(&err, BmcError::Invalid { field, .. } if field == "address"),
            "{err:?}"
        );
        ep.address = "127.0.0.1".into();
        ep.username = "-P".into();
        let err = fake.driver(ep.clone()).power(PowerAction::On).unwrap_err();
        assert!(
            matches!(&err, BmcError::Invalid { field, .. } if field == "username"),
            "{err:?}"
        );
        ep.username = "admin".into();
        let mut bmc = fake.driver(ep);
        assert_eq!(bmc.capabilities().unwrap(), Capabilities::default());
        let unsupported = |r: Result<(), BmcError>, what: &str| match r {
            Err(BmcError::Unsupported { address, what: w }) => {
                assert_eq!(address, "127.0.0.1");
                assert!(w.contains(what) && w.contains("redfish"), "{w}");
            }
            other => panic!("{other:?}"),
        };
        unsupported(bmc.bios().map(drop), "read BIOS settings");
        unsupported(bmc.apply_bios(&Map::new()), "change BIOS settings");
        unsupported(bmc.drives().map(drop), "list drives");
        unsupported(bmc.volumes().map(drop), "list RAID volumes");
        unsupported(
            bmc.create_volumes(&RaidPlan {
                volumes: Vec::new(),
            })
            .map(drop),
            "create RAID volumes",
        );
        unsupported(bmc.delete_volumes().map(drop), "delete RAID volumes");
        unsupported(
            bmc.update_firmware("http://x/fw.bin", Duration::from_secs(1), &mut |_| {})
                .map(drop),
            "update firmware",
        );
        assert_eq!(fake.file("ran"), "", "ipmitool ran");
        assert!(!fake.dir.path().join("ran").exists());
    }
}
