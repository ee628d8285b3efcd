//! Kura: embedded key-value databases.
//!
//! Every engine implements [`Dbm`]; [`open`] picks one by path extension or parameters, from
//! the one list of engines in [`registry`]. The folders mirror the architecture:
//! - `dbm.rs`, `batch.rs`, `error.rs`, `check.rs`, `stats.rs`: the interface every engine
//!   implements, and what `inspect` reports (typed [`Stats`]);
//! - `expiry.rs`: the instant a record expires at and the clock it is read against;
//! - `engine.rs`, `registry.rs`: what an engine is, and the list of them with opening by
//!   extension or `engine=`;
//! - `encoding/`: varints, a bounds-checked reader and header layouts, for every format;
//! - `codec/`: record and page compression and its framing;
//! - `file/`: mapped files, the inter-process lock, atomic replacement (the only `unsafe`
//!   that touches memory the kernel maps);
//! - `hash_dbm/`: HashDbm, the file hash database (`.kuh`);
//! - `tree_dbm/`: TreeDbm, the ordered file B+ tree database (`.kut`);
//! - `fuzz.rs`: entry points over arbitrary bytes for the fuzz targets in `fuzz/`;
//! - `memory_dbm/`: TinyDbm, BabyDbm and CacheDbm, the in-memory engines (`.kumt`, `.kumb`,
//!   `.kumc`), with the two hash tables and the B+ tree they are built on;
//! - `shard_dbm/`: ShardDbm, N databases of another engine split by key hash;
//! - `compact_dbm/`: CompactDbm, records kept serialized and compressed in buckets (`.kumz`);
//! - `import/`: the parallel bulk loader of TSV and JSON lines (`kura import`);
//! - `typed_dbm.rs`: an open database with its two file engines called by type, for the
//!   bindings' hot paths.

//!
//! The public API is what users call, re-exported here at the crate root: the database
//! (`open`, `Dbm`, the engine types, `Params`, `WriteBatch`, `Error`, `Stats`, `CodecKind`),
//! the registry of engines, and the modules whose items the CLI, the server and the bindings
//! use by path (`codec`, `import`, `shard_dbm`). Everything else is
//! private to the crate.

#![deny(missing_docs)]

mod batch;
#[cfg(any(test, feature = "binding"))]
pub mod binding;
mod check;
pub mod codec;
mod compact_dbm;
mod dbm;
#[cfg(feature = "internals")]
pub mod encoding;
#[cfg(not(feature = "internals"))]
mod encoding;
mod engine;
mod error;
mod expiry;
mod file;
mod freed_memory;
#[cfg(feature = "internals")]
pub mod fuzz;
mod hash_dbm;
pub mod import;
mod journal;
mod key_prefix;
mod memory_budget;
mod memory_dbm;
mod multi_get;
mod packed_bytes;
pub mod registry;
#[cfg(test)]
mod salvage_soak;
pub mod shard_dbm;
mod spin_lock;
#[cfg(feature = "internals")]
pub mod split_mix;
#[cfg(not(feature = "internals"))]
mod split_mix;
mod stats;
mod sync;
mod tree_dbm;
mod typed_dbm;

pub use batch::{BatchOp, WriteBatch};
pub use check::{CheckReport, Place, Problem};
pub use codec::{Codec, CodecKind};
pub use compact_dbm::{CompactCursor, CompactDbm};
pub use dbm::{
    parse_size, Action, Cursor, Dbm, DbmExt, ExpiringProcessor, OpenMode, OrderedCursor, Params, Processor, Records,
};
/// LEB128 varints as Kura's formats write them, for a layer that keeps its own metadata in
/// values (kura-server's item header).
pub use encoding::{decode_varint, put_varint, varint_len};
pub use engine::RestoreReport;
pub use error::{Error, ErrorKind, Result};
pub use expiry::{Clock, Expiry, ManualClock};
/// A probe at every sync that makes writes durable, for the project's power-loss tests.
#[cfg(feature = "internals")]
pub use file::sync_probe;
pub use hash_dbm::{HashDbm, RecordCheck, UpdateMode, MAX_KEY_SIZE};
pub use journal::journal_path;
pub use memory_dbm::{BabyCursor, BabyDbm, CacheDbm, SegCacheDbm, TinyDbm};
pub use packed_bytes::PackedBytes;
pub use registry::{engines, open, AfterPowerLoss, Engine, Order, Storage};
pub use shard_dbm::ShardDbm;
pub use stats::{Caps, CodecStat, Stat, Stats};
/// Damaging tree files on purpose, for the project's own corruption tests.
#[cfg(feature = "internals")]
pub use tree_dbm::forge;
/// TreeDbm's write buffer, for the test of its memory accounting against the allocator
/// (tests/write_buffer_memory.rs).
#[cfg(feature = "internals")]
pub use tree_dbm::write_buffer::WriteBuffer;
pub use tree_dbm::{Comparator, KeyRange, TreeCursor, TreeDbm, TreeRange};
pub use typed_dbm::TypedDbm;
