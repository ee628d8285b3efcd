//! An in-memory copy of the bucket array, read instead of the file's.
//!
//! Looking up a key starts with one random access into the bucket array. In the mapped
//! file that access crosses 4 KiB pages at random, and on a virtual machine the TLB misses
//! cost more than the cache misses. The copy lives in anonymous memory backed by huge pages
//! (2 MiB) where the kernel allows it, with aligned 8-byte entries. Every update still goes
//! to the file first, so the file alone is always the truth after a crash; the copy is
//! rebuilt from the file at open.
//!
//! Each entry also carries a 24-bit filter of the keys in the bucket's chain (two bits per
//! key, Bloom-style): a key whose bits are not all set is not in the chain, so inserting a
//! new key or looking up a missing one reads no record at all. Bits are added on insert,
//! never cleared on removal (they only cost a needless walk), and recomputed exactly
//! whenever a lookup walks a whole chain. Entries loaded from the file start with every
//! bit set: "unknown, walk the chain".

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Bits of an entry that hold the offset (files are at most 2^40 bytes).
const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// The filter of a chain whose keys are not known.
pub const UNKNOWN_FILTER: u32 = (1 << 24) - 1;

/// The filter bits of a key hash. The bucket is chosen by the hash's high bits, so these
/// come from the low ones.
#[inline]
pub fn filter_bits(hash: u64) -> u32 {
    (1 << ((hash & 0xffff) % 24)) | (1 << (((hash >> 16) & 0xffff) % 24))
}

/// A bucket's head offset and key filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub head: u64,
    pub filter: u32,
}

impl Entry {
    /// False when the key of `hash` is certainly not in the chain.
    #[inline]
    pub fn may_contain(&self, hash: u64) -> bool {
        let bits = filter_bits(hash);
        self.head != 0 && self.filter & bits == bits
    }
}

pub struct BucketCache {
    map: memmap2::MmapMut,
    len: usize,
}

impl BucketCache {
    /// An all-empty array of `len` buckets.
    pub fn new(len: u64) -> Result<BucketCache> {
        let len = usize::try_from(len).map_err(|_| Error::invalid("too many buckets for this machine"))?;
        let bytes = len.checked_mul(8).ok_or_else(|| Error::invalid("too many buckets"))?.max(8);
        let map = memmap2::MmapMut::map_anon(bytes).map_err(|e| Error::io("allocate the bucket cache", e))?;
        // Huge pages are an optimization: where the kernel refuses them, small pages do.
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(BucketCache { map, len })
    }

    #[inline]
    fn entries(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page-aligned (so 8-byte aligned), at least `len * 8` bytes
        // long, zero-initialized (a valid AtomicU64), lives as long as `self`, and is only
        // accessed through atomics from here on.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), self.len) }
    }

    #[inline]
    pub fn get(&self, index: u64) -> Option<Entry> {
        self.entries().get(index as usize).map(|e| {
            let word = e.load(Ordering::Relaxed);
            Entry { head: word & OFFSET_MASK, filter: (word >> OFFSET_BITS) as u32 }
        })
    }

    /// The first index in `from..to` whose chain is not empty, or `to`. Entries are read one
    /// by one with relaxed loads, so a chain linked or emptied meanwhile may show either way.
    pub fn first_occupied(&self, from: u64, to: u64) -> u64 {
        let window = self.entries().get(from.min(self.len as u64) as usize..to.min(self.len as u64) as usize);
        let occupied = window.and_then(|w| w.iter().position(|e| e.load(Ordering::Relaxed) & OFFSET_MASK != 0));
        occupied.map_or(to, |at| from + at as u64)
    }

    /// Stores an entry; an empty chain always gets an empty filter.
    #[inline]
    pub fn set(&self, index: u64, entry: Entry) {
        if let Some(slot) = self.entries().get(index as usize) {
            let filter = if entry.head == 0 { 0 } else { u64::from(entry.filter & UNKNOWN_FILTER) };
            slot.store((entry.head & OFFSET_MASK) | (filter << OFFSET_BITS), Ordering::Relaxed);
        }
    }

    /// Fills the copy, all empty until now, from the file's bucket array (5-byte
    /// little-endian entries).
    pub fn load(&self, packed: &[u8], width: usize) {
        for (entry, bytes) in self.entries().iter().zip(packed.chunks_exact(width)) {
            let mut word = [0u8; 8];
            if let Some(low) = word.get_mut(..width) {
                low.copy_from_slice(bytes);
            }
            let head = u64::from_le_bytes(word) & OFFSET_MASK;
            // The copy starts zeroed: an empty bucket's page of it is left untouched, so a
            // file of few records costs little memory and time to open.
            if head != 0 {
                entry.store(head | (u64::from(UNKNOWN_FILTER) << OFFSET_BITS), Ordering::Relaxed);
            }
        }
    }

    pub fn reset(&self) {
        for entry in self.entries() {
            entry.store(0, Ordering::Relaxed);
        }
    }

    /// Where the entries start, for prefetch hints.
    pub fn address(&self) -> usize {
        self.map.as_ptr() as usize
    }

    /// Bytes of memory the copy takes.
    pub fn memory_size(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;
    use crate::split_mix::SplitMix64;

    /// `first_occupied` against a plain scan of a model, over random sparse arrays and
    /// windows (those past the end included).
    #[test]
    fn first_occupied_finds_what_a_scan_of_the_model_finds() {
        let mut rng = SplitMix64::new(7);
        for round in 0..200 {
            let len = 1 + rng.below(5000);
            let cache = BucketCache::new(len).unwrap();
            let mut model = vec![0u64; len as usize];
            for _ in 0..rng.below(8) {
                let index = rng.below(len);
                let head = 1 + rng.below(1 << 30);
                cache.set(index, Entry { head, filter: UNKNOWN_FILTER });
                model[index as usize] = head;
            }
            if round % 3 == 0 && len > 1 {
                // A chain emptied again reads as empty.
                let index = rng.below(len);
                cache.set(index, Entry { head: 0, filter: UNKNOWN_FILTER });
                model[index as usize] = 0;
            }
            let from = rng.below(len + 10);
            let to = from + rng.below(len + 10);
            let expected = (from..to).find(|&i| model.get(i as usize).is_some_and(|&h| h != 0)).unwrap_or(to);
            assert_eq!(cache.first_occupied(from, to), expected, "round {round}: {from}..{to} of {len}");
        }
    }
}
