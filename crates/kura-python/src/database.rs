//! `kura._kura.Database`: one open database of any engine, with the mapping protocol.
//!
//! The Python class `kura.Database` derives from this one and adds what
//! `collections.abc.MutableMapping` builds from these primitives (views, `update`, `popitem`).
//!
//! Threads: the handle is shared by every Python thread that holds it. Engine calls run
//! with the GIL released (`Python::detach`, or `gil::detach` for record calls) when they may
//! block or take long: always for I/O (open, sync, rebuild, close, clear, inspect) and for
//! storing big values, and for record calls on databases whose reads decompress, that were
//! opened with `release_gil=True`, or while another thread is in one of the long calls above
//! (whose engine lock a record call may wait for): `kura::binding::LockRelease`, shared with
//! the Ruby binding. Python code is never called while an engine lock is held: `process(key,
//! fn)` runs `fn` outside the engine and stores its result with a compare-and-exchange,
//! retrying when the record changed.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use kura::binding::DbHandle;
use kura::{Action, Comparator, Dbm, PackedBytes, Params, Stat, TreeDbm, TypedDbm};
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::batch::Batch;
use crate::convert::Encoding;
use crate::cursor::{Cursor, Handle, KeyBounds, KeyIter, Opened, RangeIter, RecordIter, Yield};
use crate::errors::{self, OrRaise};
use crate::gil;
use crate::params;

/// Values at least this large are copied and compared with the GIL released even on
/// databases that otherwise keep it: the copy alone takes long enough to let others run.
const BIG_VALUE: usize = 64 * 1024;

/// An open database. Closed by `close()`, by leaving a `with` block, or when collected.
#[pyclass(module = "kura._kura", name = "Database", subclass, frozen)]
pub struct Database {
    /// The open database: its engine, what it is, how it was opened, when its calls release
    /// the GIL, whether it is closed (`kura::binding::DbHandle`, shared with Ruby's `Kura::DB`).
    handle: DbHandle,
    encoding: Encoding,
}

/// Whether `release_gil` was given, and as what: `None` lets the binding decide.
fn release_gil_option(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Option<bool>> {
    match kwargs.map(|k| k.get_item("release_gil")).transpose()?.flatten() {
        None => Ok(None),
        Some(value) if value.is_none() => Ok(None),
        Some(value) => Ok(Some(value.cast::<PyBool>()?.is_true())),
    }
}

fn encoding_option(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Encoding> {
    match kwargs.map(|k| k.get_item("encoding")).transpose()?.flatten() {
        None => Ok(Encoding::Bytes),
        Some(value) if value.is_none() => Ok(Encoding::Bytes),
        Some(value) => Ok(Encoding::from_option(Some(&value.extract::<String>()?))),
    }
}

impl Database {
    /// The engine, or ClosedError.
    fn live(&self, py: Python<'_>) -> PyResult<&dyn Dbm> {
        self.typed(py).map(TypedDbm::dbm)
    }

    /// The typed engine of the hot paths, or ClosedError.
    #[inline]
    fn typed(&self, py: Python<'_>) -> PyResult<&TypedDbm> {
        self.handle.live().ok_or_else(|| errors::closed(py))
    }

    /// Runs an engine call: a long one (`long`: I/O, many records, a big value) with the GIL
    /// released and counted as long, a record call as `LockRelease::record_call_releases`
    /// says (released on this database, or while another thread is in a long call).
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        long: bool,
        call: impl FnOnce(&dyn Dbm) -> kura::Result<T> + Send,
    ) -> PyResult<T> {
        let dbm = self.live(py)?;
        let outcome = if long {
            let _long = self.handle.release().long_call();
            gil::detach(py, || call(dbm))
        } else if self.handle.release().record_call_releases() {
            gil::detach(py, || call(dbm))
        } else {
            call(dbm)
        };
        outcome.or_raise(py)
    }

    fn key<'a>(&self, key: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
        self.encoding.input(key, "keys")
    }

    fn value<'a>(&self, value: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
        self.encoding.input(value, "values")
    }

    /// The current value of `key`, or None. The hot path of `db[k]`: the typed engine, and
    /// the GIL kept unless this database releases it.
    #[inline]
    fn fetch(&self, py: Python<'_>, key: &[u8]) -> PyResult<Option<Vec<u8>>> {
        let engine = self.typed(py)?;
        let outcome = if self.handle.release().record_call_releases() {
            gil::detach(py, || engine.get(key))
        } else {
            engine.get(key)
        };
        outcome.or_raise(py)
    }

    /// The value of `key` as the Python object this database returns, or None: `fetch`
    /// without its intermediate copy where that is safe. With the GIL kept and an encoding
    /// that runs no Python code, the object is built straight from the engine's bytes while
    /// the engine holds them; otherwise (GIL released, or a codec's `decode`, which could call
    /// back into this database under the engine's lock) the value is copied out first.
    #[inline]
    fn lookup<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.handle.release().record_call_releases() || !self.encoding.runs_no_python() {
            return self.fetch(py, key)?.map(|value| self.encoding.output(py, &value)).transpose();
        }
        let mut found = None;
        let outcome = self.typed(py)?.get_with(key, &mut |value| found = value.map(|v| self.encoding.output(py, v)));
        outcome.or_raise(py)?;
        found.transpose()
    }

    /// Stores a record; the hot path of `db[k] = v`, like `fetch`.
    #[inline]
    fn store(&self, py: Python<'_>, key: &[u8], value: &[u8], overwrite: bool) -> PyResult<kura::Result<()>> {
        let engine = self.typed(py)?;
        if value.len() >= BIG_VALUE {
            let _long = self.handle.release().long_call();
            Ok(gil::detach(py, || engine.set(key, value, overwrite)))
        } else if self.handle.release().record_call_releases() {
            Ok(gil::detach(py, || engine.set(key, value, overwrite)))
        } else {
            Ok(engine.set(key, value, overwrite))
        }
    }

    /// Compare-and-exchange that reports a mismatch as `false` instead of an error.
    fn exchange(&self, py: Python<'_>, key: &[u8], expected: Option<&[u8]>, desired: Option<&[u8]>) -> PyResult<bool> {
        let big = desired.is_some_and(|d| d.len() >= BIG_VALUE);
        self.run(py, big, |dbm| dbm.compare_exchange_matched(key, expected, desired))
    }

    /// Whether the engine orders keys bytewise: its key order, when it has one of its own
    /// (TreeDbm), says; the other ordered engines have only bytewise.
    fn bytewise(&self, py: Python<'_>) -> PyResult<bool> {
        let stats = self.run(py, false, |dbm| dbm.inspect())?;
        Ok(stats.key_order.is_none_or(|order| order == Comparator::Lexical))
    }
}

impl Opened for Database {
    fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        self.live(py).map(|_| ())
    }

    fn encoding(&self) -> &Encoding {
        &self.encoding
    }

    fn releases_gil(&self) -> bool {
        self.handle.release().releases_records()
    }

    fn dbm(&self) -> Arc<dyn Dbm> {
        self.handle.shared()
    }

    fn tree(&self) -> Option<&Arc<TreeDbm>> {
        self.handle.live().and_then(TypedDbm::tree)
    }

    fn ordered(&self) -> bool {
        self.handle.is_ordered()
    }
}

impl Handle for Py<Database> {
    fn opened(&self) -> &dyn Opened {
        self.get()
    }
}

#[pymethods]
impl Database {
    /// Opens (or creates) a database: `Database(path, mode="r", **params)`.
    /// See `kura.open` for the modes and parameters.
    #[new]
    #[pyo3(signature = (path, mode = "r", **kwargs))]
    fn new(py: Python<'_>, path: PathBuf, mode: &str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Database> {
        let encoding = encoding_option(kwargs)?;
        let release_gil = release_gil_option(kwargs)?;
        let params: Params = params::from_kwargs(kwargs)?;
        let handle = py.detach(|| DbHandle::open(path, mode, &params, release_gil)).or_raise(py)?;
        Ok(Database { handle, encoding })
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let raw = self.key(key)?;
        match self.lookup(py, &raw)? {
            Some(value) => Ok(value),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (raw_key, raw_value) = (self.key(key)?, self.value(value)?);
        self.store(py, &raw_key, &raw_value, true)?.or_raise(py)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let raw = self.key(key)?;
        let removed = self.run(py, false, |dbm| match dbm.remove(&raw) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        })?;
        if removed {
            Ok(())
        } else {
            Err(PyKeyError::new_err(key.clone().unbind()))
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        // A read (`process` would lock the record for writing on a writable handle).
        let raw = self.key(key)?;
        if self.handle.release().record_call_releases() {
            return Ok(self.fetch(py, &raw)?.is_some());
        }
        let mut found = false;
        self.typed(py)?.get_with(&raw, &mut |value| found = value.is_some()).or_raise(py)?;
        Ok(found)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let count = self.run(py, false, |dbm| dbm.count())?;
        Ok(usize::try_from(count).unwrap_or(usize::MAX))
    }

    /// Iterates over the keys, in the engine's order (key order for ordered engines).
    fn __iter__(slf: Bound<'_, Self>) -> PyResult<KeyIter> {
        KeyIter::new(slf.py(), Box::new(slf.unbind()), Yield::Keys)
    }

    /// The records as `(key, value)` pairs, in the engine's order (backs `items()`).
    fn _iter_items(slf: Bound<'_, Self>) -> PyResult<RecordIter> {
        RecordIter::new(slf.py(), Box::new(slf.unbind()))
    }

    /// The values, in the engine's order (backs `values()`).
    fn _iter_values(slf: Bound<'_, Self>) -> PyResult<KeyIter> {
        KeyIter::new(slf.py(), Box::new(slf.unbind()), Yield::Values)
    }

    /// The value of `key`, or `default` when there is none.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let raw = self.key(key)?;
        match self.lookup(py, &raw)? {
            Some(value) => Ok(value),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    /// The values of `keys` (an iterable of bytes or str) in their order, None where a key
    /// has no record; with `as_dict=True`, a dict of the keys that have a record (as given)
    /// to their values, the others left out (memcached's `get_multi`). One batch lookup, run
    /// with the GIL released; a key of another type is a TypeError and nothing is looked up.
    #[pyo3(signature = (keys, as_dict = false))]
    fn get_many<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>, as_dict: bool) -> PyResult<Bound<'py, PyAny>> {
        if keys.is_instance_of::<PyBytes>() || keys.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err("get_many takes an iterable of keys, not one key"));
        }
        let objects: Vec<Bound<'py, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
        let raw: Vec<Cow<'_, [u8]>> = objects.iter().map(|key| self.key(key)).collect::<PyResult<_>>()?;
        let refs: Vec<&[u8]> = raw.iter().map(|key| key.as_ref()).collect();
        let engine = self.typed(py)?;
        // The keys were converted with the GIL held (a bad one is a TypeError before anything
        // is looked up); the values come back in one buffer, made into objects once it is back.
        let fetched = {
            let _long = self.handle.release().long_call();
            gil::detach(py, || PackedBytes::collect(refs.len(), |visit| engine.get_many_with(&refs, visit)))
        }
        .or_raise(py)?;
        if as_dict {
            let found = PyDict::new(py);
            for (key, value) in objects.iter().zip(fetched.iter()) {
                if let Some(value) = value {
                    found.set_item(key, self.encoding.output(py, value)?)?;
                }
            }
            return Ok(found.into_any());
        }
        let values = fetched
            .iter()
            .map(|value| match value {
                Some(value) => self.encoding.output(py, value),
                None => Ok(py.None().into_bound(py)),
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, values)?.into_any())
    }

    /// Stores `value` under `key`. With `overwrite=False` an existing record is kept and the
    /// call returns False; otherwise it returns True.
    #[pyo3(signature = (key, value, overwrite = true))]
    fn set(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, overwrite: bool) -> PyResult<bool> {
        let (raw_key, raw_value) = (self.key(key)?, self.value(value)?);
        match self.store(py, &raw_key, &raw_value, overwrite)? {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == kura::ErrorKind::Duplicate => Ok(false),
            Err(e) => Err(e).or_raise(py),
        }
    }

    /// The value of `key`; if there is none, stores `default` (empty like `dbm`: `b""`, or `""`
    /// under an encoding) and returns it.
    /// Atomic: of two threads racing on an absent key, one stores and both see its value.
    #[pyo3(signature = (key, default = None))]
    fn setdefault<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let raw_key = self.key(key)?;
        // Without a default, an empty value, returned as `db[key]` would return it (`""`
        // under an encoding).
        let default = match default {
            Some(value) => value,
            None => self.encoding.output(py, b"")?,
        };
        let raw_default = self.value(&default)?;
        let existing = self.run(py, false, |dbm| {
            let mut existing = None;
            dbm.process(&raw_key, &mut |old| match old {
                Some(value) => {
                    existing = Some(value.to_vec());
                    Action::Keep
                }
                None => Action::Set(Cow::Borrowed(&raw_default)),
            })?;
            Ok(existing)
        })?;
        match existing {
            Some(value) => self.encoding.output(py, &value),
            None => Ok(default),
        }
    }

    /// Removes `key` and returns its value; without a record, returns `default` or raises
    /// KeyError when no default was given.
    #[pyo3(signature = (key, *default))]
    fn pop<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if default.len() > 1 {
            return Err(PyTypeError::new_err(format!("pop expected at most 2 arguments, got {}", default.len() + 1)));
        }
        let raw = self.key(key)?;
        let removed = self.run(py, false, |dbm| {
            let mut removed = None;
            dbm.process(&raw, &mut |old| {
                removed = old.map(<[u8]>::to_vec);
                if removed.is_some() {
                    Action::Remove
                } else {
                    Action::Keep
                }
            })?;
            Ok(removed)
        })?;
        match (removed, default.get_item(0)) {
            (Some(value), _) => self.encoding.output(py, &value),
            (None, Ok(fallback)) => Ok(fallback),
            (None, Err(_)) => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// Removes every record.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, true, |dbm| dbm.clear())
    }

    /// Sets `key` to `desired` only if its value is `expected` (None: absent); `desired`
    /// None removes the record. Returns whether it matched (and so whether it changed).
    #[pyo3(signature = (key, expected, desired))]
    fn compare_exchange(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        expected: Option<&Bound<'_, PyAny>>,
        desired: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let raw_key = self.key(key)?;
        let expected = expected.map(|e| self.value(e)).transpose()?;
        let desired = desired.map(|d| self.value(d)).transpose()?;
        self.exchange(py, &raw_key, expected.as_deref(), desired.as_deref())
    }

    /// Adds `delta` to the counter under `key` and returns the new value. Counters are
    /// 8-byte big-endian integers (as in Tkrzw); an absent record starts at `initial`.
    #[pyo3(signature = (key, delta = 1, initial = 0))]
    fn increment(&self, py: Python<'_>, key: &Bound<'_, PyAny>, delta: i64, initial: i64) -> PyResult<i64> {
        let raw = self.key(key)?;
        self.run(py, false, |dbm| dbm.increment(&raw, delta, initial))
    }

    /// Appends `value` to the record of `key` (with `delim` between old and new), or creates it.
    #[pyo3(signature = (key, value, delim = None))]
    fn append(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        delim: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (raw_key, raw_value) = (self.key(key)?, self.value(value)?);
        let delim = delim.map(|d| self.value(d)).transpose()?.unwrap_or(Cow::Borrowed(b""));
        let big = raw_value.len() >= BIG_VALUE;
        self.run(py, big, |dbm| dbm.append(&raw_key, &raw_value, &delim))
    }

    /// Read-modify-write: calls `fn(old)` with the current value (None when absent); its
    /// result decides: None keeps the record, False removes it, bytes or str store it.
    /// Atomic with respect to other writers; `fn` runs outside the engine's locks and may be
    /// called again if another writer changed the record in the meantime. Returns the result
    /// of the last call of `fn`.
    #[pyo3(signature = (key, func))]
    fn process<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        func: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let raw_key = self.key(key)?;
        loop {
            let old = self.fetch(py, &raw_key)?;
            let old_obj = match &old {
                Some(value) => self.encoding.output(py, value)?,
                None => py.None().into_bound(py),
            };
            let decision = func.call1((old_obj,))?;
            let desired = if decision.is_none() {
                return Ok(decision);
            } else if decision.cast::<PyBool>().is_ok_and(|b| !b.is_true()) {
                None
            } else if decision.cast::<PyBool>().is_ok() || decision.cast::<PyInt>().is_ok() {
                return Err(PyTypeError::new_err(
                    "process: fn must return None (keep), False (remove), or bytes or str (set)",
                ));
            } else {
                Some(self.value(&decision)?)
            };
            if old.is_none() && desired.is_none() {
                return Ok(decision);
            }
            if self.exchange(py, &raw_key, old.as_deref(), desired.as_deref())? {
                return Ok(decision);
            }
        }
    }

    /// A cursor over the records; on ordered engines it also moves backwards.
    fn cursor(slf: Bound<'_, Self>) -> PyResult<Cursor> {
        Cursor::new(slf.py(), Box::new(slf.unbind()))
    }

    /// `(key, value)` pairs with `start <= key < stop` in key order (`stop` included with
    /// `inclusive=True`; `reverse=True`: from the last one down), or keys alone with
    /// `keys_only=True`. `prefix=` keeps the keys that begin with it (within `start` and
    /// `stop` when given too), on bytewise-ordered engines. Ordered engines only (tree,
    /// baby); others raise `kura.NotOrderedError`.
    #[pyo3(signature = (start = None, stop = None, reverse = false, *, prefix = None, inclusive = false, keys_only = false))]
    fn range(
        slf: Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
        inclusive: bool,
        keys_only: bool,
    ) -> PyResult<RangeIter> {
        let py = slf.py();
        let this = slf.get();
        let start = start.map(|s| this.key(s).map(Cow::into_owned)).transpose()?;
        let stop = stop.map(|s| this.key(s).map(Cow::into_owned)).transpose()?;
        let mut bounds = KeyBounds { start, stop: stop.map(|stop| (stop, inclusive)) };
        if let Some(prefix) = prefix {
            let prefix = this.key(prefix)?;
            // A prefix is a contiguous range only in bytewise order: a numeric tree orders
            // "10" between "9" and "11", so "1..." keys are scattered.
            if this.ordered() && !this.bytewise(py)? {
                return Err(errors::to_py(
                    py,
                    kura::Error::invalid("prefix= needs bytewise key order; this tree compares keys as numbers"),
                ));
            }
            bounds = bounds.within_prefix(&prefix);
        }
        RangeIter::new(slf.py(), Box::new(slf.unbind()), bounds, reverse, keys_only)
    }

    /// A batch of sets and removes applied when its `with` block ends without an exception:
    /// atomically on the tree engine, one by one on the others (see `Batch`).
    fn batch(slf: Bound<'_, Self>) -> PyResult<Batch> {
        let this = slf.get();
        this.check_open(slf.py())?;
        Ok(Batch::new(this.handle.shared(), this.encoding.clone()))
    }

    /// Writes buffered changes to the file; with `hard=True` also to the device (fsync).
    #[pyo3(signature = (hard = false))]
    fn sync(&self, py: Python<'_>, hard: bool) -> PyResult<()> {
        self.run(py, true, |dbm| dbm.synchronize(hard))
    }

    /// Rewrites the database compactly, applying the given parameters (record_comp=...).
    #[pyo3(signature = (**kwargs))]
    fn rebuild(&self, py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let params = params::from_kwargs(kwargs)?;
        self.run(py, true, |dbm| dbm.rebuild(&params))
    }

    /// Whether a rebuild would pay (much free space, too few buckets).
    fn should_be_rebuilt(&self, py: Python<'_>) -> PyResult<bool> {
        self.run(py, false, |dbm| dbm.should_be_rebuilt())
    }

    /// Properties of the database (class, count, file_size, codec, ...); integers as `int`.
    fn inspect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.run(py, true, |dbm| dbm.inspect())?;
        let dict = PyDict::new(py);
        for (name, stat) in stats.entries() {
            match stat {
                Stat::Number(number) => dict.set_item(name, number)?,
                Stat::Flag(flag) => dict.set_item(name, flag)?,
                Stat::Name(text) => dict.set_item(name, text)?,
                Stat::Text(text) => dict.set_item(name, text)?,
            }
        }
        Ok(dict)
    }

    /// Number of records.
    #[getter]
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        self.run(py, false, |dbm| dbm.count())
    }

    /// Bytes the database occupies in its file (or in memory, for memory engines).
    #[getter]
    fn file_size(&self, py: Python<'_>) -> PyResult<u64> {
        self.run(py, false, |dbm| dbm.file_size())
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.handle.path().to_path_buf()
    }

    /// The engine's name: hash, tree, tiny, baby, cache.
    #[getter]
    fn engine(&self) -> &'static str {
        self.handle.kind().name
    }

    /// Whether the engine keeps keys in order (`range` and backward cursors work).
    #[getter]
    fn ordered(&self) -> bool {
        self.handle.is_ordered()
    }

    /// The open flag: r, w, c or n.
    #[getter]
    fn mode(&self) -> &str {
        self.handle.flag()
    }

    /// The text encoding results are decoded with, or None for bytes.
    #[getter]
    fn encoding_name(&self) -> Option<&str> {
        self.encoding.name()
    }

    #[getter]
    fn writable(&self) -> bool {
        self.handle.is_writable()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// Whether record calls release the GIL (see `kura.open(release_gil=...)`).
    #[getter]
    fn release_gil(&self) -> bool {
        self.handle.release().releases_records()
    }

    /// Flushes and closes the database; later calls raise `kura.ClosedError`. Closing twice is
    /// harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let handle = &self.handle;
        py.detach(|| handle.close()).or_raise(py)
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().check_open(slf.py())?;
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let this = slf.get();
        let state = if this.closed() { " closed" } else { "" };
        Ok(format!(
            "<{} {:?} engine={} mode={:?}{}>",
            slf.get_type().qualname()?,
            this.handle.path().display().to_string(),
            this.handle.kind().name,
            this.handle.flag(),
            state
        ))
    }
}
