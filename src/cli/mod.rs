//! The command line: one clap `Command` enum, one function per subcommand.
//! The CLI is a client of the daemon's HTTP API or a thin wrapper over the pure engine; it never
//! opens the database while a daemon serves it, but to copy it for `backup` (SQLite's online
//! backup API, which changes no row). `anyhow` is allowed here and in `main` only.
//!
//! Exit codes: [`exit`] (0 success, 1 failure, 2 bad usage or configuration, 3 not found,
//! 4 refused, 5 not authorized, 6 master unreachable).
//!
//! The API commands (`node`, `env`, `deployment`, `user`, `token`) share [`client`] (the
//! master, the token, failures), [`output`] (tables, `-o json|yaml`, colour) and [`resolve`]
//! (names to ids).

mod agent;
mod backup;
mod client;
mod config_args;
mod deployment;
mod env;
pub mod exit;
mod follow;
mod generate;
mod graph;
pub mod memory;
mod node;
pub mod output;
mod plugin;
mod resolve;
mod serve;
mod user;
mod yaql;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use config_args::ConfigArgs;

/// stoker: a lightweight Fuel master in one binary.
#[derive(Debug, Parser)]
#[command(name = "stoker", version, about, long_about = None, after_help = exit::HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the master: dashboard, REST API and agent endpoints.
    Serve {
        #[command(flatten)]
        config: ConfigArgs,
        /// Also start this many simulated nodes that boot, register and deploy over loopback
        /// with the real protocol, in sandboxes under the data directory (a demo without
        /// hardware; their shell commands are recorded, not run)
        #[arg(long, default_value_t = 0)]
        demo_nodes: usize,
    },
    /// Exit 0 when the daemon answers its health endpoint, 1 otherwise (for monitors and
    /// container health checks).
    Healthcheck {
        #[command(flatten)]
        config: ConfigArgs,
        /// Base URL of the daemon; default: derived from `http.listen`.
        #[arg(long)]
        url: Option<String>,
        /// Seconds to wait for an answer.
        #[arg(long, default_value_t = 5)]
        timeout: u64,
    },
    /// Run the node agent: gather the inventory and register with the master.
    Agent(agent::AgentArgs),
    /// Validate, build, install, remove and list plugin packages (releases included).
    Plugin {
        #[command(subcommand)]
        command: plugin::PluginCommand,
    },
    /// Plan deployments from task graphs (per-node order, skips with reasons, cross-node waits)
    Graph {
        #[command(subcommand)]
        command: graph::GraphCommand,
    },
    /// Sign in to a running master and keep the token for the other commands (the password
    /// from standard input or STOKER_PASSWORD)
    Login {
        /// User name
        #[arg(default_value = "admin")]
        user: String,
        #[command(flatten)]
        client: client::ClientArgs,
    },
    /// Manage users: through the API with an admin's token, or `--offline` on a stopped master
    User {
        #[command(subcommand)]
        command: user::UserCommand,
    },
    /// Create, list and revoke personal API tokens
    Token {
        #[command(subcommand)]
        command: user::TokenCommand,
    },
    /// Nodes: list, show, delete, power and BMCs, through the API
    Node {
        #[command(subcommand)]
        command: node::NodeCommand,
    },
    /// Environments: create, assign nodes, settings, plan, deploy (and follow), abort, retry
    Env {
        #[command(subcommand)]
        command: env::EnvCommand,
    },
    /// Deployments: list, show, follow, and the output of a node's steps
    Deployment {
        #[command(subcommand)]
        command: deployment::DeploymentCommand,
    },
    /// Print a shell completion script (install it as the README says)
    Completions { shell: clap_complete::Shell },
    /// Write the man pages (stoker.1 and one per subcommand) into a directory
    Man {
        #[arg(long, value_name = "DIR")]
        dir: std::path::PathBuf,
    },
    /// Back up the master (database, BMC key, TLS identity, plugins) into one file while it
    /// serves
    Backup(backup::BackupArgs),
    /// Restore a backup into the data directory of a stopped master (the current files are
    /// kept aside)
    Restore(backup::RestoreArgs),
    /// Evaluate YAQL expressions (`eval`, or a JSON Lines filter with `--jsonl`).
    Yaql(yaql::YaqlArgs),
    /// Print the version and exit.
    Version,
}

/// Exit code for bad usage or configuration, like clap's own usage errors.
pub const EXIT_USAGE: u8 = exit::USAGE;

/// Turn a subcommand's result into an exit code, printing the error chain on failure; the
/// code says what kind of failure it was ([`exit::code_of`]).
fn report(result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|err| {
        eprintln!("stoker: {err:#}");
        ExitCode::from(exit::code_of(&err))
    })
}

/// The commands that call the master's API: their help (and every subcommand's) ends with
/// the exit codes.
const API_COMMANDS: &[&str] = &["node", "env", "deployment", "login", "user", "token"];

/// The whole command line as clap sees it (for parsing, completions and man pages).
pub fn command() -> clap::Command {
    fn with_codes(cmd: clap::Command) -> clap::Command {
        let subs: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        subs.iter().fold(cmd.after_help(exit::HELP), |cmd, name| {
            cmd.mut_subcommand(name, with_codes)
        })
    }
    API_COMMANDS.iter().fold(Cli::command(), |cmd, name| {
        cmd.mut_subcommand(name, with_codes)
    })
}

/// Parse `std::env::args` and run the chosen subcommand.
pub fn run() -> ExitCode {
    // `stoker yaql --jsonl` is started by drivers once per batch of requests and answers
    // within milliseconds: it skips building the whole command tree (clap's, with every
    // subcommand's help), which would be a third of its start-up.
    let mut args = std::env::args_os().skip(1);
    if let (Some(a), Some(b), None) = (args.next(), args.next(), args.next())
        && a == "yaql"
        && b == "--jsonl"
    {
        return report(yaql::jsonl());
    }
    let cli = match Cli::from_arg_matches(&command().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Serve { config, demo_nodes } => serve::run(&config, demo_nodes),
        Command::Healthcheck {
            config,
            url,
            timeout,
        } => serve::healthcheck(&config, url, timeout),
        Command::Agent(args) => report(agent::run(&args)),
        Command::Plugin { command } => report(plugin::run(command)),
        Command::Graph { command } => report(graph::run(command)),
        Command::Yaql(args) => report(yaql::run(&args)),
        Command::Backup(args) => report(backup::backup(&args)),
        Command::Restore(args) => report(backup::restore(&args)),
        Command::Login { user, client } => report(user::login(&user, &client)),
        Command::User { command } => report(user::run_user(command)),
        Command::Token { command } => report(user::run_token(command)),
        Command::Node { command } => report(node::run(command)),
        Command::Env { command } => report(env::run(command)),
        Command::Deployment { command } => report(deployment::run(command)),
        Command::Completions { shell } => report(generate::completions(shell)),
        Command::Man { dir } => report(generate::man(&dir)),
        Command::Version => {
            println!("stoker {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
    }
}
