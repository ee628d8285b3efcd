//! An in-memory copy of the bucket array, read instead of the file's.
//!
//! Looking up a key starts with one random access into the bucket array. In the mapped
//! file that access crosses 4 KiB pages at random, and on a virtual machine the TLB misses
//! cost more than the cache misses. The copy lives in anonymous memory backed by huge pages
//! (2 MiB) where the kernel allows it, with aligned 8-byte entries. Every update still goes
//! to the file first, so the file alone is always the truth after a crash; the copy is
//! rebuilt from the file at open.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

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
    pub fn get(&self, index: u64) -> Option<u64> {
        self.entries().get(index as usize).map(|e| e.load(Ordering::Relaxed))
    }

    #[inline]
    pub fn set(&self, index: u64, offset: u64) {
        if let Some(entry) = self.entries().get(index as usize) {
            entry.store(offset, Ordering::Relaxed);
        }
    }

    /// Fills the copy from the file's bucket array (5-byte little-endian entries).
    pub fn load(&self, packed: &[u8], width: usize) {
        for (entry, bytes) in self.entries().iter().zip(packed.chunks_exact(width)) {
            let mut word = [0u8; 8];
            if let Some(low) = word.get_mut(..width) {
                low.copy_from_slice(bytes);
            }
            entry.store(u64::from_le_bytes(word), Ordering::Relaxed);
        }
    }

    pub fn reset(&self) {
        for entry in self.entries() {
            entry.store(0, Ordering::Relaxed);
        }
    }

    /// Bytes of memory the copy takes.
    pub fn memory_size(&self) -> usize {
        self.map.len()
    }
}
