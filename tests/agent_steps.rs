//! The built `stoker agent` in deploy mode against a scripted stand-in master on loopback
//! (std::net, one request per connection): hello, then steps in a sandbox until reboot to disk;
//! and the exit after a refused token. The real master's side is tested with the daemon.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::common::bin::{run_ok, stoker};

/// Requests as (path, JSON body).
type Log = Arc<Mutex<Vec<(String, Value)>>>;

/// Serve `next` answers in order (then `wait`), 401 everything when `refuse`, and log
/// (method path, body) of each request.
fn master(nexts: Vec<Value>, refuse: bool) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let nexts = Arc::new(Mutex::new(VecDeque::from(nexts)));
    let log2 = log.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut len = 0;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                if h.trim().is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            log2.lock().unwrap().push((path.clone(), body));
            let (status, out) = if refuse && path != "/api/v1/agent/hello" {
                (401, json!({"message": "agent token refused"}))
            } else if path == "/api/v1/agent/hello" {
                (
                    201,
                    json!({"created": true, "agent_token": "tok",
                       "node": {"id": 5, "mac": "52:54:00:00:00:05", "status": "discover"}}),
                )
            } else if path == "/api/v1/agent/next" {
                match nexts.lock().unwrap().pop_front() {
                    Some(run) => (200, json!({"action": "run", "run": run})),
                    None => (200, json!({"action": "wait", "retry_after_ms": 50})),
                }
            } else if path.ends_with("/result") {
                (200, json!({"accepted": true}))
            } else {
                (404, json!({"message": "no"}))
            };
            let out = out.to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{out}",
                out.len()
            );
        }
    });
    (base, log)
}

fn run(id: i64, interface: &str, name: &str, task: Value) -> Value {
    json!({"id": id, "attempt": 1, "deployment": 1, "timeout_s": 30,
           "step": {"interface": interface, "name": name, "args": {}}, "task": task})
}

#[test]
fn agent_deploys_into_a_sandbox_and_exits_after_reboot_to_disk() {
    let (base, log) = master(
        vec![
            run(
                1,
                "deploy",
                "run_tasks",
                json!({"id": "hello", "type": "shell",
                       "parameters": {"cmd": "echo deployed > /dev/null; echo hi > marker"}}),
            ),
            run(2, "power", "reboot_to_disk", Value::Null),
        ],
        false,
    );
    let dir = tempfile::tempdir().unwrap();
    let sandbox = dir.path().join("node");
    let stdout = run_ok(
        stoker(dir.path())
            .args(["agent", "--master", &base, "--root"])
            .arg(dir.path())
            .arg("--sandbox")
            .arg(&sandbox)
            .arg("--run-commands"),
    );
    assert!(stdout.contains("STOKER-AGENT ok node=5"), "{stdout}");
    assert!(
        stdout.contains("STOKER-AGENT rebooted-to-disk node=5"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.join("marker")).unwrap(),
        "hi\n"
    );
    assert!(sandbox.join("var/lib/stoker/rebooted-to-disk").exists());
    let log = log.lock().unwrap();
    let paths: Vec<&str> = log.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/api/v1/agent/hello",
            "/api/v1/agent/next",
            "/api/v1/agent/runs/1/result",
            "/api/v1/agent/next",
            "/api/v1/agent/runs/2/result",
        ]
    );
    // It asks to be held while nothing is due (long-poll).
    assert_eq!(log[1].1, json!({"node_id": 5, "wait_s": 20}));
    assert_eq!(log[2].1["ok"], true);
    // The state directory (default: run/ under the root) has the token and the last result.
    let state = std::fs::read_to_string(dir.path().join("run/stoker-agent.run.json")).unwrap();
    assert!(state.contains("\"reported\":true"), "{state}");
}

#[test]
fn agent_exits_when_its_token_is_refused() {
    let (base, _log) = master(vec![], true);
    let dir = tempfile::tempdir().unwrap();
    let out = stoker(dir.path())
        .args(["agent", "--deploy", "--master", &base, "--root"])
        .arg(dir.path())
        .arg("--state")
        .arg(dir.path().join("state"))
        .arg("--sandbox")
        .arg(dir.path().join("node"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused the agent token 3 times: agent token refused"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("state/stoker-agent.token")).unwrap(),
        "tok"
    );
}
