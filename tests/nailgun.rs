//! Nailgun's environment-level API as `fuel2` drives it, against the daemon with the bundled
//! release: attributes (`env settings download|upload`), renaming, an empty environment's
//! deployment, `/version` and the empty health-check answers.

use serde_json::{Value, json};

use crate::common::TestDaemon;

fn fields(body: &Value) -> Vec<String> {
    body["fields"]
        .as_array()
        .map(|f| {
            f.iter()
                .map(|e| e["field"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn attributes_download_edit_upload_as_nailgun() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let c = d.new_environment("attrs");
    let a = format!("/api/v1/clusters/{c}/attributes");
    let r = http.get(&a);
    assert_eq!(r.status, 200, "{}", r.body);
    let doc = r.json();
    let ed = &doc["editable"];
    assert_eq!(ed["common"]["debug"]["type"], "checkbox");
    assert_eq!(ed["common"]["debug"]["value"], json!(false));
    assert_eq!(ed["access"]["user"]["value"], "admin");
    assert_eq!(
        http.get(&format!("{a}/defaults")).json(),
        doc,
        "a new environment has the defaults"
    );

    // The downloaded document uploads unchanged, and changes nothing.
    let r = http.put(&a, &doc.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), doc);
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{c}/settings")).json(),
        json!({})
    );

    // An edit lands in the environment's settings (the deployment-data shape).
    let mut edited = doc.clone();
    edited["editable"]["common"]["debug"]["value"] = json!(true);
    edited["editable"]["syslog"]["syslog_port"]["value"] = json!("1514");
    let r = http.put(&a, &edited.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["editable"]["common"]["debug"]["value"],
        json!(true)
    );
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{c}/settings")).json(),
        json!({"debug": true, "syslog": {"syslog_port": "1514"}})
    );
    assert_eq!(http.get(&a).json(), r.json());

    // Bad values are refused, named, and change nothing.
    let before = http.get(&a).json();
    for (body, field) in [
        (
            json!({"editable": {"common": {"debug": {"value": "yes"}}}}),
            "editable.common.debug.value",
        ),
        (
            json!({"editable": {"common": {"nope": {"value": 1}}}}),
            "editable.common.nope",
        ),
        (json!({"editable": {"bogus": {}}}), "editable.bogus"),
        (
            json!({"editable": {"syslog": {"syslog_port": {"value": "99999"}}}}),
            "editable.syslog.syslog_port.value",
        ),
        (
            json!({"editable": {"access": {"user": {"value": "services"}}}}),
            "editable.access.user.value",
        ),
        (json!({"generated": {}}), "generated"),
    ] {
        let r = http.put(&a, &body.to_string());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(fields(&r.json()), [field], "{}", r.body);
    }
    let r = http.put(&a, "[1");
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(http.get(&a).json(), before);

    // Back to the defaults.
    let r = http.put(&format!("{a}/defaults"), "{}");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.get(&a).json(), doc);

    // A viewer sees secrets masked; sending the masked document back keeps them.
    let r = http.get(&a);
    assert_eq!(r.json()["editable"]["access"]["password"]["value"], "admin");
    let r = http.put(
        &a,
        &json!({"editable": {"access": {"password": {"value": "s3cret"}}}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let mut masked = r.json();
    masked["editable"]["access"]["password"]["value"] = json!("******");
    let r = http.put(&a, &masked.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["editable"]["access"]["password"]["value"],
        "s3cret"
    );

    assert_eq!(http.get("/api/v1/clusters/999/attributes").status, 404);
}

#[test]
fn rename_empty_deploy_version_and_health() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let a = d.new_environment("first");
    let b = d.new_environment("second");
    let r = http.put(&format!("/api/v1/clusters/{a}"), r#"{"name": "renamed"}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["name"], "renamed");
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{a}")).json()["name"],
        "renamed"
    );
    let r = http.put(&format!("/api/v1/clusters/{a}"), r#"{"name": "second"}"#);
    assert_eq!(r.status, 409, "{}", r.body);
    for (body, field) in [
        (r#"{"name": ""}"#, "name"),
        (r#"{"release_id": 77}"#, "release_id"),
        (r#"{"colour": "red"}"#, "colour"),
    ] {
        let r = http.put(&format!("/api/v1/clusters/{a}"), body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(fields(&r.json()), [field]);
    }
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{a}")).json()["name"],
        "renamed"
    );

    // Deploying an environment without nodes is a transaction that is over at once (200, as
    // Nailgun raises a finished task).
    let r = http.put(&format!("/api/v1/clusters/{b}/changes"), "{}");
    assert_eq!(r.status, 200, "{}", r.body);
    let t = r.json();
    assert_eq!(
        (t["status"].clone(), t["cluster"].clone()),
        (json!("ready"), json!(b))
    );
    let r = http.get(&format!("/api/v1/transactions/{}", t["id"]));
    assert_eq!(r.json()["progress"], 100);
    // A narrower one still needs nodes.
    let r = http.put(&format!("/api/v1/clusters/{b}/deploy?nodes=1"), "{}");
    assert_eq!(r.status / 100, 4, "{}", r.body);

    let v = http.get("/api/v1/version").json();
    assert_eq!(
        (v["api"].clone(), v["release"].clone()),
        (json!("1"), json!("10.0"))
    );

    assert_eq!(http.get(&format!("/ostf/testsets/{a}")).json(), json!([]));
    assert_eq!(http.get("/ostf/testruns").json(), json!([]));
    assert_eq!(
        http.get(&format!("/ostf/testruns/last/{a}")).json(),
        json!([])
    );
    assert_eq!(http.post("/ostf/testruns", "[]").json(), json!([]));
    let r = http.post(
        "/ostf/testruns",
        &json!([{"testset": "smoke", "metadata": {"cluster_id": a}}]).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("smoke") && r.body.contains("OSTF"),
        "{}",
        r.body
    );
}

/// `fuel2 release repos list|update`: the release's `attributes_metadata` read and sent back
/// with new repositories, which every environment of the release then gets as its default
/// (its settings' defaults and its deployment data); any other change, bad repositories, a
/// missing release or a caller below admin is refused and changes nothing.
#[test]
fn release_repositories_are_set_through_its_attributes_metadata() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let (cluster, _) = d.environment(&["controller"], 1);
    let release = http.get(&format!("/api/v1/clusters/{cluster}")).json()["release_id"]
        .as_i64()
        .unwrap();
    let path = format!("/api/v1/releases/{release}/attributes_metadata");
    let before = http.get(&path).json();
    let repos = &before["editable"]["repo_setup"]["repos"]["value"];
    assert!(repos.as_array().is_some_and(|r| !r.is_empty()), "{repos}");
    let mirror = json!([{"name": "ubuntu", "type": "deb", "uri": "http://mirror.example.org/u/",
                         "suite": "xenial", "section": "main", "priority": null}]);
    let mut doc = before.clone();
    doc["editable"]["repo_setup"]["repos"]["value"] = mirror.clone();

    // Refused, changing nothing: another attribute, bad repositories, a viewer, an operator.
    let mut other = doc.clone();
    other["editable"]["access"]["user"]["value"] = json!("root");
    let r = http.put(&path, &other.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(fields(&r.json()), ["editable.access.user.value"]);
    let mut bad = doc.clone();
    bad["editable"]["repo_setup"]["repos"]["value"] = json!([{"name": "x", "type": "deb"}]);
    let r = http.put(&path, &bad.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        fields(&r.json()),
        [
            "editable.repo_setup.repos.value[0].uri",
            "editable.repo_setup.repos.value[0].suite"
        ]
    );
    for role in ["viewer", "operator"] {
        let token = d.user_token(&format!("{role}-user"), role);
        let r = ureq::Agent::from(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build(),
        )
        .put(&d.url(&path))
        .header("authorization", &format!("Bearer {token}"))
        .header("content-type", "application/json")
        .send(doc.to_string())
        .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{role}");
        assert_eq!(http.get_as(&path, &token).status, 200, "{role} reads them");
    }
    assert_eq!(
        http.put("/api/v1/releases/999/attributes_metadata", &doc.to_string())
            .status,
        404
    );
    assert_eq!(http.get(&path).json(), before, "nothing changed");

    // Set: read back, and the release's environments get them.
    let r = http.put(&path, &doc.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), doc);
    assert_eq!(http.get(&path).json(), doc);
    let defaults = http
        .get(&format!("/api/v1/clusters/{cluster}/attributes/defaults"))
        .json();
    assert_eq!(defaults["editable"]["repo_setup"]["repos"]["value"], mirror);
    let facts = http
        .get(&format!(
            "/api/v1/clusters/{cluster}/orchestrator/deployment/defaults"
        ))
        .json();
    assert_eq!(
        facts[0]["repo_setup"]["repos"], mirror,
        "{}",
        facts[0]["repo_setup"]
    );
}
