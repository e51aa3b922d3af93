//! Environments: nodes assigned with roles, settings, and the deployment plan the master makes
//! of them over the API, with the bundled release's real graph. (Incremental redeploys, which
//! need a deployment to have run, are in `deploy.rs`.)

use crate::common::plan::step;
use crate::common::{TestDaemon, inventory};

/// A daemon with the bundled release, an environment and `roles.len()` discovered nodes
/// assigned with those roles. Returns the daemon, the environment id and the node ids.
fn environment(roles: &[&str]) -> (TestDaemon, i64, Vec<i64>) {
    let d = TestDaemon::start_bundled("install");
    let (cluster, ids) = d.environment(roles, roles.len());
    (d, cluster, ids)
}

fn steps<'a>(plan: &'a serde_json::Value, uid: &str) -> &'a Vec<serde_json::Value> {
    plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["uid"] == uid)
        .unwrap_or_else(|| panic!("no node {uid} in plan"))["tasks"]
        .as_array()
        .unwrap()
}

#[test]
fn plan_of_an_environment_follows_its_roles() {
    let (d, cluster, ids) = environment(&["controller", "compute", "compute"]);
    let http = d.http();
    let listed = http
        .get(&format!("/api/v1/clusters/{cluster}/nodes"))
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 3);

    let r = http.get(&format!("/api/v1/clusters/{cluster}/plan"));
    assert_eq!(r.status, 200, "{}", r.body);
    let plan = r.json();
    let controller = ids[0].to_string();
    let compute = ids[1].to_string();
    let node = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["uid"] == controller.as_str())
        .unwrap();
    assert!(
        node["roles"]
            .as_array()
            .unwrap()
            .contains(&"primary-controller".into()),
        "the one controller is primary: {node}"
    );
    assert_eq!(step(&plan, &controller, "database")["status"], "run");
    assert!(
        !steps(&plan, &compute).iter().any(|t| t["id"] == "database"),
        "controller tasks stay on controllers"
    );
    // Same input, same bytes.
    let again = http.get(&format!("/api/v1/clusters/{cluster}/plan"));
    assert_eq!(r.body, again.body);

    let text = http.get(&format!("/api/v1/clusters/{cluster}/plan?format=text"));
    assert!(text.content_type.starts_with("text/plain"));
    assert!(text.body.contains("database"), "{}", text.body);
    let dot = http.get(&format!("/api/v1/clusters/{cluster}/plan?format=dot"));
    assert!(dot.body.starts_with("digraph"), "{}", dot.body);
    let bad = http.get(&format!("/api/v1/clusters/{cluster}/plan?format=svgz"));
    assert_eq!(bad.status, 400);
    assert!(bad.json()["message"].as_str().unwrap().contains("format"));
}

#[test]
fn assignment_errors_name_the_problem() {
    let (d, cluster, ids) = environment(&["controller"]);
    let http = d.http();
    let path = format!("/api/v1/clusters/{cluster}/nodes/{}", ids[0]);
    let r = http.put(&path, r#"{"roles": []}"#);
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().contains("roles"));
    let r = http.put(&path, r#"{"roles": ["compute", "compute"]}"#);
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().contains("roles[1]"));
    let r = http.put(&path, r#"{"roles": "compute"}"#);
    assert_eq!(r.status, 400);
    let r = http.put(
        &format!("/api/v1/clusters/999/nodes/{}", ids[0]),
        r#"{"roles": ["compute"]}"#,
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["code"], "not_found");
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/999"),
        r#"{"roles": ["compute"]}"#,
    );
    assert_eq!(r.status, 404);

    // A second environment cannot take a node the first one holds.
    let release = http.get("/api/v1/releases").json()[0]["id"]
        .as_i64()
        .unwrap();
    let other = http
        .post(
            "/api/v1/clusters",
            &format!(r#"{{"name": "env-b", "release_id": {release}}}"#),
        )
        .json()["id"]
        .as_i64()
        .unwrap();
    let r = http.put(
        &format!("/api/v1/clusters/{other}/nodes/{}", ids[0]),
        r#"{"roles": ["compute"]}"#,
    );
    assert_eq!(r.status, 409, "{}", r.body);
    // An environment without nodes has no plan, and says why.
    let r = http.get(&format!("/api/v1/clusters/{other}/plan"));
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["code"], "no_nodes");
    // Unassigned, the node can move.
    assert_eq!(http.delete(&path).status, 204);
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{cluster}/nodes"))
            .json()
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn environment_page_shows_nodes_plan_and_picture() {
    let (d, cluster, ids) = environment(&["controller", "compute"]);
    let http = d.http();
    let page = http.get(&format!("/environments/{cluster}"));
    assert_eq!(page.status, 200);
    let html = page.body;
    assert!(html.contains("primary-controller"), "roles shown");
    assert!(
        html.contains("<svg") && html.contains("class=\"plan-graph\""),
        "picture inlined"
    );
    assert!(html.contains("nova-compute"), "per-node tables");
    assert!(
        html.contains("nova-controller on "),
        "cross-node waits named"
    );
    // The list links to it.
    assert!(
        http.get("/environments")
            .body
            .contains(&format!("/environments/{cluster}"))
    );
    // Removing through the form asks first (without JavaScript, a page) and does nothing yet.
    let remove = format!("/environments/{cluster}/nodes/{}/remove", ids[1]);
    let r = d.http().post_form(&remove, "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("name=\"confirmed\" value=\"1\""),
        "{}",
        r.body
    );
    let members = |http: &crate::common::Http| {
        http.get(&format!("/api/v1/clusters/{cluster}/nodes"))
            .json()
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(members(&http), 2, "not removed before the confirmation");
    // Confirmed, it takes the node out and the page says so.
    let r = d.http().submit(&remove, "confirmed=1");
    assert!(r.body.contains("removed: it is free again"), "{}", r.body);
    assert_eq!(members(&http), 1);
    // Adding through the form (the ticked nodes, the ticked roles) puts it back with its roles.
    let body = format!("nodes={}&roles=compute&roles=cinder", ids[1]);
    let r = d
        .http()
        .submit(&format!("/environments/{cluster}/nodes"), &body);
    assert!(
        r.body.contains("1 node added as compute, cinder."),
        "{}",
        r.body
    );
    let node = http.get(&format!("/api/v1/nodes/{}", ids[1])).json();
    // Nailgun's meaning: assigned, not yet deployed.
    assert_eq!(
        node["pending_roles"],
        serde_json::json!(["compute", "cinder"])
    );
    assert_eq!(node["roles"], serde_json::json!([]));
    assert_eq!(http.get("/environments/999").status, 404);
}

/// `fuel2 env delete`: refused while a deployment runs; after an abort the environment goes
/// with its deployments, and its nodes are free again (no environment, no roles).
#[test]
fn an_environment_is_deleted_and_its_nodes_freed() {
    let (d, cluster, ids) = environment(&["controller", "compute"]);
    let http = d.http();
    let r = http.post(&format!("/api/v1/clusters/{cluster}/deploy"), "{}");
    assert_eq!(r.status, 202, "{}", r.body);
    let deployment = r.json()["id"].as_i64().unwrap();

    let r = http.delete(&format!("/api/v1/clusters/{cluster}/"));
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("abort it first")
    );
    assert_eq!(http.get(&format!("/api/v1/clusters/{cluster}")).status, 200);

    // The deployment as Nailgun's transaction (`fuel2 task list -e N`).
    let listed = http
        .get(&format!("/api/v1/transactions/?cluster_id={cluster}"))
        .json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let t = &listed[0];
    assert_eq!(
        (
            t["id"].as_i64(),
            t["name"].as_str(),
            t["status"].as_str(),
            t["cluster"].as_i64()
        ),
        (
            Some(deployment),
            Some("deployment"),
            Some("running"),
            Some(cluster)
        )
    );
    assert!(t["progress"].as_u64().is_some_and(|p| p < 100), "{t}");

    let r = http.post(&format!("/api/v1/deployments/{deployment}/abort"), "{}");
    assert_eq!(r.status, 200, "{}", r.body);
    let t = http
        .get(&format!("/api/v1/transactions/{deployment}"))
        .json();
    assert_eq!(
        (t["status"].as_str(), t["message"].as_str()),
        (Some("error"), Some("aborted by the operator"))
    );
    assert_eq!(http.get("/api/v1/transactions/999").status, 404);
    let r = http.delete(&format!("/api/v1/clusters/{cluster}/"));
    assert_eq!(r.status, 202, "{}", r.body);
    let task = r.json();
    assert_eq!(
        (
            task["name"].as_str(),
            task["status"].as_str(),
            task["cluster"].as_i64()
        ),
        (Some("cluster_deletion"), Some("ready"), Some(cluster))
    );

    assert_eq!(http.get(&format!("/api/v1/clusters/{cluster}")).status, 404);
    assert_eq!(http.get("/api/v1/clusters").json(), serde_json::json!([]));
    assert_eq!(
        http.get("/api/v1/transactions").json(),
        serde_json::json!([])
    );
    assert_eq!(
        http.get(&format!("/api/v1/deployments/{deployment}"))
            .status,
        404
    );
    for id in ids {
        let node = http.get(&format!("/api/v1/nodes/{id}")).json();
        assert_eq!(node["cluster_id"], serde_json::Value::Null, "{node}");
        assert!(node.get("cluster_id").is_some(), "{node}");
        assert_eq!(node["roles"], serde_json::json!([]), "{node}");
    }
    let r = http.delete(&format!("/api/v1/clusters/{cluster}"));
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (404, "not_found".into())
    );
    // The name is free again.
    let release = http.get("/api/v1/releases").json()[0]["id"]
        .as_i64()
        .unwrap();
    let r = http.post(
        "/api/v1/clusters",
        &format!(r#"{{"name": "env-a", "release_id": {release}}}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
}

/// Nailgun's `assignment` and `unassignment` (`fuel2 env add nodes`, `env remove nodes`): every
/// node of the list or none, 200 with `null`; a bad entry is named by its place in the list.
#[test]
fn nodes_are_assigned_and_unassigned_in_lists() {
    let (d, cluster, _) = environment(&[]);
    let http = d.http();
    let mut ids = Vec::new();
    for i in 0..3 {
        let mac = format!("52:54:00:00:20:{i:02x}");
        let r = http.post("/api/v1/agent/hello", &inventory(&mac).to_string());
        ids.push(r.json()["node"]["id"].as_i64().unwrap());
    }
    let path = format!("/api/v1/clusters/{cluster}/assignment/");
    let r = http.post(
        &path,
        &format!(
            r#"[{{"id": {}, "roles": ["controller"]}}, {{"id": {}, "roles": ["compute", "cinder"]}}]"#,
            ids[0], ids[1]
        ),
    );
    assert_eq!((r.status, r.body.trim()), (200, "null"));
    let listed = http
        .get(&format!("/api/v1/clusters/{cluster}/nodes"))
        .json();
    let roles: Vec<_> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["pending_roles"].clone())
        .collect();
    assert_eq!(
        roles,
        [
            serde_json::json!(["controller"]),
            serde_json::json!(["compute", "cinder"])
        ]
    );

    // One bad entry: nothing of the list is done.
    let r = http.post(
        &path,
        &format!(
            r#"[{{"id": {}, "roles": ["compute"]}}, {{"id": {}, "roles": []}}]"#,
            ids[2], ids[2]
        ),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("[1].roles"),
        "{}",
        r.body
    );
    let r = http.post(
        &path,
        &format!(
            r#"[{{"id": {}, "roles": ["compute"]}}, {{"id": 999, "roles": ["compute"]}}]"#,
            ids[2]
        ),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let node = http.get(&format!("/api/v1/nodes/{}", ids[2])).json();
    assert_eq!(
        node["cluster_id"],
        serde_json::Value::Null,
        "rolled back: {node}"
    );

    let unpath = format!("/api/v1/clusters/{cluster}/unassignment/");
    let r = http.post(
        &unpath,
        &format!(r#"[{{"id": {}}}, {{"id": {}}}]"#, ids[0], ids[2]),
    );
    assert_eq!(
        r.status, 404,
        "node {} is not in the environment: {}",
        ids[2], r.body
    );
    let r = http.post(
        &unpath,
        &format!(r#"[{{"id": {}}}, {{"id": {}}}]"#, ids[0], ids[1]),
    );
    assert_eq!((r.status, r.body.trim()), (200, "null"));
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{cluster}/nodes"))
            .json(),
        serde_json::json!([])
    );
    let r = http.post(&unpath, "[]");
    assert_eq!(r.status, 400, "{}", r.body);
}
