//! `stoker env …`: environments through the API, as an operator of `fuel2 env` expects them.
//! This file: the commands' shape, `list`, `create`, `show` and `delete`; `assign.rs` puts
//! nodes in and takes them out, `settings.rs` reads and writes settings, `deploy.rs` plans,
//! deploys (optionally following it), aborts and retries. An environment is named by its id or
//! its name ([`crate::cli::resolve`]).

mod assign;
mod deploy;
mod settings;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use comfy_table::Cell;
use serde_json::{Value, json};

use super::client::{Api, ApiArgs};
use super::exit::CliError;
use super::node::show as nodes;
use super::output::{self, Out, cell_text};
use super::resolve;

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// List environments
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Create an environment of a release
    Create {
        name: String,
        /// Release id or name; default: the only deployable release
        #[arg(long)]
        release: Option<String>,
        /// Network segmentation
        #[arg(long, value_parser = ["vlan", "gre", "tun"])]
        net_segment_type: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show an environment: its release, status, nodes and latest deployments
    Show {
        /// Environment id or name
        env: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Delete an environment (its nodes leave it; what they run stays on their disks)
    Delete {
        /// Environment id or name
        env: String,
        /// Power its nodes off through their BMCs (default: the master's bmc.power_off_released)
        #[arg(long)]
        power_off: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Put nodes in an environment with roles (all of them or none)
    Assign {
        /// Environment id or name
        env: String,
        /// Node ids, names, host names or MACs
        #[arg(required = true)]
        nodes: Vec<String>,
        /// Roles, comma-separated (controller,cinder)
        #[arg(long, required = true, value_delimiter = ',')]
        roles: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Take nodes out of an environment (a deployed node is erased at the next deploy)
    Unassign {
        /// Environment id or name
        env: String,
        /// Node ids, names, host names or MACs
        #[arg(required = true)]
        nodes: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Read and change an environment's settings
    Settings {
        #[command(subcommand)]
        command: settings::SettingsCommand,
    },
    /// Print the deployment plan of an environment as it is now (per node, skips with
    /// reasons, cross-node waits)
    Plan {
        /// Environment id or name
        env: String,
        /// Graph type
        #[arg(long, default_value = "default")]
        graph: String,
        /// Print it as a Graphviz graph
        #[arg(long)]
        dot: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Deploy what changed in an environment
    Deploy {
        /// Environment id or name
        env: String,
        /// Follow it to its end: a progress bar per node (a line per change without a
        /// terminal), the failing step's output; exit 0 when done, 1 on error or abort
        #[arg(long)]
        follow: bool,
        /// Record what would run and run nothing
        #[arg(long, conflicts_with_all = ["steps", "follow"])]
        dry_run: bool,
        /// User steps for this deployment (JSON or YAML: a list of {interface, step,
        /// priority, args})
        #[arg(long, value_name = "FILE")]
        steps: Option<PathBuf>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Abort an environment's running deployment (running steps finish and are recorded)
    Abort {
        /// Environment id or name
        env: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Run an environment's last deployment's failed steps again and go on
    Retry {
        /// Environment id or name
        env: String,
        /// Follow it to its end (see `deploy --follow`)
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
}

pub fn run(command: EnvCommand) -> anyhow::Result<ExitCode> {
    match command {
        EnvCommand::List { api } => list(&api),
        EnvCommand::Create {
            name,
            release,
            net_segment_type,
            api,
        } => create(&name, release.as_deref(), net_segment_type, &api),
        EnvCommand::Show { env, api } => show(&env, &api),
        EnvCommand::Delete {
            env,
            power_off,
            api,
        } => delete(&env, power_off, &api),
        EnvCommand::Assign {
            env,
            nodes,
            roles,
            api,
        } => assign::assign(&env, &nodes, &roles, &api),
        EnvCommand::Unassign { env, nodes, api } => assign::unassign(&env, &nodes, &api),
        EnvCommand::Settings { command } => settings::run(command),
        EnvCommand::Plan {
            env,
            graph,
            dot,
            api,
        } => deploy::plan(&env, &graph, dot, &api),
        EnvCommand::Deploy {
            env,
            follow,
            dry_run,
            steps,
            api,
        } => deploy::deploy(&env, follow, dry_run, steps.as_deref(), &api),
        EnvCommand::Abort { env, api } => deploy::abort(&env, &api),
        EnvCommand::Retry { env, follow, api } => deploy::retry(&env, follow, &api),
    }
}

/// Release ids to `name (version)`.
fn release_names(api: &Api) -> anyhow::Result<std::collections::BTreeMap<i64, String>> {
    Ok(resolve::list(api.get("/api/v1/releases")?)
        .iter()
        .filter_map(|r| {
            Some((
                r["id"].as_i64()?,
                format!(
                    "{} ({})",
                    r["name"].as_str()?,
                    r["version"].as_str().unwrap_or("")
                ),
            ))
        })
        .collect())
}

fn list(args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let envs = api.get("/api/v1/clusters")?;
    if out.structured() {
        out.document(&envs)?;
        return Ok(ExitCode::SUCCESS);
    }
    let releases = release_names(&api)?;
    let mut counts = std::collections::BTreeMap::<i64, usize>::new();
    for n in resolve::list(api.get("/api/v1/nodes")?) {
        if let Some(c) = n["cluster"].as_i64() {
            *counts.entry(c).or_default() += 1;
        }
    }
    let mut t = out.table(&["ID", "NAME", "STATUS", "RELEASE", "NODES", "CREATED"]);
    for e in resolve::list(envs) {
        let id = e["id"].as_i64().unwrap_or(0);
        let release = e["release_id"].as_i64().unwrap_or(0);
        t.add_row(vec![
            Cell::new(id),
            Cell::new(cell_text(&e["name"])),
            out.status(e["status"].as_str().unwrap_or("?")),
            Cell::new(
                releases
                    .get(&release)
                    .cloned()
                    .unwrap_or(release.to_string()),
            ),
            Cell::new(counts.get(&id).copied().unwrap_or(0)),
            Cell::new(output::time(e["created_at"].as_i64())),
        ]);
    }
    out.print_table(&t)?;
    Ok(ExitCode::SUCCESS)
}

/// The release `r` names (id, name, or `name version`), or the only deployable one.
fn release_id(api: &Api, r: Option<&str>) -> anyhow::Result<i64> {
    let all = resolve::list(api.get("/api/v1/releases")?);
    let listed = || {
        all.iter()
            .map(|r| {
                format!(
                    "{} {} ({})",
                    r["id"],
                    cell_text(&r["name"]),
                    cell_text(&r["version"])
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let matches: Vec<i64> = match r {
        Some(r) => all
            .iter()
            .filter(|x| {
                let name = x["name"].as_str().unwrap_or("");
                let version = x["version"].as_str().unwrap_or("");
                x["id"].as_i64().map(|i| i.to_string()).as_deref() == Some(r)
                    || name == r
                    || format!("{name} {version}") == r
            })
            .filter_map(|x| x["id"].as_i64())
            .collect(),
        None => all
            .iter()
            .filter(|x| x["is_deployable"] != false)
            .filter_map(|x| x["id"].as_i64())
            .collect(),
    };
    match (matches.as_slice(), r) {
        ([id], _) => Ok(*id),
        ([], Some(r)) => Err(CliError::NotFound(format!(
            "no release is called {r:?} (installed: {})",
            listed()
        ))
        .into()),
        ([], None) => Err(CliError::Refused(
            "no deployable release is installed (install one with `stoker plugin install`)"
                .to_string(),
        )
        .into()),
        (_, _) => Err(CliError::Usage(format!(
            "say which release with --release (installed: {})",
            listed()
        ))
        .into()),
    }
}

fn create(
    name: &str,
    release: Option<&str>,
    net_segment_type: Option<String>,
    args: &ApiArgs,
) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let release = release_id(&api, release)?;
    let mut body = json!({"name": name, "release_id": release});
    if let Some(t) = net_segment_type {
        body["net_segment_type"] = json!(t);
    }
    let env = api.post("/api/v1/clusters", Some(body))?;
    if out.structured() {
        out.document(&env)?;
    } else {
        out.line(&format!(
            "environment {} created (id {})",
            cell_text(&env["name"]),
            env["id"]
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn show(env: &str, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let (id, mut doc) = resolve::env(&api, env)?;
    let members = api.get(&format!("/api/v1/clusters/{id}/nodes"))?;
    let deployments = api.get(&format!("/api/v1/deployments?cluster_id={id}"))?;
    if out.structured() {
        doc["nodes"] = members;
        doc["deployments"] = deployments;
        out.document(&doc)?;
        return Ok(ExitCode::SUCCESS);
    }
    let release = doc["release_id"].as_i64().unwrap_or(0);
    let releases = release_names(&api)?;
    let mut text = output::fields(&[
        ("ID", id.to_string()),
        ("Name", cell_text(&doc["name"])),
        (
            "Status",
            out.paint(
                &cell_text(&doc["status"]),
                doc["status"].as_str().unwrap_or(""),
            ),
        ),
        (
            "Release",
            format!(
                "{} (id {release})",
                releases.get(&release).cloned().unwrap_or_default()
            ),
        ),
        ("Segmentation", cell_text(&doc["net_segment_type"])),
        ("Created", output::time(doc["created_at"].as_i64())),
    ]);
    let members = resolve::list(members);
    text.push_str(&format!("\nNodes ({}):\n", members.len()));
    out.print(&text)?;
    let names = std::collections::BTreeMap::from([(id, cell_text(&doc["name"]))]);
    if !members.is_empty() {
        out.print_table(&nodes::table(&out, &members, &names))?;
    }
    let deployments = resolve::list(deployments);
    out.print(&format!("\nDeployments ({}):\n", deployments.len()))?;
    if !deployments.is_empty() {
        let recent: Vec<Value> = deployments.into_iter().take(5).collect();
        out.print_table(&super::deployment::table(&out, &recent, &names))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn delete(env: &str, power_off: bool, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::env_id(&api, env)?;
    let path = if power_off {
        format!("/api/v1/clusters/{id}?power_off=1")
    } else {
        format!("/api/v1/clusters/{id}")
    };
    let task = api.delete(&path)?;
    if out.structured() {
        out.document(&task)?;
        return Ok(ExitCode::SUCCESS);
    }
    out.line(task["message"].as_str().unwrap_or("environment deleted"))?;
    let mut failed = false;
    for r in task["result"]["power_off"].as_array().into_iter().flatten() {
        if r["ok"].as_bool() == Some(true) {
            out.line(&format!("node {}: powered off", r["node"]))?;
        } else {
            failed = true;
            out.line(&format!(
                "node {}: power off {}: {}",
                r["node"],
                out.paint("failed", "failed"),
                cell_text(&r["error"])
            ))?;
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
