//! Deployment graphs through Nailgun's API: upload (POST then PUT, list and dict forms), the
//! lists and their filters, the task lists per level, delete, refusals, an uploaded graph
//! planned, and the real `fuel2` (11.0.0) driving them when its venv is on this machine.

use serde_json::{Value, json};

use crate::common::TestDaemon;
use crate::common::plan::step;

fn setup() -> (TestDaemon, i64, i64, Vec<i64>) {
    let d = TestDaemon::start_bundled("install");
    let (cluster, ids) = d.environment(&["controller"], 1);
    let release = d.http().get("/api/v1/releases").json()[0]["id"]
        .as_i64()
        .unwrap();
    (d, cluster, release, ids)
}

fn hello(cmd: &str) -> Value {
    json!({"id": "hello", "type": "shell", "version": "2.1.0", "roles": ["controller"],
           "parameters": {"cmd": cmd, "timeout": 60}})
}

fn types(list: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let r = &g["relations"][0];
            (
                format!("{}:{}", r["model"].as_str().unwrap(), r["model_id"]),
                r["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn upload_list_download_and_delete() {
    let (d, c, rel, _) = setup();
    let http = d.http();
    let one = format!("/api/v1/clusters/{c}/deployment_graphs/custom");
    assert_eq!(http.get(&one).status, 404, "none stored yet");
    // fuel2 wraps a YAML list as {"tasks": [...]}.
    let r = http.post(&one, &json!({"tasks": [hello("echo 1")]}).to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let g = r.json();
    assert!(g["id"].as_i64().unwrap() > 0, "{g}");
    assert_eq!(
        g["relations"],
        json!([{"type": "custom", "model": "cluster", "model_id": c}])
    );
    assert_eq!(g["tasks"], json!([hello("echo 1")]));
    let again = http.post(&one, &json!({"tasks": []}).to_string());
    assert_eq!(again.status, 409, "{}", again.body);
    // The dict form, sent as is, replaces the tasks.
    let r = http.put(
        &one,
        &json!({"name": "mine", "tasks": [hello("echo 2")]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["id"], g["id"], "the same graph");
    let shown = http.get(&one).json();
    assert_eq!(shown["name"], "mine");
    assert_eq!(shown["tasks"], json!([hello("echo 2")]));

    // The release's package graphs answer without an upload.
    let rel_default = http.get(&format!("/api/v1/releases/{rel}/deployment_graphs/default"));
    assert_eq!(rel_default.status, 200, "{}", rel_default.body);
    let rel_default = rel_default.json();
    assert!(rel_default["id"].as_i64().unwrap() < 0, "a package graph");
    let rel_tasks = rel_default["tasks"].as_array().unwrap().len();
    assert!(rel_tasks > 10);
    let rel_list = http.get(&format!(
        "/api/v1/releases/{rel}/deployment_graphs?fetch_related=0"
    ));
    let rel_types: Vec<String> = types(&rel_list.json()).into_iter().map(|t| t.1).collect();
    assert!(
        rel_types.contains(&"default".to_string()) && rel_types.contains(&"deletion".to_string()),
        "{rel_types:?}"
    );
    assert_eq!(
        http.get(&format!("/api/v1/releases/{rel}/deployment_graphs/nope"))
            .status,
        404
    );

    // The collections and Nailgun's filters.
    let cluster_list = http.get(&format!(
        "/api/v1/clusters/{c}/deployment_graphs?fetch_related=1"
    ));
    assert_eq!(
        types(&cluster_list.json()),
        [(format!("cluster:{c}"), "custom".into())]
    );
    let all = types(&http.get("/api/v1/graphs/").json());
    assert!(
        all.contains(&(format!("cluster:{c}"), "custom".into())),
        "{all:?}"
    );
    assert!(
        all.contains(&(format!("release:{rel}"), "default".into())),
        "{all:?}"
    );
    let only = types(&http.get(&format!("/api/v1/graphs?clusters_ids={c}")).json());
    assert_eq!(only, [(format!("cluster:{c}"), "custom".into())]);
    let related = types(
        &http
            .get(&format!("/api/v1/graphs?clusters_ids={c}&fetch_related=1"))
            .json(),
    );
    assert!(
        related.contains(&(format!("release:{rel}"), "default".into())),
        "{related:?}"
    );
    let of_release = types(
        &http
            .get(&format!("/api/v1/graphs?releases_ids={rel}"))
            .json(),
    );
    assert!(
        of_release
            .iter()
            .all(|(o, _)| *o == format!("release:{rel}"))
    );
    let custom = types(&http.get("/api/v1/graphs?graph_types=custom").json());
    assert_eq!(custom, [(format!("cluster:{c}"), "custom".into())]);
    assert_eq!(http.get("/api/v1/graphs?plugins_ids=999").json(), json!([]));
    let bad = http.get("/api/v1/graphs?clusters_ids=x");
    assert_eq!(bad.status, 400);
    assert!(
        bad.json()["message"]
            .as_str()
            .unwrap()
            .contains("clusters_ids")
    );

    // Downloads per level.
    let tasks = |level: &str, ty: &str| {
        let r = http.get(&format!(
            "/api/v1/clusters/{c}/deployment_tasks{level}?graph_type={ty}"
        ));
        assert_eq!(r.status, 200, "{level}: {}", r.body);
        r.json()
    };
    assert_eq!(tasks("/own/", "custom"), json!([hello("echo 2")]));
    assert_eq!(tasks("/release/", "custom"), json!([]));
    assert_eq!(tasks("/plugins/", "custom"), json!([]));
    assert_eq!(tasks("", "custom"), json!([hello("echo 2")]));
    assert_eq!(tasks("/", "default").as_array().unwrap().len(), rel_tasks);
    assert_eq!(
        tasks("/release", "default").as_array().unwrap().len(),
        rel_tasks
    );

    // Delete.
    assert_eq!(http.delete(&one).status, 204);
    assert_eq!(http.delete(&one).status, 404);
    assert_eq!(http.get(&one).status, 404);
    assert_eq!(
        http.put(&one, r#"{"tasks": []}"#).status,
        404,
        "PUT needs a graph"
    );
    assert_eq!(
        http.get("/api/v1/clusters/999/deployment_graphs/custom")
            .status,
        404
    );
    assert_eq!(
        http.post(
            "/api/v1/plugins/999/deployment_graphs/custom",
            r#"{"tasks": []}"#
        )
        .status,
        404
    );
}

#[test]
fn a_refused_upload_names_the_task_and_field_and_stores_nothing() {
    let (d, c, _, _) = setup();
    let http = d.http();
    let one = format!("/api/v1/clusters/{c}/deployment_graphs/custom");
    let body = json!({"tasks": [hello("echo"), {"id": "bad", "type": "teleport"}]});
    let r = http.post(&one, &body.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    let e = r.json();
    assert_eq!(e["code"], "invalid_input");
    assert_eq!(e["fields"][0]["field"], "tasks[1].type");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("task bad") && message.contains("teleport"),
        "{message}"
    );
    let dup = json!({"tasks": [hello("a"), hello("b")]});
    let r = http.post(&one, &dup.to_string());
    assert_eq!(r.json()["fields"][0]["field"], "tasks[1].id", "{}", r.body);
    assert_eq!(http.get(&one).status, 404, "nothing stored");
    // The API's body limit holds here too.
    let big = json!({"tasks": [{"id": "x", "type": "shell", "parameters": {"cmd": "x".repeat(300_000)}}]});
    let r = http.post(&one, &big.to_string());
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.json()["code"], "payload_too_large");
    assert_eq!(http.get(&one).status, 404, "nothing stored");
}

#[test]
fn uploaded_graphs_are_planned() {
    let (d, c, _, ids) = setup();
    let http = d.http();
    let node = ids[0];
    // A type only the environment defines.
    let r = http.get(&format!("/api/v1/clusters/{c}/plan?graph=custom"));
    assert_eq!(r.status, 422, "no graph of that type yet: {}", r.body);
    let r = http.post(
        &format!("/api/v1/clusters/{c}/deployment_graphs/custom"),
        &json!({"tasks": [{"id": "hello", "type": "shell", "roles": ["/.*/"],
                            "parameters": {"cmd": "echo custom"}}]})
        .to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http.get(&format!("/api/v1/clusters/{c}/plan?graph=custom"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(step(&r.json(), node, "hello")["status"], "run");

    // The environment's task of a release task's id replaces it.
    let before = http.get(&format!("/api/v1/clusters/{c}/plan")).json();
    let release_db = step(&before, node, "database")["source"].as_str().unwrap();
    assert!(release_db.contains("20-controller.yaml"), "{release_db}");
    let over = json!({"id": "database", "type": "shell",
                      "roles": ["primary-controller", "controller"],
                      "requires": ["netconfig"], "parameters": {"cmd": "echo db"}});
    let r = http.post(
        &format!("/api/v1/clusters/{c}/deployment_graphs/default"),
        &json!({"tasks": [over]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let after = http.get(&format!("/api/v1/clusters/{c}/plan"));
    // The kept plan was made again: the digest covers uploaded graphs.
    let planned = after.json();
    let db = step(&planned, node, "database");
    assert!(
        db["source"]
            .as_str()
            .unwrap()
            .contains("uploaded graph default"),
        "{db}"
    );
    assert_eq!(db["parameters"]["cmd"], "echo db");
    let merged = http
        .get(&format!("/api/v1/clusters/{c}/deployment_tasks/"))
        .json();
    let db: Vec<&Value> = merged
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"] == "database")
        .collect();
    assert_eq!(db, [&over], "the environment's task wins the merge");
}

/// Run the real client with `args` against `d`; its output on failure.
fn fuel2(bin: &std::path::Path, cfg: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(bin)
        .args(args)
        .env("XDG_CONFIG_HOME", cfg)
        .env("PYTHONWARNINGS", "ignore")
        .env_remove("SERVER_ADDRESS")
        .env_remove("SERVER_PORT")
        .env_remove("OS_PASSWORD")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .output()
        .expect("fuel2 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "fuel2 {}: {text}", args.join(" "));
    text
}

#[test]
#[ignore = "needs python-fuelclient 11.0.0 in $FUELCLIENT_VENV (/tmp/fcvenv): .ci/run installs it and runs this"]
fn the_real_fuel2_drives_graphs() {
    let venv = std::env::var("FUELCLIENT_VENV").unwrap_or_else(|_| "/tmp/fcvenv".into());
    let bin = std::path::Path::new(&venv).join("bin/fuel2");
    assert!(
        bin.exists(),
        "python-fuelclient 11.0.0 is not installed at {} (.ci/fuelclient.sh makes that venv)",
        bin.display()
    );
    let (d, c, _, _) = setup();
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("xdg");
    std::fs::create_dir_all(cfg.join("fuel")).unwrap();
    let data_dir = d.db_path().parent().unwrap().to_path_buf();
    let password = crate::common::admin_password(&data_dir);
    std::fs::write(
        cfg.join("fuel/fuel_client.yaml"),
        format!(
            "SERVER_ADDRESS: \"127.0.0.1\"\nSERVER_PORT: \"{}\"\nOS_USERNAME: \"admin\"\n\
             OS_PASSWORD: {}\nOS_TENANT_NAME: \"admin\"\nHTTP_PROXY: null\nHTTP_TIMEOUT: 30\n",
            d.addr.port(),
            serde_json::to_string(&password).unwrap()
        ),
    )
    .unwrap();
    let graph = work.path().join("graph.yaml");
    std::fs::write(
        &graph,
        "- id: hello\n  type: shell\n  version: 2.1.0\n  roles: ['/.*/']\n  \
         parameters: {cmd: echo hello, timeout: 60}\n",
    )
    .unwrap();
    let env = c.to_string();
    let g = graph.to_str().unwrap();
    let run = |args: &[&str]| fuel2(&bin, &cfg, args);
    run(&["graph", "upload", "-e", &env, "-t", "mygraph", "-f", g]);
    run(&["graph", "upload", "-e", &env, "-t", "mygraph", "-f", g]);
    let listed = run(&["graph", "list", "-e", &env, "--cluster", "--release"]);
    assert!(listed.contains("mygraph"), "{listed}");
    let own = work.path().join("own.yaml");
    run(&[
        "graph",
        "download",
        "-e",
        &env,
        "-c",
        "-t",
        "mygraph",
        "-f",
        own.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&own).unwrap();
    assert!(text.contains("echo hello"), "{text}");
    let all = work.path().join("all.yaml");
    run(&[
        "graph",
        "download",
        "-e",
        &env,
        "-a",
        "-f",
        all.to_str().unwrap(),
    ]);
    assert!(std::fs::read_to_string(&all).unwrap().contains("id:"));
    run(&["graph", "delete", "-e", &env, "-t", "mygraph"]);
    assert_eq!(
        d.http()
            .get(&format!("/api/v1/clusters/{c}/deployment_graphs/mygraph"))
            .status,
        404
    );
}

/// Graphs go with their owner: removing the release's plugin removes the graph uploaded for
/// the release, and deleting an environment removes its own.
#[test]
fn uploaded_graphs_go_with_their_release_or_environment() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let release = &http.get("/api/v1/releases").json()[0];
    let (rel, plugin) = (
        release["id"].as_i64().unwrap(),
        release["plugin_id"].as_i64().unwrap(),
    );
    let name = http
        .get("/api/v1/plugins")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == plugin)
        .map(|p| p["name"].as_str().unwrap().to_string())
        .unwrap();
    let r = http.post(
        &format!("/api/v1/releases/{rel}/deployment_graphs/custom"),
        &json!({"tasks": [hello("echo r")]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http.post(
        "/api/v1/clusters",
        &json!({"name": "e", "release_id": rel}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let c = r.json()["id"].as_i64().unwrap();
    let r = http.post(
        &format!("/api/v1/clusters/{c}/deployment_graphs/custom"),
        &json!({"tasks": [hello("echo c")]}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let stored = |model: &str| -> usize {
        http.get("/api/v1/graphs")
            .json()
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["id"].as_i64().unwrap() > 0 && g["relations"][0]["model"] == model)
            .count()
    };
    assert_eq!((stored("release"), stored("cluster")), (1, 1));
    assert_eq!(http.delete(&format!("/api/v1/clusters/{c}")).status, 202);
    assert_eq!((stored("release"), stored("cluster")), (1, 0));
    let r = http.delete(&format!("/api/v1/plugins/{name}"));
    assert!(r.status == 200 || r.status == 204, "{}", r.body);
    assert_eq!(stored("release"), 0);
}
