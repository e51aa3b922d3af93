//! The diagnostic snapshot through the daemon (`PUT /api/v1/logs/package`, Nailgun's `dump`
//! task): the task among the transactions in their id space, the archive downloaded from the
//! path its message names and opened (the database copy, configuration, version, history,
//! audit, journal note), no secret anywhere in it, only the admin's, and only the newest kept.

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Http, TestDaemon, admin_password};

/// Start a snapshot and wait for its task to end; the task.
fn snapshot(http: &Http) -> Value {
    let r = http.put("/api/v1/logs/package", "{}");
    assert_eq!(r.status, 202, "{}", r.body);
    let task = r.json();
    assert_eq!(task["name"], "dump");
    assert_eq!(task["cluster"], Value::Null);
    let id = task["id"].as_i64().unwrap();
    let start = Instant::now();
    loop {
        let t = http.get(&format!("/api/v1/transactions/{id}")).json();
        if t["status"] != "running" {
            return t;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "snapshot {id} hangs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every gzipped document of the database at `path` (each transaction's deployment data,
/// settings and network configuration), unpacked, one per line.
fn packed_documents(path: &std::path::Path) -> String {
    let db =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut stmt = db
        .prepare(
            "SELECT deployment_info FROM transaction_data UNION ALL
             SELECT settings FROM transaction_data UNION ALL
             SELECT network FROM transaction_data",
        )
        .unwrap();
    let blobs: Vec<Option<Vec<u8>>> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = String::new();
    for blob in blobs.into_iter().flatten() {
        flate2::read::GzDecoder::new(&blob[..])
            .read_to_string(&mut out)
            .unwrap();
        out.push('\n');
    }
    out
}

/// GET `path` with `token`: status and bytes.
fn fetch(d: &TestDaemon, path: &str, token: &str) -> (u16, Vec<u8>) {
    let auth = format!("Bearer {token}");
    let (status, bytes, _) = Http::get_bytes(&d.url(path), &[("authorization", &auth)]);
    (status, bytes)
}

#[test]
fn a_snapshot_holds_the_masters_state_and_none_of_its_secrets() {
    let d = TestDaemon::start_bundled("install");
    let http = d.http();
    let admin = d.admin_token();
    let (cluster, nodes) = d.environment(&["controller"], 1);
    // Secrets in every place they are kept.
    let r = http.put(
        &format!("/api/v1/clusters/{cluster}/settings"),
        &json!({"access": {"password": "ENV-PASSWORD-51"}}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http.post(
        "/api/v1/openstack-config",
        &json!({"cluster_id": cluster, "node_id": nodes[0],
                "configuration": {"keystone_config": {"DEFAULT/admin_token": {"value": "OS-TOKEN-52"}}}})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = http.post(
        "/api/v1/tokens",
        &json!({"name": "ci", "role": "operator"}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let personal = r.json()["token"].as_str().unwrap().to_string();
    let deployed = http.put(&format!("/api/v1/clusters/{cluster}/changes"), "");
    assert_eq!(deployed.status, 202, "{}", deployed.body);
    let deployment = deployed.json()["id"].as_i64().unwrap();
    let db = rusqlite::Connection::open_with_flags(
        d.db_path(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let stored = |sql: &str| -> Vec<String> {
        let mut stmt = db.prepare(sql).unwrap();
        stmt.query_map([], |r| r.get::<_, Option<String>>(0))
            .unwrap()
            .filter_map(|r| r.unwrap())
            .collect()
    };
    let mut secrets = vec![
        admin.clone(),
        personal.clone(),
        admin_password(d.db_path().parent().unwrap()),
        "ENV-PASSWORD-51".to_string(),
        "OS-TOKEN-52".to_string(),
    ];
    secrets.extend(stored("SELECT password_hash FROM users"));
    secrets.extend(stored("SELECT token_hash FROM api_tokens"));
    secrets.extend(stored("SELECT token_hash FROM sessions"));
    secrets.extend(stored("SELECT csrf FROM sessions"));
    secrets.extend(stored("SELECT agent_token_hash FROM nodes"));
    assert!(secrets.len() >= 9, "{secrets:?}");
    drop(db);
    // The deployment kept what it was made from, gzipped: the settings' password and the
    // configuration's token are in it, out of reach of a byte search of the file.
    let kept = packed_documents(&d.db_path());
    assert!(
        kept.contains("ENV-PASSWORD-51") && kept.contains("OS-TOKEN-52"),
        "the deployment's data holds both: {}",
        &kept[..kept.len().min(300)]
    );

    let t = snapshot(&http);
    assert_eq!(t["status"], "ready", "{t}");
    assert_eq!(t["progress"], 100);
    assert!(t["id"].as_i64().unwrap() > deployment, "one id space: {t}");
    let link = t["message"].as_str().unwrap().to_string();
    assert!(link.starts_with("/api/dump/stoker-snapshot-"), "{link}");
    // The task is a transaction: listed, filtered, and not an environment's.
    let listed = http.get("/api/v1/transactions").json();
    assert_eq!(listed[0]["id"], t["id"], "newest first: {listed}");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == deployment)
    );
    let dumps = http
        .get("/api/v1/transactions?transaction_types=dump")
        .json();
    assert_eq!(dumps.as_array().unwrap().len(), 1, "{dumps}");
    let of_env = http
        .get(&format!("/api/v1/transactions?cluster_id={cluster}"))
        .json();
    assert!(
        of_env
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["name"] != "dump")
    );

    // The archive: every part, under one folder.
    let (status, gz) = fetch(&d, &link, &admin);
    assert_eq!(status, 200);
    let mut tar_bytes = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut tar_bytes)
        .unwrap();
    let mut archive = tar::Archive::new(&tar_bytes[..]);
    let mut parts = std::collections::BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().to_string();
        let mut body = Vec::new();
        entry.read_to_end(&mut body).unwrap();
        parts.insert(path, body);
    }
    let top = link
        .trim_start_matches("/api/dump/")
        .trim_end_matches(".tar.gz");
    let names: Vec<String> = parts
        .keys()
        .map(|k| k.strip_prefix(&format!("{top}/")).unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "README.txt",
            "audit.txt",
            "config.txt",
            "deployments.txt",
            "history.txt",
            "journal.txt",
            "stoker.db",
            "version.txt"
        ]
    );
    let text = |name: &str| String::from_utf8(parts[&format!("{top}/{name}")].clone()).unwrap();
    assert!(text("version.txt").contains(env!("CARGO_PKG_VERSION")));
    assert!(
        text("version.txt").contains(&format!(
            "schema version {}",
            stoker::store::migrations::latest()
        )),
        "{}",
        text("version.txt")
    );
    assert!(
        text("config.txt").contains("data_dir"),
        "{}",
        text("config.txt")
    );
    assert!(text("history.txt").contains("openstack_config.uploaded"));
    assert!(text("audit.txt").contains(&format!("/api/v1/clusters/{cluster}/settings")));
    assert!(text("deployments.txt").contains(&format!("{deployment}  environment {cluster}")));
    // No test daemon runs as the unit, so the journal part says why it is not there.
    let journal = text("journal.txt");
    assert!(
        journal.starts_with("not included: ") && journal.trim_end().len() > 20,
        "{journal}"
    );
    // The database copy opens, holds what is not secret, and its credentials are blank.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.db");
    std::fs::write(&copy, &parts[&format!("{top}/stoker.db")]).unwrap();
    let c = rusqlite::Connection::open(&copy).unwrap();
    let (name, hash): (String, String) = c
        .query_row(
            "SELECT name, password_hash FROM users WHERE name = 'admin'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((name.as_str(), hash.as_str()), ("admin", ""));
    let env: String = c
        .query_row("SELECT name FROM clusters", [], |r| r.get(0))
        .unwrap();
    assert_eq!(env, "env");
    // No secret anywhere in the archive, nor in its database's gzipped documents.
    let unpacked = packed_documents(&copy);
    assert!(
        unpacked.contains("\"editable\""),
        "the documents stay: {unpacked}"
    );
    for secret in &secrets {
        assert!(
            !unpacked.contains(secret.as_str()),
            "a secret ({}...) is in the copy's transaction data",
            &secret[..secret.len().min(6)]
        );
        assert!(
            !tar_bytes
                .windows(secret.len())
                .any(|w| w == secret.as_bytes()),
            "a secret ({}...) is in the snapshot",
            &secret[..secret.len().min(6)]
        );
    }

    // Only the admin's: an operator and a viewer are refused making and fetching one.
    let operator = d.user_token("otto", "operator");
    let viewer = d.user_token("vera", "viewer");
    for token in [&operator, &viewer] {
        let auth = format!("Bearer {token}");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let r = agent
            .put(&d.url("/api/v1/logs/package"))
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .send("{}")
            .unwrap();
        assert_eq!(r.status().as_u16(), 403);
        assert_eq!(fetch(&d, &link, token).0, 403);
    }
    let (status, _, _) = Http::get_bytes(&d.url(&link), &[]);
    assert_eq!(status, 401, "no credential");
    // A name that is not a snapshot's is never served.
    assert_eq!(fetch(&d, "/api/dump/stoker.db", &admin).0, 404);
    assert_eq!(
        fetch(&d, "/api/dump/.tmp-stoker-snapshot-1.tar.gz", &admin).0,
        404
    );
    // A configuration is refused, naming its keys.
    let r = http.put("/api/v1/logs/package", r#"{"dump": {"local": {}}}"#);
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["fields"][0]["field"], "dump");
    assert_eq!(
        http.get("/api/v1/logs/package/config/default").json(),
        json!({})
    );

    // Only the newest three are kept, with their tasks.
    let first = t["id"].clone();
    let newer: Vec<Value> = (0..3).map(|_| snapshot(&http)).collect();
    assert!(newer.iter().all(|t| t["status"] == "ready"), "{newer:?}");
    assert_eq!(
        http.get(&format!("/api/v1/transactions/{first}")).status,
        404
    );
    assert_eq!(fetch(&d, &link, &admin).0, 404, "its file went too");
    let files = std::fs::read_dir(d.db_path().parent().unwrap().join("snapshots"))
        .unwrap()
        .count();
    assert_eq!(files, 3);
}
