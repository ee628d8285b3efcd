//! HashDbm's batched lookup (`Dbm::get_many_with`): the keys of a group go through each
//! stage together, so that their memory misses overlap instead of queueing one behind the
//! other (see `multi_get.rs` and docs/get_many.md).
//!
//! Per group of `GROUP` keys:
//! 1. hash every key, pick its bucket, and prefetch the bucket's entry in the memory copy;
//! 2. take the group's stripe locks, shared, each once, in ascending order;
//! 3. read each entry (now in the cache) and prefetch the first record of its chain, unless
//!    the entry's filter rules the key out;
//! 4. read each chain's head (now in the cache) and prefetch what comes next: the second
//!    record when the head holds another key (a third of lookups at one bucket per record),
//!    else the rest of the head's value when it is long;
//! 5. walk each chain (mostly in the cache by now), compare keys and show each value.
//!
//! The locks are taken in stage 2 and held to the end of the group, so every value shown is the
//! key's value at that moment; a rebuild that changed the bucket count before they were
//! taken sends the group back to stage 1, as a single lookup retries.

use parking_lot::RwLockReadGuard;

use super::chain_lock::Chain;
use super::storage::{bucket_of, hash_key};
use super::{is_live, HashDbm, STRIPES};
use crate::error::{Error, Result};
use crate::multi_get::{groups, lock_order, position, GROUP};
use std::sync::atomic::Ordering;

/// One key of a group on its way through the stages.
struct Lookup<'k> {
    index: usize,
    key: &'k [u8],
    hash: u64,
    bucket: u64,
}

impl HashDbm {
    pub(super) fn get_many_pipelined(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let mut group: Vec<Lookup<'_>> = Vec::with_capacity(GROUP);
        let mut stripes: Vec<usize> = Vec::with_capacity(GROUP);
        let mut guards: Vec<RwLockReadGuard<'_, ()>> = Vec::with_capacity(GROUP);
        for (first, chunk) in groups(keys) {
            loop {
                // Stage 1: hashes, buckets, bucket entries on their way.
                let num_buckets = self.num_buckets.load(Ordering::Acquire);
                group.clear();
                stripes.clear();
                for (offset, key) in chunk.iter().enumerate() {
                    let hash = hash_key(key);
                    let bucket = bucket_of(hash, num_buckets);
                    self.prefetcher.bucket(bucket, false);
                    group.push(Lookup { index: first + offset, key, hash, bucket });
                    stripes.push(bucket as usize % STRIPES);
                }
                // Stage 2: the stripe locks.
                lock_order(&mut stripes);
                guards.extend(stripes.iter().filter_map(|&stripe| self.stripes.get(stripe)).map(|lock| lock.read()));
                if self.num_buckets.load(Ordering::Acquire) != num_buckets {
                    // A rebuild ran in between: the buckets were picked for the old file.
                    guards.clear();
                    continue;
                }
                // The chunk is never empty, so at least one stripe lock is held.
                let storage = self.storage_ref()?;
                // Each lookup's proof of its chain's lock, from the guard of its stripe.
                let chain_of = |lookup: &Lookup<'_>| {
                    position(&stripes, lookup.bucket as usize % STRIPES)
                        .and_then(|at| guards.get(at))
                        .map(|guard| Chain::shared(guard, lookup.bucket))
                        .ok_or_else(|| Error::broken("get_many: a key's stripe lock was not taken"))
                };
                // Stage 3: chain heads on their way.
                for lookup in &group {
                    storage.prefetch_head(chain_of(lookup)?, lookup.hash, lookup.key.len());
                }
                // Stage 4: past the heads (now in the cache): the second records of chains
                // whose head holds another key, or the rest of long values, on their way.
                for lookup in &group {
                    storage.prefetch_past_head(chain_of(lookup)?, lookup.key, lookup.hash);
                }
                // Stage 5: compare and show, the locks held until `guards` is cleared below.
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
