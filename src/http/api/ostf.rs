//! Nailgun's health checks (OSTF) answered empty. OSTF was a service of its own beside Nailgun
//! (`/ostf/`), running OpenStack's functional tests against a deployed cloud; stoker has none,
//! so `fuel2 health list|status|start` get an empty test set instead of a 404 page, and asking
//! to run a named test set is refused, naming it.

use actix_web::{HttpResponse, web};
use serde_json::{Value, json};

use crate::http::ApiError;
use crate::http::api::catalog::id_of;

const WHY: &str = "stoker has no health checks: Nailgun's OSTF was a separate service, and \
                   stoker does not ship one";

/// `GET /ostf/testsets/{cluster_id}`, `/ostf/tests/{cluster_id}`,
/// `/ostf/testruns/last/{cluster_id}`: none.
pub async fn none_for(path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    id_of(&path, "environment")?;
    Ok(HttpResponse::Ok().json(json!([])))
}

/// `GET /ostf/testruns`: none.
pub async fn testruns() -> HttpResponse {
    HttpResponse::Ok().json(json!([]))
}

/// `GET /ostf/testruns/{id}`: there are none.
pub async fn testrun(path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let id = id_of(&path, "test run")?;
    Err(ApiError::NotFound(format!(
        "test run {id} not found: {WHY}"
    )))
}

/// `POST /ostf/testruns` (`[{testset, metadata}]`): an empty list starts nothing; any test set
/// named is refused.
pub async fn start(body: web::Bytes) -> Result<HttpResponse, ApiError> {
    let runs: Vec<Value> = ApiError::parse_fields(&body, "test runs")?;
    let named: Vec<String> = runs
        .iter()
        .map(|r| {
            r.get("testset")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    if named.is_empty() {
        return Ok(HttpResponse::Ok().json(json!([])));
    }
    Err(ApiError::field(
        "test runs",
        "[0].testset",
        format!("no test set {}: {WHY}", named.join(", ")),
    ))
}

/// `PUT /ostf/testruns` (stop or restart runs): there are none to act on.
pub async fn act() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound(format!("no test run to act on: {WHY}")))
}
