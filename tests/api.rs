//! The JSON API and the agent hello: shapes, stable error codes, and the node appearing.

use serde_json::json;

use crate::common::{TestDaemon, inventory};

#[test]
fn version_and_health() {
    let d = TestDaemon::start();
    let http = d.http();
    let v = http.get("/api/v1/version");
    assert_eq!(v.status, 200);
    assert!(v.content_type.starts_with("application/json"));
    let v = v.json();
    assert_eq!(v["name"], "stoker");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    // Nailgun's keys, which python-fuelclient reads (`fuel2 fuel-version`, feature checks).
    assert_eq!(v["api"], "1");
    assert_eq!(v["release"], "10.0");
    assert_eq!(v["feature_groups"], json!(["advanced"]));
    assert_eq!(v["auth_required"], json!(true));
    assert_eq!(
        v["schema_version"],
        stoker::store::migrations::latest(),
        "version reports the schema"
    );
    let h = http.get("/healthz");
    assert_eq!((h.status, h.json()), (200, json!({"status": "ok"})));
}

#[test]
fn hello_creates_then_updates_a_discover_node() {
    let d = TestDaemon::start();
    let http = d.http();
    assert_eq!(http.get("/api/v1/nodes").json(), json!([]));

    let first = http.post(
        "/api/v1/agent/hello",
        &inventory("52:54:00:aa:00:01").to_string(),
    );
    assert_eq!(first.status, 201, "{}", first.body);
    let first = first.json();
    assert_eq!(first["created"], true);
    let token = first["agent_token"]
        .as_str()
        .expect("an agent token is issued")
        .to_string();
    assert_eq!(token.len(), 64);
    let node = &first["node"];
    assert_eq!(node["id"], 1);
    assert_eq!(node["mac"], "52:54:00:aa:00:01");
    assert_eq!(node["status"], "discover");
    assert_eq!(node["name"], "Untitled (00:01)");
    assert_eq!(node["inventory"]["cpu"]["count"], 32);
    assert_eq!(node["inventory"]["disks"][1]["serial"], "PHYG0123");

    // The same machine says hello from its second NIC, upper-case: same node, updated.
    let mut inv = inventory("52:54:00:aa:00:01");
    inv["interfaces"].as_array_mut().unwrap().swap(0, 1);
    inv["interfaces"][0]["mac"] = json!("02:54:00:AA:00:01");
    inv["memory_bytes"] = json!(137438953472u64);
    // Without its token, a known node cannot be rewritten by anybody on the network.
    let anonymous = http.post("/api/v1/agent/hello", &inv.to_string());
    assert_eq!(anonymous.status, 409, "{}", anonymous.body);
    assert_eq!(anonymous.json()["code"], "conflict");
    let wrong = crate::common::Http::raw_post(
        &d.url("/api/v1/agent/hello"),
        &inv.to_string(),
        &[("authorization", &format!("Bearer {}", "f".repeat(64)))],
    );
    assert_eq!(wrong.status, 401);
    let second = crate::common::Http::raw_post(
        &d.url("/api/v1/agent/hello"),
        &inv.to_string(),
        &[("authorization", &format!("Bearer {token}"))],
    );
    assert_eq!(second.status, 200, "{}", second.body);
    let second = second.json();
    assert_eq!(second["created"], false);
    assert!(
        second.get("agent_token").is_none(),
        "the token is not rotated by a heartbeat"
    );

    let nodes = http.get("/api/v1/nodes").json();
    assert_eq!(nodes.as_array().unwrap().len(), 1);
    assert_eq!(nodes[0]["inventory"]["memory_bytes"], 137438953472u64);
    let one = http.get("/api/v1/nodes/1");
    assert_eq!(one.status, 200);
    // The single node is the listed node plus where its deployment stands (none yet).
    let one = one.json();
    for (key, value) in nodes[0].as_object().unwrap() {
        assert_eq!(&one[key], value, "{key}");
    }
    assert_eq!(one["deploy_step"], serde_json::Value::Null);
    assert_eq!(
        one["driver_internal_info"]["deploy_steps"],
        serde_json::json!([])
    );
}

#[test]
fn malformed_hello_names_the_field() {
    let d = TestDaemon::start();
    let http = d.http();
    let cases = [
        ("{", "invalid_json", ""),
        ("[]", "invalid_input", "$"),
        ("{}", "invalid_input", "interfaces"),
        (
            r#"{"interfaces":[{"name":"eth0","mac":"52:54:00:00:00:zz"}],"cpu":{"count":1},"memory_bytes":1}"#,
            "invalid_input",
            "interfaces[0].mac",
        ),
        (
            r#"{"interfaces":[{"name":"eth0","mac":"52:54:00:00:00:01","speed_mbps":"fast"}]}"#,
            "invalid_input",
            "interfaces[0].speed_mbps",
        ),
        (
            r#"{"interfaces":[{"name":"eth0","mac":"52:54:00:00:00:01"}],"cpu":{"count":2},"memory_bytes":-5}"#,
            "invalid_input",
            "memory_bytes",
        ),
    ];
    for (body, code, field) in cases {
        let r = http.post("/api/v1/agent/hello", body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let v = r.json();
        assert_eq!(v["code"], code, "{body}: {v}");
        assert!(v["message"].as_str().unwrap().len() > 10, "{v}");
        if !field.is_empty() {
            assert_eq!(v["fields"][0]["field"], field, "{body}: {v}");
            assert!(v["message"].as_str().unwrap().contains(field), "{v}");
        }
    }
    // Nothing was half-written.
    assert_eq!(http.get("/api/v1/nodes").json(), json!([]));
}

#[test]
fn errors_have_stable_codes() {
    let d = TestDaemon::start();
    let http = d.http();
    for (path, status, code) in [
        ("/api/v1/nodes/42", 404, "not_found"),
        ("/api/v1/nodes/abc", 400, "bad_request"),
        ("/api/v1/nodes/-1", 400, "bad_request"),
        ("/api/v1/no-such-thing", 404, "not_found"),
    ] {
        let r = http.get(path);
        assert_eq!(r.status, status, "{path}");
        let v = r.json();
        assert_eq!(v["code"], code, "{path}");
        assert!(v["message"].is_string(), "{path}");
    }
}

#[test]
fn routes_before_and_behind_the_middleware() {
    let d = TestDaemon::start();
    let http = d.http();
    // Behind the middleware: trailing and doubled slashes are normalized (the fuel client
    // sends `/api/v1/clusters/`).
    for path in ["/api/v1/nodes/", "/api/v1//nodes", "/api/v1/clusters/"] {
        let r = http.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(r.json().is_array(), "{path}");
    }
    // The agents' step calls are routed before it: they still ask for a token, and an unknown
    // path under them is the API's 404.
    let r = http.post("/api/v1/agent/next", "{}");
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (401, json!("unauthorized"))
    );
    let r = http.post(
        "/api/v1/agent/runs/1/result",
        r#"{"attempt": 1, "ok": true}"#,
    );
    assert_eq!(r.status, 401, "{}", r.body);
    let r = http.post("/api/v1/agent/runs/1/nothing", "{}");
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (404, json!("not_found"))
    );
    // The dashboard's 404 is a page.
    let r = http.get("/no-such-page");
    assert_eq!(r.status, 404);
    assert!(
        r.content_type.starts_with("text/html"),
        "{}",
        r.content_type
    );
}

#[test]
fn in_process_stop_closes_the_database_cleanly() {
    let d = TestDaemon::start();
    let r = d.http().post(
        "/api/v1/agent/hello",
        &inventory("52:54:00:aa:10:01").to_string(),
    );
    assert_eq!(r.status, 201);
    let db = d.db_path();
    let _dir = d.stop().unwrap();
    assert!(db.exists());
    assert!(
        !db.with_extension("db-wal").exists(),
        "WAL checkpointed on stop"
    );
}

#[test]
fn discovery_hello_is_rate_limited_per_client() {
    let d = TestDaemon::start();
    let http = d.http();
    let mut statuses = Vec::new();
    for i in 0..12 {
        let r = http.post(
            "/api/v1/agent/hello",
            &inventory(&format!("52:54:00:aa:20:{i:02}")).to_string(),
        );
        statuses.push(r.status);
        if r.status == 429 {
            let v = r.json();
            assert_eq!(v["code"], "rate_limited");
            assert!(v["message"].as_str().unwrap().contains("127.0.0.1"));
        }
    }
    assert_eq!(statuses[..10], [201; 10], "a burst of 10 goes through");
    assert_eq!(statuses[10..], [429, 429]);
    let (status, _, headers) = crate::common::Http::get_bytes(&d.url("/api/v1/nodes"), &[]);
    assert_eq!(status, 200, "other endpoints are not limited");
    assert!(!headers.contains_key("retry-after"));
    assert_eq!(
        http.get("/api/v1/nodes").json().as_array().unwrap().len(),
        10
    );
}
