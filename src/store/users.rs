//! Queries on `users`, `sessions` and `api_tokens`: the people who sign in, their dashboard
//! sessions and their bearer tokens. Secrets are stored as SHA-256 hashes and passwords as
//! argon2id PHC strings; this module compares hashes and never sees a secret.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{ReadTxn, Result, StoreError, WriteTxn};
use crate::auth::{Principal, Role, Via};

/// A user as listed (no password hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub role: Role,
    pub created_at: i64,
    pub password_changed_at: i64,
}

/// What signing in needs: the user and their password hash.
#[derive(Debug, Clone)]
pub struct Login {
    pub user: User,
    pub password_hash: String,
}

/// A bearer token as listed (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiToken {
    pub id: i64,
    pub user: String,
    pub name: String,
    pub kind: String,
    pub role: Role,
    pub created_at: i64,
    pub expires_at: i64,
    pub last_used_at: Option<i64>,
}

/// A new bearer token to record.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    pub user_id: i64,
    pub name: &'a str,
    /// `personal` or `login`.
    pub kind: &'a str,
    pub role: Role,
    pub token_hash: &'a str,
    pub expires_at: i64,
}

/// How long sessions last, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Since the session was last used.
    pub idle: i64,
    /// Since it was created, however busy.
    pub absolute: i64,
}

/// A bearer token looked up by its hash.
#[derive(Debug, Clone)]
pub struct TokenCaller {
    pub principal: Principal,
    pub last_used_at: Option<i64>,
    pub expires_at: i64,
}

/// A session looked up by its cookie.
#[derive(Debug, Clone)]
pub struct Session {
    pub principal: Principal,
    pub last_seen_at: i64,
}

fn role(s: String) -> rusqlite::Result<Role> {
    s.parse().map_err(|e: crate::auth::AuthError| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn user_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<User> {
    Ok(User {
        id: r.get(0)?,
        name: r.get(1)?,
        role: role(r.get(2)?)?,
        created_at: r.get(3)?,
        password_changed_at: r.get(4)?,
    })
}

const USER_COLUMNS: &str = "id, name, role, created_at, password_changed_at";

impl ReadTxn<'_> {
    /// Every user, by name.
    pub fn users(&self) -> Result<Vec<User>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!("SELECT {USER_COLUMNS} FROM users ORDER BY name"))?;
        let rows = stmt.query_map([], user_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// How many users exist.
    pub fn user_count(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM users", [], |r| r.get(0))?)
    }

    /// A user and their password hash, for signing in.
    pub fn login(&self, name: &str) -> Result<Option<Login>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {USER_COLUMNS}, password_hash FROM users WHERE name = ?1"
        ))?;
        Ok(stmt
            .query_row([name], |r| {
                Ok(Login {
                    user: user_row(r)?,
                    password_hash: r.get(5)?,
                })
            })
            .optional()?)
    }

    /// The caller a bearer token stands for, if it is known and not expired. The role is the
    /// weaker of the token's and its user's (a demoted user's old tokens lose power with them).
    /// Also says when the token was last used and when it expires.
    pub fn token_principal(&self, token_hash: &str, now: i64) -> Result<Option<TokenCaller>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT t.id, u.id, u.name, t.role, u.role, t.last_used_at, t.expires_at
             FROM api_tokens t
             JOIN users u ON u.id = t.user_id
             WHERE t.token_hash = ?1 AND t.expires_at > ?2",
        )?;
        Ok(stmt
            .query_row(params![token_hash, now], |r| {
                let token_role = role(r.get(3)?)?;
                let user_role = role(r.get(4)?)?;
                let principal = Principal {
                    user_id: r.get(1)?,
                    user: r.get(2)?,
                    role: token_role.min(user_role),
                    via: Via::Token { id: r.get(0)? },
                };
                Ok(TokenCaller {
                    principal,
                    last_used_at: r.get(5)?,
                    expires_at: r.get(6)?,
                })
            })
            .optional()?)
    }

    /// The session a cookie stands for, if it has been neither idle nor alive too long.
    pub fn session(
        &self,
        token_hash: &str,
        now: i64,
        limits: SessionLimits,
    ) -> Result<Option<Session>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT u.id, u.name, u.role, s.csrf, s.last_seen_at FROM sessions s
             JOIN users u ON u.id = s.user_id
             WHERE s.token_hash = ?1 AND s.last_seen_at > ?2 AND s.created_at > ?3",
        )?;
        Ok(stmt
            .query_row(
                params![token_hash, now - limits.idle, now - limits.absolute],
                |r| {
                    Ok(Session {
                        principal: Principal {
                            user_id: r.get(0)?,
                            user: r.get(1)?,
                            role: role(r.get(2)?)?,
                            via: Via::Session { csrf: r.get(3)? },
                        },
                        last_seen_at: r.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    /// Bearer tokens, newest first: one user's, or everybody's.
    pub fn api_tokens(&self, user_id: Option<i64>) -> Result<Vec<ApiToken>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT t.id, u.name, t.name, t.kind, t.role, t.created_at, t.expires_at,
                    t.last_used_at
             FROM api_tokens t JOIN users u ON u.id = t.user_id
             WHERE ?1 IS NULL OR t.user_id = ?1 ORDER BY t.id DESC",
        )?;
        let rows = stmt.query_map([user_id], |r| {
            Ok(ApiToken {
                id: r.get(0)?,
                user: r.get(1)?,
                name: r.get(2)?,
                kind: r.get(3)?,
                role: role(r.get(4)?)?,
                created_at: r.get(5)?,
                expires_at: r.get(6)?,
                last_used_at: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

impl WriteTxn<'_> {
    /// Add a user; a taken name is a conflict.
    pub fn create_user(
        &self,
        name: &str,
        role: Role,
        password_hash: &str,
        now: i64,
    ) -> Result<User> {
        if self.read().login(name)?.is_some() {
            return Err(StoreError::Conflict(format!("user {name} already exists")));
        }
        let inserted_id = self.conn.query_row(
            "INSERT INTO users (name, role, password_hash, created_at, password_changed_at)
             VALUES (?1, ?2, ?3, ?4, ?4)
             RETURNING id",
            params![name, role.as_str(), password_hash, now],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(User {
            id: inserted_id,
            name: name.to_string(),
            role,
            created_at: now,
            password_changed_at: now,
        })
    }

    fn user_id(&self, name: &str) -> Result<i64> {
        self.read()
            .login(name)?
            .map(|l| l.user.id)
            .ok_or_else(|| StoreError::NotFound {
                entity: "user",
                id: name.to_string(),
            })
    }

    /// Refuse a change that would leave no admin.
    fn keep_an_admin(&self, name: &str) -> Result<()> {
        let others: i64 = self.conn.query_row(
            "SELECT count(*) FROM users WHERE role = 'admin' AND name != ?1",
            [name],
            |r| r.get(0),
        )?;
        if others == 0 {
            return Err(StoreError::Conflict(format!(
                "{name} is the last admin; make another user admin first"
            )));
        }
        Ok(())
    }

    /// Set a user's password; their dashboard sessions end (their API tokens stay).
    pub fn set_password(&self, name: &str, password_hash: &str, now: i64) -> Result<()> {
        let id = self.user_id(name)?;
        self.conn.execute(
            "UPDATE users SET password_hash = ?1, password_changed_at = ?2 WHERE id = ?3",
            params![password_hash, now, id],
        )?;
        self.conn
            .execute("DELETE FROM sessions WHERE user_id = ?1", [id])?;
        Ok(())
    }

    /// Change a user's role; the last admin cannot be demoted.
    pub fn set_role(&self, name: &str, role: Role) -> Result<()> {
        let id = self.user_id(name)?;
        if role != Role::Admin {
            self.keep_an_admin(name)?;
        }
        self.conn.execute(
            "UPDATE users SET role = ?1 WHERE id = ?2",
            params![role.as_str(), id],
        )?;
        Ok(())
    }

    /// Remove a user with their sessions and tokens; the last admin cannot be removed.
    pub fn remove_user(&self, name: &str) -> Result<()> {
        let id = self.user_id(name)?;
        self.keep_an_admin(name)?;
        self.conn.execute("DELETE FROM users WHERE id = ?1", [id])?;
        Ok(())
    }

    /// Start a dashboard session.
    pub fn create_session(
        &self,
        token_hash: &str,
        user_id: i64,
        csrf: &str,
        now: i64,
    ) -> Result<()> {
        self.conn.execute(
            "INSERT INTO sessions (token_hash, user_id, csrf, created_at, last_seen_at)
             VALUES (?1, ?2, ?3, ?4, ?4)",
            params![token_hash, user_id, csrf, now],
        )?;
        Ok(())
    }

    /// Note that a session was used (callers do it at most once a minute).
    pub fn touch_session(&self, token_hash: &str, now: i64) -> Result<()> {
        self.conn.execute(
            "UPDATE sessions SET last_seen_at = ?1 WHERE token_hash = ?2",
            params![now, token_hash],
        )?;
        Ok(())
    }

    /// End a session (sign out).
    pub fn delete_session(&self, token_hash: &str) -> Result<()> {
        self.conn
            .execute("DELETE FROM sessions WHERE token_hash = ?1", [token_hash])?;
        Ok(())
    }

    /// Record a bearer token.
    pub fn create_token(&self, t: &NewToken<'_>, now: i64) -> Result<i64> {
        let inserted_id = self.conn.query_row(
            "INSERT INTO api_tokens (user_id, name, kind, role, token_hash, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             RETURNING id",
            params![
                t.user_id,
                t.name,
                t.kind,
                t.role.as_str(),
                t.token_hash,
                now,
                t.expires_at
            ],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(inserted_id)
    }

    /// Note that a token was used (callers do it at most once a minute).
    pub fn touch_token(&self, id: i64, now: i64) -> Result<()> {
        self.conn.execute(
            "UPDATE api_tokens SET last_used_at = ?1 WHERE id = ?2",
            params![now, id],
        )?;
        Ok(())
    }

    /// Revoke a token: any user's (`owner` None, for admins) or only the owner's own.
    pub fn revoke_token(&self, id: i64, owner: Option<i64>) -> Result<()> {
        let n = self.conn.execute(
            "DELETE FROM api_tokens WHERE id = ?1 AND (?2 IS NULL OR user_id = ?2)",
            params![id, owner],
        )?;
        if n == 0 {
            return Err(StoreError::NotFound {
                entity: "token",
                id: id.to_string(),
            });
        }
        Ok(())
    }

    /// Forget expired sessions and tokens.
    pub fn prune_credentials(&self, now: i64, limits: SessionLimits) -> Result<usize> {
        let s = self.conn.execute(
            "DELETE FROM sessions WHERE last_seen_at <= ?1 OR created_at <= ?2",
            params![now - limits.idle, now - limits.absolute],
        )?;
        let t = self
            .conn
            .execute("DELETE FROM api_tokens WHERE expires_at <= ?1", [now])?;
        Ok(s + t)
    }
}
