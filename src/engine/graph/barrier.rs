//! Group waits as barriers. A task that `cross-depends` on another task on every node of a role
//! set (no `role`, or a role value; not `policy: any`, `self` or the sync node) waits for every
//! such node: with Fuel's newton graph each compute waits for every compute's
//! `openstack-network-compute-nova`, N² waits for N computes. Instead, the wait for "task T on
//! every node of roles R" is one vertex of the plan's graph, a *barrier*: every (node, T) of the
//! group comes before it, and each task that waits for the group comes after it, so N
//! consumers of an N-node group cost 2N edges.
//!
//! The meaning is the same as the waits it stands for: what a task waits for is its direct
//! waits and every member of its groups ([`super::plan::Step::waits`]). Two groups of one
//! task and one consumer (two role values) are one group with the union of the role sets; a
//! direct wait that a group of its consumer covers is dropped; a group of fewer than two tasks
//! stays a direct wait; and a task in the group it waits for (a task that cross-depends on
//! itself) waits for the others directly, since it never waits for itself.
//!
//! Pure: places and vertices in, barriers and edges out; the same input gives the same
//! barriers in the same order.

use std::collections::HashMap;

use serde_json::Value as J;

use super::roles::Place;

/// Sets of places that group waits select, interned: id 0 is every cluster node.
pub(super) struct Masks {
    masks: Vec<Vec<bool>>,
    labels: Vec<String>,
    by_key: HashMap<String, u32>,
    unions: HashMap<Vec<u32>, u32>,
}

impl Masks {
    /// Masks over `places` places, of which the first `nodes` are cluster nodes.
    pub(super) fn new(places: usize, nodes: usize) -> Masks {
        Masks {
            masks: vec![(0..places).map(|q| q < nodes).collect()],
            labels: vec!["*".to_string()],
            by_key: HashMap::new(),
            unions: HashMap::new(),
        }
    }

    /// Every cluster node.
    pub(super) const ALL: u32 = 0;

    /// The mask of a role value, resolved by `places` the first time it is asked for.
    pub(super) fn of_roles(&mut self, roles: &J, places: impl FnOnce() -> Vec<Place>) -> u32 {
        self.of_key(roles.to_string(), roles, places)
    }

    /// The mask of a role value with `policy: any` (one place), resolved by `places`.
    pub(super) fn of_any(&mut self, roles: &J, places: impl FnOnce() -> Vec<Place>) -> u32 {
        self.of_key(format!("any {roles}"), roles, places)
    }

    fn of_key(&mut self, key: String, roles: &J, places: impl FnOnce() -> Vec<Place>) -> u32 {
        if let Some(&id) = self.by_key.get(&key) {
            return id;
        }
        let mut mask = vec![false; self.masks[0].len()];
        for q in places() {
            if let Some(m) = mask.get_mut(q) {
                *m = true;
            }
        }
        let id = self.push(mask, label(roles));
        self.by_key.insert(key, id);
        id
    }

    /// The union of several masks (sorted, deduplicated ids), interned.
    fn union(&mut self, ids: &[u32]) -> u32 {
        if let [one] = ids {
            return *one;
        }
        if let Some(&id) = self.unions.get(ids) {
            return id;
        }
        let mut mask = vec![false; self.masks[0].len()];
        for &i in ids {
            for (m, &x) in mask.iter_mut().zip(&self.masks[i as usize]) {
                *m |= x;
            }
        }
        let text = ids
            .iter()
            .map(|&i| self.labels[i as usize].as_str())
            .collect::<Vec<_>>()
            .join(" + ");
        let id = self.push(mask, text);
        self.unions.insert(ids.to_vec(), id);
        id
    }

    fn push(&mut self, mask: Vec<bool>, text: String) -> u32 {
        self.masks.push(mask);
        self.labels.push(text);
        (self.masks.len() - 1) as u32
    }

    /// Whether mask `id` has place `q`.
    pub(super) fn has(&self, id: u32, q: Place) -> bool {
        self.masks[id as usize].get(q).copied().unwrap_or(false)
    }

    pub(super) fn label(&self, id: u32) -> &str {
        &self.labels[id as usize]
    }
}

/// A role value as a group's label: `*`, `compute`, `primary-controller|controller`,
/// `/^(primary-)?rabbitmq$/`.
fn label(roles: &J) -> String {
    match roles {
        J::String(s) => s.clone(),
        J::Array(items) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join("|"),
        other => other.to_string(),
    }
}

/// One barrier: task `task` on every place of mask `mask` that runs it.
#[derive(Debug, Clone)]
pub(super) struct Barrier {
    pub task: usize,
    pub mask: u32,
    /// Its members' vertices, in place order.
    pub members: Vec<u32>,
}

/// Consumer `v` waits for task `task` on every place of mask `mask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Ask {
    pub consumer: u32,
    pub task: usize,
    pub mask: u32,
}

/// The barriers of a plan and who waits for them.
#[derive(Debug, Default)]
pub(super) struct Barriers {
    pub list: Vec<Barrier>,
    /// (consumer vertex, barrier index), sorted.
    pub uses: Vec<(u32, u32)>,
}

impl Barriers {
    /// Turn `asks` into barriers; waits that stay direct (small groups, a task in its own
    /// group) are appended to `edges`. `placed[t]` are the places of task `t` in order,
    /// `vertex(q, t)` its vertex there, `of(v)` a vertex's (place, task).
    pub(super) fn build(
        mut asks: Vec<Ask>,
        masks: &mut Masks,
        placed: &dyn Fn(usize) -> Vec<Place>,
        vertex: &dyn Fn(Place, usize) -> Option<u32>,
        of: &dyn Fn(u32) -> (Place, usize),
        edges: &mut Vec<(u32, u32)>,
    ) -> Barriers {
        asks.sort_unstable();
        asks.dedup();
        let mut out = Barriers::default();
        let mut members: HashMap<(usize, u32), (Vec<u32>, Option<u32>)> = HashMap::new();
        let mut i = 0;
        while i < asks.len() {
            let (v, task) = (asks[i].consumer, asks[i].task);
            let mut ids = Vec::new();
            while i < asks.len() && asks[i].consumer == v && asks[i].task == task {
                ids.push(asks[i].mask);
                i += 1;
            }
            let mask = masks.union(&ids);
            let entry = members.entry((task, mask)).or_insert_with(|| {
                let list = placed(task)
                    .into_iter()
                    .filter(|&q| masks.has(mask, q))
                    .filter_map(|q| vertex(q, task))
                    .collect();
                (list, None)
            });
            let (p, ti) = of(v);
            let inside = ti == task && masks.has(mask, p);
            if entry.0.len() < 2 || inside {
                edges.extend(entry.0.iter().filter(|&&u| u != v).map(|&u| (u, v)));
                continue;
            }
            let b = match entry.1 {
                Some(b) => b,
                None => {
                    let b = out.list.len() as u32;
                    out.list.push(Barrier {
                        task,
                        mask,
                        members: entry.0.clone(),
                    });
                    entry.1 = Some(b);
                    b
                }
            };
            out.uses.push((v, b));
        }
        out.uses.sort_unstable();
        out
    }

    /// The barriers consumer `v` waits for.
    pub(super) fn of_consumer(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        let start = self.uses.partition_point(|&(c, _)| c < v);
        self.uses[start..]
            .iter()
            .take_while(move |&&(c, _)| c == v)
            .map(|&(_, b)| b)
    }

    /// Whether a barrier of `v` has vertex `u` = (`q`, `task`) among its members.
    pub(super) fn covers(&self, masks: &Masks, v: u32, q: Place, task: usize) -> bool {
        self.of_consumer(v).any(|b| {
            let b = &self.list[b as usize];
            b.task == task && masks.has(b.mask, q)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Four places (three nodes and the master): task 0 on every node, task 1 on node 0.
    fn vertices() -> Vec<(Place, usize)> {
        vec![(0, 0), (1, 0), (2, 0), (0, 1)]
    }

    fn build(asks: Vec<Ask>, masks: &mut Masks) -> (Barriers, Vec<(u32, u32)>) {
        let vs = vertices();
        let mut edges = Vec::new();
        let b = Barriers::build(
            asks,
            masks,
            &|t| {
                vs.iter()
                    .filter(|(_, x)| *x == t)
                    .map(|(q, _)| *q)
                    .collect()
            },
            &|q, t| vs.iter().position(|&x| x == (q, t)).map(|i| i as u32),
            &|v| vs[v as usize],
            &mut edges,
        );
        (b, edges)
    }

    #[test]
    fn consumers_of_one_group_share_one_barrier() {
        let mut masks = Masks::new(4, 3);
        let ask = |consumer, mask| Ask {
            consumer,
            task: 0,
            mask,
        };
        let (b, edges) = build(vec![ask(3, Masks::ALL), ask(3, Masks::ALL)], &mut masks);
        assert_eq!(b.list.len(), 1);
        assert_eq!(b.list[0].members, [0, 1, 2]);
        assert_eq!(b.uses, [(3, 0)]);
        assert!(edges.is_empty());
        assert!(b.covers(&masks, 3, 1, 0));
        assert!(!b.covers(&masks, 3, 0, 1));
    }

    #[test]
    fn a_task_in_its_own_group_and_small_groups_wait_directly() {
        let mut masks = Masks::new(4, 3);
        let first = masks.of_roles(&json!(["a"]), || vec![0]);
        let (b, edges) = build(
            vec![
                // Vertex 1 (task 0 on node 1) waits for task 0 everywhere: the others.
                Ask {
                    consumer: 1,
                    task: 0,
                    mask: Masks::ALL,
                },
                // Vertex 3 waits for task 0 on node 0 only.
                Ask {
                    consumer: 3,
                    task: 0,
                    mask: first,
                },
            ],
            &mut masks,
        );
        assert!(b.list.is_empty());
        assert_eq!(edges, [(0, 1), (2, 1), (0, 3)]);
    }

    #[test]
    fn two_role_values_of_one_task_are_one_group() {
        let mut masks = Masks::new(4, 3);
        let a = masks.of_roles(&json!("a"), || vec![0]);
        let b_ = masks.of_roles(&json!(["b", "c"]), || vec![1, 3]);
        let ask = |mask| Ask {
            consumer: 3,
            task: 0,
            mask,
        };
        let (b, _) = build(vec![ask(a), ask(b_)], &mut masks);
        assert_eq!(b.list[0].members, [0, 1]);
        assert_eq!(masks.label(b.list[0].mask), "a + b|c");
    }
}
