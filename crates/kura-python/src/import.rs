//! `kura.import_file(path, input, ...)`: the library's parallel bulk loader from Python, with
//! the GIL released while it runs. `input` is a path, or a binary file object (an open file,
//! `sys.stdin.buffer`, `gzip.open(...)`, a socket's file) read once as a stream.

use std::io::Read;
use std::path::PathBuf;

use kura::import::{import_file as load_file, import_reader as load_stream, Format, ImportOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::OrRaise;
use crate::params;

/// Loads a TSV (`key<TAB>value`) or JSON-lines (`{"key": ..., "value": ...}`) file into the
/// database or shard set at `path`, creating it if missing; other keyword arguments are
/// engine parameters. `input` is a path, or a binary file object whose `read` is called
/// (holding the GIL only for each call) until it returns no bytes: read once, such a stream
/// cannot size a new database beforehand (see `kura import -`), and its format is TSV unless
/// `format` says otherwise. Returns a dict: `stored`, `skipped`, `keyless`, `count`,
/// `seconds`, `file_size`, `rebuilt`, `threads`, `shards`, `batch`. A malformed line raises
/// `kura.BrokenDataError` naming it (after importing the lines before it) unless
/// `skip_bad=True`.
#[pyfunction]
#[pyo3(signature = (path, input, *, shards = None, threads = None, batch = None, format = None, skip_bad = false, **kwargs))]
#[expect(clippy::too_many_arguments, reason = "the keyword arguments of a Python function")]
pub fn import_file<'py>(
    py: Python<'py>,
    path: PathBuf,
    input: &Bound<'py, PyAny>,
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
    let summary = if let Ok(input) = input.extract::<PathBuf>() {
        py.detach(|| load_file(&path, &input, &params, &options, &|_| {})).or_raise(py)?
    } else if input.hasattr("read")? {
        let name = match input.getattr("name") {
            Ok(name) => name.str()?.to_string(),
            Err(_) => "the file object".to_string(),
        };
        let reader = PyFileReader { file: input.clone().unbind() };
        py.detach(|| load_stream(&path, reader, &name, &params, &options, &|_| {})).or_raise(py)?
    } else {
        return Err(PyTypeError::new_err("input must be a path or a binary file object"));
    };
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

/// A Python binary file object as a `Read`: each read takes the GIL and calls `read(n)`,
/// which must return `bytes` of at most `n` bytes (empty at the end). Anything else, and any
/// exception `read` raises, is an I/O error that stops the import.
struct PyFileReader {
    file: Py<PyAny>,
}

impl Read for PyFileReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let wanted = buffer.len();
        Python::attach(|py| {
            let chunk = self.file.bind(py).call_method1("read", (wanted,)).map_err(std::io::Error::other)?;
            let chunk = chunk.cast::<PyBytes>().map_err(|_| {
                std::io::Error::other("read() returned no bytes object: open the file in binary mode ('rb')")
            })?;
            let bytes = chunk.as_bytes();
            let target = buffer
                .get_mut(..bytes.len())
                .ok_or_else(|| std::io::Error::other(format!("read({wanted}) returned {} bytes", bytes.len())))?;
            target.copy_from_slice(bytes);
            Ok(bytes.len())
        })
    }
}
