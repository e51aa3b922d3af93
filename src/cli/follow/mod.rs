//! Following a deployment to its end (`env deploy --follow`, `env retry --follow`,
//! `deployment follow ID`, `deployment show ID --follow`): snapshots of it come from one
//! source ([`Poll::next`], the API once a second; an events stream can take its place there
//! and nothing else changes), [`progress`] turns them into changes, [`render`] shows them (bars
//! on a terminal, lines elsewhere; with `-o json|yaml` the lines go to standard error and the
//! last snapshot is printed as the document). A failed step is shown with its output tail,
//! fetched when it fails. Exit 0 when the deployment is done, 1 when it ends in error or is
//! aborted. A master that stops answering is waited for up to [`PATIENCE`] before giving up
//! (exit 6): it carries a deployment on after a restart.

pub mod progress;
pub mod render;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use progress::{Change, End, Progress, RunHead, Snapshot, end_of};
use render::{Bars, Lines, View};

use super::client::{Api, ApiFailure};
use super::deployment::node_labels;
use super::output::{self, Out};

/// How often the API is asked.
pub const EVERY: Duration = Duration::from_secs(1);
/// How long an unreachable master is waited for.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Where the follower learns how deployment `id` stands: the API, polled every `every`.
pub struct Poll<'a> {
    api: &'a Api,
    id: i64,
    every: Duration,
    asked: Option<Instant>,
}

impl<'a> Poll<'a> {
    pub fn new(api: &'a Api, id: i64, every: Duration) -> Poll<'a> {
        Poll {
            api,
            id,
            every,
            asked: None,
        }
    }

    /// The next snapshot: at most one every `every` (the first at once).
    pub fn next(&mut self) -> Result<Snapshot, ApiFailure> {
        if let Some(at) = self.asked {
            std::thread::sleep(self.every.saturating_sub(at.elapsed()));
        }
        self.asked = Some(Instant::now());
        let path = format!("/api/v1/deployments/{}/runs?brief=1", self.id);
        let raw = self.api.runs(&path)?;
        Snapshot::parse(raw).map_err(|e| ApiFailure::BadAnswer {
            path,
            reason: e.to_string(),
        })
    }
}

/// The output tail of failed run `run` of deployment `id`.
fn failed_output(api: &Api, id: i64, run: &RunHead) -> Result<String, ApiFailure> {
    let node = run
        .node_id
        .map(|n| format!("&node_id={n}"))
        .unwrap_or_default();
    let doc = api.runs(&format!(
        "/api/v1/deployments/{id}/runs?status=failed{node}"
    ))?;
    Ok(doc["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["id"] == run.id)
        .and_then(|r| r["output_tail"].as_str())
        .unwrap_or("")
        .to_string())
}

/// The line that ends the follow.
fn summary(s: &Snapshot) -> String {
    let count = |st: &str| s.runs.iter().filter(|r| r.status == st).count();
    let d = &s.deployment;
    format!(
        "deployment {} {}: {} ok, {} failed, {} skipped of {} steps, in {}",
        d.id,
        d.status,
        count("ok"),
        count("failed"),
        count("skipped"),
        s.runs.len(),
        output::took(d.created_at, d.finished_at)
    )
}

/// Follow deployment `id` to its end.
pub fn follow(api: &Api, id: i64, out: &Out) -> anyhow::Result<ExitCode> {
    let labels = node_labels(api)?;
    let label = |node: Option<i64>| match node {
        Some(n) => labels
            .get(&n)
            .cloned()
            .unwrap_or_else(|| format!("node-{n}")),
        None => "master".to_string(),
    };
    let mut view: Box<dyn View> = if out.structured() {
        Box::new(Lines::new(Box::new(std::io::stderr()), false))
    } else if out.terminal {
        Box::new(Bars::new(out.colour))
    } else {
        Box::new(Lines::new(Box::new(std::io::stdout()), out.colour))
    };
    let mut source = Poll::new(api, id, EVERY);
    let mut progress = Progress::default();
    let mut lost: Option<Instant> = None;
    loop {
        let snap = match source.next() {
            Ok(s) => {
                if lost.take().is_some() {
                    view.note("the master answers again");
                }
                s
            }
            Err(e @ ApiFailure::Unreachable { .. }) => {
                let since = *lost.get_or_insert_with(Instant::now);
                if since.elapsed() >= PATIENCE {
                    return Err(e.into());
                }
                if since.elapsed() < EVERY {
                    view.note(&format!("{e}; trying again for {} s", PATIENCE.as_secs()));
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        for change in progress.update(&snap) {
            match change {
                Change::Node(p) => view.node(&label(Some(p.node)), &p),
                Change::Failed(run) => {
                    let tail = failed_output(api, id, &run)?;
                    view.failure(&label(run.node_id), &run, &tail);
                }
                Change::Waiting(Some(m)) => view.note(&m),
                Change::Waiting(None) => view.note("no longer waiting"),
            }
        }
        let done = snap
            .runs
            .iter()
            .filter(|r| matches!(r.status.as_str(), "ok" | "failed" | "skipped"))
            .count();
        view.overall(&snap.deployment, done, snap.runs.len());
        if let Some(end) = end_of(&snap.deployment.status) {
            view.end(&summary(&snap));
            if out.structured() {
                out.document(&snap.raw)?;
            }
            return Ok(match end {
                End::Done => ExitCode::SUCCESS,
                End::Failed => ExitCode::FAILURE,
            });
        }
    }
}
