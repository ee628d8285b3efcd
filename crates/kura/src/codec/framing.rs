//! Whether a zstd frame repeats what its container already says.
//!
//! A standard zstd frame starts with a 4-byte magic number and states its content size; the
//! codec's framing (`varint(raw_len)`, the codec named by the container) says both again. The
//! files (HashDbm, TreeDbm) keep the standard frame: their record checksum is 13 bits in a
//! small HashDbm record (docs/format.md), and a flipped bit in the magic or the size is one
//! more that the decoder refuses. CompactDbm drops them (5 bytes of a 150-byte frame): its
//! blocks live in memory, and in its snapshot each one is under a 64-bit checksum.
//!
//! Decoding needs no setting: a frame that starts with the magic number is standard, any
//! other bare (a bare frame's first byte cannot be the magic's first, see `zstd.rs`).

/// The frames one codec writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// zstd's standard frame, with its magic number and content size.
    Standard,
    /// zstd's magicless frame without a content size.
    Bare,
}
