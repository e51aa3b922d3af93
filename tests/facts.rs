//! Deployment and provisioning facts as `fuel2 env deployment-facts|provisioning-facts`
//! drives them (`/clusters/{id}/orchestrator/...`): the generated defaults, an upload checked
//! and used by the next deployment, deleted.

use serde_json::{Value, json};

use crate::common::TestDaemon;

#[test]
fn uploaded_deployment_facts_are_used_by_the_next_deployment_and_defaults_ignore_them() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let (cluster, ids) = d.environment(&["controller", "compute"], 2);
    let (n1, n2) = (ids[0], ids[1]);
    let o = format!("/api/v1/clusters/{cluster}/orchestrator/deployment");
    assert_eq!(http.get(&o).json(), json!([]));
    let defaults = http.get(&format!("{o}/defaults")).json();
    let list = defaults.as_array().unwrap();
    assert_eq!(list.len(), 2, "{defaults}");
    assert_eq!(list[0]["uid"], n1.to_string());
    assert!(
        list[0]["deployment_mode"].is_string(),
        "common merged in: {}",
        list[0]
    );
    let split = http.get(&format!("{o}/defaults?split=1&nodes={n2}")).json();
    let split = split.as_array().unwrap();
    assert_eq!(split.len(), 2, "{split:?}");
    assert_eq!(split[0]["uid"], n2.to_string());
    assert_eq!(split[1]["uid"], "common");
    assert!(split[0].get("deployment_mode").is_none(), "{}", split[0]);
    let r = http.get(&format!("{o}/defaults?nodes=999"));
    assert_eq!(r.status, 400, "{}", r.body);

    // A stranger, a node without uid: refused by field, nothing stored.
    let r = http.put(&o, &json!([{"uid": "999"}, {"a": 1}]).to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("nodes[0].uid") && r.body.contains("nodes[1].uid"),
        "{}",
        r.body
    );
    assert_eq!(http.get(&o).json(), json!([]));

    let upload = json!([
        {"uid": "common", "stoker_probe": {"a": 1}},
        {"uid": n2.to_string(), "custom": true, "roles": ["compute"]},
    ]);
    let r = http.put(&o, &upload.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let got = http.get(&format!("{o}?split=1")).json();
    assert_eq!(got.as_array().unwrap().len(), 2, "{got}");
    // The defaults ignore it.
    let defaults = http.get(&format!("{o}/defaults?nodes={n2}")).json();
    assert!(defaults[0].get("custom").is_none(), "{defaults}");

    // The next deployment (a dry run here) uses it: common merged, the node's replaced.
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/changes?dry_run=1"),
        "{}",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let t = r.json()["id"].as_i64().unwrap();
    let info = http
        .get(&format!("/api/v1/transactions/{t}/deployment_info"))
        .json();
    assert_eq!(info["common"]["stoker_probe"]["a"], 1, "{}", info["common"]);
    let n2_facts = &info["nodes"][n2.to_string()];
    assert_eq!(n2_facts["custom"], true, "{n2_facts}");
    assert!(
        n2_facts.get("network_scheme").is_none(),
        "replaced whole: {n2_facts}"
    );
    assert!(info["nodes"][n1.to_string()]["network_scheme"].is_object());

    let r = http.delete(&o);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(http.get(&o).json(), json!([]));
}

#[test]
fn provisioning_facts_have_each_nodes_disks_and_an_uploaded_host_name_is_checked() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let (cluster, ids) = d.environment(&["controller"], 1);
    let o = format!("/api/v1/clusters/{cluster}/orchestrator/provisioning");
    assert_eq!(http.get(&o).json(), json!({}));
    let defaults = http.get(&format!("{o}/defaults")).json();
    assert!(defaults["engine"].is_object(), "{defaults}");
    let node = &defaults["nodes"][0];
    assert_eq!(node["uid"], ids[0].to_string(), "{defaults}");
    assert!(
        node["ks_meta"]["pm_data"]["ks_spaces"]
            .as_array()
            .is_some_and(|v| !v.is_empty()),
        "{node}"
    );
    let mut up: Value = defaults.clone();
    up["nodes"][0]["hostname"] = json!("db 1; rm");
    let r = http.put(&o, &up.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("nodes[0].hostname"), "{}", r.body);
    up["nodes"][0]["hostname"] = json!("db-1");
    let r = http.put(&o, &up.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.get(&o).json()["nodes"][0]["hostname"], "db-1");
    let r = http.delete(&o);
    assert_eq!(r.status, 202, "{}", r.body);
}
