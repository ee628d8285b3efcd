//! Space in the record area: the end to append at, and the pool of free blocks to reuse.
//!
//! A removed or replaced record becomes a free block; a new record takes the smallest free
//! block that fits (best fit) and the remainder is split off as a new free block. The pool
//! lives in memory while the database is open and is saved after the records on close, so
//! free space is reused across sessions; after a crash it is rebuilt by the restore.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::coalesce::{merge_adjacent, Run};
use super::record::RecordLen;

/// Most blocks the pool remembers; beyond that the smallest are forgotten (a rebuild
/// recovers them), so the pool's memory stays bounded.
const MAX_FREE_BLOCKS: usize = 1 << 20;

/// A place to write a block, and its length there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    pub offset: u64,
    /// The block's length at `offset` (a record crossing a sector is longer: record.rs).
    pub len: u64,
    /// Bytes of the reused free block beyond `len`, to be marked free by the caller
    /// (0 when appended at the end).
    pub remainder: u64,
}

/// Blocks shorter than this are kept in exact-size classes found through a bitmap, so that
/// releasing and reusing the common small block costs no tree operation.
const SMALL: usize = 4096;

#[derive(Debug)]
struct Pool {
    /// `small[len]`: offsets of free blocks of exactly `len` bytes.
    small: Vec<Vec<u64>>,
    /// Bit `len` is set when `small[len]` is not empty.
    small_nonempty: Vec<u64>,
    /// Free blocks of `SMALL` bytes or more, by length.
    large: BTreeMap<u64, Vec<u64>>,
    blocks: usize,
    bytes: u64,
}

impl Default for Pool {
    fn default() -> Pool {
        // The size classes are allocated at the first release: most databases that are
        // only read or appended to never need them.
        Pool { small: Vec::new(), small_nonempty: vec![0; SMALL / 64], large: BTreeMap::new(), blocks: 0, bytes: 0 }
    }
}

impl Pool {
    fn push(&mut self, offset: u64, len: u64) {
        if self.small.is_empty() && (len as usize) < SMALL {
            self.small.resize(SMALL, Vec::new());
        }
        match self.small.get_mut(len as usize) {
            Some(class) if (len as usize) < SMALL => {
                class.push(offset);
                if let Some(word) = self.small_nonempty.get_mut(len as usize / 64) {
                    *word |= 1 << (len % 64);
                }
            }
            _ => self.large.entry(len).or_default().push(offset),
        }
        self.blocks += 1;
        self.bytes += len;
    }

    /// Takes the smallest block of at least `len` bytes: (offset, its length).
    fn take(&mut self, len: u64) -> Option<(u64, u64)> {
        let taken = self.take_small(len).or_else(|| {
            let (&size, offsets) = self.large.range_mut(len..).next()?;
            let offset = offsets.pop()?;
            if offsets.is_empty() {
                self.large.remove(&size);
            }
            Some((offset, size))
        })?;
        self.blocks -= 1;
        self.bytes -= taken.1;
        Some(taken)
    }

    fn take_small(&mut self, len: u64) -> Option<(u64, u64)> {
        let start = usize::try_from(len).ok().filter(|&l| l < SMALL)?;
        let mut word_index = start / 64;
        let mut word = self.small_nonempty.get(word_index)? & (u64::MAX << (start % 64));
        loop {
            if word != 0 {
                let size = word_index * 64 + word.trailing_zeros() as usize;
                let class = self.small.get_mut(size)?;
                let offset = class.pop()?;
                if class.is_empty() {
                    if let Some(bits) = self.small_nonempty.get_mut(word_index) {
                        *bits &= !(1 << (size % 64));
                    }
                }
                return Some((offset, size as u64));
            }
            word_index += 1;
            word = *self.small_nonempty.get(word_index)?;
        }
    }

    /// The length of the largest block, 0 for none.
    fn largest(&self) -> u64 {
        if let Some((&len, _)) = self.large.iter().next_back() {
            return len;
        }
        let top = self.small_nonempty.iter().enumerate().rev().find(|(_, &word)| word != 0);
        top.map_or(0, |(index, word)| (index * 64 + 63 - word.leading_zeros() as usize) as u64)
    }

    /// Drops the smallest block, to make room for a larger one.
    fn drop_smallest(&mut self) -> Option<u64> {
        let (offset, len) = self.take(0)?;
        let _ = offset;
        Some(len)
    }

    fn all(&self) -> Vec<(u64, u64)> {
        let small =
            self.small.iter().enumerate().flat_map(|(len, offsets)| offsets.iter().map(move |&o| (o, len as u64)));
        let large = self.large.iter().flat_map(|(&len, offsets)| offsets.iter().map(move |&o| (o, len)));
        small.chain(large).collect()
    }
}

/// The pool is split into shards, each behind its own lock, chosen by the caller (HashDbm
/// uses the bucket's lock stripe), so that writers on different stripes neither wait for
/// each other nor bounce one lock's cache line between cores. A block freed in a shard is
/// reused by writers of that shard.
pub const SHARDS: usize = 16;

#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard {
    pool: Mutex<Pool>,
    /// Number of blocks in the pool, readable without the lock so that appends skip it.
    pooled: AtomicUsize,
    /// Length of its largest block, readable without the lock, so that a writer whose own
    /// shard has no block large enough finds one that has.
    largest: AtomicU64,
}

impl Shard {
    /// Publishes the pool's counts after a change, under its lock.
    fn publish(&self, pool: &Pool) {
        self.pooled.store(pool.blocks, Ordering::Relaxed);
        self.largest.store(pool.largest(), Ordering::Relaxed);
    }

    /// The best-fitting block for a record of `len`, if the pool has one: the smallest that
    /// holds it at the block's offset. A block that fits its shortest length but not its
    /// length there (it would cross a sector) goes back, for the smallest block of its
    /// longest length.
    fn take(&self, len: RecordLen) -> Option<Allocation> {
        let mut pool = self.pool.lock();
        let mut taken = pool.take(len.min());
        if let Some((offset, size)) = taken.filter(|&(offset, size)| len.at(offset) > size) {
            pool.push(offset, size);
            taken = pool.take(len.max());
        }
        self.publish(&pool);
        taken.map(|(offset, size)| {
            let len = len.at(offset);
            debug_assert!(len <= size, "a {size}-byte block taken for a {len}-byte record");
            Allocation { offset, len, remainder: size.saturating_sub(len) }
        })
    }
}

#[derive(Debug)]
pub struct Space {
    /// The end of the record area. Invariant: every byte below it belongs to a block.
    end: AtomicU64,
    shards: Box<[Shard]>,
    /// Blocks in the pool right after it was last merged as a whole (coalesce.rs).
    merged_pool: AtomicUsize,
}

impl Space {
    pub fn new(end: u64) -> Space {
        Space {
            end: AtomicU64::new(end),
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            merged_pool: AtomicUsize::new(0),
        }
    }

    /// Puts `settled` blocks (offset, len, shard), each marked free on disk, into the pool,
    /// merged with each other where adjacent and, whenever the pool has doubled since it was
    /// last merged, with every pooled block too (coalesce.rs). `mark_span(offset, len)` writes
    /// the free-span tag of a merged block: the caller owns the settled blocks, and the
    /// pooled ones are taken out of the pool, under all its locks, while they are merged.
    pub fn settle(
        &self,
        mut settled: Vec<(u64, u64, usize)>,
        mut mark_span: impl FnMut(u64, u64) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        let whole_pool = self.free_blocks() + settled.len() >= 2 * self.merged_pool.load(Ordering::Relaxed);
        if !whole_pool {
            let runs = merge_adjacent(&mut settled);
            let marked = runs.iter().filter(|r| r.merged).try_for_each(|r| mark_span(r.offset, r.len));
            for run in runs {
                self.release(run.offset, run.len, run.shard);
            }
            return marked;
        }
        let mut pools: Vec<_> = self.shards.iter().map(|s| s.pool.lock()).collect();
        for (index, pool) in pools.iter_mut().enumerate() {
            settled.extend(pool.all().into_iter().map(|(offset, len)| (offset, len, index)));
            **pool = Pool::default();
        }
        let runs: Vec<Run> = merge_adjacent(&mut settled);
        let marked = runs.iter().filter(|r| r.merged).try_for_each(|r| mark_span(r.offset, r.len));
        self.merged_pool.store(runs.len(), Ordering::Relaxed);
        for run in runs {
            if let Some(pool) = pools.get_mut(run.shard % SHARDS) {
                pool.push(run.offset, run.len);
            }
        }
        for (shard, pool) in self.shards.iter().zip(&pools) {
            shard.publish(pool);
        }
        marked
    }

    pub fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    fn shard(&self, shard: usize) -> Option<&Shard> {
        self.shards.get(shard % SHARDS)
    }

    /// Free bytes held in the pool.
    pub fn free_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.pool.lock().bytes).sum()
    }

    pub fn free_blocks(&self) -> usize {
        self.shards.iter().map(|s| s.pooled.load(Ordering::Relaxed)).sum()
    }

    /// Finds room for a record of `len`: when `reuse` is allowed, the best-fitting free block
    /// of `shard`, else of the first other shard whose largest block fits (blocks made of
    /// several freed records land in one shard: freed.rs); otherwise (or failing that) the
    /// end of the record area, if that stays within `limit`.
    pub fn allocate(&self, len: RecordLen, reuse: bool, limit: u64, shard: usize) -> Option<Allocation> {
        if reuse {
            let fits = |s: &&Shard| s.largest.load(Ordering::Relaxed) >= len.min();
            if let Some(taken) = self.shard(shard).filter(fits).and_then(|s| s.take(len)) {
                return Some(taken);
            }
            for other in (1..SHARDS).filter_map(|i| self.shard(shard + i)) {
                if let Some(taken) = Some(other).filter(fits).and_then(|s| s.take(len)) {
                    return Some(taken);
                }
            }
        }
        let grown = self.end.fetch_update(Ordering::AcqRel, Ordering::Acquire, |end| {
            end.checked_add(len.at(end)).filter(|&new_end| new_end <= limit)
        });
        grown.ok().map(|offset| Allocation { offset, len: len.at(offset), remainder: 0 })
    }

    /// Returns a block to `shard`'s pool.
    pub fn release(&self, offset: u64, len: u64, shard: usize) {
        let Some(shard) = self.shard(shard) else { return };
        if len < super::record::MIN_SPAN {
            return;
        }
        let mut pool = shard.pool.lock();
        if pool.blocks >= MAX_FREE_BLOCKS / SHARDS {
            match pool.drop_smallest() {
                // Keep the larger of the two.
                Some(dropped) if dropped >= len => return,
                _ => {}
            }
        }
        pool.push(offset, len);
        shard.publish(&pool);
    }

    /// Forgets every free block and moves the end (used by clear).
    pub fn reset(&self, end: u64) {
        for shard in self.shards.iter() {
            let mut pool = shard.pool.lock();
            *pool = Pool::default();
            shard.publish(&pool);
        }
        self.end.store(end, Ordering::Release);
    }

    /// Moves the end back over space given up at close.
    /// Returns `len` bytes allocated at `offset`, at the end, that the file could not grow
    /// to hold: the end moves back unless another allocation followed (then the gap stays;
    /// once the file grows over it, it reads as zero bytes, which are filler blocks).
    pub fn give_back_end(&self, offset: u64, len: u64) {
        let _ = self.end.compare_exchange(offset + len, offset, Ordering::AcqRel, Ordering::Acquire);
    }

    pub fn reset_end(&self, end: u64) {
        self.end.store(end, Ordering::Release);
    }

    /// The pool as (offset, len) pairs in offset order, for saving.
    pub fn blocks(&self) -> Vec<(u64, u64)> {
        let mut blocks: Vec<(u64, u64)> = self.shards.iter().flat_map(|s| s.pool.lock().all()).collect();
        blocks.sort_unstable();
        blocks
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use crate::hash_dbm::record::CheckLayout;

    fn fixed(narrow: u64) -> RecordLen {
        RecordLen { narrow, layout: CheckLayout::Narrow }
    }

    #[test]
    fn small_and_large_classes() {
        let space = Space::new(100_000);
        space.release(10, 5000, 0);
        space.release(20, 3000, 0);
        space.release(30, 64, 0);
        space.release(40, 63, 0);
        assert_eq!(space.free_bytes(), 5000 + 3000 + 64 + 63);
        // (record length, the block it takes, what is left of the block)
        for (len, offset, remainder) in [(63, 40, 0), (63, 30, 1), (100, 20, 2900), (4000, 10, 1000)] {
            let taken = space.allocate(fixed(len), true, u64::MAX, 0).unwrap();
            assert_eq!(taken, Allocation { offset, len, remainder }, "a {len}-byte record");
        }
        assert_eq!(space.allocate(fixed(1), true, u64::MAX, 0).unwrap().offset, 100_000);
        assert_eq!(space.free_blocks(), 0);
        assert_eq!(space.blocks(), vec![]);
    }

    #[test]
    fn best_fit_and_split() {
        let space = Space::new(1000);
        space.release(100, 50, 0);
        space.release(200, 20, 0);
        let a = space.allocate(fixed(18), true, u64::MAX, 0).unwrap();
        assert_eq!(a, Allocation { offset: 200, len: 18, remainder: 2 });
        let b = space.allocate(fixed(30), true, u64::MAX, 0).unwrap();
        assert_eq!(b, Allocation { offset: 100, len: 30, remainder: 20 });
        let c = space.allocate(fixed(30), true, u64::MAX, 0).unwrap();
        assert_eq!(c, Allocation { offset: 1000, len: 30, remainder: 0 });
        assert_eq!(space.end(), 1030);
        assert_eq!(space.allocate(fixed(5), false, u64::MAX, 0).unwrap().offset, 1030);
        assert_eq!(space.allocate(fixed(100), false, 1100, 0), None);
        assert_eq!(space.end(), 1035);
    }

    /// A record placed across a sector is 3 bytes longer there: a free block that fits its
    /// shortest length only inside a sector is not taken where it would cross.
    #[test]
    fn a_record_takes_its_length_where_it_lands() {
        let wide = |narrow| RecordLen { narrow, layout: CheckLayout::WideAcrossSectors };
        let space = Space::new(2000);
        // 20 bytes at 500 cross the sector boundary at 512; 23 bytes at 1000 do not.
        space.release(500, 20, 0);
        space.release(1000, 23, 0);
        let a = space.allocate(wide(20), true, u64::MAX, 0).unwrap();
        assert_eq!(a, Allocation { offset: 1000, len: 20, remainder: 3 });
        assert_eq!(space.blocks(), vec![(500, 20)]);
        // At the end: 2000 + 20 + 3 stays in its sector (2048 is the next boundary).
        assert_eq!(
            space.allocate(wide(20), false, u64::MAX, 0).unwrap(),
            Allocation { offset: 2000, len: 20, remainder: 0 }
        );
        let end = space.allocate(wide(10), false, u64::MAX, 0).unwrap();
        assert_eq!(end, Allocation { offset: 2020, len: 10, remainder: 0 });
        space.reset_end(2040);
        assert_eq!(
            space.allocate(wide(10), false, u64::MAX, 0).unwrap(),
            Allocation { offset: 2040, len: 13, remainder: 0 }
        );
        assert_eq!(space.end(), 2053);
    }
}
