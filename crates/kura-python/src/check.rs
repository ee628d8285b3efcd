//! `kura.check(path, **params)`: `kura check` from Python, with the GIL released while every
//! record is read.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::OrRaise;
use crate::params;

/// Opens the database at `path` read-only, reads every record (and page) and verifies what
/// its engine can (`Dbm::check`). Returns a dict: `clean` (bool), `records`, `pages`,
/// `problems` (how many were found) and `first_problems` (up to 20 strings, each saying
/// where and what). Damage that stops the open is a problem too; a missing file or a lock
/// held by a writer raises as `kura.open` does. Keyword arguments are engine parameters.
#[pyfunction]
#[pyo3(signature = (path, **kwargs))]
pub fn check<'py>(py: Python<'py>, path: PathBuf, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyDict>> {
    let params = params::from_kwargs(kwargs)?;
    let report = py.detach(|| kura::registry::check(&path, &params)).or_raise(py)?;
    let result = PyDict::new(py);
    result.set_item("clean", report.is_clean())?;
    result.set_item("records", report.records)?;
    result.set_item("pages", report.pages)?;
    result.set_item("problems", report.problems)?;
    let problems: Vec<String> = report.first_problems.iter().map(ToString::to_string).collect();
    result.set_item("first_problems", PyList::new(py, problems)?)?;
    Ok(result)
}
