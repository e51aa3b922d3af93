//! Plugin packages end to end: every fixture plugin's verdict and its telling diagnostic (file,
//! line, field, message), releases as plugins, multi-release selection, the bundled release,
//! byte-identical builds (with fuel-plugin-builder's `pre_build_hook` and its files left out),
//! an empty metadata refused, `stoker plugin validate` output, and install / sync / remove
//! through the API, including the bundled release installed once on first start.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stoker::config::Layers;
use stoker::engine::plugin::{Level, MemFiles, check, release};
use stoker::package::{archive, bundled, dir::DirFiles};

use crate::common::TestDaemon;
use crate::common::bin::stoker;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plugins")
        .join(name)
}

fn report(name: &str) -> stoker::engine::plugin::Report {
    check(&DirFiles::new(&fixture(name)).unwrap())
}

/// (fixture, valid, a diagnostic that must appear as "file:line: level: field: message-part").
const CASES: &[(&str, bool, &str)] = &[
    ("v1-valid", true, ""),
    ("v2-postfix-valid", true, ""),
    ("v3-valid", true, ""),
    ("v4-valid", true, ""),
    (
        "v4-legacy-tasks-warning",
        true,
        "tasks.yaml:1:1: warning: legacy tasks",
    ),
    (
        "v5-valid",
        true,
        "node_roles.yaml:1:1: info: fixture-role.tasks: role fixture-role becomes a group task",
    ),
    (
        "v5-release-valid",
        true,
        "metadata.yaml:8:5: warning: releases.0.release_name: release_name is accepted as an alias",
    ),
    (
        "v5-multi-release",
        true,
        "metadata.yaml:5:1: warning: fuel_version: fuel_version is deprecated",
    ),
    (
        "no-package-version",
        false,
        "metadata.yaml:1:1: error: package_version: package_version is required",
    ),
    (
        "v1-postfix-invalid",
        false,
        "tasks.yaml:2:10: error: 0.stage: stage postfixes (/NUMBER) need package_version 2.0.0",
    ),
    (
        "v2-bad-postfix",
        false,
        "tasks.yaml:2:10: error: 0.stage: invalid stage \"post_deployment:: 50\": the stage name is followed by something other than /NUMBER",
    ),
    (
        "v2-missing-tasks",
        false,
        "tasks.yaml: error: tasks.yaml is required with package 2.0.0",
    ),
    (
        "v3-missing-deployment-tasks",
        false,
        "deployment_tasks.yaml: error: deployment_tasks.yaml is required",
    ),
    (
        "v4-bad-task",
        false,
        "deployment_tasks.yaml:8:11: error: 1.roles.0: the regular expression /(unclosed/ does not compile",
    ),
    (
        "v4-bad-components",
        false,
        "components.yaml:1:9: error: 0.name: the string \"fixture\" is not a component name",
    ),
    (
        "v4-fuel-version-too-old",
        false,
        "metadata.yaml:5:16: error: fuel_version.0: package format 4.0.0 is not compatible with Fuel 7.0",
    ),
    (
        "v4-bad-env-config",
        false,
        "environment_config.yaml:5:12: error: attributes.fixture_int.value: must be a string",
    ),
    (
        "v4-bad-yaml",
        false,
        "deployment_tasks.yaml:3:1: error: cannot parse",
    ),
    (
        "v4-missing-dirs",
        false,
        "metadata.yaml:17:22: error: releases.0.repository_path: cannot find the folder \"repositories/ubuntu\"",
    ),
    (
        "v5-group-task",
        false,
        "deployment_tasks.yaml:2:9: error: 0.type: type: group is not allowed in deployment_tasks.yaml with package 5.0.0",
    ),
    (
        "v5-legacy-tasks",
        false,
        "tasks.yaml:1:1: error: legacy tasks (tasks.yaml) are not supported with package 5.0.0",
    ),
    (
        "v5-task-without-version",
        false,
        "deployment_tasks.yaml:7:12: error: 1.version: task fixture-old has version 1.0.0",
    ),
    (
        "v5-bad-constraint",
        false,
        "deployment_tasks.yaml:5:17: error: 0.fuel_version: invalid version constraint \">=seven\"",
    ),
    (
        "v5-role-task-clash",
        false,
        "node_roles.yaml:1:1: error: fixture-role.tasks: role fixture-role lists tasks",
    ),
    (
        "v5-release-and-extension",
        false,
        "metadata.yaml:31:5: error: releases.1: a plugin carries releases (is_release: true) or extends releases, not both",
    ),
    (
        "v5-release-missing-fields",
        false,
        "metadata.yaml:7:5: error: releases.0.operating_system: a release (is_release: true) needs operating_system",
    ),
    (
        "v5-release-missing-file",
        false,
        "metadata.yaml:15:19: error: releases.0.volumes_path: can't find a file or folder matching \"metadata/nope.yaml\"",
    ),
    ("v5-bad-yaql", false, "deployment_tasks.yaml:9:15: error:"),
    (
        "v5-release-mixed-roots",
        false,
        "metadata.yaml:13:17: error: releases.0.roles_path: the matched files mix list and dict roots, which cannot be merged: roles/a-controller.yaml (dict), roles/b-compute.yaml (list)",
    ),
];

#[test]
fn every_fixture_gets_its_verdict_and_diagnostic() {
    let mut failures = Vec::new();
    for (name, valid, want) in CASES {
        let r = report(name);
        let lines: Vec<String> = r.diagnostics.iter().map(|d| d.render()).collect();
        if r.is_valid() != *valid {
            failures.push(format!(
                "{name}: expected valid={valid}, got:\n  {}",
                lines.join("\n  ")
            ));
        }
        if !want.is_empty()
            && !lines
                .iter()
                .any(|l| l.starts_with(want) || l.contains(want))
        {
            failures.push(format!(
                "{name}: no diagnostic like {want:?}; got:\n  {}",
                lines.join("\n  ")
            ));
        }
    }
    // Every fixture directory is covered by a case.
    for entry in std::fs::read_dir(fixture("")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        if entry.path().is_dir() && !CASES.iter().any(|(n, ..)| *n == name) {
            failures.push(format!("fixture {name} has no case"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_release_plugin_becomes_a_release_tree() {
    let r = report("v5-release-valid");
    assert!(r.is_valid());
    let [rel] = r.releases.as_slice() else {
        panic!("one release expected: {:?}", r.releases);
    };
    assert_eq!(
        (
            rel.name.as_str(),
            rel.version.as_str(),
            rel.operating_system.as_str()
        ),
        ("Fixture Release", "newton-10.0", "ubuntu")
    );
    assert_eq!(
        rel.description, "Fixture release on Ubuntu",
        "the record wins over its template"
    );
    assert_eq!(rel.state, "available", "inherited from base_release_path");
    let d = &rel.data;
    assert_eq!(
        d["attributes_metadata"]["editable"]["common"]["debug"]["value"], false,
        "template's own _path loaded"
    );
    assert_eq!(
        d["networks_metadata"]["neutron"]["networks"][0]["name"], "management",
        "JSON file"
    );
    let roles = d["roles_metadata"].as_object().unwrap();
    assert_eq!(
        roles.keys().collect::<Vec<_>>(),
        ["compute", "controller"],
        "both files merged"
    );
    assert!(roles["controller"].get("tasks").is_none());
    let graphs = d["graphs"].as_object().unwrap();
    assert_eq!(
        graphs.keys().collect::<Vec<_>>(),
        ["default", "deletion", "provisioning"]
    );
    let default: Vec<&str> = graphs["default"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        default,
        ["deploy_start", "deploy_end", "keystone", "controller"]
    );
    assert_eq!(
        graphs["default"]["tasks"][3],
        json!({"id": "controller", "type": "group", "role": ["controller"], "tasks": ["keystone"],
               "roles": ["controller"], "parameters": {"strategy": {"type": "parallel"}}}),
        "role is an alias of roles: both are set"
    );
    assert_eq!(graphs["deletion"]["tasks"][0]["type"], "erase_node");
}

#[test]
fn multi_release_packages_choose_per_release() {
    let r = report("v5-multi-release");
    assert!(r.is_valid());
    let pkg = &r.package;
    let ids_and_cmds = |tree: &Value| -> Vec<(String, String)> {
        tree["deployment_tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["id"].as_str().unwrap().to_string(),
                    t["parameters"]["cmd"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let mitaka = release::for_release(pkg, "mitaka-9.0", "Ubuntu").unwrap();
    assert_eq!(
        ids_and_cmds(&mitaka),
        [("fixture-deploy".to_string(), "echo mitaka".to_string())]
    );
    assert_eq!(mitaka["dropped_records"], json!(["fixture-juno-kilo"]));
    let newton = release::for_release(pkg, "newton-10.0.0", "ubuntu").unwrap();
    assert_eq!(
        ids_and_cmds(&newton),
        [(
            "fixture-deploy".to_string(),
            "echo newton-folder".to_string()
        )],
        "the per-release deployment_tasks_path replaces the root file"
    );
    assert_eq!(
        newton["release"]["deployment_scripts_path"],
        "deployment_scripts/newton/"
    );
    assert!(release::for_release(pkg, "liberty-8.0", "ubuntu").is_none());
    assert!(release::for_release(pkg, "mitaka-9.0", "centos").is_none());
}

#[test]
fn the_bundled_release_is_complete_and_clean() {
    let packages = bundled::packages();
    assert!(!packages.is_empty());
    for (name, files) in &packages {
        let r = check(files);
        let noisy: Vec<String> = r
            .diagnostics
            .iter()
            .filter(|d| d.level != Level::Info)
            .map(|d| d.render())
            .collect();
        assert!(noisy.is_empty(), "{name}: {noisy:#?}");
        let [rel] = r.releases.as_slice() else {
            panic!("{name} defines one release");
        };
        let d = &rel.data;
        for role in ["controller", "compute", "cinder"] {
            assert!(
                d["roles_metadata"].get(role).is_some(),
                "{name} has role {role}"
            );
        }
        for key in [
            "networks_metadata",
            "network_roles_metadata",
            "volumes_metadata",
            "attributes_metadata",
            "components_metadata",
            "nic_attributes",
            "bond_attributes",
            "node_attributes",
        ] {
            assert!(d.get(key).is_some_and(|v| !v.is_null()), "{name} has {key}");
        }
        for graph in [
            "default",
            "provisioning",
            "deletion",
            "network_verification",
        ] {
            let tasks = d["graphs"][graph]["tasks"].as_array();
            assert!(
                tasks.is_some_and(|t| !t.is_empty()),
                "{name} has a {graph} graph"
            );
        }
        let groups: Vec<&str> = d["graphs"]["default"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["type"] == "group")
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            groups,
            ["cinder", "compute", "controller"],
            "one group per role, by name"
        );
    }
}

#[test]
fn builds_are_byte_identical_and_validate_prints_like_a_compiler() {
    let out = tempfile::tempdir().unwrap();
    let build = || {
        let o = stoker(out.path())
            .args(["plugin", "build"])
            .arg(fixture("v4-valid"))
            .args(["--output"])
            .arg(out.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out.path().join("v4-valid-1.0.0.fp")).unwrap()
    };
    let (a, b) = (build(), build());
    assert_eq!(a, b, "same input, same bytes");
    // The archive reads back as the same package.
    let back: MemFiles = archive::read(&a).unwrap();
    assert!(check(&back).is_valid());

    let o = stoker(out.path())
        .args(["plugin", "validate"])
        .arg(out.path().join("v4-valid-1.0.0.fp"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let o = stoker(out.path())
        .args(["plugin", "validate"])
        .arg(fixture("v2-bad-postfix"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("tasks.yaml:2:10: error: 0.stage: invalid stage"),
        "{text}"
    );
    assert!(text.contains("invalid: 1 error(s)"), "{text}");
    let o = stoker(out.path())
        .args(["plugin", "validate", "--format", "json"])
        .arg(fixture("v5-group-task"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], false);
    let d = &v["diagnostics"][0];
    assert_eq!(
        (
            d["level"].as_str(),
            d["file"].as_str(),
            d["line"].as_u64(),
            d["column"].as_u64(),
            d["field"].as_str()
        ),
        (
            Some("error"),
            Some("deployment_tasks.yaml"),
            Some(2),
            Some(9),
            Some("0.type")
        )
    );
}

/// A copy of fixture `name` in a fresh folder (returned with the folder that holds it).
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join(name);
    copy_tree(&fixture(name), &dest);
    (tmp, dest)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

/// Every path in a built archive, without its top folder.
fn archived(bytes: &[u8]) -> Vec<String> {
    use stoker::engine::plugin::PackageFiles;
    let files: MemFiles = archive::read(bytes).unwrap();
    files.entries().into_iter().map(|e| e.path).collect()
}

#[test]
fn an_empty_or_comment_only_metadata_is_invalid_and_never_built() {
    for text in ["", "# a plugin, some day\n\n# nothing else\n", "~\n"] {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("p");
        std::fs::create_dir(&pkg).unwrap();
        std::fs::write(pkg.join("metadata.yaml"), text).unwrap();
        let o = stoker(dir.path())
            .args(["plugin", "validate"])
            .arg(&pkg)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{text:?}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.starts_with("metadata.yaml: error: metadata.yaml is empty"),
            "{text:?}: {out}"
        );
        let o = stoker(dir.path())
            .args(["plugin", "build"])
            .arg(&pkg)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{text:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("metadata.yaml: error: metadata.yaml is empty")
                && err.contains("invalid, not built"),
            "{err}"
        );
        assert_eq!(
            names_in(&pkg),
            ["metadata.yaml"],
            "no -.fp or anything else"
        );
    }
}

#[test]
fn build_runs_the_pre_build_hook_and_leaves_top_level_dotfiles_out() {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, pkg) = copy_of("v4-valid");
    let hook = pkg.join("pre_build_hook");
    std::fs::write(
        &hook,
        "#!/bin/sh\nset -e\necho generating\nmkdir -p deployment_scripts\necho made > deployment_scripts/generated.txt\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    // What FPB's build leaves out (top-level dot names, `.nfs*` anywhere) and keeps (dotfiles
    // below the top).
    std::fs::create_dir_all(pkg.join(".git/objects")).unwrap();
    std::fs::write(pkg.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(pkg.join(".gitignore"), "*.fp\n").unwrap();
    std::fs::write(pkg.join(".hidden"), "x").unwrap();
    std::fs::write(pkg.join("deployment_scripts/.gitkeep"), "").unwrap();
    std::fs::write(pkg.join("deployment_scripts/.nfs000123"), "").unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let build = |extra: &[&str]| {
        stoker(tmp.path())
            .args(["plugin", "build"])
            .arg(&pkg)
            .arg("--output")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let fp = out.join("v4-valid-1.0.0.fp");

    // Skipped on request: nothing generated.
    let o = build(&["--no-pre-build-hook"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let paths = archived(&std::fs::read(&fp).unwrap());
    assert!(!pkg.join("deployment_scripts/generated.txt").exists());
    assert!(!paths.contains(&"deployment_scripts/generated.txt".to_string()));
    assert!(paths.contains(&"pre_build_hook".to_string()), "{paths:?}");
    for gone in [
        ".git",
        ".git/HEAD",
        ".gitignore",
        ".hidden",
        "deployment_scripts/.nfs000123",
    ] {
        assert!(
            !paths.contains(&gone.to_string()),
            "{gone} is left out: {paths:?}"
        );
    }
    assert!(
        paths.contains(&"deployment_scripts/.gitkeep".to_string()),
        "{paths:?}"
    );

    // Run: what it writes is in the archive.
    let o = build(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("ran "));
    let bytes = std::fs::read(&fp).unwrap();
    let back: MemFiles = archive::read(&bytes).unwrap();
    use stoker::engine::plugin::PackageFiles;
    assert_eq!(
        back.read("deployment_scripts/generated.txt").unwrap(),
        b"made\n"
    );

    // A failing hook stops the build: its status and output tail, and no archive.
    std::fs::remove_file(&fp).unwrap();
    std::fs::write(
        &hook,
        "#!/bin/sh\necho fetching modules\necho 'cannot reach the mirror' >&2\nexit 7\n",
    )
    .unwrap();
    let o = build(&[]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("pre_build_hook exited with status 7; nothing was built")
            && err.contains("fetching modules\ncannot reach the mirror"),
        "{err}"
    );
    assert!(!fp.exists(), "no archive after a failed hook");
    assert_eq!(
        names_in(&out),
        Vec::<String>::new(),
        "no temporary file left"
    );

    // A hook that is not executable is skipped, as FPB skips it, and said so.
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = build(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("pre_build_hook is not executable: not run"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

pub(crate) fn built(name: &str) -> Vec<u8> {
    let files = DirFiles::new(&fixture(name)).unwrap();
    archive::build(&files, name, 0, &mut |_, _| {}).unwrap()
}

#[test]
fn install_sync_and_remove_through_the_api() {
    let d = TestDaemon::start();
    let plugins_dir = d.db_path().parent().unwrap().join("plugins");

    let (status, body) = d.post_package(&built("v5-release-mixed-roots"));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_plugin");
    assert!(
        body["diagnostics"]
            .to_string()
            .contains("mix list and dict roots"),
        "{body}"
    );
    let left: Vec<_> = std::fs::read_dir(&plugins_dir)
        .map(|r| r.collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "a refused install leaves nothing behind");

    let (status, body) = d.post_package(&built("v5-release-valid"));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["releases"], json!(["Fixture Release"]));
    assert!(
        plugins_dir
            .join("fixture-release-1.0.0/metadata.yaml")
            .is_file()
    );
    let releases = d.http().get("/api/v1/releases").json();
    assert_eq!(releases[0]["name"], "Fixture Release");
    let full = d.http().get("/api/v1/releases/1").json();
    assert_eq!(
        full["data"]["graphs"]["default"]["tasks"][2]["id"],
        "keystone"
    );
    let plugins = d.http().get("/api/v1/plugins").json();
    assert_eq!(plugins[0]["is_release"], true);
    assert!(
        plugins[0]["diagnostics"]
            .to_string()
            .contains("release_name is accepted")
    );
    assert!(
        d.http()
            .get("/releases")
            .body
            .contains("release_name is accepted as an alias")
    );

    let (status, body) = d.post_package(&built("v5-release-valid"));
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("conflict")),
        "{body}"
    );
    let (status, _) = d.post_package(b"not an archive");
    assert_eq!(status, 400);

    // An environment can now be created from it.
    let r = d
        .http()
        .post("/api/v1/clusters", r#"{"name": "env", "release_id": 1}"#);
    assert_eq!(r.status, 201, "{}", r.body);
    d.http().get("/api/v1/clusters");
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.execute("DELETE FROM clusters", []).unwrap();

    // Sync: a folder dropped in by hand is registered; the installed one is re-read.
    let copy = plugins_dir.join("v3-valid-by-hand");
    copy_dir(&fixture("v3-valid"), &copy);
    let r = d.http().post("/api/v1/plugins/sync", "");
    assert_eq!(r.status, 200, "{}", r.body);
    let sync = r.json();
    assert_eq!(sync["added"], json!(["v3-valid 1.0.0"]));
    assert_eq!(sync["updated"], json!(["fixture-release 1.0.0"]));

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let r = agent
        .delete(&d.url("/api/v1/plugins/fixture-release"))
        .header("authorization", &format!("Bearer {}", d.admin_token()))
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(!plugins_dir.join("fixture-release-1.0.0").exists());
    assert_eq!(d.http().get("/api/v1/releases").json(), json!([]));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

#[test]
fn the_bundled_release_is_installed_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = |dir: &Path| {
        Layers::default()
            .with_flag("data_dir", dir.join("data").display().to_string())
            .with_flag("http.listen", "127.0.0.1:0".to_string())
            .with_flag("plugins.bundled", "install".to_string())
            .resolve()
            .unwrap()
    };
    let path = dir.path().to_path_buf();
    let d = TestDaemon::start_with(config(&path), dir);
    let releases = d.http().get("/api/v1/releases").json();
    assert_eq!(releases[0]["name"], "Ubuntu Newton", "{releases}");
    assert!(
        !d.http()
            .get("/environments")
            .body
            .contains("No release installed")
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let r = agent
        .delete(&d.url("/api/v1/plugins/ubuntu-newton"))
        .header("authorization", &format!("Bearer {}", d.admin_token()))
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let dir = d.stop().unwrap();
    let d = TestDaemon::start_with(config(&path), dir);
    assert_eq!(
        d.http().get("/api/v1/releases").json(),
        json!([]),
        "removal sticks across restarts"
    );
    assert!(d.http().get("/").body.contains("No release installed"));
}

/// `stoker plugin list|sync|remove` talk to the running daemon's API.
#[test]
fn cli_lists_syncs_and_removes_through_the_daemon() {
    let d = TestDaemon::start_bundled("install");
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = crate::common::bin::stoker(dir.path())
            .arg("plugin")
            .args(args)
            .args(["--url", &d.url("")])
            .env("STOKER_TOKEN", d.admin_token())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, out, err) = run(&["list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("NAME"), "{out}");
    assert!(
        out.contains("ubuntu-newton") && out.contains("release"),
        "{out}"
    );
    let (code, out, err) = run(&["sync"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ubuntu-newton"), "{out}");
    let (code, out, err) = run(&["remove", "no-such-plugin"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(err.contains("no-such-plugin"), "{err}");
    let (code, out, err) = run(&["remove", "ubuntu-newton"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("removed ubuntu-newton"), "{out}");
    let (code, out, _) = run(&["list"]);
    assert_eq!((code, out.trim()), (Some(0), "no plugin is installed"));
}
