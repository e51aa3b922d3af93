//! The command line: one clap `Command` enum, one function per subcommand.
//! The CLI is a client of the daemon's HTTP API or a thin wrapper over the pure engine; it never
//! opens the database while a daemon serves it. `anyhow` is allowed here and in `main` only.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// stoker: a lightweight Fuel master in one binary.
#[derive(Debug, Parser)]
#[command(name = "stoker", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the version and exit.
    Version,
}

/// Parse `std::env::args` and run the chosen subcommand.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("stoker {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
    }
}
