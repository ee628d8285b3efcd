//! The hash table of one CacheDbm slot: records in a slab (a `Vec` whose indices never move),
//! chained from a bucket array of 4-byte links that grows (by rehashing) with the records, up
//! to one bucket per record of the slot's cap.
//!
//! Why not `HashMap<Box<[u8]>, Box<[u8]>>`: that costs two heap blocks per record and leaves
//! no stable handle for the LRU list. Here a record costs one 32-byte slab entry plus its
//! share of the bucket array, with no allocation unless it is larger than `INLINE_CAPACITY`;
//! and the slab index, which never moves while the record lives, is the LRU list's handle.

use std::num::NonZeroU32;

use super::record::{RecordBytes, HEAP_OVERHEAD, INLINE_CAPACITY};
use super::slotted::SlotRecords;
use crate::error::{Error, ErrorKind, Result};
use crate::file::prefetch;

/// A link to a slab entry: `index + 1`, so that `None` is 0 and a fresh bucket array of `None`
/// is zeroed memory the allocator hands out lazily.
pub type Link = Option<NonZeroU32>;

/// The largest slab index a link can hold.
const MAX_ENTRIES: usize = u32::MAX as usize - 1;

/// The link to slab index `index`. The LRU list (`lru.rs`) is indexed like the slab and links
/// the same way.
#[inline]
pub fn link(index: u32) -> Link {
    NonZeroU32::new(index.wrapping_add(1))
}

/// The slab index a (non-empty) link points to.
#[inline]
pub fn index_of(link: NonZeroU32) -> u32 {
    link.get() - 1
}

/// One slab entry. Vacant entries (`record` None) form the free list through `chain`.
struct Entry {
    record: Option<RecordBytes>,
    /// Low half of the key's hash: picks the bucket (also after growth) and skips most key
    /// comparisons on a chain.
    hash: u32,
    /// Next entry in the bucket's chain, or in the free list.
    chain: Link,
}

// 24-byte record + two u32: the per-record footprint documented in docs/memory.md.
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

/// Size of one slab entry, for memory accounting.
pub const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();
/// Size of one bucket, for memory accounting.
pub const BUCKET_BYTES: usize = std::mem::size_of::<Link>();

/// The accounted size of a record: its slab entry, its key and value bytes (counted even
/// when they sit inside the entry, which keeps the figure an upper bound), and the
/// allocator's overhead when they spill to the heap.
#[inline]
pub fn record_cost(key_len: usize, value_len: usize) -> usize {
    let payload = key_len.saturating_add(value_len);
    let spill = if payload > INLINE_CAPACITY { HEAP_OVERHEAD } else { 0 };
    ENTRY_BYTES.saturating_add(payload).saturating_add(spill)
}

#[inline]
fn cost_of(record: &RecordBytes) -> usize {
    record_cost(record.key().len(), record.value().len())
}

/// Buckets a table starts with when its cap allows more: small enough that an empty cache
/// with a large cap costs almost nothing, large enough that small caches never rehash.
pub const INITIAL_BUCKETS: usize = 1024;

pub struct SlotTable {
    entries: Vec<Entry>,
    buckets: Vec<Link>,
    /// The most buckets the table grows to (its record cap: load factor <= 1 at the cap).
    max_buckets: usize,
    free: Link,
    len: usize,
    /// Sum of `record_cost` over the live records.
    record_bytes: usize,
}

impl SlotTable {
    /// A table that grows to at most `max_buckets` buckets (at least 1, at most 2^31),
    /// starting with `INITIAL_BUCKETS` (or `max_buckets` if fewer), with room reserved for
    /// `reserve` records. Any bucket count works (no power of two): the cap's array is sized
    /// to the record cap exactly, rather than rounded up, which saves up to half of it. The
    /// array starts small and doubles (rehashing the chains) whenever the records outnumber
    /// the buckets, so its memory follows what the table holds, not what it could hold: a
    /// whole array sized to the cap would be resident as soon as records spread over it. The
    /// reserved slab is address space only (the allocator maps large blocks lazily):
    /// reserving it once spares the slab the copies of growing by doubling, and the heap the
    /// freed blocks those leave behind.
    pub fn new(max_buckets: usize, reserve: usize) -> SlotTable {
        let max_buckets = max_buckets.clamp(1, 1 << 31);
        SlotTable {
            entries: Vec::with_capacity(reserve),
            buckets: vec![None; max_buckets.min(INITIAL_BUCKETS)],
            max_buckets,
            free: None,
            len: 0,
            record_bytes: 0,
        }
    }

    pub fn num_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The bucket count the table may grow to (its record cap).
    pub fn max_buckets(&self) -> usize {
        self.max_buckets
    }

    /// Doubles the bucket array (up to `max_buckets`) once the records outnumber the buckets,
    /// relinking every live entry into its new bucket. Amortized: each record is relinked
    /// O(1) times on average; lookups never see the old array (the slot's lock is held).
    fn grow_if_loaded(&mut self) {
        let current = self.buckets.len();
        if self.len <= current || current >= self.max_buckets {
            return;
        }
        let grown = current.saturating_mul(2).min(self.max_buckets);
        self.buckets = vec![None; grown];
        for index in 0..self.entries.len() {
            let Some(entry) = self.entries.get(index) else { break };
            if entry.record.is_none() {
                // Vacant: its chain is the free list's, left as it is.
                continue;
            }
            let bucket = self.bucket_of(entry.hash);
            let Some(head) = self.buckets.get_mut(bucket) else { continue };
            let previous_head = head.replace(link(index as u32).expect("slab indices stay below u32::MAX"));
            self.entry_mut(index as u32).chain = previous_head;
        }
    }

    /// Accounted bytes of the records (see `record_cost`), without the bucket array.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
    }

    /// Removes every record, keeping the bucket count.
    pub fn clear(&mut self) {
        self.entries = Vec::with_capacity(self.entries.capacity());
        self.buckets = vec![None; self.buckets.len()];
        self.free = None;
        self.len = 0;
        self.record_bytes = 0;
    }

    /// Multiply-shift: maps the 32-bit hash evenly onto any bucket count.
    #[inline]
    fn bucket_of(&self, hash: u32) -> usize {
        ((u64::from(hash) * self.buckets.len() as u64) >> 32) as usize
    }

    #[inline]
    fn entry(&self, index: u32) -> &Entry {
        self.entries.get(index as usize).expect("invariant: links point inside the slab")
    }

    #[inline]
    fn entry_mut(&mut self, index: u32) -> &mut Entry {
        self.entries.get_mut(index as usize).expect("invariant: links point inside the slab")
    }

    /// Starts loading the bucket of the key hashed `hash` (a batched lookup's first stage).
    #[inline]
    pub fn prefetch_bucket(&self, hash: u64) {
        if let Some(bucket) = self.buckets.get(self.bucket_of(hash as u32)) {
            prefetch(std::ptr::from_ref(bucket) as usize);
        }
    }

    /// The first slab index of the chain the key hashed `hash` is looked up in, having
    /// started loading that entry (the second stage); None for an empty chain.
    #[inline]
    pub fn prefetch_chain_head(&self, hash: u64) -> Option<u32> {
        let hash = hash as u32;
        let index = index_of(self.buckets.get(self.bucket_of(hash)).copied().flatten()?);
        let entry = self.entries.get(index as usize)?;
        prefetch(std::ptr::from_ref(entry) as usize);
        Some(index)
    }

    /// Starts loading the spilled record of the entry at `index` when its hash is `hash`'s.
    #[inline]
    pub fn prefetch_spilled(&self, index: u32, hash: u64) {
        if let Some(Entry { record: Some(record), hash: entry_hash, .. }) = self.entries.get(index as usize) {
            if *entry_hash == hash as u32 {
                record.prefetch_spilled();
            }
        }
    }

    /// Replaces the value of the live record at `index`.
    pub fn set_value(&mut self, index: u32, value: &[u8]) -> Result<()> {
        let record = self.entry_mut(index).record.as_mut().ok_or_else(|| Error::not_found("the record is gone"))?;
        let old_cost = cost_of(record);
        record.set_value(value)?;
        let new_cost = cost_of(record);
        self.record_bytes = self.record_bytes - old_cost + new_cost;
        Ok(())
    }

    /// Adds a record for a key known to be absent; returns its slab index.
    pub fn insert(&mut self, record: RecordBytes, hash: u64) -> Result<u32> {
        let hash = hash as u32;
        let cost = cost_of(&record);
        let bucket = self.bucket_of(hash);
        let head = self.buckets.get(bucket).copied().flatten();
        let index = match self.free {
            Some(free) => {
                let index = index_of(free);
                let entry = self.entry_mut(index);
                let next_free = entry.chain;
                *entry = Entry { record: Some(record), hash, chain: head };
                self.free = next_free;
                index
            }
            None => {
                if self.entries.len() >= MAX_ENTRIES {
                    return Err(Error::new(ErrorKind::Limit, "too many records in one slot"));
                }
                self.entries.push(Entry { record: Some(record), hash, chain: head });
                (self.entries.len() - 1) as u32
            }
        };
        if let Some(slot) = self.buckets.get_mut(bucket) {
            *slot = link(index);
        }
        self.len += 1;
        self.record_bytes += cost;
        self.grow_if_loaded();
        Ok(index)
    }

    /// Removes the live record at `index` and returns it.
    pub fn remove(&mut self, index: u32) -> Option<RecordBytes> {
        let (hash, next) = {
            let entry = self.entries.get(index as usize)?;
            entry.record.as_ref()?;
            (entry.hash, entry.chain)
        };
        // Unlink from the chain: either the bucket points at it, or some predecessor does.
        let bucket = self.bucket_of(hash);
        let target = link(index);
        let mut previous: Option<u32> = None;
        let mut cursor = self.buckets.get(bucket).copied().flatten();
        while let Some(current) = cursor {
            if Some(current) == target {
                break;
            }
            previous = Some(index_of(current));
            cursor = self.entry(index_of(current)).chain;
        }
        cursor?;
        match previous {
            None => {
                if let Some(slot) = self.buckets.get_mut(bucket) {
                    *slot = next;
                }
            }
            Some(previous) => self.entry_mut(previous).chain = next,
        }
        let free = self.free;
        let entry = self.entry_mut(index);
        let record = entry.record.take();
        entry.chain = free;
        self.free = target;
        self.len -= 1;
        self.record_bytes -= record.as_ref().map_or(0, cost_of);
        record
    }
}

impl SlotRecords for SlotTable {
    type Record<'a> = &'a RecordBytes;

    fn len(&self) -> usize {
        self.len
    }

    /// The slab index of `key`'s record.
    #[inline]
    fn find(&self, key: &[u8], hash: u64) -> Option<u32> {
        let hash = hash as u32;
        let mut cursor = self.buckets.get(self.bucket_of(hash)).copied().flatten();
        while let Some(current) = cursor {
            let index = index_of(current);
            let entry = self.entry(index);
            if entry.hash == hash && entry.record.as_ref().is_some_and(|r| r.key() == key) {
                return Some(index);
            }
            cursor = entry.chain;
        }
        None
    }

    /// The record at `index`, if that entry is live.
    #[inline]
    fn get(&self, index: u32) -> Option<&RecordBytes> {
        self.entries.get(index as usize).and_then(|e| e.record.as_ref())
    }

    /// The slab length: at most `MAX_ENTRIES`, below 2^32.
    fn index_end(&self) -> u32 {
        self.entries.len() as u32
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
    use crate::memory_dbm::key_hash::hash_key;
    use std::collections::HashMap;

    #[test]
    fn buckets_grow_with_the_records_and_keep_every_key_findable() {
        let mut table = SlotTable::new(100_000, 0);
        assert_eq!(table.num_buckets(), INITIAL_BUCKETS);
        for i in 0..5000u32 {
            let key = i.to_le_bytes();
            table.insert(RecordBytes::new(&key, b"value of some length").unwrap(), hash_key(&key)).unwrap();
            assert!(table.len() <= table.num_buckets());
        }
        assert_eq!(table.num_buckets(), 8192);
        for i in (0..5000u32).step_by(5) {
            let key = i.to_le_bytes();
            let index = table.find(&key, hash_key(&key)).unwrap();
            table.remove(index).unwrap();
        }
        for i in 0..5000u32 {
            let key = i.to_le_bytes();
            assert_eq!(table.find(&key, hash_key(&key)).is_some(), i % 5 != 0, "key {i}");
        }
        // Chains relinked by the rehashes unlink and free correctly: reinserting reuses the
        // vacant entries.
        let end = table.index_end();
        for i in (0..5000u32).step_by(5) {
            let key = i.to_le_bytes();
            table.insert(RecordBytes::new(&key, b"again").unwrap(), hash_key(&key)).unwrap();
        }
        assert_eq!(table.index_end(), end);
        assert_eq!(table.len(), 5000);
        assert_eq!(table.num_buckets(), 8192);
    }

    #[test]
    fn insert_find_remove() {
        let mut table = SlotTable::new(700, 0);
        let mut model = HashMap::new();
        for i in 0..2000u32 {
            let key = i.to_be_bytes();
            let index = table.insert(RecordBytes::new(&key, &[i as u8; 30]).unwrap(), hash_key(&key)).unwrap();
            model.insert(key, index);
        }
        // A cap below INITIAL_BUCKETS starts at the cap and never grows past it.
        assert_eq!(table.num_buckets(), 700);
        assert_eq!(table.max_buckets(), 700);
        for i in (0..2000u32).step_by(3) {
            let key = i.to_be_bytes();
            let index = table.find(&key, hash_key(&key)).unwrap();
            assert_eq!(index, model[&key]);
            assert_eq!(table.remove(index).unwrap().key(), &key);
            assert_eq!(table.find(&key, hash_key(&key)), None);
        }
        assert_eq!(table.len(), 2000 - 667);
        assert_eq!((0..2000).filter(|&i| table.get(i).is_some()).count(), table.len());
        for i in 0..2000u32 {
            let key = i.to_be_bytes();
            assert_eq!(table.find(&key, hash_key(&key)).is_some(), i % 3 != 0);
        }
    }
}
