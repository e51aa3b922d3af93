//! Network boot over HTTP: the per-node iPXE script with its kernel command-line contract and
//! one-time token, the local-disk script for deployed nodes, and images served with Range.

use crate::common::{TestDaemon, inventory};

/// The value of `key=` on the script's kernel line.
pub fn kernel_arg(script: &str, key: &str) -> String {
    let line = script
        .lines()
        .find(|l| l.starts_with("kernel "))
        .expect("script has a kernel line");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
        .to_string()
}

#[test]
fn bootstrap_script_carries_the_contract() {
    let d = TestDaemon::start();
    let r = d.http().get("/boot/52-54-00-77-00-0A.ipxe");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.starts_with("#!ipxe\n"));
    let base = format!("http://{}", d.addr);
    assert_eq!(kernel_arg(&r.body, "stoker.master"), base);
    assert_eq!(kernel_arg(&r.body, "stoker.mac"), "52:54:00:77:00:0a");
    assert_eq!(kernel_arg(&r.body, "BOOTIF"), "01-${netX/mac:hexhyp}");
    assert_eq!(kernel_arg(&r.body, "initrd"), "initrd.img");
    assert!(
        r.body
            .contains(" console=tty0 console=ttyS0,115200n8 quiet "),
        "boot.kernel_args"
    );
    let token = kernel_arg(&r.body, "stoker.token");
    assert_eq!(token.len(), 64);
    assert!(
        r.body
            .contains(&format!("kernel {base}/boot/images/vmlinuz "))
    );
    assert!(
        r.body
            .contains(&format!("initrd {base}/boot/images/initrd.img"))
    );
    // Every render issues a new token.
    let again = d.http().get("/boot/52:54:00:77:00:0a.ipxe");
    assert_ne!(kernel_arg(&again.body, "stoker.token"), token);
    // The token is stored hashed, never in clear.
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    let stored: String = conn
        .query_row("SELECT token_hash FROM boot_tokens", [], |r| r.get(0))
        .unwrap();
    assert_ne!(stored, token);
    assert_eq!(stored.len(), 64);

    let bad = d.http().get("/boot/not-a-mac.ipxe");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["code"], "bad_request");
}

#[test]
fn hello_with_boot_token_is_one_time() {
    let d = TestDaemon::start();
    let mac = "52:54:00:77:00:0b";
    let script = d.http().get(&format!("/boot/{mac}.ipxe")).body;
    let token = kernel_arg(&script, "stoker.token");
    let body = inventory(mac).to_string();
    let with = |t: &str| {
        crate::common::Http::raw_post(
            &d.url("/api/v1/agent/hello"),
            &body,
            &[("authorization", &format!("Bearer {t}"))],
        )
    };
    let forged = with(&"0".repeat(64));
    assert_eq!(forged.status, 401, "{}", forged.body);
    assert_eq!(forged.json()["code"], "unauthorized");
    assert_eq!(
        d.http().get("/api/v1/nodes").json(),
        serde_json::json!([]),
        "nothing written"
    );
    let ok = with(&token);
    assert_eq!(ok.status, 201, "{}", ok.body);
    let agent_token = ok.json()["agent_token"].as_str().unwrap().to_string();
    let reused = with(&token);
    assert_eq!(reused.status, 401, "a token works once");
    // Booting again gives a new boot token, which rotates the agent token.
    let script = d.http().get(&format!("/boot/{mac}.ipxe")).body;
    let again = with(&kernel_arg(&script, "stoker.token"));
    assert_eq!(again.status, 200, "{}", again.body);
    let rotated = again.json()["agent_token"].as_str().unwrap().to_string();
    assert_ne!(rotated, agent_token);
    assert_eq!(
        with(&agent_token).status,
        401,
        "the old agent token is gone"
    );
    assert_eq!(with(&rotated).status, 200);
}

#[test]
fn deployed_node_boots_from_local_disk() {
    let d = TestDaemon::start();
    let r = d.http().post(
        "/api/v1/agent/hello",
        &inventory("52:54:00:77:00:0c").to_string(),
    );
    assert_eq!(r.status, 201);
    let conn = rusqlite::Connection::open(d.db_path()).unwrap();
    conn.execute("UPDATE nodes SET status = 'ready'", [])
        .unwrap();
    // Asked for by its second NIC, it is still the deployed node.
    let script = d.http().get("/boot/02:54:00:77:00:0c.ipxe").body;
    assert!(script.contains("booting from local disk"), "{script}");
    assert!(script.contains("sanboot --no-describe --drive 0x80"));
    assert!(!script.contains("kernel "));
}

#[test]
fn images_are_served_with_ranges() {
    let d = TestDaemon::start();
    let missing = d.http().get("/boot/images/vmlinuz");
    assert_eq!(missing.status, 404);
    assert!(
        missing.json()["message"]
            .as_str()
            .unwrap()
            .contains("build-bootstrap.sh")
    );

    let images = d.db_path().parent().unwrap().join("images");
    std::fs::create_dir_all(&images).unwrap();
    let kernel: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(images.join("vmlinuz"), &kernel).unwrap();
    let (status, bytes, headers) = crate::common::Http::get_bytes(
        &d.url("/boot/images/vmlinuz"),
        &[("range", "bytes=1000-1999")],
    );
    assert_eq!(status, 206);
    assert_eq!(bytes, &kernel[1000..2000]);
    assert_eq!(
        headers.get("content-range").map(String::as_str),
        Some("bytes 1000-1999/100000")
    );
    let (status, bytes, _) = crate::common::Http::get_bytes(&d.url("/boot/images/vmlinuz"), &[]);
    assert_eq!((status, bytes.len()), (200, kernel.len()));
    assert_eq!(bytes, kernel);
    for bad in ["/boot/images/.hidden", "/boot/images/..%2Fstoker.db"] {
        let r = d.http().get(bad);
        assert!(r.status == 400 || r.status == 404, "{bad}: {}", r.status);
    }
}
