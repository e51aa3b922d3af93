//! Roles, what a route needs, and who is calling. `admin` may do everything; `operator` runs
//! environments, nodes, deployments and power, but installs no plugins and manages no users;
//! `viewer` only reads. Roles are ordered, so "needs operator" is "at least operator".

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::AuthError;

/// A user's (or a token's) role, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// Whether this role may do what `needed` allows.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = AuthError;

    fn from_str(s: &str) -> Result<Role, AuthError> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            other => Err(AuthError::UnknownRole(other.to_string())),
        }
    }
}

/// What a route needs from its caller. Every route is registered with one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No credential: the boot files and scripts a node fetches before it has one, the sign-in
    /// page and its form, the Keystone token endpoint, static assets and the health check.
    Public,
    /// A node's own call before it has an agent token (the discovery hello, Fuel's discovery
    /// endpoints, the installed OS's service hello with its credential in the body): no
    /// credential for the middleware to check, rate-limited and checked by its handler, and
    /// recorded in the node's history. The audit log keeps only its refusals (401, 403): a
    /// rack that reboots says thousands of hellos in a few seconds, and an audit entry each
    /// was a transaction each beside the agents' group writer.
    Node,
    /// A node's agent token, which the handler checks against that node.
    Agent,
    /// A bearer token (`Authorization: Bearer` or Keystone's `X-Auth-Token`) of at least this
    /// role. Cookies are never enough for these.
    Api(Role),
    /// A dashboard session (cookie) of at least this role; a form post also carries the
    /// session's CSRF token.
    Page(Role),
}

impl Access {
    /// The role needed, for the routes that need one.
    pub fn role(self) -> Option<Role> {
        match self {
            Access::Api(r) | Access::Page(r) => Some(r),
            Access::Public | Access::Node | Access::Agent => None,
        }
    }
}

/// How a caller proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// An API or Keystone token, by its id.
    Token { id: i64 },
    /// A dashboard session, with the CSRF token its forms carry.
    Session { csrf: String },
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user_id: i64,
    pub user: String,
    /// The effective role: for a token, the weaker of the token's and its user's.
    pub role: Role,
    pub via: Via,
}

impl Principal {
    /// The CSRF token of a session; empty for token callers (they post no forms).
    pub fn csrf(&self) -> &str {
        match &self.via {
            Via::Session { csrf } => csrf,
            Via::Token { .. } => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_parse() {
        assert!(Role::Admin.allows(Role::Operator));
        assert!(Role::Operator.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Operator));
        assert!(!Role::Operator.allows(Role::Admin));
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>(), Ok(r));
        }
        assert_eq!(
            "root".parse::<Role>(),
            Err(AuthError::UnknownRole("root".into()))
        );
    }
}
