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
//! nodes it leaves out. The time axis is labelled at round steps (`250 ms` for a deployment
//! of a second, `15 min` for one of an hour), each label once.

use std::fmt::Write as _;

use crate::http::pages::views::duration;
use crate::store::{Deployment, RunLine, TimelineRuns};

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

/// Steps between the axis' ticks, in seconds: the first that gives at most [`MAX_TICKS`]
/// intervals is taken; longer spans step in whole weeks.
const TICK_STEPS: [f64; 22] = [
    0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
    7200.0, 10_800.0, 21_600.0, 43_200.0, 86_400.0, 172_800.0, 604_800.0,
];
/// Intervals between ticks at most: six labels over the plot keep 120 px apart.
const MAX_TICKS: f64 = 5.0;
/// A tick this close to the plot's right end (px) is anchored at its end, inside the picture.
const TICK_EDGE: f64 = 30.0;

/// A tick's label: milliseconds below a second, tenths of a second below a minute when not
/// whole, else [`duration`].
fn tick_label(secs: f64) -> String {
    if secs == 0.0 {
        "0 s".to_string()
    } else if secs < 1.0 {
        format!("{:.0} ms", secs * 1000.0)
    } else if secs.fract() != 0.0 {
        format!("{secs:.1} s")
    } else {
        duration(secs as i64)
    }
}

/// The axis' ticks over a span of `span` seconds (at least a second): offsets from the start
/// with their labels, at round steps, and the span's end itself when it is clear of the last
/// round one. Computed in seconds as `f64`, so a deployment of a second or two gets
/// `250 ms`, `500 ms` ... instead of several `0 s`; no label twice.
fn ticks(span: f64) -> Vec<(f64, String)> {
    let span = span.max(1.0);
    let step = TICK_STEPS
        .iter()
        .copied()
        .find(|s| span / s <= MAX_TICKS)
        .unwrap_or_else(|| (span / MAX_TICKS / 604_800.0).ceil() * 604_800.0);
    let mut out: Vec<(f64, String)> = Vec::new();
    let mut k = 0.0;
    while k * step <= span + 1e-9 {
        let at = k * step;
        out.push((at, tick_label(at)));
        k += 1.0;
    }
    // The end, unless the last round tick is (nearly) there: a fifth of a step apart at least.
    if out.last().is_some_and(|(at, _)| span - at >= step / 5.0) {
        out.push((span, tick_label(span)));
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|(_, label)| seen.insert(label.clone()));
    out
}

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
    draw(
        dep,
        runs,
        runs.len(),
        &lanes,
        left_out,
        (start, end),
        names,
        now,
    )
}

/// The timeline of a deployment of any size from what SQL counted and bounded
/// ([`TimelineRuns`]: the kept lanes' runs, how many lanes there are, the span): the same
/// picture [`svg`] draws from every run, without reading them all.
pub fn svg_of(
    dep: &Deployment,
    t: &TimelineRuns,
    names: &dyn Fn(i64) -> String,
    now: i64,
) -> String {
    let (lanes, _) = lanes(&t.lines);
    let left_out = t.lanes.saturating_sub(lanes.len());
    let start = t.first_start.unwrap_or(dep.created_at);
    let end = t
        .last_finish
        .into_iter()
        .chain((t.counts.running > 0).then_some(now))
        .max()
        .unwrap_or(start)
        .max(start + 1);
    draw(
        dep,
        &t.lines,
        t.counts.total,
        &lanes,
        left_out,
        (start, end),
        names,
        now,
    )
}

/// Draw `lanes` of `runs` over `start..end`, saying how many lanes were `left_out` and that
/// the deployment has `total` runs.
#[allow(clippy::too_many_arguments)]
fn draw(
    dep: &Deployment,
    runs: &[RunLine],
    total: usize,
    lanes: &[Option<i64>],
    left_out: usize,
    (start, end): (i64, i64),
    names: &dyn Fn(i64) -> String,
    now: i64,
) -> String {
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
        dep.id, total
    );
    for (at, label) in ticks(span) {
        let px = LABEL_W as f64 + at / span * PLOT_W as f64;
        let anchor = if at == 0.0 {
            "start"
        } else if px > (LABEL_W + PLOT_W) as f64 - TICK_EDGE {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            out,
            r#"<text class="tl-axis" x="{px:.1}" y="14" text-anchor="{anchor}">{label}</text>"#
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

    fn labels(span: f64) -> Vec<String> {
        ticks(span).into_iter().map(|(_, l)| l).collect()
    }

    #[test]
    fn the_axis_has_round_ticks_in_f64_and_no_label_twice() {
        // A zero-length deployment is drawn over a second: no row of "0 s".
        assert_eq!(labels(0.0), ["0 s", "250 ms", "500 ms", "750 ms", "1 s"]);
        assert_eq!(labels(1.0), labels(0.0));
        assert_eq!(labels(2.0), ["0 s", "500 ms", "1 s", "1.5 s", "2 s"]);
        assert_eq!(labels(3.0), ["0 s", "1 s", "2 s", "3 s"]);
        // The end is labelled when clear of the last round tick.
        assert_eq!(labels(7.0), ["0 s", "2 s", "4 s", "6 s", "7 s"]);
        assert_eq!(labels(61.0), ["0 s", "15 s", "30 s", "45 s", "1 min"]);
        assert_eq!(
            labels(3_725.0),
            ["0 s", "15 min", "30 min", "45 min", "1 h"]
        );
        assert_eq!(
            labels(4_500.0),
            ["0 s", "15 min", "30 min", "45 min", "1 h", "1 h 15 min"]
        );
        assert_eq!(labels(5.0 * 86_400.0)[1], "1 day");
        assert_eq!(labels(90.0 * 86_400.0)[1], "21 days");
        for span in [0.0, 1.0, 2.0, 3.0, 4.0, 9.0, 59.0, 600.0, 7_201.0, 1e7] {
            let t = ticks(span);
            let mut seen: Vec<&String> = t.iter().map(|(_, l)| l).collect();
            seen.dedup();
            assert_eq!(seen.len(), t.len(), "{span}: {t:?}");
            assert!(t.len() >= 2 && t.len() <= 7, "{span}: {t:?}");
            assert!(t.windows(2).all(|w| w[0].0 < w[1].0), "{span}: {t:?}");
        }
    }

    #[test]
    fn a_short_deployment_draws_each_axis_label_once() {
        let runs = vec![run(Some(1), 0, "ok", Some((100, 102)))];
        let s = svg(&dep(), &runs, &|n| format!("node-{n}"), 102);
        assert_eq!(s.matches(">0 s<").count(), 1, "{s}");
        assert!(s.contains(">500 ms<") && s.contains(">2 s<"), "{s}");
        assert!(
            s.contains(r#"text-anchor="end">2 s<"#),
            "the last label stays inside: {s}"
        );
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
        // The environment's page draws the same from what SQL gives it: the kept lanes' runs,
        // the counts, the number of lanes and the span.
        let bounded = TimelineRuns {
            counts: crate::store::RunCounts::of_lines(&runs),
            lines: runs
                .iter()
                .filter(|r| lanes.contains(&r.node_id))
                .cloned()
                .collect(),
            lanes: 10_001,
            first_start: runs.iter().filter_map(|r| r.started_at).min(),
            last_finish: runs.iter().filter_map(|r| r.finished_at).max(),
        };
        assert_eq!(bounded.lines.len(), 1 + 39 * 20);
        assert_eq!(
            svg_of(&dep(), &bounded, &|n| format!("node-{n}"), 200),
            picture
        );
    }
}
