//! `GET /api/v1/events` and `/events`: the master's committed changes as server-sent events.
//! A deployment played by simulated agents is heard run by run, in commit order, ending with
//! the deployment's own end; filters narrow a stream and a bad one is named; a reconnecting
//! client catches up with `Last-Event-ID`; a refused write is never heard; audit events reach
//! admins only; the dashboard's session opens the page route; a stopping daemon ends streams.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::common::sse::{Sse, Stream};
use crate::common::{TestDaemon, credentials};
use crate::deploy::{drive, setup};

const WAIT: Duration = Duration::from_secs(20);

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn open(d: &TestDaemon, query: &str, token: &str) -> Stream {
    let auth = bearer(token);
    Stream::open(
        &d.url(&format!("/api/v1/events{query}")),
        &[("authorization", &auth)],
    )
}

#[test]
fn a_deployment_is_heard_run_by_run_in_commit_order() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let admin = d.admin_token();
    let s = open(&d, "", &admin);
    assert_eq!(s.status, 200);
    assert!(s.content_type.starts_with("text/event-stream"));
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let dep = crate::deploy::start(&base, cluster);
    let ran = drive(&base, &nodes, &|_| false, 1000);
    let events = s.until(WAIT, |e| {
        e.event == "deployment" && e.data["id"] == dep && e.data["status"] == "done"
    });

    // Numbered in order, each once.
    let ids: Vec<u64> = events.iter().map(|e| e.id.unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let of = |kind: &'static str| events.iter().filter(move |e| e.event == kind);
    // The environment and its nodes' arrival.
    assert!(
        of("environment").any(|e| e.data["id"] == cluster && e.data["what"] == "created"),
        "{events:#?}"
    );
    for n in &nodes {
        assert!(of("node").any(|e| e.data["id"] == n.id && e.data["what"] == "node.assigned"));
        // Its status as it went, ending ready.
        let statuses: Vec<&str> = of("node")
            .filter(|e| e.data["id"] == n.id && e.data["what"] == "node.status")
            .map(|e| e.data["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses.last(), Some(&"ready"), "{statuses:?}");
        assert!(statuses.contains(&"provisioning"), "{statuses:?}");
    }
    // Every run the agents ran was heard running, then ok, with its node and environment.
    let mut seen: HashMap<i64, Vec<String>> = HashMap::new();
    for e in of("run") {
        assert_eq!(e.data["deployment"], dep);
        assert_eq!(e.data["cluster"], cluster);
        seen.entry(e.data["id"].as_i64().unwrap())
            .or_default()
            .push(e.data["status"].as_str().unwrap().to_string());
    }
    for (node, _, run) in &ran {
        assert_eq!(seen[run], ["running", "ok"], "run {run}");
        let heard = of("run").find(|e| e.data["id"] == *run).unwrap();
        assert_eq!(heard.data["node"], *node);
    }
    // The deployment: running first, done last.
    let states: Vec<&str> = of("deployment")
        .filter(|e| e.data["id"] == dep)
        .map(|e| e.data["status"].as_str().unwrap())
        .collect();
    assert_eq!(states.first(), Some(&"running"));
    assert_eq!(states.last(), Some(&"done"));
    assert_eq!(events.last().unwrap().event, "deployment");
    // The activity feed's lines come too, the deployment's end right after it.
    s.until(WAIT, |e| {
        e.event == "activity" && e.data["what"] == "deployment.done"
    });
}

#[test]
fn filters_narrow_a_stream_and_bad_ones_are_named() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let admin = d.admin_token();
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let only_runs = open(&d, &format!("?kinds=run&cluster={cluster}"), &admin);
    let one_node = open(&d, &format!("?node={}", nodes[1].id), &admin);
    let elsewhere = open(&d, &format!("?cluster={}", cluster + 100), &admin);
    let dep = crate::deploy::start(&base, cluster);
    drive(&base, &nodes, &|_| false, 1000);
    let runs = only_runs.drain(Duration::from_secs(2));
    assert!(!runs.is_empty(), "the runs were heard");
    assert!(
        runs.iter()
            .all(|e: &Sse| e.event == "run" && e.data["cluster"] == cluster),
        "{runs:#?}"
    );
    let mine = one_node.drain(Duration::from_secs(1));
    assert!(!mine.is_empty());
    for e in &mine {
        let node = if e.event == "node" {
            &e.data["id"]
        } else {
            &e.data["node"]
        };
        assert_eq!(*node, nodes[1].id, "{e:?}");
    }
    assert!(mine.iter().any(|e| e.event == "run"));
    assert!(elsewhere.drain(Duration::from_millis(500)).is_empty());
    let _ = dep;

    for (query, named) in [
        ("?kinds=node,bogus", "bogus"),
        ("?cluster=x", "cluster"),
        ("?node=0", "node"),
        ("?deployment=1,2", "deployment"),
        ("?color=blue", "color"),
    ] {
        let r = d.http().get(&format!("/api/v1/events{query}"));
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        assert!(r.body.contains(named), "{query}: {}", r.body);
    }
    let auth = bearer(&admin);
    let bad = Stream::open(
        &d.url("/api/v1/events"),
        &[("authorization", &auth), ("last-event-id", "soon")],
    );
    assert_eq!(bad.status, 400);
}

#[test]
fn a_reconnecting_client_catches_up_and_a_refused_write_is_never_heard() {
    let d = TestDaemon::start_bundled("install");
    let admin = d.admin_token();
    let http = d.http();
    let release = http.get("/api/v1/releases").json()[0]["id"]
        .as_i64()
        .unwrap();
    let s = open(&d, "?kinds=environment", &admin);
    let create = |name: &str| {
        http.post(
            "/api/v1/clusters",
            &json!({"name": name, "release_id": release}).to_string(),
        )
    };
    assert_eq!(create("first").status, 201);
    let first = s.until(WAIT, |e| e.event == "environment");
    let last_id = first[0].id.unwrap();
    drop(s);
    // While nobody listens: one created, one refused (the name is taken).
    assert_eq!(create("second").status, 201);
    assert_eq!(create("second").status, 409);
    assert_eq!(create("third").status, 201);
    let auth = bearer(&admin);
    let last = last_id.to_string();
    let again = Stream::open(
        &d.url("/api/v1/events?kinds=environment"),
        &[("authorization", &auth), ("last-event-id", &last)],
    );
    let caught: Vec<i64> = again
        .opening
        .iter()
        .map(|e| e.data["id"].as_i64().unwrap())
        .collect();
    assert_eq!(caught.len(), 2, "{:#?}", again.opening);
    assert!(again.opening.iter().all(|e| e.data["what"] == "created"));
    assert!(again.opening.iter().all(|e| e.id.unwrap() > last_id));
    // The same through the query, as a client that cannot set headers would.
    let by_query = Stream::open(
        &d.url(&format!(
            "/api/v1/events?kinds=environment&last_event_id={last_id}"
        )),
        &[("authorization", &auth)],
    );
    assert_eq!(by_query.opening.len(), 2);
}

#[test]
fn audit_events_reach_admins_only_and_pages_use_the_session() {
    let d = TestDaemon::start();
    let admin = d.admin_token();
    let viewer = d.user_token("watcher", "viewer");
    let as_admin = open(&d, "", &admin);
    let as_viewer = open(&d, "", &viewer);
    assert_eq!(
        d.http()
            .get_as("/api/v1/events?kinds=audit", &viewer)
            .status,
        403
    );
    // A state-changing request is audited.
    let r = d.http().post(
        "/api/v1/tokens",
        &json!({"name": "ci", "role": "viewer"}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let heard = as_admin.until(WAIT, |e| e.event == "audit");
    assert_eq!(heard.last().unwrap().data["path"], "/api/v1/tokens");
    assert!(
        as_viewer
            .drain(Duration::from_millis(500))
            .iter()
            .all(|e| e.event != "audit")
    );
    // Without a token: 401; the dashboard's route takes the session cookie instead.
    assert_eq!(d.anonymous().get("/api/v1/events").status, 401);
    let creds = credentials(&d.url("")).expect("the test daemon signed in");
    let cookie = format!("stoker_session={}", creds.session);
    let page = Stream::open(&d.url("/events?kinds=node"), &[("cookie", &cookie)]);
    assert_eq!(page.status, 200);
    // A cookie does not open the API's route.
    let api = Stream::open(&d.url("/api/v1/events"), &[("cookie", &cookie)]);
    assert_eq!(api.status, 401);
}

#[test]
fn a_stopping_daemon_ends_its_streams() {
    let d = TestDaemon::start();
    let admin = d.admin_token();
    let s = open(&d, "", &admin);
    let t = std::time::Instant::now();
    d.stop().unwrap();
    assert!(s.ends_within(Duration::from_secs(5)), "the stream ended");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the stop did not wait for the stream"
    );
}

#[test]
fn plugin_installs_and_removals_are_heard() {
    let d = TestDaemon::start();
    let admin = d.admin_token();
    let s = open(&d, "?kinds=plugin", &admin);
    let (status, body) = d.post_package(&crate::plugin::built("v5-release-valid"));
    assert_eq!(status, 201, "{body}");
    let installed = s.until(WAIT, |e| e.event == "plugin");
    let e = installed.last().unwrap();
    assert_eq!(
        (&e.data["what"], &e.data["name"], &e.data["version"]),
        (
            &json!("installed"),
            &json!("fixture-release"),
            &json!("1.0.0")
        ),
        "{installed:#?}"
    );
    let r = d.http().delete("/api/v1/plugins/fixture-release");
    assert_eq!(r.status, 200, "{}", r.body);
    let removed = s.until(WAIT, |e| e.event == "plugin" && e.data["what"] == "removed");
    let e = removed.last().unwrap();
    assert_eq!(e.data["name"], "fixture-release");
    // Only plugin events on a stream that asked for them.
    assert!(
        installed
            .iter()
            .chain(&removed)
            .all(|e| e.event == "plugin")
    );
}
