//! Writing a disk image as it streams in: raw images straight through, qcow2 (v2/v3, no
//! compression, encryption, backing file or external data file) converted on the fly by a
//! sequential reader that needs no seeking on the source, and the checksum of the bytes as
//! downloaded (sha256 or md5) verified at the end. The target is a block device on a node or a
//! regular file in a sandbox; on a regular file zero runs become holes. This file reads and
//! writes through `Read` and a `File`; it does not know where the bytes come from (HTTP is the
//! caller's) nor how the target was chosen.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

use md5::Md5;
use sha2::{Digest, Sha256};

use crate::agent::exec::Tail;
use crate::model::hex;

/// The qcow2 magic, "QFI\xfb".
pub const QCOW2_MAGIC: [u8; 4] = *b"QFI\xfb";

/// Clusters seen before the metadata that places them are kept in memory, up to this much.
pub const MAX_OUT_OF_ORDER_BYTES: usize = 256 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("checksum {0:?} is not \"sha256:<hex>\" or \"md5:<hex>\"")]
    BadChecksumSpec(String),
    #[error("checksum mismatch: expected {expected}, the download has {actual}")]
    ChecksumMismatch { expected: String, actual: String },
    #[error("disk_format {0:?} is not raw or qcow2")]
    BadFormat(String),
    #[error("the image is not qcow2 (no QFI\\xfb magic) although disk_format says qcow2")]
    NotQcow2,
    #[error("unsupported qcow2 image: {0}")]
    Unsupported(String),
    #[error("corrupt qcow2 image: {0}")]
    Corrupt(String),
    #[error("reading the image failed after {offset} bytes: {source}")]
    Read { offset: u64, source: std::io::Error },
    #[error("writing {target} failed: {source}")]
    Write {
        target: String,
        source: std::io::Error,
    },
}

/// An expected checksum (the model's; parsed here into this module's error).
pub use crate::model::Checksum;

pub fn parse_checksum(spec: &str) -> Result<Checksum, ImageError> {
    Checksum::parse(spec).map_err(ImageError::BadChecksumSpec)
}

/// raw or qcow2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFormat {
    Raw,
    Qcow2,
}

impl DiskFormat {
    pub fn parse(s: &str) -> Result<DiskFormat, ImageError> {
        match s {
            "raw" => Ok(DiskFormat::Raw),
            "qcow2" => Ok(DiskFormat::Qcow2),
            other => Err(ImageError::BadFormat(other.to_string())),
        }
    }
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub format: DiskFormat,
    /// Bytes downloaded (the image file's size).
    pub downloaded: u64,
    /// The disk's content size: the raw size, or qcow2's virtual size.
    pub disk_bytes: u64,
    /// `sha256:<hex>` of the download (always computed; also md5 when that was asked for).
    pub sha256: String,
}

/// Hashes and counts what passes through.
struct Hashing<R> {
    inner: R,
    sha256: Sha256,
    md5: Option<Md5>,
    count: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha256.update(&buf[..n]);
        if let Some(md5) = &mut self.md5 {
            md5.update(&buf[..n]);
        }
        self.count += n as u64;
        Ok(n)
    }
}

/// Fill `buf` as far as the stream goes; returns how many bytes were read (less only at EOF).
fn read_full(r: &mut impl Read, buf: &mut [u8], offset: u64) -> Result<usize, ImageError> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(ImageError::Read {
                    offset: offset + n as u64,
                    source,
                });
            }
        }
    }
    Ok(n)
}

/// The target: writes at offsets; on a regular file all-zero chunks are skipped (holes).
struct Disk<'a> {
    file: &'a File,
    name: String,
    regular: bool,
}

impl Disk<'_> {
    fn err(&self, source: std::io::Error) -> ImageError {
        ImageError::Write {
            target: self.name.clone(),
            source,
        }
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), ImageError> {
        if self.regular && data.iter().all(|b| *b == 0) {
            return Ok(());
        }
        self.file
            .write_all_at(data, offset)
            .map_err(|e| self.err(e))
    }

    /// Zeros the image states explicitly: a hole already on a file, written on a device.
    fn zero(&self, offset: u64, len: u64) -> Result<(), ImageError> {
        if self.regular {
            return Ok(());
        }
        let zeros = vec![0u8; 1 << 20];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeros.len() as u64) as usize;
            self.file
                .write_all_at(&zeros[..n], offset + done)
                .map_err(|e| self.err(e))?;
            done += n as u64;
        }
        Ok(())
    }

    fn finish(&self, size: u64) -> Result<(), ImageError> {
        if self.regular {
            self.file.set_len(size).map_err(|e| self.err(e))?;
        }
        self.file.sync_all().map_err(|e| self.err(e))
    }
}

/// Stream `source` onto `target` (already open for writing), converting qcow2, then verify
/// `checksum` over the downloaded bytes. `format` None detects qcow2 by its magic. On a
/// checksum mismatch the start of the target is wiped so the node cannot boot a bad image.
pub fn write_image(
    source: impl Read,
    target: &File,
    target_name: &Path,
    format: Option<DiskFormat>,
    checksum: Option<&Checksum>,
    tail: &Tail,
) -> Result<Written, ImageError> {
    use std::os::unix::fs::FileTypeExt;
    let kind = target
        .metadata()
        .map_err(|source| ImageError::Write {
            target: target_name.display().to_string(),
            source,
        })?
        .file_type();
    let disk = Disk {
        file: target,
        name: target_name.display().to_string(),
        regular: !kind.is_block_device() && !kind.is_char_device(),
    };
    if disk.regular {
        target.set_len(0).map_err(|e| disk.err(e))?;
    }
    let mut src = Hashing {
        inner: source,
        sha256: Sha256::new(),
        md5: matches!(checksum, Some(Checksum::Md5(_))).then(Md5::new),
        count: 0,
    };
    // The first chunk decides the format.
    let mut first = vec![0u8; 1 << 20];
    let n = read_full(&mut src, &mut first, 0)?;
    first.truncate(n);
    let is_qcow2 = first.starts_with(&QCOW2_MAGIC);
    let format = match format {
        Some(DiskFormat::Qcow2) if !is_qcow2 => return Err(ImageError::NotQcow2),
        Some(f) => f,
        None if is_qcow2 => DiskFormat::Qcow2,
        None => DiskFormat::Raw,
    };
    tail.line(&format!("writing a {format:?} image to {}", disk.name).to_lowercase());
    let disk_bytes = match format {
        DiskFormat::Raw => copy_raw(first, &mut src, &disk, tail)?,
        DiskFormat::Qcow2 => Qcow2Stream::default().convert(first, &mut src, &disk, tail)?,
    };
    // Drain what the converter did not need, so the checksum covers the whole download.
    let mut rest = vec![0u8; 1 << 20];
    loop {
        let at = src.count;
        if read_full(&mut src, &mut rest, at)? == 0 {
            break;
        }
    }
    disk.finish(disk_bytes)?;
    let downloaded = src.count;
    let sha256 = hex(&src.sha256.finalize());
    let md5 = src.md5.map(|m| hex(&m.finalize()));
    if let Some(expected) = checksum {
        let actual = match expected {
            Checksum::Sha256(_) => sha256.clone(),
            Checksum::Md5(_) => md5.unwrap_or_default(),
        };
        if actual != expected.hex() {
            // Leave no bootable half-truth behind.
            let _ = disk.zero(0, disk_bytes.min(1 << 20));
            if disk.regular {
                let _ = target.set_len(0);
            }
            return Err(ImageError::ChecksumMismatch {
                expected: format!("{}:{}", expected.label(), expected.hex()),
                actual: format!("{}:{actual}", expected.label()),
            });
        }
        tail.line(&format!("checksum {}:{actual} verified", expected.label()));
    }
    tail.line(&format!(
        "wrote {disk_bytes} bytes to {} from {downloaded} downloaded (sha256:{sha256})",
        disk.name
    ));
    Ok(Written {
        format,
        downloaded,
        disk_bytes,
        sha256: format!("sha256:{sha256}"),
    })
}

const MIB: u64 = 1 << 20;
/// Progress lines every this many bytes.
const PROGRESS_EVERY: u64 = 64 * MIB;

fn copy_raw(
    first: Vec<u8>,
    src: &mut impl Read,
    disk: &Disk<'_>,
    tail: &Tail,
) -> Result<u64, ImageError> {
    let mut pos = 0u64;
    let mut buf = first;
    let mut next_progress = PROGRESS_EVERY;
    loop {
        if buf.is_empty() {
            return Ok(pos);
        }
        disk.write_at(pos, &buf)?;
        pos += buf.len() as u64;
        if pos >= next_progress {
            tail.line(&format!("{} MiB written", pos / MIB));
            next_progress += PROGRESS_EVERY;
        }
        buf.resize(1 << 20, 0);
        let n = read_full(src, &mut buf, pos)?;
        buf.truncate(n);
    }
}

/// The parts of a qcow2 header the converter needs.
#[derive(Debug, Clone)]
struct Header {
    cluster_size: u64,
    size: u64,
    l1_size: u64,
    l1_offset: u64,
    refcount_offset: u64,
    refcount_len: u64,
}

fn be32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(x)
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Bits 9-55 of an L1 or L2 entry: a host offset.
const OFFSET_MASK: u64 = 0x00ff_ffff_ffff_fe00;
const L2_COMPRESSED: u64 = 1 << 62;
const L2_ZERO: u64 = 1;

impl Header {
    fn parse(b: &[u8]) -> Result<Header, ImageError> {
        let unsupported = |s: &str| Err(ImageError::Unsupported(s.to_string()));
        if b.len() < 72 || !b.starts_with(&QCOW2_MAGIC) {
            return Err(ImageError::Corrupt("short header".into()));
        }
        let version = be32(b, 4);
        if version != 2 && version != 3 {
            return Err(ImageError::Unsupported(format!("version {version}")));
        }
        if be64(b, 8) != 0 {
            return unsupported("it has a backing file; flatten it with qemu-img convert");
        }
        let cluster_bits = be32(b, 20);
        if !(9..=21).contains(&cluster_bits) {
            return Err(ImageError::Corrupt(format!("cluster_bits {cluster_bits}")));
        }
        if be32(b, 32) != 0 {
            return unsupported("it is encrypted");
        }
        if version == 3 {
            if b.len() < 104 {
                return Err(ImageError::Corrupt("short v3 header".into()));
            }
            let incompatible = be64(b, 72);
            if incompatible & 2 != 0 {
                return unsupported("it is marked corrupt");
            }
            if incompatible & 4 != 0 {
                return unsupported("it uses an external data file");
            }
            if incompatible & 16 != 0 {
                return unsupported("it uses extended L2 entries (subclusters)");
            }
            // Bit 0 (dirty: refcounts may be stale, which this reader ignores) and bit 3
            // (compression type: compressed clusters are refused one by one) are fine.
            if incompatible & !0b1001 != 0 {
                return Err(ImageError::Unsupported(format!(
                    "incompatible features {incompatible:#x}"
                )));
            }
        }
        let cluster_size = 1u64 << cluster_bits;
        let size = be64(b, 24);
        let l1_size = u64::from(be32(b, 36));
        let l1_offset = be64(b, 40);
        let per_l2 = cluster_size / 8;
        let needed = size.div_ceil(cluster_size).div_ceil(per_l2);
        if l1_size < needed || l1_size > (32 << 20) / 8 {
            return Err(ImageError::Corrupt(format!(
                "L1 table of {l1_size} entries for {size} bytes"
            )));
        }
        if l1_offset == 0 || !l1_offset.is_multiple_of(cluster_size) {
            return Err(ImageError::Corrupt(format!("L1 table at {l1_offset}")));
        }
        Ok(Header {
            cluster_size,
            size,
            l1_size,
            l1_offset,
            refcount_offset: be64(b, 48),
            refcount_len: u64::from(be32(b, 56)) * cluster_size,
        })
    }
}

/// A sequential qcow2 → raw converter. The image is read cluster by cluster, front to back;
/// metadata (L1, then L2 tables) says where each data cluster goes. A cluster that arrives
/// before the table that places it is held in memory until that table comes (qemu-img puts
/// tables first, so normally nothing is held).
#[derive(Default)]
struct Qcow2Stream {
    header: Option<Header>,
    l1: Vec<u8>,
    l1_done: bool,
    /// L2 table host offset → L1 index.
    l2_at: HashMap<u64, u64>,
    /// Data cluster host offset → guest offsets.
    data_at: HashMap<u64, Vec<u64>>,
    /// Clusters not yet known to be anything.
    held: HashMap<u64, Vec<u8>>,
    held_bytes: usize,
    written: u64,
    next_progress: u64,
}

impl Qcow2Stream {
    fn convert(
        mut self,
        first: Vec<u8>,
        src: &mut impl Read,
        disk: &Disk<'_>,
        tail: &Tail,
    ) -> Result<u64, ImageError> {
        let header = Header::parse(&first)?;
        let cs = header.cluster_size;
        tail.line(&format!(
            "qcow2: {} bytes virtual, {cs}-byte clusters",
            header.size
        ));
        self.header = Some(header.clone());
        self.next_progress = PROGRESS_EVERY;
        // Re-cut the first chunk into clusters, then keep reading cluster by cluster.
        let mut pending = first;
        let mut pos = 0u64;
        let mut cluster = vec![0u8; cs as usize];
        loop {
            let n = if pending.is_empty() {
                read_full(src, &mut cluster, pos)?
            } else {
                let n = pending.len().min(cluster.len());
                cluster[..n].copy_from_slice(&pending[..n]);
                pending.drain(..n);
                // Top up from the stream when the first chunk ended mid-cluster.
                if n < cluster.len() {
                    n + read_full(src, &mut cluster[n..], pos + n as u64)?
                } else {
                    n
                }
            };
            if n == 0 {
                break;
            }
            cluster[n..].fill(0);
            self.cluster(pos, &cluster, &header, disk, tail)?;
            pos += cs;
            if n < cluster.len() {
                break;
            }
            if self.l1_done && self.l2_at.is_empty() && self.data_at.is_empty() {
                // Everything placed: the rest (refcounts, snapshots) is only hashed.
                break;
            }
        }
        if !self.l1_done || !self.l2_at.is_empty() || !self.data_at.is_empty() {
            let shared = if self.data_at.keys().any(|h| *h < pos) {
                " (or it shares clusters between guest offsets)"
            } else {
                ""
            };
            return Err(ImageError::Corrupt(format!(
                "the image ended at {pos} bytes before all its tables and data{shared}"
            )));
        }
        Ok(header.size)
    }

    fn cluster(
        &mut self,
        host: u64,
        data: &[u8],
        h: &Header,
        disk: &Disk<'_>,
        tail: &Tail,
    ) -> Result<(), ImageError> {
        let cs = h.cluster_size;
        if host == 0 {
            return Ok(()); // the header
        }
        let l1_len = h.l1_size * 8;
        if !self.l1_done && host >= h.l1_offset && host < h.l1_offset + l1_len {
            let take = (h.l1_offset + l1_len - host).min(cs) as usize;
            self.l1.extend_from_slice(&data[..take]);
            if self.l1.len() as u64 == l1_len {
                self.l1_done = true;
                self.parse_l1(h)?;
                // Tables that came early.
                let early: Vec<u64> = self
                    .l2_at
                    .keys()
                    .filter(|o| self.held.contains_key(o))
                    .copied()
                    .collect();
                for off in early {
                    if let Some(table) = self.take_held(off) {
                        self.cluster(off, &table, h, disk, tail)?;
                    }
                }
            }
            return Ok(());
        }
        if h.refcount_len > 0
            && host >= h.refcount_offset
            && host < h.refcount_offset + h.refcount_len
        {
            return Ok(());
        }
        if let Some(l1_index) = self.l2_at.remove(&host) {
            return self.parse_l2(l1_index, data, h, disk, tail);
        }
        if let Some(guests) = self.data_at.remove(&host) {
            for guest in guests {
                self.place(guest, data, h, disk, tail)?;
            }
            return Ok(());
        }
        if self.l1_done && self.l2_at.is_empty() {
            return Ok(()); // known to be nothing we need
        }
        self.held_bytes += data.len();
        if self.held_bytes > MAX_OUT_OF_ORDER_BYTES {
            return Err(ImageError::Unsupported(format!(
                "more than {} MiB of data comes before the tables that place it; \
                 rewrite it with `qemu-img convert -O qcow2` first",
                MAX_OUT_OF_ORDER_BYTES >> 20
            )));
        }
        self.held.insert(host, data.to_vec());
        Ok(())
    }

    fn take_held(&mut self, host: u64) -> Option<Vec<u8>> {
        let data = self.held.remove(&host)?;
        self.held_bytes -= data.len();
        Some(data)
    }

    fn parse_l1(&mut self, h: &Header) -> Result<(), ImageError> {
        for i in 0..h.l1_size as usize {
            let off = be64(&self.l1, i * 8) & OFFSET_MASK;
            if off == 0 {
                continue;
            }
            if !off.is_multiple_of(h.cluster_size) {
                return Err(ImageError::Corrupt(format!("L2 table at {off}")));
            }
            if self.l2_at.insert(off, i as u64).is_some() {
                return Err(ImageError::Corrupt(format!("L2 table at {off} used twice")));
            }
        }
        Ok(())
    }

    fn parse_l2(
        &mut self,
        l1_index: u64,
        table: &[u8],
        h: &Header,
        disk: &Disk<'_>,
        tail: &Tail,
    ) -> Result<(), ImageError> {
        let cs = h.cluster_size;
        let per_l2 = cs / 8;
        for j in 0..per_l2 {
            let entry = be64(table, (j * 8) as usize);
            if entry == 0 {
                continue;
            }
            let guest = (l1_index * per_l2 + j) * cs;
            if guest >= h.size {
                break;
            }
            if entry & L2_COMPRESSED != 0 {
                return Err(ImageError::Unsupported(
                    "it has compressed clusters; rewrite it with `qemu-img convert -O qcow2`"
                        .into(),
                ));
            }
            let off = entry & OFFSET_MASK;
            if entry & L2_ZERO != 0 || off == 0 {
                disk.zero(guest, cs.min(h.size - guest))?;
                continue;
            }
            if !off.is_multiple_of(cs) {
                return Err(ImageError::Corrupt(format!("data cluster at {off}")));
            }
            if let Some(data) = self.held.get(&off).cloned() {
                self.place(guest, &data, h, disk, tail)?;
                // Another entry may point at it too; it is dropped once all tables are read.
                continue;
            }
            self.data_at.entry(off).or_default().push(guest);
        }
        if self.l1_done && self.l2_at.is_empty() {
            self.held.clear();
            self.held_bytes = 0;
        }
        Ok(())
    }

    fn place(
        &mut self,
        guest: u64,
        data: &[u8],
        h: &Header,
        disk: &Disk<'_>,
        tail: &Tail,
    ) -> Result<(), ImageError> {
        let len = (h.size - guest).min(data.len() as u64) as usize;
        disk.write_at(guest, &data[..len])?;
        self.written += len as u64;
        if self.written >= self.next_progress {
            tail.line(&format!("{} MiB of data written", self.written / MIB));
            self.next_progress += PROGRESS_EVERY;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Layouts a qcow2 writer may produce.
    #[derive(Clone, Copy, PartialEq)]
    enum Order {
        /// Header, L1, refcounts, L2 tables, data (what qemu-img writes).
        TablesFirst,
        /// Header, data, L2 tables, L1 last (as after a resize): everything is held.
        DataFirst,
    }

    struct Spec {
        version: u32,
        cluster_bits: u32,
        order: Order,
        /// Guest clusters stored with the v3 "reads as zeros" flag.
        zero_flagged: Vec<u64>,
        compressed: bool,
        backing: bool,
    }

    impl Default for Spec {
        fn default() -> Spec {
            Spec {
                version: 3,
                cluster_bits: 9,
                order: Order::TablesFirst,
                zero_flagged: vec![],
                compressed: false,
                backing: false,
            }
        }
    }

    /// A qcow2 image of `disk`: every cluster with a non-zero byte is allocated.
    fn qcow2(disk: &[u8], spec: &Spec) -> Vec<u8> {
        let cs = 1usize << spec.cluster_bits;
        let per_l2 = cs / 8;
        let clusters = disk.len().div_ceil(cs);
        let l1_size = clusters.div_ceil(per_l2);
        let allocated: Vec<usize> = (0..clusters)
            .filter(|c| {
                disk[c * cs..((c + 1) * cs).min(disk.len())]
                    .iter()
                    .any(|b| *b != 0)
            })
            .collect();
        // Host cluster numbers.
        let mut next = 1usize;
        let mut take = |n: usize| {
            let at = next;
            next += n;
            at
        };
        let l1_clusters = (l1_size * 8).div_ceil(cs);
        let (l1_at, refcount_at, l2_at, data_at);
        match spec.order {
            Order::TablesFirst => {
                l1_at = take(l1_clusters);
                refcount_at = take(1);
                l2_at = take(l1_size);
                data_at = take(allocated.len());
            }
            Order::DataFirst => {
                refcount_at = take(1);
                data_at = take(allocated.len());
                l2_at = take(l1_size);
                l1_at = take(l1_clusters);
            }
        }
        let mut img = vec![0u8; next * cs];
        let put64 = |img: &mut Vec<u8>, at: usize, v: u64| {
            img[at..at + 8].copy_from_slice(&v.to_be_bytes())
        };
        let put32 = |img: &mut Vec<u8>, at: usize, v: u32| {
            img[at..at + 4].copy_from_slice(&v.to_be_bytes())
        };
        img[..4].copy_from_slice(&QCOW2_MAGIC);
        put32(&mut img, 4, spec.version);
        if spec.backing {
            put64(&mut img, 8, 200);
            put32(&mut img, 16, 4);
        }
        put32(&mut img, 20, spec.cluster_bits);
        put64(&mut img, 24, disk.len() as u64);
        put32(&mut img, 36, l1_size as u32);
        put64(&mut img, 40, (l1_at * cs) as u64);
        put64(&mut img, 48, (refcount_at * cs) as u64);
        put32(&mut img, 56, 1);
        if spec.version == 3 {
            put32(&mut img, 96, 4);
            put32(&mut img, 100, 104);
        }
        for i in 0..l1_size {
            put64(
                &mut img,
                l1_at * cs + i * 8,
                ((l2_at + i) * cs) as u64 | 1 << 63,
            );
        }
        for (n, c) in allocated.iter().enumerate() {
            let host = (data_at + n) * cs;
            let len = cs.min(disk.len() - c * cs);
            img[host..host + len].copy_from_slice(&disk[c * cs..c * cs + len]);
            let mut entry = host as u64 | 1 << 63;
            if spec.compressed {
                entry |= L2_COMPRESSED;
            }
            put64(
                &mut img,
                (l2_at + c / per_l2) * cs + (c % per_l2) * 8,
                entry,
            );
        }
        for c in &spec.zero_flagged {
            let c = *c as usize;
            put64(
                &mut img,
                (l2_at + c / per_l2) * cs + (c % per_l2) * 8,
                L2_ZERO,
            );
        }
        img
    }

    /// A guest disk of `len` bytes with a few recognisable non-zero regions.
    fn guest(len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len];
        d[..16].copy_from_slice(b"bootsector-magic");
        for (i, b) in d[3000..9000].iter_mut().enumerate() {
            *b = (i % 251) as u8 + 1;
        }
        let end = len - 5;
        d[end..].copy_from_slice(b"tail!");
        d
    }

    fn write(
        img: &[u8],
        format: Option<DiskFormat>,
        sum: Option<&str>,
    ) -> (Result<Written, ImageError>, Vec<u8>, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vda");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        let tail = Tail::default();
        let sum = sum.map(|s| Checksum::parse(s).unwrap());
        let r = write_image(img, &file, &path, format, sum.as_ref(), &tail);
        drop(file);
        (r, std::fs::read(&path).unwrap(), tail.text())
    }

    fn sha256_hex(b: &[u8]) -> String {
        hex(&Sha256::digest(b))
    }

    #[test]
    fn raw_is_copied_sparse_and_checked() {
        let disk = guest(3 << 20);
        let sum = format!("sha256:{}", sha256_hex(&disk));
        let (r, out, tail) = write(&disk, None, Some(&sum));
        let w = r.unwrap();
        assert_eq!(out, disk);
        assert_eq!(
            (w.format, w.downloaded, w.disk_bytes),
            (DiskFormat::Raw, 3 << 20, 3 << 20)
        );
        assert_eq!(w.sha256, sum);
        assert!(tail.contains("verified"), "{tail}");
        let md5 = format!("md5:{}", hex(&Md5::digest(&disk)));
        assert!(write(&disk, Some(DiskFormat::Raw), Some(&md5)).0.is_ok());

        let wrong = format!("sha256:{}", "0".repeat(64));
        let (r, out, _) = write(&disk, None, Some(&wrong));
        let err = r.unwrap_err().to_string();
        assert!(
            err.starts_with("checksum mismatch: expected sha256:000"),
            "{err}"
        );
        assert!(out.is_empty(), "a bad image is not left on a file target");
    }

    #[test]
    fn qcow2_v2_and_v3_convert_to_the_guest_disk() {
        let disk = guest(64 * 1024 + 300);
        for version in [2, 3] {
            for order in [Order::TablesFirst, Order::DataFirst] {
                let img = qcow2(
                    &disk,
                    &Spec {
                        version,
                        order,
                        ..Spec::default()
                    },
                );
                let sum = format!("sha256:{}", sha256_hex(&img));
                let (r, out, tail) = write(&img, None, Some(&sum));
                let w = r.unwrap_or_else(|e| panic!("v{version}: {e}"));
                assert_eq!(w.format, DiskFormat::Qcow2);
                assert_eq!(w.downloaded, img.len() as u64);
                assert_eq!(w.disk_bytes, disk.len() as u64);
                assert!(out == disk, "v{version} converted content differs");
                assert!(tail.contains("qcow2: 65836 bytes virtual"), "{tail}");
            }
        }
    }

    #[test]
    fn qcow2_with_big_clusters_and_zero_flags() {
        // 64 KiB clusters (qemu's default), one of them flagged "reads as zeros".
        let mut disk = guest(1 << 20);
        disk[70_000] = 9;
        let img = qcow2(
            &disk,
            &Spec {
                cluster_bits: 16,
                zero_flagged: vec![7],
                ..Spec::default()
            },
        );
        let (r, out, _) = write(&img, Some(DiskFormat::Qcow2), None);
        r.unwrap();
        assert!(out == disk);
        // 2 MiB clusters: one cluster is larger than the first chunk.
        let img = qcow2(
            &disk,
            &Spec {
                cluster_bits: 21,
                ..Spec::default()
            },
        );
        let (r, out, _) = write(&img, None, None);
        r.unwrap();
        assert!(out == disk);
    }

    #[test]
    fn unsupported_and_broken_qcow2_are_refused_clearly() {
        let disk = guest(16 * 1024);
        let err = |img: &[u8]| write(img, None, None).0.unwrap_err().to_string();
        let e = err(&qcow2(
            &disk,
            &Spec {
                compressed: true,
                ..Spec::default()
            },
        ));
        assert!(e.contains("compressed clusters"), "{e}");
        let e = err(&qcow2(
            &disk,
            &Spec {
                backing: true,
                ..Spec::default()
            },
        ));
        assert!(e.contains("backing file"), "{e}");
        let mut img = qcow2(&disk, &Spec::default());
        img[35] = 1; // crypt_method AES
        assert!(err(&img).contains("encrypted"));
        let img = qcow2(&disk, &Spec::default());
        let e = err(&img[..img.len() - 512]);
        assert!(e.contains("ended at"), "{e}");
        let e = err(&img[..50]);
        assert!(e.contains("short header"), "{e}");
        let e = write(&disk, Some(DiskFormat::Qcow2), None)
            .0
            .unwrap_err()
            .to_string();
        assert!(e.contains("not qcow2"), "{e}");
        // raw forced on a qcow2 file writes the file as is.
        let (r, out, _) = write(&img, Some(DiskFormat::Raw), None);
        assert_eq!(r.unwrap().format, DiskFormat::Raw);
        assert_eq!(out, img);
    }

    #[test]
    fn checksum_specs() {
        let h = "ab".repeat(32);
        assert_eq!(
            Checksum::parse(&format!("sha256:{h}")).unwrap(),
            Checksum::Sha256(h.clone())
        );
        assert_eq!(
            Checksum::parse(&h.to_uppercase()).unwrap(),
            Checksum::Sha256(h.clone())
        );
        assert_eq!(
            Checksum::parse(&format!("MD5:{}", &h[..32])).unwrap(),
            Checksum::Md5(h[..32].into())
        );
        for bad in ["sha1:abc", "sha256:xyz", "md5:", "abc", &format!("md5:{h}")] {
            assert!(Checksum::parse(bad).is_err(), "{bad}");
        }
        assert!(DiskFormat::parse("vmdk").is_err());
    }
}

/// Against images qemu-img itself writes: ignored by `cargo test`, failing when qemu-img is
/// missing; `.ci/run` installs qemu-utils and runs it.
#[cfg(test)]
mod qemu_img {
    use super::*;
    use std::process::Command;

    fn qemu_img(args: &[&str]) {
        let out = Command::new("qemu-img").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "qemu-img {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn convert(img: &Path, out: &Path) -> Result<Written, ImageError> {
        let file = File::create(out).unwrap();
        let src = File::open(img).unwrap();
        write_image(src, &file, out, None, None, &Tail::default())
    }

    #[test]
    #[ignore = "needs qemu-img (Debian qemu-utils): .ci/run installs it and runs this"]
    fn images_written_by_qemu_img_convert_exactly() {
        assert!(
            crate::agent::exec::find_on_path("qemu-img").is_some(),
            "qemu-img is not installed (apt-get install qemu-utils)"
        );
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("disk.raw");
        // 24 MiB with data scattered: start, middle, a run across an L2 boundary, the end.
        let mut disk = vec![0u8; 24 << 20];
        let mut x = 12345u32;
        for (at, len) in [
            (0usize, 70_000usize),
            (5 << 20, 1 << 20),
            ((16 << 20) - 4096, 300_000),
            ((24 << 20) - 513, 513),
        ] {
            for b in &mut disk[at..at + len] {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                *b = (x >> 16) as u8 | 1;
            }
        }
        std::fs::write(&raw, &disk).unwrap();
        let raw_s = raw.to_str().unwrap();
        let cases: &[(&str, &[&str])] = &[
            ("v3-64k", &["-o", "compat=1.1"]),
            ("v2-64k", &["-o", "compat=0.10"]),
            ("v3-4k", &["-o", "cluster_size=4096"]),
            ("v3-2m", &["-o", "cluster_size=2M"]),
            ("v3-prealloc", &["-o", "preallocation=metadata"]),
        ];
        for (name, opts) in cases {
            let img = dir.path().join(format!("{name}.qcow2"));
            let mut args = vec!["convert", "-f", "raw", "-O", "qcow2"];
            args.extend_from_slice(opts);
            args.extend([raw_s, img.to_str().unwrap()]);
            qemu_img(&args);
            let out = dir.path().join(format!("{name}.out"));
            let w = convert(&img, &out).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(w.format, DiskFormat::Qcow2);
            assert!(
                std::fs::read(&out).unwrap() == disk,
                "{name}: content differs"
            );
        }
        // Grown after the fact (the L1 table may move to the end of the file).
        let img = dir.path().join("grown.qcow2");
        qemu_img(&[
            "convert",
            "-f",
            "raw",
            "-O",
            "qcow2",
            "-o",
            "cluster_size=512",
            raw_s,
            img.to_str().unwrap(),
        ]);
        qemu_img(&["resize", img.to_str().unwrap(), "64M"]);
        let out = dir.path().join("grown.out");
        let w = convert(&img, &out).unwrap();
        assert_eq!(w.disk_bytes, 64 << 20);
        let got = std::fs::read(&out).unwrap();
        assert!(got[..disk.len()] == disk[..] && got[disk.len()..].iter().all(|b| *b == 0));
        // Compressed: refused.
        let img = dir.path().join("c.qcow2");
        qemu_img(&[
            "convert",
            "-c",
            "-f",
            "raw",
            "-O",
            "qcow2",
            raw_s,
            img.to_str().unwrap(),
        ]);
        let e = convert(&img, &dir.path().join("c.out"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("compressed"), "{e}");
    }
}
