//! TreeDbm's batched lookup (`Dbm::get_many_with`): the keys are sorted, the tree is
//! descended once per run of keys that share a leaf, and the leaves of several runs are
//! searched in stages so that their memory misses overlap.
//!
//! A descent notes the leaf's upper separator (the tightest bound met on the way down, as
//! the finger does); the keys that follow in sorted order belong to the same leaf while they
//! stay below it. Branches are few and stay in the caches; what misses is each leaf: its
//! page structure, then its index's top level, then one block of the index, then the entry
//! found there, then the record it points to (see prefix_index.rs). So, for up to
//! `LEAF_GROUP` runs at a time:
//! 1. descend to each run's leaf, take it from the page cache (once: each cache access locks
//!    a shard and looks up a map, which costs about what a leaf search does) and prefetch its
//!    page structure;
//! 2. prefetch each leaf's top index level;
//! 3. read it, for each run's first key, and prefetch the block of prefixes it points to;
//! 4. read the block, which gives the key's position, and prefetch the one entry there;
//! 5. read the entry and prefetch the record it points to (and, in a leaf lending its
//!    values from the file's pages, read the record's place and prefetch the value there);
//! 6. search each run's keys in its leaf (the first from the position stage 4 found) and
//!    show the values.
//!
//! Each stage reads what the one before prefetched and carries what it found to the next
//! (`Seek`), so that no stage reads the top level or the block again; the search reads the
//! entries of the key's prefix from the position found, the block's lines by then cached.
//!
//! Why groups and not a pipeline (a run starting at every step, each doing its next stage a
//! few steps after the last, which would spread the misses evenly): taking a leaf from the
//! cache locks its shard and counts a reference, locked instructions that wait for every
//! load issued before them. In a pipeline each step's take waited for the misses of the runs
//! in flight; measured, it was 15-25% slower than groups, whose takes all come before any of
//! the group's leaf misses. (Prefetching the cache entries before taking them did not help
//! either: what the takes wait for is those earlier loads, not their own lines.)
//!
//! The sorted batch is done in segments of `SEGMENT` keys, each under one hold of the tree's
//! read lock, so a writer waits for one segment at most, not for a whole large batch.

use std::cmp::Ordering;

use super::btree::{wrong_level, BTree, PageRef};
use super::comparator::Comparator;
use super::page::{Leaf, Page};
use super::prefix_index::{same_prefix_order, Seek};
use super::slot_hint::SlotHint;
use super::TreeDbm;
use crate::error::Result;
use crate::file::prefetch_range;
use crate::key_prefix::key_prefix;
use crate::multi_get::SEGMENT;

/// Leaf runs whose stages overlap (as `multi_get::GROUP` keys do in the hash engines).
pub(super) const LEAF_GROUP: usize = 16;

/// The keys `order[start..end]`, which all belong to `leaf` (taken from the cache once, in
/// stage 1: each later stage borrows it instead of locking its cache shard again).
struct Run<'tree> {
    id: u64,
    leaf: PageRef<'tree>,
    start: usize,
    end: usize,
    /// The lookup of the run's first key in its leaf, in stages.
    seek: Option<Seek>,
}

impl TreeDbm {
    /// While batches wait in the write buffer (write_buffer.rs), each key of a segment is
    /// looked up there first and then in the tree, one by one: a point read does not apply
    /// the buffer.
    pub(super) fn get_many_sorted(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let comparator = self.read_undrained()?.tree.comparator();
        let order = sorted_order(keys, comparator);
        for segment in order.chunks(SEGMENT) {
            let store = self.read_undrained()?;
            if !store.has_buffered() {
                store.tree.get_sorted(keys, segment, visit)?;
                continue;
            }
            for &index in segment {
                store.get(keys.get(index).copied().unwrap_or_default(), |value| visit(index, value))?;
            }
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
        let mut high = UpperBound::default();
        let mut position = 0;
        while position < order.len() {
            // Stage 1: the runs' leaves, their page structures on their way.
            runs.clear();
            while runs.len() < LEAF_GROUP && position < order.len() {
                let Some((_, first_key)) = key_at(position) else { break };
                let (leaf, hint) = self.descend(first_key, Some(&mut high))?;
                // The run's first key belongs to the leaf by the descent (so every run is at
                // least one key long, even in a damaged tree); the next ones while below
                // the leaf's upper separator.
                let mut end = position + 1;
                while let Some((_, key)) = key_at(end) {
                    if !high.admits(comparator, key, |source, bytes| self.separator_bytes(source, bytes)) {
                        break;
                    }
                    end += 1;
                }
                let page = self.page_hinted(leaf, hint)?;
                prefetch_range(std::ptr::from_ref::<Page>(&page) as usize, std::mem::size_of::<Page>());
                runs.push(Run { id: leaf, leaf: page, start: position, end, seek: None });
                position = end;
            }
            seek_first_keys(&mut runs, comparator, |run| key_at(run.start).map(|(_, key)| key).unwrap_or_default())?;
            // Stage 6: the searches (the first key of a run where the stages left it).
            for run in &runs {
                let leaf = leaf_page(run.id, &run.leaf)?;
                for position in run.start..run.end {
                    let Some((index, key)) = key_at(position) else { continue };
                    let found = match run.seek {
                        Some(seek) if position == run.start => leaf.seek_end(&seek, key),
                        _ => leaf.find(comparator, key),
                    };
                    visit(index, found.and_then(|i| leaf.value(i)));
                }
            }
        }
        Ok(())
    }

    /// Brings into the caches what updating `keys` will read first, for the next keys of a
    /// write batch (`Store::apply`): each key's leaf, its index's lines on the key's way and
    /// the record it lands next to, in the stages of a lookup, and the end of the leaf's arena
    /// where an insert appends the `appended` bytes of its record (its lines were a write miss
    /// of each insert, 8% of a durable batch of random records), so that the misses of up to
    /// `LEAF_GROUP` keys overlap instead of coming one after another in each update. A hint
    /// only: the updates read the tree again, and one that splits a leaf leaves a later key's
    /// warm lines unused. So a failure (a damaged page) is left for the update that meets it
    /// to report.
    pub fn warm_leaves(&self, keys: &[&[u8]], appended: &[usize]) {
        if self.height == 0 {
            return;
        }
        let comparator = self.comparator();
        let mut runs: Vec<Run> = Vec::with_capacity(LEAF_GROUP);
        for (position, key) in keys.iter().enumerate().take(LEAF_GROUP) {
            // No upper bound: each key is its own run (the updates find their leaves again),
            // and reading a separator's bytes is a miss of its own (10% of a batch's time).
            let Ok((leaf, hint)) = self.descend(key, None) else { return };
            let Ok(page) = self.page_hinted(leaf, hint) else { return };
            prefetch_range(std::ptr::from_ref::<Page>(&page) as usize, std::mem::size_of::<Page>());
            runs.push(Run { id: leaf, leaf: page, start: position, end: position + 1, seek: None });
        }
        let _warmed_or_left_for_the_update =
            seek_first_keys(&mut runs, comparator, |run| keys.get(run.start).copied().unwrap_or_default());
        for run in &runs {
            if let (Page::Leaf(leaf), Some(&bytes)) = (&*run.leaf, appended.get(run.start)) {
                leaf.prefetch_append(bytes);
            }
        }
    }

    /// Descends the branches towards `key`: the id of the leaf it leads to, with its parent's
    /// hint of its slot length, and whose upper separator (none for the last leaf) is left in
    /// `high` when one is given.
    fn descend(&self, key: &[u8], mut high: Option<&mut UpperBound>) -> Result<(u64, SlotHint)> {
        let comparator = self.comparator();
        if let Some(high) = high.as_deref_mut() {
            high.clear();
        }
        let mut id = self.root;
        let mut hint = SlotHint::UNKNOWN;
        for _ in 1..self.height {
            let child = |page: &Page| match page {
                Page::Branch(branch) => {
                    let index = branch.child_index(comparator, key);
                    // Deeper separators are tighter: the last one met bounds the leaf.
                    if let Some(high) = high.as_deref_mut() {
                        if let Some((prefix, len)) = branch.separator_prefix(index) {
                            let separator = || branch.keys.get(index).map_or(&[][..], Vec::as_slice);
                            high.set(comparator, prefix, len, (id, index), separator);
                        }
                    }
                    branch.child_hinted(index)
                }
                Page::Leaf(_) => None,
            };
            (id, hint) = self.with_page_hinted(id, hint, child)?.ok_or_else(|| wrong_level(id))?;
        }
        Ok((id, hint))
    }

    /// Copies separator `index` of branch `id` into `bytes` (an upper bound's, read when a
    /// comparison needs it); false when the page cannot be read or is no such branch (the key
    /// then starts a run of its own, whose descent reports what is wrong).
    fn separator_bytes(&self, (id, index): (u64, usize), bytes: &mut Vec<u8>) -> bool {
        let copy = |page: &Page| match page {
            Page::Branch(branch) => branch.keys.get(index).map(|key| bytes.extend_from_slice(key)).is_some(),
            Page::Leaf(_) => false,
        };
        self.with_page(id, copy).unwrap_or(false)
    }
}

/// The upper separator of a leaf met on the way down: the keys below it belong to the leaf.
/// In the bytewise order it is kept as its prefix and length, and where it lies; its bytes are
/// read only when a key ties with its prefix and both are longer than it. A descent sets it
/// once per level, and the separators lie elsewhere in memory than the branch's index the
/// descent read (each its own allocation): copying them cost a memcpy and a cache miss per
/// level, for comparisons that random keys almost never need.
#[derive(Default)]
struct UpperBound {
    present: bool,
    prefix: u64,
    len: usize,
    /// Where the separator lies: its branch page and its index there.
    source: (u64, usize),
    /// The separator's bytes once read (`loaded`); always, for the other comparators.
    bytes: Vec<u8>,
    loaded: bool,
}

impl UpperBound {
    fn clear(&mut self) {
        self.present = false;
    }

    /// Sets the bound to a separator of `key_prefix` `prefix` and length `len`, lying at
    /// `source`, whose bytes `separator` gives (called now for the other comparators only).
    fn set<'a>(
        &mut self,
        comparator: Comparator,
        prefix: u64,
        len: usize,
        source: (u64, usize),
        separator: impl FnOnce() -> &'a [u8],
    ) {
        self.present = true;
        self.len = len;
        self.source = source;
        self.bytes.clear();
        self.loaded = false;
        if comparator == Comparator::Lexical {
            self.prefix = prefix;
            return;
        }
        self.bytes.extend_from_slice(separator());
        self.loaded = true;
    }

    /// Whether `key` is below the bound (every key is, when there is none). `load` copies the
    /// separator at a source into the buffer, when a comparison needs its bytes; if it cannot
    /// (false), the key is not admitted.
    fn admits(
        &mut self,
        comparator: Comparator,
        key: &[u8],
        load: impl FnOnce((u64, usize), &mut Vec<u8>) -> bool,
    ) -> bool {
        if !self.present {
            return true;
        }
        if comparator == Comparator::Lexical {
            match key_prefix(key).cmp(&self.prefix) {
                Ordering::Equal => {}
                order => return order == Ordering::Less,
            }
            if key.len().min(self.len) <= 8 {
                return same_prefix_order(key.len(), self.len, || Ordering::Equal) == Ordering::Less;
            }
        }
        if !self.loaded {
            self.loaded = load(self.source, &mut self.bytes);
            if !self.loaded {
                self.bytes.clear();
                return false;
            }
            debug_assert_eq!(
                (comparator != Comparator::Lexical || key_prefix(&self.bytes) == self.prefix, self.bytes.len()),
                (true, self.len),
                "a separator of another summary"
            );
        }
        comparator.compare(key, &self.bytes) == Ordering::Less
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

/// Stages 2 to 5 of a batched lookup (the header's list) for `runs`, whose leaves stage 1
/// took: each run's first key (`first_key`) sought in its leaf, its lines prefetched a stage
/// ahead of their reads.
fn seek_first_keys<'k>(runs: &mut [Run], comparator: Comparator, first_key: impl Fn(&Run) -> &'k [u8]) -> Result<()> {
    // Stage 2: the top levels of the leaves' indexes.
    for run in runs.iter() {
        leaf_page(run.id, &run.leaf)?.prefetch_index();
    }
    // Stage 3: the index blocks of the runs' first keys.
    for run in runs.iter_mut() {
        let key = first_key(run);
        run.seek = leaf_page(run.id, &run.leaf)?.seek(comparator, key);
    }
    // Stage 4: the entries of the runs' first keys.
    for Run { id, leaf, seek, .. } in runs.iter_mut() {
        if let Some(seek) = seek {
            leaf_page(*id, leaf)?.seek_entry(seek);
        }
    }
    // Stage 5: the records of those entries.
    for Run { id, leaf, seek, .. } in runs.iter() {
        if let Some(seek) = seek {
            leaf_page(*id, leaf)?.seek_record(seek);
        }
    }
    // Stage 5b: in leaves lending their values from the file's pages, those values.
    for Run { id, leaf, seek, .. } in runs.iter() {
        if let Some(seek) = seek {
            leaf_page(*id, leaf)?.seek_lent_value(seek);
        }
    }
    Ok(())
}

/// The leaf page `page` (of id `id`) is; a branch is BrokenData.
fn leaf_page<'page>(id: u64, page: &'page PageRef<'_>) -> Result<&'page Leaf> {
    match &**page {
        Page::Leaf(leaf) => Ok(leaf),
        Page::Branch(_) => Err(wrong_level(id)),
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on a wrong index")]
    use super::*;
    use crate::split_mix::SplitMix64;

    /// The bound admits exactly the keys its separator compares above, for every comparator,
    /// with separators set one after another (long after short and short after long, so
    /// bytes left by an earlier one would show) and keys that tie on their prefix.
    #[test]
    fn upper_bound_admits_the_keys_below_its_separator() {
        let mut rng = SplitMix64::new(11);
        let word = |rng: &mut SplitMix64| -> Vec<u8> {
            (0..rng.below(12)).map(|_| [0u8, 1, b'a', 0xff][rng.below(4) as usize]).collect()
        };
        for comparator in Comparator::ALL {
            let mut bound = UpperBound::default();
            let mut separators: Vec<Vec<u8>> = Vec::new();
            for round in 0..3000 {
                let key = word(&mut rng);
                let load = |(_, index): (u64, usize), bytes: &mut Vec<u8>, separators: &[Vec<u8>]| {
                    bytes.extend_from_slice(&separators[index]);
                    true
                };
                assert!(
                    bound.admits(comparator, &key, |s, b| load(s, b, &separators)) || bound.present,
                    "round {round}: nothing bounds"
                );
                let separator = word(&mut rng);
                separators.push(separator.clone());
                let source = (4096, separators.len() - 1);
                bound.set(comparator, key_prefix(&separator), separator.len(), source, || &separator);
                let below = comparator.compare(&key, &separator) == Ordering::Less;
                for again in 0..2 {
                    let admitted = bound.admits(comparator, &key, |s, b| load(s, b, &separators));
                    assert_eq!(admitted, below, "round {round} ({again}): {key:?} against {separator:?}");
                }
                // A separator that cannot be read admits no key that needs its bytes.
                let mut unreadable = UpperBound::default();
                unreadable.set(comparator, key_prefix(&separator), separator.len(), source, || &separator);
                let admitted = unreadable.admits(comparator, &key, |_, _| false);
                assert!(!admitted || below, "round {round}: {key:?} admitted by an unreadable {separator:?}");
                if rng.below(8) == 0 {
                    bound.clear();
                    assert!(bound.admits(comparator, &key, |_, _| unreachable!("no bound, no bytes")));
                }
            }
        }
    }

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
