//! Nodes' BMCs through the API: enrollment by MAC with a BMC, the password never returned
//! nor stored in clear, bad input named by field with nothing written, roles, power actions
//! recorded in history and the audit log (against a BMC that does not answer: no emulator is
//! needed for the failure path), bulk actions all-or-nothing on unknown nodes, and a BMC step
//! refused at deployment creation for a node without a BMC, naming it. The drivers against
//! real emulators are `bmc_ipmi` and `bmc_redfish`; the power path end to end against
//! ipmi_sim is `power_through_ipmi_sim` here (ignored unless run with --ignored).

use serde_json::{Value, json};

use crate::common::{TestDaemon, inventory};

/// A TCP port on loopback where nothing listens (bound, then closed).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn enrollment_keeps_the_password_sealed_and_never_returns_it() {
    let d = TestDaemon::start();
    let http = d.http();
    let port = closed_port();
    let r = http.post(
        "/api/v1/nodes",
        &json!({"mac": "52:54:00:aa:00:01", "name": "rack1-u7",
                "bmc": {"driver": "redfish", "address": format!("http://127.0.0.1:{port}"),
                        "username": "root", "password": "Sup3r-s3cret-pw"}})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let node = r.json();
    let id = node["id"].as_i64().unwrap();
    assert_eq!(node["status"], "discover");
    assert_eq!(node["bmc"]["password_set"], true);
    assert!(!r.body.contains("Sup3r"), "{}", r.body);
    let b = http.get(&format!("/api/v1/nodes/{id}/bmc"));
    assert_eq!(b.status, 200);
    assert!(!b.body.contains("Sup3r"), "{}", b.body);
    assert_eq!(b.json()["driver"], "redfish");
    assert_eq!(b.json()["source"], "operator");
    // Not in the database file in clear.
    let db = std::fs::read(d.db_path()).unwrap();
    let wal = std::fs::read(d.db_path().with_extension("db-wal")).unwrap_or_default();
    assert!(
        !db.windows(15)
            .chain(wal.windows(15))
            .any(|w| w == b"Sup3r-s3cret-pw")
    );
    // The MAC is the enrolled node's: a hello without the boot token its network boot gets
    // is refused as for any known node (the PXE lab's redfish run boots one for real).
    let r = http.post(
        "/api/v1/agent/hello",
        &inventory("52:54:00:aa:00:01").to_string(),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains(&format!("node {id} has MAC")), "{}", r.body);
    // Changing the address keeps the password.
    let r = http.put(
        &format!("/api/v1/nodes/{id}/bmc"),
        &json!({"driver": "ipmi", "address": "127.0.0.1:1", "username": "admin"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["password_set"], true);
    assert_eq!(r.json()["driver"], "ipmi");
    // A second enrollment of the MAC is a conflict.
    let r = http.post(
        "/api/v1/nodes",
        &json!({"mac": "52:54:00:aa:00:01"}).to_string(),
    );
    assert_eq!(r.status, 409, "{}", r.body);
}

#[test]
fn bad_bmcs_are_refused_by_field_and_nothing_is_written() {
    let d = TestDaemon::start();
    let http = d.http();
    let r = http.post(
        "/api/v1/nodes",
        &json!({"mac": "52:54:00:aa:00:02",
                "bmc": {"driver": "ilo", "address": "x", "username": "-oProxyCommand=sh"}})
        .to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let fields: Vec<String> = r.json()["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap().to_string())
        .collect();
    for f in ["bmc.driver", "bmc.username", "bmc.password"] {
        assert!(fields.iter().any(|x| x == f), "{f}: {}", r.body);
    }
    assert_eq!(
        http.get("/api/v1/nodes").json().as_array().unwrap().len(),
        0
    );
    let r = http.post("/api/v1/nodes", &json!({"mac": "zz"}).to_string());
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["fields"][0]["field"], "mac");
    // An IPMI address that would be an option to ipmitool.
    let r = http.post(
        "/api/v1/agent/hello",
        &inventory("52:54:00:aa:00:03").to_string(),
    );
    let id = r.json()["node"]["id"].as_i64().unwrap();
    let r = http.put(
        &format!("/api/v1/nodes/{id}/bmc"),
        &json!({"driver": "ipmi", "address": "-H 10.0.0.1", "username": "a", "password": "b"})
            .to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["fields"][0]["field"], "address");
    assert_eq!(http.get(&format!("/api/v1/nodes/{id}/bmc")).status, 404);
    // A viewer reads, never writes.
    let viewer = d.user_token("watcher", "viewer");
    let r = http.get_as(&format!("/api/v1/nodes/{id}/bmc"), &viewer);
    assert_eq!(r.status, 404);
    let r = http.put_as(
        &format!("/api/v1/nodes/{id}/bmc"),
        &json!({"driver": "ipmi", "address": "10.0.0.1", "username": "a", "password": "b"})
            .to_string(),
        &viewer,
    );
    assert_eq!(r.status, 403, "{}", r.body);
}

#[test]
fn power_actions_are_recorded_and_a_dead_bmc_is_a_clear_failure() {
    let d = TestDaemon::start();
    let http = d.http();
    let port = closed_port();
    let enroll = |mac: &str| {
        let r = http.post(
            "/api/v1/nodes",
            &json!({"mac": mac, "bmc": {"driver": "redfish",
                "address": format!("http://127.0.0.1:{port}"), "username": "u", "password": "p"}})
            .to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        r.json()["id"].as_i64().unwrap()
    };
    let a = enroll("52:54:00:aa:01:01");
    let r = http.post(
        &format!("/api/v1/nodes/{a}/power"),
        &json!({"action": "on"}).to_string(),
    );
    assert_eq!(r.status, 502, "{}", r.body);
    let v = r.json();
    assert_eq!(v["ok"], false);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{port}")),
        "{v}"
    );
    let r = http.post(
        &format!("/api/v1/nodes/{a}/power"),
        &json!({"action": "warp"}).to_string(),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["fields"][0]["field"], "action");
    // History and audit name the action and the caller.
    let audit = http.get("/api/v1/audit").json();
    let found = audit.as_array().unwrap().iter().any(|e| {
        e["method"] == "BMC"
            && e["path"] == format!("/api/v1/nodes/{a}/power").as_str()
            && e["actor"] == "admin"
    });
    assert!(found, "{audit}");
    // Bulk: an unknown node or one without a BMC means nothing is done.
    let plain = http
        .post(
            "/api/v1/agent/hello",
            &inventory("52:54:00:aa:01:02").to_string(),
        )
        .json()["node"]["id"]
        .as_i64()
        .unwrap();
    let r = http.post(
        "/api/v1/nodes/power",
        &json!({"nodes": [a, plain], "action": "off"}).to_string(),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.body.contains(&format!("node {plain} has no BMC")),
        "{}",
        r.body
    );
    let b = enroll("52:54:00:aa:01:03");
    let r = http.post(
        "/api/v1/nodes/power",
        &json!({"nodes": [b, a, b], "action": "pxe"}).to_string(),
    );
    assert_eq!(r.status, 207, "{}", r.body);
    let v: Value = r.json();
    // A node named twice is acted on once, in the order first named.
    assert_eq!(v["failed"], 2);
    assert_eq!(v["results"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["results"][0]["node"], b);
    assert_eq!(v["results"][1]["node"], a);
}

#[test]
fn a_bmc_step_for_a_node_without_a_bmc_is_refused_naming_it() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["compute"], 1);
    let http = d.http();
    let steps = json!({"steps": [{"interface": "bios", "step": "apply_configuration",
        "priority": 95, "args": {"settings": [{"name": "ProcTurboMode", "value": "Disabled"}]}}]});
    let r = http.post(
        &format!("/api/v1/clusters/{cluster}/deploy"),
        &steps.to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["code"], "no_bmc");
    assert!(r.body.contains(&format!("node-{}", nodes[0])), "{}", r.body);
    // Bad arguments are named by field before anything is planned.
    let steps = json!({"steps": [{"interface": "raid", "step": "create_configuration",
        "priority": 95, "args": {"target_raid_config": {"logical_disks": [{"size_gb": 10, "raid_level": "7"}]}}}]});
    let r = http.post(
        &format!("/api/v1/clusters/{cluster}/deploy"),
        &steps.to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.json()["fields"][0]["field"],
        "steps[0].args.target_raid_config.logical_disks[0].raid_level"
    );
    // The agent's reported BMC is kept as discovered, without credentials.
    let mut inv = inventory("52:54:00:aa:02:01");
    inv["bmc"] = json!({"driver": "ipmi", "address": "10.20.0.99"});
    let r = http.post("/api/v1/agent/hello", &inv.to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["node"]["id"].as_i64().unwrap();
    let b = http.get(&format!("/api/v1/nodes/{id}/bmc")).json();
    assert_eq!(b["source"], "discovered");
    assert_eq!(b["address"], "10.20.0.99");
    assert_eq!(b["password_set"], false);
    inv["bmc"] = json!({"driver": "ipmi", "address": "bmc.evil.example"});
    let r = http.post("/api/v1/agent/hello", &json!(inv).to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["fields"][0]["field"], "bmc");
}

#[test]
#[ignore = "needs ipmi_sim and ipmitool (.ci/bmc-emulators.sh installs them)"]
fn power_through_ipmi_sim() {
    let sim = crate::common::ipmi_sim::IpmiSim::start();
    let d = TestDaemon::start();
    let http = d.http();
    let ep = sim.endpoint();
    let r = http.post(
        "/api/v1/nodes",
        &json!({"mac": "52:54:00:aa:03:01", "bmc": {"driver": "ipmi", "address": sim.address(),
            "username": ep.username, "password": ep.password}})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().unwrap();
    let r = http.post(
        &format!("/api/v1/nodes/{id}/power"),
        &json!({"action": "pxe"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["power_state"], "on");
    assert_eq!(sim.power(), "1");
    assert_eq!(sim.boot(), "pxe");
    let r = http.post(
        "/api/v1/nodes/power",
        &json!({"nodes": [id], "action": "off"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(sim.power(), "0");
    let b = http.get(&format!("/api/v1/nodes/{id}/bmc")).json();
    assert_eq!(b["power_state"], "off", "{b}");
}

#[test]
fn the_dashboard_sets_a_bmc_and_powers_nodes_with_a_line_per_node() {
    let d = TestDaemon::start();
    let http = d.http();
    let port = closed_port();
    let mut ids = Vec::new();
    for mac in ["52:54:00:aa:03:01", "52:54:00:aa:03:02"] {
        let r = http.post("/api/v1/agent/hello", &inventory(mac).to_string());
        ids.push(r.json()["node"]["id"].as_i64().unwrap());
    }
    let (a, b) = (ids[0], ids[1]);
    // The node page's BMC form: saved, shown without its password.
    let address = crate::common::urlencode(&format!("http://127.0.0.1:{port}"));
    for id in [a, b] {
        let r = http.submit(
            &format!("/nodes/{id}/bmc"),
            &format!("driver=redfish&address={address}&username=root&password=Form-s3cret-pw"),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("BMC saved"), "{}", r.body);
        assert!(r.body.contains(&format!("http://127.0.0.1:{port}")));
        assert!(!r.body.contains("Form-s3cret-pw"));
        assert!(r.body.contains(r#"data-confirm="Power off"#), "{}", r.body);
    }
    // A bad field is said on the page, and nothing changes.
    let r = http.submit(
        &format!("/nodes/{a}/bmc"),
        "driver=ipmi&address=-H%20evil&username=root",
    );
    assert!(r.body.contains("BMC not saved"), "{}", r.body);
    assert!(r.body.contains("address"), "{}", r.body);
    assert_eq!(
        http.get(&format!("/api/v1/nodes/{a}/bmc")).json()["driver"],
        "redfish"
    );
    // Bulk power from the node list: reviewed, then a line per node in the notice.
    let review = http.get(&format!("/nodes/bulk?do=power&act=off&nodes={b}&nodes={a}"));
    assert_eq!(review.status, 200, "{}", review.body);
    assert!(review.body.contains("Power off 2 nodes"), "{}", review.body);
    let r = http.submit(
        "/nodes/bulk",
        &format!("do=power&act=off&nodes={b}&nodes={a}&confirmed=1"),
    );
    assert!(r.body.contains("Power off: 0 done. 2 not:"), "{}", r.body);
    for id in [a, b] {
        let name = http.get(&format!("/api/v1/nodes/{id}")).json()["name"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            r.body.contains(&format!("\n{name}: ")),
            "{name}: {}",
            r.body
        );
    }
    let r = http.submit("/nodes/bulk", "do=power&act=off&confirmed=1");
    assert!(
        r.body.contains("Nothing done: tick at least one node"),
        "{}",
        r.body
    );
    // One node's button, with what the BMC said.
    let r = http.submit(&format!("/nodes/{a}/power"), "action=on");
    assert!(r.body.contains("Power on failed"), "{}", r.body);
    // The BMC that did not answer is flagged on its node at once.
    assert!(
        r.body.contains(r#"badge-error">unreachable<"#),
        "{}",
        r.body
    );
    let bmc = http.get(&format!("/api/v1/nodes/{a}/bmc")).json();
    assert!(
        bmc["power_error"].as_str().unwrap().contains("unreachable"),
        "{bmc}"
    );
    // The activity feed has the actions.
    let feed = http.get("/").body;
    assert!(feed.contains("power off by admin failed"), "{feed}");
    assert!(feed.contains("power on by admin failed"), "{feed}");
    // A viewer sees the BMC and its power, but neither the form nor the buttons.
    d.user_token("vic", "viewer");
    let (session, _) = crate::common::form_login(&d.url(""), "vic", "vic-password-123");
    let page = |path: &str| {
        let mut r = ureq::get(d.url(path))
            .header("cookie", &format!("stoker_session={session}"))
            .call()
            .unwrap();
        r.body_mut().read_to_string().unwrap()
    };
    let html = page(&format!("/nodes/{a}"));
    assert!(html.contains("BMC and power"), "{html}");
    assert!(
        !html.contains("Save BMC") && !html.contains("data-confirm"),
        "{html}"
    );
    let html = page("/nodes");
    assert!(!html.contains("power-action") && !html.contains(r#"name="nodes""#));
}
