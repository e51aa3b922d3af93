//! Who may call what, applied to every route: [`Routes`] registers each route with the
//! [`Access`] it needs (there is no other way to add one), records it in the route table that
//! tests walk, and wraps it in [`authorize`], which
//! - finds the caller: a bearer token (`Authorization: Bearer`, or Keystone's `X-Auth-Token`)
//!   for JSON routes, the session cookie for dashboard pages (a cookie never authorizes a JSON
//!   call, and a token never a form);
//! - refuses with 401 (no or a bad credential; pages redirect to the sign-in page) or 403 (a
//!   role too weak), before the handler runs;
//! - checks that a JSON call's body is `application/json` (or the route's declared binary
//!   type), and that a form post carries its session's CSRF token;
//! - records every state-changing request in the audit log: who, role, from where, what, and
//!   the answer's status; of a node's own calls ([`Access::Node`]: its hellos, which its
//!   history records), only the refused ones (401, 403).
//!
//! Handlers reach the caller through the [`Caller`] extractor, and code they call through
//! [`acting_user`].

pub mod login;
pub mod users;

use std::future::{Ready, ready};

use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::{Next, from_fn};
use actix_web::{FromRequest, Handler, HttpMessage, HttpRequest, HttpResponse, Responder};
use actix_web::{ResponseError, guard, web};

use crate::auth::{Access, Principal, Role, secret};
use crate::http::{ApiError, AppState};
use crate::store::AuditEntry;

/// The dashboard's session cookie.
pub const SESSION_COOKIE: &str = "stoker_session";

/// The form field holding the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

/// What a route's request body may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// JSON (`application/json`), or none.
    Json,
    /// A package or other binary upload (`application/octet-stream`, gzip), or JSON.
    Binary,
    /// A dashboard form (`application/x-www-form-urlencoded`).
    Form,
    /// A dashboard form with a file (`multipart/form-data`), streamed to its handler: its
    /// first field must be the CSRF token, checked before the rest is read ([`UploadForm`]).
    Upload,
}

/// One registered route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    pub method: Method,
    /// The path pattern as registered, with its scope's prefix.
    pub path: String,
    pub access: Access,
}

/// Registers routes, each with the access it needs, and keeps the table of them.
pub struct Routes<'a> {
    cfg: Option<&'a mut web::ServiceConfig>,
    table: Vec<RouteInfo>,
}

impl<'a> Routes<'a> {
    /// Register on `cfg`.
    pub fn new(cfg: &'a mut web::ServiceConfig) -> Routes<'a> {
        Routes {
            cfg: Some(cfg),
            table: Vec::new(),
        }
    }

    /// Only record the table (for tests and documentation).
    pub fn table_only() -> Routes<'static> {
        Routes {
            cfg: None,
            table: Vec::new(),
        }
    }

    pub fn into_table(self) -> Vec<RouteInfo> {
        self.table
    }

    /// Register `method path` with `access` and `handler`.
    pub fn add<F, Args>(&mut self, method: Method, path: &str, access: Access, handler: F)
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        let body = match access {
            Access::Page(_) => BodyKind::Form,
            _ => BodyKind::Json,
        };
        self.add_with(method, path, access, body, handler);
    }

    /// Register a route whose body may be binary (a package upload).
    pub fn add_with<F, Args>(
        &mut self,
        method: Method,
        path: &str,
        access: Access,
        body: BodyKind,
        handler: F,
    ) where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.table.push(RouteInfo {
            method: method.clone(),
            path: path.to_string(),
            access,
        });
        if let Some(cfg) = self.cfg.as_deref_mut() {
            // A binary body (a package) is streamed by its handler within its own limits.
            // The route's tag labels its requests in the metrics (`http::measure`).
            let resource = web::resource(path)
                .app_data(crate::http::measure::tag(path))
                .guard(guard::Method(method.clone()))
                .route(web::method(method).to(handler));
            if access == Access::Agent {
                // Agents' calls authenticate in their handlers (against their node); they are
                // recorded in the node's history, not the audit log.
                cfg.service(resource);
            } else {
                cfg.service(
                    resource.wrap(from_fn(move |req, next| authorize(access, body, req, next))),
                );
            }
        }
    }

    pub fn get<F, Args>(&mut self, path: &str, access: Access, handler: F)
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.add(Method::GET, path, access, handler);
    }

    pub fn post<F, Args>(&mut self, path: &str, access: Access, handler: F)
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.add(Method::POST, path, access, handler);
    }

    pub fn put<F, Args>(&mut self, path: &str, access: Access, handler: F)
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.add(Method::PUT, path, access, handler);
    }

    pub fn delete<F, Args>(&mut self, path: &str, access: Access, handler: F)
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.add(Method::DELETE, path, access, handler);
    }
}

/// The authenticated caller of a route that needs one (a handler of an `Api` or `Page` route
/// can always extract it; elsewhere it is absent and extraction fails with 401).
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

impl Caller {
    /// Whether this caller reads documents whole (an admin): [`Caller::shown`] would change
    /// nothing, so a big answer can be written straight from its rows.
    pub fn reads_whole(&self) -> bool {
        self.0.role == crate::auth::Role::Admin
    }

    /// `doc` as this caller may read it: whole for an admin, its secrets masked
    /// ([`crate::auth::mask::mask`]) for every other role.
    pub fn shown(&self, mut doc: serde_json::Value) -> serde_json::Value {
        if !self.reads_whole() {
            crate::auth::mask::mask(&mut doc);
        }
        doc
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Result<Caller, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            req.extensions()
                .get::<Principal>()
                .cloned()
                .map(Caller)
                .ok_or_else(|| ApiError::Unauthorized("sign in first".to_string())),
        )
    }
}

/// The caller, if any (for public routes that show who is signed in).
pub fn caller(req: &HttpRequest) -> Option<Principal> {
    req.extensions().get::<Principal>().cloned()
}

fn mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn has_body(req: &ServiceRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

fn media_type(req: &ServiceRequest) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Refuse a body of the wrong media type (a cross-site `text/plain` "JSON" post, say).
fn check_media_type(req: &ServiceRequest, body: BodyKind) -> Result<(), ApiError> {
    if !mutating(req.method()) || !has_body(req) {
        return Ok(());
    }
    let found = media_type(req);
    let allowed: &[&str] = match body {
        BodyKind::Json => &["application/json"],
        BodyKind::Binary => &[
            "application/json",
            "application/octet-stream",
            "application/gzip",
            "application/x-gzip",
        ],
        BodyKind::Form => &["application/x-www-form-urlencoded"],
        BodyKind::Upload => &["multipart/form-data"],
    };
    if allowed.contains(&found.as_str()) {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType {
            found: if found.is_empty() {
                "none".to_string()
            } else {
                found
            },
            expected: allowed.join(" or "),
        })
    }
}

/// The bearer secret of an API call: `Authorization: Bearer …` or Keystone's `X-Auth-Token`
/// (fuel2 sends an empty one when it has none: that is no credential).
pub fn bearer_secret(req: &HttpRequest) -> Option<String> {
    let headers = req.headers();
    let from_auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let from_keystone = headers
        .get("x-auth-token")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    from_auth
        .or(from_keystone)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// The principal a bearer secret stands for.
async fn token_caller(state: &AppState, req: &HttpRequest) -> Result<Option<Principal>, ApiError> {
    let Some(secret) = bearer_secret(req) else {
        return Ok(None);
    };
    let hash = secret::hash(&secret);
    let now = crate::clock::now();
    let found = state
        .store(move |s| s.read(|tx| tx.token_principal(&hash, now)))
        .await?;
    let Some(crate::store::TokenCaller {
        principal,
        last_used_at: last_used,
        ..
    }) = found
    else {
        return Err(ApiError::Unauthorized(
            "the token is not valid (unknown, revoked or expired)".to_string(),
        ));
    };
    if last_used.is_none_or(|at| now - at >= 60)
        && let crate::auth::Via::Token { id } = principal.via
    {
        state
            .store(move |s| s.write(|tx| tx.touch_token(id, now)))
            .await?;
    }
    Ok(Some(principal))
}

/// The principal the session cookie stands for.
pub async fn session_caller(
    state: &AppState,
    req: &HttpRequest,
) -> Result<Option<Principal>, ApiError> {
    let Some(cookie) = req.cookie(SESSION_COOKIE) else {
        return Ok(None);
    };
    let hash = secret::hash(cookie.value());
    let now = crate::clock::now();
    let limits = state.auth.sessions;
    let lookup = hash.clone();
    let found = state
        .store(move |s| s.read(|tx| tx.session(&lookup, now, limits)))
        .await?;
    let Some(session) = found else {
        return Ok(None);
    };
    if now - session.last_seen_at >= 60 {
        state
            .store(move |s| s.write(|tx| tx.touch_session(&hash, now)))
            .await?;
    }
    Ok(Some(session.principal))
}

/// Where a page's visitor is sent to sign in, coming back to where they were.
fn to_login(req: &ServiceRequest) -> HttpResponse {
    let back = if *req.method() == Method::GET {
        req.uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string()
    } else {
        "/".to_string()
    };
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/login?next={}", encode(&back))))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

/// Percent-encode a query value.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A form post must carry its session's CSRF token; the body is read and put back for the
/// handler.
async fn check_csrf(req: &mut ServiceRequest, principal: &Principal) -> Result<(), ApiError> {
    let bytes = req
        .extract::<web::Bytes>()
        .await
        .map_err(|e| ApiError::BadRequest(format!("cannot read the form: {e}")))?;
    let presented = url_form(&bytes)
        .into_iter()
        .find(|(k, _)| k == CSRF_FIELD)
        .map(|(_, v)| v)
        .unwrap_or_default();
    req.set_payload(Payload::from(bytes));
    if secret::constant_time_eq(&presented, principal.csrf()) && !presented.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Forbidden(
            "the form's CSRF token is missing or stale; reload the page and try again".to_string(),
        ))
    }
}

/// A dashboard upload's `multipart/form-data` body after its first field, the CSRF token, was
/// checked: the rest, still unread, for the handler ([`BodyKind::Upload`]).
pub struct UploadForm(pub actix_multipart::Multipart);

/// The longest CSRF field an upload's first part may be.
const CSRF_PART_LIMIT: usize = 256;

/// An upload's first part must be its session's CSRF token; the rest of the body is left
/// unread, in the request's extensions, for the handler.
async fn check_upload_csrf(
    req: &mut ServiceRequest,
    principal: &Principal,
) -> Result<(), ApiError> {
    let payload = req.take_payload();
    let mut form = actix_multipart::Multipart::new(req.headers(), payload);
    let stale = || {
        ApiError::Forbidden(
            "the form's CSRF token is missing or stale (it must be the upload's first field); \
             reload the page and try again"
                .to_string(),
        )
    };
    let first = futures_util::StreamExt::next(&mut form).await;
    let mut field = match first {
        Some(Ok(f)) if f.name() == Some(CSRF_FIELD) => f,
        Some(Err(e)) => {
            return Err(ApiError::BadRequest(format!(
                "the upload cannot be read: {e}"
            )));
        }
        _ => return Err(stale()),
    };
    let presented = match field.bytes(CSRF_PART_LIMIT).await {
        Ok(Ok(b)) => String::from_utf8(b.to_vec()).unwrap_or_default(),
        Ok(Err(e)) => {
            return Err(ApiError::BadRequest(format!(
                "the upload cannot be read: {e}"
            )));
        }
        Err(_) => return Err(stale()),
    };
    drop(field);
    if secret::constant_time_eq(&presented, principal.csrf()) && !presented.is_empty() {
        req.extensions_mut().insert(UploadForm(form));
        Ok(())
    } else {
        Err(stale())
    }
}

impl FromRequest for UploadForm {
    type Error = ApiError;
    type Future = Ready<Result<UploadForm, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            req.extensions_mut()
                .remove::<UploadForm>()
                .ok_or_else(|| ApiError::BadRequest("not an upload form".to_string())),
        )
    }
}

/// The fields of an `application/x-www-form-urlencoded` body.
pub fn url_form(body: &[u8]) -> Vec<(String, String)> {
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body).unwrap_or_default()
}

/// Apply `access` to one request (see the module's documentation).
async fn authorize(
    access: Access,
    body: BodyKind,
    mut req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return Ok(
            req.into_response(ApiError::Internal("no application state".into()).error_response())
        );
    };
    let audited = mutating(req.method());
    let mut who: Option<Principal> = None;
    let checked: Result<(), ApiError> = async {
        let principal = match access {
            Access::Public | Access::Node | Access::Agent => return Ok(()),
            Access::Api(_) => token_caller(&state, req.request()).await?.ok_or_else(|| {
                ApiError::Unauthorized(
                    "an API token is required (Authorization: Bearer TOKEN)".to_string(),
                )
            })?,
            Access::Page(_) => session_caller(&state, req.request())
                .await?
                .ok_or_else(|| ApiError::Unauthorized("sign in first".to_string()))?,
        };
        who = Some(principal.clone());
        if let Some(needed) = access.role() {
            allow(&principal, needed)?;
        }
        check_media_type(&req, body)?;
        if matches!(access, Access::Page(_)) && mutating(req.method()) {
            if body == BodyKind::Upload {
                check_upload_csrf(&mut req, &principal).await?;
            } else {
                check_csrf(&mut req, &principal).await?;
            }
        }
        Ok(())
    }
    .await;
    let (actor, role) = match &who {
        Some(p) => (p.user.clone(), p.role.to_string()),
        None => ("anonymous".to_string(), "none".to_string()),
    };
    let source = peer(&req);
    let method = req.method().to_string();
    let path = path_of(&req);
    let refusal = match checked {
        Ok(()) => {
            let acting = who.as_ref().map(|p| p.user.clone());
            if let Some(p) = who {
                req.extensions_mut().insert(p);
            }
            // Only a page the browser navigates to shows (and so clears) a notice: a live part's
            // fetch (Sec-Fetch-Dest: empty) from the page being left, set off by the action's own
            // event, would otherwise take the notice before the page it redirects to shows it.
            let fetched = req
                .headers()
                .get("sec-fetch-dest")
                .is_some_and(|d| d.as_bytes() != b"document");
            let notice = match access {
                Access::Page(_) if !audited && !fetched => req
                    .cookie(crate::http::pages::notice::NOTICE_COOKIE)
                    .map(|c| crate::http::pages::notice::Notice::decode(c.value())),
                _ => None,
            };
            if let Some(Some(n)) = &notice {
                req.extensions_mut().insert(n.clone());
            }
            let mut res = ACTING.scope(acting, next.call(req)).await?;
            // A page that showed the notice (or found it unreadable) clears it; a redirect
            // passes it on.
            if notice.is_some() && !res.status().is_redirection() {
                crate::http::pages::notice::clear(&state, res.response_mut());
            }
            if audited && (access != Access::Node || refused(res.status())) {
                record(&state, actor, role, source, method, path, res.status(), "").await;
            }
            return Ok(res);
        }
        Err(e) => e,
    };
    let status = refusal.status_code();
    if audited {
        let detail = refusal.to_string();
        record(
            &state,
            actor,
            role,
            source.clone(),
            method,
            path,
            status,
            &detail,
        )
        .await;
    }
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        tracing::warn!(peer = %source, path = req.path(), "request refused: {refusal}");
    }
    let answer = match access {
        Access::Page(_) if status == StatusCode::UNAUTHORIZED => to_login(&req),
        Access::Page(_) => crate::http::pages::PageError::from(refusal).error_response(),
        _ => refusal.error_response(),
    };
    Ok(req.into_response(answer))
}

fn allow(principal: &Principal, needed: Role) -> Result<(), ApiError> {
    if principal.role.allows(needed) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "{} is {} {}; this needs {} {needed}",
            principal.user,
            article(principal.role),
            principal.role,
            article(needed),
        )))
    }
}

fn article(role: Role) -> &'static str {
    match role {
        Role::Admin | Role::Operator => "an",
        Role::Viewer => "a",
    }
}

fn peer(req: &ServiceRequest) -> String {
    req.peer_addr()
        .map_or_else(|| "unknown".to_string(), |a| a.ip().to_string())
}

fn path_of(req: &ServiceRequest) -> String {
    let mut p = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.path().to_string(), |p| p.as_str().to_string());
    if p.len() > 512 {
        let mut cut = 512;
        while !p.is_char_boundary(cut) {
            cut -= 1;
        }
        p.truncate(cut);
    }
    p
}

tokio::task_local! {
    /// The signed-in user a request acts for, while its handler runs.
    static ACTING: Option<String>;
}

/// The user the request being handled acts for (its session's or its token's), if it has
/// one: what a handler deep in a call records as who did it (who started a deployment)
/// without every handler on the way taking the caller. `None` outside a request's handler.
pub fn acting_user() -> Option<String> {
    ACTING.try_with(Clone::clone).ok().flatten()
}

/// Whether a node's own call was refused for what it presented (a credential or token not
/// its node's, or a machine that is not that node): what the audit log keeps of those calls.
fn refused(status: StatusCode) -> bool {
    status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN
}

/// Write one audit entry; a failure is logged, never turned into the request's answer.
#[allow(clippy::too_many_arguments)]
async fn record(
    state: &AppState,
    actor: String,
    role: String,
    source: String,
    method: String,
    path: String,
    status: StatusCode,
    detail: &str,
) {
    let entry = AuditEntry {
        id: 0,
        at: crate::clock::now(),
        actor,
        role,
        source,
        method,
        path,
        status: status.as_u16(),
        detail: detail.chars().take(500).collect(),
    };
    if let Err(e) = state
        .store(move |s| s.write(|tx| tx.add_audit(&entry)))
        .await
    {
        tracing::error!(error = %e, "cannot write the audit log");
    }
}

/// Whether a request's `Host` may be served when `http.public_url` names the master: that
/// name (with or without its port), any IP address literal (nodes and operators reach the
/// master by address), or `localhost`. Another name is a DNS rebinding or a misdirected
/// request. With no name configured every Host is served (boot scripts never embed it).
pub fn host_allowed(host: &str, public_url: Option<&str>) -> bool {
    let Some(url) = public_url else {
        return true;
    };
    let configured = url
        .split("://")
        .nth(1)
        .unwrap_or(url)
        .split('/')
        .next()
        .unwrap_or("");
    let name_of = |h: &str| -> String {
        if let Some(rest) = h.strip_prefix('[') {
            return rest.split(']').next().unwrap_or("").to_ascii_lowercase();
        }
        h.rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(h, |(name, _)| name)
            .to_ascii_lowercase()
    };
    let name = name_of(host);
    name.parse::<std::net::IpAddr>().is_ok() || name == "localhost" || name == name_of(configured)
}

/// Refuse a request whose `Host` names another site (see [`host_allowed`]) with 421.
pub async fn check_host(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let public_url = req
        .app_data::<web::Data<AppState>>()
        .and_then(|s| s.boot.public_url.clone());
    let host = req.connection_info().host().to_string();
    if host_allowed(&host, public_url.as_deref()) {
        return next.call(req).await;
    }
    tracing::warn!(peer = %peer(&req), %host, "request for another host refused");
    let refusal = ApiError::MisdirectedRequest(format!(
        "this master answers to {}, not {host}",
        public_url.unwrap_or_default()
    ));
    Ok(req.into_response(refusal.error_response()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_checked_only_where_a_name_is_configured() {
        assert!(host_allowed("evil.example", None));
        let url = Some("http://master.lab:8000");
        assert!(host_allowed("master.lab:8000", url));
        assert!(host_allowed("MASTER.lab", url));
        assert!(host_allowed("10.20.0.2:8000", url));
        assert!(host_allowed("[::1]:8000", url));
        assert!(host_allowed("localhost:8000", url));
        assert!(!host_allowed("evil.example", url));
        assert!(!host_allowed("master.lab.evil.example:8000", url));
    }
}
