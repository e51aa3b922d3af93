//! Agents benchmark (issue 7 item 9, issue 14 item 9, issue 19 item 2): N simulated nodes on
//! loopback against one `stoker serve` (the built binary), each playing both of its agents as
//! the protocol says. Each node says hello and gets the compute role of a release whose graph
//! gives it 20 steps: provisioning in the bootstrap ramdisk (`deploy.configure`,
//! `power.reboot_to_disk`) with the bootstrap agent's token, then 18 chained shell tasks on the
//! installed OS through the service agent, which says hello with the credential
//! `deploy.configure` carried (the release is the test fixture release built and installed as a
//! plugin package). A step is not executed: the agent spends STEP_MS on it on average (from half
//! to one and a half of it; a real step takes seconds). STEP_MS 0 is a closed loop that finds
//! the daemon's ceiling (and, by Little's law, latency ≈ AGENTS / throughput).
//!
//! `day2` adds what a deployed environment sees: every node ready, its service agent asking for
//! work while idle (held by the master, or each `retry_after_ms` from a master that does not
//! hold), then one setting changed that one task's `changed()` condition watches (the others
//! watch a setting that stays), and Deploy again: the service agents pick up only that task.
//!
//! The client: the agents are tasks on a tokio runtime of `STOKER_BENCH_CLIENT_THREADS`
//! threads (default 1), each with its own keep-alive connection and a bare HTTP/1.1 exchange
//! (write the request, read the head and a Content-Length body), so 10,000 agents cost the
//! machine what their calls cost rather than 10,000 threads. The bench raises its open-file
//! limit to the hard limit (the daemon inherits it) and prints its own CPU and how late its
//! timers fire (a ticker every 10 ms), so the reader sees when the client bounds a figure.
//!
//! Long-poll: each `next` asks the master to hold it while nothing is due (`wait_s`, as
//! `stoker agent` does); the time a call was held (`Server-Timing: held;dur=MS`, which the
//! master sends) is the protocol's waiting, not latency: it is subtracted from the call's time
//! and counted as the agent's pause. `STOKER_BENCH_POLL=1` plays agents that do not ask to be
//! held (every agent before long-poll): the master answers at once and they poll.
//!
//! A node's reboot to its disk is a forced one, as `stoker agent`'s (`reboot -f`), which sends
//! no FIN. `stoker agent` closes its connections to the master first (`MasterApi::hang_up`), and
//! so do these agents, after the answer to their result of `power.reboot_to_disk`.
//! `STOKER_BENCH_REBOOT_CLOSE=0` plays agents that did not: the ramdisk's connection is left
//! open and silent for the rest of the bench, and the daemon keeps it until its keep-alive
//! (30 s) ends. The bench then holds two connections per agent, and refuses to start with an
//! open-file limit of less than twice the agents and a margin.
//!
//! A result asks for the node's next run in its answer (`claim_next`, as `stoker agent` does
//! unless it is about to reboot), and so does the service agent's hello after the reboot to
//! disk; the agent runs the run it was handed without asking `next`: a chain of steps costs
//! one call a step. A master that does not hand runs out this
//! way (every one before it) answers without one, and the agent asks `next` as before, so a
//! baseline binary is measured doing what it supports. `STOKER_BENCH_CLAIM_NEXT=0` plays
//! agents that never ask.
//!
//! The operator: while the agents run, a thread asks once a second for the dashboard's `/`,
//! `/nodes` and the environment's page (an admin session) and `GET /api/v1/clusters/{id}` and
//! `GET /api/v1/deployments/{id}` (an admin token), one after another, and each phase reports
//! their latency beside the agents'. `STOKER_BENCH_OPERATOR=0` turns it off.
//!
//! A call counts in the phase in which it waited: by its start, but a held call that the master
//! woke before its time was up (the day-2 Deploy waking the idle agents) by its answer, since
//! its claim after the wake is what waited. Each phase reports messages per second
//! beside the agents' own pacing ceiling (what an infinitely fast daemon would reach given the
//! step times and the waits the agents were told), p50/p99 latency of the agent calls, the daemon's CPU per call (utime + stime from
//! /proc/PID/stat over the phase; its writer thread's share apart) and its peak RSS (VmHWM),
//! and names what bounds the rate.
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
//! `STOKER_BENCH_TIMELINE=1` prints, after each round, every half second's agent-call latency
//! by kind and the cores the daemon, its writer thread, the client and the machine used then.
//!
//! `STOKER_BENCH_SNAPSHOT=FILE` has `stoker backup --force FILE` copy the daemon's database 40 s
//! into the first deployment (past the reboot wave), while it serves: the database
//! `benches/operator_reads.py` measures the operator's reads on.
//!
//! `STOKER_BENCH_CALLS=DIR` writes each phase's calls to `DIR/PHASE.calls`, one line each: when
//! it started (s since the bench's start), how long the master held it, its latency, which call;
//! and the operator's calls to `DIR/PHASE.operator` (when, latency, status, which).
//!
//! `cargo bench --bench agents -- [AGENTS] [STEP_MS] [day2] [rounds=R]` (default 1000 agents,
//! 250 ms, 5 rounds: fewer give no spread worth quoting, and the summary says so); each round
//! starts a new daemon. `STOKER_BENCH_BIN` runs another stoker
//! binary than cargo's; `STOKER_BENCH_BASELINE=BIN` alternates that binary with it, round by
//! round (the baseline first), and the summary compares them: median and min–max of each
//! figure over the rounds, as a markdown table. Not part of CI.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::net::TcpStream;

/// Shell tasks per node in the bench release's graph.
const TASKS: usize = 18;
/// Steps per node in a first deployment: configure, the tasks, reboot_to_disk.
const FIRST_STEPS: usize = TASKS + 2;
/// The task whose condition watches `bench_marker`, the setting day 2 changes.
const DAY2_TASK: usize = 9;
/// How long the day-2 mode watches the ready nodes' idle calls before changing the setting:
/// two holds and more, so that every agent's call held from the deployment's end and its next,
/// held its whole time too, fall within it (a call counts where it waited, [`Call::when`]).
const IDLE_S: u64 = 2 * HOLD_S + 5;
/// How long an agent asks the master to hold a `next` when nothing is due (`stoker agent`'s).
const HOLD_S: u64 = 20;

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
                let text = r
                    .body_mut()
                    .with_config()
                    .limit(1 << 30)
                    .read_to_string()
                    .unwrap_or_default();
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
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(300)))
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

/// An HTTP answer as the agents read it: the status, how long the master says it held the
/// call (`Server-Timing: held;dur=MS`), the JSON body.
struct Reply {
    status: u16,
    held: Duration,
    body: Value,
}

/// Write all of `buf` to a non-blocking stream (tokio's "net" alone, without its io-util).
async fn write_all(s: &TcpStream, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        s.writable().await?;
        match s.try_write(buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Read what has arrived (at least one byte, or 0 at the end) onto `buf`.
async fn read_some(s: &TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    loop {
        s.readable().await?;
        let mut chunk = [0u8; 4096];
        match s.try_read(&mut chunk) {
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Send one request and read its answer (a head and a Content-Length body).
async fn exchange(s: &TcpStream, request: &[u8]) -> Option<Reply> {
    write_all(s, request).await.ok()?;
    let mut buf = Vec::with_capacity(2048);
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if read_some(s, &mut buf).await.ok()? == 0 {
            return None;
        }
    };
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()?
        .strip_prefix("HTTP/1.1 ")?
        .get(..3)?
        .parse()
        .ok()?;
    let (mut length, mut held) = (0usize, Duration::ZERO);
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        if k.eq_ignore_ascii_case("content-length") {
            length = v.trim().parse().ok()?;
        } else if k.eq_ignore_ascii_case("server-timing") {
            held = server_timing(v, "held").unwrap_or_default();
        }
    }
    while buf.len() < head_end + length {
        if read_some(s, &mut buf).await.ok()? == 0 {
            return None;
        }
    }
    Some(Reply {
        status,
        held,
        body: serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null),
    })
}

/// The `dur` of metric `name` in a Server-Timing header value (`held;dur=12.5`).
fn server_timing(value: &str, name: &str) -> Option<Duration> {
    value.split(',').find_map(|metric| {
        let mut parts = metric.trim().split(';');
        if parts.next()?.trim() != name {
            return None;
        }
        let ms: f64 = parts
            .find_map(|p| p.trim().strip_prefix("dur="))?
            .parse()
            .ok()?;
        Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0))
    })
}

/// POST `body` to `path` from a loopback address of the node's own (the hellos are
/// rate-limited per client address), on a connection of its own.
async fn post_from(addr: SocketAddr, src: Ipv4Addr, path: &str, body: &Value) -> Value {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind(SocketAddr::from((src, 0))).expect("bind");
    let Ok(stream) = sock.connect(addr).await else {
        return Value::Null;
    };
    let body = body.to_string();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    exchange(&stream, req.as_bytes())
        .await
        .map_or(Value::Null, |r| r.body)
}

/// Whether the daemon hands out a run with a service hello that asks (`claim_next`): a hello
/// with a credential no node has is refused for the credential (401) by one that does, and
/// for the unknown field (400, naming it) by one before it, as `stoker agent` finds out.
fn hello_claims(api: &Api) -> bool {
    let (status, body) = api.call(
        "POST",
        "/api/v1/agent/service/hello",
        Some(
            &json!({"node_id": 0, "credential": "skn_probe", "version": "0",
                     "macs": [], "claim_next": true}),
        ),
    );
    !(status == 400 && body.to_string().contains("claim_next"))
}

/// One agent's keep-alive HTTP/1.1 connection.
struct Conn {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    /// When the connection was last used: the daemon closes one idle for 30 s (its
    /// keep-alive), so one idle for 25 s is not reused.
    used: Instant,
}

impl Conn {
    fn new(addr: SocketAddr) -> Conn {
        Conn {
            addr,
            stream: None,
            used: Instant::now(),
        }
    }

    async fn post(&mut self, path: &str, token: &str, body: &str) -> Reply {
        if self.used.elapsed() > Duration::from_secs(25) {
            self.stream = None;
        }
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Authorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        for _ in 0..3 {
            if self.stream.is_none() {
                let Ok(s) = TcpStream::connect(self.addr).await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let _ = s.set_nodelay(true);
                self.stream = Some(s);
            }
            if let Some(s) = &self.stream
                && let Some(r) = exchange(s, req.as_bytes()).await
            {
                self.used = Instant::now();
                return r;
            }
            // The connection broke: open another one.
            self.stream = None;
        }
        panic!("{path}: no answer");
    }
}

/// CPU seconds (user + system) of a process or a thread (`/proc/PID/stat`,
/// `/proc/PID/task/TID/stat`).
fn cpu_of(stat_path: &str) -> f64 {
    let stat = std::fs::read_to_string(stat_path).unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime and stime are 14th and 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0);
    ticks / 100.0
}

fn cpu_s(pid: u32) -> f64 {
    cpu_of(&format!("/proc/{pid}/stat"))
}

/// CPU seconds of the daemon's threads named `name` (`stoker-writer`).
fn thread_cpu_s(pid: u32, name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    tasks
        .filter_map(Result::ok)
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .map(|t| cpu_of(&t.path().join("stat").display().to_string()))
        .sum()
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

/// Connections the kernel dropped because a listener's accept queue was full (`TcpExt:
/// ListenDrops` of /proc/net/netstat, the whole host's network namespace): each costs its
/// client TCP's first SYN retransmission, a second, which shows in the agents' latency.
fn listen_drops() -> u64 {
    let netstat = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut lines = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "ListenDrops")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// The counters a phase is measured between, read at its start and at its end.
#[derive(Debug, Clone, Copy)]
struct Marks {
    /// The daemon's CPU seconds.
    daemon: f64,
    /// The bench's own (the agents' client's).
    client: f64,
    /// The whole machine's busy seconds.
    machine: f64,
    /// The daemon's writer thread's.
    writer: f64,
    /// [`listen_drops`].
    listen_drops: u64,
}

impl Marks {
    fn now(daemon: u32) -> Marks {
        Marks {
            daemon: cpu_s(daemon),
            client: cpu_s(std::process::id()),
            machine: machine_s().0,
            writer: thread_cpu_s(daemon, "stoker-writer"),
            listen_drops: listen_drops(),
        }
    }
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

/// The daemon's open-file limit (soft), from `/proc/PID/limits`.
fn open_files_limit(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .unwrap_or_else(|| "?".into())
}

/// Raise this process's open-file limit to its hard limit: 10,000 agents hold 10,000
/// connections, and the daemon, started from here, inherits the limit.
fn raise_open_files() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            eprintln!("cannot raise the open-file limit: {e}");
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// A release for the benchmark, as a plugin package: the test fixture release with a graph of
/// `TASKS` chained shell tasks for the `compute` role and nothing across nodes, so every agent
/// has the same steps (configure, reboot_to_disk, the tasks) and none waits for another node.
/// Each task runs only when a setting changed, as day-2 tasks do: task `DAY2_TASK` watches
/// `bench_marker`, the others `bench_static`, which nothing changes. A first deployment runs
/// them all (nothing was deployed to compare with).
fn bench_release(dir: &std::path::Path, bin: &std::ffi::OsStr) -> Vec<u8> {
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
    let out = Command::new(bin)
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

/// One agent call: when it started (s since the bench's start), how long it took (s), of
/// which the master held it (s) waiting for work.
#[derive(Clone, Copy)]
struct Call {
    at: f64,
    secs: f64,
    held: f64,
    /// The master ended its hold before its time was up (a run became due): not answered
    /// `wait` with `retry_after_ms` 0.
    woken: bool,
    kind: Kind,
}

impl Call {
    /// Its latency: its time but for what the master held it by design.
    fn latency(&self) -> f64 {
        (self.secs - self.held).max(0.0)
    }

    /// When its latency happened (s since the bench's start), which decides its phase. A held
    /// call has two parts around the hold: its first claim, and, when the master wakes it
    /// before its time is up, its claim after the wake. One held its whole time was answered
    /// at once at the end, so what it waited for came at its start; one woken early (a Deploy
    /// of the next phase made a run due) waited, once woken, behind that phase's work.
    fn when(&self) -> f64 {
        if self.woken {
            self.at + self.secs
        } else {
            self.at
        }
    }
}

/// What an agent did: its calls, and its pauses (start, length in s) for steps and waits
/// (those it was told, and those the master held its calls for).
#[derive(Default)]
struct Record {
    calls: Vec<Call>,
    pauses: Vec<(f64, f64)>,
}

/// What the agent tasks share with the bench.
struct Shared {
    t0: Instant,
    stop: tokio::sync::watch::Sender<bool>,
    /// Results the master accepted, all agents, all phases.
    results: AtomicUsize,
    /// The last `retry_after_ms` an agent was told while it waited.
    retry_ms: AtomicU64,
    /// Whether the agents ask the master to hold their `next` (long-poll).
    hold: bool,
    /// Whether the result a node reboots after asks the daemon to close its connection.
    close_at_reboot: bool,
    /// Whether a result asks for the next run in its answer (`claim_next`).
    claim_next: bool,
    /// Whether the service hello asks for it too (`claim_next` where the daemon knows the
    /// field in a hello: [`hello_claims`]).
    hello_claims: bool,
    /// Calls the master held, and those of them that ended because work came.
    held: AtomicUsize,
    /// Agents that made their first call.
    asked: AtomicUsize,
}

impl Shared {
    fn at(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn end(&self) {
        let _ = self.stop.send(true);
    }
}

/// Sleep `d` unless the bench stops meanwhile; false once it has.
async fn pause(stop: &mut tokio::sync::watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        _ = stop.changed() => false,
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
/// credential `deploy.configure` carried and goes on with its own token, asking again each
/// `retry_after_ms` while it has nothing to run (held by the master meanwhile, when it holds).
/// The first ask comes after `first`.
async fn run_node(
    sim: Sim,
    addr: SocketAddr,
    step_ms: u64,
    first: Duration,
    shared: Arc<Shared>,
) -> Record {
    let mut rec = Record::default();
    let mut stop = shared.stop.subscribe();
    let mut c = Conn::new(addr);
    // The connections of the boots that ended (kept open, as a dead machine's are).
    let mut dead = Vec::new();
    let mut token = sim.token;
    let mut credential = None;
    let ask = if shared.hold {
        json!({"node_id": sim.id, "wait_s": HOLD_S}).to_string()
    } else {
        json!({"node_id": sim.id}).to_string()
    };
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
    rec.pauses.push((shared.at(), first.as_secs_f64()));
    if !pause(&mut stop, first).await {
        return rec;
    }
    shared.asked.fetch_add(1, Ordering::Relaxed);
    // The next run, when the answer to the last result handed it out (`claim_next`).
    let mut handed: Option<Value> = None;
    loop {
        let (reply, held) = match handed.take() {
            Some(next) => (next, 0.0),
            None => {
                let at = shared.at();
                let reply = c.post("/api/v1/agent/next", &token, &ask).await;
                let secs = shared.at() - at;
                if reply.status != 200 {
                    eprintln!(
                        "node {}: next answered {}: {}",
                        sim.id, reply.status, reply.body
                    );
                    return rec;
                }
                let held = reply.held.as_secs_f64().min(secs);
                let timed_out = reply.body["action"] == "wait" && reply.body["retry_after_ms"] == 0;
                rec.calls.push(Call {
                    at,
                    secs,
                    held,
                    woken: held > 0.0 && !timed_out,
                    kind: Kind::Next,
                });
                if held > 0.0 {
                    rec.pauses.push((at, held));
                    shared.held.fetch_add(1, Ordering::Relaxed);
                }
                (reply.body, held)
            }
        };
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
                let d = step_time();
                rec.pauses.push((shared.at(), d.as_secs_f64()));
                if !pause(&mut stop, d).await {
                    return rec;
                }
                // As `stoker agent`: the result asks for the next run, unless the node is
                // about to reboot (it would not run it).
                let done = json!({"attempt": run["attempt"], "ok": true, "exit_code": 0,
                                  "output_tail": "ok",
                                  "claim_next": shared.claim_next && step != "power.reboot_to_disk"})
                .to_string();
                let path = format!("/api/v1/agent/runs/{}/result", run["id"]);
                let at = shared.at();
                let r = c.post(&path, &token, &done).await;
                rec.calls.push(Call {
                    at,
                    secs: shared.at() - at,
                    held: 0.0,
                    woken: false,
                    kind: Kind::Result,
                });
                if r.body["accepted"] != true {
                    eprintln!("node {}: result of {step} refused: {}", sim.id, r.body);
                    return rec;
                }
                shared.results.fetch_add(1, Ordering::Relaxed);
                if r.body["next"]["action"] == "run" {
                    handed = Some(r.body["next"].clone());
                }
                if step == "power.reboot_to_disk" {
                    // The machine boots its installed OS; its service agent is another
                    // process, on a connection of its own. The ramdisk's agent closed its
                    // connection before the forced reboot; one that did not left it open and
                    // silent (no FIN) until the bench ends.
                    let old = std::mem::replace(&mut c, Conn::new(addr));
                    if !shared.close_at_reboot {
                        dead.push(old);
                    }
                    let Some(cred) = credential.clone() else {
                        eprintln!("node {}: rebooted without a credential", sim.id);
                        return rec;
                    };
                    let mut body = json!({"node_id": sim.id, "credential": cred,
                                      "version": env!("CARGO_PKG_VERSION"), "macs": [sim.mac]});
                    if shared.hello_claims {
                        body["claim_next"] = json!(true);
                    }
                    // Refused for the rate (thousands of nodes rebooting within a second),
                    // it tries again after 1 s, 2 s, 4 s ... as `stoker agent --service` does.
                    let mut backoff = Duration::from_secs(1);
                    let hello = loop {
                        let at = shared.at();
                        let r =
                            post_from(addr, sim.src, "/api/v1/agent/service/hello", &body).await;
                        rec.calls.push(Call {
                            at,
                            secs: shared.at() - at,
                            held: 0.0,
                            woken: false,
                            kind: Kind::Hello,
                        });
                        if r["code"] != "rate_limited" {
                            break r;
                        }
                        rec.pauses.push((shared.at(), backoff.as_secs_f64()));
                        if !pause(&mut stop, backoff).await {
                            return rec;
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(60));
                    };
                    let Some(t) = hello["agent_token"].as_str() else {
                        eprintln!("node {}: service hello refused: {hello}", sim.id);
                        return rec;
                    };
                    token = t.to_string();
                    if hello["next"]["action"] == "run" {
                        handed = Some(hello["next"].clone());
                    }
                }
            }
            Some("wait") => {
                let ms = reply["retry_after_ms"].as_u64().unwrap_or(1000);
                if held == 0.0 {
                    shared.retry_ms.store(ms, Ordering::Relaxed);
                }
                if ms > 0 {
                    rec.pauses.push((shared.at(), ms as f64 / 1000.0));
                    if !pause(&mut stop, Duration::from_millis(ms)).await {
                        return rec;
                    }
                } else if *stop.borrow() {
                    return rec;
                }
            }
            _ => {
                if *stop.borrow() {
                    return rec;
                }
                eprintln!("node {}: unexpected answer to next: {reply}", sim.id);
                return rec;
            }
        }
    }
}

/// The client runtime's own lateness: a task that sleeps 10 ms over and over and records how
/// late each wake-up was (s since t0, lateness in s). A late timer is a client that bounds the
/// figures, not the daemon.
async fn ticker(shared: Arc<Shared>, lag: Arc<Mutex<Vec<(f64, f64)>>>) {
    let mut stop = shared.stop.subscribe();
    loop {
        let t = Instant::now();
        if !pause(&mut stop, Duration::from_millis(10)).await {
            return;
        }
        let late = t.elapsed().as_secs_f64() - 0.010;
        lag.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((shared.at(), late.max(0.0)));
    }
}

/// CPU seconds so far at `at` (STOKER_BENCH_TIMELINE=1): the daemon, its writer thread, this
/// client, and the machine's busy time, for the timeline's CPU line per half second.
#[derive(Clone, Copy)]
struct CpuMark {
    at: f64,
    daemon: f64,
    writer: f64,
    client: f64,
    machine: f64,
}

/// Mark the CPU every half second until `stop` (a thread of its own, off the client's runtime).
fn cpu_marks(pid: u32, shared: Arc<Shared>, stop: Arc<AtomicBool>) -> Vec<CpuMark> {
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        out.push(CpuMark {
            at: shared.at(),
            daemon: cpu_s(pid),
            writer: thread_cpu_s(pid, "stoker-writer"),
            client: cpu_s(std::process::id()),
            machine: machine_s().0,
        });
        std::thread::sleep(Duration::from_millis(500));
    }
    out
}

/// One operator request: when, which, how long, what status.
#[derive(Clone)]
struct Sample {
    at: f64,
    what: &'static str,
    secs: f64,
    status: u16,
}

/// The operator's pages and API calls.
const OPERATOR: [&str; 5] = [
    "page /",
    "page /nodes",
    "page /environments/{id}",
    "GET /api/v1/clusters/{id}",
    "GET /api/v1/deployments/{id}",
];

/// Sign in through the dashboard's form as admin; returns the session cookie.
fn form_login(base: &str, password: &str) -> String {
    let plain = agent();
    let mut page = plain
        .get(format!("{base}/login"))
        .call()
        .expect("login page");
    let cookie = |h: &ureq::http::HeaderMap, name: &str| -> Option<String> {
        h.get_all("set-cookie").iter().find_map(|v| {
            let v = v.to_str().ok()?;
            let (k, rest) = v.split_once('=')?;
            (k == name).then(|| rest.split(';').next().unwrap_or("").to_string())
        })
    };
    let login_cookie = cookie(page.headers(), "stoker_login").expect("login CSRF cookie");
    let html = page.body_mut().read_to_string().expect("login page");
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("login form CSRF field")
        .to_string();
    let encode = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    let form = format!(
        "username=admin&password={}&csrf={}&next=/",
        encode(password),
        encode(&csrf)
    );
    let r = plain
        .post(format!("{base}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", &format!("stoker_login={login_cookie}"))
        .send(&form)
        .expect("form sign-in");
    assert_eq!(r.status().as_u16(), 303, "form sign-in");
    cookie(r.headers(), "stoker_session").expect("session cookie")
}

/// The operator's thread: once a second (or right after the last round when that took
/// longer), each page and API call in turn, until `stop`.
fn operator(
    base: String,
    token: String,
    session: String,
    cluster: i64,
    deployment: Arc<AtomicI64>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) -> Vec<Sample> {
    let http = agent();
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let round = Instant::now();
        let dep = deployment.load(Ordering::Relaxed);
        for what in OPERATOR {
            let path = what.split_once(' ').map_or("", |(_, p)| p).replace(
                "{id}",
                &if what.contains("deployments") {
                    dep.to_string()
                } else {
                    cluster.to_string()
                },
            );
            let at = shared.at();
            let req = http.get(format!("{base}{path}"));
            let req = if what.starts_with("page") {
                req.header("cookie", &format!("stoker_session={session}"))
            } else {
                req.header("authorization", &format!("Bearer {token}"))
            };
            let status = match req.call() {
                Ok(mut r) => {
                    let _ = r.body_mut().with_config().limit(1 << 31).read_to_vec();
                    r.status().as_u16()
                }
                Err(_) => 0,
            };
            out.push(Sample {
                at,
                what,
                secs: shared.at() - at,
                status,
            });
        }
        if let Some(rest) = Duration::from_secs(1).checked_sub(round.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    out
}

/// What the agents were doing in a phase, which decides its pacing ceiling.
enum Pacing {
    /// Deploying: every agent steps (2 calls a step, STEP_MS each on average), after what
    /// the note says.
    Steps(String),
    /// Idle: every agent asks once per `retry_after_ms` it is told, or once per hold.
    Idle,
}

/// One measured stretch of the run: [start, end) in s since the bench's start, and the
/// daemon's and the bench's CPU seconds over it.
struct Phase {
    name: &'static str,
    start: f64,
    end: f64,
    cpu: f64,
    writer: f64,
    own: f64,
    /// The whole machine's busy CPU seconds over the phase.
    busy: f64,
    pacing: Pacing,
    /// The deployment's summary at the end, for a deployment phase.
    summary: Option<Value>,
    hwm_kb: u64,
    rss_kb: u64,
    /// [`listen_drops`] over the phase (the first deployment's from before its agents' first
    /// connections).
    listen_drops: u64,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0.0)
        * 1000.0
}

/// Count, p50, p99 and max (ms) of latencies in s.
fn spread(mut l: Vec<f64>) -> (usize, f64, f64, f64) {
    if l.is_empty() {
        return (0, 0.0, 0.0, 0.0);
    }
    l.sort_by(f64::total_cmp);
    (
        l.len(),
        pct(&l, 0.5),
        pct(&l, 0.99),
        l[l.len() - 1] * 1000.0,
    )
}

fn latency(calls: &[&Call], kind: Option<Kind>) -> String {
    let l: Vec<f64> = calls
        .iter()
        .filter(|c| kind.is_none_or(|k| c.kind == k))
        .map(|c| c.latency())
        .collect();
    let (n, p50, p99, max) = spread(l);
    if n == 0 {
        return "none".into();
    }
    format!("{n} calls, p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms")
}

/// A phase's figures, for the summary over rounds.
#[derive(Clone, Default)]
struct Figures {
    secs: f64,
    rate: f64,
    ceiling: f64,
    p50: f64,
    p99: f64,
    max: f64,
    held: usize,
    daemon_us: f64,
    /// The daemon's CPU per step (per result the agents reported in the phase): what compares
    /// across masters that take one or two calls a step; 0 in a phase without steps.
    daemon_step_us: f64,
    writer_cores: f64,
    client_us: f64,
    client_cores: f64,
    daemon_cores: f64,
    other_cores: f64,
    lag_p99: f64,
    hwm_mb: f64,
    /// Per operator call: p50 and p99 (ms), how many, how many failed.
    operator: Vec<(&'static str, f64, f64, usize, usize)>,
    bound: String,
}

/// The phase's figures, printed with its ceiling and what bounds it.
#[allow(clippy::too_many_arguments)]
fn report(
    p: &Phase,
    records: &[Record],
    agents: usize,
    step_ms: u64,
    cores: f64,
    sweeps: &[Window],
    samples: &[Sample],
    lag: &[(f64, f64)],
) -> Figures {
    let secs = p.end - p.start;
    let calls: Vec<&Call> = records
        .iter()
        .flat_map(|r| &r.calls)
        .filter(|c| c.when() >= p.start && c.when() < p.end)
        .collect();
    let rate = calls.len() as f64 / secs;
    // Steps the agents finished in the phase (results), and the calls each took.
    let steps = calls.iter().filter(|c| c.kind == Kind::Result).count();
    let per_step = calls.len() as f64 / steps.max(1) as f64;
    if let Ok(dir) = std::env::var("STOKER_BENCH_CALLS") {
        // Every call of the phase, for a look at when the slow ones came; the operator's calls
        // beside them (a slow page and the agents' slow calls at once).
        let write = |ext: &str, head: &str, lines: Vec<String>| {
            let file = format!("{dir}/{}.{ext}", p.name.replace([' ', ','], "_"));
            let out = std::iter::once(head.to_string())
                .chain(lines)
                .collect::<Vec<_>>();
            if let Err(e) = std::fs::write(&file, out.join("\n") + "\n") {
                eprintln!("cannot write {file}: {e}");
            }
        };
        let kind = |c: &Call| match c.kind {
            Kind::Next => "next",
            Kind::Result => "result",
            Kind::Hello => "hello",
        };
        write(
            "calls",
            "start_s held_s latency_s call",
            calls
                .iter()
                .map(|c| format!("{:.4} {:.4} {:.4} {}", c.at, c.held, c.latency(), kind(c)))
                .collect(),
        );
        write(
            "operator",
            "start_s latency_s status call",
            samples
                .iter()
                .filter(|s| s.at >= p.start && s.at < p.end)
                .map(|s| {
                    let what = s.what.replace(' ', "_");
                    format!("{:.4} {:.4} {} {what}", s.at, s.secs, s.status)
                })
                .collect(),
        );
    }
    println!("\n== {} ({secs:.1} s)", p.name);
    if let Some(s) = &p.summary {
        println!(
            "deployment {}: {} runs ({} ok, {} skipped)",
            s["status"], s["runs"]["total"], s["runs"]["ok"], s["runs"]["skipped"]
        );
    }
    // What an infinitely fast daemon would give: each agent's calls take no time, so it is
    // done once its pauses in the phase (steps, waits it was told, holds) have passed.
    let ideal = |end_of: &dyn Fn(&Record) -> f64| {
        records
            .iter()
            .map(|r| {
                let last = end_of(r);
                r.pauses
                    .iter()
                    .map(|&(s, d)| ((s + d).min(last) - s.max(p.start)).max(0.0))
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    };
    let (ceiling, how) = match p.pacing {
        Pacing::Idle => {
            // Each agent's pauses over the phase, against the phase's length: an infinitely
            // fast daemon answers as many calls as fit in what the pauses leave.
            let paused: Vec<f64> = records
                .iter()
                .map(|r| {
                    r.pauses
                        .iter()
                        .map(|&(s, d)| ((s + d).min(p.end) - s.max(p.start)).max(0.0))
                        .sum::<f64>()
                })
                .collect();
            let mean = paused.iter().sum::<f64>() / paused.len().max(1) as f64;
            let per = calls.len() as f64 / agents.max(1) as f64;
            let interval = mean / per.max(1e-9);
            (
                agents as f64 / interval.max(1e-9),
                format!(
                    "{agents} agents, each waiting {:.0} ms between calls (held or told)",
                    interval * 1000.0
                ),
            )
        }
        Pacing::Steps(ref note) => {
            let ideal = ideal(&|r: &Record| {
                r.calls
                    .iter()
                    .filter(|c| c.kind == Kind::Result && c.at >= p.start && c.at < p.end)
                    .map(|c| c.at)
                    .fold(p.start, f64::max)
            });
            let steady = if step_ms == 0 {
                "unbounded (closed loop)".to_string()
            } else {
                format!(
                    "{:.0} msg/s ({agents} agents × {per_step:.2} calls a step / {step_ms} ms)",
                    agents as f64 * per_step * 1000.0 / step_ms as f64
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
    let held = calls.iter().filter(|c| c.held > 0.0).count();
    if held > 0 {
        println!(
            "  of which held by the master while nothing was due: {held} (their held time is \
             not latency)"
        );
    }
    let (_, p50, p99, max) = spread(calls.iter().map(|c| c.latency()).collect());
    println!("latency, all calls: {}", latency(&calls, None));
    println!("  next: {}", latency(&calls, Some(Kind::Next)));
    println!("  result: {}", latency(&calls, Some(Kind::Result)));
    if calls.iter().any(|c| c.kind == Kind::Hello) {
        println!("  service hello: {}", latency(&calls, Some(Kind::Hello)));
    }
    let per = |cpu: f64| cpu * 1e6 / calls.len().max(1) as f64;
    let step_us = if steps == 0 {
        0.0
    } else {
        p.cpu * 1e6 / steps as f64
    };
    let used = (p.cpu + p.own) / secs;
    let busy = p.busy / secs;
    let other = (busy - used).max(0.0);
    println!(
        "daemon CPU {:.1} s = {:.0} µs per call, {step_us:.0} µs per step (its writer thread \
         {:.2} of a core); the client {:.1} s = {:.0} µs per call; of the machine's {cores} cores \
         {busy:.2} were busy: daemon {:.2}, client {:.2}, other processes {other:.2}",
        p.cpu,
        per(p.cpu),
        p.writer / secs,
        p.own,
        per(p.own),
        p.cpu / secs,
        p.own / secs,
    );
    let lags: Vec<f64> = lag
        .iter()
        .filter(|(at, _)| *at >= p.start && *at < p.end)
        .map(|(_, l)| *l)
        .collect();
    let (_, lag50, lag99, lagmax) = spread(lags);
    println!(
        "client timers late by p50 {lag50:.1} ms, p99 {lag99:.1} ms, max {lagmax:.1} ms \
         (a late client adds that much to the agents' latencies)"
    );
    println!(
        "connections dropped at a full accept queue (the host's ListenDrops): {} (each waits \
         1 s for its SYN's retransmission)",
        p.listen_drops
    );
    println!(
        "daemon RSS: peak (VmHWM) {} MB, now {} MB",
        p.hwm_kb / 1024,
        p.rss_kb / 1024
    );
    let mut operator = Vec::new();
    for what in OPERATOR {
        let s: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.what == what && s.at >= p.start && s.at < p.end)
            .collect();
        if s.is_empty() {
            continue;
        }
        let failed = s.iter().filter(|s| s.status != 200).count();
        let (n, p50, p99, max) = spread(s.iter().map(|s| s.secs).collect());
        println!(
            "  operator {what}: {n} calls, p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms{}",
            if failed > 0 {
                format!(", {failed} not 200")
            } else {
                String::new()
            }
        );
        operator.push((what, p50, p99, n, failed));
    }
    report_sweeps(p, &calls, sweeps);
    let bound = if share >= 0.9 {
        "the agents' pacing: the rate says nothing about the daemon (its latency and CPU per call do)"
            .to_string()
    } else if lag99 > 0.5 * p99.max(1.0) && lag99 > 5.0 {
        format!(
            "the client: its timers are {lag99:.0} ms late at p99 ({:.2} cores)",
            p.own / secs
        )
    } else if busy >= 0.9 * cores {
        format!(
            "CPU: the daemon ({:.2}), the client ({:.2}) and the machine's other processes \
             ({other:.2}) keep its {cores} cores busy",
            p.cpu / secs,
            p.own / secs
        )
    } else if p.writer / secs > 0.85 {
        format!(
            "the daemon's writer thread ({:.2} of a core)",
            p.writer / secs
        )
    } else {
        "the daemon's latency (neither the pacing nor the CPU is used up)".to_string()
    };
    println!("bound: {bound}");
    Figures {
        secs,
        rate,
        ceiling,
        p50,
        p99,
        max,
        held,
        daemon_us: per(p.cpu),
        daemon_step_us: step_us,
        writer_cores: p.writer / secs,
        client_us: per(p.own),
        client_cores: p.own / secs,
        daemon_cores: p.cpu / secs,
        other_cores: other,
        lag_p99: lag99,
        hwm_mb: p.hwm_kb as f64 / 1024.0,
        operator,
        bound,
    }
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

/// Latency by half second of the run (STOKER_BENCH_TIMELINE=1): where the slow calls are,
/// and the cores the daemon, its writer, this client and the machine used in that half second
/// (from the marks nearest its ends; /proc counts in 10 ms ticks).
fn timeline(records: &[Record], marks: &[CpuMark]) {
    let calls: Vec<&Call> = records.iter().flat_map(|r| &r.calls).collect();
    let end = calls.iter().map(|c| c.at).fold(0.0, f64::max);
    let mut w = calls.iter().map(|c| c.at).fold(f64::MAX, f64::min);
    let mark = |t: f64| {
        marks
            .iter()
            .min_by(|a, b| (a.at - t).abs().total_cmp(&(b.at - t).abs()))
    };
    while w <= end {
        if let (Some(a), Some(b)) = (mark(w), mark(w + 0.5))
            && b.at > a.at
        {
            let d = b.at - a.at;
            eprintln!(
                "{w:6.1} s cores  daemon {:.2}  writer {:.2}  client {:.2}  machine {:.2}",
                (b.daemon - a.daemon) / d,
                (b.writer - a.writer) / d,
                (b.client - a.client) / d,
                (b.machine - a.machine) / d,
            );
        }
        for (name, kind) in [
            ("next", Kind::Next),
            ("result", Kind::Result),
            ("hello", Kind::Hello),
        ] {
            let l: Vec<f64> = calls
                .iter()
                .filter(|c| c.kind == kind && c.at >= w && c.at < w + 0.5)
                .map(|c| c.latency())
                .collect();
            let (n, p50, p99, max) = spread(l);
            if n == 0 {
                continue;
            }
            eprintln!(
                "{w:6.1} s {name:6} {n:5} calls  p50 {p50:6.1}  p99 {p99:6.1}  max {max:6.1} ms"
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
/// returns its summary. Gives up (and says so) when no result comes for 90 s.
fn wait_done(api: &Api, shared: &Shared, cluster: i64, id: i64, results: usize) -> Value {
    let mut seen = (shared.results.load(Ordering::Relaxed), Instant::now());
    loop {
        let now = shared.results.load(Ordering::Relaxed);
        if now >= results {
            break;
        }
        if now != seen.0 {
            seen = (now, Instant::now());
        } else if seen.1.elapsed() > Duration::from_secs(90) {
            eprintln!("no result for 90 s: {now} of {results}");
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

/// What the bench was asked to do.
struct Setup {
    agents: usize,
    step_ms: u64,
    day2: bool,
    hold: bool,
    close_at_reboot: bool,
    claim_next: bool,
    client_threads: usize,
    operator: bool,
    /// STOKER_BENCH_TIMELINE: the latency and the cores per half second, after each round.
    timeline: bool,
    /// STOKER_BENCH_SNAPSHOT: where `stoker backup` writes the daemon's database
    /// [`SNAPSHOT_AFTER_S`] into the first deployment.
    snapshot: Option<std::path::PathBuf>,
    cores: f64,
}

/// How far into the first deployment STOKER_BENCH_SNAPSHOT takes its backup: past the reboot
/// wave, every node running its tasks.
const SNAPSHOT_AFTER_S: u64 = 40;

/// One round: a new daemon of `bin`, the nodes, the phases; returns each phase's figures.
fn run_once(bin: &std::ffi::OsStr, setup: &Setup) -> Vec<(&'static str, Figures)> {
    let n = setup.agents;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Daemon(
        Command::new(bin)
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
    let addr: SocketAddr = loop {
        let line = lines.next().expect("daemon exited").expect("log line");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or("")
                .parse()
                .expect("address");
        }
    };
    println!(
        "daemon {} (pid {pid}), open-file limit {}",
        bin.to_string_lossy(),
        open_files_limit(pid)
    );
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
                } else if line.contains("ERROR") || line.contains("Too many open files") {
                    eprintln!("daemon: {line}");
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
    let session = form_login(&base, password.trim());

    let package = bench_release(dir.path(), bin);
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

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(setup.client_threads)
        .enable_all()
        .build()
        .expect("client runtime");

    // Hello, 64 at a time; the hello is rate-limited per client address, so each node comes
    // from a 127.0.0.0/8 address of its own. Then the compute role, 1,000 nodes a call.
    let started = Instant::now();
    let hellos: Vec<Option<Sim>> = rt.block_on(async {
        let next = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..64 {
            let next = Arc::clone(&next);
            workers.push(tokio::spawn(async move {
                let mut out = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return out;
                    }
                    let mac = format!(
                        "52:54:01:{:02x}:{:02x}:{:02x}",
                        (i >> 16) & 0xff,
                        (i >> 8) & 0xff,
                        i & 0xff
                    );
                    let inv = server_inventory(i, &mac);
                    let src = Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 2) as u8);
                    let mut reply = post_from(addr, src, "/api/v1/agent/hello", &inv).await;
                    while reply["node"]["id"].as_i64().is_none()
                        && (reply["code"] == "rate_limited" || reply.is_null())
                    {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        reply = post_from(addr, src, "/api/v1/agent/hello", &inv).await;
                    }
                    let id = reply["node"]["id"].as_i64().unwrap_or(0);
                    let token = reply["agent_token"].as_str().unwrap_or("").to_string();
                    if id == 0 {
                        eprintln!("hello {i} refused: {reply}; continuing with fewer agents");
                        out.push((i, None));
                        continue;
                    }
                    out.push((
                        i,
                        Some(Sim {
                            id,
                            mac,
                            src,
                            token,
                        }),
                    ));
                }
            }));
        }
        let mut all = Vec::new();
        for w in workers {
            all.extend(w.await.expect("hello task"));
        }
        all.sort_by_key(|(i, _)| *i);
        all.into_iter().map(|(_, s)| s).collect()
    });
    let mut sims: Vec<Sim> = hellos.into_iter().flatten().collect();
    for chunk in sims.chunks(1000) {
        let body: Vec<Value> = chunk
            .iter()
            .map(|s| json!({"id": s.id, "roles": ["compute"]}))
            .collect();
        let (status, r) = api.call(
            "POST",
            &format!("/api/v1/clusters/{cluster}/assignment"),
            Some(&json!(body)),
        );
        assert_eq!(status, 200, "assign: {r}");
    }
    let n = sims.len();
    println!(
        "agents: {n}, each step {step} ms, {how}, client on {} thread(s); hello+assign {:.1} s",
        setup.client_threads,
        started.elapsed().as_secs_f64(),
        step = setup.step_ms,
        how = if setup.hold {
            format!("asking the master to hold each next up to {HOLD_S} s")
        } else {
            "polling (not asking to be held)".to_string()
        },
    );

    let (stop, _) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        t0: Instant::now(),
        stop,
        results: AtomicUsize::new(0),
        retry_ms: AtomicU64::new(0),
        hold: setup.hold,
        close_at_reboot: setup.close_at_reboot,
        claim_next: setup.claim_next,
        hello_claims: setup.claim_next && hello_claims(&api),
        held: AtomicUsize::new(0),
        asked: AtomicUsize::new(0),
    });
    let lag: Arc<Mutex<Vec<(f64, f64)>>> = Arc::default();
    rt.spawn(ticker(Arc::clone(&shared), Arc::clone(&lag)));
    let mut phases = Vec::new();
    let phase = |name, start: f64, at: Marks, pacing, summary| {
        let now = Marks::now(pid);
        Phase {
            name,
            start,
            end: shared.at(),
            cpu: now.daemon - at.daemon,
            own: now.client - at.client,
            busy: now.machine - at.machine,
            writer: now.writer - at.writer,
            listen_drops: now.listen_drops.saturating_sub(at.listen_drops),
            pacing,
            summary,
            hwm_kb: status_kb(pid, "VmHWM:"),
            rss_kb: status_kb(pid, "VmRSS:"),
        }
    };

    // The first deployment. Agents that ask to be held are already waiting for work when
    // the operator deploys (as `stoker agent` is from its hello on), and the master wakes
    // them; polling agents start after Deploy, their first asks spread over the second they
    // were polling in before (the bootstrap agent's retry_after_ms). Before 2026-11-29 held
    // agents started as the polling ones do: 10,000 asks in one second, which no master
    // holding its agents sees.
    let spawn = |sims: Vec<Sim>| -> Vec<_> {
        sims.into_iter()
            .map(|sim| {
                let first = Duration::from_millis((sim.id as u64).wrapping_mul(7919) % 1000);
                rt.spawn(run_node(
                    sim,
                    addr,
                    setup.step_ms,
                    first,
                    Arc::clone(&shared),
                ))
            })
            .collect()
    };
    let mut tasks = Vec::new();
    // Dropped connections count from before the first agents connect, held or not.
    let drops_before = listen_drops();
    if setup.hold {
        tasks = spawn(std::mem::take(&mut sims));
        while shared.asked.load(Ordering::Relaxed) < n {
            std::thread::sleep(Duration::from_millis(50));
        }
        // The last ones' asks reach the master and are held.
        std::thread::sleep(Duration::from_millis(500));
    }
    let (dep, plan_s) = deploy(&api, cluster);
    println!("first Deploy (plan + runs stored) {plan_s:.2} s");
    let current = Arc::new(AtomicI64::new(dep));
    let operator_stop = Arc::new(AtomicBool::new(false));
    let sampler = setup.operator.then(|| {
        let (base, token, shared, current, stop) = (
            base.clone(),
            api.token.clone(),
            Arc::clone(&shared),
            Arc::clone(&current),
            Arc::clone(&operator_stop),
        );
        std::thread::spawn(move || operator(base, token, session, cluster, current, shared, stop))
    });
    let marks_stop = Arc::new(AtomicBool::new(false));
    let marker = setup.timeline.then(|| {
        let (shared, stop) = (Arc::clone(&shared), Arc::clone(&marks_stop));
        std::thread::spawn(move || cpu_marks(pid, shared, stop))
    });
    // A copy of the database mid-deployment, through the daemon's own online backup, for
    // `benches/operator_reads.py` (the last round's, when there are several).
    let snapshot = setup.snapshot.clone().map(|file| {
        let (bin, data) = (bin.to_owned(), dir.path().join("stoker-data"));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(SNAPSHOT_AFTER_S));
            let out = Command::new(&bin)
                .arg("backup")
                .arg("--force")
                .arg(&file)
                .arg("--data-dir")
                .arg(&data)
                .output();
            match out {
                Ok(o) if o.status.success() => println!(
                    "database backed up to {} {SNAPSHOT_AFTER_S} s into the first deployment",
                    file.display()
                ),
                Ok(o) => eprintln!("backup failed: {}", String::from_utf8_lossy(&o.stderr)),
                Err(e) => eprintln!("backup not run: {e}"),
            }
        })
    });
    let (start, at) = (
        shared.at(),
        Marks {
            listen_drops: drops_before,
            ..Marks::now(pid)
        },
    );
    if !setup.hold {
        tasks = spawn(std::mem::take(&mut sims));
    }
    let summary = wait_done(&api, &shared, cluster, dep, n * FIRST_STEPS);
    if let Some(s) = snapshot {
        let _ = s.join();
    }
    phases.push(phase(
        "first deployment",
        start,
        at,
        Pacing::Steps(if setup.hold {
            ", held until Deploy, the service hellos backing off".into()
        } else {
            ", their first asks spread over 1 s, the service hellos backing off".into()
        }),
        Some(summary),
    ));

    if setup.day2 {
        // Every node ready, its service agent asking for work (held, or polling).
        let (start, at) = (shared.at(), Marks::now(pid));
        std::thread::sleep(Duration::from_secs(IDLE_S));
        phases.push(phase(
            "ready, idle (heartbeats)",
            start,
            at,
            Pacing::Idle,
            None,
        ));
        // Day 2: one setting changes; only the task watching it runs again, on every node.
        let path = format!("/api/v1/clusters/{cluster}/settings");
        let mut settings = api.get(&path);
        settings["bench_marker"] = json!("day 2");
        let (status, r) = api.call("PUT", &path, Some(&settings));
        assert_eq!(status, 200, "settings: {r}");
        let (start, at) = (shared.at(), Marks::now(pid));
        let before = shared.results.load(Ordering::Relaxed);
        let (dep, plan_s) = deploy(&api, cluster);
        current.store(dep, Ordering::Relaxed);
        println!("\nday-2 Deploy (plan + runs stored) {plan_s:.2} s, within the redeploy phase");
        let summary = wait_done(&api, &shared, cluster, dep, before + n);
        let heartbeat = shared.retry_ms.load(Ordering::Relaxed);
        phases.push(phase(
            "redeploy after one setting changed",
            start,
            at,
            Pacing::Steps(if setup.hold {
                ": each held until its run was due, then its one step".to_string()
            } else {
                format!(": up to a heartbeat ({heartbeat} ms) before each asks, then its one step")
            }),
            Some(summary),
        ));
    }
    operator_stop.store(true, Ordering::Relaxed);
    marks_stop.store(true, Ordering::Relaxed);
    let marks = marker
        .map(|m| m.join().unwrap_or_default())
        .unwrap_or_default();
    let samples = sampler
        .map(|s| s.join().unwrap_or_default())
        .unwrap_or_default();
    shared.end();
    let records: Vec<Record> = rt.block_on(async {
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            out.push(t.await.unwrap_or_default());
        }
        out
    });
    // Stop the daemon with the agents' connections still open (and, held, their calls).
    let stop_t = Instant::now();
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = child.0.wait();
    println!(
        "daemon stopped {:.2} s after SIGTERM",
        stop_t.elapsed().as_secs_f64()
    );
    drop(rt);
    if setup.timeline {
        timeline(&records, &marks);
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
    let lag = lag.lock().unwrap_or_else(PoisonError::into_inner).clone();
    phases
        .iter()
        .map(|p| {
            (
                p.name,
                report(
                    p,
                    &records,
                    n,
                    setup.step_ms,
                    setup.cores,
                    &windows,
                    &samples,
                    &lag,
                ),
            )
        })
        .collect()
}

/// Median, min and max of `v`.
fn mid(mut v: Vec<f64>) -> (f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    let m = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (m, v[0], v[v.len() - 1])
}

/// "median (min–max)" with `digits` decimals.
fn cell(v: Vec<f64>, digits: usize) -> String {
    let (m, lo, hi) = mid(v);
    format!("{m:.digits$} ({lo:.digits$}–{hi:.digits$})")
}

/// The summary over rounds: a markdown table per binary and phase.
fn summary(setup: &Setup, runs: &[(String, Vec<(&'static str, Figures)>)]) {
    let mut labels: Vec<&String> = Vec::new();
    for (l, _) in runs {
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    let phases: Vec<&'static str> = runs
        .first()
        .map(|(_, ps)| ps.iter().map(|(p, _)| *p).collect())
        .unwrap_or_default();
    println!(
        "\n## Summary: {} agents, STEP_MS {}, {} round(s) per binary, medians (min–max)\n",
        setup.agents,
        setup.step_ms,
        runs.len() / labels.len().max(1)
    );
    println!(
        "| binary | phase | messages/s | % of pacing ceiling | p50 ms | p99 ms | max ms | daemon \
         µs/call | daemon µs/step | daemon cores (writer) | client µs/call (cores) | other \
         processes' cores | client timer lag p99 ms | daemon VmHWM MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for label in &labels {
        for phase in &phases {
            let figs: Vec<&Figures> = runs
                .iter()
                .filter(|(l, _)| l == *label)
                .flat_map(|(_, ps)| ps.iter().filter(|(p, _)| p == phase).map(|(_, f)| f))
                .collect();
            let col = |f: &dyn Fn(&Figures) -> f64, d| cell(figs.iter().map(|x| f(x)).collect(), d);
            println!(
                "| {label} | {phase} | {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} ({}) | {} | {} | {} |",
                col(&|f| f.rate, 0),
                col(&|f| 100.0 * f.rate / f.ceiling.max(1e-9), 0),
                col(&|f| f.p50, 1),
                col(&|f| f.p99, 1),
                col(&|f| f.max, 0),
                col(&|f| f.daemon_us, 0),
                col(&|f| f.daemon_step_us, 0),
                col(&|f| f.daemon_cores, 2),
                col(&|f| f.writer_cores, 2),
                col(&|f| f.client_us, 0),
                col(&|f| f.client_cores, 2),
                col(&|f| f.other_cores, 2),
                col(&|f| f.lag_p99, 1),
                col(&|f| f.hwm_mb, 0),
            );
        }
    }
    if runs
        .iter()
        .any(|(_, ps)| ps.iter().any(|(_, f)| !f.operator.is_empty()))
    {
        println!(
            "\n| binary | phase | operator call | p50 ms | p99 ms | calls per round | not 200 |"
        );
        println!("|---|---|---|---|---|---|---|");
        for label in &labels {
            for phase in &phases {
                for what in OPERATOR {
                    let figs: Vec<(f64, f64, usize, usize)> = runs
                        .iter()
                        .filter(|(l, _)| l == *label)
                        .flat_map(|(_, ps)| ps.iter().filter(|(p, _)| p == phase))
                        .filter_map(|(_, f)| {
                            f.operator
                                .iter()
                                .find(|o| o.0 == what)
                                .map(|o| (o.1, o.2, o.3, o.4))
                        })
                        .collect();
                    if figs.is_empty() {
                        continue;
                    }
                    println!(
                        "| {label} | {phase} | {what} | {} | {} | {} | {} |",
                        cell(figs.iter().map(|f| f.0).collect(), 1),
                        cell(figs.iter().map(|f| f.1).collect(), 1),
                        cell(figs.iter().map(|f| f.2 as f64).collect(), 0),
                        figs.iter().map(|f| f.3).sum::<usize>()
                    );
                }
            }
        }
    }
    println!("\nWhat bounds each round's rate:");
    for (label, ps) in runs {
        for (phase, f) in ps {
            println!(
                "- {label}, {phase} ({:.0} s, {} held calls): {}",
                f.secs, f.held, f.bound
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nums: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let rounds: usize = args
        .iter()
        .find_map(|a| a.strip_prefix("rounds=")?.parse().ok())
        .unwrap_or(5)
        .max(1);
    if rounds < 5 {
        println!(
            "{rounds} round(s): a look, not a figure to quote (medians and spread need at least 5)"
        );
    }
    let env_on = |k: &str, default: bool| {
        std::env::var(k).map_or(default, |v| !matches!(v.as_str(), "" | "0" | "no"))
    };
    let setup = Setup {
        agents: nums.first().copied().unwrap_or(1000) as usize,
        step_ms: nums.get(1).copied().unwrap_or(250),
        day2: args.iter().any(|a| a == "day2"),
        hold: !env_on("STOKER_BENCH_POLL", false),
        close_at_reboot: env_on("STOKER_BENCH_REBOOT_CLOSE", true),
        claim_next: env_on("STOKER_BENCH_CLAIM_NEXT", true),
        client_threads: std::env::var("STOKER_BENCH_CLIENT_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1),
        operator: env_on("STOKER_BENCH_OPERATOR", true),
        timeline: env_on("STOKER_BENCH_TIMELINE", false),
        snapshot: std::env::var_os("STOKER_BENCH_SNAPSHOT").map(std::path::PathBuf::from),
        cores: std::thread::available_parallelism().map_or(1, |c| c.get()) as f64,
    };
    let limit = raise_open_files();
    println!("open-file limit {limit} (the daemon inherits it)");
    // Agents that leave their connection at the reboot hold two each for the rest of the bench
    // (and the hellos, the operator and the files take some more): say so now rather than
    // fail halfway with "Too many open files".
    let needs = 2 * setup.agents as u64 + 1000;
    if !setup.close_at_reboot && limit < needs {
        eprintln!(
            "STOKER_BENCH_REBOOT_CLOSE=0 with {} agents needs an open-file limit of {needs}; \
             this one is {limit}: run fewer agents",
            setup.agents
        );
        std::process::exit(2);
    }
    let new = stoker_bin();
    let mut bins: Vec<(String, std::ffi::OsString)> = Vec::new();
    if let Some(base) = std::env::var_os("STOKER_BENCH_BASELINE") {
        bins.push(("baseline".into(), base));
    }
    bins.push(("stoker".into(), new));
    let mut runs = Vec::new();
    for round in 0..rounds {
        for (label, bin) in &bins {
            println!(
                "\n# round {} of {rounds}: {label} ({})",
                round + 1,
                bin.to_string_lossy()
            );
            runs.push((label.clone(), run_once(bin, &setup)));
        }
    }
    summary(&setup, &runs);
}
