//! Kura errors as Ruby exceptions: the `Kura::Error` hierarchy, one class per binding error
//! class (`kura::binding::ErrorClass`, the table from `ErrorKind` both bindings share).
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

use std::sync::OnceLock;

use kura::binding::ErrorClass;
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

fn raise(ruby: &Ruby, class: ErrorClass, message: String) -> Error {
    match CLASSES.get() {
        Some(classes) => Error::new(ruby.get_inner(classes.of(class)), message),
        None => Error::new(ruby.exception_runtime_error(), format!("kura: extension not initialised: {message}")),
    }
}

impl Classes {
    /// The Ruby class of a binding error class (`kura::binding::ErrorClass`, the table both
    /// bindings share).
    fn of(&self, class: ErrorClass) -> Opaque<ExceptionClass> {
        match class {
            ErrorClass::NotFound => self.not_found,
            ErrorClass::FileMissing => self.file_missing,
            ErrorClass::Duplicate => self.duplicate,
            ErrorClass::InvalidArgument => self.invalid,
            ErrorClass::BrokenData => self.broken,
            ErrorClass::Locked => self.locked,
            ErrorClass::File => self.file,
            ErrorClass::Infeasible => self.infeasible,
            ErrorClass::Closed => self.closed,
            ErrorClass::NotOrdered => self.not_ordered,
            ErrorClass::Limit => self.limit,
            ErrorClass::Internal => self.internal,
        }
    }
}

/// The Ruby exception for a Kura error.
pub fn to_ruby(ruby: &Ruby, err: kura::Error) -> Error {
    raise(ruby, ErrorClass::of(&err), err.message().to_string())
}

/// `Kura::ClosedError`: the database was used after `close`.
pub fn closed(ruby: &Ruby) -> Error {
    raise(ruby, ErrorClass::Closed, "the database is closed".to_string())
}

/// `Kura::NotOrderedError`: a key-order operation on an engine without key order.
pub fn not_ordered(ruby: &Ruby, engine: &str) -> Error {
    raise(
        ruby,
        ErrorClass::NotOrdered,
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
