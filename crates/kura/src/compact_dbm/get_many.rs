//! CompactDbm's batched lookup (`Dbm::get_many_with`): the keys are ordered by lock group and,
//! within a group, by bucket, so that each group's read lock is taken once for all its keys,
//! every block those keys need is on its way before the first is decoded, and a bucket asked
//! for by several keys is decoded (or taken from the cache) once for all of them.
//!
//! A get of the compact map costs mostly the decoding of one bucket, not memory misses, so
//! the gain is largest where keys share buckets (a batch of neighbouring IDs, a large
//! batch over a small map); for scattered keys it saves the lock and cache round trips.
//! Groups are read one after the other, each under its own read lock, so a batch never
//! holds two locks at once.

use super::group::GroupCell;
use super::options::MAX_KEY_LEN;
use super::CompactDbm;
use crate::error::{Error, Result};
use crate::file::prefetch_range;
use crate::memory_dbm::key_hash::{hash_key, slot_of};

/// One key of a batch on its way to its bucket.
struct Lookup<'k> {
    index: usize,
    key: &'k [u8],
    hash: u64,
    group: usize,
    /// Set under the group's lock: the bucket count may change between batches.
    bucket: usize,
}

/// Bytes of a block prefetched ahead of its decoding: its flag and the codec frame's start.
const BLOCK_HEAD: usize = 64;

impl CompactDbm {
    pub(super) fn get_many_grouped(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        let mut lookups: Vec<Lookup<'_>> = Vec::with_capacity(keys.len());
        for (index, &key) in keys.iter().enumerate() {
            if key.len() > MAX_KEY_LEN {
                // No record can have such a key (as `get_with` says).
                visit(index, None);
                continue;
            }
            let hash = hash_key(key);
            lookups.push(Lookup { index, key, hash, group: slot_of(hash, self.groups.len()), bucket: 0 });
        }
        lookups.sort_unstable_by_key(|lookup| lookup.group);
        for run in lookups.chunk_by_mut(|a, b| a.group == b.group) {
            let cell = run
                .first()
                .and_then(|lookup| self.groups.get(lookup.group))
                .ok_or_else(|| Error::broken("compact get_many: a key's group is out of range"))?;
            cell.0.get_many_with(run, visit)?;
        }
        Ok(())
    }
}

impl GroupCell {
    /// Looks up `run`, keys of this group, under one hold of its read lock.
    fn get_many_with(&self, run: &mut [Lookup<'_>], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let group = self.lock.read();
        for lookup in run.iter_mut() {
            lookup.bucket = group.bucket_of(lookup.hash);
            if let Ok(block) = group.block(lookup.bucket) {
                prefetch_range(block.as_ptr() as usize, block.len().min(BLOCK_HEAD));
            }
        }
        run.sort_unstable_by_key(|lookup| lookup.bucket);
        for same_bucket in run.chunk_by(|a, b| a.bucket == b.bucket) {
            let Some(bucket) = same_bucket.first().map(|lookup| lookup.bucket) else { continue };
            self.with_bucket(&group, bucket, |raw| {
                for lookup in same_bucket {
                    visit(lookup.index, super::bucket::find(raw, lookup.key)?);
                }
                Ok(())
            })?;
        }
        Ok(())
    }
}
