//! `stoker env assign ENV NODE… --roles a,b` and `stoker env unassign ENV NODE…`: Nailgun's
//! list forms (`POST /clusters/{id}/assignment`, `/unassignment`), so every node given moves or
//! none does; a role the environment does not accept is refused naming it (exit 4).

use std::process::ExitCode;

use serde_json::{Value, json};

use crate::cli::client::{Api, ApiArgs};
use crate::cli::node::show as nodes;
use crate::cli::output::Out;
use crate::cli::resolve;

pub fn assign(
    env: &str,
    refs: &[String],
    roles: &[String],
    args: &ApiArgs,
) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let (id, doc) = resolve::env(&api, env)?;
    let ids = resolve::nodes(&api, refs)?;
    let roles: Vec<&str> = roles
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .collect();
    let body: Vec<Value> = ids
        .iter()
        .map(|n| json!({"id": n, "roles": roles}))
        .collect();
    api.post(
        &format!("/api/v1/clusters/{id}/assignment"),
        Some(Value::Array(body)),
    )?;
    let done = format!(
        "assigned {} to {} as {}",
        list(&ids),
        doc["name"].as_str().unwrap_or("the environment"),
        roles.join(", ")
    );
    members(&api, id, &Out::of(&args.output), &done)
}

pub fn unassign(env: &str, refs: &[String], args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let (id, doc) = resolve::env(&api, env)?;
    let ids = resolve::nodes(&api, refs)?;
    let body: Vec<Value> = ids.iter().map(|n| json!({"id": n})).collect();
    api.post(
        &format!("/api/v1/clusters/{id}/unassignment"),
        Some(Value::Array(body)),
    )?;
    let done = format!(
        "took {} out of {}",
        list(&ids),
        doc["name"].as_str().unwrap_or("the environment")
    );
    members(&api, id, &Out::of(&args.output), &done)
}

/// `node 3, node 4`.
fn list(ids: &[i64]) -> String {
    ids.iter()
        .map(|i| format!("node {i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Say what was done, then the environment's nodes (the document with `-o json|yaml`).
fn members(api: &Api, env: i64, out: &Out, done: &str) -> anyhow::Result<ExitCode> {
    let now = api.get(&format!("/api/v1/clusters/{env}/nodes"))?;
    if out.structured() {
        out.document(&now)?;
    } else {
        out.line(done)?;
        let names = nodes::env_names(api)?;
        out.print_table(&nodes::table(out, &resolve::list(now), &names))?;
    }
    Ok(ExitCode::SUCCESS)
}
