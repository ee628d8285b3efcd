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
//!
//! Since format version 3 a record that crosses a 512-byte sector boundary carries 24 more
//! check bits (`check_wide`, 3 bytes after `check_lo`). A power loss can tear such a record
//! (one sector written, the other not), and its value then passed the 13 bits alone once in
//! 8,192 tears; a record inside one sector is written whole or not at all. Whether a record
//! has them follows from its offset and its length without them (`CheckLayout::is_wide`),
//! so that reader and writer agree without a flag: about one record in five of 100 bytes
//! pays the 3 bytes.
//!
//! Since format version 5 every record, tombstone and dead record carries them (37 check
//! bits): a damaged value inside one sector (a flipped bit, not a tear) passed 13 bits once
//! in 8,192, which the all-positions salvage soak met as wrong values (docs/durability.md).
//! `record_check=narrow` keeps version 4's layout for a user who wants the 3 bytes back.

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
/// Bytes of the wide check a record crossing a sector carries (format versions 3 and 4), and
/// every record (version 5).
pub const WIDE_CHECK_LEN: usize = 3;
/// Check bits in every record: the tag's low 5 bits and `check_lo`.
pub const NARROW_CHECK_BITS: u32 = 13;
/// Check bits the wide check adds.
pub const WIDE_CHECK_BITS: u32 = 8 * WIDE_CHECK_LEN as u32;
/// The most bytes a record header can take: tag, next (6), two sizes (4 + 5), check, wide
/// check.
pub const MAX_HEADER_SIZE: usize = 1 + 6 + 4 + 5 + 1 + WIDE_CHECK_LEN;
/// The unit a disk writes whole: a record within one is never torn by a power loss.
pub const SECTOR_SIZE: u64 = 512;
/// The smallest free span (tag + one-byte length); smaller leftovers become filler bytes.
pub const MIN_SPAN: u64 = 2;

/// The widest chain pointer: 6 varint bytes hold any offset below 2^42, past the largest file.
pub const MAX_NEXT_WIDTH: usize = 6;

/// How far a chain pointer must be able to point later, beyond what it points at now. A
/// pointer is later rewritten to the record's successor's successor (an unlink), which
/// existed when it was written, or to the new version of its successor (a replace in place,
/// `HashDbm::apply`), which can be newer; a replace whose new version does not fit takes the
/// slower way (the new version written again at the head of the chain: a second record write
/// and two pointer writes instead of one). Either reach covers the data end at the pointer's
/// writing, so an unlink always fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointerReach {
    /// A file growing as it is written: one byte more than `max(next, data_end)` needs, so
    /// that the pointer reaches anywhere below 128 times that data end.
    Growing,
    /// A rebuild's copy, written whole to about a known size: anywhere below this offset
    /// (twice that size), or the data end when the copy outgrew it, with no spare byte.
    Below(u64),
}

/// Width of a chain pointer to `next` written when the record area ends at `data_end`. A
/// record ending its chain keeps next = 0 forever (nothing is ever linked behind it) and
/// needs one byte.
pub fn next_width(next: u64, data_end: u64, reach: PointerReach) -> usize {
    if next == 0 {
        return 1;
    }
    let reached = next.max(data_end);
    let width = match reach {
        PointerReach::Growing => varint_len(reached) + 1,
        PointerReach::Below(limit) => varint_len(reached.max(limit.saturating_sub(1))),
    };
    width.min(MAX_NEXT_WIDTH)
}

/// Which records of a file carry the wide check: none (format versions 1 and 2), those
/// crossing a sector boundary (versions 3 and 4), or every one (version 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckLayout {
    Narrow,
    WideAcrossSectors,
    Wide,
}

impl CheckLayout {
    /// Whether a record at `offset` whose length without a wide check is `narrow_len` has
    /// one: it would cross a sector boundary with it. (A record that crosses without it
    /// crosses with it; one that crosses only with it has it, and so crosses.)
    #[inline(always)]
    pub fn is_wide(self, offset: u64, narrow_len: u64) -> bool {
        match self {
            CheckLayout::Narrow => false,
            CheckLayout::WideAcrossSectors => crosses_sector(offset, narrow_len + WIDE_CHECK_LEN as u64),
            CheckLayout::Wide => true,
        }
    }

    /// The fewest check bits a record of this layout has: 13, or 37 when every record has
    /// the wide check.
    pub fn min_bits(self) -> u32 {
        NARROW_CHECK_BITS + if self == CheckLayout::Wide { WIDE_CHECK_BITS } else { 0 }
    }

    /// The bytes of wide check every record of this layout has, wherever it lies.
    fn always(self) -> u64 {
        if self == CheckLayout::Wide {
            WIDE_CHECK_LEN as u64
        } else {
            0
        }
    }

    /// The bytes of wide check some record of this layout has.
    fn at_most(self) -> u64 {
        if self == CheckLayout::Narrow {
            0
        } else {
            WIDE_CHECK_LEN as u64
        }
    }
}

/// Whether `len` bytes at `offset` lie in more than one sector.
#[inline(always)]
fn crosses_sector(offset: u64, len: u64) -> bool {
    len > 0 && offset / SECTOR_SIZE != (offset + len - 1) / SECTOR_SIZE
}

/// The length of a record at an offset it is not placed at yet: `narrow`, or that plus the
/// wide check where it would cross a sector (space.rs places it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLen {
    pub narrow: u64,
    pub layout: CheckLayout,
}

impl RecordLen {
    pub fn at(&self, offset: u64) -> u64 {
        self.narrow + if self.layout.is_wide(offset, self.narrow) { WIDE_CHECK_LEN as u64 } else { 0 }
    }

    pub fn min(&self) -> u64 {
        self.narrow + self.layout.always()
    }

    pub fn max(&self) -> u64 {
        self.narrow + self.layout.at_most()
    }
}

/// The check of a record's stored value: XXH3-64 seeded with the key's hash and the
/// compressed flag. Its top 13 bits are in every record; the 24 below them in a record with
/// a wide check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check(u64);

impl Check {
    /// The 13 bits every record stores.
    pub fn narrow(self) -> u16 {
        (self.0 >> 51) as u16
    }

    /// The 24 bits a wide check adds.
    pub fn wide(self) -> u32 {
        ((self.0 >> 27) & 0xFF_FFFF) as u32
    }
}

/// The check of a record's stored value.
pub fn checksum(key_hash: u64, compressed: bool, stored_value: &[u8]) -> Check {
    let seed = key_hash ^ u64::from(compressed);
    Check(xxh3_64_with_seed(stored_value, seed))
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
    /// The 24 bits of a wide check: in every record of a version 5 file, in a record crossing
    /// a sector of a version 3 or 4 file.
    pub check_wide: Option<u32>,
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

    /// The 13-bit checksum every record stores.
    pub fn narrow_check(&self) -> u16 {
        (u16::from(self.tag & CHECK_HI_MASK) << 8) | u16::from(self.check_lo)
    }

    /// Whether the stored value's `check` matches every check bit the record stores.
    #[inline]
    pub fn verifies(&self, check: Check) -> bool {
        self.narrow_check() == check.narrow() && self.check_wide.is_none_or(|wide| wide == check.wide())
    }

    /// Parses the header of the dead record at `offset` whose first bytes a free span's tag
    /// and length were written over (the first of the records a synchronization marks dead,
    /// docs/format.md), supposing its chain pointer was `next_width` bytes wide: the fields
    /// after the pointer are its own. Its tag's check bits are lost; `verifies_beneath_span`
    /// checks the rest. None where the fields do not parse.
    pub fn parse_beneath_span(
        bytes: &[u8],
        offset: u64,
        next_width: usize,
        layout: CheckLayout,
    ) -> Option<RecordHeader> {
        let rest = bytes.get(1 + next_width..)?;
        let mut assembled = [0u8; 2 * MAX_HEADER_SIZE];
        let pointer = assembled.get_mut(1..1 + next_width)?;
        encode_varint_padded(0, pointer);
        if let Some(first) = assembled.first_mut() {
            *first = KIND_FREE;
        }
        let tail = rest.get(..rest.len().min(2 * MAX_HEADER_SIZE - 1 - next_width))?;
        assembled.get_mut(1 + next_width..1 + next_width + tail.len())?.copy_from_slice(tail);
        let len = (1 + next_width + tail.len()).min(assembled.len());
        Self::parse(assembled.get(..len)?, offset, layout).ok()
    }

    /// Whether a header from `parse_beneath_span` matches `check` in the bits it still has:
    /// `check_lo` and the wide check (32 bits).
    pub fn verifies_beneath_span(&self, check: Check) -> bool {
        self.check_lo == check.narrow() as u8 && self.check_wide.is_some_and(|wide| wide == check.wide())
    }

    /// Parses a record, tombstone or dead record header at `offset` from `bytes` (which
    /// start there and may be cut at the end of the file), in a file of `layout`. Lengths
    /// are bounded, not yet checked against the file: the caller slices the body, which
    /// checks that.
    #[inline]
    pub fn parse(bytes: &[u8], offset: u64, layout: CheckLayout) -> Result<RecordHeader> {
        match Self::parse_short(bytes, offset, layout) {
            Some(header) => Ok(header),
            None => Self::parse_any(bytes, offset, layout),
        }
    }

    /// The common case in a few instructions, as every get parses at least one header: the
    /// longest possible header fits in `bytes` (the record is not the last few bytes of the
    /// file) and its fields are within the bounds `parse_any` enforces. None for anything
    /// else, valid or not, which `parse_any` then decides; what this accepts, `parse_any`
    /// parses to the same header.
    #[inline(always)]
    fn parse_short(bytes: &[u8], offset: u64, layout: CheckLayout) -> Option<RecordHeader> {
        let head: &[u8; MAX_HEADER_SIZE] = bytes.get(..MAX_HEADER_SIZE)?.try_into().ok()?;
        let &[tag, ref fields @ ..] = head;
        if !is_record_tag(tag) {
            return None;
        }
        // Field widths at most 6, 4 and 5 bytes: 1 + 6 + 4 + 5 + 1 + 3 = MAX_HEADER_SIZE, so
        // the check bytes after them are always inside `head`.
        let next = short_varint(fields, 6).filter(pointer_is_possible)?;
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
        Self::assemble(tag, offset, fields, layout, head)
    }

    /// Any header, and every error: see `parse`.
    #[inline(never)]
    fn parse_any(bytes: &[u8], offset: u64, layout: CheckLayout) -> Result<RecordHeader> {
        let broken = |what: &str| Error::broken(format!("record at {offset}: {what}"));
        let (&tag, rest) = bytes.split_first().ok_or_else(|| broken("truncated"))?;
        if !is_record_tag(tag) {
            return Err(broken("not a record"));
        }
        let next = decode_varint(rest).ok_or_else(|| broken("bad chain pointer"))?;
        if !pointer_is_possible(&next) {
            return Err(broken("a one-byte chain pointer other than 0"));
        }
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
        Self::assemble(tag, offset, Fields { next, key_len, value_len, check_lo }, layout, bytes)
            .ok_or_else(|| broken("truncated"))
    }

    /// The header of the record at `offset` from its fields, once both parsers checked them
    /// (sizes in range, pointer at most 6 bytes), with its wide check read from `bytes` (the
    /// record's) where it has one; None if `bytes` end before it.
    #[inline(always)]
    fn assemble(tag: u8, offset: u64, fields: Fields, layout: CheckLayout, bytes: &[u8]) -> Option<RecordHeader> {
        let Fields {
            next: (next, next_width),
            key_len: (key_len, key_width),
            value_len: (value_len, value_width),
            check_lo,
        } = fields;
        let narrow_header_len = 1 + next_width + key_width + value_width + 1;
        let narrow_len = narrow_header_len as u64 + key_len + value_len;
        let check_wide = if layout.is_wide(offset, narrow_len) {
            match *bytes.get(narrow_header_len..narrow_header_len + WIDE_CHECK_LEN)? {
                [b0, b1, b2] => Some(u32::from_le_bytes([b0, b1, b2, 0])),
                _ => return None,
            }
        } else {
            None
        };
        Some(RecordHeader {
            tag,
            next,
            next_at: offset + 1,
            next_width: next_width as u8,
            key_len: key_len as usize,
            value_len: value_len as usize,
            header_len: narrow_header_len + if check_wide.is_some() { WIDE_CHECK_LEN } else { 0 },
            check_lo,
            check_wide,
        })
    }
}

/// A header's varint fields as read, each `(value, width in bytes)`, and its check byte.
struct Fields {
    next: (u64, usize),
    key_len: (u64, usize),
    value_len: (u64, usize),
    check_lo: u8,
}

/// Whether a chain pointer `(value, width)` is one a writer can have left: a one-byte pointer
/// is 0, as every other one is written at least two bytes wide (`next_width`; before the
/// spare byte, as wide as the varint of the data end, which is past the 128-byte header).
/// Bytes inside a value read as a record while a restore resynchronizes mostly fail this:
/// text never has the 0 byte, so such a record needs a pointer byte of 0x80 or more.
#[inline(always)]
fn pointer_is_possible(&(value, width): &(u64, usize)) -> bool {
    width > 1 || value == 0
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

/// Encodes a record's (or tombstone's) header without a wide check into `out` and returns
/// its length: the bytes that go before the key and the stored value, unless the record,
/// once placed, is to have a wide check (`append_wide_check`).
#[expect(clippy::too_many_arguments, reason = "each is one field of the header, passed by value on the hot path")]
#[inline]
pub fn encode_record_header(
    out: &mut [u8; MAX_HEADER_SIZE],
    kind: u8,
    compressed: bool,
    check: Check,
    next: u64,
    width: usize,
    key_len: usize,
    stored_len: usize,
) -> usize {
    let check = check.narrow();
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
    // At most 1 + 6 + 4 + 5 + 1 bytes (MAX_HEADER_SIZE less the wide check) for the widths
    // and sizes written.
    let mut len = 0;
    for field in fields {
        if let Some(target) = out.get_mut(len..len + field.len()) {
            target.copy_from_slice(field);
        }
        len += field.len();
    }
    len
}

/// Appends the wide check to a header `narrow_len` bytes long in `out` (from
/// `encode_record_header`) and returns the header's new length.
pub fn append_wide_check(out: &mut [u8; MAX_HEADER_SIZE], narrow_len: usize, check: Check) -> usize {
    let bytes = check.wide().to_le_bytes();
    let wide = bytes.get(..WIDE_CHECK_LEN).unwrap_or_default();
    let target = out.get_mut(narrow_len..narrow_len + WIDE_CHECK_LEN);
    debug_assert!(target.is_some(), "a {narrow_len}-byte header leaves no room for its wide check");
    if let Some(target) = target {
        target.copy_from_slice(wide);
    }
    narrow_len + WIDE_CHECK_LEN
}

/// Appends a full record (or tombstone) to `out`, as placed at offset `out.len()` of a file
/// of `layout`.
#[cfg(test)]
#[expect(clippy::too_many_arguments, reason = "encode_record_header's fields plus the key and value")]
pub fn encode_record(
    out: &mut Vec<u8>,
    layout: CheckLayout,
    kind: u8,
    compressed: bool,
    check: Check,
    next: u64,
    width: usize,
    key: &[u8],
    stored_value: &[u8],
) {
    let mut header = [0u8; MAX_HEADER_SIZE];
    let mut len =
        encode_record_header(&mut header, kind, compressed, check, next, width, key.len(), stored_value.len());
    if layout.is_wide(out.len() as u64, (len + key.len() + stored_value.len()) as u64) {
        len = append_wide_check(&mut header, len, check);
    }
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

/// Parses the block at `offset` (bytes start there) of a file of `layout`.
pub fn parse_block(bytes: &[u8], offset: u64, layout: CheckLayout) -> Result<Block> {
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
        Some(_) => RecordHeader::parse(bytes, offset, layout).map(Block::Record),
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;
    use proptest::prelude::*;

    /// The layouts, by a number a test draws.
    fn layout(which: u8) -> CheckLayout {
        match which % 3 {
            0 => CheckLayout::Narrow,
            1 => CheckLayout::WideAcrossSectors,
            _ => CheckLayout::Wide,
        }
    }

    /// A record encoded at `offset` of a file of `layout`: the bytes before it are padding.
    fn placed(offset: usize, layout: CheckLayout, check: Check, next: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; offset];
        let width = next_width(next, next.max(1 << 20), PointerReach::Growing);
        encode_record(&mut out, layout, KIND_RECORD, false, check, next, width, key, value);
        out
    }

    proptest! {
        #[test]
        fn record_round_trip(key in proptest::collection::vec(any::<u8>(), 1..40),
                             value in proptest::collection::vec(any::<u8>(), 0..300),
                             next in 0u64..(1 << 40), compressed: bool,
                             offset in 0usize..1100, wide in 0u8..3) {
            let layout = layout(wide);
            let data_end = next.max(1 << 20);
            let width = next_width(next, data_end, PointerReach::Growing);
            let check = checksum(7, compressed, &value);
            let mut out = vec![0u8; offset];
            encode_record(&mut out, layout, KIND_RECORD, compressed, check, next, width, &key, &value);
            let header = RecordHeader::parse(&out[offset..], offset as u64, layout).unwrap();
            prop_assert_eq!(header.next, next);
            prop_assert_eq!(header.key_len, key.len());
            prop_assert_eq!(header.value_len, value.len());
            prop_assert!(header.verifies(check));
            prop_assert_eq!(header.is_compressed(), compressed);
            prop_assert_eq!(header.total_len() as usize, out.len() - offset);
            prop_assert_eq!(&out[offset + header.header_len..offset + header.header_len + key.len()], &key[..]);
            // The wide check exactly where the record crosses a sector of a version 3 or 4
            // file, and in every record of a version 5 file.
            let crosses = offset / 512 != (out.len() - 1) / 512;
            let expected = match layout {
                CheckLayout::Narrow => false,
                CheckLayout::WideAcrossSectors => crosses,
                CheckLayout::Wide => true,
            };
            prop_assert_eq!(header.check_wide.is_some(), expected);
        }

        #[test]
        fn a_wide_check_catches_what_the_narrow_one_lets_through(key in proptest::collection::vec(any::<u8>(), 1..20),
                                                                 value in proptest::collection::vec(any::<u8>(), 1..200),
                                                                 offset in 400usize..512) {
            let check = checksum(hash_seed(&key), false, &value);
            let out = placed(offset, CheckLayout::WideAcrossSectors, check, 0, &key, &value);
            let header = RecordHeader::parse(&out[offset..], offset as u64, CheckLayout::WideAcrossSectors).unwrap();
            prop_assume!(header.check_wide.is_some());
            // Another value whose 13 bits collide, as a torn one does once in 8,192.
            let colliding = Check(check.0 ^ (1 << 27));
            prop_assert_eq!(colliding.narrow(), check.narrow());
            prop_assert!(!header.verifies(colliding));
        }

        #[test]
        fn short_parse_agrees_with_the_general_one(bytes in proptest::collection::vec(any::<u8>(), 0..28),
                                                   offset in 0u64..2000, wide in 0u8..3) {
            // Random bytes rarely form a header; the second test covers real records.
            let layout = layout(wide);
            if let Some(short) = RecordHeader::parse_short(&bytes, offset, layout) {
                prop_assert_eq!(RecordHeader::parse_any(&bytes, offset, layout).ok(), Some(short));
            }
        }

        #[test]
        fn short_parse_takes_whole_records(key in proptest::collection::vec(any::<u8>(), 0..300),
                                           value in proptest::collection::vec(any::<u8>(), 0..20_000),
                                           next in 0u64..(1 << 42), offset in 0usize..1100, wide in 0u8..3) {
            let layout = layout(wide);
            let mut out = placed(offset, layout, checksum(3, false, &value), next, &key, &value);
            out.resize(out.len().max(offset + MAX_HEADER_SIZE), 0);
            let short = RecordHeader::parse_short(&out[offset..], offset as u64, layout);
            prop_assert!(short.is_some());
            prop_assert_eq!(short, RecordHeader::parse_any(&out[offset..], offset as u64, layout).ok());
        }

        #[test]
        fn free_blocks_parse_to_their_length(len in 1u64..100_000) {
            let mut out = Vec::new();
            encode_free(len, &mut out);
            match parse_block(&out, 0, CheckLayout::WideAcrossSectors).unwrap() {
                Block::Filler => prop_assert!(len < MIN_SPAN),
                Block::FreeSpan { len: parsed } => prop_assert_eq!(parsed, len),
                Block::Record(_) => prop_assert!(false, "a free block parsed as a record"),
            }
        }

        #[test]
        fn a_record_len_is_where_it_lands(narrow in 1u64..2000, offset in 0u64..5000, wide in 0u8..3) {
            let len = RecordLen { narrow, layout: layout(wide) };
            let at = len.at(offset);
            prop_assert!(len.min() <= at && at <= len.max());
            prop_assert_eq!(at > narrow, layout(wide).is_wide(offset, narrow));
        }

        /// A pointer holds what each reach promises: below the data end when written (an
        /// unlink) always; below 128 times it (`Growing`) or below the limit (`Below`). A
        /// rebuild's pointer (`Below`) is a byte narrower than a growing file's where the
        /// limit needs no more bytes than the data end.
        #[test]
        fn a_pointer_reaches_what_its_reach_promises(next in 1u64..(1 << 40), data_end in 1024u64..(1 << 40),
                                                     limit in 0u64..(1 << 41)) {
            let mut field = [0u8; MAX_NEXT_WIDTH];
            let growing = next_width(next, data_end, PointerReach::Growing);
            let packed = next_width(next, data_end, PointerReach::Below(limit));
            let promised = [
                (growing, next.max(data_end)),
                (growing, next.max(data_end).saturating_mul(128).min(1 << 42) - 1),
                (packed, next.max(data_end)),
                (packed, limit.saturating_sub(1).max(next)),
            ];
            for (width, target) in promised {
                prop_assert!(crate::encoding::encode_varint_padded(target, &mut field[..width]), "{target} in {width} bytes");
            }
            if varint_len(limit.saturating_sub(1)) <= varint_len(next.max(data_end)) {
                prop_assert_eq!(packed, varint_len(next.max(data_end)));
                prop_assert_eq!(growing, (packed + 1).min(MAX_NEXT_WIDTH));
            }
        }
    }

    fn hash_seed(key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(key)
    }

    #[test]
    fn a_one_byte_pointer_other_than_0_is_no_record() {
        let check = checksum(0, false, b"abcdefgh");
        let mut out = placed(0, CheckLayout::Narrow, check, 0, b"00000001", b"abcdefgh");
        out.resize(64, 0);
        assert!(RecordHeader::parse(&out, 0, CheckLayout::Narrow).is_ok());
        out[1] = 0x6b;
        let error = RecordHeader::parse(&out, 0, CheckLayout::Narrow).unwrap_err();
        assert!(error.to_string().contains("one-byte chain pointer"), "{error}");
        // Every pointer a writer makes, from next_width, passes.
        for next in [1u64, 127, 128, 1 << 20, (1 << 42) - 1] {
            for (data_end, reach) in [128u64, 1 << 16, 1 << 40].into_iter().flat_map(|d| {
                [PointerReach::Growing, PointerReach::Below(0), PointerReach::Below(1 << 20)].map(|r| (d, r))
            }) {
                let width = next_width(next, data_end, reach);
                let mut field = [0u8; MAX_NEXT_WIDTH];
                assert!(crate::encoding::encode_varint_padded(next, &mut field[..width]));
                assert!(pointer_is_possible(&(next, width)), "next {next} in {width} bytes");
            }
        }
    }

    #[test]
    fn small_record_is_compact() {
        let check = checksum(0, false, b"abcdefgh");
        let out = placed(0, CheckLayout::WideAcrossSectors, check, 0, b"00000001", b"abcdefgh");
        assert_eq!(out.len(), 16 + 5);
        // docs/hash.md: 21 bytes in version 4's layout, 24 with the wide check of version 5.
        let wide = placed(0, CheckLayout::Wide, check, 0, b"00000001", b"abcdefgh");
        assert_eq!(wide.len(), 16 + 5 + WIDE_CHECK_LEN);
    }

    #[test]
    fn every_record_of_a_wide_file_pays_three_bytes_and_catches_a_13_bit_collision() {
        let check = checksum(0, false, b"abcdefgh");
        for offset in [0, 100, 488, 500, 1023] {
            let narrow = placed(offset, CheckLayout::Narrow, check, 0, b"00000001", b"abcdefgh");
            let wide = placed(offset, CheckLayout::Wide, check, 0, b"00000001", b"abcdefgh");
            assert_eq!(wide.len(), narrow.len() + WIDE_CHECK_LEN, "at {offset}");
            let header = RecordHeader::parse(&wide[offset..], offset as u64, CheckLayout::Wide).unwrap();
            assert!(header.verifies(check));
            // A value whose 13 bits collide (one damaged value in 8,192) fails the 37.
            let colliding = Check(check.0 ^ (1 << 40));
            assert_eq!(colliding.narrow(), check.narrow());
            assert!(!header.verifies(colliding), "at {offset}");
        }
        assert_eq!(CheckLayout::Wide.min_bits(), 37);
        assert_eq!(CheckLayout::WideAcrossSectors.min_bits(), 13);
    }

    #[test]
    fn a_record_crossing_a_sector_pays_three_bytes() {
        let check = checksum(0, false, b"abcdefgh");
        let narrow = placed(500, CheckLayout::Narrow, check, 0, b"00000001", b"abcdefgh");
        let wide = placed(500, CheckLayout::WideAcrossSectors, check, 0, b"00000001", b"abcdefgh");
        assert_eq!(wide.len(), narrow.len() + WIDE_CHECK_LEN);
        // 21 bytes at 490 end at 510, inside the sector; with 3 more they would not.
        let at_edge = placed(490, CheckLayout::WideAcrossSectors, check, 0, b"00000001", b"abcdefgh");
        assert_eq!(at_edge.len(), 490 + 21 + WIDE_CHECK_LEN);
        let inside = placed(488, CheckLayout::WideAcrossSectors, check, 0, b"00000001", b"abcdefgh");
        assert_eq!(inside.len(), 488 + 21);
    }
}
