//! Nodes and environments as an operator names them: by id (a number always is one), or a
//! node by its name, host name or MAC and an environment by its name. A name that matches
//! nothing is "not found" (exit 3); one that matches several is bad usage (exit 2), listing
//! their ids. Names are looked up in one listing per command, however many are given.

use serde_json::Value;

use super::client::Api;
use super::exit::CliError;

/// The id of each node in `refs`, in order.
pub fn nodes(api: &Api, refs: &[String]) -> anyhow::Result<Vec<i64>> {
    let mut listing: Option<Vec<Value>> = None;
    let mut ids = Vec::with_capacity(refs.len());
    for r in refs {
        if let Some(id) = number(r) {
            ids.push(id);
            continue;
        }
        if listing.is_none() {
            listing = Some(list(api.get("/api/v1/nodes")?));
        }
        let all = listing.as_deref().unwrap_or_default();
        let want = r.to_ascii_lowercase();
        let matches: Vec<i64> = all
            .iter()
            .filter(|n| {
                ["name", "hostname", "mac"]
                    .iter()
                    .any(|k| n[k].as_str().map(str::to_ascii_lowercase) == Some(want.clone()))
            })
            .filter_map(|n| n["id"].as_i64())
            .collect();
        ids.push(one(matches, "node", r)?);
    }
    Ok(ids)
}

/// The id of the node `r` names.
pub fn node(api: &Api, r: &str) -> anyhow::Result<i64> {
    Ok(nodes(api, &[r.to_string()])?[0])
}

/// The environment `r` names: its id and document (`GET /api/v1/clusters/{id}`).
pub fn env(api: &Api, r: &str) -> anyhow::Result<(i64, Value)> {
    if let Some(id) = number(r) {
        let doc = api.get(&format!("/api/v1/clusters/{id}"))?;
        return Ok((id, doc));
    }
    let all = list(api.get("/api/v1/clusters")?);
    let matches: Vec<&Value> = all.iter().filter(|c| c["name"] == r).collect();
    let ids: Vec<i64> = matches.iter().filter_map(|c| c["id"].as_i64()).collect();
    let id = one(ids, "environment", r)?;
    let doc = matches
        .into_iter()
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap_or(Value::Null);
    Ok((id, doc))
}

/// The id of the environment `r` names.
pub fn env_id(api: &Api, r: &str) -> anyhow::Result<i64> {
    match number(r) {
        Some(id) => Ok(id),
        None => Ok(env(api, r)?.0),
    }
}

/// A reference that is a positive number: an id.
fn number(r: &str) -> Option<i64> {
    r.trim().parse::<i64>().ok().filter(|id| *id > 0)
}

/// An API list answer's items.
pub fn list(v: Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items,
        _ => Vec::new(),
    }
}

/// The one id among `matches`, else not found or ambiguous.
fn one(matches: Vec<i64>, what: &str, r: &str) -> anyhow::Result<i64> {
    match matches.as_slice() {
        [id] => Ok(*id),
        [] => Err(CliError::NotFound(format!("no {what} is called {r:?}")).into()),
        many => Err(CliError::Usage(format!(
            "{} {what}s are called {r:?} (ids {}): name one by its id",
            many.len(),
            many.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}
