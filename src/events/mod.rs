//! Change events: what the master's state became, told to whoever listens (the dashboard's live
//! views, `stoker deployment follow`, an operator's script) over server-sent events
//! (`http::api::events`). The store records a [`Change`] in the write transaction that makes
//! it and publishes the transaction's changes only once it has committed, so a listener never
//! hears of a change that was rolled back, and hears of every committed one in commit order.
//!
//! [`Bus`] numbers each change (`seq`, the stream's `id:`), keeps the last [`REPLAY`] for a
//! client that reconnects with `Last-Event-ID`, and fans them out through a bounded broadcast
//! channel: a listener that falls more than [`BACKLOG`] behind loses its place and is told to
//! reload (`reset`), never slowing the writer down. A change is turned into its JSON line once,
//! by the first listener that sends it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{broadcast, watch};

/// How many recent changes a reconnecting listener can catch up on.
pub const REPLAY: usize = 2048;

/// How far a listener may fall behind before it loses its place.
pub const BACKLOG: usize = 4096;

/// What changed. Each carries the ids a listener filters on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A node was created, deleted, edited, moved between environments, approved, or its
    /// status changed: `what` says which, as its activity line's kind (`node.status`,
    /// `node.assigned`, `node.deleted` ...); `status` is its status after the change, absent
    /// once deleted.
    Node {
        id: i64,
        what: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cluster: Option<i64>,
    },
    /// An environment was created, renamed, deleted, or its settings changed.
    Environment { id: i64, what: &'static str },
    /// A deployment (or a master task) was started or changed status.
    Deployment {
        id: i64,
        cluster: Option<i64>,
        status: String,
    },
    /// One run of a deployment changed status (a step taken, reported, failed, skipped).
    Run {
        id: i64,
        deployment: i64,
        cluster: Option<i64>,
        node: Option<i64>,
        status: &'static str,
    },
    /// A plugin or release package was installed, updated or removed.
    Plugin {
        name: String,
        version: String,
        what: &'static str,
    },
    /// A line of the activity feed.
    Activity {
        at: i64,
        node: Option<i64>,
        what: String,
        message: String,
    },
    /// A state-changing request, as the audit log records it (admins only).
    Audit {
        at: i64,
        actor: String,
        method: String,
        path: String,
        status: u16,
    },
}

/// The kinds a listener can ask for, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Node,
    Environment,
    Deployment,
    Run,
    Plugin,
    Activity,
    Audit,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::Node,
        Kind::Environment,
        Kind::Deployment,
        Kind::Run,
        Kind::Plugin,
        Kind::Activity,
        Kind::Audit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Node => "node",
            Kind::Environment => "environment",
            Kind::Deployment => "deployment",
            Kind::Run => "run",
            Kind::Plugin => "plugin",
            Kind::Activity => "activity",
            Kind::Audit => "audit",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl Change {
    pub fn kind(&self) -> Kind {
        match self {
            Change::Node { .. } => Kind::Node,
            Change::Environment { .. } => Kind::Environment,
            Change::Deployment { .. } => Kind::Deployment,
            Change::Run { .. } => Kind::Run,
            Change::Plugin { .. } => Kind::Plugin,
            Change::Activity { .. } => Kind::Activity,
            Change::Audit { .. } => Kind::Audit,
        }
    }

    /// The environment it concerns, when it concerns one.
    pub fn cluster(&self) -> Option<i64> {
        match self {
            Change::Node { cluster, .. }
            | Change::Deployment { cluster, .. }
            | Change::Run { cluster, .. } => *cluster,
            Change::Environment { id, .. } => Some(*id),
            _ => None,
        }
    }

    /// The deployment it concerns, when it concerns one.
    pub fn deployment(&self) -> Option<i64> {
        match self {
            Change::Deployment { id, .. } => Some(*id),
            Change::Run { deployment, .. } => Some(*deployment),
            _ => None,
        }
    }

    /// The node it concerns, when it concerns one.
    pub fn node(&self) -> Option<i64> {
        match self {
            Change::Node { id, .. } => Some(*id),
            Change::Run { node, .. } | Change::Activity { node, .. } => *node,
            _ => None,
        }
    }
}

/// One published change with its number.
#[derive(Debug)]
pub struct Event {
    pub seq: u64,
    pub change: Change,
    /// The change as one server-sent event, made by the first listener that sends it.
    frame: OnceLock<Arc<str>>,
}

impl Event {
    /// `id: SEQ`, `event: KIND`, `data: JSON`, and the blank line that ends an event.
    pub fn frame(&self) -> Arc<str> {
        Arc::clone(self.frame.get_or_init(|| {
            let data = serde_json::to_string(&self.change).unwrap_or_else(|_| "{}".into());
            format!(
                "id: {}\nevent: {}\ndata: {data}\n\n",
                self.seq,
                self.change.kind().as_str()
            )
            .into()
        }))
    }
}

/// The master's one stream of changes.
#[derive(Debug, Clone)]
pub struct Bus {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    sender: broadcast::Sender<Arc<Event>>,
    /// The last changes, oldest first, and the next number.
    recent: Mutex<(VecDeque<Arc<Event>>, u64)>,
    /// Listeners now connected.
    listeners: AtomicUsize,
    /// True once the daemon stops: every stream ends.
    closed: watch::Sender<bool>,
}

impl Default for Bus {
    fn default() -> Bus {
        Bus::new()
    }
}

/// What a listener gets when it subscribes: the changes after the one it last had (when they
/// are still kept), whether some were lost in between, and the live feed from there.
pub struct Subscription {
    pub missed: bool,
    pub backlog: Vec<Arc<Event>>,
    pub live: broadcast::Receiver<Arc<Event>>,
    pub closed: watch::Receiver<bool>,
    /// The number of the newest change at subscription.
    pub newest: u64,
    _count: ListenerCount,
}

/// Counts a listener while it lives.
struct ListenerCount(Arc<Inner>);

impl Drop for ListenerCount {
    fn drop(&mut self) {
        self.0.listeners.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Bus {
    pub fn new() -> Bus {
        let (sender, _) = broadcast::channel(BACKLOG);
        let (closed, _) = watch::channel(false);
        Bus {
            inner: Arc::new(Inner {
                sender,
                recent: Mutex::new((VecDeque::with_capacity(REPLAY), 1)),
                listeners: AtomicUsize::new(0),
                closed,
            }),
        }
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, (VecDeque<Arc<Event>>, u64)> {
        self.inner
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publish committed changes, in order.
    pub fn publish(&self, changes: impl IntoIterator<Item = Change>) {
        let mut recent = self.recent();
        for change in changes {
            let seq = recent.1;
            recent.1 += 1;
            let event = Arc::new(Event {
                seq,
                change,
                frame: OnceLock::new(),
            });
            if recent.0.len() == REPLAY {
                recent.0.pop_front();
            }
            recent.0.push_back(Arc::clone(&event));
            // No receiver is not an error: nobody listens right now.
            let _ = self.inner.sender.send(event);
        }
    }

    /// Listen from now on, after replaying what came after `last` (a `Last-Event-ID`), unless
    /// `max` listeners are connected already.
    pub fn subscribe(&self, last: Option<u64>, max: usize) -> Option<Subscription> {
        let n = self.inner.listeners.fetch_add(1, Ordering::Relaxed);
        let count = ListenerCount(Arc::clone(&self.inner));
        if n >= max {
            return None;
        }
        // Under the lock, so no change falls between the replay and the live feed.
        let recent = self.recent();
        let live = self.inner.sender.subscribe();
        let newest = recent.1 - 1;
        let (backlog, missed) = match last {
            None => (Vec::new(), false),
            Some(last) if last >= newest => (Vec::new(), false),
            Some(last) => {
                let oldest = recent.0.front().map_or(recent.1, |e| e.seq);
                let kept: Vec<Arc<Event>> =
                    recent.0.iter().filter(|e| e.seq > last).cloned().collect();
                (kept, last + 1 < oldest)
            }
        };
        drop(recent);
        Some(Subscription {
            missed,
            backlog,
            live,
            closed: self.inner.closed.subscribe(),
            newest,
            _count: count,
        })
    }

    /// Listeners now connected.
    pub fn listeners(&self) -> usize {
        self.inner.listeners.load(Ordering::Relaxed)
    }

    /// End every stream: the daemon is stopping.
    pub fn close(&self) {
        self.inner.closed.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: i64) -> Change {
        Change::Node {
            id,
            what: "node.status".into(),
            status: Some("ready".into()),
            cluster: Some(1),
        }
    }

    #[test]
    fn a_listener_gets_what_comes_after_it_subscribed_in_order() {
        let bus = Bus::new();
        bus.publish([node(1)]);
        let mut s = bus.subscribe(None, 8).unwrap();
        assert_eq!(s.newest, 1);
        bus.publish([node(2), node(3)]);
        let a = s.live.try_recv().unwrap();
        let b = s.live.try_recv().unwrap();
        assert_eq!((a.seq, b.seq), (2, 3));
        assert_eq!(
            &*a.frame(),
            "id: 2\nevent: node\ndata: {\"kind\":\"node\",\"id\":2,\"what\":\"node.status\",\
             \"status\":\"ready\",\"cluster\":1}\n\n"
        );
    }

    #[test]
    fn a_reconnecting_listener_catches_up_or_is_told_it_missed_some() {
        let bus = Bus::new();
        bus.publish((1..=5).map(node));
        let s = bus.subscribe(Some(3), 8).unwrap();
        assert!(!s.missed);
        assert_eq!(s.backlog.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
        bus.publish((6..=(REPLAY as i64 + 10)).map(node));
        let s = bus.subscribe(Some(3), 8).unwrap();
        assert!(s.missed, "changes 4.. are gone");
        assert_eq!(s.backlog.len(), REPLAY);
        let s = bus.subscribe(Some(1_000_000), 8).unwrap();
        assert!(!s.missed && s.backlog.is_empty());
    }

    #[test]
    fn listeners_are_counted_and_capped() {
        let bus = Bus::new();
        let a = bus.subscribe(None, 2).unwrap();
        let _b = bus.subscribe(None, 2).unwrap();
        assert!(bus.subscribe(None, 2).is_none());
        assert_eq!(bus.listeners(), 2);
        drop(a);
        assert_eq!(bus.listeners(), 1);
        assert!(bus.subscribe(None, 2).is_some());
    }

    #[test]
    fn a_slow_listener_loses_its_place_without_slowing_the_publisher() {
        let bus = Bus::new();
        let mut s = bus.subscribe(None, 8).unwrap();
        bus.publish((0..(BACKLOG as i64 + 5)).map(node));
        assert!(matches!(
            s.live.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(_))
        ));
    }
}
