//! The native half of the Python package `kura` (module `kura._kura`).
//!
//! - `database.rs`: `Database`, one open database with the mapping protocol;
//! - `cursor.rs`: cursors and the iterators behind `iter(db)`, `items()`, `range()`;
//! - `batch.rs`: atomic write batches of TreeDbm;
//! - `convert.rs`: keys and values between `bytes`/`str` and Kura;
//! - `params.rs`: keyword arguments as engine parameters;
//! - `gil.rs`: releasing the GIL around engine calls;
//! - `errors.rs`: Kura errors as the exceptions of `kura.errors`;
//! - `import.rs`: `kura.import_file`, the parallel bulk loader;
//! - `routing.rs`: `kura.shard_of`, `kura.ShardWriter` and their helpers, for loaders that
//!   route rows to shards themselves (`kura.dask`), `arrow.rs` the Arrow columns they take;
//! - `rendezvous.rs`: `kura.RendezvousHash`, pymemcache's node choice for `kura.dask`.
//!
//! The Python half (python/kura/) derives `kura.Database` from this `Database` to add what
//! `collections.abc.MutableMapping` provides, and defines the exception classes.

mod arrow;
mod batch;
mod check;
mod convert;
mod cursor;
mod database;
mod errors;
mod gil;
mod import;
mod params;
mod rendezvous;
mod routing;

use kura::registry::Fact;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::OrRaise;

#[pymodule]
fn _kura(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<database::Database>()?;
    m.add_class::<cursor::Cursor>()?;
    m.add_class::<cursor::KeyIter>()?;
    m.add_class::<cursor::RecordIter>()?;
    m.add_class::<cursor::RangeIter>()?;
    m.add_class::<batch::Batch>()?;
    m.add_function(wrap_pyfunction!(import::import_file, m)?)?;
    m.add_function(wrap_pyfunction!(check::check, m)?)?;
    m.add_function(wrap_pyfunction!(check::engine_of_file, m)?)?;
    m.add_class::<routing::ShardWriter>()?;
    m.add_function(wrap_pyfunction!(routing::shard_of, m)?)?;
    m.add_function(wrap_pyfunction!(routing::shard_path, m)?)?;
    m.add_function(wrap_pyfunction!(routing::shard_files, m)?)?;
    m.add_function(wrap_pyfunction!(routing::split_rows, m)?)?;
    m.add_function(wrap_pyfunction!(routing::unpack_rows, m)?)?;
    m.add_function(wrap_pyfunction!(routing::split_arrow, m)?)?;
    m.add_class::<rendezvous::RendezvousHash>()?;
    // The engine `kura.dbm` opens a name of no engine's extension as.
    m.add("DEFAULT_ENGINE", kura::registry::default_engine().or_raise(py)?.name)?;
    // Engine name by file extension, for `kura.dbm` to pick a default for other names.
    let extensions = PyDict::new(py);
    for engine in kura::engines() {
        extensions.set_item(engine.extension, engine.name)?;
    }
    m.add("EXTENSIONS", extensions)?;
    // The engine registry, for `kura.engines()`.
    let engines = pyo3::types::PyList::empty(py);
    for engine in kura::engines() {
        let entry = PyDict::new(py);
        for (name, fact) in engine.description() {
            match fact {
                Fact::Text(text) => entry.set_item(name, text)?,
                Fact::Flag(flag) => entry.set_item(name, flag)?,
                Fact::Names(names) => entry.set_item(name, names.to_vec())?,
                // (offset, bytes) pairs.
                Fact::Marks(marks) => entry.set_item(
                    name,
                    marks.iter().map(|mark| (mark.offset, PyBytes::new(py, mark.bytes))).collect::<Vec<_>>(),
                )?,
                Fact::Nothing => entry.set_item(name, py.None())?,
            }
        }
        engines.append(entry)?;
    }
    m.add("ENGINES", engines)?;
    m.add("BINDING_OPTIONS", params::BINDING_OPTIONS.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
