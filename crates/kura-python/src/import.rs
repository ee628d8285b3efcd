//! `kura.import_file(path, input, ...)`: the library's parallel bulk loader from Python, with
//! the GIL released while it runs.

use std::path::PathBuf;

use kura::import::{import_file as load, Format, ImportOptions};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::OrRaise;
use crate::params;

/// Loads a TSV (`key<TAB>value`) or JSON-lines (`{"key": ..., "value": ...}`) file into the
/// database or shard set at `path`, creating it if missing; other keyword arguments are
/// engine parameters. Returns a dict: `stored`, `skipped`, `keyless`, `count`, `seconds`,
/// `file_size`, `rebuilt`, `threads`, `shards`, `batch`. A malformed line raises
/// `kura.BrokenDataError` naming it (after importing the lines before it) unless
/// `skip_bad=True`.
#[pyfunction]
#[pyo3(signature = (path, input, *, shards = None, threads = None, batch = None, format = None, skip_bad = false, **kwargs))]
#[expect(clippy::too_many_arguments, reason = "the keyword arguments of a Python function")]
pub fn import_file<'py>(
    py: Python<'py>,
    path: PathBuf,
    input: PathBuf,
    shards: Option<usize>,
    threads: Option<usize>,
    batch: Option<usize>,
    format: Option<&str>,
    skip_bad: bool,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let params = params::from_kwargs(kwargs)?;
    let format = format.map(Format::from_name).transpose().or_raise(py)?;
    let options = ImportOptions { threads, shards, batch, format, skip_bad };
    let summary = py.detach(|| load(&path, &input, &params, &options, &|_| {})).or_raise(py)?;
    let result = PyDict::new(py);
    result.set_item("stored", summary.stored)?;
    result.set_item("skipped", summary.skipped)?;
    result.set_item("keyless", summary.keyless)?;
    result.set_item("count", summary.count)?;
    result.set_item("seconds", summary.seconds)?;
    result.set_item("file_size", summary.file_size)?;
    result.set_item("rebuilt", summary.rebuilt)?;
    result.set_item("threads", summary.threads)?;
    result.set_item("shards", summary.shards)?;
    result.set_item("batch", summary.batch)?;
    Ok(result)
}
