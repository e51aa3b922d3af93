//! The shipped systemd unit agrees with the binary: `ExecStart` names a subcommand and flags the
//! CLI accepts, and the unit keeps its hardening and readiness settings.

use clap::Parser;

fn unit() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/systemd/stoker.service"
    ))
    .unwrap()
}

fn directive(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
        .collect()
}

#[test]
fn exec_start_is_accepted_by_the_cli() {
    let unit = unit();
    let exec = directive(&unit, "ExecStart");
    assert_eq!(exec.len(), 1);
    let argv: Vec<&str> = exec[0].split_whitespace().collect();
    assert_eq!(argv[0], "/usr/local/bin/stoker");
    let cli = stoker::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{e}"));
    match cli.command {
        stoker::cli::Command::Serve {
            config: args,
            demo_nodes,
        } => {
            assert_eq!(demo_nodes, 0, "a real master runs no simulated nodes");
            assert_eq!(
                args.config.as_deref(),
                Some(std::path::Path::new("/etc/stoker/config.toml"))
            );
            let data_dir = args.values.iter().find(|(k, _)| *k == "data_dir");
            assert_eq!(data_dir.map(|(_, v)| v.as_str()), Some("/var/lib/stoker"));
        }
        other => panic!("ExecStart runs {other:?}, not serve"),
    }
}

#[test]
fn unit_is_hardened_and_notifies_readiness() {
    let unit = unit();
    for (key, value) in [
        ("Type", "notify"),
        ("User", "stoker"),
        ("StateDirectory", "stoker"),
        ("ConfigurationDirectory", "stoker"),
        ("AmbientCapabilities", "CAP_NET_BIND_SERVICE CAP_NET_RAW"),
        ("CapabilityBoundingSet", "CAP_NET_BIND_SERVICE CAP_NET_RAW"),
        ("ProtectSystem", "strict"),
        ("NoNewPrivileges", "yes"),
        ("PrivateTmp", "yes"),
        ("ProtectHome", "yes"),
        ("SystemCallErrorNumber", "EPERM"),
    ] {
        assert_eq!(directive(&unit, key), [value], "{key}");
    }
}

/// Planning and the power sweep lower their own threads' priority (`setpriority`, in systemd's
/// `@resources` group, which the unit otherwise denies): the filter must give it back after the
/// deny line, or the installed daemon is refused the call at its first plan (killed, before
/// `SystemCallErrorNumber=` was set). The groups that hold it are systemd's
/// (`systemd-analyze syscall-filter @resources`); CI runs the dashboard's workflows on a daemon
/// under the unit's real filter (`.ci/unit-seccomp.py`), which checks every other call too.
#[test]
fn the_filter_lets_background_work_lower_its_priority() {
    let unit = unit();
    let filters = directive(&unit, "SystemCallFilter");
    let last = filters
        .iter()
        .rev()
        .find(|f| {
            f.trim_start_matches('~')
                .split_whitespace()
                .any(|t| ["setpriority", "@resources", "@system-service"].contains(&t))
        })
        .expect("a filter line that names setpriority or a group holding it");
    assert!(
        !last.starts_with('~'),
        "setpriority is denied by the last filter line naming it: {last}"
    );
}

#[test]
fn the_service_gives_freed_memory_back_as_serve_would() {
    // Set in the unit, the service starts once instead of replacing itself with the setting.
    let env = directive(&unit(), "Environment");
    assert!(
        env.contains(&format!(
            "{}={}",
            stoker::cli::memory::PURGE_DELAY_ENV,
            stoker::cli::memory::PURGE_DELAY_MS
        )),
        "{env:?}"
    );
}
