//! Writing files into a root directory, and (as root) a real ext4 partition of a loop device
//! mounted, written and unmounted.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::*;
use crate::agent::disk::fs::{self, FsKind, ROOT_LABELS};
use crate::agent::disk::mount::{self, NewFile};
use crate::agent::disk::{Disk, DiskError, FsInfo, PartKind, Partition};

fn file(path: &str, mode: u32, contents: &str) -> NewFile {
    NewFile {
        path: path.into(),
        mode,
        contents: contents.as_bytes().to_vec(),
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn files_are_written_with_parents_and_modes_and_replaced_whole() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    mount::write_files(
        r,
        &[
            file("/etc/stoker/agent.toml", 0o600, "master = 1\n"),
            file("/usr/local/bin/hook", 0o755, "#!/bin/sh\n"),
            file("/./etc//hostname", 0o644, "node-1\n"),
        ],
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(r.join("etc/stoker/agent.toml")).unwrap(),
        "master = 1\n"
    );
    assert_eq!(mode(&r.join("etc/stoker/agent.toml")), 0o600);
    assert_eq!(mode(&r.join("usr/local/bin/hook")), 0o755);
    assert_eq!(
        std::fs::read_to_string(r.join("etc/hostname")).unwrap(),
        "node-1\n"
    );
    for dir in ["etc", "etc/stoker", "usr", "usr/local", "usr/local/bin"] {
        assert!(r.join(dir).is_dir());
        assert_eq!(mode(&r.join(dir)), 0o755, "{dir}");
    }
    // Written again: replaced whole, new mode, no temporary file left.
    mount::write_files(r, &[file("/etc/stoker/agent.toml", 0o640, "m")]).unwrap();
    assert_eq!(
        std::fs::read_to_string(r.join("etc/stoker/agent.toml")).unwrap(),
        "m"
    );
    assert_eq!(mode(&r.join("etc/stoker/agent.toml")), 0o640);
    let names: Vec<_> = std::fs::read_dir(r.join("etc/stoker"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["agent.toml"]);
}

#[test]
fn paths_outside_the_root_are_refused_by_name() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    std::fs::create_dir(&root).unwrap();
    for (path, why) in [
        ("../x", "not an absolute path"),
        ("relative/x", "not an absolute path"),
        ("/etc/../../x", "\"..\""),
        ("/", "names no file"),
        ("", "not an absolute path"),
    ] {
        let err = mount::write_files(&root, &[file(path, 0o644, "x")]).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, DiskError::BadPath { .. }), "{path}: {text}");
        assert!(text.contains(why) && text.contains(path), "{path}: {text}");
    }
    assert!(!top.path().join("x").exists());
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn a_symlink_on_the_way_is_refused_and_nothing_is_written_through_it() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    let outside = top.path().join("ramdisk-etc");
    std::fs::create_dir_all(root.join("var")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    // A hostile image: /etc points at the agent's own /etc, /var/lib somewhere relative.
    symlink(&outside, root.join("etc")).unwrap();
    symlink("../etc", root.join("var/lib")).unwrap();
    let err = mount::write_files(&root, &[file("/etc/passwd", 0o644, "x")]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/etc/passwd") && text.contains("/etc is a symlink"),
        "{text}"
    );
    assert!(text.contains(&outside.display().to_string()), "{text}");
    let err = mount::write_files(&root, &[file("/var/lib/stoker/x", 0o644, "x")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("/var/lib is a symlink (to ../etc)"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

    // A file where a directory is needed.
    std::fs::write(root.join("var/run"), "").unwrap();
    let err = mount::write_files(&root, &[file("/var/run/x", 0o644, "x")]).unwrap_err();
    assert!(
        err.to_string().contains("/var/run is not a directory"),
        "{err}"
    );
    // A directory where the file goes.
    let err = mount::write_files(&root, &[file("/var", 0o644, "x")]).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");

    // The file itself a symlink: replaced by the file, its old target untouched.
    std::fs::create_dir(root.join("srv")).unwrap();
    std::fs::write(outside.join("motd"), "theirs").unwrap();
    symlink(outside.join("motd"), root.join("srv/motd")).unwrap();
    mount::write_files(&root, &[file("/srv/motd", 0o644, "ours")]).unwrap();
    assert!(
        !std::fs::symlink_metadata(root.join("srv/motd"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(root.join("srv/motd")).unwrap(),
        "ours"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("motd")).unwrap(),
        "theirs"
    );
}

#[test]
#[ignore = "runs disk tools (fdisk, e2fsprogs, dosfstools, mtools, genisoimage, xorriso); .ci/run installs them and runs these with --ignored"]
fn a_sandbox_stands_in_for_the_mount() {
    let sandbox = tempfile::tempdir().unwrap();
    let part = Partition {
        number: 2,
        start: MIB,
        size: MIB,
        kind: PartKind::Mbr(0x83),
    };
    let fs = FsInfo {
        kind: FsKind::Ext4,
        label: None,
        uuid: None,
    };
    let m = mount::mount(Path::new("/dev/sdz"), &part, &fs, Some(sandbox.path())).unwrap();
    let dir = sandbox.path().join("installed/sdz-part2");
    assert_eq!(m.path(), dir);
    assert!(dir.is_dir());
    mount::write_files(m.path(), &[file("/etc/x", 0o644, "x")]).unwrap();
    m.finish().unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("etc/x")).unwrap(), "x");
}

/// A loop device this test attached, detached when dropped.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

fn mounted(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&*dir.display().to_string()))
}

/// The node path for real: a loop device's ext4 partition found, mounted, written, unmounted;
/// the files then read back from the partition's bytes by debugfs. Needs root: without it the
/// test fails saying so (it never passes untested); `.ci/run` runs it as root and, when it is
/// not root, skips it by name and prints that it did.
#[test]
#[ignore = "needs root (losetup, mount) and disk tools (fdisk, e2fsprogs); .ci/run runs it as root with --ignored"]
fn a_real_ext4_partition_is_mounted_written_and_unmounted() {
    assert_eq!(
        tool("id", &["-u"]).trim(),
        "0",
        "a_real_ext4_partition_is_mounted_written_and_unmounted needs root (losetup and mount)"
    );
    let dir = tempfile::tempdir().unwrap();
    let img = blank(dir.path(), "disk.img", 24 * MIB);
    sfdisk(&img, "label: gpt\nsize=4MiB,type=U\nsize=16MiB,type=L\n");
    put_fs(
        &img,
        5 * MIB,
        16 * MIB,
        &["mke2fs", "-q", "-F", "-t", "ext4", "-L", "stoker-root"],
    );
    let (part, info) = fs::find_root(&Disk::open_read_only(&img).unwrap(), ROOT_LABELS).unwrap();
    assert_eq!((part.number, info.kind), (2, FsKind::Ext4));

    let dev = tool(
        "losetup",
        &["--find", "--show", "--partscan", &img.display().to_string()],
    )
    .trim()
    .to_string();
    assert!(dev.starts_with("/dev/loop"), "{dev}");
    let attached = Loop(dev.clone());
    let m = mount::mount(Path::new(&dev), &part, &info, None).unwrap();
    let name = dev.trim_start_matches("/dev/");
    assert_eq!(m.path(), Path::new(&format!("/run/stoker/target-{name}-2")));
    assert!(mounted(m.path()), "{} is not mounted", m.path().display());
    let agent = "master = \"https://10.20.0.2\"\n";
    mount::write_files(
        m.path(),
        &[
            file("/etc/stoker/agent.toml", 0o600, agent),
            file(
                "/etc/systemd/system/stoker-agent.service",
                0o644,
                "[Service]\n",
            ),
        ],
    )
    .unwrap();
    let at = m.path().to_path_buf();
    m.finish().unwrap();
    assert!(!mounted(&at), "still mounted after finish");
    assert!(!at.exists(), "the mount point is removed");
    drop(attached);

    // The partition's own bytes hold the files.
    let bytes = std::fs::read(&img).unwrap();
    let part_img = dir.path().join("part.img");
    std::fs::write(
        &part_img,
        &bytes[part.start as usize..(part.start + part.size) as usize],
    )
    .unwrap();
    let p = part_img.display().to_string();
    assert_eq!(
        tool("debugfs", &["-R", "cat /etc/stoker/agent.toml", &p]),
        agent
    );
    let stat = tool("debugfs", &["-R", "stat /etc/stoker/agent.toml", &p]);
    assert!(stat.contains("Mode:  0600"), "{stat}");
    tool("e2fsck", &["-f", "-n", &p]);
}
