//! Built packages: `NAME-VERSION.fp`, a gzipped tar of `NAME-VERSION/` (the format Fuel 6.0's
//! builder produced for package 1.0.0; stoker uses it for every package version instead of
//! Fuel's RPMs). Building is byte-identical for the same input: entries sorted by path,
//! directories before their contents, mtime from `SOURCE_DATE_EPOCH` (0 when unset),
//! owner root:root (0:0), mode 0755 for directories and for files that start with `#!` or end
//! in `.sh`, 0644 otherwise, and a gzip header without name or time. Reading accepts such an
//! archive (with or without the top directory), refuses links and paths that leave the package,
//! and caps the unpacked size.

use std::io::{Read, Write};

use flate2::{Compression, GzBuilder, read::GzDecoder};

use super::PackageError;
use crate::engine::plugin::{MemFiles, PackageFiles};

/// The most an archive may unpack to.
pub const MAX_UNPACKED: u64 = 1 << 30;
/// The most entries an archive may hold.
pub const MAX_ENTRIES: usize = 100_000;

/// Paths left out of a build: version-control folders are never listed; previous builds are.
fn excluded(path: &str) -> bool {
    let top = path.split('/').next().unwrap_or(path);
    top == ".build" || (!path.contains('/') && (path.ends_with(".fp") || path.ends_with(".rpm")))
}

fn mode_of(path: &str, bytes: &[u8]) -> u32 {
    if bytes.starts_with(b"#!") || path.ends_with(".sh") {
        0o755
    } else {
        0o644
    }
}

/// The archive's file name: `NAME-VERSION.fp`.
pub fn file_name(name: &str, version: &str) -> String {
    format!("{name}-{version}.fp")
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

/// Read an archive into memory, without its top directory.
pub fn read(bytes: &[u8]) -> Result<MemFiles, PackageError> {
    if bytes.starts_with(&[0xed, 0xab, 0xee, 0xdb]) {
        return Err(PackageError::BadArchive(
            "this is an RPM (Fuel's builder output for packages 2.0.0+); stoker installs the \
             plugin directory or a .fp made by `stoker plugin build`"
                .to_string(),
        ));
    }
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(PackageError::BadArchive(
            "not gzip data (expected a .fp made by `stoker plugin build`)".to_string(),
        ));
    }
    let bad = |e: std::io::Error| PackageError::BadArchive(e.to_string());
    let mut archive = tar::Archive::new(GzDecoder::new(bytes).take(MAX_UNPACKED + 1));
    let mut files = MemFiles::new();
    let mut total = 0u64;
    for (count, entry) in archive.entries().map_err(bad)?.enumerate() {
        if count >= MAX_ENTRIES {
            return Err(PackageError::BadArchive(format!(
                "more than {MAX_ENTRIES} entries"
            )));
        }
        let mut entry = entry.map_err(bad)?;
        let path = entry.path().map_err(bad)?.to_string_lossy().to_string();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            files
                .add_dir(&path)
                .map_err(|e| PackageError::BadArchive(e.to_string()))?;
        } else if kind.is_file() {
            let mut data = Vec::new();
            entry.read_to_end(&mut data).map_err(bad)?;
            total += data.len() as u64;
            if total > MAX_UNPACKED {
                return Err(PackageError::BadArchive(format!(
                    "unpacks to more than {MAX_UNPACKED} bytes"
                )));
            }
            files
                .add(&path, data)
                .map_err(|e| PackageError::BadArchive(e.to_string()))?;
        } else if kind.is_symlink() || kind.is_hard_link() {
            return Err(PackageError::BadArchive(format!(
                "{path}: links are not allowed in a package"
            )));
        }
    }
    if files.is_empty() {
        return Err(PackageError::BadArchive(
            "the archive holds no file".to_string(),
        ));
    }
    Ok(files.strip_single_root())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
