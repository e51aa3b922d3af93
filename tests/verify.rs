//! Network verification as `fuel2 env network verify` drives it
//! (`PUT /clusters/{id}/network_configuration/neutron/verify`): a `verify_networks` task whose
//! runs the nodes' agents take (`network.verify`, each with the VLANs of its interfaces), judged
//! from what the probes report; refusals as Nailgun's; no node or environment state moves.

use serde_json::{Value, json};

use crate::common::{Http, Resp, TestDaemon, inventory};

struct Agent {
    id: i64,
    token: String,
}

fn join(d: &TestDaemon, cluster: i64, mac: &str, role: &str) -> Agent {
    let reply = d
        .http()
        .post("/api/v1/agent/hello", &inventory(mac).to_string());
    assert_eq!(reply.status, 201, "{}", reply.body);
    let reply = reply.json();
    let id = reply["node"]["id"].as_i64().unwrap();
    let r = d.http().put(
        &format!("/api/v1/clusters/{cluster}/nodes/{id}"),
        &json!({"roles": [role]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    Agent {
        id,
        token: reply["agent_token"].as_str().unwrap().to_string(),
    }
}

fn as_agent(d: &TestDaemon, a: &Agent, path: &str, body: &Value) -> Resp {
    Http::raw_post(
        &d.url(path),
        &body.to_string(),
        &[("authorization", &format!("Bearer {}", a.token))],
    )
}

/// The node's next run, which must be its probe.
fn probe_run(d: &TestDaemon, a: &Agent) -> Value {
    let r = as_agent(d, a, "/api/v1/agent/next", &json!({"node_id": a.id}));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["action"], "run", "{v}");
    let run = v["run"].clone();
    assert_eq!(run["step"]["interface"], "network", "{run}");
    assert_eq!(run["step"]["name"], "verify", "{run}");
    run
}

/// Report what the probe heard: per interface, per VLAN, the node ids.
fn report(d: &TestDaemon, a: &Agent, run: &Value, heard: Value) {
    let r = as_agent(
        d,
        a,
        &format!("/api/v1/agent/runs/{}/result", run["id"]),
        &json!({"attempt": run["attempt"], "ok": true, "output_tail": "probed",
                "report": {"node": a.id, "networks": heard}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Everything `run`'s spec asks to probe, heard from `peers`.
fn heard_all(run: &Value, peers: &[i64]) -> Value {
    let ifaces = run["step"]["args"]["interfaces"].as_array().unwrap();
    Value::Array(
        ifaces
            .iter()
            .map(|i| {
                let vlans: serde_json::Map<String, Value> = i["vlans"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| (v.to_string(), json!(peers)))
                    .collect();
                json!({"iface": i["iface"], "vlans": vlans})
            })
            .collect(),
    )
}

fn config(d: &TestDaemon, cluster: i64) -> Value {
    let r = d.http().get(&format!(
        "/api/v1/clusters/{cluster}/network_configuration/neutron"
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn verify(d: &TestDaemon, cluster: i64, body: &Value) -> Resp {
    d.http().put(
        &format!("/api/v1/clusters/{cluster}/network_configuration/neutron/verify"),
        &body.to_string(),
    )
}

fn task(d: &TestDaemon, id: &Value) -> Value {
    let r = d.http().get(&format!("/api/v1/transactions/{id}"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[test]
fn every_node_probes_its_networks_and_the_verdict_names_what_was_not_heard() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let r = http.post(
        "/api/v1/clusters",
        &json!({"name": "v", "release_id": http.get("/api/v1/releases").json()[0]["id"]})
            .to_string(),
    );
    let cluster = r.json()["id"].as_i64().unwrap();
    let a = join(&d, cluster, "52:54:00:00:50:01", "controller");
    let b = join(&d, cluster, "52:54:00:00:50:02", "compute");
    let c = config(&d, cluster);

    // A configuration that fails Nailgun's checks is refused, naming the network and key.
    let mut bad = c.clone();
    bad["networks"][0]["vlan_start"] = json!(5000);
    let r = verify(&d, cluster, &bad);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("vlan_start"), "{}", r.body);

    let r = verify(&d, cluster, &c);
    assert_eq!(r.status, 202, "{}", r.body);
    let t = r.json();
    assert_eq!(t["name"], "verify_networks");
    assert_eq!(t["status"], "running");
    assert_eq!(t["cluster"], cluster);
    // A second one while it runs is refused.
    let r = verify(&d, cluster, &c);
    assert_eq!(r.status, 409, "{}", r.body);

    let run_a = probe_run(&d, &a);
    let run_b = probe_run(&d, &b);
    // The spec: the node's interfaces with the VLANs of their networks (the admin network
    // untagged), and the window.
    let ifaces = run_a["step"]["args"]["interfaces"].as_array().unwrap();
    assert!(!ifaces.is_empty(), "{run_a}");
    assert!(
        ifaces
            .iter()
            .any(|i| i["vlans"].as_array().unwrap().contains(&json!(0))),
        "the admin network is probed untagged: {run_a}"
    );
    let tagged: Vec<u64> = ifaces
        .iter()
        .flat_map(|i| i["vlans"].as_array().unwrap().iter())
        .filter_map(Value::as_u64)
        .filter(|v| *v != 0)
        .collect();
    assert!(
        tagged.contains(&101) && tagged.contains(&102),
        "management and storage VLANs: {run_a}"
    );
    assert!(run_a["step"]["args"]["listen_ms"].as_u64().unwrap() > 0);
    assert_eq!(run_a["step"]["args"]["node"], a.id);

    // Node a heard everything from b; b missed a on VLAN 102.
    report(&d, &a, &run_a, heard_all(&run_a, &[b.id]));
    let t = task(&d, &t["id"]);
    assert_eq!(t["status"], "running", "one node still probing: {t}");
    let mut heard_b = heard_all(&run_b, &[a.id]);
    let mut missed_on = None;
    for i in heard_b.as_array_mut().unwrap() {
        if let Some(v) = i["vlans"].as_object_mut()
            && v.remove("102").is_some()
        {
            missed_on = Some(i["iface"].as_str().unwrap().to_string());
        }
    }
    let missed_on = missed_on.expect("b probes VLAN 102");
    report(&d, &b, &run_b, heard_b);
    let t = task(&d, &t["id"]);
    assert_eq!(t["status"], "error", "{t}");
    assert_eq!(t["progress"], 100, "{t}");
    let result = t["result"].as_array().unwrap();
    assert_eq!(result.len(), 1, "{t}");
    assert_eq!(result[0]["uid"], b.id);
    assert_eq!(result[0]["interface"], missed_on.as_str());
    assert_eq!(result[0]["absent_vlans"], json!([102]));
    assert!(
        t["message"].as_str().unwrap().contains("not verified"),
        "{t}"
    );

    // Nothing moved: the nodes are still discovered, the environment still new.
    for n in [&a, &b] {
        let node = http.get(&format!("/api/v1/nodes/{}", n.id)).json();
        assert_eq!(node["status"], "discover", "{node}");
    }
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{cluster}")).json()["status"],
        "new"
    );

    // Again, every frame heard: ready. Listed among the transactions by its name.
    let t = verify(&d, cluster, &c).json();
    let (run_a, run_b) = (probe_run(&d, &a), probe_run(&d, &b));
    report(&d, &a, &run_a, heard_all(&run_a, &[b.id]));
    report(&d, &b, &run_b, heard_all(&run_b, &[a.id]));
    let t = task(&d, &t["id"]);
    assert_eq!(t["status"], "ready", "{t}");
    assert_eq!(t["result"], json!([]), "{t}");
    let listed = http
        .get("/api/v1/transactions?transaction_types=verify_networks")
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");

    // A probe that failed names its node, and a deployment can start afterwards.
    let t = verify(&d, cluster, &c).json();
    let (run_a, run_b) = (probe_run(&d, &a), probe_run(&d, &b));
    report(&d, &a, &run_a, heard_all(&run_a, &[b.id]));
    let r = as_agent(
        &d,
        &b,
        &format!("/api/v1/agent/runs/{}/result", run_b["id"]),
        &json!({"attempt": run_b["attempt"], "ok": false, "output_tail": "",
                "error": "network.verify: interface eth9: no such interface on this node"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let t = task(&d, &t["id"]);
    assert_eq!(t["status"], "error", "{t}");
    let m = t["message"].as_str().unwrap();
    assert!(
        m.contains("didn't return data") && m.contains("eth9"),
        "{m}"
    );
    let node = http.get(&format!("/api/v1/nodes/{}", b.id)).json();
    assert_eq!(
        node["status"], "discover",
        "a failed probe is not the node's error: {node}"
    );
}

#[test]
fn verification_is_refused_as_nailgun_refuses_it() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let r = http.post(
        "/api/v1/clusters",
        &json!({"name": "v", "release_id": http.get("/api/v1/releases").json()[0]["id"]})
            .to_string(),
    );
    let cluster = r.json()["id"].as_i64().unwrap();
    join(&d, cluster, "52:54:00:00:51:01", "controller");
    let c = config(&d, cluster);
    // One node: a task finished in error that says why (200, as Nailgun raises it).
    let r = verify(&d, cluster, &c);
    assert_eq!(r.status, 200, "{}", r.body);
    let t = r.json();
    assert_eq!(t["status"], "error");
    assert_eq!(t["name"], "verify_networks");
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("At least two online nodes"),
        "{t}"
    );
    // Not JSON, no environment: named.
    let r = verify(&d, cluster, &json!("x"));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = verify(&d, 999, &c);
    assert_eq!(r.status, 404, "{}", r.body);
    // A viewer cannot start one (the route is an operator's).
    let route = stoker::http::route_table()
        .into_iter()
        .find(|r| r.path.ends_with("/neutron/verify"))
        .expect("the verify route");
    assert!(
        format!("{:?}", route.access).contains("Operator"),
        "{route:?}"
    );
}
