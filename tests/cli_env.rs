//! The native CLI as an operator runs it: the built `stoker` binary against a real daemon on
//! loopback. `node`, `env` and `deployment` commands by id and by name, their tables and their
//! `-o json|yaml` documents, settings read, changed and refused naming the field, the plan,
//! `env deploy --follow` to done and to a failed step (its output tail shown) with the agents
//! played over HTTP as tests/deploy.rs plays them, abort and retry, the exit codes (not found,
//! refused, not authorized, unreachable, bad usage), colour and bars only on a terminal (a
//! pseudo-terminal from util-linux's `script`), completions and man pages; and the API routes
//! the CLI added (`GET /api/v1/deployments`, `GET /api/v1/deployments/{id}/runs`).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::bin::stoker;
use crate::common::{Http, TestDaemon, inventory};
use crate::deploy::{drive, next, report, setup};

/// The CLI pointed at one daemon with one token, in a directory of its own (no token file).
struct Cli {
    url: String,
    token: Option<String>,
    dir: tempfile::TempDir,
}

/// A finished command: its exit code and outputs.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    out: String,
    err: String,
}

impl Ran {
    fn json(&self) -> Value {
        serde_json::from_str(&self.out)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.out, self.err))
    }

    /// Exit 0, else fail showing both outputs.
    fn ok(self) -> Ran {
        assert_eq!(self.code, Some(0), "{}\n{}", self.out, self.err);
        self
    }
}

impl Cli {
    fn of(d: &TestDaemon) -> Cli {
        Cli {
            url: d.url(""),
            token: Some(d.admin_token()),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn with_token(d: &TestDaemon, token: Option<String>) -> Cli {
        Cli {
            token,
            ..Cli::of(d)
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = stoker(self.dir.path());
        cmd.args(args)
            .env("STOKER_URL", &self.url)
            .env("XDG_CONFIG_HOME", self.dir.path())
            .env("HOME", self.dir.path())
            .env_remove("NO_COLOR");
        if let Some(t) = &self.token {
            cmd.env("STOKER_TOKEN", t);
        }
        cmd
    }

    fn run(&self, args: &[&str]) -> Ran {
        let out = self.command(args).stdin(Stdio::null()).output().unwrap();
        Ran {
            code: out.status.code(),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Run `args` under a pseudo-terminal (`script`), as on an operator's terminal; `env` added.
    fn run_on_terminal(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let line = std::iter::once(crate::common::bin::STOKER)
            .chain(args.iter().copied())
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"])
            .current_dir(self.dir.path())
            .env("STOKER_URL", &self.url)
            .env("XDG_CONFIG_HOME", self.dir.path())
            .env("COLUMNS", "150")
            .env("LINES", "40")
            .env_remove("NO_COLOR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(t) = &self.token {
            cmd.env("STOKER_TOKEN", t);
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        Ran {
            code: out.status.code(),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Start `cmd` in the background, its outputs read as it writes them.
    fn spawn(mut cmd: Command) -> Background {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let reader = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = r.read_to_string(&mut s);
                s
            })
        };
        let out = reader(Box::new(child.stdout.take().unwrap()));
        let err = reader(Box::new(child.stderr.take().unwrap()));
        Background { child, out, err }
    }
}

/// A command running beside the test (`--follow` while the test plays the agents).
struct Background {
    child: Child,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

impl Background {
    /// Wait for it to exit (killed after `secs`).
    fn finish(mut self, secs: u64) -> Ran {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break self.child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ran {
            code: status.code(),
            out: self.out.join().unwrap(),
            err: self.err.join().unwrap(),
        }
    }
}

/// The id of the environment's newest deployment once it exists (the CLI started it).
fn started(base: &str, cluster: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = Http::raw_get_json(&format!("{base}/api/v1/deployments?cluster_id={cluster}"));
        if let Some(id) = list[0]["id"].as_i64() {
            return id;
        }
        assert!(Instant::now() < deadline, "no deployment started: {list}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A discovered node with this MAC: its id.
fn hello(d: &TestDaemon, mac: &str) -> i64 {
    let r = d
        .http()
        .post("/api/v1/agent/hello", &inventory(mac).to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["node"]["id"].as_i64().unwrap()
}

#[test]
fn nodes_and_environments_by_id_or_name_as_tables_json_and_yaml() {
    let d = TestDaemon::start_bundled("install");
    let cli = Cli::of(&d);
    let ids: Vec<i64> = (1..=3)
        .map(|i| hello(&d, &format!("52:54:00:00:50:{i:02x}")))
        .collect();

    // A table with its header, a row per node.
    let table = cli.run(&["node", "list"]).ok();
    let header = table.out.lines().next().unwrap();
    for col in ["ID", "NAME", "HOSTNAME", "STATUS", "ENV", "ROLES", "MAC"] {
        assert!(header.contains(col), "{header}");
    }
    assert_eq!(table.out.lines().count(), 4, "{}", table.out);
    assert!(!table.out.contains('\x1b'), "no colour into a pipe");
    // The same as JSON and as YAML.
    let listed = cli.run(&["node", "list", "-o", "json"]).ok().json();
    assert_eq!(listed.as_array().unwrap().len(), 3);
    let yaml = cli.run(&["node", "list", "-o", "yaml"]).ok().out;
    let from_yaml: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(from_yaml.as_array().unwrap().len(), 3);
    assert_eq!(from_yaml[0]["mac"], listed[0]["mac"]);

    // A node by id, host name or MAC.
    for r in [
        ids[1].to_string(),
        format!("node-{}", ids[1]),
        "52:54:00:00:50:02".into(),
    ] {
        let shown = cli.run(&["node", "show", &r, "-o", "json"]).ok().json();
        assert_eq!(shown["id"], ids[1], "{r}");
    }
    let details = cli.run(&["node", "show", "52:54:00:00:50:02"]).ok().out;
    assert!(
        details.contains("Hostname:") && details.contains("PowerEdge R650"),
        "{details}"
    );

    // An environment of the only release, created by name; the name is then taken.
    let env = cli
        .run(&["env", "create", "prod", "-o", "json"])
        .ok()
        .json();
    assert_eq!(env["name"], "prod");
    let again = cli.run(&["env", "create", "prod"]);
    assert_eq!(again.code, Some(4), "{again:?}");
    assert!(
        again.err.contains("409") && again.err.contains("prod"),
        "{}",
        again.err
    );
    let listed = cli.run(&["env", "list", "-o", "json"]).ok().json();
    assert_eq!(listed[0]["name"], "prod");
    assert!(cli.run(&["env", "list"]).ok().out.starts_with("ID  NAME"));

    // Nodes assigned by name, all or none: an unknown role refuses every one of them.
    let refused = cli.run(&[
        "env",
        "assign",
        "prod",
        "node-1",
        "node-2",
        "--roles",
        "compute,bogus",
    ]);
    assert_eq!(refused.code, Some(4), "{refused:?}");
    assert!(
        refused.err.contains("roles[1]") && refused.err.contains("bogus"),
        "{}",
        refused.err
    );
    assert_eq!(
        cli.run(&["node", "list", "--unassigned", "-o", "json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let assigned = cli
        .run(&["env", "assign", "prod", "node-1", "--roles", "controller"])
        .ok()
        .out;
    assert!(
        assigned.contains("assigned node 1 to prod as controller"),
        "{assigned}"
    );
    cli.run(&[
        "env",
        "assign",
        "prod",
        &ids[1].to_string(),
        "--roles",
        "compute,cinder",
    ])
    .ok();
    let shown = cli.run(&["env", "show", "prod", "-o", "json"]).ok().json();
    assert_eq!(shown["nodes"].as_array().unwrap().len(), 2, "{shown}");
    assert_eq!(
        shown["nodes"][1]["assigned_roles"],
        json!(["compute", "cinder"])
    );
    let text = cli.run(&["env", "show", "prod"]).ok().out;
    assert!(
        text.contains("Nodes (2):") && text.contains("compute,cinder"),
        "{text}"
    );
    let members = cli
        .run(&["node", "list", "--env", "prod", "-o", "json"])
        .ok()
        .json();
    assert_eq!(members.as_array().unwrap().len(), 2);
    cli.run(&["env", "unassign", "prod", "node-2"]).ok();
    assert_eq!(
        cli.run(&["node", "list", "--env", "prod", "-o", "json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Two nodes of one name: naming it is ambiguous (bad usage), listing their ids.
    for id in &ids[1..] {
        let r = d.http().put(
            &format!("/api/v1/nodes/{id}"),
            &json!({"name": "twin"}).to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let twin = cli.run(&["node", "show", "twin"]);
    assert_eq!(twin.code, Some(2), "{twin:?}");
    assert!(
        twin.err.contains(&format!("ids {}, {}", ids[1], ids[2])),
        "{}",
        twin.err
    );

    // Deleted, then gone.
    let gone = cli
        .run(&["node", "delete", &format!("node-{}", ids[2]), "-o", "json"])
        .ok()
        .json();
    assert_eq!(gone["deleted"], json!([ids[2]]));
    assert_eq!(
        cli.run(&["node", "show", &ids[2].to_string()]).code,
        Some(3)
    );
    let deleted = cli.run(&["env", "delete", "prod"]).ok().out;
    assert!(deleted.contains("prod deleted"), "{deleted}");
    assert_eq!(cli.run(&["env", "show", "prod"]).code, Some(3));
}

#[test]
fn settings_round_trip_and_refusals_name_the_field() {
    let d = TestDaemon::start_bundled("install");
    let cli = Cli::of(&d);
    let (cluster, _) = d.environment(&["controller"], 1);
    let env = cluster.to_string();
    let empty = cli.run(&["env", "settings", "get", &env]).ok().out;
    assert!(empty.contains("defaults apply"), "{empty}");

    let set = cli
        .run(&[
            "env",
            "settings",
            "set",
            &env,
            "access.user=ops",
            "debug=true",
        ])
        .ok()
        .out;
    assert!(
        set.contains("access.user: \"ops\" (new)") && set.contains("debug: true (new)"),
        "{set}"
    );
    let table = cli.run(&["env", "settings", "get", &env]).ok().out;
    assert!(
        table.starts_with("KEY") && table.contains("access.user  \"ops\""),
        "{table}"
    );
    assert_eq!(
        cli.run(&["env", "settings", "get", &env, "access.user", "-o", "json"])
            .ok()
            .json(),
        "ops"
    );
    assert_eq!(
        cli.run(&["env", "settings", "get", &env, "access.nobody"])
            .code,
        Some(3)
    );

    // get -o yaml, then set --file takes it back whole.
    let saved = cli
        .run(&["env", "settings", "get", &env, "-o", "yaml"])
        .ok()
        .out;
    let file = cli.dir.path().join("settings.yaml");
    std::fs::write(&file, &saved).unwrap();
    cli.run(&[
        "env",
        "settings",
        "set",
        &env,
        "access.user=other",
        "--unset",
        "debug",
    ])
    .ok();
    let now = cli
        .run(&["env", "settings", "get", &env, "-o", "json"])
        .ok()
        .json();
    assert_eq!(now, json!({"access": {"user": "other"}}));
    let back = cli
        .run(&[
            "env",
            "settings",
            "set",
            &env,
            "--file",
            file.to_str().unwrap(),
            "-o",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(back, json!({"access": {"user": "ops"}, "debug": true}));

    // Refused by the master naming each bad key; nothing written.
    let refused = cli.run(&["env", "settings", "set", &env, "debug=maybe", "nothere.x=1"]);
    assert_eq!(refused.code, Some(4), "{refused:?}");
    assert!(
        refused.err.contains("\n  debug: expected a boolean")
            && refused.err.contains("\n  nothere: "),
        "{}",
        refused.err
    );
    let still = cli
        .run(&["env", "settings", "get", &env, "-o", "json"])
        .ok()
        .json();
    assert_eq!(still, back);
    // Bad arguments are bad usage, before anything is asked.
    assert_eq!(
        cli.run(&["env", "settings", "set", &env, "novalue"]).code,
        Some(2)
    );
    assert_eq!(cli.run(&["env", "settings", "set", &env]).code, Some(2));

    // The plan: text by default, JSON, Graphviz.
    let plan = cli.run(&["env", "plan", &env]).ok().out;
    assert!(plan.starts_with("plan for env"), "{plan}");
    let plan = cli.run(&["env", "plan", &env, "-o", "json"]).ok().json();
    assert!(plan["nodes"].is_array(), "{plan}");
    let dot = cli.run(&["env", "plan", &env, "--dot"]).ok().out;
    assert!(dot.starts_with("digraph"), "{dot}");
}

#[test]
fn exit_codes_say_what_went_wrong() {
    let d = TestDaemon::start_bundled("install");
    let cli = Cli::of(&d);
    let (cluster, nodes) = d.environment(&["controller"], 1);
    let code = |cli: &Cli, args: &[&str]| {
        let r = cli.run(args);
        (r.code, r.err)
    };
    // Not found: 3.
    assert_eq!(code(&cli, &["node", "show", "999"]).0, Some(3));
    assert_eq!(code(&cli, &["env", "show", "nosuch"]).0, Some(3));
    assert_eq!(code(&cli, &["deployment", "show", "999"]).0, Some(3));
    let (c, err) = code(&cli, &["deployment", "logs", &nodes[0].to_string()]);
    assert_eq!(c, Some(3), "{err}");
    assert!(err.contains("no deployment"), "{err}");
    // Refused: 4 (a conflict; nothing running to abort).
    assert_eq!(code(&cli, &["env", "create", "env"]).0, Some(4));
    let (c, err) = code(&cli, &["env", "abort", &cluster.to_string()]);
    assert_eq!(c, Some(4), "{err}");
    assert!(err.contains("no running deployment"), "{err}");
    // Not authorized: 5, without a token, with a bad one, with a role too weak.
    let (c, err) = code(&Cli::with_token(&d, None), &["env", "list"]);
    assert_eq!(c, Some(5), "{err}");
    assert!(err.contains("stoker login"), "{err}");
    let (c, err) = code(
        &Cli::with_token(&d, Some("stk_forged".into())),
        &["node", "list"],
    );
    assert_eq!(c, Some(5), "{err}");
    assert!(err.contains("401"), "{err}");
    let viewer = Cli::with_token(&d, Some(d.user_token("vera", "viewer")));
    assert_eq!(viewer.run(&["env", "list"]).code, Some(0), "a viewer reads");
    let (c, err) = code(&viewer, &["env", "create", "mine"]);
    assert_eq!(c, Some(5), "{err}");
    assert!(err.contains("403"), "{err}");
    // Users and tokens as tables and documents too.
    let users = cli.run(&["user", "list", "-o", "json"]).ok().json();
    assert!(
        users
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["name"] == "vera"),
        "{users}"
    );
    let tokens = viewer.run(&["token", "list"]).ok().out;
    assert!(
        tokens.starts_with("ID  USER  NAME") && tokens.contains("vera"),
        "{tokens}"
    );
    // The master unreachable: 6.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let away = Cli {
        url: format!("http://127.0.0.1:{port}"),
        ..Cli::of(&d)
    };
    let (c, err) = code(&away, &["node", "list"]);
    assert_eq!(c, Some(6), "{err}");
    assert!(err.contains("cannot reach the master"), "{err}");
    // Bad usage: 2.
    assert_eq!(
        code(&cli, &["env", "assign", "env", "1"]).0,
        Some(2),
        "no --roles"
    );
    assert_eq!(code(&cli, &["node", "list", "-o", "xml"]).0, Some(2));
    // Every API command's help lists the codes.
    let help = cli.run(&["env", "deploy", "--help"]).ok().out;
    assert!(
        help.contains("Exit codes:") && help.contains("6  cannot reach the master"),
        "{help}"
    );
}

#[test]
fn deploy_follow_runs_to_done_with_a_line_per_change() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let cli = Cli::of(&d);
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let follow = Cli::spawn(cli.command(&["env", "deploy", "env", "--follow"]));
    let id = started(&base, cluster);
    // The follower asks once a second: each node's first step stays running across two of
    // its asks, so that it is seen running (the rest may run faster than it asks).
    let first: Vec<_> = nodes
        .iter()
        .map(|n| (n, next(&base, n).expect("each node has a first step")))
        .collect();
    std::thread::sleep(Duration::from_millis(2500));
    for (n, run) in &first {
        let r = report(&base, n, run, true);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    drive(&base, &nodes, &|_| false, 1000);
    let ran = follow.finish(60);
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.out, ran.err);
    for n in &nodes {
        assert!(
            ran.out.contains(&format!("node-{}  ", n.id))
                && ran.out.contains("running deploy.configure"),
            "{}",
            ran.out
        );
    }
    let done_lines = ran.out.lines().filter(|l| l.ends_with("  done")).count();
    assert_eq!(done_lines, 2, "each node's last line: {}", ran.out);
    assert!(
        ran.out.contains(&format!("deployment {id} done: ")),
        "{}",
        ran.out
    );
    assert!(!ran.out.contains('\x1b'), "no colour or bars into a pipe");

    // The deployment afterwards: listed, shown run by run, and a step's output.
    let list = cli.run(&["deployment", "list", "-o", "json"]).ok().json();
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["status"], "done");
    let table = cli.run(&["deployment", "list", "--env", "env"]).ok().out;
    assert!(
        table.starts_with("ID  ENV") && table.contains("done"),
        "{table}"
    );
    let shown = cli.run(&["deployment", "show", &id.to_string()]).ok().out;
    assert!(shown.contains("Status:       done"), "{shown}");
    assert!(
        shown.contains("NODE") && shown.contains("ATTEMPT") && shown.contains("DURATION"),
        "{shown}"
    );
    let netconfig = shown
        .lines()
        .find(|l| l.starts_with(&format!("node-{} ", nodes[1].id)) && l.contains(" netconfig "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        netconfig.contains(" ok ") && netconfig.contains(" 1 "),
        "{netconfig}"
    );
    let doc = cli
        .run(&["deployment", "show", &id.to_string(), "-o", "json"])
        .ok()
        .json();
    assert_eq!(doc["status"], "done");
    assert!(doc["steps"].as_array().unwrap().len() > 10);
    let log = cli
        .run(&[
            "deployment",
            "logs",
            &format!("node-{}", nodes[1].id),
            "netconfig",
        ])
        .ok()
        .out;
    assert_eq!(log, "ran netconfig\n");
    let all = cli
        .run(&["deployment", "logs", &nodes[1].id.to_string()])
        .ok()
        .out;
    assert!(
        all.contains(&format!("==> node-{} netconfig (ok", nodes[1].id)),
        "{all}"
    );
    assert_eq!(
        cli.run(&["deployment", "logs", &nodes[1].id.to_string(), "nosuch"])
            .code,
        Some(3)
    );
    // Following a finished deployment says how it ended at once.
    let again = cli.run(&["deployment", "follow", &id.to_string()]).ok();
    assert!(
        again.out.contains(&format!("deployment {id} done")),
        "{}",
        again.out
    );
    // Nothing changed since: Deploy is refused (409 nothing_to_run), a dry run records
    // what would run and runs nothing.
    let refused = cli.run(&["env", "deploy", "env"]);
    assert_eq!(refused.code, Some(4), "{refused:?}");
    assert!(refused.err.contains("nothing_to_run"), "{}", refused.err);
    cli.run(&["env", "settings", "set", "env", "access.user=ops"])
        .ok();
    let dry = cli.run(&["env", "deploy", "env", "--dry-run"]).ok().out;
    assert!(dry.contains("nothing ran") && dry.contains("NODE"), "{dry}");
    // A dry run is not what a retry picks, nor can it be retried.
    let newest = cli.run(&["deployment", "list", "-o", "json"]).ok().json();
    assert_eq!(newest[0]["status"], "dry_run");
    let r = Http::raw_post(
        &format!("{base}/api/v1/deployments/{}/retry", newest[0]["id"]),
        "",
        &[],
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let retry = cli.run(&["env", "retry", "env"]);
    assert_eq!(retry.code, Some(4), "the last real one is done: {retry:?}");
    assert!(
        retry.err.contains(&format!("deployment {id} is done")),
        "{}",
        retry.err
    );
}

#[test]
fn a_failed_step_is_shown_with_its_output_and_retry_goes_on() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let cli = Cli::of(&d);
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let follow = Cli::spawn(cli.command(&["env", "deploy", &cluster.to_string(), "--follow"]));
    let id = started(&base, cluster);
    drive(&base, &nodes, &|run| run["task"]["id"] == "keystone", 1000);
    let ran = follow.finish(60);
    assert_eq!(ran.code, Some(1), "{}\n{}", ran.out, ran.err);
    let controller = format!("node-{}", nodes[0].id);
    assert!(
        ran.out.contains(&format!(
            "{controller}: keystone failed (attempt 1, exit code 1): exit 1\n  | ran keystone\n"
        )),
        "{}",
        ran.out
    );
    assert!(ran.out.contains(&format!("{controller}  ")) && ran.out.contains("failed keystone"));
    assert!(
        ran.out.contains(&format!("deployment {id} error: ")),
        "{}",
        ran.out
    );

    let log = cli
        .run(&["deployment", "logs", &controller, "keystone"])
        .ok();
    assert_eq!(log.out, "ran keystone\n");
    assert!(log.err.contains("keystone failed: exit 1"), "{}", log.err);
    let shown = cli.run(&["deployment", "show", &id.to_string()]).ok().out;
    let keystone = shown.lines().find(|l| l.contains(" keystone ")).unwrap();
    assert!(
        keystone.contains("failed") && keystone.contains("exit 1"),
        "{keystone}"
    );
    let node = cli.run(&["node", "show", &controller]).ok().out;
    assert!(
        node.contains("Last error:") && node.contains("  | ran keystone"),
        "{node}"
    );

    // Retry, followed: the failed step runs again and the deployment ends done.
    let follow = Cli::spawn(cli.command(&["env", "retry", "env", "--follow", "-o", "json"]));
    let deadline = Instant::now() + Duration::from_secs(30);
    while Http::raw_get_json(&format!("{base}/api/v1/deployments/{id}"))["status"] != "running" {
        assert!(Instant::now() < deadline, "the retry never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    drive(&base, &nodes, &|_| false, 1000);
    let ran = follow.finish(60);
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.out, ran.err);
    // With -o json the progress goes to standard error and the document to standard output.
    assert_eq!(ran.json()["deployment"]["status"], "done");
    assert!(
        ran.err.contains(&format!("deployment {id} done")),
        "{}",
        ran.err
    );
}

/// A node deleted after a deployment takes its runs with it; the deployment still counts
/// them, as they were left, and says how many were a deleted node's: `deployment list` does
/// not turn "error, 2 failed" into "error, 0 failed".
#[test]
fn a_deleted_nodes_runs_stay_counted_in_the_deployment_list() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let cli = Cli::of(&d);
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let id = crate::deploy::start(&base, cluster);
    // Both fail their first step on the bootstrap: no installed OS, so a node leaves at once.
    drive(
        &base,
        &nodes,
        &|run| crate::deploy::run_name(run) == "deploy.configure",
        1000,
    );
    let list = cli.run(&["deployment", "list", "-o", "json"]).ok().json();
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["status"], "error");
    let before = list[0]["runs"].clone();
    assert_eq!(before["failed"], 2, "{before}");
    assert_eq!(before["of_deleted_nodes"], 0, "{before}");
    let transaction = || Http::raw_get_json(&format!("{base}/api/v1/transactions/{id}"));
    let progress = transaction()["progress"].clone();
    assert!(progress.as_u64().is_some_and(|p| p < 100), "{progress}");
    let compute = nodes[1].id;
    let mine = Http::raw_get_json(&format!(
        "{base}/api/v1/deployments/{id}/runs?node_id={compute}&brief=1"
    ))["runs"]
        .as_array()
        .unwrap()
        .len();
    assert!(mine > 1, "{mine}");
    let r = d
        .http()
        .delete(&format!("/api/v1/clusters/{cluster}/nodes/{compute}"));
    assert!(r.status < 300, "{}", r.body);
    let r = d.http().delete(&format!("/api/v1/nodes/{compute}"));
    assert_eq!(r.status, 204, "{}", r.body);

    // The list counts what the deployment had: the same statuses, these of a deleted node.
    let list = cli.run(&["deployment", "list", "-o", "json"]).ok().json();
    let after = &list[0]["runs"];
    assert_eq!(after["of_deleted_nodes"], mine, "{after}");
    // Nailgun's transaction counts them too: its progress has not moved.
    assert_eq!(transaction()["progress"], progress);
    for k in ["total", "ok", "failed", "skipped", "pending", "running"] {
        assert_eq!(after[k], before[k], "{k}: {after} after {before}");
    }
    let table = cli.run(&["deployment", "list"]).ok().out;
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("{id} ")))
        .unwrap_or_else(|| panic!("{table}"));
    let total = before["total"].as_u64().unwrap();
    assert!(
        row.contains(&format!("/{total} ({mine} of deleted nodes)")) && row.contains(" 2 "),
        "{row}"
    );
    // The environment's list and the deployment itself say the same; only the listed steps
    // are fewer.
    let envs = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}/deployments"));
    assert_eq!(envs[0]["runs"], *after, "{envs}");
    let doc = Http::raw_get_json(&format!("{base}/api/v1/deployments/{id}"));
    assert_eq!(doc["runs"], *after, "{doc}");
    let listed = total as usize - mine;
    assert_eq!(doc["steps_total"], listed, "{doc}");
    assert_eq!(doc["steps"].as_array().unwrap().len(), listed);
    let shown = cli.run(&["deployment", "show", &id.to_string()]).ok().out;
    assert!(
        shown.contains(&format!(
            "{mine} of them of deleted nodes, not listed below"
        )),
        "{shown}"
    );
    // The dashboard's history and the deployment page count them too.
    let history = d
        .http()
        .get(&format!("/environments/{cluster}/deployments"))
        .body;
    assert!(
        history.contains(&format!("{mine} of deleted nodes")) && history.contains("2 failed"),
        "{history}"
    );
    let page = d.http().get(&format!("/deployments/{id}")).body;
    assert!(
        page.contains(&format!("{mine} of nodes deleted since")) && page.contains("2 failed"),
        "{page}"
    );
}

#[test]
fn an_aborted_deployment_follows_to_exit_1() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let cli = Cli::of(&d);
    let (cluster, nodes) = setup(&base, &["compute"]);
    // User steps from a file: checked by the master, each bad argument named (exit 4); a
    // file that is no list of steps is bad usage (exit 2).
    let steps = cli.dir.path().join("steps.yaml");
    std::fs::write(
        &steps,
        "- interface: deploy\n  step: write_image\n  priority: 80\n  args: {image_url: 3}\n",
    )
    .unwrap();
    let steps = steps.to_str().unwrap();
    let refused = cli.run(&["env", "deploy", "env", "--steps", steps]);
    assert_eq!(refused.code, Some(4), "{refused:?}");
    assert!(
        refused.err.contains("\n  steps[0].args.image_url: "),
        "{}",
        refused.err
    );
    let not_steps = cli.dir.path().join("not-steps.yaml");
    std::fs::write(&not_steps, "interface: deploy\n").unwrap();
    let bad = cli.run(&[
        "env",
        "deploy",
        "env",
        "--steps",
        not_steps.to_str().unwrap(),
    ]);
    assert_eq!(bad.code, Some(2), "{bad:?}");
    let started_doc = cli
        .run(&["env", "deploy", &cluster.to_string(), "-o", "json"])
        .ok()
        .json();
    let id = started_doc["id"].as_i64().unwrap();
    assert_eq!(started_doc["status"], "running");
    drive(&base, &nodes, &|_| false, 2);
    let aborted = cli.run(&["env", "abort", "env"]).ok().out;
    assert!(
        aborted.contains(&format!("deployment {id} aborted")),
        "{aborted}"
    );
    let ran = cli.run(&["deployment", "show", &id.to_string(), "--follow"]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.out.contains(&format!("deployment {id} aborted")),
        "{}",
        ran.out
    );
}

#[test]
fn colour_and_bars_only_on_a_terminal() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let cli = Cli::of(&d);
    let (cluster, nodes) = setup(&base, &["compute"]);
    let on_tty = cli.run_on_terminal(&["env", "list"], &[]).ok();
    assert!(
        on_tty.out.contains("\x1b[") && on_tty.out.contains("NAME"),
        "{:?}",
        on_tty.out
    );
    let no_color = cli
        .run_on_terminal(&["env", "list"], &[("NO_COLOR", "1")])
        .ok();
    assert!(!no_color.out.contains("\x1b["), "{:?}", no_color.out);
    assert!(no_color.out.contains("ID  NAME"), "{:?}", no_color.out);

    // Bars: a bar per node with its count, under the deployment's.
    let mut cmd = Command::new("script");
    let args = format!("'{}' env deploy env --follow", crate::common::bin::STOKER);
    cmd.args(["-qec", &args, "/dev/null"])
        .current_dir(cli.dir.path())
        .env("STOKER_URL", &cli.url)
        .env("STOKER_TOKEN", cli.token.as_deref().unwrap())
        .env("XDG_CONFIG_HOME", cli.dir.path())
        .env("NO_COLOR", "1");
    let follow = Cli::spawn(cmd);
    let id = started(&base, cluster);
    drive(&base, &nodes, &|_| false, 1000);
    let ran = follow.finish(60);
    assert_eq!(ran.code, Some(0), "{:?}", ran.out);
    let node = format!("node-{}", nodes[0].id);
    assert!(
        ran.out.contains(&format!("deployment {id} [")) && ran.out.contains(&format!("{node} [")),
        "{:?}",
        ran.out
    );
    assert!(
        ran.out.contains("] ") && ran.out.contains("=>"),
        "{:?}",
        ran.out
    );
    assert!(
        ran.out.contains(&format!("deployment {id} done: ")),
        "{:?}",
        ran.out
    );
}

#[test]
fn completions_and_man_pages_are_generated() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = stoker(dir.path()).args(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let bash = run(&["completions", "bash"]);
    assert!(
        bash.contains("_stoker()") && bash.contains("complete -F _stoker"),
        "{bash}"
    );
    assert!(bash.contains("deployment") && bash.contains("--follow"));
    assert!(run(&["completions", "zsh"]).starts_with("#compdef stoker"));
    assert!(run(&["completions", "fish"]).contains("complete -c stoker"));
    // bash reads its script without complaint.
    let script = dir.path().join("stoker.bash");
    std::fs::write(&script, &bash).unwrap();
    let checked = Command::new("bash")
        .args(["-n", script.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(checked.success());

    let man = dir.path().join("man1");
    let said = run(&["man", "--dir", man.to_str().unwrap()]);
    assert!(said.contains("man pages written to"), "{said}");
    let main = std::fs::read_to_string(man.join("stoker.1")).unwrap();
    assert!(
        main.starts_with(".ie") || main.contains(".TH stoker 1"),
        "{main}"
    );
    assert!(main.contains("Exit codes"), "{main}");
    let deploy = std::fs::read_to_string(man.join("stoker-env-deploy.1")).unwrap();
    assert!(
        deploy.contains(".TH stoker-env-deploy 1") && deploy.contains("follow"),
        "{deploy}"
    );
    assert!(man.join("stoker-deployment-logs.1").exists());
}

#[test]
fn the_routes_the_cli_reads_check_their_queries() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let http = d.http();
    let (cluster, nodes) = setup(&base, &["controller", "compute"]);
    let r = http.post(&format!("/api/v1/clusters/{cluster}/deploy"), "");
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["id"].as_i64().unwrap();
    drive(&base, &nodes, &|run| run["task"]["id"] == "keystone", 1000);

    let all = http.get("/api/v1/deployments").json();
    assert_eq!(all[0]["id"], id);
    let counts = &all[0]["runs"];
    let one = Http::raw_get_json(&format!("{base}/api/v1/deployments/{id}"));
    assert_eq!(
        counts, &one["runs"],
        "counted in SQL as the deployment counts them"
    );
    assert_eq!(counts["failed"], 1);
    assert_eq!(
        http.get(&format!("/api/v1/deployments?cluster_id={cluster}"))
            .json(),
        all
    );
    assert_eq!(
        http.get("/api/v1/deployments?cluster_id=999").json(),
        json!([])
    );

    // Runs by node, task or step, and status; brief ones carry no output or arguments.
    let runs = |q: &str| {
        http.get(&format!("/api/v1/deployments/{id}/runs{q}"))
            .json()
    };
    let everything = runs("");
    assert_eq!(everything["deployment"]["runs"], one["runs"]);
    assert_eq!(
        everything["runs"].as_array().unwrap().len(),
        one["steps"].as_array().unwrap().len()
    );
    let failed = runs("?status=failed");
    assert_eq!(failed["runs"].as_array().unwrap().len(), 1);
    assert_eq!(failed["runs"][0]["task"], "keystone");
    assert_eq!(failed["runs"][0]["output_tail"], "ran keystone");
    let mine = runs(&format!("?node_id={}&task=deploy.configure", nodes[1].id));
    assert_eq!(mine["runs"].as_array().unwrap().len(), 1, "{mine}");
    assert_eq!(mine["runs"][0]["node_id"], nodes[1].id);
    let brief = runs("?brief=1&status=ok,failed");
    let first = brief["runs"][0].as_object().unwrap();
    for heavy in ["output_tail", "args", "deps", "report"] {
        assert!(!first.contains_key(heavy), "{heavy}: {first:?}");
    }
    assert!(first.contains_key("status") && first.contains_key("attempt"));

    // Bad queries are refused naming the parameter.
    for (q, field) in [
        ("?status=bogus", "status"),
        ("?node_id=x", "node_id"),
        ("?node_id=1,2", "node_id"),
        ("?brief=maybe", "brief"),
    ] {
        let r = http.get(&format!("/api/v1/deployments/{id}/runs{q}"));
        assert_eq!(r.status, 400, "{q}: {}", r.body);
        assert_eq!(r.json()["fields"][0]["field"], field, "{}", r.body);
    }
    let r = http.get("/api/v1/deployments?cluster_id=abc");
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["fields"][0]["field"], "cluster_id");
    assert_eq!(http.get("/api/v1/deployments/999/runs").status, 404);
}
