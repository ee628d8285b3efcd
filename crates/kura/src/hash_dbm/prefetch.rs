//! Prefetching the two places a bucket lives: its entry in the file and in the memory copy.
//!
//! A write to a bucket stores into the file's bucket array, a line the lookup itself never
//! reads (it reads the memory copy). Left alone, that store misses the cache, and the next
//! atomic instruction (a lock release) stalls until it completes, so every write pays two
//! memory latencies one after the other. Prefetching both lines before taking the stripe
//! lock lets the two misses overlap each other and the lock's own atomic.
//!
//! The addresses are kept as plain integers, refreshed whenever the storage is replaced:
//! a prefetch is only a hint, never faults, and a stale address costs nothing but the hint.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::header::BUCKET_WIDTH;
use crate::file::prefetch;

#[derive(Debug, Default)]
pub struct BucketPrefetcher {
    file_buckets: AtomicUsize,
    memory_buckets: AtomicUsize,
}

impl BucketPrefetcher {
    /// Points the prefetcher at a storage's bucket array in the file mapping and bucket copy.
    pub fn aim(&self, file_buckets: usize, memory_base: usize) {
        self.file_buckets.store(file_buckets, Ordering::Relaxed);
        self.memory_buckets.store(memory_base, Ordering::Relaxed);
    }

    /// Starts loading `bucket`'s memory entry, and its file entry too when it will be written.
    #[inline]
    pub fn bucket(&self, bucket: u64, for_write: bool) {
        let index = bucket as usize;
        prefetch(self.memory_buckets.load(Ordering::Relaxed).wrapping_add(index.wrapping_mul(8)));
        if for_write {
            let file = self.file_buckets.load(Ordering::Relaxed);
            prefetch(file.wrapping_add(index.wrapping_mul(BUCKET_WIDTH as usize)));
        }
    }
}
