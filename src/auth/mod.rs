//! Access control: who may call what. Operators sign in as users with one of three roles
//! ([`Role`]); every route is registered with the [`Access`] it needs (see `http::access`), so
//! none can exist without one. Users' passwords are argon2id PHC strings ([`password`]);
//! sessions, API tokens and Keystone tokens are random secrets of which only a SHA-256 is
//! stored ([`secret`]); secrets in settings and task data are masked for roles that do not need
//! them ([`mask`]). Nothing here touches the database or the network: the store keeps users,
//! sessions, tokens and the audit log, and the HTTP edge applies the rules.

pub mod first_start;
pub mod mask;
pub mod password;
pub mod role;
pub mod secret;

pub use role::{Access, Principal, Role, Via};

/// Why a credential or an account change is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("{0}")]
    InvalidName(String),
    #[error("the password is too short: at least {min} characters are needed")]
    WeakPassword { min: usize },
    #[error("unknown role {0:?}: expected admin, operator or viewer")]
    UnknownRole(String),
    #[error("cannot hash the password: {0}")]
    Hash(String),
    #[error("no randomness available: {0}")]
    Random(String),
}

/// Check a user name: 1–64 characters of letters, digits, `.`, `_`, `-` and `@`.
pub fn check_user_name(name: &str) -> Result<(), AuthError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if ok {
        Ok(())
    } else {
        Err(AuthError::InvalidName(format!(
            "invalid user name {name:?}: use 1 to 64 letters, digits, '.', '_', '-' or '@'"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names() {
        assert!(check_user_name("admin").is_ok());
        assert!(check_user_name("ops.team-1@site").is_ok());
        assert!(check_user_name("").is_err());
        assert!(check_user_name("a b").is_err());
        assert!(check_user_name(&"x".repeat(65)).is_err());
        assert!(check_user_name("<script>").is_err());
    }
}
