//! Kura errors as Ruby exceptions: the `Kura::Error` hierarchy, one class per `ErrorKind`.
//!
//! ```text
//! StandardError
//! └── Kura::Error
//!     ├── Kura::NotFoundError         (a missing record or file)
//!     │   └── Kura::FileMissingError  (the database file does not exist: "r" or "w")
//!     ├── Kura::DuplicateError
//!     ├── Kura::InvalidArgumentError  (bad parameter, mode, oversized key)
//!     ├── Kura::BrokenDataError       (corrupted or truncated file)
//!     ├── Kura::LockedError           (another process holds the database)
//!     ├── Kura::FileError             (the operating system failed a file operation)
//!     ├── Kura::InfeasibleError       (read-only handle, unsupported on this engine)
//!     │   ├── Kura::ClosedError       (used after close)
//!     │   └── Kura::NotOrderedError   (from:/to:/reversed:/range on a hash engine)
//!     ├── Kura::LimitError
//!     └── Kura::InternalError         (a bug in Kura: an invariant of its code did not hold)
//! ```
//! The classes are defined here, once, when the extension loads; `KeyError` and `TypeError`
//! are Ruby's own, raised where a `Hash` would raise them.

use std::error::Error as _;
use std::sync::OnceLock;

use kura::ErrorKind;
use magnus::value::Opaque;
use magnus::{gc, Error, ExceptionClass, Module, RModule, Ruby};

/// The classes, kept as `Opaque` (usable from any thread that holds the GVL).
struct Classes {
    not_found: Opaque<ExceptionClass>,
    file_missing: Opaque<ExceptionClass>,
    duplicate: Opaque<ExceptionClass>,
    invalid: Opaque<ExceptionClass>,
    broken: Opaque<ExceptionClass>,
    locked: Opaque<ExceptionClass>,
    file: Opaque<ExceptionClass>,
    infeasible: Opaque<ExceptionClass>,
    closed: Opaque<ExceptionClass>,
    not_ordered: Opaque<ExceptionClass>,
    limit: Opaque<ExceptionClass>,
    internal: Opaque<ExceptionClass>,
}

static CLASSES: OnceLock<Classes> = OnceLock::new();

/// Defines the exception classes under `Kura`.
pub fn define(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    // Registered as mark objects: besides staying alive, they are pinned, so the `Opaque`
    // values kept in `CLASSES` stay valid when `GC.compact` moves objects.
    let define = |name: &str, parent: ExceptionClass| -> Result<ExceptionClass, Error> {
        let class = module.define_error(name, parent)?;
        gc::register_mark_object(class);
        Ok(class)
    };
    let base = define("Error", ruby.exception_standard_error())?;
    let not_found = define("NotFoundError", base)?;
    let infeasible = define("InfeasibleError", base)?;
    let classes = Classes {
        not_found: not_found.into(),
        file_missing: define("FileMissingError", not_found)?.into(),
        duplicate: define("DuplicateError", base)?.into(),
        invalid: define("InvalidArgumentError", base)?.into(),
        broken: define("BrokenDataError", base)?.into(),
        locked: define("LockedError", base)?.into(),
        file: define("FileError", base)?.into(),
        infeasible: infeasible.into(),
        closed: define("ClosedError", infeasible)?.into(),
        not_ordered: define("NotOrderedError", infeasible)?.into(),
        limit: define("LimitError", base)?.into(),
        internal: define("InternalError", base)?.into(),
    };
    // A second load of the extension in one process keeps the first classes.
    let _ = CLASSES.set(classes);
    Ok(())
}

fn raise(ruby: &Ruby, pick: impl FnOnce(&Classes) -> Opaque<ExceptionClass>, message: String) -> Error {
    match CLASSES.get() {
        Some(classes) => Error::new(ruby.get_inner(pick(classes)), message),
        None => Error::new(ruby.exception_runtime_error(), format!("kura: extension not initialised: {message}")),
    }
}

/// The Ruby exception for a Kura error.
pub fn to_ruby(ruby: &Ruby, err: kura::Error) -> Error {
    let from_os = err.source().is_some_and(|source| source.is::<std::io::Error>());
    let message = err.message().to_string();
    raise(
        ruby,
        |c| match err.kind() {
            ErrorKind::NotFound if from_os => c.file_missing,
            ErrorKind::NotFound => c.not_found,
            ErrorKind::Duplicate => c.duplicate,
            ErrorKind::InvalidArgument => c.invalid,
            ErrorKind::BrokenData => c.broken,
            ErrorKind::Locked => c.locked,
            ErrorKind::Io => c.file,
            ErrorKind::Infeasible => c.infeasible,
            ErrorKind::Limit => c.limit,
            ErrorKind::Internal => c.internal,
        },
        message,
    )
}

/// `Kura::ClosedError`: the database was used after `close`.
pub fn closed(ruby: &Ruby) -> Error {
    raise(ruby, |c| c.closed, "the database is closed".to_string())
}

/// `Kura::NotOrderedError`: a key-order operation on an engine without key order.
pub fn not_ordered(ruby: &Ruby, engine: &str) -> Error {
    raise(
        ruby,
        |c| c.not_ordered,
        format!("key order (from:, to:, reversed:, range) needs an ordered engine; this database is {engine}"),
    )
}

/// Converts a Kura result, mapping its error.
pub trait OrRaise<T> {
    fn or_raise(self, ruby: &Ruby) -> Result<T, Error>;
}

impl<T> OrRaise<T> for kura::Result<T> {
    fn or_raise(self, ruby: &Ruby) -> Result<T, Error> {
        self.map_err(|e| to_ruby(ruby, e))
    }
}
