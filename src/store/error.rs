//! The store's error type: what went wrong at the database boundary, with the path, migration
//! or row that a user needs to act on, and a stable code the HTTP layer maps to a status.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("migration {version} ({name}) failed: {source}")]
    Migration {
        version: u32,
        name: &'static str,
        source: rusqlite::Error,
    },
    #[error(
        "database schema version {found} is newer than this stoker understands ({latest}); \
         upgrade stoker or restore a backup"
    )]
    TooNew { found: u32, latest: u32 },
    #[error("{0}")]
    Conflict(String),
    #[error("{}", super::NO_RELEASE_MESSAGE)]
    NoRelease,
    /// Input the engine refused inside a write (a network configuration, interfaces): each
    /// problem named by its field; nothing was written.
    #[error("invalid {what}: {}", crate::model::FieldError::joined(.fields))]
    Invalid {
        what: &'static str,
        fields: Vec<crate::model::FieldError>,
    },
    /// A change refused in the state things are in (a network change while deploying): 403.
    #[error("{0}")]
    Forbidden(String),
    #[error("{entity} {id} not found")]
    NotFound { entity: &'static str, id: String },
    #[error("database holds an invalid {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    /// A grouped write ran, but its group could not be committed (or never ran).
    #[error("the write was not committed: {0}")]
    Commit(String),
    /// SQLite or a file write found no space left on the disk holding `path`: nothing of the
    /// change was kept, everything committed before is intact.
    #[error(
        "the disk holding {} is full: nothing was written; free space there (or move the data \
         directory) and try again",
        .path.display()
    )]
    DiskFull { path: PathBuf },
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the store's {name} thread: {source}")]
    Thread {
        name: &'static str,
        source: std::io::Error,
    },
}

impl From<rusqlite::Error> for StoreError {
    /// SQLite's "database or disk is full" is [`StoreError::DiskFull`]; its path is filled in
    /// by the store ([`StoreError::at`]), which knows its file.
    fn from(e: rusqlite::Error) -> StoreError {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
            StoreError::DiskFull {
                path: PathBuf::new(),
            }
        } else {
            StoreError::Sqlite(e)
        }
    }
}

impl StoreError {
    /// A full disk not yet located, located at `path` (the database file).
    pub(crate) fn at(self, path: &std::path::Path) -> StoreError {
        match self {
            StoreError::DiskFull { path: p } if p.as_os_str().is_empty() => StoreError::DiskFull {
                path: path.to_path_buf(),
            },
            other => other,
        }
    }

    /// A stable identifier of the error kind, for API clients.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::NotFound { .. } => "not_found",
            StoreError::Conflict(_) => "conflict",
            StoreError::NoRelease => "no_release",
            StoreError::Invalid { .. } => "invalid_input",
            StoreError::Forbidden(_) => "forbidden",
            StoreError::DiskFull { .. } => "disk_full",
            StoreError::Io { .. }
            | StoreError::Open { .. }
            | StoreError::Migration { .. }
            | StoreError::TooNew { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Commit(_)
            | StoreError::Thread { .. }
            | StoreError::Sqlite(_) => "internal",
        }
    }

    /// The same error again for another caller, when it is one a grouped write's callers must
    /// each hear as it is (a full disk); `None` for the others.
    pub fn again(&self) -> Option<StoreError> {
        match self {
            StoreError::DiskFull { path } => Some(StoreError::DiskFull { path: path.clone() }),
            _ => None,
        }
    }
}
