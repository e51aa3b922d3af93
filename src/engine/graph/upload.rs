//! A deployment graph uploaded through Nailgun's API (`fuel2 graph upload`), checked before it
//! is stored: the body is Nailgun's graph object (`tasks`, and optionally `name`,
//! `node_filter`, `on_success`, `on_error`, `on_stop`; nothing else, as Nailgun's schema);
//! every task is read by the same [`Task::parse`] a package's tasks go through, so a task no
//! package could hold is refused here too; ids are unique; the tasks' own `requires` /
//! `required_for` edges have no cycle ([`super::check`]). Every problem names its field
//! (`tasks[3].type`). Stricter than Nailgun, which stored any `type`. Pure.
//!
//! Nailgun's merge of the graphs an environment deploys is here too ([`merge_by_id`]): later
//! lists override earlier tasks of the same id, in Nailgun's order.

use std::collections::HashSet;

use serde_json::{Map, Value as J};

use super::check;
use super::task::{Source, Task};
use crate::model::FieldError;

/// At most this many tasks in one uploaded graph (the bundled release's largest has ~300).
pub const MAX_TASKS: usize = 5_000;

/// The graph-level keys Nailgun's schema allows besides `tasks` and `name`.
pub const METADATA_KEYS: [&str; 4] = ["node_filter", "on_success", "on_error", "on_stop"];

/// A checked upload.
#[derive(Debug, Clone, PartialEq)]
pub struct Upload {
    pub name: Option<String>,
    /// The metadata keys given (an object).
    pub metadata: J,
    /// The tasks as given (a list of mappings).
    pub tasks: J,
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Check an upload's body (already JSON). `graph_type` names the graph in messages. Every
/// problem found is returned, each naming its field.
pub fn parse(graph_type: &str, body: &J) -> Result<Upload, Vec<FieldError>> {
    let Some(obj) = body.as_object() else {
        return Err(vec![problem(
            "(body)",
            "a deployment graph is an object with `tasks` (fuel2 sends a YAML list as \
             {\"tasks\": [...]})",
        )]);
    };
    let mut errors = Vec::new();
    for key in obj.keys() {
        if key != "tasks" && key != "name" && !METADATA_KEYS.contains(&key.as_str()) {
            errors.push(problem(
                key.as_str(),
                format!(
                    "unknown key; a deployment graph has tasks, name, {}",
                    METADATA_KEYS.join(", ")
                ),
            ));
        }
    }
    let name = match obj.get("name") {
        None | Some(J::Null) => None,
        Some(J::String(s)) => Some(s.clone()),
        Some(other) => {
            errors.push(problem("name", format!("must be a string, not {other}")));
            None
        }
    };
    if let Some(J::String(_)) | None = obj.get("node_filter") {
    } else {
        errors.push(problem("node_filter", "must be a string"));
    }
    for key in ["on_success", "on_error", "on_stop"] {
        if let Some(v) = obj.get(key)
            && !v.is_object()
        {
            errors.push(problem(key, "must be an object"));
        }
    }
    let metadata: Map<String, J> = METADATA_KEYS
        .iter()
        .filter_map(|k| obj.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    let tasks = match obj.get("tasks") {
        None | Some(J::Null) => J::Array(Vec::new()),
        Some(J::Array(items)) if items.len() > MAX_TASKS => {
            errors.push(problem(
                "tasks",
                format!("{} tasks; a graph holds at most {MAX_TASKS}", items.len()),
            ));
            J::Array(Vec::new())
        }
        Some(J::Array(items)) => {
            errors.extend(check_tasks(graph_type, items));
            J::Array(items.clone())
        }
        Some(other) => {
            errors.push(problem("tasks", format!("must be a list, not {other}")));
            J::Array(Vec::new())
        }
    };
    if errors.is_empty() {
        Ok(Upload {
            name,
            metadata: J::Object(metadata),
            tasks,
        })
    } else {
        Err(errors)
    }
}

fn check_tasks(graph_type: &str, items: &[J]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut sourced = Vec::with_capacity(items.len());
    for (i, t) in items.iter().enumerate() {
        let at = format!("tasks[{i}]");
        if !t.is_object() {
            errors.push(problem(at, format!("a task must be a mapping, not {t}")));
            continue;
        }
        match t.get("id") {
            Some(J::String(s)) if !s.is_empty() => {}
            Some(J::String(_)) | None | Some(J::Null) => {
                errors.push(problem(format!("{at}.id"), "the task has no `id`"));
                continue;
            }
            Some(other) => {
                errors.push(problem(
                    format!("{at}.id"),
                    format!("`id` must be a string, not {other}"),
                ));
                continue;
            }
        }
        let source = Source::new("upload", &format!("{graph_type} {at}"), 0);
        match Task::parse(t.clone(), source.clone(), i) {
            Ok(task) => {
                if !seen.insert(task.id.clone()) {
                    errors.push(problem(
                        format!("{at}.id"),
                        format!("task {} is defined twice in this graph", task.id),
                    ));
                }
                if let Some(ty) = task.ty {
                    let params = task.field("parameters");
                    for p in ty.required_parameters() {
                        let present = params.and_then(|v| v.get(*p)).is_some()
                            || params.is_some_and(|v| super::task::yaql_of(v).is_some());
                        if !present {
                            errors.push(problem(
                                format!("{at}.parameters.{p}"),
                                format!("task {}: a {ty} task needs parameters.{p}", task.id),
                            ));
                        }
                    }
                }
                sourced.push((t.clone(), source));
            }
            // The id was checked above: what is left is the type.
            Err(e) => errors.push(problem(format!("{at}.type"), e.message)),
        }
    }
    if errors.is_empty() {
        for p in check::check(graph_type, &sourced, false) {
            errors.push(problem(
                p.source.file.replace(&format!("{graph_type} "), ""),
                p.message,
            ));
        }
    }
    errors
}

/// Nailgun's `Cluster._merge_tasks_lists`: `lists` in increasing priority; a task of a later
/// list replaces every earlier task of its id. The result lists the last list's tasks first,
/// then the earlier lists' that were not replaced, as Nailgun's does.
pub fn merge_by_id(lists: &[&[J]]) -> Vec<J> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    for list in lists.iter().rev() {
        for t in list.iter() {
            let id = match t.get("id") {
                Some(J::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            if seen.insert(id) {
                out.push(t.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(r: Result<Upload, Vec<FieldError>>) -> Vec<String> {
        r.unwrap_err().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_good_graph_is_kept_as_given() {
        let body = json!({"name": "g", "node_filter": "$.x", "tasks": [
            {"id": "a", "type": "shell", "roles": ["/.*/"], "parameters": {"cmd": "true"}},
            {"id": "b", "type": "puppet", "requires": ["a"], "version": "2.1.0",
             "parameters": {"puppet_manifest": "x.pp"}},
        ]});
        let u = parse("custom", &body).unwrap();
        assert_eq!(u.name.as_deref(), Some("g"));
        assert_eq!(u.metadata, json!({"node_filter": "$.x"}));
        assert_eq!(u.tasks, body["tasks"]);
        assert_eq!(parse("custom", &json!({})).unwrap().tasks, json!([]));
    }

    #[test]
    fn every_refusal_names_its_field() {
        let body = json!({"extra": 1, "tasks": [
            "x",
            {"type": "shell"},
            {"id": 3, "type": "shell"},
            {"id": "t", "type": "bogus"},
            {"id": "u", "type": "shell"},
            {"id": "v", "type": "stage"},
            {"id": "v", "type": "stage"},
        ]});
        assert_eq!(
            fields(parse("g", &body)),
            [
                "extra",
                "tasks[0]",
                "tasks[1].id",
                "tasks[2].id",
                "tasks[3].type",
                "tasks[4].parameters.cmd",
                "tasks[6].id"
            ]
        );
        let e = parse("g", &json!({"tasks": [{"id": "t", "type": "bogus"}]})).unwrap_err();
        assert!(
            e[0].message.contains("task t: unknown type \"bogus\""),
            "{e:?}"
        );
        assert_eq!(fields(parse("g", &json!([]))), ["(body)"]);
        assert_eq!(fields(parse("g", &json!({"tasks": {}}))), ["tasks"]);
        let many: Vec<J> = (0..=MAX_TASKS)
            .map(|i| json!({"id": format!("t{i}"), "type": "stage"}))
            .collect();
        assert_eq!(fields(parse("g", &json!({ "tasks": many }))), ["tasks"]);
    }

    #[test]
    fn a_cycle_is_refused() {
        let body = json!({"tasks": [
            {"id": "a", "type": "stage", "requires": ["b"]},
            {"id": "b", "type": "stage", "requires": ["a"]},
        ]});
        let e = parse("g", &body).unwrap_err();
        assert!(e[0].message.contains("cycle"), "{e:?}");
    }

    #[test]
    fn later_lists_win_and_come_first() {
        let release = [json!({"id": "a", "v": 1}), json!({"id": "b", "v": 1})];
        let plugins = [json!({"id": "c", "v": 2})];
        let cluster = [json!({"id": "b", "v": 3})];
        let merged = merge_by_id(&[&release, &plugins, &cluster]);
        assert_eq!(
            merged,
            [
                json!({"id": "b", "v": 3}),
                json!({"id": "c", "v": 2}),
                json!({"id": "a", "v": 1})
            ]
        );
    }
}
