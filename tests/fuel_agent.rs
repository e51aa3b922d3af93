//! Fuel's nailgun-agent endpoints against a real daemon: discovery only, no token, nothing past
//! `discover` touched.

use serde_json::{Value, json};

use crate::common::{Http, TestDaemon, inventory};

/// A node document as nailgun-agent sends it (trimmed to what stoker reads).
fn fuel_node(mac: &str, memory: u64) -> Value {
    json!({
        "mac": mac,
        "status": "discover",
        "meta": {
            "interfaces": [{"name": "eth0", "mac": mac, "max_speed": 1000, "current_speed": 1000,
                            "state": "up"}],
            "cpu": {"total": 8, "real": 1, "spec": [{"model": "Intel Xeon", "frequency": 2400}]},
            "memory": {"total": memory},
            "disks": [{"name": "sda", "size": 107374182400u64, "model": "QEMU HARDDISK",
                       "serial": null}],
            "system": {"manufacturer": "QEMU", "product": "Standard PC", "serial": "0001"}
        }
    })
}

#[test]
fn fuel_agents_register_and_refresh_discovered_nodes_only() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let mac = "52:54:00:fe:00:01";
    let r = Http::raw_post(
        &format!("{base}/api/nodes"),
        &fuel_node(mac, 8 << 30).to_string(),
        &[],
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let node = r.json();
    assert_eq!(node["status"], "discover");
    assert!(
        node.get("agent_token").is_none(),
        "no token through Fuel's API"
    );
    let id = node["id"].as_i64().unwrap();
    let v = Http::raw_get_json(&format!("{base}/api/v1/nodes/{id}"));
    assert_eq!(v["inventory"]["memory_bytes"], 8u64 << 30);
    assert_eq!(v["inventory"]["cpu"]["count"], 8);
    assert_eq!(v["inventory"]["disks"][0]["size_bytes"], 107374182400u64);
    assert_eq!(v["inventory"]["system"]["vendor"], "QEMU");
    // And back in Nailgun's shape, for `fuel2 node show`: the same facts under `meta`.
    let sent = fuel_node(mac, 8 << 30);
    for path in [
        "/meta/memory/total",
        "/meta/cpu/total",
        "/meta/disks/0/size",
        "/meta/disks/0/name",
        "/meta/interfaces/0/mac",
        "/meta/system/manufacturer",
    ] {
        assert_eq!(v.pointer(path), sent.pointer(path), "{path}");
    }
    assert_eq!(v["cluster"], serde_json::Value::Null);
    assert_eq!(v["manufacturer"], "QEMU");

    // Registered again: 409, as Nailgun answers.
    let r = Http::raw_post(
        &format!("{base}/api/nodes"),
        &fuel_node(mac, 8 << 30).to_string(),
        &[],
    );
    assert_eq!(r.status, 409, "{}", r.body);

    // The periodic update refreshes a discovered node.
    let r = Http::raw_put(
        &format!("{base}/api/nodes/agent"),
        &fuel_node(mac, 16 << 30).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["id"], id);
    let v = Http::raw_get_json(&format!("{base}/api/v1/nodes/{id}"));
    assert_eq!(v["inventory"]["memory_bytes"], 16u64 << 30);

    // Unknown MAC: 404. A bad document names its field.
    let r = Http::raw_put(
        &format!("{base}/api/nodes/agent"),
        &fuel_node("52:54:00:fe:00:99", 1).to_string(),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let mut bad = fuel_node("52:54:00:fe:00:02", 1);
    bad["meta"]["interfaces"][0]["mac"] = json!("not-a-mac");
    let r = Http::raw_post(&format!("{base}/api/nodes"), &bad.to_string(), &[]);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("interfaces"), "{}", r.body);

    // A node an environment took further is left alone.
    let mac2 = "52:54:00:fe:00:03";
    let hello = Http::raw_post(
        &format!("{base}/api/v1/agent/hello"),
        &inventory(mac2).to_string(),
        &[],
    )
    .json();
    let (id2, token) = (
        hello["node"]["id"].as_i64().unwrap(),
        hello["agent_token"].as_str().unwrap().to_string(),
    );
    let release = Http::raw_get_json(&format!("{base}/api/v1/releases"))[0]["id"]
        .as_i64()
        .unwrap();
    let c = Http::raw_post(
        &format!("{base}/api/v1/clusters"),
        &json!({"name": "env", "release_id": release}).to_string(),
        &[],
    )
    .json();
    let cluster = c["id"].as_i64().unwrap();
    let r = Http::raw_put(
        &format!("{base}/api/v1/clusters/{cluster}/nodes/{id2}"),
        &json!({"roles": ["compute"]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 202, "{}", r.body);
    let r = Http::raw_post(
        &format!("{base}/api/v1/agent/next"),
        &json!({"node_id": id2}).to_string(),
        &[("authorization", &format!("Bearer {token}"))],
    );
    assert_eq!(r.json()["action"], "run", "{}", r.body);
    let before = Http::raw_get_json(&format!("{base}/api/v1/nodes/{id2}"));
    assert_eq!(before["status"], "provisioning");
    let r = Http::raw_put(
        &format!("{base}/api/nodes/agent"),
        &fuel_node(mac2, 1 << 30).to_string(),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let after = Http::raw_get_json(&format!("{base}/api/v1/nodes/{id2}"));
    assert_eq!(after["inventory"], before["inventory"]);
}

#[test]
fn fuels_update_never_moves_a_mac() {
    let d = TestDaemon::start();
    let base = d.url("");
    let (a, b) = ("52:54:00:fe:01:01", "52:54:00:fe:01:02");
    let r = Http::raw_post(
        &format!("{base}/api/nodes"),
        &fuel_node(a, 8 << 30).to_string(),
        &[],
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let node_a = r.json()["id"].as_i64().unwrap();
    let hello = Http::raw_post(
        &format!("{base}/api/v1/agent/hello"),
        &inventory(b).to_string(),
        &[],
    );
    let node_b = hello.json()["node"]["id"].as_i64().unwrap();
    // Node B is deployed: its next network boot is from its disk.
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.execute("UPDATE nodes SET status = 'ready' WHERE id = ?1", [node_b])
        .unwrap();
    let owner = |mac: &str| -> i64 {
        conn.query_row("SELECT node_id FROM node_macs WHERE mac = ?1", [mac], |r| {
            r.get(0)
        })
        .unwrap()
    };
    // The attack: node A's periodic update lists B's MAC as one of A's interfaces. It used to
    // move the MAC to A, so B's next boot got the bootstrap instead of its disk.
    let mut doc = fuel_node(a, 8 << 30);
    doc["meta"]["interfaces"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "eth1", "mac": b, "state": "up"}));
    let r = Http::raw_put(&format!("{base}/api/nodes/agent"), &doc.to_string());
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.body
            .contains(&format!("MAC {b} belongs to node {node_b}")),
        "{}",
        r.body
    );
    assert_eq!(owner(b), node_b);
    let script = d.http().get(&format!("/boot/{b}.ipxe")).body;
    assert!(script.contains("booting from local disk"), "{script}");
    // B's own document, unauthenticated, changes nothing past discovery either.
    let mut doc = fuel_node(b, 1 << 30);
    doc["meta"]["interfaces"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "eth1", "mac": "52:54:00:fe:01:09"}));
    let r = Http::raw_put(&format!("{base}/api/nodes/agent"), &doc.to_string());
    assert_eq!(r.status, 409, "{}", r.body);
    let b_macs: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM node_macs WHERE node_id = ?1",
            [node_b],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(b_macs, 2, "B keeps exactly its two MACs");
    // A, still in discover, may report a new NIC of its own, as in Fuel.
    let mut doc = fuel_node(a, 8 << 30);
    doc["meta"]["interfaces"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "eth1", "mac": "52:54:00:fe:01:03"}));
    let r = Http::raw_put(&format!("{base}/api/nodes/agent"), &doc.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(owner("52:54:00:fe:01:03"), node_a);
}
