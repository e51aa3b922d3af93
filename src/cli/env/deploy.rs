//! `stoker env plan|deploy|abort|retry ENV`: the plan as text (`GET /clusters/{id}/plan`), a
//! Deploy (`POST /clusters/{id}/deploy` with optional user steps; `--dry-run` is Nailgun's
//! `PUT /clusters/{id}/changes?dry_run=1`, which records what would run), the running
//! deployment aborted (its chain of graphs stopped), the last one retried; `--follow` hands
//! the deployment to [`crate::cli::follow`].

use std::process::ExitCode;

use anyhow::Context;
use comfy_table::Cell;
use serde_json::{Value, json};

use crate::cli::client::{Api, ApiArgs, encode};
use crate::cli::deployment;
use crate::cli::exit::CliError;
use crate::cli::follow;
use crate::cli::output::{Out, cell_text};
use crate::cli::resolve;

pub fn plan(env: &str, graph: &str, dot: bool, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::env_id(&api, env)?;
    let graph = encode(graph);
    if out.structured() && !dot {
        let plan = api.get(&format!(
            "/api/v1/clusters/{id}/plan?graph={graph}&format=json"
        ))?;
        out.document(&plan)?;
    } else {
        let format = if dot { "dot" } else { "text" };
        let text = api.get_text(&format!(
            "/api/v1/clusters/{id}/plan?graph={graph}&format={format}"
        ))?;
        out.print(&text)?;
        if !text.ends_with('\n') {
            out.print("\n")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// User steps from a JSON or YAML file: a list, or `{"steps": [...]}`.
fn read_steps(path: &std::path::Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let doc: Value = serde_saphyr::from_str(&text)
        .map_err(|e| CliError::Usage(format!("{}: not JSON or YAML: {e}", path.display())))?;
    match doc {
        Value::Array(_) => Ok(doc),
        Value::Object(mut o) if o.get("steps").is_some_and(Value::is_array) => {
            Ok(o.remove("steps").unwrap_or_default())
        }
        _ => Err(CliError::Usage(format!(
            "{}: expected a list of steps ({{interface, step, priority, args}})",
            path.display()
        ))
        .into()),
    }
}

pub fn deploy(
    env: &str,
    follow: bool,
    dry_run: bool,
    steps: Option<&std::path::Path>,
    args: &ApiArgs,
) -> anyhow::Result<ExitCode> {
    let steps = steps.map(read_steps).transpose()?;
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::env_id(&api, env)?;
    if dry_run {
        return dry(&api, &out, id);
    }
    let body = steps.map(|s| json!({ "steps": s }));
    let started = api.post(&format!("/api/v1/clusters/{id}/deploy"), body)?;
    let dep = started["id"]
        .as_i64()
        .context("the master's answer has no deployment id")?;
    started_or_follow(&api, &out, &started, dep, follow, "started")
}

/// Say a deployment started (or was retried), or follow it.
fn started_or_follow(
    api: &Api,
    out: &Out,
    doc: &Value,
    dep: i64,
    follow: bool,
    what: &str,
) -> anyhow::Result<ExitCode> {
    if follow {
        return follow::follow(api, dep, out);
    }
    if out.structured() {
        out.document(doc)?;
    } else {
        out.line(&format!(
            "deployment {dep} {what}: {} steps (follow it with `stoker deployment follow {dep}`)",
            doc["runs"]["total"]
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--dry-run`: what would run, per node, recorded and not run.
fn dry(api: &Api, out: &Out, env: i64) -> anyhow::Result<ExitCode> {
    let tx = api.put(&format!("/api/v1/clusters/{env}/changes?dry_run=1"), None)?;
    let Some(dep) = tx["id"].as_i64() else {
        // Nothing recorded (an environment without nodes): the transaction says why.
        if out.structured() {
            out.document(&tx)?;
        } else {
            out.line(&format!("dry run: {}", cell_text(&tx["message"])))?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    let runs = api.runs(&format!("/api/v1/deployments/{dep}/runs?brief=1"))?;
    if out.structured() {
        out.document(&runs)?;
        return Ok(ExitCode::SUCCESS);
    }
    let labels = deployment::node_labels(api)?;
    let list = resolve::list(runs["runs"].clone());
    let skipped = list.iter().filter(|r| r["status"] == "skipped").count();
    out.line(&format!(
        "dry run (deployment {dep}): {} steps would run, {skipped} skipped; nothing ran",
        list.len() - skipped
    ))?;
    let mut t = out.table(&["NODE", "STEP", "STATUS", "REASON"]);
    for r in &list {
        t.add_row(vec![
            Cell::new(deployment::node_label(&labels, &r["node_id"])),
            Cell::new(deployment::run_name(r)),
            out.status(r["status"].as_str().unwrap_or("?")),
            Cell::new(cell_text(&r["reason"])),
        ]);
    }
    out.print_table(&t)?;
    Ok(ExitCode::SUCCESS)
}

/// The environment's deployments, newest first.
fn deployments(api: &Api, env: i64) -> anyhow::Result<Vec<Value>> {
    Ok(resolve::list(
        api.get(&format!("/api/v1/deployments?cluster_id={env}"))?,
    ))
}

pub fn abort(env: &str, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::env_id(&api, env)?;
    let all = deployments(&api, id)?;
    let doc = if let Some(d) = all.iter().find(|d| d["status"] == "running") {
        api.post(&format!("/api/v1/deployments/{}/abort", d["id"]), None)?
    } else if all.iter().any(|d| d["status"] == crate::store::CHAINING) {
        // A chain of graphs between two of them: stop the chain.
        api.put(&format!("/api/v1/clusters/{id}/stop_deployment"), None)?
    } else {
        return Err(
            CliError::Refused(format!("environment {env} has no running deployment")).into(),
        );
    };
    if out.structured() {
        out.document(&doc)?;
    } else {
        out.line(&format!(
            "deployment {} aborted (running steps finish and are recorded; `stoker env retry {env}` goes on)",
            doc["id"]
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn retry(env: &str, follow: bool, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::env_id(&api, env)?;
    let last = deployments(&api, id)?
        .into_iter()
        .find(|d| d["name"] != "verify_networks" && d["status"] != "dry_run")
        .ok_or_else(|| CliError::NotFound(format!("environment {env} has no deployment")))?;
    let dep = last["id"].as_i64().unwrap_or(0);
    let doc = api.post(&format!("/api/v1/deployments/{dep}/retry"), None)?;
    started_or_follow(&api, &out, &doc, dep, follow, "retried")
}
