//! The built `stoker agent` binary against a real daemon: inventory from a prepared /proc and
//! /sys tree, settings from a kernel command line, the boot token, retries, and refusals.

use std::path::Path;

use crate::common::TestDaemon;
use crate::common::bin::{run_ok, stoker};

/// A small but realistic /proc and /sys tree: two NICs (one virtual), a disk, a loop device.
pub fn fake_root(root: &Path, cmdline: &str) {
    let w = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("proc/cmdline", cmdline);
    w(
        "proc/cpuinfo",
        "processor\t: 0\nmodel name\t: AMD EPYC 7313\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7313\n",
    );
    w(
        "proc/meminfo",
        "MemTotal:       16303248 kB\nMemFree: 1 kB\n",
    );
    w("sys/class/net/eno1/address", "52:54:00:77:00:21\n");
    w("sys/class/net/eno1/speed", "1000\n");
    w("sys/class/net/eno1/carrier", "1\n");
    std::fs::create_dir_all(root.join("sys/class/net/eno1/device")).unwrap();
    w("sys/class/net/lo/address", "00:00:00:00:00:00\n");
    w("sys/class/net/br0/address", "52:54:00:77:00:99\n");
    w("sys/block/sda/size", "937703088\n");
    w("sys/block/sda/device/model", "SAMSUNG MZ7L3480\n");
    w("sys/block/sda/device/serial", "S6KM0001\n");
    w("sys/block/loop0/size", "100\n");
    w("sys/class/dmi/id/sys_vendor", "Supermicro\n");
    w("sys/class/dmi/id/product_name", "SYS-1029P\n");
    w("sys/class/dmi/id/product_serial", "A123\n");
    std::fs::create_dir_all(root.join("sys/firmware/efi")).unwrap();
}

#[test]
fn agent_registers_with_token_from_kernel_command_line() {
    let d = TestDaemon::start();
    let base = format!("http://{}", d.addr);
    let script = d.http().get("/boot/52:54:00:77:00:21.ipxe").body;
    let token = crate::boot::kernel_arg(&script, "stoker.token");
    let root = tempfile::tempdir().unwrap();
    fake_root(
        root.path(),
        &format!(
            "initrd=initrd.img stoker.master={base} stoker.token={token} BOOTIF=01-52-54-00-77-00-21\n"
        ),
    );
    let stdout = run_ok(
        stoker(root.path())
            .args(["agent", "--register-only", "--root"])
            .arg(root.path()),
    );
    assert!(
        stdout
            .contains("STOKER-AGENT ok node=1 mac=52:54:00:77:00:21 status=discover created=true"),
        "{stdout}"
    );

    let node = d.http().get("/api/v1/nodes/1").json();
    let inv = &node["inventory"];
    assert_eq!(
        inv["interfaces"].as_array().unwrap().len(),
        1,
        "only the physical NIC: {inv}"
    );
    assert_eq!(inv["interfaces"][0]["speed_mbps"], 1000);
    assert_eq!(inv["cpu"]["count"], 2);
    assert_eq!(inv["memory_bytes"], 16_303_248u64 * 1024);
    assert_eq!(
        inv["disks"].as_array().unwrap().len(),
        1,
        "no loop devices: {inv}"
    );
    assert_eq!(inv["disks"][0]["size_bytes"], 937_703_088u64 * 512);
    assert_eq!(inv["system"]["vendor"], "Supermicro");
    assert_eq!(inv["boot_mode"], "uefi");

    // The agent kept its token; run again (as after an agent crash) it is recognised.
    let saved = root.path().join("run/stoker-agent.token");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let stdout = run_ok(
        stoker(root.path())
            .args(["agent", "--register-only", "--root"])
            .arg(root.path()),
    );
    assert!(
        stdout.contains("node=1 mac=52:54:00:77:00:21 status=discover created=false"),
        "{stdout}"
    );

    // Without its token, the used boot token is refused and plain discovery of a known node
    // too: the agent says why and fails.
    std::fs::remove_file(&saved).unwrap();
    let out = stoker(root.path())
        .args(["agent", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refused the hello (409)"), "{stderr}");
    assert!(stderr.contains("already registered"), "{stderr}");
}

#[test]
fn agent_gives_up_on_unreachable_master_when_told_to() {
    let root = tempfile::tempdir().unwrap();
    fake_root(root.path(), "");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let out = stoker(root.path())
        .args(["agent", "--attempts", "2", "--max-backoff", "1", "--master"])
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--root")
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unreachable after 2 attempts"));
    let out = stoker(root.path())
        .args(["agent", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no master URL"));
}
