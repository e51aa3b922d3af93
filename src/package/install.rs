//! Installing, rescanning and removing packages on a master. A package is checked by the
//! engine; an invalid one is refused with its diagnostics. A valid one is unpacked into a
//! hidden temporary folder under `data_dir/plugins/`, moved into place as
//! `plugins/NAME-VERSION/` with one rename, and recorded with its releases in one store
//! transaction; if recording fails the folder is removed again, so a failure leaves nothing
//! behind. [`sync`] is Fuel's `POST /plugins/sync`: it re-reads every folder under `plugins/`.

use std::path::{Path, PathBuf};

use serde_json::Value as J;

use super::PackageError;
use super::dir::DirFiles;
use crate::engine::plugin::{Diagnostics, Level, PackageFiles, Report, check};
use crate::model::PluginSummary;
use crate::store::{NewPlugin, NewRelease, Store};

/// Where installed packages live, relative to the data dir.
pub const PLUGINS_DIR: &str = "plugins";

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

/// Check and install a package.
pub fn install(
    store: &Store,
    data_dir: &Path,
    files: &dyn PackageFiles,
    now: i64,
) -> Result<Installed, InstallError> {
    let report = check(files);
    if !report.is_valid() {
        return Err(InstallError::Invalid(report.diagnostics));
    }
    let pkg = &report.package;
    let (name, version) = (pkg.name().to_string(), pkg.version());
    let already = store.read(|tx| tx.plugin_by_name(&name, Some(&version)))?;
    if !already.is_empty() {
        return Err(PackageError::Conflict(format!(
            "plugin {name} {version} is already installed; remove it first with \
             `stoker plugin remove {name}@{version}`"
        ))
        .into());
    }
    let folder = folder_name(&name, &version);
    let rel_path = format!("{PLUGINS_DIR}/{folder}");
    let root = data_dir.join(PLUGINS_DIR);
    std::fs::create_dir_all(&root).map_err(|e| PackageError::io(&root, e))?;
    let tmp = root.join(format!(".tmp-{folder}-{}", std::process::id()));
    let dest = root.join(&folder);
    let cleanup = |p: &PathBuf| {
        let _ = std::fs::remove_dir_all(p);
    };
    cleanup(&tmp);
    if let Err(e) = write_tree(files, &tmp) {
        cleanup(&tmp);
        return Err(e.into());
    }
    // A folder no installed plugin owns is a leftover (of a crash): replace it.
    if dest.exists() {
        cleanup(&dest);
    }
    if let Err(e) = std::fs::rename(&tmp, &dest) {
        cleanup(&tmp);
        return Err(PackageError::io(&dest, e).into());
    }
    match record(store, &report, &rel_path, now) {
        Ok(plugin) => Ok(Installed {
            plugin,
            releases: report.releases.iter().map(|r| r.name.clone()).collect(),
            diagnostics: report.diagnostics,
        }),
        Err(e) => {
            cleanup(&dest);
            Err(e.into())
        }
    }
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
        let files = DirFiles::new(&root.join(folder))?;
        let report = check(&files);
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
