//! ShardDbm: one database made of N databases of another engine, split by a hash of the key.
//!
//! The shards are ordinary databases of any registry engine, in files named as Tkrzw names
//! them (`casket.kuh-00000-of-00004` ...; `naming.rs`); a key lives in the shard its routing
//! hash picks (`route.rs`), a hash independent of the one the shards use for their buckets.
//! Writers on different shards never share a lock, which is the point: several threads (or
//! `kura import`'s one writer per shard) write side by side. Whole-set operations (rebuild,
//! a hard synchronize, large batches) run per shard in parallel (`parallel.rs`). Ordered
//! shards give one ordered cursor by merging theirs (`merge.rs`), the others a cursor that
//! goes through the shards one after another (`chain.rs`).
//!
//! This module opens its shards through `registry` and the registry opens it: a composite
//! engine is built from the list it belongs to.

mod chain;
mod inner;
mod merge;
pub(crate) mod naming;
mod parallel;
mod restore;
pub(crate) mod route;

use std::path::{Path, PathBuf};

use crate::batch::WriteBatch;
use crate::codec::CodecKind;
use crate::dbm::{Cursor, Dbm, ExpiringProcessor, OpenMode, OrderedCursor, Params, Processor};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory_dbm::slotted::share;
use crate::stats::{Caps, Stat, Stats};
use crate::tree_dbm::Comparator;

pub use naming::{check_count, existing_shards, find_set, has_shards, remove_shards, shard_path, MAX_SHARDS};
pub use route::shard_of;

/// The engine the shards of the set under `base` are (or, for a new set, will be) made of.
/// `engines` is the list the inner engine is chosen from (the registry's).
pub fn inner_engine_of(engines: &'static [Engine], base: &Path, params: &Params) -> Result<&'static Engine> {
    inner::inner_engine(engines, base, params, naming::find_set(base)?)
}

/// The engine of the shards of a new set under `base` (`inner_engine=`, else the base's
/// extension, else HashDbm), without reading the directory: for a writer that builds one
/// shard while others build theirs, when the set is not yet complete.
pub fn new_set_inner_engine(engines: &'static [Engine], base: &Path, params: &Params) -> Result<&'static Engine> {
    inner::inner_engine(engines, base, params, None)
}

/// The engine of the complete set under `base` and its shard files in shard order, for a
/// reader that opens each shard on its own (one task per shard). No shard file is NotFound;
/// an incomplete set is BrokenData, as `find_set` says.
pub fn shard_files(
    engines: &'static [Engine],
    base: &Path,
    params: &Params,
) -> Result<(&'static Engine, Vec<PathBuf>)> {
    let Some(count) = naming::find_set(base)? else {
        return Err(Error::new(
            crate::error::ErrorKind::NotFound,
            format!("{}: no shard set here ({}-NNNNN-of-NNNNN files)", base.display(), base.display()),
        ));
    };
    let inner = inner::inner_engine(engines, base, params, Some(count))?;
    Ok((inner, (0..count).map(|index| naming::shard_path(base, index, count)).collect()))
}

/// The shard count of a new set when `num_shards` is not given.
pub const DEFAULT_NUM_SHARDS: usize = 4;

/// A batch at least this long is applied to its shards in parallel; shorter ones do not pay
/// for the threads.
const PARALLEL_BATCH_OPS: usize = 4096;

/// N databases of one engine behind one `Dbm`, a key's shard chosen by a seeded hash (docs/shard.md).
pub struct ShardDbm {
    base: PathBuf,
    inner: &'static Engine,
    shards: Vec<Box<dyn Dbm>>,
    /// The shards' key order, for merging their cursors.
    comparator: Comparator,
}

impl ShardDbm {
    /// The parameters ShardDbm takes itself; every other one goes to each shard's engine.
    pub const PARAMS: &'static [&'static str] = &["num_shards", "inner_engine"];

    /// Opens (or creates) the set under `base`. `num_shards` is required by nothing: an
    /// existing set's count comes from its file names (and must match `num_shards` if given),
    /// a new set gets `num_shards` or `DEFAULT_NUM_SHARDS`. An empty `base` with an in-memory
    /// inner engine makes shards with no files.
    pub fn open(
        base: impl AsRef<Path>,
        mode: OpenMode,
        params: &Params,
        engines: &'static [Engine],
    ) -> Result<ShardDbm> {
        let base = base.as_ref().to_path_buf();
        if base.is_file() {
            // Under the set's own extension a file there is damage (a set has no file of its
            // own); under another engine's extension the caller named a single database.
            let own_extension = engines
                .iter()
                .find(|e| e.name == inner::SHARD_ENGINE)
                .is_some_and(|e| base.extension().is_some_and(|x| x == e.extension));
            let message = format!(
                "{} is a single file, not the base of a shard set ({}-00000-of-NNNNN ...)",
                base.display(),
                base.display()
            );
            return Err(if own_extension { Error::broken(message) } else { Error::invalid(message) });
        }
        let wanted = match params.get_u64("num_shards")? {
            Some(count) => Some(naming::check_count(usize::try_from(count).unwrap_or(usize::MAX))?),
            None => None,
        };
        let existing = if mode == OpenMode::Truncate {
            // A new set replaces whatever lies there, even a damaged or mixed one.
            naming::find_set(&base).ok().flatten()
        } else {
            naming::find_set(&base)?
        };
        let inner = inner::inner_engine(engines, &base, params, existing)?;
        let count = match (mode, existing, wanted) {
            (OpenMode::Truncate, _, wanted) => {
                naming::remove_shards(&base)?;
                wanted.unwrap_or(DEFAULT_NUM_SHARDS)
            }
            (_, Some(found), Some(wanted)) if found != wanted => {
                return Err(Error::invalid(format!(
                    "num_shards={wanted} but the set at {} has {found} shards",
                    base.display()
                )))
            }
            (_, Some(found), _) => found,
            (OpenMode::Create, None, wanted) => wanted.unwrap_or(DEFAULT_NUM_SHARDS),
            (_, None, _) => {
                // The files are missing as a single database's file would be: the same OS
                // error, so that bindings report it as a missing file.
                let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "the shard files are missing");
                return Err(Error::io(
                    format!("{}: no {}-NNNNN-of-NNNNN files", base.display(), base.display()),
                    missing,
                ));
            }
        };
        let mut inner_params = params.without("num_shards").without("inner_engine");
        let in_memory_only = base.as_os_str().is_empty();
        // A shard whose engine judges its file against the memory its pages may take
        // (`memory_bytes`: TreeDbm reads a file larger than half of it as larger than memory)
        // gets its share of the memory, unless the set was given one: the files of the set
        // together, not each alone, must fit for their pages to stay in memory.
        if !in_memory_only
            && count > 1
            && inner.params.contains(&"memory_bytes")
            && params.get("memory_bytes").is_none()
        {
            if let Some(memory) = crate::memory_budget::available_bytes() {
                inner_params = inner_params.with("memory_bytes", memory / count as u64);
            }
        }
        let mut shards = Vec::with_capacity(count);
        for index in 0..count {
            let path = if in_memory_only { PathBuf::new() } else { naming::shard_path(&base, index, count) };
            let shard_params = params_of_shard(inner, &inner_params, count, index)?;
            let shard = inner.open(&path, mode, &shard_params).map_err(|e| {
                let shown = path.display().to_string();
                let message = if e.message().contains(&shown) {
                    e.message().to_string()
                } else {
                    format!("{shown}: {}", e.message())
                };
                Error::new(
                    e.kind(),
                    format!("shard {index} of {count}: {message} (the set's engine is {})", inner.class),
                )
            })?;
            shards.push(shard);
        }
        inner::check_consistent(&base, &shards)?;
        let comparator = match shards.first() {
            Some(first) => first.inspect()?.key_order.unwrap_or_default(),
            None => Comparator::default(),
        };
        Ok(ShardDbm { base, inner, shards, comparator })
    }

    /// The number of shards.
    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    /// The engine the shards are made of.
    pub fn inner_engine(&self) -> &'static Engine {
        self.inner
    }

    /// The shard `key` lives in (an index into `shards`).
    pub fn shard_index(&self, key: &[u8]) -> usize {
        route::shard_of(key, self.shards.len())
    }

    /// The shards themselves, for a loader that routes and batches records per shard and
    /// writes each shard from its own thread.
    pub fn shards(&self) -> &[Box<dyn Dbm>] {
        &self.shards
    }

    /// `Dbm::rebuild` on at most `max_threads` threads (`rebuild` uses every core): for a
    /// caller given a thread budget, such as `kura import --threads`.
    pub fn rebuild_on(&self, params: &Params, max_threads: usize) -> Result<()> {
        self.each_shard_on(max_threads, |shard| shard.rebuild(params)).map(drop)
    }

    fn shard(&self, key: &[u8]) -> &dyn Dbm {
        let index = self.shard_index(key);
        match self.shards.get(index) {
            Some(shard) => shard.as_ref(),
            None => unreachable_shard(),
        }
    }

    /// Splits `batch` into one batch per shard, each keeping the operations' order.
    fn split(&self, batch: &WriteBatch) -> Vec<WriteBatch> {
        let mut parts: Vec<WriteBatch> = (0..self.shards.len()).map(|_| WriteBatch::new()).collect();
        for op in batch.ops() {
            if let Some(part) = parts.get_mut(self.shard_index(op.key())) {
                part.push(op);
            }
        }
        parts
    }

    fn each_shard<T: Send>(&self, work: impl Fn(&dyn Dbm) -> Result<T> + Sync) -> Result<Vec<T>> {
        self.each_shard_on(parallel::cores(), work)
    }

    fn each_shard_on<T: Send>(
        &self,
        max_threads: usize,
        work: impl Fn(&dyn Dbm) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        parallel::each_shard(self.shards.len(), max_threads, |index| match self.shards.get(index) {
            Some(shard) => work(shard.as_ref()),
            None => unreachable_shard(),
        })
    }
}

/// The caps in `params` that bound the whole set (`Engine::shared_caps` of its shards'
/// engine: a cache's record and memory caps), each with its total. Every shard gets its share
/// (`share`: the shares add up to the total), so that the set holds no more than the caps say,
/// as one database of that engine would; given whole to each shard, N shards held N times it.
fn shared_caps(inner: &Engine, params: &Params, count: usize) -> Result<Vec<(&'static str, u64)>> {
    let mut caps = Vec::new();
    for &name in inner.shared_caps {
        let Some(total) = params.get_u64(name)? else { continue };
        if total < count as u64 {
            return Err(Error::invalid(format!(
                "{name}={total} cannot be shared by {count} shards: each needs at least 1 (lower num_shards or raise {name})"
            )));
        }
        caps.push((name, total));
    }
    Ok(caps)
}

/// Shard `index`'s parameters from its set's `params`: each cap the set shares out, its share
/// (`shared_caps`). `ShardDbm::open` and the writer of one shard (`import::ShardWriter`)
/// both take them from here, so a set holds its caps however its shards were written.
pub(crate) fn params_of_shard(inner: &Engine, params: &Params, count: usize, index: usize) -> Result<Params> {
    let caps = shared_caps(inner, params, count)?;
    Ok(caps.iter().fold(params.clone(), |shard_params, (name, total)| {
        shard_params.with(name, share(*total, count, index) as u64)
    }))
}

/// Parameters for a whole set of `count` shards from those of one of its shards
/// (`per_shard`: an importer sizes each shard for its share of the records): each cap the set
/// shares out (`Engine::shared_caps`) becomes `count` times the shard's, which gives every
/// shard at least the shard's own back.
pub(crate) fn for_whole_set(inner: &Engine, per_shard: Params, count: u64) -> Result<Params> {
    let mut params = per_shard;
    for &name in inner.shared_caps {
        if let Some(cap) = params.get_u64(name)? {
            params = params.with(name, cap.saturating_mul(count));
        }
    }
    Ok(params)
}

/// The set's caps: its shards' added up (each holds its share of the set's, `shared_caps`);
/// None for shards that evict nothing, and no memory cap unless every shard has one.
fn set_caps(shards: &[Stats]) -> Option<Caps> {
    let all: Vec<&Caps> = shards.iter().map(|shard| shard.caps.as_ref()).collect::<Option<_>>()?;
    Some(Caps {
        records: all.iter().fold(0u64, |sum, caps| sum.saturating_add(caps.records)),
        memory: all.iter().try_fold(0u64, |sum, caps| caps.memory.map(|memory| sum.saturating_add(memory))),
        evictions: all.iter().fold(0u64, |sum, caps| sum.saturating_add(caps.evictions)),
    })
}

/// `shard_of` returns an index below the shard count, and the set never has zero shards.
fn unreachable_shard() -> ! {
    unreachable!("shard_of stays below the shard count")
}

impl Dbm for ShardDbm {
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        self.shard(key).process(key, processor)
    }

    /// The shard's own: a set of SegCacheDbm shards honours the expiry as one does.
    fn process_expiring(&self, key: &[u8], processor: ExpiringProcessor<'_, '_>) -> Result<()> {
        self.shard(key).process_expiring(key, processor)
    }

    fn get(&self, key: &[u8]) -> Result<Vec<u8>> {
        self.shard(key).get(key)
    }

    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        self.shard(key).get_with(key, visit)
    }

    /// The batch split by shard, each shard's part looked up as one batch of that shard's
    /// engine (so a HashDbm shard overlaps its misses as it does alone), the indices mapped
    /// back to the caller's. Shards are visited one after the other.
    fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        if let [shard] = self.shards.as_slice() {
            return shard.get_many_with(keys, visit);
        }
        let mut parts: Vec<Vec<usize>> = vec![Vec::new(); self.shards.len()];
        for (index, key) in keys.iter().enumerate() {
            if let Some(part) = parts.get_mut(self.shard_index(key)) {
                part.push(index);
            }
        }
        let mut part_keys: Vec<&[u8]> = Vec::new();
        for (shard, part) in self.shards.iter().zip(&parts) {
            if part.is_empty() {
                continue;
            }
            part_keys.clear();
            part_keys.extend(part.iter().filter_map(|&index| keys.get(index).copied()));
            shard.get_many_with(&part_keys, &mut |at, value| {
                if let Some(&index) = part.get(at) {
                    visit(index, value);
                }
            })?;
        }
        Ok(())
    }

    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        self.shard(key).set(key, value, overwrite)
    }

    fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.shard(key).replace(key, value)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.shard(key).remove(key)
    }

    fn append(&self, key: &[u8], value: &[u8], delimiter: &[u8]) -> Result<()> {
        self.shard(key).append(key, value, delimiter)
    }

    fn compare_exchange_matched(&self, key: &[u8], expected: Option<&[u8]>, desired: Option<&[u8]>) -> Result<bool> {
        self.shard(key).compare_exchange_matched(key, expected, desired)
    }

    fn increment(&self, key: &[u8], delta: i64, initial: i64) -> Result<i64> {
        self.shard(key).increment(key, delta, initial)
    }

    /// Splits the batch per shard and applies each part with its shard's `write_batch` (in
    /// parallel for a long batch). Each part is as atomic as its engine makes a batch
    /// (TreeDbm: all of the part or none of it, even across a crash); the parts are not
    /// atomic together, so a failure or crash can leave some shards' parts applied.
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        if self.shards.len() == 1 {
            return self.shards.first().map_or(Ok(()), |shard| shard.write_batch(batch));
        }
        let parts = self.split(batch);
        if batch.len() < PARALLEL_BATCH_OPS {
            for (shard, part) in self.shards.iter().zip(&parts) {
                if !part.is_empty() {
                    shard.write_batch(part)?;
                }
            }
            return Ok(());
        }
        parallel::each_shard(self.shards.len(), parallel::cores(), |index| {
            match (self.shards.get(index), parts.get(index)) {
                (Some(shard), Some(part)) if !part.is_empty() => shard.write_batch(part),
                _ => Ok(()),
            }
        })
        .map(drop)
    }

    fn count(&self) -> Result<u64> {
        let mut total = 0u64;
        for shard in &self.shards {
            total = total.saturating_add(shard.count()?);
        }
        Ok(total)
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        if self.is_ordered() {
            return Ok(Box::new(self.merge_cursor()?));
        }
        let cursors = self.shards.iter().map(|s| s.cursor()).collect::<Result<Vec<_>>>()?;
        Ok(Box::new(chain::ChainCursor::new(cursors)))
    }

    fn clear(&self) -> Result<()> {
        for shard in &self.shards {
            shard.clear()?;
        }
        Ok(())
    }

    fn synchronize(&self, hard: bool) -> Result<()> {
        self.each_shard(|shard| shard.synchronize(hard)).map(drop)
    }

    fn rebuild(&self, params: &Params) -> Result<()> {
        self.each_shard(|shard| shard.rebuild(params)).map(drop)
    }

    fn should_be_rebuilt(&self) -> Result<bool> {
        for shard in &self.shards {
            if shard.should_be_rebuilt()? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn file_size(&self) -> Result<u64> {
        let mut total = 0u64;
        for shard in &self.shards {
            total = total.saturating_add(shard.file_size()?);
        }
        Ok(total)
    }

    /// The set's totals (`count`, `file_size`, `healthy`: every shard healthy), the shards'
    /// shared settings (`record_comp`, `key_comparator`), then `shard_NNNNN_count`,
    /// `shard_NNNNN_file_size` and `shard_NNNNN_healthy` for each shard.
    /// Checks every shard; each problem says its shard.
    fn check(&self) -> Result<crate::check::CheckReport> {
        let count = self.shards.len();
        let mut report = crate::check::CheckReport::default();
        for (index, shard) in self.shards.iter().enumerate() {
            report.absorb(shard.check()?, &format!("shard {index} of {count}"));
        }
        Ok(report)
    }

    /// Every shard's: the shards share their settings.
    fn codec(&self) -> Result<Option<CodecKind>> {
        self.shards.first().map_or(Ok(None), |shard| shard.codec())
    }

    /// The set's stats sum its shards' typed figures (count, size, health) and share shard
    /// 0's codec and key order, which every shard has (`inner::check_consistent`); each
    /// shard's own stats follow in `Stats::shards`.
    fn inspect(&self) -> Result<Stats> {
        let shards = self.shards.iter().map(|s| s.inspect()).collect::<Result<Vec<_>>>()?;
        let count = shards.iter().fold(0u64, |sum, shard| sum.saturating_add(shard.count));
        let file_size = shards.iter().fold(0u64, |sum, shard| sum.saturating_add(shard.file_size));
        let healthy = shards.iter().all(|shard| shard.healthy);
        let mut stats = Stats::new("ShardDbm", count, file_size, healthy);
        stats.path = Some(self.base.clone());
        if let Some(first) = shards.first() {
            stats.codec = first.codec;
            stats.key_order = first.key_order;
        }
        stats.details =
            vec![("inner_engine", Stat::Name(self.inner.name)), ("num_shards", Stat::Number(self.shards.len() as u64))];
        stats.caps = set_caps(&shards);
        stats.shards = shards;
        Ok(stats)
    }

    fn is_writable(&self) -> bool {
        self.shards.iter().all(|s| s.is_writable())
    }

    /// Closes every shard, even after one fails; the first failure (by shard index) is
    /// returned. The shards close side by side: each close ends with a flush to the disk, and
    /// one after another they would wait for the disk in turn.
    fn close(&self) -> Result<()> {
        let closed = self.each_shard(|shard| Ok(shard.close()))?;
        closed.into_iter().collect()
    }

    /// Its shards' engine's.
    fn is_ordered(&self) -> bool {
        self.inner.is_ordered()
    }

    fn ordered_cursor(&self) -> Result<Box<dyn OrderedCursor + '_>> {
        if !self.is_ordered() {
            return Err(Error::infeasible(format!("the shards are {}, which is not ordered", self.inner.class)));
        }
        Ok(Box::new(self.merge_cursor()?))
    }
}

impl ShardDbm {
    fn merge_cursor(&self) -> Result<merge::MergeCursor<'_>> {
        let cursors = self.shards.iter().map(|s| s.ordered_cursor()).collect::<Result<Vec<_>>>()?;
        Ok(merge::MergeCursor::new(cursors, self.comparator))
    }
}
