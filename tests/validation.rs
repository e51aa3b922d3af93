//! Invalid input changes nothing: unknown roles, deploy-step arguments of the wrong type,
//! settings no attribute backs or of the wrong type, or that enable two versions of one plugin,
//! are refused with a 400 that names the field (and nothing is written), and a plan whose YAQL goes over the plan budget is refused naming
//! the task that spent it, while pages show the kept plan instead of planning on every view.
//! The plugin `tests/fixtures/validation/slow-conditions` adds a role, settings, and ten tasks whose
//! conditions take about 9 s of YAQL each.

use std::path::Path;

use serde_json::{Value, json};
use stoker::config::Layers;

use crate::common::{Http, TestDaemon};

const PLUGIN: &str = "slow-conditions";

/// The fixture plugin's folder.
fn plugin_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/validation")
        .join(PLUGIN)
}

/// A daemon with the bundled release (and `plan.yaql_budget` = `budget` when given).
fn daemon(budget: Option<u64>) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let mut layers = Layers::default()
        .with_flag("data_dir", dir.path().join("data").display().to_string())
        .with_flag("http.listen", "127.0.0.1:0".to_string())
        .with_flag("http.shutdown_timeout", "5".to_string())
        .with_flag("plugins.bundled", "install".to_string());
    if let Some(b) = budget {
        layers = layers.with_flag("plan.yaql_budget", b.to_string());
    }
    TestDaemon::start_with(layers.resolve().unwrap(), dir)
}

/// What an environment is, as the API shows it: its nodes (with roles), every node, its
/// settings and its deployments.
fn state(d: &TestDaemon, cluster: i64) -> Value {
    let http = d.http();
    json!({
        "members": http.get(&format!("/api/v1/clusters/{cluster}/nodes")).json(),
        "nodes": http.get("/api/v1/nodes").json(),
        "settings": http.get(&format!("/api/v1/clusters/{cluster}/settings")).json(),
        "deployments": http.get(&format!("/api/v1/clusters/{cluster}/deployments")).json(),
    })
}

/// The `fields` of a 400 answer as `(field, message)` pairs.
fn fields(r: &crate::common::Resp) -> Vec<(String, String)> {
    assert_eq!(r.status, 400, "{}", r.body);
    r.json()["fields"]
        .as_array()
        .unwrap_or_else(|| panic!("no fields: {}", r.body))
        .iter()
        .map(|f| {
            (
                f["field"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// GET `path` and one of its headers. The plans here are slow on purpose, and the API waits
/// for one being made, so the client waits as long as a debug build on a loaded machine needs.
fn header(d: &TestDaemon, path: &str, name: &str) -> (u16, String, String) {
    let (status, body, headers) =
        Http::get_bytes_within(&d.url(path), &[], std::time::Duration::from_secs(120));
    (
        status,
        headers.get(name).cloned().unwrap_or_default(),
        String::from_utf8(body).unwrap(),
    )
}

#[test]
fn unknown_roles_are_refused_by_every_surface_and_nothing_is_written() {
    let d = daemon(None);
    d.install_fixture(&plugin_dir());
    let (cluster, ids) = d.environment(&["controller"], 3);
    let http = d.http();
    let before = state(&d, cluster);

    // One node.
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/{}", ids[1]),
        r#"{"roles": ["compute", "bogus"]}"#,
    );
    assert_eq!(r.json()["code"], "invalid_input");
    assert_eq!(
        fields(&r),
        [(
            "roles[1]".to_string(),
            "unknown role \"bogus\": release Ubuntu Newton and its enabled plugins define \
             cinder, compute, controller"
                .to_string()
        )]
    );
    // A node already in the environment keeps its roles.
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/{}", ids[0]),
        r#"{"roles": ["Controller"]}"#,
    );
    assert_eq!(fields(&r)[0].0, "roles[0]");
    // Nailgun's list: the valid first entry is not written either.
    let r = http.post(
        &format!("/api/v1/clusters/{cluster}/assignment"),
        &json!([{"id": ids[1], "roles": ["compute"]},
                {"id": ids[2], "roles": ["cinder", "slow-role"]}])
        .to_string(),
    );
    let f = fields(&r);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].0, "[1].roles[1]");
    assert!(f[0].1.contains("\"slow-role\""), "{f:?}");
    // The dashboard's form.
    let r = http.submit(
        &format!("/environments/{cluster}/nodes"),
        &format!("nodes={}&roles=compute&roles=nope", ids[1]),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("Not added: "), "{}", r.body);
    assert!(
        r.body.contains("roles[1]: unknown role &#34;nope&#34;"),
        "{}",
        r.body
    );
    assert_eq!(state(&d, cluster), before, "a refusal writes nothing");

    // A plugin's role is valid once the plugin is enabled in the environment.
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/settings"),
        &json!({PLUGIN: {"metadata": {"enabled": true}}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http.post(
        &format!("/api/v1/clusters/{cluster}/assignment"),
        &json!([{"id": ids[1], "roles": ["compute"]},
                {"id": ids[2], "roles": ["cinder", "slow-role"]}])
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let node = http.get(&format!("/api/v1/nodes/{}", ids[2])).json();
    assert_eq!(node["pending_roles"], json!(["cinder", "slow-role"]));
}

#[test]
fn deploy_step_arguments_of_the_wrong_type_start_nothing() {
    let d = daemon(None);
    let (cluster, _) = d.environment(&["controller", "compute"], 2);
    let http = d.http();
    let before = state(&d, cluster);
    let deploy = |body: Value| {
        http.post(
            &format!("/api/v1/clusters/{cluster}/deploy"),
            &body.to_string(),
        )
    };

    let r = deploy(
        json!({"steps": [{"interface": "deploy", "step": "write_image",
        "priority": 80, "args": {"image_url": 123}}]}),
    );
    assert_eq!(r.json()["code"], "invalid_steps");
    assert_eq!(
        fields(&r),
        [(
            "steps[0].args.image_url".to_string(),
            "expected a string (HTTP URL of a raw or qcow2 disk image), found the number 123"
                .to_string()
        )]
    );
    // Every problem at once, each at its field: unknown, missing, wrong type.
    let r = deploy(json!({"steps": [
        {"interface": "deploy", "step": "configure", "priority": 70,
         "args": {"facts": "x", "color": "red"}},
        {"interface": "deploy", "step": "write_image", "priority": 80,
         "args": {"checksum": false}}]}));
    let got: Vec<String> = fields(&r).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        got,
        [
            "steps[0].args.color",
            "steps[0].args.facts",
            "steps[1].args.checksum",
            "steps[1].args.image_url"
        ]
    );
    // A malformed step is named by its path too.
    let r = deploy(
        json!({"steps": [{"interface": "deploy", "step": "configure",
        "priority": "high"}]}),
    );
    assert_eq!(r.json()["code"], "invalid_input");
    assert_eq!(fields(&r)[0].0, "steps[0].priority");
    assert_eq!(state(&d, cluster), before, "no deployment was created");

    // The same step with a string starts one.
    let r = deploy(
        json!({"steps": [{"interface": "deploy", "step": "write_image",
        "priority": 80, "args": {"image_url": "http://127.0.0.1:9/os.img"}}]}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
}

#[test]
fn settings_are_checked_against_the_release_and_plugin_attributes() {
    let d = daemon(None);
    d.install_fixture(&plugin_dir());
    let (cluster, _) = d.environment(&["controller"], 1);
    let http = d.http();
    let path = format!("/api/v1/clusters/{cluster}/settings");
    let good = json!({
        "access": {"user": "ops", "password": "s3cret"},
        "debug": true,
        "libvirt_type": "qemu",
        "external_ntp": {"ntp_list": ["ntp.example.org"]},
        "repo_setup": {"repos": [{"name": "extra", "uri": "http://mirror/"}]},
        PLUGIN: {"metadata": {"enabled": false}, "level": "debug", "peers": ["x"]}
    });
    let r = http.put(&path, &good.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let before = state(&d, cluster);
    assert_eq!(before["settings"], good);

    // Keys no attribute backs.
    let r = http.put(
        &path,
        &json!({"bogus": 1, "access": {"nope": "x"}}).to_string(),
    );
    assert_eq!(r.json()["code"], "invalid_input");
    let f = fields(&r);
    assert_eq!(
        f.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["access.nope", "bogus"]
    );
    assert!(
        f[1].1.starts_with(
            "no attribute of release Ubuntu Newton or of its plugins is called \"bogus\"; \
             the settings are: access, auto_assign_floating_ip, debug,"
        ),
        "{f:?}"
    );
    assert!(f[1].1.contains(PLUGIN), "plugin groups are listed: {f:?}");
    // Values of the wrong type for the attribute's type.
    let r = http.put(
        &path,
        &json!({"access": {"user": 5}, "debug": "yes", "libvirt_type": "xen",
                "external_ntp": {"ntp_list": "a,b"},
                PLUGIN: {"metadata": {"enabled": "yes"}, "level": "trace", "expensive": 1}})
        .to_string(),
    );
    let f = fields(&r);
    assert_eq!(
        f,
        [
            (
                "access.user",
                "expected a string (a text setting), found the number 5"
            ),
            (
                "debug",
                "expected a boolean (a checkbox setting), found a string"
            ),
            (
                "external_ntp.ntp_list",
                "expected a list of strings (a text_list setting), found a string"
            ),
            (
                "libvirt_type",
                "\"xen\" is not one of the choices: kvm, qemu"
            ),
            (
                "slow-conditions.expensive",
                "expected a boolean (a checkbox setting), found the number 1"
            ),
            (
                "slow-conditions.level",
                "\"trace\" is not one of the choices: info, debug"
            ),
            (
                "slow-conditions.metadata.enabled",
                "expected a boolean, found a string"
            ),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(state(&d, cluster), before, "a refusal writes nothing");
}

/// Plugin `dup` at `version`: a shell task `dup-task-VERSION` (`.` as `_`) for controllers and
/// one setting.
fn dup(version: &str) -> Vec<u8> {
    let mut m = stoker::engine::plugin::MemFiles::new();
    m.add(
        "metadata.yaml",
        format!(
            "name: dup\ntitle: Dup\nversion: '{version}'\ndescription: one plugin, two versions\n\
             package_version: '5.0.0'\nlicenses: ['Apache License Version 2.0']\n\
             authors: ['stoker']\nhomepage: 'https://example.org'\ngroups: []\n\
             is_hotpluggable: false\nreleases:\n  - os: ubuntu\n    version: newton-10.0\n\
             \x20   deployment_scripts_path: deployment_scripts/\n\
             \x20   repository_path: repositories/ubuntu\n"
        ),
    )
    .unwrap();
    m.add(
        "deployment_tasks.yaml",
        format!(
            "- id: dup-task-{}\n  type: shell\n  version: 2.1.0\n  role: [primary-controller, controller]\n\
             \x20 requires: [deploy_start]\n  required_for: [deploy_end]\n\
             \x20 parameters: {{cmd: 'true', timeout: 60}}\n",
            version.replace('.', "_")
        ),
    )
    .unwrap();
    m.add(
        "environment_config.yaml",
        "attributes:\n  greeting: {value: hi, label: Greeting, type: text, weight: 10}\n",
    )
    .unwrap();
    m.add_dir("deployment_scripts").unwrap();
    m.add_dir("repositories/ubuntu").unwrap();
    crate::common::build(&m, &format!("dup-{version}"))
}

/// Nailgun's rule: an environment enables one version of a plugin. With two versions of `dup`
/// installed, settings that enable `dup` without `chosen_id` are refused where they are
/// written (400, the field and both versions named) and, when written before the second
/// version came, where a plan is made (409 `plugin_conflict`, both versions named); `chosen_id`
/// picks one, and must be one of `dup`'s.
#[test]
fn one_version_of_a_plugin_is_enabled_and_two_are_refused_naming_both() {
    let d = daemon(None);
    d.install_fixture(&plugin_dir());
    let (status, body) = d.post_package(&dup("1.0.0"));
    assert_eq!(status, 201, "{body}");
    let (cluster, ids) = d.environment(&["controller"], 1);
    let http = d.http();
    let settings = format!("/api/v1/clusters/{cluster}/settings");
    let plan = format!("/api/v1/clusters/{cluster}/plan");
    let tasks = format!("/api/v1/clusters/{cluster}/deployment_tasks");
    let node = ids[0].to_string();
    let enabled = json!({"dup": {"metadata": {"enabled": true}, "greeting": "hello"}});

    // One version installed: enabling the name enables it.
    let r = http.put(&settings, &enabled.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http.get(&plan);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(crate::common::plan::ids(&r.json(), &node).contains(&"dup-task-1_0_0".to_string()));

    // A second version: the stored settings no longer say which, and no plan is made.
    let (status, body) = d.post_package(&dup("2.0.0"));
    assert_eq!(status, 201, "{body}");
    let plugins = http.get("/api/v1/plugins").json();
    let id_of = |version: &str| {
        plugins
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "dup" && p["version"] == version)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let (v1, v2) = (id_of("1.0.0"), id_of("2.0.0"));
    let both = format!("1.0.0 (id {v1}) and 2.0.0 (id {v2})");
    for path in [&plan, &tasks] {
        let r = http.get(path);
        assert_eq!(r.status, 409, "{path}: {}", r.body);
        let answer = r.json();
        assert_eq!(answer["code"], "plugin_conflict");
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "dup.metadata.enabled: plugin dup is installed in 2 versions, {both}, and an \
                 environment enables one version of a plugin: name it with \
                 dup.metadata.chosen_id"
            )),
            "{message}"
        );
    }
    let r = http.post(&format!("/api/v1/clusters/{cluster}/deploy"), "");
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.json()["code"], "plugin_conflict");

    // Written again, the same settings are refused naming the field and both versions.
    let before = state(&d, cluster);
    let r = http.put(&settings, &enabled.to_string());
    assert_eq!(r.json()["code"], "invalid_input");
    let f = fields(&r);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].0, "dup.metadata.enabled");
    assert!(f[0].1.contains(&both), "{f:?}");
    // chosen_id must be one of dup's versions.
    for (chosen, says) in [
        (
            json!(9999),
            format!("no installed plugin has id 9999: choose one of dup's versions, {both}"),
        ),
        (
            json!("2.0.0"),
            "expected the id of a version of plugin dup (an integer), found a string".to_string(),
        ),
    ] {
        let r = http.put(
            &settings,
            &json!({"dup": {"metadata": {"enabled": true, "chosen_id": chosen}}}).to_string(),
        );
        assert_eq!(
            fields(&r),
            [("dup.metadata.chosen_id".to_string(), says.clone())],
            "{chosen}"
        );
    }
    // Another plugin's id would enable it under dup's key: refused, even with dup off.
    let other = plugins
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == PLUGIN)
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let r = http.put(
        &settings,
        &json!({"dup": {"metadata": {"enabled": false, "chosen_id": other}}}).to_string(),
    );
    assert_eq!(
        fields(&r),
        [(
            "dup.metadata.chosen_id".to_string(),
            format!(
                "plugin id {other} is {PLUGIN} 1.0.0 (id {other}), not dup: choose one of dup's \
                 versions, {both}"
            )
        )]
    );
    assert_eq!(state(&d, cluster), before, "a refusal writes nothing");

    // chosen_id picks the version planned.
    let r = http.put(
        &settings,
        &json!({"dup": {"metadata": {"enabled": true, "chosen_id": v2}}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http.get(&plan);
    assert_eq!(r.status, 200, "{}", r.body);
    let planned = crate::common::plan::ids(&r.json(), &node);
    assert!(
        planned.contains(&"dup-task-2_0_0".to_string()),
        "{planned:?}"
    );
    assert!(
        !planned.contains(&"dup-task-1_0_0".to_string()),
        "{planned:?}"
    );
}

/// A daemon with plan budget `budget`, the slow plugin installed, and an environment of a
/// controller and a compute: the environment, its plan's API path and its page.
fn slow_plugin_environment(budget: u64) -> (TestDaemon, i64, String, String) {
    let d = daemon(Some(budget));
    d.install_fixture(&plugin_dir());
    let (cluster, _) = d.environment(&["controller", "compute"], 2);
    let plan = format!("/api/v1/clusters/{cluster}/plan");
    let page = format!("/environments/{cluster}");
    (d, cluster, plan, page)
}

/// The number after `(` in "... (N spent when it stopped)".
fn spent(message: &str) -> u64 {
    let tail = message.split(" steps (").nth(1).unwrap_or_default();
    tail.split(' ').next().unwrap_or_default().parse().unwrap()
}

#[test]
fn a_plan_over_its_yaql_budget_is_refused_naming_the_task_and_pages_keep_it() {
    const BUDGET: u64 = 2_000_000;
    let (d, cluster, plan, page) = slow_plugin_environment(BUDGET);
    let http = d.http();
    let settings = format!("/api/v1/clusters/{cluster}/settings");

    // Without the plugin the plan is made, and says what it spent.
    let (status, cached, body) = header(&d, &plan, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (200, "false"), "{body}");
    let steps = serde_json::from_str::<Value>(&body).unwrap()["summary"]["yaql_steps"]
        .as_u64()
        .unwrap();
    assert!(steps > 0 && steps < BUDGET, "{steps}");

    // Enabled, its ten conditions of 18 million steps each are stopped at the budget.
    let r = http.put(
        &settings,
        &json!({PLUGIN: {"metadata": {"enabled": true}}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (status, cached, body) = header(&d, &plan, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (422, "false"), "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["code"], "plan_failed");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "the plan's YAQL evaluation is over its budget of {BUDGET} steps"
        )),
        "{message}"
    );
    let first = message.lines().nth(1).unwrap_or_default();
    assert!(
        first.starts_with("  task slow-1 (deployment_tasks.yaml:")
            && first.contains("(slow-conditions)), field condition: "),
        "the task and field that spent it come first: {message}"
    );
    // Each of the two planning threads stopped within its share: one condition each, and
    // none of the nine others was evaluated.
    assert!(first.ends_with("in 2 evaluation(s)"), "{message}");
    assert!(!message.contains("slow-2"), "{message}");
    let spent = spent(message);
    assert!(
        spent > BUDGET && spent <= 2 * BUDGET + 2,
        "{spent}: {message}"
    );

    // The refusal is kept: the API and the page answer it again without planning.
    let (status, cached, again) = header(&d, &plan, "x-stoker-plan-cached");
    assert_eq!(
        (status, cached.as_str(), again),
        (422, "true", body.clone())
    );
    let (status, cached, html) = header(&d, &page, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (200, "true"));
    assert!(
        html.contains(&format!("over its budget of {BUDGET} steps")) && html.contains("slow-1"),
        "{html}"
    );
    // Deploying answers the kept refusal and starts nothing.
    let r = http.post(&format!("/api/v1/clusters/{cluster}/deploy"), "{}");
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (422, json!("plan_failed"))
    );
    assert_eq!(r.json()["message"], answer["message"]);
    assert_eq!(
        http.get(&format!("/api/v1/clusters/{cluster}/deployments"))
            .json(),
        json!([])
    );

    // A change of what the plan is made from makes a new one, kept in turn.
    let r = http.put(
        &settings,
        &json!({PLUGIN: {"metadata": {"enabled": true}, "expensive": false}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // (The API waits for it; a page view would show the kept refusal while it is made.)
    let (status, cached, _) = header(&d, &plan, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (422, "false"));
    let (_, cached, _) = header(&d, &page, "x-stoker-plan-cached");
    assert_eq!(cached, "true");
    let r = http.put(&settings, "{}");
    assert_eq!(r.status, 200, "{}", r.body);
    let (status, cached, html) = header(&d, &page, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (200, "false"));
    assert!(html.contains("tasks to run"), "planned again: {html}");
    let (status, cached, _) = header(&d, &plan, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (200, "true"));
    // So does a node's roles.
    let nodes = http.get("/api/v1/nodes").json();
    let compute = nodes.as_array().unwrap()[1]["id"].as_i64().unwrap();
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/nodes/{compute}"),
        r#"{"roles": ["compute", "cinder"]}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (_, cached, _) = header(&d, &plan, "x-stoker-plan-cached");
    assert_eq!(cached, "false");

    // Deploy takes the plan the environment's view just made instead of planning again.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let r = agent
        .post(&d.url(&format!("/api/v1/clusters/{cluster}/deploy")))
        .header("authorization", &format!("Bearer {}", d.admin_token()))
        .header("content-type", "application/json")
        .send("{}")
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    assert_eq!(
        r.headers()
            .get("x-stoker-plan-cached")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );

    // While that deployment runs (no agent takes its steps), the page shows the plan kept from
    // before it, even once what plans are made from has changed, instead of planning again on
    // every view; the API still plans.
    let r = http.put(
        &format!("/api/v1/nodes/{compute}"),
        r#"{"name": "renamed-while-deploying"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (status, cached, html) = header(&d, &page, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (200, "true"), "{html}");
    assert!(
        html.contains("before the running deployment; planned again once it ends"),
        "{html}"
    );
    let (status, cached, _) = header(&d, &plan, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (200, "false"));
}

/// A view of the environment's page while its new plan takes seconds (the slow plugin's
/// conditions, up to the budget) shows the plan kept from before, saying a new one is being
/// made; that plan is still made, kept, and what the next view and the API answer.
#[test]
fn the_page_shows_the_kept_plan_while_a_slow_new_one_is_made() {
    let (d, cluster, plan, page) = slow_plugin_environment(12_000_000);
    let http = d.http();

    let (status, cached, html) = header(&d, &page, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (200, "false"), "{html}");
    assert!(!html.contains("a new plan is being made"), "{html}");
    let made = header(&d, &page, "x-stoker-plan-made").1;

    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/settings"),
        &json!({PLUGIN: {"metadata": {"enabled": true}}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The first view starts the new plan and stops waiting for it; the second finds it being
    // made and does not wait at all. Both show the kept plan, saying so.
    for _ in 0..2 {
        let (status, _, html) = header(&d, &page, "x-stoker-plan-cached");
        assert_eq!(status, 200, "{html}");
        assert!(
            html.contains("a new plan is being made") && html.contains("tasks to run"),
            "the kept plan, saying a new one is being made: {html}"
        );
        assert!(!html.contains("over its budget"), "{html}");
    }
    assert_eq!(header(&d, &page, "x-stoker-plan-made").1, made);

    // The API waits for the plan being made: the plugin's refusal, made by the page's view.
    let (status, cached, body) = header(&d, &plan, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (422, "true"), "{body}");
    assert!(body.contains("over its budget"), "{body}");
    let (status, cached, html) = header(&d, &page, "x-stoker-plan-cached");
    assert_eq!((status, cached.as_str()), (200, "true"));
    assert!(
        html.contains("over its budget") && !html.contains("a new plan is being made"),
        "{html}"
    );
}
