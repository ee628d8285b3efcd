//! The in-memory engines, optionally backed by a snapshot file (design: docs/memory.md):
//! - `tiny.rs`: TinyDbm (`.kumt`), a sharded open-addressing hash table;
//! - `cache.rs`: CacheDbm (`.kumc`), a sharded chained hash table with per-slot LRU eviction
//!   under a record cap and a memory cap;
//! - `segcache.rs`: SegCacheDbm (`.kums`), the same caps as CacheDbm with records packed into
//!   segments (`segments.rs`) behind an index of 8 bytes a record (`segment_index.rs`), evicted
//!   a segment at a time;
//! - `baby.rs`: BabyDbm (`.kumb`), an ordered B+ tree (`btree/`) with a bidirectional cursor.
//!
//! Their parts: `record.rs` (a record in 24 bytes, inline when small), `key_hash.rs` (the key
//! hash and slot choice both hash tables use), `open_table.rs` (a TinyDbm slot: records in
//! linearly probed cells), `chained_table.rs` (a CacheDbm slot: a slab and bucket chains),
//! `lru.rs` (one slot's recency list), `sketch.rs` (one slot's access frequencies, for
//! CacheDbm's `policy=tinylfu` admission), `slotted.rs` (what the sharded engines share: the
//! reads of a slot's table and the cursor), `slot_group.rs` (a group of keys of a batched lookup, planned by slot), `snapshot.rs` (the file format), `backing.rs` (what
//! all three share about their life: open modes, atomic write-back, closed state, `inspect`'s
//! common properties; CompactDbm in `compact_dbm/` reuses `backing.rs`, `snapshot.rs`,
//! `key_hash.rs` and the lock padding of `slotted.rs`).

mod baby;
pub(crate) mod backing;
mod btree;
mod cache;
mod chained_table;
pub(crate) mod key_hash;
mod lru;
mod open_table;
mod record;
mod segcache;
mod segment_index;
mod segments;
mod sketch;
mod slot_group;
pub(crate) mod slotted;
pub(crate) mod snapshot;
pub(crate) mod snapshot_salvage;
mod tiny;

pub use baby::{BabyCursor, BabyDbm};
pub use cache::CacheDbm;
pub use segcache::SegCacheDbm;
pub use tiny::TinyDbm;
