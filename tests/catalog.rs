//! Releases, plugins and environments: with no release, every surface refuses environment
//! creation with the same actionable message; with one, environments are created and listed.

use serde_json::json;
use stoker::store::{NewPlugin, NewRelease, Store};

use crate::common::TestDaemon;

/// Record a release plugin straight in the daemon's database (as the installer will).
fn install_fake_release(d: &TestDaemon) -> i64 {
    let store = Store::open(&d.db_path()).unwrap();
    let data = json!({"roles_metadata": {"controller": {"name": "Controller"}}});
    let plugin = store
        .write(|tx| {
            tx.insert_plugin(
                &NewPlugin {
                    name: "test-release",
                    version: "1.0.0",
                    title: "Test release",
                    package_version: "5.0.0",
                    description: "d",
                    is_release: true,
                    path: "plugins/test-release-1.0.0",
                    diagnostics: &json!([{"level": "warning", "file": "metadata.yaml", "line": 3,
                        "column": 1, "field": "fuel_version", "message": "deprecated in package 5.0.0"}]),
                    manifest: &json!({}),
                },
                &[NewRelease {
                    name: "Newton on Ubuntu 16.04",
                    version: "newton-10.0",
                    operating_system: "Ubuntu",
                    description: "d",
                    state: "available",
                    data: &data,
                }],
                1000,
            )
        })
        .unwrap();
    store.close().unwrap();
    plugin.id
}

#[test]
fn without_a_release_creation_is_refused_everywhere() {
    let d = TestDaemon::start();
    let http = d.http();
    assert_eq!(http.get("/api/v1/releases").json(), json!([]));
    let r = http.post(
        "/api/v1/clusters",
        r#"{"name":"env1","release_id":1,"nodes":[],"tasks":[]}"#,
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let v = r.json();
    assert_eq!(v["code"], "no_release");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("stoker plugin install"), "{message}");

    for page in ["/", "/environments", "/releases"] {
        let html = http.get(page).body;
        assert!(html.contains("No release installed"), "{page}");
        assert!(html.contains("stoker plugin install"), "{page}");
    }
    let envs = http.get("/environments").body;
    assert!(
        !envs.contains(r#"action="/environments""#),
        "no create form without a release"
    );
    // The form's endpoint refuses too, with the same message on an HTML page.
    let r = d.http().submit("/environments", "name=env1&release_id=1");
    assert_eq!(r.status, 200);
    assert!(r.content_type.starts_with("text/html"));
    assert!(
        r.body
            .contains(r#"class="notice notice-error" role="alert""#)
            && r.body.contains("Not created: ")
            && r.body.contains("no release is installed"),
        "{}",
        r.body
    );
    assert_eq!(http.get("/api/v1/clusters").json(), json!([]));
}

#[test]
fn with_a_release_environments_are_created() {
    let d = TestDaemon::start();
    let http = d.http();
    install_fake_release(&d);
    let releases = http.get("/api/v1/releases").json();
    assert_eq!(releases[0]["name"], "Newton on Ubuntu 16.04");
    assert_eq!(releases[0]["is_deployable"], true);
    let full = http.get("/api/v1/releases/1").json();
    assert_eq!(
        full["data"]["roles_metadata"]["controller"]["name"],
        "Controller"
    );

    // fuelclient's exact body.
    let r = http.post(
        "/api/v1/clusters/",
        r#"{"nodes": [], "tasks": [], "name": "prod", "release_id": 1, "net_segment_type": "vlan"}"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let c = r.json();
    for key in [
        "id",
        "status",
        "fuel_version",
        "name",
        "release_id",
        "is_customized",
        "changes",
    ] {
        assert!(c.get(key).is_some(), "fuel2 shows {key}: {c}");
    }
    assert_eq!(
        (c["id"].as_i64(), c["status"].as_str()),
        (Some(1), Some("new"))
    );
    assert_eq!(c["fuel_version"], "10.0");
    assert_eq!(http.get("/api/v1/clusters/1").json(), c);

    let dup = http.post("/api/v1/clusters", r#"{"name": "prod", "release_id": 1}"#);
    assert_eq!(
        (dup.status, dup.json()["code"].as_str()),
        (409, Some("conflict"))
    );
    let unknown = http.post("/api/v1/clusters", r#"{"name": "x", "release_id": 9}"#);
    assert_eq!(unknown.status, 404);
    let bad = http.post(
        "/api/v1/clusters",
        r#"{"name": "", "release_id": "one", "net_segment_type": "x"}"#,
    );
    assert_eq!(bad.status, 400);
    let bad = bad.json();
    let fields: Vec<&str> = bad["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["name", "release_id", "net_segment_type"]);

    // The dashboard form.
    let r = d
        .http()
        .post_form("/environments", "name=staging&release_id=1");
    assert_eq!(r.status, 303, "post/redirect/get");
    let staging = http
        .get("/api/v1/clusters")
        .json()
        .as_array()
        .unwrap()
        .last()
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    assert_eq!(
        r.location.as_deref(),
        Some(format!("/environments/{staging}").as_str()),
        "a created environment opens"
    );
    // The page it opens says so, once.
    let r = d.http().submit("/environments", "name=qa&release_id=1");
    assert!(
        r.body.contains("Environment qa created") && r.body.contains(r#"role="status""#),
        "{}",
        r.body
    );
    assert!(
        !d.http()
            .get(&format!("/environments/{staging}"))
            .body
            .contains("created.")
    );
    let r = d.http().get("/environments");
    assert!(r.body.contains("staging") && r.body.contains("prod"));
    assert!(r.body.contains("<form"));
    assert!(!http.get("/").body.contains("No release installed"));

    let releases_page = http.get("/releases").body;
    assert!(releases_page.contains("Test release"));
    assert!(
        releases_page
            .contains("warning metadata.yaml:3:1 fuel_version: deprecated in package 5.0.0")
    );
}

#[test]
fn a_release_in_use_cannot_be_removed() {
    let d = TestDaemon::start();
    let plugin = install_fake_release(&d);
    assert_eq!(
        d.http()
            .post("/api/v1/clusters", r#"{"name": "prod", "release_id": 1}"#)
            .status,
        201
    );
    let store = Store::open(&d.db_path()).unwrap();
    let err = store
        .write(|tx| tx.remove_plugin(plugin, 2000))
        .unwrap_err();
    assert!(err.to_string().contains("environment(s) prod"), "{err}");
    assert_eq!(store.read(|tx| tx.releases()).unwrap().len(), 1);
}

#[test]
fn plugins_are_removed_through_the_api_with_their_files() {
    let d = TestDaemon::start();
    install_fake_release(&d);
    let files = d
        .db_path()
        .parent()
        .unwrap()
        .join("plugins/test-release-1.0.0");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("metadata.yaml"), "name: test-release\n").unwrap();
    let del = |path: &str| {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut r = agent
            .delete(&d.url(path))
            .header("authorization", &format!("Bearer {}", d.admin_token()))
            .call()
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
    };
    assert_eq!(
        d.http()
            .post("/api/v1/clusters", r#"{"name": "prod", "release_id": 1}"#)
            .status,
        201
    );
    let (status, body) = del("/api/v1/plugins/test-release");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("environment(s) prod"));
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.execute("DELETE FROM clusters", []).unwrap();

    assert_eq!(del("/api/v1/plugins/nope").0, 404);
    assert_eq!(del("/api/v1/plugins/test-release@9.9.9").0, 404);
    let (status, body) = del("/api/v1/plugins/test-release@1.0.0");
    assert_eq!(status, 200, "{body}");
    assert!(!files.exists(), "files removed");
    assert_eq!(d.http().get("/api/v1/releases").json(), json!([]));
    assert_eq!(d.http().get("/api/v1/plugins").json(), json!([]));
    assert!(d.http().get("/").body.contains("No release installed"));
}

/// `fuel2 plugins list` reads each plugin's `releases` (os and version), from its metadata.
#[test]
fn plugins_list_their_releases_as_nailgun_does() {
    let d = TestDaemon::start_bundled("install");
    let plugins = d.http().get("/api/v1/plugins").json();
    let records = plugins[0]["releases"].as_array().expect("releases listed");
    assert_eq!(records.len(), 1, "{plugins}");
    assert_eq!(
        (records[0]["os"].as_str(), records[0]["version"].as_str()),
        (Some("Ubuntu"), Some("newton-10.0"))
    );
}
