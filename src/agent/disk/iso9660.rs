//! ISO 9660 images in memory, as `genisoimage -r -V LABEL` writes them, and a bounded reader
//! of them: OpenStack's `config-2` config drive is one (Nova and Ironic write it so).
//!
//! [`build`] lays out 2048-byte sectors: 16 of system area (zeros), the primary volume
//! descriptor (volume id = the label, system id `LINUX`), the set terminator, the path tables
//! (L little-endian, then M big-endian; directories numbered breadth-first, children by
//! identifier), one sector of Rock Ridge continuation area (the `ER` entry naming
//! `RRIP_1991A`), every directory's records (none across a sector boundary), then each file's
//! data from a sector of its own. The image is padded with zeros to a whole MiB (at least one)
//! and the volume size says so. ISO names are level-1 (`META_DAT.JSO;1`, unique in their
//! directory); the exact names are Rock Ridge's: every record carries `RR` + `NM` + `PX`
//! (directories r-xr-xr-x, files r--r--r--, owner 0, as `-r` does), and the root's `.` record
//! starts with `SP` and a `CE` pointing at the `ER`. Every time stamp is 1980-01-01 00:00 UTC,
//! so the bytes depend only on the files. No Joliet tree: Linux prefers Rock Ridge over it, and
//! cloud-init mounts the drive on Linux.
//!
//! [`Image`] reads one (ours, genisoimage's, xorriso's): it walks the primary volume's
//! directories and names entries by their Rock Ridge `NM` when there is one, else by the ISO
//! name lowercased without `;1`. A hostile image cannot make it loop or allocate: extents are
//! checked against the image (files are borrowed slices of it), directories are at most
//! [`MAX_DIR_BYTES`], a directory seen twice or deeper than [`MAX_DEPTH`] is an error, as are
//! more than [`MAX_RECORDS`] records in all, a listing over [`MAX_LISTING_BYTES`] and more than
//! [`MAX_CONTINUATIONS`] `CE` hops.

use std::collections::HashSet;

use super::DiskError;

/// The logical block size written and the only one read.
pub const SECTOR: usize = 2048;
/// The longest name component written (its directory record must stay under 256 bytes).
pub const MAX_NAME: usize = 128;
/// The deepest path written or read, in components.
pub const MAX_DEPTH: usize = 8;
/// The largest directory read.
pub const MAX_DIR_BYTES: u32 = 1 << 20;
/// The most directory records read in one walk or lookup.
pub const MAX_RECORDS: usize = 10_000;
/// The most bytes of paths [`Image::files`] lists.
pub const MAX_LISTING_BYTES: usize = 1 << 20;
/// The most Rock Ridge continuation areas followed for one record.
pub const MAX_CONTINUATIONS: usize = 8;

const MIB: usize = 1 << 20;
/// The first sector after the system area: the primary volume descriptor.
const PVD_SECTOR: usize = 16;
/// A directory record's date: 1980-01-01 00:00:00 UTC (years since 1900, month, day, h, m, s,
/// offset from UTC in 15 minutes).
const RECORD_DATE: [u8; 7] = [80, 1, 1, 0, 0, 0, 0];
/// A volume descriptor's date, the same instant.
const VOLUME_DATE: &[u8; 17] = b"1980010100000000\0";
/// A volume descriptor's "not specified" date.
const NO_DATE: &[u8; 17] = b"0000000000000000\0";
const FLAG_DIR: u8 = 0x02;
const FLAG_MULTI_EXTENT: u8 = 0x80;
/// Rock Ridge `RR` flags: `PX` and `NM` entries are present.
const RR_PX: u8 = 0x01;
const RR_NM: u8 = 0x08;
const MODE_DIR: u32 = 0o040_555;
const MODE_FILE: u32 = 0o100_444;
const ER_ID: &[u8] = b"RRIP_1991A";
const ER_DESCRIPTOR: &[u8] =
    b"THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS";
const ER_SOURCE: &[u8] = b"PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE \
    PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION.";

fn bad(detail: impl Into<String>) -> DiskError {
    DiskError::Iso(detail.into())
}

fn both16(v: u16) -> [u8; 4] {
    let (l, b) = (v.to_le_bytes(), v.to_be_bytes());
    [l[0], l[1], b[0], b[1]]
}

fn both32(v: u32) -> [u8; 8] {
    let (l, b) = (v.to_le_bytes(), v.to_be_bytes());
    [l[0], l[1], l[2], l[3], b[0], b[1], b[2], b[3]]
}

/// `text` in a field of `len` bytes, padded with spaces.
fn padded(text: &[u8], len: usize) -> Vec<u8> {
    let mut v = text[..text.len().min(len)].to_vec();
    v.resize(len, b' ');
    v
}

// ---------------------------------------------------------------------------------------------
// Writing

/// A directory of the image being built.
struct Dir {
    /// Its Rock Ridge name (empty for the root).
    name: String,
    parent: usize,
    /// Its ISO identifier in its parent.
    iso: Vec<u8>,
    /// Subdirectories and files, sorted by ISO identifier once named.
    children: Vec<Child>,
    /// Its path table number (1 for the root).
    number: u16,
    extent: u32,
    size: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Child {
    Dir(usize),
    File(usize),
}

/// A file of the image being built.
struct Leaf<'a> {
    name: String,
    iso: Vec<u8>,
    data: &'a [u8],
    extent: u32,
}

/// The image of `files` (path with `/` between components, bytes) with volume id `label`, or
/// [`DiskError::ConfigDriveTooBig`] when it would be larger than `max` bytes.
pub fn build(label: &str, files: &[(String, Vec<u8>)], max: u64) -> Result<Vec<u8>, DiskError> {
    if label.is_empty() || label.len() > 32 || !label.is_ascii() {
        return Err(bad(format!(
            "volume id {label:?} must be 1 to 32 ASCII characters"
        )));
    }
    let data: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    if data > max {
        return Err(DiskError::ConfigDriveTooBig { bytes: data, max });
    }
    let (mut dirs, mut leaves) = tree(files)?;
    name_children(&mut dirs, &mut leaves);

    // Breadth-first: the path table's order, and the directories' on the image.
    let mut order = vec![0usize];
    let mut i = 0;
    while let Some(&d) = order.get(i) {
        for c in &dirs[d].children {
            if let Child::Dir(sub) = c {
                order.push(*sub);
            }
        }
        i += 1;
    }
    if order.len() > usize::from(u16::MAX) {
        return Err(bad(format!("{} directories, over 65535", order.len())));
    }
    for (n, &d) in order.iter().enumerate() {
        dirs[d].number = (n + 1) as u16;
    }
    let table_len = path_table(&dirs, &order, false).len();
    let table_sectors = table_len.div_ceil(SECTOR);
    let l_table = PVD_SECTOR + 2;
    let m_table = l_table + table_sectors;
    let continuation = m_table + table_sectors;
    let mut next = continuation + 1;
    for &d in &order {
        let len = pack(&dir_records(&dirs, &leaves, d)).len();
        dirs[d].extent = next as u32;
        dirs[d].size = len as u32;
        next += len / SECTOR;
    }
    for &d in &order {
        for c in &dirs[d].children {
            if let Child::File(f) = *c {
                let leaf = &mut leaves[f];
                if leaf.data.is_empty() {
                    continue;
                }
                leaf.extent = next as u32;
                next += leaf.data.len().div_ceil(SECTOR);
            }
        }
    }
    let total = (next * SECTOR).div_ceil(MIB).max(1) * MIB;
    if total as u64 > max {
        return Err(DiskError::ConfigDriveTooBig {
            bytes: total as u64,
            max,
        });
    }

    let mut image = vec![0u8; total];
    let at = |sector: usize| sector * SECTOR;
    let pvd = primary_descriptor(label, total / SECTOR, table_len, l_table, m_table, &dirs[0]);
    image[at(PVD_SECTOR)..at(PVD_SECTOR + 1)].copy_from_slice(&pvd);
    let end = &mut image[at(PVD_SECTOR + 1)..at(PVD_SECTOR + 2)];
    end[0] = 255;
    end[1..6].copy_from_slice(b"CD001");
    end[6] = 1;
    let l = path_table(&dirs, &order, false);
    image[at(l_table)..at(l_table) + l.len()].copy_from_slice(&l);
    let m = path_table(&dirs, &order, true);
    image[at(m_table)..at(m_table) + m.len()].copy_from_slice(&m);
    let er = er_entry();
    image[at(continuation)..at(continuation) + er.len()].copy_from_slice(&er);
    for &d in &order {
        let records = pack(&dir_records(&dirs, &leaves, d));
        let start = at(dirs[d].extent as usize);
        image[start..start + records.len()].copy_from_slice(&records);
    }
    for leaf in &leaves {
        let start = at(leaf.extent as usize);
        if !leaf.data.is_empty() {
            image[start..start + leaf.data.len()].copy_from_slice(leaf.data);
        }
    }
    Ok(image)
}

/// The directories and files of `files`, checked: no empty, `.`, `..` or over-long component,
/// no path twice, no file where a directory is needed, at most [`MAX_DEPTH`] deep.
fn tree(files: &[(String, Vec<u8>)]) -> Result<(Vec<Dir>, Vec<Leaf<'_>>), DiskError> {
    let mut dirs = vec![Dir {
        name: String::new(),
        parent: 0,
        iso: vec![0],
        children: Vec::new(),
        number: 1,
        extent: 0,
        size: 0,
    }];
    let mut leaves: Vec<Leaf<'_>> = Vec::new();
    for (path, data) in files {
        let parts: Vec<&str> = path.split('/').collect();
        if parts.len() > MAX_DEPTH {
            return Err(bad(format!("{path}: deeper than {MAX_DEPTH} components")));
        }
        for p in &parts {
            if p.is_empty() || *p == "." || *p == ".." || p.contains('\0') {
                return Err(bad(format!("{path}: component {p:?} is not a name")));
            }
            if p.len() > MAX_NAME {
                return Err(bad(format!("{path}: a component is over {MAX_NAME} bytes")));
            }
        }
        let (file, parents) = parts.split_last().unwrap_or((&"", &[]));
        let mut at = 0;
        for p in parents {
            let found = dirs[at].children.iter().find_map(|c| match *c {
                Child::Dir(d) if dirs[d].name == *p => Some(Ok(d)),
                Child::File(f) if leaves[f].name == *p => Some(Err(())),
                _ => None,
            });
            at = match found {
                Some(Ok(d)) => d,
                Some(Err(())) => {
                    return Err(bad(format!("{path}: {p} is a file, not a directory")));
                }
                None => {
                    dirs.push(Dir {
                        name: p.to_string(),
                        parent: at,
                        iso: Vec::new(),
                        children: Vec::new(),
                        number: 0,
                        extent: 0,
                        size: 0,
                    });
                    let d = dirs.len() - 1;
                    dirs[at].children.push(Child::Dir(d));
                    d
                }
            };
        }
        let taken = dirs[at].children.iter().any(|c| match *c {
            Child::Dir(d) => dirs[d].name == *file,
            Child::File(f) => leaves[f].name == *file,
        });
        if taken {
            return Err(bad(format!("{path} is given twice")));
        }
        leaves.push(Leaf {
            name: file.to_string(),
            iso: Vec::new(),
            data,
            extent: 0,
        });
        dirs[at].children.push(Child::File(leaves.len() - 1));
    }
    Ok((dirs, leaves))
}

/// Gives every child a level-1 ISO identifier unique in its directory (in the order of their
/// Rock Ridge names, so the result does not depend on the files' order) and sorts each
/// directory's children by identifier, as ISO 9660 requires.
fn name_children(dirs: &mut [Dir], leaves: &mut [Leaf<'_>]) {
    for d in 0..dirs.len() {
        let mut children: Vec<(Child, String)> = std::mem::take(&mut dirs[d].children)
            .into_iter()
            .map(|c| match c {
                Child::Dir(i) => (c, dirs[i].name.clone()),
                Child::File(i) => (c, leaves[i].name.clone()),
            })
            .collect();
        children.sort_by(|a, b| a.1.cmp(&b.1));
        let mut used = HashSet::new();
        // Where the search for a free number starts, per plain name: many names that shorten
        // to the same one cost one try each, not one per name before them.
        let mut next = std::collections::HashMap::new();
        for (c, name) in &children {
            let is_dir = matches!(c, Child::Dir(_));
            let plain = iso_name(name, is_dir, 0);
            let from = next.get(&plain).copied().unwrap_or(0);
            let (n, id) = (from..)
                .map(|n| (n, iso_name(name, is_dir, n)))
                .find(|(_, id)| !used.contains(id))
                .unwrap_or_default();
            next.insert(plain, n + 1);
            used.insert(id.clone());
            match *c {
                Child::Dir(i) => dirs[i].iso = id,
                Child::File(i) => leaves[i].iso = id,
            }
        }
        let mut children: Vec<Child> = children.into_iter().map(|(c, _)| c).collect();
        let key = |c: &Child| {
            sort_key(match *c {
                Child::Dir(i) => &dirs[i].iso,
                Child::File(i) => &leaves[i].iso,
            })
        };
        children.sort_by_key(key);
        dirs[d].children = children;
    }
}

/// A level-1 identifier for `name`: up to 8 d-characters (uppercase letters, digits, `_`),
/// then for a file `.`, up to 3 of the extension and `;1`; `n` > 0 ends the 8 with `n`.
fn iso_name(name: &str, is_dir: bool, n: usize) -> Vec<u8> {
    let d_chars = |s: &str, max: usize| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .take(max)
            .collect()
    };
    let (base, ext) = match name.rsplit_once('.') {
        Some((b, e)) if !is_dir && !b.is_empty() => (b, e),
        _ => (name, ""),
    };
    let mut base = d_chars(base, 8);
    if n > 0 {
        let suffix = n.to_string();
        base.truncate(8usize.saturating_sub(suffix.len()));
        base.push_str(&suffix);
    }
    if is_dir {
        base.into_bytes()
    } else {
        format!("{base}.{};1", d_chars(ext, 3)).into_bytes()
    }
}

/// ISO 9660's order of identifiers: by name, then extension, each padded with spaces.
fn sort_key(id: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let id = id.split(|&b| b == b';').next().unwrap_or(id);
    let mut parts = id.splitn(2, |&b| b == b'.');
    let name = parts.next().unwrap_or_default();
    let ext = parts.next().unwrap_or_default();
    (padded(name, 32), padded(ext, 32))
}

/// One directory record: `id` (`[0]` for `.`, `[1]` for `..`) and System Use entries `su`.
fn record(id: &[u8], extent: u32, size: u32, dir: bool, su: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(34 + id.len() + su.len());
    r.push(0); // its length, below
    r.push(0); // no extended attribute record
    r.extend(both32(extent));
    r.extend(both32(size));
    r.extend(RECORD_DATE);
    r.push(if dir { FLAG_DIR } else { 0 });
    r.extend([0, 0]); // not interleaved
    r.extend(both16(1)); // volume sequence number
    r.push(id.len() as u8);
    r.extend(id);
    if id.len().is_multiple_of(2) {
        r.push(0);
    }
    r.extend(su);
    if r.len() % 2 == 1 {
        r.push(0);
    }
    r[0] = r.len() as u8;
    r
}

fn susp(sig: &[u8; 2], body: &[u8]) -> Vec<u8> {
    let mut e = vec![sig[0], sig[1], (4 + body.len()) as u8, 1];
    e.extend(body);
    e
}

fn px(mode: u32, links: u32) -> Vec<u8> {
    let mut body = Vec::with_capacity(32);
    body.extend(both32(mode));
    body.extend(both32(links));
    body.extend(both32(0)); // uid
    body.extend(both32(0)); // gid
    susp(b"PX", &body)
}

/// The `ER` entry: this image uses Rock Ridge 1.10 (`RRIP_1991A`).
fn er_entry() -> Vec<u8> {
    let mut body = vec![
        ER_ID.len() as u8,
        ER_DESCRIPTOR.len() as u8,
        ER_SOURCE.len() as u8,
        1,
    ];
    body.extend(ER_ID);
    body.extend(ER_DESCRIPTOR);
    body.extend(ER_SOURCE);
    susp(b"ER", &body)
}

/// A directory's links: itself, its parent's entry, and each subdirectory's `..`.
fn links(dirs: &[Dir], d: usize) -> u32 {
    2 + dirs[d]
        .children
        .iter()
        .filter(|c| matches!(c, Child::Dir(_)))
        .count() as u32
}

/// The records of directory `d`: `.`, `..`, then its children in order.
fn dir_records(dirs: &[Dir], leaves: &[Leaf<'_>], d: usize) -> Vec<Vec<u8>> {
    let dir = &dirs[d];
    let parent = &dirs[dir.parent];
    let mut dot = Vec::new();
    if d == 0 {
        // SUSP: "SP" first in the root's "." record, skipping no bytes; the "ER" in the
        // continuation area the "CE" points at (the sector before the first directory).
        dot.extend(susp(b"SP", &[0xBE, 0xEF, 0]));
        let mut ce = Vec::new();
        ce.extend(both32(dir.extent.saturating_sub(1)));
        ce.extend(both32(0));
        ce.extend(both32(er_entry().len() as u32));
        dot.extend(susp(b"CE", &ce));
    }
    dot.extend(susp(b"RR", &[RR_PX]));
    dot.extend(px(MODE_DIR, links(dirs, d)));
    let mut dotdot = susp(b"RR", &[RR_PX]);
    dotdot.extend(px(MODE_DIR, links(dirs, dir.parent)));
    let mut out = vec![
        record(&[0], dir.extent, dir.size, true, &dot),
        record(&[1], parent.extent, parent.size, true, &dotdot),
    ];
    for c in &dir.children {
        let mut su = susp(b"RR", &[RR_PX | RR_NM]);
        let (iso, name, extent, size, is_dir, mode, n) = match *c {
            Child::Dir(i) => {
                let s = &dirs[i];
                (
                    &s.iso,
                    &s.name,
                    s.extent,
                    s.size,
                    true,
                    MODE_DIR,
                    links(dirs, i),
                )
            }
            Child::File(i) => {
                let f = &leaves[i];
                let size = f.data.len() as u32;
                (&f.iso, &f.name, f.extent, size, false, MODE_FILE, 1)
            }
        };
        let mut nm = vec![0u8];
        nm.extend(name.as_bytes());
        su.extend(susp(b"NM", &nm));
        su.extend(px(mode, n));
        out.push(record(iso, extent, size, is_dir, &su));
    }
    out
}

/// Records laid into whole sectors, none across a sector boundary.
fn pack(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let room = SECTOR - out.len() % SECTOR;
        if r.len() > room {
            out.resize(out.len() + room, 0);
        }
        out.extend(r);
    }
    out.resize(out.len().div_ceil(SECTOR) * SECTOR, 0);
    out
}

/// The L (little-endian) or M (big-endian) path table.
fn path_table(dirs: &[Dir], order: &[usize], big: bool) -> Vec<u8> {
    let mut t = Vec::new();
    for &d in order {
        let dir = &dirs[d];
        t.push(dir.iso.len() as u8);
        t.push(0);
        let parent = dirs[dir.parent].number;
        if big {
            t.extend(dir.extent.to_be_bytes());
            t.extend(parent.to_be_bytes());
        } else {
            t.extend(dir.extent.to_le_bytes());
            t.extend(parent.to_le_bytes());
        }
        t.extend(&dir.iso);
        if dir.iso.len() % 2 == 1 {
            t.push(0);
        }
    }
    t
}

fn primary_descriptor(
    label: &str,
    sectors: usize,
    table_len: usize,
    l_table: usize,
    m_table: usize,
    root: &Dir,
) -> Vec<u8> {
    let mut d = Vec::with_capacity(SECTOR);
    d.push(1);
    d.extend(b"CD001");
    d.push(1);
    d.push(0);
    d.extend(padded(b"LINUX", 32)); // system id
    d.extend(padded(label.as_bytes(), 32)); // volume id
    d.extend([0; 8]);
    d.extend(both32(sectors as u32));
    d.extend([0; 32]);
    d.extend(both16(1)); // volume set size
    d.extend(both16(1)); // volume sequence number
    d.extend(both16(SECTOR as u16));
    d.extend(both32(table_len as u32));
    d.extend((l_table as u32).to_le_bytes());
    d.extend([0; 4]);
    d.extend((m_table as u32).to_be_bytes());
    d.extend([0; 4]);
    d.extend(record(&[0], root.extent, root.size, true, &[]));
    d.extend(padded(b"", 128)); // volume set id
    d.extend(padded(b"", 128)); // publisher
    d.extend(padded(b"", 128)); // data preparer
    d.extend(padded(b"STOKER", 128)); // application
    d.extend(padded(b"", 37 * 3)); // copyright, abstract, bibliographic files
    d.extend(VOLUME_DATE); // created
    d.extend(VOLUME_DATE); // modified
    d.extend(NO_DATE); // expires
    d.extend(NO_DATE); // effective
    d.push(1); // file structure version
    d.resize(SECTOR, 0);
    d
}

// ---------------------------------------------------------------------------------------------
// Reading

/// An ISO 9660 image in memory, its primary volume opened.
#[derive(Debug)]
pub struct Image<'a> {
    bytes: &'a [u8],
    label: String,
    root: (u32, u32),
    /// Rock Ridge's `LEN_SKP`: bytes to skip at the start of each System Use area.
    skip: usize,
}

/// A directory entry read from an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The Rock Ridge name, else the ISO name lowercased without its version.
    pub name: String,
    pub is_dir: bool,
    pub size: u32,
    extent: u32,
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

impl<'a> Image<'a> {
    /// Finds the primary volume descriptor (among at most 32 descriptors from sector 16).
    pub fn open(bytes: &'a [u8]) -> Result<Image<'a>, DiskError> {
        let mut pvd = None;
        for n in PVD_SECTOR..PVD_SECTOR + 32 {
            let d = bytes
                .get(n * SECTOR..(n + 1) * SECTOR)
                .ok_or_else(|| bad(format!("no volume descriptor set terminator by sector {n}")))?;
            if &d[1..6] != b"CD001" {
                return Err(bad(format!("sector {n} is not a volume descriptor")));
            }
            match d[0] {
                1 if pvd.is_none() => pvd = Some(d),
                255 => break,
                _ => {}
            }
        }
        let d = pvd.ok_or_else(|| bad("no primary volume descriptor"))?;
        let block = u16::from_le_bytes([d[128], d[129]]);
        if usize::from(block) != SECTOR {
            return Err(bad(format!("logical block size {block}, not {SECTOR}")));
        }
        let label = String::from_utf8_lossy(&d[40..72]).trim_end().to_string();
        let root = &d[156..190];
        let mut image = Image {
            bytes,
            label,
            root: (le32(root, 2), le32(root, 10)),
            skip: 0,
        };
        // Rock Ridge: the root's "." record starts its System Use area with "SP".
        let dir = image.dir_bytes(image.root.0, image.root.1)?;
        let len = usize::from(*dir.first().unwrap_or(&0));
        if let Some(dot) = dir.get(..len)
            && let Some(su) = dot.get(34..)
            && su.len() >= 7
            && &su[..2] == b"SP"
            && su[4..6] == [0xBE, 0xEF]
        {
            image.skip = usize::from(su[6]);
        }
        Ok(image)
    }

    /// The volume id (blkid's LABEL).
    pub fn label(&self) -> &str {
        &self.label
    }

    fn dir_bytes(&self, extent: u32, size: u32) -> Result<&'a [u8], DiskError> {
        if size > MAX_DIR_BYTES {
            return Err(bad(format!(
                "a directory of {size} bytes at sector {extent}, over {MAX_DIR_BYTES}"
            )));
        }
        self.extent(extent, size)
    }

    fn extent(&self, extent: u32, size: u32) -> Result<&'a [u8], DiskError> {
        let start = (extent as usize).checked_mul(SECTOR);
        start
            .and_then(|s| self.bytes.get(s..s.checked_add(size as usize)?))
            .ok_or_else(|| {
                bad(format!(
                    "{size} bytes at sector {extent} lie past the image's end ({} bytes)",
                    self.bytes.len()
                ))
            })
    }

    /// The entries of a directory, without `.` and `..`; `budget` counts records read.
    fn entries(&self, extent: u32, size: u32, budget: &mut usize) -> Result<Vec<Entry>, DiskError> {
        let dir = self.dir_bytes(extent, size)?;
        let mut out = Vec::new();
        let mut at = 0;
        while at < dir.len() {
            let len = usize::from(dir[at]);
            if len == 0 {
                // The rest of this sector is padding.
                at = (at / SECTOR + 1) * SECTOR;
                continue;
            }
            *budget = budget
                .checked_sub(1)
                .ok_or_else(|| bad(format!("more than {MAX_RECORDS} directory records")))?;
            let r = dir.get(at..at + len).filter(|_| len >= 34).ok_or_else(|| {
                bad(format!(
                    "a directory record of {len} bytes at byte {at} of sector {extent}"
                ))
            })?;
            at += len;
            let id_len = usize::from(r[32]);
            let id = r
                .get(33..33 + id_len)
                .ok_or_else(|| bad(format!("a record at sector {extent} overruns its name")))?;
            if id == [0] || id == [1] {
                continue;
            }
            let flags = r[25];
            if flags & FLAG_MULTI_EXTENT != 0 {
                return Err(bad(
                    "a multi-extent file (not written by config drive tools)",
                ));
            }
            let su_at = 33 + id_len + usize::from(id_len % 2 == 0) + self.skip;
            let su = r.get(su_at..).unwrap_or_default();
            let name = match self.rock_name(su)? {
                Some(n) => n,
                None => {
                    let id = id.split(|&b| b == b';').next().unwrap_or(id);
                    let id = id.strip_suffix(b".").unwrap_or(id);
                    String::from_utf8_lossy(id).to_lowercase()
                }
            };
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
                return Err(bad(format!("an entry named {name:?} at sector {extent}")));
            }
            out.push(Entry {
                name,
                is_dir: flags & FLAG_DIR != 0,
                size: le32(r, 10),
                extent: le32(r, 2),
            });
        }
        Ok(out)
    }

    /// The Rock Ridge name in a System Use area (following `CE` continuations), if any.
    fn rock_name(&self, su: &'a [u8]) -> Result<Option<String>, DiskError> {
        let mut area = su;
        let mut name: Option<Vec<u8>> = None;
        let mut hops = 0;
        loop {
            let mut next = None;
            let mut i = 0;
            while i + 4 <= area.len() {
                let len = usize::from(area[i + 2]);
                let Some(e) = area.get(i..i + len).filter(|_| len >= 4) else {
                    break;
                };
                match &e[..2] {
                    b"ST" => break,
                    b"CE" if len >= 28 => next = Some((le32(e, 4), le32(e, 12), le32(e, 20))),
                    // Flags 0x02 and 0x04 name "." and "..": not a name of the entry.
                    b"NM" if len >= 5 && e[4] & 0x06 == 0 => {
                        let n = name.get_or_insert_with(Vec::new);
                        n.extend(&e[5..]);
                        if n.len() > 255 {
                            return Err(bad("a Rock Ridge name over 255 bytes"));
                        }
                    }
                    _ => {}
                }
                i += len;
            }
            let Some((block, offset, len)) = next else {
                break;
            };
            hops += 1;
            if hops > MAX_CONTINUATIONS {
                return Err(bad(format!(
                    "more than {MAX_CONTINUATIONS} Rock Ridge continuation areas"
                )));
            }
            let start = (block as usize)
                .checked_mul(SECTOR)
                .and_then(|s| s.checked_add(offset as usize));
            area = start
                .and_then(|s| self.bytes.get(s..s.checked_add(len as usize)?))
                .filter(|_| len as usize <= SECTOR)
                .ok_or_else(|| {
                    bad(format!(
                        "a Rock Ridge continuation of {len} bytes at sector {block} + {offset} \
                         is not inside the image"
                    ))
                })?;
        }
        Ok(name.map(|n| String::from_utf8_lossy(&n).into_owned()))
    }

    /// Every file as (path, size), directories depth-first in record order.
    pub fn files(&self) -> Result<Vec<(String, u32)>, DiskError> {
        let mut out = Vec::new();
        let mut budget = MAX_RECORDS;
        let mut listed = 0usize;
        let mut seen = HashSet::from([self.root.0]);
        let mut stack = vec![(String::new(), self.root, 0usize)];
        while let Some((path, (extent, size), depth)) = stack.pop() {
            for e in self.entries(extent, size, &mut budget)?.into_iter().rev() {
                let p = if path.is_empty() {
                    e.name.clone()
                } else {
                    format!("{path}/{}", e.name)
                };
                listed += p.len();
                if listed > MAX_LISTING_BYTES {
                    return Err(bad(format!(
                        "the file list is over {MAX_LISTING_BYTES} bytes"
                    )));
                }
                if !e.is_dir {
                    out.push((p, e.size));
                    continue;
                }
                if depth + 1 >= MAX_DEPTH {
                    return Err(bad(format!("{p}: deeper than {MAX_DEPTH} directories")));
                }
                if !seen.insert(e.extent) {
                    return Err(bad(format!(
                        "{p}: directory at sector {} is reached twice (a loop)",
                        e.extent
                    )));
                }
                stack.push((p, (e.extent, e.size), depth + 1));
            }
        }
        out.sort();
        Ok(out)
    }

    /// The bytes of the file at `path` (components separated by `/`), `None` when there is
    /// none; an error when the image is broken on the way.
    pub fn read(&self, path: &str) -> Result<Option<&'a [u8]>, DiskError> {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() || parts.len() > MAX_DEPTH {
            return Ok(None);
        }
        let mut budget = MAX_RECORDS;
        let mut dir = self.root;
        for (i, part) in parts.iter().enumerate() {
            let Some(e) = self
                .entries(dir.0, dir.1, &mut budget)?
                .into_iter()
                .find(|e| e.name == *part)
            else {
                return Ok(None);
            };
            let last = i + 1 == parts.len();
            match (last, e.is_dir) {
                (true, false) => return self.extent(e.extent, e.size).map(Some),
                (false, true) => dir = (e.extent, e.size),
                _ => return Ok(None),
            }
        }
        Ok(None)
    }
}
