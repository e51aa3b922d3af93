//! What filesystem a partition holds, and which partition is the OS's root.
//!
//! [`probe`] is pure: it reads the first [`PROBE_BYTES`] of a partition, as blkid does, for
//! ext2/3/4 (superblock at +1024: magic 0xEF53 at +56, UUID at +104, label at +120; ext3 has a
//! journal, ext4 features ext3 lacks), xfs ("XFSB", UUID at +32, label at +108), iso9660
//! ("CD001" at 32769, the volume id), swap ("SWAPSPACE2" at the end of the first page, for
//! pages of 4 to 64 KiB) and vfat (a FAT12/16/32 boot sector with a sane BPB). A FAT label is
//! the root directory's volume-label entry when there is one, as blkid reports it, else the
//! boot sector's: [`fat_root_dir`] says where to read that directory and [`fat_dir_label`]
//! reads it.
//!
//! [`find_root`] picks the root filesystem in this order: a partition whose filesystem label is
//! in the given list (earlier labels first), else a GPT partition typed Linux root (x86-64 or
//! aarch64) holding a Linux filesystem, else the only ext2/3/4 or xfs partition. Two candidates
//! at the same step are an error naming both, as is finding none (naming every partition seen).

use std::fmt;

use super::gpt::Guid;
use super::table::{self, PartKind, Partition};
use super::{Disk, DiskError};

/// The labels a root filesystem has in the images stoker's deploys write: stoker's own OS
/// image, Fedora/RHEL, Ubuntu's cloud images, and common build tools'.
pub const ROOT_LABELS: &[&str] = &["stoker-root", "root", "cloudimg-rootfs", "rootfs", "ROOT"];

/// How much of a partition's start [`probe`] looks at: enough for a swap signature on 64 KiB
/// pages and the iso9660 volume descriptor at 32 KiB.
pub const PROBE_BYTES: usize = 65536;

/// At most this much of a FAT root directory is read for its volume label.
const FAT_DIR_BYTES: u64 = 65536;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    Ext2,
    Ext3,
    Ext4,
    Xfs,
    Vfat,
    Iso9660,
    Swap,
}

impl FsKind {
    /// blkid's TYPE, which is also `mount -t`'s and the kernel module's name.
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext2 => "ext2",
            FsKind::Ext3 => "ext3",
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Vfat => "vfat",
            FsKind::Iso9660 => "iso9660",
            FsKind::Swap => "swap",
        }
    }

    /// A filesystem a Linux root lives on.
    pub fn is_linux(self) -> bool {
        matches!(
            self,
            FsKind::Ext2 | FsKind::Ext3 | FsKind::Ext4 | FsKind::Xfs
        )
    }

    /// Anything but swap can be mounted.
    pub fn is_mountable(self) -> bool {
        self != FsKind::Swap
    }
}

impl fmt::Display for FsKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A filesystem found on a partition, with its label and UUID as blkid shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsInfo {
    pub kind: FsKind,
    pub label: Option<String>,
    pub uuid: Option<String>,
}

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Bytes up to the first NUL (and without trailing spaces when `trim`), as text; `None` when
/// empty.
fn text(bytes: &[u8], trim: bool) -> Option<String> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let s = String::from_utf8_lossy(&bytes[..end]);
    let s = if trim { s.trim_end_matches(' ') } else { &s };
    (!s.is_empty()).then(|| s.to_string())
}

/// A 16-byte UUID stored in RFC 4122 order, lower case; `None` when all zero.
fn uuid(bytes: &[u8]) -> Option<String> {
    let b: [u8; 16] = bytes.try_into().ok()?;
    if b == [0; 16] {
        return None;
    }
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    Some(format!(
        "{}-{}-{}-{}-{}",
        h[..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..].concat()
    ))
}

/// The filesystem whose first bytes are `head` (up to [`PROBE_BYTES`]; fewer when the
/// partition is smaller), or `None` when none of the known ones is there. For vfat the label
/// is the boot sector's; see [`fat_root_dir`].
pub fn probe(head: &[u8]) -> Option<FsInfo> {
    ext(head)
        .or_else(|| xfs(head))
        .or_else(|| iso9660(head))
        .or_else(|| swap(head))
        .or_else(|| vfat(head))
}

fn ext(head: &[u8]) -> Option<FsInfo> {
    let sb = head.get(1024..1024 + 256)?;
    if le16(sb, 56)? != 0xEF53 {
        return None;
    }
    let compat = le32(sb, 0x5C)?;
    let incompat = le32(sb, 0x60)?;
    let ro_compat = le32(sb, 0x64)?;
    const HAS_JOURNAL: u32 = 0x4;
    const JOURNAL_DEV: u32 = 0x8;
    // What ext3 supports; a feature beyond these makes it ext4 (blkid's rule).
    const EXT3_INCOMPAT: u32 = 0x2 | 0x4 | 0x10; // filetype, recover, meta_bg
    const EXT3_RO_COMPAT: u32 = 0x1 | 0x2 | 0x4; // sparse_super, large_file, btree_dir
    if incompat & JOURNAL_DEV != 0 {
        return None;
    }
    let kind = if incompat & !EXT3_INCOMPAT != 0 || ro_compat & !EXT3_RO_COMPAT != 0 {
        FsKind::Ext4
    } else if compat & HAS_JOURNAL != 0 {
        FsKind::Ext3
    } else {
        FsKind::Ext2
    };
    Some(FsInfo {
        kind,
        label: text(sb.get(120..136)?, false),
        uuid: uuid(sb.get(104..120)?),
    })
}

fn xfs(head: &[u8]) -> Option<FsInfo> {
    if head.get(..4)? != b"XFSB" {
        return None;
    }
    Some(FsInfo {
        kind: FsKind::Xfs,
        label: text(head.get(108..120)?, false),
        uuid: uuid(head.get(32..48)?),
    })
}

fn iso9660(head: &[u8]) -> Option<FsInfo> {
    let pvd = head.get(32768..32768 + 2048)?;
    if pvd[0] != 1 || &pvd[1..6] != b"CD001" {
        return None;
    }
    // blkid's UUID: the creation date, "YYYYMMDDHHMMSScc" shown as YYYY-MM-DD-HH-MM-SS-cc.
    let date = &pvd[813..829];
    let uuid =
        (date.iter().all(u8::is_ascii_digit) && date.iter().any(|&d| d != b'0')).then(|| {
            let d = String::from_utf8_lossy(date);
            format!(
                "{}-{}-{}-{}-{}-{}-{}",
                &d[..4],
                &d[4..6],
                &d[6..8],
                &d[8..10],
                &d[10..12],
                &d[12..14],
                &d[14..16]
            )
        });
    Some(FsInfo {
        kind: FsKind::Iso9660,
        label: text(&pvd[40..72], true),
        uuid,
    })
}

fn swap(head: &[u8]) -> Option<FsInfo> {
    let found = [4096usize, 8192, 16384, 32768, 65536].iter().any(|&page| {
        head.get(page - 10..page)
            .is_some_and(|s| s == b"SWAPSPACE2" || s == b"SWAP-SPACE")
    });
    if !found {
        return None;
    }
    Some(FsInfo {
        kind: FsKind::Swap,
        label: head.get(1024 + 28..1024 + 44).and_then(|b| text(b, false)),
        uuid: head.get(1024 + 12..1024 + 28).and_then(uuid),
    })
}

/// The BPB fields a FAT boot sector must have sane.
struct Bpb {
    bytes_per_sector: u64,
    sectors_per_cluster: u64,
    reserved: u64,
    fats: u64,
    root_entries: u64,
    fat_size: u64,
    root_cluster: u64,
    fat32: bool,
}

fn bpb(head: &[u8]) -> Option<Bpb> {
    let bs = head.get(..512)?;
    if bs[510..512] != [0x55, 0xAA] {
        return None;
    }
    let fat32 = &bs[82..90] == b"FAT32   ";
    let fat1x = matches!(&bs[54..62], b"FAT12   " | b"FAT16   " | b"FAT     ");
    if !fat32 && !fat1x {
        return None;
    }
    let bytes_per_sector = u64::from(le16(bs, 11)?);
    let sectors_per_cluster = u64::from(bs[13]);
    let reserved = u64::from(le16(bs, 14)?);
    let fats = u64::from(bs[16]);
    let sane = [512, 1024, 2048, 4096].contains(&bytes_per_sector)
        && sectors_per_cluster.is_power_of_two()
        && reserved > 0
        && (1..=4).contains(&fats);
    if !sane {
        return None;
    }
    Some(Bpb {
        bytes_per_sector,
        sectors_per_cluster,
        reserved,
        fats,
        root_entries: u64::from(le16(bs, 17)?),
        fat_size: if fat32 {
            u64::from(le32(bs, 36)?)
        } else {
            u64::from(le16(bs, 22)?)
        },
        root_cluster: u64::from(le32(bs, 44)?),
        fat32,
    })
}

/// Whether `sector` is a FAT boot sector (with a sane BPB).
pub(crate) fn is_fat_boot_sector(sector: &[u8]) -> bool {
    bpb(sector).is_some()
}

fn vfat(head: &[u8]) -> Option<FsInfo> {
    let b = bpb(head)?;
    let (label_at, serial_at) = if b.fat32 { (71, 67) } else { (43, 39) };
    let serial = le32(head, serial_at)?;
    let label = text(head.get(label_at..label_at + 11)?, true).filter(|l| l != "NO NAME");
    Some(FsInfo {
        kind: FsKind::Vfat,
        label,
        uuid: Some(format!("{:04X}-{:04X}", serial >> 16, serial & 0xffff)),
    })
}

/// Where a FAT filesystem's root directory is, as (offset from the partition start, bytes to
/// read: the FAT12/16 root region or FAT32's first root cluster, at most 64 KiB).
pub fn fat_root_dir(head: &[u8]) -> Option<(u64, u64)> {
    let b = bpb(head)?;
    let fats_end = b
        .reserved
        .checked_add(b.fats.checked_mul(b.fat_size)?)?
        .checked_mul(b.bytes_per_sector)?;
    if b.fat32 {
        // FAT32 has no fixed root region: its data area starts after the FATs.
        let cluster = b.bytes_per_sector * b.sectors_per_cluster;
        let at = fats_end.checked_add(b.root_cluster.checked_sub(2)?.checked_mul(cluster)?)?;
        Some((at, cluster.min(FAT_DIR_BYTES)))
    } else {
        Some((fats_end, (b.root_entries * 32).min(FAT_DIR_BYTES)))
    }
}

/// The volume label entry of a FAT directory's bytes, as blkid reads it ("NO NAME" is none).
pub fn fat_dir_label(dir: &[u8]) -> Option<String> {
    const VOLUME_ID: u8 = 0x08;
    const DIRECTORY: u8 = 0x10;
    const LONG_NAME: u8 = 0x0F;
    for entry in dir.chunks_exact(32) {
        match entry[0] {
            0 => return None,
            0xE5 => continue,
            _ => {}
        }
        let attr = entry[11];
        if attr == LONG_NAME || attr & (VOLUME_ID | DIRECTORY) != VOLUME_ID {
            continue;
        }
        let mut name = entry[..11].to_vec();
        if name[0] == 0x05 {
            name[0] = 0xE5;
        }
        return text(&name, true).filter(|l| l != "NO NAME");
    }
    None
}

/// The filesystem on `part` of `disk`, reading at most [`PROBE_BYTES`] plus, for FAT, 64 KiB of
/// its root directory, never past the partition's end.
pub fn probe_partition(disk: &Disk, part: &Partition) -> Result<Option<FsInfo>, DiskError> {
    let len = part.size.min(PROBE_BYTES as u64);
    let mut head = vec![0u8; len as usize];
    disk.read_at(part.start, &mut head, "reading a partition's first bytes")?;
    let Some(mut info) = probe(&head) else {
        return Ok(None);
    };
    if info.kind == FsKind::Vfat
        && let Some((at, dir_len)) = fat_root_dir(&head)
        && at.checked_add(dir_len).is_some_and(|end| end <= part.size)
    {
        let mut dir = vec![0u8; dir_len as usize];
        disk.read_at(part.start + at, &mut dir, "reading a FAT root directory")?;
        if let Some(label) = fat_dir_label(&dir) {
            info.label = Some(label);
        }
    }
    Ok(Some(info))
}

/// "N: SIZE bytes KIND label L" for errors that list what a disk has.
fn describe(part: &Partition, fs: &Option<FsInfo>) -> String {
    let what = match fs {
        None => "no known filesystem".to_string(),
        Some(FsInfo {
            kind,
            label: Some(l),
            ..
        }) => format!("{kind} label {l}"),
        Some(FsInfo { kind, .. }) => format!("{kind} without a label"),
    };
    let gpt = match &part.kind {
        PartKind::Gpt { type_guid, .. } => format!(", GPT type {type_guid}"),
        PartKind::Mbr(t) => format!(", MBR type {t:#04x}"),
    };
    format!("{}: {} bytes {what}{gpt}", part.number, part.size)
}

/// The partition holding the OS's root filesystem (see the module's documentation for the
/// order), with that filesystem.
pub fn find_root(disk: &Disk, labels: &[&str]) -> Result<(Partition, FsInfo), DiskError> {
    let table = table::read(disk)?;
    let mut seen = Vec::new();
    for part in table
        .partitions
        .into_iter()
        .filter(|p| !p.kind.is_extended())
    {
        let fs = probe_partition(disk, &part)?;
        seen.push((part, fs));
    }
    let found = |(p, fs): &(Partition, Option<FsInfo>)| fs.clone().map(|f| (p.clone(), f));
    let pick = |candidates: Vec<(Partition, FsInfo)>,
                why: &dyn Fn() -> String|
     -> Result<Option<(Partition, FsInfo)>, DiskError> {
        match &candidates[..] {
            [] => Ok(None),
            [one] => Ok(Some(one.clone())),
            [a, b, ..] => Err(DiskError::AmbiguousRoot {
                disk: disk.name(),
                why: why(),
                first: describe(&a.0, &Some(a.1.clone())),
                second: describe(&b.0, &Some(b.1.clone())),
            }),
        }
    };

    for label in labels {
        let by_label: Vec<_> = seen
            .iter()
            .filter_map(found)
            .filter(|(_, f)| f.kind.is_mountable() && f.label.as_deref() == Some(label))
            .collect();
        if let Some(root) = pick(by_label, &|| {
            format!("two partitions have the label {label}")
        })? {
            return Ok(root);
        }
    }
    let by_type: Vec<_> = seen
        .iter()
        .filter(|(p, _)| {
            matches!(&p.kind, PartKind::Gpt { type_guid, .. }
                if [Guid::LINUX_ROOT_X86_64, Guid::LINUX_ROOT_AARCH64].contains(type_guid))
        })
        .filter_map(found)
        .filter(|(_, f)| f.kind.is_linux())
        .collect();
    if let Some(root) = pick(by_type, &|| {
        "two partitions have a GPT Linux root type and no listed label".into()
    })? {
        return Ok(root);
    }
    let linux: Vec<_> = seen
        .iter()
        .filter_map(found)
        .filter(|(_, f)| f.kind.is_linux())
        .collect();
    if let Some(root) = pick(linux, &|| {
        "two partitions hold a Linux filesystem, neither with a listed label or a GPT root type"
            .into()
    })? {
        return Ok(root);
    }
    let seen: Vec<String> = seen.iter().map(|(p, fs)| describe(p, fs)).collect();
    Err(DiskError::NoRoot {
        disk: disk.name(),
        labels: labels.join(", "),
        seen: if seen.is_empty() {
            "none".into()
        } else {
            seen.join("; ")
        },
    })
}
