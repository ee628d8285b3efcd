//! A lock group's small cache of decoded buckets, for skewed reads: a hot bucket is decoded
//! once and then read from here while no write touches it.
//!
//! Bounded in bytes (what the allocator holds for each entry, counted in `inspect`'s memory
//! figure). A bucket is admitted on its second miss among the group's recent misses, so a
//! uniform scan of a table far larger than the cache does not pay a copy per get for entries
//! that would be evicted unread. Eviction is least recently used; a group's cache holds a few
//! buckets, so its entries are a short vector searched linearly.

use std::sync::Arc;

use super::block::heap_size;

/// Recent misses remembered per group, for admission.
const RECENT_MISSES: usize = 16;
/// What an `Arc<[u8]>` adds to its bytes: two reference counts.
const ARC_HEADER: usize = 16;

#[derive(Default)]
pub struct DecodedCache {
    capacity: usize,
    used: usize,
    /// (bucket within the group, its raw bytes), least recently used first.
    entries: Vec<(usize, Arc<[u8]>)>,
    recent_misses: [usize; RECENT_MISSES],
    next_miss: usize,
}

fn entry_size(raw: &[u8]) -> usize {
    heap_size(raw.len() + ARC_HEADER)
}

impl DecodedCache {
    pub fn new(capacity: usize) -> DecodedCache {
        DecodedCache { capacity, recent_misses: [usize::MAX; RECENT_MISSES], ..DecodedCache::default() }
    }

    pub fn is_enabled(&self) -> bool {
        self.capacity > 0
    }

    /// The decoded bucket, if cached; marks it most recently used.
    pub fn get(&mut self, bucket: usize) -> Option<Arc<[u8]>> {
        let index = self.entries.iter().position(|(b, _)| *b == bucket)?;
        let entry = self.entries.remove(index);
        let raw = Arc::clone(&entry.1);
        self.entries.push(entry);
        Some(raw)
    }

    /// Offers a bucket just decoded after a miss: kept on its second recent miss.
    pub fn offer(&mut self, bucket: usize, raw: &[u8]) {
        let size = entry_size(raw);
        if size > self.capacity {
            return;
        }
        if !self.recent_misses.contains(&bucket) {
            if let Some(slot) = self.recent_misses.get_mut(self.next_miss % RECENT_MISSES) {
                *slot = bucket;
            }
            self.next_miss = self.next_miss.wrapping_add(1);
            return;
        }
        self.invalidate(bucket);
        while self.used + size > self.capacity && !self.entries.is_empty() {
            let (_, evicted) = self.entries.remove(0);
            self.used -= entry_size(&evicted);
        }
        self.used += size;
        self.entries.push((bucket, Arc::from(raw)));
    }

    /// Drops a bucket that a write changed.
    pub fn invalidate(&mut self, bucket: usize) {
        if let Some(index) = self.entries.iter().position(|(b, _)| *b == bucket) {
            let (_, raw) = self.entries.remove(index);
            self.used -= entry_size(&raw);
        }
    }

    /// Drops everything (clear, rebuild), keeping the capacity.
    pub fn clear(&mut self) {
        self.entries = Vec::new();
        self.used = 0;
        self.recent_misses = [usize::MAX; RECENT_MISSES];
    }

    /// Bytes held: the entries and the entry list.
    pub fn memory_bytes(&self) -> usize {
        self.used + heap_size(self.entries.capacity() * std::mem::size_of::<(usize, Arc<[u8]>)>())
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    #[test]
    fn admits_on_the_second_miss_evicts_lru_and_stays_under_its_capacity() {
        let mut cache = DecodedCache::new(1000);
        let raw = vec![7u8; 200];
        cache.offer(1, &raw);
        assert!(cache.get(1).is_none(), "one miss does not admit");
        cache.offer(1, &raw);
        assert_eq!(&*cache.get(1).unwrap(), &raw[..]);
        for bucket in 2..10 {
            cache.offer(bucket, &raw);
            cache.offer(bucket, &raw);
            assert!(cache.used <= 1000);
        }
        assert!(cache.get(1).is_none(), "the oldest entry was evicted");
        assert!(cache.get(9).is_some());
        cache.invalidate(9);
        assert!(cache.get(9).is_none());
        cache.offer(20, &vec![0u8; 2000]);
        cache.offer(20, &vec![0u8; 2000]);
        assert!(cache.get(20).is_none(), "larger than the whole cache");
    }
}
