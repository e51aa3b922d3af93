//! Running the built `stoker` binary as a user would: in a directory of its own, with its
//! output captured, stopped by PID with a signal.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const STOKER: &str = env!("CARGO_BIN_EXE_stoker");

/// A `stoker` command with a clean environment (no `STOKER_*` leaking in from the host).
pub fn stoker(cwd: &Path) -> Command {
    let mut cmd = Command::new(STOKER);
    cmd.current_dir(cwd);
    for (key, _) in std::env::vars() {
        if key.starts_with("STOKER_") || key == "NOTIFY_SOCKET" {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// A `stoker serve` process and the lines it has logged so far.
pub struct Served {
    pub child: Child,
    pub addr: String,
    /// `http` or `https`.
    pub scheme: String,
    /// Under TLS, the plain listener for iPXE's boot files.
    pub boot_addr: Option<String>,
    pub lines: mpsc::Receiver<String>,
    pub log: Vec<String>,
}

impl Served {
    /// Start `cmd` (already `serve ...`) and wait for its "listening on" line.
    pub fn spawn(mut cmd: Command) -> Served {
        cmd.stderr(Stdio::piped()).stdout(Stdio::null());
        #[allow(clippy::zombie_processes)] // reaped in `wait` or in `Drop`
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut log = Vec::new();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no 'listening on' line; log so far: {log:#?}"));
            let word_after = |marker: &str| {
                line.split(marker).nth(1).map(|rest| {
                    let word = rest.split_whitespace().next().unwrap_or("");
                    word.trim_end_matches(';').to_string()
                })
            };
            let found = word_after("listening on http://")
                .map(|a| ("http", a))
                .or_else(|| word_after("listening on https://").map(|a| ("https", a)));
            let boot_addr = word_after("boot files on http://");
            log.push(line);
            if let Some((scheme, addr)) = found {
                return Served {
                    child,
                    addr,
                    scheme: scheme.to_string(),
                    boot_addr,
                    lines: rx,
                    log,
                };
            }
        }
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Wait for the process to exit; return its exit code and the rest of its log.
    pub fn wait(mut self) -> (Option<i32>, Vec<String>) {
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.log.push(line);
                }
                return (status.code(), std::mem::take(&mut self.log));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("stoker did not exit within 10 s; log: {:#?}", self.log);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run `cmd`, which must exit 0 (else the test fails showing both outputs); its standard output.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Run `cmd` with `stdin` on its standard input (a password, as an operator pipes it); its
/// exit code, standard output and standard error.
pub fn run_with_stdin(cmd: &mut Command, stdin: &str) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `cmd`, which must fail; its exit code and standard error.
pub fn run_err(cmd: &mut Command) -> (Option<i32>, String) {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    (out.status.code(), stderr)
}
