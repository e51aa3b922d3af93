//! Every HTTP request measured for `/metrics`: [`tag`] is what [`super::Routes`] attaches to
//! each route it registers (its pattern as registered, and which agent call it is, as the
//! resource's app data, so finding a request's route costs no lookup and no allocation), and
//! [`measure`], the outermost middleware, times each request and counts it under its route's
//! tag, or as [`crate::metrics::UNMATCHED`] when no route answered. The label values are
//! therefore bounded by the route table, whatever paths clients send.

use std::sync::Arc;
use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;

use crate::metrics::{Metrics, Route};

/// The agents' calls, by route pattern: the bootstrap's and the installed OS's agents, and
/// Fuel's nailgun-agent.
const AGENT_CALLS: [(&str, &str); 10] = [
    ("/api/v1/agent/hello", "hello"),
    ("/api/v1/agent/service/hello", "service_hello"),
    (super::node::service::BINARY_PATH, "service_binary"),
    ("/api/v1/agent/next", "next"),
    ("/api/v1/agent/runs/{id}/output", "output"),
    ("/api/v1/agent/runs/{id}/result", "result"),
    ("/api/v1/agent/sync", "sync"),
    ("/api/v1/agent/file", "file"),
    ("/api/nodes", "nailgun_register"),
    ("/api/nodes/agent", "nailgun_update"),
];

/// The agent call a route pattern is, if it is one.
pub fn agent_call(pattern: &str) -> Option<&'static str> {
    AGENT_CALLS
        .iter()
        .find(|(p, _)| *p == pattern)
        .map(|(_, call)| *call)
}

/// What a route registered at `pattern` carries for its requests' labels.
pub fn tag(pattern: &str) -> Route {
    Route {
        pattern: Arc::from(pattern),
        agent: agent_call(pattern),
    }
}

/// A request method as a label: the methods routes use, anything else `other`.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// How long a handler held its request by design (an agent's `next` waiting for work, in the
/// answer's extensions): not part of the time to answer it.
#[derive(Debug, Clone, Copy)]
pub struct Held(pub std::time::Duration);

/// Time and count one request (the outermost middleware: it sees every answer, refusals and
/// redirects included). The request's route is the tag of the resource that answered it; the
/// time a handler held it by design ([`Held`]) is left out.
pub async fn measure(
    metrics: Arc<Metrics>,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let started = Instant::now();
    let method = method_label(req.method());
    let answer = next.call(req).await;
    let elapsed = started.elapsed();
    match &answer {
        Ok(res) => metrics.observe_request(
            res.request().app_data::<Route>(),
            method,
            res.status().as_u16(),
            elapsed.saturating_sub(
                res.response()
                    .extensions()
                    .get::<Held>()
                    .map_or(std::time::Duration::ZERO, |h| h.0),
            ),
        ),
        Err(err) => metrics.observe_request(
            None,
            method,
            err.as_response_error().status_code().as_u16(),
            elapsed,
        ),
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Access;

    #[test]
    fn route_labels_are_the_route_tables_patterns_and_agent_calls_are_all_named() {
        let table = super::super::route_table();
        let patterns: std::collections::BTreeSet<&str> =
            table.iter().map(|r| r.path.as_str()).collect();
        // Every label value a request can get is a registered pattern or the one fallback:
        // as many values as routes, however many paths are asked for.
        for route in &table {
            let t = tag(&route.path);
            assert_eq!(&*t.pattern, route.path);
            assert!(patterns.contains(&*t.pattern));
        }
        assert!(!patterns.contains(crate::metrics::UNMATCHED));
        // A path with ids in it is never its own label: only patterns are.
        assert!(!patterns.iter().any(|p| p.contains("/nodes/1")));
        // Every agent route is an agent call, and every agent call a registered route.
        for route in table.iter().filter(|r| r.access == Access::Agent) {
            assert!(agent_call(&route.path).is_some(), "{} unnamed", route.path);
        }
        for (pattern, _) in AGENT_CALLS {
            assert!(patterns.contains(pattern), "{pattern} is not a route");
        }
        assert_eq!(agent_call("/api/v1/nodes/{id}"), None);
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
    }
}
