//! Nailgun's node API as `fuel2 node` drives it: `GET /nodes?cluster_id=` filters,
//! `PUT /nodes/{id}` and `PUT /nodes` edit name, host name and labels with Nailgun's rules,
//! `DELETE /nodes?ids=` undiscovers free nodes, and bad input is refused by field with
//! nothing changed.

use serde_json::json;

use crate::common::TestDaemon;

fn ids(v: &serde_json::Value) -> Vec<i64> {
    let mut out: Vec<i64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect();
    out.sort();
    out
}

#[test]
fn node_list_filters_by_environment_as_nailgun() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["controller"], 3);
    let http = d.http();
    assert_eq!(ids(&http.get("/api/v1/nodes").json()), nodes);
    let r = http.get(&format!("/api/v1/nodes?cluster_id={cluster}"));
    assert_eq!(ids(&r.json()), [nodes[0]]);
    assert_eq!(
        ids(&http.get("/api/v1/nodes?cluster_id=").json()),
        nodes[1..]
    );
    assert_eq!(
        ids(&http.get("/api/v1/nodes?cluster_id=999").json()),
        Vec::<i64>::new()
    );
    let r = http.get("/api/v1/nodes?cluster_id=x");
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["fields"][0]["field"], "cluster_id");
    let node = &http.get(&format!("/api/v1/nodes/{}", nodes[0])).json();
    assert_eq!(node["hostname"], format!("node-{}", nodes[0]));
    assert_eq!(node["fqdn"], format!("node-{}.domain.tld", nodes[0]));
    assert_eq!(node["labels"], json!({}));
    assert_eq!(node["pending_roles"], json!(["controller"]));
    assert_eq!(node["pending_addition"], true);
    assert!(node["name"].as_str().unwrap().starts_with("Untitled ("));
    assert!(node.get("ip").is_some() && node.get("os_platform").is_some());
}

#[test]
fn a_node_edit_changes_name_hostname_and_labels_and_refuses_the_rest_by_field() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["controller", "compute", "compute"], 3);
    let http = d.http();
    let path = format!("/api/v1/nodes/{}", nodes[0]);
    let r = http.put(
        &path,
        &json!({"name": "ctrl", "hostname": "ctrl-01", "labels": {"rack": "r1", "spare": null}})
            .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let node = r.json();
    assert_eq!(node["name"], "ctrl");
    assert_eq!(node["hostname"], "ctrl-01");
    assert_eq!(node["fqdn"], "ctrl-01.domain.tld");
    assert_eq!(node["labels"], json!({"rack": "r1", "spare": null}));

    // Each bad field named, nothing written.
    let before = http.get(&path).json();
    for (body, field, status) in [
        (json!({"hostname": "bad_name"}), "hostname", 400),
        (json!({"labels": {"k": ""}}), "labels.k", 400),
        (json!({"labels": [1]}), "labels", 400),
        (json!({"name": "x", "status": "ready"}), "status", 400),
        (
            json!({"name": "x", "pending_roles": ["compute"]}),
            "pending_roles",
            400,
        ),
        (json!({"name": "x", "nonsense": 1}), "nonsense", 400),
        (json!({"name": 5}), "name", 400),
        (json!({"id": nodes[1], "name": "x"}), "id", 400),
    ] {
        let r = http.put(&path, &body.to_string());
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert_eq!(r.json()["fields"][0]["field"], field, "{}", r.body);
    }
    // Another node in the environment has that host name.
    let r = http.put(
        &format!("/api/v1/nodes/{}", nodes[1]),
        &json!({"name": "x", "hostname": "ctrl-01"}).to_string(),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.json()["message"].as_str().unwrap().contains("ctrl-01"));
    // A node's default host name is taken too.
    let r = http.put(
        &format!("/api/v1/nodes/{}", nodes[1]),
        &json!({"hostname": format!("node-{}", nodes[0])}).to_string(),
    );
    assert_eq!(
        r.status, 200,
        "node-N is free once its node is renamed: {}",
        r.body
    );
    let r = http.put(
        &path,
        &json!({"hostname": format!("node-{}", nodes[0])}).to_string(),
    );
    assert_eq!(r.status, 409, "node {} has it now: {}", nodes[1], r.body);
    let r = http.put(
        &path,
        &json!({"hostname": format!("node-{}", nodes[2])}).to_string(),
    );
    assert_eq!(r.status, 409, "node {}'s default: {}", nodes[2], r.body);
    assert_eq!(http.get(&path).json(), before);
    assert_eq!(http.get("/api/v1/nodes/999").status, 404);
    assert_eq!(http.put("/api/v1/nodes/999", "{}").status, 404);

    // The collection form: all or none.
    let r = http.put(
        "/api/v1/nodes",
        &json!([{"id": nodes[1], "labels": {"a": "1"}}, {"id": nodes[2], "hostname": "-x"}])
            .to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["fields"][0]["field"], "[1].hostname");
    let r = http.put(
        "/api/v1/nodes",
        &json!([{"id": nodes[1], "labels": {"a": "1"}}, {"id": 999, "name": "y"}]).to_string(),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(
        http.get(&format!("/api/v1/nodes/{}", nodes[1])).json()["labels"],
        json!({})
    );
    let r = http.put(
        "/api/v1/nodes",
        &json!([{"id": nodes[1], "labels": {"a": "1"}}, {"id": nodes[2], "name": "free"}])
            .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(ids(&r.json()), nodes[1..]);
    assert_eq!(
        http.get(&format!("/api/v1/nodes/{}", nodes[2])).json()["name"],
        "free"
    );

    // Leaving its environment, a node gets Nailgun's default host name back; labels stay.
    let r = http.delete(&format!("/api/v1/clusters/{cluster}/nodes/{}", nodes[0]));
    assert!(r.status < 300, "{}", r.body);
    let node = http.get(&path).json();
    assert_eq!(node["hostname"], format!("node-{}", nodes[0]));
    assert_eq!(node["labels"], json!({"rack": "r1", "spare": null}));
}

#[test]
fn the_deployment_data_uses_the_operators_hostname_and_name() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["controller"], 1);
    let http = d.http();
    let r = http.put(
        &format!("/api/v1/nodes/{}", nodes[0]),
        &json!({"name": "first controller", "hostname": "ctrl-01"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http.get(&format!("/api/v1/clusters/{cluster}/plan?format=json"));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.body;
    assert!(
        body.contains("ctrl-01.domain.tld"),
        "fqdn from the hostname"
    );
    assert!(
        body.contains("first controller"),
        "user_node_name from the name"
    );
}

#[test]
fn undiscover_deletes_free_nodes_and_refuses_assigned_ones_naming_them() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["controller"], 3);
    let http = d.http();
    let r = http.delete(&format!("/api/v1/nodes?ids={},{}", nodes[0], nodes[1]));
    assert_eq!(r.status, 409, "{}", r.body);
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(&format!("{} (environment {cluster})", nodes[0])),
        "{message}"
    );
    assert_eq!(
        ids(&http.get("/api/v1/nodes").json()),
        nodes,
        "nothing deleted"
    );
    let r = http.delete(&format!("/api/v1/nodes?ids={},999", nodes[1]));
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.json()["message"].as_str().unwrap().contains("999"));
    assert_eq!(http.delete("/api/v1/nodes?ids=a").status, 400);
    assert_eq!(http.delete("/api/v1/nodes").status, 400);
    let r = http.delete(&format!("/api/v1/nodes?ids={},{}", nodes[1], nodes[2]));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["name"], "node_deletion");
    assert_eq!(ids(&http.get("/api/v1/nodes").json()), [nodes[0]]);
}

/// `node`'s step `task` in a plan.
fn step<'a>(plan: &'a serde_json::Value, node: i64, task: &str) -> &'a serde_json::Value {
    plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["uid"].as_str() == Some(node.to_string().as_str()))
        .unwrap()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == task)
        .unwrap_or_else(|| panic!("no task {task} on node {node}"))
}

#[test]
fn disks_are_laid_out_by_role_uploaded_by_field_and_reach_the_deployment_data() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["controller"], 2);
    let http = d.http();
    let path = format!("/api/v1/nodes/{}/disks", nodes[0]);
    let disks = http.get(&path);
    assert_eq!(disks.status, 200, "{}", disks.body);
    let disks = disks.json();
    assert_eq!(http.get(&format!("{path}/defaults")).json(), disks);
    // The inventory's sda (480103981056 B = 457862 MiB) and sdb; the controller's volumes.
    assert_eq!(disks[0]["id"], "sda");
    assert_eq!(disks[0]["bootable"], true);
    let names: Vec<&str> = disks[0]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    // Nailgun allocates the `min` volumes first, then those taking `all` of the rest.
    assert_eq!(names, ["os", "logs", "mysql", "image"]);
    // 256 GiB of RAM: 4 GiB of swap; root 20% of sda: 50 GiB at most. os = 51200 + 4096.
    assert_eq!(disks[0]["volumes"][0]["size"], 51200 + 4096);
    assert_eq!(disks[0]["volumes"][1]["size"], 10240);
    assert_eq!(disks[0]["volumes"][2]["size"], 20480);
    // 4 volume groups' LVM metadata and 500 MB of boot partitions come off each disk.
    assert_eq!(disks[0]["size"], 457862 - 500 - 4 * 64);
    // A node in no environment has only its disks' service partitions.
    let free = http
        .get(&format!("/api/v1/nodes/{}/disks", nodes[1]))
        .json();
    assert_eq!(free[0]["volumes"], json!([]));

    // An upload: download, change, upload (as fuel2 node disks upload does).
    let mut upload = disks.clone();
    upload[0]["volumes"][3]["size"] = json!(100_000);
    let r = http.put(&path, &upload.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()[0]["volumes"][3]["size"], 100_000);
    let stored = http.get(&path).json();
    assert_eq!(stored, r.json());
    assert_ne!(stored, http.get(&format!("{path}/defaults")).json());

    // Refused by field, nothing stored.
    for (change, field) in [
        (json!([{"id": "sdz", "size": 1, "volumes": []}]), "[0].id"),
        (
            json!([{"id": "sda", "size": 1, "volumes": [{"name": "vm", "size": 1}]}]),
            "[0].volumes[0].name",
        ),
        (
            json!([{"id": "sda", "size": 1, "volumes": [{"name": "image", "size": 999_999_999}]}]),
            "[0].volumes",
        ),
        (
            json!([{"id": "sda", "size": 1, "volumes": [{"name": "mysql", "size": 10}]}]),
            "mysql",
        ),
        (
            json!([{"id": "sda", "volumes": [{"name": "os"}]}]),
            "[0].size",
        ),
        (json!([]), "$"),
        (json!({"id": "sda"}), "$"),
    ] {
        let r = http.put(&path, &change.to_string());
        assert_eq!(r.status, 400, "{change}: {}", r.body);
        assert_eq!(r.json()["fields"][0]["field"], field, "{}", r.body);
    }
    assert_eq!(http.get(&path).json(), stored, "nothing stored");
    assert_eq!(http.put("/api/v1/nodes/999/disks", "[]").status, 404);

    // The deployment data carries the node's volumes (Nailgun's full format).
    let r = http.post(
        &format!("/api/v1/clusters/{cluster}/deployment_graphs/volumes"),
        &json!({"tasks": [{"id": "show", "type": "shell", "roles": ["/.*/"],
            "parameters": {"cmd": {"yaql_exp":
                "$.node_volumes.where($.type = 'disk').select(concat($.id, '=', str($.volumes.where($.get('vg') = 'image').first().size))).join(',')"}}}]})
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http.get(&format!("/api/v1/clusters/{cluster}/plan?graph=volumes"));
    assert_eq!(r.status, 200, "{}", r.body);
    let cmd = step(&r.json(), nodes[0], "show")["parameters"]["cmd"].clone();
    assert!(cmd.as_str().unwrap().starts_with("sda=100064,"), "{cmd}");

    // New roles: back to the defaults for them.
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/{}", nodes[0]),
        &json!({"roles": ["compute"]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let after = http.get(&path).json();
    assert_eq!(after, http.get(&format!("{path}/defaults")).json());
    assert!(
        after[0]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "vm")
    );
}

fn role(name: &str, tags: &[&str], volume: &str) -> serde_json::Value {
    json!({"name": name, "meta": {"name": name, "description": "d", "tags": tags,
                                  "has_primary": false},
           "volumes_roles_mapping": [{"id": volume, "allocate_size": "min"}]})
}

#[test]
fn roles_and_tags_are_created_checked_used_and_deleted_as_nailgun() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["controller"], 2);
    let http = d.http();
    let release = http.get(&format!("/api/v1/clusters/{cluster}")).json()["release_id"]
        .as_i64()
        .unwrap();
    let roles = format!("/api/v1/releases/{release}/roles");
    let list = http.get(&roles).json();
    let controller = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "controller")
        .unwrap();
    assert_eq!(controller["meta"]["tags"], json!(["controller"]));
    assert_eq!(controller["volumes_roles_mapping"][0]["id"], "os");
    assert_eq!(
        http.get(&format!("{roles}/controller")).json()["name"],
        "controller"
    );
    assert_eq!(http.get(&format!("{roles}/nope")).status, 404);
    assert_eq!(http.get("/api/v1/releases/999/roles").status, 404);

    // A tag, then a role using it, on the release.
    let tags = format!("/api/v1/releases/{release}/tags");
    let r = http.post(
        &tags,
        &json!({"name": "db", "meta": {"has_primary": true}}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        http.post(&tags, &json!({"name": "db"}).to_string()).status,
        409
    );
    let r = http.post(&roles, &role("database", &["db"], "mysql").to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["volumes_roles_mapping"][0]["id"], "mysql");
    assert_eq!(
        http.post(&roles, &role("database", &["db"], "mysql").to_string())
            .status,
        409
    );
    // Refused by field, nothing stored.
    for (body, field) in [
        (role("bad name", &["db"], "os"), "name"),
        (role("x", &["nosuch"], "os"), "meta.tags[0]"),
        (role("x", &["db"], "nosuch"), "volumes_roles_mapping[0].id"),
        (
            json!({"name": "x", "meta": {"name": "x"}, "volumes_roles_mapping": []}),
            "meta.description",
        ),
    ] {
        let r = http.post(&roles, &body.to_string());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.json()["fields"][0]["field"], field, "{}", r.body);
    }
    assert_eq!(http.get(&format!("{roles}/x")).status, 404);

    // The created role is assignable and planned, with its tag; its volumes are laid out.
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/{}", nodes[1]),
        &json!({"roles": ["database"]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let plan = http.get(&format!("/api/v1/clusters/{cluster}/plan"));
    assert_eq!(plan.status, 200, "{}", plan.body);
    let planned = plan.json()["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["uid"].as_str() == Some(nodes[1].to_string().as_str()))
        .unwrap()
        .clone();
    assert_eq!(planned["tags"], json!(["primary-db"]), "{planned}");
    let disks = http
        .get(&format!("/api/v1/nodes/{}/disks", nodes[1]))
        .json();
    let names: Vec<&str> = disks[0]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mysql"]);

    // A role a node has is not deleted; once free it is.
    let r = http.delete(&format!("{roles}/database"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains(&nodes[1].to_string())
    );
    let r = http.put(
        &format!("{roles}/database"),
        &role("database", &[], "mysql").to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["meta"]["tags"], json!([]));
    assert_eq!(
        http.put(
            &format!("{roles}/database"),
            &role("other", &[], "os").to_string()
        )
        .status,
        400
    );
    let r = http.delete(&format!("/api/v1/clusters/{cluster}/nodes/{}", nodes[1]));
    assert!(r.status < 300, "{}", r.body);
    assert_eq!(http.delete(&format!("{roles}/database")).status, 204);
    assert_eq!(http.get(&format!("{roles}/database")).status, 404);
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/{}", nodes[1]),
        &json!({"roles": ["database"]}).to_string(),
    );
    assert_eq!(
        r.status, 400,
        "a deleted role is not assignable: {}",
        r.body
    );

    // The environment's own roles; a tag deleted leaves the roles naming it.
    let own = format!("/api/v1/clusters/{cluster}/roles");
    let r = http.post(&own, &role("mine", &["db"], "os").to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(
        http.get(&own)
            .json()
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "controller")
    );
    assert_eq!(
        http.get(&format!("{own}/controller")).status,
        404,
        "not its own"
    );
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/{}", nodes[1]),
        &json!({"roles": ["mine"]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.delete(&format!("{tags}/db")).status, 204);
    assert_eq!(http.get(&format!("{tags}/db")).status, 404);
}

#[test]
fn components_extensions_vms_conf_and_spawn_vms_answer_as_nailgun() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, nodes) = d.environment(&["controller"], 1);
    let http = d.http();
    let release = http.get(&format!("/api/v1/clusters/{cluster}")).json()["release_id"]
        .as_i64()
        .unwrap();
    let components = http
        .get(&format!("/api/v1/releases/{release}/components"))
        .json();
    assert!(!components.as_array().unwrap().is_empty(), "{components}");
    assert_eq!(http.get("/api/v1/releases/999/components").status, 404);

    let ext = http.get("/api/v1/extensions").json();
    assert_eq!(ext[0]["name"], "volume_manager");
    let path = format!("/api/v1/clusters/{cluster}/extensions");
    assert_eq!(
        http.get(&path).json(),
        json!(["volume_manager", "network_manager"])
    );
    assert_eq!(http.put(&path, r#"["volume_manager"]"#).status, 200);
    let r = http.put(&path, r#"["volume_manager", "bogus"]"#);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.json()["message"].as_str().unwrap().contains("bogus"));
    let r = http.delete(&format!("{path}?extension_names=volume_manager"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("cannot be disabled")
    );
    assert_eq!(
        http.delete(&format!("{path}?extension_names=x")).status,
        400
    );

    let vms = format!("/api/v1/nodes/{}/vms_conf", nodes[0]);
    assert_eq!(http.get(&vms).json(), json!({"vms_conf": []}));
    let conf = json!({"vms_conf": [{"id": 1, "cpu": 2, "mem": 4, "vda_size": "20G"}]});
    let r = http.put(&vms, &conf.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.get(&vms).json(), conf);
    for (body, field) in [
        (json!({"vms_conf": [{"cpu": 1}]}), "vms_conf[0].id"),
        (json!({"vms_conf": [{"id": 0}]}), "vms_conf[0].id"),
        (
            json!({"vms_conf": [{"id": 1, "vda_size": "big"}]}),
            "vms_conf[0].vda_size",
        ),
        (json!({"vms": []}), "vms"),
    ] {
        let r = http.put(&vms, &body.to_string());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.json()["fields"][0]["field"], field, "{}", r.body);
    }
    assert_eq!(http.get(&vms).json(), conf, "nothing changed");

    let r = http.put(&format!("/api/v1/clusters/{cluster}/spawn_vms"), "");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.json()["message"].as_str().unwrap().contains("virt role"));
    assert_eq!(http.put("/api/v1/clusters/999/spawn_vms", "").status, 404);
}
