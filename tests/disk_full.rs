//! A full disk under a serving master: the built binary runs in a private mount namespace
//! (`unshare --mount`) with its data directory on a 16 MiB tmpfs mounted there only, so the
//! host's mount table is never touched; the test reaches the tmpfs through
//! `/proc/PID/root/...`. Once a filler file has taken every free byte, writes through the API
//! are answered 507 `disk_full`, naming the database's file, and write nothing; the daemon
//! stays up and reads go on; every write acknowledged before is still there; once the filler
//! is gone, writes work again. Needs root (mount namespace, tmpfs).

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::common::bin::{STOKER, Served};
use crate::common::{Http, node_macs, sign_in};

fn enroll(base: &str, mac: &str) -> (u16, serde_json::Value) {
    let r = Http::raw_post(
        &format!("{base}/api/v1/nodes"),
        &json!({"mac": mac}).to_string(),
        &[],
    );
    let body = serde_json::from_str(&r.body).unwrap_or(serde_json::Value::Null);
    (r.status, body)
}

/// Write zeros to `path` until the file system refuses: the error must be "no space".
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    loop {
        if let Err(e) = f.write_all(&chunk).and_then(|()| f.sync_all()) {
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
            // The last partial pages too.
            while f.write_all(&[0u8; 512]).is_ok() {}
            return;
        }
    }
}

#[test]
#[ignore = "needs root (mount namespace, tmpfs): .ci/run runs it"]
fn a_full_disk_refuses_writes_clearly_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().to_path_buf();
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t tmpfs -o size=16m stoker-full \"$0\" && exec \"$1\" serve --data-dir \
             \"$0/data\" --http-listen 127.0.0.1:0 --plugins-bundled skip",
        )
        .arg(&mnt)
        .arg(STOKER)
        .current_dir(&mnt);
    for (key, _) in std::env::vars() {
        if key.starts_with("STOKER_") || key == "NOTIFY_SOCKET" {
            cmd.env_remove(key);
        }
    }
    let served = Served::spawn(cmd);
    let pid = served.child.id();
    let inside = Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(mnt.strip_prefix("/").unwrap());
    let data = inside.join("data");
    assert!(
        !dir.path().join("data").exists(),
        "the data directory is on the namespace's tmpfs, not the host's disk"
    );
    let base = format!("http://{}", served.addr);
    sign_in(&base, &data);

    let mut acked = Vec::new();
    for i in 0..20u32 {
        let mac = format!("52:54:00:ee:00:{i:02x}");
        assert_eq!(enroll(&base, &mac).0, 201);
        acked.push(mac);
    }
    let filler = inside.join("filler");
    fill(&filler);

    // Writes go on until one needs a byte the disk no longer has.
    let mut refused = None;
    for i in 0..5000u32 {
        let mac = format!("52:54:00:ef:{:02x}:{:02x}", i / 256, i % 256);
        match enroll(&base, &mac) {
            (201, _) => acked.push(mac),
            (507, body) => {
                refused = Some((mac, body));
                break;
            }
            (status, body) => panic!("{mac}: {status} {body}"),
        }
    }
    let (lost_mac, body) = refused.expect("a write was refused for want of space");
    assert_eq!(body["code"], "disk_full", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{}/data/stoker.db", mnt.display())) && message.contains("full"),
        "{message}"
    );
    // Still up, still reading, nothing acknowledged lost, the refused write not kept.
    let (health, _, _) = Http::get_bytes(&format!("{base}/healthz"), &[]);
    assert_eq!(health, 200);
    let now = node_macs(&base);
    for mac in &acked {
        assert!(now.contains(mac), "{mac} was acknowledged");
    }
    assert!(!now.contains(&lost_mac));
    // A second refused write says the same.
    assert_eq!(enroll(&base, "52:54:00:ed:00:01").0, 507);

    std::fs::remove_file(&filler).unwrap();
    let (status, body) = enroll(&base, "52:54:00:ed:00:02");
    assert_eq!(status, 201, "{body}");
    let now = node_macs(&base);
    for mac in acked.iter().chain([&"52:54:00:ed:00:02".to_string()]) {
        assert!(now.contains(mac), "{mac} after the space came back");
    }
    served.signal("TERM");
    let (code, log) = served.wait();
    assert_eq!(code, Some(0), "{log:#?}");
}
