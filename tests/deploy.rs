//! Deployments over the real API with the bundled release: the master hands each node its runs
//! one at a time, in order, waiting across nodes; results are idempotent by run and attempt; a
//! failed step stops the deployment and a retry runs only it again; a master killed with -9
//! mid-deployment finishes it after a restart without running a succeeded step again. The
//! agent side is played by this test over HTTP, exactly as the protocol says: the bootstrap's
//! agent with its agent token until `power.reboot_to_disk`, then the installed OS's service
//! agent with the credential `deploy.configure` was handed.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{Value, json};
use stoker::engine::plugin::PackageFiles;

use crate::common::bin::{Served, stoker};
use crate::common::{Http, Resp, TestDaemon, build, fixture_files, inventory};

pub(crate) struct Node {
    pub(crate) id: i64,
    mac: String,
    /// The bootstrap agent's token.
    token: String,
    /// The service credential handed out with `deploy.configure`.
    service: std::cell::RefCell<Option<String>>,
    /// The service agent's token, from its hello with that credential once the node runs its
    /// installed OS (after `reboot_to_disk` reported ok).
    os_token: std::cell::RefCell<Option<String>>,
    /// Its deletion graph's `erase_node` ran: the node rebooted into the network boot and
    /// asks nothing more of this environment.
    erased: std::cell::Cell<bool>,
}

impl Node {
    fn new(id: i64, mac: &str, token: String) -> Node {
        Node {
            id,
            mac: mac.to_string(),
            token,
            service: Default::default(),
            os_token: Default::default(),
            erased: Default::default(),
        }
    }

    /// What the agent now running on the node authenticates with.
    pub(crate) fn bearer(&self) -> String {
        self.os_token
            .borrow()
            .clone()
            .unwrap_or_else(|| self.token.clone())
    }

    /// The installed OS booted: its service agent says hello with the credential.
    fn boot_os(&self, base: &str) {
        let answer = self.boot_os_claiming(base, false);
        assert!(answer.get("next").is_none(), "not asked for: {answer}");
    }

    /// [`Node::boot_os`], the hello asking for the node's next run (`claim_next`) or not;
    /// the hello's answer.
    fn boot_os_claiming(&self, base: &str, claim_next: bool) -> Value {
        let credential = self.service.borrow().clone().expect("configure ran");
        let mut body = json!({"node_id": self.id, "credential": credential, "version": VERSION,
                              "macs": [self.mac]});
        if claim_next {
            body["claim_next"] = json!(true);
        }
        let r = Http::raw_post(
            &format!("{base}/api/v1/agent/service/hello"),
            &body.to_string(),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let answer = r.json();
        let token = answer["agent_token"].as_str().unwrap().to_string();
        *self.os_token.borrow_mut() = Some(token);
        answer
    }
}

/// The master's version, which a service agent must run.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `POST /api/v1/agent/service/hello` as an installed OS's agent.
fn service_hello(base: &str, node: i64, credential: &str, macs: &[&str], version: &str) -> Resp {
    Http::raw_post(
        &format!("{base}/api/v1/agent/service/hello"),
        &json!({"node_id": node, "credential": credential, "version": version, "macs": macs})
            .to_string(),
        &[],
    )
}

/// A node that boots (the bootstrap's hello) and gets `role` in environment `cluster`.
fn join(base: &str, cluster: i64, mac: &str, role: &str) -> Node {
    let reply = Http::raw_post(
        &format!("{base}/api/v1/agent/hello"),
        &inventory(mac).to_string(),
        &[],
    )
    .json();
    let id = reply["node"]["id"].as_i64().unwrap();
    let token = reply["agent_token"].as_str().unwrap().to_string();
    let r = Http::raw_put(
        &format!("{base}/api/v1/clusters/{cluster}/nodes/{id}"),
        &json!({"roles": [role]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    Node::new(id, mac, token)
}

fn post(base: &str, path: &str, token: &str, body: &Value) -> Resp {
    Http::raw_post(
        &format!("{base}{path}"),
        &body.to_string(),
        &[("authorization", &format!("Bearer {token}"))],
    )
}

/// An environment with the bundled release and one node per role; returns its id and nodes.
pub(crate) fn setup(base: &str, roles: &[&str]) -> (i64, Vec<Node>) {
    let release = Http::raw_get_json(&format!("{base}/api/v1/releases"))[0]["id"]
        .as_i64()
        .unwrap();
    let r = Http::raw_post(
        &format!("{base}/api/v1/clusters"),
        &json!({"name": "env", "release_id": release}).to_string(),
        &[],
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let cluster = r.json()["id"].as_i64().unwrap();
    let nodes = roles
        .iter()
        .enumerate()
        .map(|(i, role)| join(base, cluster, &format!("52:54:00:00:30:{i:02x}"), role))
        .collect();
    (cluster, nodes)
}

/// Ask for a run as `node`; `None` when told to wait (or the node was erased).
pub(crate) fn next(base: &str, node: &Node) -> Option<Value> {
    if node.erased.get() {
        return None;
    }
    let r = post(
        base,
        "/api/v1/agent/next",
        &node.bearer(),
        &json!({"node_id": node.id}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    match v["action"].as_str() {
        Some("run") => {
            let run = &v["run"];
            if run_name(run) == "deploy.configure" {
                let credential = run["step"]["args"]["os_agent"]["config"]["credential"]
                    .as_str()
                    .expect("configure carries the service credential");
                *node.service.borrow_mut() = Some(credential.to_string());
            }
            Some(run.clone())
        }
        Some("wait") => None,
        other => panic!("unexpected action {other:?}: {v}"),
    }
}

pub(crate) fn report(base: &str, node: &Node, run: &Value, ok: bool) -> Resp {
    let r = post(
        base,
        &format!("/api/v1/agent/runs/{}/result", run["id"]),
        &node.bearer(),
        &json!({"attempt": run["attempt"], "ok": ok, "exit_code": if ok {0} else {1},
                "output_tail": format!("ran {}", run_name(run)), "error": if ok {Value::Null} else {json!("exit 1")}}),
    );
    if ok && r.status == 200 && run_name(run) == "power.reboot_to_disk" {
        node.boot_os(base);
    }
    if ok && r.status == 200 && run_name(run) == "erase_node" {
        node.erased.set(true);
    }
    r
}

pub(crate) fn run_name(run: &Value) -> String {
    match run["task"]["id"].as_str() {
        Some(t) => t.to_string(),
        None => format!(
            "{}.{}",
            run["step"]["interface"].as_str().unwrap(),
            run["step"]["name"].as_str().unwrap()
        ),
    }
}

/// Poll every node round-robin, succeeding each run except those `fail` picks, until nothing
/// is handed out for a few rounds. Returns (node id, run name) in the order they ran.
pub(crate) fn drive(
    base: &str,
    nodes: &[Node],
    fail: &dyn Fn(&Value) -> bool,
    limit: usize,
) -> Vec<(i64, String, i64)> {
    let mut ran = Vec::new();
    let mut idle = 0;
    while idle < 3 && ran.len() < limit {
        let mut any = false;
        for n in nodes {
            if let Some(run) = next(base, n) {
                any = true;
                let bad = fail(&run);
                let r = report(base, n, &run, !bad);
                assert_eq!(r.status, 200, "{}", r.body);
                ran.push((n.id, run_name(&run), run["id"].as_i64().unwrap()));
                if ran.len() >= limit {
                    break;
                }
            }
        }
        idle = if any { 0 } else { idle + 1 };
    }
    ran
}

/// `node` has left its environment for good: in discover, not pending deletion, in no
/// environment, and neither its agent's token nor its service credential works any more.
fn assert_released(base: &str, node: &Node) {
    let v = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", node.id));
    assert_eq!(
        (
            v["status"].as_str(),
            v["pending_deletion"].as_bool(),
            &v["cluster"]
        ),
        (Some("discover"), Some(false), &Value::Null),
        "{v}"
    );
    let r = post(
        base,
        "/api/v1/agent/next",
        &node.bearer(),
        &json!({"node_id": node.id}),
    );
    assert_eq!(r.status, 401, "its agent token is gone: {}", r.body);
    let credential = node.service.borrow().clone().unwrap();
    let r = service_hello(base, node.id, &credential, &[&node.mac], VERSION);
    assert_eq!(r.status, 401, "its credential is erased: {}", r.body);
}

/// Deploy the environment (`POST /api/v1/clusters/{id}/deploy`, nothing in the body): the
/// deployment's id, once the master took it (202).
pub(crate) fn start(base: &str, cluster: i64) -> i64 {
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["id"].as_i64().unwrap()
}

pub(crate) fn deployment(base: &str, id: i64) -> Value {
    Http::raw_get_json(&format!("{base}/api/v1/deployments/{id}"))
}

#[test]
fn a_deployment_runs_every_node_to_ready_in_order() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 202, "{}", r.body);
    let dep = r.json()["id"].as_i64().unwrap();
    // The answer counts the runs it made, as the deployment's own read counts them (a master
    // run may have moved on since: the totals agree, and the statuses add up).
    let counted = &r.json()["runs"];
    assert!(counted["pending"].as_u64().unwrap() > 0, "{counted}");
    assert_eq!(
        counted["total"],
        deployment(&base, dep)["runs"]["total"],
        "{counted}"
    );
    let by_status: u64 = ["pending", "running", "ok", "failed", "skipped"]
        .iter()
        .map(|s| counted[s].as_u64().unwrap())
        .sum();
    assert_eq!(Some(by_status), counted["total"].as_u64(), "{counted}");
    // A second Deploy while this one runs is refused.
    let again = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(again.status, 409, "{}", again.body);

    let ran = drive(&base, &nodes, &|_| false, 1000);
    let d1 = deployment(&base, dep);
    assert_eq!(d1["status"], "done", "{d1}");
    assert_eq!(d1["runs"]["failed"], 0);
    // Each node: provisioning in the bootstrap (configure, reboot to disk), then its graph
    // tasks on the installed OS.
    for n in &nodes {
        let mine: Vec<&str> = ran
            .iter()
            .filter(|r| r.0 == n.id)
            .map(|r| r.1.as_str())
            .collect();
        assert_eq!(
            mine[..2],
            ["deploy.configure", "power.reboot_to_disk"],
            "{mine:?}"
        );
        assert!(mine[2..].contains(&"netconfig"), "{mine:?}");
        let node = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
        assert_eq!(node["status"], "ready", "{node}");
    }
    // Cross-node order: nova-compute (compute) after nova-controller (controller).
    let pos = |name: &str| ran.iter().position(|r| r.1 == name).unwrap();
    assert!(pos("nova-controller") < pos("nova-compute"), "{ran:?}");
    // Every run was handed out once.
    let ids: HashSet<i64> = ran.iter().map(|r| r.2).collect();
    assert_eq!(ids.len(), ran.len());
    // Each step's record is kept: start, end, result and output tail.
    let steps = d1["steps"].as_array().unwrap();
    let netconfig = steps
        .iter()
        .find(|s| s["task"] == "netconfig" && s["node_id"] == nodes[1].id)
        .unwrap();
    assert_eq!(netconfig["status"], "ok");
    assert!(netconfig["started_at"].is_i64() && netconfig["finished_at"].is_i64());
    assert_eq!(netconfig["output_tail"], "ran netconfig");
    let env = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}"));
    assert_eq!(env["status"], "operational");
    // The nodes' hellos (discovery, then their service agents' after the reboot) are in their
    // histories, not the audit log.
    let audit = d.http().get("/api/v1/audit").json();
    assert!(
        audit.as_array().is_some_and(|a| a
            .iter()
            .all(|e| !e["path"].as_str().unwrap_or("").contains("hello"))),
        "{audit}"
    );
    // The environment page shows the deployment and its timeline; the fragment refreshes it.
    let page = d.http().get(&format!("/environments/{cluster}"));
    assert!(page.body.contains("class=\"timeline\""), "{}", page.body);
    assert!(page.body.contains(&format!("Deployment {dep}")));
    let frag = d.http().get(&format!("/environments/{cluster}/timeline"));
    assert!(frag.body.contains("data-status=\"done\""), "{}", frag.body);
    assert_eq!(
        frag.body.matches("<rect class=\"tl-ok\"").count(),
        d1["runs"]["ok"].as_u64().unwrap() as usize
    );
    // The deployed state was kept: a redeploy plan skips the changed() task.
    let plan = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}/plan"));
    let skipped = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["tasks"].as_array().unwrap())
        .filter(|t| t["id"] == "setup_repositories")
        .all(|t| t["status"] == "skipped");
    assert!(skipped, "{plan}");
}

#[test]
fn results_are_idempotent_and_tokens_checked() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let n = &nodes[0];
    // No deployment yet: wait.
    assert!(next(&base, n).is_none());
    Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    let first = next(&base, n).unwrap();
    assert_eq!(first["attempt"], 1);
    // The node shows the step running now, Ironic-style.
    let detail = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
    assert_eq!(detail["status"], "provisioning", "{detail}");
    assert_eq!(detail["online"], true, "its agent just called");
    assert_eq!(detail["provision_state"], "wait call-back");
    assert_eq!(detail["deploy_step"]["step"], first["step"]["name"]);
    assert_eq!(detail["driver_internal_info"]["deploy_step_index"], 0);
    assert!(
        detail["driver_internal_info"]["deploy_steps"]
            .as_array()
            .unwrap()
            .len()
            > 3
    );
    // The response was lost (or the agent restarted): the same run comes again, attempt 2.
    let second = next(&base, n).unwrap();
    assert_eq!(second["id"], first["id"]);
    assert_eq!(second["attempt"], 2);
    // A late report of attempt 1 is stale.
    assert_eq!(report(&base, n, &first, true).status, 409);
    assert_eq!(report(&base, n, &second, true).status, 200);
    // Re-sending the same report is fine and changes nothing.
    assert_eq!(report(&base, n, &second, true).status, 200);
    let third = next(&base, n).unwrap();
    assert_ne!(
        third["id"], first["id"],
        "the next step, not the finished one again"
    );
    // A forged token gets nothing and is refused.
    let forged = Node::new(n.id, &n.mac, "forged".into());
    let r = post(
        &base,
        "/api/v1/agent/next",
        &forged.token,
        &json!({"node_id": n.id}),
    );
    assert_eq!(r.status, 401);
    let r = report(&base, &forged, &third, true);
    assert_eq!(r.status, 401);
    let r = Http::raw_post(&format!("{base}/api/v1/agent/next"), "{}", &[]);
    assert_eq!(r.status, 401);
    // Sync and file refuse escapes from the plugins directory.
    let (status, _, _) = Http::get_bytes(
        &format!("{base}/api/v1/agent/file?path=/plugins/../stoker.db"),
        &[("authorization", &format!("Bearer {}", n.token))],
    );
    assert_eq!(status, 400);
    let (status, body, _) = Http::get_bytes(
        &format!(
            "{base}/api/v1/agent/sync?src=rsync://10.20.0.2:/plugins/ubuntu-newton-10.0.0/deployment_scripts/"
        ),
        &[("authorization", &format!("Bearer {}", n.token))],
    );
    assert_eq!(status, 200);
    let mut archive = tar::Archive::new(body.as_slice());
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("netconfig.sh")),
        "{names:?}"
    );
}

/// Report `run` as `node`'s agent asking for its next run in the answer (`claim_next`).
fn report_claiming(base: &str, node: &Node, run: &Value) -> Resp {
    post(
        base,
        &format!("/api/v1/agent/runs/{}/result", run["id"]),
        &node.bearer(),
        &json!({"attempt": run["attempt"], "ok": true, "exit_code": 0,
                "output_tail": "ok", "claim_next": true}),
    )
}

/// A result that asks for the next run (`claim_next`) gets it in its answer when one is due
/// for that agent at once, claimed as `next` claims it (attempt 1, the node's deploy step),
/// and so does the installed OS's hello after the reboot to disk: after the ramdisk's first
/// two runs (one reported without asking), nothing comes from `next`, and the deployment still
/// ends done with every run handed once, so every other run came with the call before it.
/// Nothing is handed out across the reboot to disk (the run is the OS's), for a stale result,
/// or to a result or a hello that does not ask. (The configure step that carries the OS's
/// credential is a deployment's first run, handed by `next`; a handed one is built by the same
/// `run_answer`.)
#[test]
fn a_result_hands_out_the_next_run_when_asked() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let n = &nodes[0];
    let dep = start(&base, cluster);
    let mut run = next(&base, n).expect("the first run");
    // Not asking: the answer is what it always was.
    let plain = report(&base, n, &run, true);
    assert_eq!(plain.status, 200, "{}", plain.body);
    assert_eq!(plain.json(), json!({"accepted": true}));
    run = next(&base, n).expect("the second run");
    let mut ran = Vec::new();
    loop {
        ran.push(run_name(&run));
        let r = report_claiming(&base, n, &run);
        assert_eq!(r.status, 200, "{}", r.body);
        let ack = r.json();
        assert_eq!(ack["accepted"], true, "{ack}");
        if run_name(&run) == "power.reboot_to_disk" {
            assert!(
                ack.get("next").is_none(),
                "the run after the reboot is the installed OS's: {ack}"
            );
            // The OS's agent: a hello that does not ask is handed nothing; one that asks gets
            // the OS's first run (and the one before it no longer works).
            n.boot_os(&base);
            let hello = n.boot_os_claiming(&base, true);
            let handed = &hello["next"];
            assert_eq!(handed["action"], "run", "{hello}");
            assert_eq!(handed["run"]["step"]["runs_on"], "os", "{hello}");
            run = handed["run"].clone();
            continue;
        }
        let Some(handed) = ack.get("next") else {
            break;
        };
        assert_eq!(handed["action"], "run", "{ack}");
        let next_run = handed["run"].clone();
        assert_eq!(next_run["attempt"], 1, "{ack}");
        // The node shows the handed run as running, as after `next`.
        let detail = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
        assert_eq!(
            detail["deploy_step"]["step"], next_run["step"]["name"],
            "{detail}"
        );
        run = next_run;
    }
    assert!(ran.len() > 5, "{ran:?}");
    assert!(ran.contains(&"power.reboot_to_disk".to_string()), "{ran:?}");
    let d1 = deployment(&base, dep);
    assert_eq!(d1["status"], "done", "{d1}");
    assert_eq!(d1["runs"]["failed"], 0, "{d1}");
    // Every run of the node's agents was handed out once (attempt 1), and ran.
    let steps = d1["steps"].as_array().unwrap();
    let agents: Vec<&Value> = steps.iter().filter(|s| s["runs_on"] != "master").collect();
    assert_eq!(agents.len(), ran.len() + 1, "{ran:?} {d1}");
    assert!(
        agents
            .iter()
            .all(|s| s["attempt"] == 1 && s["status"] == "ok"),
        "{d1}"
    );
    // Nothing is running now: a stale result (an attempt the run never had) is refused and
    // hands nothing out.
    let stale = post(
        &base,
        &format!("/api/v1/agent/runs/{}/result", run["id"]),
        &n.bearer(),
        &json!({"attempt": 7, "ok": true, "output_tail": "", "claim_next": true}),
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert!(stale.json().get("next").is_none(), "{}", stale.body);
    // Nothing is due: a hello that asks is answered with its token alone; a flag that is not
    // a boolean is refused, naming it.
    let idle = n.boot_os_claiming(&base, true);
    assert!(idle.get("next").is_none(), "{idle}");
    let credential = n.service.borrow().clone().unwrap();
    let bad = Http::raw_post(
        &format!("{base}/api/v1/agent/service/hello"),
        &json!({"node_id": n.id, "credential": credential, "version": VERSION,
                "macs": [n.mac], "claim_next": "yes"})
        .to_string(),
        &[],
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("claim_next"), "{}", bad.body);
}

#[test]
fn a_failed_step_stops_and_retry_runs_only_it_again() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    let dep = r.json()["id"].as_i64().unwrap();
    let ran = drive(&base, &nodes, &|run| run["task"]["id"] == "keystone", 1000);
    let d1 = deployment(&base, dep);
    assert_eq!(d1["status"], "error", "{d1}");
    assert_eq!(d1["runs"]["failed"], 1);
    let failed = d1["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "failed")
        .unwrap();
    assert_eq!(failed["task"], "keystone");
    assert_eq!(failed["error"], "exit 1");
    let node = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", nodes[0].id));
    assert_eq!(node["status"], "error");
    assert_eq!(node["error_type"], "deploy");
    assert_eq!(node["last_error"]["task"], "keystone");
    assert_eq!(node["last_error"]["output_tail"], "ran keystone");
    assert_eq!(node["deploy_step"], Value::Null);
    // Nothing after keystone ran on the controller; the compute waits for the controller.
    assert!(
        !ran.iter().any(|r| r.1 == "glance" || r.1 == "nova-compute"),
        "{ran:?}"
    );

    let r = Http::raw_post(&format!("{base}/api/v1/deployments/{dep}/retry"), "", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    let before: HashSet<i64> = ran.iter().map(|r| r.2).collect();
    let rest = drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(
        rest[0].1, "keystone",
        "the failed step runs first: {rest:?}"
    );
    let repeated: Vec<_> = rest
        .iter()
        .filter(|r| before.contains(&r.2) && r.1 != "keystone")
        .collect();
    assert!(
        repeated.is_empty(),
        "succeeded steps ran again: {repeated:?}"
    );
    assert_eq!(deployment(&base, dep)["status"], "done");
}

#[test]
fn abort_keeps_state_and_retry_resumes() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    let dep = r.json()["id"].as_i64().unwrap();
    let first = drive(&base, &nodes, &|_| false, 3);
    assert_eq!(first.len(), 3);
    let r = Http::raw_post(&format!("{base}/api/v1/deployments/{dep}/abort"), "", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "aborted");
    assert!(
        next(&base, &nodes[0]).is_none(),
        "nothing is handed out after an abort"
    );
    let r = Http::raw_post(&format!("{base}/api/v1/deployments/{dep}/retry"), "", &[]);
    assert_eq!(r.status, 200);
    let rest = drive(&base, &nodes, &|_| false, 1000);
    let all: Vec<i64> = first.iter().chain(&rest).map(|r| r.2).collect();
    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), unique.len(), "no run twice");
    assert_eq!(deployment(&base, dep)["status"], "done");
}

pub(crate) fn serve(dir: &Path) -> Served {
    let mut cmd = stoker(dir);
    cmd.args(["serve", "--http-listen", "127.0.0.1:0"]);
    let served = Served::spawn(cmd);
    crate::common::sign_in(&format!("http://{}", served.addr), &dir.join("stoker-data"));
    served
}

#[test]
fn a_master_killed_mid_deployment_finishes_it_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path());
    let base = format!("http://{}", served.addr);
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    let dep = r.json()["id"].as_i64().unwrap();
    let first = drive(&base, &nodes, &|_| false, 12);
    // A run handed out whose result the master never sees: it dies with -9 meanwhile.
    let inflight = next(&base, &nodes[0])
        .or_else(|| next(&base, &nodes[1]))
        .expect("after 12 runs a node has its next run to hand out");
    served.signal("KILL");
    let _ = served.wait();

    let served = serve(dir.path());
    let base = format!("http://{}", served.addr);
    let mut done: HashMap<i64, String> = first.iter().map(|r| (r.2, r.1.clone())).collect();
    let rest = drive(&base, &nodes, &|_| false, 1000);
    for r in &rest {
        assert!(
            !done.contains_key(&r.2),
            "{} ran again after the restart",
            r.1
        );
        done.insert(r.2, r.1.clone());
    }
    let again = rest
        .iter()
        .find(|r| r.2 == inflight["id"].as_i64().unwrap());
    assert!(
        again.is_some(),
        "the run in flight at the kill is handed out again"
    );
    assert_eq!(deployment(&base, dep)["status"], "done");
    served.signal("TERM");
    let (code, _) = served.wait();
    assert_eq!(code, Some(0));
}

#[test]
fn each_deployment_rotates_the_agent_token() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let old = &nodes[0];
    Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    let r = post(
        &base,
        "/api/v1/agent/next",
        &old.token,
        &json!({"node_id": old.id}),
    );
    let reply = r.json();
    let fresh = reply["agent_token"]
        .as_str()
        .expect("a new token with the first run");
    assert_ne!(fresh, old.token);
    // Until the agent uses the new token the old one still works (the answer may be lost).
    let again = post(
        &base,
        "/api/v1/agent/next",
        &old.token,
        &json!({"node_id": old.id}),
    );
    assert_eq!(again.status, 200);
    let fresh = again.json()["agent_token"].as_str().unwrap().to_string();
    let new = Node::new(old.id, &old.mac, fresh);
    let run = next(&base, &new).expect("the new token works");
    assert_eq!(report(&base, &new, &run, true).status, 200);
    // Once used, the old one is refused.
    let r = post(
        &base,
        "/api/v1/agent/next",
        &old.token,
        &json!({"node_id": old.id}),
    );
    assert_eq!(r.status, 401);
    // Later runs of the same deployment do not rotate it again.
    let r = post(
        &base,
        "/api/v1/agent/next",
        &new.token,
        &json!({"node_id": new.id}),
    );
    assert!(r.json().get("agent_token").is_none(), "{}", r.body);
}

#[test]
fn redeploys_run_only_what_changed() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let node = nodes[1].id.to_string();
    let plan = || Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}/plan"));
    let tasks = |plan: &Value| -> Vec<Value> {
        plan["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["uid"] == node.as_str())
            .unwrap()["tasks"]
            .as_array()
            .unwrap()
            .clone()
    };
    let step = |plan: &Value, id: &str| -> Value {
        tasks(plan).into_iter().find(|t| t["id"] == id).unwrap()
    };
    assert_eq!(step(&plan(), "setup_repositories")["status"], "run");

    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    let dep = r.json()["id"].as_i64().unwrap();
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(&base, dep)["status"], "done");

    // Nothing changed: every task is skipped (each watches what it uses, as Fuel's LCM tasks
    // do), the plan says why and against which deployment it compared.
    let second = plan();
    let s = step(&second, "setup_repositories");
    assert_eq!(s["status"], "skipped", "{s}");
    assert!(s["reason"].as_str().unwrap().contains("changed"), "{s}");
    assert_eq!(s["compared_with"], dep.to_string());
    assert_eq!(step(&second, "netconfig")["status"], "skipped");
    // ... and Deploy says there is nothing to run instead of starting an empty deployment.
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.json()["code"], "nothing_to_run", "{}", r.body);
    assert!(r.body.contains("nothing to run"), "{}", r.body);

    // Change the setting the condition watches: that task comes back, with the configuration
    // upload, whose condition watches every setting.
    let mut settings = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}/settings"));
    settings["repo_setup"] = json!({"repos": [{"name": "extra", "uri": "http://mirror/"}]});
    let r = Http::raw_put(
        &format!("{base}/api/v1/clusters/{cluster}/settings"),
        &settings.to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let third = plan();
    let changed: Vec<String> = tasks(&second)
        .iter()
        .zip(tasks(&third))
        .filter(|(a, b)| a["status"] != b["status"])
        .map(|(a, _)| a["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(changed, ["upload_configuration", "setup_repositories"]);
    // Deployed: the ready nodes' service agents run exactly those, and nothing provisions.
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 202, "{}", r.body);
    let day2 = r.json()["id"].as_i64().unwrap();
    let ran = drive(&base, &nodes, &|_| false, 1000);
    let mut names: Vec<(i64, &str)> = ran.iter().map(|r| (r.0, r.1.as_str())).collect();
    names.sort();
    let (controller, compute) = (nodes[0].id, nodes[1].id);
    let mut expected = vec![
        (controller, "setup_repositories"),
        (controller, "smoke-check"),
        (controller, "upload_configuration"),
        (compute, "setup_repositories"),
        (compute, "upload_configuration"),
    ];
    expected.sort();
    assert_eq!(names, expected);
    assert!(nodes.iter().all(|n| n.os_token.borrow().is_some()));
    assert_eq!(deployment(&base, day2)["status"], "done");
}

/// Node statuses move through the state machine: provisioning while the image is written
/// (`wait call-back` while the agent has the step), deploying, ready; an abort stops a node in
/// `error` with its error type, a retry resumes it there; a deployed node keeps its disk when
/// its environment is deployed again.
#[test]
fn node_states_follow_the_table_and_a_deployed_node_keeps_its_disk() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let n = &nodes[0];
    let node = || Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
    let steps = json!({"steps": [{"interface": "deploy", "step": "write_image", "priority": 80,
        "args": {"image_url": "http://127.0.0.1:9/os.img"}}]});
    let deploy = || {
        let r = Http::raw_post(
            &format!("{base}/api/v1/clusters/{cluster}/deploy"),
            &steps.to_string(),
            &[],
        );
        assert_eq!(r.status, 202, "{}", r.body);
        r.json()["id"].as_i64().unwrap()
    };
    let dep = deploy();
    let run = next(&base, n).unwrap();
    assert_eq!(run_name(&run), "deploy.write_image");
    let v = node();
    assert_eq!(v["status"], "provisioning");
    assert_eq!(v["provision_state"], "wait call-back");
    // Abort while the image is written: the node stops in error(provision).
    let r = Http::raw_post(&format!("{base}/api/v1/deployments/{dep}/abort"), "", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = node();
    assert_eq!(
        (v["status"].as_str(), v["error_type"].as_str()),
        (Some("error"), Some("provision"))
    );
    // Retry: it resumes provisioning, and the step is handed again.
    let r = Http::raw_post(&format!("{base}/api/v1/deployments/{dep}/retry"), "", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(node()["status"], "provisioning");
    assert_eq!(node()["error_type"], Value::Null);
    let run = next(&base, n).unwrap();
    assert_eq!(run_name(&run), "deploy.write_image");
    assert_eq!(report(&base, n, &run, true).status, 200);
    let run = next(&base, n).unwrap();
    assert_eq!(run_name(&run), "deploy.configure");
    assert_eq!(node()["status"], "provisioning");
    assert_eq!(report(&base, n, &run, true).status, 200);
    let run = next(&base, n).unwrap();
    assert_eq!(run_name(&run), "power.reboot_to_disk");
    assert_eq!(report(&base, n, &run, true).status, 200);
    // Rebooted into its installed OS: provisioned until its service agent takes a task.
    assert_eq!(node()["status"], "provisioned");
    assert!(
        next(&base, n).is_some(),
        "the service agent takes the first graph task"
    );
    assert_eq!(node()["status"], "deploying");
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(&base, dep)["status"], "done");
    assert_eq!(node()["status"], "ready");

    // Deployed again after a settings change: the ready node is not provisioned again.
    let mut settings = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}/settings"));
    settings["external_ntp"] = json!({"ntp_list": ["ntp.example.org"]});
    let r = Http::raw_put(
        &format!("{base}/api/v1/clusters/{cluster}/settings"),
        &settings.to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let again = deploy();
    let ran = drive(&base, &nodes, &|_| false, 1000);
    assert!(!ran.is_empty());
    assert!(
        !ran.iter().any(|r| r.1 == "deploy.write_image"),
        "a ready node's disk was written again: {ran:?}"
    );
    assert_eq!(deployment(&base, again)["status"], "done");
    assert_eq!(node()["status"], "ready");
}

/// A node whose agent never comes for its due steps fails them at their timeout, saying whether
/// no agent called at all or only the node's other agent did; Retry makes them due again.
#[test]
fn an_offline_node_fails_its_due_steps_at_the_timeout_and_retry_resumes() {
    let d = TestDaemon::start_in(
        tempfile::tempdir().unwrap(),
        &[
            ("plugins.bundled", "install".to_string()),
            ("deploy.step_timeout", "2".to_string()),
            ("deploy.boot_timeout", "3".to_string()),
        ],
    );
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let n = &nodes[0];
    // collect_logs first on the installed OS: a step with the master's 2 s default timeout,
    // which may wait the 3 s boot timeout for its node to boot its disk.
    let steps = json!({"steps": [{"interface": "deploy", "step": "collect_logs", "priority": 90,
                                  "args": {}}]});
    let r = Http::raw_post(
        &format!("{base}/api/v1/clusters/{cluster}/deploy"),
        &steps.to_string(),
        &[],
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let dep = r.json()["id"].as_i64().unwrap();
    for want in ["deploy.configure", "power.reboot_to_disk"] {
        let run = next(&base, n).unwrap();
        assert_eq!(run_name(&run), want);
        // Report without the service agent's hello: the node's OS never comes up.
        let r = post(
            &base,
            &format!("/api/v1/agent/runs/{}/result", run["id"]),
            &n.token,
            &json!({"attempt": run["attempt"], "ok": true}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert_eq!(
        Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id))["status"],
        "provisioned"
    );
    let failed_run = |want: &str| -> Value {
        let start = std::time::Instant::now();
        loop {
            let d1 = deployment(&base, dep);
            if d1["status"] == "error" {
                let f = d1["steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|s| s["status"] == "failed")
                    .cloned()
                    .unwrap();
                let e = f["error"].as_str().unwrap();
                assert!(e.contains(want), "{e}");
                return f;
            }
            assert!(start.elapsed().as_secs() < 20, "not failed: {d1}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    // Nobody calls: it fails after the boot timeout, naming the node, since when and why.
    let f = failed_run("has not called since");
    assert_eq!(f["step"], "collect_logs");
    assert!(
        f["error"]
            .as_str()
            .unwrap()
            .contains("not taken within the 3 s its node may take to boot (deploy.boot_timeout)"),
        "{f}"
    );
    assert!(
        f["error"]
            .as_str()
            .unwrap()
            .contains(&format!("node-{}", n.id))
    );
    let node = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
    assert_eq!(
        (node["status"].as_str(), node["error_type"].as_str()),
        (Some("error"), Some("deploy")),
        "{node}"
    );
    // Retry; only the bootstrap's agent calls (the node booted the network again): the step
    // is not its to take, it says so while it waits, and fails saying which agent called.
    let r = Http::raw_post(&format!("{base}/api/v1/deployments/{dep}/retry"), "", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    let start = std::time::Instant::now();
    while start.elapsed().as_secs() < 4 {
        let r = post(
            &base,
            "/api/v1/agent/next",
            &n.token,
            &json!({"node_id": n.id}),
        );
        let v = r.json();
        assert_eq!(v["action"], "wait", "{v}");
        if deployment(&base, dep)["status"] == "error" {
            break;
        }
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .contains("installed operating system"),
            "{v}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    failed_run("calls from the bootstrap ramdisk");
    // Retry once more with the OS up: its service agent takes it and the deployment ends.
    let r = Http::raw_post(&format!("{base}/api/v1/deployments/{dep}/retry"), "", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    n.boot_os(&base);
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(&base, dep)["status"], "done");
    assert_eq!(
        Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id))["status"],
        "ready"
    );
}

/// Removing a deployed node, as in Nailgun: it stays, `pending_deletion`, until the next
/// Deploy runs the release's deletion graph (`erase_node`) on it through its service agent;
/// then it leaves the environment, its credential no longer works, and it is in `discover`,
/// to be found again at its next network boot. The others redeploy what its leaving changed.
#[test]
fn a_removed_node_is_erased_by_the_next_deploy_and_returns_to_discover() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute", "compute"]);
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    let dep = r.json()["id"].as_i64().unwrap();
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(&base, dep)["status"], "done");
    let gone = &nodes[2];
    let node = |id: i64| Http::raw_get_json(&format!("{base}/api/v1/nodes/{id}"));

    let r = d
        .http()
        .delete(&format!("/api/v1/clusters/{cluster}/nodes/{}", gone.id));
    assert_eq!(r.status, 204, "{}", r.body);
    let v = node(gone.id);
    assert_eq!(v["pending_deletion"], true, "{v}");
    assert_eq!(v["cluster"], cluster, "it stays until the next Deploy");
    assert_eq!(v["status"], "ready");

    let script = d.http().get(&format!("/boot/{}.ipxe", gone.mac)).body;
    assert!(
        !script.contains("stoker.token"),
        "a deployed node boots its disk: {script}"
    );
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 202, "{}", r.body);
    let dep2 = r.json()["id"].as_i64().unwrap();
    let ran = drive(&base, &nodes, &|_| false, 1000);
    let on = |id: i64| -> Vec<&str> {
        ran.iter()
            .filter(|r| r.0 == id)
            .map(|r| r.1.as_str())
            .collect()
    };
    assert_eq!(on(gone.id), ["erase_node"], "{ran:?}");
    // The others' hosts changed (a node left): that comes back there, provisioning does not.
    assert!(on(nodes[0].id).contains(&"hosts"), "{ran:?}");
    assert!(
        !ran.iter()
            .any(|r| r.1.starts_with("deploy.") || r.1.starts_with("power."))
    );
    assert_eq!(deployment(&base, dep2)["status"], "done");
    assert_released(&base, gone);
    // Its next network boot finds it again: the boot script is the bootstrap's again (it was
    // its local disk's while the node was deployed), with a boot token for its hello.
    let script = d.http().get(&format!("/boot/{}.ipxe", gone.mac)).body;
    let token = script
        .split_whitespace()
        .find_map(|w| w.strip_prefix("stoker.token="))
        .unwrap_or_else(|| panic!("a bootstrap script: {script}"))
        .to_string();
    let r = Http::raw_post(
        &format!("{base}/api/v1/agent/hello"),
        &inventory(&gone.mac).to_string(),
        &[("authorization", &format!("Bearer {token}"))],
    );
    assert!(r.status == 200 || r.status == 201, "{}", r.body);
    assert_eq!(r.json()["node"]["id"], gone.id);
    assert_eq!(node(gone.id)["status"], "discover");
    // The environment's nodes are the two left.
    let members = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}/nodes"));
    assert_eq!(members.as_array().unwrap().len(), 2, "{members}");
}

/// A release without a deletion graph: a removed node has nothing to run, so the next Deploy
/// releases it as it starts (out of the environment, credential erased, `discover`), and the
/// deployment goes on without it.
#[test]
fn a_removed_node_of_a_release_without_a_deletion_graph_is_released_at_deploy() {
    let d = TestDaemon::start();
    let mut release = fixture_files("v5-release-valid");
    let meta = String::from_utf8(release.read("metadata.yaml").unwrap()).unwrap();
    let (kept, deletion) = meta.split_once("      - type: deletion").unwrap();
    assert!(deletion.contains("erase_node"), "{deletion}");
    release.add("metadata.yaml", kept.to_string()).unwrap();
    let (status, body) = d.post_package(&build(&release, "fixture-release-1.0.0"));
    assert_eq!(status, 201, "{body}");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let dep = start(&base, cluster);
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(&base, dep)["status"], "done");

    let gone = &nodes[1];
    let r = d
        .http()
        .delete(&format!("/api/v1/clusters/{cluster}/nodes/{}", gone.id));
    assert_eq!(r.status, 204, "{}", r.body);
    let node = |id: i64| Http::raw_get_json(&format!("{base}/api/v1/nodes/{id}"));
    assert_eq!(node(gone.id)["pending_deletion"], true);
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 202, "{}", r.body);
    let dep2 = r.json()["id"].as_i64().unwrap();
    // Released as Deploy started; the one left deploys alone.
    assert_released(&base, gone);
    let ran = drive(&base, &nodes[..1], &|_| false, 1000);
    assert!(ran.iter().any(|r| r.0 == nodes[0].id), "{ran:?}");
    assert_eq!(deployment(&base, dep2)["status"], "done");
}

/// The installed OS's agent gets in only with its own node's credential, from a machine with
/// one of that node's MACs, at the master's version (else 426 says which version and where to
/// get it); the binary is served for a node's credential only, and fetching it marks the node
/// seen.
#[test]
fn the_service_hello_and_binary_refuse_what_is_not_the_nodes_own() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("agent-binary");
    std::fs::write(&binary, b"a small stand-in for the agent binary\n").unwrap();
    let config = stoker::config::Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("plugins.bundled", "install".to_string())
        .with_flag("deploy.agent_binary", binary.display().to_string())
        .resolve()
        .unwrap();
    let d = TestDaemon::start_with(config, tempfile::tempdir().unwrap());
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    drive(&base, &nodes, &|_| false, 1000);
    let (a, b) = (&nodes[0], &nodes[1]);
    let credential = a.service.borrow().clone().unwrap();
    let hello = |node_id: i64, macs: &[&str], version: &str| {
        service_hello(&base, node_id, &credential, macs, version)
    };
    let version = VERSION;
    // Another node's credential: refused, naming whose it is.
    let r = hello(b.id, &[&b.mac], version);
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        r.body.contains(&format!("belongs to node-{}", a.id)),
        "{}",
        r.body
    );
    // From a machine with none of the node's MACs.
    let r = hello(a.id, &["52:54:00:ff:ff:01"], version);
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(r.body.contains("none of its MACs"), "{}", r.body);
    // An older agent: 426, the version needed, where the binary is and its digest.
    let r = hello(a.id, &[&a.mac], "0.0.1");
    assert_eq!(r.status, 426, "{}", r.body);
    let v = r.json();
    assert_eq!(v["code"], "agent_outdated", "{v}");
    assert_eq!(v["required_version"], version, "{v}");
    assert_eq!(v["binary"], "/api/v1/agent/service/binary", "{v}");
    let want = {
        use sha2::Digest;
        let bytes = std::fs::read(&binary).unwrap();
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(v["sha256"], want.as_str(), "{v}");
    // The binary: only for a node's credential.
    let url = format!("{base}/api/v1/agent/service/binary");
    let (status, _, _) = Http::get_bytes(&url, &[]);
    assert_eq!(status, 401);
    let (status, _, _) = Http::get_bytes(&url, &[("authorization", "Bearer skn_forged")]);
    assert_eq!(status, 401);
    // The fetch is the installed OS's first call: it marks the node seen, as every agent
    // call does (its last call moved back a minute first).
    let conn = rusqlite::Connection::open(dir.path().join("data").join("stoker.db")).unwrap();
    let seen = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row(
            "SELECT last_seen_at FROM nodes WHERE id = ?1",
            [a.id],
            |r| r.get(0),
        )
        .unwrap()
    };
    conn.execute(
        "UPDATE nodes SET last_seen_at = last_seen_at - 60 WHERE id = ?1",
        [a.id],
    )
    .unwrap();
    let before = seen(&conn);
    let auth = format!("Bearer {credential}");
    let (status, body, _) = Http::get_bytes(&url, &[("authorization", &auth)]);
    assert_eq!(status, 200);
    assert_eq!(body, std::fs::read(&binary).unwrap());
    assert!(
        seen(&conn) >= before + 59,
        "the binary's fetch marks the node seen"
    );
    // Its own hello still works.
    assert_eq!(hello(a.id, &[&a.mac], version).status, 200);
}

/// Adding a node to an operational environment provisions only that node; the others, on
/// their service agents, run only what its arrival changed for them (the hosts file, the
/// network data), and nothing is provisioned again.
#[test]
fn an_added_node_is_provisioned_alone_and_the_others_redeploy_what_it_changed() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, mut nodes) = setup(&base, &["controller", "compute"]);
    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    let dep = r.json()["id"].as_i64().unwrap();
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(&base, dep)["status"], "done");

    // A third node boots and is given the compute role.
    let added = join(&base, cluster, "52:54:00:00:30:09", "compute");
    let id = added.id;
    nodes.push(added);

    let r = Http::raw_post(&format!("{base}/api/v1/clusters/{cluster}/deploy"), "", &[]);
    assert_eq!(r.status, 202, "{}", r.body);
    let dep2 = r.json()["id"].as_i64().unwrap();
    let ran = drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(deployment(&base, dep2)["status"], "done");
    let on = |id: i64| -> Vec<&str> {
        ran.iter()
            .filter(|r| r.0 == id)
            .map(|r| r.1.as_str())
            .collect()
    };
    let new = on(id);
    assert_eq!(
        new[..2],
        ["deploy.configure", "power.reboot_to_disk"],
        "{new:?}"
    );
    assert!(new.contains(&"nova-compute"), "{new:?}");
    for old in &nodes[..2] {
        let mine = on(old.id);
        assert!(mine.contains(&"hosts"), "{mine:?}");
        assert!(
            !mine
                .iter()
                .any(|t| t.starts_with("deploy.") || t.starts_with("power.")),
            "an operational node was provisioned again: {mine:?}"
        );
        assert!(
            !mine.contains(&"setup_repositories"),
            "the repositories did not change: {mine:?}"
        );
    }
    for n in &nodes {
        let v = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
        assert_eq!(v["status"], "ready", "{v}");
    }
}

/// `PUT` on a Nailgun deployment-control URL; the body is `{}` as fuelclient sends it.
pub(crate) fn put(base: &str, path: &str) -> Resp {
    Http::raw_put(&format!("{base}{path}"), "{}")
}

/// Nailgun's deployment control, as `fuel2` drives it: provision some nodes, deploy them, a
/// dry run that runs nothing, deploy the changes, nothing changed (refused), redeploy every
/// task, stop a running deployment, the transactions filtered and read back with their
/// history, a finished one deleted, and a graph executed on one node.
#[test]
fn nailguns_deployment_control_provisions_deploys_dry_runs_redeploys_and_stops() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let (a, b) = (&nodes[0], &nodes[1]);
    let c = format!("/api/v1/clusters/{cluster}");
    let node = |id: i64| Http::raw_get_json(&format!("{base}/api/v1/nodes/{id}"));
    let transaction = |id: i64| Http::raw_get_json(&format!("{base}/api/v1/transactions/{id}"));

    // Deployment-phase work on a node without an installed OS is refused, naming it; so are
    // nodes of another environment and malformed lists.
    let r = put(&base, &format!("{c}/deploy?nodes={}", a.id));
    assert_eq!(
        (r.status, r.json()["code"].as_str()),
        (400, Some("not_provisioned")),
        "{}",
        r.body
    );
    assert!(r.body.contains(&format!("node-{}", a.id)), "{}", r.body);
    let r = put(&base, &format!("{c}/provision?nodes=9999"));
    assert_eq!(
        (r.status, r.json()["code"].as_str()),
        (400, Some("not_in_environment")),
        "{}",
        r.body
    );
    let r = put(&base, &format!("{c}/provision?nodes=1,x"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("nodes"), "{}", r.body);

    // Provision A only: its provisioning steps, nothing else; it ends provisioned.
    let r = put(&base, &format!("{c}/provision?nodes={}", a.id));
    assert_eq!(r.status, 202, "{}", r.body);
    let t = r.json();
    assert_eq!(
        (t["name"].as_str(), t["cluster"].as_i64()),
        (Some("provision"), Some(cluster)),
        "{t}"
    );
    let ran = drive(&base, &nodes, &|_| false, 1000);
    assert!(
        !ran.is_empty() && ran.iter().all(|r| r.0 == a.id),
        "{ran:?}"
    );
    assert!(
        ran.iter()
            .all(|r| r.1.starts_with("deploy.") || r.1.starts_with("power.")),
        "{ran:?}"
    );
    assert_eq!(transaction(t["id"].as_i64().unwrap())["status"], "ready");
    assert_eq!(node(a.id)["status"], "provisioned");
    assert_eq!(node(b.id)["status"], "discover");

    // Deploy A only: its graph tasks on its installed OS; its roles are deployed.
    let r = put(&base, &format!("{c}/deploy?nodes={}", a.id));
    assert_eq!(r.status, 202, "{}", r.body);
    let ran = drive(&base, &nodes, &|_| false, 1000);
    assert!(
        !ran.is_empty() && ran.iter().all(|r| r.0 == a.id),
        "{ran:?}"
    );
    assert!(
        !ran.iter()
            .any(|r| r.1.starts_with("deploy.") || r.1.starts_with("power.")),
        "{ran:?}"
    );
    let v = node(a.id);
    assert_eq!(
        (v["status"].as_str(), &v["roles"], &v["pending_roles"]),
        (Some("ready"), &json!(["controller"]), &json!([])),
        "{v}"
    );
    let v = node(b.id);
    assert_eq!(
        (&v["roles"], &v["pending_roles"], &v["pending_addition"]),
        (&json!([]), &json!(["compute"]), &json!(true)),
        "{v}"
    );

    // A dry run (and a noop run, which is one here): finished at once, its runs recorded,
    // nothing runs and no node moves.
    for q in ["dry_run=1&noop_run=0", "dry_run=0&noop_run=1"] {
        let r = put(&base, &format!("{c}/changes?{q}"));
        assert_eq!(r.status, 200, "{}", r.body);
        let t = r.json();
        assert_eq!(
            (
                t["status"].as_str(),
                t["dry_run"].as_bool(),
                t["progress"].as_u64()
            ),
            (Some("ready"), Some(true), Some(100)),
            "{t}"
        );
        let runs = deployment(&base, t["id"].as_i64().unwrap());
        assert!(runs["runs"]["pending"].as_u64().unwrap() > 0, "{runs}");
        assert!(drive(&base, &nodes, &|_| false, 1000).is_empty());
        assert_eq!(node(b.id)["status"], "discover");
    }

    // Deploy the changes: B is provisioned and deployed.
    let r = put(&base, &format!("{c}/changes?dry_run=0&noop_run=0"));
    assert_eq!(r.status, 202, "{}", r.body);
    let deployed = r.json()["id"].as_i64().unwrap();
    let ran = drive(&base, &nodes, &|_| false, 1000);
    assert!(
        ran.iter()
            .any(|r| r.0 == b.id && r.1 == "power.reboot_to_disk"),
        "{ran:?}"
    );
    assert_eq!(transaction(deployed)["status"], "ready");
    assert_eq!(node(b.id)["roles"], json!(["compute"]));
    // Nothing changed since: refused, as stoker's Deploy; a redeploy runs every task again,
    // no provisioning.
    let r = put(&base, &format!("{c}/changes"));
    assert_eq!(
        (r.status, r.json()["code"].as_str()),
        (409, Some("nothing_to_run")),
        "{}",
        r.body
    );
    let r = put(&base, &format!("{c}/changes/redeploy?dry_run=0&noop_run=0"));
    assert_eq!(r.status, 202, "{}", r.body);
    let redeploy = r.json()["id"].as_i64().unwrap();
    let ran = drive(&base, &nodes, &|_| false, 1000);
    assert!(
        ran.iter().any(|r| r.0 == a.id) && ran.iter().any(|r| r.0 == b.id),
        "{ran:?}"
    );
    assert!(
        !ran.iter()
            .any(|r| r.1.starts_with("deploy.") || r.1.starts_with("power.")),
        "{ran:?}"
    );
    assert_eq!(transaction(redeploy)["status"], "ready");

    // Its history: every task per node, ready, with Nailgun's times.
    let h = Http::raw_get_json(&format!(
        "{base}/api/v1/transactions/{redeploy}/deployment_history?nodes={}&include_summary=1",
        a.id
    ));
    let h = h.as_array().unwrap();
    assert!(!h.is_empty());
    for rec in h {
        assert_eq!(rec["node_id"], a.id.to_string(), "{rec}");
        assert!(
            matches!(rec["status"].as_str(), Some("ready" | "skipped")),
            "{rec}"
        );
        assert!(rec["summary"].is_object(), "{rec}");
    }
    let ready = h.iter().find(|r| r["status"] == "ready").unwrap();
    assert!(
        ready["time_start"].as_str().unwrap().contains('T'),
        "{ready}"
    );
    let r = d.http().get(&format!(
        "/api/v1/transactions/{redeploy}/deployment_history?statuses=done"
    ));
    assert_eq!(r.status, 400, "{}", r.body);

    // Stop: a running deployment is aborted; with nothing running, 400.
    let r = put(&base, &format!("{c}/changes/redeploy"));
    assert_eq!(r.status, 202, "{}", r.body);
    let stopped = r.json()["id"].as_i64().unwrap();
    let r = d.http().delete(&format!("/api/v1/transactions/{stopped}"));
    assert_eq!(
        r.status, 409,
        "a running transaction is not deleted: {}",
        r.body
    );
    let r = put(&base, &format!("{c}/stop_deployment"));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        (r.json()["id"].as_i64(), r.json()["status"].as_str()),
        (Some(stopped), Some("error"))
    );
    assert_eq!(put(&base, &format!("{c}/stop_deployment")).status, 400);

    // The transactions by status and name; a finished one deleted.
    let list = |q: &str| {
        Http::raw_get_json(&format!(
            "{base}/api/v1/transactions?cluster_id={cluster}{q}"
        ))
    };
    let errors = list("&statuses=error");
    assert_eq!(errors.as_array().unwrap().len(), 1, "{errors}");
    let provisions = list("&transaction_types=provision");
    assert_eq!(provisions.as_array().unwrap().len(), 1, "{provisions}");
    assert_eq!(
        d.http().get("/api/v1/transactions?statuses=done").status,
        400
    );
    let r = d.http().delete(&format!("/api/v1/transactions/{stopped}"));
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(
        d.http()
            .get(&format!("/api/v1/transactions/{stopped}"))
            .status,
        404
    );

    // A graph executed: the deployment graph on B only, every task (force); at least one
    // graph, and no subset of tasks.
    let exec = |body: Value| {
        Http::raw_post(
            &format!("{base}/api/v1/graphs/execute"),
            &body.to_string(),
            &[],
        )
    };
    let r = exec(
        json!({"cluster": cluster, "graphs": [{"type": "default", "nodes": [b.id]}],
                        "dry_run": false, "noop_run": false, "force": true, "debug": false}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let ran = drive(&base, &nodes, &|_| false, 1000);
    assert!(
        !ran.is_empty() && ran.iter().all(|r| r.0 == b.id),
        "{ran:?}"
    );
    let r = exec(json!({"cluster": cluster, "graphs": []}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("graphs"), "{}", r.body);
    let r = exec(json!({"cluster": cluster, "graphs": [{"type": "default", "tasks": ["hosts"]}]}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("graphs[0].tasks"), "{}", r.body);
    let r = exec(json!({"cluster": cluster, "graphs": [{"type": "no-such-graph"}]}));
    assert!(r.status >= 400 && r.status < 500, "{}", r.body);
}

/// A node that leaves its environment during a deployment (not provisioned yet, so it leaves
/// at once) runs nothing more of it: its runs fail saying so, the deployment ends when nothing
/// else can move, and the environment can be deleted, instead of a deployment that waits
/// forever for a node that is gone (what `fuel2 env remove nodes` then `env delete` did).
#[test]
fn a_node_leaving_during_a_deployment_fails_its_runs_and_the_deployment_ends() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller"]);
    let dep = start(&base, cluster);
    let r = d
        .http()
        .delete(&format!("/api/v1/clusters/{cluster}/nodes/{}", nodes[0].id));
    assert_eq!(r.status, 204, "{}", r.body);
    let v = deployment(&base, dep);
    assert_eq!(v["status"], "error", "{v}");
    let left = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["node_id"] == nodes[0].id)
        .all(|s| {
            s["status"] == "failed"
                && s["error"]
                    .as_str()
                    .unwrap()
                    .contains("left the environment")
        });
    assert!(left, "{v}");
    assert_eq!(
        Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", nodes[0].id))["status"],
        "discover"
    );
    let r = d.http().delete(&format!("/api/v1/clusters/{cluster}"));
    assert_eq!(r.status, 202, "{}", r.body);
}

/// Nailgun's reset: a deployed environment's nodes run the deletion graph (`erase_node`) and
/// come back to discover in the same environment with their roles pending; the environment is
/// `new` with nothing deployed, and the next Deploy provisions them again. Refused while a
/// deployment runs; an environment with no installed node is reset at once.
#[test]
fn reset_erases_the_nodes_keeps_their_roles_and_the_next_deploy_starts_over() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let c = format!("/api/v1/clusters/{cluster}");
    let r = put(&base, &format!("{c}/changes"));
    assert_eq!(r.status, 202, "{}", r.body);
    let r = put(&base, &format!("{c}/reset"));
    assert_eq!(
        r.status, 409,
        "a running deployment is stopped first: {}",
        r.body
    );
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(
        Http::raw_get_json(&format!("{base}{c}"))["status"],
        "operational"
    );

    let r = put(&base, &format!("{c}/reset"));
    assert_eq!(r.status, 202, "{}", r.body);
    let t = r.json();
    assert_eq!(
        (t["name"].as_str(), t["status"].as_str()),
        (Some("reset_environment"), Some("running"))
    );
    let ran = drive(&base, &nodes, &|_| false, 1000);
    for n in &nodes {
        let names: Vec<&str> = ran
            .iter()
            .filter(|r| r.0 == n.id)
            .map(|r| r.1.as_str())
            .collect();
        assert_eq!(names, ["erase_node"], "{ran:?}");
        let v = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id));
        assert_eq!(v["status"], "discover", "{v}");
        assert_eq!(v["cluster"], cluster, "{v}");
        assert_eq!(v["roles"], json!([]), "{v}");
        assert_eq!(v["pending_roles"].as_array().unwrap().len(), 1, "{v}");
        assert_eq!(v["pending_addition"], true, "{v}");
    }
    let t = Http::raw_get_json(&format!("{base}/api/v1/transactions/{}", t["id"]));
    assert_eq!(
        (t["status"].as_str(), t["progress"].as_i64()),
        (Some("ready"), Some(100))
    );
    assert_eq!(Http::raw_get_json(&format!("{base}{c}"))["status"], "new");

    // Reset again: no node has an OS to erase, so it is over at once.
    let r = put(&base, &format!("{c}/reset"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "ready");
    assert_eq!(put(&base, "/api/v1/clusters/999/reset").status, 404);
}

/// What a transaction was made from, as `fuel2 task deployment-info|settings|
/// network-configuration download` reads it, and the environment's deployed settings and
/// network configuration (its last successful deployment's).
#[test]
fn a_transaction_keeps_its_deployment_data_settings_and_network_configuration() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let (a, b) = (&nodes[0], &nodes[1]);
    let c = format!("/api/v1/clusters/{cluster}");
    let get = |path: &str| Http::raw_get_json(&format!("{base}{path}"));
    let r = d.http().get(&format!("{c}/attributes/deployed"));
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(
        r.body.contains("does not have deployed attributes"),
        "{}",
        r.body
    );
    let r = d.http().get(&format!("{c}/network_configuration/deployed"));
    assert_eq!(r.status, 404, "{}", r.body);

    // A provisioning keeps the settings and networks, and no deployment data.
    let r = put(&base, &format!("{c}/provision?nodes={},{}", a.id, b.id));
    assert_eq!(r.status, 202, "{}", r.body);
    let provision = r.json()["id"].as_i64().unwrap();
    drive(&base, &nodes, &|_| false, 1000);
    let t = format!("/api/v1/transactions/{provision}");
    assert_eq!(get(&format!("{t}/deployment_info")), json!({}));
    assert!(get(&format!("{t}/settings"))["editable"]["common"].is_object());

    // A deployment keeps its deployment data for the nodes it deploys.
    let r = put(&base, &format!("{c}/changes"));
    assert_eq!(r.status, 202, "{}", r.body);
    let deployed = r.json()["id"].as_i64().unwrap();
    drive(&base, &nodes, &|_| false, 1000);
    assert_eq!(
        get(&format!("/api/v1/transactions/{deployed}"))["status"],
        "ready"
    );
    let t = format!("/api/v1/transactions/{deployed}");
    let info = get(&format!("{t}/deployment_info"));
    let uids: Vec<&String> = info["nodes"].as_object().unwrap().keys().collect();
    assert_eq!(uids, [&a.id.to_string(), &b.id.to_string()], "{info}");
    assert!(!info["common"].as_object().unwrap().is_empty(), "{info}");
    assert_eq!(
        info["nodes"][a.id.to_string()]["uid"],
        a.id.to_string(),
        "{info}"
    );
    let one = get(&format!("{t}/deployment_info?nodes={}", b.id));
    assert_eq!(one["nodes"].as_object().unwrap().len(), 1, "{one}");
    assert!(one["nodes"].get(b.id.to_string()).is_some(), "{one}");
    let settings = get(&format!("{t}/settings"));
    assert!(settings["editable"]["common"].is_object(), "{settings}");
    let network = get(&format!("{t}/network_configuration"));
    assert!(
        network["networks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == "management"),
        "{network}"
    );
    // The environment's deployed settings and networks are that deployment's.
    assert_eq!(get(&format!("{c}/attributes/deployed")), settings);
    assert_eq!(get(&format!("{c}/network_configuration/deployed")), network);
    let r = d.http().get("/api/v1/transactions/9999/deployment_info");
    assert_eq!(r.status, 404, "{}", r.body);
}

/// A running deployment whose node's agent has gone silent says what it waits for, in the API
/// (`waiting`, `message`) and on the environment's page, until the agent calls again.
#[test]
fn a_deployment_says_which_silent_agent_it_waits_for() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let (cluster, nodes) = setup(&base, &["compute"]);
    let n = &nodes[0];
    let dep = start(&base, cluster);
    // Its agent called a moment ago: nothing is waited on.
    let d1 = deployment(&base, dep);
    assert_eq!(d1["waiting"], json!([]), "{d1}");
    assert!(d1.get("message").is_none(), "{d1}");
    // Two minutes of silence, as the clock would make them: its last call moved back.
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.execute(
        "UPDATE nodes SET last_seen_at = last_seen_at - 120 WHERE id = ?1",
        [n.id],
    )
    .unwrap();
    // Named as the dashboard names it; its id is beside the message.
    let name = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n.id))["name"]
        .as_str()
        .unwrap()
        .to_string();
    let said = format!("waiting for the agent of {name} since ");
    let d1 = deployment(&base, dep);
    assert_eq!(d1["waiting"].as_array().unwrap().len(), 1, "{d1}");
    let w = &d1["waiting"][0];
    assert_eq!(w["node_id"], n.id);
    assert_eq!(w["node_name"], name.as_str());
    // It waits from the deployment's start: the agent was last seen before it.
    assert_eq!(w["since"], d1["created_at"], "{d1}");
    assert!(d1["message"].as_str().unwrap().starts_with(&said), "{d1}");
    let all = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}/deployments"));
    assert_eq!(all[0]["waiting"][0]["node_id"], n.id, "{all}");
    let frag = d.http().get(&format!("/environments/{cluster}/timeline"));
    assert!(frag.body.contains(&said), "{}", frag.body);
    // A node named node-3 reads as the issue says: "waiting for the agent of node-3 since …".
    let r = d.http().put(
        &format!("/api/v1/nodes/{}", n.id),
        &json!({"name": "node-3"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let d1 = deployment(&base, dep);
    assert!(
        d1["message"]
            .as_str()
            .unwrap()
            .starts_with("waiting for the agent of node-3 since "),
        "{d1}"
    );
    // The agent calls again and takes its step: nothing is waited on.
    let run = next(&base, n).unwrap();
    assert_eq!(run_name(&run), "deploy.configure");
    let d1 = deployment(&base, dep);
    assert_eq!(d1["waiting"], json!([]), "{d1}");
}
