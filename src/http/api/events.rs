//! `GET /api/v1/events` (a viewer's token) and `GET /events` (the dashboard's session): the
//! master's changes as server-sent events (`text/event-stream`), from `crate::events::Bus`.
//!
//! Each event is `id: SEQ`, `event: KIND` (`node`, `environment`, `deployment`, `run`,
//! `plugin`, `activity`, `audit`) and `data: JSON` (the `events::Change`). The stream opens with
//! `event: ready` (`{"newest": SEQ}`: from here on nothing is missed) and sends a comment every
//! [`KEEPALIVE`] so proxies keep it open. Query parameters narrow it: `kinds=run,deployment`,
//! `cluster=ID`, `deployment=ID`, `node=ID` (each bad one named). A client that reconnects with
//! `Last-Event-ID` (or `?last_event_id=`) gets what it missed while it is still kept; when it
//! is not, or when the client reads too slowly to keep up, it gets `event: reset` and should
//! read the state afresh. Audit events go to admins only. At most [`MAX_LISTENERS`] streams
//! are open at once (503 beyond); every stream ends when the daemon stops.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use tokio::sync::broadcast::error::RecvError;

use crate::events::{Change, Event, Kind, Subscription};
use crate::http::access::Caller;
use crate::http::api::query;
use crate::http::{ApiError, AppState};

/// How often an idle stream sends a comment.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// Streams open at once, all callers together.
pub const MAX_LISTENERS: usize = 256;

/// What a listener asked to hear.
#[derive(Debug, Clone, Default)]
struct Filter {
    /// Empty: every kind the caller may see.
    kinds: HashSet<Kind>,
    cluster: Option<i64>,
    deployment: Option<i64>,
    node: Option<i64>,
    /// Admins hear the audit log.
    audit: bool,
}

impl Filter {
    fn parse(req: &HttpRequest, admin: bool) -> Result<Filter, ApiError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(req.query_string()).map_err(|e| {
                ApiError::field("query", "query string", format!("not a query string: {e}"))
            })?;
        let mut f = Filter {
            audit: admin,
            ..Filter::default()
        };
        for (k, v) in &pairs {
            match k.as_str() {
                "kinds" => {
                    let names = query::list(Some(v));
                    let known: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
                    query::known("kinds", &names, &known)?;
                    f.kinds.extend(names.iter().filter_map(|n| Kind::parse(n)));
                }
                "cluster" => f.cluster = Some(one_id("cluster", v)?),
                "deployment" => f.deployment = Some(one_id("deployment", v)?),
                "node" => f.node = Some(one_id("node", v)?),
                "last_event_id" => {}
                other => {
                    return Err(ApiError::field(
                        "query",
                        other,
                        "unknown parameter (known: kinds, cluster, deployment, node, \
                         last_event_id)",
                    ));
                }
            }
        }
        if f.kinds.contains(&Kind::Audit) && !admin {
            return Err(ApiError::Forbidden(
                "audit events are for admins only".to_string(),
            ));
        }
        Ok(f)
    }

    fn wants(&self, c: &Change) -> bool {
        let kind = c.kind();
        if kind == Kind::Audit && !self.audit {
            return false;
        }
        if !self.kinds.is_empty() && !self.kinds.contains(&kind) {
            return false;
        }
        let matches = |want: Option<i64>, have: Option<i64>| want.is_none() || want == have;
        matches(self.cluster, c.cluster())
            && matches(self.deployment, c.deployment())
            && matches(self.node, c.node())
    }
}

fn one_id(name: &str, raw: &str) -> Result<i64, ApiError> {
    match query::ids(name, Some(raw))?.as_slice() {
        [id] => Ok(*id),
        _ => Err(ApiError::field("query", name, "one id")),
    }
}

/// Where the client left off: `Last-Event-ID`, else `?last_event_id=`.
fn last_event_id(req: &HttpRequest) -> Result<Option<u64>, ApiError> {
    let header = req
        .headers()
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("?").trim().to_string());
    let from_query = serde_urlencoded::from_str::<Vec<(String, String)>>(req.query_string())
        .unwrap_or_default()
        .into_iter()
        .find(|(k, _)| k == "last_event_id")
        .map(|(_, v)| v);
    match header.or(from_query) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
            ApiError::field(
                "header",
                "Last-Event-ID",
                format!("{v:?} is not an event id"),
            )
        }),
    }
}

/// `GET /api/v1/events`, `GET /events`
pub async fn stream(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let admin = caller.0.role == crate::auth::Role::Admin;
    let filter = Filter::parse(&req, admin)?;
    let last = last_event_id(&req)?;
    let sub = state
        .store
        .events()
        .subscribe(last, MAX_LISTENERS)
        .ok_or_else(|| {
            ApiError::Unavailable(format!(
                "{MAX_LISTENERS} event streams are open already; try again later"
            ))
        })?;
    let opening = opening(&sub, &filter);
    let body = futures_util::stream::unfold(
        Listener {
            sub,
            filter,
            opening: Some(opening),
        },
        next_chunk,
    );
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body))
}

/// One open stream.
struct Listener {
    sub: Subscription,
    filter: Filter,
    /// What is sent first: the retry delay, the replay or the reset, and `ready`.
    opening: Option<String>,
}

fn opening(sub: &Subscription, filter: &Filter) -> String {
    let mut out = String::from("retry: 2000\n\n");
    if sub.missed {
        out.push_str(&reset("missed"));
    }
    for e in &sub.backlog {
        if filter.wants(&e.change) {
            out.push_str(&e.frame());
        }
    }
    out.push_str(&format!(
        "event: ready\ndata: {{\"newest\":{}}}\n\n",
        sub.newest
    ));
    out
}

fn reset(reason: &str) -> String {
    format!("event: reset\ndata: {{\"reason\":\"{reason}\"}}\n\n")
}

type Chunk = Result<web::Bytes, actix_web::Error>;

async fn next_chunk(mut l: Listener) -> Option<(Chunk, Listener)> {
    if let Some(first) = l.opening.take() {
        return Some((Ok(web::Bytes::from(first)), l));
    }
    loop {
        if *l.sub.closed.borrow() {
            return None;
        }
        let received = tokio::select! {
            r = l.sub.live.recv() => Some(r),
            _ = l.sub.closed.changed() => return None,
            () = tokio::time::sleep(KEEPALIVE) => None,
        };
        let text = match received {
            None => ": keepalive\n\n".to_string(),
            Some(Ok(e)) => match frame_for(&l.filter, &e) {
                Some(f) => f.to_string(),
                None => continue,
            },
            Some(Err(RecvError::Lagged(_))) => reset("lagged"),
            Some(Err(RecvError::Closed)) => return None,
        };
        return Some((Ok(web::Bytes::from(text)), l));
    }
}

fn frame_for(filter: &Filter, e: &Arc<Event>) -> Option<Arc<str>> {
    filter.wants(&e.change).then(|| e.frame())
}
