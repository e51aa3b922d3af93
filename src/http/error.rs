//! Errors at the HTTP boundary. API and agent routes answer `{"code", "message"}` JSON (plus
//! `fields` for input errors) with a stable `code`; dashboard routes render an HTML error page.
//! Codes are part of the API contract: add new ones, never rename old ones.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::model::FieldError;
use crate::store::StoreError;

/// An error answered as JSON.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("invalid {what}: {}", summary(.fields))]
    InvalidInput {
        what: &'static str,
        fields: Vec<FieldError>,
    },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("too many requests from {client}; try again in {retry_after} s")]
    RateLimited { client: String, retry_after: u64 },
    #[error("internal error: {0}")]
    Internal(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Planning(Box<crate::planner::PlanningError>),
    #[error(transparent)]
    Deploy(Box<crate::deployer::DeployError>),
}

impl From<crate::deployer::DeployError> for ApiError {
    fn from(e: crate::deployer::DeployError) -> ApiError {
        ApiError::Deploy(Box::new(e))
    }
}

impl From<crate::planner::PlanningError> for ApiError {
    fn from(e: crate::planner::PlanningError) -> ApiError {
        ApiError::Planning(Box::new(e))
    }
}

fn summary(fields: &[FieldError]) -> String {
    fields
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'static str,
    message: String,
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    fields: &'a [FieldError],
}

impl ApiError {
    /// The stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::InvalidJson(_) => "invalid_json",
            ApiError::InvalidInput { .. } => "invalid_input",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict(_) => "conflict",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::Internal(_) => "internal",
            ApiError::Store(e) => e.code(),
            ApiError::Planning(e) => e.code(),
            ApiError::Deploy(e) => e.code(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self.code() {
            "bad_request" | "invalid_json" | "invalid_input" | "invalid_steps" => {
                StatusCode::BAD_REQUEST
            }
            "unauthorized" => StatusCode::UNAUTHORIZED,
            "not_found" => StatusCode::NOT_FOUND,
            "conflict" | "no_release" | "no_nodes" => StatusCode::CONFLICT,
            "plan_failed" | "bad_package" => StatusCode::UNPROCESSABLE_ENTITY,
            "rate_limited" => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if self.status_code().is_server_error() {
            tracing::error!(error = %self, "request failed");
        }
        let fields = match self {
            ApiError::InvalidInput { fields, .. } => fields.as_slice(),
            ApiError::Deploy(e) => e.fields(),
            _ => &[],
        };
        let mut response = HttpResponse::build(self.status_code());
        if let ApiError::RateLimited { retry_after, .. } = self {
            response.insert_header(("Retry-After", retry_after.to_string()));
        }
        response.json(Body {
            code: self.code(),
            message: self.to_string(),
            fields,
        })
    }
}
