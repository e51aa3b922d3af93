//! `stoker deployment list|show|follow|logs`: deployments through the API. `list` is
//! `GET /api/v1/deployments[?cluster_id=]` (steps finished of all it had, the runs of nodes
//! deleted since counted as they were left and said so); `show` a deployment's runs per node (status,
//! attempt, start, duration, exit code) from `GET /api/v1/deployments/{id}/runs?brief=1`, or
//! with `-o json|yaml` the document of `GET /api/v1/deployments/{id}`; `follow` (and
//! `show --follow`) hands it to [`crate::cli::follow`]; `logs NODE [TASK]` prints the output
//! tails the master kept of a node's runs in its latest deployment (or `--deployment ID`).

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Subcommand;
use comfy_table::Cell;
use serde_json::Value;

use super::client::{Api, ApiArgs};
use super::exit::CliError;
use super::follow;
use super::node::show::env_names;
use super::output::{self, Out, cell_text};
use super::resolve;

#[derive(Debug, Subcommand)]
pub enum DeploymentCommand {
    /// List deployments, newest first
    List {
        /// Only this environment's (id or name)
        #[arg(long)]
        env: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show a deployment: its runs per node with status, attempt, start, duration, exit code
    Show {
        id: i64,
        /// Follow it to its end instead (see `stoker deployment follow`)
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Follow a deployment to its end: a progress bar per node (a line per change without a
    /// terminal), the failing step's output; exit 0 when done, 1 on error or abort
    Follow {
        id: i64,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Print the output a node's steps left (their kept tail), in its latest deployment
    Logs {
        /// Node id, name, host name or MAC
        node: String,
        /// Only this graph task or step (keystone, deploy.configure)
        task: Option<String>,
        /// In this deployment instead of the node's latest
        #[arg(long)]
        deployment: Option<i64>,
        #[command(flatten)]
        api: ApiArgs,
    },
}

pub fn run(command: DeploymentCommand) -> anyhow::Result<ExitCode> {
    match command {
        DeploymentCommand::List { env, api } => list(env.as_deref(), &api),
        DeploymentCommand::Show { id, follow, api } => show(id, follow, &api),
        DeploymentCommand::Follow { id, api } => {
            follow::follow(&Api::new(&api.client)?, id, &Out::of(&api.output))
        }
        DeploymentCommand::Logs {
            node,
            task,
            deployment,
            api,
        } => logs(&node, task.as_deref(), deployment, &api),
    }
}

/// Node ids to their host names (`node-3` until an operator names it), for labels.
pub fn node_labels(api: &Api) -> anyhow::Result<BTreeMap<i64, String>> {
    Ok(resolve::list(api.get("/api/v1/nodes")?)
        .iter()
        .filter_map(|n| Some((n["id"].as_i64()?, n["hostname"].as_str()?.to_string())))
        .collect())
}

/// How a run's node reads: its host name, `node-N` for one gone, `master` for none (the
/// master's own runs: stages).
pub fn node_label(labels: &BTreeMap<i64, String>, node: &Value) -> String {
    match node.as_i64() {
        Some(id) => labels
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("node-{id}")),
        None => "master".to_string(),
    }
}

/// A run's name: its graph task, else `interface.step`.
pub fn run_name(run: &Value) -> String {
    match run["task"].as_str() {
        Some(t) => t.to_string(),
        None => format!(
            "{}.{}",
            run["interface"].as_str().unwrap_or("?"),
            run["step"].as_str().unwrap_or("?")
        ),
    }
}

/// A table of deployment documents (`envs`: environment names, empty to show ids).
pub fn table(out: &Out, deployments: &[Value], envs: &BTreeMap<i64, String>) -> comfy_table::Table {
    let mut t = out.table(&[
        "ID", "ENV", "KIND", "STATUS", "STEPS", "FAILED", "CREATED", "TOOK",
    ]);
    for d in deployments {
        let env = d["cluster_id"].as_i64().unwrap_or(0);
        let runs = &d["runs"];
        let n = |k: &str| runs[k].as_u64().unwrap_or(0);
        let finished = n("ok") + n("failed") + n("skipped");
        // The runs of nodes deleted since are counted as they were left, and said so.
        let steps = match n("of_deleted_nodes") {
            0 => format!("{finished}/{}", n("total")),
            gone => format!("{finished}/{} ({gone} of deleted nodes)", n("total")),
        };
        t.add_row(vec![
            Cell::new(cell_text(&d["id"])),
            Cell::new(envs.get(&env).cloned().unwrap_or(env.to_string())),
            Cell::new(cell_text(&d["name"])),
            out.status(d["status"].as_str().unwrap_or("?")),
            Cell::new(steps),
            Cell::new(n("failed")),
            Cell::new(output::time(d["created_at"].as_i64())),
            Cell::new(output::took(
                d["created_at"].as_i64(),
                d["finished_at"].as_i64(),
            )),
        ]);
    }
    t
}

fn list(env: Option<&str>, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let path = match env {
        Some(e) => format!(
            "/api/v1/deployments?cluster_id={}",
            resolve::env_id(&api, e)?
        ),
        None => "/api/v1/deployments".to_string(),
    };
    let all = api.get(&path)?;
    if out.structured() {
        out.document(&all)?;
    } else {
        let envs = env_names(&api)?;
        out.print_table(&table(&out, &resolve::list(all), &envs))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn show(id: i64, follow: bool, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    if follow {
        return follow::follow(&api, id, &out);
    }
    if out.structured() {
        out.document(&api.all_pages(&format!("/api/v1/deployments/{id}"), "steps")?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let doc = api.runs(&format!("/api/v1/deployments/{id}/runs?brief=1"))?;
    let d = &doc["deployment"];
    let env = d["cluster_id"].as_i64().unwrap_or(0);
    let envs = env_names(&api)?;
    let labels = node_labels(&api)?;
    let counts = &d["runs"];
    let n = |k: &str| counts[k].as_u64().unwrap_or(0);
    let mut rows = vec![
        (
            "Deployment",
            format!(
                "{id} ({}, graph {})",
                cell_text(&d["name"]),
                cell_text(&d["graph_type"])
            ),
        ),
        (
            "Environment",
            format!("{} ({env})", envs.get(&env).cloned().unwrap_or_default()),
        ),
        (
            "Status",
            out.paint(&cell_text(&d["status"]), d["status"].as_str().unwrap_or("")),
        ),
        ("Created", output::time(d["created_at"].as_i64())),
        (
            "Finished",
            match d["finished_at"].as_i64() {
                Some(f) => format!(
                    "{} (took {})",
                    output::time(Some(f)),
                    output::took(d["created_at"].as_i64(), Some(f))
                ),
                None => "-".to_string(),
            },
        ),
        (
            "Steps",
            format!(
                "{} total: {} ok, {} failed, {} skipped, {} running, {} pending{}",
                n("total"),
                n("ok"),
                n("failed"),
                n("skipped"),
                n("running"),
                n("pending"),
                match n("of_deleted_nodes") {
                    0 => String::new(),
                    gone => format!("; {gone} of them of deleted nodes, not listed below"),
                }
            ),
        ),
    ];
    if let Some(m) = d["message"].as_str() {
        rows.push(("Waiting", m.to_string()));
    }
    out.print(&format!("{}\n", output::fields(&rows)))?;
    let mut t = out.table(&[
        "NODE", "STEP", "STATUS", "ATTEMPT", "STARTED", "DURATION", "EXIT", "DETAIL",
    ]);
    for r in resolve::list(doc["runs"].clone()) {
        t.add_row(vec![
            Cell::new(node_label(&labels, &r["node_id"])),
            Cell::new(run_name(&r)),
            out.status(r["status"].as_str().unwrap_or("?")),
            Cell::new(cell_text(&r["attempt"])),
            Cell::new(output::time(r["started_at"].as_i64())),
            Cell::new(if r["status"] == "running" || r["finished_at"].is_i64() {
                output::took(r["started_at"].as_i64(), r["finished_at"].as_i64())
            } else {
                "-".to_string()
            }),
            Cell::new(cell_text(&r["exit_code"])),
            Cell::new(
                r["error"]
                    .as_str()
                    .or(r["reason"].as_str())
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or(""),
            ),
        ]);
    }
    out.print_table(&t)?;
    Ok(ExitCode::SUCCESS)
}

fn logs(
    node: &str,
    task: Option<&str>,
    deployment: Option<i64>,
    args: &ApiArgs,
) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::node(&api, node)?;
    let dep = match deployment {
        Some(d) => d,
        None => api.get(&format!("/api/v1/nodes/{id}"))?["driver_internal_info"]["deployment"]
            .as_i64()
            .ok_or_else(|| {
                CliError::NotFound(format!("node {node} has taken part in no deployment"))
            })?,
    };
    let mut path = format!("/api/v1/deployments/{dep}/runs?node_id={id}");
    if let Some(t) = task {
        path.push_str(&format!("&task={}", super::client::encode(t)));
    }
    let doc = api.runs(&path)?;
    let runs = resolve::list(doc["runs"].clone());
    if let Some(t) = task
        && runs.is_empty()
    {
        return Err(CliError::NotFound(format!(
            "node {node} ran no step or task {t} in deployment {dep}"
        ))
        .into());
    }
    if out.structured() {
        out.document(&doc)?;
        return Ok(ExitCode::SUCCESS);
    }
    let labels = node_labels(&api)?;
    let one = task.is_some() && runs.len() == 1;
    let mut text = String::new();
    for r in &runs {
        let output_tail = r["output_tail"].as_str().unwrap_or("");
        let error = r["error"].as_str();
        if !one && output_tail.is_empty() && error.is_none() {
            continue;
        }
        if !one {
            let status = r["status"].as_str().unwrap_or("?");
            text.push_str(&format!(
                "==> {} {} ({}, attempt {}, exit code {}) <==\n",
                node_label(&labels, &r["node_id"]),
                run_name(r),
                out.paint(status, status),
                cell_text(&r["attempt"]),
                cell_text(&r["exit_code"]),
            ));
        }
        text.push_str(output_tail);
        if !output_tail.is_empty() && !output_tail.ends_with('\n') {
            text.push('\n');
        }
        if let Some(e) = error {
            if one {
                eprintln!("stoker: {} failed: {e}", run_name(r));
            } else {
                text.push_str(&format!("error: {e}\n"));
            }
        }
        if !one {
            text.push('\n');
        }
    }
    out.print(&text)?;
    Ok(ExitCode::SUCCESS)
}
