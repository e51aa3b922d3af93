//! Nailgun's deployment sequences (`/sequences/`): create, list by release and by
//! environment, show, change, delete, each refusal naming its field (Nailgun's schema: name,
//! release and graphs required, no other key; a name taken in the release is 409; a missing
//! release or sequence 404), and a sequence executed: its graphs run one after another as one
//! transaction, on environments of its release only.

use serde_json::{Value, json};

use crate::chains::{children, deployed, drive_chain, transaction};
use crate::common::{Http, TestDaemon, build, fixture_files};

fn release(d: &TestDaemon) -> i64 {
    d.http().get("/api/v1/releases").json()[0]["id"]
        .as_i64()
        .unwrap()
}

/// The field an error names (or `$`) and its message.
fn refusal(r: &crate::common::Resp) -> String {
    let e = r.json();
    format!(
        "{} {}",
        e["fields"][0]["field"].as_str().unwrap_or("-"),
        e["message"].as_str().unwrap_or("")
    )
}

#[test]
fn sequences_are_created_listed_changed_and_deleted_as_nailguns() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let rel = release(&d);
    let (cluster, _) = d.environment(&["controller"], 1);
    let body = json!({"name": "upgrade", "release": rel,
                      "graphs": [{"type": "first"}, {"type": "second", "nodes": [1]}]});
    let r = http.post("/api/v1/sequences/", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    let s = r.json();
    let id = s["id"].as_i64().unwrap();
    assert_eq!(
        s,
        json!({"id": id, "release_id": rel, "name": "upgrade",
               "graphs": [{"type": "first"}, {"type": "second", "nodes": [1]}]})
    );
    let again = http.post("/api/v1/sequences", &body.to_string());
    assert_eq!(again.status, 409, "{}", again.body);
    assert!(again.body.contains("already exist"), "{}", again.body);

    // Lists: all, by release, by environment (its release); unknown ones are 404.
    let names = |path: &str| -> Vec<String> {
        let r = http.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("/api/v1/sequences/"), ["upgrade"]);
    assert_eq!(
        names(&format!("/api/v1/sequences/?release={rel}")),
        ["upgrade"]
    );
    assert_eq!(
        names(&format!("/api/v1/sequences/?cluster={cluster}")),
        ["upgrade"]
    );
    assert_eq!(http.get("/api/v1/sequences/?release=999").status, 404);
    assert_eq!(http.get("/api/v1/sequences/?cluster=999").status, 404);
    assert_eq!(http.get("/api/v1/sequences/?release=x").status, 400);

    // One: show, change (PUT and PATCH), delete.
    let one = format!("/api/v1/sequences/{id}/");
    assert_eq!(http.get(&one).json(), s);
    let r = http.put(&one, &json!({"graphs": [{"type": "third"}]}).to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["graphs"], json!([{"type": "third"}]));
    assert_eq!(r.json()["name"], "upgrade");
    let r = http.patch(&one, &json!({"name": "renamed"}).to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.json()["name"].as_str(), &r.json()["graphs"]),
        (Some("renamed"), &json!([{"type": "third"}]))
    );
    let other = http.post(
        "/api/v1/sequences",
        &json!({"name": "other", "release": rel, "graphs": [{"type": "x"}]}).to_string(),
    );
    assert_eq!(other.status, 201, "{}", other.body);
    let r = http.put(&one, &json!({"name": "other"}).to_string());
    assert_eq!(r.status, 409, "a name taken in the release: {}", r.body);
    assert_eq!(http.delete(&one).status, 204);
    assert_eq!(http.get(&one).status, 404);
    assert_eq!(http.delete(&one).status, 404);
    assert_eq!(http.put(&one, "{}").status, 404);
    assert_eq!(names("/api/v1/sequences"), ["other"]);
}

#[test]
fn refused_sequences_name_their_field_and_store_nothing() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let rel = release(&d);
    let g = json!([{"type": "first"}]);
    let cases: Vec<(Value, u16, &str)> = vec![
        (
            json!({"release": rel, "graphs": g}),
            400,
            "missing field `name`",
        ),
        (
            json!({"name": "s", "graphs": g}),
            400,
            "missing field `release`",
        ),
        (
            json!({"name": "s", "release": rel}),
            400,
            "missing field `graphs`",
        ),
        (
            json!({"name": "s", "release": rel, "graphs": g, "id": 3}),
            400,
            "unknown field `id`",
        ),
        (
            json!({"name": "s", "release": "1", "graphs": g}),
            400,
            "release",
        ),
        (
            json!({"name": "", "release": rel, "graphs": g}),
            400,
            "name",
        ),
        (
            json!({"name": "s", "release": rel, "graphs": []}),
            400,
            "graphs",
        ),
        (
            json!({"name": "s", "release": rel, "graphs": [{"nodes": [1]}]}),
            400,
            "missing field `type`",
        ),
        (
            json!({"name": "s", "release": rel, "graphs": [{"type": "a b"}]}),
            400,
            "graphs[0].type",
        ),
        (
            json!({"name": "s", "release": rel, "graphs": [{"type": "a", "tasks": ["t"]}]}),
            400,
            "graphs[0].tasks",
        ),
        (
            json!({"name": "s", "release": rel, "graphs": [{"type": "a", "x": 1}]}),
            400,
            "unknown field `x`",
        ),
        (
            json!({"name": "s", "release": 999, "graphs": g}),
            404,
            "release 999",
        ),
    ];
    for (body, status, named) in cases {
        let r = http.post("/api/v1/sequences", &body.to_string());
        assert_eq!(r.status, status, "{body}: {}", r.body);
        let said = refusal(&r);
        assert!(said.contains(named), "{body}: {said}");
    }
    assert_eq!(http.get("/api/v1/sequences").json(), json!([]));
    let r = http.post("/api/v1/sequences", "{not json");
    assert_eq!(r.status, 400, "{}", r.body);

    let made = http.post(
        "/api/v1/sequences",
        &json!({"name": "s", "release": rel, "graphs": g}).to_string(),
    );
    let id = made.json()["id"].as_i64().unwrap();
    let one = format!("/api/v1/sequences/{id}");
    for (body, named) in [
        (json!({"release": rel}), "unknown field `release`"),
        (json!({"name": null}), "name"),
        (json!({"graphs": [{"type": ""}]}), "graphs[0].type"),
    ] {
        let r = http.put(&one, &body.to_string());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(refusal(&r).contains(named), "{body}: {}", r.body);
    }
    assert_eq!(http.get(&one).json()["graphs"], g, "unchanged");
    // Executing: cluster required, booleans, no other key; a sequence or environment that
    // does not exist is 404.
    let exec = format!("{one}/execute/");
    for (body, named) in [
        (json!({}), "missing field `cluster`"),
        (json!({"cluster": 1, "dry_run": "yes"}), "dry_run"),
        (
            json!({"cluster": 1, "graphs": []}),
            "unknown field `graphs`",
        ),
    ] {
        let r = http.post(&exec, &body.to_string());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(refusal(&r).contains(named), "{body}: {}", r.body);
    }
    assert_eq!(http.post(&exec, r#"{"cluster": 999}"#).status, 404);
    assert_eq!(
        http.post("/api/v1/sequences/999/execute", r#"{"cluster": 1}"#)
            .status,
        404
    );
}

#[test]
fn a_sequence_runs_its_graphs_in_order_on_environments_of_its_release() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let http = d.http();
    let rel = release(&d);
    let (cluster, nodes) = deployed(&base);
    let r = http.post(
        "/api/v1/sequences",
        &json!({"name": "both", "release": rel,
                "graphs": [{"type": "first"}, {"type": "second"}]})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().unwrap();

    // A dry run first: each graph recorded, over at once.
    let r = http.post(
        &format!("/api/v1/sequences/{id}/execute/"),
        &json!({"cluster": cluster, "dry_run": true, "debug": true}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let dry = r.json();
    assert_eq!(
        (dry["status"].as_str(), dry["dry_run"].as_bool()),
        (Some("ready"), Some(true))
    );
    assert_eq!(
        children(&base, cluster, dry["id"].as_i64().unwrap()).len(),
        2
    );

    let r = http.post(
        &format!("/api/v1/sequences/{id}/execute/"),
        &json!({"cluster": cluster, "force": true}).to_string(),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let t = r.json();
    let parent = t["id"].as_i64().unwrap();
    assert_eq!(
        (t["name"].as_str(), t["status"].as_str()),
        (Some("deploy"), Some("running"))
    );
    let ran = drive_chain(&base, &nodes, &|_| false, parent);
    let order: Vec<&str> = ran
        .iter()
        .map(|r| r.1.as_str())
        .filter(|n| n.ends_with("_task"))
        .collect();
    assert_eq!(
        order,
        ["first_task", "first_task", "second_task", "second_task"]
    );
    assert_eq!(transaction(&base, parent)["status"], "ready");

    // An environment of another release does not have the sequence.
    let (status, body) = d.post_package(&build(
        &fixture_files("v5-release-valid"),
        "fixture-release-1.0.0",
    ));
    assert_eq!(status, 201, "{body}");
    let other_release = http
        .get("/api/v1/releases")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .find(|&r| r != rel)
        .unwrap();
    let r = http.post(
        "/api/v1/clusters",
        &json!({"name": "elsewhere", "release_id": other_release}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let elsewhere = r.json()["id"].as_i64().unwrap();
    let r = http.post(
        &format!("/api/v1/sequences/{id}/execute"),
        &json!({"cluster": elsewhere}).to_string(),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("both"), "{}", r.body);
    assert!(
        Http::raw_get_json(&format!(
            "{base}/api/v1/transactions?cluster_id={elsewhere}"
        ))
        .as_array()
        .unwrap()
        .is_empty()
    );
}
