//! The one error type of Kura: a kind that callers match on, plus a message for people.

use std::borrow::Cow;
use std::fmt;

/// What went wrong, coarse enough to match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The key (or a cursor position) does not exist.
    NotFound,
    /// A record exists where the caller asked not to overwrite one.
    Duplicate,
    /// An argument is out of range or malformed (oversized key, unknown codec, bad parameter).
    InvalidArgument,
    /// Stored bytes fail a check: bad magic, checksum mismatch, impossible length, corrupt frame.
    BrokenData,
    /// Another process (or handle) holds the database lock.
    Locked,
    /// The operating system failed a file operation.
    Io,
    /// The operation cannot be done in this state (read-only handle, closed database, failed
    /// compare-exchange precondition, unsupported on this engine).
    Infeasible,
    /// A limit of the format was reached (file larger than `max_file_size`, value too large).
    Limit,
    /// An invariant of Kura's own code did not hold: a bug in Kura, not damaged data and not
    /// the caller's mistake. The message names the invariant; debug builds panic on it
    /// (`Error::internal`), so tests and fuzzing stop where it broke.
    Internal,
}

impl ErrorKind {
    /// The kind as people read it in messages.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not found",
            ErrorKind::Duplicate => "duplicate",
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::BrokenData => "broken data",
            ErrorKind::Locked => "locked",
            ErrorKind::Io => "I/O error",
            ErrorKind::Infeasible => "infeasible",
            ErrorKind::Limit => "limit exceeded",
            ErrorKind::Internal => "internal error",
        }
    }
}

/// An error with its kind and a message saying what, where and why. A fixed message is kept
/// as a `&'static str`: a miss (`NotFound`) is an ordinary outcome that must not allocate.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: Cow<'static, str>,
    source: Option<std::io::Error>,
}

/// The result of every fallible Kura operation.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Error {
        Error { kind, message: message.into(), source: None }
    }

    /// What went wrong, to match on.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What went wrong, for people.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// A NotFound error.
    pub fn not_found(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(ErrorKind::NotFound, message)
    }

    /// An InvalidArgument error.
    pub fn invalid(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// A BrokenData error.
    pub fn broken(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(ErrorKind::BrokenData, message)
    }

    /// An Internal error: `invariant`, which Kura's own code keeps, did not hold. The message
    /// says "this is a bug in Kura" with the invariant, for a bug report. Debug builds panic
    /// here instead (the `debug_assert!` of every such place), so a test or a fuzz run stops
    /// at the broken invariant; release builds return the error rather than wrong data.
    #[track_caller]
    pub fn internal(invariant: impl Into<Cow<'static, str>>) -> Error {
        let invariant = invariant.into();
        debug_assert!(false, "this is a bug in Kura: {invariant}");
        Error::new(ErrorKind::Internal, format!("this is a bug in Kura (please report it): {invariant}"))
    }

    /// An Infeasible error.
    pub fn infeasible(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(ErrorKind::Infeasible, message)
    }

    /// Wraps an OS error with what was being done, e.g. `io("open /x/y.kuh", e)`.
    /// A missing file becomes NotFound so that callers can tell it from a failing disk.
    pub fn io(context: impl Into<String>, err: std::io::Error) -> Error {
        let kind = match err.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::InvalidInput => ErrorKind::InvalidArgument,
            _ => ErrorKind::Io,
        };
        Error { kind, message: Cow::Owned(format!("{}: {}", context.into(), err)), source: Some(err) }
    }

    /// This error, saying which file it is about when it is damage (BrokenData) whose message
    /// does not name `path` yet: a user told "record at 5395: checksum mismatch" must learn
    /// which file to check or restore. Other kinds are returned as they are.
    pub fn in_file(self, path: &std::path::Path) -> Error {
        let shown = path.display().to_string();
        if self.kind != ErrorKind::BrokenData || shown.is_empty() || self.message.contains(shown.as_str()) {
            return self;
        }
        Error { kind: self.kind, message: Cow::Owned(format!("{shown}: {}", self.message)), source: self.source }
    }

    /// Whether the kind is NotFound (a missing key or file).
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debug builds stop at a broken invariant; release builds return it as an Internal error
    /// whose message sends the reader to a bug report, not to a restore.
    #[test]
    #[cfg_attr(debug_assertions, should_panic(expected = "this is a bug in Kura: a test invariant"))]
    fn a_broken_invariant_is_a_bug_in_kura_not_damaged_data() {
        let error = Error::internal("a test invariant");
        assert_eq!(error.kind(), ErrorKind::Internal);
        assert_eq!(error.to_string(), "internal error: this is a bug in Kura (please report it): a test invariant");
        assert!(!error.in_file(std::path::Path::new("x.kuh")).message().contains("x.kuh"), "not damage of a file");
    }
}
