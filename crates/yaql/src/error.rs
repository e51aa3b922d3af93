//! YAQL errors: one kind per reference exception class (so `--strict-errors` conformance can
//! compare names) plus stoker's own limit errors, with the position in the expression text.
//! Must not format carets or print (the CLI does that).

use std::fmt;

/// The kind of a YAQL error, named after the exception class the reference raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    YaqlLexicalException,
    YaqlGrammarException,
    NoFunctionRegisteredException,
    NoMethodRegisteredException,
    NoMatchingFunctionException,
    NoMatchingMethodException,
    AmbiguousFunctionException,
    AmbiguousMethodException,
    MappingTranslationException,
    CollectionTooLargeException,
    MemoryQuotaExceededException,
    KeyError,
    IndexError,
    ZeroDivisionError,
    StopIteration,
    TypeError,
    ValueError,
    AssertionError,
    AttributeError,
    OverflowError,
    RecursionError,
    /// Python `re.error`: a bad regular expression (or one stoker's regex crate cannot run).
    #[allow(non_camel_case_types)]
    error,
    /// The result holds something JSON cannot express (a context, a regex, NaN...).
    UnserializableResult,
    /// stoker's own guard against runaway evaluation (too many function calls).
    StepLimitExceeded,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::YaqlLexicalException => "YaqlLexicalException",
            ErrorKind::YaqlGrammarException => "YaqlGrammarException",
            ErrorKind::NoFunctionRegisteredException => "NoFunctionRegisteredException",
            ErrorKind::NoMethodRegisteredException => "NoMethodRegisteredException",
            ErrorKind::NoMatchingFunctionException => "NoMatchingFunctionException",
            ErrorKind::NoMatchingMethodException => "NoMatchingMethodException",
            ErrorKind::AmbiguousFunctionException => "AmbiguousFunctionException",
            ErrorKind::AmbiguousMethodException => "AmbiguousMethodException",
            ErrorKind::MappingTranslationException => "MappingTranslationException",
            ErrorKind::CollectionTooLargeException => "CollectionTooLargeException",
            ErrorKind::MemoryQuotaExceededException => "MemoryQuotaExceededException",
            ErrorKind::KeyError => "KeyError",
            ErrorKind::IndexError => "IndexError",
            ErrorKind::ZeroDivisionError => "ZeroDivisionError",
            ErrorKind::StopIteration => "StopIteration",
            ErrorKind::TypeError => "TypeError",
            ErrorKind::ValueError => "ValueError",
            ErrorKind::AssertionError => "AssertionError",
            ErrorKind::AttributeError => "AttributeError",
            ErrorKind::OverflowError => "OverflowError",
            ErrorKind::RecursionError => "RecursionError",
            ErrorKind::error => "error",
            ErrorKind::UnserializableResult => "UnserializableResult",
            ErrorKind::StepLimitExceeded => "StepLimitExceeded",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error from parsing or evaluating an expression.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct YaqlError {
    pub kind: ErrorKind,
    pub message: String,
    /// Character offset in the expression text, when known.
    pub position: Option<usize>,
}

impl YaqlError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> YaqlError {
        YaqlError {
            kind,
            message: message.into(),
            position: None,
        }
    }

    pub fn at(kind: ErrorKind, message: impl Into<String>, position: usize) -> YaqlError {
        YaqlError {
            kind,
            message: message.into(),
            position: Some(position),
        }
    }

    /// Attach a position unless the error already has a more precise one.
    pub fn or_at(mut self, position: usize) -> YaqlError {
        if self.position.is_none() {
            self.position = Some(position);
        }
        self
    }
}

pub type Result<T, E = YaqlError> = std::result::Result<T, E>;

pub(crate) fn err<T>(kind: ErrorKind, message: impl Into<String>) -> Result<T> {
    Err(YaqlError::new(kind, message))
}
