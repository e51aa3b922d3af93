//! Plugins plan against the deployment data Nailgun would have serialized, through the daemon:
//! fixture plugins under `tests/fixtures/deployment-data/` are installed over the API into a
//! master with the bundled release, enabled in an environment by their settings' `metadata`,
//! and the environment's plan is read back.
//!
//! - `odl_fixture`: tasks whose conditions and parameters read `$.odl_fixture.<attribute>`,
//!   `$.odl_fixture.metadata.enabled` and `$.deployment_id` as fuel-plugin-opendaylight's and
//!   fuel-plugin-murano's do: they evaluate with no setting typed in but `enabled`, the
//!   environment's values override the plugin's defaults, and the data a node gets has
//!   Nailgun's standard keys with Nailgun's value types.
//! - `legacy-chain`: legacy `tasks.yaml` tasks shaped like fuel-plugin-external-zabbix's, one in
//!   the middle of each stage's chain on a role no node has: the chain still holds.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::TestDaemon;
use crate::common::plan::{step, waits};

/// Fixture plugin `name`'s folder.
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/deployment-data")
        .join(name)
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

/// Seed 000's chain: with one controller, the task for `controller` matches no node, and the
/// one after it still waits for the one before; with no cinder node, the second pre-deployment
/// task waits for the stage's end marker.
#[test]
fn a_legacy_chain_holds_when_a_task_runs_nowhere() {
    let d = TestDaemon::start_bundled("install");
    d.install_fixture(&fixture("legacy-chain"));
    let (cluster, ids) = d.environment(&["controller", "compute"], 2);
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

/// A real plugin's conditions plan with nothing typed in but `enabled`, and the environment's
/// values win over the plugin's defaults.
#[test]
fn plugin_settings_and_nailgun_keys_reach_the_plan() {
    let d = TestDaemon::start_bundled("install");
    d.install_fixture(&fixture("odl_fixture"));
    let plugin_id = d
        .http()
        .get("/api/v1/plugins")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "odl_fixture")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let (cluster, ids) = d.environment(&["controller", "compute"], 2);
    let (controller, compute) = (ids[0], ids[1]);
    set(
        &d,
        cluster,
        json!({"odl_fixture": {"metadata": {"enabled": true}}}),
    );
    let p = plan(&d, cluster);

    // The plugin's defaults: no SFC, ODL not managing L3.
    let sfc = step(&p, controller, "odl_sfc");
    assert_eq!(sfc["status"], "skipped");
    assert!(
        sfc["reason"]
            .as_str()
            .unwrap()
            .starts_with("condition is false: $.odl_fixture.enable_sfc"),
        "{sfc}"
    );
    assert_eq!(step(&p, controller, "odl_l3_routers")["status"], "run");
    let register = step(&p, controller, "odl_dashboard_registration");
    assert_eq!(register["status"], "run");
    assert_eq!(
        register["parameters"]["cmd"],
        format!("register {cluster} on port 8282")
    );

    // The data a node gets, as Nailgun serialized it.
    let data = |uid: i64| -> Value {
        let text = step(&p, uid, "odl_hiera")["parameters"]["data"]
            .as_str()
            .unwrap()
            .to_string();
        serde_json::from_str(&text).unwrap()
    };
    let c = data(controller);
    assert_eq!(c["deployment_id"], json!(cluster));
    assert_eq!(c["deployment_mode"], "ha_compact");
    assert_eq!(c["openstack_version"], "newton-10.0");
    assert_eq!(c["fuel_version"], "10.0");
    assert_eq!(
        c["cluster"],
        json!({"id": cluster, "name": "env", "fuel_version": "10.0", "status": "new",
               "mode": "ha_compact"})
    );
    assert_eq!(
        c["release"],
        json!({"name": "Ubuntu Newton", "version": "newton-10.0", "operating_system": "Ubuntu"})
    );
    assert_eq!(
        c["odl_fixture"],
        json!({
            "metadata": {"class": "plugin", "toggleable": true, "weight": 90,
                         "label": "OpenDaylight fixture", "group": "network", "enabled": true,
                         "plugin_id": plugin_id, "plugin_version": "1.1.0",
                         "hot_pluggable": false},
            "enable_l3_odl": false,
            "enable_sfc": false,
            "rest_api_port": "8282",
        })
    );
    assert_eq!(
        c["plugins"],
        json!([{"name": "odl_fixture", "scripts": [{
            "remote_url": "rsync://10.20.0.2:/plugins/odl_fixture-1.1/deployment_scripts/",
            "local_path": "/etc/fuel/plugins/odl_fixture-1.1/",
        }]}])
    );
    // The release's settings, flattened as Nailgun did: `common` at the top, groups by name.
    assert_eq!(c["debug"], false);
    assert_eq!(c["access"]["user"], "admin");
    assert_eq!(c["metadata"]["label"], "Common");
    // The node's own part: uid a string, host names node-<id>, the operator's name beside.
    let host = format!("node-{controller}");
    assert_eq!(c["uid"], controller.to_string());
    assert_eq!(c["fqdn"], format!("{host}.domain.tld"));
    assert_eq!(c["user_node_name"], "Untitled (40:00)");
    assert_eq!(c["roles"], json!(["primary-controller"]));
    assert_eq!(c["fail_if_error"], true);
    assert_eq!(c["online"], true);
    assert_eq!(c["status"], "discover");
    assert_eq!(c["last_controller"], host);
    assert_eq!(
        c["network_metadata"]["nodes"][&host]["node_roles"],
        json!(["primary-controller"])
    );
    // Its admin address is the one the master's DHCP (here: its hello) gave it, not one
    // allocated beside the lease; the other networks' come from their ranges.
    let ip = d.http().get(&format!("/api/v1/nodes/{controller}")).json()["ip"].clone();
    assert!(ip.is_string(), "{ip}");
    let roles = &c["network_metadata"]["nodes"][&host]["network_roles"];
    assert_eq!(roles["admin/pxe"], ip, "{roles}");
    assert!(
        roles["management"]
            .as_str()
            .is_some_and(|m| m.starts_with("192.168.0.")),
        "{roles}"
    );
    assert_eq!(
        c["nodes"].as_array().unwrap().len(),
        2,
        "one entry per node and role: {}",
        c["nodes"]
    );
    let w = data(compute);
    assert_eq!(w["uid"], compute.to_string());
    assert_eq!(w["fail_if_error"], false);
    assert_eq!(w["deployment_id"], c["deployment_id"]);

    // The environment's values override the plugin's defaults.
    set(
        &d,
        cluster,
        json!({"odl_fixture": {"metadata": {"enabled": true}, "enable_sfc": true,
                               "enable_l3_odl": true, "rest_api_port": "9999"}}),
    );
    let p = plan(&d, cluster);
    assert_eq!(step(&p, controller, "odl_sfc")["status"], "run");
    assert_eq!(step(&p, controller, "odl_l3_routers")["status"], "skipped");
    assert_eq!(
        step(&p, controller, "odl_dashboard_registration")["parameters"]["cmd"],
        format!("register {cluster} on port 9999")
    );
}
