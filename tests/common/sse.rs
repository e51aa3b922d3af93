//! A server-sent events client for tests: reads a stream on a thread of its own and hands its
//! events over as they are parsed (`id`, `event`, `data`), as a browser's EventSource would.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One event of a stream.
#[derive(Debug, Clone)]
pub struct Sse {
    pub id: Option<u64>,
    pub event: String,
    pub data: serde_json::Value,
}

/// An open stream.
pub struct Stream {
    pub status: u16,
    pub content_type: String,
    events: mpsc::Receiver<Sse>,
    /// What the stream sent before `ready` (a replay, a reset).
    pub opening: Vec<Sse>,
}

impl Stream {
    /// Open `url` with `headers`; waits for its `ready` event (or returns at once with the
    /// refusal's status).
    pub fn open(url: &str, headers: &[(&str, &str)]) -> Stream {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut req = agent.get(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.call().expect("the stream opens");
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let (tx, rx) = mpsc::channel();
        if status == 200 {
            let reader = resp.into_body().into_reader();
            std::thread::spawn(move || read_events(BufReader::new(reader), &tx));
        }
        let mut s = Stream {
            status,
            content_type,
            events: rx,
            opening: Vec::new(),
        };
        if status == 200 {
            loop {
                let e = s
                    .next(Duration::from_secs(10))
                    .expect("the stream says ready");
                if e.event == "ready" {
                    break;
                }
                s.opening.push(e);
            }
        }
        s
    }

    /// The next event within `timeout`.
    pub fn next(&self, timeout: Duration) -> Option<Sse> {
        self.events.recv_timeout(timeout).ok()
    }

    /// Events until `done` says the last one is the one awaited, or `timeout` passes (then it
    /// panics, showing what came).
    pub fn until(&self, timeout: Duration, done: impl Fn(&Sse) -> bool) -> Vec<Sse> {
        let end = Instant::now() + timeout;
        let mut got = Vec::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.next(left) {
                Some(e) => {
                    let stop = done(&e);
                    got.push(e);
                    if stop {
                        return got;
                    }
                }
                None => panic!("the awaited event did not come; got {got:#?}"),
            }
        }
    }

    /// Whatever comes within `quiet`.
    pub fn drain(&self, quiet: Duration) -> Vec<Sse> {
        let mut got = Vec::new();
        while let Some(e) = self.next(quiet) {
            got.push(e);
        }
        got
    }

    /// Whether the server ended the stream within `timeout`.
    pub fn ends_within(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            match self
                .events
                .recv_timeout(end.saturating_duration_since(Instant::now()))
            {
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }
}

fn read_events(reader: impl BufRead, tx: &mpsc::Sender<Sse>) {
    let (mut id, mut event, mut data) = (None, String::new(), String::new());
    for line in reader.lines() {
        let Ok(line) = line else { return };
        if line.is_empty() {
            if !event.is_empty() || !data.is_empty() {
                let e = Sse {
                    id: id.take(),
                    event: std::mem::take(&mut event),
                    data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
                };
                data.clear();
                if tx.send(e).is_err() {
                    return;
                }
            }
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(": ").unwrap_or((&line, ""));
        match field {
            "id" => id = value.parse().ok(),
            "event" => event = value.to_string(),
            "data" => data.push_str(value),
            _ => {}
        }
    }
}
