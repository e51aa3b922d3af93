//! The config drive that cloud-init reads at first boot: an ISO 9660 image for OpenStack's
//! `config-2` (as Nova and Ironic write it, [`super::iso9660`]), a FAT image for NoCloud's
//! `cidata` (as cloud-localds can, built with the `fatfs` crate), both in memory.
//!
//! - [`Flavor::ConfigTwo`]: OpenStack's config drive, volume label `config-2` (cloud-init's
//!   ConfigDrive datasource looks for `config-2` or `CONFIG-2`, vfat or iso9660), files
//!   `openstack/latest/meta_data.json` (which must hold a `uuid`: cloud-init takes the
//!   instance id from it and refuses a drive without one), `openstack/latest/user_data` when
//!   there is user data, `openstack/latest/network_data.json` when there is network data (in
//!   OpenStack's network_data format). ISO 9660 with Rock Ridge names, as
//!   `genisoimage -r -V config-2` makes it; appended as a Linux partition ([`Flavor::append`]).
//! - [`Flavor::NoCloud`]: cloud-init's NoCloud, volume label `cidata` (as cloud-localds makes
//!   it; the datasource's `fs_label` default, matched in upper or lower case), files
//!   `meta-data` (YAML; the JSON written is valid YAML), `user-data` (always: NoCloud requires
//!   the file even when empty) and `network-config` when there is network data (in cloud-init's
//!   network config v1/v2 format).
//!
//! Either image is the smallest whole number of MiB, at least 1 MiB, that holds the files (the
//! FAT one with a quarter to spare), and at most 64 MiB (Ironic's cap on a config drive). Its
//! bytes depend only on the files: every timestamp is 1980-01-01 (FAT's epoch) and the FAT
//! volume serial comes from the files' SHA-256.
//!
//! fatfs 0.3.6, the crate's last release, writes long-name entries before every new
//! directory's `.` and `..` (fixed only on its unreleased master); [`build`] moves `.` and `..`
//! back to the first two slots, which fsck.fat checks.

use std::io::{Cursor, Write};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::DiskError;
use super::fs::FsKind;
use super::iso9660;
use super::table::{Append, Partition};

/// The largest config drive: Ironic's limit.
pub const MAX_BYTES: u64 = 64 << 20;
/// The smallest image built.
pub const MIN_BYTES: u64 = 1 << 20;
const MIB: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OpenStack's `config-2`.
    ConfigTwo,
    /// cloud-init's NoCloud `cidata`.
    NoCloud,
}

impl Flavor {
    /// "config-2" or "nocloud" (either case).
    pub fn parse(s: &str) -> Result<Flavor, DiskError> {
        match s.to_ascii_lowercase().as_str() {
            "config-2" => Ok(Flavor::ConfigTwo),
            "nocloud" => Ok(Flavor::NoCloud),
            _ => Err(DiskError::BadFlavor(s.to_string())),
        }
    }

    /// The filesystem's volume label, which is also the appended GPT partition's name.
    pub fn label(self) -> &'static str {
        match self {
            Flavor::ConfigTwo => "config-2",
            Flavor::NoCloud => "cidata",
        }
    }

    /// The partition the drive is appended as: Linux filesystem data (GPT) or 0x83 (MBR) for
    /// the ISO 9660 `config-2`, Microsoft basic data or 0x0c for the FAT `cidata`; named with
    /// the label on GPT.
    pub fn append(self) -> Append {
        match self {
            Flavor::ConfigTwo => Append::linux(self.label()),
            Flavor::NoCloud => Append::fat(self.label()),
        }
    }
}

/// The config drive already on `disk`: the last vfat or iso9660 partition labelled `config-2`
/// or `cidata` (either case, as cloud-init matches them, whichever filesystem it has), with its
/// flavor.
pub fn find(disk: &super::Disk) -> Result<Option<(Partition, Flavor)>, DiskError> {
    let mut found = None;
    for p in super::table::read(disk)?.partitions {
        if let Some(fs) = super::fs::probe_partition(disk, &p)?
            && matches!(fs.kind, FsKind::Vfat | FsKind::Iso9660)
            && let Some(label) = fs.label.as_deref()
        {
            if label.eq_ignore_ascii_case("config-2") {
                found = Some((p, Flavor::ConfigTwo));
            } else if label.eq_ignore_ascii_case("cidata") {
                found = Some((p, Flavor::NoCloud));
            }
        }
    }
    Ok(found)
}

impl std::str::FromStr for Flavor {
    type Err = DiskError;
    fn from_str(s: &str) -> Result<Flavor, DiskError> {
        Flavor::parse(s)
    }
}

/// What goes on the drive.
#[derive(Debug, Clone, PartialEq)]
pub struct Contents {
    /// A JSON object: OpenStack metadata for config-2 (with `uuid`), NoCloud meta-data
    /// (`instance-id`, `local-hostname` ...) for NoCloud.
    pub meta_data: Value,
    /// The user data as given (a `#cloud-config` document, a script, ...).
    pub user_data: Vec<u8>,
    /// Network configuration, when there is one (OpenStack network_data for config-2, network
    /// config v1/v2 for NoCloud).
    pub network_data: Option<Value>,
}

/// The files of the drive, as (path inside it, bytes), in the order they are written.
pub fn files(flavor: Flavor, contents: &Contents) -> Result<Vec<(String, Vec<u8>)>, DiskError> {
    let Value::Object(meta) = &contents.meta_data else {
        return Err(DiskError::BadContents {
            field: "meta_data",
            problem: format!(
                "must be a JSON object, not {}",
                kind_of(&contents.meta_data)
            ),
        });
    };
    let json = |v: &Value| serde_json::to_vec_pretty(v).unwrap_or_default();
    let mut out = Vec::new();
    match flavor {
        Flavor::ConfigTwo => {
            if meta
                .get("uuid")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(DiskError::BadContents {
                    field: "meta_data.uuid",
                    problem: "config-2 needs a non-empty string: cloud-init takes the \
                              instance id from it and ignores a drive without one"
                        .into(),
                });
            }
            let dir = "openstack/latest";
            out.push((format!("{dir}/meta_data.json"), json(&contents.meta_data)));
            if !contents.user_data.is_empty() {
                out.push((format!("{dir}/user_data"), contents.user_data.clone()));
            }
            if let Some(net) = &contents.network_data {
                out.push((format!("{dir}/network_data.json"), json(net)));
            }
        }
        Flavor::NoCloud => {
            out.push(("meta-data".into(), json(&contents.meta_data)));
            out.push(("user-data".into(), contents.user_data.clone()));
            if let Some(net) = &contents.network_data {
                out.push(("network-config".into(), json(net)));
            }
        }
    }
    Ok(out)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The drive's image: ISO 9660 for config-2, FAT for NoCloud (see the module's documentation).
pub fn build(flavor: Flavor, contents: &Contents) -> Result<Vec<u8>, DiskError> {
    let files = files(flavor, contents)?;
    match flavor {
        Flavor::ConfigTwo => iso9660::build(flavor.label(), &files, MAX_BYTES),
        Flavor::NoCloud => build_fat(flavor, files),
    }
}

/// The drive as a FAT filesystem image.
fn build_fat(flavor: Flavor, files: Vec<(String, Vec<u8>)>) -> Result<Vec<u8>, DiskError> {
    let bytes: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    if bytes > MAX_BYTES {
        return Err(DiskError::ConfigDriveTooBig {
            bytes,
            max: MAX_BYTES,
        });
    }
    // Each file rounded to 4 KiB clusters, a cluster per directory, 64 KiB for the boot
    // sector, FATs and root directory, and a quarter more.
    let estimate = files
        .iter()
        .map(|(_, b)| (b.len() as u64).div_ceil(4096) * 4096 + 4096)
        .sum::<u64>()
        + 64 * 1024;
    let mut size = (estimate + estimate / 4)
        .div_ceil(MIB)
        .saturating_mul(MIB)
        .clamp(MIN_BYTES, MAX_BYTES);
    loop {
        match build_sized(flavor, &files, size) {
            Ok(image) => return Ok(image),
            Err(Fill::Full) if size < MAX_BYTES => size = (size * 2).min(MAX_BYTES),
            Err(Fill::Full) => {
                return Err(DiskError::ConfigDriveTooBig {
                    bytes,
                    max: MAX_BYTES,
                });
            }
            Err(Fill::Failed(e)) => return Err(e),
        }
    }
}

enum Fill {
    /// The files did not fit.
    Full,
    Failed(DiskError),
}

fn fat_err(what: String) -> impl FnOnce(std::io::Error) -> Fill {
    move |source| {
        let full = source.kind() == std::io::ErrorKind::WriteZero
            || source.to_string().contains("No space left");
        if full {
            Fill::Full
        } else {
            Fill::Failed(DiskError::Fat { what, source })
        }
    }
}

fn build_sized(flavor: Flavor, files: &[(String, Vec<u8>)], size: u64) -> Result<Vec<u8>, Fill> {
    let mut label = [b' '; 11];
    label[..flavor.label().len()].copy_from_slice(flavor.label().as_bytes());
    let mut digest = Sha256::new();
    for (path, bytes) in files {
        digest.update(path.as_bytes());
        digest.update([0]);
        digest.update(bytes);
    }
    let d = digest.finalize();
    let serial = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);

    let mut disk = Cursor::new(vec![0u8; size as usize]);
    fatfs::format_volume(
        &mut disk,
        fatfs::FormatVolumeOptions::new()
            .volume_label(label)
            .volume_id(serial),
    )
    .map_err(fat_err(format!("formatting {size} bytes")))?;
    {
        let options = fatfs::FsOptions::new().time_provider(&FAT_EPOCH);
        let fs = fatfs::FileSystem::new(&mut disk, options)
            .map_err(fat_err("opening the new filesystem".into()))?;
        write_files(&fs.root_dir(), files)?;
        fs.unmount()
            .map_err(fat_err("closing the filesystem".into()))?;
    }
    let mut image = disk.into_inner();
    fix_dot_entries(&mut image);
    Ok(image)
}

/// Every timestamp on the drive: 1980-01-01 00:00, FAT's epoch. (fatfs without a clock would
/// write month 0 and day 0, which no FAT reader should have to take.)
#[derive(Debug)]
struct FatEpoch;

static FAT_EPOCH: FatEpoch = FatEpoch;

impl fatfs::TimeProvider for FatEpoch {
    fn get_current_date(&self) -> fatfs::Date {
        fatfs::Date {
            year: 1980,
            month: 1,
            day: 1,
        }
    }

    fn get_current_date_time(&self) -> fatfs::DateTime {
        fatfs::DateTime {
            date: self.get_current_date(),
            time: fatfs::Time {
                hour: 0,
                min: 0,
                sec: 0,
                millis: 0,
            },
        }
    }
}

/// fatfs 0.3.6 (the last release) starts every directory it creates with a long-name entry
/// before `.` and another before `..` (rust-fatfs issue #117, fixed on its unreleased master):
/// `.` and `..` must be the first two slots, and fsck.fat reports the directory as broken. This
/// moves them there and marks the two long-name slots deleted, in every subdirectory of the
/// image just built (two levels deep at most: `openstack/latest`). The image is FAT12 or FAT16
/// (at most 64 MiB), so a directory's first cluster holds all four slots.
fn fix_dot_entries(image: &mut [u8]) {
    let Some(layout) = FatLayout::of(image) else {
        return;
    };
    let mut dirs = vec![(layout.root_dir, layout.root_len, 0u8)];
    while let Some((at, len, depth)) = dirs.pop() {
        let Some(dir) = image.get(at..at.saturating_add(len)) else {
            continue;
        };
        for slot in dir.chunks_exact(32) {
            if slot[0] == 0 {
                break;
            }
            let is_dir = slot[11] & 0x10 != 0 && slot[11] != 0x0F;
            if slot[0] == 0xE5 || slot[0] == b'.' || !is_dir || depth >= 4 {
                continue;
            }
            let cluster = usize::from(u16::from_le_bytes([slot[26], slot[27]]));
            if let Some(sub) = layout.cluster(cluster) {
                dirs.push((sub, layout.cluster_len, depth + 1));
            }
        }
        if depth > 0
            && let Some(first) = image.get_mut(at..at + 128)
        {
            let name = |i: usize| &first[32 * i..32 * i + 11];
            let lfn = |i: usize| first[32 * i + 11] == 0x0F;
            if lfn(0) && name(1) == b".          " && lfn(2) && name(3) == b"..         " {
                first.copy_within(32..64, 0);
                first.copy_within(96..128, 32);
                first[64..128].fill(0);
                first[64] = 0xE5;
                first[96] = 0xE5;
            }
        }
    }
}

/// Where a FAT12/16 image's root directory and clusters are.
struct FatLayout {
    root_dir: usize,
    root_len: usize,
    data: usize,
    cluster_len: usize,
}

impl FatLayout {
    fn of(image: &[u8]) -> Option<FatLayout> {
        let le16 = |at: usize| {
            Some(usize::from(u16::from_le_bytes([
                *image.get(at)?,
                *image.get(at + 1)?,
            ])))
        };
        let sector = le16(11)?;
        let cluster_len = sector.checked_mul(usize::from(*image.get(13)?))?;
        let fats = usize::from(*image.get(16)?);
        let root_dir = sector.checked_mul(le16(14)?.checked_add(fats.checked_mul(le16(22)?)?)?)?;
        let root_len = le16(17)?.checked_mul(32)?;
        if cluster_len == 0 || root_len == 0 {
            return None;
        }
        Some(FatLayout {
            root_dir,
            root_len,
            data: root_dir.checked_add(root_len.div_ceil(sector) * sector)?,
            cluster_len,
        })
    }

    fn cluster(&self, n: usize) -> Option<usize> {
        n.checked_sub(2)?
            .checked_mul(self.cluster_len)?
            .checked_add(self.data)
    }
}

fn write_files<T: fatfs::ReadWriteSeek>(
    root: &fatfs::Dir<'_, T>,
    files: &[(String, Vec<u8>)],
) -> Result<(), Fill> {
    {
        for (path, bytes) in files {
            // Parents first: "openstack", then "openstack/latest".
            let parts: Vec<&str> = path.split('/').collect();
            for i in 1..parts.len() {
                let dir = parts[..i].join("/");
                if root.open_dir(&dir).is_err() {
                    root.create_dir(&dir)
                        .map_err(fat_err(format!("creating {dir}")))?;
                }
            }
            let mut file = root
                .create_file(path)
                .map_err(fat_err(format!("creating {path}")))?;
            file.truncate()
                .map_err(fat_err(format!("truncating {path}")))?;
            file.write_all(bytes)
                .map_err(fat_err(format!("writing {} bytes to {path}", bytes.len())))?;
            file.flush().map_err(fat_err(format!("flushing {path}")))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn contents() -> Contents {
        Contents {
            meta_data: json!({"uuid": "6c1e3b1c-0000-4000-8000-000000000001", "hostname": "node-1"}),
            user_data: b"#cloud-config\nruncmd: [true]\n".to_vec(),
            network_data: None,
        }
    }

    #[test]
    fn flavors_parse_and_name_their_labels() {
        assert_eq!(Flavor::parse("config-2").unwrap(), Flavor::ConfigTwo);
        assert_eq!("NoCloud".parse::<Flavor>().unwrap(), Flavor::NoCloud);
        let err = Flavor::parse("iso").unwrap_err().to_string();
        assert!(err.contains("\"iso\"") && err.contains("nocloud"), "{err}");
        assert_eq!(Flavor::ConfigTwo.label(), "config-2");
        assert_eq!(Flavor::NoCloud.label(), "cidata");
    }

    #[test]
    fn file_lists_follow_the_flavor() {
        let names = |f, c: &Contents| -> Vec<String> {
            files(f, c).unwrap().into_iter().map(|(n, _)| n).collect()
        };
        let mut c = contents();
        assert_eq!(
            names(Flavor::ConfigTwo, &c),
            [
                "openstack/latest/meta_data.json",
                "openstack/latest/user_data"
            ]
        );
        assert_eq!(names(Flavor::NoCloud, &c), ["meta-data", "user-data"]);
        c.user_data.clear();
        c.network_data = Some(json!({"version": 2}));
        assert_eq!(
            names(Flavor::ConfigTwo, &c),
            [
                "openstack/latest/meta_data.json",
                "openstack/latest/network_data.json"
            ]
        );
        // NoCloud needs user-data even when empty.
        assert_eq!(
            names(Flavor::NoCloud, &c),
            ["meta-data", "user-data", "network-config"]
        );
    }

    #[test]
    fn meta_data_is_checked() {
        let mut c = contents();
        c.meta_data = json!(["uuid"]);
        let err = build(Flavor::NoCloud, &c).unwrap_err().to_string();
        assert!(
            err.contains("meta_data") && err.contains("an array"),
            "{err}"
        );
        c.meta_data = json!({"hostname": "x"});
        let err = build(Flavor::ConfigTwo, &c).unwrap_err().to_string();
        assert!(err.contains("meta_data.uuid"), "{err}");
        // NoCloud does not need a uuid.
        build(Flavor::NoCloud, &c).unwrap();
    }

    #[test]
    fn config_two_is_iso_9660_and_nocloud_fat() {
        let iso = build(Flavor::ConfigTwo, &contents()).unwrap();
        assert_eq!(&iso[32769..32774], b"CD001");
        let fat = build(Flavor::NoCloud, &contents()).unwrap();
        assert_eq!(&fat[510..512], [0x55, 0xAA]);
        assert_eq!(Flavor::ConfigTwo.append().mbr_type, 0x83);
        assert_eq!(Flavor::NoCloud.append().mbr_type, 0x0c);
    }

    #[test]
    fn size_is_at_least_a_mib_and_grows_with_the_files() {
        let small = build(Flavor::ConfigTwo, &contents()).unwrap();
        assert_eq!(small.len() as u64, MIN_BYTES);
        let mut c = contents();
        c.user_data = vec![b'x'; 5 << 20];
        let big = build(Flavor::ConfigTwo, &c).unwrap();
        assert!(
            big.len() as u64 >= 6 << 20 && big.len() as u64 <= 8 << 20,
            "{}",
            big.len()
        );
        assert_eq!(big.len() as u64 % MIB, 0);
        // Same files, same bytes.
        assert_eq!(build(Flavor::ConfigTwo, &c).unwrap(), big);
    }

    #[test]
    fn over_64_mib_is_refused_with_the_sizes() {
        let mut c = contents();
        c.user_data = vec![0; (MAX_BYTES + 1) as usize];
        match build(Flavor::NoCloud, &c) {
            Err(DiskError::ConfigDriveTooBig { bytes, max }) => {
                assert!(bytes > MAX_BYTES);
                assert_eq!(max, MAX_BYTES);
            }
            other => panic!("{other:?}"),
        }
        // Just under the cap in content still does not fit once FAT's or ISO 9660's own space
        // is counted.
        c.user_data = vec![0; (MAX_BYTES - 1000) as usize];
        for flavor in [Flavor::NoCloud, Flavor::ConfigTwo] {
            assert!(
                matches!(build(flavor, &c), Err(DiskError::ConfigDriveTooBig { .. })),
                "{flavor:?}"
            );
        }
        c.user_data = vec![0; (MAX_BYTES + 1) as usize];
        let err = build(Flavor::ConfigTwo, &c).unwrap_err().to_string();
        assert!(err.contains("67108864-byte limit"), "{err}");
    }
}
