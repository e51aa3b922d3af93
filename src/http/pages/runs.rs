//! How a run is shown, on the deployment page and on a node's page alike
//! (`web/templates/parts/runs.html`): its number, step or task, where it runs, status badge,
//! attempt, exit code (of every finished run that reported one, `0` too), start, duration,
//! error and output tail (collapsed; a failed run's open).
//!
//! **One numbering.** A node's graph tasks are numbered 1..n in the order the node runs them,
//! exactly as the plan numbers them (the environment page and `GET
//! /api/v1/clusters/{id}/plan?format=text`): a deployment runs every task of the node's plan,
//! skipped ones included (recorded as skipped), in plan order. The node's own deploy steps,
//! which the plan does not list, are numbered apart: `p1, p2, ...` for its provisioning steps
//! (the master's power step, write the image, configure, reboot to disk) and `d1, ...` for its
//! own steps on the installed OS (collecting logs). [`EXPLAIN`] says so on the pages.

use crate::engine::state::Phase;
use crate::http::pages::views::{clock, duration, utc};
use crate::store::RunLine;

/// The sentence the plan and the deployment page carry about the numbering.
pub const EXPLAIN: &str = "Tasks are numbered per node, 1 to n in the order the node runs \
     them, the same on the plan, in the text plan and on the deployment page. Each node also \
     runs deploy steps of its own, numbered apart: p1, p2, … are its provisioning steps (power \
     on from the network when it has a BMC, write the image, configure, reboot to disk; none \
     for a node already provisioned), d1, … its own steps on the installed system.";

/// Output tails longer than this are cut to it on list pages (the whole stored tail stays a
/// click away); a failed run's is shown whole.
pub const LIST_OUTPUT: usize = 2048;

/// One run, ready to show.
pub struct RunRow {
    pub id: i64,
    pub deployment: i64,
    /// `4` for the node's fourth task, `p2` for its second provisioning step.
    pub number: String,
    pub name: String,
    /// A task's run, not one of the node's own steps.
    pub is_task: bool,
    pub location: &'static str,
    pub status: String,
    pub badge: &'static str,
    pub attempt: u32,
    pub started: String,
    pub started_utc: String,
    pub duration: String,
    /// Its exit code, once it finished with one (`0` too); empty while pending or running.
    pub exit: String,
    pub error: String,
    /// Why it was skipped.
    pub reason: String,
    pub output: String,
    /// The output shown is the end of a longer one.
    pub output_cut: bool,
    pub output_lines: usize,
    /// Its details start open (it failed).
    pub open: bool,
}

/// The badge colour of a run status.
pub fn badge(status: &str) -> &'static str {
    match status {
        "ok" => "badge-ok",
        "failed" => "badge-error",
        "running" => "badge-progress",
        "pending" => "badge-info",
        _ => "badge-neutral",
    }
}

/// The badge colour of a deployment status.
pub fn deployment_badge(status: &str) -> &'static str {
    match status {
        "running" | "chaining" => "badge-progress",
        "done" => "badge-ok",
        "error" => "badge-error",
        _ => "badge-neutral",
    }
}

/// The numbers of one node's runs, given in the order it runs them (see the module's
/// documentation).
pub fn numbers(lines: &[&RunLine]) -> Vec<String> {
    let (mut task, mut prov, mut own) = (0, 0, 0);
    lines
        .iter()
        .map(|l| {
            if l.is_task() {
                task += 1;
                task.to_string()
            } else if l.runs_on.phase() == Phase::Provision {
                prov += 1;
                format!("p{prov}")
            } else {
                own += 1;
                format!("d{own}")
            }
        })
        .collect()
}

/// How much of an output the master keeps (`store::deployments`' tail): an output this long
/// was cut there, most likely in the middle of its first line.
const STORED_TAIL: usize = 8 * 1024;

/// The end of `s` within `max` bytes, cut on a line start when one is near; whether it was
/// cut (here, or by the master when it was stored).
fn last(s: &str, max: usize) -> (&str, bool) {
    let (rest, cut) = if s.len() <= max {
        if s.len() + 4 < STORED_TAIL {
            return (s, false);
        }
        (s, true)
    } else {
        let mut start = s.len() - max;
        while !s.is_char_boundary(start) {
            start += 1;
        }
        (&s[start..], true)
    };
    match rest.find('\n') {
        Some(nl) if nl < 200 => (&rest[nl + 1..], cut),
        _ => (rest, cut),
    }
}

impl RunRow {
    /// `line` numbered `number`, with its output tail if read (`None`: none), at `now`.
    pub fn new(line: &RunLine, number: String, output: Option<&str>, now: i64) -> RunRow {
        let failed = line.status == "failed";
        let output = output.unwrap_or("").trim_end();
        let (shown, cut) = last(output, if failed { STORED_TAIL } else { LIST_OUTPUT });
        let end = match line.status.as_str() {
            "running" => Some(now),
            _ => line.finished_at,
        };
        RunRow {
            id: line.id,
            deployment: line.deployment,
            number,
            name: line.name(),
            is_task: line.is_task(),
            location: line.runs_on.as_str(),
            status: line.status.clone(),
            badge: badge(&line.status),
            attempt: line.attempt,
            started: line.started_at.map(clock).unwrap_or_default(),
            started_utc: line.started_at.map(utc).unwrap_or_default(),
            duration: match (line.started_at, end) {
                (Some(s), Some(e)) => duration(e - s),
                _ => String::new(),
            },
            exit: match (line.status.as_str(), line.exit_code) {
                ("pending" | "running", _) | (_, None) => String::new(),
                (_, Some(c)) => c.to_string(),
            },
            error: line.error.clone().unwrap_or_default(),
            reason: line.reason.clone().unwrap_or_default(),
            output_lines: shown.lines().count(),
            output: shown.to_string(),
            output_cut: cut || (output.is_empty() && line.output_len > 0),
            open: failed,
        }
    }

    /// The last line of its output, for the collapsed summary.
    pub fn last_line(&self) -> &str {
        let l = self.output.lines().last().unwrap_or("");
        match l.char_indices().nth(80) {
            Some((at, _)) => &l[..at],
            None => l,
        }
    }

    /// Whether there is anything to unfold: an output or an error.
    pub fn has_details(&self) -> bool {
        !self.output.is_empty() || !self.error.is_empty() || self.output_cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::steps::Location;

    fn line(seq: u32, task: Option<&str>, step: &str, on: Location) -> RunLine {
        RunLine {
            id: i64::from(seq) + 1,
            deployment: 1,
            node_id: Some(1),
            seq,
            interface: "deploy".into(),
            step: step.into(),
            task: task.map(str::to_string),
            status: "ok".into(),
            reason: None,
            attempt: 1,
            started_at: Some(100),
            finished_at: Some(283),
            exit_code: Some(0),
            error: None,
            runs_on: on,
            output_len: 0,
        }
    }

    #[test]
    fn tasks_are_numbered_as_the_plan_numbers_them_and_own_steps_apart() {
        let lines = [
            line(0, None, "boot_network", Location::Master),
            line(1, None, "write_image", Location::Ramdisk),
            line(2, None, "configure", Location::Ramdisk),
            line(3, None, "reboot_to_disk", Location::Ramdisk),
            line(4, Some("hiera"), "run_tasks", Location::Os),
            line(5, Some("globals"), "run_tasks", Location::Os),
            line(6, None, "collect_logs", Location::Os),
        ];
        let refs: Vec<&RunLine> = lines.iter().collect();
        assert_eq!(numbers(&refs), ["p1", "p2", "p3", "p4", "1", "2", "d1"]);
    }

    #[test]
    fn rows_say_how_long_and_cut_long_outputs_on_a_line() {
        let mut l = line(4, Some("hiera"), "run_tasks", Location::Os);
        let long: String = (0..400).map(|i| format!("line {i}\n")).collect();
        let r = RunRow::new(&l, "1".into(), Some(&long), 1000);
        assert_eq!(r.duration, "3 min 3 s");
        assert_eq!(r.exit, "0", "a success's exit code is shown too");
        assert!(r.output_cut);
        assert!(r.output.len() <= LIST_OUTPUT);
        assert!(
            r.output.starts_with("line "),
            "cut on a line: {}",
            &r.output[..20]
        );
        assert_eq!(r.last_line(), "line 399");
        assert!(!r.open);
        l.status = "failed".into();
        let r = RunRow::new(&l, "1".into(), Some(&long), 1000);
        assert!(r.open && !r.output_cut, "a failed run's output whole");
        assert_eq!(r.output, long.trim_end());
        // A tail the master cut when it stored it loses its partial first line.
        let stored = &long.repeat(3)[long.len() * 3 - STORED_TAIL + 3..];
        let r = RunRow::new(&l, "1".into(), Some(stored), 1000);
        assert!(
            r.output_cut && r.output.starts_with("line "),
            "{}",
            &r.output[..20]
        );
        assert_eq!(r.exit, "0");
        l.exit_code = None;
        let r = RunRow::new(&l, "1".into(), None, 1000);
        assert_eq!(r.exit, "", "a run that reported no code");
        l.exit_code = Some(0);
        l.status = "running".into();
        let r = RunRow::new(&l, "1".into(), None, 160);
        assert_eq!(r.exit, "", "a running run has no exit code yet");
        assert_eq!(r.duration, "1 min");
        assert!(!r.has_details());
    }
}
