//! The on-disk layout of a tree file: two alternating file headers, then page slots.
//!
//! ```text
//! offset 0    header copy A (128 bytes)
//! offset 128  header copy B (128 bytes)
//! offset 256  slots, each: slot header (24 bytes) + stored bytes + unused tail
//! ```
//!
//! Pages are never overwritten while a committed header refers to them (shadow paging), and a
//! commit ends by writing the header copy that the previous commit did not use. A torn header
//! write therefore fails its checksum and the reader falls back to the other copy, whose tree
//! is intact. See docs/tree.md for the full format.

use xxhash_rust::xxh3::xxh3_64;

use crate::codec::CodecKind;
use crate::error::{Error, Result};

use super::comparator::Comparator;

pub const MAGIC: &[u8; 8] = b"KuraTree";
pub const FORMAT_VERSION: u32 = 1;
pub const HEADER_SIZE: usize = 128;
/// Both header copies; the first slot starts here.
pub const DATA_START: u64 = 2 * HEADER_SIZE as u64;
/// Slots start and end on this alignment.
pub const SLOT_ALIGN: u64 = 16;
pub const SLOT_HEADER_SIZE: usize = 24;
/// No tree is deeper than this: even with 2-child branches it would hold 2^40 leaves. A
/// deeper header or path is corruption (for instance a page that points to itself).
pub const MAX_HEIGHT: u32 = 40;

/// What a slot holds, from its flags byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    Leaf,
    Branch,
    /// An opaque blob: the free-slot list saved at close, or the zstd dictionary.
    Blob,
}

const FLAG_COMPRESSED: u8 = 1;
const KIND_SHIFT: u8 = 1;
const KIND_MASK: u8 = 0b110;

impl SlotKind {
    fn bits(self) -> u8 {
        match self {
            SlotKind::Leaf => 0,
            SlotKind::Branch => 1,
            SlotKind::Blob => 2,
        }
    }

    fn from_bits(bits: u8) -> Option<SlotKind> {
        match bits {
            0 => Some(SlotKind::Leaf),
            1 => Some(SlotKind::Branch),
            2 => Some(SlotKind::Blob),
            _ => None,
        }
    }
}

/// The header in front of every slot.
///
/// ```text
/// 0  u8   flags: bit 0 compressed, bits 1-2 kind (0 leaf, 1 branch, 2 blob)
/// 1  [3]  zero
/// 4  u32  stored length (bytes after this header)
/// 8  u64  slot length (header + stored + unused tail; a multiple of 16)
/// 16 u64  checksum: xxh3 of the stored bytes, mixed with the offset and the fields above
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHeader {
    pub kind: SlotKind,
    pub compressed: bool,
    pub stored_len: u32,
    pub slot_len: u64,
    pub checksum: u64,
}

impl SlotHeader {
    pub fn encode(&self) -> [u8; SLOT_HEADER_SIZE] {
        let mut out = [0u8; SLOT_HEADER_SIZE];
        let flags = u8::from(self.compressed) | (self.kind.bits() << KIND_SHIFT);
        put(&mut out, 0, &[flags]);
        put(&mut out, 4, &self.stored_len.to_le_bytes());
        put(&mut out, 8, &self.slot_len.to_le_bytes());
        put(&mut out, 16, &self.checksum.to_le_bytes());
        out
    }

    /// Parses and checks the header of the slot at `offset` in a file of `file_end` bytes.
    pub fn decode(bytes: &[u8], offset: u64, file_end: u64) -> Result<SlotHeader> {
        let field = |range: std::ops::Range<usize>| bytes.get(range).unwrap_or_default();
        let flags = *bytes.first().ok_or_else(|| broken_slot(offset, "truncated header"))?;
        let kind = SlotKind::from_bits((flags & KIND_MASK) >> KIND_SHIFT)
            .ok_or_else(|| broken_slot(offset, "unknown kind"))?;
        if flags & !(FLAG_COMPRESSED | KIND_MASK) != 0 || field(1..4) != [0, 0, 0] {
            return Err(broken_slot(offset, "unknown flags"));
        }
        let stored_len = u32::from_le_bytes(field(4..8).try_into().map_err(|_| broken_slot(offset, "truncated"))?);
        let slot_len = u64::from_le_bytes(field(8..16).try_into().map_err(|_| broken_slot(offset, "truncated"))?);
        let checksum = u64::from_le_bytes(field(16..24).try_into().map_err(|_| broken_slot(offset, "truncated"))?);
        let needed = SLOT_HEADER_SIZE as u64 + u64::from(stored_len);
        if slot_len < needed
            || !slot_len.is_multiple_of(SLOT_ALIGN)
            || offset.checked_add(slot_len).is_none_or(|end| end > file_end)
        {
            return Err(broken_slot(offset, &format!("impossible lengths {stored_len}/{slot_len}")));
        }
        Ok(SlotHeader { kind, compressed: flags & FLAG_COMPRESSED != 0, stored_len, slot_len, checksum })
    }

    /// The checksum of `stored` bytes in a slot at `offset` with these fields: a page copied
    /// to another offset, or given another kind or length, no longer matches.
    pub fn checksum_of(&self, offset: u64, stored: &[u8]) -> u64 {
        let mixed = offset
            ^ self.slot_len.rotate_left(24)
            ^ (u64::from(self.stored_len) << 8)
            ^ u64::from(self.kind.bits() << KIND_SHIFT | u8::from(self.compressed));
        xxh3_64(stored) ^ mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// Copies `bytes` into `out` at `at`; callers pass constant in-bounds positions.
fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(target) = out.get_mut(at..at + bytes.len()) {
        target.copy_from_slice(bytes);
    }
}

pub fn broken_slot(offset: u64, what: &str) -> Error {
    Error::broken(format!("tree page at offset {offset}: {what}"))
}

/// The fields of a file header copy.
///
/// ```text
/// 0   [8] magic "KuraTree"
/// 8   u32 format version
/// 12  u8  codec id, u8 comparator id, u8 closed cleanly (0/1), u8 zero
/// 16  u32 max page size (raw bytes of a page before compression)
/// 20  u32 tree height (levels; 0 for an empty tree)
/// 24  u64 root page offset (0: empty tree)
/// 32  u64 record count
/// 40  u64 free-list blob offset (0: none; valid only when closed cleanly)
/// 48  u64 end of the used area (the file may be longer while open)
/// 56  u64 dictionary blob offset (0: none)
/// 64  u64 commit sequence number (the copy with the larger valid one is current)
/// 72  [48] zero
/// 120 u64 xxh3 of bytes 0..120
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    pub codec: CodecKind,
    pub comparator: Comparator,
    pub closed_cleanly: bool,
    pub max_page_size: u32,
    pub height: u32,
    pub root: u64,
    pub count: u64,
    pub free_list: u64,
    pub end: u64,
    pub dictionary: u64,
    pub sequence: u64,
}

impl FileHeader {
    /// Which of the two copies this header goes to.
    pub fn copy_offset(&self) -> u64 {
        (self.sequence % 2) * HEADER_SIZE as u64
    }

    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        put(&mut out, 0, MAGIC);
        put(&mut out, 8, &FORMAT_VERSION.to_le_bytes());
        put(&mut out, 12, &[self.codec.id(), self.comparator.id(), u8::from(self.closed_cleanly), 0]);
        put(&mut out, 16, &self.max_page_size.to_le_bytes());
        put(&mut out, 20, &self.height.to_le_bytes());
        for (at, value) in [
            (24, self.root),
            (32, self.count),
            (40, self.free_list),
            (48, self.end),
            (56, self.dictionary),
            (64, self.sequence),
        ] {
            put(&mut out, at, &value.to_le_bytes());
        }
        let checksum = xxh3_64(out.get(..120).unwrap_or_default());
        put(&mut out, 120, &checksum.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<FileHeader> {
        let bytes =
            bytes.get(..HEADER_SIZE).ok_or_else(|| Error::broken("the tree file is shorter than its header"))?;
        let byte = |at: usize| bytes.get(at).copied().unwrap_or_default();
        let u32_at = |at: usize| u32::from_le_bytes([byte(at), byte(at + 1), byte(at + 2), byte(at + 3)]);
        let u64_at = |at: usize| u64::from(u32_at(at)) | (u64::from(u32_at(at + 4)) << 32);
        if bytes.get(0..8) != Some(MAGIC.as_slice()) {
            return Err(Error::broken("not a Kura tree file (bad magic)"));
        }
        if u64_at(120) != xxh3_64(bytes.get(..120).unwrap_or_default()) {
            return Err(Error::broken("tree file header checksum mismatch"));
        }
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(Error::broken(format!("tree file format version {version} is not supported")));
        }
        if byte(14) > 1 {
            return Err(Error::broken("bad clean-close flag in the tree file header"));
        }
        let header = FileHeader {
            codec: CodecKind::from_id(byte(12))?,
            comparator: Comparator::from_id(byte(13))?,
            closed_cleanly: byte(14) == 1,
            max_page_size: u32_at(16),
            height: u32_at(20),
            root: u64_at(24),
            count: u64_at(32),
            free_list: u64_at(40),
            end: u64_at(48),
            dictionary: u64_at(56),
            sequence: u64_at(64),
        };
        if header.height > MAX_HEIGHT || (header.root == 0) != (header.height == 0) {
            return Err(Error::broken(format!("tree file header: impossible height {}", header.height)));
        }
        if header.end < DATA_START {
            return Err(Error::broken("tree file header: impossible end of data"));
        }
        for offset in [header.root, header.free_list, header.dictionary] {
            if offset != 0 && (offset < DATA_START || offset >= header.end || !offset.is_multiple_of(SLOT_ALIGN)) {
                return Err(Error::broken(format!("tree file header: impossible page offset {offset}")));
            }
        }
        Ok(header)
    }

    /// The current header of a file: the valid copy with the larger sequence number.
    pub fn read_current(file_start: &[u8]) -> Result<FileHeader> {
        let first = FileHeader::decode(file_start);
        let second = FileHeader::decode(file_start.get(HEADER_SIZE..).unwrap_or_default());
        match (first, second) {
            (Ok(a), Ok(b)) => Ok(if b.sequence > a.sequence { b } else { a }),
            (Ok(a), Err(_)) => Ok(a),
            (Err(_), Ok(b)) => Ok(b),
            (Err(e), Err(_)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn sample() -> FileHeader {
        FileHeader {
            codec: CodecKind::Zstd,
            comparator: Comparator::Numeric,
            closed_cleanly: true,
            max_page_size: 8192,
            height: 3,
            root: 4096,
            count: 77,
            free_list: 0,
            end: 1 << 20,
            dictionary: 0,
            sequence: 9,
        }
    }

    #[test]
    fn header_round_trip_and_fallback() {
        let header = sample();
        let mut file = vec![0u8; 2 * HEADER_SIZE];
        file[..HEADER_SIZE].copy_from_slice(&header.encode());
        let mut newer = header.clone();
        newer.sequence = 10;
        file[HEADER_SIZE..].copy_from_slice(&newer.encode());
        assert_eq!(FileHeader::read_current(&file).unwrap(), newer);
        file[HEADER_SIZE + 30] ^= 1; // torn write of the newer copy
        assert_eq!(FileHeader::read_current(&file).unwrap(), header);
    }

    #[test]
    fn slot_header_checks_lengths() {
        let slot = SlotHeader { kind: SlotKind::Branch, compressed: true, stored_len: 100, slot_len: 128, checksum: 5 };
        let bytes = slot.encode();
        assert_eq!(SlotHeader::decode(&bytes, 256, 1000).unwrap(), slot);
        assert!(SlotHeader::decode(&bytes, 256, 300).is_err());
        let bad = SlotHeader { slot_len: 64, ..slot }.encode();
        assert!(SlotHeader::decode(&bad, 256, 1000).is_err());
    }
}
