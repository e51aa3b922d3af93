//! A deployment drawn as a timeline for the environment page: one lane per node (the sync
//! node's stages on top), one bar per run from its start to its end (to `now` while it runs),
//! coloured by result, with the step or task and its outcome in a tooltip. Server-rendered
//! SVG; the page refreshes it without a reload while the deployment runs.

use std::fmt::Write as _;

use crate::store::{Deployment, Run};

const LANE_H: usize = 26;
const LABEL_W: usize = 150;
const PLOT_W: usize = 900;
const TOP: usize = 24;

/// HTML/XML escaping by askama, the escaper the dashboard's templates use.
fn escape(s: &str) -> String {
    askama::filters::escape(s, askama::filters::Html)
        .map_or_else(|never| match never {}, |safe| safe.to_string())
}

/// The timeline of `dep` as SVG. `names` maps node ids to labels; `now` closes running bars.
pub fn svg(dep: &Deployment, runs: &[Run], names: &dyn Fn(i64) -> String, now: i64) -> String {
    let mut lanes: Vec<Option<i64>> = Vec::new();
    for r in runs {
        if !lanes.contains(&r.node_id) {
            lanes.push(r.node_id);
        }
    }
    lanes.sort_by_key(|l| l.map_or(-1, |n| n));
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
    let height = TOP + lanes.len().max(1) * LANE_H + 8;
    let width = LABEL_W + PLOT_W + 16;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Deployment {} timeline: {} runs">"#,
        dep.id,
        runs.len()
    );
    let _ = write!(
        out,
        r#"<text class="tl-axis" x="{LABEL_W}" y="14">0 s</text><text class="tl-axis" x="{}" y="14" text-anchor="end">{} s</text>"#,
        LABEL_W + PLOT_W,
        end - start
    );
    for (i, lane) in lanes.iter().enumerate() {
        let y = TOP + i * LANE_H;
        let label = lane.map_or_else(|| "stages".to_string(), names);
        let _ = write!(
            out,
            r#"<g class="tl-lane"><line x1="0" x2="{}" y1="{}" y2="{}"/><text x="4" y="{}">{}</text></g>"#,
            width,
            y + LANE_H,
            y + LANE_H,
            y + 17,
            escape(&label)
        );
        for r in runs.iter().filter(|r| r.node_id == *lane) {
            let Some(s) = r.started_at else {
                continue;
            };
            let e = if r.status == "running" {
                now
            } else {
                r.finished_at.unwrap_or(s)
            };
            let x0 = x(s);
            let w = (x(e) - x0).max(3.0);
            let what = r
                .task
                .clone()
                .unwrap_or_else(|| format!("{}.{}", r.interface, r.step));
            let mut tip = format!("{what}: {} (attempt {}), {} s", r.status, r.attempt, e - s);
            if let Some(err) = &r.error {
                let _ = write!(tip, " — {err}");
            }
            let _ = write!(
                out,
                r#"<rect class="tl-{}" x="{x0:.1}" y="{}" width="{w:.1}" height="{}" rx="2"><title>{}</title></rect>"#,
                r.status,
                y + 5,
                LANE_H - 10,
                escape(&tip)
            );
        }
    }
    out.push_str("</svg>");
    out
}
