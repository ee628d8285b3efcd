//! An open database whose two file engines are called through their concrete types.
//!
//! Why: a binding's hot path (`db[k]` and `db[k] = v` in Python and Ruby) takes a fraction of
//! a microsecond on an uncompressed hash or tree file, so an indirect call through `dyn Dbm`
//! is a visible share of it. Calling `HashDbm` and `TreeDbm` by their types lets the compiler
//! inline their lookups into the caller (the bindings build with thin LTO); every other
//! engine, and every call off the hot path, goes through `dyn Dbm`. Both bindings use this one
//! type, so a new hot path is typed once for both.

use std::any::Any;
use std::sync::Arc;

use crate::dbm::Dbm;
use crate::error::Result;
use crate::hash_dbm::HashDbm;
use crate::tree_dbm::TreeDbm;

/// One open database. The typed variants hold the same object `shared` returns.
pub enum TypedDbm {
    /// A hash file (`.kuh`).
    Hash(Arc<HashDbm>),
    /// A tree file (`.kut`).
    Tree(Arc<TreeDbm>),
    /// Any other engine, through the trait.
    Other(Arc<dyn Dbm>),
}

/// Calls `$method` on the engine by its type (the same call in each arm, each arm inlined).
macro_rules! dispatch {
    ($self:expr, $dbm:ident => $call:expr) => {
        match $self {
            TypedDbm::Hash($dbm) => $call,
            TypedDbm::Tree($dbm) => $call,
            TypedDbm::Other($dbm) => $call,
        }
    };
}

impl TypedDbm {
    /// The engine behind `dbm`, typed when it is a hash or a tree file.
    pub fn new(dbm: Arc<dyn Dbm>) -> TypedDbm {
        let any: Arc<dyn Any + Send + Sync> = dbm.clone();
        if let Ok(hash) = any.clone().downcast::<HashDbm>() {
            return TypedDbm::Hash(hash);
        }
        if let Ok(tree) = any.downcast::<TreeDbm>() {
            return TypedDbm::Tree(tree);
        }
        TypedDbm::Other(dbm)
    }

    /// The engine as a trait object, for everything off the hot path.
    pub fn shared(&self) -> Arc<dyn Dbm> {
        dispatch!(self, dbm => dbm.clone())
    }

    /// The engine as a trait object, borrowed: the same object as `shared`.
    pub fn dbm(&self) -> &dyn Dbm {
        dispatch!(self, dbm => {
            let dbm: &dyn Dbm = &**dbm;
            dbm
        })
    }

    /// The tree engine, for what only TreeDbm has (atomic batches, ranges in its own order).
    pub fn tree(&self) -> Option<&Arc<TreeDbm>> {
        match self {
            TypedDbm::Tree(tree) => Some(tree),
            _ => None,
        }
    }

    /// Whether the engine keeps its keys in order, so that ranges and backward cursors work:
    /// TreeDbm, BabyDbm, and a shard set of either (`Dbm::is_ordered`, which says so without
    /// opening a cursor).
    pub fn is_ordered(&self) -> bool {
        match self {
            TypedDbm::Hash(_) => false,
            TypedDbm::Tree(_) => true,
            TypedDbm::Other(dbm) => dbm.is_ordered(),
        }
    }

    /// The value of `key`, copied out; None when there is no record.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match dispatch!(self, dbm => dbm.get(key)) {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `key` has a record, without copying its value.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        let mut found = false;
        let mut visit = |value: Option<&[u8]>| found = value.is_some();
        dispatch!(self, dbm => dbm.get_with(key, &mut visit))?;
        Ok(found)
    }

    /// Shows the value of `key` (None when there is no record) to `visit`, which runs under
    /// the engine's lock and must not call back into this database.
    #[inline]
    pub fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        dispatch!(self, dbm => dbm.get_with(key, visit))
    }

    /// Shows the values of `keys` (None for a key with no record) to `visit` with each key's
    /// index, as `Dbm::get_many_with`; `visit` runs under the engine's locks.
    pub fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        dispatch!(self, dbm => dbm.get_many_with(keys, visit))
    }

    /// Stores `value` under `key`; with `overwrite` false an existing record is a Duplicate
    /// error, as `Dbm::set` says.
    #[inline]
    pub fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        dispatch!(self, dbm => dbm.set(key, value, overwrite))
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use std::collections::BTreeMap;

    use super::*;
    use crate::dbm::OpenMode;
    use crate::split_mix::SplitMix64;

    /// Every registered engine opens as the variant its class says (so the two file engines
    /// really take the typed path), and each method answers as the model does, with keys
    /// present and absent, `set` without overwrite refused on a present key, and batches
    /// with repeats.
    #[test]
    fn every_engine_is_typed_by_its_class_and_answers_as_the_model() {
        let dir = tempfile::tempdir().unwrap();
        for engine in crate::registry::engines() {
            let path = dir.path().join(format!("db.{}", engine.extension));
            let params = engine.bench_params(1000);
            let db = TypedDbm::new(Arc::from(crate::registry::open(&path, OpenMode::Create, &params).unwrap()));
            let typed = match &db {
                TypedDbm::Hash(_) => "HashDbm",
                TypedDbm::Tree(_) => "TreeDbm",
                TypedDbm::Other(_) => "other",
            };
            let expected = if matches!(engine.class, "HashDbm" | "TreeDbm") { engine.class } else { "other" };
            assert_eq!(typed, expected, "{}", engine.name);
            assert_eq!(db.tree().is_some(), engine.class == "TreeDbm", "{}", engine.name);
            assert_eq!(db.is_ordered(), engine.is_ordered(), "{}", engine.name);

            let mut model = BTreeMap::new();
            let mut rng = SplitMix64::new(5);
            for step in 0..2000 {
                let key = format!("{}", rng.below(300)).into_bytes();
                let value = format!("v{step}").into_bytes();
                let overwrite = rng.below(4) != 0;
                let outcome = db.set(&key, &value, overwrite);
                if overwrite || !model.contains_key(&key) {
                    outcome.unwrap();
                    model.insert(key.clone(), value);
                } else {
                    assert!(outcome.is_err(), "{}: a set without overwrite replaced a record", engine.name);
                }
                let probe = format!("{}", rng.below(400)).into_bytes();
                assert_eq!(db.get(&probe).unwrap(), model.get(&probe).cloned(), "{}", engine.name);
                assert_eq!(db.contains(&probe).unwrap(), model.contains_key(&probe), "{}", engine.name);
            }
            let keys: Vec<Vec<u8>> = (0..500).map(|_| format!("{}", rng.below(400)).into_bytes()).collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let mut seen = vec![None; keys.len()];
            db.get_many_with(&refs, &mut |index, value| seen[index] = Some(value.map(<[u8]>::to_vec))).unwrap();
            for (key, got) in keys.iter().zip(seen) {
                assert_eq!(got, Some(model.get(key).cloned()), "{}", engine.name);
            }
            db.shared().close().unwrap();
        }
    }

    /// A shard set is ordered when its shards are, as its registry entry's `Order::AsShards`
    /// and `registry::ordered` say.
    #[test]
    fn a_shard_set_is_ordered_when_its_shards_are() {
        let dir = tempfile::tempdir().unwrap();
        for (inner, ordered) in [("hash", false), ("tree", true), ("baby", true), ("tiny", false)] {
            let params = crate::dbm::Params::new().with("num_shards", 3).with("inner_engine", inner);
            let path = dir.path().join(format!("set-{inner}"));
            let db = TypedDbm::new(Arc::from(crate::registry::open(&path, OpenMode::Create, &params).unwrap()));
            assert!(matches!(db, TypedDbm::Other(_)), "{inner}");
            assert_eq!(db.is_ordered(), ordered, "{inner}");
            // The registry says so from the parameters, and from the files once they exist.
            assert_eq!(crate::registry::ordered(&path, &params).unwrap(), ordered, "{inner}");
            db.shared().close().unwrap();
            assert_eq!(
                crate::registry::ordered(&path, &crate::dbm::Params::new()).unwrap(),
                ordered,
                "{inner} by its files"
            );
        }
    }
}
