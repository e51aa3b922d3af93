//! Fuel plugin packages, versions 1.0.0 to 5.0.0, releases as plugins included: reading
//! ([`load`]), the `*_path` loader, the validator ([`validate`]), and turning release records
//! into releases ([`release`]). Pure: every file arrives through the [`files::PackageFiles`]
//! trait, which the edge implements for a directory and for a built archive. It must not touch
//! the disk, the database or the clock.
//!
//! - [`yaml`]: YAML/JSON with line and column on every node.
//! - [`files`]: the file-access trait, an in-memory package, globs.
//! - [`load`]: metadata, fixed-name files by package version, `_path` keys, `base_release`.
//! - [`schema`]: the builder's (FPB 4.2.0) schema checks, file by file.
//! - [`validate`]: every rule, as diagnostics with level, file, line, column and field.
//! - [`release`]: release records into release trees; multi-release selection.
//! - [`version`]: release versions and version constraints.
//! - [`diag`]: the diagnostics themselves.

pub mod diag;
pub mod files;
pub mod load;
pub mod release;
pub mod schema;
pub mod validate;
pub mod version;
pub mod yaml;

pub use diag::{Diagnostic, Diagnostics, Level};
pub use files::{Entry, FilesError, MemFiles, PackageFiles};
pub use load::{Package, PackageVersion, load};
pub use validate::{Report, check};
