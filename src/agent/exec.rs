//! Running one graph task on a node: `shell`, `upload_file` and `reboot` (more types join as the
//! orchestration lands). Tasks arrive fully rendered (YAQL already evaluated by the master).
//!
//! Everything happens under a root directory: `/` on a real node, a sandbox directory for
//! simulated nodes and tests, so absolute paths in tasks are taken relative to it and a shell
//! task runs with `STOKER_ROOT` set and its working directory inside it. Output is kept as a
//! bounded tail, the part an operator needs to see why a task failed.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How much of a task's output is kept.
pub const OUTPUT_TAIL_BYTES: usize = 8 * 1024;

/// A task as the master hands it to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub parameters: Value,
}

/// What running a task gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub ok: bool,
    pub exit_code: Option<i32>,
    /// The last [`OUTPUT_TAIL_BYTES`] of stdout and stderr, interleaved as written.
    pub output_tail: String,
    /// Why it failed, in one line, when it did.
    pub error: Option<String>,
}

impl Outcome {
    fn failed(error: String) -> Outcome {
        Outcome {
            ok: false,
            exit_code: None,
            output_tail: String::new(),
            error: Some(error),
        }
    }
}

/// Runs tasks under a root directory.
#[derive(Debug, Clone)]
pub struct Executor {
    root: PathBuf,
    /// In a sandbox, `reboot` is recorded instead of performed.
    sandbox: bool,
}

impl Executor {
    /// An executor for a real node: root `/`, reboots for real.
    pub fn node() -> Executor {
        Executor {
            root: PathBuf::from("/"),
            sandbox: false,
        }
    }

    /// An executor confined to `root` (simulated nodes, tests).
    pub fn sandbox(root: PathBuf) -> Executor {
        Executor {
            root,
            sandbox: true,
        }
    }

    /// `path` from a task, placed under the root; `..` is refused so a task cannot leave it.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        let mut out = self.root.clone();
        for part in Path::new(path).components() {
            match part {
                Component::Normal(p) => out.push(p),
                Component::RootDir | Component::CurDir => {}
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(format!("path {path:?} may not contain '..'"));
                }
            }
        }
        Ok(out)
    }

    /// Run one task to completion.
    pub fn run(&self, task: &TaskSpec) -> Outcome {
        let p = &task.parameters;
        match task.kind.as_str() {
            "shell" => self.shell(p),
            "upload_file" => self.upload_file(p),
            "reboot" => self.reboot(p),
            // Types whose work happens on the master, or that do nothing on a node.
            "skipped" | "stage" | "group" => Outcome {
                ok: true,
                exit_code: None,
                output_tail: String::new(),
                error: None,
            },
            other => Outcome::failed(format!(
                "task {} has type {other:?}, which this agent cannot run",
                task.id
            )),
        }
    }

    fn shell(&self, p: &Value) -> Outcome {
        let Some(cmd) = p.get("cmd").and_then(Value::as_str) else {
            return Outcome::failed("shell task without parameters.cmd".to_string());
        };
        let timeout = Duration::from_secs(p.get("timeout").and_then(Value::as_u64).unwrap_or(300));
        let retries = p.get("retries").and_then(Value::as_u64).unwrap_or(0);
        let interval = Duration::from_secs(p.get("interval").and_then(Value::as_u64).unwrap_or(1));
        let cwd = match p
            .get("cwd")
            .and_then(Value::as_str)
            .map(|c| self.resolve(c))
        {
            Some(Ok(dir)) => dir,
            Some(Err(e)) => return Outcome::failed(e),
            None => self.root.clone(),
        };
        if let Err(e) = std::fs::create_dir_all(&cwd) {
            return Outcome::failed(format!(
                "cannot create working directory {}: {e}",
                cwd.display()
            ));
        }
        let mut attempt = 0;
        loop {
            let outcome = run_shell(cmd, &cwd, &self.root, timeout);
            if outcome.ok || attempt >= retries {
                return outcome;
            }
            attempt += 1;
            std::thread::sleep(interval);
        }
    }

    fn upload_file(&self, p: &Value) -> Outcome {
        let (Some(path), Some(data)) = (
            p.get("path").and_then(Value::as_str),
            p.get("data").and_then(Value::as_str),
        ) else {
            return Outcome::failed(
                "upload_file task needs parameters.path and parameters.data".into(),
            );
        };
        let target = match self.resolve(path) {
            Ok(t) => t,
            Err(e) => return Outcome::failed(e),
        };
        let write = || -> std::io::Result<()> {
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // Write beside the target and rename, so a reader never sees half a file.
            let tmp = target.with_extension("stoker-tmp");
            std::fs::write(&tmp, data)?;
            if let Some(mode) = p.get("permissions").and_then(Value::as_str) {
                use std::os::unix::fs::PermissionsExt;
                let mode = u32::from_str_radix(mode, 8).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("permissions {mode:?} is not octal"),
                    )
                })?;
                std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
            }
            std::fs::rename(&tmp, &target)
        };
        match write() {
            Ok(()) => Outcome {
                ok: true,
                exit_code: None,
                output_tail: format!("wrote {} bytes to {path}", data.len()),
                error: None,
            },
            Err(e) => Outcome::failed(format!("cannot write {path}: {e}")),
        }
    }

    fn reboot(&self, _p: &Value) -> Outcome {
        if self.sandbox {
            let marker = self.root.join("REBOOTED");
            let count = std::fs::read_to_string(&marker)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .unwrap_or(0);
            return match std::fs::write(&marker, format!("{}\n", count + 1)) {
                Ok(()) => Outcome {
                    ok: true,
                    exit_code: None,
                    output_tail: "reboot recorded (sandbox)".to_string(),
                    error: None,
                },
                Err(e) => Outcome::failed(format!("cannot record the reboot: {e}")),
            };
        }
        run_shell(
            "sync; reboot",
            Path::new("/"),
            Path::new("/"),
            Duration::from_secs(30),
        )
    }
}

/// Keep the last `OUTPUT_TAIL_BYTES` of a byte stream, cut at a character boundary.
fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(OUTPUT_TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

fn run_shell(cmd: &str, cwd: &Path, root: &Path, timeout: Duration) -> Outcome {
    // stdout and stderr share one pipe, so the tail keeps their interleaving.
    let (reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return Outcome::failed(format!("cannot create a pipe: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return Outcome::failed(format!("cannot create a pipe: {e}")),
    };
    let child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(cwd)
        .env("STOKER_ROOT", root)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return Outcome::failed(format!("cannot start sh: {e}")),
    };
    let collector = std::thread::spawn(move || {
        let mut reader = reader;
        let mut kept: Vec<u8> = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > 2 * OUTPUT_TAIL_BYTES {
                kept.drain(..kept.len() - OUTPUT_TAIL_BYTES);
            }
        }
        kept
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() >= timeout => {
                // Kill the whole process group: the shell and whatever it started.
                let _ = Command::new("kill")
                    .args(["-s", "KILL", "--", &format!("-{}", child.id())])
                    .stderr(Stdio::null())
                    .status();
                let _ = child.wait();
                break Err(format!("timed out after {} s", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("cannot wait for sh: {e}")),
        }
    };
    let output = tail(&collector.join().unwrap_or_default());
    match status {
        Ok(s) => Outcome {
            ok: s.success(),
            exit_code: s.code(),
            error: (!s.success()).then(|| match s.code() {
                Some(code) => format!("command exited with {code}"),
                None => "command was killed by a signal".to_string(),
            }),
            output_tail: output,
        },
        Err(error) => Outcome {
            ok: false,
            exit_code: None,
            output_tail: output,
            error: Some(error),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(kind: &str, parameters: Value) -> TaskSpec {
        TaskSpec {
            id: "t".into(),
            kind: kind.into(),
            parameters,
        }
    }

    #[test]
    fn shell_runs_in_the_sandbox_and_keeps_output() {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf());
        let out = ex.run(&task(
            "shell",
            json!({"cmd": "echo hello; echo oops >&2; touch made; test \"$STOKER_ROOT\" != ''", "cwd": "/etc/fuel"}),
        ));
        assert!(out.ok, "{out:?}");
        assert_eq!(out.output_tail, "hello\noops\n");
        assert!(dir.path().join("etc/fuel/made").exists());
        let out = ex.run(&task("shell", json!({"cmd": "echo no; exit 3"})));
        assert_eq!((out.ok, out.exit_code), (false, Some(3)));
        assert_eq!(out.error.as_deref(), Some("command exited with 3"));
    }

    #[test]
    fn shell_timeout_kills_the_group_and_retries_count() {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf());
        let started = Instant::now();
        let out = ex.run(&task(
            "shell",
            json!({"cmd": "echo start; sleep 30 & wait", "timeout": 1}),
        ));
        assert!(!out.ok);
        assert_eq!(out.error.as_deref(), Some("timed out after 1 s"));
        assert_eq!(out.output_tail, "start\n");
        assert!(started.elapsed() < Duration::from_secs(10));
        let out = ex.run(&task(
            "shell",
            json!({"cmd": "echo x >> tries; [ $(wc -l < tries) -ge 3 ]", "retries": 5, "interval": 0}),
        ));
        assert!(out.ok);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("tries")).unwrap(),
            "x\nx\nx\n"
        );
    }

    #[test]
    fn long_output_keeps_only_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf());
        let out = ex.run(&task("shell", json!({"cmd": "seq 1 100000"})));
        assert!(out.ok);
        assert!(out.output_tail.len() <= OUTPUT_TAIL_BYTES);
        assert!(out.output_tail.ends_with("99999\n100000\n"));
    }

    #[test]
    fn upload_file_is_atomic_confined_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf());
        let out = ex.run(&task(
            "upload_file",
            json!({"path": "/etc/hosts", "data": "10.0.0.2 node-1\n", "permissions": "0640"}),
        ));
        assert!(out.ok, "{out:?}");
        let written = dir.path().join("etc/hosts");
        assert_eq!(
            std::fs::read_to_string(&written).unwrap(),
            "10.0.0.2 node-1\n"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&written).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let out = ex.run(&task(
            "upload_file",
            json!({"path": "/../../x", "data": ""}),
        ));
        assert_eq!(
            out.error.as_deref(),
            Some("path \"/../../x\" may not contain '..'")
        );
        let out = ex.run(&task("upload_file", json!({"path": "/x"})));
        assert!(!out.ok);
    }

    #[test]
    fn reboot_in_a_sandbox_is_recorded_and_unknown_types_fail() {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf());
        assert!(ex.run(&task("reboot", json!({"timeout": 300}))).ok);
        assert!(ex.run(&task("reboot", json!({}))).ok);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("REBOOTED")).unwrap(),
            "2\n"
        );
        let out = ex.run(&task("puppet", json!({})));
        assert!(!out.ok);
        assert!(out.error.unwrap().contains("cannot run"));
    }
}
