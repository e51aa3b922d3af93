//! Partition tables: reading the target disk's MBR or GPT into [`Table`], and appending one
//! partition (the config drive) after the last one with [`append`].
//!
//! MBR: the four primary entries of the first sector (0x55AA at byte 510, boot flags 0x00 or
//! 0x80, else it is not a table). An extended partition (types 0x05, 0x0f, 0x85) is listed as
//! the primary entry it is, but the logical partitions inside it are not read: images written
//! by a deploy use primary partitions or GPT, and nothing here needs a logical one. A
//! protective entry (0xEE) means GPT, which [`super::gpt`] reads and writes.
//!
//! An appended partition starts at the first 1 MiB boundary after the end of every partition,
//! and its content is written and flushed before the table changes, so a failure leaves the
//! original table in place.

use std::fmt;

use super::gpt::{self, Guid};
use super::{Disk, DiskError};

/// Where appended partitions start: a multiple of 1 MiB, as partitioning tools align.
pub const ALIGN: u64 = 1 << 20;

/// The MBR type of FAT32 with LBA addressing: what an appended FAT partition gets on MBR.
pub const MBR_FAT32_LBA: u8 = 0x0c;

/// The MBR type of a Linux filesystem: what an appended ISO 9660 partition gets on MBR.
pub const MBR_LINUX: u8 = 0x83;

const MBR_GPT_PROTECTIVE: u8 = 0xEE;
const MBR_EXTENDED: [u8; 3] = [0x05, 0x0f, 0x85];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Mbr,
    Gpt,
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scheme::Mbr => "MBR",
            Scheme::Gpt => "GPT",
        })
    }
}

/// A disk's partition table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub scheme: Scheme,
    /// The sector size the table's addresses are in.
    pub sector: u64,
    /// In entry order; `number` is the kernel's partition number (the entry's index + 1).
    pub partitions: Vec<Partition>,
}

/// One partition, in bytes from the start of the disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub number: u32,
    pub start: u64,
    pub size: u64,
    pub kind: PartKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartKind {
    /// The MBR partition type byte.
    Mbr(u8),
    /// The GPT partition type, the partition's own GUID (its PARTUUID) and its name.
    Gpt {
        type_guid: Guid,
        uuid: Guid,
        name: String,
    },
}

impl PartKind {
    /// An MBR extended partition: a container of logical partitions, holding no filesystem.
    pub fn is_extended(&self) -> bool {
        matches!(self, PartKind::Mbr(t) if MBR_EXTENDED.contains(t))
    }
}

impl fmt::Display for PartKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartKind::Mbr(t) => write!(f, "type {t:#04x}"),
            PartKind::Gpt {
                type_guid, name, ..
            } => write!(f, "type {type_guid} name {name:?}"),
        }
    }
}

/// What partition [`append`] adds: its GPT type and name, or its MBR type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    /// The GPT partition name (up to 36 UTF-16 units; longer is cut).
    pub name: String,
    pub gpt_type: Guid,
    pub mbr_type: u8,
}

impl Append {
    /// A FAT filesystem named `name`: GPT Microsoft basic data, MBR 0x0c (FAT32 LBA).
    pub fn fat(name: &str) -> Append {
        Append {
            name: name.to_string(),
            gpt_type: Guid::MICROSOFT_BASIC_DATA,
            mbr_type: MBR_FAT32_LBA,
        }
    }

    /// Any other filesystem named `name` (an ISO 9660 config drive): GPT Linux filesystem
    /// data, MBR 0x83, as `sgdisk` and `sfdisk` make a partition by default.
    pub fn linux(name: &str) -> Append {
        Append {
            name: name.to_string(),
            gpt_type: Guid::LINUX_FILESYSTEM,
            mbr_type: MBR_LINUX,
        }
    }
}

/// One of the MBR's four primary entries.
#[derive(Debug, Clone, Copy)]
struct MbrEntry {
    /// Its byte offset in the first sector.
    at: usize,
    status: u8,
    kind: u8,
    start: u64,
    count: u64,
}

fn mbr_entries(mbr: &[u8; 512]) -> [MbrEntry; 4] {
    std::array::from_fn(|i| {
        let at = 446 + 16 * i;
        let e = &mbr[at..at + 16];
        MbrEntry {
            at,
            status: e[0],
            kind: e[4],
            start: u64::from(u32::from_le_bytes([e[8], e[9], e[10], e[11]])),
            count: u64::from(u32::from_le_bytes([e[12], e[13], e[14], e[15]])),
        }
    })
}

/// The first sector, checked to hold a partition table.
fn read_mbr(disk: &Disk) -> Result<[u8; 512], DiskError> {
    let no_table = |detail: String| DiskError::NoTable {
        disk: disk.name(),
        detail,
    };
    if disk.size() < 512 {
        return Err(no_table(format!("the disk has only {} bytes", disk.size())));
    }
    let mut mbr = [0u8; 512];
    disk.read_at(0, &mut mbr, "reading the MBR")?;
    if mbr[510..512] != [0x55, 0xAA] {
        return Err(no_table(format!(
            "no 0x55AA signature at byte 510 (found {:#04x}{:02x})",
            mbr[510], mbr[511]
        )));
    }
    // As blkid: a FAT boot sector is a filesystem on the whole disk even when the bytes where
    // entries would be look like (empty) entries.
    if super::fs::is_fat_boot_sector(&mbr) {
        return Err(no_table(
            "the first sector is a FAT boot sector: a filesystem on the whole disk".into(),
        ));
    }
    for (i, e) in mbr_entries(&mbr).iter().enumerate() {
        if e.status != 0 && e.status != 0x80 {
            return Err(no_table(format!(
                "MBR entry {} has boot flag {:#04x} (not 0x00 or 0x80): the first sector is \
                 a boot sector, not a partition table",
                i + 1,
                e.status
            )));
        }
    }
    Ok(mbr)
}

/// Reads the disk's partition table: GPT when the MBR has a protective entry, else MBR.
pub fn read(disk: &Disk) -> Result<Table, DiskError> {
    let mbr = read_mbr(disk)?;
    let entries = mbr_entries(&mbr);
    if entries.iter().any(|e| e.kind == MBR_GPT_PROTECTIVE) {
        let gpt = gpt::read(disk)?;
        return Ok(Table {
            scheme: Scheme::Gpt,
            sector: disk.sector(),
            partitions: gpt.partitions(disk)?,
        });
    }
    Ok(Table {
        scheme: Scheme::Mbr,
        sector: disk.sector(),
        partitions: mbr_partitions(disk, &entries)?,
    })
}

fn mbr_partitions(disk: &Disk, entries: &[MbrEntry; 4]) -> Result<Vec<Partition>, DiskError> {
    let sector = disk.sector();
    let sectors = disk.size() / sector;
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.kind == 0 {
            continue;
        }
        let number = i as u32 + 1;
        if e.start == 0 || e.count == 0 || e.start + e.count > sectors {
            return Err(DiskError::Corrupt {
                disk: disk.name(),
                scheme: Scheme::Mbr,
                detail: format!(
                    "partition {number} (type {:#04x}) spans sectors {}..{}, not inside the \
                     disk's 1..{sectors} sectors of {sector} bytes",
                    e.kind,
                    e.start,
                    e.start + e.count
                ),
            });
        }
        out.push(Partition {
            number,
            start: e.start * sector,
            size: e.count * sector,
            kind: PartKind::Mbr(e.kind),
        });
    }
    Ok(out)
}

/// Adds one partition holding `content` (padded with zeros to a whole sector) at the first
/// 1 MiB boundary after every existing partition, and records it in the table: on MBR in the
/// first free primary entry with `what.mbr_type`; on GPT in the first free entry with
/// `what.gpt_type`, `what.name` and a random unique GUID, the backup GPT moved to the disk's last
/// LBA. The content is written and flushed before the table changes.
pub fn append(disk: &Disk, content: &[u8], what: &Append) -> Result<Partition, DiskError> {
    let mbr = read_mbr(disk)?;
    let entries = mbr_entries(&mbr);
    if entries.iter().any(|e| e.kind == MBR_GPT_PROTECTIVE) {
        let table = gpt::read(disk)?;
        return gpt::append(disk, &table, content, what);
    }
    let parts = mbr_partitions(disk, &entries)?;
    let Some(slot) = entries.iter().find(|e| e.kind == 0) else {
        return Err(DiskError::TableFull {
            disk: disk.name(),
            scheme: Scheme::Mbr,
            entries: 4,
        });
    };
    let sector = disk.sector();
    let after = parts.iter().map(|p| p.start + p.size).max().unwrap_or(0);
    let start = super::round_up(after.max(1), ALIGN).unwrap_or(u64::MAX) / sector;
    let count = (content.len() as u64).div_ceil(sector).max(1);
    // An MBR entry holds a 32-bit start and count.
    let sectors = disk.size() / sector;
    let addressable = u64::from(u32::MAX);
    let end = sectors.min(addressable);
    if start >= end || count > end - start {
        return Err(DiskError::NoSpace {
            disk: disk.name(),
            needed: count * sector,
            free: end.saturating_sub(start) * sector,
            start: start.saturating_mul(sector),
            limit: if sectors > addressable {
                format!(
                    " (an MBR addresses only the first {} bytes)",
                    addressable * sector
                )
            } else {
                String::new()
            },
        });
    }
    let mut padded = content.to_vec();
    padded.resize((count * sector) as usize, 0);
    disk.write_at(
        start * sector,
        &padded,
        "writing the new partition's content",
    )?;
    disk.sync("flushing the new partition's content")?;

    let mut entry = [0u8; 16];
    entry[1..4].copy_from_slice(&chs(start));
    entry[4] = what.mbr_type;
    entry[5..8].copy_from_slice(&chs(start + count - 1));
    entry[8..12].copy_from_slice(&(start as u32).to_le_bytes());
    entry[12..16].copy_from_slice(&(count as u32).to_le_bytes());
    disk.write_at(slot.at as u64, &entry, "writing the MBR entry")?;
    disk.sync("flushing the MBR")?;
    Ok(Partition {
        number: ((slot.at - 446) / 16) as u32 + 1,
        start: start * sector,
        size: count * sector,
        kind: PartKind::Mbr(what.mbr_type),
    })
}

/// An LBA as an MBR's cylinder/head/sector triple for the 255-head, 63-sector geometry, or the
/// 1023/254/63 that says "past CHS" for an LBA beyond it.
pub(super) fn chs(lba: u64) -> [u8; 3] {
    const HEADS: u64 = 255;
    const SECTORS: u64 = 63;
    let c = lba / (HEADS * SECTORS);
    if c > 1023 {
        return [0xFE, 0xFF, 0xFF];
    }
    let h = (lba / SECTORS) % HEADS;
    let s = lba % SECTORS + 1;
    [
        h as u8,
        (s as u8) | (((c >> 2) & 0xC0) as u8),
        (c & 0xFF) as u8,
    ]
}
