//! The built binary as a user runs it: the quickstart default, healthcheck, and graceful
//! shutdown on SIGTERM and SIGINT with an in-flight request finishing.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::bin::{Served, stoker};
use crate::common::inventory;

#[test]
fn quickstart_creates_local_data_dir_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    // The quickstart runs `stoker serve` with nothing else; the port is the one thing a test
    // must not share with the machine, so only it comes from the environment.
    let mut cmd = stoker(dir.path());
    cmd.arg("serve").env("STOKER_HTTP_LISTEN", "127.0.0.1:0");
    let served = Served::spawn(cmd);
    assert!(served.addr.starts_with("127.0.0.1:"));
    assert!(dir.path().join("stoker-data/stoker.db").exists());

    let health = stoker(dir.path())
        .args(["healthcheck", "--url", &format!("http://{}", served.addr)])
        .output()
        .unwrap();
    assert_eq!(health.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&health.stdout).starts_with("ok:"));

    served.signal("TERM");
    let (code, log) = served.wait();
    assert_eq!(code, Some(0), "{log:#?}");
    assert!(
        log.iter().any(|l| l.contains("database closed")),
        "{log:#?}"
    );
    assert!(!dir.path().join("stoker-data/stoker.db-wal").exists());

    // Once stopped, healthcheck says so with a non-zero code.
    let health = stoker(dir.path())
        .args([
            "healthcheck",
            "--timeout",
            "2",
            "--url",
            &format!("http://{}", served_addr_of(&log)),
        ])
        .output()
        .unwrap();
    assert_eq!(health.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&health.stderr).contains("unhealthy"));
}

fn served_addr_of(log: &[String]) -> String {
    log.iter()
        .find_map(|l| l.split("listening on http://").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string()
}

#[test]
fn healthcheck_reads_the_same_config_as_serve() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    std::fs::write(
        dir.path().join("c.toml"),
        format!("[http]\nlisten = \"0.0.0.0:{port}\"\n"),
    )
    .unwrap();
    // Nothing listens yet: unhealthy.
    let out = stoker(dir.path())
        .args(["healthcheck", "--config", "c.toml", "--timeout", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let mut cmd = stoker(dir.path());
    cmd.args([
        "serve",
        "--config",
        "c.toml",
        "--http-listen",
        &format!("127.0.0.1:{port}"),
        // The file's 0.0.0.0 means TLS (`http.tls = auto`): serve it so, as the file says.
        "--http-tls",
        "on",
        "--http-boot-listen",
        "127.0.0.1:0",
    ]);
    let served = Served::spawn(cmd);
    assert_eq!(served.scheme, "https");
    let out = stoker(dir.path())
        .args(["healthcheck", "--config", "c.toml"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "0.0.0.0 in the config means loopback for a local check, over HTTPS trusting the \
         master's own certificate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    served.signal("INT");
    assert_eq!(served.wait().0, Some(0));
}

#[test]
fn sigterm_lets_in_flight_request_finish() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = stoker(dir.path());
    cmd.args(["serve", "--http-listen", "127.0.0.1:0"]);
    let served = Served::spawn(cmd);

    // Start a hello and send only half its body, so the request is in flight.
    let body = inventory("52:54:00:ff:00:01").to_string();
    let (head, tail) = body.split_at(body.len() / 2);
    let mut conn = TcpStream::connect(&served.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "POST /api/v1/agent/hello HTTP/1.1\r\nHost: stoker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
        body.len()
    )
    .unwrap();
    conn.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));

    served.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    // New connections are refused while the old request may still finish.
    assert!(
        TcpStream::connect(&served.addr).is_err(),
        "listener closed after SIGTERM"
    );

    conn.write_all(tail.as_bytes()).unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(
        reply.starts_with("HTTP/1.1 201"),
        "in-flight request finished: {reply}"
    );

    let db = dir.path().join("stoker-data/stoker.db");
    let (code, log) = served.wait();
    assert_eq!(code, Some(0), "{log:#?}");
    assert!(log.iter().any(|l| l.contains("received SIGTERM")));
    // The node written during shutdown is in the cleanly closed database.
    let conn = rusqlite::Connection::open(db).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM nodes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn version_and_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = stoker(dir.path()).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("stoker {}", env!("CARGO_PKG_VERSION"))
    );
    let out = stoker(dir.path())
        .args(["serve", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A NUL-separated file of a running process (`/proc/PID/environ`, `/proc/PID/cmdline`), one
/// string per entry.
fn proc_strings(pid: u32, file: &str) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/{file}"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

#[test]
fn serve_gives_freed_memory_back_within_10_ms_unless_the_operator_chose_a_delay() {
    for (given, expected) in [(None, "10"), (Some("250"), "250")] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = stoker(dir.path());
        cmd.args(["serve", "--http-listen", "127.0.0.1:0"])
            .env_remove("MIMALLOC_PURGE_DELAY")
            .env_remove("MIMALLOC_RESET_DELAY");
        if let Some(v) = given {
            cmd.env("MIMALLOC_PURGE_DELAY", v);
        }
        let served = Served::spawn(cmd);
        let pid = served.child.id();
        // The process the test started is the one serving (replaced in place, same PID), with
        // the same arguments, and mimalloc read the delay from its environment.
        let delays: Vec<String> = proc_strings(pid, "environ")
            .into_iter()
            .filter(|kv| kv.starts_with("MIMALLOC_PURGE_DELAY="))
            .collect();
        assert_eq!(delays, [format!("MIMALLOC_PURGE_DELAY={expected}")]);
        let argv = proc_strings(pid, "cmdline");
        assert_eq!(
            argv[1..],
            ["serve", "--http-listen", "127.0.0.1:0"],
            "{argv:?}"
        );
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        if let Some(thp) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert!(
                thp.ends_with('0'),
                "huge pages stay off across the restart: {thp}"
            );
        }
        served.signal("TERM");
        let (code, log) = served.wait();
        assert_eq!(code, Some(0), "{log:#?}");
        assert!(
            !log.iter().any(|l| l.contains("cannot restart")),
            "{log:#?}"
        );
    }
}
