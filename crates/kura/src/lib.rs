//! Kura: embedded key-value databases.
//!
//! Every engine implements [`Dbm`]; [`open`] picks one by path extension or parameters.
//! The folders mirror the architecture:
//! - `codec/`: record and page compression and its framing;
//! - `file/`: mapped files, the inter-process lock, atomic replacement;
//! - `hash/`: HashDbm, the file hash database (`.kuh`);
//! - `memory/`: TinyDbm, BabyDbm, CacheDbm, the in-memory engines (`.kumt`, `.kumb`, `.kumc`);
//! - `tree/`: TreeDbm, the ordered file B+ tree database (`.kut`).

pub mod batch;
pub mod codec;
pub mod dbm;
pub mod error;
pub mod file;
pub mod hash;
mod key_prefix;
pub mod memory;
mod open;
mod spin_lock;
pub mod split_mix;
pub mod tree;

pub use batch::{BatchOp, WriteBatch};
pub use codec::{Codec, CodecKind};
pub use dbm::{Action, Cursor, Dbm, DbmExt, OrderedCursor, Params, Processor, Properties, Records};
pub use error::{Error, ErrorKind, Result};
pub use hash::HashDbm;
pub use memory::{BabyDbm, CacheDbm, TinyDbm};
pub use open::{open, EngineKind, OpenMode};
pub use tree::TreeDbm;
