//! The GUID partition table (UEFI spec, chapter 5): reading the primary header at LBA 1 or, when
//! it is corrupt, the backup (at the disk's last LBA, or where the primary says it is), both
//! with their CRC32s checked; and adding one entry, which also moves the backup header and
//! entries array to the end of a disk larger than the image that was written to it and fixes
//! the primary's alternate and last-usable LBAs. [`Guid`] is a GUID in GPT's on-disk byte order
//! (the first three fields little-endian).
//!
//! Bounds on what the disk says: a header of 92 bytes up to one sector, an entry size of
//! 128..=4096 bytes (a multiple of 8), at most 1024 entries (so at most 4 MiB read), the
//! entries array and every partition inside the disk.

use std::fmt;

use super::table::{Append, PartKind, Partition, Scheme};
use super::{Disk, DiskError};

/// A GUID as GPT stores it: `d1`, `d2`, `d3` little-endian, the last 8 bytes as written.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    pub const ZERO: Guid = Guid([0; 16]);
    /// Microsoft basic data: FAT and NTFS partitions (and so config drives).
    pub const MICROSOFT_BASIC_DATA: Guid = Guid::from_fields(
        0xEBD0A0A2,
        0xB9E5,
        0x4433,
        [0x87, 0xC0, 0x68, 0xB6, 0xB7, 0x26, 0x99, 0xC7],
    );
    /// Linux filesystem data: what `sgdisk` and `sfdisk` give a Linux partition by default
    /// (and so an ISO 9660 config drive).
    pub const LINUX_FILESYSTEM: Guid = Guid::from_fields(
        0x0FC63DAF,
        0x8483,
        0x4772,
        [0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47, 0x7D, 0xE4],
    );
    /// Linux root (x86-64), from the Discoverable Partitions Specification.
    pub const LINUX_ROOT_X86_64: Guid = Guid::from_fields(
        0x4F68BCE3,
        0xE8CD,
        0x4DB1,
        [0x96, 0xE7, 0xFB, 0xCA, 0xF9, 0x84, 0xB7, 0x09],
    );
    /// Linux root (aarch64).
    pub const LINUX_ROOT_AARCH64: Guid = Guid::from_fields(
        0xB921B045,
        0x1DF0,
        0x41C3,
        [0xAF, 0x44, 0x4C, 0x6F, 0x28, 0x0D, 0x3F, 0xAE],
    );

    /// The GUID written `d1-d2-d3-d4[0..2]-d4[2..8]`.
    pub const fn from_fields(d1: u32, d2: u16, d3: u16, d4: [u8; 8]) -> Guid {
        let a = d1.to_le_bytes();
        let b = d2.to_le_bytes();
        let c = d3.to_le_bytes();
        Guid([
            a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d4[0], d4[1], d4[2], d4[3], d4[4],
            d4[5], d4[6], d4[7],
        ])
    }

    /// Parses `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX` (either case).
    pub fn parse(s: &str) -> Option<Guid> {
        let b = s.as_bytes();
        if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        let hex: String = s.chars().filter(|&c| c != '-').collect();
        if hex.len() != 32 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let mut rfc = [0u8; 16];
        for (i, byte) in rfc.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Guid::from_rfc_bytes(rfc))
    }

    /// A random (version 4) GUID.
    pub fn random() -> Result<Guid, getrandom::Error> {
        let mut rfc = [0u8; 16];
        getrandom::fill(&mut rfc)?;
        rfc[6] = (rfc[6] & 0x0f) | 0x40;
        rfc[8] = (rfc[8] & 0x3f) | 0x80;
        Ok(Guid::from_rfc_bytes(rfc))
    }

    /// From the bytes in the order the text form shows them (RFC 4122, big-endian fields).
    fn from_rfc_bytes(r: [u8; 16]) -> Guid {
        let mut d4 = [0u8; 8];
        d4.copy_from_slice(&r[8..]);
        Guid::from_fields(
            u32::from_be_bytes([r[0], r[1], r[2], r[3]]),
            u16::from_be_bytes([r[4], r[5]]),
            u16::from_be_bytes([r[6], r[7]]),
            d4,
        )
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:08X}-{:04X}-{:04X}-{:02X}{:02X}-",
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            u16::from_le_bytes([b[4], b[5]]),
            u16::from_le_bytes([b[6], b[7]]),
            b[8],
            b[9]
        )?;
        b[10..].iter().try_for_each(|x| write!(f, "{x:02X}"))
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

const SIGNATURE: &[u8; 8] = b"EFI PART";
const MIN_HEADER: usize = 92;
pub(super) const MAX_ENTRIES: u32 = 1024;
pub(super) const MAX_ENTRY_SIZE: u32 = 4096;
const MIN_ENTRY_SIZE: u32 = 128;
/// An entry's name: 36 UTF-16LE code units at +56.
const NAME_UNITS: usize = 36;

/// A GPT as read: the header in use (kept whole, so fields this code does not know survive a
/// rewrite), its fields, and the entries array.
#[derive(Debug, Clone)]
pub(super) struct Gpt {
    raw: Vec<u8>,
    pub my_lba: u64,
    pub alternate_lba: u64,
    pub first_usable: u64,
    pub last_usable: u64,
    pub entries_lba: u64,
    pub num_entries: u32,
    pub entry_size: u32,
    pub entries: Vec<u8>,
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The CRC32 of a header of `size` bytes with its own CRC field (at +16) taken as zero.
fn header_crc(raw: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&raw[..16]);
    h.update(&[0; 4]);
    h.update(&raw[20..]);
    h.finalize()
}

impl Gpt {
    /// The bytes of the entries array in sectors.
    fn entries_sectors(&self, sector: u64) -> u64 {
        (u64::from(self.num_entries) * u64::from(self.entry_size)).div_ceil(sector)
    }

    /// Whether this table came from a backup header.
    pub fn is_backup(&self) -> bool {
        self.my_lba != 1
    }

    /// The header for `my_lba` (with these alternate, entries and last-usable LBAs), in a
    /// whole zero-padded sector with its CRC computed.
    fn header_sector(&self, sector: u64, at: HeaderAt, entries_crc: u32) -> Vec<u8> {
        let mut raw = self.raw.clone();
        raw[24..32].copy_from_slice(&at.my_lba.to_le_bytes());
        raw[32..40].copy_from_slice(&at.alternate_lba.to_le_bytes());
        raw[48..56].copy_from_slice(&at.last_usable.to_le_bytes());
        raw[72..80].copy_from_slice(&at.entries_lba.to_le_bytes());
        raw[88..92].copy_from_slice(&entries_crc.to_le_bytes());
        let crc = header_crc(&raw);
        raw[16..20].copy_from_slice(&crc.to_le_bytes());
        raw.resize(sector as usize, 0);
        raw
    }

    /// The partitions of the non-empty entries, numbered from 1 by entry.
    pub fn partitions(&self, disk: &Disk) -> Result<Vec<Partition>, DiskError> {
        let sector = disk.sector();
        let sectors = disk.size() / sector;
        let mut out = Vec::new();
        for (i, e) in self
            .entries
            .chunks_exact(self.entry_size as usize)
            .enumerate()
        {
            let mut t = [0u8; 16];
            t.copy_from_slice(&e[..16]);
            let type_guid = Guid(t);
            if type_guid == Guid::ZERO {
                continue;
            }
            let number = i as u32 + 1;
            let mut u = [0u8; 16];
            u.copy_from_slice(&e[16..32]);
            let (first, last) = (le_u64(e, 32), le_u64(e, 40));
            if first > last || last >= sectors {
                return Err(DiskError::Corrupt {
                    disk: disk.name(),
                    scheme: Scheme::Gpt,
                    detail: format!(
                        "partition {number} spans LBA {first}..={last}, outside the disk's \
                         {sectors} sectors of {sector} bytes"
                    ),
                });
            }
            let units: Vec<u16> = e[56..56 + 2 * NAME_UNITS]
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .take_while(|&c| c != 0)
                .collect();
            let name = char::decode_utf16(units)
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect();
            out.push(Partition {
                number,
                start: first * sector,
                size: (last - first + 1) * sector,
                kind: PartKind::Gpt {
                    type_guid,
                    uuid: Guid(u),
                    name,
                },
            });
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, Copy)]
struct HeaderAt {
    my_lba: u64,
    alternate_lba: u64,
    entries_lba: u64,
    last_usable: u64,
}

/// The disk's GPT: the primary header if it is sound, else the backup at the last LBA, else the
/// backup where the primary says it is (an image written to a larger disk keeps its backup at
/// the image's end).
pub(super) fn read(disk: &Disk) -> Result<Gpt, DiskError> {
    let sector = disk.sector();
    let sectors = disk.size() / sector;
    if sectors < 4 {
        return Err(corrupt(
            disk,
            format!("the disk has {sectors} sectors, too few for a GPT"),
        ));
    }
    let primary = match header_at(disk, 1)? {
        Ok(gpt) => return Ok(gpt),
        Err(problem) => problem,
    };
    let mut candidates = vec![sectors - 1];
    let mut first = vec![0u8; sector as usize];
    disk.read_at(sector, &mut first, "reading the primary GPT header")?;
    if &first[..8] == SIGNATURE {
        let alternate = le_u64(&first, 32);
        if alternate > 1 && alternate < sectors - 1 {
            candidates.push(alternate);
        }
    }
    let mut problems = vec![format!("primary header at LBA 1: {primary}")];
    for lba in candidates {
        match header_at(disk, lba)? {
            Ok(gpt) => return Ok(gpt),
            Err(problem) => problems.push(format!("backup header at LBA {lba}: {problem}")),
        }
    }
    Err(corrupt(disk, problems.join("; ")))
}

fn corrupt(disk: &Disk, detail: String) -> DiskError {
    DiskError::Corrupt {
        disk: disk.name(),
        scheme: Scheme::Gpt,
        detail,
    }
}

/// The GPT whose header is at `lba`, or what is wrong with it.
fn header_at(disk: &Disk, lba: u64) -> Result<Result<Gpt, String>, DiskError> {
    let sector = disk.sector();
    let sectors = disk.size() / sector;
    let mut buf = vec![0u8; sector as usize];
    disk.read_at(lba * sector, &mut buf, "reading a GPT header")?;
    if &buf[..8] != SIGNATURE {
        return Ok(Err("no \"EFI PART\" signature".into()));
    }
    let header_size = le_u32(&buf, 12) as usize;
    if header_size < MIN_HEADER || header_size > buf.len() {
        return Ok(Err(format!(
            "header size {header_size} is not within {MIN_HEADER}..={}",
            buf.len()
        )));
    }
    let raw = buf[..header_size].to_vec();
    let (stored, actual) = (le_u32(&raw, 16), header_crc(&raw));
    if stored != actual {
        return Ok(Err(format!(
            "header CRC32 is {stored:#010x}, the header's bytes give {actual:#010x}"
        )));
    }
    let gpt = Gpt {
        my_lba: le_u64(&raw, 24),
        alternate_lba: le_u64(&raw, 32),
        first_usable: le_u64(&raw, 40),
        last_usable: le_u64(&raw, 48),
        entries_lba: le_u64(&raw, 72),
        num_entries: le_u32(&raw, 80),
        entry_size: le_u32(&raw, 84),
        entries: Vec::new(),
        raw,
    };
    if gpt.my_lba != lba {
        return Ok(Err(format!("it says it is at LBA {}", gpt.my_lba)));
    }
    if !(MIN_ENTRY_SIZE..=MAX_ENTRY_SIZE).contains(&gpt.entry_size)
        || !gpt.entry_size.is_multiple_of(8)
    {
        return Ok(Err(format!(
            "entry size {} is not a multiple of 8 within {MIN_ENTRY_SIZE}..={MAX_ENTRY_SIZE}",
            gpt.entry_size
        )));
    }
    if gpt.num_entries > MAX_ENTRIES {
        return Ok(Err(format!(
            "{} entries, over the {MAX_ENTRIES} this reads",
            gpt.num_entries
        )));
    }
    if gpt.first_usable > gpt.last_usable || gpt.last_usable >= sectors {
        return Ok(Err(format!(
            "usable LBAs {}..={} are not inside the disk's {sectors} sectors",
            gpt.first_usable, gpt.last_usable
        )));
    }
    let entries_end = gpt.entries_lba.saturating_add(gpt.entries_sectors(sector));
    let inside = if lba == 1 {
        gpt.entries_lba >= 2 && entries_end <= gpt.first_usable
    } else {
        gpt.entries_lba > gpt.last_usable && entries_end <= lba
    };
    if !inside {
        return Ok(Err(format!(
            "the entries array at LBA {}..{entries_end} overlaps the usable LBAs {}..={} or \
             its header",
            gpt.entries_lba, gpt.first_usable, gpt.last_usable
        )));
    }
    let len = gpt.num_entries as usize * gpt.entry_size as usize;
    let mut entries = vec![0u8; len];
    disk.read_at(
        gpt.entries_lba * sector,
        &mut entries,
        "reading the GPT entries",
    )?;
    let (stored, actual) = (le_u32(&gpt.raw, 88), crc32fast::hash(&entries));
    if stored != actual {
        return Ok(Err(format!(
            "entries CRC32 is {stored:#010x}, the {} entries at LBA {} give {actual:#010x}",
            gpt.num_entries, gpt.entries_lba
        )));
    }
    Ok(Ok(Gpt { entries, ..gpt }))
}

/// Adds one partition holding `content` after the last one, 1 MiB aligned, and rewrites the
/// table with the backup at the disk's last LBA. Writes, each followed by an fsync: the
/// primary repaired from the backup first when that is what was read (the content may
/// overwrite an old backup); the content; the new backup; the new primary and protective MBR.
/// Until that last write the primary still describes the original table.
pub(super) fn append(
    disk: &Disk,
    gpt: &Gpt,
    content: &[u8],
    what: &Append,
) -> Result<Partition, DiskError> {
    let sector = disk.sector();
    let sectors = disk.size() / sector;
    let last_lba = sectors - 1;
    let entries_sectors = gpt.entries_sectors(sector);
    let parts = gpt.partitions(disk)?;
    let Some(slot) = gpt
        .entries
        .chunks_exact(gpt.entry_size as usize)
        .position(|e| e[..16] == [0; 16])
    else {
        return Err(DiskError::TableFull {
            disk: disk.name(),
            scheme: Scheme::Gpt,
            entries: gpt.num_entries,
        });
    };
    // The new backup's entries array sits right before the last LBA; the usable area ends
    // before it.
    // (read() checked the entries array fits before the first usable LBA, so this is small.)
    let backup_entries_lba = last_lba.saturating_sub(entries_sectors);
    let new_last_usable = backup_entries_lba.saturating_sub(1);
    let after = parts
        .iter()
        .map(|p| (p.start + p.size) / sector)
        .max()
        .unwrap_or(0)
        .max(gpt.first_usable);
    let start = super::round_up(after * sector, super::table::ALIGN)
        .map(|b| b / sector)
        .unwrap_or(u64::MAX);
    let count = (content.len() as u64).div_ceil(sector).max(1);
    let needed = count * sector;
    let free = (new_last_usable + 1).saturating_sub(start) * sector;
    if start > new_last_usable || count > new_last_usable + 1 - start {
        return Err(DiskError::NoSpace {
            disk: disk.name(),
            needed,
            free,
            start: start.saturating_mul(sector),
            limit: format!(
                " (the backup GPT takes the last {} bytes of the disk)",
                (entries_sectors + 1) * sector
            ),
        });
    }
    let uuid = Guid::random().map_err(|e| DiskError::Io {
        disk: disk.name(),
        what: "making a random partition GUID",
        offset: 0,
        len: 16,
        source: std::io::Error::other(e.to_string()),
    })?;

    if gpt.is_backup() {
        write_table(
            disk,
            gpt,
            &gpt.entries,
            gpt.alternate_lba_for_repair(sectors),
        )?;
    }

    let mut padded = content.to_vec();
    padded.resize((count * sector) as usize, 0);
    disk.write_at(
        start * sector,
        &padded,
        "writing the new partition's content",
    )?;
    disk.sync("flushing the new partition's content")?;

    let mut entries = gpt.entries.clone();
    let size = gpt.entry_size as usize;
    let e = &mut entries[slot * size..(slot + 1) * size];
    e.fill(0);
    e[..16].copy_from_slice(&what.gpt_type.0);
    e[16..32].copy_from_slice(&uuid.0);
    e[32..40].copy_from_slice(&start.to_le_bytes());
    e[40..48].copy_from_slice(&(start + count - 1).to_le_bytes());
    for (i, unit) in what.name.encode_utf16().take(NAME_UNITS).enumerate() {
        e[56 + 2 * i..58 + 2 * i].copy_from_slice(&unit.to_le_bytes());
    }
    let moved = Gpt {
        last_usable: new_last_usable,
        alternate_lba: last_lba,
        ..gpt.clone()
    };
    let old_backup = if gpt.is_backup() {
        gpt.my_lba
    } else {
        gpt.alternate_lba
    };
    write_table(disk, &moved, &entries, last_lba)?;

    // The old backup header, when the new partition did not overwrite it, is wiped so that
    // nothing mistakes it for the table: it lies in free space after the last partition.
    let in_new = (start..start + count).contains(&old_backup);
    if old_backup >= after && old_backup <= new_last_usable && !in_new {
        disk.write_at(
            old_backup * sector,
            &vec![0u8; sector as usize],
            "wiping the old backup GPT header",
        )?;
        disk.sync("flushing the wiped old backup GPT header")?;
    }
    Ok(Partition {
        number: slot as u32 + 1,
        start: start * sector,
        size: count * sector,
        kind: PartKind::Gpt {
            type_guid: what.gpt_type,
            uuid,
            name: what.name.chars().take(NAME_UNITS).collect(),
        },
    })
}

impl Gpt {
    /// Where the backup header goes when the primary is rewritten from a backup: where it is.
    fn alternate_lba_for_repair(&self, sectors: u64) -> u64 {
        if self.is_backup() {
            self.my_lba
        } else {
            self.alternate_lba.min(sectors - 1)
        }
    }
}

/// Writes `entries` as the table described by `gpt` with the backup header at `backup_lba`
/// (its entries array just before it): the backup first, then the primary at LBA 1 with its
/// entries array at the usual place, then the protective MBR's size. Each is flushed.
fn write_table(disk: &Disk, gpt: &Gpt, entries: &[u8], backup_lba: u64) -> Result<(), DiskError> {
    let sector = disk.sector();
    let entries_sectors = gpt.entries_sectors(sector);
    let crc = crc32fast::hash(entries);
    let mut array = entries.to_vec();
    array.resize((entries_sectors * sector) as usize, 0);
    let Some(backup_entries_lba) = backup_lba
        .checked_sub(entries_sectors)
        .filter(|&lba| lba > gpt.last_usable)
    else {
        return Err(corrupt(
            disk,
            format!(
                "no room for the backup entries array ({entries_sectors} sectors) before LBA \
                 {backup_lba} after the last usable LBA {}",
                gpt.last_usable
            ),
        ));
    };
    // The primary's entries array: where the primary had it, or LBA 2 when rebuilding the
    // primary from a backup.
    let primary_entries_lba = if gpt.is_backup() { 2 } else { gpt.entries_lba };
    if primary_entries_lba + entries_sectors > gpt.first_usable {
        return Err(corrupt(
            disk,
            format!(
                "the primary entries array cannot be rebuilt at LBA {primary_entries_lba}: \
                 {entries_sectors} sectors would reach the first usable LBA {}",
                gpt.first_usable
            ),
        ));
    }
    let last_usable = gpt.last_usable;
    disk.write_at(
        backup_entries_lba * sector,
        &array,
        "writing the backup GPT entries",
    )?;
    let backup = gpt.header_sector(
        sector,
        HeaderAt {
            my_lba: backup_lba,
            alternate_lba: 1,
            entries_lba: backup_entries_lba,
            last_usable,
        },
        crc,
    );
    disk.write_at(
        backup_lba * sector,
        &backup,
        "writing the backup GPT header",
    )?;
    disk.sync("flushing the backup GPT")?;

    disk.write_at(
        primary_entries_lba * sector,
        &array,
        "writing the primary GPT entries",
    )?;
    let primary = gpt.header_sector(
        sector,
        HeaderAt {
            my_lba: 1,
            alternate_lba: backup_lba,
            entries_lba: primary_entries_lba,
            last_usable,
        },
        crc,
    );
    disk.write_at(sector, &primary, "writing the primary GPT header")?;
    protective_mbr(disk)?;
    disk.sync("flushing the primary GPT")
}

/// Makes the protective MBR's 0xEE entry cover the whole disk, as the spec asks, when it is the
/// only entry (a hybrid MBR is left as it is).
fn protective_mbr(disk: &Disk) -> Result<(), DiskError> {
    let mut mbr = [0u8; 512];
    disk.read_at(0, &mut mbr, "reading the protective MBR")?;
    let entries: Vec<usize> = (0..4)
        .map(|i| 446 + 16 * i)
        .filter(|&at| mbr[at + 4] != 0)
        .collect();
    let [only] = entries[..] else { return Ok(()) };
    if mbr[only + 4] != 0xEE {
        return Ok(());
    }
    let sectors = disk.size() / disk.sector();
    let size = u32::try_from(sectors - 1).unwrap_or(u32::MAX);
    if le_u32(&mbr, only + 12) == size {
        return Ok(());
    }
    mbr[only + 12..only + 16].copy_from_slice(&size.to_le_bytes());
    // The end CHS: past what CHS can say.
    mbr[only + 5..only + 8].copy_from_slice(&super::table::chs(sectors - 1));
    disk.write_at(0, &mbr, "writing the protective MBR")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_text_and_disk_order() {
        let g = Guid::MICROSOFT_BASIC_DATA;
        assert_eq!(g.to_string(), "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7");
        assert_eq!(&g.0[..4], &[0xA2, 0xA0, 0xD0, 0xEB]);
        assert_eq!(Guid::parse("ebd0a0a2-b9e5-4433-87c0-68b6b72699c7"), Some(g));
        assert_eq!(
            Guid::parse(&Guid::LINUX_ROOT_X86_64.to_string()),
            Some(Guid::LINUX_ROOT_X86_64)
        );
        assert_eq!(Guid::parse("EBD0A0A2B9E5-4433-87C0-68B6B72699C7-"), None);
        assert_eq!(Guid::parse("EBD0A0A2-B9E5-4433-87C0-68B6B72699CG"), None);
        assert_eq!(Guid::parse(""), None);
    }

    #[test]
    fn random_guids_are_version_4_and_differ() {
        let a = Guid::random().unwrap();
        let b = Guid::random().unwrap();
        assert_ne!(a, b);
        let text = a.to_string();
        assert_eq!(&text[14..15], "4", "{text}");
        assert!("89AB".contains(&text[19..20]), "{text}");
    }
}
