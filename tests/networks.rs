//! Networks through Nailgun's API against the daemon with the bundled release: an environment's
//! network configuration (made at creation, changed and refused as Nailgun does, nothing
//! written on a refusal), network and node groups, the template, virtual IPs, node interfaces,
//! and the addresses the deployment data carries.

use serde_json::{Value, json};

use crate::common::TestDaemon;

fn config_of(d: &TestDaemon, cluster: i64) -> Value {
    let r = d.http().get(&format!(
        "/api/v1/clusters/{cluster}/network_configuration/neutron/"
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn net<'a>(config: &'a Value, name: &str) -> &'a Value {
    config["networks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no network {name} in {config}"))
}

#[test]
fn an_environment_has_its_release_networks_and_the_admin_network() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, _) = d.environment(&["controller"], 1);
    let c = config_of(&d, cluster);
    let names: Vec<&str> = c["networks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "public",
            "management",
            "storage",
            "private",
            "fuelweb_admin"
        ]
    );
    let public = net(&c, "public");
    assert_eq!(public["cidr"], "172.16.0.0/24");
    assert_eq!(public["gateway"], "172.16.0.1");
    assert_eq!(public["ip_ranges"], json!([["172.16.0.2", "172.16.0.126"]]));
    assert_eq!(public["group_id"], cluster);
    assert_eq!(net(&c, "management")["vlan_start"], 101);
    assert_eq!(
        net(&c, "management")["ip_ranges"],
        json!([["192.168.0.1", "192.168.0.254"]])
    );
    let admin = net(&c, "fuelweb_admin");
    assert_eq!(admin["cidr"], "10.20.0.0/24");
    assert_eq!(admin["group_id"], Value::Null);
    let params = &c["networking_parameters"];
    assert_eq!(params["segmentation_type"], "vlan");
    assert_eq!(params["vlan_range"], json!([1000, 1030]));
    assert_eq!(
        params["floating_ranges"],
        json!([["172.16.0.130", "172.16.0.254"]])
    );
    assert_eq!(params["net_l23_provider"], "ovs");
    // The release's virtual IPs, allocated from their networks' ranges.
    assert_eq!(c["vips"]["public"]["network_role"], "public/vip");
    assert_eq!(c["vips"]["public"]["namespace"], "haproxy");
    assert_eq!(c["public_vip"], c["vips"]["public"]["ipaddr"]);
    let mgmt_vip = c["management_vip"].as_str().unwrap();
    assert!(mgmt_vip.starts_with("192.168.0."), "{mgmt_vip}");
    // Nova network is not this environment's provider.
    let nova = d.http().get(&format!(
        "/api/v1/clusters/{cluster}/network_configuration/nova_network"
    ));
    assert_eq!(nova.status, 400);
    assert!(nova.body.contains("Wrong net provider"), "{}", nova.body);
}

#[test]
fn a_network_change_is_applied_and_a_bad_one_is_refused_naming_the_network_and_key() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, _) = d.environment(&["controller"], 1);
    let http = d.http();
    let path = format!("/api/v1/clusters/{cluster}/network_configuration/neutron");
    let mut c = config_of(&d, cluster);
    let storage_id = net(&c, "storage")["id"].as_i64().unwrap();
    for n in c["networks"].as_array_mut().unwrap() {
        if n["name"] == "storage" {
            n["cidr"] = json!("10.50.0.0/24");
            n["vlan_start"] = json!(150);
        }
    }
    c["networking_parameters"]["vlan_range"] = json!([2000, 2100]);
    // What the client downloaded, changed, goes back whole.
    let r = http.put(&path, &c.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let after = config_of(&d, cluster);
    assert_eq!(net(&after, "storage")["cidr"], "10.50.0.0/24");
    assert_eq!(
        net(&after, "storage")["ip_ranges"],
        json!([["10.50.0.1", "10.50.0.254"]])
    );
    assert_eq!(
        after["networking_parameters"]["vlan_range"],
        json!([2000, 2100])
    );

    let bad = [
        (
            json!({"networks": [{"id": storage_id, "cidr": "10.50.0.0/33"}]}),
            format!("networks[id={storage_id}].cidr"),
            "storage",
        ),
        (
            json!({"networks": [{"id": storage_id, "vlan_start": 4095}]}),
            format!("networks[id={storage_id}].vlan_start"),
            "storage",
        ),
        (
            json!({"networks": [{"id": storage_id, "vlan_start": 101}]}),
            format!("networks[id={storage_id}].vlan_start"),
            "management, storage",
        ),
        (
            json!({"networks": [{"id": storage_id, "cidr": "192.168.0.0/23"}]}),
            format!("networks[id={storage_id}].cidr"),
            "management, storage",
        ),
        (
            json!({"networks": [{"id": 9999}]}),
            "networks".to_string(),
            "[9999]",
        ),
        (
            json!({"networks": [{"id": storage_id, "mtu": 9000}]}),
            format!("networks[id={storage_id}].mtu"),
            "storage",
        ),
        (
            json!({"networking_parameters": {"floating_ranges": [["10.9.0.2", "10.9.0.9"]]}}),
            "networking_parameters.floating_ranges[0]".to_string(),
            "public CIDR",
        ),
        (
            json!({"networking_parameters": {"segmentation_type": "tun"}}),
            "networking_parameters.segmentation_type".to_string(),
            "prohibited",
        ),
        (
            json!({"networks_typo": []}),
            "networks_typo".to_string(),
            "unknown",
        ),
    ];
    for (body, field, says) in bad {
        let r = http.put(&path, &body.to_string());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let e = r.json();
        assert_eq!(e["code"], "invalid_input", "{e}");
        let f = e["fields"].as_array().unwrap();
        assert!(
            f.iter()
                .any(|f| f["field"] == field.as_str()
                    && f["message"].as_str().unwrap().contains(says)),
            "{body}: wanted {field} saying {says}: {e}"
        );
        assert_eq!(
            config_of(&d, cluster),
            after,
            "a refused change writes nothing"
        );
    }
    let bad_json = http.put(&path, "{not json");
    assert_eq!(bad_json.status, 400);
}

#[test]
fn network_groups_are_created_changed_and_deleted_in_an_environments_node_group() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, _) = d.environment(&["compute"], 1);
    let http = d.http();
    let groups = http
        .get(&format!("/api/v1/nodegroups/?cluster_id={cluster}"))
        .json();
    assert_eq!(
        groups,
        json!([{"id": cluster, "cluster_id": cluster, "name": "default", "is_default": true}])
    );
    let body = json!({"name": "extra", "release": 1, "vlan_start": 300, "cidr": "10.70.0.0/24",
                      "gateway": null, "group_id": cluster,
                      "meta": {"notation": "cidr", "map_priority": 2, "configurable": true,
                               "use_gateway": false, "name": "extra", "cidr": "10.70.0.0/24",
                               "render_type": null, "vlan_start": 300}});
    let r = http.post("/api/v1/networks/", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    let created = r.json();
    let id = created["id"].as_i64().unwrap();
    assert_eq!(created["ip_ranges"], json!([["10.70.0.1", "10.70.0.254"]]));
    assert_eq!(created["group_id"], cluster);
    // The same name again, an overlapping CIDR, a missing group: refused, named.
    let again = http.post("/api/v1/networks/", &body.to_string());
    assert_eq!(again.status, 400, "{}", again.body);
    assert!(again.body.contains("already exists"), "{}", again.body);
    let mut overlap = body.clone();
    overlap["name"] = json!("other");
    overlap["cidr"] = json!("192.168.0.0/25");
    overlap["vlan_start"] = json!(301);
    let r = http.post("/api/v1/networks/", &overlap.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("Address space intersection"), "{}", r.body);
    let mut nogroup = body.clone();
    nogroup["name"] = json!("x");
    nogroup["group_id"] = json!(777);
    let r = http.post("/api/v1/networks/", &nogroup.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("group_id"), "{}", r.body);

    let r = http.put(
        &format!("/api/v1/networks/{id}/"),
        r#"{"vlan_start": 310, "name": "extra2"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["vlan_start"], 310);
    assert_eq!(r.json()["name"], "extra2");
    let r = http.put(&format!("/api/v1/networks/{id}/"), r#"{"vlan_start": 101}"#);
    assert_eq!(r.status, 400, "{}", r.body);
    let listed = http.get("/api/v1/networks/").json();
    assert!(listed.as_array().unwrap().iter().any(|n| n["id"] == id));
    let c = config_of(&d, cluster);
    assert!(
        c["networks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == "extra2")
    );
    let admin_id = net(&c, "fuelweb_admin")["id"].as_i64().unwrap();
    assert_eq!(
        http.delete(&format!("/api/v1/networks/{admin_id}/")).status,
        403
    );
    assert_eq!(http.delete(&format!("/api/v1/networks/{id}/")).status, 204);
    assert_eq!(http.get(&format!("/api/v1/networks/{id}/")).status, 404);
}

#[test]
fn a_network_template_is_stored_checked_for_shape_and_deleted() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, _) = d.environment(&["compute"], 1);
    let http = d.http();
    let path = format!("/api/v1/clusters/{cluster}/network_configuration/template");
    assert_eq!(http.get(&path).json(), Value::Null);
    let t = json!({"adv_net_template": {"default": {
        "nic_mapping": {"default": {"if1": "eth0"}},
        "templates_for_node_role": {"compute": ["common"]},
        "network_assignments": {"management": {"ep": "br-mgmt"}},
        "network_scheme": {"common": {"transformations": [], "endpoints": [], "roles": {}}}}}});
    let r = http.put(&path, &t.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.get(&path).json(), t);
    let mut bad = t.clone();
    bad["adv_net_template"]["default"]
        .as_object_mut()
        .unwrap()
        .remove("network_scheme");
    let r = http.put(&path, &bad.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("adv_net_template.default.network_scheme"),
        "{}",
        r.body
    );
    assert_eq!(
        http.get(&path).json(),
        t,
        "a refused template changes nothing"
    );
    assert_eq!(http.delete(&path).status, 204);
    assert_eq!(http.get(&path).json(), Value::Null);
}

#[test]
fn vips_are_listed_created_and_moved_by_the_operator() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, _) = d.environment(&["controller"], 1);
    let http = d.http();
    let base = format!("/api/v1/clusters/{cluster}/network_configuration/ips");
    let vips = http.get(&format!("{base}/vips/")).json();
    let names: Vec<&str> = vips
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["vip_name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 4, "{vips}");
    for n in ["vrouter", "management", "vrouter_pub", "public"] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    let public = vips
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vip_name"] == "public")
        .unwrap();
    let public_net = public["network"].as_i64().unwrap();
    let by_role = http
        .get(&format!("{base}/vips/?network-role=public/vip"))
        .json();
    assert_eq!(by_role.as_array().unwrap().len(), 2, "{by_role}");

    // Create: an operator's VIP, user defined; a taken address is refused.
    let r = http.post(
        &format!("{base}/vips/"),
        &json!({"ip_addr": "172.16.0.200", "network": public_net, "vip_name": "mine"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["is_user_defined"], true);
    let taken = http.post(
        &format!("{base}/vips/"),
        &json!({"ip_addr": "172.16.0.200", "network": public_net, "vip_name": "other"}).to_string(),
    );
    assert_eq!(taken.status, 409, "{}", taken.body);
    let nonet = http.post(
        &format!("{base}/vips/"),
        &json!({"ip_addr": "10.0.0.1", "network": 9999, "vip_name": "x"}).to_string(),
    );
    assert_eq!(nonet.status, 400, "{}", nonet.body);
    assert!(nonet.body.contains("network"), "{}", nonet.body);

    // Upload what was downloaded with one address changed: it moves and stays user defined.
    let mut list = http.get(&format!("{base}/vips/")).json();
    for v in list.as_array_mut().unwrap() {
        if v["vip_name"] == "public" {
            v["ip_addr"] = json!("172.16.0.120");
            v["is_user_defined"] = json!(true);
        }
    }
    let r = http.put(&format!("{base}/vips/"), &list.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let c = config_of(&d, cluster);
    assert_eq!(c["public_vip"], "172.16.0.120");
    assert_eq!(c["vips"]["public"]["is_user_defined"], true);
    // A field that cannot change is named.
    let mut bad = http.get(&format!("{base}/vips/")).json();
    bad[0]["vip_name"] = json!("renamed");
    let r = http.put(&format!("{base}/vips/"), &bad.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("[0].vip_name"), "{}", r.body);
    let one = bad[0]["id"].as_i64().unwrap();
    let r = http.get(&format!("{base}/{one}/vips/"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_ne!(r.json()["vip_name"], "renamed");
}

fn names(iface: &Value) -> Vec<String> {
    iface["assigned_networks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn interfaces_get_the_default_assignment_and_an_operators_one_is_checked() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, ids) = d.environment(&["compute"], 1);
    let http = d.http();
    let path = format!("/api/v1/nodes/{}/interfaces/", ids[0]);
    let def = http.get(&format!(
        "/api/v1/nodes/{}/interfaces/default_assignment/",
        ids[0]
    ));
    assert_eq!(def.status, 200, "{}", def.body);
    let def = def.json();
    assert_eq!(def[0]["name"], "eno1");
    assert_eq!(def[0]["pxe"], true);
    assert_eq!(def[0]["type"], "ether");
    // Private carries Neutron's VLAN range (`neutron_vlan_range`): not untagged, so it goes
    // with the admin network.
    assert_eq!(
        names(&def[0]),
        ["fuelweb_admin", "management", "storage", "private"]
    );
    assert_eq!(names(&def[1]), Vec::<String>::new());
    assert!(
        def[0]["attributes"]["mtu"].is_object(),
        "the release's nic attributes: {}",
        def[0]
    );
    assert!(
        !names(&def[0]).contains(&"public".to_string()),
        "a compute has no public network"
    );
    assert_eq!(http.get(&path).json(), def);

    // Storage moves to eno2.
    let mut mine = def.clone();
    let storage = mine[0]["assigned_networks"][2].clone();
    mine[0]["assigned_networks"]
        .as_array_mut()
        .unwrap()
        .remove(2);
    mine[1]["assigned_networks"]
        .as_array_mut()
        .unwrap()
        .push(storage.clone());
    let r = http.put(&path, &mine.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(names(&http.get(&path).json()[1]), ["storage"]);

    let admin = def[0]["assigned_networks"][0].clone();
    let mgmt = def[0]["assigned_networks"][1].clone();
    let private = def[0]["assigned_networks"][3].clone();
    let bad = [
        // The admin network off the PXE NIC.
        (
            json!([{"id": 1, "type": "ether", "assigned_networks": [mgmt, storage]},
                {"id": 2, "type": "ether", "assigned_networks": [admin, private]}]),
            "admin network must be on the PXE interface",
        ),
        // A network left out.
        (
            json!([{"id": 1, "type": "ether", "assigned_networks": [admin, mgmt]},
                {"id": 2, "type": "ether", "assigned_networks": [private]}]),
            "storage",
        ),
        // Not this node's NIC.
        (
            json!([{"id": 7, "type": "ether", "assigned_networks": [admin, mgmt, storage, private]}]),
            "[0].id",
        ),
        // A bond of one real and one missing slave.
        (
            json!([{"id": 1, "type": "ether", "assigned_networks": [admin, mgmt, storage]},
                {"type": "bond", "name": "bond0", "mode": "active-backup",
                 "slaves": [{"name": "eno2"}, {"name": "eno9"}], "assigned_networks": [private]}]),
            "eno9",
        ),
        (json!({"not": "a list"}), "$"),
    ];
    let kept = http.get(&path).json();
    for (body, says) in bad {
        let r = http.put(&path, &body.to_string());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(says), "{body}: wanted {says}: {}", r.body);
        assert_eq!(
            http.get(&path).json(),
            kept,
            "a refused assignment writes nothing"
        );
    }
    // A bond of both NICs would take the PXE NIC: the admin network goes with it.
    let bond = json!([{"id": 1, "type": "ether", "assigned_networks": []},
                      {"id": 2, "type": "ether", "assigned_networks": []},
                      {"type": "bond", "name": "bond0", "mode": "802.3ad",
                       "slaves": [{"name": "eno1"}, {"name": "eno2"}],
                       "assigned_networks": [admin, mgmt, storage]}]);
    let r = http.put(&path, &bond.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("private"), "{}", r.body);

    // Leaving the environment resets the interfaces.
    let r = http.delete(&format!("/api/v1/clusters/{cluster}/nodes/{}", ids[0]));
    assert!(r.status < 300, "{}", r.body);
    let after = http.get(&path).json();
    assert_eq!(names(&after[0]), ["fuelweb_admin"]);
    assert!(names(&after[1]).is_empty());
}

#[test]
fn a_controllers_interfaces_go_back_as_they_came_and_two_untagged_networks_are_refused() {
    // What `fuel2 node interfaces download` then `upload` does, unchanged: the default
    // assignment must pass the checks it is made for (private is a VLAN range, not untagged).
    let d = TestDaemon::start_bundled("install");
    let (_, ids) = d.environment(&["controller"], 1);
    let http = d.http();
    let path = format!("/api/v1/nodes/{}/interfaces/", ids[0]);
    let got = http.get(&path).json();
    assert_eq!(
        names(&got[0]),
        ["fuelweb_admin", "management", "storage", "private"]
    );
    assert_eq!(names(&got[1]), ["public"]);
    let r = http.put(&path, &got.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.get(&path).json(), got);
    // Public (untagged) beside the admin network (untagged): refused, both named.
    let mut bad = got.clone();
    let public = bad[1]["assigned_networks"][0].clone();
    bad[1]["assigned_networks"] = json!([]);
    bad[0]["assigned_networks"]
        .as_array_mut()
        .unwrap()
        .push(public);
    let r = http.put(&path, &bad.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("untagged") && r.body.contains("fuelweb_admin, public"),
        "{}",
        r.body
    );
    assert_eq!(http.get(&path).json(), got, "nothing written");
}

#[test]
fn a_network_group_is_created_as_fuel2_sends_it() {
    // fuel2 network-group create -N GROUP -C 10.99.0.0/24 -V 555 -g 10.99.0.1 NAME: no
    // --release (null), and meta.use_gateway false whatever --gateway says.
    let d = TestDaemon::start_bundled("install");
    let (cluster, _) = d.environment(&["compute"], 1);
    let http = d.http();
    let body = json!({"name": "netgroup-x", "release": null, "vlan_start": 555,
                      "cidr": "10.99.0.0/24", "gateway": "10.99.0.1", "group_id": cluster,
                      "meta": {"notation": "cidr", "render_type": null, "map_priority": 2,
                               "configurable": true, "use_gateway": false,
                               "name": "netgroup-x", "cidr": "10.99.0.0/24",
                               "vlan_start": 555}});
    let r = http.post("/api/v1/networks/", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    let created = r.json();
    assert_eq!(created["gateway"], "10.99.0.1");
    assert_eq!(created["meta"]["use_gateway"], true);
    assert_eq!(
        created["ip_ranges"],
        json!([["10.99.0.2", "10.99.0.254"]]),
        "the gateway is kept out of the range"
    );
    assert_eq!(created["release"], 1, "the environment's release");
    // fuel2 network-group update -C ... -g ...: the gateway may change with the CIDR.
    let id = created["id"].as_i64().unwrap();
    let r = http.put(
        &format!("/api/v1/networks/{id}/"),
        &json!({"cidr": "10.98.0.0/24", "gateway": "10.98.0.1"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["ip_ranges"], json!([["10.98.0.2", "10.98.0.254"]]));
    // Another release than the environment's is still refused, named.
    let mut other = body.clone();
    other["name"] = json!("netgroup-y");
    other["cidr"] = json!("10.97.0.0/24");
    other["gateway"] = json!("10.97.0.1");
    other["vlan_start"] = json!(556);
    other["release"] = json!(99);
    let r = http.post("/api/v1/networks/", &other.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("release"), "{}", r.body);
}

/// An environment kept from before stoker had networks (no `network_configs` row) gets its
/// release's networks when the daemon starts, so reading them never writes.
#[test]
fn an_environment_without_networks_gets_them_at_the_next_start() {
    let d = TestDaemon::start_bundled("install");
    let (cluster, _) = d.environment(&["controller"], 1);
    let before = config_of(&d, cluster);
    let db = d.db_path();
    let dir = d.stop().unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "DELETE FROM ip_addrs; DELETE FROM network_groups WHERE cluster_id IS NOT NULL;
         DELETE FROM network_configs;",
    )
    .unwrap();
    drop(conn);
    let config_again = stoker::config::Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("plugins.bundled", "install".to_string())
        .resolve()
        .unwrap();
    let d = TestDaemon::start_with(config_again, dir);
    let after = config_of(&d, cluster);
    let names = |c: &Value| -> Vec<String> {
        c["networks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&after), names(&before));
    assert_eq!(
        after["networking_parameters"],
        before["networking_parameters"]
    );
}

/// The admin network's pool is the DHCP server's, not the environments': more nodes than the
/// pool holds can join an environment (their admin addresses are their leases; allocating them
/// again from the pool would refuse the fourth node here and disagree with the DHCP server).
#[test]
fn more_nodes_than_the_admin_pool_holds_can_join() {
    let dir = tempfile::tempdir().unwrap();
    let config = stoker::config::Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("plugins.bundled", "install".to_string())
        .with_flag(
            "dhcp.subnets",
            "10.20.0.0/24 pool=10.20.0.100-10.20.0.102 router=10.20.0.1".to_string(),
        )
        .resolve()
        .unwrap();
    let d = TestDaemon::start_with(config, dir);
    let (cluster, ids) = d.environment(&["compute"; 6], 6);
    let c = config_of(&d, cluster);
    let admin = net(&c, "fuelweb_admin");
    assert_eq!(admin["ip_ranges"], json!([["10.20.0.100", "10.20.0.102"]]));
    let members = d
        .http()
        .get(&format!("/api/v1/clusters/{cluster}/nodes"))
        .json();
    assert_eq!(members.as_array().unwrap().len(), ids.len());
}
