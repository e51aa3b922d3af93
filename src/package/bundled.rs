//! The release plugins shipped inside the binary (`assets/releases/<name>/`, embedded with
//! rust-embed). On a master's first start each one is installed once; a settings flag
//! (`bundled.<name>`) records that it was offered, so removing it is never undone behind the
//! operator's back. `stoker plugin install --bundled` puts them back on purpose.

use std::path::Path;

use rust_embed::RustEmbed;

use super::PackageError;
use super::install::{InstallError, install};
use crate::engine::plugin::MemFiles;
use crate::store::Store;

#[derive(RustEmbed)]
#[folder = "assets/releases/"]
struct Releases;

/// Every bundled package, by folder name, sorted.
pub fn packages() -> Vec<(String, MemFiles)> {
    let mut out: Vec<(String, MemFiles)> = Vec::new();
    let mut paths: Vec<String> = Releases::iter().map(|p| p.to_string()).collect();
    paths.sort();
    for path in paths {
        let Some((top, rest)) = path.split_once('/') else {
            continue;
        };
        let Some(file) = Releases::get(&path) else {
            continue;
        };
        if out.last().is_none_or(|(name, _)| name != top) {
            out.push((top.to_string(), MemFiles::new()));
        }
        if let Some((_, files)) = out.last_mut() {
            // Embedded paths are relative and clean.
            let _ = files.add(rest, file.data.into_owned());
        }
    }
    out
}

/// The settings key that records a bundled package was offered.
pub fn setting_key(name: &str) -> String {
    format!("bundled.{name}")
}

/// Install every bundled package not offered before. Returns what was installed.
pub fn install_on_first_start(store: &Store, data_dir: &Path, now: i64) -> Vec<String> {
    let mut installed = Vec::new();
    for (name, files) in packages() {
        let key = setting_key(&name);
        match store.read(|tx| tx.setting(&key)) {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(package = %name, "cannot read settings: {e}");
                continue;
            }
        }
        let outcome = install(store, data_dir, &files, now);
        let offered = match &outcome {
            Ok(done) => {
                tracing::info!(package = %name, releases = ?done.releases, "installed the bundled release plugin");
                installed.push(name.clone());
                true
            }
            // Already there (installed by hand): nothing to do, ever.
            Err(InstallError::Package(PackageError::Conflict(_))) => true,
            Err(InstallError::Package(PackageError::Store(
                crate::store::StoreError::Conflict(m),
            ))) => {
                tracing::warn!(package = %name, "bundled release not installed: {m}");
                true
            }
            Err(e) => {
                tracing::error!(package = %name, "cannot install the bundled release plugin: {e}");
                false
            }
        };
        if offered && let Err(e) = store.write(|tx| tx.set_setting(&key, "offered")) {
            tracing::warn!(package = %name, "cannot record the bundled install: {e}");
        }
    }
    installed
}
