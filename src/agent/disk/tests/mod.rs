//! Tests of the disk work against the real tools: tables made and read back by `sfdisk`,
//! filesystems made by `mke2fs`, `mkfs.vfat` and `mkswap` and identified by `blkid`, config
//! drives listed and read by mtools and checked by `fsck.vfat` (FAT) or listed and read by
//! `isoinfo` and `xorriso` (ISO 9660), and (as root) loop devices mounted. The tools are
//! Debian packages (util-linux, e2fsprogs, dosfstools, mtools, genisoimage, xorriso), not on
//! every machine: the tests that run them are `#[ignore]`d with that reason, so `cargo test`
//! needs nothing beyond Rust, and `.ci/run` installs the tools and runs them with `--ignored`,
//! where a missing one fails its test with the package to install.

mod config_drive;
mod fs;
mod iso9660;
mod mount;
mod table;

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const MIB: u64 = 1 << 20;

fn package_of(program: &str) -> &'static str {
    match program {
        "mke2fs" | "debugfs" | "e2fsck" => "e2fsprogs",
        "mkfs.vfat" | "fsck.vfat" => "dosfstools",
        "mdir" | "mtype" => "mtools",
        "isoinfo" | "isovfy" | "genisoimage" => "genisoimage",
        "xorriso" => "xorriso",
        _ => "util-linux",
    }
}

/// Runs a tool and returns its stdout and stderr; panics, saying what to install, if it is
/// missing, and with its output if it fails.
pub fn tool_io(program: &str, args: &[&str], stdin: &[u8]) -> (String, String) {
    let mut child = Command::new(program)
        .args(args)
        .env("MTOOLS_SKIP_CHECK", "1")
        .env("LC_ALL", "C")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{program}` ({e}): this test needs it; install the {} package \
                 (it is part of the base system; the test does not skip)",
                package_of(program)
            )
        });
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}):\n{o}\n{e}",
        args.join(" "),
        out.status
    );
    (o, e)
}

/// Runs a tool for the bytes it writes (a file it extracts): `tool_io`'s rules.
pub fn tool_bytes(program: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .env("MTOOLS_SKIP_CHECK", "1")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{program}` ({e}): this test needs it; install the {} package \
                 (the test does not skip)",
                package_of(program)
            )
        });
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The file at `path` inside ISO image `img`, as `isoinfo -R -x` extracts it.
pub fn isoinfo_extract(img: &str, path: &str) -> Vec<u8> {
    tool_bytes("isoinfo", &["-R", "-i", img, "-x", &format!("/{path}")])
}

pub fn tool(program: &str, args: &[&str]) -> String {
    tool_io(program, args, b"").0
}

/// A zero-filled file of `bytes` bytes.
pub fn blank(dir: &Path, name: &str, bytes: u64) -> PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .set_len(bytes)
        .unwrap();
    path
}

/// Partitions `path` with an sfdisk script.
pub fn sfdisk(path: &Path, script: &str) {
    tool_io(
        "sfdisk",
        &["-q", &path.display().to_string()],
        script.as_bytes(),
    );
}

/// `sfdisk --json`'s partition table.
pub fn sfdisk_json(path: &Path) -> serde_json::Value {
    let out = tool("sfdisk", &["--json", &path.display().to_string()]);
    serde_json::from_str::<serde_json::Value>(&out).unwrap()["partitiontable"].clone()
}

/// `sfdisk --verify`'s whole report (it exits 0 even when it finds errors).
pub fn sfdisk_verify(path: &Path) -> String {
    let (o, e) = tool_io("sfdisk", &["--verify", &path.display().to_string()], b"");
    format!("{o}{e}")
}

/// Grows (or shrinks) a file, as writing an image to a larger disk leaves it.
pub fn resize(path: &Path, bytes: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(bytes)
        .unwrap();
}

/// Makes a filesystem with `mkfs` (its arguments before the file) in a file of `bytes`
/// bytes, and copies it into `disk` at `offset`.
pub fn put_fs(disk: &Path, offset: u64, bytes: u64, mkfs: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let fs = blank(dir.path(), "fs.img", bytes);
    let mut args: Vec<String> = mkfs[1..].iter().map(|s| s.to_string()).collect();
    args.push(fs.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tool(mkfs[0], &args);
    let image = std::fs::read(&fs).unwrap();
    let out = std::fs::OpenOptions::new().write(true).open(disk).unwrap();
    out.write_all_at(&image, offset).unwrap();
}

/// `blkid -p -o export` of the filesystem at `offset` of `file`, as key/value pairs.
pub fn blkid(file: &Path, offset: u64) -> std::collections::BTreeMap<String, String> {
    let out = tool(
        "blkid",
        &[
            "-p",
            "-O",
            &offset.to_string(),
            "-o",
            "export",
            &file.display().to_string(),
        ],
    );
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
