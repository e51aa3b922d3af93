//! Several graphs in one execution (`POST /graphs/execute/` with more than one graph): one
//! parent transaction whose children each run one graph, the next only once the one before it
//! is done; a failed graph ends the chain, `stop_deployment` stops it, a dry run records each
//! graph; refusals name their field and leave nothing behind; a master killed with -9
//! mid-chain carries it on after a restart. The agents are played over HTTP by
//! `crate::deploy`'s helpers.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Http, Resp, TestDaemon};
use crate::deploy::{Node, deployment, drive, next, put, serve, setup};

/// A shell task of id `id` on every node.
pub(crate) fn shell(id: &str) -> Value {
    json!({"id": id, "type": "shell", "version": "2.1.0", "roles": ["/.*/"],
           "parameters": {"cmd": format!("echo {id}"), "timeout": 60}})
}

/// An environment of a controller and a compute, deployed, with two graphs of its own:
/// `first` (task `first_task`) and `second` (task `second_task`).
pub(crate) fn deployed(base: &str) -> (i64, Vec<Node>) {
    let (cluster, nodes) = setup(base, &["controller", "compute"]);
    let r = put(base, &format!("/api/v1/clusters/{cluster}/changes"));
    assert_eq!(r.status, 202, "{}", r.body);
    let dep = r.json()["id"].as_i64().unwrap();
    drive(base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(base, dep)["status"], "done");
    for ty in ["first", "second"] {
        let r = Http::raw_post(
            &format!("{base}/api/v1/clusters/{cluster}/deployment_graphs/{ty}"),
            &json!({"tasks": [shell(&format!("{ty}_task"))]}).to_string(),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    (cluster, nodes)
}

/// A new environment of the first release with one discovered node (MAC `mac`) as compute,
/// nothing deployed.
pub(crate) fn fresh_environment(base: &str, mac: &str) -> i64 {
    let release = Http::raw_get_json(&format!("{base}/api/v1/releases"))[0]["id"]
        .as_i64()
        .unwrap();
    let r = Http::raw_post(
        &format!("{base}/api/v1/clusters"),
        &json!({"name": format!("fresh-{mac}"), "release_id": release}).to_string(),
        &[],
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let cluster = r.json()["id"].as_i64().unwrap();
    let r = Http::raw_post(
        &format!("{base}/api/v1/agent/hello"),
        &crate::common::inventory(mac).to_string(),
        &[],
    );
    let node = r.json()["node"]["id"].as_i64().unwrap();
    let r = Http::raw_put(
        &format!("{base}/api/v1/clusters/{cluster}/nodes/{node}"),
        &json!({"roles": ["compute"]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    cluster
}

pub(crate) fn execute(base: &str, body: &Value) -> Resp {
    Http::raw_post(
        &format!("{base}/api/v1/graphs/execute/"),
        &body.to_string(),
        &[],
    )
}

/// Execute graphs `first` then `second` on `cluster`: the parent transaction's id.
fn start_chain(base: &str, cluster: i64) -> i64 {
    let r = execute(
        base,
        &json!({"cluster": cluster, "graphs": [{"type": "first"}, {"type": "second"}]}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["id"].as_i64().unwrap()
}

pub(crate) fn transaction(base: &str, id: i64) -> Value {
    Http::raw_get_json(&format!("{base}/api/v1/transactions/{id}"))
}

/// The transactions of `cluster` that are graphs of `parent`, oldest first.
pub(crate) fn children(base: &str, cluster: i64, parent: i64) -> Vec<Value> {
    let all = Http::raw_get_json(&format!("{base}/api/v1/transactions?cluster_id={cluster}"));
    let mut out: Vec<Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["parent_id"] == parent)
        .cloned()
        .collect();
    out.sort_by_key(|t| t["id"].as_i64());
    out
}

/// Play the agents until transaction `parent` is over (the daemon's loop starts each next
/// graph within a second); the runs, in the order they ran.
pub(crate) fn drive_chain(
    base: &str,
    nodes: &[Node],
    fail: &dyn Fn(&Value) -> bool,
    parent: i64,
) -> Vec<(i64, String, i64)> {
    let start = Instant::now();
    let mut ran = Vec::new();
    loop {
        ran.extend(drive(base, nodes, fail, 1000));
        if transaction(base, parent)["status"] != "running" {
            return ran;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "transaction {parent} still running: {}; ran {ran:?}",
            transaction(base, parent)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn positions(ran: &[(i64, String, i64)], task: &str) -> Vec<usize> {
    ran.iter()
        .enumerate()
        .filter(|(_, r)| r.1 == task)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn two_graphs_run_one_after_another_as_one_transaction() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = deployed(&base);
    let r = execute(
        &base,
        &json!({"cluster": cluster, "graphs": [{"type": "first"}, {"type": "second"}],
                "dry_run": false, "noop_run": false, "force": false, "debug": false}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let t = r.json();
    let parent = t["id"].as_i64().unwrap();
    assert_eq!(
        (
            t["name"].as_str(),
            t["status"].as_str(),
            &t["parent_id"],
            &t["graph_type"],
            t["cluster"].as_i64()
        ),
        (
            Some("deploy"),
            Some("running"),
            &Value::Null,
            &Value::Null,
            Some(cluster)
        ),
        "{t}"
    );
    // Only the first graph runs yet.
    let kids = children(&base, cluster, parent);
    assert_eq!(kids.len(), 1, "{kids:?}");
    assert_eq!(
        (kids[0]["graph_type"].as_str(), kids[0]["status"].as_str()),
        (Some("first"), Some("running"))
    );
    // Nothing else of the environment starts meanwhile.
    let again = execute(
        &base,
        &json!({"cluster": cluster, "graphs": [{"type": "second"}]}),
    );
    assert_eq!(again.status, 409, "{}", again.body);
    let deploy = put(&base, &format!("/api/v1/clusters/{cluster}/changes"));
    assert_eq!(deploy.status, 409, "{}", deploy.body);

    let ran = drive_chain(&base, &nodes, &|_| false, parent);
    let t = transaction(&base, parent);
    assert_eq!(
        (t["status"].as_str(), t["progress"].as_i64(), &t["message"]),
        (Some("ready"), Some(100), &Value::Null),
        "{t}"
    );
    let kids = children(&base, cluster, parent);
    let shown: Vec<(&str, &str)> = kids
        .iter()
        .map(|k| {
            (
                k["graph_type"].as_str().unwrap(),
                k["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(shown, [("first", "ready"), ("second", "ready")]);
    // Every node ran the first graph's task before anyone ran the second's.
    let (first, second) = (
        positions(&ran, "first_task"),
        positions(&ran, "second_task"),
    );
    assert_eq!((first.len(), second.len()), (2, 2), "{ran:?}");
    assert!(first.iter().max() < second.iter().min(), "{ran:?}");
    assert!(
        kids[1]["time_start"].as_str() >= kids[0]["time_end"].as_str(),
        "{kids:?}"
    );
    // The environment is free again; deleting the parent takes its graphs with it.
    let r = d.http().delete(&format!("/api/v1/transactions/{parent}"));
    assert_eq!(r.status, 204, "{}", r.body);
    for k in &kids {
        let r = d.http().get(&format!("/api/v1/transactions/{}", k["id"]));
        assert_eq!(r.status, 404, "{}", r.body);
    }
}

#[test]
fn a_failed_graph_ends_the_chain_and_fails_the_parent_naming_it() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = deployed(&base);
    let parent = start_chain(&base, cluster);
    let ran = drive_chain(
        &base,
        &nodes,
        &|run| run["task"]["id"] == "first_task",
        parent,
    );
    assert!(positions(&ran, "second_task").is_empty(), "{ran:?}");
    let kids = children(&base, cluster, parent);
    assert_eq!(kids.len(), 1, "the second graph never started: {kids:?}");
    let t = transaction(&base, parent);
    assert_eq!(t["status"], "error", "{t}");
    let message = t["message"].as_str().unwrap();
    assert_eq!(
        message,
        format!(
            "graph 1 of 2 (first) failed: transaction {} stopped on a failed step; the graph \
             after it did not run",
            kids[0]["id"]
        )
    );
    // It stays over: the daemon's loop starts nothing more.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(children(&base, cluster, parent).len(), 1);
    assert_eq!(transaction(&base, parent)["status"], "error");
}

#[test]
fn stop_deployment_stops_the_running_graph_and_the_chain() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = deployed(&base);
    let parent = start_chain(&base, cluster);
    // A step is running on a node when the operator stops.
    assert!(
        next(&base, &nodes[0]).is_some(),
        "the first graph hands out its task"
    );
    let kid = children(&base, cluster, parent)[0]["id"].as_i64().unwrap();
    let r = put(
        &base,
        &format!("/api/v1/clusters/{cluster}/stop_deployment"),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let t = r.json();
    assert_eq!(
        (t["id"].as_i64(), t["status"].as_str()),
        (Some(parent), Some("error")),
        "{t}"
    );
    assert_eq!(
        t["message"],
        format!(
            "stopped by the operator at graph 1 of 2 (first, transaction {kid}); the graph \
             after it did not run"
        )
    );
    assert_eq!(deployment(&base, kid)["status"], "aborted");
    assert!(
        next(&base, &nodes[1]).is_none(),
        "nothing more is handed out"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(children(&base, cluster, parent).len(), 1, "no second graph");
    let r = put(
        &base,
        &format!("/api/v1/clusters/{cluster}/stop_deployment"),
    );
    assert_eq!(r.status, 400, "nothing left to stop: {}", r.body);
    // The environment is free again.
    let r = execute(
        &base,
        &json!({"cluster": cluster, "graphs": [{"type": "second"}], "dry_run": true}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_dry_run_records_each_graph_and_runs_nothing() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = deployed(&base);
    for flag in ["dry_run", "noop_run"] {
        let r = execute(
            &base,
            &json!({"cluster": cluster, "graphs": [{"type": "first"}, {"type": "second"}],
                    flag: true}),
        );
        assert_eq!(r.status, 200, "over as it starts: {}", r.body);
        let t = r.json();
        assert_eq!(
            (
                t["status"].as_str(),
                t["dry_run"].as_bool(),
                t["progress"].as_i64()
            ),
            (Some("ready"), Some(true), Some(100)),
            "{t}"
        );
        let kids = children(&base, cluster, t["id"].as_i64().unwrap());
        assert_eq!(kids.len(), 2, "{kids:?}");
        for k in &kids {
            assert_eq!(
                (k["status"].as_str(), k["dry_run"].as_bool()),
                (Some("ready"), Some(true))
            );
            let runs = deployment(&base, k["id"].as_i64().unwrap());
            assert!(runs["runs"]["pending"].as_u64().unwrap() > 0, "{runs}");
        }
        assert!(drive(&base, &nodes, &|_| false, 1000).is_empty());
    }
}

#[test]
fn refused_executions_name_their_field_and_leave_nothing() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = deployed(&base);
    let count = || {
        Http::raw_get_json(&format!("{base}/api/v1/transactions?cluster_id={cluster}"))
            .as_array()
            .unwrap()
            .len()
    };
    let before = count();
    // The field the refusal names first.
    let field = |body: &Value| {
        let r = execute(&base, body);
        assert_eq!(r.status, 400, "{}", r.body);
        r.json()["fields"][0]["field"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let g = |ty: &str| json!({"type": ty});
    let cases = [
        (
            json!({"cluster": cluster, "graphs": [g("first"), g("nope")]}),
            "graphs[1].type",
        ),
        (
            json!({"cluster": cluster, "graphs": [g("first"), {"type": "second", "nodes": [9999]}]}),
            "graphs[1].nodes",
        ),
        (
            json!({"cluster": cluster, "graphs": [g("first"), {"type": "second", "tasks": ["x"]}]}),
            "graphs[1].tasks",
        ),
        (
            json!({"cluster": cluster, "graphs": [{"type": "first", "when": 1}]}),
            "graphs[0].when",
        ),
        (
            json!({"cluster": cluster, "graphs": [g("first")], "subgraphs": []}),
            "subgraphs",
        ),
        (
            json!({"cluster": cluster, "graphs": [g("bad type"), g("second")]}),
            "graphs[0].type",
        ),
        (json!({"cluster": cluster, "graphs": []}), "graphs"),
    ];
    for (body, named) in cases {
        assert_eq!(field(&body), named, "{body}");
    }
    let r = execute(
        &base,
        &json!({"cluster": 999, "graphs": [g("first"), g("second")]}),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(count(), before, "nothing was written");

    // A first graph that cannot start refuses the whole execution: a node without an OS.
    let fresh = fresh_environment(&base, "52:54:00:00:31:01");
    let r = Http::raw_post(
        &format!("{base}/api/v1/clusters/{fresh}/deployment_graphs/first"),
        &json!({"tasks": [shell("first_task")]}).to_string(),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = execute(
        &base,
        &json!({"cluster": fresh, "graphs": [g("first"), g("default")]}),
    );
    assert_eq!(
        (r.status, r.json()["code"].as_str()),
        (400, Some("not_provisioned")),
        "{}",
        r.body
    );
    let left = Http::raw_get_json(&format!("{base}/api/v1/transactions?cluster_id={fresh}"));
    assert_eq!(left, json!([]), "no parent left behind");
    assert!(drive(&base, &nodes, &|_| false, 1000).is_empty());
}

/// Killed with -9 in the middle of the first graph, and again once it is done (between the
/// graphs, or as the second starts): each time the chain carries on after the restart, no
/// step runs twice, and it ends ready with both graphs run.
#[test]
fn a_master_killed_mid_chain_carries_it_on_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path());
    let base = format!("http://{}", served.addr);
    let (cluster, nodes) = deployed(&base);
    let parent = start_chain(&base, cluster);
    let mut ran = drive(&base, &nodes, &|_| false, 1);
    assert_eq!(ran.len(), 1, "{ran:?}");
    served.signal("KILL");
    let _ = served.wait();

    let served = serve(dir.path());
    let base = format!("http://{}", served.addr);
    assert_eq!(transaction(&base, parent)["status"], "running");
    // The rest of the first graph, then a kill as soon as it is done.
    let first = children(&base, cluster, parent)[0]["id"].as_i64().unwrap();
    let start = Instant::now();
    while deployment(&base, first)["status"] != "done" {
        ran.extend(drive(&base, &nodes, &|_| false, 1000));
        assert!(start.elapsed() < Duration::from_secs(30));
    }
    served.signal("KILL");
    let _ = served.wait();

    let served = serve(dir.path());
    let base = format!("http://{}", served.addr);
    ran.extend(drive_chain(&base, &nodes, &|_| false, parent));
    let t = transaction(&base, parent);
    assert_eq!(t["status"], "ready", "{t}");
    let kids = children(&base, cluster, parent);
    assert_eq!(kids.len(), 2, "{kids:?}");
    assert!(kids.iter().all(|k| k["status"] == "ready"), "{kids:?}");
    let ids: std::collections::HashSet<i64> = ran.iter().map(|r| r.2).collect();
    assert_eq!(ids.len(), ran.len(), "no run twice: {ran:?}");
    assert_eq!(positions(&ran, "first_task").len(), 2, "{ran:?}");
    assert_eq!(positions(&ran, "second_task").len(), 2, "{ran:?}");
    served.signal("TERM");
    let (code, _) = served.wait();
    assert_eq!(code, Some(0));
}
