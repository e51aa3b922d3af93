//! The target disk after `write_image`: what the configure step needs to get the agent onto the
//! installed OS. Two ways, both built here as a library the step calls:
//! - a *config drive*: [`config_drive::build`] makes an OpenStack `config-2` ISO 9660 image
//!   ([`iso9660`]) or a NoCloud `cidata` FAT image in memory, and [`table::append`] adds it to
//!   the disk as a new partition
//!   after the image's last one (moving a GPT's backup to the end of a disk larger than the
//!   image); cloud-init finds it by label at first boot;
//! - *injection*, for images without cloud-init: [`fs::find_root`] finds the OS's root
//!   filesystem (by filesystem label, GPT partition type, or the only Linux filesystem),
//!   [`mount::mount`] makes it a directory and [`mount::write_files`] writes into it without
//!   following the image's symlinks out of it.
//!
//! The disk is a block device on a node and a regular file in sandboxes and tests; [`Disk`] is
//! the open file with its path (for errors), size and logical sector size. Every size and count
//! read from the disk is bounded before it is used: a hostile or corrupt image gets an error
//! naming the disk and what was found, never a panic or a large allocation.

pub mod cloud;
pub mod config_drive;
pub mod fs;
mod gpt;
pub mod iso9660;
pub mod mount;
pub mod table;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

pub use config_drive::{Contents, Flavor};
pub use fs::{FsInfo, FsKind, ROOT_LABELS, find_root};
pub use gpt::Guid;
pub use mount::{Mounted, NewFile, mount, write_files};
pub use table::{Append, PartKind, Partition, Scheme, Table, append};

/// What went wrong with the disk, its table, its filesystems or the config drive. `disk` is the
/// path of the target disk as given (a block device, or an image file in a sandbox).
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("{disk}: cannot open: {source}")]
    Open {
        disk: String,
        source: std::io::Error,
    },
    #[error("{disk}: {what} ({len} bytes at byte {offset}): {source}")]
    Io {
        disk: String,
        what: &'static str,
        offset: u64,
        len: u64,
        source: std::io::Error,
    },
    #[error("{disk}: no partition table: {detail}")]
    NoTable { disk: String, detail: String },
    #[error("{disk}: corrupt {scheme} partition table: {detail}")]
    Corrupt {
        disk: String,
        scheme: Scheme,
        detail: String,
    },
    #[error("{disk}: the {scheme} partition table has no free entry (all {entries} are in use)")]
    TableFull {
        disk: String,
        scheme: Scheme,
        entries: u32,
    },
    #[error(
        "{disk}: a partition of {needed} bytes does not fit after the last partition: \
         {free} bytes free from byte {start}{limit}"
    )]
    NoSpace {
        disk: String,
        needed: u64,
        free: u64,
        start: u64,
        /// Why the free space ends where it does, when it is not the end of the disk.
        limit: String,
    },
    #[error(
        "{disk}: no root filesystem: no partition has a label among {labels}, none has a GPT \
         Linux root type, and there is no single ext2/3/4 or xfs partition; partitions: {seen}"
    )]
    NoRoot {
        disk: String,
        labels: String,
        seen: String,
    },
    #[error("{disk}: cannot choose the root filesystem: {why}: {first} and {second}")]
    AmbiguousRoot {
        disk: String,
        why: String,
        first: String,
        second: String,
    },
    #[error("the config drive's files take {bytes} bytes, over the {max}-byte limit")]
    ConfigDriveTooBig { bytes: u64, max: u64 },
    #[error("config drive {field}: {problem}")]
    BadContents {
        field: &'static str,
        problem: String,
    },
    #[error("{0:?} is not a config drive flavor (config-2 or nocloud)")]
    BadFlavor(String),
    #[error("building the config drive's FAT filesystem ({what}): {source}")]
    Fat {
        what: String,
        source: std::io::Error,
    },
    #[error("ISO 9660 image: {0}")]
    Iso(String),
    #[error("{disk} partition {number}: {detail}")]
    Mount {
        disk: String,
        number: u32,
        detail: String,
    },
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    #[error("refusing to write {path}: {reason}")]
    BadPath { path: String, reason: String },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// The target disk: the open file, its path (for errors), its size and its logical sector size
/// (512 for a regular file; the kernel's `logical_block_size` for a block device).
#[derive(Debug)]
pub struct Disk {
    file: File,
    path: PathBuf,
    size: u64,
    sector: u64,
}

impl Disk {
    /// Opens `path` for reading and writing (what [`table::append`] needs).
    pub fn open(path: &Path) -> Result<Disk, DiskError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|source| DiskError::Open {
                disk: path.display().to_string(),
                source,
            })?;
        Disk::from_file(file, path)
    }

    /// Opens `path` for reading only (enough for [`table::read`] and [`fs::find_root`]).
    pub fn open_read_only(path: &Path) -> Result<Disk, DiskError> {
        let file = File::open(path).map_err(|source| DiskError::Open {
            disk: path.display().to_string(),
            source,
        })?;
        Disk::from_file(file, path)
    }

    /// An already open disk. Its size is where seeking to the end lands (a block device's
    /// metadata says 0).
    pub fn from_file(file: File, path: &Path) -> Result<Disk, DiskError> {
        let disk = path.display().to_string();
        let open_err = |source| DiskError::Open {
            disk: disk.clone(),
            source,
        };
        let meta = file.metadata().map_err(open_err)?;
        let size = (&file).seek(SeekFrom::End(0)).map_err(open_err)?;
        let sector = if meta.file_type().is_block_device() {
            logical_sector(meta.rdev())
        } else {
            512
        };
        Ok(Disk {
            file,
            path: path.to_path_buf(),
            size,
            sector,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The logical sector size in bytes: the unit of partition tables' addresses.
    pub fn sector(&self) -> u64 {
        self.sector
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub(crate) fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// Reads exactly `buf.len()` bytes at `offset`, which must lie inside the disk.
    pub(crate) fn read_at(
        &self,
        offset: u64,
        buf: &mut [u8],
        what: &'static str,
    ) -> Result<(), DiskError> {
        let len = buf.len() as u64;
        if offset.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(self.io_err(what, offset, len, std::io::ErrorKind::UnexpectedEof.into()));
        }
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| self.io_err(what, offset, len, e))
    }

    /// Writes all of `buf` at `offset`, which must lie inside the disk (a disk does not grow).
    pub(crate) fn write_at(
        &self,
        offset: u64,
        buf: &[u8],
        what: &'static str,
    ) -> Result<(), DiskError> {
        let len = buf.len() as u64;
        if offset.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(self.io_err(what, offset, len, std::io::ErrorKind::WriteZero.into()));
        }
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| self.io_err(what, offset, len, e))
    }

    /// Flushes what was written to the device.
    pub(crate) fn sync(&self, what: &'static str) -> Result<(), DiskError> {
        self.file
            .sync_all()
            .map_err(|e| self.io_err(what, 0, self.size, e))
    }

    fn io_err(&self, what: &'static str, offset: u64, len: u64, e: std::io::Error) -> DiskError {
        DiskError::Io {
            disk: self.name(),
            what,
            offset,
            len,
            source: e,
        }
    }
}

/// A block device's logical sector size from sysfs, 512 when it cannot be read or is not a
/// power of two from 512 to 4096.
fn logical_sector(rdev: u64) -> u64 {
    // glibc's gnu_dev_major / gnu_dev_minor.
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0000_0fff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0x0000_00ff);
    std::fs::read_to_string(format!(
        "/sys/dev/block/{major}:{minor}/queue/logical_block_size"
    ))
    .ok()
    .and_then(|s| s.trim().parse::<u64>().ok())
    .filter(|s| s.is_power_of_two() && (512..=4096).contains(s))
    .unwrap_or(512)
}

/// `n` rounded up to a multiple of `to` (a power of two or not); `None` on overflow.
pub(crate) fn round_up(n: u64, to: u64) -> Option<u64> {
    n.checked_add(to - 1).map(|v| v / to * to)
}
