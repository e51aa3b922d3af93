//! `stoker plugin validate|build|install|remove|list|sync`. `validate` and `build` work on the
//! local files through the pure engine; the others talk to the running daemon's API
//! (`/api/v1/plugins`), never to its database. `validate` prints like a compiler and exits 1
//! when there are errors.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::client::ClientArgs;
use anyhow::{Context, bail};
use clap::{Subcommand, ValueEnum};
use serde_json::Value;

use crate::engine::plugin::{Level, MemFiles, PackageFiles, check};
use crate::package::hook::{self, Hook};
use crate::package::{archive, bundled};

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Check a plugin directory or built .fp; print findings like a compiler (exit 1 on errors)
    Validate {
        /// Plugin directory or .fp archive
        path: PathBuf,
        /// Output format
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also print info-level findings
        #[arg(long, short)]
        verbose: bool,
    },
    /// Build NAME-VERSION.fp from a plugin directory (byte-identical for the same input),
    /// after running its executable `pre_build_hook` there as fuel-plugin-builder does; top-level
    /// dotfiles (`.git`, `.gitignore`, ...) are left out, as FPB leaves them out
    Build {
        /// Plugin directory
        dir: PathBuf,
        /// Folder to write the archive to (default: the plugin directory)
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Do not run the package's pre_build_hook
        #[arg(long)]
        no_pre_build_hook: bool,
    },
    /// Install a plugin on the running master: a directory, a .fp, or the bundled releases
    Install {
        /// Plugin directory or .fp archive
        #[arg(required_unless_present = "bundled", conflicts_with = "bundled")]
        path: Option<PathBuf>,
        /// Install the release plugins shipped inside stoker
        #[arg(long)]
        bundled: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Remove an installed plugin (and its releases): NAME or NAME@VERSION
    Remove {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List installed plugins
    List {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Re-read every plugin folder under the master's data dir (Fuel's plugins sync)
    Sync {
        #[command(flatten)]
        client: ClientArgs,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(cmd: PluginCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginCommand::Validate {
            path,
            format,
            verbose,
        } => validate(&path, format, verbose),
        PluginCommand::Build {
            dir,
            output,
            no_pre_build_hook,
        } => build(&dir, output.as_deref(), !no_pre_build_hook),
        PluginCommand::Install {
            path,
            bundled,
            client,
        } => install(path.as_deref(), bundled, &client),
        PluginCommand::Remove { name, client } => remove(&name, &client),
        PluginCommand::List { client } => list(&client),
        PluginCommand::Sync { client } => sync(&client),
    }
}

fn validate(path: &Path, format: Format, verbose: bool) -> anyhow::Result<ExitCode> {
    let files = crate::package::open(path)?;
    let report = check(files.as_ref());
    let d = &report.diagnostics;
    let (errors, warnings, infos) = (
        d.count(Level::Error),
        d.count(Level::Warning),
        d.count(Level::Info),
    );
    match format {
        Format::Json => {
            let pkg = &report.package;
            let body = serde_json::json!({
                "path": path.display().to_string(),
                "valid": report.is_valid(),
                "name": pkg.name(),
                "version": pkg.version(),
                "package_version": pkg.package_version.map(|v| v.as_str()),
                "releases": report.releases.iter().map(|r| &r.name).collect::<Vec<_>>(),
                "summary": {"errors": errors, "warnings": warnings, "infos": infos},
                "diagnostics": d.0,
            });
            println!("{}", serde_json::to_string_pretty(&body)?);
        }
        Format::Text => {
            let shown = d.iter().filter(|x| verbose || x.level != Level::Info);
            for diag in shown {
                println!("{}", diag.render());
            }
            let verdict = if report.is_valid() {
                "valid"
            } else {
                "invalid"
            };
            println!(
                "{}: {verdict}: {errors} error(s), {warnings} warning(s), {infos} info(s)",
                path.display()
            );
        }
    }
    Ok(if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Build an archive in memory, drawing a progress bar on a terminal when it takes a while.
fn build_archive(files: &dyn PackageFiles, top: &str) -> anyhow::Result<Vec<u8>> {
    let mtime = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut drawn = false;
    let mut progress = |done: u64, total: u64| {
        if !tty || started.elapsed() < Duration::from_millis(500) || total == 0 {
            return;
        }
        let width = 30u64;
        let filled = (done * width / total) as usize;
        eprint!(
            "\r[{}{}] {:>3}% {} KiB",
            "#".repeat(filled),
            " ".repeat(width as usize - filled.min(width as usize)),
            done * 100 / total,
            done / 1024
        );
        let _ = std::io::stderr().flush();
        drawn = true;
    };
    let bytes = archive::build(files, top, mtime, &mut progress)?;
    if drawn {
        eprintln!();
    }
    Ok(bytes)
}

/// FPB's order: the hook, then the package is read and validated, then packed.
fn build(dir: &Path, output: Option<&Path>, run_hook: bool) -> anyhow::Result<ExitCode> {
    if !dir.is_dir() {
        bail!("{} is not a plugin directory", dir.display());
    }
    if run_hook {
        match hook::run_pre_build_hook(dir) {
            Ok(Hook::Absent) => {}
            Ok(Hook::Ran) => eprintln!("ran {}", dir.join(hook::PRE_BUILD_HOOK).display()),
            Ok(Hook::NotExecutable) => eprintln!(
                "{} is not executable: not run (fuel-plugin-builder skips it too)",
                dir.join(hook::PRE_BUILD_HOOK).display()
            ),
            Err(e) => {
                eprintln!("stoker: {}: {e}", dir.display());
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    let files = crate::package::dir::DirFiles::new(dir)?;
    let report = check(&files);
    for diag in report.diagnostics.iter().filter(|d| d.level != Level::Info) {
        eprintln!("{}", diag.render());
    }
    if !report.is_valid() {
        eprintln!("{}: invalid, not built", dir.display());
        return Ok(ExitCode::FAILURE);
    }
    let (name, version) = (report.package.name(), report.package.version());
    let top = match archive::stem(name, &version) {
        Ok(top) => top,
        Err(e) => {
            eprintln!("{}: {e}; not built", dir.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    let bytes = build_archive(&files, &top)?;
    let out_dir = output.unwrap_or(dir);
    let out = out_dir.join(format!("{top}.fp"));
    let tmp = out.with_extension("fp.tmp");
    std::fs::write(&tmp, &bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &out).with_context(|| format!("cannot write {}", out.display()))?;
    println!("built {} ({} bytes)", out.display(), bytes.len());
    Ok(ExitCode::SUCCESS)
}

fn answer(resp: &mut ureq::http::Response<ureq::Body>) -> anyhow::Result<(u16, Value)> {
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok((status, json))
}

fn print_error(status: u16, body: &Value) {
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| body.to_string(), str::to_string);
    eprintln!("stoker: the master refused ({status}): {message}");
    if let Some(list) = body.get("diagnostics").and_then(Value::as_array) {
        for d in list {
            if let Ok(d) = serde_json::from_value::<crate::engine::plugin::Diagnostic>(d.clone()) {
                eprintln!("{}", d.render());
            }
        }
    }
}

fn upload(client: &ClientArgs, bytes: Vec<u8>, label: &str) -> anyhow::Result<bool> {
    let url = format!("{}/api/v1/plugins", client.base()?);
    let mut resp = client
        .authorized(client.agent()?.post(&url))?
        .header("content-type", "application/gzip")
        .send(&bytes[..])
        .with_context(|| format!("cannot reach the master at {url}"))?;
    let (status, body) = answer(&mut resp)?;
    if status != 201 {
        print_error(status, &body);
        return Ok(false);
    }
    let plugin = &body["plugin"];
    println!(
        "installed {} {}{}",
        plugin["name"].as_str().unwrap_or(label),
        plugin["version"].as_str().unwrap_or(""),
        match body["releases"].as_array() {
            Some(r) if !r.is_empty() => format!(
                " with release(s) {}",
                r.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => String::new(),
        }
    );
    Ok(true)
}

fn install(path: Option<&Path>, bundled: bool, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    if bundled {
        for (name, files) in bundled::packages() {
            let files: MemFiles = files;
            let bytes = build_archive(&files, &name)?;
            ok &= upload(client, bytes, &name)?;
        }
    } else if let Some(path) = path {
        let bytes = if path.is_dir() {
            let files = crate::package::dir::DirFiles::new(path)?;
            let report = check(&files);
            let top = format!("{}-{}", report.package.name(), report.package.version());
            build_archive(&files, &top)?
        } else {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?
        };
        ok = upload(client, bytes, &path.display().to_string())?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// How [`request`] calls the master.
#[derive(Clone, Copy)]
enum Verb {
    Get,
    Post,
    Delete,
}

/// Call the master's `path` without a body; the JSON answer when it is 200, `None` (the
/// error already printed) otherwise.
fn request(client: &ClientArgs, verb: Verb, path: &str) -> anyhow::Result<Option<Value>> {
    let url = format!("{}{path}", client.base()?);
    let agent = client.agent()?;
    let sent = match verb {
        Verb::Get => client.authorized(agent.get(&url))?.call(),
        Verb::Delete => client.authorized(agent.delete(&url))?.call(),
        Verb::Post => client.authorized(agent.post(&url))?.send_empty(),
    };
    let mut resp = sent.with_context(|| format!("cannot reach the master at {url}"))?;
    let (status, body) = answer(&mut resp)?;
    if status != 200 {
        print_error(status, &body);
        return Ok(None);
    }
    Ok(Some(body))
}

fn remove(name: &str, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let Some(body) = request(client, Verb::Delete, &format!("/api/v1/plugins/{name}"))? else {
        return Ok(ExitCode::FAILURE);
    };
    println!(
        "removed {} {}",
        body["name"].as_str().unwrap_or(name),
        body["version"].as_str().unwrap_or("")
    );
    Ok(ExitCode::SUCCESS)
}

fn list(client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let Some(body) = request(client, Verb::Get, "/api/v1/plugins")? else {
        return Ok(ExitCode::FAILURE);
    };
    let rows: Vec<[String; 5]> = body
        .as_array()
        .map(|list| {
            list.iter()
                .map(|p| {
                    let s = |k: &str| p[k].as_str().unwrap_or("").to_string();
                    [
                        s("name"),
                        s("version"),
                        s("package_version"),
                        if p["is_release"] == Value::Bool(true) {
                            "release".to_string()
                        } else {
                            "plugin".to_string()
                        },
                        s("title"),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    if rows.is_empty() {
        println!("no plugin is installed");
        return Ok(ExitCode::SUCCESS);
    }
    let head = ["NAME", "VERSION", "PACKAGE", "KIND", "TITLE"].map(str::to_string);
    let mut widths = [0usize; 5];
    for row in std::iter::once(&head).chain(rows.iter()) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&head).chain(rows.iter()) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

fn sync(client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let Some(body) = request(client, Verb::Post, "/api/v1/plugins/sync")? else {
        return Ok(ExitCode::FAILURE);
    };
    println!("{}", serde_json::to_string_pretty(&body)?);
    Ok(ExitCode::SUCCESS)
}
