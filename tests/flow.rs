//! The whole flow in one process: the real daemon, and simulated nodes (the real agent with a
//! sandbox executor) that discover themselves, get roles in an environment, are provisioned in
//! the bootstrap (an OS image written to their disk, a config drive added, reboot), boot that
//! OS, whose service agent runs their graph tasks, and end ready. The engine's state is
//! snapshotted as text after each event and compared with what it must be.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest;

use crate::common::{Http, TestDaemon};

struct Sim {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<String>>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn simulate(base: &str, sandbox: &std::path::Path, mac: &str) -> Sim {
    let stop = Arc::new(AtomicBool::new(false));
    let (b, s, m, st) = (
        base.to_string(),
        sandbox.to_path_buf(),
        mac.to_string(),
        stop.clone(),
    );
    let thread =
        std::thread::spawn(
            move || match stoker::agent::deploy::simulate(&b, &s, &m, st) {
                Ok(end) => format!("{end:?}"),
                Err(e) => format!("error: {e}"),
            },
        );
    Sim {
        stop,
        thread: Some(thread),
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The engine's view, as text: each node's status and provision state, the environment's status.
fn snapshot(base: &str, cluster: i64) -> String {
    let nodes = Http::raw_get_json(&format!("{base}/api/v1/nodes"));
    let mut lines: Vec<String> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let detail = Http::raw_get_json(&format!("{base}/api/v1/nodes/{}", n["id"]));
            format!(
                "node {} roles={} pending={} status={}",
                n["mac"].as_str().unwrap(),
                n["roles"],
                n["pending_roles"],
                detail["status"].as_str().unwrap()
            )
        })
        .collect();
    lines.sort();
    let env = Http::raw_get_json(&format!("{base}/api/v1/clusters/{cluster}"));
    lines.push(format!("environment {}", env["status"].as_str().unwrap()));
    lines.join("\n")
}

#[test]
fn discover_assign_deploy_ready_with_simulated_nodes() {
    let d = TestDaemon::start_bundled("install");
    let base = d.url("");
    let http = d.http();
    // The operating system image the nodes write, served by the master.
    let data = d.db_path().parent().unwrap().to_path_buf();
    std::fs::create_dir_all(data.join("images")).unwrap();
    stoker::demo::write_os_image(&data.join("images/os.img")).unwrap();
    let image = std::fs::read(data.join("images/os.img")).unwrap();
    let sum = hex(&sha2::Sha256::digest(&image));

    let release = http.get("/api/v1/releases").json()[0]["id"]
        .as_i64()
        .unwrap();
    let cluster = http
        .post(
            "/api/v1/clusters",
            &json!({"name": "lab", "release_id": release}).to_string(),
        )
        .json()["id"]
        .as_i64()
        .unwrap();
    assert_eq!(snapshot(&base, cluster), "environment new");

    // 1. Discovery: two nodes boot and say hello.
    let dir = tempfile::tempdir().unwrap();
    let macs = ["52:54:00:aa:00:01", "52:54:00:aa:00:02"];
    let sims: Vec<Sim> = macs
        .iter()
        .enumerate()
        .map(|(i, mac)| simulate(&base, &dir.path().join(format!("node{i}")), mac))
        .collect();
    wait_for("discovery", || {
        http.get("/api/v1/nodes").json().as_array().unwrap().len() == 2
    });
    assert_eq!(
        snapshot(&base, cluster),
        "node 52:54:00:aa:00:01 roles=[] pending=[] status=discover\n\
         node 52:54:00:aa:00:02 roles=[] pending=[] status=discover\n\
         environment new"
    );

    // 2. Roles.
    // Discovery order is the nodes' own; find each one's id by its MAC.
    let listed = http.get("/api/v1/nodes").json();
    let id_of = |mac: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["mac"] == mac)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let ids = [id_of(macs[0]), id_of(macs[1])];
    for (id, role) in [(ids[0], "controller"), (ids[1], "compute")] {
        let r = http.put(
            &format!("/api/v1/clusters/{cluster}/nodes/{id}"),
            &json!({"roles": [role]}).to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert_eq!(
        snapshot(&base, cluster),
        "node 52:54:00:aa:00:01 roles=[] pending=[\"controller\"] status=discover\n\
         node 52:54:00:aa:00:02 roles=[] pending=[\"compute\"] status=discover\n\
         environment new"
    );

    // 3. Deploy, with the image given as a per-deployment user step (like a deploy template).
    let steps = json!({"steps": [{"interface": "deploy", "step": "write_image", "priority": 80,
        "args": {"image_url": format!("{base}/boot/images/os.img"),
                 "checksum": format!("sha256:{sum}")}}]});
    let r = http.post(
        &format!("/api/v1/clusters/{cluster}/deploy"),
        &steps.to_string(),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let dep = r.json()["id"].as_i64().unwrap();
    wait_for("the deployment to finish", || {
        let d = Http::raw_get_json(&format!("{base}/api/v1/deployments/{dep}"));
        d["status"] != "running"
    });
    let done = Http::raw_get_json(&format!("{base}/api/v1/deployments/{dep}"));
    assert_eq!(done["status"], "done", "{done}");

    // 4. Ready, and the nodes' disks and files say what ran.
    assert_eq!(
        snapshot(&base, cluster),
        "node 52:54:00:aa:00:01 roles=[\"controller\"] pending=[] status=ready\n\
         node 52:54:00:aa:00:02 roles=[\"compute\"] pending=[] status=ready\n\
         environment operational"
    );
    for (i, sim) in sims.into_iter().enumerate() {
        let root = dir.path().join(format!("node{i}"));
        let mut sim = sim;
        // The service agent keeps running on the installed OS until told to stop.
        sim.stop.store(true, Ordering::Relaxed);
        let end = sim.thread.take().unwrap().join().unwrap();
        assert_eq!(end, "Stopped", "node {i}");
        // The image's own partition is as written; a config drive was added after it.
        let disk = std::fs::read(root.join("dev/vda")).unwrap();
        assert_eq!(
            disk[446..462],
            image[446..462],
            "partition 1 is the image's"
        );
        assert_ne!(disk[462..478], [0u8; 16], "partition 2, the config drive");
        // The installed OS (partition 1, a directory in the sandbox) got its host name and
        // the agent's files from the config drive, and the graph's tasks ran there.
        let os = root.join("installed/vda-part1");
        let host = std::fs::read_to_string(os.join("etc/hostname")).unwrap();
        assert_eq!(host.trim(), format!("node-{}", ids[i]));
        let agent = std::fs::read_to_string(os.join("etc/stoker/agent.json")).unwrap();
        assert!(agent.contains("skn_"), "{agent}");
        let astute = std::fs::read_to_string(os.join("etc/astute.yaml")).unwrap();
        assert!(astute.contains("roles"), "{astute}");
        assert!(
            os.join("etc/fuel/plugins/ubuntu-newton/netconfig.sh")
                .exists(),
            "sync fetched the release's scripts"
        );
        assert!(
            !root.join("etc/astute.yaml").exists(),
            "no graph task ran in the bootstrap"
        );
        assert!(root.join("var/lib/stoker/rebooted-to-disk").exists());
    }
    // Each step's output was kept; shell commands were recorded, not run, in the sandbox.
    let steps: &Vec<Value> = done["steps"].as_array().unwrap();
    let netconfig = steps.iter().find(|s| s["task"] == "netconfig").unwrap();
    assert!(
        netconfig["output_tail"]
            .as_str()
            .unwrap()
            .contains("not run"),
        "{netconfig}"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn serve_with_demo_nodes_discovers_them_over_the_boot_chain() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = crate::common::bin::stoker(dir.path());
    cmd.args([
        "serve",
        "--http-listen",
        "127.0.0.1:0",
        "--tftp-enabled",
        "true",
        "--tftp-listen",
        "127.0.0.1:0",
        "--demo-nodes",
        "2",
    ]);
    let served = crate::common::bin::Served::spawn(cmd);
    let base = format!("http://{}", served.addr);
    crate::common::sign_in(&base, &dir.path().join("stoker-data"));
    wait_for("two demo nodes", || {
        Http::raw_get_json(&format!("{base}/api/v1/nodes"))
            .as_array()
            .is_some_and(|a| a.len() == 2)
    });
    // They came with their boot tokens and fetched over TFTP first.
    let pxe = Http::raw_get_json(&format!("{base}/api/v1/pxe"));
    assert!(
        pxe["tftp"]["counters"]["completed"].as_u64().unwrap_or(0) >= 2,
        "{pxe}"
    );
    served.signal("TERM");
    let (code, log) = served.wait();
    assert_eq!(code, Some(0), "{log:#?}");
}
