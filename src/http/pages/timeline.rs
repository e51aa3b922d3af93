//! A deployment drawn as a timeline, for the environment and deployment pages: one lane per
//! node (the sync node's stages on top), one bar per run from its start to its end (to `now`
//! while it runs), coloured by result (the pages' legend says which colour is which), with the
//! step or task, its outcome and its times in a tooltip. Server-rendered SVG.
//!
//! Readable at any speed: a bar is at least [`MIN_W`] wide, and a bar that would overlap the
//! one before it in its lane starts just after it (runs of a second or less, which the
//! second-resolution times put at one point, come out side by side in their order), so the
//! picture widens instead of stacking bars; the tooltip keeps the exact times. Lane labels are
//! cut to fit with the whole name in a `<title>`. At most [`MAX_LANES`] lanes: the stages,
//! the nodes with a failed run, then running ones, then the rest; the picture says how many
//! nodes it leaves out.

use std::fmt::Write as _;

use crate::http::pages::views::duration;
use crate::store::{Deployment, RunLine};

const LANE_H: usize = 26;
const LABEL_W: usize = 150;
const PLOT_W: usize = 760;
const TOP: usize = 24;
/// The narrowest bar, in pixels.
pub const MIN_W: f64 = 8.0;
/// Space between bars pushed apart in a lane.
const GAP: f64 = 1.0;
/// Lanes drawn at most.
pub const MAX_LANES: usize = 40;
/// Characters of a lane label that fit its column.
const LABEL_CHARS: usize = 20;

/// HTML/XML escaping by askama, the escaper the dashboard's templates use.
fn escape(s: &str) -> String {
    askama::filters::escape(s, askama::filters::Html)
        .map_or_else(|never| match never {}, |safe| safe.to_string())
}

fn cut(s: &str, max: usize) -> (String, bool) {
    if s.chars().count() <= max {
        (s.to_string(), false)
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        (t, true)
    }
}

/// The lanes to draw: the sync node (`None`) first, then nodes with a failed run, running
/// ones, the rest, each group by id; at most [`MAX_LANES`]. Returns them and how many nodes
/// were left out.
fn lanes(runs: &[RunLine]) -> (Vec<Option<i64>>, usize) {
    // One entry per node, found by key: a deployment of 10,000 nodes has 200,000 runs, and a
    // search through the lanes for each run made the page quadratic (1.3 s at 10,000 nodes).
    let mut rank_of: std::collections::HashMap<Option<i64>, u8> = std::collections::HashMap::new();
    for r in runs {
        let rank = match r.status.as_str() {
            "failed" => 0,
            "running" => 1,
            _ => 2,
        };
        rank_of
            .entry(r.node_id)
            .and_modify(|l| *l = (*l).min(rank))
            .or_insert(rank);
    }
    let mut all: Vec<(Option<i64>, u8)> = rank_of.into_iter().collect();
    all.sort_by_key(|&(n, rank)| (n.is_some(), rank, n));
    let left_out = all.len().saturating_sub(MAX_LANES);
    let mut kept: Vec<Option<i64>> = all.into_iter().take(MAX_LANES).map(|l| l.0).collect();
    kept.sort_by_key(|n| (n.is_some(), *n));
    (kept, left_out)
}

/// The timeline of `dep` as SVG. `names` maps node ids to labels; `now` closes running bars.
pub fn svg(dep: &Deployment, runs: &[RunLine], names: &dyn Fn(i64) -> String, now: i64) -> String {
    let (lanes, left_out) = lanes(runs);
    let start = runs
        .iter()
        .filter_map(|r| r.started_at)
        .min()
        .unwrap_or(dep.created_at);
    let end = runs
        .iter()
        .filter_map(|r| match r.status.as_str() {
            "running" => Some(now),
            _ => r.finished_at,
        })
        .max()
        .unwrap_or(start)
        .max(start + 1);
    let span = (end - start).max(1) as f64;
    let x = |t: i64| LABEL_W as f64 + (t - start).max(0) as f64 / span * PLOT_W as f64;
    let mut bars = String::new();
    let mut right = (LABEL_W + PLOT_W) as f64;
    // Each lane's runs, in the order given, from one pass over the runs.
    let lane_of: std::collections::HashMap<Option<i64>, usize> =
        lanes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut per_lane: Vec<Vec<&RunLine>> = vec![Vec::new(); lanes.len()];
    for r in runs {
        if let Some(&i) = lane_of.get(&r.node_id) {
            per_lane[i].push(r);
        }
    }
    for (i, lane_runs) in per_lane.iter().enumerate() {
        let y = TOP + i * LANE_H;
        let mut after = LABEL_W as f64;
        for r in lane_runs {
            let Some(s) = r.started_at else {
                continue;
            };
            let e = if r.status == "running" {
                now
            } else {
                r.finished_at.unwrap_or(s)
            };
            let x0 = x(s).max(after);
            let w = (x(e) - x(s)).max(MIN_W);
            after = x0 + w + GAP;
            right = right.max(after);
            let mut tip = format!(
                "{}: {} (attempt {}), {}",
                r.name(),
                r.status,
                r.attempt,
                duration(e - s)
            );
            if let Some(err) = &r.error {
                let _ = write!(tip, ": {err}");
            }
            let _ = write!(
                bars,
                r#"<rect class="tl-{}" x="{x0:.1}" y="{}" width="{w:.1}" height="{}" rx="2"><title>{}</title></rect>"#,
                r.status,
                y + 5,
                LANE_H - 10,
                escape(&tip)
            );
        }
    }
    let width = right.ceil() as usize + 16;
    let rows = lanes.len().max(1) + usize::from(left_out > 0);
    let height = TOP + rows * LANE_H + 8;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Deployment {} timeline: {} runs">"#,
        dep.id,
        runs.len()
    );
    for q in 0..=4 {
        let t = start + (end - start) * q / 4;
        let anchor = match q {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            out,
            r#"<text class="tl-axis" x="{:.1}" y="14" text-anchor="{anchor}">{}</text>"#,
            x(t),
            duration(t - start)
        );
    }
    for (i, lane) in lanes.iter().enumerate() {
        let y = TOP + i * LANE_H;
        let label = lane.map_or_else(|| "stages".to_string(), names);
        let (shown, cut_off) = cut(&label, LABEL_CHARS);
        let title = if cut_off {
            format!("<title>{}</title>", escape(&label))
        } else {
            String::new()
        };
        let _ = write!(
            out,
            r#"<g class="tl-lane"><line x1="0" x2="{width}" y1="{}" y2="{}"/><text x="4" y="{}">{title}{}</text></g>"#,
            y + LANE_H,
            y + LANE_H,
            y + 17,
            escape(&shown)
        );
    }
    out.push_str(&bars);
    if left_out > 0 {
        let y = TOP + lanes.len() * LANE_H + 17;
        let _ = write!(
            out,
            r#"<text class="tl-axis" x="4" y="{y}">and {left_out} more nodes, all on the deployment page</text>"#
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::steps::Location;

    fn dep() -> Deployment {
        Deployment {
            id: 7,
            cluster_id: 1,
            status: "running".into(),
            created_at: 100,
            finished_at: None,
            name: "deployment".into(),
            graph_type: "default".into(),
            message: None,
            result: None,
            parent_id: None,
        }
    }

    fn run(node: Option<i64>, seq: u32, status: &str, at: Option<(i64, i64)>) -> RunLine {
        RunLine {
            id: i64::from(seq) + node.unwrap_or(0) * 100,
            deployment: 7,
            node_id: node,
            seq,
            interface: "deploy".into(),
            step: "run_tasks".into(),
            task: Some(format!("task-{seq}")),
            status: status.into(),
            reason: None,
            attempt: 1,
            started_at: at.map(|a| a.0),
            finished_at: at.map(|a| a.1),
            exit_code: None,
            error: None,
            runs_on: Location::Os,
            output_len: 0,
        }
    }

    #[test]
    fn instant_runs_sit_side_by_side_at_a_readable_width() {
        let runs: Vec<RunLine> = (0..5)
            .map(|i| run(Some(1), i, "ok", Some((100, 100))))
            .collect();
        let s = svg(&dep(), &runs, &|n| format!("node-{n}"), 100);
        let xs: Vec<f64> = s
            .split("<rect ")
            .skip(1)
            .map(|r| {
                let at = r.find(" x=\"").unwrap() + 4;
                r[at..].split('"').next().unwrap().parse().unwrap()
            })
            .collect();
        assert_eq!(xs.len(), 5);
        for w in xs.windows(2) {
            assert!(w[1] >= w[0] + MIN_W, "bars overlap: {xs:?}");
        }
        assert!(s.contains(r#"width="8.0""#), "{s}");
    }

    #[test]
    fn long_names_are_cut_with_the_whole_name_in_a_title_and_lanes_are_bounded() {
        let long = "a-very-long-node-name-that-does-not-fit";
        let runs = vec![run(Some(1), 0, "ok", Some((100, 110)))];
        let s = svg(&dep(), &runs, &|_| long.to_string(), 200);
        assert!(s.contains(&format!("<title>{long}</title>")), "{s}");
        assert!(s.contains("a-very-long-node-na…"), "{s}");
        let many: Vec<RunLine> = (1..=60)
            .map(|n| {
                let status = if n == 55 { "failed" } else { "ok" };
                run(Some(n), 0, status, Some((100, 110)))
            })
            .chain([run(None, 0, "ok", Some((100, 100)))])
            .collect();
        let s = svg(&dep(), &many, &|n| format!("node-{n}"), 200);
        assert_eq!(s.matches("<g class=\"tl-lane\">").count(), MAX_LANES);
        assert!(s.contains(">stages<"), "the stages lane is kept");
        assert!(s.contains(">node-55<"), "a failed node is kept");
        assert!(s.contains("and 21 more nodes"), "{s}");
    }

    #[test]
    fn ten_thousand_nodes_keep_the_stages_the_failed_the_running_then_the_first() {
        let mut runs = vec![run(None, 0, "ok", Some((100, 101)))];
        for node in 1..=10_000 {
            for seq in 0..20 {
                let status = match (node, seq) {
                    (5000, 7) => "failed",
                    (7000, 3) | (9000, 19) => "running",
                    _ => "ok",
                };
                runs.push(run(
                    Some(node),
                    seq,
                    status,
                    Some((100 + i64::from(seq), 101)),
                ));
            }
        }
        let (lanes, left_out) = lanes(&runs);
        let mut want = vec![None, Some(5000), Some(7000), Some(9000)];
        want.extend((1..=36).map(Some));
        want.sort_by_key(|n| (n.is_some(), *n));
        assert_eq!(lanes, want);
        assert_eq!(left_out, 10_001 - MAX_LANES);
        let picture = svg(&dep(), &runs, &|n| format!("node-{n}"), 200);
        assert_eq!(picture.matches("<g class=\"tl-lane\">").count(), MAX_LANES);
        assert_eq!(picture.matches("<rect class=\"tl-failed\"").count(), 1);
        assert_eq!(picture.matches("<rect ").count(), 1 + 39 * 20);
        assert!(picture.contains("and 9961 more nodes"));
    }
}
