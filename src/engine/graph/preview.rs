//! A plan at a glance, as the dashboard shows it: its summary, warnings and picture, and the
//! first nodes' tasks with what each waits for, named. Made once from a whole plan (walking
//! every step, tens of milliseconds at 10,000 nodes) and small (the picture and a few
//! nodes' rows), so it can be kept and shown after the plan itself, some 170 MB of steps at
//! 10,000 nodes, has been let go for its successor. Pure: a plan in, a preview out.

use std::collections::HashMap;
use std::sync::Arc;

use super::plan::{Plan, Status, Summary};

/// What a page shows of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    pub summary: Summary,
    pub warnings: Vec<String>,
    /// The task graph's picture ([`super::picture::svg`]).
    pub picture: String,
    /// The first cluster nodes in plan order (the sync node `null` left out), as many as asked.
    pub nodes: Vec<PreviewNode>,
    /// Cluster nodes past those.
    pub more: usize,
}

/// One node of a [`Preview`] with every task of its list, in the order it runs them.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewNode {
    pub uid: String,
    /// The operator's name for the node.
    pub name: String,
    pub roles: Vec<String>,
    pub tasks: Vec<PreviewTask>,
}

/// One task of a node's list.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewTask {
    pub id: Arc<str>,
    pub ty: &'static str,
    pub status: Status,
    /// Why it is skipped, when it is.
    pub reason: Option<Arc<str>>,
    /// What it waits for outside its own node: tasks of other nodes, stages, then groups.
    pub waits: Vec<Wait>,
}

/// One thing a task waits for outside its node, named as an operator knows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Wait {
    /// A task of another node, by that node's name (its uid when the plan has no such node).
    Task { task: Arc<str>, node: String },
    /// A stage of the sync node.
    Stage { task: Arc<str> },
    /// Every member of a group wait: `task` on every node of `roles` (`*`: every node).
    Group {
        task: String,
        roles: String,
        nodes: usize,
    },
}

impl Preview {
    /// `plan`'s preview, with the tasks of its first `shown` cluster nodes.
    pub fn of(plan: &Plan, shown: usize) -> Preview {
        let cluster = || plan.nodes.iter().filter(|n| n.uid != "null");
        let listed: Vec<_> = cluster().take(shown).collect();
        // Only the names the listed nodes' waits use: a map of every node's would be made on
        // each preview of 10,000 nodes for a few dozen lookups.
        let wanted: std::collections::HashSet<&str> = listed
            .iter()
            .flat_map(|n| n.tasks.iter())
            .flat_map(|t| t.requires.iter())
            .map(|r| &*r.node)
            .collect();
        let names: HashMap<&str, &str> = plan
            .nodes
            .iter()
            .filter(|n| wanted.contains(n.uid.as_str()))
            .map(|n| (n.uid.as_str(), n.name.as_str()))
            .collect();
        let nodes = listed
            .iter()
            .map(|n| PreviewNode {
                uid: n.uid.clone(),
                name: n.name.clone(),
                roles: n.roles.clone(),
                tasks: n
                    .tasks
                    .iter()
                    .map(|t| {
                        let others = t.requires.iter().filter(|r| *r.node != *n.uid).map(|r| {
                            match &*r.node {
                                "null" => Wait::Stage {
                                    task: Arc::clone(&r.task),
                                },
                                uid => Wait::Task {
                                    task: Arc::clone(&r.task),
                                    node: names.get(uid).copied().unwrap_or(uid).to_string(),
                                },
                            }
                        });
                        let groups = t
                            .requires_groups
                            .iter()
                            .filter_map(|g| plan.groups.get(g.index))
                            .map(|g| Wait::Group {
                                task: g.task.clone(),
                                roles: g.roles.clone(),
                                nodes: g.nodes.len(),
                            });
                        PreviewTask {
                            id: Arc::clone(&t.id),
                            ty: t.ty,
                            status: t.status,
                            reason: t.reason.clone(),
                            waits: others.chain(groups).collect(),
                        }
                    })
                    .collect(),
            })
            .collect();
        Preview {
            summary: plan.summary.clone(),
            warnings: plan.warnings.clone(),
            picture: super::picture::svg(plan),
            nodes,
            more: cluster().count().saturating_sub(shown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::graph::NodeSpec;
    use crate::engine::graph::tests::make;
    use serde_json::json;

    fn node(uid: &str, role: &str, name: &str) -> NodeSpec {
        let mut n = NodeSpec::new(uid, &[role]);
        n.user_node_name = Some(name.to_string());
        n
    }

    /// Controllers run `db`; every compute runs `nova` after every compute's `agent` (a group
    /// wait) and `conf` after the controller's `db` (a wait on another node, named); `off` is
    /// skipped. The preview lists the first two nodes and counts the rest.
    #[test]
    fn lists_the_first_nodes_with_their_waits_named_and_counts_the_rest() {
        let controllers = json!(["controller", "primary-controller"]);
        let p = make(
            json!([
                {"id": "db", "type": "shell", "roles": controllers},
                {"id": "agent", "type": "shell", "roles": ["compute"]},
                {"id": "nova", "type": "shell", "roles": ["compute"], "requires": ["agent"],
                 "cross-depends": [{"name": "agent", "role": "compute"}]},
                {"id": "conf", "type": "shell", "roles": ["compute"],
                 "cross-depends": [{"name": "db", "role": controllers}]},
                {"id": "off", "type": "shell", "roles": ["compute"],
                 "condition": {"yaql_exp": "false"}},
            ]),
            &[
                node("1", "controller", "ctl-a"),
                node("2", "compute", "cmp-b"),
                node("3", "compute", "cmp-c"),
                node("4", "compute", "cmp-d"),
            ],
        );
        let v = Preview::of(&p, 2);
        assert_eq!(v.summary, p.summary);
        assert_eq!(v.picture, crate::engine::graph::picture::svg(&p));
        assert_eq!(v.more, 2);
        let listed: Vec<&str> = v.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(listed, ["ctl-a", "cmp-b"]);
        let compute = &v.nodes[1];
        assert_eq!(compute.roles, ["compute"]);
        // The node's tasks, all of them and in its order, as the plan has them.
        let plan_ids: Vec<&str> = p.nodes[1].tasks.iter().map(|t| &*t.id).collect();
        let ids: Vec<&str> = compute.tasks.iter().map(|t| &*t.id).collect();
        assert_eq!(ids, plan_ids);
        let task = |id: &str| compute.tasks.iter().find(|t| &*t.id == id).unwrap();
        assert_eq!(
            task("conf").waits,
            [Wait::Task {
                task: "db".into(),
                node: "ctl-a".into()
            }]
        );
        assert_eq!(
            task("nova").waits,
            [Wait::Group {
                task: "agent".into(),
                roles: "compute".into(),
                nodes: 3
            }]
        );
        assert_eq!(task("off").status, Status::Skipped);
        assert!(task("off").reason.is_some());
        // Asking for more nodes than there are lists them all, the sync node left out.
        let all = Preview::of(&p, 10);
        assert_eq!((all.nodes.len(), all.more), (4, 0));
        assert!(all.nodes.iter().all(|n| n.uid != "null"));
    }
}
