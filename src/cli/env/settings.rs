//! `stoker env settings get ENV [KEY]` and `stoker env settings set ENV [--file F] [KEY=VALUE…]
//! [--unset KEY…]`. Settings are one JSON object (`GET/PUT /clusters/{id}/settings`); a key is
//! its dotted path (`access.user`, `my_plugin.metadata.enabled`). `get` prints a KEY/VALUE
//! table of the leaves, or the document (`-o json|yaml`, which `set --file` takes back). `set`
//! starts from the file's document (replacing the settings) or the current settings, applies
//! each `KEY=VALUE` (VALUE is JSON when it reads as JSON, `true`, `3`, `["a"]`, else a string)
//! and `--unset`, and sends the whole object; the master checks every key against the release
//! and plugins and refuses naming each bad one (exit 4), writing nothing. What changed is
//! printed key by key.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use comfy_table::Cell;
use serde_json::{Map, Value};

use crate::cli::client::{Api, ApiArgs};
use crate::cli::exit::CliError;
use crate::cli::output::Out;
use crate::cli::resolve;

#[derive(Debug, Subcommand)]
pub enum SettingsCommand {
    /// Print an environment's settings (one key's with KEY)
    Get {
        /// Environment id or name
        env: String,
        /// A dotted key (access.user): only its value
        key: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Change an environment's settings: from a file (JSON or YAML, replacing them), or key
    /// by key
    Set {
        /// Environment id or name
        env: String,
        /// KEY=VALUE pairs; VALUE is JSON when it reads as JSON (true, 3, ["a"]), else a string
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
        /// A settings document (JSON or YAML, `-` for standard input) replacing the current one
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Remove a key (repeatable)
        #[arg(long, value_name = "KEY")]
        unset: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
}

pub fn run(command: SettingsCommand) -> anyhow::Result<ExitCode> {
    match command {
        SettingsCommand::Get { env, key, api } => get(&env, key.as_deref(), &api),
        SettingsCommand::Set {
            env,
            pairs,
            file,
            unset,
            api,
        } => set(&env, &pairs, file.as_deref(), &unset, &api),
    }
}

/// The leaves of `v` under `prefix` as (dotted key, value); an empty object is a leaf.
pub fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, child, out);
            }
        }
        // No settings at all: no leaf.
        Value::Object(_) if prefix.is_empty() => {}
        other => out.push((prefix.to_string(), other.clone())),
    }
}

/// The value at dotted `key`.
fn lookup<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(v, |at, part| at.get(part))
}

fn get(env: &str, key: Option<&str>, args: &ApiArgs) -> anyhow::Result<ExitCode> {
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::env_id(&api, env)?;
    let all = api.get(&format!("/api/v1/clusters/{id}/settings"))?;
    let shown = match key {
        Some(k) => lookup(&all, k)
            .cloned()
            .ok_or_else(|| CliError::NotFound(format!("environment {env} has no setting {k}")))?,
        None => all,
    };
    if out.structured() {
        out.document(&shown)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut leaves = Vec::new();
    flatten(key.unwrap_or(""), &shown, &mut leaves);
    if leaves.is_empty() {
        out.line("no settings: the release's defaults apply")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = out.table(&["KEY", "VALUE"]);
    for (k, v) in leaves {
        t.add_row(vec![Cell::new(k), Cell::new(v.to_string())]);
    }
    out.print_table(&t)?;
    Ok(ExitCode::SUCCESS)
}

/// A `KEY=VALUE` argument: the key's path and the value (JSON, else a string).
fn pair(raw: &str) -> Result<(Vec<String>, Value), CliError> {
    let (key, value) = raw.split_once('=').ok_or_else(|| {
        CliError::Usage(format!("{raw:?}: expected KEY=VALUE (access.user=admin)"))
    })?;
    let path = path(key)?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
    Ok((path, value))
}

/// A dotted key's parts, none empty.
fn path(key: &str) -> Result<Vec<String>, CliError> {
    let parts: Vec<String> = key.trim().split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(CliError::Usage(format!(
            "{key:?}: a key is names joined by dots (access.user)"
        )));
    }
    Ok(parts)
}

/// Set `value` at `path` in `doc`, making the objects on the way.
fn put(doc: &mut Value, path: &[String], value: Value) -> Result<(), CliError> {
    let mut at = doc;
    for (i, part) in path.iter().enumerate() {
        let Value::Object(map) = at else {
            return Err(CliError::Usage(format!(
                "{}: {} is not an object",
                path.join("."),
                path[..i].join(".")
            )));
        };
        if i + 1 == path.len() {
            map.insert(part.clone(), value);
            return Ok(());
        }
        at = map
            .entry(part.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    Ok(())
}

/// Remove `path` from `doc`; whether it was there.
fn remove(doc: &mut Value, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut at = doc;
    for part in parents {
        match at.get_mut(part) {
            Some(next) => at = next,
            None => return false,
        }
    }
    at.as_object_mut().is_some_and(|m| m.remove(last).is_some())
}

/// A settings document from `file` (`-`: standard input), JSON or YAML.
fn read_document(file: &std::path::Path) -> anyhow::Result<Value> {
    let text = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the settings from standard input")?;
        s
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
    };
    let doc: Value = serde_saphyr::from_str(&text)
        .map_err(|e| CliError::Usage(format!("{}: not JSON or YAML: {e}", file.display())))?;
    if !doc.is_object() {
        return Err(CliError::Usage(format!(
            "{}: the settings are an object (KEY: VALUE ...)",
            file.display()
        ))
        .into());
    }
    Ok(doc)
}

/// What changed from `before` to `after`, a line per key.
fn changes(before: &Value, after: &Value) -> Vec<String> {
    let (mut old, mut new) = (Vec::new(), Vec::new());
    flatten("", before, &mut old);
    flatten("", after, &mut new);
    let old: std::collections::BTreeMap<String, Value> = old.into_iter().collect();
    let new: std::collections::BTreeMap<String, Value> = new.into_iter().collect();
    let mut lines = Vec::new();
    for (k, v) in &new {
        match old.get(k) {
            Some(o) if o == v => {}
            Some(o) => lines.push(format!("  {k}: {o} -> {v}")),
            None => lines.push(format!("  {k}: {v} (new)")),
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        lines.push(format!("  {k}: removed"));
    }
    lines
}

fn set(
    env: &str,
    pairs: &[String],
    file: Option<&std::path::Path>,
    unset: &[String],
    args: &ApiArgs,
) -> anyhow::Result<ExitCode> {
    if file.is_none() && pairs.is_empty() && unset.is_empty() {
        return Err(CliError::Usage(
            "nothing to set: give KEY=VALUE pairs, --unset KEY or --file FILE".to_string(),
        )
        .into());
    }
    // Check every argument before asking the master anything.
    let pairs = pairs
        .iter()
        .map(|p| pair(p))
        .collect::<Result<Vec<_>, _>>()?;
    let unset = unset
        .iter()
        .map(|k| path(k))
        .collect::<Result<Vec<_>, _>>()?;
    let from_file = file.map(read_document).transpose()?;
    let api = Api::new(&args.client)?;
    let out = Out::of(&args.output);
    let id = resolve::env_id(&api, env)?;
    let path_of = format!("/api/v1/clusters/{id}/settings");
    let before = api.get(&path_of)?;
    let mut doc = from_file.unwrap_or_else(|| before.clone());
    for (p, v) in pairs {
        put(&mut doc, &p, v)?;
    }
    for p in &unset {
        if !remove(&mut doc, p) {
            return Err(CliError::NotFound(format!(
                "environment {env} has no setting {}",
                p.join(".")
            ))
            .into());
        }
    }
    let after = api.put(&path_of, Some(doc))?;
    if out.structured() {
        out.document(&after)?;
        return Ok(ExitCode::SUCCESS);
    }
    let lines = changes(&before, &after);
    if lines.is_empty() {
        out.line("settings unchanged")?;
    } else {
        out.line(&format!("settings of environment {env} changed:"))?;
        out.print(&format!("{}\n", lines.join("\n")))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pairs_set_nested_keys_with_json_or_string_values() {
        let mut doc = json!({"access": {"user": "admin"}});
        for raw in [
            "access.user=ops",
            "debug=true",
            "nova.quota=[\"a\"]",
            "x.y.z=3",
        ] {
            let (p, v) = pair(raw).unwrap();
            put(&mut doc, &p, v).unwrap();
        }
        assert_eq!(
            doc,
            json!({"access": {"user": "ops"}, "debug": true, "nova": {"quota": ["a"]},
                   "x": {"y": {"z": 3}}})
        );
        assert!(pair("novalue").is_err());
        assert!(pair("a..b=1").is_err());
        let (p, v) = pair("access.user.name=1").unwrap();
        assert!(put(&mut doc, &p, v).is_err(), "access.user is a string");
        assert!(remove(&mut doc, &path("x.y").unwrap()));
        assert!(!remove(&mut doc, &path("x.y").unwrap()));
        let (_, v) = pair("k=").unwrap();
        assert_eq!(v, json!(""));
    }

    #[test]
    fn changes_are_listed_key_by_key() {
        let before = json!({"a": 1, "b": {"c": "x"}, "gone": true});
        let after = json!({"a": 2, "b": {"c": "x"}, "new": {}});
        assert_eq!(
            changes(&before, &after),
            ["  a: 1 -> 2", "  new: {} (new)", "  gone: removed"]
        );
        assert_eq!(lookup(&before, "b.c"), Some(&json!("x")));
    }
}
