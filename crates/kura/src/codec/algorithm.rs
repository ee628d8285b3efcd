//! What every compression algorithm provides to the framing in `mod.rs`: compress a value,
//! and decompress a frame into at most the length the frame claims. One file per algorithm
//! implements it; `registry.rs` lists them.

use super::{CodecKind, Effort};
use crate::error::{Error, Result};

pub trait Algorithm: Send + Sync {
    /// Appends the compressed form of `raw` to `out`, at the level of `effort` (algorithms
    /// with one level use it for both).
    fn compress(&self, raw: &[u8], effort: Effort, out: &mut Vec<u8>) -> Result<()>;

    /// Decompresses `body` into `out` (empty, with capacity for `raw_len`), producing at most
    /// `raw_len` bytes; the caller checks that exactly `raw_len` came out.
    fn decompress(&self, body: &[u8], raw_len: usize, out: &mut Vec<u8>) -> Result<()>;

    /// Frees the compression contexts kept for the next `compress`; the next one makes a
    /// context anew. Algorithms without costly contexts keep nothing.
    fn release_compressors(&self) {}

    /// The dictionary it was made with (empty for algorithms that take none).
    fn dictionary(&self) -> &[u8] {
        &[]
    }
}

/// The BrokenData error of a frame that `kind` cannot decode.
pub fn corrupt(kind: CodecKind, detail: impl std::fmt::Display) -> Error {
    Error::broken(format!("corrupted {kind} frame: {detail}"))
}
