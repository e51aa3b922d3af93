//! `stoker node …`: the nodes through the API. `list`, `show` and `delete` read and remove
//! them (`show.rs`); `power` and `bmc` act on their BMCs (`power.rs`). A node is named by its
//! id, name, host name or MAC ([`crate::cli::resolve`]).

mod power;
pub mod show;

use std::process::ExitCode;

use clap::Subcommand;

use super::client::ApiArgs;
pub use power::{BmcCommand, PowerVerb};

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List nodes: every one, an environment's, or those in no environment
    List {
        /// Only the nodes of this environment (id or name)
        #[arg(long)]
        env: Option<String>,
        /// Only the nodes in no environment
        #[arg(long, conflicts_with = "env")]
        unassigned: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show a node: its hardware, environment and roles, and where its deployment stands
    Show {
        /// Node id, name, host name or MAC
        node: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Delete nodes (a node that boots again is discovered anew)
    Delete {
        /// Node ids, names, host names or MACs
        #[arg(required = true)]
        nodes: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Power nodes on or off, power-cycle them, or boot them once from the network or disk
    Power {
        verb: PowerVerb,
        /// Node ids, names, host names or MACs
        #[arg(required = true)]
        nodes: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// A node's BMC
    Bmc {
        #[command(subcommand)]
        command: BmcCommand,
    },
}

pub fn run(command: NodeCommand) -> anyhow::Result<ExitCode> {
    match command {
        NodeCommand::List {
            env,
            unassigned,
            api,
        } => show::list(env.as_deref(), unassigned, &api),
        NodeCommand::Show { node, api } => show::show(&node, &api),
        NodeCommand::Delete { nodes, api } => show::delete(&nodes, &api),
        NodeCommand::Power { verb, nodes, api } => power::power(verb, &nodes, &api),
        NodeCommand::Bmc { command } => power::bmc(command),
    }
}
