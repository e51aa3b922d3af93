//! Upgrades from every earlier schema, with data: for each version k from 1 to the latest, a
//! database is made at version k (`migrations::migrate_to`) and filled as a master of that
//! version would have filled it, each table seeded at the version that made it (so every later
//! migration must carry its rows), then opened with the current [`Store`], which migrates it.
//! The rows must come back with their meaning (ids, MACs, names, statuses, roles, JSON
//! documents, through the store's own readers where it has them), `integrity_check` and
//! `foreign_key_check` must be clean, and the daemon must start and stop on it.
//!
//! What "data" means here, honestly: a handful of hand-written rows per table (two nodes with
//! inventories and MACs, one environment with a node assigned, a finished deployment with a
//! run, users, a session and a token, the audit, networks, documents, overrides, facts,
//! OpenStack configurations, a master task, a chain, a sequence, a BMC), written in SQL as
//! each version's schema allows; not databases written by the released binaries of those
//! versions, and not every shape of every JSON document. A running deployment across
//! migration 16 is `migrations::tests::migration_16_…`'s.

use rusqlite::Connection;

use super::{Store, migrations};

/// A node's inventory as agents send it.
const INVENTORY: &str = r#"{"interfaces":[{"name":"eno1","mac":"52:54:00:00:00:01","speed_mbps":10000,"link":true},{"name":"eno2","mac":"02:54:00:00:00:01","link":false}],"cpu":{"count":32,"model":"Intel(R) Xeon(R) Silver 4314"},"memory_bytes":274877906944,"disks":[{"name":"sda","size_bytes":480103981056,"model":"SAMSUNG MZ7L3480","serial":"S6KMNE0R123456"}],"system":{"vendor":"Dell Inc.","product":"PowerEdge R650","serial":"7XK2QH3"},"boot_mode":"uefi"}"#;

/// The rows written right after migration `version`, in that version's schema.
fn seed(version: u32) -> String {
    let inv2 = INVENTORY.replace("00:00:01", "00:00:02");
    match version {
        1 => format!(
            "INSERT INTO nodes (id, mac, name, status, inventory, created_at, last_seen_at)
             VALUES (1, '52:54:00:00:00:01', 'node-1', 'discover', '{INVENTORY}', 100, 200),
                    (2, '52:54:00:00:00:02', 'node-2', 'ready', '{inv2}', 101, 201);
             INSERT INTO node_macs (mac, node_id) VALUES ('52:54:00:00:00:01', 1),
               ('02:54:00:00:00:01', 1), ('52:54:00:00:00:02', 2);"
        ),
        2 => "INSERT INTO history (at, node_id, kind, message)
              VALUES (150, 1, 'discovered', 'node-1 said hello'), (160, NULL, 'master', 'up');"
            .into(),
        3 => "INSERT INTO boot_tokens (mac, token_hash, issued_at)
              VALUES ('52:54:00:00:00:01', 'bt-hash', 170);"
            .into(),
        4 => "INSERT INTO plugins (id, name, version, title, package_version, description,
                is_release, path, diagnostics, manifest, installed_at)
              VALUES (1, 'ubuntu-newton', '10.0.0', 'Newton', '5.0.0', '', 1,
                'plugins/ubuntu-newton-10.0.0', '[]', '{}', 175);
              INSERT INTO releases (id, plugin_id, name, version, operating_system,
                description, state, data)
              VALUES (1, 1, 'Newton on Ubuntu 16.04', 'newton-10.0', 'Ubuntu', '', 'available',
                '{}');
              INSERT INTO clusters (id, name, release_id, status, net_segment_type, created_at)
              VALUES (1, 'env-1', 1, 'operational', 'vlan', 180);
              INSERT INTO settings (key, value) VALUES ('bundled_installed', '1');"
            .into(),
        5 => "UPDATE nodes SET agent_token_hash = 'at-hash' WHERE id = 2;".into(),
        6 => "INSERT INTO leases (ip, mac, expires_at, state)
              VALUES ('10.20.0.5', '52:54:00:00:00:01', 4000000000, 'bound');"
            .into(),
        7 => r#"UPDATE nodes SET cluster_id = 1, roles = '["controller"]' WHERE id = 2;
              UPDATE clusters SET settings = '{"common":{"debug":{"value":true}}}';
              INSERT INTO deployed_snapshots (cluster_id, deployment, data)
              VALUES (1, '1', '{"common":{"x":1},"nodes":{}}');
              INSERT INTO deployed_tasks (cluster_id, node_uid, task, deployment)
              VALUES (1, '2', 'netconfig', '1');"#
            .into(),
        8 => "INSERT INTO deployments (id, cluster_id, status, after, created_at, finished_at)
              VALUES (1, 1, 'done', '{\"deployments\":{},\"tasks\":{}}', 300, 400);
              INSERT INTO step_runs (id, deployment, node_id, seq, interface, step, task, args,
                deps, timeout_s, status, attempt, started_at, finished_at, exit_code)
              VALUES (1, 1, 2, 0, 'deploy', 'run_tasks', 'netconfig', '{}', '[]', 600, 'ok', 1,
                310, 390, 0);"
            .into(),
        9 => "UPDATE nodes SET token_deployment = 1 WHERE id = 2;".into(),
        13 => "INSERT INTO users (id, name, role, password_hash, created_at, password_changed_at)
               VALUES (1, 'admin', 'admin', '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaA', 500, 500),
                      (2, 'ops', 'operator', '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaA', 501, 501);
               INSERT INTO sessions (token_hash, user_id, csrf, created_at, last_seen_at)
               VALUES ('sess-hash', 1, 'csrf', 510, 520);
               INSERT INTO api_tokens (id, user_id, name, kind, role, token_hash, created_at,
                 expires_at) VALUES (1, 2, 'ci', 'personal', 'operator', 'tok-hash', 510, 9999999999);
               INSERT INTO audit (at, actor, role, source, method, path, status, detail)
               VALUES (520, 'admin', 'admin', '127.0.0.1', 'POST', '/api/v1/nodes', 201, '');"
            .into(),
        14 => "UPDATE nodes SET address = '10.20.0.5' WHERE id = 1;
               UPDATE boot_tokens SET issued_to = '10.20.0.5';"
            .into(),
        15 => "UPDATE nodes SET os_credential_hash = 'cred-hash', agent_version = '0.1.0'
               WHERE id = 2;"
            .into(),
        17 => r#"INSERT INTO deployment_graphs (id, cluster_id, type, name, metadata, tasks)
               VALUES (1, 1, 'custom', 'my graph', '{}',
                 '[{"id":"hello","type":"shell","parameters":{"cmd":"echo hi"}}]');"#
            .into(),
        19 => r#"INSERT INTO network_groups (id, cluster_id, name, release_id, cidr, gateway,
                 vlan_start, ip_ranges, meta)
               VALUES (1, 1, 'storage', 1, '192.168.1.0/24', NULL, 102,
                 '[["192.168.1.1","192.168.1.254"]]', '{"notation":"cidr"}');
               INSERT INTO ip_addrs (id, network_id, cluster_id, node_id, ip)
               VALUES (1, 1, 1, 2, '192.168.1.2');"#
            .into(),
        20 => r#"UPDATE nodes SET hostname = 'ctrl-1', labels = '{"rack":"r1"}' WHERE id = 2;
               INSERT INTO node_documents (node_id, kind, body) VALUES (2, 'disks', '[]');
               INSERT INTO release_overrides (release_id, kind, name, body)
               VALUES (1, 'role', 'compute-ext', '{"name":"compute-ext"}');
               INSERT INTO cluster_overrides (cluster_id, kind, name, body)
               VALUES (1, 'tag', 't1', NULL);"#
            .into(),
        21 => r#"INSERT INTO transaction_data (deployment) VALUES (1);
               UPDATE deployments SET message = 'all good' WHERE id = 1;
               INSERT INTO facts_overrides (cluster_id, kind, uid, body)
               VALUES (1, 'deployment', 'common', '{"a":1}');"#
            .into(),
        22 => r#"INSERT INTO openstack_configs (id, cluster_id, node_id, node_role, config_type,
                 is_active, created_at, configuration)
               VALUES (1, 1, NULL, NULL, 'cluster', 1, 600,
                 '{"nova_config":{"DEFAULT/debug":{"value":"true"}}}');
               INSERT INTO master_tasks (id, name, status, progress, result, created_at,
                 finished_at) VALUES (2, 'dump', 'ready', 100, '{}', 610, 620);"#
            .into(),
        23 => r#"INSERT INTO deployments (id, cluster_id, status, created_at, name, graph_type)
               VALUES (3, 1, 'done', 700, 'deploy', 'a,b');
               INSERT INTO deployment_chains (deployment, graphs, dry_run, force)
               VALUES (3, '[{"type":"a"},{"type":"b"}]', 0, 0);
               INSERT INTO deployment_sequences (id, release_id, name, graphs)
               VALUES (1, 1, 'seq', '[{"type":"default"}]');"#
            .into(),
        24 => r#"INSERT INTO node_documents (node_id, kind, body)
               VALUES (2, 'attributes', '{"hugepages":{}}');"#
            .into(),
        25 => "INSERT INTO node_bmcs (node_id, driver, address, username, sealed_password,
                 source, power_state, power_checked_at, updated_at)
               VALUES (2, 'redfish', 'https://10.0.0.5', 'root', X'01020304', 'operator', 'on',
                 800, 800);"
            .into(),
        27 => "INSERT INTO history (at, node_id, cluster_id, deployment_id, kind, message)
               VALUES (900, 2, 1, 1, 'deployment.done', 'deployment 1 done');"
            .into(),
        28 => "INSERT INTO removed_runs (deployment, node_id, status, n)
               VALUES (1, 9, 'failed', 1), (1, 9, 'ok', 3);"
            .into(),
        _ => String::new(),
    }
}

/// A database file at schema version `k`, seeded as each version up to it allows.
fn database_at(path: &std::path::Path, k: u32) {
    let mut conn = Connection::open(path).unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    for v in 1..=k {
        assert_eq!(migrations::migrate_to(&mut conn, v).unwrap(), v);
        conn.execute_batch(&seed(v))
            .unwrap_or_else(|e| panic!("seeding version {v}: {e}"));
    }
}

fn one<T: rusqlite::types::FromSql>(conn: &Connection, sql: &str) -> T {
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

/// What must have survived in a database seeded up to `k` and migrated to the latest.
fn check(store: &Store, k: u32) {
    let nodes = store.read(|r| r.nodes()).unwrap();
    let seen: Vec<(i64, String, String, &str)> = nodes
        .iter()
        .map(|n| (n.id, n.mac.to_string(), n.name.clone(), n.status.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (1, "52:54:00:00:00:01".into(), "node-1".into(), "discover"),
            (2, "52:54:00:00:00:02".into(), "node-2".into(), "ready"),
        ],
        "k={k}"
    );
    assert_eq!(nodes[0].inventory.cpu.count, 32, "k={k}");
    store
        .read(|r| {
            let c = r.conn;
            assert_eq!(
                json(&one::<String>(
                    c,
                    "SELECT inventory FROM node_inventories WHERE node_id = 1"
                )),
                json(INVENTORY),
                "k={k}"
            );
            assert_eq!(one::<i64>(c, "SELECT COUNT(*) FROM node_macs"), 3);
            if k >= 2 {
                assert_eq!(
                    one::<String>(c, "SELECT message FROM history WHERE node_id = 1"),
                    "node-1 said hello"
                );
            }
            if k >= 3 {
                assert_eq!(
                    one::<String>(c, "SELECT token_hash FROM boot_tokens"),
                    "bt-hash"
                );
            }
            if k >= 4 {
                let cluster = r.cluster(1)?.expect("environment 1");
                assert_eq!(cluster.name, "env-1");
                assert_eq!(
                    one::<String>(c, "SELECT name FROM releases WHERE id = 1"),
                    "Newton on Ubuntu 16.04"
                );
                assert_eq!(
                    one::<String>(
                        c,
                        "SELECT value FROM settings WHERE key = 'bundled_installed'"
                    ),
                    "1"
                );
            }
            if k >= 5 {
                assert_eq!(
                    one::<String>(c, "SELECT agent_token_hash FROM nodes WHERE id = 2"),
                    "at-hash"
                );
            }
            if k >= 6 {
                assert_eq!(one::<String>(c, "SELECT state FROM leases"), "bound");
            }
            if k >= 7 {
                let n2 = r.node(2)?.expect("node 2");
                assert_eq!(n2.cluster_id, Some(1), "k={k}");
                assert_eq!(n2.roles, ["controller"], "k={k}");
                // Migration 18 (at the seeding or at the open) took the ready node's roles,
                // set at version 7, as the roles it was deployed with.
                assert_eq!(n2.deployed_roles, ["controller"], "k={k}");
                assert_eq!(
                    json(&one::<String>(
                        c,
                        "SELECT settings FROM clusters WHERE id = 1"
                    )),
                    json(r#"{"common":{"debug":{"value":true}}}"#)
                );
                assert_eq!(
                    one::<String>(
                        c,
                        "SELECT deployment FROM deployed_tasks WHERE task = 'netconfig'"
                    ),
                    "1"
                );
            }
            if k >= 8 {
                let d = r.deployment(1)?.expect("deployment 1");
                assert_eq!((d.status.as_str(), d.created_at), ("done", 300), "k={k}");
                assert_eq!(d.name, "deployment");
                assert_eq!(
                    one::<String>(
                        c,
                        "SELECT status || ' ' || task FROM step_runs WHERE id = 1"
                    ),
                    "ok netconfig"
                );
                assert_eq!(
                    one::<String>(c, "SELECT runs_on FROM step_runs WHERE id = 1"),
                    "ramdisk"
                );
            }
            if k >= 9 {
                assert_eq!(
                    one::<i64>(c, "SELECT token_deployment FROM nodes WHERE id = 2"),
                    1
                );
            }
            if k >= 13 {
                let users: Vec<(String, String)> = r
                    .users()?
                    .into_iter()
                    .map(|u| (u.name, u.role.to_string()))
                    .collect();
                assert_eq!(
                    users,
                    [
                        ("admin".into(), "admin".into()),
                        ("ops".into(), "operator".into())
                    ]
                );
                assert_eq!(
                    one::<String>(c, "SELECT token_hash FROM api_tokens"),
                    "tok-hash"
                );
                assert_eq!(one::<String>(c, "SELECT csrf FROM sessions"), "csrf");
                assert_eq!(one::<String>(c, "SELECT path FROM audit"), "/api/v1/nodes");
            }
            if k >= 14 {
                assert_eq!(nodes[0].address.as_deref(), Some("10.20.0.5"));
            }
            assert!(nodes.iter().all(|n| n.approved), "k={k}");
            if k >= 15 {
                assert_eq!(
                    one::<String>(c, "SELECT os_credential_hash FROM nodes WHERE id = 2"),
                    "cred-hash"
                );
            }
            if k >= 17 {
                assert_eq!(
                    json(&one::<String>(
                        c,
                        "SELECT tasks FROM deployment_graphs WHERE id = 1"
                    ))[0]["id"],
                    "hello"
                );
            }
            if k >= 19 {
                assert_eq!(
                    one::<String>(c, "SELECT cidr FROM network_groups WHERE id = 1"),
                    "192.168.1.0/24"
                );
                assert_eq!(
                    one::<String>(c, "SELECT ip FROM ip_addrs WHERE id = 1"),
                    "192.168.1.2"
                );
            }
            if k >= 20 {
                assert_eq!(
                    one::<String>(c, "SELECT hostname || labels FROM nodes WHERE id = 2"),
                    r#"ctrl-1{"rack":"r1"}"#
                );
                assert_eq!(
                    one::<String>(c, "SELECT body FROM node_documents WHERE kind = 'disks'"),
                    "[]"
                );
                assert_eq!(one::<i64>(c, "SELECT COUNT(*) FROM release_overrides"), 1);
                assert_eq!(one::<i64>(c, "SELECT COUNT(*) FROM cluster_overrides"), 1);
            }
            if k >= 21 {
                assert_eq!(
                    one::<String>(c, "SELECT message FROM deployments WHERE id = 1"),
                    "all good"
                );
                assert_eq!(
                    one::<String>(c, "SELECT body FROM facts_overrides"),
                    r#"{"a":1}"#
                );
                assert_eq!(one::<i64>(c, "SELECT COUNT(*) FROM transaction_data"), 1);
            }
            if k >= 22 {
                assert_eq!(
                    json(&one::<String>(
                        c,
                        "SELECT configuration FROM openstack_configs"
                    )),
                    json(r#"{"nova_config":{"DEFAULT/debug":{"value":"true"}}}"#)
                );
                assert_eq!(one::<String>(c, "SELECT status FROM master_tasks"), "ready");
            }
            if k >= 23 {
                assert_eq!(
                    one::<String>(
                        c,
                        "SELECT graphs FROM deployment_chains WHERE deployment = 3"
                    ),
                    r#"[{"type":"a"},{"type":"b"}]"#
                );
                assert_eq!(
                    one::<String>(c, "SELECT name FROM deployment_sequences"),
                    "seq"
                );
            }
            if k >= 24 {
                assert_eq!(
                    one::<String>(
                        c,
                        "SELECT body FROM node_documents WHERE kind = 'attributes'"
                    ),
                    r#"{"hugepages":{}}"#
                );
            }
            // The list's summary of each inventory, filled from the inventories by
            // migration 27 (or written with them after it).
            let listed = r.node_list(
                &crate::store::NodeQuery {
                    limit: 10,
                    sort: crate::store::SortKey::Id,
                    ..Default::default()
                },
                0,
            )?;
            let n = &listed.nodes[0];
            assert_eq!(
                (n.cpus, n.memory_bytes, n.disk_count, n.disk_bytes),
                (32, 274_877_906_944, 1, 480_103_981_056),
                "k={k}"
            );
            assert_eq!(n.serial.as_deref(), Some("7XK2QH3"), "k={k}");
            assert_eq!(n.hardware, "Dell Inc. PowerEdge R650", "k={k}");
            let feed = r.recent_history(10)?;
            assert_eq!(feed.is_empty(), k < 2, "k={k}");
            if k >= 4 {
                // The highest environment id is kept, so the next is above it.
                assert_eq!(
                    one::<String>(
                        c,
                        "SELECT value FROM settings WHERE key = 'clusters.last_id'"
                    ),
                    "1",
                    "k={k}"
                );
            }
            if k >= 27 {
                let line = &feed[0];
                assert_eq!(
                    (line.node_id, line.cluster_id, line.deployment_id),
                    (Some(2), Some(1), Some(1))
                );
                assert_eq!(line.cluster_name.as_deref(), Some("env-1"));
            }
            if k >= 28 {
                let c = r.run_counts(1)?;
                assert_eq!((c.of_deleted_nodes, c.failed), (4, 1), "{c:?}");
            }
            if k >= 25 {
                let b = r.bmc(2)?.expect("node 2's BMC");
                assert_eq!(b.address, "https://10.0.0.5");
                assert_eq!(b.sealed_password.as_deref(), Some(&[1u8, 2, 3, 4][..]));
            }
            Ok(())
        })
        .unwrap();
}

/// `integrity_check` and `foreign_key_check` of a closed database file.
fn clean(path: &std::path::Path) {
    let conn = Connection::open(path).unwrap();
    assert_eq!(one::<String>(&conn, "PRAGMA integrity_check"), "ok");
    assert_eq!(
        one::<i64>(&conn, "SELECT COUNT(*) FROM pragma_foreign_key_check"),
        0
    );
    assert_eq!(migrations::current(&conn).unwrap(), migrations::latest());
}

#[test]
fn every_earlier_schema_with_data_upgrades_keeping_its_rows_and_the_daemon_starts_on_it() {
    for k in 1..=migrations::latest() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let db = data.join("stoker.db");
        database_at(&db, k);
        let store = Store::open(&db).unwrap_or_else(|e| panic!("k={k}: {e}"));
        check(&store, k);
        store.close().unwrap();
        clean(&db);

        let config = crate::config::Layers::default()
            .with_flag("data_dir", data.display().to_string())
            .with_flag("http.listen", "127.0.0.1:0".to_string())
            .with_flag("plugins.bundled", "skip".to_string())
            .resolve()
            .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let daemon = crate::daemon::Daemon::start(&config)
                .unwrap_or_else(|e| panic!("k={k}: the daemon does not start: {e:#}"));
            daemon.run_until(async {}).await
        })
        .unwrap_or_else(|e| panic!("k={k}: {e:#}"));
        // The daemon's own start-up writes (the admin network, a first admin, pruning of old
        // sessions and boot tokens) change some rows; the nodes and the file's health stay.
        let store = Store::open(&db).unwrap();
        let macs: Vec<String> = store
            .read(|r| r.nodes())
            .unwrap()
            .iter()
            .map(|n| n.mac.to_string())
            .collect();
        assert_eq!(macs, ["52:54:00:00:00:01", "52:54:00:00:00:02"], "k={k}");
        store.close().unwrap();
        clean(&db);
    }
}
