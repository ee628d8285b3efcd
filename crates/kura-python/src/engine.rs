//! The engine behind a `Database`, typed where the dict protocol's hot path wants it.
//!
//! `db[k]` and `db[k] = v` are most of what Python programs do with a database, and on an
//! uncompressed hash or tree each takes a fraction of a microsecond. Calling those two
//! engines through their concrete types instead of `dyn Dbm` lets the compiler inline the
//! engine's lookup into the binding (thin LTO) and saves the indirect calls; every other
//! engine, and every call off the hot path, goes through `dyn Dbm`.

use std::any::Any;
use std::sync::Arc;

use kura::{Dbm, HashDbm, TreeDbm};

/// One open engine. The hash and tree variants hold the same object `dbm()` returns.
pub enum Engine {
    Hash(Arc<HashDbm>),
    Tree(Arc<TreeDbm>),
    Other(Arc<dyn Dbm>),
}

impl Engine {
    /// The engine behind `dbm`, typed when it is one of the hot-path engines.
    pub fn new(dbm: Arc<dyn Dbm>) -> Engine {
        let any: Arc<dyn Any + Send + Sync> = dbm.clone();
        if let Ok(hash) = any.clone().downcast::<HashDbm>() {
            return Engine::Hash(hash);
        }
        if let Ok(tree) = any.downcast::<TreeDbm>() {
            return Engine::Tree(tree);
        }
        Engine::Other(dbm)
    }

    /// The engine as a trait object, for everything off the hot path.
    pub fn shared(&self) -> Arc<dyn Dbm> {
        match self {
            Engine::Hash(hash) => hash.clone(),
            Engine::Tree(tree) => tree.clone(),
            Engine::Other(dbm) => dbm.clone(),
        }
    }

    /// The tree engine, for what only TreeDbm has (atomic batches, ranges in its own order).
    pub fn tree(&self) -> Option<&Arc<TreeDbm>> {
        match self {
            Engine::Tree(tree) => Some(tree),
            _ => None,
        }
    }

    /// The value of `key`; None when there is no record.
    #[inline]
    pub fn get(&self, key: &[u8]) -> kura::Result<Option<Vec<u8>>> {
        let outcome = match self {
            Engine::Hash(hash) => hash.get(key),
            Engine::Tree(tree) => tree.get(key),
            Engine::Other(dbm) => dbm.get(key),
        };
        match outcome {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Shows the value of `key` (None when there is no record) to `visit`, which runs under
    /// the engine's lock and must not call back into this database.
    #[inline]
    pub fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> kura::Result<()> {
        match self {
            Engine::Hash(hash) => hash.get_with(key, visit),
            Engine::Tree(tree) => tree.get_with(key, visit),
            Engine::Other(dbm) => dbm.get_with(key, visit),
        }
    }

    /// Shows the values of `keys` (None for a key with no record) to `visit` with each key's
    /// index, as `Dbm::get_many_with`; `visit` runs under the engine's locks.
    pub fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> kura::Result<()> {
        match self {
            Engine::Hash(hash) => hash.get_many_with(keys, visit),
            Engine::Tree(tree) => tree.get_many_with(keys, visit),
            Engine::Other(dbm) => dbm.get_many_with(keys, visit),
        }
    }

    /// Stores `value` under `key`; with `overwrite` false an existing record is a Duplicate
    /// error, as `Dbm::set` says.
    #[inline]
    pub fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> kura::Result<()> {
        match self {
            Engine::Hash(hash) => hash.set(key, value, overwrite),
            Engine::Tree(tree) => tree.set(key, value, overwrite),
            Engine::Other(dbm) => dbm.set(key, value, overwrite),
        }
    }
}
