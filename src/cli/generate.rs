//! `stoker completions SHELL` and `stoker man --dir DIR`: shell completions (clap_complete)
//! and man pages (clap_mangen: `stoker.1` and one page per subcommand, `stoker-env-deploy.1`),
//! both made from the one clap definition, so they always match the binary that wrote them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

/// Write `shell`'s completion script for `stoker` to standard output.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut cmd = super::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "stoker", &mut script);
    super::output::Out::new(super::output::Format::Table)
        .print(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

/// Write the man pages into `dir` (made if missing); the files written, sorted.
pub fn man_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    fn walk(cmd: clap::Command, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            walk(sub, dir, out)?;
        }
        out.push(clap_mangen::Man::new(cmd).generate_to(dir)?);
        Ok(())
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cmd = super::command().disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    walk(cmd, dir, &mut written).with_context(|| format!("cannot write into {}", dir.display()))?;
    written.sort();
    Ok(written)
}

/// `stoker man --dir DIR`: the pages, and a line saying where they went.
pub fn man(dir: &Path) -> anyhow::Result<ExitCode> {
    let written = man_pages(dir)?;
    println!("{} man pages written to {}", written.len(), dir.display());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_gets_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let written = man_pages(dir.path()).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for page in [
            "stoker.1",
            "stoker-env.1",
            "stoker-env-deploy.1",
            "stoker-env-settings-set.1",
            "stoker-deployment-logs.1",
            "stoker-node-list.1",
        ] {
            assert!(names.iter().any(|n| n == page), "{page} in {names:?}");
        }
        let main = std::fs::read_to_string(dir.path().join("stoker.1")).unwrap();
        assert!(main.contains("Exit codes"), "{main}");
    }
}
