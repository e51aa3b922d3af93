//! The installed OS's root filesystem as a writable directory, and writing files into it.
//!
//! On a node ([`mount`] with no sandbox; the agent runs as root in the bootstrap ramdisk) the
//! partition is mounted for real: when the kernel does not already know the partition at the
//! table's start and size, it is asked to re-read the disk's table (`blockdev --rereadpt`,
//! retried briefly while the disk is busy; `unsafe` is forbidden here, so the BLKRRPART ioctl
//! is busybox's and util-linux's), and where its parsers do not create the partition (a kernel
//! without that table's parser) `partx --add` is tried when it is installed. The partition's
//! device is found under `/sys/class/block/<disk>/` by its `partition` number (`sda1`,
//! `nvme0n1p1`, `loop0p1` alike), checked against the table's start and size, and waited for
//! (at most 5 s in all). Then the filesystem's module is loaded best-effort (`modprobe -q`) and
//! `mount -t <kind> <device> /run/stoker/target-<disk>-<n>` runs; [`Mounted::finish`] runs
//! `sync` and `umount` and removes the directory, and dropping a [`Mounted`] unmounts it
//! best-effort.
//!
//! In a sandbox (the demo and tests) the directory `<sandbox>/installed/<disk>-part<n>` stands
//! for the mounted filesystem and finishing does nothing. That is the one simulated part of the
//! disk work: nothing mounts without root. The root-only test in this folder's
//! `tests/mount.rs` mounts a real ext4 partition of a loop device through this same code, and
//! the lab VM deploy covers a real disk.
//!
//! [`write_files`] never leaves the root it is given: paths are absolute inside the OS, without
//! `..`, and every existing directory on the way is checked not to be a symlink (a hostile
//! image's `/etc -> /` must not make the agent write onto the ramdisk). Each file is written to
//! a temporary name, flushed, given its mode and renamed into place.

use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::Duration;

use super::DiskError;
use super::fs::FsInfo;
use super::table::Partition;

/// Where a node mounts target filesystems.
pub const MOUNT_DIR: &str = "/run/stoker";

/// How often, and how many times in all, the partition's device is looked for.
const POLL: Duration = Duration::from_millis(100);
const POLLS_BEFORE_PARTX: u32 = 10;
const POLLS: u32 = 50;

/// A filesystem mounted (or, in a sandbox, the directory standing for it).
#[derive(Debug)]
pub struct Mounted {
    path: PathBuf,
    /// Mounted for real: unmounted by `finish` or on drop.
    real: bool,
}

impl Mounted {
    /// The directory the filesystem's root is at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and unmounts the filesystem and removes its mount point (nothing in a sandbox).
    pub fn finish(mut self) -> Result<(), DiskError> {
        if !self.real {
            return Ok(());
        }
        self.real = false;
        run("sync", &[])?;
        let dir = self.path.display().to_string();
        run("umount", &[&dir])?;
        // Only an empty directory goes, and its failure leaves nothing half-done.
        let _ = fs::remove_dir(&self.path);
        Ok(())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.real {
            let dir = self.path.display().to_string();
            if run("umount", &[&dir]).is_ok() {
                let _ = fs::remove_dir(&self.path);
            }
        }
    }
}

/// Runs a command, its stderr (or stdout) in the error when it fails.
fn run(program: &str, args: &[&str]) -> Result<String, DiskError> {
    let command = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| DiskError::Command {
            command: command.clone(),
            detail: format!("cannot run {program}: {e}"),
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(if out.stderr.is_empty() {
        &out.stdout
    } else {
        &out.stderr
    })
    .trim()
    .to_string();
    Err(DiskError::Command {
        command,
        detail: format!("{}: {said}", out.status),
    })
}

/// The root filesystem `fs` on partition `part` of `disk`, mounted (or, with a sandbox, the
/// directory standing for it). See the module's documentation.
pub fn mount(
    disk: &Path,
    part: &Partition,
    fs: &FsInfo,
    sandbox: Option<&Path>,
) -> Result<Mounted, DiskError> {
    let name = disk_name(disk);
    if let Some(sandbox) = sandbox {
        let path = sandbox
            .join("installed")
            .join(format!("{name}-part{}", part.number));
        fs::create_dir_all(&path).map_err(|source| DiskError::Write {
            path: path.display().to_string(),
            source,
        })?;
        return Ok(Mounted { path, real: false });
    }
    let err = |detail: String| DiskError::Mount {
        disk: disk.display().to_string(),
        number: part.number,
        detail,
    };
    if !fs.kind.is_mountable() {
        return Err(err(format!("{} cannot be mounted", fs.kind)));
    }
    let device = partition_device(disk, &name, part)?;
    let _ = Command::new("modprobe")
        .args(["-q", fs.kind.name()])
        .status();
    let path = PathBuf::from(MOUNT_DIR).join(format!("target-{name}-{}", part.number));
    fs::create_dir_all(&path).map_err(|source| DiskError::Write {
        path: path.display().to_string(),
        source,
    })?;
    let dir = path.display().to_string();
    // A mount left by an interrupted earlier attempt of the step is ours to take down.
    if is_mount_point(&path) {
        run("umount", &[&dir]).map_err(|e| err(format!("{dir} is still mounted: {e}")))?;
    }
    let dev = device.display().to_string();
    run("mount", &["-t", fs.kind.name(), &dev, &dir]).map_err(|e| err(e.to_string()))?;
    Ok(Mounted { path, real: true })
}

/// The kernel's name of a disk: the last component of its real path (`/dev/disk/by-id/...`
/// resolves to `sda`).
fn disk_name(disk: &Path) -> String {
    let real = fs::canonicalize(disk).unwrap_or_else(|_| disk.to_path_buf());
    real.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "disk".into())
}

fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.display().to_string();
    // Field 5 is the mount point (spaces escaped as \040, which our paths do not have).
    info.lines()
        .any(|l| l.split(' ').nth(4).is_some_and(|m| m == want))
}

/// What the kernel knows of a partition: its device and where it is.
#[derive(Debug)]
struct Known {
    device: PathBuf,
    start: u64,
    size: u64,
}

/// Partition `number` of the disk called `name`, as sysfs has it (start and size in bytes).
fn known_partition(name: &str, number: u32) -> Option<Known> {
    let base = Path::new("/sys/class/block").join(name);
    let read = |p: PathBuf| -> Option<u64> { fs::read_to_string(p).ok()?.trim().parse().ok() };
    fs::read_dir(&base).ok()?.flatten().find_map(|entry| {
        let dir = entry.path();
        (read(dir.join("partition"))? == u64::from(number)).then(|| Known {
            device: Path::new("/dev").join(entry.file_name()),
            start: read(dir.join("start")).unwrap_or(0) * 512,
            size: read(dir.join("size")).unwrap_or(0) * 512,
        })
    })
}

/// The device of `part`, once the kernel knows it where the table says it is.
fn partition_device(disk: &Path, name: &str, part: &Partition) -> Result<PathBuf, DiskError> {
    let matches = |k: &Known| k.start == part.start && k.size == part.size && k.device.exists();
    if let Some(k) = known_partition(name, part.number).filter(matches) {
        return Ok(k.device);
    }
    let dev = disk.display().to_string();
    // BLKRRPART is refused (EBUSY) while a partition of the disk is in use; that passes.
    let mut reread = run("blockdev", &["--rereadpt", &dev]);
    for _ in 0..10 {
        if reread.is_ok() {
            break;
        }
        sleep(Duration::from_millis(200));
        reread = run("blockdev", &["--rereadpt", &dev]);
    }
    let mut partx = None;
    for i in 0..POLLS {
        if let Some(k) = known_partition(name, part.number).filter(matches) {
            return Ok(k.device);
        }
        if i == POLLS_BEFORE_PARTX && known_partition(name, part.number).is_none() {
            let nr = part.number.to_string();
            partx = Some(run("partx", &["--add", "--nr", &nr, &dev]));
        }
        sleep(POLL);
    }
    let seen = match known_partition(name, part.number) {
        Some(k) => format!(
            "the kernel has {} at byte {} with {} bytes",
            k.device.display(),
            k.start,
            k.size
        ),
        None => format!("the kernel shows no partition {} of {name}", part.number),
    };
    let mut tried = vec![match reread {
        Ok(_) => "blockdev --rereadpt succeeded".to_string(),
        Err(e) => e.to_string(),
    }];
    if let Some(Err(e)) = partx {
        tried.push(e.to_string());
    }
    Err(DiskError::Mount {
        disk: dev,
        number: part.number,
        detail: format!(
            "no device for the partition at byte {} with {} bytes after {} s: {seen} ({})",
            part.start,
            part.size,
            POLL.as_millis() * u128::from(POLLS) / 1000,
            tried.join("; ")
        ),
    })
}

/// A file to write into the installed OS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// Absolute inside the OS, e.g. `/etc/stoker/agent.toml`.
    pub path: String,
    /// Permission bits (`0o644`); only the low 12 bits are used.
    pub mode: u32,
    pub contents: Vec<u8>,
}

/// Writes `files` under `root` (the mounted filesystem's root), each created or replaced
/// whole, creating missing parent directories (mode 0755). Refuses relative paths, `..`, and a
/// symlink or non-directory on the way, naming the path.
pub fn write_files(root: &Path, files: &[NewFile]) -> Result<(), DiskError> {
    for file in files {
        write_file(root, file)?;
    }
    Ok(())
}

/// The directory (under `root`) that will hold `path` and the file's name, its missing parents
/// created (mode 0755); refuses relative paths, `..`, and a symlink or non-directory on the way.
fn parent_dir(root: &Path, path_in_os: &str) -> Result<(PathBuf, std::ffi::OsString), DiskError> {
    let refuse = |reason: String| DiskError::BadPath {
        path: path_in_os.to_string(),
        reason,
    };
    let path = Path::new(path_in_os);
    if !path.has_root() {
        return Err(refuse("not an absolute path inside the OS".into()));
    }
    let mut names = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => names.push(n),
            Component::ParentDir => return Err(refuse("it has a \"..\" component".into())),
            Component::Prefix(_) => return Err(refuse("not a Unix path".into())),
        }
    }
    let Some((name, parents)) = names.split_last() else {
        return Err(refuse("it names no file".into()));
    };
    let mut dir = root.to_path_buf();
    let mut inside = PathBuf::from("/");
    for parent in parents {
        dir.push(parent);
        inside.push(parent);
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&dir)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into());
                return Err(refuse(format!(
                    "{} is a symlink (to {to}) in the installed OS; writing through it could \
                     leave its filesystem",
                    inside.display()
                )));
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(refuse(format!(
                    "{} is not a directory in the installed OS",
                    inside.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                DirBuilder::new()
                    .mode(0o755)
                    .create(&dir)
                    .map_err(write_error(&dir))?;
                fs::set_permissions(&dir, Permissions::from_mode(0o755))
                    .map_err(write_error(&dir))?;
            }
            Err(e) => return Err(write_error(&dir)(e)),
        }
    }
    Ok((dir, name.to_os_string()))
}

fn write_error(p: &Path) -> impl FnOnce(std::io::Error) -> DiskError + use<> {
    let p = p.to_path_buf();
    move |source| DiskError::Write {
        path: p.display().to_string(),
        source,
    }
}

fn write_file(root: &Path, file: &NewFile) -> Result<(), DiskError> {
    let refuse = |reason: String| DiskError::BadPath {
        path: file.path.clone(),
        reason,
    };
    let io = write_error;
    let (dir, name) = parent_dir(root, &file.path)?;
    let target = dir.join(&name);
    if fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
        return Err(refuse("it is a directory in the installed OS".into()));
    }
    let temp = dir.join(format!(".{}.stoker-new", name.to_string_lossy()));
    match fs::remove_file(&temp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&temp)(e)),
    }
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut out| {
            out.write_all(&file.contents)?;
            out.set_permissions(Permissions::from_mode(file.mode & 0o7777))?;
            out.sync_all()
        })
        .map_err(io(&temp))
        .and_then(|()| fs::rename(&temp, &target).map_err(io(&target)));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written?;
    fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io(&dir))
}

/// Makes `path` (absolute inside the OS) a symlink to `to` under `root`, replacing a file or
/// link there, with the same checks on the way as [`write_files`]. systemd, for one, reads a
/// unit's enablement (`*.wants/`) only from symlinks.
pub fn write_symlink(root: &Path, path: &str, to: &str) -> Result<(), DiskError> {
    let (dir, name) = parent_dir(root, path)?;
    let target = dir.join(&name);
    if fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
        return Err(DiskError::BadPath {
            path: path.to_string(),
            reason: "it is a directory in the installed OS".into(),
        });
    }
    let temp = dir.join(format!(".{}.stoker-new", name.to_string_lossy()));
    match fs::remove_file(&temp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(write_error(&temp)(e)),
    }
    std::os::unix::fs::symlink(to, &temp).map_err(write_error(&temp))?;
    if let Err(e) = fs::rename(&temp, &target) {
        let _ = fs::remove_file(&temp);
        return Err(write_error(&target)(e));
    }
    fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(write_error(&dir))
}
