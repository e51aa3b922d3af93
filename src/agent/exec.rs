//! Running one graph task on a node: `shell`, `upload_file`, `sync`, `copy_files`, `reboot`,
//! `puppet` and the no-op types. Tasks arrive fully rendered (YAQL already evaluated by the
//! master). Files from the master (`sync`, `copy_files`) come through the [`Fetch`] trait, which
//! the deploy loop implements over HTTP; this file never speaks HTTP itself.
//!
//! Everything happens under a root directory: `/` on a real node, a sandbox directory for
//! simulated nodes and tests, so absolute paths in tasks are taken relative to it and a shell
//! task runs with `STOKER_ROOT` set and its working directory inside it. Output goes to a shared
//! [`Tail`] (the loop streams it to the master while the task runs) and is kept as a bounded
//! tail, the part an operator needs to see why a task failed.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::agent::protocol::TaskSpec;

/// How much of a task's output is kept.
pub const OUTPUT_TAIL_BYTES: usize = 8 * 1024;

/// What running a task gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub ok: bool,
    pub exit_code: Option<i32>,
    /// The last [`OUTPUT_TAIL_BYTES`] of stdout and stderr, interleaved as written.
    pub output_tail: String,
    /// Why it failed, in one line, when it did.
    pub error: Option<String>,
    /// What the step reports beside its output (a network probe: the frames it heard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Value>,
}

impl Outcome {
    /// Success, with what the tail holds.
    pub fn done(tail: &Tail) -> Outcome {
        Outcome {
            ok: true,
            exit_code: None,
            output_tail: tail.text(),
            error: None,
            report: None,
        }
    }

    /// Failure for `error`, with what the tail holds.
    pub fn failed_with(tail: &Tail, error: String) -> Outcome {
        Outcome {
            ok: false,
            exit_code: None,
            output_tail: tail.text(),
            error: Some(error),
            report: None,
        }
    }

    fn failed(error: String) -> Outcome {
        Outcome {
            ok: false,
            exit_code: None,
            output_tail: String::new(),
            error: Some(error),
            report: None,
        }
    }
}

/// The bounded output of the step running now, shared between the step (which appends) and the
/// loop's streaming thread (which reads it every second). `version` grows with every append, so
/// the reader knows when there is something new to send.
#[derive(Debug, Clone, Default)]
pub struct Tail {
    inner: Arc<Mutex<TailBuf>>,
}

#[derive(Debug, Default)]
struct TailBuf {
    bytes: Vec<u8>,
    version: u64,
}

impl Tail {
    fn buf(&self) -> std::sync::MutexGuard<'_, TailBuf> {
        // A panic while holding the lock leaves bytes, not broken invariants.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append raw output.
    pub fn push(&self, bytes: &[u8]) {
        let mut b = self.buf();
        b.bytes.extend_from_slice(bytes);
        if b.bytes.len() > 2 * OUTPUT_TAIL_BYTES {
            let cut = b.bytes.len() - OUTPUT_TAIL_BYTES;
            b.bytes.drain(..cut);
        }
        b.version += 1;
    }

    /// Append one line of the agent's own narration.
    pub fn line(&self, text: &str) {
        self.push(format!("{text}\n").as_bytes());
    }

    /// The last [`OUTPUT_TAIL_BYTES`], cut at a character boundary.
    pub fn text(&self) -> String {
        tail(&self.buf().bytes)
    }

    /// The version and text together, for the streaming thread.
    pub fn snapshot(&self) -> (u64, String) {
        let b = self.buf();
        (b.version, tail(&b.bytes))
    }
}

/// Why a download from the master (or an image server) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("{0} was not found (HTTP 404)")]
    NotFound(String),
    #[error("cannot fetch {url}: {reason}")]
    Failed { url: String, reason: String },
}

/// Downloads for the steps: `url` is absolute (`http://...`) or a path on the master (starting
/// with `/`); `query` pairs are percent-encoded by the implementation.
pub trait Fetch: Sync {
    fn get(&self, url: &str, query: &[(&str, &str)]) -> Result<Box<dyn Read + Send>, FetchError>;
}

/// For running tasks without a master (unit tests, `Executor::run`): every download fails.
pub struct NoFetch;

impl Fetch for NoFetch {
    fn get(&self, url: &str, _query: &[(&str, &str)]) -> Result<Box<dyn Read + Send>, FetchError> {
        Err(FetchError::Failed {
            url: url.to_string(),
            reason: "no master to fetch from".to_string(),
        })
    }
}

/// What a task or step may use while it runs.
pub struct Context<'a> {
    pub fetch: &'a dyn Fetch,
    pub tail: &'a Tail,
    /// The run's time budget: caps a shell task's own timeout.
    pub timeout: Duration,
}

/// Runs tasks under a root directory.
#[derive(Debug, Clone)]
pub struct Executor {
    root: PathBuf,
    /// In a sandbox, `reboot` is recorded instead of performed and the hostname is not set.
    sandbox: bool,
    /// Whether shell and puppet commands run. Off by default in a sandbox: a release's
    /// commands are written for a real node (`apt-get install`, `ifup -a`) and must never run
    /// against the machine hosting a simulated one; the command is recorded instead.
    run_commands: bool,
}

impl Executor {
    /// An executor for a real node: root `/`, reboots for real.
    pub fn node() -> Executor {
        Executor {
            root: PathBuf::from("/"),
            sandbox: false,
            run_commands: true,
        }
    }

    /// An executor confined to `root` (simulated nodes, tests).
    pub fn sandbox(root: PathBuf) -> Executor {
        Executor {
            root,
            sandbox: true,
            run_commands: false,
        }
    }

    /// Let a sandbox run shell and puppet commands for real (with `STOKER_ROOT` set and the
    /// working directory inside the sandbox): for tests and tasks written to stay inside it.
    pub fn running_commands(mut self, yes: bool) -> Executor {
        self.run_commands = yes;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn is_sandbox(&self) -> bool {
        self.sandbox
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

    /// Run one task to completion, without a master (downloads fail).
    pub fn run(&self, task: &TaskSpec) -> Outcome {
        let tail = Tail::default();
        self.run_task(
            task,
            &Context {
                fetch: &NoFetch,
                tail: &tail,
                timeout: Duration::from_secs(24 * 3600),
            },
        )
    }

    /// Run one task to completion; output goes to `cx.tail` as it comes.
    pub fn run_task(&self, task: &TaskSpec, cx: &Context<'_>) -> Outcome {
        let p = &task.parameters;
        match task.kind.as_str() {
            "shell" => self.shell(p, cx),
            "upload_file" => self.upload_file(p, cx.tail),
            "sync" => self.sync(p, cx),
            "copy_files" => self.copy_files(p, cx),
            "reboot" => self.reboot(p, cx.tail),
            "erase_node" => self.erase_node(cx.tail),
            "puppet" => self.puppet(p, cx),
            // Types whose work happens on the master, or that do nothing on a node.
            "skipped" | "stage" | "group" => Outcome::done(cx.tail),
            other => Outcome::failed(format!(
                "task {} has type {other:?}, which this agent cannot run",
                task.id
            )),
        }
    }

    fn cwd(&self, p: &Value) -> Result<PathBuf, String> {
        let cwd = match p.get("cwd").and_then(Value::as_str) {
            Some(c) => self.resolve(c)?,
            None => self.root.clone(),
        };
        std::fs::create_dir_all(&cwd)
            .map_err(|e| format!("cannot create working directory {}: {e}", cwd.display()))?;
        Ok(cwd)
    }

    /// Run `cmd` with the task's timeout (capped by the run's), retries and interval.
    fn shell_with_retries(&self, cmd: &str, p: &Value, cx: &Context<'_>) -> Outcome {
        let timeout = Duration::from_secs(p.get("timeout").and_then(Value::as_u64).unwrap_or(300))
            .min(cx.timeout);
        let retries = p.get("retries").and_then(Value::as_u64).unwrap_or(0);
        let interval = Duration::from_secs(p.get("interval").and_then(Value::as_u64).unwrap_or(1));
        let cwd = match self.cwd(p) {
            Ok(dir) => dir,
            Err(e) => return Outcome::failed_with(cx.tail, e),
        };
        if !self.run_commands {
            cx.tail
                .push(format!("sandbox: not run (commands are off): {cmd}\n").as_bytes());
            return Outcome {
                ok: true,
                exit_code: Some(0),
                output_tail: cx.tail.text(),
                error: None,
                report: None,
            };
        }
        let mut attempt = 0;
        loop {
            let outcome = run_shell(cmd, &cwd, &self.root, timeout, cx.tail);
            if outcome.ok || attempt >= retries {
                return outcome;
            }
            attempt += 1;
            std::thread::sleep(interval);
        }
    }

    fn shell(&self, p: &Value, cx: &Context<'_>) -> Outcome {
        let Some(cmd) = p.get("cmd").and_then(Value::as_str) else {
            return Outcome::failed("shell task without parameters.cmd".to_string());
        };
        self.shell_with_retries(cmd, p, cx)
    }

    fn upload_file(&self, p: &Value, tail: &Tail) -> Outcome {
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
        let write = || -> Result<(), String> {
            let mode = mode_of(p, "permissions")?;
            let dir_mode = mode_of(p, "dir_permissions")?;
            write_atomically(&target, dir_mode, mode, &mut data.as_bytes())
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        match write() {
            Ok(()) => {
                tail.line(&format!("wrote {} bytes to {path}", data.len()));
                Outcome::done(tail)
            }
            Err(e) => Outcome::failed_with(tail, format!("cannot write {path}: {e}")),
        }
    }

    /// `sync`: the master packs `src` (an `rsync://MASTER:/plugins/...` URL) as a tar; unpack
    /// it into `dst`.
    fn sync(&self, p: &Value, cx: &Context<'_>) -> Outcome {
        let (Some(src), Some(dst)) = (
            p.get("src").and_then(Value::as_str),
            p.get("dst").and_then(Value::as_str),
        ) else {
            return Outcome::failed("sync task needs parameters.src and parameters.dst".into());
        };
        let target = match self.resolve(dst) {
            Ok(t) => t,
            Err(e) => return Outcome::failed(e),
        };
        let reader = match cx.fetch.get("/api/v1/agent/sync", &[("src", src)]) {
            Ok(r) => r,
            Err(e) => return Outcome::failed_with(cx.tail, format!("sync {src}: {e}")),
        };
        let unpack = || -> std::io::Result<(u64, u64)> {
            std::fs::create_dir_all(&target)?;
            let mut archive = tar::Archive::new(reader);
            archive.set_overwrite(true);
            let (mut files, mut skipped) = (0u64, 0u64);
            for entry in archive.entries()? {
                // unpack_in refuses entries that would land outside the target.
                if entry?.unpack_in(&target)? {
                    files += 1;
                } else {
                    skipped += 1;
                }
            }
            Ok((files, skipped))
        };
        match unpack() {
            Ok((files, skipped)) => {
                cx.tail
                    .line(&format!("synced {files} entries from {src} into {dst}"));
                if skipped > 0 {
                    cx.tail
                        .line(&format!("skipped {skipped} entries pointing outside {dst}"));
                }
                Outcome::done(cx.tail)
            }
            Err(e) => Outcome::failed_with(
                cx.tail,
                format!("sync {src}: cannot unpack into {dst}: {e}"),
            ),
        }
    }

    /// `copy_files`: each `{src, dst}`, src a path on the master.
    fn copy_files(&self, p: &Value, cx: &Context<'_>) -> Outcome {
        let Some(files) = p.get("files").and_then(Value::as_array) else {
            return Outcome::failed("copy_files task needs parameters.files".into());
        };
        let (mode, dir_mode) = match (mode_of(p, "permissions"), mode_of(p, "dir_permissions")) {
            (Ok(m), Ok(d)) => (m, d),
            (Err(e), _) | (_, Err(e)) => return Outcome::failed(e),
        };
        for file in files {
            let (Some(src), Some(dst)) = (
                file.get("src").and_then(Value::as_str),
                file.get("dst").and_then(Value::as_str),
            ) else {
                return Outcome::failed_with(
                    cx.tail,
                    format!("copy_files entry {file} needs src and dst"),
                );
            };
            let target = match self.resolve(dst) {
                Ok(t) => t,
                Err(e) => return Outcome::failed_with(cx.tail, e),
            };
            let mut reader = match cx.fetch.get("/api/v1/agent/file", &[("path", src)]) {
                Ok(r) => r,
                Err(FetchError::NotFound(_)) => {
                    return Outcome::failed_with(
                        cx.tail,
                        format!("copy_files: {src} does not exist on the master"),
                    );
                }
                Err(e) => return Outcome::failed_with(cx.tail, format!("copy_files: {e}")),
            };
            match write_atomically(&target, dir_mode, mode, &mut reader) {
                Ok(n) => cx.tail.line(&format!("copied {src} to {dst} ({n} bytes)")),
                Err(e) => {
                    return Outcome::failed_with(cx.tail, format!("cannot write {dst}: {e}"));
                }
            }
        }
        Outcome::done(cx.tail)
    }

    fn puppet(&self, p: &Value, cx: &Context<'_>) -> Outcome {
        let Some(manifest) = p.get("puppet_manifest").and_then(Value::as_str) else {
            return Outcome::failed("puppet task without parameters.puppet_manifest".into());
        };
        if find_on_path("puppet").is_none() {
            return Outcome::failed_with(
                cx.tail,
                "puppet is not installed on this node".to_string(),
            );
        }
        let mut cmd = String::from("puppet apply --detailed-exitcodes --logdest console");
        if let Some(modules) = p.get("puppet_modules").and_then(Value::as_str) {
            cmd.push_str(&format!(" --modulepath={}", shell_quote(modules)));
        }
        cmd.push(' ');
        cmd.push_str(&shell_quote(manifest));
        // --detailed-exitcodes: 2 means "changes applied", a success.
        let cmd = format!("{cmd}; rc=$?; [ $rc -eq 2 ] && rc=0; exit $rc");
        self.shell_with_retries(&cmd, p, cx)
    }

    /// Fuel's `erase_node`: the node's boot disk loses its partition tables (its first and
    /// last MiB, where MBR and both GPTs live), so its next boot is from the network and it is
    /// discovered again; the deploy loop reboots it once the result is reported. A sandbox
    /// without a disk under its root records it.
    fn erase_node(&self, tail: &Tail) -> Outcome {
        let disk = match self.image_target(&Value::Null) {
            Ok(d) => d,
            Err(e) if self.sandbox => {
                tail.line(&format!("no disk to erase in the sandbox ({e}); recorded"));
                return Outcome::done(tail);
            }
            Err(e) => return Outcome::failed_with(tail, e),
        };
        if self.sandbox && !disk.exists() {
            tail.line(&format!(
                "no disk {} in the sandbox; the erase is recorded",
                disk.display()
            ));
            return Outcome::done(tail);
        }
        let wipe = || -> std::io::Result<u64> {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&disk)?;
            let size = std::io::Seek::seek(&mut &f, std::io::SeekFrom::End(0))?;
            let mib = 1u64 << 20;
            let zeros = vec![0u8; mib.min(size) as usize];
            f.write_all_at(&zeros, 0)?;
            if size > mib {
                let tail_len = mib.min(size - mib);
                f.write_all_at(&zeros[..tail_len as usize], size - tail_len)?;
            }
            f.sync_all()?;
            Ok(size)
        };
        match wipe() {
            Ok(size) => {
                tail.line(&format!(
                    "erased the partition tables of {} ({size} bytes): the node boots from the \
                     network next",
                    disk.display()
                ));
                Outcome::done(tail)
            }
            Err(e) => Outcome::failed_with(tail, format!("cannot erase {}: {e}", disk.display())),
        }
    }

    fn reboot(&self, _p: &Value, tail: &Tail) -> Outcome {
        if self.sandbox {
            let marker = self.root.join("var/lib/stoker/reboot-requested");
            let count = std::fs::read_to_string(&marker)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .unwrap_or(0);
            let write = || -> std::io::Result<()> {
                if let Some(dir) = marker.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&marker, format!("{}\n", count + 1))
            };
            return match write() {
                Ok(()) => {
                    tail.line("reboot recorded (sandbox)");
                    Outcome::done(tail)
                }
                Err(e) => Outcome::failed_with(tail, format!("cannot record the reboot: {e}")),
            };
        }
        // The reboot itself waits until this result is reported (the deploy loop does it):
        // a node that rebooted before reporting would be handed the same task again.
        tail.line("rebooting once this result is reported");
        Outcome::done(tail)
    }
}

/// An octal mode from a task parameter: "0644", "644" or the number 644 (as Fuel writes it).
fn mode_of(p: &Value, key: &str) -> Result<Option<u32>, String> {
    let text = match p.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => return Err(format!("{key} {other} is not an octal mode")),
    };
    u32::from_str_radix(text.trim(), 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .map(Some)
        .ok_or_else(|| format!("{key} {text:?} is not an octal mode"))
}

/// Create `dir` and its missing parents, giving the new ones `mode`.
fn create_dirs(dir: &Path, mode: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    if let Some(mode) = mode {
        builder.mode(mode);
    }
    builder.create(dir)
}

/// Write `data` beside `target` and rename, so a reader never sees half a file.
fn write_atomically(
    target: &Path,
    dir_mode: Option<u32>,
    mode: Option<u32>,
    data: &mut dyn Read,
) -> std::io::Result<u64> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = target.parent() {
        create_dirs(dir, dir_mode)?;
    }
    let tmp = target.with_extension("stoker-tmp");
    let mut file = std::fs::File::create(&tmp)?;
    let n = std::io::copy(data, &mut file)?;
    if let Some(mode) = mode {
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
    }
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, target)?;
    Ok(n)
}

/// Quote for `sh`.
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The first executable `name` on PATH.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Keep the last `OUTPUT_TAIL_BYTES` of a byte stream, cut at a character boundary.
fn tail(bytes: &[u8]) -> String {
    let mut start = bytes.len().saturating_sub(OUTPUT_TAIL_BYTES);
    // Do not start inside a UTF-8 sequence (continuation bytes are 0b10xxxxxx).
    while start < bytes.len() && start > 0 && bytes[start] & 0xC0 == 0x80 {
        start += 1;
    }
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// Run `cmd` with `sh -c`, its output appended to `tail` as it comes.
pub fn run_shell(cmd: &str, cwd: &Path, root: &Path, timeout: Duration, tail: &Tail) -> Outcome {
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
    let sink = tail.clone();
    let collector = std::thread::spawn(move || {
        let mut reader = reader;
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.push(&buf[..n]);
        }
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
    let _ = collector.join();
    let output = tail.text();
    match status {
        Ok(s) => Outcome {
            ok: s.success(),
            exit_code: s.code(),
            error: (!s.success()).then(|| match s.code() {
                Some(code) => format!("command exited with {code}"),
                None => "command was killed by a signal".to_string(),
            }),
            output_tail: output,
            report: None,
        },
        Err(error) => Outcome {
            ok: false,
            exit_code: None,
            output_tail: output,
            error: Some(error),
            report: None,
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
    fn a_sandbox_records_commands_instead_of_running_them_by_default() {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf());
        let out = ex.run(&task("shell", json!({"cmd": "touch made; exit 3"})));
        assert!(out.ok, "{out:?}");
        assert!(out.output_tail.contains("not run"), "{out:?}");
        assert!(out.output_tail.contains("touch made"), "{out:?}");
        assert!(!dir.path().join("made").exists());
    }

    #[test]
    fn shell_runs_in_the_sandbox_and_keeps_output() {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf()).running_commands(true);
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
        let ex = Executor::sandbox(dir.path().to_path_buf()).running_commands(true);
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
        let ex = Executor::sandbox(dir.path().to_path_buf()).running_commands(true);
        let out = ex.run(&task("shell", json!({"cmd": "seq 1 100000"})));
        assert!(out.ok);
        assert!(out.output_tail.len() <= OUTPUT_TAIL_BYTES);
        assert!(out.output_tail.ends_with("99999\n100000\n"));
    }

    #[test]
    fn upload_file_is_atomic_confined_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let ex = Executor::sandbox(dir.path().to_path_buf()).running_commands(true);
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
        let ex = Executor::sandbox(dir.path().to_path_buf()).running_commands(true);
        assert!(ex.run(&task("reboot", json!({"timeout": 300}))).ok);
        assert!(ex.run(&task("reboot", json!({}))).ok);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("var/lib/stoker/reboot-requested")).unwrap(),
            "2\n"
        );
        let out = ex.run(&task("nonsense", json!({})));
        assert!(!out.ok);
        assert!(out.error.unwrap().contains("cannot run"));
        if find_on_path("puppet").is_none() {
            let out = ex.run(&task("puppet", json!({"puppet_manifest": "/etc/site.pp"})));
            assert_eq!(
                out.error.as_deref(),
                Some("puppet is not installed on this node")
            );
        }
    }
}
