//! A stand-in for cloud-init's first boot, for sandboxed nodes (the demo and tests), which have
//! no OS to boot: find the config drive on the disk (an iso9660 or vfat partition labelled
//! `config-2` or `cidata`), read its user data (`openstack/latest/user_data` or `user-data`)
//! with [`super::iso9660::Image`] or a real FAT reader, and do what its `write_files` say under
//! the installed root. Only `write_files` of a
//! JSON `#cloud-config` (what stoker writes); `runcmd` is left to the real cloud-init. It proves
//! the drive on the disk holds what the OS needs.

use std::io::{Cursor, Read};
use std::path::Path;

use serde_json::Value;

use super::config_drive;
use super::fs::{self, FsKind};
use super::iso9660;
use super::mount::{NewFile, write_files};
use super::{Disk, DiskError};

/// The largest config drive read (Ironic's cap).
const MAX_DRIVE: u64 = 64 * 1024 * 1024;

fn bad(problem: impl Into<String>) -> DiskError {
    DiskError::BadContents {
        field: "user_data",
        problem: problem.into(),
    }
}

/// Write the config drive's `write_files` under `root`; the paths written.
pub fn first_boot(disk: &Path, root: &Path) -> Result<Vec<String>, DiskError> {
    let disk = Disk::open_read_only(disk)?;
    let (part, _) = config_drive::find(&disk)?
        .ok_or_else(|| bad("no config drive (iso9660 or vfat config-2 or cidata) on the disk"))?;
    if part.size > MAX_DRIVE {
        return Err(bad(format!(
            "the config drive partition is {} bytes, over {MAX_DRIVE}",
            part.size
        )));
    }
    let mut bytes = vec![0u8; part.size as usize];
    disk.read_at(part.start, &mut bytes, "reading the config drive")?;
    let text = match fs::probe(&bytes).map(|f| f.kind) {
        Some(FsKind::Iso9660) => iso_user_data(&bytes)?,
        _ => fat_user_data(bytes)?,
    };
    let doc: Value = serde_json::from_str(
        text.strip_prefix("#cloud-config\n")
            .ok_or_else(|| bad("not a #cloud-config document"))?,
    )
    .map_err(|e| bad(format!("not a JSON cloud-config: {e}")))?;
    let files = doc["write_files"]
        .as_array()
        .ok_or_else(|| bad("no write_files"))?
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let path = f["path"]
                .as_str()
                .ok_or_else(|| bad(format!("write_files[{i}].path is missing")))?;
            let mode = match f["permissions"].as_str() {
                Some(p) => u32::from_str_radix(p, 8)
                    .map_err(|_| bad(format!("write_files[{i}].permissions {p:?} is not octal")))?,
                None => 0o644,
            };
            Ok(NewFile {
                path: path.to_string(),
                mode,
                contents: f["content"].as_str().unwrap_or("").as_bytes().to_vec(),
            })
        })
        .collect::<Result<Vec<_>, DiskError>>()?;
    write_files(root, &files)?;
    Ok(files.into_iter().map(|f| f.path).collect())
}

const USER_DATA: [&str; 2] = ["openstack/latest/user_data", "user-data"];

/// The user data of an ISO 9660 drive, read by its Rock Ridge name.
fn iso_user_data(bytes: &[u8]) -> Result<String, DiskError> {
    let image = iso9660::Image::open(bytes)?;
    for name in USER_DATA {
        if let Some(data) = image.read(name)? {
            return Ok(String::from_utf8_lossy(data).into_owned());
        }
    }
    Err(bad("the config drive has no user data"))
}

/// The user data of a FAT drive.
fn fat_user_data(bytes: Vec<u8>) -> Result<String, DiskError> {
    let fat = fatfs::FileSystem::new(Cursor::new(bytes), fatfs::FsOptions::new()).map_err(|e| {
        DiskError::Fat {
            what: "opening the config drive".into(),
            source: e,
        }
    })?;
    let root_dir = fat.root_dir();
    for name in USER_DATA {
        if let Ok(mut f) = root_dir.open_file(name) {
            let mut text = String::new();
            f.read_to_string(&mut text).map_err(|e| DiskError::Fat {
                what: format!("reading {name}"),
                source: e,
            })?;
            return Ok(text);
        }
    }
    Err(bad("the config drive has no user data"))
}
