//! A plugin's `pre_build_hook`, run by `stoker plugin build` the way fuel-plugin-builder 4.2.0
//! runs it (`BaseBuildPlugin.run_pre_build_hook` and `utils.exec_cmd`): when `pre_build_hook` at
//! the package root is a regular file this user may execute, the shell command
//! `./pre_build_hook` (`/bin/sh -c`) runs with the package root as its working directory and
//! stoker's environment, before the package is read, validated and packed, so what it writes is
//! checked and built into the archive. A hook that exits non-zero stops the build: the error
//! carries its exit status and the end of its output (stdout and stderr merged, as FPB logs
//! them), and nothing is written. A hook that is not executable is skipped, as FPB skips it;
//! stoker says so. The hook itself is a file of the package and is packed like any other.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use super::PackageError;

/// The hook's file name at the package root (FPB's `pre_build_hook_cmd`).
pub const PRE_BUILD_HOOK: &str = "pre_build_hook";

/// The most of the hook's output kept for an error message.
const TAIL_BYTES: usize = 4096;
/// The most lines of it shown.
const TAIL_LINES: usize = 20;

/// What became of a package's hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hook {
    /// The package has no `pre_build_hook` file.
    Absent,
    /// It has one that this user may not execute (skipped, as FPB skips it).
    NotExecutable,
    /// It ran and exited 0.
    Ran,
}

/// The end of `bytes`: at most [`TAIL_LINES`] lines, as text.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    let shown = lines[from..].join("\n");
    if shown.is_empty() {
        "(no output)".to_string()
    } else {
        shown
    }
}

/// Run `root`'s `pre_build_hook` if it has an executable one; an error when it cannot be started
/// or does not exit 0.
pub fn run_pre_build_hook(root: &Path) -> Result<Hook, PackageError> {
    let path = root.join(PRE_BUILD_HOOK);
    let Ok(meta) = std::fs::metadata(&path) else {
        return Ok(Hook::Absent);
    };
    if !meta.is_file() {
        return Ok(Hook::Absent);
    }
    // FPB asks os.access(X_OK); stoker runs a file with any execute bit, and one whose bit is
    // not this user's fails in the shell (status 126), which stops the build with that status.
    if meta.permissions().mode() & 0o111 == 0 {
        return Ok(Hook::NotExecutable);
    }
    let (mut reader, writer) = std::io::pipe().map_err(|e| PackageError::io(&path, e))?;
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!("./{PRE_BUILD_HOOK}"))
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(writer.try_clone().map_err(|e| PackageError::io(&path, e))?)
        .stderr(writer);
    let mut child = cmd.spawn().map_err(|e| PackageError::io(&path, e))?;
    // The command holds the pipe's write ends until it is dropped: drop it, or reading never
    // ends.
    drop(cmd);
    let mut kept: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * TAIL_BYTES {
                    kept.drain(..kept.len() - TAIL_BYTES);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PackageError::io(&path, e));
            }
        }
    }
    let status = child.wait().map_err(|e| PackageError::io(&path, e))?;
    if status.success() {
        return Ok(Hook::Ran);
    }
    let status = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "failed".to_string(),
    };
    let from = kept.len().saturating_sub(TAIL_BYTES);
    Err(PackageError::Hook {
        status,
        tail: tail(&kept[from..]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(dir: &Path, script: &str, mode: u32) {
        let path = dir.join(PRE_BUILD_HOOK);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_hook_runs_in_the_package_root_and_a_failure_says_how_it_ended() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(run_pre_build_hook(dir.path()).unwrap(), Hook::Absent);
        hook(dir.path(), "#!/bin/sh\ntouch ran\n", 0o644);
        assert_eq!(run_pre_build_hook(dir.path()).unwrap(), Hook::NotExecutable);
        assert!(!dir.path().join("ran").exists());
        hook(dir.path(), "#!/bin/sh\npwd > ran\n", 0o755);
        assert_eq!(run_pre_build_hook(dir.path()).unwrap(), Hook::Ran);
        let cwd = std::fs::read_to_string(dir.path().join("ran")).unwrap();
        assert_eq!(
            Path::new(cwd.trim()).canonicalize().unwrap(),
            dir.path().canonicalize().unwrap()
        );
        // Many lines on both streams: the last ones are kept, in order, and the status named.
        hook(
            dir.path(),
            "#!/bin/sh\nfor i in $(seq 1 5000); do echo \"out $i\"; done\necho 'last words' >&2\nexit 3\n",
            0o755,
        );
        let e = run_pre_build_hook(dir.path()).unwrap_err().to_string();
        assert!(e.starts_with("pre_build_hook exited with status 3;"), "{e}");
        assert!(e.ends_with("out 4999\nout 5000\nlast words"), "{e}");
        assert_eq!(e.lines().count(), 1 + TAIL_LINES, "{e}");
        // Without a #! line the shell runs it, as `sh -c ./pre_build_hook` does in FPB.
        hook(dir.path(), "exit 5\n", 0o700);
        let e = run_pre_build_hook(dir.path()).unwrap_err().to_string();
        assert!(e.starts_with("pre_build_hook exited with status 5;"), "{e}");
        assert!(e.ends_with("(no output)"), "{e}");
    }
}
