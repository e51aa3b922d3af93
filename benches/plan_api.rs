//! Planning through the daemon (issue 19 item 2): `stoker serve` (the built binary) with one
//! environment of N nodes (default 10,000: 3 controllers, then computes with every fifth node a
//! cinder node, as `benches/graph.sh` plans them), fuel-library stable-newton's graph uploaded as
//! the bundled release's deployment graph, the cluster fixture's settings
//! (`tests/fixtures/graph/newton-cluster.yaml`) uploaded as the common deployment facts.
//!
//! Each round changes one node's name (so the kept plan is stale) and times
//! `GET /api/v1/clusters/{id}/plan` (the client's wall time, the daemon's CPU from
//! /proc/PID/stat over the call, its peak RSS), while another client times two unrelated calls
//! every 20 ms: `GET /api/v1/version` (no store) and `GET /api/v1/nodes/{id}` (a store read).
//! Their latency while the plan is made, beside the same calls with the daemon idle just before,
//! says whether planning holds anything other requests need (the store's writer, a lock) or
//! only competes for the cores. Then a second GET of the same plan (kept: no planning).
//! Reports medians and min-max over the rounds (>= 5), and what bounds each figure, then a
//! markdown table. There is no peer: Nailgun's planning cannot run here (Python 2, PostgreSQL,
//! the whole of fuel-web). `STOKER_BENCH_BASELINE=BIN` (a stoker built from an earlier commit)
//! starts a second daemon of that build with the same environment, and each round plans on
//! both, one right after the other, the build going first alternating from round to round; the
//! table then has both builds' rows and the ratio baseline / this build of each round's pair.
//!
//! `cargo bench --bench plan_api -- [NODES] [ROUNDS]`; `STOKER_BENCH_BIN` runs another stoker
//! binary than cargo's, `STOKER_BENCH_SHARED` names the shared folder (default `../shared`).
//! Not part of CI.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Api {
    agent: ureq::Agent,
    base: String,
    token: String,
}

impl Api {
    /// (status, body bytes) of a call.
    fn raw(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Vec<u8>) {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bearer {}", self.token);
        let sent = match method {
            "GET" => self.agent.get(&url).header("authorization", &auth).call(),
            "PUT" => self
                .agent
                .put(&url)
                .header("authorization", &auth)
                .header("content-type", "application/json")
                .send(body.map(Value::to_string).unwrap_or_default()),
            _ => self
                .agent
                .post(&url)
                .header("authorization", &auth)
                .header("content-type", "application/json")
                .send(body.map(Value::to_string).unwrap_or_default()),
        };
        match sent {
            Ok(mut r) => {
                let status = r.status().as_u16();
                let bytes = r
                    .body_mut()
                    .with_config()
                    .limit(4 << 30)
                    .read_to_vec()
                    .unwrap_or_default();
                (status, bytes)
            }
            Err(e) => panic!("{method} {path}: {e}"),
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, bytes) = self.raw(method, path, body);
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, v) = self.call(method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(900)))
        .build()
        .into()
}

struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

fn stoker_bin() -> std::ffi::OsString {
    std::env::var_os("STOKER_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_stoker").into())
}

/// The daemon's CPU seconds so far (utime + stime) and its peak RSS in MB.
fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 (utime, stime), counted from after the command's `)`.
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    (cpu, hwm / 1024.0)
}

/// Median, min and max.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

fn show(v: &[f64], unit: &str) -> String {
    let (m, lo, hi) = spread(v);
    format!("{m:.2} {unit} ({lo:.2}-{hi:.2})")
}

/// Latencies (ms) of `path`, called every 20 ms until `stop`.
fn probe(api: Arc<Api>, path: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<f64>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            let (status, _) = api.raw("GET", &path, None);
            assert_eq!(status, 200, "{path}");
            out.push(t.elapsed().as_secs_f64() * 1000.0);
            std::thread::sleep(Duration::from_millis(20));
        }
        out
    })
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return 0.0;
    }
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// One daemon with the bench's environment.
struct Master {
    label: String,
    _daemon: Daemon,
    _dir: tempfile::TempDir,
    pid: u32,
    api: Arc<Api>,
    cluster: i64,
    ids: Vec<i64>,
}

/// What one round measured on one daemon.
#[derive(Default)]
struct Figures {
    wall: Vec<f64>,
    cpu: Vec<f64>,
    rss: Vec<f64>,
    size: Vec<f64>,
    kept: Vec<f64>,
    idle_v: Vec<f64>,
    idle_n: Vec<f64>,
    busy_v: Vec<f64>,
    busy_n: Vec<f64>,
}

/// `stoker serve` of `bin` with the bundled newton release carrying `tasks` as its graph, and an
/// environment of `n` nodes with the fixture's settings as its common facts.
fn start(label: &str, bin: &std::ffi::OsStr, n: usize, tasks: &[Value], common: &Value) -> Master {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Daemon(
        Command::new(bin)
            .current_dir(dir.path())
            .args([
                "serve",
                "--http-listen",
                "127.0.0.1:0",
                "--discovery-max-nodes",
                &(n + 100).to_string(),
                "--log-level",
                "warn,stoker::daemon=info",
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
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    let password = std::fs::read_to_string(dir.path().join("stoker-data/initial-admin-password"))
        .expect("initial-admin-password");
    let mut api = Api {
        agent: agent(),
        base: format!("http://{addr}"),
        token: String::new(),
    };
    let login = api.ok(
        "POST",
        "/api/v1/login",
        Some(&json!({"username": "admin", "password": password.trim()})),
    );
    api.token = login["token"].as_str().expect("token").to_string();
    let api = Arc::new(api);

    // The bundled release, with fuel-library stable-newton's graph as its deployment graph.
    let releases = api.ok("GET", "/api/v1/releases", None);
    let release = releases
        .as_array()
        .and_then(|rs| {
            rs.iter()
                .find(|r| r["name"].as_str().is_some_and(|s| s.contains("ewton")))
        })
        .and_then(|r| r["id"].as_i64())
        .unwrap_or_else(|| panic!("no bundled newton release in {releases}"));
    let graph = format!("/api/v1/releases/{release}/deployment_graphs/default");
    let (status, body) = api.call("PUT", &graph, Some(&json!({"tasks": tasks})));
    if !(200..300).contains(&status) {
        api.ok("POST", &graph, Some(&json!({"tasks": tasks})));
        eprintln!("(PUT answered {status}: {body}; created instead)");
    }
    let cluster = api.ok(
        "POST",
        "/api/v1/clusters",
        Some(&json!({"name": "plan-bench", "release_id": release})),
    )["id"]
        .as_i64()
        .expect("cluster id");

    // The release's management and storage networks are /24s: /16s hold 10,000 nodes.
    let nets = format!("/api/v1/clusters/{cluster}/network_configuration/neutron");
    let mut config = api.ok("GET", &nets, None);
    for (k, net) in config["networks"]
        .as_array_mut()
        .expect("networks")
        .iter_mut()
        .filter(|net| matches!(net["name"].as_str(), Some("management" | "storage")))
        .enumerate()
    {
        net["cidr"] = json!(format!("10.{}.0.0/16", 100 + k));
    }
    api.ok("PUT", &nets, Some(&config));

    // The nodes: enrolled, then assigned in parts.
    let t = Instant::now();
    let ids: Vec<i64> = {
        let next = Arc::new(Mutex::new(0usize));
        let found = Arc::new(Mutex::new(vec![0i64; n]));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (api, next, found) = (api.clone(), next.clone(), found.clone());
                std::thread::spawn(move || {
                    loop {
                        let i = {
                            let mut g = next.lock().unwrap_or_else(PoisonError::into_inner);
                            let i = *g;
                            *g += 1;
                            i
                        };
                        if i >= n {
                            break;
                        }
                        let mac = format!(
                            "52:54:02:{:02x}:{:02x}:{:02x}",
                            i >> 16,
                            (i >> 8) & 255,
                            i & 255
                        );
                        let node = api.ok(
                            "POST",
                            "/api/v1/nodes",
                            Some(&json!({"mac": mac, "name": format!("bench-{}", i + 1)})),
                        );
                        let id = node["node"]["id"]
                            .as_i64()
                            .or_else(|| node["id"].as_i64())
                            .unwrap_or_else(|| panic!("no node id in {node}"));
                        found.lock().unwrap_or_else(PoisonError::into_inner)[i] = id;
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("enroll");
        }
        found.lock().unwrap_or_else(PoisonError::into_inner).clone()
    };
    for (k, part) in ids.chunks(1000).enumerate() {
        let body: Vec<Value> = part
            .iter()
            .enumerate()
            .map(|(j, id)| {
                let uid = k * 1000 + j + 1;
                let role = if uid <= 3 {
                    "controller"
                } else if uid % 5 == 0 {
                    "cinder"
                } else {
                    "compute"
                };
                json!({"id": id, "roles": [role]})
            })
            .collect();
        api.ok(
            "POST",
            &format!("/api/v1/clusters/{cluster}/assignment"),
            Some(&Value::Array(body)),
        );
    }
    // The fixture's settings as the common facts (each node's network scheme is the daemon's,
    // from the environment's networks).
    api.ok(
        "PUT",
        &format!("/api/v1/clusters/{cluster}/orchestrator/deployment"),
        Some(&json!({ "common": common })),
    );
    println!(
        "{label} ({}): {n} nodes enrolled and assigned in {:.1} s",
        bin.to_string_lossy(),
        t.elapsed().as_secs_f64(),
    );
    Master {
        label: label.to_string(),
        _daemon: child,
        _dir: dir,
        pid,
        api,
        cluster,
        ids,
    }
}

/// One round on one daemon: make its kept plan stale, then time the plan and the probes.
fn round(m: &Master, r: usize, f: &mut Figures) {
    let (api, n) = (&m.api, m.ids.len());
    let plan_path = format!("/api/v1/clusters/{}/plan", m.cluster);
    let node_path = format!("/api/v1/nodes/{}", m.ids[n / 2]);
    api.ok(
        "PUT",
        &format!("/api/v1/nodes/{}", m.ids[0]),
        Some(&json!({"name": format!("bench-1-round-{r}")})),
    );
    // The unrelated calls, idle, then while the plan is made.
    let run_probes = |during: &dyn Fn()| {
        let stop = Arc::new(AtomicBool::new(false));
        let v = probe(api.clone(), "/api/v1/version".into(), stop.clone());
        let nd = probe(api.clone(), node_path.clone(), stop.clone());
        during();
        stop.store(true, Ordering::Relaxed);
        (v.join().expect("probe"), nd.join().expect("probe"))
    };
    let (v, nd) = run_probes(&|| std::thread::sleep(Duration::from_secs(2)));
    f.idle_v.extend(v);
    f.idle_n.extend(nd);
    let result = Mutex::new((0.0, 0.0, 0.0, 0usize));
    let (v, nd) = run_probes(&|| {
        let (c0, _) = usage(m.pid);
        let t = Instant::now();
        let (status, bytes) = api.raw("GET", &plan_path, None);
        let w = t.elapsed().as_secs_f64();
        let (c1, hwm) = usage(m.pid);
        assert_eq!(
            status,
            200,
            "{}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(2000)])
        );
        *result.lock().unwrap_or_else(PoisonError::into_inner) = (w, c1 - c0, hwm, bytes.len());
    });
    f.busy_v.extend(v);
    f.busy_n.extend(nd);
    let (w, c, hwm, s) = *result.lock().unwrap_or_else(PoisonError::into_inner);
    let t = Instant::now();
    let (status, _) = api.raw("GET", &plan_path, None);
    assert_eq!(status, 200);
    let kept = t.elapsed().as_secs_f64();
    println!(
        "round {} {}: plan {w:.2} s wall, {c:.2} s daemon CPU, peak RSS {hwm:.0} MB, {:.0} MB of \
         JSON; kept plan {kept:.2} s",
        r + 1,
        m.label,
        s as f64 / 1e6,
    );
    f.wall.push(w);
    f.cpu.push(c);
    f.rss.push(hwm);
    f.size.push(s as f64 / 1e6);
    f.kept.push(kept);
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(10_000);
    let rounds = args.get(1).copied().unwrap_or(5).max(5);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = std::env::var_os("STOKER_BENCH_SHARED")
        .map_or_else(|| root.join("../shared"), std::path::PathBuf::from);
    let library = shared.join("corpus/fuel-library/stable-newton");
    assert!(library.is_dir(), "{} not found", library.display());
    let opened =
        stoker::package::graphs::open_release(&library.to_string_lossy(), None, "default", None)
            .expect("fuel-library stable-newton");
    let tasks: Vec<Value> = opened.graph.tasks.into_iter().map(|(t, _)| t).collect();
    let fixture = std::fs::read_to_string(root.join("tests/fixtures/graph/newton-cluster.yaml"))
        .expect("cluster fixture");
    let (spec, _) =
        stoker::engine::graph::parse_cluster("newton-cluster.yaml", &fixture).expect("fixture");
    let common = serde_json::to_value(&spec.settings).expect("settings as JSON");

    // Each daemon runs in a directory of its own: a relative path would not find the binary.
    let absolute = |bin: std::ffi::OsString| std::fs::canonicalize(&bin).map_or(bin, Into::into);
    let mut masters = Vec::new();
    if let Some(base) = std::env::var_os("STOKER_BENCH_BASELINE") {
        masters.push(start("baseline", &absolute(base), n, &tasks, &common));
    }
    masters.push(start("stoker", &absolute(stoker_bin()), n, &tasks, &common));
    println!(
        "daemon planning: fuel-library stable-newton ({} tasks) as the release's graph; {rounds} \
         rounds{}; {} cores",
        tasks.len(),
        if masters.len() > 1 {
            ", the build going first alternating"
        } else {
            ""
        },
        std::thread::available_parallelism().map_or(1, |c| c.get())
    );
    println!("no peer: Nailgun's planning cannot run here");

    let mut figures: Vec<Figures> = masters.iter().map(|_| Figures::default()).collect();
    for r in 0..rounds {
        let mut order: Vec<usize> = (0..masters.len()).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        for i in order {
            round(&masters[i], r, &mut figures[i]);
        }
    }
    let mut cores = Vec::new();
    for (m, f) in masters.iter().zip(&figures) {
        println!();
        println!(
            "{}: GET /plan (made): wall {}, daemon CPU {}",
            m.label,
            show(&f.wall, "s"),
            show(&f.cpu, "s")
        );
        println!(
            "  daemon peak RSS {}, answer {}",
            show(&f.rss, "MB"),
            show(&f.size, "MB")
        );
        println!(
            "  GET /plan (kept, unchanged inputs): {}",
            show(&f.kept, "s")
        );
        let lat = |name: &str, idle: &[f64], busy: &[f64]| {
            println!(
                "  {name}: idle p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} calls); while \
                 planning p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} calls)",
                percentile(idle, 0.5),
                percentile(idle, 0.99),
                percentile(idle, 1.0),
                idle.len(),
                percentile(busy, 0.5),
                percentile(busy, 0.99),
                percentile(busy, 1.0),
                busy.len()
            );
        };
        lat("GET /api/v1/version", &f.idle_v, &f.busy_v);
        lat("GET /api/v1/nodes/{id}", &f.idle_n, &f.busy_n);
        let (c, w) = (spread(&f.cpu).0, spread(&f.wall).0);
        cores.push(if w > 0.0 { c / w } else { 0.0 });
    }
    // The README's table: one row per build, the ratio on this build's row.
    let paired = masters.len() == 2;
    println!();
    println!(
        "| build | {n} nodes, {rounds} rounds: GET /plan made, wall | its daemon CPU | daemon \
         VmHWM after the plan (its peak so far) | answer | GET /plan kept | GET /api/v1/nodes/{{id}} p99 idle / while planning |{}",
        if paired {
            " baseline / this build, wall (per round) |"
        } else {
            ""
        }
    );
    println!(
        "|---|---|---|---|---|---|---|{}",
        if paired { "---|" } else { "" }
    );
    for (i, (m, f)) in masters.iter().zip(&figures).enumerate() {
        let ratio = if !paired {
            String::new()
        } else if i == 1 {
            let q: Vec<f64> = figures[0]
                .wall
                .iter()
                .zip(&f.wall)
                .map(|(b, s)| b / s)
                .collect();
            format!(" {} |", show(&q, "×"))
        } else {
            " |".to_string()
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1} / {:.1} ms |{ratio}",
            m.label,
            show(&f.wall, "s"),
            show(&f.cpu, "s"),
            show(&f.rss, "MB"),
            show(&f.size, "MB"),
            show(&f.kept, "s"),
            percentile(&f.idle_n, 0.99),
            percentile(&f.busy_n, 0.99),
        );
    }
    println!();
    println!(
        "what bounds it: the daemon used {} cores while planning (reading the inputs and \
         writing the answer on one thread, per-node evaluation on two); the probes' latency \
         while planning is the cores being shared, unless it grows with the plan's length; \
         one plan at a time (the other build's daemon idle meanwhile)",
        cores
            .iter()
            .map(|c| format!("{c:.2}"))
            .collect::<Vec<_>>()
            .join(" / ")
    );
}
