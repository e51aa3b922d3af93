//! Agents benchmark (issue 7 item 9, issue 14 item 9): N simulated nodes on loopback against
//! one `stoker serve` (the built binary), each playing both of its agents as the protocol says.
//! Each node says hello and gets the compute role of a release whose graph gives it 20 steps:
//! provisioning in the bootstrap ramdisk (`deploy.configure`, `power.reboot_to_disk`) with the
//! bootstrap agent's token, then 18 chained shell tasks on the installed OS through the service
//! agent, which says hello with the credential `deploy.configure` carried (the release is the
//! test fixture release built and installed as a plugin package). A step is not executed: the
//! agent spends STEP_MS on it on average (from half to one and a half of it; a real step takes
//! seconds). STEP_MS 0 is a closed loop that finds the daemon's ceiling (and, by Little's law,
//! latency ≈ AGENTS / throughput).
//!
//! `day2` adds what a deployed environment sees: every node ready, its service agent calling
//! each `retry_after_ms` (the heartbeat) while idle, then one setting changed that one task's
//! `changed()` condition watches (the others watch a setting that stays), and Deploy again: the
//! service agents pick up only that task.
//!
//! Each phase reports messages per second beside the agents' own pacing ceiling (what an
//! infinitely fast daemon would reach given the step times and the waits the agents were told),
//! p50/p99 latency of the agent calls, the daemon's CPU per call (utime + stime from
//! /proc/PID/stat over the phase) and its peak RSS (VmHWM), and names what bounds the rate.
//!
//! `STOKER_BENCH_BMCS=FILE` (one Redfish BMC address per line, as `benches/redfish_farm.py
//! --list` writes them) adds the background power sync to the daemon's work: before the hellos,
//! one node per line is enrolled with that BMC (admin/password, the farm's defaults) and the
//! bench waits until the daemon's sweeps have read each once; the sweep's pace comes from the
//! environment the daemon inherits (`STOKER_BMC_SYNC_INTERVAL`, `STOKER_BMC_SYNC_WORKERS`).
//! `STOKER_BENCH_BMC_OFF=1` enrolls the same nodes without their BMCs: the baseline with the
//! same database. Each phase then also reports the sweeps the daemon logged within it and the
//! latency of the agent calls that overlapped a sweep beside the others' (`benches/bmc_sweep.sh`
//! with `AGENTS=` runs both alternately).
//!
//! `cargo bench --bench agents -- [AGENTS] [STEP_MS] [day2]` (default 1000 agents, 250 ms);
//! `STOKER_BENCH_BIN` runs another stoker binary than cargo's. Not part of CI.

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Shell tasks per node in the bench release's graph.
const TASKS: usize = 18;
/// Steps per node in a first deployment: configure, the tasks, reboot_to_disk.
const FIRST_STEPS: usize = TASKS + 2;
/// The task whose condition watches `bench_marker`, the setting day 2 changes.
const DAY2_TASK: usize = 9;
/// How long the day-2 mode watches the ready nodes' heartbeats before changing the setting.
const IDLE_S: u64 = 10;

/// The operator's side: plain JSON calls with the admin's API token.
struct Api {
    agent: ureq::Agent,
    base: String,
    token: String,
}

impl Api {
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bearer {}", self.token);
        let sent = match (method, body) {
            ("GET", _) => self.agent.get(&url).header("authorization", &auth).call(),
            ("PUT", b) => self
                .agent
                .put(&url)
                .header("authorization", &auth)
                .header("content-type", "application/json")
                .send(b.map(Value::to_string).unwrap_or_default()),
            (_, b) => self
                .agent
                .post(&url)
                .header("authorization", &auth)
                .header("content-type", "application/json")
                .send(b.map(Value::to_string).unwrap_or_default()),
        };
        match sent {
            Ok(mut r) => {
                let status = r.status().as_u16();
                let text = r.body_mut().read_to_string().unwrap_or_default();
                (status, serde_json::from_str(&text).unwrap_or(Value::Null))
            }
            Err(e) => panic!("{method} {path}: {e}"),
        }
    }

    fn get(&self, path: &str) -> Value {
        let (status, v) = self.call("GET", path, None);
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}
/// What a typical storage-heavy server reports: four NICs, twelve disks, its DMI identity.
fn server_inventory(i: usize, mac: &str) -> Value {
    let nics: Vec<Value> = (0..4)
        .map(|k| {
            let mac = if k == 0 {
                mac.to_string()
            } else {
                format!(
                    "52:55:{k:02x}:{:02x}:{:02x}:{:02x}",
                    (i >> 16) & 0xff,
                    (i >> 8) & 0xff,
                    i & 0xff
                )
            };
            json!({"name": format!("eno{}", k + 1), "mac": mac, "speed_mbps": 25000, "link": k < 2})
        })
        .collect();
    let disks: Vec<Value> = (0..12)
        .map(|k| {
            json!({"name": format!("sd{}", (b'a' + k as u8) as char), "size_bytes": 3_840_755_982_336u64,
                   "model": "SAMSUNG MZILT3T8HBLS/007", "serial": format!("S5G0NE0R{i:06}{k:02}")})
        })
        .collect();
    json!({"interfaces": nics, "cpu": {"count": 64, "model": "AMD EPYC 7543 32-Core Processor"},
           "memory_bytes": 549_755_813_888u64, "disks": disks,
           "system": {"vendor": "Dell Inc.", "product": "PowerEdge R7525", "serial": format!("7XQ{i:05}")},
           "boot_mode": "uefi"})
}

/// POST `body` to `path` from a loopback address of the node's own (the hellos are
/// rate-limited per client address), over a plain HTTP/1.1 connection.
fn post_from(addr: &str, src: Ipv4Addr, path: &str, body: &Value) -> Value {
    use std::io::{Read, Write};
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.bind(&std::net::SocketAddr::from((src, 0)).into())
        .expect("bind");
    let target: std::net::SocketAddr = addr.parse().expect("addr");
    sock.connect(&target.into()).expect("connect");
    let mut stream: std::net::TcpStream = sock.into();
    let body = body.to_string();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).expect("send");
    let mut resp = String::new();
    stream.read_to_string(&mut resp).expect("read");
    let json = resp.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(json).unwrap_or(Value::Null)
}

/// One agent's keep-alive HTTP/1.1 connection: a bare client (write the request, read the
/// status line, headers and a Content-Length body), so the machine's two cores go to the
/// daemon rather than to a thousand general-purpose clients.
struct Conn {
    addr: String,
    stream: Option<BufReader<std::net::TcpStream>>,
    /// When the connection was last used: the daemon closes one idle for 5 s (actix's
    /// keep-alive), as long as a ready node's heartbeat, so one idle for 4 s is not reused.
    used: Instant,
}

impl Conn {
    fn new(addr: &str) -> Conn {
        Conn {
            addr: addr.to_string(),
            stream: None,
            used: Instant::now(),
        }
    }

    fn post(&mut self, path: &str, token: &str, body: &str) -> Value {
        if self.used.elapsed() > Duration::from_secs(4) {
            self.stream = None;
        }
        for _ in 0..3 {
            if let Some(v) = self.try_post(path, token, body) {
                self.used = Instant::now();
                return v;
            }
            // The connection broke: open another one.
            self.stream = None;
        }
        panic!("{path}: no answer");
    }

    fn try_post(&mut self, path: &str, token: &str, body: &str) -> Option<Value> {
        use std::io::{Read, Write};
        if self.stream.is_none() {
            let s = std::net::TcpStream::connect(&self.addr).ok()?;
            s.set_nodelay(true).ok()?;
            self.stream = Some(BufReader::new(s));
        }
        let stream = self.stream.as_mut()?;
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Authorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        stream.get_mut().write_all(req.as_bytes()).ok()?;
        let mut line = String::new();
        let mut length = 0usize;
        stream.read_line(&mut line).ok()?;
        if !line.starts_with("HTTP/1.1 ") {
            return None;
        }
        loop {
            line.clear();
            if stream.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().ok()?;
            }
        }
        let mut buf = vec![0; length];
        stream.read_exact(&mut buf).ok()?;
        Some(serde_json::from_slice(&buf).unwrap_or(Value::Null))
    }
}

/// CPU seconds (user + system) the process has used.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime and stime are 14th and 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0);
    ticks / 100.0
}

/// The machine's busy and total CPU seconds so far (all cores; /proc/stat), so a phase can
/// tell how much of the machine other processes took.
fn machine_s() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let total: f64 = f.iter().sum();
    // idle and iowait
    let idle = f.get(3).copied().unwrap_or(0.0) + f.get(4).copied().unwrap_or(0.0);
    ((total - idle) / 100.0, total / 100.0)
}

/// A `/proc/PID/status` figure in kB (`VmHWM`, `VmRSS`).
fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A release for the benchmark, as a plugin package: the test fixture release with a graph of
/// `TASKS` chained shell tasks for the `compute` role and nothing across nodes, so every agent
/// has the same steps (configure, reboot_to_disk, the tasks) and none waits for another node.
/// Each task runs only when a setting changed, as day-2 tasks do: task `DAY2_TASK` watches
/// `bench_marker`, the others `bench_static`, which nothing changes. A first deployment runs
/// them all (nothing was deployed to compare with).
fn bench_release(dir: &std::path::Path) -> Vec<u8> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plugins/v5-release-valid");
    let dst = dir.join("bench-release");
    copy_dir(&src, &dst);
    let mut yaml = String::new();
    for i in 1..=TASKS {
        let requires = if i == 1 {
            "deploy_start".to_string()
        } else {
            format!("bench-{:02}", i - 1)
        };
        let watches = if i == DAY2_TASK {
            "bench_marker"
        } else {
            "bench_static"
        };
        yaml.push_str(&format!(
            "- {{id: bench-{i:02}, type: shell, version: 2.1.0, roles: [compute], \
             requires: [{requires}], required_for: [deploy_end], \
             condition: {{yaql_exp: 'changed($.{watches})'}}, \
             parameters: {{cmd: 'true', timeout: 60}}}}\n"
        ));
    }
    std::fs::write(dst.join("graphs/default/b-keystone.yaml"), yaml).expect("graph");
    std::fs::write(
        dst.join("attributes.yaml"),
        "editable:\n  common:\n    debug: {value: false, label: Debug, type: checkbox, weight: 10}\n    \
         bench_marker: {value: first, label: Changed on day 2, type: text, weight: 20}\n    \
         bench_static: {value: same, label: Never changed, type: text, weight: 30}\n",
    )
    .expect("attributes");
    std::fs::write(
        dst.join("roles/a-controller.yaml"),
        "controller:\n  name: Controller\n  description: Not used here\n",
    )
    .expect("roles");
    let meta = std::fs::read_to_string(dst.join("metadata.yaml")).expect("metadata");
    std::fs::write(
        dst.join("metadata.yaml"),
        meta.replace("name: fixture-release", "name: bench-release")
            .replace("Fixture Release", "Bench Release"),
    )
    .expect("metadata");
    let out = Command::new(stoker_bin())
        .args(["plugin", "build"])
        .arg(&dst)
        .arg("--output")
        .arg(dir)
        .output()
        .expect("stoker plugin build");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(dir.join("bench-release-1.0.0.fp")).expect("package")
}

fn copy_dir(src: &std::path::Path, dst: &std::path::Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read fixture") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), to).expect("copy");
        }
    }
}

/// The stoker binary to run: `STOKER_BENCH_BIN` when set (`benches/bmc_sweep.sh` passes the
/// binary it measured), else the one cargo built with this bench.
fn stoker_bin() -> std::ffi::OsString {
    std::env::var_os("STOKER_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_stoker").into())
}

/// One power sweep the daemon logged ("power states read"): when its line was read, how long
/// it took, what it read.
#[derive(Clone, Copy)]
struct SweepLog {
    end: Instant,
    ms: u64,
    read: usize,
    failed: usize,
    peak: usize,
}

/// A sweep as a window of the bench's time (s since `Shared::t0`).
#[derive(Clone, Copy)]
struct Window {
    start: f64,
    end: f64,
    log: SweepLog,
}

/// The sweep in a daemon log line, colours or not: `power states read read=N failed=N ms=N
/// peak_in_flight=N`.
fn parse_sweep(line: &str, end: Instant) -> Option<SweepLog> {
    if !line.contains("power states read") {
        return None;
    }
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An ANSI sequence: ESC [ parameters, then one letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    let field = |name: &str| -> Option<u64> {
        let at = plain.find(&format!(" {name}="))? + name.len() + 2;
        let digits: String = plain[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    Some(SweepLog {
        end,
        ms: field("ms")?,
        read: field("read")? as usize,
        failed: field("failed")? as usize,
        peak: field("peak_in_flight")? as usize,
    })
}

/// `STOKER_BENCH_BMCS`: enroll one node per BMC address in `file` (with its BMC unless
/// `with_bmc` is false), eight at a time; returns how many.
fn enroll_bmcs(api: &Api, file: &str, with_bmc: bool) -> usize {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let addresses: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(address) = addresses.get(i) else {
                        break;
                    };
                    let mut body = json!({"mac": format!(
                        "52:54:10:{:02x}:{:02x}:{:02x}",
                        (i >> 16) & 0xff,
                        (i >> 8) & 0xff,
                        i & 0xff
                    )});
                    if with_bmc {
                        body["bmc"] = json!({"driver": "redfish", "address": address,
                                             "username": "admin", "password": "password"});
                    }
                    let (status, r) = api.call("POST", "/api/v1/nodes", Some(&body));
                    assert_eq!(status, 201, "enroll {address}: {r}");
                }
            });
        }
    });
    addresses.len()
}

/// The daemon this benchmark started: stopped (by its PID) however the benchmark ends.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Next,
    Result,
    /// The service agent's hello once the node runs its installed OS.
    Hello,
}

/// One agent call: when it started (s since the bench's start), how long it took (s).
#[derive(Clone, Copy)]
struct Call {
    at: f64,
    secs: f64,
    kind: Kind,
}

/// What an agent did: its calls, and its pauses (start, length in s) for steps and waits.
#[derive(Default)]
struct Record {
    calls: Vec<Call>,
    pauses: Vec<(f64, f64)>,
}

/// What the agent threads share with the bench.
struct Shared {
    t0: Instant,
    stop: Mutex<bool>,
    wake: Condvar,
    /// Results the master accepted, all agents, all phases.
    results: AtomicUsize,
    /// The last `retry_after_ms` an agent was told (a ready node's: its heartbeat).
    retry_ms: AtomicU64,
}

impl Shared {
    fn at(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Sleep `d` unless the bench stops meanwhile; false once it has.
    fn pause(&self, d: Duration) -> bool {
        let stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        let (stop, _) = self
            .wake
            .wait_timeout_while(stop, d, |s| !*s)
            .unwrap_or_else(PoisonError::into_inner);
        !*stop
    }

    fn end(&self) {
        *self.stop.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_all();
    }
}

/// One simulated node.
struct Sim {
    id: i64,
    mac: String,
    /// The node's own loopback address, which its hellos come from.
    src: Ipv4Addr,
    /// The bootstrap agent's token.
    token: String,
}

/// The node's agents until the bench stops: the bootstrap agent asks for runs and reports
/// them; after `power.reboot_to_disk` the installed OS's service agent says hello with the
/// credential `deploy.configure` carried and goes on with its own token, calling again each
/// `retry_after_ms` while it has nothing to run. The first ask comes after `first`.
fn run_node(sim: Sim, addr: &str, step_ms: u64, first: Duration, shared: &Shared) -> Record {
    let mut rec = Record::default();
    let mut c = Conn::new(addr);
    let mut token = sim.token;
    let mut credential = None;
    let ask = json!({"node_id": sim.id}).to_string();
    // Steps take STEP_MS on average, from half to one and a half of it (a fixed pseudo-random
    // sequence per node): real steps differ, and identical ones would keep a thousand agents
    // marching in step.
    let mut seed = (sim.id as u64)
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut step_time = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let unit = (seed >> 33) as f64 / (1u64 << 31) as f64;
        Duration::from_secs_f64(step_ms as f64 / 1000.0 * (0.5 + unit))
    };
    let pause = |rec: &mut Record, d: Duration| {
        rec.pauses.push((shared.at(), d.as_secs_f64()));
        shared.pause(d)
    };
    let call = |rec: &mut Record, kind: Kind, f: &mut dyn FnMut() -> Value| {
        let at = shared.at();
        let v = f();
        rec.calls.push(Call {
            at,
            secs: shared.at() - at,
            kind,
        });
        v
    };
    if !pause(&mut rec, first) {
        return rec;
    }
    loop {
        let reply = call(&mut rec, Kind::Next, &mut || {
            c.post("/api/v1/agent/next", &token, &ask)
        });
        if let Some(t) = reply["agent_token"].as_str() {
            token = t.to_string();
        }
        match reply["action"].as_str() {
            Some("run") => {
                let run = &reply["run"];
                let step = format!(
                    "{}.{}",
                    run["step"]["interface"].as_str().unwrap_or(""),
                    run["step"]["name"].as_str().unwrap_or("")
                );
                if step == "deploy.configure" {
                    credential = run["step"]["args"]["os_agent"]["config"]["credential"]
                        .as_str()
                        .map(str::to_string);
                }
                if !pause(&mut rec, step_time()) {
                    return rec;
                }
                let done = json!({"attempt": run["attempt"], "ok": true, "exit_code": 0,
                                  "output_tail": "ok"})
                .to_string();
                let path = format!("/api/v1/agent/runs/{}/result", run["id"]);
                let r = call(&mut rec, Kind::Result, &mut || c.post(&path, &token, &done));
                if r["accepted"] != true {
                    eprintln!("node {}: result of {step} refused: {r}", sim.id);
                    return rec;
                }
                shared.results.fetch_add(1, Ordering::Relaxed);
                if step == "power.reboot_to_disk" {
                    // The machine boots its installed OS; its service agent is another
                    // process, on a connection of its own.
                    let Some(cred) = credential.clone() else {
                        eprintln!("node {}: rebooted without a credential", sim.id);
                        return rec;
                    };
                    let body = json!({"node_id": sim.id, "credential": cred,
                                      "version": env!("CARGO_PKG_VERSION"), "macs": [sim.mac]});
                    // Refused for the rate (a thousand nodes rebooting within a second),
                    // it tries again after 1 s, 2 s, 4 s ... as `stoker agent --service` does.
                    let mut backoff = Duration::from_secs(1);
                    let hello = loop {
                        let r = call(&mut rec, Kind::Hello, &mut || {
                            post_from(addr, sim.src, "/api/v1/agent/service/hello", &body)
                        });
                        if r["code"] != "rate_limited" {
                            break r;
                        }
                        if !pause(&mut rec, backoff) {
                            return rec;
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(60));
                    };
                    let Some(t) = hello["agent_token"].as_str() else {
                        eprintln!("node {}: service hello refused: {hello}", sim.id);
                        return rec;
                    };
                    token = t.to_string();
                    c = Conn::new(addr);
                }
            }
            Some("wait") => {
                let ms = reply["retry_after_ms"].as_u64().unwrap_or(1000).max(20);
                shared.retry_ms.store(ms, Ordering::Relaxed);
                if !pause(&mut rec, Duration::from_millis(ms)) {
                    return rec;
                }
            }
            _ => {
                eprintln!("node {}: unexpected answer to next: {reply}", sim.id);
                return rec;
            }
        }
    }
}

/// What the agents were doing in a phase, which decides its pacing ceiling.
enum Pacing {
    /// Deploying: every agent steps (2 calls a step, STEP_MS each on average), after what
    /// the note says.
    Steps(String),
    /// Idle: every agent calls once per heartbeat.
    Heartbeat(u64),
}

/// One measured stretch of the run: [start, end) in s since the bench's start, and the
/// daemon's and the bench's CPU seconds over it.
struct Phase {
    name: &'static str,
    start: f64,
    end: f64,
    cpu: f64,
    own: f64,
    /// The whole machine's busy CPU seconds over the phase.
    busy: f64,
    pacing: Pacing,
    /// The deployment's summary at the end, for a deployment phase.
    summary: Option<Value>,
    hwm_kb: u64,
    rss_kb: u64,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0.0)
        * 1000.0
}

fn latency(calls: &[&Call], kind: Option<Kind>) -> String {
    let mut l: Vec<f64> = calls
        .iter()
        .filter(|c| kind.is_none_or(|k| c.kind == k))
        .map(|c| c.secs)
        .collect();
    if l.is_empty() {
        return "none".into();
    }
    l.sort_by(f64::total_cmp);
    format!(
        "{} calls, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        l.len(),
        pct(&l, 0.5),
        pct(&l, 0.99),
        l[l.len() - 1] * 1000.0
    )
}

/// The phase's figures, with its ceiling and what bounds it.
fn report(
    p: &Phase,
    records: &[Record],
    agents: usize,
    step_ms: u64,
    cores: f64,
    sweeps: &[Window],
) {
    let secs = p.end - p.start;
    let calls: Vec<&Call> = records
        .iter()
        .flat_map(|r| &r.calls)
        .filter(|c| c.at >= p.start && c.at < p.end)
        .collect();
    let rate = calls.len() as f64 / secs;
    println!("\n== {} ({secs:.1} s)", p.name);
    if let Some(s) = &p.summary {
        println!(
            "deployment {}: {} runs ({} ok, {} skipped)",
            s["status"], s["runs"]["total"], s["runs"]["ok"], s["runs"]["skipped"]
        );
    }
    // What an infinitely fast daemon would give: each agent's calls take no time, so it is
    // done once its pauses in the phase (steps, waits it was told) have passed.
    let (ceiling, how) = match p.pacing {
        Pacing::Heartbeat(ms) => (
            agents as f64 * 1000.0 / ms as f64,
            format!("{agents} agents / {ms} ms heartbeat"),
        ),
        Pacing::Steps(ref note) => {
            let ideal = records
                .iter()
                .map(|r| {
                    let last = r
                        .calls
                        .iter()
                        .filter(|c| c.kind == Kind::Result && c.at >= p.start && c.at < p.end)
                        .map(|c| c.at)
                        .fold(p.start, f64::max);
                    r.pauses
                        .iter()
                        .map(|&(s, d)| ((s + d).min(last) - s.max(p.start)).max(0.0))
                        .sum::<f64>()
                })
                .fold(0.0, f64::max);
            let steady = if step_ms == 0 {
                "unbounded (closed loop)".to_string()
            } else {
                format!(
                    "{:.0} msg/s ({agents} agents × 2 calls / {step_ms} ms)",
                    agents as f64 * 2000.0 / step_ms as f64
                )
            };
            (
                calls.len() as f64 / ideal.max(1e-3),
                format!(
                    "the agents' pauses alone take {ideal:.1} s{note}; while all step: {steady}"
                ),
            )
        }
    };
    let share = rate / ceiling;
    println!(
        "agent calls: {} = {rate:.0} messages/s; pacing ceiling {ceiling:.0} msg/s ({how}): {:.0}% of it",
        calls.len(),
        share * 100.0
    );
    println!("latency, all calls: {}", latency(&calls, None));
    println!("  next: {}", latency(&calls, Some(Kind::Next)));
    println!("  result: {}", latency(&calls, Some(Kind::Result)));
    if calls.iter().any(|c| c.kind == Kind::Hello) {
        println!("  service hello: {}", latency(&calls, Some(Kind::Hello)));
    }
    let per = |cpu: f64| cpu * 1e6 / calls.len().max(1) as f64;
    let used = (p.cpu + p.own) / secs;
    let busy = p.busy / secs;
    println!(
        "daemon CPU {:.1} s = {:.0} µs per call (the agents: {:.0} µs); of the machine's {cores} cores \
         {busy:.2} were busy: daemon {:.2}, agents {:.2}, other processes {:.2}",
        p.cpu,
        per(p.cpu),
        per(p.own),
        p.cpu / secs,
        p.own / secs,
        (busy - used).max(0.0)
    );
    println!(
        "daemon RSS: peak (VmHWM) {} MB, now {} MB",
        p.hwm_kb / 1024,
        p.rss_kb / 1024
    );
    report_sweeps(p, &calls, sweeps);
    let bound = if share >= 0.9 {
        "the agents' pacing: the rate says nothing about the daemon (its latency and CPU per call do)"
            .to_string()
    } else if busy >= 0.9 * cores {
        format!(
            "CPU: the daemon, the {agents} client threads and the machine's other processes \
             keep its {cores} cores busy (daemon + agents {used:.2})"
        )
    } else {
        "the daemon's latency (neither the pacing nor the CPU is used up)".to_string()
    };
    println!("bound: {bound}");
}

/// The BMC sweeps that overlapped phase `p`, and the agent calls that overlapped them beside
/// the others.
fn report_sweeps(p: &Phase, calls: &[&Call], sweeps: &[Window]) {
    let within: Vec<&Window> = sweeps
        .iter()
        .filter(|w| w.end > p.start && w.start < p.end)
        .collect();
    if sweeps.is_empty() {
        return;
    }
    let covered: f64 = within
        .iter()
        .map(|w| w.end.min(p.end) - w.start.max(p.start))
        .sum();
    let mut ms: Vec<u64> = within.iter().map(|w| w.log.ms).collect();
    ms.sort_unstable();
    println!(
        "BMC sweeps overlapping the phase: {} ({:.0}% of its time), read {}, failed {}, \
         {} ms each (median {} ms), peak in flight {}",
        within.len(),
        100.0 * covered / (p.end - p.start).max(1e-9),
        within.iter().map(|w| w.log.read).sum::<usize>(),
        within.iter().map(|w| w.log.failed).sum::<usize>(),
        match (ms.first(), ms.last()) {
            (Some(a), Some(b)) => format!("{a}–{b}"),
            _ => "—".into(),
        },
        ms.get(ms.len() / 2).copied().unwrap_or(0),
        within.iter().map(|w| w.log.peak).max().unwrap_or(0)
    );
    let during = |c: &&&Call| {
        within
            .iter()
            .any(|w| c.at < w.end && c.at + c.secs > w.start)
    };
    let (a, b): (Vec<&Call>, Vec<&Call>) = calls.iter().partition(during);
    println!("  calls during a sweep: {}", latency(&a, None));
    println!("  calls outside sweeps: {}", latency(&b, None));
}

/// Latency by half second of the run (STOKER_BENCH_TIMELINE=1): where the slow calls are.
fn timeline(records: &[Record]) {
    let calls: Vec<&Call> = records.iter().flat_map(|r| &r.calls).collect();
    let end = calls.iter().map(|c| c.at).fold(0.0, f64::max);
    let mut w = calls.iter().map(|c| c.at).fold(f64::MAX, f64::min);
    while w <= end {
        for (name, kind) in [
            ("next", Kind::Next),
            ("result", Kind::Result),
            ("hello", Kind::Hello),
        ] {
            let mut l: Vec<f64> = calls
                .iter()
                .filter(|c| c.kind == kind && c.at >= w && c.at < w + 0.5)
                .map(|c| c.secs)
                .collect();
            if l.is_empty() {
                continue;
            }
            l.sort_by(f64::total_cmp);
            eprintln!(
                "{w:6.1} s {name:6} {:5} calls  p50 {:6.1}  p99 {:6.1}  max {:6.1} ms",
                l.len(),
                pct(&l, 0.5),
                pct(&l, 0.99),
                l[l.len() - 1] * 1000.0
            );
        }
        w += 0.5;
    }
}

/// Deploy the environment; returns the deployment's id and how long the call took.
fn deploy(api: &Api, cluster: i64) -> (i64, f64) {
    let t = Instant::now();
    let (status, dep) = api.call(
        "POST",
        &format!("/api/v1/clusters/{cluster}/deploy"),
        Some(&json!({})),
    );
    assert_eq!(status, 202, "deploy: {dep}");
    (
        dep["id"].as_i64().expect("deployment id"),
        t.elapsed().as_secs_f64(),
    )
}

/// Wait until the agents' accepted results reach `results` and deployment `id` is done;
/// returns its summary. Gives up (and says so) when no result comes for 60 s.
fn wait_done(api: &Api, shared: &Shared, cluster: i64, id: i64, results: usize) -> Value {
    let mut seen = (shared.results.load(Ordering::Relaxed), Instant::now());
    loop {
        let now = shared.results.load(Ordering::Relaxed);
        if now >= results {
            break;
        }
        if now != seen.0 {
            seen = (now, Instant::now());
        } else if seen.1.elapsed() > Duration::from_secs(60) {
            eprintln!("no result for 60 s: {now} of {results}");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    loop {
        let all = api.get(&format!("/api/v1/clusters/{cluster}/deployments"));
        let d = all
            .as_array()
            .and_then(|a| a.iter().find(|d| d["id"] == id))
            .cloned()
            .unwrap_or(Value::Null);
        if d["status"] != "running" || t.elapsed() > Duration::from_secs(30) {
            return d;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nums: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let day2 = args.iter().any(|a| a == "day2");
    let n = nums.first().copied().unwrap_or(1000) as usize;
    let step_ms = nums.get(1).copied().unwrap_or(250);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as f64;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Daemon(
        Command::new(stoker_bin())
            .current_dir(dir.path())
            .args([
                "serve",
                "--http-listen",
                "127.0.0.1:0",
                "--log-level",
                "warn,stoker=info",
            ])
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("stoker serve"),
    );
    let pid = child.0.id();
    let stderr = child.0.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("daemon exited").expect("log line");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap_or("").to_string();
        }
    };
    let sweep_log: Arc<Mutex<Vec<SweepLog>>> = Arc::default();
    {
        let sweep_log = Arc::clone(&sweep_log);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(s) = parse_sweep(&line, Instant::now()) {
                    sweep_log
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(s);
                }
            }
        });
    }
    let base = format!("http://{addr}");
    let password = std::fs::read_to_string(dir.path().join("stoker-data/initial-admin-password"))
        .expect("initial-admin-password");
    let mut api = Api {
        agent: agent(),
        base: base.clone(),
        token: String::new(),
    };
    let (status, login) = api.call(
        "POST",
        "/api/v1/login",
        Some(&json!({"username": "admin", "password": password.trim()})),
    );
    assert_eq!(status, 201, "sign-in: {login}");
    api.token = login["token"].as_str().expect("token").to_string();

    let package = bench_release(dir.path());
    let installed: Value = {
        let mut r = api
            .agent
            .post(format!("{base}/api/v1/plugins"))
            .header("authorization", &format!("Bearer {}", api.token))
            .header("content-type", "application/octet-stream")
            .send(&package[..])
            .expect("install the bench release");
        serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default())
            .unwrap_or(Value::Null)
    };
    assert!(
        installed["releases"][0] == "Bench Release",
        "bench release not installed: {installed}"
    );
    let releases = api.get("/api/v1/releases");
    let release = releases
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == "Bench Release"))
        .and_then(|r| r["id"].as_i64())
        .unwrap_or_else(|| panic!("no Bench Release in {releases}"));
    let (_, c) = api.call(
        "POST",
        "/api/v1/clusters",
        Some(&json!({"name": "bench", "release_id": release})),
    );
    let cluster = c["id"].as_i64().expect("cluster");

    if let Ok(file) = std::env::var("STOKER_BENCH_BMCS") {
        let with_bmc = std::env::var_os("STOKER_BENCH_BMC_OFF").is_none();
        let t = Instant::now();
        let count = enroll_bmcs(&api, &file, with_bmc);
        let enrolled = t.elapsed().as_secs_f64();
        if with_bmc {
            // Every BMC read once before the agents start: the sweeps' steady state.
            loop {
                let read: usize = sweep_log
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .map(|s| s.read)
                    .sum();
                if read >= count || t.elapsed() > Duration::from_secs(300) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        println!(
            "BMC nodes: {count} enrolled in {enrolled:.1} s, {}",
            if with_bmc {
                format!(
                    "each with a Redfish BMC, all read once after {:.1} s (sync interval {} s, \
                     {} workers)",
                    t.elapsed().as_secs_f64(),
                    std::env::var("STOKER_BMC_SYNC_INTERVAL").unwrap_or_else(|_| "60".into()),
                    std::env::var("STOKER_BMC_SYNC_WORKERS").unwrap_or_else(|_| "8".into())
                )
            } else {
                "without BMCs (the baseline: no power sync)".into()
            }
        );
    }

    // Hello, one by one; the hello is rate-limited per client address, so each node comes
    // from a 127.0.0.0/8 address of its own.
    let started = Instant::now();
    let mut sims = Vec::new();
    for i in 0..n {
        let mac = format!(
            "52:54:01:{:02x}:{:02x}:{:02x}",
            (i >> 16) & 0xff,
            (i >> 8) & 0xff,
            i & 0xff
        );
        let inv = server_inventory(i, &mac);
        let src = Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 2) as u8);
        let mut reply = post_from(&addr, src, "/api/v1/agent/hello", &inv);
        while reply["node"]["id"].as_i64().is_none() && reply["code"] == "rate_limited" {
            std::thread::sleep(Duration::from_millis(50));
            reply = post_from(&addr, src, "/api/v1/agent/hello", &inv);
        }
        let id = reply["node"]["id"].as_i64().unwrap_or(0);
        let token = reply["agent_token"].as_str().unwrap_or("").to_string();
        if id == 0 {
            eprintln!("hello {i} refused: {reply}; continuing with fewer agents");
            continue;
        }
        let (status, r) = api.call(
            "PUT",
            &format!("/api/v1/clusters/{cluster}/nodes/{id}"),
            Some(&json!({"roles": ["compute"]})),
        );
        assert_eq!(status, 200, "assign: {r}");
        sims.push(Sim {
            id,
            mac,
            src,
            token,
        });
    }
    let n = sims.len();
    println!(
        "agents: {n}, each step {step_ms} ms; hello+assign {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let shared = Arc::new(Shared {
        t0: Instant::now(),
        stop: Mutex::new(false),
        wake: Condvar::new(),
        results: AtomicUsize::new(0),
        retry_ms: AtomicU64::new(0),
    });
    let mut phases = Vec::new();
    let phase = |name, start: f64, cpu0: (f64, f64, f64), pacing, summary| Phase {
        name,
        start,
        end: shared.at(),
        cpu: cpu_s(pid) - cpu0.0,
        own: cpu_s(std::process::id()) - cpu0.1,
        busy: machine_s().0 - cpu0.2,
        pacing,
        summary,
        hwm_kb: status_kb(pid, "VmHWM:"),
        rss_kb: status_kb(pid, "VmRSS:"),
    };
    let cpus = || (cpu_s(pid), cpu_s(std::process::id()), machine_s().0);

    // The first deployment: the agents start after Deploy, their first asks spread over the
    // second they were polling in before (the bootstrap agent's retry_after_ms).
    let (dep, plan_s) = deploy(&api, cluster);
    println!("first Deploy (plan + runs stored) {plan_s:.2} s");
    let (start, cpu0) = (shared.at(), cpus());
    let threads: Vec<_> = sims
        .into_iter()
        .map(|sim| {
            let addr = addr.clone();
            let shared = Arc::clone(&shared);
            let first = Duration::from_millis((sim.id as u64).wrapping_mul(7919) % 1000);
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || run_node(sim, &addr, step_ms, first, &shared))
                .expect("agent thread")
        })
        .collect();
    let summary = wait_done(&api, &shared, cluster, dep, n * FIRST_STEPS);
    phases.push(phase(
        "first deployment",
        start,
        cpu0,
        Pacing::Steps(", their first asks spread over 1 s, the service hellos backing off".into()),
        Some(summary),
    ));

    if day2 {
        // Every node ready, its service agent calling once per heartbeat.
        let (start, cpu0) = (shared.at(), cpus());
        std::thread::sleep(Duration::from_secs(IDLE_S));
        let heartbeat = shared.retry_ms.load(Ordering::Relaxed);
        phases.push(phase(
            "ready, idle (heartbeats)",
            start,
            cpu0,
            Pacing::Heartbeat(heartbeat),
            None,
        ));
        // Day 2: one setting changes; only the task watching it runs again, on every node.
        let path = format!("/api/v1/clusters/{cluster}/settings");
        let mut settings = api.get(&path);
        settings["bench_marker"] = json!("day 2");
        let (status, r) = api.call("PUT", &path, Some(&settings));
        assert_eq!(status, 200, "settings: {r}");
        let (start, cpu0) = (shared.at(), cpus());
        let before = shared.results.load(Ordering::Relaxed);
        let (dep, plan_s) = deploy(&api, cluster);
        println!("\nday-2 Deploy (plan + runs stored) {plan_s:.2} s, within the redeploy phase");
        let summary = wait_done(&api, &shared, cluster, dep, before + n);
        phases.push(phase(
            "redeploy after one setting changed",
            start,
            cpu0,
            Pacing::Steps(format!(
                ": up to a heartbeat ({heartbeat} ms) before each asks, then its one step"
            )),
            Some(summary),
        ));
    }
    shared.end();
    let records: Vec<Record> = threads
        .into_iter()
        .map(|t| t.join().unwrap_or_else(|_| Record::default()))
        .collect();
    if std::env::var_os("STOKER_BENCH_TIMELINE").is_some() {
        timeline(&records);
    }
    let windows: Vec<Window> = sweep_log
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|s| {
            let end = s.end.saturating_duration_since(shared.t0).as_secs_f64();
            Window {
                start: end - s.ms as f64 / 1000.0,
                end,
                log: *s,
            }
        })
        .collect();
    for p in &phases {
        report(p, &records, n, step_ms, cores, &windows);
    }
}
