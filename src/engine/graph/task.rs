//! The task model: one deployment task as read from a graph file, with every field Fuel knew
//! (`id`, `type`, `version`, `role`/`roles`/`groups`/`tags`, `requires`, `required_for`,
//! `cross-depends`, `cross-depended-by`, `condition`, `parameters` with `strategy`, `tasks`,
//! `fault_tolerance`, `refresh_on`, `reexecute_on`, `stage`, `fail_on_error`) and where it came
//! from (origin, file, line). Fields stay JSON until they are evaluated per node, because any of
//! them but `id` may hold a `{yaql_exp: ...}` mapping. Unknown keys are kept (Nailgun's
//! `_custom`). Pure: it parses values it is given and must not evaluate anything.

use std::fmt;
use std::sync::Arc;

use serde_json::Value as J;

/// Every task type Nailgun's orchestrator knew (`consts.ORCHESTRATOR_TASK_TYPES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskType {
    Puppet,
    Shell,
    UploadFile,
    Sync,
    CopyFiles,
    Reboot,
    MasterShell,
    MoveToBootstrap,
    EraseNode,
    /// A role group: membership (`tasks:`) and fault tolerance; never executed.
    Group,
    /// A synchronisation point on the sync node (`deploy_start` ...); never executed.
    Stage,
    /// No action, edges kept. Also what a task with a false condition becomes.
    Skipped,
    /// A legacy enum value Fuel kept and never used; planned like `skipped`.
    Role,
}

impl TaskType {
    pub const ALL: [TaskType; 13] = [
        TaskType::Puppet,
        TaskType::Shell,
        TaskType::UploadFile,
        TaskType::Sync,
        TaskType::CopyFiles,
        TaskType::Reboot,
        TaskType::MasterShell,
        TaskType::MoveToBootstrap,
        TaskType::EraseNode,
        TaskType::Group,
        TaskType::Stage,
        TaskType::Skipped,
        TaskType::Role,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskType::Puppet => "puppet",
            TaskType::Shell => "shell",
            TaskType::UploadFile => "upload_file",
            TaskType::Sync => "sync",
            TaskType::CopyFiles => "copy_files",
            TaskType::Reboot => "reboot",
            TaskType::MasterShell => "master_shell",
            TaskType::MoveToBootstrap => "move_to_bootstrap",
            TaskType::EraseNode => "erase_node",
            TaskType::Group => "group",
            TaskType::Stage => "stage",
            TaskType::Skipped => "skipped",
            TaskType::Role => "role",
        }
    }

    pub fn parse(s: &str) -> Option<TaskType> {
        TaskType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether the orchestrator runs something for it (stage, group, skipped and role do not).
    pub fn is_action(self) -> bool {
        !matches!(
            self,
            TaskType::Group | TaskType::Stage | TaskType::Skipped | TaskType::Role
        )
    }

    /// The parameters a type requires (Astute fails without them).
    pub fn required_parameters(self) -> &'static [&'static str] {
        match self {
            TaskType::Puppet => &["puppet_manifest"],
            TaskType::Shell | TaskType::MasterShell => &["cmd"],
            TaskType::UploadFile => &["path", "data"],
            TaskType::Sync => &["src", "dst"],
            TaskType::CopyFiles => &["files"],
            TaskType::MoveToBootstrap => &["provisioning_info"],
            _ => &[],
        }
    }
}

impl fmt::Display for TaskType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a task was written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Source {
    /// `release <name>`, or the plugin's name.
    pub origin: Arc<str>,
    /// Path inside the release or plugin (or a generated-task note).
    pub file: Arc<str>,
    /// 1-based; 0 when unknown.
    pub line: u32,
}

impl Source {
    pub fn new(origin: &str, file: &str, line: u32) -> Source {
        Source {
            origin: Arc::from(origin),
            file: Arc::from(file),
            line,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{} ({})", self.file, self.line, self.origin)
        } else {
            write!(f, "{} ({})", self.file, self.origin)
        }
    }
}

/// A task as read, before it is placed on nodes.
#[derive(Debug, Clone)]
pub struct Task {
    pub id: String,
    /// `None` when `type` is itself a YAQL field (evaluated per node).
    pub ty: Option<TaskType>,
    pub version: Option<String>,
    /// The node selector: `tags`, else `roles`, else `role`, else `groups` (Fuel's precedence).
    pub roles: Option<J>,
    /// Which key `roles` came from.
    pub roles_key: &'static str,
    /// Group members (`type: group`).
    pub tasks: Vec<String>,
    /// The whole task as written (every field, YAQL mappings included).
    pub raw: J,
    /// Whether any field but `id` holds a `yaql_exp` mapping.
    pub has_yaql: bool,
    pub source: Source,
    /// Position in the merged graph (deterministic tie-breaker for ordering).
    pub index: usize,
}

/// Why a task cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct TaskError {
    pub at: String,
    pub message: String,
}

/// Whether a value is a YAQL field: a mapping with the key `yaql_exp`.
pub fn yaql_of(v: &J) -> Option<&J> {
    v.as_object().and_then(|o| o.get("yaql_exp"))
}

/// Whether `v` holds a YAQL field at any depth.
pub fn contains_yaql(v: &J) -> bool {
    match v {
        J::Object(o) => o.contains_key("yaql_exp") || o.values().any(contains_yaql),
        J::Array(a) => a.iter().any(contains_yaql),
        _ => false,
    }
}

/// A list of names from a field: a string is one name, a list keeps its strings.
pub fn names(v: Option<&J>) -> Vec<String> {
    match v {
        Some(J::String(s)) => vec![s.clone()],
        Some(J::Array(items)) => items
            .iter()
            .filter_map(|i| match i {
                J::String(s) => Some(s.clone()),
                J::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl Task {
    /// Read one task. `index` is its place in the merged graph.
    pub fn parse(raw: J, source: Source, index: usize) -> Result<Task, TaskError> {
        let err = |message: String| TaskError {
            at: source.to_string(),
            message,
        };
        let Some(obj) = raw.as_object() else {
            return Err(err(format!("a task must be a mapping, not {raw}")));
        };
        let id = match obj.get("id") {
            Some(J::String(s)) if !s.is_empty() => s.clone(),
            Some(J::Number(n)) => n.to_string(),
            Some(other) if yaql_of(other).is_some() => {
                return Err(err("`id` cannot be a YAQL field".to_string()));
            }
            _ => return Err(err("the task has no `id`".to_string())),
        };
        let err = |message: String| TaskError {
            at: source.to_string(),
            message: format!("task {id}: {message}"),
        };
        let ty = match obj.get("type") {
            Some(J::String(s)) => Some(TaskType::parse(s).ok_or_else(|| {
                err(format!(
                    "unknown type {s:?}; known types: {}",
                    TaskType::ALL.map(TaskType::as_str).join(", ")
                ))
            })?),
            Some(v) if yaql_of(v).is_some() => None,
            None => return Err(err("the task has no `type`".to_string())),
            Some(other) => return Err(err(format!("`type` must be a string, not {other}"))),
        };
        let version = match obj.get("version") {
            Some(J::String(s)) => Some(s.clone()),
            Some(J::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let (roles_key, roles) = ["tags", "roles", "role", "groups"]
            .into_iter()
            .find_map(|k| obj.get(k).filter(|v| !v.is_null()).map(|v| (k, v.clone())))
            .map_or(("", None), |(k, v)| (k, Some(v)));
        let tasks = names(obj.get("tasks"));
        let has_yaql = obj.iter().any(|(k, v)| k != "id" && contains_yaql(v));
        Ok(Task {
            id,
            ty,
            version,
            roles,
            roles_key,
            tasks,
            has_yaql,
            raw,
            source,
            index,
        })
    }

    /// A field of the task as written.
    pub fn field(&self, key: &str) -> Option<&J> {
        self.raw.get(key)
    }

    pub fn is_group(&self) -> bool {
        self.ty == Some(TaskType::Group)
    }

    pub fn is_stage(&self) -> bool {
        self.ty == Some(TaskType::Stage)
    }

    /// `fail_on_error`, default true.
    pub fn fail_on_error(&self) -> bool {
        self.raw
            .get("fail_on_error")
            .and_then(J::as_bool)
            .unwrap_or(true)
    }

    /// `refresh_on` resource names.
    pub fn refresh_on(&self) -> Vec<String> {
        names(self.raw.get("refresh_on"))
    }

    /// `reexecute_on` events.
    pub fn reexecute_on(&self) -> Vec<String> {
        names(self.raw.get("reexecute_on"))
    }

    /// `fault_tolerance` as written (int, `"N%"` or negative).
    pub fn fault_tolerance(&self) -> Option<&J> {
        self.raw.get("fault_tolerance").filter(|v| !v.is_null())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn src() -> Source {
        Source::new("release r", "tasks.yaml", 3)
    }

    #[test]
    fn every_type_round_trips() {
        for t in TaskType::ALL {
            assert_eq!(TaskType::parse(t.as_str()), Some(t));
        }
        assert!(TaskType::Puppet.is_action() && !TaskType::Stage.is_action());
        assert_eq!(TaskType::UploadFile.required_parameters(), ["path", "data"]);
    }

    #[test]
    fn selector_precedence_is_tags_roles_role_groups() {
        let t = Task::parse(
            json!({"id": "a", "type": "puppet", "groups": ["g"], "role": ["r"], "tags": ["t"]}),
            src(),
            0,
        )
        .unwrap();
        assert_eq!((t.roles_key, t.roles), ("tags", Some(json!(["t"]))));
        let t = Task::parse(
            json!({"id": "a", "type": "puppet", "groups": ["g"], "role": "*"}),
            src(),
            0,
        )
        .unwrap();
        assert_eq!((t.roles_key, t.roles), ("role", Some(json!("*"))));
    }

    #[test]
    fn yaql_anywhere_but_id() {
        let t = Task::parse(
            json!({"id": "a", "type": "shell", "parameters": {"strategy": {"amount": {"yaql_exp": "1"}}}}),
            src(),
            0,
        )
        .unwrap();
        assert!(t.has_yaql);
        let e = Task::parse(
            json!({"id": {"yaql_exp": "'a'"}, "type": "shell"}),
            src(),
            0,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tasks.yaml:3 (release r): `id` cannot be a YAQL field"
        );
        let e = Task::parse(json!({"id": "x", "type": "bogus"}), src(), 0).unwrap_err();
        assert!(
            e.message.starts_with("task x: unknown type \"bogus\""),
            "{e}"
        );
    }
}
