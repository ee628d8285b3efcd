//! Where a codec's frames are kept, in a file (HashDbm, TreeDbm) or in memory (CompactDbm),
//! which decides two things about the zstd frames it writes.
//!
//! **Their framing.** A standard zstd frame starts with a 4-byte magic number and states its
//! content size; the codec's framing (`varint(raw_len)`, the codec named by the container)
//! says both again. Files keep the standard frame: their record checksum is 13 bits in a
//! small HashDbm record (docs/format.md), and a flipped bit in the magic or the size is one
//! more that the decoder refuses. Memory drops them (5 bytes of a 150-byte frame): a block
//! lives in memory, and in the snapshot under its own 64-bit checksum. A file's codec decodes
//! standard frames only (a file never held others); a memory codec decodes bare frames and
//! standard ones (snapshots written before 2026-11-27), told apart by the magic number, which
//! no bare frame starts with (see `zstd.rs`).
//!
//! **`zstd-dict`'s dense level** (import, rebuild, bulk batches; `effort.rs`). On the
//! dictionary data set (CompactDbm, one record a bucket, a 1 MiB dictionary) level 12 held
//! 164.5 B a record and loaded 20k records a second, level 14 161.3 B at 10k/s, level 16
//! (zstd's first optimal-parsing level) 152.0 B at 5.9k/s, level 19 151.1 B at 3.1k/s; on
//! 2M short records level 16 held 29.9 B against 32.5 B, loading 63k records a second
//! against 113k. A map in memory is built to hold the most records in the least memory and is
//! then read many times, so it takes level 16, where that curve bends. Files keep 12: their
//! import time is what `make bench` weighs against Tkrzw's and LevelDB's.

/// Where the frames of one codec are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Residence {
    /// In a file: zstd's standard frame; `zstd-dict` level 12 for bulk writes.
    File,
    /// In memory: zstd's magicless frame without a content size; `zstd-dict` level 16 for
    /// bulk writes.
    Memory,
}
