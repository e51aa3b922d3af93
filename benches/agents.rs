//! Agents benchmark (issue 7, item 9): N simulated agents on loopback against one `stoker
//! serve` (the built binary): each says hello, gets the compute role of a release whose graph
//! gives every node 20 steps (configure, 18 shell tasks, reboot_to_disk; installed as a plugin
//! package built from the test fixture release), and after Deploy loops next → result through
//! its steps, as the protocol says. A step is not
//! executed; the agent spends STEP_MS on it on average (from half to one and a half of it; a
//! real step takes seconds), so the agents offer at most AGENTS × 2 / STEP_MS messages a second; STEP_MS 0 is a closed loop that finds the
//! daemon's ceiling (and, by Little's law, latency ≈ AGENTS / throughput). Reports messages per
//! second, p50/p99 latency of the agent calls and the daemon's peak RSS.
//!
//! `cargo bench --bench agents -- [AGENTS] [STEP_MS]` (default 1000 agents, 250 ms). Not part
//! of CI.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

fn post(a: &ureq::Agent, url: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = a.post(url).header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", &format!("Bearer {t}"));
    }
    match req.send(body.to_string()) {
        Ok(mut r) => {
            let status = r.status().as_u16();
            let text = r.body_mut().read_to_string().unwrap_or_default();
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        Err(e) => panic!("{url}: {e}"),
    }
}

/// Latency by half second of the run (STOKER_BENCH_TIMELINE=1): where the slow calls are.
fn timeline(calls: &[(f64, f64, bool)]) {
    let end = calls.iter().map(|c| c.0).fold(0.0, f64::max);
    let mut w = 0.0;
    while w <= end {
        for (kind, result) in [("next", false), ("result", true)] {
            let mut l: Vec<f64> = calls
                .iter()
                .filter(|c| c.2 == result && c.0 >= w && c.0 < w + 0.5)
                .map(|c| c.1 * 1000.0)
                .collect();
            if l.is_empty() {
                continue;
            }
            l.sort_by(f64::total_cmp);
            let at = |p: f64| l[((l.len() as f64 * p) as usize).min(l.len() - 1)];
            eprintln!(
                "{w:5.1} s {kind:6} {:5} calls  p50 {:6.1}  p99 {:6.1}  max {:6.1} ms",
                l.len(),
                at(0.5),
                at(0.99),
                l[l.len() - 1]
            );
        }
        w += 0.5;
    }
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

/// POST a hello from a loopback address of the agent's own (the hello is rate-limited per
/// client address), over a plain HTTP/1.1 connection.
fn hello_from(addr: &str, src: std::net::Ipv4Addr, body: &Value) -> Value {
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
        "POST /api/v1/agent/hello HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
}

impl Conn {
    fn new(addr: &str) -> Conn {
        Conn {
            addr: addr.to_string(),
            stream: None,
        }
    }

    fn post(&mut self, path: &str, token: &str, body: &str) -> Value {
        for _ in 0..3 {
            if let Some(v) = self.try_post(path, token, body) {
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

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A release for the benchmark, as a plugin package: the test fixture release with a graph of
/// `tasks` chained shell tasks for the `compute` role and nothing across nodes, so every agent
/// has the same steps (configure, the tasks, reboot_to_disk) and none waits for another node.
fn bench_release(dir: &std::path::Path, tasks: usize) -> Vec<u8> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plugins/v5-release-valid");
    let dst = dir.join("bench-release");
    copy_dir(&src, &dst);
    let mut yaml = String::new();
    for i in 1..=tasks {
        let requires = if i == 1 {
            "deploy_start".to_string()
        } else {
            format!("bench-{:02}", i - 1)
        };
        yaml.push_str(&format!(
            "- {{id: bench-{i:02}, type: shell, version: 2.1.0, roles: [compute], \
             requires: [{requires}], required_for: [deploy_end], \
             parameters: {{cmd: 'true', timeout: 60}}}}\n"
        ));
    }
    std::fs::write(dst.join("graphs/default/b-keystone.yaml"), yaml).expect("graph");
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
    let out = Command::new(env!("CARGO_BIN_EXE_stoker"))
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

/// The daemon this benchmark started: stopped (by its PID) however the benchmark ends.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

fn main() {
    let nums: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = nums.first().copied().unwrap_or(1000) as usize;
    let step_ms = nums.get(1).copied().unwrap_or(250);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Daemon(
        Command::new(env!("CARGO_BIN_EXE_stoker"))
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
    let stderr = child.0.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("daemon exited").expect("log line");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap_or("").to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let base = format!("http://{addr}");
    let a = agent();
    let package = bench_release(dir.path(), 18);
    let installed: Value = {
        let mut r = a
            .post(format!("{base}/api/v1/plugins"))
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
    let releases: Value = {
        let mut r = a
            .get(format!("{base}/api/v1/releases"))
            .call()
            .expect("releases");
        serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default())
            .unwrap_or(Value::Null)
    };
    let release = releases
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == "Bench Release"))
        .and_then(|r| r["id"].as_i64())
        .unwrap_or_else(|| panic!("no Bench Release in {releases}"));
    let (_, c) = post(
        &a,
        &format!("{base}/api/v1/clusters"),
        None,
        &json!({"name": "bench", "release_id": release}),
    );
    let cluster = c["id"].as_i64().expect("cluster");

    // Hello, one by one; the hello is rate-limited per client address, so each agent comes from
    // a 127.0.0.0/8 address of its own.
    let started = Instant::now();
    let mut nodes = Vec::new();
    for i in 0..n {
        let mac = format!(
            "52:54:01:{:02x}:{:02x}:{:02x}",
            (i >> 16) & 0xff,
            (i >> 8) & 0xff,
            i & 0xff
        );
        let inv = server_inventory(i, &mac);
        let src = std::net::Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 2) as u8);
        let mut reply = hello_from(&addr, src, &inv);
        while reply["node"]["id"].as_i64().is_none() && reply["code"] == "rate_limited" {
            std::thread::sleep(Duration::from_millis(50));
            reply = hello_from(&addr, src, &inv);
        }
        let id = reply["node"]["id"].as_i64().unwrap_or(0);
        let token = reply["agent_token"].as_str().unwrap_or("").to_string();
        if id == 0 {
            eprintln!("hello {i} refused: {reply}; continuing with fewer agents");
            continue;
        }
        let roles = json!(["compute"]);
        let mut r = a
            .put(format!("{base}/api/v1/clusters/{cluster}/nodes/{id}"))
            .header("content-type", "application/json")
            .send(json!({"roles": roles}).to_string())
            .expect("assign");
        let _ = r.body_mut().read_to_string();
        nodes.push((id, token));
    }
    let hello_s = started.elapsed().as_secs_f64();
    let t = Instant::now();
    let (status, dep) = post(
        &a,
        &format!("{base}/api/v1/clusters/{cluster}/deploy"),
        None,
        &json!({}),
    );
    assert_eq!(status, 202, "deploy: {dep}");
    let plan_s = t.elapsed().as_secs_f64();

    let latencies = Arc::new(Mutex::new(Vec::<(f64, f64, bool)>::new()));
    let cpu0 = cpu_s(child.0.id());
    let own0 = cpu_s(std::process::id());
    let t = Instant::now();
    let threads: Vec<_> = nodes
        .into_iter()
        .map(|(id, token)| {
            let addr = addr.clone();
            let latencies = Arc::clone(&latencies);
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut c = Conn::new(&addr);
                    let mut token = token;
                    let mut mine = Vec::new();
                    let ask = json!({"node_id": id}).to_string();
                    // Steps take STEP_MS on average, from half to one and a half of it (a fixed
                    // pseudo-random sequence per agent): real steps differ, and identical ones
                    // would keep a thousand agents marching in step.
                    let mut seed = (id as u64)
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let mut step_time = move || {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let unit = (seed >> 33) as f64 / (1u64 << 31) as f64;
                        Duration::from_secs_f64(step_ms as f64 / 1000.0 * (0.5 + unit))
                    };
                    // Before Deploy the agents were polling once a second (the master's
                    // retry_after_ms), so their first asks arrive spread over that second.
                    std::thread::sleep(Duration::from_millis(
                        (id as u64).wrapping_mul(7919) % 1000,
                    ));
                    loop {
                        let s = Instant::now();
                        let reply = c.post("/api/v1/agent/next", &token, &ask);
                        mine.push(((s - t).as_secs_f64(), s.elapsed().as_secs_f64(), false));
                        if let Some(t) = reply["agent_token"].as_str() {
                            token = t.to_string();
                        }
                        match reply["action"].as_str() {
                            Some("run") => {
                                let run = &reply["run"];
                                std::thread::sleep(step_time());
                                let s = Instant::now();
                                let done =
                                    json!({"attempt": run["attempt"], "ok": true, "exit_code": 0,
                                              "output_tail": "ok"})
                                    .to_string();
                                c.post(
                                    &format!("/api/v1/agent/runs/{}/result", run["id"]),
                                    &token,
                                    &done,
                                );
                                mine.push(((s - t).as_secs_f64(), s.elapsed().as_secs_f64(), true));
                                if run["step"]["name"] == "reboot_to_disk" {
                                    break;
                                }
                            }
                            _ => std::thread::sleep(Duration::from_millis(
                                reply["retry_after_ms"].as_u64().unwrap_or(1000).min(200),
                            )),
                        }
                    }
                    latencies.lock().map(|mut l| l.extend(mine)).ok();
                })
                .expect("agent thread")
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_s(child.0.id()) - cpu0;
    let own = cpu_s(std::process::id()) - own0;
    let calls = latencies.lock().map(|l| l.clone()).unwrap_or_default();
    if std::env::var_os("STOKER_BENCH_TIMELINE").is_some() {
        timeline(&calls);
    }
    let mut l: Vec<f64> = calls.iter().map(|c| c.1).collect();
    l.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
            * 1000.0
    };
    let rss = rss_kb(child.0.id());
    println!(
        "daemon CPU {cpu:.1} s over the deployment = {:.0} µs per agent call (the agents: {:.0} µs)",
        cpu * 1e6 / l.len().max(1) as f64,
        own * 1e6 / l.len().max(1) as f64
    );
    let d = {
        let mut r = a
            .get(format!("{base}/api/v1/clusters/{cluster}/deployments"))
            .call()
            .expect("deployments");
        serde_json::from_str::<Value>(&r.body_mut().read_to_string().unwrap_or_default())
            .unwrap_or(Value::Null)
    };
    println!(
        "agents: {n}, each step {step_ms} ms; hello+assign {hello_s:.1} s; plan+deploy start {plan_s:.2} s"
    );
    println!(
        "deployment {}: {} runs ({} ok, {} skipped) in {secs:.1} s",
        d[0]["status"], d[0]["runs"]["total"], d[0]["runs"]["ok"], d[0]["runs"]["skipped"]
    );
    println!(
        "agent calls: {} in {secs:.1} s = {:.0} messages/s; latency p50 {:.1} ms, p99 {:.1} ms; daemon peak RSS {} MB",
        l.len(),
        l.len() as f64 / secs,
        pct(0.50),
        pct(0.99),
        rss / 1024
    );
}
