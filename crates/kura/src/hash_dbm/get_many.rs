//! HashDbm's batched lookup (`Dbm::get_many_with`): the keys of a group go through each
//! stage together, so that their memory misses overlap instead of queueing one behind the
//! other (see `multi_get.rs` and docs/get_many.md).
//!
//! Per group of `GROUP` keys:
//! 1. hash every key, pick its bucket, and prefetch the bucket's entry in the memory copy;
//! 2. take the group's stripe locks, shared, each once, in ascending order;
//! 3. read each entry (now in the cache) and prefetch the first record of its chain, unless
//!    the entry's filter rules the key out;
//! 4. walk each chain (its head mostly in the cache by now), compare keys and show each value.
//!
//! A stage between 3 and 4 that read each chain's head to prefetch the second record (when
//! the head holds another key) was measured and dropped: it parsed every head twice, and the
//! second parse cost more than the misses it hid (get_many of 64 keys, 1M records: 200-207 ns
//! a key without it, 215-230 ns with it; docs/get_many.md).
//!
//! The locks are taken in stage 2 and held to the end of the group, so every value shown is the
//! key's value at that moment; a rebuild that changed the bucket count before they were
//! taken sends the group back to stage 1, as a single lookup retries.

use parking_lot::RwLockReadGuard;

use super::chain_lock::Chain;
use super::storage::{bucket_of, hash_key};
use super::{is_live, HashDbm, STRIPES};
use crate::error::{Error, Result};
use crate::multi_get::{groups, LockSet, GROUP};
use std::sync::atomic::Ordering;

/// One key of a group on its way through the stages.
struct Lookup<'k> {
    index: usize,
    key: &'k [u8],
    hash: u64,
    bucket: u64,
    /// Where the guard of the key's stripe sits in the group's guards (set in stage 2).
    guard: usize,
}

impl HashDbm {
    pub(super) fn get_many_pipelined(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let mut group: Vec<Lookup<'_>> = Vec::with_capacity(GROUP);
        let mut stripes = LockSet::default();
        let mut guards: Vec<RwLockReadGuard<'_, ()>> = Vec::with_capacity(GROUP);
        for (first, chunk) in groups(keys) {
            loop {
                // Stage 1: hashes, buckets, bucket entries on their way.
                let num_buckets = self.num_buckets.load(Ordering::Acquire);
                group.clear();
                for (offset, key) in chunk.iter().enumerate() {
                    let hash = hash_key(key);
                    let bucket = bucket_of(hash, num_buckets);
                    self.prefetcher.bucket(bucket, false);
                    group.push(Lookup { index: first + offset, key, hash, bucket, guard: 0 });
                    stripes.insert(bucket as usize % STRIPES);
                }
                // Stage 2: the stripe locks.
                let order = stripes.order();
                guards.extend(order.iter().filter_map(|stripe| self.stripes.get(stripe)).map(|lock| lock.read()));
                if self.num_buckets.load(Ordering::Acquire) != num_buckets {
                    // A rebuild ran in between: the buckets were picked for the old file.
                    guards.clear();
                    continue;
                }
                for lookup in &mut group {
                    lookup.guard = order
                        .position(lookup.bucket as usize % STRIPES)
                        .ok_or_else(|| Error::broken("get_many: a key's stripe lock was not taken"))?;
                }
                // The chunk is never empty, so at least one stripe lock is held.
                let storage = self.storage_ref()?;
                // Each lookup's proof of its chain's lock, from the guard of its stripe.
                let chain_of = |lookup: &Lookup<'_>| {
                    guards
                        .get(lookup.guard)
                        .map(|guard| Chain::shared(guard, lookup.bucket))
                        .ok_or_else(|| Error::broken("get_many: a key's stripe lock was not taken"))
                };
                // Stage 3: chain heads on their way.
                for lookup in &group {
                    storage.prefetch_head(chain_of(lookup)?, lookup.hash, lookup.key.len());
                }
                // Stage 4: compare and show, the locks held until `guards` is cleared below.
                for lookup in &group {
                    let (index, hash, chain) = (lookup.index, lookup.hash, chain_of(lookup)?);
                    match storage.find(chain, lookup.key, hash)? {
                        Some(found) if is_live(&found) => {
                            storage.visit_value(chain, found.offset, &found.header, hash, |value| {
                                visit(index, Some(value))
                            })?
                        }
                        _ => visit(index, None),
                    }
                }
                guards.clear();
                break;
            }
        }
        Ok(())
    }
}
