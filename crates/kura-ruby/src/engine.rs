//! The engine behind a `Kura::DB`, typed where `db[k]` and `db[k] = v` want it.
//!
//! Those two calls are most of what a Ruby program does with a database, and on an
//! uncompressed hash or tree file each takes a fraction of a microsecond: calling the two
//! file engines through their concrete types rather than `dyn Dbm` lets the compiler inline
//! them into the binding (thin LTO). Every other engine and call goes through `dyn Dbm`.

use std::any::Any;
use std::sync::Arc;

use kura::{Dbm, HashDbm, TreeDbm};

/// One open engine; the typed variants hold the same object `shared()` returns.
pub enum Engine {
    Hash(Arc<HashDbm>),
    Tree(Arc<TreeDbm>),
    Other(Arc<dyn Dbm>),
}

impl Engine {
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

    /// TreeDbm, for ranges in the tree's own key order (its comparator).
    pub fn tree(&self) -> Option<&Arc<TreeDbm>> {
        match self {
            Engine::Tree(tree) => Some(tree),
            _ => None,
        }
    }

    /// The value of `key`, copied out; None when there is no record.
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

    /// Whether `key` has a record, without copying its value.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> kura::Result<bool> {
        let mut found = false;
        let mut visit = |value: Option<&[u8]>| found = value.is_some();
        match self {
            Engine::Hash(hash) => hash.get_with(key, &mut visit)?,
            Engine::Tree(tree) => tree.get_with(key, &mut visit)?,
            Engine::Other(dbm) => dbm.get_with(key, &mut visit)?,
        }
        Ok(found)
    }

    /// Stores `value` under `key`, replacing any record.
    #[inline]
    pub fn set(&self, key: &[u8], value: &[u8]) -> kura::Result<()> {
        match self {
            Engine::Hash(hash) => hash.set(key, value, true),
            Engine::Tree(tree) => tree.set(key, value, true),
            Engine::Other(dbm) => dbm.set(key, value, true),
        }
    }
}
