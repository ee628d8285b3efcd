//! The sorted index of a page: one item per key (a leaf's record entry; nothing for a
//! branch), in key order, with the first 8 bytes of every key as a big-endian number in an
//! array of its own and a sparse top level holding every 16th of those.
//!
//! Lookups. A random lookup in a large tree misses the CPU caches on nearly every memory line
//! it touches, so what costs is the number of lines visited one after the other. A plain
//! binary search over a page of ~450 keys visits about nine lines in a chain (each probe
//! depends on the last). Here the top level (a few adjacent lines) and then one block of 16
//! prefixes are counted linearly: the loads do not depend on each other, so the CPU fetches
//! them in parallel; the block's items are prefetched meanwhile, and a lookup costs about two
//! chained misses before it reaches the item. (A branch, which every lookup passes through and
//! so stays in the cache, binary searches its top level instead: `lower_bound_hot`.) Two keys
//! with unequal prefixes compare as their prefixes do (a zero pad sorts like "ended"); with
//! equal prefixes, see `same_prefix_order`.
//!
//! Updates. Inserting or removing an item moves the shorter side of the array: the tail, or
//! the head into a gap kept at the front (`head` dead slots, see `open_gap`). Removing the
//! records of a leaf in key order (a sequential delete) so costs O(1) each instead of moving
//! the whole page.
//! Dead slots hold prefix 0, which sorts first, so the physical arrays stay sorted and the
//! top level needs no special case; the gap is closed when it outgrows the live items.

use crate::file::prefetch_slice;
use crate::key_prefix::count_below;
pub use crate::key_prefix::{key_prefix, search_run};
use std::cmp::Ordering;

/// Prefixes per block: one top-level entry summarizes this many.
const STRIDE: usize = 16;
/// Pages with fewer items than this just move their tail on inserts (see `open_gap`).
const MIN_GAP_OPENING: usize = 64;
/// Up to this many top-level entries are counted linearly; more are binary searched (only for
/// pages far above the default size).
const LINEAR_TOP_LEVEL: usize = 64;

/// The order of two keys whose prefixes are equal, from their lengths alone when one of them
/// is at most 8 bytes long: that one is then a prefix of the other (its zero pad matched the
/// other's bytes), so the shorter is first and equal lengths mean equal keys. Otherwise the
/// bytes decide, which `compare_bytes` does lazily (it may have to touch the page's arena).
#[inline]
pub fn same_prefix_order(stored_len: usize, key_len: usize, compare_bytes: impl FnOnce() -> Ordering) -> Ordering {
    if stored_len.min(key_len) <= 8 {
        stored_len.cmp(&key_len)
    } else {
        compare_bytes()
    }
}

/// Invariants: `prefixes.len() == items.len()`; positions `head..` are the live items, in key
/// order, and `..head` are dead slots with prefix 0; so `prefixes` ascends (not strictly: keys
/// may share their first 8 bytes); `fences[k] == prefixes[k * STRIDE]` for every block `k`.
/// Positions in the API are logical (0 is the first live item).
#[derive(Debug, Clone)]
pub struct PrefixIndex<T> {
    prefixes: Vec<u64>,
    items: Vec<T>,
    fences: Vec<u64>,
    head: usize,
}

/// A lookup of one prefix in stages (`PrefixIndex::seek`, then `seek_item`): what the
/// steps so far found, so that no step reads again what an earlier one read. Valid for the
/// index it came from, unchanged since.
#[derive(Debug, Clone, Copy)]
pub struct Seek {
    probe: u64,
    /// The block the answer lies in, from the top level (see `block_below`).
    block: Option<(usize, usize)>,
    /// The answer of `lower_bound`, once `seek_item` read the block.
    position: Option<usize>,
}

impl Seek {
    pub fn probe(&self) -> u64 {
        self.probe
    }

    /// The position `seek_item` found, if it ran.
    pub fn position(&self) -> Option<usize> {
        self.position
    }
}

impl<T> Default for PrefixIndex<T> {
    fn default() -> Self {
        PrefixIndex { prefixes: Vec::new(), items: Vec::new(), fences: Vec::new(), head: 0 }
    }
}

impl<T: Copy> PrefixIndex<T> {
    pub fn with_capacity(capacity: usize) -> PrefixIndex<T> {
        PrefixIndex {
            prefixes: Vec::with_capacity(capacity),
            items: Vec::with_capacity(capacity),
            fences: Vec::with_capacity(capacity / STRIDE + 1),
            head: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.items.len() - self.head
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes allocated, for the page cache's budget.
    pub fn memory_size(&self) -> usize {
        (self.prefixes.capacity() + self.fences.capacity()) * 8 + self.items.capacity() * size_of::<T>()
    }

    /// The live items, in key order.
    pub fn items(&self) -> &[T] {
        self.items.get(self.head..).unwrap_or_default()
    }

    pub fn items_mut(&mut self) -> &mut [T] {
        self.items.get_mut(self.head..).unwrap_or_default()
    }

    /// The prefix of the last item.
    #[inline]
    pub fn last_prefix(&self) -> Option<u64> {
        self.prefixes.get(self.head..).and_then(<[u64]>::last).copied()
    }

    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        self.items.get(self.head.checked_add(index)?)
    }

    /// The prefix of item `index`.
    #[inline]
    pub fn prefix(&self, index: usize) -> Option<u64> {
        self.prefixes.get(self.head.checked_add(index)?).copied()
    }

    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.items.get_mut(self.head.checked_add(index)?)
    }

    /// Rewrites the fences of the blocks that start at physical position `from` or later.
    fn refresh_fences_from(&mut self, from: usize) {
        let first_block = from.div_ceil(STRIDE);
        self.fences.truncate(first_block);
        let rest = self.prefixes.get(first_block * STRIDE..).unwrap_or_default();
        self.fences.extend(rest.iter().step_by(STRIDE).copied());
        self.debug_check();
    }

    /// Rewrites the fences of the blocks that start within physical positions `range`.
    fn refresh_fences_within(&mut self, range: std::ops::Range<usize>) {
        let mut block = range.start.div_ceil(STRIDE);
        while block * STRIDE < range.end {
            if let (Some(fence), Some(prefix)) = (self.fences.get_mut(block), self.prefixes.get(block * STRIDE)) {
                *fence = *prefix;
            }
            block += 1;
        }
        self.debug_check();
    }

    /// The invariants that cost O(1) to check, after every change (debug builds, so the test
    /// suites run it); the ordering ones are checked by the tests against a model.
    #[inline]
    fn debug_check(&self) {
        debug_assert_eq!(self.prefixes.len(), self.items.len(), "invariant: one prefix per item");
        debug_assert!(self.head <= self.prefixes.len(), "invariant: the gap lies inside the items");
        debug_assert_eq!(self.fences.len(), self.prefixes.len().div_ceil(STRIDE), "invariant: a fence per block");
    }

    /// Opens a gap of a quarter of the items at the front (moving them all once), so that the
    /// inserts into the front half that follow move the head instead of the longer tail:
    /// random inserts then move a quarter of a page on average instead of a half. `filler`
    /// fills the dead item slots (never read).
    fn open_gap(&mut self, filler: T) {
        let gap = self.len() / 4;
        self.prefixes.splice(0..0, std::iter::repeat_n(0, gap));
        self.items.splice(0..0, std::iter::repeat_n(filler, gap));
        self.head = gap;
        self.refresh_fences_from(0);
    }

    /// Moves the live items to the front, dropping the gap.
    fn close_gap(&mut self) {
        if self.head > 0 {
            self.prefixes.drain(..self.head);
            self.items.drain(..self.head);
            self.head = 0;
            self.refresh_fences_from(0);
        }
    }

    pub fn insert(&mut self, index: usize, prefix: u64, item: T) {
        let index = index.min(self.len());
        if self.head == 0 && index < self.len() / 2 && self.len() >= MIN_GAP_OPENING {
            self.open_gap(item);
        }
        let at = self.head + index;
        if self.head > 0 && index < self.len() / 2 {
            // Move the items before `index` one step into the gap.
            let new_head = self.head - 1;
            self.prefixes.copy_within(self.head..at, new_head);
            self.items.copy_within(self.head..at, new_head);
            if let (Some(p), Some(i)) = (self.prefixes.get_mut(at - 1), self.items.get_mut(at - 1)) {
                *p = prefix;
                *i = item;
            }
            self.head = new_head;
            self.refresh_fences_within(new_head..at);
        } else if at == self.items.len() {
            self.push(prefix, item);
        } else {
            self.prefixes.insert(at, prefix);
            self.items.insert(at, item);
            self.refresh_fences_from(at);
        }
    }

    pub fn push(&mut self, prefix: u64, item: T) {
        // Only a push that starts a block adds a fence (decoding a leaf pushes every record).
        if self.prefixes.len().is_multiple_of(STRIDE) {
            self.fences.push(prefix);
        }
        self.prefixes.push(prefix);
        self.items.push(item);
        self.debug_check();
    }

    pub fn remove(&mut self, index: usize) -> Option<T> {
        let at = self.head.checked_add(index)?;
        let item = *self.items.get(at)?;
        if index < self.len() / 2 {
            // Move the items before `index` one step towards the back, growing the gap.
            let old_head = self.head;
            self.prefixes.copy_within(old_head..at, old_head + 1);
            self.items.copy_within(old_head..at, old_head + 1);
            if let Some(p) = self.prefixes.get_mut(old_head) {
                *p = 0;
            }
            self.head += 1;
            self.refresh_fences_within(old_head..at + 1);
            if self.head > self.len() + STRIDE {
                self.close_gap();
            }
        } else {
            self.prefixes.remove(at);
            self.items.remove(at);
            self.refresh_fences_from(at);
        }
        Some(item)
    }

    /// Moves the items from `at` on into a new index.
    pub fn split_off(&mut self, at: usize) -> PrefixIndex<T> {
        let physical = self.head + at.min(self.len());
        let mut right = PrefixIndex {
            prefixes: self.prefixes.split_off(physical),
            items: self.items.split_off(physical),
            fences: Vec::new(),
            head: 0,
        };
        right.refresh_fences_from(0);
        self.close_gap();
        self.refresh_fences_from(0);
        right
    }

    /// Replaces the content with `entries` (whose keys must ascend).
    pub fn rebuild(&mut self, entries: impl Iterator<Item = (u64, T)>) {
        self.prefixes.clear();
        self.items.clear();
        self.head = 0;
        for (prefix, item) in entries {
            self.prefixes.push(prefix);
            self.items.push(item);
        }
        self.refresh_fences_from(0);
    }

    /// Starts loading the top level, which a lookup reads first (a batched lookup's stage).
    #[inline]
    pub fn prefetch_top(&self) {
        prefetch_slice(&self.fences);
    }

    /// The first step of a lookup of `probe` in stages (a batched lookup's, see
    /// tree_dbm/get_many.rs): reads the top level (which should be in the cache by now) and
    /// starts loading the block of prefixes the lookup reads next.
    #[inline]
    pub fn seek(&self, probe: u64) -> Seek {
        let block = self.block_below(probe);
        if let Some((start, end)) = block {
            prefetch_slice(self.prefixes.get(start..end).unwrap_or_default());
        }
        Seek { probe, block, position: None }
    }

    /// The second step: reads the block (in the cache by now), which gives the lookup's
    /// position (`lower_bound`'s answer), and starts loading the item there.
    #[inline]
    pub fn seek_item(&self, seek: &mut Seek) {
        let position = self.position_in(seek.probe, seek.block);
        prefetch_slice(self.items.get(self.head + position..).and_then(|rest| rest.get(..1)).unwrap_or_default());
        seek.position = Some(position);
    }

    /// The number of prefixes below `probe`: the first position whose prefix is `>= probe`.
    /// The items of the block the answer lies in are prefetched before the block is read, and
    /// `on_block` learns its positions, so that the caller can prefetch what it reads next.
    #[inline]
    pub fn lower_bound(&self, probe: u64, on_block: impl FnOnce(usize, usize)) -> usize {
        if self.prefixes.get(self.head).is_some_and(|first| probe <= *first) {
            return 0; // before every key (deleting in key order)
        }
        let block = self.block_below(probe);
        if let Some((start, end)) = block {
            prefetch_slice(self.items.get(start..end).unwrap_or_default());
            on_block(start.saturating_sub(self.head), end.saturating_sub(self.head));
        }
        self.position_in(probe, block)
    }

    /// `lower_bound` for a lookup whose lines are likely in the cache already (a batched
    /// lookup's, after its stages or in a leaf it is reading): it reads the top level and one
    /// block, and prefetches nothing. (The check of the first item would read one more line,
    /// which only pays for writers that delete in key order.)
    #[inline]
    pub fn lower_bound_cached(&self, probe: u64) -> usize {
        self.position_in(probe, self.block_below(probe))
    }

    /// `lower_bound` for an index whose top level stays in the cache: a branch's, which every
    /// lookup passes through. The top level is binary searched (about half the instructions
    /// of counting it, whose point, loads that do not wait for each other, only pays when its
    /// lines miss); the block, which may miss in a large tree, is still counted. `on_block` is
    /// told the logical positions `start..end` of that block (the answer is one of
    /// `start..=end`) before it is read, so that the caller can start loading what it will
    /// read there (a branch, its children) meanwhile.
    #[inline]
    pub fn lower_bound_hot(&self, probe: u64, on_block: impl FnOnce(usize, usize)) -> usize {
        let block = self.block_at(self.fences.partition_point(|fence| *fence < probe));
        if let Some((start, end)) = block {
            on_block(start.saturating_sub(self.head), end.saturating_sub(self.head));
        }
        self.position_in(probe, block)
    }

    /// The logical position `lower_bound` answers for `probe`, from its block (see
    /// `block_below`).
    #[inline]
    fn position_in(&self, probe: u64, block: Option<(usize, usize)>) -> usize {
        let physical = match block {
            None => 0, // the very first prefix is not below
            Some((start, end)) => start + count_below(self.prefixes.get(start..end).unwrap_or_default(), probe),
        };
        // Dead slots (prefix 0) count as below any probe but 0; they are not items.
        physical.max(self.head) - self.head
    }

    /// The physical positions `start..end` after the last top-level entry below `probe`:
    /// `prefixes[start - 1] < probe`, and `prefixes[end]` (if any) is not, so the answer of
    /// `lower_bound` lies in `start..=end`. None when no entry is below `probe`.
    #[inline]
    fn block_below(&self, probe: u64) -> Option<(usize, usize)> {
        let blocks_below = if self.fences.len() <= LINEAR_TOP_LEVEL {
            count_below(&self.fences, probe)
        } else {
            self.fences.partition_point(|f| *f < probe)
        };
        self.block_at(blocks_below)
    }

    /// The block the answer lies in when `blocks_below` fences are below the probe: the
    /// positions after that last fence below (which is itself below) up to the next fence;
    /// None when no fence is below.
    #[inline]
    fn block_at(&self, blocks_below: usize) -> Option<(usize, usize)> {
        let block = blocks_below.checked_sub(1)?;
        Some((block * STRIDE + 1, ((block + 1) * STRIDE).min(self.prefixes.len())))
    }

    /// The end of the run of prefixes equal to `probe` that starts at position `start`.
    #[inline]
    pub fn run_end(&self, start: usize, probe: u64) -> usize {
        let rest = self.prefixes.get(self.head + start..).unwrap_or_default();
        match rest {
            [] => start,
            [first, ..] if *first != probe => start,
            [_] => start + 1,
            [_, second, ..] if *second != probe => start + 1,
            _ => {
                // Long runs (keys sharing 8 bytes): gallop, then bisect the last step.
                let mut known_equal = 1;
                let mut step = 2;
                while rest.get(known_equal + step).is_some_and(|p| *p == probe) {
                    known_equal += step;
                    step *= 2;
                }
                let window = rest.get(known_equal + 1..(known_equal + step).min(rest.len())).unwrap_or_default();
                start + known_equal + 1 + window.partition_point(|p| *p == probe)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use proptest::prelude::*;

    fn check(index: &PrefixIndex<u32>, model: &[(u64, u32)], probe: u64) {
        assert_eq!(index.len(), model.len());
        let items: Vec<u32> = model.iter().map(|(_, i)| *i).collect();
        assert_eq!(index.items(), &items[..]);
        let low = model.partition_point(|(p, _)| *p < probe);
        assert_eq!(index.lower_bound(probe, |_, _| {}), low);
        assert_eq!(index.lower_bound_cached(probe), low);
        let mut block = None;
        assert_eq!(index.lower_bound_hot(probe, |start, end| block = Some((start, end))), low);
        if let Some((start, end)) = block {
            assert!(start <= low && low <= end, "{low} outside the block {start}..={end}");
        }
        let mut seek = index.seek(probe);
        assert_eq!(seek.position(), None);
        index.seek_item(&mut seek);
        assert_eq!(seek.position(), Some(low));
        assert_eq!(index.run_end(low, probe), low + model[low..].partition_point(|(p, _)| *p == probe));
        assert!(index.prefixes.windows(2).all(|w| w[0] <= w[1]));
        assert!(index.prefixes[..index.head].iter().all(|p| *p == 0));
        assert_eq!(index.fences.len(), index.prefixes.len().div_ceil(STRIDE));
        for (k, fence) in index.fences.iter().enumerate() {
            assert_eq!(*fence, index.prefixes[k * STRIDE]);
        }
    }

    proptest! {
        #[test]
        fn matches_a_sorted_vec(
            initial in proptest::collection::vec(0u64..40, 0..300),
            edits in proptest::collection::vec((0u8..3, 0usize..400, 0u64..40), 0..200),
            probe in 0u64..41,
            cut in 0usize..300,
        ) {
            let mut model: Vec<(u64, u32)> = initial.into_iter().map(|p| (p, p as u32 * 7)).collect();
            model.sort_unstable();
            let mut index = PrefixIndex::default();
            index.rebuild(model.iter().copied());
            for (n, (kind, at, prefix)) in edits.into_iter().enumerate() {
                match kind {
                    0 => {
                        let at = model.partition_point(|(p, _)| *p < prefix);
                        model.insert(at, (prefix, n as u32));
                        index.insert(at, prefix, n as u32);
                    }
                    1 if !model.is_empty() => {
                        let at = at % model.len();
                        assert_eq!(index.remove(at), Some(model.remove(at).1));
                    }
                    // Removing from the front, as a sequential delete does.
                    _ if !model.is_empty() => {
                        assert_eq!(index.remove(0), Some(model.remove(0).1));
                    }
                    _ => {}
                }
                check(&index, &model, probe);
            }
            let cut = cut.min(model.len());
            let right = index.split_off(cut);
            check(&index, &model[..cut], probe);
            check(&right, &model[cut..], probe);
        }
    }

    #[test]
    fn prefixes_order_like_keys() {
        let keys: [&[u8]; 6] = [b"", b"a", b"a\0", b"ab", b"abcdefgh", b"abcdefghi"];
        for a in keys {
            for b in keys {
                let order =
                    key_prefix(a).cmp(&key_prefix(b)).then_with(|| same_prefix_order(a.len(), b.len(), || a.cmp(b)));
                assert_eq!(order, a.cmp(b), "{a:?} {b:?}");
            }
        }
    }
}
