//! `stoker backup` and `stoker restore` as an operator runs them, with the built binary: a
//! backup taken while the daemon serves and an API client keeps writing holds every node
//! acknowledged before it began and passes its checks; a restore is refused while the daemon
//! holds the data directory, and a second daemon is refused too; restored into the stopped
//! master it brings the nodes back and the BMC's sealed password still opens (a power action
//! reaches a loopback Redfish BMC that takes sessions only with the right password); a
//! truncated backup, one with a changed member, and one from a newer schema are refused, each
//! naming what is wrong, and change nothing.

use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use crate::common::bin::{Served, run_err, run_ok, stoker};
use crate::common::redfish_bmc::{FakeBmc, PASSWORD, USER};
use crate::common::{Http, node_macs, sign_in};

fn serve(cwd: &Path, data: &Path) -> Served {
    let mut cmd = stoker(cwd);
    cmd.args(["serve", "--data-dir"]).arg(data).args([
        "--http-listen",
        "127.0.0.1:0",
        "--plugins-bundled",
        "skip",
    ]);
    Served::spawn(cmd)
}

fn with_data(cwd: &Path, data: &Path, args: &[&str]) -> Command {
    let mut cmd = stoker(cwd);
    cmd.args(args).arg("--data-dir").arg(data);
    cmd
}

fn enroll(base: &str, mac: &str) -> u16 {
    Http::raw_post(
        &format!("{base}/api/v1/nodes"),
        &json!({"mac": mac}).to_string(),
        &[],
    )
    .status
}

/// Every file of the data directory with its bytes (but the lock file), to show a refused
/// restore changed nothing.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if e.file_name() != "stoker.lock" {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn backup_while_serving_then_restore_brings_back_nodes_and_bmc_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let served = serve(dir.path(), &data);
    let base = format!("http://{}", served.addr);
    sign_in(&base, &data);
    let bmc = FakeBmc::start();
    let r = Http::raw_post(
        &format!("{base}/api/v1/nodes"),
        &json!({"mac": "52:54:00:bb:00:01", "name": "with-bmc",
                "bmc": {"driver": "redfish", "address": bmc.url(""),
                        "username": USER, "password": PASSWORD}})
        .to_string(),
        &[],
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let bmc_node = r.json()["id"].as_i64().unwrap();

    // An API client enrolls nodes without pause while the backup runs.
    let acked = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop, base) = (acked.clone(), stop.clone(), base.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let mac = format!("52:54:00:cc:{:02x}:{:02x}", i / 256, i % 256);
                if enroll(&base, &mac) == 201 {
                    acked.lock().unwrap().push(mac);
                }
                i += 1;
            }
        })
    };
    while acked.lock().unwrap().len() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let before: Vec<String> = acked.lock().unwrap().clone();
    let file = dir.path().join("master.tar.gz");
    let out = run_ok(&mut with_data(
        dir.path(),
        &data,
        &["backup", file.to_str().unwrap()],
    ));
    assert!(out.contains("backed up"), "{out}");
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let during = acked.lock().unwrap().len();
    assert!(
        during > before.len(),
        "the client kept writing during the backup"
    );
    assert!(
        !std::fs::read_dir(dir.path()).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')),
        "no temporary file left beside the backup"
    );

    // The file is there: another backup to the same name is refused, the first kept.
    let (_, stderr) = run_err(&mut with_data(
        dir.path(),
        &data,
        &["backup", file.to_str().unwrap()],
    ));
    assert!(stderr.contains("give --force"), "{stderr}");

    // A restore under the serving daemon is refused, as is a second daemon.
    let untouched = listing(&data);
    let (_, stderr) = run_err(&mut with_data(
        dir.path(),
        &data,
        &["restore", file.to_str().unwrap()],
    ));
    assert!(stderr.contains("is in use by"), "{stderr}");
    assert!(stderr.contains("stoker serve"), "{stderr}");
    let (_, stderr) = run_err(&mut with_data(
        dir.path(),
        &data,
        &["serve", "--http-listen", "127.0.0.1:0"],
    ));
    assert!(stderr.contains("is in use by"), "{stderr}");
    served.signal("TERM");
    let (code, log) = served.wait();
    assert_eq!(code, Some(0), "{log:#?}");
    let after_stop = listing(&data);
    assert!(
        untouched
            .iter()
            .filter(|(p, _)| p.ends_with("bmc.key") || p.contains("/tls/"))
            .all(|f| after_stop.contains(f)),
        "the refused restore changed nothing"
    );

    // Restored into the stopped master: the nodes acknowledged before the backup are back,
    // the BMC's password opens.
    let out = run_ok(&mut with_data(
        dir.path(),
        &data,
        &["restore", file.to_str().unwrap()],
    ));
    assert!(out.contains("restored"), "{out}");
    let aside: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".before-restore-"))
        .collect();
    assert!(
        aside
            .iter()
            .any(|n| n.starts_with("stoker.db.before-restore-")),
        "{aside:?}"
    );
    assert!(
        aside
            .iter()
            .any(|n| n.starts_with("bmc.key.before-restore-")),
        "{aside:?}"
    );
    let served = serve(dir.path(), &data);
    let base = format!("http://{}", served.addr);
    sign_in(&base, &data);
    let macs = node_macs(&base);
    for mac in &before {
        assert!(
            macs.contains(mac),
            "{mac} was acknowledged before the backup"
        );
    }
    assert!(macs.len() <= during + 1);
    let b = Http::raw_get_json(&format!("{base}/api/v1/nodes/{bmc_node}/bmc"));
    assert_eq!(b["password_set"], true, "{b}");
    let r = Http::raw_post(
        &format!("{base}/api/v1/nodes/{bmc_node}/power"),
        &json!({"action": "off"}).to_string(),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(bmc.state().sessions_made > 0, "logged in with the password");
}

/// The backup's members, by name, read from its gzipped tar.
fn members(file: &Path) -> Vec<(tar::Header, Vec<u8>)> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(
        std::fs::File::open(file).unwrap(),
    ));
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let mut body = Vec::new();
            e.read_to_end(&mut body).unwrap();
            (e.header().clone(), body)
        })
        .collect()
}

fn write_members(file: &Path, members: &[(tar::Header, Vec<u8>)]) {
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(file).unwrap(),
        flate2::Compression::fast(),
    );
    let mut tar = tar::Builder::new(gz);
    for (h, body) in members {
        let mut h = h.clone();
        h.set_size(body.len() as u64);
        h.set_cksum();
        tar.append(&h, body.as_slice()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

#[test]
fn a_damaged_or_newer_backup_is_refused_naming_what_is_wrong_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let served = serve(dir.path(), &data);
    let base = format!("http://{}", served.addr);
    sign_in(&base, &data);
    assert_eq!(enroll(&base, "52:54:00:dd:00:01"), 201);
    // A BMC makes the key file, so the backup carries it.
    let r = Http::raw_post(
        &format!("{base}/api/v1/nodes"),
        &json!({"mac": "52:54:00:dd:00:02",
                "bmc": {"driver": "ipmi", "address": "127.0.0.1:1", "username": "admin",
                        "password": "pw"}})
        .to_string(),
        &[],
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let file = dir.path().join("b.tar.gz");
    run_ok(&mut with_data(
        dir.path(),
        &data,
        &["backup", file.to_str().unwrap()],
    ));
    served.signal("TERM");
    assert_eq!(served.wait().0, Some(0));
    let before = listing(&data);
    let restore = |bad: &Path| {
        let (_, stderr) = run_err(&mut with_data(
            dir.path(),
            &data,
            &["restore", bad.to_str().unwrap()],
        ));
        assert!(stderr.contains("nothing was changed"), "{stderr}");
        assert_eq!(listing(&data), before, "a refused restore changed nothing");
        stderr
    };

    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.path().join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let stderr = restore(&cut);
    assert!(stderr.contains("is not a whole stoker backup"), "{stderr}");

    let all = members(&file);
    let names: Vec<String> = all
        .iter()
        .map(|(h, _)| h.path().unwrap().display().to_string())
        .collect();
    assert_eq!(names.first().map(String::as_str), Some("data/stoker.db"));
    assert_eq!(names.last().map(String::as_str), Some("manifest.json"));
    assert!(names.iter().any(|n| n == "data/bmc.key"), "{names:?}");

    let mut changed = all.clone();
    for (h, body) in &mut changed {
        if h.path().unwrap().ends_with("bmc.key") {
            body[0] ^= 0xff;
        }
    }
    let flipped = dir.path().join("flipped.tar.gz");
    write_members(&flipped, &changed);
    let stderr = restore(&flipped);
    assert!(
        stderr.contains("member data/bmc.key does not match its SHA-256"),
        "{stderr}"
    );

    let without: Vec<_> = all
        .iter()
        .filter(|(h, _)| !h.path().unwrap().ends_with("manifest.json"))
        .cloned()
        .collect();
    let headless = dir.path().join("headless.tar.gz");
    write_members(&headless, &without);
    let stderr = restore(&headless);
    assert!(stderr.contains("has no manifest.json"), "{stderr}");

    let mut newer = all.clone();
    let latest = stoker::store::migrations::latest();
    for (h, body) in &mut newer {
        if h.path().unwrap().ends_with("manifest.json") {
            let mut m: serde_json::Value = serde_json::from_slice(body).unwrap();
            m["schema"] = json!(latest + 1);
            *body = serde_json::to_vec(&m).unwrap();
        }
    }
    let future = dir.path().join("future.tar.gz");
    write_members(&future, &newer);
    let stderr = restore(&future);
    assert!(
        stderr.contains(&format!(
            "holds schema version {}, newer than this stoker knows ({latest})",
            latest + 1
        )),
        "{stderr}"
    );

    // The good one restores.
    run_ok(&mut with_data(
        dir.path(),
        &data,
        &["restore", file.to_str().unwrap()],
    ));
}
