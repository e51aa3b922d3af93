//! Built packages: `NAME-VERSION.fp`, a gzipped tar of `NAME-VERSION/` (the format Fuel 6.0's
//! builder produced for package 1.0.0; stoker uses it for every package version instead of
//! Fuel's RPMs). Building is byte-identical for the same input: entries sorted by path,
//! directories before their contents, mtime from `SOURCE_DATE_EPOCH` (0 when unset),
//! owner root:root (0:0), mode 0755 for directories and for files that start with `#!` or end
//! in `.sh`, 0644 otherwise, and a gzip header without name or time.
//!
//! Reading is for archives from anyone: it accepts such an archive (with or without the top
//! directory) into memory ([`read`]) or a directory ([`unpack`]), streaming through the gzip
//! decoder and tar's members one at a time within [`Limits`] (decompressed total, compression
//! ratio, per-file size, member count), each counted on the bytes that actually come out, so
//! a gzip bomb stops at the limit instead of at the end of the disk or memory. Only regular
//! files and directories are unpacked: links, devices, FIFOs, sparse files and paths that leave
//! the package are refused, and so are oversized tar extension headers (GNU long names, pax),
//! which the tar crate would otherwise read whole into memory. Errors name the member.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use flate2::{Compression, GzBuilder, read::GzDecoder};

use super::PackageError;
use crate::engine::plugin::files::normalize;
use crate::engine::plugin::{MemFiles, PackageFiles};

/// Paths left out of a build. fuel-plugin-builder 4.2.0 (`BaseBuildPlugin.build_repos`) copies
/// `glob(plugin_path + '/*')` with `distutils.dir_util.copy_tree`: the glob leaves out every
/// top-level name that starts with `.` (`.git`, `.gitignore`, `.build`, `.hidden`...), and
/// `copy_tree` leaves out, at any depth, names that start with `.nfs` (NFS rename files); every
/// other file is copied, dotfiles below the top (`deployment_scripts/.gitkeep`) and `*.pyc`
/// included. stoker also leaves out its own earlier builds: top-level `*.fp` and `*.rpm`.
pub fn excluded(path: &str) -> bool {
    let top = path.split('/').next().unwrap_or(path);
    top.starts_with('.')
        || path.split('/').any(|part| part.starts_with(".nfs"))
        || (!path.contains('/') && (path.ends_with(".fp") || path.ends_with(".rpm")))
}

fn mode_of(path: &str, bytes: &[u8]) -> u32 {
    if bytes.starts_with(b"#!") || path.ends_with(".sh") {
        0o755
    } else {
        0o644
    }
}

/// The archive's top folder, `NAME-VERSION`; `NAME-VERSION.fp` is its file name. Refused when
/// the name is missing or not a plugin name, or the version is missing or could not be part of
/// a file name (a `/`, a leading `.`, a control character), so no file name is ever made of
/// them.
pub fn stem(name: &str, version: &str) -> Result<String, PackageError> {
    if name.is_empty() {
        return Err(PackageError::Unnamed(
            "metadata.yaml gives no name: the archive cannot be named".to_string(),
        ));
    }
    if !crate::engine::plugin::load::is_plugin_name(name) {
        return Err(PackageError::Unnamed(format!(
            "{name:?} (metadata.yaml: name) is not a plugin name: the archive cannot be named"
        )));
    }
    if version.is_empty() {
        return Err(PackageError::Unnamed(
            "metadata.yaml gives no version: the archive cannot be named".to_string(),
        ));
    }
    if version.starts_with('.') || version.chars().any(|c| c == '/' || c.is_control()) {
        return Err(PackageError::Unnamed(format!(
            "version {version:?} (metadata.yaml: version) cannot be part of a file name"
        )));
    }
    Ok(format!("{name}-{version}"))
}

/// Build the archive of a package under a top directory `top` (`NAME-VERSION`). `progress` is
/// told (bytes done, bytes total) after each file.
pub fn build(
    files: &dyn PackageFiles,
    top: &str,
    mtime: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<u8>, PackageError> {
    let entries: Vec<_> = files
        .entries()
        .into_iter()
        .filter(|e| !excluded(&e.path))
        .collect();
    let mut contents = Vec::new();
    let mut total = 0u64;
    for e in entries.iter().filter(|e| !e.is_dir) {
        let bytes = files
            .read(&e.path)
            .map_err(|err| PackageError::BadArchive(err.to_string()))?;
        total += bytes.len() as u64;
        contents.push((e.path.clone(), bytes));
    }
    let gz = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    let header = |size: u64, mode: u32, kind: tar::EntryType| {
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(mode);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(mtime);
        h.set_entry_type(kind);
        // Names are plain ASCII; failures here only mean an over-long name, reported below.
        let _ = h.set_username("root");
        let _ = h.set_groupname("root");
        h
    };
    let wrap = |e: std::io::Error| PackageError::BadArchive(e.to_string());
    let mut h = header(0, 0o755, tar::EntryType::Directory);
    tar.append_data(&mut h, format!("{top}/"), std::io::empty())
        .map_err(wrap)?;
    let mut done = 0u64;
    let mut files_iter = contents.iter().peekable();
    for e in &entries {
        if e.is_dir {
            let mut h = header(0, 0o755, tar::EntryType::Directory);
            tar.append_data(&mut h, format!("{top}/{}/", e.path), std::io::empty())
                .map_err(wrap)?;
            continue;
        }
        let Some((path, bytes)) = files_iter.next() else {
            break;
        };
        let mut h = header(
            bytes.len() as u64,
            mode_of(path, bytes),
            tar::EntryType::Regular,
        );
        tar.append_data(&mut h, format!("{top}/{path}"), bytes.as_slice())
            .map_err(wrap)?;
        done += bytes.len() as u64;
        progress(done, total);
    }
    let gz = tar.into_inner().map_err(wrap)?;
    let mut out = gz.finish().map_err(wrap)?;
    out.flush().map_err(wrap)?;
    Ok(out)
}

/// What an archive may unpack to. Every limit is counted on the bytes that come out of the
/// decoder and the bytes copied out of each entry, never taken from a tar header alone, and
/// reading stops as soon as one is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes the gzip stream may decompress to (the whole tar stream: headers and padding
    /// count).
    pub max_unpacked: u64,
    /// Bytes one file may hold.
    pub max_file: u64,
    /// Members the tar stream may hold (files, directories and tar's own extension headers).
    pub max_entries: u64,
    /// Decompressed bytes per compressed byte, enforced once [`RATIO_FLOOR`] bytes are out.
    pub max_ratio: u64,
}

/// Below this many decompressed bytes the ratio is not checked: a tiny archive's fixed tar
/// overhead (512-byte headers, the 1 KiB end marker) alone can be 50 times its gzip size.
pub const RATIO_FLOOR: u64 = 1 << 20;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_unpacked: 1 << 30,
            max_file: 256 << 20,
            max_entries: 100_000,
            max_ratio: 100,
        }
    }
}

/// The longest GNU long name or link name accepted (Linux's PATH_MAX).
const MAX_LONG_NAME: u64 = 4096;
/// The largest pax extended header accepted.
const MAX_PAX_HEADER: u64 = 64 << 10;

/// A size for messages: `268435456 bytes (256 MiB)`.
pub fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if n >= unit {
            let whole = n / unit;
            return if n.is_multiple_of(unit) {
                format!("{n} bytes ({whole} {name})")
            } else {
                format!("{n} bytes ({:.1} {name})", n as f64 / unit as f64)
            };
        }
    }
    format!("{n} bytes")
}

/// Counts what the decoder hands out and fails the read that passes `limit`.
struct Meter<R> {
    inner: R,
    out: Rc<Cell<u64>>,
    limit: u64,
}

impl<R: Read> Read for Meter<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let total = self.out.get().saturating_add(n as u64);
        self.out.set(total);
        if total > self.limit {
            return Err(io::Error::other("unpack limit reached"));
        }
        Ok(n)
    }
}

/// Where unpacked entries go: memory (for `stoker plugin validate x.fp` and graph plans) or a
/// directory (installs).
enum Sink<'a> {
    Mem(&'a mut MemFiles),
    Dir(&'a Path),
}

/// One file being written.
enum Out {
    Mem(Vec<u8>),
    File(std::fs::File),
}

impl Sink<'_> {
    fn dir(&mut self, path: &str) -> Result<(), PackageError> {
        match self {
            Sink::Mem(files) => files
                .add_dir(path)
                .map_err(|e| PackageError::BadArchive(e.to_string())),
            Sink::Dir(root) => std::fs::create_dir_all(root.join(path))
                .map_err(|e| PackageError::BadArchive(format!("{path}: cannot create: {e}"))),
        }
    }

    /// Start a file whose data begins with `head` (which decides its mode).
    fn create(&mut self, path: &str, head: &[u8]) -> Result<Out, PackageError> {
        match self {
            Sink::Mem(_) => Ok(Out::Mem(Vec::new())),
            Sink::Dir(root) => {
                use std::os::unix::fs::OpenOptionsExt;
                let full = root.join(path);
                let cannot =
                    |e: io::Error| PackageError::BadArchive(format!("{path}: cannot create: {e}"));
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent).map_err(cannot)?;
                }
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(mode_of(path, head))
                    .open(&full)
                    .map(Out::File)
                    .map_err(cannot)
            }
        }
    }

    fn finish(&mut self, path: &str, out: Out) -> Result<(), PackageError> {
        match (self, out) {
            (Sink::Mem(files), Out::Mem(data)) => files
                .add(path, data)
                .map_err(|e| PackageError::BadArchive(e.to_string())),
            (_, Out::File(file)) => {
                drop(file);
                Ok(())
            }
            (Sink::Dir(_), Out::Mem(_)) => Ok(()),
        }
    }
}

impl Out {
    fn write(&mut self, path: &str, chunk: &[u8]) -> Result<(), PackageError> {
        match self {
            Out::Mem(v) => {
                v.extend_from_slice(chunk);
                Ok(())
            }
            Out::File(f) => f
                .write_all(chunk)
                .map_err(|e| PackageError::BadArchive(format!("{path}: cannot write: {e}"))),
        }
    }
}

/// What tar extension headers said about the member that follows them.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.long_name.is_none() && self.long_link.is_none() && self.pax.is_none()
    }
}

fn without_nul(mut bytes: Vec<u8>) -> Vec<u8> {
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    bytes
}

/// Read a small extension header's data, refusing one bigger than `max`.
fn small_data<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    what: &str,
    max: u64,
) -> Result<Vec<u8>, io::Error> {
    let size = entry.size();
    if size > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a {what} of {size} bytes (at most {max} are accepted)"),
        ));
    }
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    Read::by_ref(entry).take(max + 1).read_to_end(&mut data)?;
    Ok(data)
}

/// Why a member type is refused, or `None` for a file or directory.
fn refused_kind(kind: tar::EntryType) -> Option<&'static str> {
    use tar::EntryType as T;
    match kind {
        T::Regular | T::Continuous | T::Directory => None,
        T::Symlink => Some("a symbolic link; links are not allowed in a package"),
        T::Link => Some("a hard link; links are not allowed in a package"),
        T::Char => Some("a character device; devices are not allowed in a package"),
        T::Block => Some("a block device; devices are not allowed in a package"),
        T::Fifo => Some("a FIFO; only files and directories are allowed in a package"),
        T::GNUSparse => Some("a GNU sparse file; sparse files are not allowed in a package"),
        _ => Some("a tar member of a type stoker does not unpack"),
    }
}

/// The decompressed stream, metered: past `limit` bytes every read fails.
fn metered<R: Read>(
    input: R,
    compressed: u64,
    limits: &Limits,
) -> (Meter<GzDecoder<R>>, Rc<Cell<u64>>, u64) {
    let by_ratio = limits.max_ratio.saturating_mul(compressed).max(RATIO_FLOOR);
    let limit = limits.max_unpacked.min(by_ratio);
    let out = Rc::new(Cell::new(0));
    (
        Meter {
            inner: GzDecoder::new(input),
            out: Rc::clone(&out),
            limit,
        },
        out,
        limit,
    )
}

/// Check the first bytes: an RPM or anything but gzip is refused with what to do instead.
fn check_magic(head: &[u8]) -> Result<(), PackageError> {
    if head.starts_with(&[0xed, 0xab, 0xee, 0xdb]) {
        return Err(PackageError::BadArchive(
            "this is an RPM (Fuel's builder output for packages 2.0.0+); stoker installs the \
             plugin directory or a .fp made by `stoker plugin build`"
                .to_string(),
        ));
    }
    if !head.starts_with(&[0x1f, 0x8b]) {
        return Err(PackageError::BadArchive(
            "not gzip data (expected a .fp made by `stoker plugin build`)".to_string(),
        ));
    }
    Ok(())
}

/// Unpack a gzipped tar of `compressed` bytes into `sink`, within `limits`.
fn unpack_into<R: Read>(
    input: R,
    compressed: u64,
    limits: &Limits,
    sink: &mut Sink<'_>,
) -> Result<u64, PackageError> {
    let (meter, out, limit) = metered(input, compressed, limits);
    let mut archive = tar::Archive::new(meter);
    // The member being read, for messages.
    let mut at = String::from("the first member");
    let over = |at: &str| -> PackageError {
        let total = out.get();
        if limit == limits.max_unpacked || total > limits.max_unpacked {
            PackageError::TooLarge(format!(
                "the package unpacks to more than {} (plugins.max_unpacked_bytes); refused \
                 while reading {at}",
                bytes(limits.max_unpacked)
            ))
        } else {
            PackageError::TooLarge(format!(
                "the package unpacks to more than {} times its compressed size of {} \
                 (plugins.max_ratio): a gzip bomb?; refused while reading {at}",
                limits.max_ratio,
                bytes(compressed)
            ))
        }
    };
    let bad =
        |at: &str, e: io::Error| -> PackageError { PackageError::BadArchive(format!("{at}: {e}")) };
    let entries = archive.entries().map_err(|e| bad(&at, e))?.raw(true);
    let mut pending = Pending::default();
    let mut count = 0u64;
    let mut files = 0u64;
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(_) if out.get() > limit => return Err(over(&format!("the member after {at}"))),
            Err(e) => return Err(bad(&format!("the member after {at}"), e)),
        };
        count += 1;
        let kind = entry.header().entry_type();
        // Extension headers describe the member after them.
        let ext = match kind {
            tar::EntryType::GNULongName => Some(("GNU long name", MAX_LONG_NAME)),
            tar::EntryType::GNULongLink => Some(("GNU long link name", MAX_LONG_NAME)),
            tar::EntryType::XHeader => Some(("pax header", MAX_PAX_HEADER)),
            tar::EntryType::XGlobalHeader => Some(("pax global header", MAX_PAX_HEADER)),
            _ => None,
        };
        if let Some((what, max)) = ext {
            let here = format!("the {what} before the member after {at}");
            if count > limits.max_entries {
                return Err(PackageError::TooLarge(format!(
                    "the archive holds more than {} members (plugins.max_entries); refused at \
                     {here}",
                    limits.max_entries
                )));
            }
            let data = match small_data(&mut entry, what, max) {
                Ok(d) => d,
                Err(_) if out.get() > limit => return Err(over(&here)),
                Err(e) => return Err(bad(&here, e)),
            };
            let slot = match kind {
                tar::EntryType::GNULongName => &mut pending.long_name,
                tar::EntryType::GNULongLink => &mut pending.long_link,
                tar::EntryType::XHeader => &mut pending.pax,
                _ => continue,
            };
            if slot.is_some() {
                return Err(PackageError::BadArchive(format!(
                    "{here}: two {what}s for one member"
                )));
            }
            *slot = Some(data);
            continue;
        }
        let ext = std::mem::take(&mut pending);
        let raw_path = match &ext.long_name {
            Some(name) => without_nul(name.clone()),
            None => entry.header().path_bytes().into_owned(),
        };
        let mut raw_path = raw_path;
        let mut pax_size = None;
        let mut sparse = false;
        if let Some(pax) = &ext.pax {
            for field in tar::PaxExtensions::new(pax) {
                let field = field.map_err(|e| bad(&at, e))?;
                match field.key() {
                    Ok("path") => raw_path = field.value_bytes().to_vec(),
                    Ok("size") => pax_size = Some(field.value().unwrap_or("?").to_string()),
                    Ok(k) if k.starts_with("GNU.sparse") => sparse = true,
                    _ => {}
                }
            }
        }
        let Ok(path) = String::from_utf8(raw_path) else {
            return Err(PackageError::BadArchive(format!(
                "a member after {at} has a name that is not UTF-8"
            )));
        };
        at = format!("entry {path:?}");
        if count > limits.max_entries {
            return Err(PackageError::TooLarge(format!(
                "the archive holds more than {} members (plugins.max_entries); refused at {at}",
                limits.max_entries
            )));
        }
        if sparse {
            return Err(PackageError::BadArchive(format!(
                "{at} is a GNU sparse file (pax); sparse files are not allowed in a package"
            )));
        }
        if let Some(why) = refused_kind(kind) {
            let target = entry
                .header()
                .link_name_bytes()
                .map(|t| String::from_utf8_lossy(&t).into_owned())
                .or_else(|| {
                    ext.long_link
                        .as_ref()
                        .map(|t| String::from_utf8_lossy(&without_nul(t.clone())).into_owned())
                })
                .filter(|t| {
                    !t.is_empty() && matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link)
                });
            return Err(PackageError::BadArchive(match target {
                Some(t) => format!("{at} is {why} (it points to {t:?})"),
                None => format!("{at} is {why}"),
            }));
        }
        let rel = normalize(&path).map_err(|_| {
            PackageError::BadArchive(format!(
                "{at} leaves the package (an absolute path or one with ..)"
            ))
        })?;
        if kind == tar::EntryType::Directory {
            if !rel.is_empty() {
                sink.dir(&rel)?;
            }
            continue;
        }
        if rel.is_empty() {
            return Err(PackageError::BadArchive(format!(
                "{at} is a file without a name"
            )));
        }
        let declared = entry.size();
        if pax_size.is_some_and(|s| s != declared.to_string()) {
            return Err(PackageError::BadArchive(format!(
                "{at}: its pax header and its tar header disagree about its size"
            )));
        }
        if declared > limits.max_file {
            return Err(PackageError::TooLarge(format!(
                "{at} declares {} and a file may hold {} (plugins.max_file_bytes)",
                bytes(declared),
                bytes(limits.max_file)
            )));
        }
        files += 1;
        copy_file(&mut entry, &rel, &at, limits, sink).map_err(|e| match e {
            Copy::Read(_) if out.get() > limit => over(&at),
            Copy::Read(e) => bad(&at, e),
            Copy::Package(p) => p,
        })?;
    }
    if !pending.is_empty() {
        return Err(PackageError::BadArchive(format!(
            "the archive ends with an extension header after {at} and no member for it"
        )));
    }
    Ok(files)
}

enum Copy {
    Read(io::Error),
    Package(PackageError),
}

/// Copy one file's data, counting it against `max_file` as it comes.
fn copy_file<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    rel: &str,
    at: &str,
    limits: &Limits,
    sink: &mut Sink<'_>,
) -> Result<(), Copy> {
    let mut buf = vec![0u8; 64 << 10];
    let mut written = 0u64;
    let mut out: Option<Out> = None;
    loop {
        let n = match entry.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Copy::Read(e)),
        };
        if out.is_none() {
            out = Some(sink.create(rel, &buf[..n]).map_err(Copy::Package)?);
        }
        if n == 0 {
            break;
        }
        written += n as u64;
        if written > limits.max_file {
            return Err(Copy::Package(PackageError::TooLarge(format!(
                "{at} is larger than {} (plugins.max_file_bytes)",
                bytes(limits.max_file)
            ))));
        }
        if let Some(file) = out.as_mut() {
            file.write(rel, &buf[..n]).map_err(Copy::Package)?;
        }
    }
    if let Some(file) = out {
        sink.finish(rel, file).map_err(Copy::Package)?;
    }
    Ok(())
}

/// Read an archive into memory, without its top directory, within the default [`Limits`]
/// (`stoker plugin validate x.fp`, graph plans of a `.fp`).
pub fn read(bytes: &[u8]) -> Result<MemFiles, PackageError> {
    read_within(bytes, &Limits::default())
}

/// [`read`] within `limits`.
pub fn read_within(bytes: &[u8], limits: &Limits) -> Result<MemFiles, PackageError> {
    check_magic(bytes)?;
    let mut files = MemFiles::new();
    let count = unpack_into(
        bytes,
        bytes.len() as u64,
        limits,
        &mut Sink::Mem(&mut files),
    )?;
    if count == 0 || files.is_empty() {
        return Err(PackageError::BadArchive(
            "the archive holds no file".to_string(),
        ));
    }
    Ok(files.strip_single_root())
}

/// Unpack the archive file `archive` into the empty directory `dest`, within `limits`.
/// Returns the package's root: `dest`, or its one top directory (`NAME-VERSION/`) when the
/// archive has one and no metadata file beside it. On error `dest` holds a partial tree; the
/// caller removes it. Error messages name members, never host paths.
pub fn unpack(archive: &Path, dest: &Path, limits: &Limits) -> Result<PathBuf, PackageError> {
    let file = std::fs::File::open(archive).map_err(|e| PackageError::io(archive, e))?;
    let compressed = file
        .metadata()
        .map_err(|e| PackageError::io(archive, e))?
        .len();
    let mut input = std::io::BufReader::with_capacity(64 << 10, file);
    let head = std::io::BufRead::fill_buf(&mut input).map_err(|e| PackageError::io(archive, e))?;
    check_magic(head)?;
    let count = unpack_into(input, compressed, limits, &mut Sink::Dir(dest))?;
    if count == 0 {
        return Err(PackageError::BadArchive(
            "the archive holds no file".to_string(),
        ));
    }
    package_root(dest)
}

/// `dest`, or its single top directory when nothing else (and no metadata file) is beside it:
/// the same rule as [`MemFiles::strip_single_root`].
fn package_root(dest: &Path) -> Result<PathBuf, PackageError> {
    let mut top = Vec::new();
    for entry in std::fs::read_dir(dest).map_err(|e| PackageError::io(dest, e))? {
        let entry = entry.map_err(|e| PackageError::io(dest, e))?;
        top.push((entry.file_name(), entry.path().is_dir()));
    }
    let has_meta = top
        .iter()
        .any(|(name, dir)| !dir && name.to_string_lossy().starts_with("metadata."));
    match top.as_slice() {
        [(name, true)] if !has_meta => Ok(dest.join(name)),
        _ => Ok(dest.to_path_buf()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_archive_is_named_after_a_missing_or_unsafe_name_or_version() {
        assert_eq!(stem("p", "1.0.0").unwrap(), "p-1.0.0");
        for (name, version, says) in [
            ("", "1.0.0", "gives no name"),
            ("p", "", "gives no version"),
            (
                "P",
                "1.0.0",
                "\"P\" (metadata.yaml: name) is not a plugin name",
            ),
            ("../p", "1.0.0", "is not a plugin name"),
            ("p", "1/../../x", "cannot be part of a file name"),
            ("p", ".hidden", "cannot be part of a file name"),
            ("p", "1\n", "cannot be part of a file name"),
        ] {
            let e = stem(name, version).unwrap_err().to_string();
            assert!(e.contains(says), "{name:?} {version:?}: {e}");
        }
    }

    #[test]
    fn fpb_leaves_top_level_dot_names_and_nfs_files_out() {
        for (path, out) in [
            (".git", true),
            (".git/HEAD", true),
            (".gitignore", true),
            (".build/src/x", true),
            ("deployment_scripts/.gitkeep", false),
            ("deployment_scripts/.nfs0001", true),
            ("a/b/.nfsX/c", true),
            ("x.pyc", false),
            ("old-1.0.0.fp", true),
            ("repositories/ubuntu/x.rpm", false),
        ] {
            assert_eq!(excluded(path), out, "{path}");
        }
    }

    #[test]
    fn round_trip_is_byte_identical() {
        let mut m = MemFiles::new();
        m.add("metadata.yaml", "name: p\n").unwrap();
        m.add("deployment_scripts/deploy.sh", "#!/bin/sh\n")
            .unwrap();
        m.add_dir("repositories/ubuntu").unwrap();
        m.add("old-1.0.0.fp", "junk").unwrap();
        let a = build(&m, "p-1.0.0", 0, &mut |_, _| {}).unwrap();
        let b = build(&m, "p-1.0.0", 0, &mut |_, _| {}).unwrap();
        assert_eq!(a, b);
        let back = read(&a).unwrap();
        assert_eq!(back.read("metadata.yaml").unwrap(), b"name: p\n");
        assert!(back.is_dir("repositories/ubuntu"));
        assert!(!back.is_file("old-1.0.0.fp"));
        assert!(read(b"not gzip").is_err());
    }

    /// A gzipped tar written member by member, with headers as given (nothing checked).
    struct Tgz(tar::Builder<flate2::write::GzEncoder<Vec<u8>>>);

    impl Tgz {
        fn new() -> Tgz {
            Tgz(tar::Builder::new(flate2::write::GzEncoder::new(
                Vec::new(),
                Compression::best(),
            )))
        }

        fn raw(mut self, kind: tar::EntryType, name: &[u8], data: impl Read, size: u64) -> Tgz {
            let mut h = tar::Header::new_gnu();
            h.as_old_mut().name[..name.len()].copy_from_slice(name);
            h.set_entry_type(kind);
            h.set_size(size);
            h.set_mode(0o644);
            h.set_cksum();
            self.0.append(&h, data).unwrap();
            self
        }

        fn file(self, name: &str, data: &[u8]) -> Tgz {
            self.raw(
                tar::EntryType::Regular,
                name.as_bytes(),
                data,
                data.len() as u64,
            )
        }

        fn link(mut self, kind: tar::EntryType, name: &str, target: &str) -> Tgz {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(0);
            self.0.append_link(&mut h, name, target).unwrap();
            self
        }

        fn done(self) -> Vec<u8> {
            self.0.into_inner().unwrap().finish().unwrap()
        }
    }

    fn refusal(bytes: &[u8], limits: &Limits) -> String {
        match read_within(bytes, limits) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    fn meta() -> Tgz {
        Tgz::new().file("p-1.0.0/metadata.yaml", b"name: p\n")
    }

    #[test]
    fn only_files_and_directories_are_unpacked() {
        use tar::EntryType as T;
        let limits = Limits::default();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                meta().link(T::Symlink, "p-1.0.0/s", "/etc/passwd").done(),
                "entry \"p-1.0.0/s\" is a symbolic link; links are not allowed in a package (it points to \"/etc/passwd\")",
            ),
            (
                meta().link(T::Link, "p-1.0.0/h", "../../etc/shadow").done(),
                "entry \"p-1.0.0/h\" is a hard link; links are not allowed in a package (it points to \"../../etc/shadow\")",
            ),
            (
                meta()
                    .raw(T::Fifo, b"p-1.0.0/fifo", std::io::empty(), 0)
                    .done(),
                "entry \"p-1.0.0/fifo\" is a FIFO",
            ),
            (
                meta()
                    .raw(T::Char, b"p-1.0.0/null", std::io::empty(), 0)
                    .done(),
                "entry \"p-1.0.0/null\" is a character device",
            ),
            (
                meta()
                    .raw(T::Block, b"p-1.0.0/sda", std::io::empty(), 0)
                    .done(),
                "entry \"p-1.0.0/sda\" is a block device",
            ),
            (
                meta()
                    .raw(T::GNUSparse, b"p-1.0.0/holes", std::io::empty(), 0)
                    .done(),
                "entry \"p-1.0.0/holes\" is a GNU sparse file",
            ),
            (
                meta()
                    .raw(T::Regular, b"/etc/cron.d/x", &b"x"[..], 1)
                    .done(),
                "entry \"/etc/cron.d/x\" leaves the package",
            ),
            (
                meta()
                    .raw(T::Regular, b"p-1.0.0/../../x", &b"x"[..], 1)
                    .done(),
                "entry \"p-1.0.0/../../x\" leaves the package",
            ),
        ];
        for (bytes, expected) in cases {
            let e = refusal(&bytes, &limits);
            assert!(e.contains(expected), "{e}\nexpected: {expected}");
        }
        // A pax-described sparse file is refused too.
        let mut t = meta();
        t.0.append_pax_extensions([("GNU.sparse.major", &b"1"[..]), ("GNU.sparse.minor", b"0")])
            .unwrap();
        let bytes = t.file("p-1.0.0/holes", b"x").done();
        let e = refusal(&bytes, &limits);
        assert!(
            e.contains("entry \"p-1.0.0/holes\" is a GNU sparse file (pax)"),
            "{e}"
        );
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_ratio_or_the_total() {
        // 64 MiB of zeros in one file: about 64 KiB of gzip.
        let zeros = 64u64 << 20;
        let bomb = meta()
            .raw(
                tar::EntryType::Regular,
                b"p-1.0.0/zeros",
                std::io::repeat(0).take(zeros),
                zeros,
            )
            .done();
        assert!(bomb.len() < 100 << 10, "{}", bomb.len());
        let e = refusal(&bomb, &Limits::default());
        assert!(
            e.contains("more than 100 times its compressed size")
                && e.contains("plugins.max_ratio")
                && e.contains("refused while reading entry \"p-1.0.0/zeros\""),
            "{e}"
        );
        // With the ratio allowed, the total stops it; with both, the file size.
        let total = Limits {
            max_ratio: 1 << 20,
            max_unpacked: 8 << 20,
            ..Limits::default()
        };
        let e = refusal(&bomb, &total);
        assert!(
            e.contains("more than 8388608 bytes (8 MiB) (plugins.max_unpacked_bytes)"),
            "{e}"
        );
        let file = Limits {
            max_ratio: 1 << 20,
            max_file: 1 << 20,
            ..Limits::default()
        };
        let e = refusal(&bomb, &file);
        assert!(
            e.contains("entry \"p-1.0.0/zeros\" declares 67108864 bytes (64 MiB) and a file may hold 1048576 bytes (1 MiB)"),
            "{e}"
        );
        // Many files, each small, add up to the total as well.
        let mut many = meta();
        for i in 0..40 {
            many = many.raw(
                tar::EntryType::Regular,
                format!("p-1.0.0/f{i}").as_bytes(),
                std::io::repeat(b'a').take(1 << 20),
                1 << 20,
            );
        }
        let e = refusal(
            &many.done(),
            &Limits {
                max_ratio: 1 << 20,
                max_unpacked: 16 << 20,
                ..Limits::default()
            },
        );
        assert!(
            e.contains("plugins.max_unpacked_bytes") && e.contains("entry \"p-1.0.0/f15\""),
            "{e}"
        );
    }

    #[test]
    fn oversized_extension_headers_are_refused_before_they_are_read() {
        // A GNU long name of 64 MiB: the tar crate would read it whole into memory.
        let size = 64u64 << 20;
        let bytes = meta()
            .raw(
                tar::EntryType::GNULongName,
                b"././@LongLink",
                std::io::repeat(b'a').take(size),
                size,
            )
            .file("whatever", b"x")
            .done();
        let e = refusal(
            &bytes,
            &Limits {
                max_ratio: 1 << 20,
                ..Limits::default()
            },
        );
        assert!(
            e.contains("a GNU long name of 67108864 bytes (at most 4096"),
            "{e}"
        );
        // Real long names still work.
        let long = format!("p-1.0.0/{}/file.yaml", "d".repeat(200));
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            Compression::fast(),
        ));
        let mut h = tar::Header::new_gnu();
        h.set_size(2);
        b.append_data(&mut h, "p-1.0.0/metadata.yaml", &b"{}"[..])
            .unwrap();
        b.append_data(&mut h, &long, &b"{}"[..]).unwrap();
        let files = read(&b.into_inner().unwrap().finish().unwrap()).unwrap();
        assert!(files.is_file(&long["p-1.0.0/".len()..]));
    }

    #[test]
    fn members_are_counted() {
        let mut t = meta();
        for i in 0..20 {
            t = t.file(&format!("p-1.0.0/f{i}"), b"x");
        }
        let e = refusal(
            &t.done(),
            &Limits {
                max_entries: 10,
                ..Limits::default()
            },
        );
        assert!(
            e.contains(
                "more than 10 members (plugins.max_entries); refused at entry \"p-1.0.0/f9\""
            ),
            "{e}"
        );
    }

    #[test]
    fn unpacking_to_a_directory_finds_the_root_and_sets_modes() {
        use std::os::unix::fs::PermissionsExt;
        let mut m = MemFiles::new();
        m.add("metadata.yaml", "name: p\n").unwrap();
        m.add("deployment_scripts/deploy.sh", "#!/bin/sh\n")
            .unwrap();
        m.add("tasks/run", "#!/bin/sh\n").unwrap();
        m.add_dir("repositories/ubuntu").unwrap();
        let fp = build(&m, "p-1.0.0", 0, &mut |_, _| {}).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.fp");
        std::fs::write(&file, &fp).unwrap();
        let dest = dir.path().join("out");
        std::fs::create_dir(&dest).unwrap();
        let root = unpack(&file, &dest, &Limits::default()).unwrap();
        assert_eq!(root, dest.join("p-1.0.0"));
        assert_eq!(
            std::fs::read(root.join("metadata.yaml")).unwrap(),
            b"name: p\n"
        );
        assert!(root.join("repositories/ubuntu").is_dir());
        let mode = |p: &str| {
            std::fs::metadata(root.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("deployment_scripts/deploy.sh"), 0o755);
        assert_eq!(mode("tasks/run"), 0o755);
        assert_eq!(mode("metadata.yaml") & 0o111, 0);
        // A bomb unpacked to disk stops there too, and says why without a host path.
        let bomb = meta()
            .raw(
                tar::EntryType::Regular,
                b"p-1.0.0/zeros",
                std::io::repeat(0).take(64 << 20),
                64 << 20,
            )
            .done();
        std::fs::write(&file, &bomb).unwrap();
        let dest = dir.path().join("bomb");
        std::fs::create_dir(&dest).unwrap();
        let e = unpack(&file, &dest, &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("plugins.max_ratio"), "{e}");
        assert!(!e.contains(&*dir.path().to_string_lossy()), "{e}");
        let written = std::fs::metadata(dest.join("p-1.0.0/zeros")).unwrap().len();
        assert!(written <= 100 * bomb.len() as u64, "{written}");
    }
}
