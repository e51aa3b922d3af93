//! The wire types of the agent ↔ master deploy protocol (issue 7): what `POST
//! /api/v1/agent/next` answers, the run it hands out, and the output and result reports the agent
//! sends back. Plain serde structs: the agent's loop (`deploy`) speaks through them; the master's
//! handlers (`http::node::steps`) read the same JSON with bodies of their own that take what
//! older agents send, and answer with the shapes these types read (the agent tests' fake
//! master and the integration tests' real one hold both to it). No agent logic and no I/O
//! belong in this file.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Body of `POST /api/v1/agent/next`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextRequest {
    pub node_id: i64,
    /// How long the master may hold the call while nothing is due for the node, in seconds
    /// (long-poll): it answers as soon as a run is due, or `wait` with `retry_after_ms` 0 when
    /// the time is up. A master that does not hold calls ignores it and answers at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_s: Option<u64>,
}

/// The master's answer to `next`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
// One reply lives for one poll; boxing the run would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum NextReply {
    /// Nothing runnable now: poll again after this delay.
    Wait { retry_after_ms: u64 },
    /// Execute this run now, then report its result. `agent_token`, when present, is the
    /// node's new token (rotated per deployment): use it from now on.
    Run {
        run: Run,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_token: Option<String>,
    },
}

/// One step run handed to a node. `(id, attempt)` identifies it: a re-handed run (the master
/// believes it was still running when the agent asked again) comes with `attempt + 1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub id: i64,
    pub attempt: u32,
    pub deployment: i64,
    pub timeout_s: u64,
    pub step: Step,
    /// The graph task, for `deploy.run_tasks`; null otherwise.
    #[serde(default)]
    pub task: Option<TaskSpec>,
}

/// A deploy step as the agent sees it: `interface.name` and its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub interface: String,
    pub name: String,
    #[serde(default)]
    pub args: Value,
}

/// One graph task, already rendered by the master (YAQL evaluated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub parameters: Value,
}

/// Body of `POST /api/v1/agent/runs/{id}/output`: the last 8 KiB of output so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputReport {
    pub attempt: u32,
    pub tail: String,
}

/// Body of `POST /api/v1/agent/runs/{id}/result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResult {
    pub attempt: u32,
    pub ok: bool,
    pub exit_code: Option<i32>,
    pub output_tail: String,
    pub error: Option<String>,
    pub duration_ms: u64,
    /// What the step reports beside its output (a network probe: the frames it heard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<serde_json::Value>,
}

/// Body of `POST /api/v1/agent/runs/{id}/result`: the result, and whether the master should
/// hand out the node's next run in its answer ([`ResultAck::next`]) when one is due at once.
/// An agent about to reboot does not ask: it would not run what it was handed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResultRequest<'a> {
    #[serde(flatten)]
    pub result: &'a RunResult,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub claim_next: bool,
}

/// The master's answer to a result (200). `next`, when the result asked for it and a run was
/// due for this agent at once: that run, as `next` would have answered it (a master that does
/// not hand runs out this way never sends it; the agent then asks `next`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultAck {
    pub accepted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<NextReply>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn next_replies_match_the_documented_json() {
        let wait: NextReply =
            serde_json::from_value(json!({"action": "wait", "retry_after_ms": 1000})).unwrap();
        assert_eq!(
            wait,
            NextReply::Wait {
                retry_after_ms: 1000
            }
        );
        let run = json!({"action": "run", "run": {"id": 123, "attempt": 1, "deployment": 5,
            "timeout_s": 600, "step": {"interface": "deploy", "name": "write_image",
            "args": {"image_url": "http://m/i.raw"}}, "task": null}});
        let reply: NextReply = serde_json::from_value(run.clone()).unwrap();
        let NextReply::Run { run: r, .. } = &reply else {
            panic!("{reply:?}")
        };
        assert_eq!(
            (r.id, r.attempt, r.deployment, r.timeout_s),
            (123, 1, 5, 600)
        );
        assert_eq!(r.step.name, "write_image");
        assert_eq!(r.task, None);
        assert_eq!(serde_json::to_value(&reply).unwrap(), run);

        let task = json!({"action": "run", "run": {"id": 9, "attempt": 2, "deployment": 5,
            "timeout_s": 60, "step": {"interface": "deploy", "name": "run_tasks"},
            "task": {"id": "netconfig", "type": "shell", "parameters": {"cmd": "true"}}}});
        let NextReply::Run { run, .. } = serde_json::from_value(task).unwrap() else {
            panic!()
        };
        assert_eq!(run.task.unwrap().kind, "shell");
        assert_eq!(run.step.args, Value::Null);
    }

    #[test]
    fn a_next_request_asks_to_be_held_only_when_it_says_so() {
        let held = NextRequest {
            node_id: 3,
            wait_s: Some(20),
        };
        assert_eq!(
            serde_json::to_value(&held).unwrap(),
            json!({"node_id": 3, "wait_s": 20})
        );
        let polled: NextRequest = serde_json::from_value(json!({"node_id": 3})).unwrap();
        assert_eq!(polled.wait_s, None);
        assert_eq!(
            serde_json::to_value(&polled).unwrap(),
            json!({"node_id": 3}),
            "an agent that polls sends what agents always sent"
        );
    }

    #[test]
    fn result_body_matches_the_documented_json() {
        let r = RunResult {
            attempt: 1,
            ok: true,
            exit_code: Some(0),
            output_tail: "...".into(),
            error: None,
            duration_ms: 1234,
            report: None,
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"attempt": 1, "ok": true, "exit_code": 0, "output_tail": "...",
                   "error": null, "duration_ms": 1234})
        );
        // Asking for the next run adds one field; not asking sends what agents always sent.
        let asks = ResultRequest {
            result: &r,
            claim_next: true,
        };
        assert_eq!(
            serde_json::to_value(&asks).unwrap(),
            json!({"attempt": 1, "ok": true, "exit_code": 0, "output_tail": "...",
                   "error": null, "duration_ms": 1234, "claim_next": true})
        );
        let quiet = ResultRequest {
            result: &r,
            claim_next: false,
        };
        assert_eq!(
            serde_json::to_value(&quiet).unwrap(),
            serde_json::to_value(&r).unwrap()
        );
        // A master's answer without `next` (every master before it) reads as none.
        let ack: ResultAck = serde_json::from_value(json!({"accepted": true})).unwrap();
        assert_eq!(ack.next, None);
        let ack: ResultAck = serde_json::from_value(json!({"accepted": true, "next": {
            "action": "run", "agent_token": "t", "run": {"id": 8, "attempt": 1,
            "deployment": 5, "timeout_s": 60, "step": {"interface": "deploy",
            "name": "run_tasks"}, "task": null}}}))
        .unwrap();
        assert!(
            matches!(&ack.next, Some(NextReply::Run { run, agent_token: Some(t) })
                     if run.id == 8 && t == "t"),
            "{ack:?}"
        );
    }
}
