//! `stoker node power on|off|soft-off|cycle|pxe|disk NODE…` and `stoker node bmc
//! show|set|remove NODE`: a node's BMC and power through the API (an operator's token). Power
//! acts on every node given at once (the master bounds how many BMCs it asks at a time) and
//! prints a line per node; the exit code is 1 when any node failed.

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::{Value, json};

use super::client::ClientArgs;
use super::user::call;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PowerVerb {
    On,
    Off,
    /// Ask the OS to shut down (ACPI)
    SoftOff,
    /// Power-cycle (or power on when off)
    Cycle,
    /// Boot from the network once, then power on or cycle
    Pxe,
    /// Boot from the disk once, then power on or cycle
    Disk,
}

impl PowerVerb {
    fn action(self) -> &'static str {
        match self {
            PowerVerb::On => "on",
            PowerVerb::Off => "off",
            PowerVerb::SoftOff => "soft_off",
            PowerVerb::Cycle => "reboot",
            PowerVerb::Pxe => "pxe",
            PowerVerb::Disk => "disk",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Power nodes on or off, power-cycle them, or boot them once from the network or disk
    Power {
        verb: PowerVerb,
        /// Node ids
        #[arg(required = true)]
        nodes: Vec<i64>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// A node's BMC
    Bmc {
        #[command(subcommand)]
        command: BmcCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum BmcCommand {
    /// Show a node's BMC and its last power reading (never the password)
    Show {
        node: i64,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Set a node's BMC; the password is read from standard input
    Set {
        node: i64,
        /// redfish or ipmi
        #[arg(long)]
        driver: String,
        /// Redfish: https://host[:port][/redfish/v1/Systems/ID]; IPMI: host[:port]
        #[arg(long)]
        address: String,
        #[arg(long)]
        username: String,
        /// Keep the stored password instead of reading one from standard input
        #[arg(long)]
        keep_password: bool,
        /// Check the BMC's TLS certificate (Redfish)
        #[arg(long)]
        verify_tls: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Forget a node's BMC
    Remove {
        node: i64,
        #[command(flatten)]
        client: ClientArgs,
    },
}

fn show(v: &Value) {
    let s = |k: &str| {
        v[k].as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v[k].to_string())
    };
    println!(
        "node {}: {} {} as {} ({}), power {}{}",
        v["node_id"],
        s("driver"),
        s("address"),
        s("username"),
        if v["password_set"].as_bool() == Some(true) {
            "password set"
        } else {
            "no password"
        },
        v["power_state"].as_str().unwrap_or("unknown"),
        v["power_error"]
            .as_str()
            .map(|e| format!(", unreachable: {e}"))
            .unwrap_or_default()
    );
}

pub fn run(command: NodeCommand) -> anyhow::Result<ExitCode> {
    match command {
        NodeCommand::Power {
            verb,
            nodes,
            client,
        } => {
            let out = call(
                &client,
                "POST",
                "/api/v1/nodes/power",
                Some(json!({"nodes": nodes, "action": verb.action()})),
            )?;
            let mut failed = false;
            for r in out["results"].as_array().into_iter().flatten() {
                if r["ok"].as_bool() == Some(true) {
                    println!(
                        "node {}: {} done, power {}",
                        r["node"],
                        verb.action(),
                        r["power_state"].as_str().unwrap_or("unknown")
                    );
                } else {
                    failed = true;
                    println!(
                        "node {}: {} failed: {}",
                        r["node"],
                        verb.action(),
                        r["error"].as_str().unwrap_or("?")
                    );
                }
            }
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        NodeCommand::Bmc { command } => match command {
            BmcCommand::Show { node, client } => {
                show(&call(
                    &client,
                    "GET",
                    &format!("/api/v1/nodes/{node}/bmc"),
                    None,
                )?);
                Ok(ExitCode::SUCCESS)
            }
            BmcCommand::Set {
                node,
                driver,
                address,
                username,
                keep_password,
                verify_tls,
                client,
            } => {
                let mut body = json!({"driver": driver, "address": address, "username": username, "verify_tls": verify_tls});
                if !keep_password {
                    let mut line = String::new();
                    std::io::stdin()
                        .lock()
                        .read_line(&mut line)
                        .context("cannot read the password from standard input")?;
                    let password = line.trim_end_matches(['\n', '\r']);
                    if password.is_empty() {
                        bail!("no password on standard input (or pass --keep-password)");
                    }
                    body["password"] = password.into();
                }
                show(&call(
                    &client,
                    "PUT",
                    &format!("/api/v1/nodes/{node}/bmc"),
                    Some(body),
                )?);
                Ok(ExitCode::SUCCESS)
            }
            BmcCommand::Remove { node, client } => {
                call(
                    &client,
                    "DELETE",
                    &format!("/api/v1/nodes/{node}/bmc"),
                    None,
                )?;
                println!("node {node}: BMC removed");
                Ok(ExitCode::SUCCESS)
            }
        },
    }
}
