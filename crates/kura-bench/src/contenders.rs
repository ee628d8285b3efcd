//! The caches under test, behind one small interface: look a key up, and on a miss store it
//! (the cache-aside pattern of a memcached client). All hold 8-byte values and are sized to
//! the same number of entries.

use kura::{CacheDbm, Dbm, SegCacheDbm};

/// A cache shared by the replaying threads.
pub trait Contender: Sync {
    fn name(&self) -> &'static str;
    /// Requests `key`; true on a hit. A miss stores a value for it.
    fn access(&self, key: u64) -> bool;
    /// The records held now, where the cache tells (None for the peers).
    fn held(&self) -> Option<u64> {
        None
    }
}

/// Kura's caches, keys as 8 big-endian bytes: CacheDbm (per-slot LRU lists under a record
/// cap) with `policy=lru` (the default) or `policy=tinylfu` (frequency-sketch admission), and
/// SegCacheDbm (records packed into segments, CLOCK over segments) at the same record count
/// or at the same memory.
pub struct Kura {
    dbm: Box<dyn Dbm>,
    name: &'static str,
}

impl Kura {
    /// The default cache (`policy=lru`).
    pub fn lru(capacity: u64) -> kura::Result<Kura> {
        Self::with_policy(capacity, "lru", "kura CacheDbm")
    }

    /// The cache with TinyLFU admission (`policy=tinylfu`).
    pub fn tinylfu(capacity: u64) -> kura::Result<Kura> {
        Self::with_policy(capacity, "tinylfu", "kura CacheDbm (tinylfu)")
    }

    fn with_policy(capacity: u64, policy: &str, name: &'static str) -> kura::Result<Kura> {
        let params = kura::Params::new().with("cap_rec_num", capacity).with("policy", policy);
        Ok(Kura { dbm: Box::new(CacheDbm::new(&params)?), name })
    }

    /// SegCacheDbm bounded by the record count alone, as the others.
    pub fn segcache_records(capacity: u64) -> kura::Result<Kura> {
        let params = kura::Params::new().with("cap_rec_num", capacity);
        Ok(Kura { dbm: Box::new(SegCacheDbm::new(&params)?), name: "kura SegCacheDbm (same records)" })
    }

    /// SegCacheDbm bounded by `bytes` of memory only (with a record cap it never reaches).
    pub fn segcache_memory(bytes: u64) -> kura::Result<Kura> {
        let params = kura::Params::new().with("cap_rec_num", u64::from(u32::MAX)).with("cap_mem_bytes", bytes);
        Ok(Kura { dbm: Box::new(SegCacheDbm::new(&params)?), name: "kura SegCacheDbm (same memory)" })
    }

    /// The accounted memory of CacheDbm (`policy=lru`) holding `capacity` records of the
    /// bench's size (8-byte keys and values): what "the same memory" is.
    pub fn lru_memory(capacity: u64) -> kura::Result<u64> {
        let dbm = CacheDbm::new(&kura::Params::new().with("cap_rec_num", capacity))?;
        for key in 0..capacity {
            dbm.set(&key.to_be_bytes(), &key.to_be_bytes(), true)?;
        }
        Ok(dbm.mem_usage())
    }
}

impl Contender for Kura {
    fn name(&self) -> &'static str {
        self.name
    }

    fn held(&self) -> Option<u64> {
        self.dbm.count().ok()
    }

    fn access(&self, key: u64) -> bool {
        let key = key.to_be_bytes();
        // Errors other than NotFound cannot happen on an open in-memory cache; a failed
        // set would only show as a lower hit ratio. Under tinylfu a set may be declined
        // (still Ok): the key is simply not cached yet.
        let hit = self.dbm.get(&key).is_ok();
        if !hit {
            let _ = self.dbm.set(&key, &key, true);
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
