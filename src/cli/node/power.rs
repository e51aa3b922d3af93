//! `stoker node power on|off|soft-off|cycle|pxe|disk NODE…` and `stoker node bmc
//! show|set|remove NODE`: a node's BMC and power through the API (an operator's token). Power
//! acts on every node given at once (the master bounds how many BMCs it asks at a time) and
//! prints a line per node; the exit code is 1 when any node failed.

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::{Value, json};

use crate::cli::client::{Api, ApiArgs};
use crate::cli::output::Out;
use crate::cli::resolve;

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
pub enum BmcCommand {
    /// Show a node's BMC and its last power reading (never the password)
    Show {
        /// Node id, name, host name or MAC
        node: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Set a node's BMC; the password is read from standard input
    Set {
        /// Node id, name, host name or MAC
        node: String,
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
        api: ApiArgs,
    },
    /// Forget a node's BMC
    Remove {
        /// Node id, name, host name or MAC
        node: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

fn print_bmc(out: &Out, v: &Value) -> anyhow::Result<()> {
    if out.structured() {
        return out.document(v);
    }
    let s = |k: &str| {
        v[k].as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v[k].to_string())
    };
    out.line(&format!(
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
    ))
}

/// `stoker node power VERB NODE…`: one line per node; 1 when any failed.
pub fn power(verb: PowerVerb, nodes: &[String], args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let ids = resolve::nodes(&api, nodes)?;
    let answer = api.post(
        "/api/v1/nodes/power",
        Some(json!({"nodes": ids, "action": verb.action()})),
    )?;
    let results = answer["results"].as_array().cloned().unwrap_or_default();
    let failed = results.iter().any(|r| r["ok"].as_bool() != Some(true));
    if out.structured() {
        out.document(&answer)?;
    } else {
        for r in &results {
            if r["ok"].as_bool() == Some(true) {
                out.line(&format!(
                    "node {}: {} done, power {}",
                    r["node"],
                    verb.action(),
                    r["power_state"].as_str().unwrap_or("unknown")
                ))?;
            } else {
                out.line(&format!(
                    "node {}: {} {}: {}",
                    r["node"],
                    verb.action(),
                    out.paint("failed", "failed"),
                    r["error"].as_str().unwrap_or("?")
                ))?;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `stoker node bmc show|set|remove NODE`.
pub fn bmc(command: BmcCommand) -> anyhow::Result<ExitCode> {
    match command {
        BmcCommand::Show { node, api: args } => {
            let api = Api::new(&args.client)?;
            let id = resolve::node(&api, &node)?;
            let v = api.get(&format!("/api/v1/nodes/{id}/bmc"))?;
            print_bmc(&Out::of(&args.output), &v)?;
        }
        BmcCommand::Set {
            node,
            driver,
            address,
            username,
            keep_password,
            verify_tls,
            api: args,
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
            let api = Api::new(&args.client)?;
            let id = resolve::node(&api, &node)?;
            let v = api.put(&format!("/api/v1/nodes/{id}/bmc"), Some(body))?;
            print_bmc(&Out::of(&args.output), &v)?;
        }
        BmcCommand::Remove { node, api: args } => {
            let api = Api::new(&args.client)?;
            let id = resolve::node(&api, &node)?;
            api.delete(&format!("/api/v1/nodes/{id}/bmc"))?;
            let out = Out::of(&args.output);
            if out.structured() {
                out.document(&json!({"node_id": id, "bmc": null}))?;
            } else {
                out.line(&format!("node {id}: BMC removed"))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
