//! The page cache: decoded pages of the committed tree, by file offset, within a byte budget.
//!
//! Readers share it under the tree's read lock, so it is split into shards, each a small
//! mutex-guarded map with a CLOCK ring: a hit sets the page's reference bit, eviction sweeps
//! the ring and drops the first page whose bit is clear. A page is only ever cached under the
//! offset it was read from or written to, and the writer drops the entry when the slot is
//! freed, so a reused slot never serves a stale page.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use super::page::Page;

const SHARDS: usize = 16;

/// Hashes the u64 keys (offsets, page ids) with one multiplication: they are already spread.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (value ^ (value >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

struct Slot {
    page: Arc<Page>,
    size: usize,
    /// The length of the file slot the page was read from or written to: what freeing that
    /// slot needs, without reading its header again (from the disk, in a file larger than
    /// memory).
    slot_len: u64,
    referenced: bool,
}

#[derive(Default)]
struct Shard {
    pages: IdMap<Slot>,
    ring: VecDeque<u64>,
    bytes: usize,
}

pub struct PageCache {
    shards: Vec<Mutex<Shard>>,
    shard_budget: usize,
}

impl PageCache {
    pub fn new(budget_bytes: usize) -> PageCache {
        PageCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_budget: (budget_bytes / SHARDS).max(1),
        }
    }

    fn shard(&self, offset: u64) -> Option<&Mutex<Shard>> {
        // Slots are 16-byte aligned and pages span kilobytes: mix before choosing.
        let mixed = (offset >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59;
        self.shards.get(mixed as usize % SHARDS)
    }

    /// Whether the page of `offset` is cached (without marking it used).
    pub fn contains(&self, offset: u64) -> bool {
        self.shard(offset).is_some_and(|shard| shard.lock().pages.contains_key(&offset))
    }

    pub fn get(&self, offset: u64) -> Option<Arc<Page>> {
        self.with(offset, Arc::clone)
    }

    /// Runs `use_page` on the page cached at `offset`, if any, with its shard locked: this
    /// spares the reference count's two atomic operations of `get`. `use_page` must not call
    /// into the cache.
    #[inline]
    pub fn with<R>(&self, offset: u64, use_page: impl FnOnce(&Arc<Page>) -> R) -> Option<R> {
        let mut shard = self.shard(offset)?.lock();
        let slot = shard.pages.get_mut(&offset)?;
        if !slot.referenced {
            // (Written only when it changes: a store to a shared line costs other readers.)
            slot.referenced = true;
        }
        Some(use_page(&slot.page))
    }

    /// Caches `page`, read from or written to the slot of `slot_len` bytes at `offset`.
    pub fn insert(&self, offset: u64, page: Arc<Page>, slot_len: u64) {
        let Some(shard) = self.shard(offset) else {
            return;
        };
        let size = page.memory_size();
        let mut shard = shard.lock();
        if let Some(old) = shard.pages.insert(offset, Slot { page, size, slot_len, referenced: false }) {
            shard.bytes -= old.size;
        } else {
            shard.ring.push_back(offset);
        }
        shard.bytes += size;
        self.evict_over_budget(&mut shard, offset);
    }

    /// Drops pages other than `keep`'s, by CLOCK, until the shard is within its budget.
    fn evict_over_budget(&self, shard: &mut Shard, keep: u64) {
        // Sweep: at most two passes over the ring, so a shard of hot pages still terminates.
        let mut steps = shard.ring.len() * 2;
        while shard.bytes > self.shard_budget && steps > 0 {
            steps -= 1;
            let Some(victim) = shard.ring.pop_front() else {
                break;
            };
            if victim == keep {
                shard.ring.push_back(victim);
                continue;
            }
            match shard.pages.get_mut(&victim) {
                None => {}
                Some(slot) if slot.referenced => {
                    slot.referenced = false;
                    shard.ring.push_back(victim);
                }
                Some(_) => {
                    if let Some(old) = shard.pages.remove(&victim) {
                        shard.bytes -= old.size;
                    }
                }
            }
        }
    }

    /// Puts `page` in place of the one cached at `offset` (a copy of it), if that one is still
    /// cached; returns whether it was.
    pub fn replace(&self, offset: u64, page: Arc<Page>) -> bool {
        let Some(shard) = self.shard(offset) else {
            return false;
        };
        let size = page.memory_size();
        let mut shard = shard.lock();
        let Some(slot) = shard.pages.get_mut(&offset) else {
            return false;
        };
        let old_size = std::mem::replace(&mut slot.size, size);
        slot.page = page;
        shard.bytes = shard.bytes - old_size + size;
        // A copy holds the values its original lent: it may take more than its budget left.
        self.evict_over_budget(&mut shard, offset);
        true
    }

    /// Drops the page cached at `offset`, if any (its slot is being freed or rewritten), and
    /// returns it with its slot's length.
    pub fn remove(&self, offset: u64) -> Option<(Arc<Page>, u64)> {
        let mut shard = self.shard(offset)?.lock();
        let slot = shard.pages.remove(&offset)?;
        shard.bytes -= slot.size;
        // The ring keeps the stale offset until the sweep meets it; bound the leftovers.
        if shard.ring.len() > 2 * shard.pages.len() + 64 {
            let Shard { pages, ring, .. } = &mut *shard;
            ring.retain(|o| pages.contains_key(o));
        }
        Some((slot.page, slot.slot_len))
    }

    pub fn clear(&self) {
        for shard in &self.shards {
            *shard.lock() = Shard::default();
        }
    }

    /// The byte budget the cache was made with.
    pub fn budget(&self) -> usize {
        self.shard_budget.saturating_mul(SHARDS)
    }

    pub fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }
}
