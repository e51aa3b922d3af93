//! The plugin-package edge: the file system side of [`crate::engine::plugin`]. It implements
//! [`PackageFiles`](crate::engine::plugin::PackageFiles) for a directory ([`dir::DirFiles`]) and
//! for a built archive ([`archive`]), runs a package's `pre_build_hook` ([`hook`]) and builds
//! byte-identical `.fp` archives, installs packages
//! atomically under `data_dir/plugins/`, and carries the bundled release plugins
//! ([`bundled`]). It decides nothing about Fuel semantics (the engine does) and holds no SQL
//! (the store does).

pub mod archive;
pub mod bundled;
pub mod dir;
pub mod graphs;
pub mod hook;
pub mod install;

use std::path::{Path, PathBuf};

use crate::engine::plugin::{MemFiles, PackageFiles};

/// What a package sent over the network may be: its compressed size, and what it may unpack
/// to (options `plugins.max_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackageLimits {
    /// Bytes of the upload (the compressed archive).
    pub max_upload: u64,
    pub archive: archive::Limits,
}

impl Default for PackageLimits {
    fn default() -> PackageLimits {
        PackageLimits {
            max_upload: 256 << 20,
            archive: archive::Limits::default(),
        }
    }
}

/// Why a package could not be opened, built or installed.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a plugin package: {reason}")]
    NotAPackage { path: PathBuf, reason: String },
    #[error("the archive is not a valid .fp (gzipped tar): {0}")]
    BadArchive(String),
    /// Past one of the archive's [`archive::Limits`] (or the upload limit).
    #[error("{0}")]
    TooLarge(String),
    #[error("the package is invalid ({errors} error(s)); run `stoker plugin validate` for details")]
    Invalid { errors: usize },
    #[error("{0}")]
    Conflict(String),
    /// No archive or folder name can be made of the package's name and version.
    #[error("{0}")]
    Unnamed(String),
    /// The package's `pre_build_hook` failed: its exit status and the end of its output.
    #[error("pre_build_hook {status}; nothing was built. The end of its output:\n{tail}")]
    Hook { status: String, tail: String },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl PackageError {
    pub fn io(path: &Path, source: std::io::Error) -> PackageError {
        PackageError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Open a package: a directory, or a built archive (`.fp`, gzipped tar).
pub fn open(path: &Path) -> Result<Box<dyn PackageFiles>, PackageError> {
    if path.is_dir() {
        return Ok(Box::new(dir::DirFiles::new(path)?));
    }
    let bytes = std::fs::read(path).map_err(|e| PackageError::io(path, e))?;
    let files: MemFiles = archive::read(&bytes)?;
    Ok(Box::new(files))
}
