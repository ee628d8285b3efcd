//! HashDbm's batched lookup (`Dbm::get_many_with`): the keys of a group go through each
//! stage together, so that their memory misses overlap instead of queueing one behind the
//! other (see `multi_get.rs` and docs/get_many.md).
//!
//! Per group of `GROUP` keys:
//! 1. hash every key, pick its bucket, and prefetch the bucket's entry in the memory copy;
//! 2. take the group's stripe locks, shared: each key's stripe tried in turn, and only when a
//!    writer holds or awaits one, each stripe once in ascending order, waiting;
//! 3. read each entry (now in the cache) and prefetch the first record of its chain, unless
//!    the entry's filter rules the key out;
//! 4. read each chain's head (mostly in the cache by now): show the value when it is the
//!    key's record; when it holds another key and the chain goes on (a third of lookups at
//!    one bucket per record), prefetch the second record and leave the key for stage 5;
//! 5. walk the chains left over from their second records (on their way or there), compare
//!    keys and show the values.
//!
//! An earlier design prefetched the second records in a stage of their own before showing any
//! value: it parsed every head twice, and that cost more than the misses it hid. Stage 4
//! parses each head once, and stage 5 goes on from where stage 4 left each chain
//! (docs/get_many.md).
//!
//! The locks are taken in stage 2 and held to the end of the group, so every value shown is the
//! key's value at that moment; a rebuild that changed the bucket count before they were
//! taken sends the group back to stage 1, as a single lookup retries.

use parking_lot::RwLockReadGuard;

use super::chain_lock::Chain;
use super::storage::{bucket_of, hash_key, AfterHead, Found, HeadStep};
use super::{is_live, stripe_of, HashDbm};
use crate::error::{Error, Result};
use crate::multi_get::{groups, try_each_in_turn, LockSet, GROUP};
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
        // Positions in `group` of the keys left for stage 5, with where their chains go on.
        let mut further: Vec<(usize, AfterHead)> = Vec::with_capacity(GROUP);
        for (first, chunk) in groups(keys, GROUP) {
            loop {
                // Stage 1: hashes, buckets, bucket entries on their way.
                let num_buckets = self.num_buckets.load(Ordering::Acquire);
                group.clear();
                for (offset, key) in chunk.iter().enumerate() {
                    let hash = hash_key(key);
                    let bucket = bucket_of(hash, num_buckets);
                    self.prefetcher.bucket(bucket, false);
                    group.push(Lookup { index: first + offset, key, hash, bucket, guard: 0 });
                }
                // Stage 2: the stripe locks.
                if !self.try_lock_each(&mut group, &mut guards) {
                    self.lock_in_order(&mut group, &mut guards, &mut stripes)?;
                }
                if self.num_buckets.load(Ordering::Acquire) != num_buckets {
                    // A rebuild ran in between: the buckets were picked for the old file.
                    guards.clear();
                    continue;
                }
                // The chunk is never empty, so at least one stripe lock is held.
                let storage = self.storage_ref()?;
                // Each lookup's proof of its chain's lock, from the guard of its stripe.
                let chain_of = |lookup: &Lookup<'_>| {
                    guards
                        .get(lookup.guard)
                        .map(|guard| Chain::shared(guard, lookup.bucket))
                        .ok_or_else(|| Error::internal("get_many takes the stripe lock of every key it reads"))
                };
                // Stage 3: chain heads on their way.
                for lookup in &group {
                    storage.prefetch_head(chain_of(lookup)?, lookup.hash, lookup.key.len());
                }
                // Stages 4 and 5: compare and show, the locks held until `guards` is cleared
                // below; keys past their chain's head are left for stage 5.
                let show = |lookup: &Lookup<'_>, found: Option<Found>, visit: &mut dyn FnMut(usize, Option<&[u8]>)| {
                    let chain = chain_of(lookup)?;
                    match found {
                        Some(found) if is_live(&found) => {
                            storage.visit_value(chain, found.offset, &found.header, lookup.hash, |value| {
                                visit(lookup.index, Some(value))
                            })
                        }
                        _ => {
                            visit(lookup.index, None);
                            Ok(())
                        }
                    }
                };
                further.clear();
                for (at, lookup) in group.iter().enumerate() {
                    match storage.find_at_head(chain_of(lookup)?, lookup.key, lookup.hash)? {
                        HeadStep::Found(found) => show(lookup, Some(found), visit)?,
                        HeadStep::Absent => show(lookup, None, visit)?,
                        HeadStep::Further(after) => further.push((at, after)),
                    }
                }
                for (lookup, after) in further.iter().filter_map(|&(at, after)| Some((group.get(at)?, after))) {
                    let found = storage.find_after_head(chain_of(lookup)?, after, lookup.key)?;
                    show(lookup, found, visit)?;
                }
                guards.clear();
                break;
            }
        }
        Ok(())
    }

    /// Stage 2, the common case: each key's stripe tried in turn, a guard per key
    /// (`multi_get::try_each_in_turn`); false, holding nothing, when a writer is in the way.
    fn try_lock_each<'d>(&'d self, group: &mut [Lookup<'_>], guards: &mut Vec<RwLockReadGuard<'d, ()>>) -> bool {
        let stripe = |at: usize| group.get(at).and_then(|lookup| self.stripes.get(stripe_of(lookup.bucket)));
        if !try_each_in_turn(group.len(), guards, |at| stripe(at).and_then(|lock| lock.try_read())) {
            return false;
        }
        for (at, lookup) in group.iter_mut().enumerate() {
            lookup.guard = at;
        }
        true
    }

    /// Stage 2 when a writer is in the way: the group's stripes each taken once, in ascending
    /// order (as `multi_get::LockSet` explains), waiting for the writers before them.
    fn lock_in_order<'d>(
        &'d self,
        group: &mut [Lookup<'_>],
        guards: &mut Vec<RwLockReadGuard<'d, ()>>,
        stripes: &mut LockSet,
    ) -> Result<()> {
        for lookup in group.iter() {
            stripes.insert(stripe_of(lookup.bucket));
        }
        let order = stripes.order();
        guards.extend(order.iter().filter_map(|stripe| self.stripes.get(stripe)).map(|lock| lock.read()));
        for lookup in group.iter_mut() {
            lookup.guard = order
                .position(stripe_of(lookup.bucket))
                .ok_or_else(|| Error::internal("get_many takes the stripe lock of every key it reads"))?;
        }
        Ok(())
    }
}
