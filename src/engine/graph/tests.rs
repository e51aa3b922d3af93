//! Unit tests of the graph engine as a whole: one small hand-written graph per rule of
//! [`super::build`] (edges, placement, stages, primaries, conditions, YAQL fields, strategies,
//! cycles, warnings, determinism, incremental redeploys) and the plugin-ordering spec's worked
//! example through legacy `tasks.yaml` adaptation; and a Fuel-shaped graph planned the default
//! way (barriers, shared conditions) against the direct, quadratic reference at several sizes.
//! Test-only; touches no state of its own.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Value as J, json};

use super::build::{PlanError, PluginGraph, ReleaseGraph, plan};
use super::input::{Cluster, Deployed, NodeSpec};
use super::plan::{Plan, Status, Step, Strategy};
use super::task::Source;

/// A release whose tasks are written at lines 10, 20, 30 ... of `tasks.yaml`; tasks without a
/// version get 2.0.0 (so no version warning clutters the plan).
fn release(tasks: J) -> ReleaseGraph {
    let tasks = tasks
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut t = t.clone();
            if let Some(o) = t.as_object_mut() {
                o.entry("version").or_insert(json!("2.0.0"));
            }
            (
                t,
                Source::new("release test", "tasks.yaml", (i as u32 + 1) * 10),
            )
        })
        .collect();
    ReleaseGraph {
        name: "test".into(),
        version: "newton-10.0".into(),
        tasks,
        ..ReleaseGraph::default()
    }
}

fn nodes(spec: &[(&str, &[&str])]) -> Vec<NodeSpec> {
    spec.iter().map(|(uid, r)| NodeSpec::new(uid, r)).collect()
}

/// One controller (the primary), one more controller, two computes.
fn four() -> Vec<NodeSpec> {
    nodes(&[
        ("1", &["controller"]),
        ("2", &["controller"]),
        ("3", &["compute"]),
        ("4", &["compute"]),
    ])
}

pub(super) fn make(tasks: J, ns: &[NodeSpec]) -> Plan {
    plan(
        &Cluster::default(),
        ns,
        &release(tasks),
        &[],
        &Deployed::default(),
    )
    .unwrap()
}

fn step<'a>(p: &'a Plan, uid: &str, id: &str) -> &'a Step {
    p.node(uid)
        .and_then(|n| n.tasks.iter().find(|t| &*t.id == id))
        .unwrap_or_else(|| panic!("no {id} on node {uid}:\n{}", p.to_text()))
}

fn has(p: &Plan, uid: &str, id: &str) -> bool {
    p.node(uid)
        .is_some_and(|n| n.tasks.iter().any(|t| &*t.id == id))
}

fn ids<'a>(p: &'a Plan, uid: &str) -> Vec<&'a str> {
    p.node(uid)
        .map(|n| n.tasks.iter().map(|t| &*t.id).collect())
        .unwrap_or_default()
}

/// What a step waits for (its groups' members too), as `task@node`, sorted.
fn waits(p: &Plan, uid: &str, id: &str) -> Vec<String> {
    let mut w: Vec<String> = step(p, uid, id)
        .waits(p)
        .map(|r| format!("{}@{}", r.task, r.node))
        .collect();
    w.sort();
    w
}

/// The groups a step waits for, by id.
fn groups(p: &Plan, uid: &str, id: &str) -> Vec<String> {
    step(p, uid, id)
        .requires_groups
        .iter()
        .map(|g| g.id.to_string())
        .collect()
}

/// Every `requires` of every step comes earlier in the global order.
fn assert_consistent(p: &Plan) {
    let mut order = std::collections::HashMap::new();
    for n in &p.nodes {
        for t in &n.tasks {
            order.insert(format!("{}@{}", t.id, n.uid), t.order);
        }
    }
    for n in &p.nodes {
        for t in &n.tasks {
            for r in t.waits(p) {
                let before = order[&format!("{}@{}", r.task, r.node)];
                assert!(
                    before < t.order,
                    "{}@{} before {}@{}",
                    r.task,
                    r.node,
                    t.id,
                    n.uid
                );
            }
        }
    }
}

#[test]
fn requires_orders_tasks_on_the_same_node_only() {
    // Written in the "wrong" order: b first.
    let p = make(
        json!([
            {"id": "b", "type": "shell", "roles": ["compute"], "requires": ["a"]},
            {"id": "a", "type": "shell", "roles": ["compute"]},
        ]),
        &four(),
    );
    assert_eq!(ids(&p, "3"), ["a", "b"]);
    assert_eq!(ids(&p, "4"), ["a", "b"]);
    assert_eq!(waits(&p, "3", "b"), ["a@3"]);
    assert_eq!(waits(&p, "4", "b"), ["a@4"]);
    assert!(step(&p, "3", "a").order < step(&p, "3", "b").order);
    assert_eq!(p.summary.cross_node_edges, 0);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_consistent(&p);
}

#[test]
fn required_for_is_the_reverse_edge() {
    let p = make(
        json!([
            {"id": "late", "type": "shell", "roles": "*"},
            {"id": "early", "type": "shell", "roles": "*", "required_for": ["late"]},
        ]),
        &four(),
    );
    for uid in ["1", "2", "3", "4"] {
        assert_eq!(ids(&p, uid), ["early", "late"], "node {uid}");
        assert_eq!(waits(&p, uid, "late"), [format!("early@{uid}")]);
    }
    assert_consistent(&p);
}

#[test]
fn regex_targets_match_ids_from_the_start() {
    let p = make(
        json!([
            {"id": "last", "type": "shell", "roles": ["compute"], "requires": ["/setup_.*/"]},
            {"id": "setup_a", "type": "shell", "roles": ["compute"]},
            {"id": "setup_b", "type": "shell", "roles": ["compute"]},
            {"id": "pre_setup_c", "type": "shell", "roles": ["compute"]},
            {"id": "first", "type": "shell", "roles": ["compute"],
             "required_for": ["/^la/"]},
        ]),
        &four(),
    );
    // `pre_setup_c` does not match `setup_.*` (anchored at the start, like re.match).
    assert_eq!(
        waits(&p, "3", "last"),
        ["first@3", "setup_a@3", "setup_b@3"]
    );
    assert_eq!(ids(&p, "3").last(), Some(&"last"));
    // A regex that matches nothing is a warning, not an error.
    let p = make(
        json!([{"id": "x", "type": "shell", "roles": "*", "requires": ["/nothing.*/"]}]),
        &four(),
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("requires /nothing.*/, which matches no task")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn cross_depends_with_a_role_name_waits_for_every_such_node() {
    let p = make(
        json!([
            {"id": "db", "type": "shell", "roles": ["controller", "primary-controller"]},
            {"id": "api", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "db", "role": ["controller", "primary-controller"]}]},
            {"id": "api_primary", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "db", "role": "primary-controller"}]},
        ]),
        &four(),
    );
    assert_eq!(waits(&p, "3", "api"), ["db@1", "db@2"]);
    assert_eq!(waits(&p, "4", "api"), ["db@1", "db@2"]);
    assert_eq!(waits(&p, "3", "api_primary"), ["db@1"]);
    // Both controllers: one group, said once; one node: a direct wait.
    assert_eq!(groups(&p, "3", "api"), ["db@controller|primary-controller"]);
    assert!(step(&p, "3", "api").requires.is_empty());
    assert!(groups(&p, "3", "api_primary").is_empty());
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.groups[0].nodes, ["1", "2"]);
    assert_eq!(p.summary.barriers, 1);
    // The summary counts what the plan means: every member of a group once per consumer.
    assert_eq!(p.summary.cross_node_edges, 6);
    assert_consistent(&p);
}

/// A group of N nodes that N tasks wait for is one barrier: the plan lists the group once
/// and each waiting task names it, in every output; what each task waits for is unchanged.
#[test]
fn a_group_wait_is_one_barrier_in_every_output() {
    let mut specs = vec![("1", vec!["controller"])];
    let uids: Vec<String> = (2..=40).map(|i| i.to_string()).collect();
    for uid in &uids {
        specs.push((uid.as_str(), vec!["compute"]));
    }
    let specs: Vec<(&str, &[&str])> = specs.iter().map(|(u, r)| (*u, r.as_slice())).collect();
    let p = make(
        json!([
            {"id": "agent", "type": "shell", "roles": ["compute"]},
            // Every compute waits for every compute's agent, and for its own directly too.
            {"id": "enable", "type": "shell", "roles": ["compute"], "requires": ["agent"],
             "cross-depends": [{"name": "agent"}, {"name": "agent", "role": "compute"}]},
        ]),
        &nodes(&specs),
    );
    let all: Vec<String> = (2..=40).map(|i| format!("agent@{i}")).collect();
    let mut sorted = all.clone();
    sorted.sort();
    for uid in ["2", "17", "40"] {
        assert_eq!(waits(&p, uid, "enable"), sorted);
        // The own node's agent is a member of the group: not said twice.
        assert!(step(&p, uid, "enable").requires.is_empty(), "{uid}");
        assert_eq!(groups(&p, uid, "enable"), ["agent@* + compute"]);
    }
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.summary.barriers, 1);
    // 39 computes, each waiting for 39 agents (38 of them on other nodes).
    assert_eq!(p.summary.edges, 39 * 39);
    assert_eq!(p.summary.cross_node_edges, 39 * 38);
    assert_consistent(&p);
    // Text: the group once with its nodes, each wait as one name.
    let text = p.to_text();
    assert!(
        text.contains("group waits (barriers) (1):\n  agent@* + compute"),
        "{text}"
    );
    assert!(text.contains("39 nodes: 2, 3, 4, 5"), "{text}");
    assert!(
        text.contains("        waits for agent@* + compute (barrier, 39 nodes)\n"),
        "{text}"
    );
    assert!(!text.contains("agent@3, agent@4"), "{text}");
    // JSON: the group once, each step naming it; no wait per member.
    let j: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(j["groups"][0]["id"], "agent@* + compute");
    assert_eq!(j["groups"][0]["nodes"].as_array().unwrap().len(), 39);
    let enable = &j["nodes"][5]["tasks"][1];
    assert_eq!(enable["id"], "enable");
    assert_eq!(enable["requires_groups"], json!(["agent@* + compute"]));
    assert_eq!(enable["requires"], json!([]));
    assert_eq!(p.to_json().matches("\"task\":\"agent\"").count(), 0);
    // Dot: members point at the barrier, the barrier at each task that waits.
    let dot = p.to_dot();
    assert!(dot.contains("  \"agent@* + compute (barrier)\" [label=\"agent@* + compute (39 nodes)\", shape=octagon];\n"));
    assert!(dot.contains("  \"agent@7\" -> \"agent@* + compute (barrier)\";\n"));
    assert!(dot.contains("  \"agent@* + compute (barrier)\" -> \"enable@7\";\n"));
    assert_eq!(dot.matches(" -> ").count(), 39 + 39);
}

#[test]
fn cross_depends_self_absent_role_and_policies() {
    let p = make(
        json!([
            {"id": "a", "type": "shell", "roles": "*"},
            {"id": "self_dep", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "a", "role": "self"}]},
            // No role: every node that runs `a`.
            {"id": "all_dep", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "a"}]},
            {"id": "any_dep", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "a", "role": ["compute"], "policy": "any"}]},
            {"id": "all_compute", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "a", "role": ["compute"], "policy": "all"}]},
            // A role no node has: no edge, no error.
            {"id": "absent", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "a", "role": ["mongo"]}]},
        ]),
        &nodes(&[
            ("1", &["controller"]),
            ("3", &["compute"]),
            ("4", &["compute"]),
        ]),
    );
    assert_eq!(waits(&p, "3", "self_dep"), ["a@3"]);
    assert_eq!(waits(&p, "3", "all_dep"), ["a@1", "a@3", "a@4"]);
    // `any`: one node, the first in node order.
    assert_eq!(waits(&p, "3", "any_dep"), ["a@3"]);
    assert_eq!(waits(&p, "4", "any_dep"), ["a@3"]);
    assert_eq!(waits(&p, "4", "all_compute"), ["a@3", "a@4"]);
    assert!(waits(&p, "3", "absent").is_empty());
    assert_eq!(groups(&p, "3", "all_dep"), ["a@*"]);
    assert_eq!(groups(&p, "4", "all_compute"), ["a@compute"]);
    assert!(groups(&p, "3", "any_dep").is_empty());
    assert_consistent(&p);
}

/// A regex that matches the task's own id never makes it wait for itself, even with
/// `role: self` (stable-8.0's cluster_health cross-depends on `/(primary-)?cluster/`).
#[test]
fn a_task_never_waits_for_itself() {
    let p = make(
        json!([
            {"id": "cluster", "type": "shell", "roles": ["compute"]},
            {"id": "cluster_health", "type": "shell", "roles": ["compute"],
             "requires": ["cluster"],
             "cross-depends": [{"name": "/(primary-)?cluster/", "role": "self"}]},
            {"id": "exact", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "exact", "role": "self"}]},
        ]),
        &four(),
    );
    assert_eq!(waits(&p, "3", "cluster_health"), ["cluster@3"]);
    assert!(waits(&p, "3", "exact").is_empty());
}

/// A task cross-depending on itself on its peers: itself on this node is excluded, so two
/// nodes wait for each other, which is a cycle (as it was in Fuel).
#[test]
fn cross_depends_on_the_same_task_across_nodes_is_a_cycle() {
    let e = plan(
        &Cluster::default(),
        &nodes(&[("3", &["compute"]), ("4", &["compute"])]),
        &release(json!([
            {"id": "peer", "type": "shell", "roles": ["compute"],
             "cross-depends": [{"name": "peer", "role": ["compute"]}]},
        ])),
        &[],
        &Deployed::default(),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("peer on node 3") && msg.contains("peer on node 4"),
        "{msg}"
    );
}

#[test]
fn cross_depended_by_makes_others_wait() {
    let p = make(
        json!([
            {"id": "vip", "type": "shell", "roles": ["primary-controller"],
             "cross-depended-by": [{"name": "agent", "role": ["compute"]}]},
            {"id": "agent", "type": "shell", "roles": ["compute"]},
        ]),
        &four(),
    );
    assert_eq!(waits(&p, "3", "agent"), ["vip@1"]);
    assert_eq!(waits(&p, "4", "agent"), ["vip@1"]);
    assert_consistent(&p);
}

#[test]
fn group_tasks_go_to_every_node_of_the_group() {
    let p = make(
        json!([
            {"id": "controller", "type": "group", "roles": ["controller"],
             "tasks": ["memberless", "compute_too"], "fault_tolerance": 0},
            {"id": "compute", "type": "group", "roles": ["compute"]},
            // No roles of its own: placed by the group only.
            {"id": "memberless", "type": "shell"},
            // Its own roles, plus the group's nodes.
            {"id": "compute_too", "type": "shell", "roles": ["compute"]},
        ]),
        &four(),
    );
    // The primary controller carries `primary-controller`, not `controller`.
    assert!(!has(&p, "1", "memberless"));
    assert!(has(&p, "2", "memberless"));
    assert!(!has(&p, "3", "memberless"));
    for uid in ["2", "3", "4"] {
        assert!(has(&p, uid, "compute_too"), "node {uid}");
    }
    // Groups are not tasks of any node.
    assert!(
        p.nodes
            .iter()
            .all(|n| n.tasks.iter().all(|t| t.ty != "group"))
    );
    let g = &p.fault_tolerance_groups;
    assert_eq!(g.len(), 2, "{g:?}");
    assert_eq!(
        (g[0].name.as_str(), g[0].node_ids.clone()),
        ("controller", vec!["2".into()])
    );
    assert_eq!(g[0].fault_tolerance, json!(0));
    // No fault_tolerance: node count + 1.
    assert_eq!(g[1].fault_tolerance, json!(3));
    // An unknown member is an error naming the group's file.
    let e = plan(
        &Cluster::default(),
        &four(),
        &release(json!([{"id": "g", "type": "group", "roles": "*", "tasks": ["ghost"]}])),
        &[],
        &Deployed::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tasks.yaml:10 (release test): group g lists task ghost, which no task defines"
    );
}

#[test]
fn stages_live_on_the_sync_node() {
    let p = make(
        json!([
            {"id": "deploy_start", "type": "stage"},
            {"id": "deploy_end", "type": "stage", "requires": ["deploy_start"]},
            {"id": "work", "type": "shell", "roles": "*",
             "requires": ["deploy_start"], "required_for": ["deploy_end"]},
        ]),
        &four(),
    );
    let sync = p.node("null").unwrap();
    assert_eq!(ids(&p, "null"), ["deploy_start", "deploy_end"]);
    assert!(sync.tasks.iter().all(|t| t.status == Status::Stage));
    for uid in ["1", "2", "3", "4"] {
        assert_eq!(ids(&p, uid), ["work"]);
        assert_eq!(waits(&p, uid, "work"), ["deploy_start@null"]);
    }
    assert_eq!(
        waits(&p, "null", "deploy_end"),
        ["deploy_start@null", "work@1", "work@2", "work@3", "work@4"]
    );
    assert_eq!(p.summary.stages, 2);
    assert_consistent(&p);
}

#[test]
fn primary_controller_is_exactly_one_controller() {
    let tasks = json!([
        {"id": "primary_only", "type": "shell", "roles": ["primary-controller"]},
        {"id": "others", "type": "shell", "roles": ["controller"]},
        {"id": "every", "type": "shell", "roles": ["primary-controller", "controller"]},
        {"id": "re", "type": "shell", "roles": ["/.*controller/"]},
    ]);
    let ns = nodes(&[
        ("1", &["compute"]),
        ("2", &["controller"]),
        ("3", &["controller"]),
        ("4", &["controller"]),
    ]);
    let p = make(tasks.clone(), &ns);
    let on = |id: &str| -> Vec<String> {
        p.nodes
            .iter()
            .filter(|n| n.tasks.iter().any(|t| &*t.id == id))
            .map(|n| n.uid.clone())
            .collect()
    };
    assert_eq!(on("primary_only"), ["2"]);
    assert_eq!(on("others"), ["3", "4"]);
    assert_eq!(on("every"), ["2", "3", "4"]);
    assert_eq!(on("re"), ["2", "3", "4"]);
    assert_eq!(p.node("2").unwrap().roles, ["primary-controller"]);
    let primaries = p
        .nodes
        .iter()
        .filter(|n| n.roles.iter().any(|r| r == "primary-controller"))
        .count();
    assert_eq!(primaries, 1);
    // A node pinned as primary keeps it; a ready node wins over a new one.
    let mut pinned = ns.clone();
    pinned[3].primary = vec!["controller".into()];
    let p = make(tasks.clone(), &pinned);
    assert_eq!(p.node("4").unwrap().roles, ["primary-controller"]);
    let mut fresh = ns;
    fresh[1].status = "discover".into();
    let p = make(tasks, &fresh);
    assert_eq!(p.node("3").unwrap().roles, ["primary-controller"]);
}

/// A plugin's node roles add to the default metadata of a release that has none (a
/// fuel-library tree): the primary controller stays.
#[test]
fn plugin_roles_keep_the_default_primaries() {
    let plugin = PluginGraph {
        name: "detach".into(),
        version: "1.0.0".into(),
        roles_metadata: json!({"standalone-rabbitmq": {"name": "RabbitMQ", "has_primary": true}}),
        ..PluginGraph::default()
    };
    let ns = nodes(&[
        ("1", &["controller"]),
        ("2", &["controller"]),
        ("3", &["standalone-rabbitmq"]),
        ("4", &["standalone-rabbitmq"]),
    ]);
    let p = plan(
        &Cluster::default(),
        &ns,
        &release(json!([{"id": "a", "type": "shell", "roles": "*"}])),
        &[plugin],
        &Deployed::default(),
    )
    .unwrap();
    let roles: Vec<Vec<String>> = p.nodes.iter().map(|n| n.roles.clone()).collect();
    assert_eq!(
        roles[..4],
        [
            vec!["primary-controller".to_string()],
            vec!["controller".to_string()],
            vec!["primary-standalone-rabbitmq".to_string()],
            vec!["standalone-rabbitmq".to_string()],
        ]
    );
    assert!(p.nodes[0].tags.contains(&"primary-rabbitmq".to_string()));
}

#[test]
fn false_condition_skips_with_reason_and_keeps_edges() {
    let p = make(
        json!([
            {"id": "a", "type": "shell", "roles": "*"},
            {"id": "b", "type": "shell", "roles": "*", "requires": ["a"],
             "condition": {"yaql_exp": "$.uid = '3'"}},
            {"id": "c", "type": "shell", "roles": "*", "requires": ["b"]},
            {"id": "d", "type": "shell", "roles": "*", "condition": false},
            {"id": "e", "type": "shell", "roles": "*",
             "condition": "settings:storage.volumes_ceph.value == true"},
        ]),
        &four(),
    );
    let b1 = step(&p, "1", "b");
    assert_eq!(b1.status, Status::Skipped);
    assert_eq!(
        b1.reason.as_deref(),
        Some("condition is false: $.uid = '3' (old data: none)")
    );
    assert_eq!(b1.parameters, None);
    assert_eq!(step(&p, "3", "b").status, Status::Run);
    // The chain holds through the skipped task.
    assert_eq!(waits(&p, "1", "c"), ["b@1"]);
    assert_eq!(waits(&p, "1", "b"), ["a@1"]);
    assert_eq!(ids(&p, "1")[..3], ["a", "b", "c"]);
    assert_eq!(
        step(&p, "1", "d").reason.as_deref(),
        Some("condition is false")
    );
    // Legacy string condition on a setting that is absent: false.
    let e = step(&p, "1", "e");
    assert_eq!(
        (e.status, e.reason.as_deref()),
        (
            Status::Skipped,
            Some("condition is false: settings:storage.volumes_ceph.value == true")
        )
    );
    assert_consistent(&p);
    // ... and true once the cluster sets it.
    let cluster = Cluster {
        settings: json!({"storage": {"volumes_ceph": true}}),
        ..Cluster::default()
    };
    let p = plan(
        &cluster,
        &four(),
        &release(json!([{"id": "e", "type": "shell", "roles": "*",
            "condition": "settings:storage.volumes_ceph.value == true"}])),
        &[],
        &Deployed::default(),
    )
    .unwrap();
    assert_eq!(step(&p, "1", "e").status, Status::Run);
}

#[test]
fn yaql_fields_at_any_depth_are_evaluated_per_node() {
    let cluster = Cluster {
        settings: json!({"greeting": "hello"}),
        ..Cluster::default()
    };
    let p = plan(
        &cluster,
        &four(),
        &release(json!([{
            "id": "deep",
            "type": "shell",
            "roles": "*",
            "parameters": {
                "cmd": {"yaql_exp": "concat($.greeting, ' ', $.uid)"},
                "nested": {"list": [1, {"yaql_exp": "$node.roles"}, {"inner": {"yaql_exp": "$common.greeting"}}]},
                "formatted": "cluster {CLUSTER_ID} on {OPENSTACK_VERSION}",
                "timeout": 60
            }
        }])),
        &[],
        &Deployed::default(),
    )
    .unwrap();
    let params = |uid: &str| step(&p, uid, "deep").parameters.clone().unwrap().0;
    assert_eq!(
        *params("1"),
        json!({
            "cmd": "hello 1",
            "nested": {"list": [1, ["primary-controller"], {"inner": "hello"}]},
            "formatted": "cluster 1 on newton-10.0",
            "timeout": 60,
            "cwd": "/"
        })
    );
    assert_eq!(params("3")["cmd"], "hello 3");
    assert_eq!(params("3")["nested"]["list"][1], json!(["compute"]));
}

#[test]
fn id_is_never_evaluated_nor_formatted() {
    let p = make(
        json!([
            {"id": "task_{CLUSTER_ID}", "type": "shell", "roles": ["compute"],
             "parameters": {"cmd": "echo {CLUSTER_ID}"}},
        ]),
        &four(),
    );
    let s = step(&p, "3", "task_{CLUSTER_ID}");
    assert_eq!(s.parameters.as_ref().unwrap().0["cmd"], "echo 1");
    let e = plan(
        &Cluster::default(),
        &four(),
        &release(json!([{"id": {"yaql_exp": "'x'"}, "type": "shell", "roles": "*"}])),
        &[],
        &Deployed::default(),
    )
    .unwrap_err();
    assert!(matches!(e, PlanError::Task(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "tasks.yaml:10 (release test): `id` cannot be a YAQL field"
    );
}

#[test]
fn strategies_parallel_with_yaql_amount_and_one_by_one() {
    let p = make(
        json!([
            {"id": "par", "type": "shell", "roles": "*",
             "parameters": {"cmd": "x", "strategy": {"type": "parallel",
                                                     "amount": {"yaql_exp": "1 + 1"}}}},
            {"id": "unlimited", "type": "shell", "roles": "*",
             "parameters": {"cmd": "x", "strategy": {"type": "parallel"}}},
            {"id": "serial", "type": "puppet", "roles": ["controller", "primary-controller"],
             "parameters": {"puppet_manifest": "m.pp", "strategy": {"type": "one_by_one"}}},
        ]),
        &four(),
    );
    let par = Strategy {
        ty: "parallel".into(),
        amount: Some(2),
    };
    assert_eq!(step(&p, "3", "par").strategy.as_ref(), Some(&par));
    assert_eq!(
        step(&p, "1", "serial").strategy.as_ref().unwrap().limit(),
        Some(1)
    );
    assert_eq!(
        step(&p, "1", "unlimited")
            .strategy
            .as_ref()
            .unwrap()
            .limit(),
        None
    );
    let c: Vec<(&str, &str, Option<u64>, usize)> = p
        .concurrency
        .iter()
        .map(|c| {
            (
                c.task.as_str(),
                c.strategy.ty.as_str(),
                c.strategy.limit(),
                c.nodes,
            )
        })
        .collect();
    assert_eq!(
        c,
        [
            ("par", "parallel", Some(2), 4),
            ("unlimited", "parallel", None, 4),
            ("serial", "one_by_one", Some(1), 2),
        ]
    );
    assert!(p.to_text().contains("[parallel 2]"), "{}", p.to_text());
    // A bad amount is an evaluation error naming the field.
    let e = plan(
        &Cluster::default(),
        &four(),
        &release(json!([{"id": "bad", "type": "shell", "roles": ["compute"],
            "parameters": {"cmd": "x", "strategy": {"type": "parallel",
                                                    "amount": {"yaql_exp": "'two'"}}}}])),
        &[],
        &Deployed::default(),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(
            "task bad on node 3: parameters.strategy: strategy amount must be a whole number"
        ),
        "{msg}"
    );
}

#[test]
fn a_cycle_names_each_task_with_its_file_and_line() {
    let e = plan(
        &Cluster::default(),
        &nodes(&[("1", &["compute"])]),
        &release(json!([
            {"id": "a", "type": "shell", "roles": "*", "requires": ["c"]},
            {"id": "b", "type": "shell", "roles": "*", "requires": ["a"]},
            {"id": "c", "type": "shell", "roles": "*", "requires": ["b"]},
            {"id": "free", "type": "shell", "roles": "*"},
        ])),
        &[],
        &Deployed::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&e, PlanError::Cycle(c) if c.len() == 1 && c[0].len() == 3),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "the task graph has 1 cycle(s):\n  cycle:\n    \
         a on node 1 (tasks.yaml:10 (release test))\n      -> is required by\n    \
         b on node 1 (tasks.yaml:20 (release test))\n      -> is required by\n    \
         c on node 1 (tasks.yaml:30 (release test))\n      -> is required by\n    \
         back to a on node 1"
    );
}

#[test]
fn a_missing_target_is_a_warning_and_the_edge_is_dropped() {
    let p = make(
        json!([
            {"id": "a", "type": "shell", "roles": "*", "requires": ["nowhere"],
             "cross-depends": [{"name": "ghost", "role": "*"}]},
        ]),
        &four(),
    );
    assert_eq!(
        p.warnings,
        [
            "tasks.yaml:10 (release test): task a requires nowhere, which no task defines; the \
             edge is dropped",
            "tasks.yaml:10 (release test): task a cross-depends on ghost, which no task \
             defines; the edge is dropped",
        ]
    );
    assert!(waits(&p, "1", "a").is_empty());
    assert!(p.to_text().contains("warnings:\n  - tasks.yaml:10"));
}

fn varied() -> J {
    json!([
        {"id": "deploy_start", "type": "stage"},
        {"id": "deploy_end", "type": "stage", "requires": ["deploy_start"]},
        {"id": "hiera", "type": "puppet", "roles": "*", "requires": ["deploy_start"],
         "required_for": ["deploy_end"], "parameters": {"puppet_manifest": "h.pp"}},
        {"id": "db", "type": "puppet", "roles": ["primary-controller", "controller"],
         "requires": ["hiera"], "required_for": ["deploy_end"],
         "parameters": {"puppet_manifest": "db.pp", "strategy": {"type": "one_by_one"}}},
        {"id": "nova", "type": "shell", "roles": ["compute"], "requires": ["hiera"],
         "required_for": ["deploy_end"],
         "cross-depends": [{"name": "db", "role": ["primary-controller", "controller"]}],
         "parameters": {"cmd": {"yaql_exp": "$.uid"}}},
        {"id": "maybe", "type": "shell", "roles": "*", "requires": ["/^ho/"],
         "condition": {"yaql_exp": "$.uid in list('2', '4')"}, "parameters": {"cmd": "x"}},
    ])
}

#[test]
fn plans_are_deterministic_whatever_the_node_order() {
    let ns = four();
    let first = make(varied(), &ns).to_json();
    assert_eq!(first, make(varied(), &ns).to_json());
    assert_eq!(make(varied(), &ns).to_dot(), make(varied(), &ns).to_dot());
    // Every permutation of the node list gives the same bytes.
    let perms = [[3, 1, 0, 2], [1, 0, 3, 2], [2, 3, 1, 0], [3, 2, 1, 0]];
    for perm in perms {
        let shuffled: Vec<NodeSpec> = perm.iter().map(|&i| ns[i].clone()).collect();
        assert_eq!(make(varied(), &shuffled).to_json(), first, "{perm:?}");
    }
    assert_consistent(&make(varied(), &ns));
}

fn changes() -> ReleaseGraph {
    release(json!([
        {"id": "always", "type": "shell", "roles": "*", "parameters": {"cmd": "a"}},
        {"id": "on_x", "type": "shell", "roles": "*", "parameters": {"cmd": "x"},
         "condition": {"yaql_exp": "changed($.x)"}},
        {"id": "on_y", "type": "shell", "roles": "*", "parameters": {"cmd": "y"},
         "condition": {"yaql_exp": "changed($.y)"}},
        {"id": "on_any", "type": "shell", "roles": "*", "parameters": {"cmd": "xy"},
         "condition": {"yaql_exp": "changedAny($.x, $.y)"}},
        {"id": "on_nested", "type": "shell", "roles": "*", "parameters": {"cmd": "n"},
         "condition": {"yaql_exp": "changed($.deep.z)"}},
    ]))
}

fn run_on(p: &Plan, uid: &str) -> Vec<String> {
    p.node(uid)
        .unwrap()
        .tasks
        .iter()
        .filter(|t| t.status == Status::Run)
        .map(|t| t.id.to_string())
        .collect()
}

/// A plan after a deployment holds each text once: a node's unchanged part is the deployed
/// snapshot's, and every node's step of a task has the same id, source, reason and
/// deployment, not copies (what 10,000 nodes' plans and deployed state weigh).
#[test]
fn a_plan_after_a_deployment_shares_its_texts_with_the_deployed_state_and_between_nodes() {
    let ns = nodes(&[
        ("1", &["compute"]),
        ("2", &["compute"]),
        ("3", &["compute"]),
    ]);
    let cluster = Cluster {
        settings: json!({"x": 1, "y": "a", "deep": {"z": [1, 2], "other": 0}}),
        ..Cluster::default()
    };
    let mut deployed = Deployed::default();
    let p1 = plan(&cluster, &ns, &changes(), &[], &deployed).unwrap();
    deployed.record(&p1, "1");
    // Recorded ids are shared between nodes.
    let ids: Vec<(&Arc<str>, &Arc<str>)> = ["1", "2"]
        .iter()
        .map(|uid| {
            deployed.tasks[*uid]
                .iter()
                .find(|(t, _)| &***t == "on_x")
                .unwrap()
        })
        .collect();
    assert!(Arc::ptr_eq(ids[0].0, ids[1].0) && Arc::ptr_eq(ids[0].1, ids[1].1));
    // A node whose part did not change shares the snapshot's text; a changed one does not.
    let mut changed = ns.clone();
    changed[2].data = Arc::new(json!({"extra": true}));
    let p2 = plan(&cluster, &changed, &changes(), &[], &deployed).unwrap();
    let old = |uid: &str| &deployed.deployments["1"].nodes[uid];
    for (i, uid) in p2.uids.iter().enumerate() {
        let new = &p2.data.nodes[i];
        assert_eq!(new.shares_text_with(old(uid)), uid != "3", "node {uid}");
        assert_eq!(new == old(uid), uid != "3", "node {uid}");
    }
    // Every node's skipped step shares its texts.
    let (a, b) = (step(&p2, "1", "on_x"), step(&p2, "2", "on_x"));
    assert_eq!(
        a.reason.as_deref(),
        Some("condition is false: changed($.x) (old data: deployment 1)")
    );
    for (x, y) in [(&a.id, &b.id), (&a.source, &b.source)] {
        assert!(Arc::ptr_eq(x, y));
    }
    let (Some(ra), Some(rb)) = (&a.reason, &b.reason) else {
        panic!("no reasons")
    };
    assert!(Arc::ptr_eq(ra, rb));
    let (Some(ca), Some(cb)) = (&a.compared_with, &b.compared_with) else {
        panic!("no old data")
    };
    assert!(Arc::ptr_eq(ca, cb));
}

#[test]
fn incremental_redeploys_run_only_what_changed() {
    let ns = nodes(&[("1", &["controller"]), ("2", &["compute"])]);
    let mut cluster = Cluster {
        settings: json!({"x": 1, "y": "a", "deep": {"z": [1, 2], "other": 0}}),
        ..Cluster::default()
    };
    let mut deployed = Deployed::default();
    // First deployment: no old data, everything runs.
    let p1 = plan(&cluster, &ns, &changes(), &[], &deployed).unwrap();
    for uid in ["1", "2"] {
        assert_eq!(
            run_on(&p1, uid),
            ["always", "on_x", "on_y", "on_any", "on_nested"]
        );
    }
    deployed.record(&p1, "1");
    // Same data again: only the unconditional task runs; the rest say why.
    let p2 = plan(&cluster, &ns, &changes(), &[], &deployed).unwrap();
    for uid in ["1", "2"] {
        assert_eq!(run_on(&p2, uid), ["always"]);
    }
    let s = step(&p2, "2", "on_x");
    assert_eq!(
        s.reason.as_deref(),
        Some("condition is false: changed($.x) (old data: deployment 1)")
    );
    assert_eq!(s.compared_with.as_deref(), Some("1"));
    // Recording a run that skipped tasks keeps their earlier record.
    deployed.record(&p2, "2");
    assert_eq!(deployed.last_run("2", "on_x"), Some("1"));
    assert_eq!(deployed.last_run("2", "always"), Some("2"));
    // One setting changes: exactly the tasks whose changed() covers it.
    cluster.settings["x"] = json!(2);
    let p3 = plan(&cluster, &ns, &changes(), &[], &deployed).unwrap();
    for uid in ["1", "2"] {
        assert_eq!(run_on(&p3, uid), ["always", "on_x", "on_any"]);
    }
    // A nested change reruns the task that looks there, and only it.
    cluster.settings["x"] = json!(1);
    cluster.settings["deep"]["other"] = json!(5);
    let p4 = plan(&cluster, &ns, &changes(), &[], &deployed).unwrap();
    assert_eq!(run_on(&p4, "1"), ["always"]);
    cluster.settings["deep"]["z"] = json!([1, 2, 3]);
    let p5 = plan(&cluster, &ns, &changes(), &[], &deployed).unwrap();
    assert_eq!(run_on(&p5, "1"), ["always", "on_nested"]);
    // A node that must be redeployed, or a forced deployment, forgets old data.
    let mut again = ns.clone();
    again[1].status = "provisioned".into();
    let p6 = plan(&cluster, &again, &changes(), &[], &deployed).unwrap();
    assert_eq!(run_on(&p6, "1"), ["always", "on_nested"]);
    assert_eq!(
        run_on(&p6, "2"),
        ["always", "on_x", "on_y", "on_any", "on_nested"]
    );
    cluster.force = true;
    let p7 = plan(&cluster, &ns, &changes(), &[], &deployed).unwrap();
    assert_eq!(
        run_on(&p7, "1"),
        ["always", "on_x", "on_y", "on_any", "on_nested"]
    );
}

/// Conditions that read every node (Fuel's "is this node new?", `changedAny` over the node
/// list) are evaluated once per class of nodes: the plans say exactly what evaluating each
/// condition on each node says, through a first deployment, redeploys with nodes added and
/// removed, changed settings, nodes with data of their own, a forced run and a node to
/// redeploy, and spend fewer YAQL steps.
#[test]
fn shared_conditions_plan_what_per_node_evaluation_plans() {
    use super::build::{Method, plan_by};
    let tasks = || {
        release(json!([
            {"id": "netconfig", "type": "shell", "roles": "*", "parameters": {"cmd": "n"},
             "condition": {"yaql_exp": "$.uid in added($.network_metadata.nodes.values()).uid"}},
            {"id": "hiera", "type": "shell", "roles": "*", "parameters": {"cmd": "h"},
             "condition": {"yaql_exp": "($.uid in added($.network_metadata.nodes.values().uid)) or changed($.get('debug'))"}},
            {"id": "umm", "type": "shell", "roles": "*", "parameters": {"cmd": "u"},
             "condition": {"yaql_exp": "$.uid in added($.nodes).uid and not $.uid in added($.nodes.where($.role = 'x')).uid"}},
            {"id": "controllers", "type": "shell", "roles": ["compute"], "parameters": {"cmd": "c"},
             "condition": {"yaql_exp": "changedAny($.network_scheme, $.network_metadata.nodes.values().where($.node_roles.any($.matches('controller'))).uid, $.get('x'))"}},
            {"id": "all", "type": "shell", "roles": "*", "parameters": {"cmd": "a"},
             "condition": {"yaql_exp": "changedAll($.x, $.network_metadata.vips) or changed($.roles)"}},
            {"id": "nested", "type": "shell", "roles": "*", "parameters": {"cmd": "d"},
             "condition": {"yaql_exp": "$.nodes.where(changed($.x)).len() > 0 and changed($.nodes.select($.uid))"}},
        ]))
    };
    let both_with =
        |tasks: &ReleaseGraph, cluster: &Cluster, ns: &[NodeSpec], deployed: &Deployed| {
            let engine = crate::yaql::Engine::new(crate::yaql::Limits::default());
            let plan = |sharing| {
                plan_by(
                    &engine,
                    super::build::DEFAULT_YAQL_BUDGET,
                    Method {
                        barriers: true,
                        sharing,
                    },
                    cluster,
                    ns,
                    tasks,
                    &[],
                    deployed,
                )
            };
            match (plan(true), plan(false)) {
                (Ok(shared), Ok(each)) => {
                    assert!(shared.summary.yaql_steps < each.summary.yaql_steps);
                    let mut same = shared.clone();
                    same.summary.yaql_steps = each.summary.yaql_steps;
                    assert_eq!(same, each, "{}", shared.to_text());
                    Ok(shared)
                }
                (shared, each) => {
                    assert_eq!(shared, each);
                    shared
                }
            }
        };
    let both = |cluster: &Cluster, ns: &[NodeSpec], deployed: &Deployed| {
        both_with(&tasks(), cluster, ns, deployed).unwrap()
    };
    let node = |i: u32, role: &str| {
        let mut n = NodeSpec::new(&i.to_string(), &[role]);
        n.data = Arc::new(json!({"network_scheme": {"a": 0}}));
        n
    };
    let mut ns: Vec<NodeSpec> = (1..=9)
        .map(|i| node(i, if i <= 3 { "controller" } else { "compute" }))
        .collect();
    ns[4].data = Arc::new(json!({"network_scheme": {"a": 1}, "x": 7}));
    let mut cluster = Cluster {
        settings: json!({"x": 1, "debug": false, "network_metadata": {"vips": {"v": 1}}}),
        ..Cluster::default()
    };
    let mut deployed = Deployed::default();
    let p1 = both(&cluster, &ns, &deployed);
    assert_eq!(
        run_on(&p1, "4"),
        ["netconfig", "hiera", "umm", "controllers", "all", "nested"]
    );
    deployed.record(&p1, "1");
    // Two nodes join, one leaves: the new ones are new; the others compare with deployment 1.
    ns.remove(7);
    ns.push(node(10, "compute"));
    ns.push(node(11, "controller"));
    let p2 = both(&cluster, &ns, &deployed);
    assert_eq!(
        run_on(&p2, "10"),
        ["netconfig", "hiera", "umm", "controllers", "all", "nested"]
    );
    assert_eq!(run_on(&p2, "4"), ["controllers"]);
    deployed.record(&p2, "2");
    // A setting changes; a node must be redeployed; then everything is forced.
    cluster.settings["debug"] = json!(true);
    cluster.settings["x"] = json!(2);
    ns[2].status = "provisioned".into();
    let p3 = both(&cluster, &ns, &deployed);
    assert!(run_on(&p3, "4").contains(&"hiera".to_string()));
    assert_eq!(
        run_on(&p3, "3").len(),
        5,
        "a node to redeploy: all its tasks"
    );
    cluster.force = true;
    both(&cluster, &ns, &deployed);
    // A condition that fails on some nodes fails there with the same message.
    let failing = release(json!([
        {"id": "t", "type": "shell", "roles": "*", "parameters": {"cmd": "t"},
         "condition": {"yaql_exp": "$.uid in added($.nodes).uid and $.only_5 = 1"}},
    ]));
    Arc::make_mut(&mut ns[4].data)["only_5"] = json!(1);
    let err = both_with(&failing, &cluster, &ns, &Deployed::default()).unwrap_err();
    assert!(err.to_string().contains("KeyError"), "{err}");
}

// ---- The plugin-ordering spec's worked example, through the whole engine. ----

/// The stage markers of a Fuel 9+ release graph.
fn staged_release() -> ReleaseGraph {
    release(json!([
        {"id": "pre_deployment_start", "type": "stage"},
        {"id": "pre_deployment_end", "type": "stage", "requires": ["pre_deployment_start"]},
        {"id": "deploy_start", "type": "stage", "requires": ["pre_deployment_end"]},
        {"id": "deploy_end", "type": "stage", "requires": ["deploy_start"]},
        {"id": "post_deployment_start", "type": "stage", "requires": ["deploy_end"]},
        {"id": "post_deployment_end", "type": "stage", "requires": ["post_deployment_start"]},
        {"id": "main", "type": "shell", "roles": "*", "parameters": {"cmd": "main"},
         "requires": ["deploy_start"], "required_for": ["deploy_end"]},
    ]))
}

fn legacy_plugin(name: &str, stages: &[&str]) -> PluginGraph {
    PluginGraph {
        name: name.into(),
        version: "1.0.0".into(),
        legacy: stages
            .iter()
            .enumerate()
            .map(|(i, stage)| {
                (
                    json!({"role": ["compute"], "stage": stage, "type": "shell",
                           "parameters": {"cmd": format!("{name} {stage}")}}),
                    Source::new(name, "tasks.yaml", i as u32 * 6 + 1),
                )
            })
            .collect(),
        ..PluginGraph::default()
    }
}

#[test]
fn spec_worked_example_through_the_graph() {
    let plugin1 = legacy_plugin(
        "plugin1",
        &[
            "pre_deployment",
            "pre_deployment/100",
            "pre_deployment/-100",
            "pre_deployment/-99.9",
        ],
    );
    let plugin2 = legacy_plugin(
        "plugin2",
        &[
            "pre_deployment",
            "pre_deployment/100.0",
            "pre_deployment/-101",
            "pre_deployment/0",
        ],
    );
    let ns = nodes(&[("1", &["compute"]), ("2", &["compute"])]);
    // Plugins given in either order plan the same.
    for plugins in [
        vec![plugin1.clone(), plugin2.clone()],
        vec![plugin2.clone(), plugin1.clone()],
    ] {
        let p = plan(
            &Cluster::default(),
            &ns,
            &staged_release(),
            &plugins,
            &Deployed::default(),
        )
        .unwrap();
        assert_consistent(&p);
        for uid in ["1", "2"] {
            let cmds: Vec<String> = p
                .node(uid)
                .unwrap()
                .tasks
                .iter()
                .filter_map(|t| t.parameters.as_ref())
                .filter_map(|x| x.0["cmd"].as_str().map(str::to_string))
                .collect();
            assert_eq!(
                cmds,
                [
                    "plugin2 pre_deployment/-101",
                    "plugin1 pre_deployment/-100",
                    "plugin1 pre_deployment/-99.9",
                    "plugin1 pre_deployment",
                    "plugin2 pre_deployment",
                    "plugin2 pre_deployment/0",
                    "plugin1 pre_deployment/100",
                    "plugin2 pre_deployment/100.0",
                    "main",
                ],
                "node {uid}"
            );
        }
        let generated: Vec<(&str, &str, &str, &str)> = p
            .generated
            .iter()
            .map(|g| {
                (
                    g.id.as_str(),
                    g.plugin.as_str(),
                    g.stage.as_str(),
                    g.source.as_str(),
                )
            })
            .collect();
        assert_eq!(
            generated,
            [
                (
                    "pre_deployment_0",
                    "plugin2",
                    "pre_deployment/-101",
                    "tasks.yaml:13 (plugin2)"
                ),
                (
                    "pre_deployment_1",
                    "plugin1",
                    "pre_deployment/-100",
                    "tasks.yaml:13 (plugin1)"
                ),
                (
                    "pre_deployment_2",
                    "plugin1",
                    "pre_deployment/-99.9",
                    "tasks.yaml:19 (plugin1)"
                ),
                (
                    "pre_deployment_3",
                    "plugin1",
                    "pre_deployment",
                    "tasks.yaml:1 (plugin1)"
                ),
                (
                    "pre_deployment_4",
                    "plugin2",
                    "pre_deployment",
                    "tasks.yaml:1 (plugin2)"
                ),
                (
                    "pre_deployment_5",
                    "plugin2",
                    "pre_deployment/0",
                    "tasks.yaml:19 (plugin2)"
                ),
                (
                    "pre_deployment_6",
                    "plugin1",
                    "pre_deployment/100",
                    "tasks.yaml:7 (plugin1)"
                ),
                (
                    "pre_deployment_7",
                    "plugin2",
                    "pre_deployment/100.0",
                    "tasks.yaml:7 (plugin2)"
                ),
            ]
        );
        // One at a time, cluster-wide: each waits for the previous one on every node, the first
        // for the stage's end marker, and the next stage waits for them.
        assert_eq!(
            waits(&p, "1", "pre_deployment_0"),
            ["pre_deployment_end@null"]
        );
        assert_eq!(
            waits(&p, "2", "pre_deployment_5"),
            ["pre_deployment_4@1", "pre_deployment_4@2"]
        );
        let start = waits(&p, "null", "deploy_start");
        for n in 0..8 {
            for uid in ["1", "2"] {
                assert!(
                    start.contains(&format!("pre_deployment_{n}@{uid}")),
                    "{start:?}"
                );
            }
        }
    }
}

/// Seed 000's chain: legacy tasks run one after another, cluster-wide, even when one in the
/// middle (or every one before a task) matches no node.
#[test]
fn the_legacy_chain_holds_when_a_task_runs_nowhere() {
    let task = |role: &str, stage: &str, line: u32| {
        (
            json!({"role": [role], "stage": stage, "type": "shell",
                   "parameters": {"cmd": format!("{role} {stage}")}}),
            Source::new("chain", "tasks.yaml", line),
        )
    };
    let plugin = PluginGraph {
        name: "chain".into(),
        version: "1.0.0".into(),
        legacy: vec![
            task("compute", "post_deployment/1", 1),
            task("ceph-osd", "post_deployment/2", 7),
            task("compute", "post_deployment/3", 13),
            task("ceph-osd", "pre_deployment/1", 19),
            task("ceph-osd", "pre_deployment/2", 25),
            task("primary-controller", "pre_deployment/3", 31),
        ],
        ..PluginGraph::default()
    };
    let ns = nodes(&[
        ("1", &["compute"]),
        ("2", &["compute"]),
        ("3", &["controller"]),
    ]);
    let p = plan(
        &Cluster::default(),
        &ns,
        &staged_release(),
        &[plugin],
        &Deployed::default(),
    )
    .unwrap();
    assert_consistent(&p);
    let unplaced: Vec<&str> = p.unplaced.iter().map(|u| u.task.as_str()).collect();
    assert_eq!(
        unplaced,
        ["pre_deployment_0", "pre_deployment_1", "post_deployment_1"]
    );
    // A -> (B on nobody) -> C: C waits for A on every node A runs on.
    for uid in ["1", "2"] {
        assert_eq!(
            waits(&p, uid, "post_deployment_2"),
            ["post_deployment_0@1", "post_deployment_0@2"],
            "node {uid}"
        );
    }
    // Every task before it on nobody: the stage's end marker.
    assert_eq!(
        waits(&p, "3", "pre_deployment_2"),
        ["pre_deployment_end@null"]
    );
    let order = |uid: &str, id: &str| step(&p, uid, id).order;
    assert!(order("1", "post_deployment_0") < order("2", "post_deployment_2"));
    assert!(order("2", "post_deployment_0") < order("1", "post_deployment_2"));
    assert!(
        p.warnings.iter().any(|w| w.contains(
            "legacy task post_deployment_2 waits for post_deployment_0: post_deployment_1 \
             before it run(s) on no node"
        )),
        "{:?}",
        p.warnings
    );
}

#[test]
fn nan_and_inf_postfixes_are_refused() {
    for bad in [
        "post_deployment/nan",
        "post_deployment/inf",
        "pre_deployment/-inf",
        "post_deployment/1e400",
    ] {
        let e = plan(
            &Cluster::default(),
            &nodes(&[("1", &["compute"])]),
            &staged_release(),
            &[legacy_plugin("plugin1", &["post_deployment/5", bad])],
            &Deployed::default(),
        )
        .unwrap_err();
        assert!(matches!(e, PlanError::Legacy(_)), "{bad}: {e}");
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("tasks.yaml:7 (plugin1): invalid stage {bad:?}")),
            "{msg}"
        );
    }
}

/// A graph whose `heavy` condition takes about 2,000 YAQL steps per node, `light` a few.
fn heavy() -> J {
    json!([
        {"id": "light", "type": "shell", "roles": ["*"],
         "condition": {"yaql_exp": "len($.nodes) > 0"}},
        {"id": "heavy", "type": "shell", "roles": ["*"],
         "condition": {"yaql_exp": "range(0, 1000).select($ + 1).len() > 0"},
         "parameters": {"cmd": {"yaql_exp": "str(len($.nodes))"}}},
        {"id": "after", "type": "shell", "roles": ["*"],
         "condition": {"yaql_exp": "range(0, 1000).select($ + 1).len() > 0"}}
    ])
}

fn within(budget: u64, tasks: J, ns: &[NodeSpec]) -> Result<Plan, PlanError> {
    let engine = crate::yaql::Engine::default();
    super::build::plan_within(
        &engine,
        budget,
        &Cluster::default(),
        ns,
        &release(tasks),
        &[],
        &Deployed::default(),
    )
}

#[test]
fn a_plan_counts_its_yaql_steps_and_stays_within_its_budget() {
    let p = within(1_000_000, heavy(), &four()).unwrap();
    let spent = p.summary.yaql_steps;
    assert!(spent > 4 * 2 * 2000 && spent < 1_000_000, "{spent}");
    // The same input spends the same steps, whatever the budget (when within it).
    assert_eq!(within(spent, heavy(), &four()).unwrap(), p);
    match within(spent - 1, heavy(), &four()) {
        Err(PlanError::Budget {
            budget, spent: s, ..
        }) => {
            assert_eq!(budget, spent - 1);
            assert!(s > budget, "{s}");
        }
        other => panic!("expected the budget error, got {other:?}"),
    }
}

#[test]
fn over_budget_names_the_tasks_that_spent_it_deterministically() {
    let err = within(1_500, heavy(), &four()).unwrap_err();
    let PlanError::Budget {
        budget,
        spent,
        spenders,
    } = &err
    else {
        panic!("expected the budget error, got {err:?}");
    };
    assert_eq!(*budget, 1_500);
    // Each of the two planning threads stopped within its share of the budget, inside the
    // first `heavy` condition it evaluated: `after` was never evaluated.
    assert!(*spent > 1_500 && *spent <= 2 * 1_500 + 2, "{spent}");
    assert_eq!(
        (spenders[0].task.as_str(), spenders[0].field.as_str()),
        ("heavy", "condition")
    );
    assert_eq!(spenders[0].source, "tasks.yaml:20 (release test)");
    assert!(spenders.iter().all(|s| s.task != "after"), "{err}");
    assert!(
        err.to_string()
            .starts_with("the plan's YAQL evaluation is over its budget of 1500 steps (")
            && err
                .to_string()
                .contains("\n  task heavy (tasks.yaml:20 (release test)), field condition: "),
        "{err}"
    );
    // Same input, same refusal, byte for byte.
    for _ in 0..5 {
        assert_eq!(
            within(1_500, heavy(), &four()).unwrap_err().to_string(),
            err.to_string()
        );
    }
}

#[test]
fn structural_yaql_counts_against_the_budget_too() {
    // Roles computed from $common are evaluated before any node: a budget they exceed stops
    // the plan there.
    let tasks = json!([
        {"id": "t", "type": "shell",
         "roles": {"yaql_exp": "range(0, 1000).select($ + 1).where(false).toList() + ['*']"}}
    ]);
    let err = within(100, tasks, &four()).unwrap_err();
    let PlanError::Budget { spenders, .. } = &err else {
        panic!("expected the budget error, got {err:?}");
    };
    assert_eq!(
        (spenders[0].task.as_str(), spenders[0].field.as_str()),
        ("t", "roles")
    );
}

#[test]
fn a_change_holds_only_the_tasks_that_ran_and_their_nodes_data() {
    let ns = nodes(&[("1", &["controller"]), ("2", &["compute"])]);
    let cluster = Cluster {
        settings: json!({"x": 1, "y": "a", "deep": {"z": [1], "other": 0}}),
        ..Cluster::default()
    };
    let p = plan(&cluster, &ns, &changes(), &[], &Deployed::default()).unwrap();
    // Node 2 was left out of the deployment: nothing of it is kept.
    let change = super::Change::of(&p, |uid, _| uid == "1");
    assert_eq!(change.tasks.len(), 5);
    assert!(change.tasks.iter().all(|(uid, _)| uid == "1"));
    let snap = change.snapshot.clone().unwrap();
    assert_eq!(snap.nodes.keys().collect::<Vec<_>>(), ["1"]);
    // What a deployment stores borrows the plan's data and writes the same text.
    let borrowed = super::ChangeOf::of(&p, |uid, _| uid == "1");
    assert_eq!(borrowed.tasks, change.tasks);
    assert_eq!(
        serde_json::to_string(&borrowed.snapshot.unwrap()).unwrap(),
        serde_json::to_string(&snap).unwrap()
    );
    // Applied, it is what recording the whole plan keeps of node 1.
    let mut applied = Deployed::default();
    applied.apply(change, "7");
    let mut recorded = Deployed::default();
    recorded.record(&p, "7");
    assert_eq!(applied.tasks["1"], recorded.tasks["1"]);
    assert!(!applied.tasks.contains_key("2") && recorded.tasks.contains_key("2"));
    assert_eq!(
        applied.deployments["7"].nodes["1"],
        recorded.deployments["7"].nodes["1"]
    );
    // Nothing ran: no change at all.
    assert_eq!(
        super::Change::of(&p, |_, _| false),
        super::Change::default()
    );
}

// ---- Barriers and shared conditions against the direct (quadratic) way. ----

/// A graph with every shape of wait Fuel's graphs have: group waits on every node and on role
/// sets (a task in its own group, a one-node group, two role values of one task, a regex),
/// `policy: any`, `self`, the sync node, `cross-depended-by` with and without a role,
/// `requires`/`required_for` with regexes, stages, the master, and conditions that ask
/// whether the node is new or whether the node list changed (some false: skipped tasks keep
/// their waits).
fn fuel_shaped() -> J {
    json!([
        {"id": "deploy_start", "type": "stage"},
        {"id": "deploy_end", "type": "stage", "requires": ["deploy_start"]},
        {"id": "post_start", "type": "stage", "requires": ["deploy_end"]},
        {"id": "hiera", "type": "puppet", "roles": "*", "requires": ["deploy_start"],
         "required_for": ["deploy_end"], "parameters": {"puppet_manifest": "h.pp"}},
        {"id": "netconfig", "type": "puppet", "roles": "*", "requires": ["hiera"],
         "required_for": ["deploy_end"], "parameters": {"puppet_manifest": "n.pp"},
         "condition": {"yaql_exp": "$.uid in added($.network_metadata.nodes.values()).uid or changedAny($.network_scheme, $.network_metadata.nodes.values().uid)"}},
        {"id": "db", "type": "puppet", "roles": ["primary-controller"], "requires": ["netconfig"],
         "required_for": ["deploy_end"], "parameters": {"puppet_manifest": "db.pp"},
         "cross-depends": [{"name": "/^d/", "role": "primary-controller"}]},
        {"id": "keystone-a", "type": "puppet", "roles": ["primary-controller", "controller"],
         "requires": ["netconfig"], "cross-depends": [{"name": "db", "role": ["primary-controller"]}],
         "required_for": ["deploy_end"], "parameters": {"puppet_manifest": "k.pp"}},
        {"id": "keystone-b", "type": "puppet", "roles": ["primary-controller", "controller"],
         "requires": ["keystone-a"], "required_for": ["deploy_end"],
         "cross-depends": [{"name": "keystone-a"}],
         "parameters": {"puppet_manifest": "k.pp"}},
        {"id": "api", "type": "puppet", "roles": ["primary-controller", "controller"],
         "requires": ["/^keystone-/"], "required_for": ["deploy_end"],
         "cross-depends": [{"name": "/^keystone-/", "role": ["primary-controller", "controller"]},
                           {"name": "db", "role": "primary-controller"}],
         "parameters": {"puppet_manifest": "api.pp"}},
        {"id": "agent", "type": "puppet", "roles": ["compute"], "requires": ["netconfig"],
         "required_for": ["deploy_end"],
         "cross-depends": [{"name": "api", "role": ["primary-controller", "controller"]},
                           {"name": "api", "role": "/^(primary-)?controller$/"}],
         "parameters": {"puppet_manifest": "a.pp"}},
        {"id": "enable", "type": "shell", "roles": ["compute"], "requires": ["agent"],
         "required_for": ["deploy_end"],
         "cross-depends": [{"name": "agent"}, {"name": "agent", "role": "compute"}],
         "condition": {"yaql_exp": "$.uid in added($.nodes).uid or changed($.get('debug'))"},
         "parameters": {"cmd": {"yaql_exp": "concat('enable ', $.uid)"}}},
        {"id": "volume", "type": "puppet", "roles": ["cinder"], "requires": ["netconfig"],
         "required_for": ["deploy_end"],
         "cross-depends": [{"name": "api", "role": ["primary-controller", "controller"]},
                           {"name": "agent", "role": "compute", "policy": "any"},
                           {"name": "volume", "role": "self"}],
         "parameters": {"puppet_manifest": "v.pp"}},
        {"id": "firewall", "type": "shell", "roles": ["primary-controller", "controller"],
         "requires": ["hiera"], "cross-depended-by": [{"name": "/^(api|keystone-b)$/"}],
         "parameters": {"cmd": "fw"}},
        {"id": "open", "type": "shell", "roles": ["primary-controller", "controller"],
         "requires": ["api"],
         "cross-depended-by": [{"name": "enable", "role": "compute"}],
         "parameters": {"cmd": "open"}},
        {"id": "on_master", "type": "shell", "roles": ["master"], "requires": ["post_start"],
         "cross-depends": [{"name": "enable"}, {"name": "volume", "role": "cinder"}],
         "parameters": {"cmd": "m"}},
        {"id": "sync_check", "type": "shell", "roles": "*", "requires": ["post_start"],
         "cross-depends": [{"name": "post_start", "role": null}, {"name": "/^(enable|volume)$/"}],
         "parameters": {"cmd": "s"}},
    ])
}

/// 3 controllers, then computes, every fifth node a cinder node and every seventh both.
fn fuel_nodes(count: u32) -> Vec<NodeSpec> {
    (1..=count)
        .map(|i| {
            let roles: &[&str] = match i {
                1..=3 => &["controller"],
                _ if i % 7 == 0 => &["compute", "cinder"],
                _ if i % 5 == 0 => &["cinder"],
                _ => &["compute"],
            };
            let mut n = NodeSpec::new(&i.to_string(), roles);
            n.data = Arc::new(json!({"network_scheme": {"mtu": 1500 + i % 3}}));
            n
        })
        .collect()
}

/// Whom each (task, node) follows, directly or not, reading a plan's groups as barrier
/// vertices between their members and the tasks that wait for them. Also checks that every
/// wait comes earlier in the order.
fn ancestors(p: &Plan) -> HashMap<String, BTreeSet<String>> {
    let mut steps: Vec<(&str, &Step)> = p
        .nodes
        .iter()
        .flat_map(|n| n.tasks.iter().map(move |t| (n.uid.as_str(), t)))
        .collect();
    steps.sort_by_key(|(_, t)| t.order);
    let key = |task: &str, node: &str| format!("{task}@{node}");
    let mut anc: HashMap<String, BTreeSet<String>> = HashMap::new();
    // A barrier's ancestors: its members and theirs, computed once.
    let mut barrier: HashMap<usize, BTreeSet<String>> = HashMap::new();
    for (uid, t) in steps {
        let mut mine = BTreeSet::new();
        for r in &t.requires {
            let k = key(&r.task, &r.node);
            mine.extend(
                anc.get(&k)
                    .unwrap_or_else(|| panic!("{k} after {}@{uid}", t.id))
                    .iter()
                    .cloned(),
            );
            mine.insert(k);
        }
        for g in &t.requires_groups {
            let through = barrier.entry(g.index).or_insert_with(|| {
                let group = &p.groups[g.index];
                let mut s = BTreeSet::new();
                for node in &group.nodes {
                    let k = key(&group.task, node);
                    s.extend(
                        anc.get(&k)
                            .unwrap_or_else(|| panic!("{k} after barrier {}", g.id))
                            .iter()
                            .cloned(),
                    );
                    s.insert(k);
                }
                s
            });
            mine.extend(through.iter().cloned());
        }
        anc.insert(key(&t.id, uid), mine);
    }
    anc
}

/// The plan made the default way says what the reference (a wait per member, every
/// condition on every node) says: the same nodes, tasks, order, statuses, reasons,
/// parameters and data; each task waits for the same tasks (its groups' members counted);
/// the same pairs of tasks are ordered, directly or through others; no wait is said twice.
fn assert_same_as_reference(fast: &Plan, reference: &Plan) {
    assert!(reference.groups.is_empty());
    assert_eq!(fast.nodes.len(), reference.nodes.len());
    for (a, b) in fast.nodes.iter().zip(&reference.nodes) {
        assert_eq!(a.uid, b.uid);
        assert_eq!(
            a.tasks.iter().map(|t| &t.id).collect::<Vec<_>>(),
            b.tasks.iter().map(|t| &t.id).collect::<Vec<_>>(),
            "node {}",
            a.uid
        );
        for (x, y) in a.tasks.iter().zip(&b.tasks) {
            let mut got: Vec<String> = x
                .waits(fast)
                .map(|r| format!("{}@{}", r.task, r.node))
                .collect();
            let n = got.len();
            got.sort();
            got.dedup();
            assert_eq!(n, got.len(), "{}@{} waits for a task twice", x.id, a.uid);
            let mut want: Vec<String> = y
                .waits(reference)
                .map(|r| format!("{}@{}", r.task, r.node))
                .collect();
            want.sort();
            assert_eq!(got, want, "{}@{}", x.id, a.uid);
        }
    }
    assert_eq!(ancestors(fast), ancestors(reference));
    // Everything else, field by field.
    let strip = |p: &Plan| {
        let mut p = p.clone();
        p.groups.clear();
        p.summary.barriers = 0;
        p.summary.yaql_steps = 0;
        for n in &mut p.nodes {
            for t in &mut n.tasks {
                t.requires.clear();
                t.requires_groups.clear();
            }
        }
        p
    };
    assert_eq!(strip(fast), strip(reference));
}

#[test]
fn barriers_and_shared_conditions_plan_what_the_direct_way_plans() {
    use super::build::{DEFAULT_YAQL_BUDGET, Method, plan_by};
    let engine = crate::yaql::Engine::new(crate::yaql::Limits::default());
    let graph = release(fuel_shaped());
    let cluster = Cluster {
        settings: json!({"debug": false}),
        ..Cluster::default()
    };
    let both = |ns: &[NodeSpec], cluster: &Cluster, deployed: &Deployed| {
        let by = |method| {
            plan_by(
                &engine,
                DEFAULT_YAQL_BUDGET,
                method,
                cluster,
                ns,
                &graph,
                &[],
                deployed,
            )
            .unwrap()
        };
        let fast = by(Method::default());
        let reference = by(Method::REFERENCE);
        assert_same_as_reference(&fast, &reference);
        // Each half alone changes nothing either.
        for method in [
            Method {
                barriers: true,
                sharing: false,
            },
            Method {
                barriers: false,
                sharing: true,
            },
        ] {
            assert_same_as_reference(&by(method), &reference);
        }
        fast
    };
    for count in [1, 2, 4, 7, 12, 60] {
        let ns = fuel_nodes(count);
        let p = both(&ns, &cluster, &Deployed::default());
        if count >= 12 {
            // The group waits are barriers: fewer stored waits than meant.
            assert!(!p.groups.is_empty(), "{count}");
            let stored: usize = p
                .nodes
                .iter()
                .flat_map(|n| &n.tasks)
                .map(|t| t.requires.len() + t.requires_groups.len())
                .sum();
            let factor = if count >= 60 { 3 } else { 1 };
            assert!(
                stored * factor < p.summary.edges,
                "{count}: {stored} of {}",
                p.summary.edges
            );
        }
    }
    // A redeploy: nodes added and removed, a setting changed, a node's scheme changed.
    let mut ns = fuel_nodes(30);
    let mut deployed = Deployed::default();
    let first = both(&ns, &cluster, &deployed);
    deployed.record(&first, "1");
    ns.remove(9);
    ns.extend(fuel_nodes(34).into_iter().skip(30));
    Arc::make_mut(&mut ns[5].data)["network_scheme"]["mtu"] = json!(9000);
    let second = both(&ns, &cluster, &deployed);
    assert!(run_on(&second, "6").contains(&"netconfig".to_string()));
    deployed.record(&second, "2");
    let mut changed = cluster.clone();
    changed.settings["debug"] = json!(true);
    both(&ns, &changed, &deployed);
    both(&ns, &cluster, &deployed);
    // A group that contains its own consumers on other nodes is a cycle both ways.
    let mut cyclic = fuel_shaped();
    cyclic[10]["cross-depends"] = json!([{"name": "enable", "role": "compute"}]);
    let graph = release(cyclic);
    for method in [Method::default(), Method::REFERENCE] {
        let e = plan_by(
            &engine,
            DEFAULT_YAQL_BUDGET,
            method,
            &cluster,
            &fuel_nodes(12),
            &graph,
            &[],
            &Deployed::default(),
        );
        assert!(matches!(e, Err(PlanError::Cycle(_))), "{method:?}: {e:?}");
    }
}
