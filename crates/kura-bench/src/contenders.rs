//! The caches under test, behind one small interface: look a key up, and on a miss store it
//! (the cache-aside pattern of a memcached client). All hold 8-byte values and are sized to
//! the same number of entries.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

use kura::{Action, CacheDbm, Clock, Dbm, Expiry, ManualClock, SegCacheDbm};

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

/// Requests per second of the trace's virtual clock (`SegCacheExpiry`).
pub const REQUESTS_PER_SECOND: u64 = 10_000;

/// SegCacheDbm at a given memory, under expiry (issue 42): a quarter of the keys (those
/// divisible by 4) expire `ttl` seconds after they are stored, the others never, on a virtual
/// clock that moves a second every `REQUESTS_PER_SECOND` requests. The value is the item's
/// expiry (8 bytes, 0: never), as kura-server keeps it in its item header, and a read of an
/// expired one is a miss (then stored anew); `aware` also hands the expiry to the engine
/// (`Dbm::process_expiring`), as `kura serve` does since issue 42, so that the engine
/// reclaims expired records first. The two differ in nothing else.
pub struct SegCacheExpiry {
    dbm: SegCacheDbm,
    clock: ManualClock,
    requests: AtomicU64,
    ttl: u64,
    aware: bool,
}

impl SegCacheExpiry {
    pub fn new(bytes: u64, ttl: u64, aware: bool) -> kura::Result<SegCacheExpiry> {
        let params = kura::Params::new().with("cap_rec_num", u64::from(u32::MAX)).with("cap_mem_bytes", bytes);
        let clock = ManualClock::new(1_000_000_000);
        let dbm = SegCacheDbm::new(&params)?.with_clock(Clock::Manual(clock.clone()));
        Ok(SegCacheExpiry { dbm, clock, requests: AtomicU64::new(0), ttl, aware })
    }
}

impl Contender for SegCacheExpiry {
    fn name(&self) -> &'static str {
        if self.aware {
            "kura SegCacheDbm (same memory, expiry given to the engine)"
        } else {
            "kura SegCacheDbm (same memory, expiry in the value only)"
        }
    }

    fn held(&self) -> Option<u64> {
        self.dbm.count().ok()
    }

    fn access(&self, key: u64) -> bool {
        if (self.requests.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(REQUESTS_PER_SECOND) {
            self.clock.advance(1);
        }
        let now = self.clock.now();
        let stored_key = key.to_be_bytes();
        let mut hit = false;
        // As `Kura::access`: an error would only show as a lower hit ratio.
        let _ = self.dbm.get_with(&stored_key, &mut |value| {
            let expiry = value.and_then(|value| <[u8; 8]>::try_from(value).ok()).map(u64::from_be_bytes);
            hit = expiry.is_some_and(|expiry| expiry == 0 || expiry > now);
        });
        if !hit {
            let expiry = if key.is_multiple_of(4) { now + self.ttl } else { 0 };
            let value = expiry.to_be_bytes();
            let engine_expiry = if self.aware { Expiry::at_unix_seconds(expiry) } else { None };
            let _ =
                self.dbm.process_expiring(&stored_key, &mut |_| (Action::Set(Cow::Borrowed(&value)), engine_expiry));
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
