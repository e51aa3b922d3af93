//! A package directory on disk, read through the engine's `PackageFiles` trait. The tree is
//! listed once, when opened (sorted, symlinks followed), so every question the engine asks is
//! answered from the same snapshot. It lists what fuel-plugin-builder builds into a package
//! ([`super::archive::excluded`]): no top-level dotfile or dot-folder (`.git`, `.build`), no
//! `.nfs*` file anywhere. A package that arrived from the network is
//! opened with a read limit, so no file the engine parses is read whole into memory past it.

use std::path::{Path, PathBuf};

use super::PackageError;
use crate::engine::plugin::{Entry, FilesError, PackageFiles, files::normalize};

/// A plugin directory.
#[derive(Debug, Clone)]
pub struct DirFiles {
    root: PathBuf,
    entries: Vec<Entry>,
    /// The largest file [`PackageFiles::read`] returns.
    read_limit: Option<u64>,
}

/// Names never part of a package, by FPB's build rule ([`super::archive::excluded`]): a
/// top-level name starting with `.` (so `.git` is never walked), `.nfs*` at any depth.
fn skipped(rel: &str, name: &str) -> bool {
    (rel.is_empty() && name.starts_with('.')) || name.starts_with(".nfs")
}

fn walk(root: &Path, rel: &str, out: &mut Vec<Entry>, depth: usize) -> Result<(), PackageError> {
    if depth > 64 {
        return Err(PackageError::NotAPackage {
            path: root.join(rel),
            reason: "directories nest too deep (a symlink loop?)".to_string(),
        });
    }
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let read = std::fs::read_dir(&dir).map_err(|e| PackageError::io(&dir, e))?;
    let mut names = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| PackageError::io(&dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !skipped(rel, &name) {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let full = root.join(&path);
        if full.is_dir() {
            out.push(Entry {
                path: path.clone(),
                is_dir: true,
            });
            walk(root, &path, out, depth + 1)?;
        } else if full.is_file() {
            out.push(Entry {
                path,
                is_dir: false,
            });
        }
    }
    Ok(())
}

impl DirFiles {
    pub fn new(root: &Path) -> Result<DirFiles, PackageError> {
        let mut entries = Vec::new();
        walk(root, "", &mut entries, 0)?;
        entries.sort();
        Ok(DirFiles {
            root: root.to_path_buf(),
            entries,
            read_limit: None,
        })
    }

    /// Refuse to read files bigger than `bytes` (the engine reads metadata, YAML and text).
    pub fn with_read_limit(mut self, bytes: u64) -> DirFiles {
        self.read_limit = Some(bytes);
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl PackageFiles for DirFiles {
    fn entries(&self) -> Vec<Entry> {
        self.entries.clone()
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, FilesError> {
        let rel = normalize(path)?;
        if !self.entries.iter().any(|e| !e.is_dir && e.path == rel) {
            return Err(FilesError::NotFound(rel));
        }
        let unreadable = |reason: String| FilesError::Unreadable {
            path: rel.clone(),
            reason,
        };
        let path = self.root.join(&rel);
        let Some(limit) = self.read_limit else {
            return std::fs::read(&path).map_err(|e| unreadable(e.to_string()));
        };
        let file = std::fs::File::open(&path).map_err(|e| unreadable(e.to_string()))?;
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(&file, limit + 1), &mut data)
            .map_err(|e| unreadable(e.to_string()))?;
        if data.len() as u64 > limit {
            return Err(unreadable(format!(
                "larger than {}, the most stoker reads of one data file",
                super::archive::bytes(limit)
            )));
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_limit_refuses_bigger_files_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small.yaml"), "a: 1\n").unwrap();
        std::fs::write(dir.path().join("big.yaml"), vec![b'#'; 2048]).unwrap();
        let files = DirFiles::new(dir.path()).unwrap().with_read_limit(1024);
        assert_eq!(files.read("small.yaml").unwrap(), b"a: 1\n");
        let e = files.read("big.yaml").unwrap_err().to_string();
        assert_eq!(
            e,
            "big.yaml: cannot read: larger than 1024 bytes (1 KiB), the most stoker reads of one \
             data file"
        );
        assert_eq!(
            DirFiles::new(dir.path())
                .unwrap()
                .read("big.yaml")
                .unwrap()
                .len(),
            2048
        );
    }
}
