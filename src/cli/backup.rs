//! `stoker backup FILE` and `stoker restore FILE`: the data directory comes from the same
//! configuration as `serve` (`--data-dir`, `--config`, `STOKER_DATA_DIR`); what a backup holds
//! and what a restore checks is [`crate::backup`]'s.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::ConfigArgs;

/// `stoker backup`'s arguments.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// The backup to write (a gzipped tar); refused if it exists, unless --force
    pub file: PathBuf,
    /// Replace FILE if it exists
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// `stoker restore`'s arguments.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The backup to restore, as `stoker backup` wrote it
    pub file: PathBuf,
    #[command(flatten)]
    pub config: ConfigArgs,
}

fn data_dir(config: &ConfigArgs) -> anyhow::Result<PathBuf> {
    Ok(config
        .layers()
        .and_then(|l| l.resolve())
        .context("cannot resolve the configuration to find the data directory")?
        .data_dir)
}

/// `stoker backup FILE`
pub fn backup(args: &BackupArgs) -> anyhow::Result<ExitCode> {
    let dir = data_dir(&args.config)?;
    let written = crate::backup::backup(&dir, &args.file, args.force, crate::clock::now())?;
    let m = &written.manifest;
    println!(
        "backed up {} (schema {}, {} members, {} bytes) to {}",
        dir.display(),
        m.schema,
        m.members.len(),
        written.bytes,
        args.file.display()
    );
    if written.restarts > 0 {
        println!(
            "the database copy started over {} time(s) while the daemon wrote",
            written.restarts
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `stoker restore FILE`
pub fn restore(args: &RestoreArgs) -> anyhow::Result<ExitCode> {
    let dir = data_dir(&args.config)?;
    let restored = crate::backup::restore(&dir, &args.file, crate::clock::now())?;
    let m = &restored.manifest;
    println!(
        "restored {} into {} (written by stoker {} at schema {})",
        args.file.display(),
        dir.display(),
        m.stoker_version,
        m.schema,
    );
    let latest = crate::store::migrations::latest();
    if m.schema < latest {
        println!("`stoker serve` migrates it to schema {latest} when it starts");
    }
    for path in &restored.set_aside {
        println!("kept the previous {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
