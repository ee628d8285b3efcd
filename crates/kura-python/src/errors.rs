//! Kura errors as Python exceptions.
//!
//! The exception classes live in the pure-Python module `kura.errors` (so that some can derive
//! from two builtins, e.g. `FileError(Error, OSError)`); this file looks them up once and maps
//! each `ErrorKind` to its class. Errors caused by the operating system carry their errno, as
//! `OSError` does.

use std::error::Error as _;

use kura::{Error, ErrorKind};
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

/// The Python exception for a Kura error.
pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let classes = match classes(py) {
        Ok(classes) => classes,
        Err(import_failure) => return import_failure,
    };
    let message = err.message().to_string();
    let os_errno =
        err.source().and_then(|source| source.downcast_ref::<std::io::Error>()).and_then(std::io::Error::raw_os_error);
    if let (Some(errno), ErrorKind::Io | ErrorKind::NotFound) = (os_errno, err.kind()) {
        // OSError(errno, strerror) sets `.errno` and `.strerror` like the builtin errors.
        let class = if err.kind() == ErrorKind::NotFound { &classes.file_not_found } else { &classes.file };
        return PyErr::from_type(class.bind(py).clone(), (errno, message));
    }
    let class = match err.kind() {
        ErrorKind::NotFound => &classes.not_found,
        ErrorKind::Duplicate => &classes.duplicate,
        ErrorKind::InvalidArgument => &classes.invalid,
        ErrorKind::BrokenData => &classes.broken,
        ErrorKind::Locked => &classes.locked,
        ErrorKind::Io => &classes.file,
        ErrorKind::Infeasible => &classes.infeasible,
        ErrorKind::Limit => &classes.limit,
        ErrorKind::Internal => &classes.internal,
    };
    PyErr::from_type(class.bind(py).clone(), (message,))
}

/// `kura.ClosedError`: the database was used after `close()`.
pub fn closed(py: Python<'_>) -> PyErr {
    match classes(py) {
        Ok(classes) => PyErr::from_type(classes.closed.bind(py).clone(), ("the database is closed",)),
        Err(import_failure) => import_failure,
    }
}

/// `kura.NotOrderedError`: a key-order operation on a hash or cache engine.
pub fn not_ordered(py: Python<'_>, message: String) -> PyErr {
    match classes(py) {
        Ok(classes) => PyErr::from_type(classes.not_ordered.bind(py).clone(), (message,)),
        Err(import_failure) => import_failure,
    }
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
