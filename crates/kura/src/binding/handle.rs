//! The state of one open database as both bindings hold it: the engine (typed for the hot
//! paths, a trait object for the rest, one object), what it is, how it was opened, when its
//! calls release the interpreter's lock, and whether it was closed. Python's
//! `kura._kura.Database` and Ruby's `Kura::DB` each wrap one `DbHandle` and add only their
//! type conversions and idioms.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::LockRelease;
use crate::dbm::{Dbm, OpenMode, Params};
use crate::engine::Engine;
use crate::error::Result;
use crate::typed_dbm::TypedDbm;

/// One open database of a binding. Run `open` and `close` with the interpreter's lock
/// released: they do I/O.
pub struct DbHandle {
    /// The engine: typed for `db[k]` and `db[k] = v`, `TypedDbm::dbm` for everything else.
    engine: TypedDbm,
    /// Its registry entry.
    kind: &'static Engine,
    /// Whether it keeps keys in order (a shard set of trees does; `TypedDbm::is_ordered`).
    ordered: bool,
    path: PathBuf,
    /// The `dbm`-style flag it was opened with (`r`, `w`, `c`, `n`), as the user gave it.
    flag: String,
    /// When its calls release the interpreter's lock.
    release: LockRelease,
    closed: AtomicBool,
}

impl std::fmt::Debug for DbHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbHandle")
            .field("engine", &self.kind.name)
            .field("path", &self.path)
            .field("flag", &self.flag)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl DbHandle {
    /// Opens (or creates) the database at `path` with the `dbm`-style `flag`, the engine
    /// chosen by `params` or the path (`registry::resolve`), which gets the other parameters.
    /// `release`: the caller's choice for record calls (`release_gil=`, `release_gvl:`), if any.
    pub fn open(path: PathBuf, flag: &str, params: &Params, release: Option<bool>) -> Result<DbHandle> {
        let mode = OpenMode::from_flag(flag)?;
        let kind = crate::registry::resolve(&path, params)?;
        let engine = TypedDbm::new(Arc::from(kind.open(&path, mode, &params.without("engine"))?));
        let release = LockRelease::new(engine.dbm(), release);
        Ok(DbHandle {
            ordered: engine.is_ordered(),
            engine,
            kind,
            path,
            flag: flag.to_string(),
            release,
            closed: AtomicBool::new(false),
        })
    }

    /// The engine, or None once the database is closed (each binding raises its
    /// `ClosedError`, `ErrorClass::Closed`).
    #[inline]
    pub fn live(&self) -> Option<&TypedDbm> {
        if self.closed.load(Ordering::Acquire) {
            None
        } else {
            Some(&self.engine)
        }
    }

    /// Closes the database: the first call closes the engine, later ones (and a concurrent
    /// second one) do nothing and return Ok. Counted as a long call (`LockRelease`).
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let _long = self.release.long_call();
        self.engine.dbm().close()
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Its engine's registry entry.
    pub fn kind(&self) -> &'static Engine {
        self.kind
    }

    /// Whether its keys are in order.
    pub fn is_ordered(&self) -> bool {
        self.ordered
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The flag it was opened with.
    pub fn flag(&self) -> &str {
        &self.flag
    }

    /// Whether it was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.engine.dbm().is_writable()
    }

    /// When its calls release the interpreter's lock.
    pub fn release(&self) -> &LockRelease {
        &self.release
    }

    /// The engine as a shared trait object, for what outlives a call (cursors, walks).
    pub fn shared(&self) -> Arc<dyn Dbm> {
        self.engine.shared()
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;

    /// Every engine opens through the handle as through the registry, says what it is, and
    /// is gone for good after `close`, which a second call repeats harmlessly.
    #[test]
    fn a_handle_opens_every_engine_and_closes_once() {
        let dir = tempfile::tempdir().unwrap();
        for engine in crate::registry::ENGINES {
            let path = dir.path().join(format!("db.{}", engine.extension));
            let params = engine.bench_params(100);
            let handle = DbHandle::open(path.clone(), "c", &params, None).unwrap();
            assert_eq!(handle.kind(), engine);
            assert_eq!(handle.is_ordered(), crate::registry::ordered(&path, &params).unwrap(), "{}", engine.name);
            assert_eq!((handle.path(), handle.flag(), handle.is_writable()), (path.as_path(), "c", true));
            handle.live().unwrap().set(b"k", b"v", true).unwrap();
            assert_eq!(handle.live().unwrap().get(b"k").unwrap(), Some(b"v".to_vec()));
            assert!(!handle.is_closed());
            handle.close().unwrap();
            assert!(handle.is_closed() && handle.live().is_none());
            handle.close().unwrap();
            let release = handle.release();
            assert_eq!(
                release.record_call_releases(),
                release.releases_records(),
                "{}: no long call left",
                engine.name
            );
        }
        let error = DbHandle::open(dir.path().join("x.kuh"), "x", &Params::new(), None).unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::InvalidArgument);
    }
}
