//! The one table from a Kura error to the exception class a binding raises, in terms of
//! neither language: Python's `kura.errors` and Ruby's `Kura::Error` tree have the same
//! classes, and each binding only translates an `ErrorClass` into its own.

use std::error::Error as _;

use crate::error::{Error, ErrorKind};

/// An exception class of the bindings (`kura.FileMissingError`, `Kura::FileMissingError`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// A missing record (`NotFoundError`).
    NotFound,
    /// A missing file: NotFound from the operating system (`FileMissingError`).
    FileMissing,
    /// `DuplicateError`.
    Duplicate,
    /// A bad parameter, mode or key (`InvalidArgumentError`).
    InvalidArgument,
    /// Damaged data (`BrokenDataError`).
    BrokenData,
    /// Another process holds the database (`LockedError`).
    Locked,
    /// The operating system failed a file operation (`FileError`).
    File,
    /// Not possible here (`InfeasibleError`).
    Infeasible,
    /// The database was used after `close` (`ClosedError`, an `InfeasibleError`).
    Closed,
    /// A key-order operation on an engine without key order (`NotOrderedError`, an
    /// `InfeasibleError`).
    NotOrdered,
    /// `LimitError`.
    Limit,
    /// A bug in Kura (`InternalError`).
    Internal,
}

impl ErrorClass {
    /// The class of `error`.
    pub fn of(error: &Error) -> ErrorClass {
        match error.kind() {
            ErrorKind::NotFound if os_error(error).is_some() => ErrorClass::FileMissing,
            ErrorKind::NotFound => ErrorClass::NotFound,
            ErrorKind::Duplicate => ErrorClass::Duplicate,
            ErrorKind::InvalidArgument => ErrorClass::InvalidArgument,
            ErrorKind::BrokenData => ErrorClass::BrokenData,
            ErrorKind::Locked => ErrorClass::Locked,
            ErrorKind::Io => ErrorClass::File,
            ErrorKind::Infeasible => ErrorClass::Infeasible,
            ErrorKind::Limit => ErrorClass::Limit,
            ErrorKind::Internal => ErrorClass::Internal,
        }
    }
}

/// The operating system's error behind `error`, if one caused it: a binding gives its errno
/// to the exception (Python's `OSError.errno`).
pub fn os_error(error: &Error) -> Option<&std::io::Error> {
    error.source().and_then(|source| source.downcast_ref::<std::io::Error>())
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;

    /// Each kind has its class; a missing file is told from a missing record by the operating
    /// system's error behind it.
    #[test]
    fn every_kind_has_a_class_and_a_missing_file_its_own() {
        let kinds = [
            (ErrorKind::NotFound, ErrorClass::NotFound),
            (ErrorKind::Duplicate, ErrorClass::Duplicate),
            (ErrorKind::InvalidArgument, ErrorClass::InvalidArgument),
            (ErrorKind::BrokenData, ErrorClass::BrokenData),
            (ErrorKind::Locked, ErrorClass::Locked),
            (ErrorKind::Io, ErrorClass::File),
            (ErrorKind::Infeasible, ErrorClass::Infeasible),
            (ErrorKind::Limit, ErrorClass::Limit),
            (ErrorKind::Internal, ErrorClass::Internal),
        ];
        for (kind, class) in kinds {
            assert_eq!(ErrorClass::of(&Error::new(kind, "x")), class, "{kind:?}");
        }
        let missing = std::fs::File::open("/nonexistent/kura").unwrap_err();
        let error = Error::io("open /nonexistent/kura", missing);
        assert_eq!(ErrorClass::of(&error), ErrorClass::FileMissing);
        assert!(os_error(&error).unwrap().raw_os_error().is_some());
        assert!(os_error(&Error::new(ErrorKind::Io, "x")).is_none());
    }
}
