//! The CLI's exit codes, one meaning each, stable for scripts: what a command's error was
//! ([`code_of`] reads it off the error chain: an [`ApiFailure`] from the master, a
//! [`CliError`] the CLI decided itself, a configuration error) becomes the process's code.
//! [`HELP`] is the table `--help` and the README show.

use super::client::ApiFailure;

/// Everything went as asked.
pub const OK: u8 = 0;
/// The operation failed: a deployment followed to `error` or `aborted`, a power action on
/// some node, the master's own failure (5xx), anything else.
pub const FAILED: u8 = 1;
/// Bad usage: unknown flags or values, an ambiguous name, a bad configuration.
pub const USAGE: u8 = 2;
/// What was named does not exist (404, or no node or environment of that name).
pub const NOT_FOUND: u8 = 3;
/// The master refused the request: invalid input naming the field, a conflict (a deployment
/// running, a name taken, nothing to deploy).
pub const REFUSED: u8 = 4;
/// Not authorized: no token, a bad or expired one (401), a role too weak (403).
pub const UNAUTHORIZED: u8 = 5;
/// The master cannot be reached (connection refused, timeout, TLS failure).
pub const UNREACHABLE: u8 = 6;

/// The exit codes, as `--help` shows them.
pub const HELP: &str = "\
Exit codes:
  0  success
  1  the operation failed (e.g. a followed deployment ended in error or was aborted)
  2  bad usage or configuration
  3  not found (no such node, environment, deployment or step)
  4  refused by the master (invalid input, naming each field; a conflict)
  5  not authorized (no token, an invalid or expired one, a role too weak)
  6  cannot reach the master";

/// An error the CLI decides without asking the master, with the exit code it means.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A reference or argument the CLI cannot use (an ambiguous name, a bad `KEY=VALUE`).
    #[error("{0}")]
    Usage(String),
    /// No node, environment, deployment or step answers to what was named.
    #[error("{0}")]
    NotFound(String),
    /// The state forbids it (no running deployment to abort).
    #[error("{0}")]
    Refused(String),
}

/// The exit code an error means: the first error in its chain that says.
pub fn code_of(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<ApiFailure>() {
            return match e {
                ApiFailure::NoToken => UNAUTHORIZED,
                ApiFailure::Unreachable { .. } => UNREACHABLE,
                ApiFailure::BadAnswer { .. } => FAILED,
                ApiFailure::Refused { status, .. } => match status {
                    401 | 403 => UNAUTHORIZED,
                    404 => NOT_FOUND,
                    400..=499 => REFUSED,
                    _ => FAILED,
                },
            };
        }
        if let Some(e) = cause.downcast_ref::<CliError>() {
            return match e {
                CliError::Usage(_) => USAGE,
                CliError::NotFound(_) => NOT_FOUND,
                CliError::Refused(_) => REFUSED,
            };
        }
        if cause.downcast_ref::<crate::config::ConfigError>().is_some() {
            return USAGE;
        }
        if cause.downcast_ref::<crate::tls::TlsError>().is_some() {
            return UNREACHABLE;
        }
    }
    FAILED
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16) -> anyhow::Error {
        ApiFailure::Refused {
            status,
            code: String::new(),
            message: String::new(),
            fields: Vec::new(),
        }
        .into()
    }

    #[test]
    fn each_failure_has_its_code_wherever_it_is_in_the_chain() {
        assert_eq!(code_of(&refused(404)), NOT_FOUND);
        assert_eq!(code_of(&refused(409)), REFUSED);
        assert_eq!(code_of(&refused(400)), REFUSED);
        assert_eq!(code_of(&refused(422)), REFUSED);
        assert_eq!(code_of(&refused(401)), UNAUTHORIZED);
        assert_eq!(code_of(&refused(403)), UNAUTHORIZED);
        assert_eq!(code_of(&refused(500)), FAILED);
        assert_eq!(code_of(&ApiFailure::NoToken.into()), UNAUTHORIZED);
        let wrapped = anyhow::Error::from(ApiFailure::Unreachable {
            url: "http://127.0.0.1:1".into(),
            reason: "refused".into(),
        })
        .context("listing nodes");
        assert_eq!(code_of(&wrapped), UNREACHABLE);
        assert_eq!(
            code_of(&CliError::Usage("two nodes are called a".into()).into()),
            USAGE
        );
        assert_eq!(code_of(&anyhow::anyhow!("anything else")), FAILED);
    }

    #[test]
    fn the_help_lists_every_code() {
        for code in [
            OK,
            FAILED,
            USAGE,
            NOT_FOUND,
            REFUSED,
            UNAUTHORIZED,
            UNREACHABLE,
        ] {
            assert!(HELP.contains(&format!("\n  {code}  ")), "{code}");
        }
    }
}
