//! `stoker node list|show|delete`: the node documents of `GET /api/v1/nodes[/{id}]` as a
//! table, as details, or as they are (`-o json|yaml`), and `DELETE /api/v1/nodes/{id}`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use comfy_table::Cell;
use serde_json::{Value, json};

use crate::cli::client::{Api, ApiArgs};
use crate::cli::output::{self, Out, cell_text};
use crate::cli::resolve;

/// Environment ids to names, for tables.
pub fn env_names(api: &Api) -> anyhow::Result<BTreeMap<i64, String>> {
    Ok(resolve::list(api.get("/api/v1/clusters")?)
        .iter()
        .filter_map(|c| Some((c["id"].as_i64()?, c["name"].as_str()?.to_string())))
        .collect())
}

/// A node's status, with its error type when in error (`error (deploy)`).
pub fn status_of(n: &Value) -> String {
    let status = n["status"].as_str().unwrap_or("?");
    match n["error_type"].as_str() {
        Some(t) if status == "error" => format!("error ({t})"),
        _ => status.to_string(),
    }
}

/// A table of node documents.
pub fn table(out: &Out, nodes: &[Value], envs: &BTreeMap<i64, String>) -> comfy_table::Table {
    let mut t = out.table(&[
        "ID", "NAME", "HOSTNAME", "STATUS", "ENV", "ROLES", "IP", "MAC", "ONLINE",
    ]);
    for n in nodes {
        let env = n["cluster"].as_i64().map_or("-".to_string(), |c| {
            envs.get(&c).cloned().unwrap_or(c.to_string())
        });
        let status = status_of(n);
        let online = if n["online"].as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        };
        t.add_row(vec![
            Cell::new(cell_text(&n["id"])),
            Cell::new(cell_text(&n["name"])),
            Cell::new(cell_text(&n["hostname"])),
            out.status(&status),
            Cell::new(env),
            Cell::new(cell_text(&n["assigned_roles"])),
            Cell::new(cell_text(&n["ip"])),
            Cell::new(cell_text(&n["mac"])),
            Cell::new(online),
        ]);
    }
    t
}

pub fn list(env: Option<&str>, unassigned: bool, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let path = match (env, unassigned) {
        (Some(e), _) => format!("/api/v1/nodes?cluster_id={}", resolve::env_id(&api, e)?),
        (None, true) => "/api/v1/nodes?cluster_id=".to_string(),
        (None, false) => "/api/v1/nodes".to_string(),
    };
    let nodes = api.get(&path)?;
    if out.structured() {
        out.document(&nodes)?;
    } else {
        let envs = env_names(&api)?;
        out.print_table(&table(&out, &resolve::list(nodes), &envs))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The hardware of a node's inventory in one line.
fn hardware(inv: &Value) -> String {
    let system = format!(
        "{} {}",
        inv["system"]["vendor"].as_str().unwrap_or(""),
        inv["system"]["product"].as_str().unwrap_or("")
    );
    let disks: Vec<String> = inv["disks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            format!(
                "{} {}",
                d["name"].as_str().unwrap_or("?"),
                output::bytes(d["size_bytes"].as_u64().unwrap_or(0))
            )
        })
        .collect();
    format!(
        "{}, {} CPUs, {} memory, disks: {}",
        system.trim(),
        inv["cpu"]["count"],
        output::bytes(inv["memory_bytes"].as_u64().unwrap_or(0)),
        if disks.is_empty() {
            "none".to_string()
        } else {
            disks.join(", ")
        }
    )
}

pub fn show(node: &str, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::node(&api, node)?;
    let n = api.get(&format!("/api/v1/nodes/{id}"))?;
    if out.structured() {
        out.document(&n)?;
        return Ok(ExitCode::SUCCESS);
    }
    let env = match n["cluster"].as_i64() {
        Some(c) => {
            let name = env_names(&api)?.get(&c).cloned().unwrap_or_default();
            format!("{name} ({c})")
        }
        None => "-".to_string(),
    };
    let pending = cell_text(&n["pending_roles"]);
    let roles = match (cell_text(&n["roles"]).as_str(), pending.as_str()) {
        (_, "") | (_, "-") => cell_text(&n["assigned_roles"]),
        ("" | "-", p) => format!("{p} (pending)"),
        (r, p) => format!("{r} (pending: {p})"),
    };
    let online = if n["online"].as_bool() == Some(true) {
        "yes"
    } else {
        "no"
    };
    let mut rows = vec![
        ("ID", cell_text(&n["id"])),
        ("Name", cell_text(&n["name"])),
        ("Hostname", cell_text(&n["hostname"])),
        (
            "Status",
            out.paint(&status_of(&n), n["status"].as_str().unwrap_or("")),
        ),
        ("Provision state", cell_text(&n["provision_state"])),
        ("Environment", env),
        ("Roles", if roles.is_empty() { "-".into() } else { roles }),
        ("MAC", cell_text(&n["mac"])),
        ("IP", cell_text(&n["ip"])),
        (
            "Online",
            format!(
                "{online} (last seen {})",
                output::time(n["last_seen_at"].as_i64())
            ),
        ),
        ("Hardware", hardware(&n["inventory"])),
    ];
    let step = &n["deploy_step"];
    if step.is_object() {
        let name = step["task"].as_str().map_or_else(
            || {
                format!(
                    "{}.{}",
                    step["interface"].as_str().unwrap_or("?"),
                    step["step"].as_str().unwrap_or("?")
                )
            },
            str::to_string,
        );
        rows.push((
            "Running",
            format!(
                "{name} (attempt {}, for {})",
                step["attempt"],
                output::took(step["started_at"].as_i64(), None)
            ),
        ));
    }
    let err = &n["last_error"];
    if err.is_object() {
        let name = err["task"]
            .as_str()
            .unwrap_or(err["step"].as_str().unwrap_or("?"));
        rows.push((
            "Last error",
            format!(
                "{name} {}: {} (exit code {}, {})",
                out.paint("failed", "failed"),
                err["error"].as_str().unwrap_or("-"),
                cell_text(&err["exit_code"]),
                output::time(err["finished_at"].as_i64())
            ),
        ));
    }
    let mut text = output::fields(&rows);
    if err.is_object() {
        text.push_str(&output::tail(
            err["output_tail"].as_str().unwrap_or(""),
            20,
            "  | ",
        ));
    }
    out.print(&text)?;
    Ok(ExitCode::SUCCESS)
}

pub fn delete(nodes: &[String], args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let ids = resolve::nodes(&api, nodes)?;
    let mut deleted = Vec::new();
    for id in ids {
        api.delete(&format!("/api/v1/nodes/{id}"))?;
        if !out.structured() {
            out.line(&format!("node {id} deleted"))?;
        }
        deleted.push(id);
    }
    if out.structured() {
        out.document(&json!({ "deleted": deleted }))?;
    }
    Ok(ExitCode::SUCCESS)
}
