//! How a followed deployment is shown: on a terminal, a progress bar per node (indicatif:
//! steps done of the node's steps, the step running now) under an overall bar; elsewhere (a
//! pipe, a log file, CI) one line per change. Both print a failed step's node, name, attempt,
//! exit code, error and output tail when it fails, and a summary at the end.

use std::io::Write;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::progress::{Head, NodeProgress, NodeState, RunHead};
use crate::cli::output::{self, Tone, paint};

/// Something that shows a deployment's progress.
pub trait View {
    /// A node's progress changed (`label`: its host name).
    fn node(&mut self, label: &str, p: &NodeProgress);
    /// The deployment as a whole: `done` of `total` steps finished.
    fn overall(&mut self, head: &Head, done: usize, total: usize);
    /// A step failed: `output` is its kept output tail.
    fn failure(&mut self, label: &str, run: &RunHead, output: &str);
    /// Something to say between the updates (the master waits on a silent agent).
    fn note(&mut self, text: &str);
    /// The deployment ended: the summary line.
    fn end(&mut self, summary: &str);
}

/// The block printed for a failed step.
fn failure_text(colour: bool, label: &str, run: &RunHead, out: &str) -> String {
    let mut text = format!(
        "{label}: {} {} (attempt {}, exit code {}): {}\n",
        run.name(),
        paint(colour, "failed", Tone::Bad),
        run.attempt,
        run.exit_code.map_or("-".to_string(), |c| c.to_string()),
        run.error.as_deref().unwrap_or("-"),
    );
    if out.trim().is_empty() {
        text.push_str("  (no output)\n");
    } else {
        text.push_str(&output::tail(out, 20, "  | "));
    }
    text
}

/// What a node's line or bar says after its count.
fn state_text(colour: bool, p: &NodeProgress) -> String {
    let step = p.current.as_deref().unwrap_or("");
    match p.state {
        NodeState::Waiting => paint(colour, "waiting", Tone::Quiet),
        NodeState::Running => format!("{} {step}", paint(colour, "running", Tone::Busy)),
        NodeState::Done => paint(colour, "done", Tone::Good),
        NodeState::Failed => format!("{} {step}", paint(colour, "failed", Tone::Bad)),
    }
}

/// One line per change, to standard output (or standard error when standard output carries
/// a document).
pub struct Lines {
    to: Box<dyn Write>,
    colour: bool,
    last_overall: Option<(String, usize)>,
}

impl Lines {
    pub fn new(to: Box<dyn Write>, colour: bool) -> Lines {
        Lines {
            to,
            colour,
            last_overall: None,
        }
    }

    fn say(&mut self, text: &str) {
        // A closed pipe is the reader being done; the deployment goes on without it.
        let _ = self.to.write_all(text.as_bytes());
        let _ = self.to.flush();
    }
}

impl View for Lines {
    fn node(&mut self, label: &str, p: &NodeProgress) {
        let line = format!(
            "{label}  {}/{}  {}\n",
            p.done,
            p.total,
            state_text(self.colour, p)
        );
        self.say(&line);
    }

    fn overall(&mut self, head: &Head, done: usize, total: usize) {
        // Only when the status changes: the node lines carry the counts.
        let now = (head.status.clone(), total);
        if self.last_overall.as_ref() != Some(&now) {
            let line = format!(
                "deployment {} {}: {done}/{total} steps\n",
                head.id,
                paint(self.colour, &head.status, output::tone(&head.status))
            );
            self.say(&line);
            self.last_overall = Some(now);
        }
    }

    fn failure(&mut self, label: &str, run: &RunHead, out: &str) {
        let text = failure_text(self.colour, label, run, out);
        self.say(&text);
    }

    fn note(&mut self, text: &str) {
        self.say(&format!("{text}\n"));
    }

    fn end(&mut self, summary: &str) {
        self.say(&format!("{summary}\n"));
    }
}

/// A bar per node under an overall bar, on the terminal of standard output.
pub struct Bars {
    multi: MultiProgress,
    overall: ProgressBar,
    nodes: std::collections::BTreeMap<String, ProgressBar>,
    style: ProgressStyle,
    colour: bool,
}

impl Bars {
    pub fn new(colour: bool) -> Bars {
        let template = if colour {
            "{prefix:>14.bold} [{bar:30.green/white}] {pos:>3}/{len:3} {wide_msg}"
        } else {
            "{prefix:>14} [{bar:30}] {pos:>3}/{len:3} {wide_msg}"
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let overall = multi.add(ProgressBar::new(0).with_style(style.clone()));
        overall.set_prefix("deployment");
        Bars {
            multi,
            overall,
            nodes: Default::default(),
            style,
            colour,
        }
    }

    fn bar(&mut self, label: &str) -> &ProgressBar {
        let (multi, style) = (&self.multi, &self.style);
        self.nodes.entry(label.to_string()).or_insert_with(|| {
            let bar = multi.add(ProgressBar::new(0).with_style(style.clone()));
            bar.set_prefix(label.to_string());
            bar
        })
    }
}

impl View for Bars {
    fn node(&mut self, label: &str, p: &NodeProgress) {
        let colour = self.colour;
        let bar = self.bar(label);
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(state_text(colour, p));
    }

    fn overall(&mut self, head: &Head, done: usize, total: usize) {
        self.overall.set_prefix(format!("deployment {}", head.id));
        self.overall.set_length(total as u64);
        self.overall.set_position(done as u64);
        self.overall
            .set_message(paint(self.colour, &head.status, output::tone(&head.status)));
    }

    fn failure(&mut self, label: &str, run: &RunHead, out: &str) {
        let text = failure_text(self.colour, label, run, out);
        let _ = self.multi.println(text.trim_end());
    }

    fn note(&mut self, text: &str) {
        let _ = self.multi.println(text);
    }

    fn end(&mut self, summary: &str) {
        self.overall.abandon();
        for bar in self.nodes.values() {
            bar.abandon();
        }
        let _ = self.multi.println(summary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Buffer(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_say_each_change_and_a_failure_with_its_tail() {
        let buf = Buffer::default();
        let mut v = Lines::new(Box::new(buf.clone()), false);
        let head = Head {
            id: 7,
            status: "running".into(),
            ..Head::default()
        };
        v.overall(&head, 0, 3);
        v.overall(&head, 1, 3);
        v.node(
            "node-1",
            &NodeProgress {
                node: 1,
                total: 3,
                done: 1,
                current: Some("keystone".into()),
                state: NodeState::Running,
            },
        );
        let run = RunHead {
            id: 2,
            node_id: Some(1),
            task: Some("keystone".into()),
            status: "failed".into(),
            attempt: 1,
            exit_code: Some(1),
            error: Some("exit 1".into()),
            ..RunHead::default()
        };
        v.failure("node-1", &run, "line 1\nline 2\n");
        v.end("deployment 7 error");
        let text = String::from_utf8(buf.0.borrow().clone()).unwrap();
        assert_eq!(
            text,
            "deployment 7 running: 0/3 steps\n\
             node-1  1/3  running keystone\n\
             node-1: keystone failed (attempt 1, exit code 1): exit 1\n  | line 1\n  | line 2\n\
             deployment 7 error\n"
        );
    }
}
