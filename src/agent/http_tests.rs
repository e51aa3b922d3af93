//! Tests of the agent over real HTTP on loopback: a tiny std::net master (one thread per
//! connection, `Connection: close`) scripted per test, driving [`HttpMaster`], the built-in steps
//! that download (write_image, sync, copy_files) and [`simulate`]. Test-only; the real master is
//! the integrator's and is tested with the daemon.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::deploy::{Call, HttpMaster, LoopEnd, MasterApi, run_loop, simulate, simulate_with};
use super::exec::{Executor, Fetch, FetchError};
use super::protocol::{NextReply, RunResult};

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Req {
    method: String,
    target: String,
    auth: Option<String>,
    body: Vec<u8>,
}

type Handler = dyn Fn(&Req) -> (u16, Vec<u8>) + Send + Sync;

/// Serve `handler` on 127.0.0.1; returns the base URL and the request log.
fn serve(handler: Arc<Handler>) -> (String, Arc<Mutex<Vec<Req>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let handler = handler.clone();
            let log = log2.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let target = parts.next().unwrap_or("").to_string();
                let (mut len, mut auth) = (0usize, None);
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    let h = h.trim_end();
                    if h.is_empty() {
                        break;
                    }
                    let (k, v) = h.split_once(':').unwrap();
                    match k.to_ascii_lowercase().as_str() {
                        "content-length" => len = v.trim().parse().unwrap(),
                        "authorization" => auth = Some(v.trim().to_string()),
                        _ => {}
                    }
                }
                let mut body = vec![0u8; len];
                reader.read_exact(&mut body).unwrap();
                let req = Req {
                    method,
                    target,
                    auth,
                    body,
                };
                let (status, out) = handler(&req);
                log.lock().unwrap().push(req);
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n",
                    out.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&out);
            });
        }
    });
    (base, log)
}

fn json_body(v: Value) -> (u16, Vec<u8>) {
    (200, v.to_string().into_bytes())
}

#[test]
fn http_master_maps_statuses_and_sends_the_token() {
    let statuses = Arc::new(Mutex::new(VecDeque::from([200, 401, 409, 503, 429, 404])));
    let s2 = statuses.clone();
    let (base, log) = serve(Arc::new(move |req: &Req| {
        let status = s2.lock().unwrap().pop_front().unwrap_or(200);
        if req.target.starts_with("/api/v1/agent/next") {
            match status {
                200 => json_body(json!({"action": "wait", "retry_after_ms": 250})),
                s => (s, br#"{"message": "nope"}"#.to_vec()),
            }
        } else {
            (404, b"missing".to_vec())
        }
    }));
    let m = HttpMaster::new(&crate::agent::Master::plain(&base), "tok-1", None);
    assert_eq!(
        m.next(7),
        Call::Ok(NextReply::Wait {
            retry_after_ms: 250
        })
    );
    assert_eq!(m.next(7), Call::Unauthorized("nope".into()));
    assert_eq!(m.next(7), Call::Conflict("nope".into()));
    assert!(matches!(m.next(7), Call::Retry(_)));
    assert!(matches!(m.next(7), Call::Retry(_)));
    assert_eq!(m.next(7), Call::Refused(404, "nope".into()));
    let log = log.lock().unwrap();
    assert_eq!(log[0].method, "POST");
    assert_eq!(log[0].auth.as_deref(), Some("Bearer tok-1"));
    assert_eq!(
        serde_json::from_slice::<Value>(&log[0].body).unwrap(),
        json!({"node_id": 7, "wait_s": crate::agent::deploy::HOLD_S}),
        "the agent lets the master hold its ask (long-poll)"
    );
    drop(log);
    assert!(matches!(
        m.get("/api/v1/agent/file", &[("path", "/etc/x y")]),
        Err(FetchError::NotFound(_))
    ));
    // Nothing listens here: a network error is worth retrying.
    let m = HttpMaster::new(
        &crate::agent::Master::plain("http://127.0.0.1:9"),
        "t",
        None,
    );
    assert!(matches!(m.next(1), Call::Retry(_)));
}

/// A master that hands out `runs` in order (then stops the agent), serves an image, a tar and
/// files, and keeps results.
struct Script {
    runs: Mutex<VecDeque<Value>>,
    results: Mutex<Vec<(String, RunResult)>>,
    image: Vec<u8>,
    stop: Arc<AtomicBool>,
}

fn master(script: Arc<Script>) -> (String, Arc<Mutex<Vec<Req>>>) {
    serve(Arc::new(move |req: &Req| {
        let path = req.target.split('?').next().unwrap_or("");
        match (req.method.as_str(), path) {
            ("POST", "/api/v1/agent/hello") => json_body(json!({"created": true,
                "node": {"id": 3, "mac": "52:54:00:00:00:03", "status": "discover"},
                "agent_token": "node-token"})),
            ("POST", "/api/v1/agent/next") => match script.runs.lock().unwrap().pop_front() {
                Some(run) => json_body(json!({"action": "run", "run": run})),
                None => {
                    script.stop.store(true, Ordering::Relaxed);
                    json_body(json!({"action": "wait", "retry_after_ms": 10}))
                }
            },
            ("POST", p) if p.ends_with("/result") => {
                let r: RunResult = serde_json::from_slice(&req.body).unwrap();
                script.results.lock().unwrap().push((p.to_string(), r));
                json_body(json!({"accepted": true}))
            }
            ("POST", p) if p.ends_with("/output") => (204, vec![]),
            ("GET", "/images/disk.raw") => (200, script.image.clone()),
            ("GET", "/api/v1/agent/sync") => {
                assert_eq!(
                    req.target,
                    "/api/v1/agent/sync?src=rsync%3A%2F%2F10.0.0.2%3A%2Fplugins%2Fp-1.0%2Fdeployment_scripts%2F"
                );
                let mut tar = tar::Builder::new(Vec::new());
                for (name, data) in [("run.sh", "echo hi\n"), ("puppet/site.pp", "notice(1)\n")] {
                    let mut h = tar::Header::new_gnu();
                    h.set_size(data.len() as u64);
                    h.set_mode(0o755);
                    h.set_cksum();
                    tar.append_data(&mut h, name, data.as_bytes()).unwrap();
                }
                (200, tar.into_inner().unwrap())
            }
            ("GET", "/api/v1/agent/file")
                if req.target.ends_with("path=%2Fetc%2Ffuel%2Fa.yaml") =>
            {
                (200, b"a: 1\n".to_vec())
            }
            _ => (404, b"{\"message\": \"not found\"}".to_vec()),
        }
    }))
}

fn run(id: i64, interface: &str, name: &str, args: Value, task: Value) -> Value {
    json!({"id": id, "attempt": 1, "deployment": 1, "timeout_s": 60,
           "step": {"interface": interface, "name": name, "args": args}, "task": task})
}

fn task(kind: &str, parameters: Value) -> Value {
    json!({"id": format!("t-{kind}"), "type": kind, "parameters": parameters})
}

#[test]
fn the_loop_over_http_writes_the_image_syncs_copies_and_reboots_to_disk() {
    let image: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    let sha = {
        use sha2::Digest;
        sha2::Sha256::digest(&image)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let script = Arc::new(Script {
        runs: Mutex::new(VecDeque::new()),
        results: Mutex::new(vec![]),
        image,
        stop: Arc::new(AtomicBool::new(false)),
    });
    let (base, log) = master(script.clone());
    let runs = [
        run(
            1,
            "deploy",
            "write_image",
            json!({"image_url": format!("{base}/images/disk.raw"), "checksum": format!("sha256:{sha}"), "target": "/dev/sda"}),
            Value::Null,
        ),
        run(
            2,
            "deploy",
            "run_tasks",
            json!({}),
            task(
                "sync",
                json!({"src": "rsync://10.0.0.2:/plugins/p-1.0/deployment_scripts/", "dst": "/etc/fuel/plugins/p-1.0/"}),
            ),
        ),
        run(
            3,
            "deploy",
            "run_tasks",
            json!({}),
            task(
                "copy_files",
                json!({"files": [{"src": "/etc/fuel/a.yaml", "dst": "/etc/a.yaml"}], "permissions": "0600", "dir_permissions": "0750"}),
            ),
        ),
        run(
            4,
            "deploy",
            "run_tasks",
            json!({}),
            task(
                "copy_files",
                json!({"files": [{"src": "/etc/fuel/missing", "dst": "/etc/b"}]}),
            ),
        ),
        run(
            5,
            "deploy",
            "write_image",
            json!({"image_url": format!("{base}/images/disk.raw"), "checksum": format!("md5:{}", "0".repeat(32)), "target": "/dev/sdb"}),
            Value::Null,
        ),
        run(6, "deploy", "collect_logs", json!({}), Value::Null),
        run(7, "power", "reboot_to_disk", json!({}), Value::Null),
    ];
    script.runs.lock().unwrap().extend(runs);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let ex = Executor::sandbox(root.clone()).running_commands(true);
    let end = run_loop(
        &crate::agent::Master::plain(&base),
        "node-token",
        3,
        &ex,
        &dir.path().join("state"),
        &script.stop,
    )
    .unwrap();
    assert_eq!(end, LoopEnd::RebootedToDisk);

    let results = script.results.lock().unwrap();
    let summary: Vec<(&str, bool)> = results.iter().map(|(p, r)| (p.as_str(), r.ok)).collect();
    assert_eq!(
        summary,
        [
            ("/api/v1/agent/runs/1/result", true),
            ("/api/v1/agent/runs/2/result", true),
            ("/api/v1/agent/runs/3/result", true),
            ("/api/v1/agent/runs/4/result", false),
            ("/api/v1/agent/runs/5/result", false),
            ("/api/v1/agent/runs/6/result", true),
            ("/api/v1/agent/runs/7/result", true),
        ]
    );
    assert!(
        results[0].1.output_tail.contains("verified"),
        "{}",
        results[0].1.output_tail
    );
    assert_eq!(std::fs::read(root.join("dev/sda")).unwrap(), script.image);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/fuel/plugins/p-1.0/puppet/site.pp")).unwrap(),
        "notice(1)\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        std::fs::metadata(root.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("etc/fuel/plugins/p-1.0/run.sh"), 0o755);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/a.yaml")).unwrap(),
        "a: 1\n"
    );
    assert_eq!(mode("etc/a.yaml"), 0o600);
    assert_eq!(
        results[3].1.error.as_deref(),
        Some("copy_files: /etc/fuel/missing does not exist on the master")
    );
    let e = results[4].1.error.as_deref().unwrap();
    assert!(e.starts_with("checksum mismatch: expected md5:000"), "{e}");
    assert_eq!(std::fs::metadata(root.join("dev/sdb")).unwrap().len(), 0);
    // Every call carried the node's token, the image download included (same host).
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .all(|r| r.auth.as_deref() == Some("Bearer node-token"))
    );
}

#[test]
fn a_simulated_node_registers_writes_its_default_disk_and_says_why_it_cannot_boot_it() {
    let image = b"simulated disk image\n".repeat(1000);
    let script = Arc::new(Script {
        runs: Mutex::new(VecDeque::new()),
        results: Mutex::new(vec![]),
        image,
        stop: Arc::new(AtomicBool::new(false)),
    });
    let (base, log) = master(script.clone());
    script.runs.lock().unwrap().extend([
        run(
            1,
            "deploy",
            "write_image",
            json!({"image_url": format!("{base}/images/disk.raw")}),
            Value::Null,
        ),
        run(
            2,
            "deploy",
            "run_tasks",
            json!({}),
            task("shell", json!({"cmd": "hostname > sim-ran; echo ok"})),
        ),
        run(3, "power", "reboot_to_disk", json!({}), Value::Null),
    ]);
    let dir = tempfile::tempdir().unwrap();
    // After reboot_to_disk a simulated node boots what is on its disk; this image is no OS, so
    // the node stops there and names the disk and what it found.
    let end = simulate_with(
        &base,
        dir.path(),
        "52:54:00:00:00:03",
        script.stop.clone(),
        true,
    );
    let Err(super::deploy::DeployError::InstalledOs { detail, .. }) = end else {
        panic!("expected the installed OS to be refused: {end:?}");
    };
    assert!(detail.contains("dev/vda: no partition table"), "{detail}");
    assert_eq!(
        std::fs::read(dir.path().join("dev/vda")).unwrap(),
        script.image
    );
    assert!(dir.path().join("sim-ran").exists());
    assert!(dir.path().join("var/lib/stoker/rebooted-to-disk").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run/stoker-agent.token")).unwrap(),
        "node-token"
    );
    let log = log.lock().unwrap();
    let hello = &log[0];
    assert_eq!(
        (hello.target.as_str(), hello.auth.as_deref()),
        ("/api/v1/agent/hello", None)
    );
    let inv: Value = serde_json::from_slice(&hello.body).unwrap();
    assert_eq!(inv["interfaces"][0]["mac"], "52:54:00:00:00:03");
    assert_eq!(inv["disks"][0]["name"], "vda");
    assert_eq!(inv["disks"][0]["removable"], false);
}

#[test]
fn a_stopped_simulation_ends_while_the_master_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        s2.store(true, Ordering::Relaxed);
    });
    let end = simulate("http://127.0.0.1:9", dir.path(), "52:54:00:00:00:04", stop).unwrap();
    t.join().unwrap();
    assert_eq!(end, LoopEnd::Stopped);
}

/// `Fetch` is object-safe and what the steps see.
#[test]
fn fetch_is_a_trait_object() {
    let m = HttpMaster::new(
        &crate::agent::Master::plain("http://127.0.0.1:9"),
        "t",
        None,
    );
    let f: &dyn Fetch = &m;
    assert!(matches!(f.get("/x", &[]), Err(FetchError::Failed { .. })));
}

/// A connection the agent keeps to the master is closed by `hang_up` (the server reads its
/// end), and the next call opens another: a forced reboot must not leave it to the master's
/// keep-alive, and a reboot that failed still reports.
#[test]
fn hang_up_closes_the_kept_connection_and_the_next_call_opens_another() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let mut ends = Vec::new();
        for _ in 0..2 {
            let (conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end().to_ascii_lowercase();
                if h.is_empty() {
                    break;
                }
                if let Some(v) = h.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).unwrap();
            // Kept alive: no `connection: close` from this side.
            (&conn)
                .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                .unwrap();
            // What comes next on this connection: 0 bytes is the client's close; an error is
            // the read timing out with the connection still open.
            let mut more = [0u8; 1];
            ends.push(reader.read(&mut more).map_err(|e| e.kind()));
        }
        ends
    });
    let m = HttpMaster::new(&crate::agent::Master::plain(&base), "tok-1", None);
    let report = super::protocol::OutputReport {
        attempt: 1,
        tail: "x".into(),
    };
    m.output(1, &report);
    m.hang_up();
    m.output(1, &report);
    m.hang_up();
    assert_eq!(server.join().unwrap(), [Ok(0), Ok(0)]);
}
