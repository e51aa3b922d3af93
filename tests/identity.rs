//! Node identity and the unauthenticated surface against a real daemon on loopback, each attack
//! of issue 15 replayed: a stranger asking for a node's boot script, a hello or a Fuel update
//! listing another node's MAC, floods of boot scripts and discoveries; and what operators get
//! instead (delete, approve). A stranger is another loopback address: every 127/8 address is
//! this host's, so a connection can come from 127.0.0.2 as from another machine.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stoker::config::Layers;

use crate::boot::kernel_arg;
use crate::common::{Http, Resp, TestDaemon, inventory};

/// `GET path` over a connection from `from` (a 127/8 address): status and body.
pub fn get_from(server: SocketAddr, from: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        None,
    )
    .unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&local.into()).unwrap();
    socket
        .connect_timeout(&server.into(), Duration::from_secs(5))
        .unwrap();
    let mut stream: std::net::TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {server}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

/// A hello with `body`, with a bearer token or none.
fn hello(d: &TestDaemon, body: &Value, token: Option<&str>) -> Resp {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    Http::raw_post(&d.url("/api/v1/agent/hello"), &body.to_string(), &headers)
}

/// An inventory whose interfaces are exactly `macs`.
fn with_macs(macs: &[&str]) -> Value {
    let mut inv = inventory(macs[0]);
    inv["interfaces"] = macs
        .iter()
        .enumerate()
        .map(|(i, m)| json!({"name": format!("eth{i}"), "mac": m}))
        .collect();
    inv
}

/// The node that owns `mac` in the database, if any.
fn owner(d: &TestDaemon, mac: &str) -> Option<i64> {
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.query_row("SELECT node_id FROM node_macs WHERE mac = ?1", [mac], |r| {
        r.get(0)
    })
    .ok()
}

fn count(d: &TestDaemon, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn daemon(extra: &[(&'static str, &str)]) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let mut layers = Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("http.shutdown_timeout", "5".to_string())
        .with_flag("plugins.bundled", "skip".to_string());
    for (k, v) in extra {
        layers = layers.with_flag(k, (*v).to_string());
    }
    TestDaemon::start_with(layers.resolve().unwrap(), dir)
}

#[test]
fn a_stranger_neither_gets_nor_spoils_a_nodes_boot_token() {
    // Without stoker's DHCP the binding is `address`: the address the node is known by.
    let d = TestDaemon::start();
    let mac = "52:54:00:1d:00:01";
    let script = format!("/boot/{mac}.ipxe");
    let (status, body) = get_from(d.addr, "127.0.0.1", &script);
    assert_eq!(status, 200, "{body}");
    let token = kernel_arg(&body, "stoker.token");

    // The attack: a stranger asks for the same script. Before, it got a fresh token (which
    // also replaced the node's) and said hello with it, taking the node's agent token.
    let (status, body) = get_from(d.addr, "127.0.0.2", &script);
    assert_eq!(status, 403, "{body}");
    let refusal: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(refusal["code"], "forbidden");
    assert!(
        refusal["message"]
            .as_str()
            .unwrap()
            .contains("went to 127.0.0.1"),
        "{refusal}"
    );
    assert!(!body.contains("stoker.token"));

    // The node's own token still works: it was neither handed out nor replaced.
    let r = hello(&d, &inventory(mac), Some(&token));
    assert_eq!(r.status, 201, "{}", r.body);
    let agent_token = r.json()["agent_token"].as_str().unwrap().to_string();
    let id = r.json()["node"]["id"].as_i64().unwrap();
    let node = d.http().get(&format!("/api/v1/nodes/{id}")).json();
    assert_eq!(node["address"], "127.0.0.1");

    // From now on the node is known at 127.0.0.1: the stranger is refused again, the real
    // agent keeps its token, and the node booting again gets a token and a rotated agent token.
    let (status, body) = get_from(d.addr, "127.0.0.2", &script);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("known at 127.0.0.1"), "{body}");
    assert_eq!(hello(&d, &inventory(mac), Some(&agent_token)).status, 200);
    let (status, body) = get_from(d.addr, "127.0.0.1", &script);
    assert_eq!(status, 200, "{body}");
    let again = hello(
        &d,
        &inventory(mac),
        Some(&kernel_arg(&body, "stoker.token")),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_ne!(again.json()["agent_token"], agent_token);
    // One token row per MAC, whatever was asked.
    assert_eq!(count(&d, "SELECT COUNT(*) FROM boot_tokens"), 1);
}

#[test]
fn a_hello_cannot_take_another_nodes_mac() {
    let d = TestDaemon::start();
    let (victim, attacker) = ("52:54:00:1d:01:01", "52:54:00:1d:01:02");
    let v = hello(&d, &with_macs(&[victim]), None).json();
    let (v_id, v_token) = (
        v["node"]["id"].as_i64().unwrap(),
        v["agent_token"].as_str().unwrap().to_string(),
    );
    let a = hello(&d, &with_macs(&[attacker]), None).json();
    let a_token = a["agent_token"].as_str().unwrap().to_string();

    // The attacker's own agent token, the victim's MAC as a second interface.
    let r = hello(&d, &with_macs(&[attacker, victim]), Some(&a_token));
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.json()["code"], "conflict");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains(&format!("MAC {victim} belongs to node {v_id}")),
        "{}",
        r.body
    );
    assert_eq!(owner(&d, victim), Some(v_id));

    // A boot token of a MAC nobody has, with the victim's MAC beside it: refused, and the
    // token is not used up by the refusal.
    let fresh = "52:54:00:1d:01:03";
    let token = kernel_arg(
        &d.http().get(&format!("/boot/{fresh}.ipxe")).body,
        "stoker.token",
    );
    let r = hello(&d, &with_macs(&[fresh, victim]), Some(&token));
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(owner(&d, victim), Some(v_id));
    assert_eq!(owner(&d, fresh), None, "nothing written");
    // Without any token: the victim's MAC is known, so no new node takes it.
    let r = hello(&d, &with_macs(&["52:54:00:1d:01:04", victim]), None);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("already registered"), "{}", r.body);

    // The victim is untouched: its agent token works, its MACs are its own.
    let r = hello(&d, &with_macs(&[victim]), Some(&v_token));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["node"]["id"], v_id);
    assert_eq!(owner(&d, victim), Some(v_id));
    // And the fresh MAC's token still works for what it was for.
    let r = hello(&d, &with_macs(&[fresh]), Some(&token));
    assert_eq!(r.status, 201, "{}", r.body);
}

#[test]
fn boot_scripts_are_rate_limited_per_client() {
    let d = TestDaemon::start();
    // Before, 10,000 boot tokens were created in seconds: now one address gets a burst of 20.
    let statuses: Vec<u16> = (0..25)
        .map(|i| {
            get_from(
                d.addr,
                "127.0.0.1",
                &format!("/boot/52:54:00:1d:02:{i:02x}.ipxe"),
            )
            .0
        })
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        20,
        "{statuses:?}"
    );
    assert_eq!(statuses[24], 429);
    let (status, body) = get_from(d.addr, "127.0.0.1", "/boot/52:54:00:1d:02:ff.ipxe");
    assert_eq!(status, 429);
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["code"], "rate_limited");
    // Another client is not held back by the first one.
    let (status, _) = get_from(d.addr, "127.0.0.3", "/boot/52:54:00:1d:03:01.ipxe");
    assert_eq!(status, 200);
    assert_eq!(count(&d, "SELECT COUNT(*) FROM boot_tokens"), 21);
}

#[test]
fn discovery_and_boot_tokens_are_capped() {
    let d = daemon(&[("discovery.max_nodes", "3")]);
    let mac = |i: u8| format!("52:54:00:1d:04:{i:02x}");
    let mut ids = Vec::new();
    for i in 1..=3 {
        let r = hello(&d, &with_macs(&[&mac(i)]), None);
        assert_eq!(r.status, 201, "{}", r.body);
        ids.push(r.json()["node"]["id"].as_i64().unwrap());
    }
    let r = hello(&d, &with_macs(&[&mac(4)]), None);
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.json()["code"], "discovery_full");
    assert!(r.body.contains("discovery.max_nodes"), "{}", r.body);
    let fuel = json!({"mac": mac(5), "meta": {"interfaces": [{"name": "eth0", "mac": mac(5)}],
                      "cpu": {"total": 1}, "memory": {"total": 1u64 << 30}}});
    let r = Http::raw_post(&d.url("/api/nodes"), &fuel.to_string(), &[]);
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(
        d.http()
            .get("/api/v1/nodes")
            .json()
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // A known node still says hello; deleting one makes room.
    let r = d.http().delete(&format!("/api/v1/nodes/{}", ids[0]));
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(hello(&d, &with_macs(&[&mac(4)]), None).status, 201);

    // Unused boot tokens are capped the same way; a MAC's own token is replaced, not added.
    for i in 10..13 {
        assert_eq!(d.http().get(&format!("/boot/{}.ipxe", mac(i))).status, 200);
    }
    let r = d.http().get(&format!("/boot/{}.ipxe", mac(13)));
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.json()["code"], "discovery_full");
    assert_eq!(d.http().get(&format!("/boot/{}.ipxe", mac(10))).status, 200);
    assert_eq!(
        count(&d, "SELECT COUNT(*) FROM boot_tokens WHERE used_at IS NULL"),
        3
    );
}

#[test]
fn boot_tokens_expire_and_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let config = Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("plugins.bundled", "skip".to_string())
        .resolve()
        .unwrap();
    let d = TestDaemon::start_with(config.clone(), dir);
    let (old, used, fresh) = (
        "52:54:00:1d:05:01",
        "52:54:00:1d:05:02",
        "52:54:00:1d:05:03",
    );
    let token = |mac: &str| {
        kernel_arg(
            &d.http().get(&format!("/boot/{mac}.ipxe")).body,
            "stoker.token",
        )
    };
    let old_token = token(old);
    let used_token = token(used);
    token(fresh);
    assert_eq!(
        hello(&d, &with_macs(&[used]), Some(&used_token)).status,
        201
    );
    // Two hours ago: past the token's hour.
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.execute(
        "UPDATE boot_tokens SET issued_at = issued_at - 7200 WHERE mac = ?1",
        [old],
    )
    .unwrap();
    let r = hello(&d, &with_macs(&[old]), Some(&old_token));
    assert_eq!(r.status, 401, "an expired token is refused: {}", r.body);
    drop(conn);
    let dir = d.stop().unwrap();
    // The pruner runs at start and every minute: the expired and the used token go.
    let d = TestDaemon::start_with(config, dir);
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&d, "SELECT COUNT(*) FROM boot_tokens") != 1 {
        assert!(Instant::now() < deadline, "tokens were not pruned");
        std::thread::sleep(Duration::from_millis(100));
    }
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    let left: String = conn
        .query_row("SELECT mac FROM boot_tokens", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, fresh);
}

#[test]
fn operators_delete_nodes_not_in_an_environment() {
    let d = TestDaemon::start_bundled("install");
    let mac = "52:54:00:1d:06:01";
    let r = hello(&d, &inventory(mac), None);
    let (id, agent_token) = (
        r.json()["node"]["id"].as_i64().unwrap(),
        r.json()["agent_token"].as_str().unwrap().to_string(),
    );
    assert_eq!(d.http().get(&format!("/boot/{mac}.ipxe")).status, 200);
    let release = d.http().get("/api/v1/releases").json()[0]["id"]
        .as_i64()
        .unwrap();
    let cluster = d
        .http()
        .post(
            "/api/v1/clusters",
            &json!({"name": "env", "release_id": release}).to_string(),
        )
        .json()["id"]
        .as_i64()
        .unwrap();
    let assign = d.http().put(
        &format!("/api/v1/clusters/{cluster}/nodes/{id}"),
        &json!({"roles": ["compute"]}).to_string(),
    );
    assert_eq!(assign.status, 200, "{}", assign.body);
    // In an environment: refused, as Nailgun refuses it; the page says why instead of a button.
    let r = d.http().delete(&format!("/api/v1/nodes/{id}"));
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(
        r.json()["message"],
        format!(
            "node {id} is assigned to environment {cluster}; remove it from the environment first"
        ),
        "one space between words: {}",
        r.body
    );
    let page = d.http().get(&format!("/nodes/{id}")).body;
    assert!(!page.contains(&format!("action=\"/nodes/{id}/delete\"")));
    let r = d
        .http()
        .delete(&format!("/api/v1/clusters/{cluster}/nodes/{id}"));
    assert!(r.status < 300, "{}", r.body);
    let page = d.http().get(&format!("/nodes/{id}")).body;
    assert!(
        page.contains(&format!("action=\"/nodes/{id}/delete\"")),
        "{page}"
    );

    let r = d.http().delete(&format!("/api/v1/nodes/{id}"));
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(d.http().get(&format!("/api/v1/nodes/{id}")).status, 404);
    assert_eq!(d.http().delete(&format!("/api/v1/nodes/{id}")).status, 404);
    assert_eq!(d.http().delete("/api/v1/nodes/x").status, 400);
    // Its MACs, inventory and boot tokens went with it; its history stays.
    assert_eq!(count(&d, "SELECT COUNT(*) FROM node_macs"), 0);
    assert_eq!(count(&d, "SELECT COUNT(*) FROM node_inventories"), 0);
    assert_eq!(count(&d, "SELECT COUNT(*) FROM boot_tokens"), 0);
    assert_eq!(
        count(
            &d,
            "SELECT COUNT(*) FROM history WHERE kind = 'node.deleted'"
        ),
        1
    );
    assert_eq!(hello(&d, &inventory(mac), Some(&agent_token)).status, 401);
    // Booted again, it is discovered anew; the dashboard's button deletes it too.
    let r = hello(&d, &inventory(mac), None);
    assert_eq!(r.status, 201, "{}", r.body);
    let again = r.json()["node"]["id"].as_i64().unwrap();
    assert_ne!(again, id);
    let r = d.http().post_form(&format!("/nodes/{again}/delete"), "");
    assert_eq!(r.status, 200, "asked first: {}", r.body);
    assert!(r.body.contains("Delete "), "{}", r.body);
    assert_eq!(d.http().get(&format!("/api/v1/nodes/{again}")).status, 200);
    let r = d
        .http()
        .post_form(&format!("/nodes/{again}/delete"), "confirmed=1");
    assert_eq!(r.status, 303, "back to the node list: {}", r.body);
    assert_eq!(d.http().get(&format!("/api/v1/nodes/{again}")).status, 404);
}

#[test]
fn with_manual_approval_new_nodes_wait_without_tokens() {
    let d = daemon(&[("discovery.approval", "manual")]);
    let mac = "52:54:00:1d:07:01";
    let script = format!("/boot/{mac}.ipxe");
    let token = kernel_arg(&d.http().get(&script).body, "stoker.token");
    let r = hello(&d, &inventory(mac), Some(&token));
    assert_eq!(r.status, 201, "{}", r.body);
    let reply = r.json();
    assert_eq!(reply["node"]["approved"], false);
    assert!(
        reply.get("agent_token").is_none(),
        "no agent token: {reply}"
    );
    let id = reply["node"]["id"].as_i64().unwrap();

    // Until approved: the bootstrap without a token, and a hello is told to wait.
    let waiting = d.http().get(&script);
    assert_eq!(waiting.status, 200);
    assert!(!waiting.body.contains("stoker.token="), "{}", waiting.body);
    assert!(waiting.body.contains("approval"), "{}", waiting.body);
    let r = hello(&d, &inventory(mac), None);
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.json()["code"], "awaiting_approval");
    assert_eq!(hello(&d, &inventory(mac), Some(&token)).status, 401, "used");
    let page = d.http().get(&format!("/nodes/{id}")).body;
    assert!(page.contains("awaiting approval"), "{page}");
    assert!(page.contains(&format!("action=\"/nodes/{id}/approve\"")));

    let r = d.http().post(&format!("/api/v1/nodes/{id}/approve"), "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["approved"], true);
    let booted = d.http().get(&script).body;
    let r = hello(
        &d,
        &inventory(mac),
        Some(&kernel_arg(&booted, "stoker.token")),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["agent_token"].is_string());
    let page = d.http().get(&format!("/nodes/{id}")).body;
    assert!(!page.contains("awaiting approval"));

    // Fuel's registration waits too; the dashboard's button approves.
    let other = "52:54:00:1d:07:02";
    let fuel = json!({"mac": other, "meta": {"interfaces": [{"name": "eth0", "mac": other}],
                      "cpu": {"total": 1}, "memory": {"total": 1u64 << 30}}});
    let r = Http::raw_post(&d.url("/api/nodes"), &fuel.to_string(), &[]);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["approved"], false);
    let fid = r.json()["id"].as_i64().unwrap();
    let r = d.http().post_form(&format!("/nodes/{fid}/approve"), "");
    assert_eq!(r.status, 303, "back to the node page: {}", r.body);
    assert_eq!(
        d.http().get(&format!("/api/v1/nodes/{fid}")).json()["approved"],
        true
    );
    assert_eq!(d.http().post("/api/v1/nodes/999/approve", "").status, 404);
}
