//! Kura errors as Python exceptions.
//!
//! The exception classes live in the pure-Python module `kura.errors` (so that some can derive
//! from two builtins, e.g. `FileError(Error, OSError)`); this file looks them up once and maps
//! each binding error class (`kura::binding::ErrorClass`, the table from `ErrorKind` both
//! bindings share) to its own. Errors caused by the operating system carry their errno, as
//! `OSError` does.

use kura::binding::{os_error, ErrorClass};
use kura::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The classes of `kura.errors`, imported on first use.
struct Classes {
    base: Py<PyType>,
    not_found: Py<PyType>,
    duplicate: Py<PyType>,
    invalid: Py<PyType>,
    broken: Py<PyType>,
    locked: Py<PyType>,
    file: Py<PyType>,
    file_not_found: Py<PyType>,
    infeasible: Py<PyType>,
    limit: Py<PyType>,
    internal: Py<PyType>,
    closed: Py<PyType>,
    not_ordered: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let module = py.import("kura.errors")?;
        let class = |name: &str| -> PyResult<Py<PyType>> { Ok(module.getattr(name)?.cast_into::<PyType>()?.unbind()) };
        Ok(Classes {
            base: class("Error")?,
            not_found: class("NotFoundError")?,
            duplicate: class("DuplicateError")?,
            invalid: class("InvalidArgumentError")?,
            broken: class("BrokenDataError")?,
            locked: class("LockedError")?,
            file: class("FileError")?,
            file_not_found: class("FileMissingError")?,
            infeasible: class("InfeasibleError")?,
            limit: class("LimitError")?,
            internal: class("InternalError")?,
            closed: class("ClosedError")?,
            not_ordered: class("NotOrderedError")?,
        })
    })
}

impl Classes {
    /// The class of `kura.errors` for a binding error class (`kura::binding::ErrorClass`, the
    /// table both bindings share).
    fn of(&self, class: ErrorClass) -> &Py<PyType> {
        match class {
            ErrorClass::NotFound => &self.not_found,
            ErrorClass::FileMissing => &self.file_not_found,
            ErrorClass::Duplicate => &self.duplicate,
            ErrorClass::InvalidArgument => &self.invalid,
            ErrorClass::BrokenData => &self.broken,
            ErrorClass::Locked => &self.locked,
            ErrorClass::File => &self.file,
            ErrorClass::Infeasible => &self.infeasible,
            ErrorClass::Closed => &self.closed,
            ErrorClass::NotOrdered => &self.not_ordered,
            ErrorClass::Limit => &self.limit,
            ErrorClass::Internal => &self.internal,
        }
    }
}

/// An exception of `class` with `message`.
fn raise(py: Python<'_>, class: ErrorClass, message: String) -> PyErr {
    match classes(py) {
        Ok(classes) => PyErr::from_type(classes.of(class).bind(py).clone(), (message,)),
        Err(import_failure) => import_failure,
    }
}

/// The Python exception for a Kura error.
pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let class = ErrorClass::of(&err);
    let errno = os_error(&err).and_then(std::io::Error::raw_os_error);
    match (class, errno, classes(py)) {
        // OSError(errno, strerror) sets `.errno` and `.strerror` like the builtin errors.
        (ErrorClass::File | ErrorClass::FileMissing, Some(errno), Ok(classes)) => {
            PyErr::from_type(classes.of(class).bind(py).clone(), (errno, err.message().to_string()))
        }
        _ => raise(py, class, err.message().to_string()),
    }
}

/// `kura.ClosedError`: the database was used after `close()`.
pub fn closed(py: Python<'_>) -> PyErr {
    raise(py, ErrorClass::Closed, "the database is closed".to_string())
}

/// `kura.NotOrderedError`: a key-order operation on a hash or cache engine.
pub fn not_ordered(py: Python<'_>, message: String) -> PyErr {
    raise(py, ErrorClass::NotOrdered, message)
}

/// `kura.Error` with a message, for failures found by the binding itself.
pub fn general(py: Python<'_>, message: String) -> PyErr {
    match classes(py) {
        Ok(classes) => PyErr::from_type(classes.base.bind(py).clone(), (message,)),
        Err(import_failure) => import_failure,
    }
}

/// Converts a Kura result, mapping its error.
pub trait OrRaise<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for kura::Result<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
