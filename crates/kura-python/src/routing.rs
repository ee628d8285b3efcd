//! Shard routing for distributed loaders (`kura.dask`, or Spark's and Ray's `mapPartitions`):
//! `kura.shard_of`, `kura.shard_path`, `kura.shard_files`, `kura.split_rows`, `kura.split_arrow`,
//! `kura.unpack_rows` and `kura.ShardWriter`, thin wrappers over `kura::shard_dbm` and
//! `kura::import` (`ShardWriter`, `packed_rows`), where the logic lives.

use std::path::PathBuf;

use kura::import::packed_rows::{PackedRows, ShardedRows};
use kura::import::{keyless_key, ShardWriter as Writer, ShardWriterOptions};
use kura::shard_dbm;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyTuple};

use crate::arrow::{ArrowArg, ArrowStrings};
use crate::convert::Encoding;
use crate::errors::{self, OrRaise};
use crate::params;

/// The shard `key` (bytes or str, as UTF-8) lives in among `num_shards`: exactly the routing
/// of a shard set (`kura.open(base, num_shards=N)`) and of `kura import --shards N`.
#[pyfunction]
pub fn shard_of(py: Python<'_>, key: &Bound<'_, PyAny>, num_shards: usize) -> PyResult<usize> {
    shard_dbm::check_count(num_shards).or_raise(py)?;
    let key = Encoding::Bytes.input(key, "keys")?;
    Ok(shard_dbm::shard_of(&key, num_shards))
}

/// The path of shard `index` of a set of `num_shards` under `base` (`BASE-0000i-of-0000N`).
#[pyfunction]
pub fn shard_path(py: Python<'_>, base: PathBuf, index: usize, num_shards: usize) -> PyResult<PathBuf> {
    shard_dbm::check_count(num_shards).or_raise(py)?;
    Ok(shard_dbm::shard_path(&base, index, num_shards))
}

/// `(engine name, [shard file paths])` of the complete set under `base`, for opening each
/// shard on its own (`kura.open(path, "r", engine=name)`).
#[pyfunction]
#[pyo3(signature = (base, **kwargs))]
pub fn shard_files(
    py: Python<'_>,
    base: PathBuf,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<(&'static str, Vec<PathBuf>)> {
    let params = params::from_kwargs(kwargs)?;
    let (engine, paths) = shard_dbm::shard_files(kura::engines(), &base, &params).or_raise(py)?;
    Ok((engine.name, paths))
}

/// Routes rows to shards: `keys[i]` and `values[i]` (sequences of one length) are row `i`,
/// packed into one byte string per shard (`kura::import::packed_rows`), returned as
/// `[(packed bytes, record count), ...]` in shard order. A key is bytes, str (UTF-8), an int
/// (its decimal text) or None: a keyless row, whose key is `keyless_prefix` and `i` in 12
/// digits (as `kura import` names keyless lines). A value that is bytes or str is stored as it
/// is, any other through `encode_value(value)`, which returns bytes. A row that fits none of
/// these raises `kura.InvalidArgumentError` naming the row.
#[pyfunction]
pub fn split_rows<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyAny>,
    values: &Bound<'py, PyAny>,
    num_shards: usize,
    keyless_prefix: &[u8],
    encode_value: &Bound<'py, PyAny>,
) -> PyResult<Vec<(Bound<'py, PyBytes>, u64)>> {
    let mut sharded = ShardedRows::new(num_shards).or_raise(py)?;
    let bad = |row: usize, message: String| to_invalid(py, format!("row {row}: {message}"));
    let mut generated = Vec::new();
    let mut encoded;
    let mut values = values.try_iter()?;
    for (row, key) in keys.try_iter()?.enumerate() {
        let key = key?;
        let value = values.next().ok_or_else(|| bad(row, "keys outnumber values".to_string()))??;
        let key_bytes = if key.is_none() {
            keyless_key(&mut generated, keyless_prefix, row as u64);
            std::borrow::Cow::Borrowed(generated.as_slice())
        } else if key.cast::<PyInt>().is_ok() && key.cast::<PyBool>().is_err() {
            std::borrow::Cow::Owned(key.str()?.to_cow()?.into_owned().into_bytes())
        } else {
            Encoding::Bytes.input(&key, "keys").map_err(|_| {
                let shown = key.repr().map(|r| r.to_string()).unwrap_or_default();
                let kind = key.get_type().name().map(|n| n.to_string()).unwrap_or_default();
                bad(row, format!("key {shown:.80} ({kind}) is neither bytes, str nor an integer"))
            })?
        };
        let value_bytes = match Encoding::Bytes.input(&value, "values") {
            Ok(bytes) => bytes,
            Err(_) => {
                encoded = encode_value.call1((&value,)).map_err(|e| bad(row, e.value(py).to_string()))?;
                let bytes =
                    encoded.cast::<PyBytes>().map_err(|_| bad(row, "encode_value returned no bytes".to_string()))?;
                std::borrow::Cow::Borrowed(bytes.as_bytes())
            }
        };
        sharded.push(&key_bytes, &value_bytes);
    }
    if values.next().is_some() {
        return Err(to_invalid(py, "values outnumber keys".to_string()));
    }
    Ok(sharded.into_parts().into_iter().map(|(packed, count)| (PyBytes::new(py, &packed), count)).collect())
}

/// Routes the rows of Arrow string or binary columns to shards, as `split_rows` routes
/// Python objects: `keys` and `values` are `crate::arrow::ArrowArg`s (the buffers of a
/// pyarrow array, see `kura.dask`); a null key, or `keys=None`, makes a keyless row named by
/// `keyless_prefix` and its row number; a null value raises `kura.InvalidArgumentError`
/// naming the row (as a missing value does in `split_rows`).
#[pyfunction]
pub fn split_arrow<'py>(
    py: Python<'py>,
    keys: Option<ArrowArg<'py>>,
    values: ArrowArg<'py>,
    num_shards: usize,
    keyless_prefix: &[u8],
) -> PyResult<Vec<(Bound<'py, PyBytes>, u64)>> {
    let values = ArrowStrings::new(&values);
    let keys = keys.as_ref().map(ArrowStrings::new);
    let parts = py
        .detach(|| -> Result<Vec<(Vec<u8>, u64)>, String> {
            let mut sharded = ShardedRows::new(num_shards).map_err(|e| e.to_string())?;
            if let Some(keys) = &keys {
                if keys.len() != values.len() {
                    return Err(format!("{} keys but {} values", keys.len(), values.len()));
                }
            }
            let mut generated = Vec::new();
            for row in 0..values.len() {
                let value = values.get(row)?.ok_or_else(|| format!("row {row}: the value is missing (null)"))?;
                let key = match keys.as_ref().map(|keys| keys.get(row)).transpose()?.flatten() {
                    Some(key) => key,
                    None => {
                        keyless_key(&mut generated, keyless_prefix, row as u64);
                        generated.as_slice()
                    }
                };
                sharded.push(key, value);
            }
            Ok(sharded.into_parts())
        })
        .map_err(|message| to_invalid(py, message))?;
    Ok(parts.into_iter().map(|(packed, count)| (PyBytes::new(py, &packed), count)).collect())
}

/// The `(key, value)` records of a packed byte string, as a list of tuples of bytes.
#[pyfunction]
pub fn unpack_rows<'py>(py: Python<'py>, packed: &[u8]) -> PyResult<Bound<'py, PyList>> {
    let rows = PyList::empty(py);
    for record in PackedRows::new(packed) {
        let (key, value) = record.or_raise(py)?;
        rows.append((PyBytes::new(py, key), PyBytes::new(py, value)))?;
    }
    Ok(rows)
}

fn to_invalid(py: Python<'_>, message: String) -> PyErr {
    errors::to_py(py, kura::Error::invalid(message))
}

/// Writes shard `index` of a set of `num_shards` under `base` with the importer's batched
/// writer; `params` are the set's engine parameters (`inner_engine`, `record_comp`, ...). A
/// key that routes elsewhere raises `kura.InvalidArgumentError`; an existing shard file
/// raises `kura.DuplicateError` unless `overwrite=True`. The shard is written under
/// `<shard>.partial` and renamed by `finish()`; `abort()`, or leaving a `with` block by an
/// exception, removes it. `expected_records` sizes a new file at the start instead of a
/// rebuild at the end.
#[pyclass(module = "kura._kura", name = "ShardWriter")]
pub struct ShardWriter {
    writer: Option<Writer>,
}

impl ShardWriter {
    fn writer(&mut self, py: Python<'_>) -> PyResult<&mut Writer> {
        self.writer.as_mut().ok_or_else(|| errors::general(py, "the shard writer has finished".to_string()))
    }
}

#[pymethods]
impl ShardWriter {
    #[new]
    #[pyo3(signature = (base, index, num_shards, params = None, *, overwrite = false, expected_records = None, batch = None))]
    #[expect(clippy::too_many_arguments, reason = "the arguments of a Python constructor")]
    fn new(
        py: Python<'_>,
        base: PathBuf,
        index: usize,
        num_shards: usize,
        params: Option<&Bound<'_, PyDict>>,
        overwrite: bool,
        expected_records: Option<u64>,
        batch: Option<usize>,
    ) -> PyResult<ShardWriter> {
        let params = params::from_kwargs(params)?;
        let options = ShardWriterOptions { overwrite, expected_records, batch };
        let writer = py.detach(|| Writer::create(&base, index, num_shards, &params, &options)).or_raise(py)?;
        Ok(ShardWriter { writer: Some(writer) })
    }

    /// The shard file this writer makes.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.writer.as_ref().map(|w| w.path().to_path_buf())
    }

    /// Adds one record (bytes or str).
    fn set(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = Encoding::Bytes.input(key, "keys")?;
        let value = Encoding::Bytes.input(value, "values")?;
        self.writer(py)?.set(&key, &value).or_raise(py)
    }

    /// Adds every `(key, value)` pair of an iterable; returns how many.
    fn write(&mut self, py: Python<'_>, pairs: &Bound<'_, PyAny>) -> PyResult<u64> {
        let mut added = 0u64;
        for pair in pairs.try_iter()? {
            let pair = pair?;
            let pair = pair.cast::<PyTuple>().map_err(|_| PyTypeError::new_err("write() takes (key, value) tuples"))?;
            let (key, value) = (pair.get_item(0)?, pair.get_item(1)?);
            self.set(py, &key, &value)?;
            added += 1;
        }
        Ok(added)
    }

    /// Adds every record of a packed byte string (`kura.split_rows`); returns how many.
    fn write_packed(&mut self, py: Python<'_>, packed: &[u8]) -> PyResult<u64> {
        self.writer(py)?.set_packed(packed).or_raise(py)
    }

    /// Writes what is pending, closes the shard and puts it under its name. Returns a dict:
    /// `path`, `stored`, `count`, `file_size`, `rebuilt`.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let writer =
            self.writer.take().ok_or_else(|| errors::general(py, "the shard writer has finished".to_string()))?;
        let written = py.detach(|| writer.finish()).or_raise(py)?;
        let result = PyDict::new(py);
        result.set_item("path", written.path)?;
        result.set_item("stored", written.stored)?;
        result.set_item("count", written.count)?;
        result.set_item("file_size", written.file_size)?;
        result.set_item("rebuilt", written.rebuilt)?;
        Ok(result)
    }

    /// Stops and removes the partial shard file (nothing happens after `finish`).
    fn abort(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.abort();
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Finishes the shard when the block ends normally, aborts it when it raises.
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        if exc_type.is_none() {
            if self.writer.is_some() {
                self.finish(py)?;
            }
        } else {
            self.abort();
        }
        Ok(false)
    }
}
