//! `db.batch()`: sets and removes collected in Python and applied together: atomically on a
//! TreeDbm, one by one on the other engines (`Dbm::write_batch`).

use std::sync::Arc;

use kura::{Dbm, WriteBatch};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::Encoding;
use crate::errors::{self, OrRaise};

/// A write batch. Use it as `with db.batch() as b: b[k] = v; del b[k2]`: the changes are
/// applied when the block ends without an exception, and dropped when it raises. Reads of
/// the database do not see a batch's changes before it is applied. On the tree engine the
/// batch is applied atomically, all or nothing even across a crash; the other engines apply
/// its operations in order, each atomic on its own, so a crash midway can leave a prefix.
#[pyclass(module = "kura._kura", name = "Batch")]
pub struct Batch {
    dbm: Arc<dyn Dbm>,
    encoding: Encoding,
    ops: WriteBatch,
    finished: bool,
}

impl Batch {
    pub fn new(dbm: Arc<dyn Dbm>, encoding: Encoding) -> Batch {
        Batch { dbm, encoding, ops: WriteBatch::new(), finished: false }
    }

    fn open(&self, py: Python<'_>) -> PyResult<()> {
        if self.finished {
            return Err(errors::general(py, "the batch was already applied or discarded".to_string()));
        }
        Ok(())
    }
}

#[pymethods]
impl Batch {
    /// Adds "store `value` under `key`".
    fn set(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.open(py)?;
        let key = self.encoding.input(key, "keys")?;
        let value = self.encoding.input(value, "values")?;
        self.ops.set(key, value);
        Ok(())
    }

    /// Adds "remove `key`" (nothing happens at apply time if it is absent).
    fn remove(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.open(py)?;
        let key = self.encoding.input(key, "keys")?;
        self.ops.remove(key);
        Ok(())
    }

    fn __setitem__(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set(py, key, value)
    }

    fn __delitem__(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.remove(py, key)
    }

    /// Number of operations collected.
    fn __len__(&self) -> usize {
        self.ops.len()
    }

    /// Applies the collected operations (on the tree engine all together, or none on error)
    /// and ends the batch.
    fn commit(&mut self, py: Python<'_>) -> PyResult<()> {
        self.open(py)?;
        self.finished = true;
        let (dbm, ops) = (&self.dbm, &self.ops);
        let outcome = py.detach(|| dbm.write_batch(ops));
        self.ops.clear();
        outcome.or_raise(py)
    }

    /// Drops the collected operations and ends the batch.
    fn discard(&mut self) {
        self.finished = true;
        self.ops.clear();
    }

    fn __enter__(slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        slf.open(slf.py())?;
        Ok(slf)
    }

    #[pyo3(signature = (*exc))]
    fn __exit__(&mut self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let raised = exc.get_item(0).is_ok_and(|kind| !kind.is_none());
        if self.finished {
            return Ok(false);
        }
        if raised {
            self.discard();
        } else {
            self.commit(py)?;
        }
        Ok(false)
    }
}
