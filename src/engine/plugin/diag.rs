//! Diagnostics: what the loader and the validator say about a package. Each has a level, the
//! package-relative file, a 1-based line and column (0 when the finding is about a whole file),
//! the field path inside the file (`releases.0.graphs.1.type`) and a message. Pure data.

use serde::{Deserialize, Serialize};

use super::yaml::Pos;

/// How bad a finding is. Errors refuse installation; warnings and infos are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warning,
    Info,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Info => "info",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub level: Level,
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// Dotted path of the field inside the file; empty for the file as a whole.
    pub field: String,
    pub message: String,
}

impl Diagnostic {
    pub fn new(level: Level, pos: &Pos, field: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            level,
            file: pos.file.to_string(),
            line: pos.line,
            column: pos.column,
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// `file:line:col: level: field: message`, as compilers print.
    pub fn render(&self) -> String {
        let place = if self.line > 0 {
            format!("{}:{}:{}", self.file, self.line, self.column)
        } else {
            self.file.clone()
        };
        let field = if self.field.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.field)
        };
        format!("{place}: {}: {field}{}", self.level.as_str(), self.message)
    }
}

/// A growing list of findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, level: Level, pos: &Pos, field: &str, message: impl Into<String>) {
        self.0.push(Diagnostic::new(level, pos, field, message));
    }
    pub fn error(&mut self, pos: &Pos, field: &str, message: impl Into<String>) {
        self.push(Level::Error, pos, field, message);
    }
    pub fn warning(&mut self, pos: &Pos, field: &str, message: impl Into<String>) {
        self.push(Level::Warning, pos, field, message);
    }
    pub fn info(&mut self, pos: &Pos, field: &str, message: impl Into<String>) {
        self.push(Level::Info, pos, field, message);
    }
    pub fn count(&self, level: Level) -> usize {
        self.0.iter().filter(|d| d.level == level).count()
    }
    pub fn has_errors(&self) -> bool {
        self.count(Level::Error) > 0
    }
    /// Sorted by file, line, column, then level; exact duplicates removed.
    pub fn sorted(mut self) -> Diagnostics {
        self.0.sort_by(|a, b| {
            (&a.file, a.line, a.column, a.level, &a.field, &a.message)
                .cmp(&(&b.file, b.line, b.column, b.level, &b.field, &b.message))
        });
        self.0.dedup();
        self
    }
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }
}

/// Join a field path and a key or index.
pub fn join(path: &str, part: impl std::fmt::Display) -> String {
    if path.is_empty() {
        part.to_string()
    } else {
        format!("{path}.{part}")
    }
}
