//! Following a long operation: a POST or DELETE the BMC answered with a task (202 and a
//! `Location`, or a Task document). The task is read every poll interval until its
//! `TaskState` ends it (Completed; Exception, Killed or Cancelled) or the wait is over; each
//! change of state or percentage is reported as a progress line. A task monitor (as opposed to
//! the Task resource) answers 202 while the operation runs and the operation's own answer once
//! it is done; that answer ends the wait as completed.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::BmcError;
use super::Conn;
use super::http::clean;

/// How a task ended well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TaskEnd {
    /// The task's path.
    pub path: String,
    /// Its `Messages[].Message`.
    pub messages: Vec<String>,
}

/// The task monitor of a POST's answer: its `Location`, else the body's Task (`@odata.id` of a
/// document with a `TaskState`) or `TaskMonitor`.
pub(super) fn monitor_link(location: Option<&str>, body: &Value) -> Option<String> {
    location
        .map(str::to_string)
        .or_else(|| {
            body.get("TaskState")
                .and(body["@odata.id"].as_str())
                .map(str::to_string)
        })
        .or_else(|| body["TaskMonitor"].as_str().map(str::to_string))
}

/// A task's messages, cleaned, at most 16.
pub(super) fn task_messages(task: &Value) -> Vec<String> {
    task["Messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["Message"].as_str())
        .map(clean)
        .filter(|m| !m.is_empty())
        .take(16)
        .collect()
}

pub(super) fn joined(messages: &[String]) -> String {
    if messages.is_empty() {
        "no messages".to_string()
    } else {
        messages.join("; ")
    }
}

impl Conn {
    /// Follow the task at `path` until it ends or `wait` passes.
    pub(super) fn follow_task(
        &mut self,
        path: &str,
        wait: Duration,
        progress: &mut dyn FnMut(&str),
    ) -> Result<TaskEnd, BmcError> {
        let deadline = Instant::now() + wait;
        let mut last: Option<(String, Option<u64>)> = None;
        loop {
            let answer = self.client.request("GET", path, None, None)?;
            if !answer.success() {
                return Err(self.client.refused("GET", path, &answer));
            }
            let task = &answer.body;
            let state = task["TaskState"].as_str().map(clean);
            let percent = task["PercentComplete"].as_u64().filter(|p| *p <= 100);
            if let Some(state) = &state {
                let now = (state.clone(), percent);
                if last.as_ref() != Some(&now) {
                    let pct = percent.map(|p| format!(" {p}%")).unwrap_or_default();
                    progress(&format!("task {path}: {state}{pct}"));
                    last = Some(now);
                }
            }
            let messages = task_messages(task);
            match state.as_deref() {
                Some("Completed") => {
                    if task["TaskStatus"] == "Critical" {
                        return Err(self.failed(format!(
                            "task {path} completed with status Critical: {}",
                            joined(&messages)
                        )));
                    }
                    return Ok(TaskEnd {
                        path: path.to_string(),
                        messages,
                    });
                }
                Some(s @ ("Exception" | "Killed" | "Cancelled")) => {
                    return Err(
                        self.failed(format!("task {path} ended {s}: {}", joined(&messages)))
                    );
                }
                Some(_) => {}
                // A monitor's answer once the operation is done (anything but 202).
                None if answer.status != 202 => {
                    return Ok(TaskEnd {
                        path: path.to_string(),
                        messages,
                    });
                }
                None => {}
            }
            let now = Instant::now();
            if now >= deadline {
                let was = last
                    .map(|(s, p)| format!("{s}{}", p.map(|p| format!(" {p}%")).unwrap_or_default()))
                    .unwrap_or_else(|| "running".to_string());
                return Err(self.failed(format!(
                    "task {path} did not end within {} s (last: {was})",
                    wait.as_secs()
                )));
            }
            std::thread::sleep(self.poll_interval.min(deadline - now));
        }
    }

    pub(super) fn failed(&self, message: String) -> BmcError {
        BmcError::Failed {
            address: self.client.address().to_string(),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_monitor_is_the_location_else_the_task_in_the_body() {
        let task = json!({"@odata.id": "/redfish/v1/TaskService/Tasks/3", "TaskState": "New"});
        assert_eq!(
            monitor_link(Some("/taskmon/1"), &task).as_deref(),
            Some("/taskmon/1")
        );
        assert_eq!(
            monitor_link(None, &task).as_deref(),
            Some("/redfish/v1/TaskService/Tasks/3")
        );
        assert_eq!(
            monitor_link(None, &json!({"TaskMonitor": "/taskmon/9"})).as_deref(),
            Some("/taskmon/9")
        );
        // A document that is not a task (a created resource) is no monitor.
        assert_eq!(
            monitor_link(None, &json!({"@odata.id": "/redfish/v1/Systems/1"})),
            None
        );
        assert_eq!(monitor_link(None, &Value::Null), None);
    }

    #[test]
    fn task_messages_are_cleaned_and_bounded() {
        let many: Vec<Value> = (0..40)
            .map(|i| json!({"Message": format!("line\n{i}")}))
            .collect();
        let got = task_messages(&json!({ "Messages": many }));
        assert_eq!(got.len(), 16);
        assert_eq!(got[0], "line 0");
        assert!(task_messages(&json!({"Messages": "x"})).is_empty());
    }
}
