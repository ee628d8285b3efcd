//! TreeDbm's batched lookup (`Dbm::get_many_with`): the keys are sorted, the tree is
//! descended once per run of keys that share a leaf, and the leaves of several runs are
//! searched in stages so that their memory misses overlap.
//!
//! A descent notes the leaf's upper separator (the tightest bound met on the way down, as
//! the finger does); the keys that follow in sorted order belong to the same leaf while they
//! stay below it. Branches are few and stay in the caches; what misses is each leaf: its
//! page structure, then its index's top level, then one block of the index and the records
//! it covers (see prefix_index.rs). So, for up to `LEAF_GROUP` runs at a time:
//! 1. descend to each run's leaf, take it from the page cache (once: each cache access locks
//!    a shard and looks up a map, which costs about what a leaf search does) and prefetch its
//!    page structure;
//! 2. prefetch each leaf's top index level;
//! 3. prefetch, for each run's first key, its block of the index and its records;
//! 4. search each run's keys in its leaf and show the values.
//!
//! The sorted batch is done in segments of `SEGMENT` keys, each under one hold of the tree's
//! read lock, so a writer waits for one segment at most, not for a whole large batch.

use std::cmp::Ordering;

use super::btree::{wrong_level, BTree, PageRef, TEMP_BIT};
use super::comparator::Comparator;
use super::page::{Leaf, Page};
use super::TreeDbm;
use crate::error::Result;
use crate::file::prefetch_range;
use crate::key_prefix::key_prefix;

/// Sorted keys looked up under one hold of the read lock.
const SEGMENT: usize = 512;

/// Leaf runs whose stages overlap (as `multi_get::GROUP` keys do in the hash engines).
const LEAF_GROUP: usize = 16;

/// The keys `order[start..end]`, which all belong to `leaf` (taken from the cache once, in
/// stage 1: each later stage borrows it instead of locking its cache shard again).
struct Run<'tree> {
    id: u64,
    leaf: PageRef<'tree>,
    start: usize,
    end: usize,
}

impl TreeDbm {
    pub(super) fn get_many_sorted(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let comparator = self.read()?.comparator();
        let order = sorted_order(keys, comparator);
        for segment in order.chunks(SEGMENT) {
            self.read()?.get_sorted(keys, segment, visit)?;
        }
        Ok(())
    }
}

impl BTree {
    /// Shows the value of each key of `keys` named by `order` (indices into `keys`, in the
    /// comparator's order) to `visit`, with its index.
    fn get_sorted(&self, keys: &[&[u8]], order: &[usize], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let key_at = |position: usize| order.get(position).map(|&i| (i, keys.get(i).copied().unwrap_or_default()));
        if self.height == 0 {
            for &index in order {
                visit(index, None);
            }
            return Ok(());
        }
        let comparator = self.comparator();
        let mut runs: Vec<Run> = Vec::with_capacity(LEAF_GROUP);
        let mut high: Vec<u8> = Vec::new();
        let mut position = 0;
        while position < order.len() {
            // Stage 1: the runs' leaves, their page structures on their way.
            runs.clear();
            while runs.len() < LEAF_GROUP && position < order.len() {
                let Some((_, first_key)) = key_at(position) else { break };
                let (leaf, bounded) = self.descend(first_key, &mut high)?;
                // The run's first key belongs to the leaf by the descent (so every run is at
                // least one key long, even in a damaged tree); the next ones while below
                // the leaf's upper separator.
                let mut end = position + 1;
                while let Some((_, key)) = key_at(end) {
                    if bounded && comparator.compare(key, &high) != Ordering::Less {
                        break;
                    }
                    end += 1;
                }
                let page = self.page(leaf)?;
                prefetch_range(std::ptr::from_ref::<Page>(&page) as usize, std::mem::size_of::<Page>());
                runs.push(Run { id: leaf, leaf: page, start: position, end });
                position = end;
            }
            // Stage 2: the top levels of the leaves' indexes.
            for run in &runs {
                leaf_of(run)?.prefetch_index();
            }
            // Stage 3: the index blocks and records of the runs' first keys.
            for run in &runs {
                let first_key = key_at(run.start).map(|(_, key)| key).unwrap_or_default();
                leaf_of(run)?.prefetch_block(comparator, first_key);
            }
            // Stage 4: the searches.
            for run in &runs {
                let leaf = leaf_of(run)?;
                for (index, key) in (run.start..run.end).filter_map(key_at) {
                    visit(index, leaf.search(comparator, key).ok().and_then(|i| leaf.value(i)));
                }
            }
        }
        Ok(())
    }

    /// Descends the branches towards `key`: the id of the leaf it leads to, and whether that
    /// leaf has an upper separator, which is then left in `high` (the last leaf has none).
    fn descend(&self, key: &[u8], high: &mut Vec<u8>) -> Result<(u64, bool)> {
        let comparator = self.comparator();
        let mut bounded = false;
        let mut id = self.root;
        for _ in 1..self.height {
            let mut child = |page: &Page| match page {
                Page::Branch(branch) => {
                    let index = branch.child_index(comparator, key);
                    // Deeper separators are tighter: the last one met bounds the leaf.
                    if let Some(separator) = branch.keys.get(index) {
                        high.clear();
                        high.extend_from_slice(separator);
                        bounded = true;
                    }
                    branch.children.get(index).copied()
                }
                Page::Leaf(_) => None,
            };
            let next = if id & TEMP_BIT != 0 { child(&*self.page(id)?) } else { self.pager.with_page(id, child)? };
            id = next.ok_or_else(|| wrong_level(id))?;
        }
        Ok((id, bounded))
    }
}

/// The indices of `keys` in the comparator's order. Sorting is most of what a batch of
/// random keys costs beyond the lookups themselves, so for the bytewise order the keys are
/// sorted by `key_prefix` (their first 8 bytes as one order-preserving integer, as the
/// leaves' index searches them), and only ties compare the whole keys.
fn sorted_order(keys: &[&[u8]], comparator: Comparator) -> Vec<usize> {
    let key = |index: usize| keys.get(index).copied().unwrap_or_default();
    if comparator != Comparator::Lexical {
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by(|&a, &b| comparator.compare(key(a), key(b)));
        return order;
    }
    let mut keyed: Vec<(u64, usize)> = keys.iter().enumerate().map(|(index, key)| (key_prefix(key), index)).collect();
    keyed.sort_unstable_by(|&(prefix_a, a), &(prefix_b, b)| prefix_a.cmp(&prefix_b).then_with(|| key(a).cmp(key(b))));
    keyed.into_iter().map(|(_, index)| index).collect()
}

/// The leaf a run's page is; a branch where a leaf should be is BrokenData.
fn leaf_of<'run>(run: &'run Run<'_>) -> Result<&'run Leaf> {
    match &*run.leaf {
        Page::Leaf(leaf) => Ok(leaf),
        Page::Branch(_) => Err(wrong_level(run.id)),
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on a wrong index")]
    use super::*;
    use crate::split_mix::SplitMix64;

    /// The integer-prefix sort gives the bytewise order on keys shorter and longer than the
    /// prefix, with zero bytes (which tie with the padding) and shared prefixes.
    #[test]
    fn sorted_order_is_the_comparators_order() {
        let mut rng = SplitMix64::new(7);
        for round in 0..500 {
            let keys: Vec<Vec<u8>> = (0..rng.below(40))
                .map(|_| (0..rng.below(12)).map(|_| [0u8, 1, b'a', 0xff][rng.below(4) as usize]).collect())
                .collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            for comparator in Comparator::ALL {
                let order = sorted_order(&refs, comparator);
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert!(sorted.iter().copied().eq(0..refs.len()), "round {round}: not a permutation");
                for pair in order.windows(2) {
                    let (a, b) = (refs[pair[0]], refs[pair[1]]);
                    assert_ne!(comparator.compare(a, b), Ordering::Greater, "round {round}: {a:?} before {b:?}");
                }
            }
        }
    }
}
