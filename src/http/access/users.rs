//! The access-control API: signing in with a password (`POST /api/v1/login`, and the
//! Keystone v2.0 token endpoint python-fuelclient uses when `/api/v1/version` says
//! `auth_required`), the caller (`/api/v1/me`), personal API tokens (shown once, stored
//! hashed), users (admins only, but everybody may change their own password) and the audit log.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{self, Principal, Role, Via, password, secret};
use crate::http::access::Caller;
use crate::http::{ApiError, AppState};
use crate::store::{Login, NewToken};

/// Longest a personal token may live, in days.
pub const MAX_TOKEN_DAYS: i64 = 3650;
/// A personal token's lifetime when none is asked for, in days.
pub const DEFAULT_TOKEN_DAYS: i64 = 90;

fn parse<T: serde::de::DeserializeOwned>(body: &[u8], what: &'static str) -> Result<T, ApiError> {
    ApiError::parse_fields(body, what)
}

fn auth_error(e: auth::AuthError) -> ApiError {
    match e {
        auth::AuthError::Hash(_) | auth::AuthError::Random(_) => ApiError::Internal(e.to_string()),
        other => ApiError::BadRequest(other.to_string()),
    }
}

/// Refuse a password sign-in from a client whose failed attempts used up its allowance (only
/// failures count, see [`count_failure`]: a script running one fuel2 command after another,
/// each signing in anew, is never slowed down).
pub fn login_rate_limit(state: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    if let Some(peer) = req.peer_addr()
        && let Some(wait) = state.login_limit.peek(peer.ip(), std::time::Instant::now())
    {
        tracing::warn!(%peer, "sign-in rate-limited");
        return Err(ApiError::RateLimited {
            client: peer.ip().to_string(),
            retry_after: wait.as_secs().max(1),
        });
    }
    Ok(())
}

/// Check a user's password (argon2 on the blocking pool; an unknown user costs the same).
pub async fn check_password(
    state: &AppState,
    name: String,
    password: String,
) -> Result<Option<Login>, ApiError> {
    let lookup = name.clone();
    let login = state.store(move |s| s.read(|tx| tx.login(&lookup))).await?;
    let ok = crate::http::off_worker(move || {
        let hash = login
            .as_ref()
            .map_or(password::decoy(), |l| l.password_hash.as_str());
        let ok = password::verify(&password, hash);
        (ok, login)
    })
    .await?;
    match ok {
        (true, Some(login)) => Ok(Some(login)),
        _ => {
            tracing::warn!(user = %name, "sign-in refused: wrong user name or password");
            Ok(None)
        }
    }
}

/// Count a failed sign-in against the client's allowance.
pub fn count_failure(state: &AppState, req: &HttpRequest) {
    if let Some(peer) = req.peer_addr() {
        let _ = state
            .login_limit
            .check(peer.ip(), std::time::Instant::now());
    }
}

/// Issue a short-lived `login` token for a user.
async fn login_token(
    state: &AppState,
    login: &Login,
    name: &str,
) -> Result<(String, i64), ApiError> {
    let (token, hash) = secret::new(secret::Kind::Keystone).map_err(auth_error)?;
    let now = crate::clock::now();
    let expires_at = now + state.auth.login_token_lifetime;
    let user_id = login.user.id;
    let role = login.user.role;
    let name = name.to_string();
    state
        .store(move |s| {
            s.write(|tx| {
                tx.create_token(
                    &NewToken {
                        user_id,
                        name: &name,
                        kind: "login",
                        role,
                        token_hash: &hash,
                        expires_at,
                    },
                    now,
                )
            })
        })
        .await?;
    Ok((token, expires_at))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    username: String,
    password: String,
}

/// `POST /api/v1/login` `{"username", "password"}`: a token for the API, valid for
/// `auth.login_token_lifetime` (what `stoker login` stores).
pub async fn login(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    login_rate_limit(&state, &req)?;
    let b: LoginBody = parse(&body, "sign-in")?;
    let Some(login) = check_password(&state, b.username.clone(), b.password).await? else {
        count_failure(&state, &req);
        return Err(ApiError::Unauthorized(
            "wrong user name or password".to_string(),
        ));
    };
    let (token, expires_at) = login_token(&state, &login, "login").await?;
    Ok(HttpResponse::Created().json(json!({
        "token": token,
        "expires_at": expires_at,
        "user": login.user.name,
        "role": login.user.role,
    })))
}

/// Keystone's time format: Nailgun's with a `Z`.
fn iso(ts: i64) -> String {
    format!("{}Z", crate::model::iso(ts))
}

/// `POST /keystone/v2.0/tokens`: Keystone v2.0 as python-fuelclient 11.0.0 uses it, with a
/// password (`auth.passwordCredentials`) or, to re-scope, a token it got before
/// (`auth.token.id`). Answers Keystone's `access` document; a wrong password or token is 401.
pub async fn keystone_tokens(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let doc: Value = parse(&body, "Keystone token request")?;
    let auth = doc.get("auth").ok_or_else(|| ApiError::InvalidInput {
        what: "Keystone token request",
        fields: vec![crate::model::FieldError {
            field: "auth".to_string(),
            message: "missing".to_string(),
        }],
    })?;
    let tenant = auth
        .get("tenantName")
        .and_then(Value::as_str)
        .unwrap_or("admin")
        .to_string();
    let now = crate::clock::now();
    let (token, expires_at, user, role) = if let Some(creds) = auth.get("passwordCredentials") {
        login_rate_limit(&state, &req)?;
        let field = |k: &str| {
            creds
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let Some(login) = check_password(&state, field("username"), field("password")).await?
        else {
            count_failure(&state, &req);
            return Err(ApiError::Unauthorized(
                "The request you have made requires authentication.".to_string(),
            ));
        };
        let (token, expires_at) = login_token(&state, &login, "keystone").await?;
        (token, expires_at, login.user.name, login.user.role)
    } else if let Some(id) = auth.pointer("/token/id").and_then(Value::as_str) {
        let hash = secret::hash(id);
        let found = state
            .store(move |s| s.read(|tx| tx.token_principal(&hash, now)))
            .await?;
        let Some(t) = found else {
            return Err(ApiError::Unauthorized(
                "The request you have made requires authentication.".to_string(),
            ));
        };
        let p = t.principal;
        (id.to_string(), t.expires_at, p.user, p.role)
    } else {
        return Err(ApiError::InvalidInput {
            what: "Keystone token request",
            fields: vec![crate::model::FieldError {
                field: "auth".to_string(),
                message: "needs passwordCredentials or token".to_string(),
            }],
        });
    };
    Ok(HttpResponse::Ok().json(json!({"access": {
        "token": {
            "id": token,
            "expires": iso(expires_at),
            "issued_at": iso(now),
            "tenant": {"id": tenant, "name": tenant, "enabled": true, "description": null},
        },
        "serviceCatalog": [],
        "user": {"id": user, "name": user, "username": user,
                 "roles": [{"name": role.as_str()}], "roles_links": []},
        "metadata": {"is_admin": i32::from(role == Role::Admin), "roles": [role.as_str()]},
    }})))
}

fn whoami(p: &Principal) -> Value {
    json!({
        "name": p.user,
        "role": p.role,
        "via": match p.via { Via::Token { .. } => "token", Via::Session { .. } => "session" },
    })
}

/// `GET /api/v1/me`: who the token belongs to.
pub async fn me(caller: Caller) -> HttpResponse {
    HttpResponse::Ok().json(whoami(&caller.0))
}

#[derive(Deserialize)]
pub struct TokensQuery {
    #[serde(default)]
    all: bool,
}

/// `GET /api/v1/tokens[?all=true]`: the caller's tokens (an admin may list everybody's).
pub async fn tokens(
    state: web::Data<AppState>,
    caller: Caller,
    query: web::Query<TokensQuery>,
) -> Result<HttpResponse, ApiError> {
    let owner = if query.all {
        if caller.0.role != Role::Admin {
            return Err(ApiError::Forbidden(
                "only an admin may list everybody's tokens".to_string(),
            ));
        }
        None
    } else {
        Some(caller.0.user_id)
    };
    let list = state
        .store(move |s| s.read(|tx| tx.api_tokens(owner)))
        .await?;
    Ok(HttpResponse::Ok().json(list))
}

/// What a new personal token asks for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub name: String,
    /// At most the caller's own role; default: the caller's role.
    #[serde(default)]
    pub role: Option<String>,
    /// Days until it expires (1 to 3650); default 90.
    #[serde(default)]
    pub expires_in_days: Option<i64>,
}

/// Create a personal token for `caller`; the secret is returned once.
pub async fn new_personal_token(
    state: &AppState,
    caller: &Principal,
    req: TokenRequest,
) -> Result<Value, ApiError> {
    let name = req.name.trim().to_string();
    if name.is_empty() || name.len() > 100 {
        return Err(ApiError::InvalidInput {
            what: "token",
            fields: vec![crate::model::FieldError {
                field: "name".to_string(),
                message: "give the token a name of 1 to 100 characters".to_string(),
            }],
        });
    }
    let role = match req.role.as_deref() {
        None | Some("") => caller.role,
        Some(r) => r.parse::<Role>().map_err(|e| ApiError::InvalidInput {
            what: "token",
            fields: vec![crate::model::FieldError {
                field: "role".to_string(),
                message: e.to_string(),
            }],
        })?,
    };
    if !caller.role.allows(role) {
        return Err(ApiError::Forbidden(format!(
            "{} is {}; a token cannot have more power than its user",
            caller.user, caller.role
        )));
    }
    let days = req.expires_in_days.unwrap_or(DEFAULT_TOKEN_DAYS);
    if !(1..=MAX_TOKEN_DAYS).contains(&days) {
        return Err(ApiError::InvalidInput {
            what: "token",
            fields: vec![crate::model::FieldError {
                field: "expires_in_days".to_string(),
                message: format!("must be from 1 to {MAX_TOKEN_DAYS}"),
            }],
        });
    }
    let (token, hash) = secret::new(secret::Kind::ApiToken).map_err(auth_error)?;
    let now = crate::clock::now();
    let expires_at = now + days * 86_400;
    let user_id = caller.user_id;
    let stored_name = name.clone();
    let id = state
        .store(move |s| {
            s.write(|tx| {
                tx.create_token(
                    &NewToken {
                        user_id,
                        name: &stored_name,
                        kind: "personal",
                        role,
                        token_hash: &hash,
                        expires_at,
                    },
                    now,
                )
            })
        })
        .await?;
    tracing::info!(user = %caller.user, token = id, %role, "API token created");
    Ok(json!({
        "id": id,
        "name": name,
        "role": role,
        "expires_at": expires_at,
        "token": token,
    }))
}

/// `POST /api/v1/tokens` `{"name", "role"?, "expires_in_days"?}`: 201 with the token, shown
/// this once.
pub async fn create_token(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let req: TokenRequest = parse(&body, "token")?;
    let made = new_personal_token(&state, &caller.0, req).await?;
    Ok(HttpResponse::Created().json(made))
}

/// Revoke a token: one's own, or (an admin) anybody's.
pub async fn revoke(state: &AppState, caller: &Principal, id: i64) -> Result<(), ApiError> {
    let owner = (caller.role != Role::Admin).then_some(caller.user_id);
    state
        .store(move |s| s.write(|tx| tx.revoke_token(id, owner)))
        .await?;
    tracing::info!(user = %caller.user, token = id, "API token revoked");
    Ok(())
}

/// `DELETE /api/v1/tokens/{id}`
pub async fn revoke_token(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = crate::http::api::catalog::id_of(&path, "token")?;
    revoke(&state, &caller.0, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `GET /api/v1/users`
pub async fn list(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let users = state.store(|s| s.read(|tx| tx.users())).await?;
    Ok(HttpResponse::Ok().json(users))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewUser {
    name: String,
    role: String,
    password: String,
}

/// `POST /api/v1/users` `{"name", "role", "password"}`
pub async fn add(state: web::Data<AppState>, body: web::Bytes) -> Result<HttpResponse, ApiError> {
    let u: NewUser = parse(&body, "user")?;
    auth::check_user_name(&u.name).map_err(auth_error)?;
    let role: Role = u.role.parse().map_err(auth_error)?;
    let hash = crate::http::off_worker(move || password::hash(&u.password))
        .await?
        .map_err(auth_error)?;
    let now = crate::clock::now();
    let name = u.name;
    let user = state
        .store(move |s| s.write(|tx| tx.create_user(&name, role, &hash, now)))
        .await?;
    tracing::info!(user = %user.name, role = %user.role, "user added");
    Ok(HttpResponse::Created().json(user))
}

/// A change to a user: a password (one's own needs the current one), a role (admins only).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserChange {
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub current_password: Option<String>,
    #[serde(default)]
    pub role: Option<String>,
}

/// Apply a [`UserChange`] to `name` on behalf of `caller`.
pub async fn change_user(
    state: &AppState,
    caller: &Principal,
    name: String,
    change: UserChange,
) -> Result<(), ApiError> {
    let own = caller.user == name;
    let admin = caller.role == Role::Admin;
    if !own && !admin {
        return Err(ApiError::Forbidden(format!(
            "{} may change only their own password",
            caller.user
        )));
    }
    let role = match change.role.as_deref() {
        None => None,
        Some(_) if !admin => {
            return Err(ApiError::Forbidden(
                "only an admin may change roles".to_string(),
            ));
        }
        Some(r) => Some(r.parse::<Role>().map_err(auth_error)?),
    };
    let hash = match change.password {
        None => None,
        Some(new) => {
            // One's own password needs the current one; an admin may skip it (to reset
            // their own from the CLI), but one given is checked (the Account page gives it).
            if own && (!admin || change.current_password.is_some()) {
                let current = change.current_password.unwrap_or_default();
                if check_password(state, name.clone(), current)
                    .await?
                    .is_none()
                {
                    return Err(ApiError::Forbidden(
                        "the current password is wrong".to_string(),
                    ));
                }
            }
            let hash = crate::http::off_worker(move || password::hash(&new))
                .await?
                .map_err(auth_error)?;
            Some(hash)
        }
    };
    if role.is_none() && hash.is_none() {
        return Err(ApiError::BadRequest(
            "nothing to change: give password and/or role".to_string(),
        ));
    }
    let now = crate::clock::now();
    let who = name.clone();
    state
        .store(move |s| {
            s.write(|tx| {
                if let Some(h) = &hash {
                    tx.set_password(&who, h, now)?;
                }
                if let Some(r) = role {
                    tx.set_role(&who, r)?;
                }
                Ok(())
            })
        })
        .await?;
    tracing::info!(user = %name, by = %caller.user, "user changed");
    Ok(())
}

/// `PUT /api/v1/users/{name}` `{"password"?, "current_password"?, "role"?}`
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let change: UserChange = parse(&body, "user change")?;
    change_user(&state, &caller.0, path.into_inner(), change).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `DELETE /api/v1/users/{name}`: the last admin cannot be removed.
pub async fn remove(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let name = path.into_inner();
    let who = name.clone();
    state
        .store(move |s| s.write(|tx| tx.remove_user(&who)))
        .await?;
    tracing::info!(user = %name, "user removed");
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Deserialize)]
pub struct AuditQuery {
    limit: Option<u32>,
    before: Option<i64>,
}

/// `GET /api/v1/audit[?limit=N&before=ID]`: newest first, at most 1,000 at a time.
pub async fn audit(
    state: web::Data<AppState>,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    let before = query.before;
    let entries = state
        .store(move |s| s.read(|tx| tx.audit(limit, before)))
        .await?;
    Ok(HttpResponse::Ok().json(entries))
}
