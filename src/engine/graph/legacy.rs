//! Legacy plugin tasks (`tasks.yaml`, `stage: post_deployment/100`) adapted into the task
//! graph, as Nailgun's LCM adapter (`task/legacy_tasks_adapter.py`) did, but ordered the way
//! the plugin-ordering spec says ([`crate::engine::order`]: postfix, then plugin name, then
//! file order) instead of by install order.
//!
//! Per stage, the n-th task (0-based, in that order) gets the id `<stage>_<n>`
//! (`post_deployment_0`, `post_deployment_1` ...), version 2.0.0, its `type`, `parameters`
//! (with `cwd` defaulting to the plugin's folder `/etc/fuel/plugins/<name>-<major.minor>/`),
//! `condition` (default true) and roles (`role`, `roles` or `groups`; a package 1.0.0 list with
//! `controller` also gets `primary-controller`). The first task of a stage cross-depends on
//! `<stage>_end` on the sync node and each later one on the previous task on all of its
//! nodes, so legacy tasks run one at a time, cluster-wide, after the stage's end marker; each
//! is also required for the stage that follows `<stage>_end` (`deploy_start` after
//! `pre_deployment_end`). Their own `requires`/`required_for` are not used (Nailgun dropped
//! them too; keeping them would tie the chain in knots) and the plan says so.
//!
//! Once tasks are placed, [`skip_unplaced`] keeps the chain whole where Nailgun let it break:
//! a task that runs on no node is skipped over, so the next one waits for the nearest earlier
//! task that runs somewhere, or for `<stage>_end` (Nailgun's edge to a task with no node
//! vanished, and the next task waited for nothing). Pure.

use serde_json::{Map, Value as J, json};

use super::task::{Source, names};
use crate::engine::order::{Placed, Stage, order_stage, parse_stage};

/// One plugin's legacy tasks.
#[derive(Debug, Clone)]
pub struct LegacyTasks<'a> {
    pub plugin: &'a str,
    pub version: &'a str,
    /// The package format is 1.0.0 (controller implies primary-controller).
    pub v1: bool,
    pub tasks: &'a [(J, Source)],
}

/// A task the adapter generated, for the plan's record.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Generated {
    pub id: String,
    pub plugin: String,
    pub stage: String,
    /// Where the original task was written.
    pub source: String,
}

/// Why legacy tasks cannot be adapted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct LegacyError {
    pub at: String,
    pub message: String,
}

/// The adapted tasks (with their sources), what was generated, and warnings.
#[derive(Debug, Clone, Default)]
pub struct Adapted {
    pub tasks: Vec<(J, Source)>,
    pub generated: Vec<Generated>,
    pub warnings: Vec<String>,
}

/// The plugin's folder on nodes, `/etc/fuel/plugins/<name>-<major.minor>/`.
pub fn plugin_dir(name: &str, version: &str) -> String {
    let mm: Vec<&str> = version.split('.').take(2).collect();
    format!("/etc/fuel/plugins/{name}-{}/", mm.join("."))
}

/// Adapt every plugin's legacy tasks. `next_stage` gives the stage task that follows a
/// `<stage>_end` marker in the merged graph, if any.
pub fn adapt(
    plugins: &[LegacyTasks<'_>],
    next_stage: &dyn Fn(&str) -> Option<String>,
) -> Result<Adapted, LegacyError> {
    type Sourced = (J, Source);
    let mut by_stage: Vec<(Stage, Vec<Placed<Sourced>>)> = vec![
        (Stage::PreDeployment, Vec::new()),
        (Stage::PostDeployment, Vec::new()),
    ];
    let mut out = Adapted::default();
    for p in plugins {
        for (index, (task, source)) in p.tasks.iter().enumerate() {
            let err = |message: String| LegacyError {
                at: source.to_string(),
                message,
            };
            let Some(obj) = task.as_object() else {
                return Err(err(format!("a legacy task must be a mapping, not {task}")));
            };
            let stage_text = obj
                .get("stage")
                .and_then(J::as_str)
                .ok_or_else(|| err("a legacy task needs a `stage`".to_string()))?;
            let stage = parse_stage(stage_text).map_err(|e| err(e.to_string()))?;
            if obj.contains_key("requires") || obj.contains_key("required_for") {
                out.warnings.push(format!(
                    "{source}: legacy task ({stage_text}) has requires/required_for; they are not \
                     used: legacy tasks run one at a time after {}_end",
                    stage.stage.as_str()
                ));
            }
            let mut roles = ["roles", "role", "groups"]
                .into_iter()
                .find_map(|k| obj.get(k).filter(|v| !v.is_null()).cloned())
                .unwrap_or(J::Null);
            if p.v1
                && let J::Array(list) = &mut roles
            {
                let has = |r: &str| list.iter().any(|x| x.as_str() == Some(r));
                if has("controller") && !has("primary-controller") {
                    list.push(J::String("primary-controller".to_string()));
                }
            }
            let mut parameters = obj
                .get("parameters")
                .cloned()
                .unwrap_or(J::Object(Map::new()));
            if let Some(params) = parameters.as_object_mut() {
                params
                    .entry("cwd")
                    .or_insert_with(|| J::String(plugin_dir(p.plugin, p.version)));
            }
            let adapted = json!({
                "type": obj.get("type").cloned().unwrap_or(J::Null),
                "roles": roles,
                "version": "2.0.0",
                "parameters": parameters,
                "condition": obj.get("condition").cloned().unwrap_or(J::Bool(true)),
            });
            let slot = usize::from(stage.stage == Stage::PostDeployment);
            by_stage[slot].1.push(Placed {
                plugin: p.plugin.to_string(),
                index,
                stage,
                task: (adapted, source.clone()),
            });
        }
    }
    for (stage, mut tasks) in by_stage {
        order_stage(&mut tasks);
        let name = stage.as_str();
        let end = format!("{name}_end");
        let mut depends = json!([{"name": end, "role": null}]);
        let depended_by = match next_stage(&end) {
            Some(next) => json!([{"name": next, "role": null}]),
            None => json!([]),
        };
        for (n, placed) in tasks.into_iter().enumerate() {
            let (mut task, source) = placed.task;
            let id = format!("{name}_{n}");
            if let Some(o) = task.as_object_mut() {
                o.insert("id".to_string(), J::String(id.clone()));
                o.insert("cross-depends".to_string(), depends.clone());
                o.insert("cross-depended-by".to_string(), depended_by.clone());
            }
            depends = json!([{"name": id, "role": task.get("roles").cloned().unwrap_or(J::Null)}]);
            out.generated.push(Generated {
                id,
                plugin: placed.plugin,
                stage: placed.stage.to_string(),
                source: source.to_string(),
            });
            out.tasks.push((task, source));
        }
    }
    Ok(out)
}

/// A legacy task whose predecessor in its stage's chain runs on no node, and what it waits for
/// instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Relinked {
    pub id: String,
    /// Its new `cross-depends`: the nearest earlier task of the chain that is on some node
    /// (with that task's roles), or `<stage>_end` on the sync node.
    pub cross_depends: J,
    /// The tasks skipped over, nearest first.
    pub skipped: Vec<String>,
}

/// Keep each stage's chain whole when some of its tasks run nowhere: a cross-dependency on a
/// task with no node is no wait at all, so the task after it waits instead for the nearest
/// earlier task that has a node, or for `<stage>_end` when none has (A → B on nobody → C makes
/// C wait for A; with A on nobody too, for the stage's end marker, where the chain starts).
/// `generated` is [`Adapted::generated`] (each stage's tasks in chain order); `placed` says
/// whether a task has a node, `roles` gives a task's roles as its chain link names them.
pub fn skip_unplaced(
    generated: &[Generated],
    placed: &dyn Fn(&str) -> bool,
    roles: &dyn Fn(&str) -> J,
) -> Vec<Relinked> {
    let mut out = Vec::new();
    for stage in [Stage::PreDeployment, Stage::PostDeployment] {
        let name = stage.as_str();
        let chain: Vec<&str> = generated
            .iter()
            .filter(|g| g.id.strip_prefix(name).is_some_and(|n| n.starts_with('_')))
            .map(|g| g.id.as_str())
            .collect();
        for (i, id) in chain.iter().enumerate().skip(1) {
            if placed(chain[i - 1]) || !placed(id) {
                continue;
            }
            let skipped: Vec<String> = chain[..i]
                .iter()
                .rev()
                .take_while(|p| !placed(p))
                .map(|p| p.to_string())
                .collect();
            let cross_depends = match chain[..i].iter().rev().find(|p| placed(p)) {
                Some(prev) => json!([{"name": prev, "role": roles(prev)}]),
                None => json!([{"name": format!("{name}_end"), "role": null}]),
            };
            out.push(Relinked {
                id: id.to_string(),
                cross_depends,
                skipped,
            });
        }
    }
    out
}

/// The stage that follows `marker` among stage tasks: one that requires it, or one it is
/// required for. `stages` are (id, requires, required_for) in graph order.
pub fn successor(stages: &[(String, J, J)], marker: &str) -> Option<String> {
    stages
        .iter()
        .find(|(_, req, _)| names(Some(req)).iter().any(|r| r == marker))
        .map(|(id, _, _)| id.clone())
        .or_else(|| {
            stages
                .iter()
                .find(|(id, _, _)| id == marker)
                .and_then(|(_, _, rf)| names(Some(rf)).into_iter().next())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(p: &str, line: u32) -> Source {
        Source::new(p, "tasks.yaml", line)
    }

    fn t(stage: &str) -> J {
        json!({"role": ["controller"], "stage": stage, "type": "shell", "parameters": {"cmd": stage}})
    }

    #[test]
    fn ids_order_and_chain() {
        let p1 = vec![
            (t("post_deployment/100"), src("p1", 1)),
            (t("pre_deployment"), src("p1", 5)),
        ];
        let p2 = vec![
            (t("post_deployment/-5"), src("p2", 1)),
            (t("post_deployment/100.0"), src("p2", 7)),
        ];
        let plugins = [
            LegacyTasks {
                plugin: "p2",
                version: "1.2.3",
                v1: false,
                tasks: &p2,
            },
            LegacyTasks {
                plugin: "p1",
                version: "2.0.0",
                v1: true,
                tasks: &p1,
            },
        ];
        let next = |m: &str| (m == "pre_deployment_end").then(|| "deploy_start".to_string());
        let a = adapt(&plugins, &next).unwrap();
        let ids: Vec<(&str, &str, &str)> = a
            .generated
            .iter()
            .map(|g| (g.id.as_str(), g.plugin.as_str(), g.stage.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                ("pre_deployment_0", "p1", "pre_deployment"),
                ("post_deployment_0", "p2", "post_deployment/-5"),
                ("post_deployment_1", "p1", "post_deployment/100"),
                ("post_deployment_2", "p2", "post_deployment/100.0"),
            ]
        );
        let pre = &a.tasks[0].0;
        assert_eq!(
            pre["cross-depends"],
            json!([{"name": "pre_deployment_end", "role": null}])
        );
        assert_eq!(
            pre["cross-depended-by"],
            json!([{"name": "deploy_start", "role": null}])
        );
        assert_eq!(
            pre["roles"],
            json!(["controller", "primary-controller"]),
            "package 1.0.0"
        );
        assert_eq!(pre["parameters"]["cwd"], "/etc/fuel/plugins/p1-2.0/");
        let second = &a.tasks[2].0;
        assert_eq!(
            second["cross-depends"],
            json!([{"name": "post_deployment_0", "role": ["controller"]}])
        );
        assert_eq!(second["cross-depended-by"], json!([]));
    }

    #[test]
    fn bad_stage_names_the_file() {
        let p = vec![(t("post_deployment/1e3"), src("p", 4))];
        let e = adapt(
            &[LegacyTasks {
                plugin: "p",
                version: "1.0.0",
                v1: false,
                tasks: &p,
            }],
            &|_| None,
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("tasks.yaml:4 (p): invalid stage"),
            "{e}"
        );
    }

    #[test]
    fn the_chain_skips_tasks_on_no_node() {
        let g = |id: &str| Generated {
            id: id.to_string(),
            plugin: "p".to_string(),
            stage: id.rsplit_once('_').map(|(s, _)| s.to_string()).unwrap(),
            source: "tasks.yaml:1 (p)".to_string(),
        };
        let generated: Vec<Generated> = [
            "pre_deployment_0",
            "pre_deployment_1",
            "pre_deployment_2",
            "post_deployment_0",
            "post_deployment_1",
            "post_deployment_2",
            "post_deployment_3",
        ]
        .into_iter()
        .map(g)
        .collect();
        let nowhere = ["pre_deployment_1", "post_deployment_0", "post_deployment_1"];
        let placed = |id: &str| !nowhere.contains(&id);
        let roles = |id: &str| json!([format!("role-of-{id}")]);
        let r = skip_unplaced(&generated, &placed, &roles);
        assert_eq!(
            r,
            [
                // A -> (B on nobody) -> C: C waits for A.
                Relinked {
                    id: "pre_deployment_2".into(),
                    cross_depends: json!([{"name": "pre_deployment_0",
                                           "role": ["role-of-pre_deployment_0"]}]),
                    skipped: vec!["pre_deployment_1".into()],
                },
                // Everything before it on nobody: the stage's end marker, where the chain
                // starts.
                Relinked {
                    id: "post_deployment_2".into(),
                    cross_depends: json!([{"name": "post_deployment_end", "role": null}]),
                    skipped: vec!["post_deployment_1".into(), "post_deployment_0".into()],
                },
            ]
        );
        // Whole chains are left alone.
        assert!(skip_unplaced(&generated, &|_| true, &roles).is_empty());
    }

    #[test]
    fn successor_of_a_marker() {
        let stages = vec![
            (
                "pre_deployment_end".to_string(),
                json!(["pre_deployment_start"]),
                J::Null,
            ),
            (
                "deploy_start".to_string(),
                json!(["pre_deployment_end"]),
                J::Null,
            ),
        ];
        assert_eq!(
            successor(&stages, "pre_deployment_end").as_deref(),
            Some("deploy_start")
        );
        assert_eq!(successor(&stages, "post_deployment_end"), None);
    }
}
