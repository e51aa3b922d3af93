//! Errors at the HTTP boundary. API and agent routes answer `{"code", "message"}` JSON (plus
//! `fields` for input errors) with a stable `code`; dashboard routes render an HTML error page.
//! Codes are part of the API contract: add new ones, never rename old ones.

use actix_web::body::MessageBody;
use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::middleware::ErrorHandlerResponse;
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
    #[error("invalid {what}: {}", FieldError::joined(.fields))]
    InvalidInput {
        what: &'static str,
        fields: Vec<FieldError>,
    },
    #[error("{0}")]
    Unauthorized(String),
    /// A caller whose role is too weak, or a boot token asked for from another address: 403.
    #[error("{0}")]
    Forbidden(String),
    /// A node that waits for an operator's approval: 403.
    #[error("{0}")]
    AwaitingApproval(String),
    /// `discovery.max_nodes` reached: 403.
    #[error("{0}")]
    DiscoveryFull(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// A body or what it unpacks to is past a configured limit (413).
    #[error("{0}")]
    TooLarge(String),
    #[error("too many requests from {client}; try again in {retry_after} s")]
    RateLimited { client: String, retry_after: u64 },
    #[error("the body is {found}; this call takes {expected}")]
    UnsupportedMediaType { found: String, expected: String },
    #[error("{0}")]
    MisdirectedRequest(String),
    /// A service agent of another version than the master's: 426, with the version it needs,
    /// where to fetch it and the binary's SHA-256.
    #[error("{message}")]
    UpgradeRequired {
        message: String,
        required: &'static str,
        binary: &'static str,
        sha256: Option<String>,
    },
    /// The master cannot take this now (too many open event streams): 503, try later.
    #[error("{0}")]
    Unavailable(String),
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

#[derive(Serialize)]
struct Body<'a> {
    code: &'static str,
    message: String,
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    fields: &'a [FieldError],
    #[serde(flatten)]
    extra: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    /// The fields a refusal names, each with why (none for other errors).
    pub fn fields(&self) -> &[FieldError] {
        match self {
            ApiError::InvalidInput { fields, .. } => fields.as_slice(),
            ApiError::Deploy(e) => e.fields(),
            ApiError::Store(StoreError::Invalid { fields, .. }) => fields.as_slice(),
            _ => &[],
        }
    }
}

impl ApiError {
    /// A request body as `T`, or `invalid_json` saying why (serde_json bounds the nesting
    /// depth at 128).
    pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))
    }

    /// A request body as `T`, each bad value named by its path: malformed JSON is
    /// `invalid_json`; JSON of the wrong shape is `invalid_input` with the path of what is wrong
    /// (`steps[0].priority`; `$` for the whole body).
    pub fn parse_fields<T: serde::de::DeserializeOwned>(
        body: &[u8],
        what: &'static str,
    ) -> Result<T, ApiError> {
        let mut de = serde_json::Deserializer::from_slice(body);
        serde_path_to_error::deserialize(&mut de).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                ApiError::InvalidJson(inner.to_string())
            } else {
                let field = if path == "." { "$".to_string() } else { path };
                ApiError::field(what, field, inner.to_string())
            }
        })
    }

    /// `invalid_input` about one field of `what`.
    pub fn field(
        what: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError::InvalidInput {
            what,
            fields: vec![FieldError {
                field: field.into(),
                message: message.into(),
            }],
        }
    }

    /// The stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::InvalidJson(_) => "invalid_json",
            ApiError::InvalidInput { .. } => "invalid_input",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::AwaitingApproval(_) => "awaiting_approval",
            ApiError::DiscoveryFull(_) => "discovery_full",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict(_) => "conflict",
            ApiError::TooLarge(_) => "payload_too_large",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::UnsupportedMediaType { .. } => "unsupported_media_type",
            ApiError::MisdirectedRequest(_) => "misdirected_request",
            ApiError::UpgradeRequired { .. } => "agent_outdated",
            ApiError::Unavailable(_) => "unavailable",
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
            "bad_request" | "invalid_json" | "invalid_input" | "invalid_steps"
            | "not_provisioned" | "not_in_environment" | "no_bmc" => StatusCode::BAD_REQUEST,
            "unauthorized" => StatusCode::UNAUTHORIZED,
            "forbidden" | "awaiting_approval" | "discovery_full" => StatusCode::FORBIDDEN,
            "misdirected_request" => StatusCode::MISDIRECTED_REQUEST,
            "agent_outdated" => StatusCode::UPGRADE_REQUIRED,
            "unsupported_media_type" => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "not_found" => StatusCode::NOT_FOUND,
            "conflict" | "no_release" | "no_nodes" | "nothing_to_run" | "plugin_conflict" => {
                StatusCode::CONFLICT
            }
            "payload_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
            "plan_failed" | "bad_package" => StatusCode::UNPROCESSABLE_ENTITY,
            "rate_limited" => StatusCode::TOO_MANY_REQUESTS,
            "disk_full" => StatusCode::INSUFFICIENT_STORAGE,
            "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if self.status_code().is_server_error() {
            tracing::error!(error = %self, "request failed");
        }
        let fields = self.fields();
        let mut response = HttpResponse::build(self.status_code());
        if let ApiError::RateLimited { retry_after, .. } = self {
            response.insert_header(("Retry-After", retry_after.to_string()));
        }
        let mut extra = serde_json::Map::new();
        if let ApiError::UpgradeRequired {
            required,
            binary,
            sha256,
            ..
        } = self
        {
            extra.insert("required_version".into(), (*required).into());
            extra.insert("binary".into(), (*binary).into());
            extra.insert("sha256".into(), sha256.clone().into());
        }
        response.json(Body {
            code: self.code(),
            message: self.to_string(),
            fields,
            extra,
        })
    }
}

/// actix answers a body past a route's `PayloadConfig` limit with a plain-text 413 before any
/// handler runs; this (an `ErrorHandlers` handler) gives such answers the JSON error shape,
/// `payload_too_large`. A 413 that is JSON already (a handler's own) is left as it is.
pub fn payload_too_large_as_json<B: MessageBody>(
    res: ServiceResponse<B>,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let is_json = res
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let (req, _) = res.into_parts();
    let response =
        ApiError::TooLarge("the request body is larger than this endpoint accepts".to_string())
            .error_response();
    Ok(ErrorHandlerResponse::Response(
        ServiceResponse::new(req, response).map_into_right_body(),
    ))
}
