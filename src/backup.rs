//! Backups of a master and their restore (`stoker backup FILE`, `stoker restore FILE`).
//!
//! A backup is what an operator needs to rebuild the master on a new machine, and nothing that
//! can be made again. It holds, under `data/` in one gzipped tar:
//!
//! - `stoker.db`: a consistent copy of the database taken while the daemon serves
//!   (`store::backup`, SQLite's online backup API), checked with `integrity_check` and
//!   `foreign_key_check` before the backup counts;
//! - `bmc.key`: without it the BMC passwords sealed in the database never open again;
//! - `tls/`: the self-signed certificate and key made on first start, whose fingerprint every
//!   node's kernel command line and every installed service agent pins: a new one would cut
//!   the installed nodes off;
//! - `plugins/`: the installed packages' files, which the database's plugin rows point at and
//!   which an operator may no longer have (hidden folders of interrupted installs left out);
//!
//! and, last, `manifest.json`: the format, the stoker version and schema version that wrote
//! it, the time, and every member's path, size and SHA-256. Left out, since they can be made
//! again: `images/` (kernels, initrds and OS images, built by `images/*.sh` or downloaded),
//! `tftp/` (iPXE binaries; embedded ones fill the gaps), `snapshots/` (diagnostic archives),
//! `demo/` (the demo's sandboxes), `initial-admin-password` (a first start's hint: the users
//! are in the database), the `-wal`/`-shm` files (the copy is whole without them) and
//! `stoker.lock`.
//!
//! The file is written beside its name as a hidden temporary file, synced and then linked or
//! renamed into place, so a reader never sees half a backup; an existing file is replaced only
//! when asked (`force`).
//!
//! A restore runs only while it holds the data directory's lock ([`crate::lock`]), which a
//! serving daemon holds. It unpacks the archive into a hidden folder of the data directory,
//! checks the manifest, every member's size and checksum, that nothing else is in it, that the
//! schema is one this build knows, and the database's integrity; any failure removes the folder
//! and changes nothing else. Then the current database (with its `-wal`/`-shm`), key, `tls/`
//! and `plugins/` are renamed aside (`NAME.before-restore-TIME`) and the restored ones renamed
//! into place, the database last. The next `stoker serve` migrates an older schema as usual.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::lock::{DataLock, LockError};
use crate::store::StoreError;

/// The manifest's format number; a restore refuses others.
pub const FORMAT: u32 = 1;
/// The manifest's name in the archive.
pub const MANIFEST: &str = "manifest.json";
/// The folder of the data directory's files in the archive.
const DATA: &str = "data";
/// The database's file name in the data directory.
const DATABASE: &str = "stoker.db";
/// What a backup carries from the data directory besides the database, in the order a
/// restore puts them in place (the database comes last).
const CARRIED: &[&str] = &[
    crate::package::install::PLUGINS_DIR,
    "tls",
    crate::bmc::vault::KEY_FILE,
];
/// What is left out, and said so in the manifest.
const LEFT_OUT: &[&str] = &[
    "images/",
    "tftp/",
    "snapshots/",
    "demo/",
    "initial-admin-password",
    "stoker.db-wal",
    "stoker.db-shm",
    "stoker.lock",
];
/// The largest manifest a restore reads.
const MAX_MANIFEST: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{} exists: give --force to replace it", .0.display())]
    Exists(PathBuf),
    #[error("no database at {}: nothing to back up", .0.display())]
    NoDatabase(PathBuf),
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the disk holding {} is full; nothing was written", .0.display())]
    DiskFull(PathBuf),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot restore: {0}")]
    Lock(#[from] LockError),
    #[error("{} is not a whole stoker backup: {reason}; nothing was changed", .path.display())]
    NotABackup { path: PathBuf, reason: String },
    #[error(
        "{}: member {member} {reason}: the backup is damaged; nothing was changed",
        .path.display()
    )]
    Member {
        path: PathBuf,
        member: String,
        reason: String,
    },
    #[error(
        "{} holds schema version {found}, newer than this stoker knows ({latest}): restore it \
         with the stoker that made it or a newer one; nothing was changed",
        .path.display()
    )]
    TooNew {
        path: PathBuf,
        found: u32,
        latest: u32,
    },
}

/// An I/O error on `path`, a full disk said as such.
fn io_err(path: &Path) -> impl Fn(std::io::Error) -> BackupError + '_ {
    move |source| {
        if source.kind() == std::io::ErrorKind::StorageFull {
            BackupError::DiskFull(path.to_path_buf())
        } else {
            BackupError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    }
}

/// What `manifest.json` says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub format: u32,
    pub stoker_version: String,
    pub schema: u32,
    pub created_at: i64,
    pub members: Vec<Member>,
    /// What the data directory may hold that a backup leaves out, as it can be made again.
    pub left_out: Vec<String>,
}

/// One member of the archive: a file (`sha256` of its bytes) or a folder (`sha256` None).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Member {
    pub path: String,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256: Option<String>,
}

/// What a backup wrote.
#[derive(Debug)]
pub struct Written {
    pub manifest: Manifest,
    /// How often the database copy started again because the daemon wrote during it.
    pub restarts: u32,
    pub bytes: u64,
}

/// A hidden scratch path beside `near` (same file system, so a rename is atomic), removed
/// when dropped unless kept.
struct Scratch {
    path: PathBuf,
    keep: bool,
}

impl Scratch {
    fn beside(near: &Path, what: &str) -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = near.parent().unwrap_or(Path::new("."));
        let name = near
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = dir.join(format!(
            ".{name}.{what}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        Scratch { path, keep: false }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
    read: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// Write a backup of the master whose data directory is `data_dir` to `file`.
pub fn backup(data_dir: &Path, file: &Path, force: bool, now: i64) -> Result<Written, BackupError> {
    let db = data_dir.join(DATABASE);
    if !db.is_file() {
        return Err(BackupError::NoDatabase(db));
    }
    if !force && std::fs::symlink_metadata(file).is_ok() {
        return Err(BackupError::Exists(file.to_path_buf()));
    }
    let work = Scratch::beside(file, "work");
    std::fs::create_dir(&work.path).map_err(io_err(&work.path))?;
    let copy = work.path.join(DATABASE);
    let info = crate::store::backup::copy_live(&db, &copy)?;

    let tmp = Scratch::beside(file, "tmp");
    let out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp.path)
        .map_err(io_err(&tmp.path))?;
    let gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut members = Vec::new();
    append_file(&mut tar, &copy, &format!("{DATA}/{DATABASE}"), &mut members)?;
    for name in CARRIED {
        let path = data_dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {
                append_tree(&mut tar, &path, &format!("{DATA}/{name}"), &mut members)?
            }
            Ok(m) if m.is_file() => {
                append_file(&mut tar, &path, &format!("{DATA}/{name}"), &mut members)?
            }
            Ok(_) | Err(_) => {}
        }
    }
    let manifest = Manifest {
        format: FORMAT,
        stoker_version: env!("CARGO_PKG_VERSION").to_string(),
        schema: info.schema,
        created_at: now,
        members,
        left_out: LEFT_OUT.iter().map(|s| (*s).to_string()).collect(),
    };
    let body = serde_json::to_vec_pretty(&manifest).map_err(|e| BackupError::Io {
        path: file.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    let mut header = file_header(body.len() as u64, 0o644, now);
    tar.append_data(&mut header, MANIFEST, body.as_slice())
        .map_err(io_err(&tmp.path))?;
    let out = tar
        .into_inner()
        .and_then(flate2::write::GzEncoder::finish)
        .map_err(io_err(&tmp.path))?;
    out.sync_all().map_err(io_err(&tmp.path))?;
    let bytes = out.metadata().map_err(io_err(&tmp.path))?.len();
    drop(out);
    if force {
        std::fs::rename(&tmp.path, file).map_err(io_err(file))?;
    } else {
        // A link fails when the name exists: never replaces a file made meanwhile.
        std::fs::hard_link(&tmp.path, file).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                BackupError::Exists(file.to_path_buf())
            } else {
                io_err(file)(e)
            }
        })?;
    }
    sync_dir(file.parent().unwrap_or(Path::new(".")))?;
    Ok(Written {
        manifest,
        restarts: info.restarts,
        bytes,
    })
}

fn file_header(size: u64, mode: u32, mtime: i64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime(u64::try_from(mtime).unwrap_or(0));
    header
}

type Tar = tar::Builder<flate2::write::GzEncoder<std::fs::File>>;

fn append_file(
    tar: &mut Tar,
    path: &Path,
    name: &str,
    members: &mut Vec<Member>,
) -> Result<(), BackupError> {
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    let meta = file.metadata().map_err(io_err(path))?;
    let size = meta.len();
    let mut header = file_header(size, meta.mode() & 0o7777, meta.mtime());
    let mut reader = Hashing {
        inner: file.take(size),
        hash: Sha256::new(),
        read: 0,
    };
    tar.append_data(&mut header, name, &mut reader)
        .map_err(io_err(path))?;
    if reader.read != size {
        return Err(BackupError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other("the file changed while it was read"),
        });
    }
    members.push(Member {
        path: name.to_string(),
        size,
        sha256: Some(crate::model::hex(&reader.hash.finalize())),
    });
    Ok(())
}

/// A folder and what is in it: folders and regular files, sorted; hidden entries of the
/// plugins folder (interrupted installs) and anything else (links, devices) left out.
fn append_tree(
    tar: &mut Tar,
    dir: &Path,
    name: &str,
    members: &mut Vec<Member>,
) -> Result<(), BackupError> {
    let meta = std::fs::metadata(dir).map_err(io_err(dir))?;
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Directory);
    header.set_size(0);
    header.set_mode(meta.mode() & 0o7777);
    header.set_mtime(u64::try_from(meta.mtime()).unwrap_or(0));
    tar.append_data(&mut header, format!("{name}/"), std::io::empty())
        .map_err(io_err(dir))?;
    members.push(Member {
        path: name.to_string(),
        size: 0,
        sha256: None,
    });
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io_err(dir))?
        .collect::<Result<_, _>>()
        .map_err(io_err(dir))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    let top_plugins = name == format!("{DATA}/{}", crate::package::install::PLUGINS_DIR);
    for entry in entries {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if top_plugins && file_name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let child = format!("{name}/{file_name}");
        let kind = entry.file_type().map_err(io_err(&path))?;
        if kind.is_dir() {
            append_tree(tar, &path, &child, members)?;
        } else if kind.is_file() {
            append_file(tar, &path, &child, members)?;
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), BackupError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// What a restore did.
#[derive(Debug)]
pub struct Restored {
    pub manifest: Manifest,
    /// Where what was in place before went (renamed aside).
    pub set_aside: Vec<PathBuf>,
}

/// Restore `file` into `data_dir` (made if missing), which no daemon may serve.
pub fn restore(data_dir: &Path, file: &Path, now: i64) -> Result<Restored, BackupError> {
    std::fs::create_dir_all(data_dir).map_err(io_err(data_dir))?;
    let _lock = DataLock::acquire(data_dir, "restore")?;
    let staging = Scratch::beside(&data_dir.join(DATABASE), "restore");
    std::fs::create_dir(&staging.path).map_err(io_err(&staging.path))?;
    let manifest = unpack_checked(file, &staging.path)?;
    let staged = staging.path.join(DATA);
    let (schema, _) = crate::store::backup::check(&staged.join(DATABASE)).map_err(|e| match e {
        StoreError::TooNew { found, latest } => BackupError::TooNew {
            path: file.to_path_buf(),
            found,
            latest,
        },
        e => BackupError::Member {
            path: file.to_path_buf(),
            member: format!("{DATA}/{DATABASE}"),
            reason: e.to_string(),
        },
    })?;
    if schema != manifest.schema {
        return Err(BackupError::Member {
            path: file.to_path_buf(),
            member: format!("{DATA}/{DATABASE}"),
            reason: format!(
                "has schema version {schema}, the manifest says {}",
                manifest.schema
            ),
        });
    }

    // Everything checked: set the current files aside and move the restored ones in.
    let stamp = crate::model::iso(now).replace(['-', ':'], "") + "Z";
    let mut set_aside = Vec::new();
    let mut aside = |path: &Path| -> Result<(), BackupError> {
        if std::fs::symlink_metadata(path).is_ok() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let to = path.with_file_name(format!("{name}.before-restore-{stamp}"));
            std::fs::rename(path, &to).map_err(io_err(path))?;
            set_aside.push(to);
        }
        Ok(())
    };
    for name in CARRIED {
        aside(&data_dir.join(name))?;
        let from = staged.join(name);
        if std::fs::symlink_metadata(&from).is_ok() {
            std::fs::rename(&from, data_dir.join(name)).map_err(io_err(&from))?;
        }
    }
    for name in [
        format!("{DATABASE}-wal"),
        format!("{DATABASE}-shm"),
        DATABASE.to_string(),
    ] {
        aside(&data_dir.join(name))?;
    }
    let db = data_dir.join(DATABASE);
    std::fs::rename(staged.join(DATABASE), &db).map_err(io_err(&db))?;
    sync_dir(data_dir)?;
    Ok(Restored {
        manifest,
        set_aside,
    })
}

/// Unpack `file` into `into` and check it against its manifest: only folders and regular files
/// under `data/` and the manifest, every member listed with its size and checksum, nothing
/// missing, a known format.
fn unpack_checked(file: &Path, into: &Path) -> Result<Manifest, BackupError> {
    let not_backup = |reason: String| BackupError::NotABackup {
        path: file.to_path_buf(),
        reason,
    };
    let input = std::fs::File::open(file).map_err(io_err(file))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(input));
    let mut found: BTreeMap<String, (u64, Option<String>)> = BTreeMap::new();
    let mut manifest_body = None;
    let entries = archive
        .entries()
        .map_err(|e| not_backup(format!("cannot read it as a gzipped tar: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| not_backup(format!("truncated or damaged: {e}")))?;
        let raw = entry
            .path()
            .map_err(|e| not_backup(format!("a member's name is unreadable: {e}")))?
            .into_owned();
        let name = raw.to_string_lossy().trim_end_matches('/').to_string();
        if !raw.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(not_backup(format!(
                "member {name} is outside the archive's folder"
            )));
        }
        let kind = entry.header().entry_type();
        if name == MANIFEST && kind.is_file() {
            let mut body = Vec::new();
            entry
                .by_ref()
                .take(MAX_MANIFEST)
                .read_to_end(&mut body)
                .map_err(|e| not_backup(format!("truncated or damaged: {e}")))?;
            manifest_body = Some(body);
            continue;
        }
        if !name.starts_with(&format!("{DATA}/")) && name != DATA {
            return Err(not_backup(format!(
                "member {name} is not one a backup holds"
            )));
        }
        let dest = into.join(&raw);
        if kind.is_dir() {
            std::fs::create_dir_all(&dest).map_err(io_err(&dest))?;
            found.insert(name, (0, None));
        } else if kind.is_file() {
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(io_err(parent))?;
            }
            let mode = entry.header().mode().unwrap_or(0o600) & 0o777;
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode | 0o600)
                .open(&dest)
                .map_err(io_err(&dest))?;
            let mut reader = Hashing {
                inner: &mut entry,
                hash: Sha256::new(),
                read: 0,
            };
            std::io::copy(&mut reader, &mut out).map_err(|e| {
                if e.kind() == std::io::ErrorKind::StorageFull {
                    BackupError::DiskFull(dest.clone())
                } else {
                    not_backup(format!("truncated or damaged in {name}: {e}"))
                }
            })?;
            out.flush()
                .and_then(|()| out.sync_all())
                .map_err(io_err(&dest))?;
            let (read, hash) = (reader.read, crate::model::hex(&reader.hash.finalize()));
            found.insert(name, (read, Some(hash)));
        } else {
            return Err(not_backup(format!(
                "member {name} is neither a file nor a folder"
            )));
        }
    }
    let body = manifest_body.ok_or_else(|| {
        not_backup(format!(
            "it has no {MANIFEST} (a backup's last member: truncated?)"
        ))
    })?;
    let manifest: Manifest = serde_json::from_slice(&body)
        .map_err(|e| not_backup(format!("{MANIFEST} is unreadable: {e}")))?;
    if manifest.format != FORMAT {
        return Err(not_backup(format!(
            "its format is {}, this stoker reads {FORMAT}",
            manifest.format
        )));
    }
    if manifest.schema > crate::store::migrations::latest() {
        return Err(BackupError::TooNew {
            path: file.to_path_buf(),
            found: manifest.schema,
            latest: crate::store::migrations::latest(),
        });
    }
    let member_err = |member: &str, reason: String| BackupError::Member {
        path: file.to_path_buf(),
        member: member.to_string(),
        reason,
    };
    if !manifest
        .members
        .iter()
        .any(|m| m.path == format!("{DATA}/{DATABASE}"))
    {
        return Err(member_err(
            &format!("{DATA}/{DATABASE}"),
            "is not listed".into(),
        ));
    }
    for m in &manifest.members {
        match found.remove(&m.path) {
            None => return Err(member_err(&m.path, "is missing".into())),
            Some((size, _)) if size != m.size => {
                return Err(member_err(
                    &m.path,
                    format!("has {size} bytes, the manifest says {}", m.size),
                ));
            }
            Some((_, hash)) if hash != m.sha256 => {
                return Err(member_err(&m.path, "does not match its SHA-256".into()));
            }
            Some(_) => {}
        }
    }
    if let Some((extra, _)) = found.into_iter().next() {
        return Err(member_err(&extra, "is not in the manifest".into()));
    }
    Ok(manifest)
}
