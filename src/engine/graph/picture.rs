//! A plan drawn as a picture: the task graph collapsed over nodes (one box per task id, one
//! arrow per `requires` between ids), laid out left to right in layers (longest path from the
//! start, crossings reduced by barycenter sweeps) and written as SVG for the dashboard. Boxes say
//! whether the task runs on every node it is on, on some, is skipped everywhere or is a stage.
//! Pure: a plan in, a string out; no fonts are measured (ids are cut to fit the box).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::plan::{Plan, Status};

const COL_W: usize = 200;
const BOX_W: usize = 168;
const ROW_H: usize = 34;
const BOX_H: usize = 24;
const PAD: usize = 12;
const MAX_CHARS: usize = 24;

/// How a task fares over the nodes that carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Runs,
    Partly,
    Skipped,
    Stage,
}

impl Fate {
    fn class(self) -> &'static str {
        match self {
            Fate::Runs => "t-run",
            Fate::Partly => "t-some",
            Fate::Skipped => "t-skip",
            Fate::Stage => "t-stage",
        }
    }
}

struct Vertex {
    id: String,
    fate: Fate,
    runs: usize,
    skipped: usize,
    first_order: usize,
}

/// HTML/XML escaping by askama, the escaper the dashboard's templates use.
fn escape(s: &str) -> String {
    askama::filters::escape(s, askama::filters::Html)
        .map_or_else(|never| match never {}, |safe| safe.to_string())
}

fn cut(s: &str) -> String {
    if s.chars().count() <= MAX_CHARS {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX_CHARS - 1).collect();
        t.push('…');
        t
    }
}

/// Draw `plan` as an SVG document (no XML prolog, ready to inline in HTML).
pub fn svg(plan: &Plan) -> String {
    // Vertices: every task id on any node, in plan order.
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    let mut verts: Vec<Vertex> = Vec::new();
    let mut edges: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut all: Vec<(&str, usize, Status)> = Vec::new();
    for node in &plan.nodes {
        for step in &node.tasks {
            all.push((&*step.id, step.order, step.status));
        }
    }
    all.sort_by_key(|&(id, order, _)| (order, id));
    for (id, order, status) in all {
        let i = *index.entry(id).or_insert_with(|| {
            verts.push(Vertex {
                id: id.to_string(),
                fate: Fate::Skipped,
                runs: 0,
                skipped: 0,
                first_order: order,
            });
            verts.len() - 1
        });
        let v = &mut verts[i];
        match status {
            Status::Run => v.runs += 1,
            Status::Skipped => v.skipped += 1,
            Status::Stage => v.fate = Fate::Stage,
        }
    }
    for v in &mut verts {
        if v.fate != Fate::Stage {
            v.fate = match (v.runs, v.skipped) {
                (0, _) => Fate::Skipped,
                (_, 0) => Fate::Runs,
                _ => Fate::Partly,
            };
        }
    }
    for node in &plan.nodes {
        for step in &node.tasks {
            let Some(&to) = index.get(&*step.id) else {
                continue;
            };
            let groups = step
                .requires_groups
                .iter()
                .filter_map(|g| plan.groups.get(g.index))
                .map(|g| g.task.as_str());
            for task in step.requires.iter().map(|r| &*r.task).chain(groups) {
                if let Some(&from) = index.get(task)
                    && from != to
                {
                    edges.insert((from, to));
                }
            }
        }
    }
    // Layers: longest path from a source; vertices come in plan order, which is topological.
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); verts.len()];
    for &(a, b) in &edges {
        preds[b].push(a);
    }
    let mut order: Vec<usize> = (0..verts.len()).collect();
    order.sort_by_key(|&i| verts[i].first_order);
    let mut layer = vec![0usize; verts.len()];
    // Relax until stable (bounded by the vertex count, in case the collapsed graph has a cycle
    // across nodes that the per-node plan did not).
    for _ in 0..verts.len().max(1) {
        let mut moved = false;
        for &i in &order {
            let want = preds[i].iter().map(|&p| layer[p] + 1).max().unwrap_or(0);
            if want > layer[i] && want < verts.len() {
                layer[i] = want;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    let layers = layer.iter().max().map_or(0, |m| m + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layers];
    for &i in &order {
        rows[layer[i]].push(i);
    }
    // Barycenter sweeps: place each vertex near the mean position of its predecessors.
    let mut pos = vec![0f64; verts.len()];
    for row in &rows {
        for (k, &i) in row.iter().enumerate() {
            pos[i] = k as f64;
        }
    }
    for _ in 0..4 {
        for row in rows.iter_mut().skip(1) {
            let mut keyed: Vec<(f64, usize)> = row
                .iter()
                .map(|&i| {
                    let p = &preds[i];
                    let bc = if p.is_empty() {
                        pos[i]
                    } else {
                        p.iter().map(|&q| pos[q]).sum::<f64>() / p.len() as f64
                    };
                    (bc, i)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            *row = keyed.into_iter().map(|(_, i)| i).collect();
            for (k, &i) in row.iter().enumerate() {
                pos[i] = k as f64;
            }
        }
    }
    let tallest = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = layers * COL_W + 2 * PAD;
    let height = tallest.max(1) * ROW_H + 2 * PAD;
    let xy = |i: usize| -> (usize, usize) {
        let row = &rows[layer[i]];
        let k = row.iter().position(|&j| j == i).unwrap_or(0);
        // Centre short columns vertically.
        let offset = (tallest - row.len()) * ROW_H / 2;
        (PAD + layer[i] * COL_W, PAD + offset + k * ROW_H)
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="plan-graph" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Task graph: {} tasks, {} dependencies">"#,
        verts.len(),
        edges.len()
    );
    out.push_str(r#"<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="g-arrow"/></marker></defs>"#);
    out.push_str(r#"<g class="g-edges">"#);
    for &(a, b) in &edges {
        let (ax, ay) = xy(a);
        let (bx, by) = xy(b);
        let (x1, y1) = (ax + BOX_W, ay + BOX_H / 2);
        let (x2, y2) = (bx, by + BOX_H / 2);
        let mid = (x1 + x2) / 2;
        let _ = write!(
            out,
            r#"<path d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}" marker-end="url(#arrow)"/>"#
        );
    }
    out.push_str("</g>");
    for (i, v) in verts.iter().enumerate() {
        let (x, y) = xy(i);
        let title = match v.fate {
            Fate::Stage => format!("{} (stage)", v.id),
            _ => format!(
                "{}: runs on {} node(s), skipped on {}",
                v.id, v.runs, v.skipped
            ),
        };
        let _ = write!(
            out,
            r#"<g class="g-task {}"><title>{}</title><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="4"/><text x="{}" y="{}">{}</text></g>"#,
            v.fate.class(),
            escape(&title),
            x + 8,
            y + BOX_H / 2 + 4,
            escape(&cut(&v.id)),
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::graph::{Cluster, Deployed, NodeSpec, ReleaseGraph, Source, plan};
    use serde_json::json;

    fn src() -> Source {
        Source::new("release r", "tasks.yaml", 1)
    }

    #[test]
    fn draws_every_task_once_with_its_fate_and_escapes_names() {
        let tasks = vec![
            (
                json!({"id": "a<b", "type": "shell", "roles": ["*"], "parameters": {"cmd": "x"}}),
                src(),
            ),
            (
                json!({"id": "c", "type": "shell", "roles": ["*"], "requires": ["a<b"],
                     "condition": {"yaql_exp": "false"}, "parameters": {"cmd": "x"}}),
                src(),
            ),
        ];
        let release = ReleaseGraph {
            name: "r".into(),
            version: "newton-10.0".into(),
            tasks,
            ..ReleaseGraph::default()
        };
        let nodes = [
            NodeSpec::new("1", &["compute"]),
            NodeSpec::new("2", &["compute"]),
        ];
        let p = plan(
            &Cluster::default(),
            &nodes,
            &release,
            &[],
            &Deployed::default(),
        )
        .unwrap();
        let s = svg(&p);
        assert!(s.starts_with("<svg"), "{s}");
        assert_eq!(s.matches("<rect").count(), 2, "{s}");
        assert!(s.contains("a&#60;b"), "{s}");
        assert!(s.contains("t-skip"), "{s}");
        assert!(s.contains("t-run"), "{s}");
        assert_eq!(s.matches("marker-end").count(), 1, "one arrow a<b → c: {s}");
        assert_eq!(svg(&p), s, "deterministic");
    }
}
