//! Which engine the shards of a set are, and the check that they all agree.
//!
//! The inner engine comes from `inner_engine=NAME`, else from the base path's extension
//! (`casket.kut` with `num_shards=4`: TreeDbm shards `casket.kut-00000-of-00004`, as Tkrzw
//! names them), else, for an existing set under a base of no engine's extension (`.kus`), from
//! the first shard file's first bytes: the engine whose marks (`Engine::magic`, a memory
//! snapshot's class byte included) it starts with, with no trial open. A new set under a
//! base of no engine's extension is HashDbm, the default engine.

use std::path::Path;

use crate::dbm::{Dbm, Params};
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::tree_dbm::comparator::Comparator;

use super::naming::shard_path;

/// The registry name of the shard engine itself, which cannot be its own inner engine.
pub const SHARD_ENGINE: &str = "shard";

/// The engine a set's shards are made of; `existing` is the set's shard count if it exists.
pub fn inner_engine(
    engines: &'static [Engine],
    base: &Path,
    params: &Params,
    existing: Option<usize>,
) -> Result<&'static Engine> {
    if let Some(name) = params.get("inner_engine") {
        let engine = engine::named(engines, name)?;
        if engine.name == SHARD_ENGINE {
            return Err(Error::invalid("inner_engine=shard: a shard of a set cannot itself be a set"));
        }
        return Ok(engine);
    }
    if let Some(engine) = engine::of_path(engines, base).filter(|e| e.name != SHARD_ENGINE) {
        return Ok(engine);
    }
    match existing {
        Some(count) => probe(engines, &shard_path(base, 0, count)),
        // A new set under a base of no engine's extension: the default engine.
        None => engine::default_of(engines),
    }
}

/// The engine of an existing set of `count` shards for a restore, where shards may be damaged
/// or missing: the base path's extension, else the first shard file an engine opens.
pub fn engine_for_restore(engines: &'static [Engine], base: &Path, count: usize) -> Result<&'static Engine> {
    if let Some(engine) = engine::of_path(engines, base).filter(|e| e.name != SHARD_ENGINE) {
        return Ok(engine);
    }
    let mut first_error = None;
    for index in 0..count {
        match probe(engines, &shard_path(base, index, count)) {
            Ok(engine) => return Ok(engine),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| Error::broken(format!("{}: a set of no shards", base.display()))))
}

/// The engine whose marks (`Engine::magic`: its magic, and a memory snapshot's class byte)
/// the shard file at `path` starts with: told by its first bytes, with no trial open.
fn probe(engines: &'static [Engine], path: &Path) -> Result<&'static Engine> {
    match engine::of_file(engines, path)? {
        Some(engine) if !engine.shard_set => Ok(engine),
        _ => Err(Error::broken(format!(
            "{}: this shard file starts with no engine's magic; give inner_engine=NAME or check the file",
            path.display()
        ))),
    }
}

/// What every shard of one set must share, as shown (name, value): the merge needs one key
/// order, and a set whose shards compress differently was assembled from different sets.
fn shared(db: &dyn Dbm) -> Result<[(&'static str, &'static str); 3]> {
    let stats = db.inspect()?;
    Ok([
        ("class", stats.class),
        stats.codec.map_or(("codec", "(none)"), |codec| (codec.param, codec.kind.name())),
        ("key_comparator", stats.key_order.map_or("(none)", Comparator::name)),
    ])
}

/// BrokenData naming the first shard whose engine, codec or key order differs from shard 0's.
pub fn check_consistent(base: &Path, shards: &[Box<dyn Dbm>]) -> Result<()> {
    let Some(first) = shards.first() else {
        return Ok(());
    };
    let expected = shared(first.as_ref())?;
    for (index, shard) in shards.iter().enumerate().skip(1) {
        let actual = shared(shard.as_ref())?;
        if let Some(((name, value), (_, wanted))) = actual.iter().zip(&expected).find(|(a, e)| a != e) {
            return Err(Error::broken(format!(
                "{}: its {name} is {value} but shard 0's is {wanted}: the shards of a set must all share \
                 one engine, codec and key order",
                shard_path(base, index, shards.len()).display()
            )));
        }
    }
    Ok(())
}
