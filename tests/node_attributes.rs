//! Nailgun's node attributes (`GET/PUT /nodes/{id}/attributes`, `.../attributes/defaults`;
//! `fuel2 node attributes-download|attributes-upload`): the release's CPU pinning and huge
//! pages, a node's values over them, refusals by field with nothing written, and what the
//! node's deployment data carries from them.

use serde_json::{Value, json};

use crate::common::{TestDaemon, inventory};

/// The node's entry in the environment's default deployment data.
fn node_data(d: &TestDaemon, cluster: i64, node: i64) -> Value {
    let r = d.http().get(&format!(
        "/api/v1/clusters/{cluster}/orchestrator/deployment/defaults"
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    let uid = node.to_string();
    r.json()
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["uid"] == uid.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("node {node} in {}", r.body))
}

#[test]
fn defaults_are_the_releases_and_values_round_trip() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["compute"], 1);
    let http = d.http();
    let path = format!("/api/v1/nodes/{}/attributes", nodes[0]);

    let defaults = http.get(&format!("{path}/defaults")).json();
    assert_eq!(defaults["cpu_pinning"]["nova"]["type"], "number");
    assert_eq!(defaults["cpu_pinning"]["nova"]["value"], 0);
    assert_eq!(defaults["cpu_pinning"]["metadata"]["group"], "nfv");
    assert_eq!(
        defaults["hugepages"]["nova"]["value"],
        json!({"2048": 0, "1048576": 0})
    );
    assert_eq!(
        http.get(&path).json(),
        defaults,
        "nothing set: the defaults"
    );
    assert_eq!(http.get("/api/v1/nodes/999/attributes").status, 404);
    assert_eq!(
        http.get("/api/v1/nodes/999/attributes/defaults").status,
        404
    );

    let before = node_data(&d, cluster, nodes[0]);
    assert!(before.get("cpu_pinning").is_none(), "{before}");
    let host = format!("node-{}", nodes[0]);
    assert_eq!(
        before["network_metadata"]["nodes"][&host]["nova_cpu_pinning_enabled"],
        false
    );

    // Only what changes is sent; the rest stays (Nailgun's merge).
    let r = http.put(
        &path,
        &json!({"cpu_pinning": {"nova": {"value": 4}},
                "hugepages": {"nova": {"value": {"2048": 512}}}})
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let now = r.json();
    assert_eq!(now["cpu_pinning"]["nova"]["value"], 4);
    assert_eq!(
        now["hugepages"]["nova"]["value"],
        json!({"2048": 512, "1048576": 0})
    );
    assert_eq!(now["cpu_pinning"]["nova"]["label"], "Nova CPU pinning");
    assert_eq!(http.get(&path).json(), now);
    assert_eq!(
        http.get(&format!("{path}/defaults")).json(),
        defaults,
        "the defaults stay the release's"
    );
    // The whole document back, as fuel2 uploads it, is accepted as it is.
    let r = http.put(&path, &now.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), now);

    // The deployment data: Nailgun 10's serializer keys, and a new plan for them.
    let after = node_data(&d, cluster, nodes[0]);
    assert_eq!(after["nova"]["cpu_pinning"], json!([0, 1, 2, 3]), "{after}");
    assert_eq!(after["nova"]["enable_hugepages"], true);
    assert_eq!(after["cpu_pinning"], json!({}));
    assert_eq!(
        after["hugepages"],
        json!([{"count": 512, "numa_id": 0, "size": 2048}])
    );
    for flag in ["nova_cpu_pinning_enabled", "nova_hugepages_enabled"] {
        assert_eq!(
            after["network_metadata"]["nodes"][&host][flag], true,
            "{flag}"
        );
    }

    // Leaving the environment takes its values; outside one it has none.
    let r = http.post(
        &format!("/api/v1/clusters/{cluster}/unassignment/"),
        &format!(r#"[{{"id": {}}}]"#, nodes[0]),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.get(&path).json(), json!({}));
    assert_eq!(http.get(&format!("{path}/defaults")).json(), json!({}));
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/{}", nodes[0]),
        &json!({"roles": ["compute"]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.get(&path).json(), defaults, "back in: the defaults");
}

#[test]
fn refusals_name_their_field_and_write_nothing() {
    let d = TestDaemon::start_bundled("install");
    let (_, nodes) = d.environment(&["compute"], 1);
    let http = d.http();
    let path = format!("/api/v1/nodes/{}/attributes", nodes[0]);
    let set = json!({"cpu_pinning": {"nova": {"value": 2}}});
    assert_eq!(http.put(&path, &set.to_string()).status, 200);
    let kept = http.get(&path).json();

    // The test inventory: 32 CPUs, 256 GiB.
    for (body, field) in [
        (json!({"numa": {"x": {"value": 1}}}), "numa"),
        (
            json!({"cpu_pinning": {"dpdk": {"value": 1}}}),
            "cpu_pinning.dpdk",
        ),
        (
            json!({"cpu_pinning": {"nova": {"value": "2"}}}),
            "cpu_pinning.nova.value",
        ),
        (
            json!({"cpu_pinning": {"nova": {"value": -1}}}),
            "cpu_pinning.nova.value",
        ),
        (
            json!({"cpu_pinning": {"nova": {"value": 32}}}),
            "cpu_pinning.nova.value",
        ),
        (
            json!({"cpu_pinning": {"nova": {"type": "text"}}}),
            "cpu_pinning.nova.type",
        ),
        (
            json!({"hugepages": {"nova": {"value": {"4": 16}}}}),
            "hugepages.nova.value.4",
        ),
        (
            json!({"hugepages": {"nova": {"value": {"2048": "many"}}}}),
            "hugepages.nova.value.2048",
        ),
        (
            json!({"hugepages": {"nova": {"value": {"1048576": 300}}}}),
            "hugepages.nova.value.1048576",
        ),
    ] {
        let r = http.put(&path, &body.to_string());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.json()["fields"][0]["field"], field, "{body}: {}", r.body);
        assert_eq!(http.get(&path).json(), kept, "{body}: nothing written");
    }
    let r = http.put(&path, "[1]");
    assert_eq!(r.status, 400, "{}", r.body);

    // 31 of 32 CPUs may be pinned, not 32.
    let r = http.put(&path, r#"{"cpu_pinning": {"nova": {"value": 31}}}"#);
    assert_eq!(r.status, 200, "{}", r.body);

    // Below min: the release's min is 0, so a negative count is what is below it; the
    // module's unit tests cover a min above 0.
    let r = http.put(&path, r#"{"cpu_pinning": {"nova": {"value": -3}}}"#);
    assert_eq!(r.status, 400, "{}", r.body);

    // A node outside any environment: Nailgun's 400, nothing stored.
    let r = http.post(
        "/api/v1/agent/hello",
        &inventory("52:54:00:00:41:01").to_string(),
    );
    let lone = r.json()["node"]["id"].as_i64().unwrap();
    let lone_path = format!("/api/v1/nodes/{lone}/attributes");
    let r = http.put(&lone_path, &set.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .contains(&format!("Node '{lone}' doesn't belong to any cluster")),
        "{}",
        r.body
    );
    assert_eq!(http.get(&lone_path).json(), json!({}));
    assert_eq!(http.put("/api/v1/nodes/999/attributes", "{}").status, 404);
}

#[test]
fn a_viewer_reads_them() {
    let d = TestDaemon::start_bundled("install");
    let (_, nodes) = d.environment(&["compute"], 1);
    let path = format!("/api/v1/nodes/{}/attributes", nodes[0]);
    let viewer = d.user_token("watcher", "viewer");
    let http = d.http();
    assert_eq!(http.get_as(&path, &viewer).status, 200);
    assert_eq!(
        http.get_as(&format!("{path}/defaults"), &viewer).status,
        200
    );
}
