//! The agents' long-poll against the real daemon on loopback: an agent that lets the master
//! hold its `next` (`wait_s`) gets its run as soon as it is due (a Deploy; another node's run
//! it waits for), `wait` with `retry_after_ms` 0 when its time is up, and `wait` at once when
//! the daemon stops, which then stops within a second; an agent that does not ask to be held
//! (every agent before long-poll) is answered at once, as before; a held agent keeps its node
//! online (`last_seen`, the deployment's `waiting`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::bin::{Served, stoker};
use crate::common::{Http, TestDaemon, inventory};
use crate::deploy::{Node, deployment, drive, next, report, run_name, setup};

/// What a `next` got: its status, the time the master says it held it, its body, how long it
/// took.
struct Answer {
    status: u16,
    held_ms: Option<f64>,
    body: Value,
    took: Duration,
}

/// `POST /api/v1/agent/next` with `token`, asking to be held `wait_s` (none: as an agent that
/// polls).
fn ask(base: &str, token: &str, node: i64, wait_s: Option<u64>) -> Answer {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut body = json!({"node_id": node});
    if let Some(s) = wait_s {
        body["wait_s"] = json!(s);
    }
    let t = Instant::now();
    let mut r = agent
        .post(format!("{base}/api/v1/agent/next"))
        .header("authorization", &format!("Bearer {token}"))
        .header("content-type", "application/json")
        .send(body.to_string())
        .unwrap();
    let held_ms = r
        .headers()
        .get("server-timing")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("held;dur="))
        .and_then(|v| v.parse().ok());
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap();
    Answer {
        status,
        held_ms,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        took: t.elapsed(),
    }
}

/// Ask as `node` on a thread of its own.
fn ask_later(base: &str, node: &Node, wait_s: u64) -> std::thread::JoinHandle<(Answer, Instant)> {
    let (base, token, id) = (base.to_string(), node.bearer(), node.id);
    std::thread::spawn(move || {
        let a = ask(&base, &token, id, Some(wait_s));
        (a, Instant::now())
    })
}

#[test]
fn a_held_next_gets_its_run_as_soon_as_a_deploy_makes_it_due() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let held = ask_later(&base, &nodes[0], 15);
    std::thread::sleep(Duration::from_millis(700));
    assert!(!held.is_finished(), "nothing is due: the call is held");
    let deployed = Instant::now();
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 202, "{}", r.body);
    let (a, answered) = held.join().unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["action"], "run", "{}", a.body);
    assert_eq!(run_name(&a.body["run"]), "deploy.configure");
    assert!(
        answered.duration_since(deployed) < Duration::from_secs(5),
        "answered {:?} after Deploy",
        answered.duration_since(deployed)
    );
    let held_ms = a.held_ms.expect("Server-Timing: held");
    assert!(
        held_ms >= 600.0 && held_ms < a.took.as_secs_f64() * 1000.0,
        "held {held_ms} ms of {:?}",
        a.took
    );
    // The run was handed out as any other: the agent goes on polling or held.
    let run = &a.body["run"];
    let r = report(&base, &nodes[0], run, true);
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_held_next_gets_its_run_when_the_other_node_it_waits_for_is_done() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let dep = crate::deploy::start(&base, cluster);
    let (controller, compute) = (&nodes[0], &nodes[1]);
    // The compute node runs until its next run waits for the controller.
    let mut compute_ran = 0;
    while let Some(run) = next(&base, compute) {
        let r = report(&base, compute, &run, true);
        assert_eq!(r.status, 200, "{}", r.body);
        compute_ran += 1;
    }
    assert!(compute_ran >= 2, "provisioned, at least");
    let held = ask_later(&base, compute, 20);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!held.is_finished(), "its run waits for the controller");
    // The controller runs step by step; the held call ends with a run right after the step
    // it waited for.
    let mut controller_ran = 0;
    while !held.is_finished() {
        let Some(run) = next(&base, controller) else {
            break;
        };
        let r = report(&base, controller, &run, true);
        assert_eq!(r.status, 200, "{}", r.body);
        controller_ran += 1;
        let t = Instant::now();
        while !held.is_finished() && t.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let (a, _) = held.join().unwrap();
    assert_eq!(a.body["action"], "run", "{}", a.body);
    assert!(a.took < Duration::from_secs(15), "{:?}", a.took);
    assert!(controller_ran > 0);
    let r = report(&base, compute, &a.body["run"], true);
    assert_eq!(r.status, 200, "{}", r.body);
    // The rest, polled, as agents before long-poll did.
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(&base, dep)["status"], "done");
}

#[test]
fn a_held_next_with_nothing_due_answers_wait_when_its_time_is_up_and_a_poll_at_once() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (_, nodes) = setup(&base, &["compute"]);
    let n = &nodes[0];
    let a = ask(&base, &n.bearer(), n.id, Some(1));
    assert_eq!(a.status, 200);
    assert_eq!(a.body, json!({"action": "wait", "retry_after_ms": 0}));
    assert!(
        a.took >= Duration::from_millis(950) && a.took < Duration::from_secs(5),
        "{:?}",
        a.took
    );
    assert!(a.held_ms.is_some_and(|h| h >= 900.0), "{:?}", a.held_ms);
    // An agent that does not ask to be held (every agent before long-poll), or asks for 0 s,
    // is answered at once and told when to ask again.
    for wait_s in [None, Some(0)] {
        let a = ask(&base, &n.bearer(), n.id, wait_s);
        assert_eq!(a.body, json!({"action": "wait", "retry_after_ms": 1000}));
        assert!(a.took < Duration::from_millis(900), "{:?}", a.took);
        assert_eq!(a.held_ms, None);
    }
    // A held call of another node's token is refused as any other.
    let r = ask(&base, "not-a-token", n.id, Some(5));
    assert_eq!(r.status, 401, "{}", r.body);
    // A malformed wait is named.
    let r = Http::raw_post(
        &format!("{base}/api/v1/agent/next"),
        &json!({"node_id": n.id, "wait_s": "soon"}).to_string(),
        &[("authorization", &format!("Bearer {}", n.bearer()))],
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("wait_s"), "{}", r.body);
}

#[test]
fn a_held_agent_keeps_its_node_online() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let n = &nodes[0];
    // Two minutes of silence, as the clock would make them.
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.execute(
        "UPDATE nodes SET last_seen_at = last_seen_at - 120 WHERE id = ?1",
        [n.id],
    )
    .unwrap();
    let node = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
    assert_eq!(node["online"], false, "{node}");
    // A held call is a call: the node is seen when it asks, and online while held.
    let held = ask_later(&base, n, 2);
    std::thread::sleep(Duration::from_millis(500));
    let node = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
    assert_eq!(node["online"], true, "{node}");
    held.join().unwrap();
    // While its agent is held, a deployment waits on nobody; the held call takes the run.
    let held = ask_later(&base, n, 10);
    std::thread::sleep(Duration::from_millis(300));
    let dep = crate::deploy::start(&base, cluster);
    let (a, _) = held.join().unwrap();
    assert_eq!(a.body["action"], "run", "{}", a.body);
    let d1 = deployment(&base, dep);
    assert_eq!(d1["waiting"], json!([]), "{d1}");
}

#[test]
fn the_daemon_stops_at_once_with_held_calls_and_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = stoker(dir.path());
    cmd.args([
        "serve",
        "--http-listen",
        "127.0.0.1:0",
        "--plugins-bundled",
        "skip",
    ]);
    let served = Served::spawn(cmd);
    let base = format!("http://{}", served.addr);
    // Discovered nodes with nothing to run, each agent held for up to 20 s.
    let tokens: Vec<(i64, String)> = (0..8)
        .map(|i| {
            let r = Http::raw_post(
                &format!("{base}/api/v1/agent/hello"),
                &inventory(&format!("52:54:00:00:61:{i:02x}")).to_string(),
                &[],
            );
            assert_eq!(r.status, 201, "{}", r.body);
            let v = r.json();
            (
                v["node"]["id"].as_i64().unwrap(),
                v["agent_token"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let held: Vec<_> = tokens
        .into_iter()
        .map(|(id, token)| {
            let base = base.clone();
            std::thread::spawn(move || ask(&base, &token, id, Some(20)))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert!(held.iter().all(|h| !h.is_finished()), "all held");
    let stopping = Instant::now();
    served.signal("TERM");
    let (code, log) = served.wait();
    let stopped = stopping.elapsed();
    assert_eq!(code, Some(0), "{log:#?}");
    assert!(
        stopped < Duration::from_secs(3),
        "stopped after {stopped:?}"
    );
    assert!(
        log.iter().any(|l| l.contains("database closed")),
        "{log:#?}"
    );
    for h in held {
        let a = h.join().unwrap();
        assert_eq!(a.status, 200, "{}", a.body);
        // Told to come back later, as an agent would be by a master that does not hold.
        assert_eq!(
            a.body,
            json!({"action": "wait", "retry_after_ms": 1000}),
            "{}",
            a.body
        );
        assert!(a.took < Duration::from_secs(3), "{:?}", a.took);
    }
}
