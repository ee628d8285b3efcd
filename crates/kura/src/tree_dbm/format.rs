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
use crate::encoding::{Field, HeaderBytes};
use crate::error::{Error, Result};

use super::comparator::Comparator;

pub const MAGIC: &[u8; 8] = b"KuraTree";
/// The version of the files this release creates. Version 2 stores a hint of each child's
/// slot length in the low bits of a branch's child references (slot_hint.rs); version 1
/// files are read, and written, as version 1 until a rebuild.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest version this release reads.
const OLDEST_READ_VERSION: u32 = 1;
/// The first version whose branches hold slot hints.
const HINTED_VERSION: u32 = 2;

// A file header copy's fields, each after the one before (the table at `FileHeader`).
const MAGIC_FIELD: Field<HEADER_SIZE, { MAGIC.len() }> = Field::first();
const VERSION_FIELD: Field<HEADER_SIZE, 4> = Field::after(MAGIC_FIELD);
const CODEC_FIELD: Field<HEADER_SIZE, 1> = Field::after(VERSION_FIELD);
const COMPARATOR_FIELD: Field<HEADER_SIZE, 1> = Field::after(CODEC_FIELD);
const CLOSED_CLEANLY_FIELD: Field<HEADER_SIZE, 1> = Field::after(COMPARATOR_FIELD);
const PAD_FIELD: Field<HEADER_SIZE, 1> = Field::after(CLOSED_CLEANLY_FIELD);
const MAX_PAGE_SIZE_FIELD: Field<HEADER_SIZE, 4> = Field::after(PAD_FIELD);
const HEIGHT_FIELD: Field<HEADER_SIZE, 4> = Field::after(MAX_PAGE_SIZE_FIELD);
const ROOT_FIELD: Field<HEADER_SIZE, 8> = Field::after(HEIGHT_FIELD);
const COUNT_FIELD: Field<HEADER_SIZE, 8> = Field::after(ROOT_FIELD);
const FREE_LIST_FIELD: Field<HEADER_SIZE, 8> = Field::after(COUNT_FIELD);
const END_FIELD: Field<HEADER_SIZE, 8> = Field::after(FREE_LIST_FIELD);
const DICTIONARY_FIELD: Field<HEADER_SIZE, 8> = Field::after(END_FIELD);
const SEQUENCE_FIELD: Field<HEADER_SIZE, 8> = Field::after(DICTIONARY_FIELD);
const BASE_FIELD: Field<HEADER_SIZE, 8> = Field::after(SEQUENCE_FIELD);
const DIGEST_FIELD: Field<HEADER_SIZE, 8> = Field::after(BASE_FIELD);
const NEW_PAGES_FIELD: Field<HEADER_SIZE, 8> = Field::after(DIGEST_FIELD);
const FLAGS_FIELD: Field<HEADER_SIZE, 4> = Field::after(NEW_PAGES_FIELD);
const RESERVED_FIELD: Field<HEADER_SIZE, 20> = Field::after(FLAGS_FIELD);
/// xxh3 of every byte before it.
pub(super) const CHECKSUM_FIELD: Field<HEADER_SIZE, 8> = Field::after(RESERVED_FIELD);
pub const HEADER_SIZE: usize = 128;
const _: () = assert!(CHECKSUM_FIELD.end() == HEADER_SIZE, "docs/tree.md specifies 128-byte header copies");
/// Both header copies; the first slot starts here.
pub const DATA_START: u64 = 2 * HEADER_SIZE as u64;
/// Slots start and end on this alignment.
pub const SLOT_ALIGN: u64 = 16;
/// Header flag: the base, digest and new-page fields are set (written by a writer that keeps
/// the durable commit whole; files of earlier writers have zero there).
const FLAG_TRACKS_BASE: u32 = 1;

// A slot header's fields (the table at `SlotHeader`).
const SLOT_FLAGS_FIELD: Field<SLOT_HEADER_SIZE, 1> = Field::first();
const SLOT_ZERO_FIELD: Field<SLOT_HEADER_SIZE, 3> = Field::after(SLOT_FLAGS_FIELD);
const SLOT_STORED_LEN_FIELD: Field<SLOT_HEADER_SIZE, 4> = Field::after(SLOT_ZERO_FIELD);
const SLOT_LEN_FIELD: Field<SLOT_HEADER_SIZE, 8> = Field::after(SLOT_STORED_LEN_FIELD);
const SLOT_CHECKSUM_FIELD: Field<SLOT_HEADER_SIZE, 8> = Field::after(SLOT_LEN_FIELD);
pub const SLOT_HEADER_SIZE: usize = 24;
const _: () = assert!(SLOT_CHECKSUM_FIELD.end() == SLOT_HEADER_SIZE, "docs/tree.md specifies 24-byte slot headers");
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

/// The bytes a slot's header and `stored_len` stored bytes take: the least its slot can be,
/// and what a read of it needs (the slot may be longer).
pub fn content_len(stored_len: u32) -> u64 {
    SLOT_HEADER_SIZE as u64 + u64::from(stored_len)
}

impl SlotHeader {
    /// `content_len` of this slot.
    pub fn content_len(&self) -> u64 {
        content_len(self.stored_len)
    }

    pub fn encode(&self) -> [u8; SLOT_HEADER_SIZE] {
        let mut out = HeaderBytes::<SLOT_HEADER_SIZE>::new();
        out.put_u8(SLOT_FLAGS_FIELD, u8::from(self.compressed) | (self.kind.bits() << KIND_SHIFT));
        out.put_u32(SLOT_STORED_LEN_FIELD, self.stored_len);
        out.put_u64(SLOT_LEN_FIELD, self.slot_len);
        out.put_u64(SLOT_CHECKSUM_FIELD, self.checksum);
        out.into_bytes()
    }

    /// Parses and checks the header of the slot at `offset` in a file of `file_end` bytes.
    pub fn decode(bytes: &[u8], offset: u64, file_end: u64) -> Result<SlotHeader> {
        let header =
            HeaderBytes::<SLOT_HEADER_SIZE>::read(bytes, "").map_err(|_| broken_slot(offset, "truncated header"))?;
        let flags = header.u8(SLOT_FLAGS_FIELD);
        let kind = SlotKind::from_bits((flags & KIND_MASK) >> KIND_SHIFT)
            .ok_or_else(|| broken_slot(offset, "unknown kind"))?;
        if flags & !(FLAG_COMPRESSED | KIND_MASK) != 0 || header.get(SLOT_ZERO_FIELD).iter().any(|&b| b != 0) {
            return Err(broken_slot(offset, "unknown flags"));
        }
        let stored_len = header.u32(SLOT_STORED_LEN_FIELD);
        let slot_len = header.u64(SLOT_LEN_FIELD);
        let checksum = header.u64(SLOT_CHECKSUM_FIELD);
        if slot_len < content_len(stored_len)
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
/// 72  u64 base: sequence of the last durable commit when this header was written (its own
///         sequence when its pages reached the device before it; see durable.rs)
/// 80  u64 digest of the pages of this tree written since the base (see verify.rs)
/// 88  u64 how many pages of this tree were written since the base
/// 96  u32 flags: bit 0 the three fields above are set
/// 100 [20] zero
/// 120 u64 xxh3 of bytes 0..120
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// The file's format version: `FORMAT_VERSION` for a file this release created.
    pub version: u32,
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
    /// Durability fields (`None` in a header of a writer that did not set them).
    pub since_base: Option<SinceBase>,
}

/// What a header says about the commits since the last durable one (see durable.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinceBase {
    /// The sequence number of the last durable commit; the header's own when its pages were
    /// on the device before it was written.
    pub base: u64,
    /// Sum of the digest terms of the pages of this tree written since the base.
    pub digest: u64,
    /// How many pages of this tree were written since the base.
    pub new_pages: u64,
}

impl FileHeader {
    /// Whether an open after a crash must check that this header's new pages reached the disk
    /// before using it: it was written without fsync, and says what to check against.
    pub fn needs_verification(&self) -> bool {
        !self.closed_cleanly && self.since_base.is_some_and(|since| since.base != self.sequence)
    }

    /// Whether the file's branches hold slot hints (slot_hint.rs).
    pub fn records_slot_hints(&self) -> bool {
        self.version >= HINTED_VERSION
    }

    /// Which of the two copies this header goes to.
    pub fn copy_offset(&self) -> u64 {
        (self.sequence % 2) * HEADER_SIZE as u64
    }

    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut out = HeaderBytes::<HEADER_SIZE>::new();
        out.put(MAGIC_FIELD, MAGIC);
        out.put_u32(VERSION_FIELD, self.version);
        out.put_u8(CODEC_FIELD, self.codec.id());
        out.put_u8(COMPARATOR_FIELD, self.comparator.id());
        out.put_u8(CLOSED_CLEANLY_FIELD, u8::from(self.closed_cleanly));
        out.put_u32(MAX_PAGE_SIZE_FIELD, self.max_page_size);
        out.put_u32(HEIGHT_FIELD, self.height);
        out.put_u64(ROOT_FIELD, self.root);
        out.put_u64(COUNT_FIELD, self.count);
        out.put_u64(FREE_LIST_FIELD, self.free_list);
        out.put_u64(END_FIELD, self.end);
        out.put_u64(DICTIONARY_FIELD, self.dictionary);
        out.put_u64(SEQUENCE_FIELD, self.sequence);
        if let Some(since) = self.since_base {
            out.put_u64(BASE_FIELD, since.base);
            out.put_u64(DIGEST_FIELD, since.digest);
            out.put_u64(NEW_PAGES_FIELD, since.new_pages);
            out.put_u32(FLAGS_FIELD, FLAG_TRACKS_BASE);
        }
        let checksum = xxh3_64(out.before(CHECKSUM_FIELD));
        out.put_u64(CHECKSUM_FIELD, checksum);
        out.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<FileHeader> {
        let bytes = HeaderBytes::<HEADER_SIZE>::read(bytes, "tree file header")?;
        if bytes.get(MAGIC_FIELD) != *MAGIC {
            return Err(Error::broken("not a Kura tree file (bad magic)"));
        }
        if bytes.u64(CHECKSUM_FIELD) != xxh3_64(bytes.before(CHECKSUM_FIELD)) {
            return Err(Error::broken("tree file header checksum mismatch"));
        }
        let version = bytes.u32(VERSION_FIELD);
        if !(OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Error::broken(format!(
                "tree file format version {version} is not supported (this release reads versions \
                 {OLDEST_READ_VERSION} to {FORMAT_VERSION}): open it with the release that wrote it"
            )));
        }
        let closed_cleanly = bytes.u8(CLOSED_CLEANLY_FIELD);
        if closed_cleanly > 1 {
            return Err(Error::broken("bad clean-close flag in the tree file header"));
        }
        let header = FileHeader {
            version,
            codec: CodecKind::from_id(bytes.u8(CODEC_FIELD))?,
            comparator: Comparator::from_id(bytes.u8(COMPARATOR_FIELD))?,
            closed_cleanly: closed_cleanly == 1,
            max_page_size: bytes.u32(MAX_PAGE_SIZE_FIELD),
            height: bytes.u32(HEIGHT_FIELD),
            root: bytes.u64(ROOT_FIELD),
            count: bytes.u64(COUNT_FIELD),
            free_list: bytes.u64(FREE_LIST_FIELD),
            end: bytes.u64(END_FIELD),
            dictionary: bytes.u64(DICTIONARY_FIELD),
            sequence: bytes.u64(SEQUENCE_FIELD),
            since_base: (bytes.u32(FLAGS_FIELD) & FLAG_TRACKS_BASE != 0).then(|| SinceBase {
                base: bytes.u64(BASE_FIELD),
                digest: bytes.u64(DIGEST_FIELD),
                new_pages: bytes.u64(NEW_PAGES_FIELD),
            }),
        };
        if header.since_base.is_some_and(|since| since.base > header.sequence) {
            return Err(Error::broken("tree file header: a base newer than the header"));
        }
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
    #[cfg(any(test, feature = "internals"))]
    pub fn read_current(file_start: &[u8]) -> Result<FileHeader> {
        FileHeader::read_both(file_start).map(|(newest, _)| newest)
    }

    /// Both valid copies: the current one (larger sequence number), and the other if valid
    /// (for the fuzz targets and tests).
    #[cfg(any(test, feature = "internals"))]
    pub fn read_both(file_start: &[u8]) -> Result<(FileHeader, Option<FileHeader>)> {
        let first = FileHeader::decode(file_start);
        let second = FileHeader::decode(file_start.get(HEADER_SIZE..).unwrap_or_default());
        match (first, second) {
            (Ok(a), Ok(b)) => Ok(if b.sequence > a.sequence { (b, Some(a)) } else { (a, Some(b)) }),
            (Ok(a), Err(_)) => Ok((a, None)),
            (Err(_), Ok(b)) => Ok((b, None)),
            (Err(e), Err(_)) => Err(e),
        }
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
    use crate::encoding::{documented_codec_ids, documented_layout};

    fn sample() -> FileHeader {
        FileHeader {
            version: FORMAT_VERSION,
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
            since_base: Some(SinceBase { base: 7, digest: 0xABCD, new_pages: 3 }),
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
    fn the_layouts_and_codec_ids_are_the_ones_docs_tree_md_documents() {
        let docs = include_str!("../../../../docs/tree.md");
        let header = [
            MAGIC_FIELD.row(),
            VERSION_FIELD.row(),
            CODEC_FIELD.row(),
            COMPARATOR_FIELD.row(),
            CLOSED_CLEANLY_FIELD.row(),
            PAD_FIELD.row(),
            MAX_PAGE_SIZE_FIELD.row(),
            HEIGHT_FIELD.row(),
            ROOT_FIELD.row(),
            COUNT_FIELD.row(),
            FREE_LIST_FIELD.row(),
            END_FIELD.row(),
            DICTIONARY_FIELD.row(),
            SEQUENCE_FIELD.row(),
            BASE_FIELD.row(),
            DIGEST_FIELD.row(),
            NEW_PAGES_FIELD.row(),
            FLAGS_FIELD.row(),
            RESERVED_FIELD.row(),
            CHECKSUM_FIELD.row(),
        ];
        assert_eq!(documented_layout(docs, "### File header"), header);
        let slot = [
            SLOT_FLAGS_FIELD.row(),
            SLOT_ZERO_FIELD.row(),
            SLOT_STORED_LEN_FIELD.row(),
            SLOT_LEN_FIELD.row(),
            SLOT_CHECKSUM_FIELD.row(),
        ];
        // The slot table's last row is the stored bytes (size `n`), which is not a header field.
        assert_eq!(documented_layout(docs, "### Slot"), slot);
        let ids: Vec<(u8, String)> = crate::codec::shipped().map(|c| (c.id, c.name.to_string())).collect();
        assert_eq!(documented_codec_ids(docs, "| 12 | 1 | codec id"), ids);
        let bytes = sample().encode();
        assert_eq!(&bytes[..8], b"KuraTree");
        assert_eq!((bytes[12], bytes[13], bytes[14]), (2, 1, 1));
        assert_eq!(bytes[16..20], 8192u32.to_le_bytes());
        assert_eq!(bytes[24..32], 4096u64.to_le_bytes());
        assert_eq!(bytes[64..72], 9u64.to_le_bytes());
        assert_eq!(bytes[72..80], 7u64.to_le_bytes());
        assert_eq!(bytes[80..88], 0xABCDu64.to_le_bytes());
        assert_eq!(bytes[88..96], 3u64.to_le_bytes());
        assert_eq!(bytes[96..100], 1u32.to_le_bytes());
        assert!(bytes[100..120].iter().all(|&b| b == 0), "reserved bytes are zero");
        let older = FileHeader { since_base: None, ..sample() }.encode();
        assert!(older[72..120].iter().all(|&b| b == 0), "a header without the fields leaves them zero");
        assert_eq!(FileHeader::decode(&older).unwrap().since_base, None);
        assert_eq!(bytes[120..], xxh3_64(&bytes[..120]).to_le_bytes());
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
