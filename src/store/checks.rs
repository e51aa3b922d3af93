//! Checks: deployments that judge instead of change (network verification, [`VERIFY`]). A
//! check is a `deployments` row with one run per node (`network.verify`, its probe's spec as
//! arguments), handed to the node's agent where it is now (the bootstrap's or the installed
//! OS's), so it is listed, timed out and stopped as any transaction. It moves no node or
//! environment state; when its runs are over, the probes' reports are judged by the pure
//! [`crate::engine::network::verify::judge`] into its status, message and result. A check
//! refused before it starts (too few nodes online, the environment deploying) is recorded
//! finished in error with the reason, as Nailgun's task is.

use rusqlite::{OptionalExtension, params};
use serde_json::Value as J;

use super::deployments::VERIFY;
use super::{Deployment, Result, StoreError, WriteTxn};
use crate::engine::network::verify::{self, Expected, Received};
use crate::engine::orchestrate::Progress;

/// One node's probe of a new check.
#[derive(Debug, Clone)]
pub struct Probe {
    pub node: i64,
    /// The run's arguments: the probe's spec, with what judging needs (name, MACs).
    pub args: J,
    pub timeout_s: u64,
}

impl WriteTxn<'_> {
    /// Start a check of `cluster_id` with one run per probe, or, with `refusal`, record one
    /// finished in error saying why. Refused (conflict) while another transaction of the
    /// environment runs.
    pub fn create_check(
        &self,
        cluster_id: i64,
        probes: &[Probe],
        refusal: Option<&str>,
        now: i64,
    ) -> Result<Deployment> {
        let cluster = self.read().existing_cluster(cluster_id)?;
        self.read().refuse_if_busy(cluster_id, None)?;
        let (status, finished) = match refusal {
            Some(_) => ("error", Some(now)),
            None => ("running", None),
        };
        // One id space with the master's tasks (`master_tasks`).
        let dep = self.take_id(&super::ids::TRANSACTIONS)?;
        self.conn.execute(
            "INSERT INTO deployments (id, cluster_id, status, created_at, finished_at, name,
               graph_type, message)
             VALUES (?7, ?1, ?2, ?3, ?4, ?5, ?5, ?6)",
            params![cluster_id, status, now, finished, VERIFY, refusal, dep],
        )?;
        if let Some(why) = refusal {
            self.add_event(
                now,
                super::About::deployment(dep),
                "verification.refused",
                &format!("network verification {dep} of {}: {why}", cluster.name),
            )?;
            return self.existing_deployment(dep);
        }
        for p in probes {
            let runs_on: Option<String> = self
                .conn
                .prepare_cached("SELECT agent_kind FROM nodes WHERE id = ?1")?
                .query_row([p.node], |r| r.get(0))
                .optional()?;
            let runs_on = runs_on.ok_or_else(|| StoreError::NotFound {
                entity: "node",
                id: p.node.to_string(),
            })?;
            self.conn.execute(
                "INSERT INTO step_runs (deployment, node_id, seq, interface, step, args, deps,
                   timeout_s, status, runs_on)
                 VALUES (?1, ?2, 0, 'network', 'verify', ?3, '[]', ?4, 'pending', ?5)",
                params![dep, p.node, p.args.to_string(), p.timeout_s as i64, runs_on],
            )?;
        }
        self.add_event(
            now,
            super::About::deployment(dep),
            "verification.started",
            &format!(
                "network verification {dep} of {} started on {} nodes",
                cluster.name,
                probes.len()
            ),
        )?;
        self.advance(dep, None, now)?;
        self.existing_deployment(dep)
    }

    /// A running check whose runs are all over is judged: every node's probe spec against
    /// what the probes that reported heard.
    pub(super) fn advance_check(&self, d: &Deployment, now: i64) -> Result<()> {
        if d.status != "running" {
            self.forget_schedule(d.id);
            return Ok(());
        }
        if self.with_schedule(d.id, |s| s.progress())? == Progress::Going {
            return Ok(());
        }
        self.forget_schedule(d.id);
        let runs = self.read().runs(d.id)?;
        let mut expected: Vec<Expected> = Vec::with_capacity(runs.len());
        let mut received: Vec<Received> = Vec::new();
        let mut failures: Vec<String> = Vec::new();
        for run in &runs {
            let Some(node) = run.node_id else { continue };
            expected.push(verify::expected_of_spec(node, &run.args));
            let report = (run.status == "ok")
                .then_some(run.report.as_ref())
                .flatten()
                .and_then(|r| verify::received_of_report(node, r));
            match report {
                Some(r) => received.push(r),
                None => failures.push(format!(
                    "node-{node}: {}",
                    run.error
                        .as_deref()
                        .unwrap_or("the probe returned no report")
                )),
            }
        }
        let verdict = verify::judge(&expected, &received);
        let status = if verdict.status == "ready" {
            "done"
        } else {
            "error"
        };
        let mut message = verdict.message.clone();
        if !failures.is_empty() {
            let why = failures.join("; ");
            message = Some(match message {
                Some(m) => format!("{m} ({why})"),
                None => why,
            });
        }
        let result = serde_json::to_string(&verdict.result).map_err(|e| StoreError::Corrupt {
            what: "verification result",
            detail: e.to_string(),
        })?;
        self.conn.execute(
            "UPDATE deployments SET status = ?1, finished_at = ?2, message = ?3, result = ?4
             WHERE id = ?5",
            params![status, now, message, result, d.id],
        )?;
        self.deployment_changed(d.id)?;
        self.add_event(
            now,
            super::About::deployment(d.id),
            "verification.done",
            &format!(
                "network verification {}: {}",
                d.id,
                message.as_deref().unwrap_or("every network verified")
            ),
        )?;
        Ok(())
    }
}
