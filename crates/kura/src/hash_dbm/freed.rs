//! Records freed since the last `synchronize(true)`, held out of the free pool until the
//! next one.
//!
//! In place, a replaced or removed record is unlinked from its chain, and its space is free.
//! Reusing that space (or even marking it free on disk) at once is safe against a killed
//! process but not against a power loss: the kernel writes dirty pages back in any order, so
//! the new record in the freed space, or the dead tag, can reach the disk while the pointer
//! that unlinked the record, or the new version of its key, does not, and the key is lost.
//! As LMDB keeps a transaction's freed pages, such a record keeps its bytes (a live record's
//! tag) until the next hard synchronization: that makes every unlinking pointer durable,
//! then marks the held records dead, makes that durable too, and only then hands their
//! space to the pool (`Storage::synchronize`). Whatever reaches the disk of what was written
//! since, the records of the last synchronized state are all still there, intact.
//!
//! So that a long run of overwrites without a hard synchronization does not grow the file
//! without bound, the writers ask for one once the held bytes pass `settle_threshold`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::space::SHARDS;

/// Held bytes below which no synchronization is asked for, whatever the file size.
const MIN_SETTLE_BYTES: u64 = 32 << 20;
/// Above the minimum, a synchronization is asked for once the held bytes pass this fraction
/// (1 / `SETTLE_DIVISOR`) of the record area: the file grows by at most that much before
/// the space is reused.
const SETTLE_DIVISOR: u64 = 4;

/// A record unlinked since the last hard synchronization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreedBlock {
    pub offset: u64,
    pub len: u64,
    /// The tag that marks it dead (its kind changed, its checksum bits kept).
    pub dead_tag: u8,
    /// The free-pool shard it returns to.
    pub shard: usize,
}

/// The top byte of `Held::offset_and_tag`: offsets fit below it (a file is at most
/// `MAX_ADDRESSABLE`, 2^40 bytes).
const TAG_SHIFT: u32 = 56;
const OFFSET_MASK: u64 = (1 << TAG_SHIFT) - 1;
const _: () = assert!(super::header::MAX_ADDRESSABLE <= OFFSET_MASK + 1, "held offsets must fit below the tag");

/// A held record as its shard's list keeps it: 16 bytes, half a `FreedBlock` (its shard is
/// the list's own), since a writer that removes a million records between two hard
/// synchronizations holds a million of them.
#[derive(Debug, Clone, Copy)]
struct Held {
    offset_and_tag: u64,
    len: u64,
}

impl Held {
    fn new(block: &FreedBlock) -> Held {
        debug_assert!(block.offset <= OFFSET_MASK, "a held offset {} past the addressable size", block.offset);
        Held { offset_and_tag: (block.offset & OFFSET_MASK) | (u64::from(block.dead_tag) << TAG_SHIFT), len: block.len }
    }

    fn block(self, shard: usize) -> FreedBlock {
        FreedBlock {
            offset: self.offset_and_tag & OFFSET_MASK,
            len: self.len,
            dead_tag: (self.offset_and_tag >> TAG_SHIFT) as u8,
            shard,
        }
    }
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard {
    blocks: Mutex<Vec<Held>>,
    bytes: AtomicU64,
}

/// The held records, sharded like the pool so that writers of different lock stripes do not
/// share a lock.
#[derive(Debug)]
pub struct Freed {
    shards: Box<[Shard]>,
    /// Set once some shard holds more than its part of the threshold; cleared by `take_all`.
    settle_due: AtomicBool,
}

impl Default for Freed {
    fn default() -> Freed {
        Freed { shards: (0..SHARDS).map(|_| Shard::default()).collect(), settle_due: AtomicBool::new(false) }
    }
}

impl Freed {
    /// Holds `block` until the next hard synchronization; `area` is the size of the record
    /// area, for the threshold.
    pub fn hold(&self, block: FreedBlock, area: u64) {
        let Some(shard) = self.shards.get(block.shard % SHARDS) else { return };
        let held = {
            // Counted under the lock, so that `take_all` never misses a count it took.
            let mut blocks = shard.blocks.lock();
            blocks.push(Held::new(&block));
            shard.bytes.fetch_add(block.len, Ordering::Relaxed) + block.len
        };
        if held > settle_threshold(area) / SHARDS as u64 {
            self.settle_due.store(true, Ordering::Relaxed);
        }
    }

    /// Whether enough is held that a writer should synchronize.
    #[inline]
    pub fn settle_due(&self) -> bool {
        self.settle_due.load(Ordering::Relaxed)
    }

    /// Takes every held block.
    pub fn take_all(&self) -> Vec<FreedBlock> {
        self.settle_due.store(false, Ordering::Relaxed);
        let mut all = Vec::new();
        for (index, shard) in self.shards.iter().enumerate() {
            let held = {
                let mut blocks = shard.blocks.lock();
                shard.bytes.store(0, Ordering::Relaxed);
                std::mem::take(&mut *blocks)
            };
            all.extend(held.into_iter().map(|h| h.block(index)));
        }
        all
    }

    /// Puts back blocks taken by `take_all` that could not be settled (a failed sync).
    pub fn put_back(&self, blocks: Vec<FreedBlock>) {
        for block in blocks {
            if let Some(shard) = self.shards.get(block.shard % SHARDS) {
                let mut blocks = shard.blocks.lock();
                blocks.push(Held::new(&block));
                shard.bytes.fetch_add(block.len, Ordering::Relaxed);
            }
        }
    }

    /// Bytes held.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.bytes.load(Ordering::Relaxed)).sum()
    }

    /// Forgets every held block (the record area was emptied).
    pub fn clear(&self) {
        drop(self.take_all());
    }
}

/// Held bytes past which a writer synchronizes, for a record area of `area` bytes.
fn settle_threshold(area: u64) -> u64 {
    (area / SETTLE_DIVISOR).max(MIN_SETTLE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(offset: u64, len: u64) -> FreedBlock {
        FreedBlock { offset, len, dead_tag: 0xC0, shard: offset as usize % SHARDS }
    }

    #[test]
    fn a_held_block_keeps_its_offset_tag_and_length_in_16_bytes() {
        let block =
            FreedBlock { offset: super::super::header::MAX_ADDRESSABLE - 1, len: u64::MAX, dead_tag: 0xff, shard: 3 };
        assert_eq!(Held::new(&block).block(3), block);
        assert_eq!(Held::new(&FreedBlock { offset: 0, dead_tag: 0, ..block }).block(3).offset, 0);
        assert_eq!(std::mem::size_of::<Held>(), 16);
    }

    #[test]
    fn held_until_taken_and_due_past_the_threshold() {
        let freed = Freed::default();
        freed.hold(block(100, 40), 0);
        freed.hold(block(200, 60), 0);
        assert_eq!(freed.bytes(), 100);
        assert!(!freed.settle_due());
        let mut taken = freed.take_all();
        taken.sort_by_key(|b| b.offset);
        assert_eq!(taken, vec![block(100, 40), block(200, 60)]);
        assert_eq!(freed.bytes(), 0);
        freed.put_back(taken);
        assert_eq!(freed.bytes(), 100);
        freed.hold(block(3, MIN_SETTLE_BYTES), 0);
        assert!(freed.settle_due());
        freed.clear();
        assert!(!freed.settle_due());
        assert_eq!(freed.bytes(), 0);
    }
}
