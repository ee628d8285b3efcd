//! Space in the record area: the end to append at, and the pool of free blocks to reuse.
//!
//! A removed or replaced record becomes a free block; a new record takes the smallest free
//! block that fits (best fit) and the remainder is split off as a new free block. The pool
//! lives in memory while the database is open and is saved after the records on close, so
//! free space is reused across sessions; after a crash it is rebuilt by the restore.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Most blocks the pool remembers; beyond that the smallest are forgotten (a rebuild
/// recovers them), so the pool's memory stays bounded.
const MAX_FREE_BLOCKS: usize = 1 << 20;

/// A place to write a block of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    pub offset: u64,
    /// Bytes of the reused free block beyond `len`, to be marked free by the caller
    /// (0 when appended at the end).
    pub remainder: u64,
}

#[derive(Debug, Default)]
struct Pool {
    /// Free blocks by length, then offset.
    by_len: BTreeMap<u64, Vec<u64>>,
    blocks: usize,
    bytes: u64,
}

#[derive(Debug)]
pub struct Space {
    /// The end of the record area. Invariant: every byte below it belongs to a block.
    end: AtomicU64,
    pool: Mutex<Pool>,
    /// Number of blocks in the pool, readable without the lock so that appends skip it.
    pooled: AtomicUsize,
}

impl Space {
    pub fn new(end: u64) -> Space {
        Space { end: AtomicU64::new(end), pool: Mutex::new(Pool::default()), pooled: AtomicUsize::new(0) }
    }

    pub fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    /// Free bytes held in the pool.
    pub fn free_bytes(&self) -> u64 {
        self.pool.lock().bytes
    }

    pub fn free_blocks(&self) -> usize {
        self.pooled.load(Ordering::Relaxed)
    }

    /// Finds room for `len` bytes: the best-fitting free block when `reuse` is allowed,
    /// otherwise (or failing that) the end of the record area, if that stays within `limit`.
    pub fn allocate(&self, len: u64, reuse: bool, limit: u64) -> Option<Allocation> {
        if reuse && self.pooled.load(Ordering::Relaxed) > 0 {
            let mut pool = self.pool.lock();
            let found = pool.by_len.range_mut(len..).next().map(|(&size, offsets)| (size, offsets.pop()));
            if let Some((size, Some(offset))) = found {
                if pool.by_len.get(&size).is_some_and(Vec::is_empty) {
                    pool.by_len.remove(&size);
                }
                pool.blocks -= 1;
                pool.bytes -= size;
                self.pooled.store(pool.blocks, Ordering::Relaxed);
                return Some(Allocation { offset, remainder: size - len });
            }
        }
        let grown = self.end.fetch_update(Ordering::AcqRel, Ordering::Acquire, |end| {
            end.checked_add(len).filter(|&new_end| new_end <= limit)
        });
        grown.ok().map(|offset| Allocation { offset, remainder: 0 })
    }

    /// Returns a block to the pool.
    pub fn release(&self, offset: u64, len: u64) {
        if len < super::record::MIN_SPAN {
            return;
        }
        let mut guard = self.pool.lock();
        let pool = &mut *guard;
        if pool.blocks >= MAX_FREE_BLOCKS {
            let Some((&smallest, _)) = pool.by_len.first_key_value() else { return };
            if smallest >= len {
                return;
            }
            if let Some(offsets) = pool.by_len.get_mut(&smallest) {
                offsets.pop();
                pool.blocks -= 1;
                pool.bytes -= smallest;
                if offsets.is_empty() {
                    pool.by_len.remove(&smallest);
                }
            }
        }
        pool.by_len.entry(len).or_default().push(offset);
        pool.blocks += 1;
        pool.bytes += len;
        self.pooled.store(pool.blocks, Ordering::Relaxed);
    }

    /// Forgets every free block and moves the end (used by clear).
    pub fn reset(&self, end: u64) {
        let mut pool = self.pool.lock();
        *pool = Pool::default();
        self.pooled.store(0, Ordering::Relaxed);
        self.end.store(end, Ordering::Release);
    }

    /// Moves the end back over space given up at close.
    pub fn reset_end(&self, end: u64) {
        self.end.store(end, Ordering::Release);
    }

    /// The pool as (offset, len) pairs in offset order, for saving.
    pub fn blocks(&self) -> Vec<(u64, u64)> {
        let pool = self.pool.lock();
        let mut blocks: Vec<(u64, u64)> =
            pool.by_len.iter().flat_map(|(&len, offsets)| offsets.iter().map(move |&o| (o, len))).collect();
        blocks.sort_unstable();
        blocks
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn best_fit_and_split() {
        let space = Space::new(1000);
        space.release(100, 50);
        space.release(200, 20);
        let a = space.allocate(18, true, u64::MAX).unwrap();
        assert_eq!(a, Allocation { offset: 200, remainder: 2 });
        let b = space.allocate(30, true, u64::MAX).unwrap();
        assert_eq!(b, Allocation { offset: 100, remainder: 20 });
        let c = space.allocate(30, true, u64::MAX).unwrap();
        assert_eq!(c, Allocation { offset: 1000, remainder: 0 });
        assert_eq!(space.end(), 1030);
        assert_eq!(space.allocate(5, false, u64::MAX).unwrap().offset, 1030);
        assert_eq!(space.allocate(100, false, 1100), None);
        assert_eq!(space.end(), 1035);
    }
}
