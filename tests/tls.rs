//! HTTPS against the built daemon: a self-signed certificate made once and kept, its
//! fingerprint logged and put on the kernel command line; iPXE's files on the plain boot
//! listener and nothing else there; HSTS and Secure cookies; the agent pinning the master
//! from the boot script's own arguments (and refusing another certificate); the CLI trusting
//! the master by fingerprint; an operator's certificate chain and a key that is not its own.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use stoker::tls::{Fingerprint, anchor, client_config, pinned};

use crate::common::bin::{Served, run_err, run_ok, stoker};

const MAC: &str = "52:54:00:77:00:21";

fn serve(dir: &Path, extra: &[&str]) -> Served {
    let mut cmd = stoker(dir);
    cmd.args([
        "serve",
        "--data-dir",
        "data",
        "--http-listen",
        "127.0.0.1:0",
        "--http-tls",
        "on",
        "--plugins-bundled",
        "skip",
    ])
    .args(extra);
    Served::spawn(cmd)
}

/// The value of `key=` in a log line that has it.
fn logged(log: &[String], key: &str) -> Option<String> {
    log.iter().find_map(|l| {
        l.split(&format!("{key}="))
            .nth(1)
            .map(|r| r.split_whitespace().next().unwrap_or("").to_string())
    })
}

fn plain() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

fn pinned_agent(base: &str, fp: &Fingerprint) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(10)))
        .tls_config(pinned(base, fp, Duration::from_secs(5)).unwrap())
        .build()
        .into()
}

fn read(mut r: ureq::http::Response<ureq::Body>) -> (u16, ureq::http::HeaderMap, String) {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (
        status,
        headers,
        r.body_mut().read_to_string().unwrap_or_default(),
    )
}

#[test]
fn a_self_signed_master_serves_https_and_only_boot_files_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let d = serve(dir.path(), &[]);
    assert_eq!(d.scheme, "https", "{:#?}", d.log);
    let base = format!("https://{}", d.addr);
    let boot = format!("http://{}", d.boot_addr.clone().expect("a boot listener"));
    let fp =
        Fingerprint::parse(&logged(&d.log, "fingerprint").expect("fingerprint logged")).unwrap();
    assert!(
        d.log
            .iter()
            .any(|l| l.contains("made a self-signed certificate")),
        "{:#?}",
        d.log
    );
    // The logged fingerprint is the kept certificate's.
    let pem = std::fs::read_to_string(dir.path().join("data/tls/master.crt")).unwrap();
    let der = anchor(&pem, None, &base).unwrap();
    assert_eq!(Fingerprint::of(der.as_ref()), fp);

    // Over TLS: HSTS, and the sign-in cookie is Secure.
    let tls = pinned_agent(&base, &fp);
    let (status, headers, _) = read(tls.get(format!("{base}/healthz")).call().unwrap());
    assert_eq!(status, 200);
    assert_eq!(
        headers
            .get("strict-transport-security")
            .map(|v| v.to_str().unwrap()),
        Some("max-age=31536000")
    );
    let (status, headers, _) = read(tls.get(format!("{base}/login")).call().unwrap());
    assert_eq!(status, 200);
    let cookie = headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("stoker_login="))
        .expect("login cookie");
    assert!(
        cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let password = std::fs::read_to_string(dir.path().join("data/initial-admin-password")).unwrap();
    let (status, _, body) = read(
        tls.post(format!("{base}/api/v1/login"))
            .header("content-type", "application/json")
            .send(format!(
                r#"{{"username":"admin","password":"{}"}}"#,
                password.trim()
            ))
            .unwrap(),
    );
    assert_eq!(status, 201, "{body}");
    let token = serde_json::from_str::<Value>(&body).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();

    // The HTTPS port does not speak plain HTTP.
    assert!(
        plain()
            .get(format!("http://{}/healthz", d.addr))
            .call()
            .map(|r| r.status().as_u16() != 200)
            .unwrap_or(true)
    );
    // The boot port sends everything but /boot/ to HTTPS, credentials included, unserved.
    for (method, path) in [
        ("GET", "/healthz"),
        ("GET", "/api/v1/nodes"),
        ("POST", "/api/v1/login"),
    ] {
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{boot}{path}"))
            .header("authorization", format!("Bearer {token}"))
            .body(())
            .unwrap();
        let (status, headers, body) = read(plain().run(req).unwrap());
        assert_eq!(status, 308, "{method} {path}: {body}");
        assert_eq!(
            headers
                .get("location")
                .map(|v| v.to_str().unwrap().to_string()),
            Some(format!("{base}{path}"))
        );
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["code"], "https_required", "{body}");
    }
    // The chain, in clear, is what the fingerprint names.
    let (status, _, chain) = read(
        plain()
            .get(format!("{boot}/boot/tls/chain.pem"))
            .call()
            .unwrap(),
    );
    assert_eq!(status, 200);
    assert!(anchor(&chain, Some(&fp), &boot).is_ok());

    // The boot script: files over plain HTTP, the agent to HTTPS with the fingerprint; nothing
    // from the Host header.
    let (status, _, script) = read(
        plain()
            .get(format!("{boot}/boot/{MAC}.ipxe"))
            .header("host", "evil.example")
            .call()
            .unwrap(),
    );
    assert_eq!(status, 200, "{script}");
    assert!(!script.contains("evil"), "{script}");
    assert!(
        script.contains(&format!("kernel {boot}/boot/images/vmlinuz")),
        "{script}"
    );
    assert_eq!(crate::boot::kernel_arg(&script, "stoker.master"), base);
    assert_eq!(
        crate::boot::kernel_arg(&script, "stoker.fingerprint"),
        fp.to_string()
    );

    // The agent, given the script's own arguments, pins the master and says hello over TLS.
    let args: Vec<&str> = script
        .lines()
        .find(|l| l.starts_with("kernel "))
        .unwrap()
        .split_whitespace()
        .filter(|w| w.starts_with("stoker."))
        .collect();
    let root = tempfile::tempdir().unwrap();
    crate::agent::fake_root(
        root.path(),
        &format!("{} BOOTIF=01-52-54-00-77-00-21\n", args.join(" ")),
    );
    let stdout = run_ok(
        stoker(root.path())
            .args(["agent", "--register-only", "--attempts", "2", "--root"])
            .arg(root.path()),
    );
    assert!(
        stdout.contains(&format!("STOKER-AGENT ok node=1 mac={MAC}")),
        "{stdout}"
    );

    // Another fingerprint: refused at once, naming both; none at all: refused too.
    let other = Fingerprint::of(b"another server");
    for (flag, expect) in [
        (Some(other.to_string()), "another server answered"),
        (None, "no certificate fingerprint"),
    ] {
        let mut cmd = stoker(root.path());
        cmd.args([
            "agent",
            "--register-only",
            "--attempts",
            "2",
            "--max-backoff",
            "1",
        ])
        .args(["--master", &base, "--root"])
        .arg(root.path());
        // The fake kernel command line carries the right fingerprint: the flag wins.
        std::fs::write(root.path().join("proc/cmdline"), "quiet\n").unwrap();
        if let Some(f) = &flag {
            cmd.args(["--fingerprint", f]);
        }
        let (_, stderr) = run_err(&mut cmd);
        assert!(stderr.contains(expect), "{stderr}");
        if flag.is_some() {
            assert!(stderr.contains(&fp.to_string()), "{stderr}");
        }
    }

    // The CLI from elsewhere: by fingerprint; without one, told how.
    let elsewhere = tempfile::tempdir().unwrap();
    let stdout = run_ok(
        stoker(elsewhere.path())
            .args(["user", "list", "--url", &base, "--token", &token])
            .env("STOKER_FINGERPRINT", fp.to_string()),
    );
    assert!(stdout.contains("admin"), "{stdout}");
    let (_, stderr) =
        run_err(stoker(elsewhere.path()).args(["user", "list", "--url", &base, "--token", &token]));
    assert!(stderr.contains("--fingerprint"), "{stderr}");
    // The CLI on the master itself trusts the master's own certificate file.
    let out = stoker(dir.path())
        .args(["user", "list", "--data-dir", "data", "--http-tls", "on"])
        .args(["--url", &base, "--token", &token])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A restart keeps the certificate: nodes pinned it.
    d.signal("TERM");
    let (code, _) = d.wait();
    assert_eq!(code, Some(0));
    let again = serve(dir.path(), &[]);
    assert_eq!(logged(&again.log, "fingerprint"), Some(fp.to_string()));
    assert!(
        !again
            .log
            .iter()
            .any(|l| l.contains("made a self-signed certificate"))
    );
}

/// A CA and a leaf it signed for 127.0.0.1, as PEM: (chain leaf+CA, leaf key, CA).
fn operator_chain() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "site CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    (
        format!("{}{}", leaf.pem(), ca_cert.pem()),
        leaf_key.serialize_pem(),
        ca_cert.pem(),
    )
}

#[test]
fn an_operators_chain_is_served_and_a_foreign_key_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (chain, key, ca) = operator_chain();
    std::fs::write(dir.path().join("chain.pem"), &chain).unwrap();
    std::fs::write(dir.path().join("key.pem"), &key).unwrap();
    let d = serve(
        dir.path(),
        &["--http-tls-cert", "chain.pem", "--http-tls-key", "key.pem"],
    );
    let base = format!("https://{}", d.addr);
    let fp = Fingerprint::parse(&logged(&d.log, "fingerprint").unwrap()).unwrap();
    assert!(
        !dir.path().join("data/tls").exists(),
        "nothing self-signed was made"
    );
    // Pinning the leaf trusts the CA the chain ends with; the CA alone works too.
    let (status, _, _) = read(
        pinned_agent(&base, &fp)
            .get(format!("{base}/healthz"))
            .call()
            .unwrap(),
    );
    assert_eq!(status, 200);
    let by_ca: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(client_config(&anchor(&ca, None, &base).unwrap()))
        .build()
        .into();
    assert_eq!(
        by_ca
            .get(format!("{base}/healthz"))
            .call()
            .unwrap()
            .status(),
        200
    );
    drop(d);

    // Another key: the daemon refuses to start, naming the files.
    let (_, other_key, _) = operator_chain();
    std::fs::write(dir.path().join("other.pem"), other_key).unwrap();
    let (_, stderr) = run_err(
        stoker(dir.path())
            .args([
                "serve",
                "--data-dir",
                "data",
                "--http-listen",
                "127.0.0.1:0",
            ])
            .args([
                "--http-tls-cert",
                "chain.pem",
                "--http-tls-key",
                "other.pem",
            ]),
    );
    assert!(
        stderr.contains("chain.pem")
            && stderr.contains("other.pem")
            && stderr.contains("does not serve"),
        "{stderr}"
    );
}
