//! `kura.check(path, **params)`: `kura check` from Python, with the GIL released while every
//! record is read; and `engine_of_file(path)`, which tells a Kura file by its first bytes.

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

/// The name of the engine whose file `path` is, told by its first bytes (the registry's
/// magics), not its name; for the base path of a shard set, `"shard"` when its first shard is a
/// Kura file. None for any other file; a file that cannot be read raises (`kura.FileError`).
#[pyfunction]
pub fn engine_of_file(py: Python<'_>, path: PathBuf) -> PyResult<Option<&'static str>> {
    let engine = py.detach(|| kura::registry::engine_of_file(&path)).or_raise(py)?;
    Ok(engine.map(|engine| engine.name))
}
