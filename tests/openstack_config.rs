//! Nailgun's OpenStack configuration through the daemon: uploads per environment, role and
//! node with their history (a new one replaces its scope's, a deleted one stays inactive), the
//! validator's refusals each naming its field, the merged configuration in each node's
//! deployment data (node < role < environment, a primary controller matching `controller`,
//! a kept plan made again when a configuration changes), and `execute` deploying only the
//! ready nodes it names, with simulated nodes.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::plan::step;
use crate::common::{Http, TestDaemon};

fn upload(http: &Http, body: Value) -> Value {
    let r = http.post("/api/v1/openstack-config", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()
}

/// The fields a 400 names.
fn refused(http: &Http, method: &str, path: &str, body: Value) -> Vec<String> {
    let r = match method {
        "POST" => http.post(path, &body.to_string()),
        _ => http.put(path, &body.to_string()),
    };
    assert_eq!(r.status, 400, "{body}: {}", r.body);
    r.json()["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap().to_string())
        .collect()
}

fn ids(list: &Value) -> Vec<i64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn configurations_keep_their_history_and_refusals_name_the_field() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let (cluster, nodes) = d.environment(&["controller", "compute"], 3);
    let (controller, compute, stranger) = (nodes[0], nodes[1], nodes[2]);

    let first = upload(
        &http,
        json!({"cluster_id": cluster, "configuration": {"nova_config": {"a": {"value": 1}}}}),
    );
    let first = &first[0];
    assert_eq!(first["config_type"], "cluster");
    assert_eq!(first["is_active"], true);
    assert_eq!(first["node_id"], Value::Null);
    assert_eq!(first["node_role"], Value::Null);
    assert_eq!(first["cluster_id"], cluster);
    assert!(
        first["created_at"].as_str().unwrap().contains('T'),
        "{first}"
    );
    let second = upload(
        &http,
        json!({"cluster_id": cluster, "configuration": {"nova_config": {"a": {"value": 2}}}}),
    );
    let per_node = upload(
        &http,
        json!({"cluster_id": cluster, "node_ids": [controller, compute],
               "configuration": {"keystone_config": {}}}),
    );
    assert_eq!(per_node.as_array().unwrap().len(), 2, "one per node");
    assert_eq!(per_node[1]["node_id"], compute);
    assert_eq!(per_node[1]["config_type"], "node");
    let role = upload(
        &http,
        json!({"cluster_id": cluster, "node_role": "controller", "configuration": {}}),
    );
    assert_eq!(role[0]["config_type"], "role");
    let single = upload(
        &http,
        json!({"cluster_id": cluster, "node_id": compute, "configuration": {"x": {}}}),
    );

    // The list: active ones by default, filtered as Nailgun filters.
    let active = http.get(&format!("/api/v1/openstack-config?cluster_id={cluster}"));
    assert_eq!(active.status, 200, "{}", active.body);
    assert_eq!(
        ids(&active.json()),
        [
            second[0]["id"].as_i64().unwrap(),
            per_node[0]["id"].as_i64().unwrap(),
            role[0]["id"].as_i64().unwrap(),
            single[0]["id"].as_i64().unwrap(),
        ]
    );
    let old = http.get(&format!(
        "/api/v1/openstack-config?cluster_id={cluster}&is_active=False"
    ));
    assert_eq!(
        ids(&old.json()),
        [
            first["id"].as_i64().unwrap(),
            per_node[1]["id"].as_i64().unwrap()
        ]
    );
    let by_role = http.get(&format!(
        "/api/v1/openstack-config?cluster_id={cluster}&node_role=controller&is_active=1"
    ));
    assert_eq!(ids(&by_role.json()), [role[0]["id"].as_i64().unwrap()]);
    let by_nodes = http.get(&format!(
        "/api/v1/openstack-config?cluster_id={cluster}&node_ids={compute},{stranger}"
    ));
    assert_eq!(ids(&by_nodes.json()), [single[0]["id"].as_i64().unwrap()]);

    // One, then deleted: it stays, inactive; deleting it again is refused.
    let id = role[0]["id"].as_i64().unwrap();
    let shown = http.get(&format!("/api/v1/openstack-config/{id}"));
    assert_eq!(shown.json()["node_role"], "controller");
    assert_eq!(
        http.delete(&format!("/api/v1/openstack-config/{id}"))
            .status,
        204
    );
    assert_eq!(
        http.get(&format!("/api/v1/openstack-config/{id}")).json()["is_active"],
        false
    );
    let again = http.delete(&format!("/api/v1/openstack-config/{id}"));
    assert_eq!(again.status, 400, "{}", again.body);
    assert!(again.body.contains("already disabled"), "{}", again.body);
    assert_eq!(http.get("/api/v1/openstack-config/999").status, 404);

    // Refusals, each naming its field.
    let post = |body| refused(&http, "POST", "/api/v1/openstack-config", body);
    assert_eq!(
        post(json!({"cluster_id": cluster, "configuration": {}, "bogus": 1})),
        ["bogus"]
    );
    assert_eq!(
        post(json!({"cluster_id": cluster, "configuration": {}, "node_ids": [stranger]})),
        ["node_ids"]
    );
    assert_eq!(
        post(json!({"cluster_id": cluster, "configuration": {}, "node_role": "no-such-role"})),
        ["node_role"]
    );
    assert_eq!(
        post(
            json!({"cluster_id": cluster, "configuration": {}, "node_role": "controller",
                    "node_ids": [controller]})
        ),
        ["node_role"]
    );
    assert_eq!(
        post(json!({"cluster_id": cluster, "configuration": "nova"})),
        ["configuration"]
    );
    let missing = http.post(
        "/api/v1/openstack-config",
        &json!({"cluster_id": 999, "configuration": {}}).to_string(),
    );
    assert_eq!(missing.status, 404, "{}", missing.body);
    let no_env = http.get("/api/v1/openstack-config");
    assert_eq!(no_env.status, 400, "{}", no_env.body);
    assert_eq!(no_env.json()["fields"][0]["field"], "cluster_id");
    // Not operational: execute is refused, naming the environment; forced, there is still
    // no ready node to update.
    let put = |body| refused(&http, "PUT", "/api/v1/openstack-config/execute", body);
    assert_eq!(put(json!({"cluster_id": cluster})), ["cluster_id"]);
    assert_eq!(
        put(json!({"cluster_id": cluster, "force": true, "node_role": "compute"})),
        ["node_role"]
    );
    // A node leaving its environment takes its own configurations out of use.
    let r = http.delete(&format!("/api/v1/clusters/{cluster}/nodes/{compute}"));
    assert!(r.status < 300, "{}", r.body);
    let left = http.get(&format!("/api/v1/openstack-config/{}", single[0]["id"]));
    assert_eq!(left.json()["is_active"], false);
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/deployment-data")
        .join(name)
}

/// Node `uid`'s deployment data in `plan`, as the fixture plugin's task writes it.
fn data(plan: &Value, uid: i64) -> Value {
    let text = step(plan, uid, "odl_hiera")["parameters"]["data"]
        .as_str()
        .unwrap()
        .to_string();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_nodes_deployment_data_merges_environment_role_and_node_configurations() {
    let d = TestDaemon::start_bundled("install");
    d.install_fixture(&fixture("odl_fixture"));
    let http = d.http();
    let (cluster, nodes) = d.environment(&["controller", "compute"], 2);
    let (controller, compute) = (nodes[0], nodes[1]);
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/settings"),
        &json!({"odl_fixture": {"metadata": {"enabled": true}}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let plan = |http: &Http| {
        let r = http.get(&format!("/api/v1/clusters/{cluster}/plan"));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    let before = plan(&http);
    assert_eq!(data(&before, controller)["configuration"], json!({}));
    assert_eq!(
        data(&before, controller)["configuration_options"],
        json!({})
    );

    upload(
        &http,
        json!({"cluster_id": cluster, "node_id": controller,
               "configuration": {"nova_config": {"DEFAULT/debug": {"value": "node"}}}}),
    );
    upload(
        &http,
        json!({"cluster_id": cluster, "node_role": "controller",
               "configuration": {"nova_config": {"DEFAULT/debug": {"value": "role"},
                                                 "DEFAULT/role_only": {"value": 1}}}}),
    );
    upload(
        &http,
        json!({"cluster_id": cluster,
               "configuration": {"nova_config": {"DEFAULT/debug": {"value": "cluster"},
                                                 "DEFAULT/everywhere": {"value": 2}},
                                 "configuration_options": {"restart": true}}}),
    );
    // The kept plan is not used: a configuration changed since.
    let after = plan(&http);
    let c = data(&after, controller);
    assert_eq!(c["roles"], json!(["primary-controller"]));
    assert_eq!(
        c["configuration"],
        json!({"nova_config": {"DEFAULT/debug": {"value": "node"},
                               "DEFAULT/role_only": {"value": 1},
                               "DEFAULT/everywhere": {"value": 2}}})
    );
    assert_eq!(c["configuration_options"], json!({"restart": true}));
    let w = data(&after, compute);
    assert_eq!(
        w["configuration"],
        json!({"nova_config": {"DEFAULT/debug": {"value": "cluster"},
                               "DEFAULT/everywhere": {"value": 2}}})
    );
    // An inactive (deleted) one counts for nothing.
    let list = http
        .get(&format!(
            "/api/v1/openstack-config?cluster_id={cluster}&node_id={controller}"
        ))
        .json();
    let id = list[0]["id"].as_i64().unwrap();
    assert_eq!(
        http.delete(&format!("/api/v1/openstack-config/{id}"))
            .status,
        204
    );
    let c = data(&plan(&http), controller);
    assert_eq!(
        c["configuration"]["nova_config"]["DEFAULT/debug"]["value"],
        "role"
    );
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn execute_deploys_the_ready_nodes_it_names() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let http = d.http();
    let sandbox = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let macs = ["52:54:00:ac:00:01", "52:54:00:ac:00:02"];
    let sims: Vec<_> = macs
        .iter()
        .enumerate()
        .map(|(i, mac)| {
            let (b, s, m, st) = (
                base.clone(),
                sandbox.path().join(format!("node{i}")),
                mac.to_string(),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || stoker::agent::deploy::simulate(&b, &s, &m, st))
        })
        .collect();
    wait_for("discovery", || {
        http.get("/api/v1/nodes").json().as_array().unwrap().len() == 2
    });
    let cluster = d.new_environment("cfg");
    let listed = http.get("/api/v1/nodes").json();
    let id_of = |mac: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["mac"] == mac)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let (controller, compute) = (id_of(macs[0]), id_of(macs[1]));
    for (id, role) in [(controller, "controller"), (compute, "compute")] {
        let r = http.put(
            &format!("/api/v1/clusters/{cluster}/nodes/{id}"),
            &json!({"roles": [role]}).to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // The OS image the simulated nodes write, served by the master.
    let data_dir = d.db_path().parent().unwrap().to_path_buf();
    std::fs::create_dir_all(data_dir.join("images")).unwrap();
    stoker::demo::write_os_image(&data_dir.join("images/os.img")).unwrap();
    let steps = json!({"steps": [{"interface": "deploy", "step": "write_image", "priority": 80,
        "args": {"image_url": format!("{base}/boot/images/os.img")}}]});
    let r = http.post(
        &format!("/api/v1/clusters/{cluster}/deploy"),
        &steps.to_string(),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let first = r.json()["id"].as_i64().unwrap();
    let finished = |id: i64| {
        let t = http.get(&format!("/api/v1/transactions/{id}")).json();
        t["status"] != "running"
    };
    wait_for("the deployment", || finished(first));
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{cluster}")).json()["status"],
        "operational"
    );

    upload(
        &http,
        json!({"cluster_id": cluster, "node_role": "compute",
               "configuration": {"nova_config": {"DEFAULT/cpu_allocation_ratio": {"value": 4}}}}),
    );
    let r = http.put(
        "/api/v1/openstack-config/execute",
        &json!({"cluster_id": cluster, "node_role": "compute", "force": false}).to_string(),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let task = r.json();
    assert_eq!(task["name"], "deployment");
    assert_eq!(task["cluster"], cluster);
    let id = task["id"].as_i64().unwrap();
    wait_for("the update", || finished(id));
    let t = http.get(&format!("/api/v1/transactions/{id}")).json();
    assert_eq!(t["status"], "ready", "{t}");
    let history = http
        .get(&format!("/api/v1/transactions/{id}/deployment_history"))
        .json();
    let ran: Vec<(String, String)> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["status"] == "ready" && h["node_id"] != "null")
        .map(|h| {
            (
                h["node_id"].as_str().unwrap().to_string(),
                h["task_name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        ran.contains(&(compute.to_string(), "upload_configuration".to_string())),
        "{ran:?}"
    );
    assert!(
        ran.iter().all(|(node, _)| *node == compute.to_string()),
        "only the compute node: {ran:?}"
    );
    // What it uploaded is the node's data with the configuration.
    let uploaded = history
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["task_name"] == "upload_configuration")
        .unwrap();
    let text = uploaded["parameters"]["data"].as_str().unwrap();
    assert!(text.contains("DEFAULT/cpu_allocation_ratio"), "{text}");
    stop.store(true, Ordering::Relaxed);
    for s in sims {
        let _ = s.join();
    }
}

/// A configuration's credentials are nested (`{"DEFAULT/admin_token": {"value": ...}}`): a
/// viewer (or an operator) reads them masked in the list, one by one and in the deployment
/// data they were delivered in; the admin reads them whole.
#[test]
fn a_viewer_reads_no_credential_of_a_configuration() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let (cluster, nodes) = d.environment(&["controller"], 1);
    let made = upload(
        &http,
        json!({"cluster_id": cluster, "node_id": nodes[0], "configuration": {
            "keystone_config": {"DEFAULT/admin_token": {"value": "OS-TOKEN-77"},
                                "DEFAULT/debug": {"value": "True"}}}}),
    );
    let id = made[0]["id"].as_i64().unwrap();
    let deployed = http.put(&format!("/api/v1/clusters/{cluster}/changes"), "");
    assert_eq!(deployed.status, 202, "{}", deployed.body);
    let task = deployed.json()["id"].as_i64().unwrap();
    let list = format!("/api/v1/openstack-config?cluster_id={cluster}");
    let one = format!("/api/v1/openstack-config/{id}");
    let info = format!("/api/v1/transactions/{task}/deployment_info");
    let token = |doc: &Value, path: &str| -> Value {
        let c = match path {
            p if p == list => &doc[0]["configuration"],
            p if p == one => &doc["configuration"],
            _ => &doc["nodes"][nodes[0].to_string()]["configuration"],
        };
        assert_eq!(
            c["keystone_config"]["DEFAULT/debug"]["value"], "True",
            "{doc}"
        );
        c["keystone_config"]["DEFAULT/admin_token"]["value"].clone()
    };
    let viewer = d.user_token("vera", "viewer");
    let operator = d.user_token("otto", "operator");
    for path in [&list, &one, &info] {
        let whole = http.get(path);
        assert_eq!(whole.status, 200, "{path}: {}", whole.body);
        assert_eq!(token(&whole.json(), path), "OS-TOKEN-77", "{path}");
        for who in [&viewer, &operator] {
            let r = http.get_as(path, who);
            assert_eq!(r.status, 200, "{path}: {}", r.body);
            assert!(!r.body.contains("OS-TOKEN-77"), "{path}: {}", r.body);
            assert_eq!(token(&r.json(), path), "******", "{path}");
        }
    }
}
