//! Plugins plan against the deployment data Nailgun would have serialized, through the daemon:
//! fixture plugins under `tests/fixtures/deployment-data/` are installed over the API into a
//! master with the bundled release, enabled in an environment by their settings' `metadata`,
//! and the environment's plan is read back.
//!
//! - `legacy-chain`: legacy `tasks.yaml` tasks shaped like fuel-plugin-external-zabbix's, one in
//!   the middle of each stage's chain on a role no node has: the chain still holds.

use std::path::Path;

use serde_json::{Value, json};
use stoker::package::{archive, dir::DirFiles};

use crate::common::{TestDaemon, inventory};

/// Install fixture plugin `name` through the API.
fn install(d: &TestDaemon, name: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deployment-data");
    let files = DirFiles::new(&root.join(name)).unwrap();
    let bytes = archive::build(&files, name, 0, &mut |_, _| {}).unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent
        .post(&d.url("/api/v1/plugins"))
        .header("content-type", "application/gzip")
        .header("authorization", format!("Bearer {}", d.admin_token()))
        .send(&bytes[..])
        .unwrap();
    let body = r.body_mut().read_to_string().unwrap();
    assert_eq!(r.status().as_u16(), 201, "{body}");
}

/// An environment of the bundled release with one discovered node per role of `roles`,
/// assigned that role. Returns its id and the node ids.
fn environment(d: &TestDaemon, roles: &[&str]) -> (i64, Vec<i64>) {
    let http = d.http();
    let release = http.get("/api/v1/releases").json()[0]["id"]
        .as_i64()
        .unwrap();
    let r = http.post(
        "/api/v1/clusters",
        &json!({"name": "env", "release_id": release}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let cluster = r.json()["id"].as_i64().unwrap();
    let mut ids = Vec::new();
    for (i, role) in roles.iter().enumerate() {
        let mac = format!("52:54:00:00:70:{i:02x}");
        let r = http.post("/api/v1/agent/hello", &inventory(&mac).to_string());
        assert_eq!(r.status, 201, "{}", r.body);
        let id = r.json()["node"]["id"].as_i64().unwrap();
        let r = http.put(
            &format!("/api/v1/clusters/{cluster}/nodes/{id}"),
            &json!({"roles": [role]}).to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        ids.push(id);
    }
    (cluster, ids)
}

/// Replace the environment's settings.
fn set(d: &TestDaemon, cluster: i64, settings: Value) {
    let r = d.http().put(
        &format!("/api/v1/clusters/{cluster}/settings"),
        &settings.to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

fn plan(d: &TestDaemon, cluster: i64) -> Value {
    let r = d.http().get(&format!("/api/v1/clusters/{cluster}/plan"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn step<'a>(plan: &'a Value, uid: i64, task: &str) -> &'a Value {
    plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["uid"].as_str() == Some(uid.to_string().as_str()))
        .and_then(|n| {
            n["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["id"] == task)
        })
        .unwrap_or_else(|| panic!("no task {task} on node {uid}"))
}

/// What a step waits for, as `task@node`, sorted.
fn waits(plan: &Value, uid: i64, task: &str) -> Vec<String> {
    let mut w: Vec<String> = step(plan, uid, task)["requires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}@{}",
                r["task"].as_str().unwrap(),
                r["node"].as_str().unwrap()
            )
        })
        .collect();
    w.sort();
    w
}

/// Seed 000's chain: with one controller, the task for `controller` matches no node, and the
/// one after it still waits for the one before; with no cinder node, the second pre-deployment
/// task waits for the stage's end marker.
#[test]
fn a_legacy_chain_holds_when_a_task_runs_nowhere() {
    let d = TestDaemon::start_bundled("install");
    install(&d, "legacy-chain");
    let (cluster, ids) = environment(&d, &["controller", "compute"]);
    let (controller, compute) = (ids[0], ids[1]);
    set(
        &d,
        cluster,
        json!({"legacy-chain": {"metadata": {"enabled": true}}}),
    );
    let p = plan(&d, cluster);

    let unplaced: Vec<&str> = p["unplaced"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["source"].as_str().unwrap().ends_with("(legacy-chain)"))
        .map(|u| u["task"].as_str().unwrap())
        .collect();
    assert_eq!(unplaced, ["pre_deployment_0", "post_deployment_1"]);
    assert_eq!(
        waits(&p, controller, "post_deployment_0"),
        ["post_deployment_end@null"]
    );
    // 8100 -> (8101 on nobody) -> 8102: 8102 waits for 8100.
    assert_eq!(
        waits(&p, controller, "post_deployment_2"),
        [format!("post_deployment_0@{controller}")]
    );
    for uid in [controller, compute] {
        assert_eq!(
            waits(&p, uid, "post_deployment_3"),
            [format!("post_deployment_2@{controller}")],
            "node {uid}"
        );
    }
    assert_eq!(
        waits(&p, compute, "pre_deployment_1"),
        ["pre_deployment_end@null"]
    );
    let order = |uid: i64, task: &str| step(&p, uid, task)["order"].as_u64().unwrap();
    assert!(order(controller, "post_deployment_0") < order(controller, "post_deployment_2"));
    assert!(order(controller, "post_deployment_2") < order(compute, "post_deployment_3"));
    assert!(
        p["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(
                "legacy task post_deployment_2 waits for post_deployment_0: post_deployment_1"
            )),
        "{}",
        p["warnings"]
    );
}
