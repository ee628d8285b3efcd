//! The caches under test, behind one small interface: look a key up, and on a miss store it
//! (the cache-aside pattern of a memcached client). All hold 8-byte values and are sized to
//! the same number of entries.

use kura::{CacheDbm, Dbm};

/// A cache shared by the replaying threads.
pub trait Contender: Sync {
    fn name(&self) -> &'static str;
    /// Requests `key`; true on a hit. A miss stores a value for it.
    fn access(&self, key: u64) -> bool;
}

/// Kura's CacheDbm: per-slot LRU lists under a record cap, keys as 8 big-endian bytes.
pub struct Kura(pub CacheDbm);

impl Kura {
    pub fn new(capacity: u64) -> kura::Result<Kura> {
        Ok(Kura(CacheDbm::new(&kura::Params::new().with("cap_rec_num", capacity))?))
    }
}

impl Contender for Kura {
    fn name(&self) -> &'static str {
        "kura CacheDbm"
    }

    fn access(&self, key: u64) -> bool {
        let key = key.to_be_bytes();
        // Errors other than NotFound cannot happen on an open in-memory cache; a failed
        // set would only show as a lower hit ratio.
        let hit = self.0.get(&key).is_ok();
        if !hit {
            let _ = self.0.set(&key, &key, true);
        }
        hit
    }
}

/// moka's synchronous cache (TinyLFU admission in front of LRU eviction).
pub struct Moka(pub moka::sync::Cache<u64, u64>);

impl Moka {
    pub fn new(capacity: u64) -> Moka {
        Moka(moka::sync::Cache::new(capacity))
    }
}

impl Contender for Moka {
    fn name(&self) -> &'static str {
        "moka sync::Cache"
    }

    fn access(&self, key: u64) -> bool {
        let hit = self.0.get(&key).is_some();
        if !hit {
            self.0.insert(key, key);
        }
        hit
    }
}

/// quick_cache's sharded synchronous cache (CLOCK-Pro/S3-FIFO-like admission).
pub struct QuickCache(pub quick_cache::sync::Cache<u64, u64>);

impl QuickCache {
    pub fn new(capacity: u64) -> QuickCache {
        QuickCache(quick_cache::sync::Cache::new(usize::try_from(capacity).unwrap_or(usize::MAX)))
    }
}

impl Contender for QuickCache {
    fn name(&self) -> &'static str {
        "quick_cache sync::Cache"
    }

    fn access(&self, key: u64) -> bool {
        let hit = self.0.get(&key).is_some();
        if !hit {
            self.0.insert(key, key);
        }
        hit
    }
}
