//! Records and free blocks in the record area of a HashDbm file.
//!
//! Every block starts with a tag byte whose top two bits give its kind:
//!
//! ```text
//! 00 000000   filler: one unused byte (left over when a free block is split)
//! 01 C sssss  record:    tag | next | key_len | value_len | check_lo | key | value
//! 10 C sssss  tombstone: the same layout, marking a removal (appending mode)
//! 11 0 xxxxx  dead record: a record unlinked from its chain; same layout, skipped
//! 11 1 00000  free span: tag | total_len (varint), then unused bytes
//! ```
//!
//! `C` says the value is stored compressed; `sssss` and `check_lo` form a 13-bit checksum
//! of the key hash, the flag and the stored value. `next` is the offset of the next record
//! in the bucket's chain (0 ends it), as a varint whose width is fixed when the record is
//! written. Sizes are varints. Nothing is aligned: small records cost 6 to 9 bytes beyond
//! their key and value.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::encoding::{decode_varint, encode_varint, encode_varint_padded, varint_len};
use crate::error::{Error, Result};

pub const KIND_MASK: u8 = 0xC0;
pub const KIND_RECORD: u8 = 0x40;
pub const KIND_TOMBSTONE: u8 = 0x80;
pub const KIND_FREE: u8 = 0xC0;
pub const COMPRESSED_BIT: u8 = 0x20;
const CHECK_HI_MASK: u8 = 0x1F;
pub const TAG_FREE_SPAN: u8 = 0xE0;
pub const TAG_FILLER: u8 = 0x00;

/// The largest key: big enough for any real key, small enough that a corrupted length
/// cannot make a reader copy gigabytes before noticing.
pub const MAX_KEY_SIZE: usize = 1 << 24;
/// The largest stored value (after compression).
pub const MAX_VALUE_SIZE: usize = (1 << 32) - 1;
/// The most bytes a record header can take: tag, next (6), two sizes (4 + 5), check.
pub const MAX_HEADER_SIZE: usize = 1 + 6 + 4 + 5 + 1;
/// The smallest free span (tag + one-byte length); smaller leftovers become filler bytes.
pub const MIN_SPAN: u64 = 2;

/// The widest chain pointer: 6 varint bytes hold any offset below 2^42, past the largest file.
pub const MAX_NEXT_WIDTH: usize = 6;

/// Width of a chain pointer written when the record area ends at `data_end`: one byte more
/// than `max(next, data_end)` needs. A pointer is later rewritten to the record's successor's
/// successor (an unlink), which existed when it was written and fits, or to the new version
/// of its successor (a replace in place, `HashDbm::apply`), which can be newer: the spare
/// byte lets it point anywhere below 128 times that data end, and a replace whose new
/// version does not fit takes the slower way. A record ending its chain keeps next = 0
/// forever (nothing is ever linked behind it) and needs one byte.
pub fn next_width(next: u64, data_end: u64) -> usize {
    if next == 0 {
        1
    } else {
        (varint_len(next.max(data_end)) + 1).min(MAX_NEXT_WIDTH)
    }
}

/// The 13-bit checksum of a record.
pub fn checksum(key_hash: u64, compressed: bool, stored_value: &[u8]) -> u16 {
    let seed = key_hash ^ u64::from(compressed);
    (xxh3_64_with_seed(stored_value, seed) >> 51) as u16
}

/// A parsed record header. Offsets are absolute file offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub tag: u8,
    pub next: u64,
    /// Offset and width of the `next` field, for rewriting it in place.
    pub next_at: u64,
    pub next_width: u8,
    pub key_len: usize,
    pub value_len: usize,
    pub header_len: usize,
    pub check_lo: u8,
}

impl RecordHeader {
    pub fn kind(&self) -> u8 {
        self.tag & KIND_MASK
    }

    pub fn is_compressed(&self) -> bool {
        self.tag & COMPRESSED_BIT != 0
    }

    pub fn total_len(&self) -> u64 {
        (self.header_len + self.key_len + self.value_len) as u64
    }

    pub fn checksum(&self) -> u16 {
        (u16::from(self.tag & CHECK_HI_MASK) << 8) | u16::from(self.check_lo)
    }

    /// Parses a record, tombstone or dead record header at `offset` from `bytes` (which
    /// start there and may be cut at the end of the file). Lengths are bounded, not yet
    /// checked against the file: the caller slices the body, which checks that.
    #[inline]
    pub fn parse(bytes: &[u8], offset: u64) -> Result<RecordHeader> {
        match Self::parse_short(bytes, offset) {
            Some(header) => Ok(header),
            None => Self::parse_any(bytes, offset),
        }
    }

    /// The common case in a few instructions, as every get parses at least one header: the
    /// longest possible header fits in `bytes` (the record is not the last few bytes of the
    /// file) and its fields are within the bounds `parse_any` enforces. None for anything
    /// else, valid or not, which `parse_any` then decides; what this accepts, `parse_any`
    /// parses to the same header.
    #[inline(always)]
    fn parse_short(bytes: &[u8], offset: u64) -> Option<RecordHeader> {
        let head: &[u8; MAX_HEADER_SIZE] = bytes.get(..MAX_HEADER_SIZE)?.try_into().ok()?;
        let &[tag, ref fields @ ..] = head;
        if !is_record_tag(tag) {
            return None;
        }
        // Field widths at most 6, 4 and 5 bytes: 1 + 6 + 4 + 5 + 1 = MAX_HEADER_SIZE, so the
        // check byte after them is always inside `head`.
        let next = short_varint(fields, 6)?;
        let rest = fields.get(next.1..)?;
        let fields = match *rest {
            // Keys and values under 128 bytes: one byte each.
            [key_len, value_len, check_lo, ..] if (key_len | value_len) & 0x80 == 0 => {
                Fields { next, key_len: (u64::from(key_len), 1), value_len: (u64::from(value_len), 1), check_lo }
            }
            _ => {
                let key_len = short_varint(rest, 4)?;
                let rest = rest.get(key_len.1..)?;
                let value_len = short_varint(rest, 5)?;
                if key_len.0 > MAX_KEY_SIZE as u64 || value_len.0 > MAX_VALUE_SIZE as u64 {
                    return None;
                }
                Fields { next, key_len, value_len, check_lo: *rest.get(value_len.1)? }
            }
        };
        Some(Self::assemble(tag, offset, fields))
    }

    /// Any header, and every error: see `parse`.
    #[inline(never)]
    fn parse_any(bytes: &[u8], offset: u64) -> Result<RecordHeader> {
        let broken = |what: &str| Error::broken(format!("record at {offset}: {what}"));
        let (&tag, rest) = bytes.split_first().ok_or_else(|| broken("truncated"))?;
        if !is_record_tag(tag) {
            return Err(broken("not a record"));
        }
        let next = decode_varint(rest).ok_or_else(|| broken("bad chain pointer"))?;
        let rest = rest.get(next.1..).unwrap_or_default();
        let key_len = decode_varint(rest).ok_or_else(|| broken("bad key size"))?;
        let rest = rest.get(key_len.1..).unwrap_or_default();
        let value_len = decode_varint(rest).ok_or_else(|| broken("bad value size"))?;
        let check_lo = *rest.get(value_len.1).ok_or_else(|| broken("truncated"))?;
        if key_len.0 > MAX_KEY_SIZE as u64 {
            return Err(broken("key size out of range"));
        }
        if value_len.0 > MAX_VALUE_SIZE as u64 || next.1 > MAX_NEXT_WIDTH {
            return Err(broken("size out of range"));
        }
        Ok(Self::assemble(tag, offset, Fields { next, key_len, value_len, check_lo }))
    }

    /// The header of the record at `offset` from its fields, once both parsers checked them
    /// (sizes in range, pointer at most 6 bytes).
    #[inline(always)]
    fn assemble(tag: u8, offset: u64, fields: Fields) -> RecordHeader {
        let Fields {
            next: (next, next_width),
            key_len: (key_len, key_width),
            value_len: (value_len, value_width),
            check_lo,
        } = fields;
        RecordHeader {
            tag,
            next,
            next_at: offset + 1,
            next_width: next_width as u8,
            key_len: key_len as usize,
            value_len: value_len as usize,
            header_len: 1 + next_width + key_width + value_width + 1,
            check_lo,
        }
    }
}

/// A header's varint fields as read, each `(value, width in bytes)`, and its check byte.
struct Fields {
    next: (u64, usize),
    key_len: (u64, usize),
    value_len: (u64, usize),
    check_lo: u8,
}

/// Whether a tag byte starts a record, a tombstone or a dead record (not a free block).
#[inline(always)]
fn is_record_tag(tag: u8) -> bool {
    tag & KIND_MASK != 0 && !(tag & KIND_MASK == KIND_FREE && tag & COMPRESSED_BIT != 0)
}

/// A varint of at most `max_width` bytes at the start of `bytes` (None if longer or cut),
/// decoded as `decode_varint` does; inlined into the header fast path.
#[inline(always)]
fn short_varint(bytes: &[u8], max_width: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().take(max_width).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Encodes a record's (or tombstone's) header into `out` and returns its length: the bytes
/// that go before the key and the stored value.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn encode_record_header(
    out: &mut [u8; MAX_HEADER_SIZE],
    kind: u8,
    compressed: bool,
    check: u16,
    next: u64,
    width: usize,
    key_len: usize,
    stored_len: usize,
) -> usize {
    let tag = kind | if compressed { COMPRESSED_BIT } else { 0 } | ((check >> 8) as u8 & CHECK_HI_MASK);
    let mut next_bytes = [0u8; 10];
    let next_field = next_bytes.get_mut(..width).unwrap_or_default();
    encode_varint_padded(next, next_field);
    let mut key_size = [0u8; 10];
    let key_size_len = encode_varint(key_len as u64, &mut key_size);
    let mut value_size = [0u8; 10];
    let value_size_len = encode_varint(stored_len as u64, &mut value_size);
    let fields: [&[u8]; 5] = [
        &[tag],
        next_field,
        key_size.get(..key_size_len).unwrap_or_default(),
        value_size.get(..value_size_len).unwrap_or_default(),
        &[check as u8],
    ];
    // At most 1 + 6 + 4 + 5 + 1 bytes (MAX_HEADER_SIZE) for the widths and sizes written.
    let mut len = 0;
    for field in fields {
        if let Some(target) = out.get_mut(len..len + field.len()) {
            target.copy_from_slice(field);
        }
        len += field.len();
    }
    len
}

/// Appends a full record (or tombstone) to `out`.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub fn encode_record(
    out: &mut Vec<u8>,
    kind: u8,
    compressed: bool,
    check: u16,
    next: u64,
    width: usize,
    key: &[u8],
    stored_value: &[u8],
) {
    let mut header = [0u8; MAX_HEADER_SIZE];
    let len = encode_record_header(&mut header, kind, compressed, check, next, width, key.len(), stored_value.len());
    out.extend_from_slice(header.get(..len).unwrap_or_default());
    out.extend_from_slice(key);
    out.extend_from_slice(stored_value);
}

/// The bytes that mark `len` free bytes: a span header, or filler bytes when too short.
pub fn encode_free(len: u64, out: &mut Vec<u8>) {
    out.clear();
    if len < MIN_SPAN {
        out.resize(len as usize, TAG_FILLER);
        return;
    }
    out.push(TAG_FREE_SPAN);
    let mut size = [0u8; 10];
    let n = encode_varint(len, &mut size);
    // The span's own length includes its header; a length whose varint does not fit in the
    // span (impossible for len >= 2 and a 1-byte varint) falls back to filler.
    if 1 + n as u64 > len {
        out.clear();
        out.resize(len as usize, TAG_FILLER);
        return;
    }
    out.extend_from_slice(size.get(..n).unwrap_or_default());
}

/// What the scanner finds at an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Filler,
    FreeSpan { len: u64 },
    Record(RecordHeader),
}

/// Parses the block at `offset` (bytes start there).
pub fn parse_block(bytes: &[u8], offset: u64) -> Result<Block> {
    match bytes.first() {
        None => Err(Error::broken(format!("block at {offset}: truncated"))),
        Some(&TAG_FILLER) => Ok(Block::Filler),
        Some(&TAG_FREE_SPAN) => {
            let (len, width) = decode_varint(bytes.get(1..).unwrap_or_default())
                .ok_or_else(|| Error::broken(format!("free span at {offset}: bad length")))?;
            if len < 1 + width as u64 {
                return Err(Error::broken(format!("free span at {offset}: impossible length {len}")));
            }
            Ok(Block::FreeSpan { len })
        }
        Some(_) => RecordHeader::parse(bytes, offset).map(Block::Record),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn record_round_trip(key in proptest::collection::vec(any::<u8>(), 1..40),
                             value in proptest::collection::vec(any::<u8>(), 0..300),
                             next in 0u64..(1 << 40), compressed: bool) {
            let data_end = next.max(1 << 20);
            let width = next_width(next, data_end);
            let check = checksum(7, compressed, &value);
            let mut out = Vec::new();
            encode_record(&mut out, KIND_RECORD, compressed, check, next, width, &key, &value);
            let header = RecordHeader::parse(&out, 100).unwrap();
            prop_assert_eq!(header.next, next);
            prop_assert_eq!(header.key_len, key.len());
            prop_assert_eq!(header.value_len, value.len());
            prop_assert_eq!(header.checksum(), check);
            prop_assert_eq!(header.is_compressed(), compressed);
            prop_assert_eq!(header.total_len() as usize, out.len());
            prop_assert_eq!(&out[header.header_len..header.header_len + key.len()], &key[..]);
        }

        #[test]
        fn short_parse_agrees_with_the_general_one(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            // Random bytes rarely form a header; the second test covers real records.
            if let Some(short) = RecordHeader::parse_short(&bytes, 100) {
                prop_assert_eq!(RecordHeader::parse_any(&bytes, 100).ok(), Some(short));
            }
        }

        #[test]
        fn short_parse_takes_whole_records(key in proptest::collection::vec(any::<u8>(), 0..300),
                                           value in proptest::collection::vec(any::<u8>(), 0..20_000),
                                           next in 0u64..(1 << 42)) {
            let width = next_width(next, next.max(1));
            let mut out = Vec::new();
            encode_record(&mut out, KIND_RECORD, false, checksum(3, false, &value), next, width, &key, &value);
            out.resize(out.len().max(MAX_HEADER_SIZE), 0);
            let short = RecordHeader::parse_short(&out, 7);
            prop_assert!(short.is_some());
            prop_assert_eq!(short, RecordHeader::parse_any(&out, 7).ok());
        }

        #[test]
        fn free_blocks_parse_to_their_length(len in 1u64..100_000) {
            let mut out = Vec::new();
            encode_free(len, &mut out);
            match parse_block(&out, 0).unwrap() {
                Block::Filler => prop_assert!(len < MIN_SPAN),
                Block::FreeSpan { len: parsed } => prop_assert_eq!(parsed, len),
                Block::Record(_) => prop_assert!(false, "a free block parsed as a record"),
            }
        }
    }

    #[test]
    fn small_record_is_compact() {
        let mut out = Vec::new();
        encode_record(&mut out, KIND_RECORD, false, 0, 0, 1, b"00000001", b"abcdefgh");
        assert_eq!(out.len(), 16 + 5);
    }
}
