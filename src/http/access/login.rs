//! The dashboard's side of access control: the sign-in page and form (a session cookie:
//! HttpOnly, SameSite=Strict, Secure under TLS, with idle and absolute expiry), signing out,
//! the Account page (one's role, password and personal API tokens, each shown once) and the
//! Audit log page. The sign-in form carries a CSRF token of its own (a cookie it must match),
//! since there is no session yet; the other forms carry the session's.

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use crate::auth::{Role, secret};
use crate::http::access::{Caller, SESSION_COOKIE, encode, session_caller};
use crate::http::pages::PageError;
use crate::http::pages::views::Me;
use crate::http::{ApiError, AppState};
use crate::store::{ApiToken, AuditEntry};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The sign-in form's own CSRF cookie.
const LOGIN_CSRF_COOKIE: &str = "stoker_login";

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    version: &'static str,
    next: String,
    csrf: String,
    message: Option<String>,
    user: String,
}

/// Only a path on this site: never another origin (`//host`, `https:`…).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_string(),
        _ => "/".to_string(),
    }
}

fn html(
    status: StatusCode,
    body: Result<String, askama::Error>,
) -> Result<HttpResponse, PageError> {
    let body = body.map_err(|e| ApiError::Internal(format!("page template: {e}")))?;
    Ok(HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body))
}

/// A cookie of the dashboard's: HttpOnly, SameSite=Strict, Secure under TLS.
pub(crate) fn cookie<'a>(
    state: &AppState,
    name: &'a str,
    value: String,
    max_age: i64,
) -> Cookie<'a> {
    Cookie::build(name, value)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(state.auth.tls)
        .max_age(CookieDuration::seconds(max_age))
        .finish()
}

fn render_login(
    state: &AppState,
    status: StatusCode,
    next: String,
    user: String,
    message: Option<String>,
) -> Result<HttpResponse, PageError> {
    let (csrf, _) =
        secret::new(secret::Kind::Csrf).map_err(|e| ApiError::Internal(e.to_string()))?;
    let page = LoginPage {
        version: VERSION,
        next,
        csrf: csrf.clone(),
        message,
        user,
    };
    let mut res = html(status, page.render())?;
    res.add_cookie(&cookie(state, LOGIN_CSRF_COOKIE, csrf, 3600))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(res)
}

#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

/// `GET /login[?next=PATH]`
pub async fn page(
    state: web::Data<AppState>,
    req: HttpRequest,
    query: web::Query<NextQuery>,
) -> Result<HttpResponse, PageError> {
    let next = safe_next(query.next.as_deref());
    if session_caller(&state, &req).await?.is_some() {
        return Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, next))
            .finish());
    }
    render_login(&state, StatusCode::OK, next, String::new(), None)
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    next: String,
}

/// `POST /login`: start a session and go where the visitor was going.
pub async fn submit(
    state: web::Data<AppState>,
    req: HttpRequest,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, PageError> {
    let form = form.into_inner();
    let next = safe_next(Some(&form.next));
    let expected = req
        .cookie(LOGIN_CSRF_COOKIE)
        .map(|c| c.value().to_string())
        .unwrap_or_default();
    if expected.is_empty() || !secret::constant_time_eq(&expected, &form.csrf) {
        return render_login(
            &state,
            StatusCode::FORBIDDEN,
            next,
            form.username,
            Some("The sign-in form expired. Try again.".to_string()),
        );
    }
    if let Err(ApiError::RateLimited { retry_after, .. }) =
        crate::http::access::users::login_rate_limit(&state, &req)
    {
        return render_login(
            &state,
            StatusCode::TOO_MANY_REQUESTS,
            next,
            form.username,
            Some(format!(
                "Too many sign-in attempts from your address. Try again in {retry_after} s."
            )),
        );
    }
    let Some(login) =
        crate::http::access::users::check_password(&state, form.username.clone(), form.password)
            .await?
    else {
        crate::http::access::users::count_failure(&state, &req);
        // The form again with its message (200: a browser treats an HTML 401 as a failed load).
        return render_login(
            &state,
            StatusCode::OK,
            next,
            form.username,
            Some("Wrong user name or password.".to_string()),
        );
    };
    let (token, hash) =
        secret::new(secret::Kind::Session).map_err(|e| ApiError::Internal(e.to_string()))?;
    let (csrf, _) =
        secret::new(secret::Kind::Csrf).map_err(|e| ApiError::Internal(e.to_string()))?;
    let now = crate::clock::now();
    let user_id = login.user.id;
    state
        .store(move |s| s.write(|tx| tx.create_session(&hash, user_id, &csrf, now)))
        .await?;
    tracing::info!(user = %login.user.name, role = %login.user.role, "signed in");
    let mut res = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, next))
        .finish();
    let lifetime = state.auth.sessions.absolute;
    res.add_cookie(&cookie(&state, SESSION_COOKIE, token, lifetime))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut gone = cookie(&state, LOGIN_CSRF_COOKIE, String::new(), 0);
    gone.make_removal();
    res.add_cookie(&gone)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(res)
}

/// `POST /logout`
pub async fn logout(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Caller,
) -> Result<HttpResponse, PageError> {
    if let Some(c) = req.cookie(SESSION_COOKIE) {
        let hash = secret::hash(c.value());
        state
            .store(move |s| s.write(|tx| tx.delete_session(&hash)))
            .await?;
    }
    tracing::info!(user = %caller.0.user, "signed out");
    let mut res = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/login"))
        .finish();
    let mut gone = cookie(&state, SESSION_COOKIE, String::new(), 0);
    gone.make_removal();
    res.add_cookie(&gone)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(res)
}

/// One token row of the Account page.
struct TokenRow {
    id: i64,
    name: String,
    kind: String,
    role: String,
    created: String,
    expires: String,
    last_used: String,
}

impl TokenRow {
    fn of(t: &ApiToken, now: i64) -> TokenRow {
        TokenRow {
            id: t.id,
            name: t.name.clone(),
            kind: t.kind.clone(),
            role: t.role.to_string(),
            created: crate::http::pages::views::utc(t.created_at),
            expires: crate::http::pages::views::utc(t.expires_at),
            last_used: t.last_used_at.map_or_else(
                || "never".to_string(),
                |at| crate::http::pages::views::ago(at, now),
            ),
        }
    }
}

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    tokens: Vec<TokenRow>,
    roles: Vec<&'static str>,
    /// A token just created: (name, secret), shown this once.
    created: Option<(String, String)>,
    message: Option<String>,
    error: Option<String>,
}

/// What the Account page says above its forms.
enum Notice {
    None,
    /// A token just made: its name and secret, shown this once.
    NewToken(String, String),
    Done(String),
    Problem(String),
}

async fn account_page(
    state: &AppState,
    caller: &Caller,
    status: StatusCode,
    notice: Notice,
) -> Result<HttpResponse, PageError> {
    let owner = caller.0.user_id;
    let tokens = state
        .store(move |s| s.read(|tx| tx.api_tokens(Some(owner))))
        .await?;
    let now = crate::clock::now();
    let (mut created, mut message, mut error) = (None, None, None);
    match notice {
        Notice::None => {}
        Notice::NewToken(name, token) => created = Some((name, token)),
        Notice::Done(m) => message = Some(m),
        Notice::Problem(m) => error = Some(m),
    }
    let page = AccountPage {
        nav: "account",
        version: VERSION,
        me: Me::of(caller),
        tokens: tokens.iter().map(|t| TokenRow::of(t, now)).collect(),
        roles: Role::ALL
            .iter()
            .rev()
            .filter(|r| caller.0.role.allows(**r))
            .map(|r| r.as_str())
            .collect(),
        created,
        message,
        error,
    };
    html(status, page.render())
}

/// The Account page again, saying why the API refused what its form asked.
async fn account_refusal(
    state: &AppState,
    caller: &Caller,
    refusal: ApiError,
) -> Result<HttpResponse, PageError> {
    let status = actix_web::ResponseError::status_code(&refusal);
    account_page(state, caller, status, Notice::Problem(refusal.to_string())).await
}

/// `GET /account`
pub async fn account(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<HttpResponse, PageError> {
    account_page(&state, &caller, StatusCode::OK, Notice::None).await
}

#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    days: String,
}

/// `POST /account/tokens`: the page answers with the new token, shown this once (no redirect,
/// so a reload does not show it again).
pub async fn create_token(
    state: web::Data<AppState>,
    caller: Caller,
    form: web::Form<TokenForm>,
) -> Result<HttpResponse, PageError> {
    let form = form.into_inner();
    let days = match form.days.trim() {
        "" => None,
        d => match d.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                let msg = format!("Expiry must be a number of days, not {d:?}.");
                return account_refusal(&state, &caller, ApiError::BadRequest(msg)).await;
            }
        },
    };
    let request = crate::http::access::users::TokenRequest {
        name: form.name,
        role: Some(form.role),
        expires_in_days: days,
    };
    match crate::http::access::users::new_personal_token(&state, &caller.0, request).await {
        Ok(made) => {
            let name = made["name"].as_str().unwrap_or_default().to_string();
            let token = made["token"].as_str().unwrap_or_default().to_string();
            account_page(
                &state,
                &caller,
                StatusCode::CREATED,
                Notice::NewToken(name, token),
            )
            .await
        }
        Err(e) => account_refusal(&state, &caller, e).await,
    }
}

/// `POST /account/tokens/{id}/revoke`
pub async fn revoke_token(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = crate::http::api::catalog::id_of(&path, "token")?;
    crate::http::access::users::revoke(&state, &caller.0, id).await?;
    let done = Notice::Done(format!("Token {id} revoked."));
    account_page(&state, &caller, StatusCode::OK, done).await
}

#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    current: String,
    #[serde(default)]
    new: String,
    #[serde(default)]
    confirm: String,
}

/// `POST /account/password`: change one's own password (the current one is needed); every
/// session of the user ends, so the page asks to sign in again.
pub async fn change_password(
    state: web::Data<AppState>,
    caller: Caller,
    form: web::Form<PasswordForm>,
) -> Result<HttpResponse, PageError> {
    let form = form.into_inner();
    if form.new != form.confirm {
        let msg = "The new password and its confirmation differ.".to_string();
        return account_refusal(&state, &caller, ApiError::BadRequest(msg)).await;
    }
    let change = crate::http::access::users::UserChange {
        password: Some(form.new),
        current_password: Some(form.current),
        role: None,
    };
    match crate::http::access::users::change_user(&state, &caller.0, caller.0.user.clone(), change)
        .await
    {
        Ok(()) => Ok(HttpResponse::SeeOther()
            .insert_header((
                header::LOCATION,
                format!("/login?next={}", encode("/account")),
            ))
            .finish()),
        Err(e) => account_refusal(&state, &caller, e).await,
    }
}

/// One row of the Audit page.
struct AuditRow {
    at: String,
    actor: String,
    role: String,
    source: String,
    what: String,
    status: u16,
    ok: bool,
    detail: String,
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    nav: &'static str,
    version: &'static str,
    me: Me,
    rows: Vec<AuditRow>,
    retention_days: i64,
}

/// `GET /audit`: the newest 200 state-changing requests.
pub async fn audit(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse, PageError> {
    let entries: Vec<AuditEntry> = state.store(|s| s.read(|tx| tx.audit(200, None))).await?;
    let page = AuditPage {
        nav: "audit",
        version: VERSION,
        me: Me::of(&caller),
        rows: entries
            .into_iter()
            .map(|e| AuditRow {
                at: crate::http::pages::views::utc(e.at),
                actor: e.actor,
                role: e.role,
                source: e.source,
                what: format!("{} {}", e.method, e.path),
                status: e.status,
                ok: e.status < 400,
                detail: e.detail,
            })
            .collect(),
        retention_days: state.auth.audit_retention_days,
    };
    html(StatusCode::OK, page.render())
}
