//! Reading a plan's JSON (`stoker graph plan --format json`, `GET /api/v1/clusters/{id}/plan`):
//! a node by uid, a task of it, its task ids in order, what a task waits for (its groups'
//! members too).

use std::fmt::Display;

use serde_json::Value;

/// The plan's node `uid`.
pub fn node(plan: &Value, uid: impl Display) -> &Value {
    let uid = uid.to_string();
    plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["uid"] == uid)
        .unwrap_or_else(|| panic!("no node {uid} in the plan"))
}

/// Task `id` of node `uid`.
pub fn step<'a>(plan: &'a Value, uid: impl Display, id: &str) -> &'a Value {
    let uid = uid.to_string();
    node(plan, &uid)["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no task {id} on node {uid}"))
}

/// Node `uid`'s task ids, in order.
pub fn ids(plan: &Value, uid: impl Display) -> Vec<String> {
    node(plan, uid)["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

/// What task `id` of node `uid` waits for, as `task@node`, sorted: its `requires` and the
/// members of its `requires_groups`.
pub fn waits(plan: &Value, uid: impl Display, id: &str) -> Vec<String> {
    let mut w = waits_of(plan, step(plan, uid, id));
    w.sort();
    w
}

/// What a step of `plan` waits for, as `task@node`: its `requires`, then each member of each
/// group it names in `requires_groups`.
pub fn waits_of(plan: &Value, step: &Value) -> Vec<String> {
    let mut w: Vec<String> = step["requires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}@{}",
                r["task"].as_str().unwrap(),
                r["node"].as_str().unwrap()
            )
        })
        .collect();
    for g in step["requires_groups"].as_array().into_iter().flatten() {
        let group = plan["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == *g)
            .unwrap_or_else(|| panic!("no group {g} in the plan"));
        for node in group["nodes"].as_array().unwrap() {
            w.push(format!(
                "{}@{}",
                group["task"].as_str().unwrap(),
                node.as_str().unwrap()
            ));
        }
    }
    w
}
