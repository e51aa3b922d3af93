//! `stoker graph plan` as a user runs it: the built binary on a small release tree and cluster
//! file (tests/fixtures/graph/mini*), in text, JSON and dot; incremental plans through
//! `--record`/`--deployed`; legacy plugin tasks; and the exit codes (1 for a cycle, with the
//! files named, 2 for an unreadable or malformed input, a plugin named against the validator's
//! rule included).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value as J;

use crate::common::bin::stoker;
use crate::common::plan::{ids, node, step, waits};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn plan(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    stoker(dir.path())
        .args(["graph", "plan"])
        .args(args)
        .output()
        .unwrap()
}

fn mini(extra: &[&str]) -> Output {
    let release = fixture("graph/mini");
    let cluster = fixture("graph/mini-cluster.yaml");
    let mut args = vec![
        "--release",
        release.to_str().unwrap(),
        "--cluster",
        cluster.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    plan(&args)
}

fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn json_plan(extra: &[&str]) -> J {
    let mut args = vec!["--format", "json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&mini(&args))).unwrap()
}

#[test]
fn text_plan_lists_every_node_with_waits_and_skips() {
    let text = ok(&mini(&[]));
    assert!(
        text.starts_with(
            "plan for mini (id 7), release mini (mini): 4 nodes, 10 tasks to run, 2 skipped"
        ),
        "{text}"
    );
    for line in [
        "node 1 node-1 [primary-controller]",
        "node 2 node-2 [controller]",
        "sync node (null) []",
        // Every controller's api, one group wait (a barrier) listed once.
        "group waits (barriers) (2):",
        "waits for api@primary-controller|controller (barrier, 2 nodes)",
        "skipped: condition is false: $.storage.objects_ceph (old data: none)",
        "api                                      parallel   2 at a time (2 nodes)",
        "database                                 one_by_one 1 at a time (2 nodes)",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn json_plan_is_ordered_evaluated_and_deterministic() {
    let first = ok(&mini(&["--format", "json"]));
    assert_eq!(first, ok(&mini(&["--format", "json"])), "byte-identical");
    let p: J = serde_json::from_str(&first).unwrap();
    assert_eq!(p["summary"]["nodes"], 4);
    // Exactly one primary controller.
    let primaries: Vec<&J> = p["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["roles"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == "primary-controller")
        })
        .collect();
    assert_eq!(primaries.len(), 1);
    // The group placed `database` (no roles of its own) on both controllers only.
    assert_eq!(ids(&p, "1"), ["hiera", "database", "api"]);
    assert_eq!(ids(&p, "2"), ["hiera", "database", "api"]);
    assert_eq!(ids(&p, "3"), ["hiera", "compute_agent", "ceph_osd"]);
    assert_eq!(
        waits(&p, "3", "compute_agent"),
        ["api@1", "api@2", "hiera@3"]
    );
    assert_eq!(waits(&p, "1", "api"), ["database@1", "database@2"]);
    // Every wait comes earlier in the order.
    let mut order = std::collections::HashMap::new();
    for n in p["nodes"].as_array().unwrap() {
        for t in n["tasks"].as_array().unwrap() {
            order.insert(
                format!("{}@{}", t["id"], n["uid"]),
                t["order"].as_u64().unwrap(),
            );
        }
    }
    for n in p["nodes"].as_array().unwrap() {
        for t in n["tasks"].as_array().unwrap() {
            for r in crate::common::plan::waits_of(&p, t) {
                let (task, node) = r.split_once('@').unwrap();
                let before = order[&format!("\"{task}\"@\"{node}\"")];
                assert!(before < t["order"].as_u64().unwrap());
            }
        }
    }
    // YAQL and format fields, per node.
    assert_eq!(
        step(&p, "2", "api")["parameters"]["cmd"],
        "start-api --node 2"
    );
    assert_eq!(
        step(&p, "2", "api")["strategy"],
        serde_json::json!({"type": "parallel", "amount": 2})
    );
    assert_eq!(
        step(&p, "4", "compute_agent")["parameters"]["cmd"],
        "echo 7"
    );
    let ceph = step(&p, "4", "ceph_osd");
    assert_eq!(ceph["status"], "skipped");
    assert_eq!(
        ceph["reason"],
        "condition is false: $.storage.objects_ceph (old data: none)"
    );
    assert_eq!(ceph["source"], "openstack/tasks.yaml:51 (release mini)");
    assert_eq!(node(&p, "null")["tasks"][0]["status"], "stage");
}

#[test]
fn dot_plan_draws_clusters_and_edges() {
    let dot = ok(&mini(&["--format", "dot"]));
    assert!(dot.starts_with("digraph plan {\n"), "{dot}");
    assert!(dot.ends_with("}\n"));
    for line in [
        "  subgraph \"cluster_3\" {",
        "    \"ceph_osd@3\" [label=\"ceph_osd\", style=dashed, fontcolor=gray40];",
        "    \"deploy_start@null\" [label=\"deploy_start\", shape=diamond];",
        // A group wait: its members point at the barrier, the barrier at who waits.
        "  \"api@1\" -> \"api@primary-controller|controller (barrier)\";",
        "  \"api@primary-controller|controller (barrier)\" -> \"compute_agent@3\";",
        "  \"database@2\" -> \"database@primary-controller|controller (barrier)\";",
        "  \"database@primary-controller|controller (barrier)\" -> \"api@1\";",
    ] {
        assert!(dot.contains(line), "missing {line:?} in\n{dot}");
    }
}

#[test]
fn recorded_state_makes_the_next_plan_incremental() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("deployed.json");
    let state = state.to_str().unwrap();
    let out = mini(&["--format", "json", "--record", state]);
    let first: J = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(step(&first, "3", "compute_agent")["status"], "run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("recorded deployment 1"));
    // The state file is indented all through, the nodes' data too.
    let text = std::fs::read_to_string(state).unwrap();
    let recorded: J = serde_json::from_str(&text).unwrap();
    assert_eq!(
        text,
        serde_json::to_string_pretty(&recorded).unwrap() + "\n"
    );
    let second = json_plan(&["--deployed", state]);
    let agent = step(&second, "3", "compute_agent");
    assert_eq!(agent["status"], "skipped");
    assert_eq!(
        agent["reason"],
        "condition is false: changed($.nova) (old data: deployment 1)"
    );
    assert_eq!(agent["compared_with"], "1");
    // Unconditional tasks still run.
    assert_eq!(step(&second, "3", "hiera")["status"], "run");
}

#[test]
fn legacy_plugin_tasks_get_generated_ids() {
    let plugin = fixture("plugins/v2-postfix-valid");
    let p = json_plan(&[
        "--release-version",
        "2014.2.2-6.1",
        "--plugin",
        plugin.to_str().unwrap(),
    ]);
    let generated: Vec<(String, String)> = p["generated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["id"].as_str().unwrap().to_string(),
                g["stage"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        generated,
        [
            (
                "pre_deployment_0".to_string(),
                "pre_deployment/+5".to_string()
            ),
            (
                "post_deployment_0".to_string(),
                "post_deployment/-99.9".to_string()
            ),
            (
                "post_deployment_1".to_string(),
                "post_deployment/.5".to_string()
            ),
        ]
    );
    // -99.9 before .5, one at a time: each waits for the previous one on all of its nodes.
    // A package 2.0.0 task for `controller` is not for the primary controller (only 1.0.0
    // packages got `primary-controller` added).
    assert!(!ids(&p, "1").contains(&"post_deployment_0".to_string()));
    assert_eq!(waits(&p, "3", "post_deployment_1"), ["post_deployment_0@2"]);
    assert_eq!(
        waits(&p, "2", "post_deployment_0"),
        ["post_deployment_end@null"]
    );
    assert_eq!(
        step(&p, "2", "post_deployment_0")["parameters"]["cwd"],
        "/etc/fuel/plugins/v2-postfix-valid-1.0/"
    );
}

#[test]
fn a_plugin_whose_name_the_validator_refuses_is_not_planned() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("p");
    let from = fixture("plugins/v2-postfix-valid");
    std::fs::create_dir(&plugin).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_file() {
            std::fs::copy(entry.path(), plugin.join(entry.file_name())).unwrap();
        }
    }
    let meta = std::fs::read_to_string(plugin.join("metadata.yaml")).unwrap();
    let renamed = meta.replace("name: v2-postfix-valid", "name: V2 Postfix");
    assert_ne!(meta, renamed);
    std::fs::write(plugin.join("metadata.yaml"), renamed).unwrap();
    let refusal = "metadata.yaml:1:7: error: name: \"V2 Postfix\" in metadata.yaml is not a valid \
                   plugin name";
    let out = mini(&[
        "--release-version",
        "2014.2.2-6.1",
        "--plugin",
        plugin.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(refusal), "{err}");
    // The validator says the same, once.
    let out = stoker(dir.path())
        .args(["plugin", "validate"])
        .arg(&plugin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches(refusal).count(), 1, "{text}");
}

#[test]
fn a_cycle_exits_1_naming_the_files() {
    let cluster = fixture("graph/mini-cluster.yaml");
    let out = plan(&[
        "--release",
        fixture("graph/cycle").to_str().unwrap(),
        "--cluster",
        cluster.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("stoker: no plan: the task graph has 4 cycle(s):"),
        "{err}"
    );
    assert!(
        err.contains("    first on node 1 (a/tasks.yaml:1 (release cycle))\n      -> is required by\n    second on node 1 (b/tasks.yaml:1 (release cycle))"),
        "{err}"
    );
}

#[test]
fn unreadable_or_malformed_inputs_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let release = fixture("graph/mini");
    let release = release.to_str().unwrap();
    let missing = dir.path().join("nope.yaml");
    let out = plan(&["--release", release, "--cluster", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope.yaml"));

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "nodes:\n  - {uid: 1, roles: controller}\n").unwrap();
    let out = plan(&["--release", release, "--cluster", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml:2:") && err.contains("nodes[0].roles"),
        "{err}"
    );

    let cluster = fixture("graph/mini-cluster.yaml");
    let out = plan(&[
        "--release",
        dir.path().join("no-such-release").to_str().unwrap(),
        "--cluster",
        cluster.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-release"));

    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{not json").unwrap();
    let out = mini(&["--deployed", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.json"));
}
