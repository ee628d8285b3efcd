//! Kura: embedded key-value databases.
//!
//! Every engine implements [`Dbm`]; [`open`] picks one by path extension or parameters, from
//! the one list of engines in [`registry`]. The folders mirror the architecture:
//! - `dbm.rs`, `batch.rs`, `error.rs`: the interface every engine implements;
//! - `registry.rs`: the engines, what each one is, and opening by extension or `engine=`;
//! - `codec/`: record and page compression and its framing;
//! - `file/`: mapped files, the inter-process lock, atomic replacement (the only `unsafe`
//!   that touches memory the kernel maps);
//! - `hash_dbm/`: HashDbm, the file hash database (`.kuh`);
//! - `tree_dbm/`: TreeDbm, the ordered file B+ tree database (`.kut`);
//! - `memory_dbm/`: TinyDbm, BabyDbm and CacheDbm, the in-memory engines (`.kumt`, `.kumb`,
//!   `.kumc`), with the two hash tables and the B+ tree they are built on;
//! - `compact_dbm/`: CompactDbm, records kept serialized and compressed in buckets (`.kumz`).

pub mod batch;
pub mod codec;
pub mod compact_dbm;
pub mod dbm;
pub mod error;
pub mod file;
pub mod hash_dbm;
mod key_prefix;
pub mod memory_dbm;
pub mod registry;
mod spin_lock;
pub mod split_mix;
pub mod tree_dbm;

pub use batch::{BatchOp, WriteBatch};
pub use codec::{Codec, CodecKind};
pub use compact_dbm::CompactDbm;
pub use dbm::{Action, Cursor, Dbm, DbmExt, OpenMode, OrderedCursor, Params, Processor, Properties, Records};
pub use error::{Error, ErrorKind, Result};
pub use hash_dbm::HashDbm;
pub use memory_dbm::{BabyDbm, CacheDbm, TinyDbm};
pub use registry::{engines, open, Engine, Storage};
pub use tree_dbm::TreeDbm;
