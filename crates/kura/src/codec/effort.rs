//! How hard a write compresses: densely when many records are written at once and the
//! result is kept (import, rebuild, a bulk batch), quickly when one write waits on it.
//!
//! Only `zstd-dict` tells the two apart today. Its dense level (12) takes about 35 µs for a
//! 555-byte record of the dictionary data set and its quick level (3) about 4 µs, for frames
//! about 8% larger: an import pays the dense level once per record, while a map that
//! re-encodes a bucket on every set (CompactDbm) would pay it on every write. Frames of both
//! levels decode with the same dictionary, so the choice is never recorded.

/// The compression effort of one encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    /// The codec's densest configured level: for import, rebuild and bulk batches.
    Dense,
    /// A level cheap enough for a single write that waits on it.
    Quick,
}
