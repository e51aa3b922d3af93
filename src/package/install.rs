//! Installing, rescanning and removing packages on a master. A package is checked by the
//! engine (its graphs too: [`crate::engine::graph::check`]); an invalid one is refused with its
//! diagnostics. Every install goes through the same steps under `data_dir/plugins/`, each
//! leaving only hidden folders that the next start clears ([`recover`]) if the process dies:
//!
//! 1. The package is written (or unpacked from its archive) into a `.staging-*` folder of its
//!    own, so concurrent installs never share a folder.
//! 2. It is checked there, read through a [`DirFiles`] with a read limit.
//! 3. Under one lock (installs of the same plugin serialize here; the first wins, the rest
//!    find it installed: 409), it is renamed to `.pending-NAME-VERSION`, recorded with its
//!    releases in one store transaction, then renamed to `NAME-VERSION`. A start that finds a
//!    `.pending-` folder finishes the rename if the store has the plugin, else removes it.
//!
//! A failure removes what it wrote, so a refused install leaves nothing behind. [`sync`] is
//! Fuel's `POST /plugins/sync`: it re-reads every folder under `plugins/` (hidden ones are
//! never plugins), under the same lock.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value as J;

use super::PackageError;
use super::archive::{self, Limits};
use super::dir::DirFiles;
use crate::engine::plugin::{Diagnostics, Level, PackageFiles, Report, check};
use crate::model::PluginSummary;
use crate::store::{NewPlugin, NewRelease, Store};

/// Where installed packages live, relative to the data dir.
pub const PLUGINS_DIR: &str = "plugins";

/// The largest file the checker reads from a package being installed (metadata, YAML, text):
/// Fuel's biggest real file is 90 KB.
pub const MAX_DATA_FILE: u64 = 16 << 20;

/// Prefixes of the hidden folders (and upload files) an install works in.
const STAGING: &str = ".staging-";
const PENDING: &str = ".pending-";
const UPLOAD: &str = ".upload-";
/// What stoker before the staging folders used; cleared at start too.
const OLD_TMP: &str = ".tmp-";

/// Held while a package is moved into place and recorded, and while folders are rescanned.
static COMMIT: Mutex<()> = Mutex::new(());

fn commit_lock() -> std::sync::MutexGuard<'static, ()> {
    // A panic while holding it left nothing half-done that the lock protects (each step is
    // one rename or one transaction), so a poisoned lock is still good.
    COMMIT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A unique name for a hidden work file or folder: process id and a counter.
fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A hidden file or folder under `plugins/`, removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn plugins_dir(data_dir: &Path) -> Result<PathBuf, PackageError> {
        let root = data_dir.join(PLUGINS_DIR);
        std::fs::create_dir_all(&root).map_err(|e| PackageError::io(&root, e))?;
        Ok(root)
    }

    /// A new empty staging folder.
    pub fn folder(data_dir: &Path) -> Result<Scratch, PackageError> {
        let path = Self::plugins_dir(data_dir)?.join(unique(STAGING));
        std::fs::create_dir(&path).map_err(|e| PackageError::io(&path, e))?;
        Ok(Scratch { path })
    }

    /// A path for an uploaded archive (not created).
    pub fn upload(data_dir: &Path) -> Result<Scratch, PackageError> {
        let path = Self::plugins_dir(data_dir)?.join(format!("{}.fp", unique(UPLOAD)));
        Ok(Scratch { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let gone = if self.path.is_dir() {
            std::fs::remove_dir_all(&self.path)
        } else {
            std::fs::remove_file(&self.path)
        };
        if let Err(e) = gone
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), "cannot remove a work folder: {e}");
        }
    }
}

/// A refused or failed install.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("the plugin is invalid: {} error(s)", .0.count(Level::Error))]
    Invalid(Diagnostics),
    #[error(transparent)]
    Package(#[from] PackageError),
}

impl From<crate::store::StoreError> for InstallError {
    fn from(e: crate::store::StoreError) -> InstallError {
        InstallError::Package(PackageError::Store(e))
    }
}

/// What an install did.
#[derive(Debug, Clone)]
pub struct Installed {
    pub plugin: PluginSummary,
    pub releases: Vec<String>,
    pub diagnostics: Diagnostics,
}

/// The findings stored with a plugin: everything but errors (errors refuse the install).
pub fn stored_diagnostics(d: &Diagnostics) -> J {
    J::Array(
        d.iter()
            .filter(|x| x.level != Level::Error)
            .filter_map(|x| serde_json::to_value(x).ok())
            .collect(),
    )
}

fn folder_name(name: &str, version: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("{}-{}", clean(name), clean(version))
}

fn write_tree(files: &dyn PackageFiles, dest: &Path) -> Result<(), PackageError> {
    std::fs::create_dir_all(dest).map_err(|e| PackageError::io(dest, e))?;
    for entry in files.entries() {
        let path = dest.join(&entry.path);
        if entry.is_dir {
            std::fs::create_dir_all(&path).map_err(|e| PackageError::io(&path, e))?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| PackageError::io(parent, e))?;
        }
        let bytes = files
            .read(&entry.path)
            .map_err(|e| PackageError::BadArchive(e.to_string()))?;
        std::fs::write(&path, &bytes).map_err(|e| PackageError::io(&path, e))?;
        if bytes.starts_with(b"#!") || entry.path.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| PackageError::io(&path, e))?;
        }
    }
    Ok(())
}

fn new_releases(report: &Report) -> Vec<NewRelease<'_>> {
    report
        .releases
        .iter()
        .map(|r| NewRelease {
            name: &r.name,
            version: &r.version,
            operating_system: &r.operating_system,
            description: &r.description,
            state: &r.state,
            data: &r.data,
        })
        .collect()
}

fn record(
    store: &Store,
    report: &Report,
    rel_path: &str,
    now: i64,
) -> Result<PluginSummary, crate::store::StoreError> {
    let pkg = &report.package;
    let text = |k: &str| {
        pkg.metadata
            .get(k)
            .and_then(|n| n.as_str())
            .unwrap_or("")
            .to_string()
    };
    let (title, description) = (text("title"), text("description"));
    let version = pkg.version();
    let package_version = pkg.package_version.map_or("", |v| v.as_str());
    let diagnostics = stored_diagnostics(&report.diagnostics);
    let manifest = pkg.manifest();
    let releases = new_releases(report);
    store.write(|tx| {
        tx.insert_plugin(
            &NewPlugin {
                name: pkg.name(),
                version: &version,
                title: if title.is_empty() { pkg.name() } else { &title },
                package_version,
                description: &description,
                is_release: pkg.is_release_plugin(),
                path: rel_path,
                diagnostics: &diagnostics,
                manifest: &manifest,
            },
            &releases,
            now,
        )
    })
}

/// Check a package as an install does: the engine's rules and its graphs.
pub fn check_for_install(files: &dyn PackageFiles) -> Report {
    let mut report = check(files);
    if report.is_valid() {
        let graphs = crate::engine::graph::check::package_diagnostics(&report);
        if graphs.has_errors() {
            report.diagnostics.0.extend(graphs.0);
            report.releases.clear();
        }
    }
    report
}

/// Check and install a package held in memory (or any [`PackageFiles`]).
pub fn install(
    store: &Store,
    data_dir: &Path,
    files: &dyn PackageFiles,
    now: i64,
) -> Result<Installed, InstallError> {
    let staging = Scratch::folder(data_dir)?;
    write_tree(files, staging.path())?;
    let root = staging.path().to_path_buf();
    install_staged(store, data_dir, &root, now)
}

/// Check and install a built package (`.fp`) from a file, unpacked within `limits`.
pub fn install_archive(
    store: &Store,
    data_dir: &Path,
    archive_file: &Path,
    limits: &Limits,
    now: i64,
) -> Result<Installed, InstallError> {
    let staging = Scratch::folder(data_dir)?;
    let root = archive::unpack(archive_file, staging.path(), limits)?;
    install_staged(store, data_dir, &root, now)
}

/// Check the package at `root` (inside a staging folder, which the caller removes) and move it
/// into place.
fn install_staged(
    store: &Store,
    data_dir: &Path,
    root: &Path,
    now: i64,
) -> Result<Installed, InstallError> {
    let files = DirFiles::new(root)
        .map_err(|e| match e {
            // The package's own doing (folders nested past what is read): say where, inside it.
            PackageError::NotAPackage { path, reason } => PackageError::BadArchive(format!(
                "{}: {reason}",
                path.strip_prefix(root).unwrap_or(&path).display()
            )),
            other => other,
        })?
        .with_read_limit(MAX_DATA_FILE);
    let report = check_for_install(&files);
    if !report.is_valid() {
        return Err(InstallError::Invalid(report.diagnostics));
    }
    let pkg = &report.package;
    let (name, version) = (pkg.name().to_string(), pkg.version());
    let folder = folder_name(&name, &version);
    let rel_path = format!("{PLUGINS_DIR}/{folder}");
    let plugins = data_dir.join(PLUGINS_DIR);
    let dest = plugins.join(&folder);
    let pending = plugins.join(format!("{PENDING}{folder}"));
    let _commit = commit_lock();
    let already = store.read(|tx| tx.plugin_by_name(&name, Some(&version)))?;
    if !already.is_empty() {
        return Err(PackageError::Conflict(format!(
            "plugin {name} {version} is already installed; remove it first with \
             `stoker plugin remove {name}@{version}`"
        ))
        .into());
    }
    // Folders no installed plugin owns are leftovers (of a crash, or put there by hand).
    for leftover in [&dest, &pending] {
        if leftover.exists() {
            std::fs::remove_dir_all(leftover).map_err(|e| PackageError::io(leftover, e))?;
        }
    }
    std::fs::rename(root, &pending).map_err(|e| PackageError::io(&pending, e))?;
    let plugin = match record(store, &report, &rel_path, now) {
        Ok(plugin) => plugin,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&pending);
            return Err(e.into());
        }
    };
    if let Err(e) = std::fs::rename(&pending, &dest) {
        // Undo the record, so the store never names a folder that is not there.
        let _ = store.write(|tx| tx.remove_plugin(plugin.id, now));
        let _ = std::fs::remove_dir_all(&pending);
        return Err(PackageError::io(&dest, e).into());
    }
    Ok(Installed {
        plugin,
        releases: report.releases.iter().map(|r| r.name.clone()).collect(),
        diagnostics: report.diagnostics,
    })
}

/// What [`recover`] did at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Work folders and uploads of interrupted installs, removed.
    pub removed: Vec<String>,
    /// Installs recorded before the process stopped, whose folder was moved into place.
    pub finished: Vec<String>,
}

/// Clear what interrupted installs left under `plugins/`: staging folders and uploads are
/// removed; a `.pending-` folder becomes the plugin's folder if the store recorded it (the
/// install had committed), and is removed otherwise. Called at start, before anything installs.
pub fn recover(store: &Store, data_dir: &Path) -> Result<Recovered, InstallError> {
    let root = data_dir.join(PLUGINS_DIR);
    let mut out = Recovered::default();
    if !root.is_dir() {
        return Ok(out);
    }
    let _commit = commit_lock();
    let recorded: Vec<String> = store
        .read(|tx| tx.plugin_paths())?
        .into_iter()
        .map(|(_, _, _, path)| path)
        .collect();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&root).map_err(|e| PackageError::io(&root, e))? {
        let entry = entry.map_err(|e| PackageError::io(&root, e))?;
        names.push(entry.file_name().to_string_lossy().to_string());
    }
    names.sort();
    for name in names {
        let path = root.join(&name);
        if let Some(folder) = name.strip_prefix(PENDING) {
            let dest = root.join(folder);
            if recorded.contains(&format!("{PLUGINS_DIR}/{folder}")) && !dest.exists() {
                std::fs::rename(&path, &dest).map_err(|e| PackageError::io(&dest, e))?;
                out.finished.push(folder.to_string());
                continue;
            }
        } else if ![STAGING, UPLOAD, OLD_TMP]
            .iter()
            .any(|p| name.starts_with(p))
        {
            continue;
        }
        let gone = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        gone.map_err(|e| PackageError::io(&path, e))?;
        out.removed.push(name);
    }
    Ok(out)
}

/// What a rescan found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SyncReport {
    /// Installed plugins whose files were re-read.
    pub updated: Vec<String>,
    /// Folders that were not installed and now are.
    pub added: Vec<String>,
    /// Folders that do not validate, with their error messages.
    pub invalid: Vec<(String, Vec<String>)>,
    /// Installed plugins whose folder is gone.
    pub missing: Vec<String>,
}

/// Re-read every folder under `data_dir/plugins/`: refresh installed plugins, register new
/// valid folders, report invalid ones and plugins whose folder is gone.
pub fn sync(store: &Store, data_dir: &Path, now: i64) -> Result<SyncReport, InstallError> {
    let root = data_dir.join(PLUGINS_DIR);
    let _commit = commit_lock();
    let installed = store.read(|tx| tx.plugin_paths())?;
    let mut out = SyncReport::default();
    let mut folders = Vec::new();
    if root.is_dir() {
        for entry in std::fs::read_dir(&root).map_err(|e| PackageError::io(&root, e))? {
            let entry = entry.map_err(|e| PackageError::io(&root, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if !name.starts_with('.') && entry.path().is_dir() {
                folders.push(name);
            }
        }
    }
    folders.sort();
    for folder in &folders {
        let rel = format!("{PLUGINS_DIR}/{folder}");
        let files = DirFiles::new(&root.join(folder))?.with_read_limit(MAX_DATA_FILE);
        let report = check_for_install(&files);
        if !report.is_valid() {
            out.invalid.push((
                rel,
                report
                    .diagnostics
                    .iter()
                    .filter(|d| d.level == Level::Error)
                    .map(|d| d.render())
                    .collect(),
            ));
            continue;
        }
        let label = format!("{} {}", report.package.name(), report.package.version());
        if let Some((id, ..)) = installed.iter().find(|(_, _, _, p)| *p == rel) {
            let diagnostics = stored_diagnostics(&report.diagnostics);
            let manifest = report.package.manifest();
            let releases = new_releases(&report);
            store.write(|tx| tx.update_plugin(*id, &diagnostics, &manifest, &releases))?;
            out.updated.push(label);
        } else {
            record(store, &report, &rel, now)?;
            out.added.push(label);
        }
    }
    for (_, name, version, path) in &installed {
        let folder = path
            .strip_prefix(&format!("{PLUGINS_DIR}/"))
            .unwrap_or(path);
        if !folders.iter().any(|f| f == folder) {
            out.missing.push(format!("{name} {version}"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> DirFiles {
        DirFiles::new(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plugins/v5-valid"),
        )
        .unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn recover_finishes_committed_installs_and_clears_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let store = Store::open(&data.join("stoker.db")).unwrap();
        let done = install(&store, data, &fixture(), 0).unwrap();
        assert_eq!(done.plugin.name, "v5-valid");
        let plugins = data.join(PLUGINS_DIR);
        // Killed between the store's commit and the last rename.
        std::fs::rename(
            plugins.join("v5-valid-1.0.0"),
            plugins.join(".pending-v5-valid-1.0.0"),
        )
        .unwrap();
        // Killed before the commit, while unpacking, while uploading; and an older stoker.
        std::fs::create_dir_all(plugins.join(".pending-other-1.0.0/x")).unwrap();
        std::fs::create_dir_all(plugins.join(".staging-1-2/p-1.0.0")).unwrap();
        std::fs::write(plugins.join(".upload-1-3.fp"), "partial").unwrap();
        std::fs::create_dir_all(plugins.join(".tmp-p-1.0.0-77")).unwrap();
        // Put there by hand: sync's business, not recover's.
        std::fs::create_dir_all(plugins.join("handmade")).unwrap();
        let r = recover(&store, data).unwrap();
        assert_eq!(r.finished, ["v5-valid-1.0.0"]);
        assert_eq!(
            r.removed,
            [
                ".pending-other-1.0.0",
                ".staging-1-2",
                ".tmp-p-1.0.0-77",
                ".upload-1-3.fp"
            ]
        );
        assert_eq!(names(&plugins), ["handmade", "v5-valid-1.0.0"]);
        assert!(plugins.join("v5-valid-1.0.0/metadata.yaml").is_file());
        assert_eq!(recover(&store, data).unwrap(), Recovered::default());
    }

    #[test]
    fn a_refused_or_repeated_install_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let store = Store::open(&data.join("stoker.db")).unwrap();
        install(&store, data, &fixture(), 0).unwrap();
        let again = install(&store, data, &fixture(), 0).unwrap_err();
        assert!(
            again
                .to_string()
                .contains("plugin v5-valid 1.0.0 is already installed"),
            "{again}"
        );
        let mut bad = crate::engine::plugin::MemFiles::new();
        bad.add("metadata.yaml", "name: [").unwrap();
        assert!(matches!(
            install(&store, data, &bad, 0),
            Err(InstallError::Invalid(_))
        ));
        assert_eq!(names(&data.join(PLUGINS_DIR)), ["v5-valid-1.0.0"]);
    }
}
