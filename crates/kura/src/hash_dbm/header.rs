//! The fixed 128-byte header at the start of a HashDbm file, its copy, and the layout they imply.
//!
//! The header is written when the database is created, when it is synchronized and when it
//! is closed. Its checksum covers every other byte, so a flipped bit is BrokenData rather
//! than a wrong bucket count. `closed_cleanly` is false from the moment a writer opens the
//! file until it closes it: finding it false on open means the last writer crashed.
//!
//! Since version 4 the file holds the header twice, at the start of each of its first two
//! 512-byte sectors, both written by one `pwrite`; the bucket array starts at 1,024. A
//! header that fails its check is read from the other copy (header_copies.rs), so one damaged
//! byte, or a whole damaged sector, costs nothing (docs/format.md, "Header region").
//!
//! Since version 5 every record carries the wide check (record.rs); the version a file is
//! created with follows from its `record_check` (`RecordCheck::version`): `narrow` makes a
//! version 4 file, whose layout is the one that lacks them.

use xxhash_rust::xxh3::xxh3_64;

use super::record::CheckLayout;
use crate::codec::CodecKind;
use crate::encoding::{Field, HeaderBytes};
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"KuraHash";
/// The newest version, which new files get by default. Version 5 gives every record the wide
/// check; files of versions 1 to 4 still open and keep their version (their records lack it).
pub const FORMAT_VERSION: u16 = FORMAT_VERSION_WIDE_RECORDS;
/// Version 5 gives every record, tombstone and dead record the wide check (37 bits).
pub const FORMAT_VERSION_WIDE_RECORDS: u16 = 5;
/// Version 4 keeps the header twice (`COPY_OFFSET`) and the bucket array at `HEADER_REGION`.
pub const FORMAT_VERSION_HEADER_COPY: u16 = 4;
/// Version 3 gives a record crossing a 512-byte sector a wide check (record.rs); files of
/// versions 1 and 2 still open and keep their version, as their records have none (see
/// `Header::version`).
pub const FORMAT_VERSION_WIDE_CHECKS: u16 = 3;
/// Version 2 added the dictionary and free-list checksums.
pub const FORMAT_VERSION_SHARED_CHECKS: u16 = 2;
/// The first version, whose dictionary and free list carry no checksum.
pub const FORMAT_VERSION_UNCHECKED: u16 = 1;
/// Bytes of one bucket entry: a little-endian file offset, enough for 1 TiB files.
pub const BUCKET_WIDTH: u64 = 5;
/// The largest file a 5-byte offset can address.
pub const MAX_ADDRESSABLE: u64 = 1 << (8 * BUCKET_WIDTH);

// The header's fields, each after the one before (docs/format.md has the same table).
const MAGIC_FIELD: Field<HEADER_BYTES, { MAGIC.len() }> = Field::first();
const VERSION_FIELD: Field<HEADER_BYTES, 2> = Field::after(MAGIC_FIELD);
const CODEC_FIELD: Field<HEADER_BYTES, 1> = Field::after(VERSION_FIELD);
const UPDATE_MODE_FIELD: Field<HEADER_BYTES, 1> = Field::after(CODEC_FIELD);
const CLOSED_CLEANLY_FIELD: Field<HEADER_BYTES, 1> = Field::after(UPDATE_MODE_FIELD);
const BUCKET_WIDTH_FIELD: Field<HEADER_BYTES, 1> = Field::after(CLOSED_CLEANLY_FIELD);
const PAD_FIELD: Field<HEADER_BYTES, 2> = Field::after(BUCKET_WIDTH_FIELD);
const NUM_BUCKETS_FIELD: Field<HEADER_BYTES, 8> = Field::after(PAD_FIELD);
const RECORD_COUNT_FIELD: Field<HEADER_BYTES, 8> = Field::after(NUM_BUCKETS_FIELD);
const DATA_END_FIELD: Field<HEADER_BYTES, 8> = Field::after(RECORD_COUNT_FIELD);
const MAX_FILE_SIZE_FIELD: Field<HEADER_BYTES, 8> = Field::after(DATA_END_FIELD);
const DICTIONARY_LEN_FIELD: Field<HEADER_BYTES, 4> = Field::after(MAX_FILE_SIZE_FIELD);
const PAD2_FIELD: Field<HEADER_BYTES, 4> = Field::after(DICTIONARY_LEN_FIELD);
const FREE_LIST_OFFSET_FIELD: Field<HEADER_BYTES, 8> = Field::after(PAD2_FIELD);
const FREE_LIST_LEN_FIELD: Field<HEADER_BYTES, 4> = Field::after(FREE_LIST_OFFSET_FIELD);
/// Version 2: xxh3 of the zstd dictionary (0 without one).
const DICTIONARY_CHECKSUM_FIELD: Field<HEADER_BYTES, 8> = Field::after(FREE_LIST_LEN_FIELD);
/// Version 2: xxh3 of the saved free-block list (0 without one).
const FREE_LIST_CHECKSUM_FIELD: Field<HEADER_BYTES, 8> = Field::after(DICTIONARY_CHECKSUM_FIELD);
/// Records the last rebuild wrote, packed several to a bucket (0: never rebuilt, or rebuilt
/// by a release before this field, which left these bytes zero).
const REBUILT_RECORDS_FIELD: Field<HEADER_BYTES, 8> = Field::after(FREE_LIST_CHECKSUM_FIELD);
const RESERVED_FIELD: Field<HEADER_BYTES, 28> = Field::after(REBUILT_RECORDS_FIELD);
/// xxh3 of every byte before it.
const CHECKSUM_FIELD: Field<HEADER_BYTES, 8> = Field::after(RESERVED_FIELD);
pub const HEADER_BYTES: usize = 128;
pub const HEADER_SIZE: u64 = HEADER_BYTES as u64;
const _: () = assert!(CHECKSUM_FIELD.end() == HEADER_BYTES, "docs/format.md specifies a 128-byte header");
/// Where a version 4 file keeps the copy of its header: the start of its second 512-byte
/// sector, so that a write torn inside one sector (or a sector lost) leaves the other copy.
pub const COPY_OFFSET: u64 = 512;
pub(super) const COPY_AT: usize = COPY_OFFSET as usize;
/// The bytes a version 4 header write covers: the header, the zeros up to the copy, the copy.
pub const COPIES_BYTES: usize = COPY_AT + HEADER_BYTES;
/// Where a version 4 file's bucket array starts: after the two sectors of the header region,
/// which no other write touches.
pub const HEADER_REGION: u64 = 1024;
const _: () = assert!(COPY_OFFSET >= 512 && COPY_OFFSET.is_multiple_of(512) && HEADER_REGION >= COPY_OFFSET + 512);

/// How many check bits a new file's records carry (the `record_check` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordCheck {
    /// 37 bits in every record (format version 5): one damaged value in 137 billion passes.
    Wide,
    /// 13 bits, 37 in a record crossing a 512-byte sector (format version 4's layout): 3
    /// bytes fewer per record, and one value damaged inside a sector in 8,192 passes.
    Narrow,
}

impl RecordCheck {
    /// The name in parameters: `wide` or `narrow`.
    pub fn name(self) -> &'static str {
        match self {
            RecordCheck::Wide => "wide",
            RecordCheck::Narrow => "narrow",
        }
    }

    /// The setting called `name`; InvalidArgument otherwise.
    pub fn from_name(name: &str) -> Result<RecordCheck> {
        match name {
            "wide" => Ok(RecordCheck::Wide),
            "narrow" => Ok(RecordCheck::Narrow),
            _ => Err(Error::invalid(format!("record_check {name:?} is not wide or narrow"))),
        }
    }

    /// The format version a new file of this setting is written in: the newest, or for
    /// `narrow` version 4, whose layout it is.
    pub fn version(self) -> u16 {
        match self {
            RecordCheck::Wide => FORMAT_VERSION_WIDE_RECORDS,
            RecordCheck::Narrow => FORMAT_VERSION_HEADER_COPY,
        }
    }
}

/// How updates use the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    /// Replaced and removed records become free blocks that later records reuse.
    InPlace,
    /// Nothing written is ever overwritten: updates and removals append new records (a
    /// removal appends a tombstone). The file only grows until it is rebuilt.
    Appending,
}

impl UpdateMode {
    /// The name in parameters: `in_place` or `appending`.
    pub fn name(self) -> &'static str {
        match self {
            UpdateMode::InPlace => "in_place",
            UpdateMode::Appending => "appending",
        }
    }

    /// The mode called `name`; InvalidArgument otherwise.
    pub fn from_name(name: &str) -> Result<UpdateMode> {
        match name {
            "in_place" | "in-place" => Ok(UpdateMode::InPlace),
            "appending" | "append" => Ok(UpdateMode::Appending),
            _ => Err(Error::invalid(format!("update_mode {name:?} is not in_place or appending"))),
        }
    }

    fn id(self) -> u8 {
        match self {
            UpdateMode::InPlace => 0,
            UpdateMode::Appending => 1,
        }
    }

    fn from_id(id: u8) -> Result<UpdateMode> {
        match id {
            0 => Ok(UpdateMode::InPlace),
            1 => Ok(UpdateMode::Appending),
            _ => Err(Error::broken(format!("unknown update mode {id} in the header"))),
        }
    }
}

/// The decoded header. Field order here is the byte order in the file (see docs/format.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub codec: CodecKind,
    pub update_mode: UpdateMode,
    pub closed_cleanly: bool,
    pub num_buckets: u64,
    pub record_count: u64,
    /// End of the record area: where the next appended record goes.
    pub data_end: u64,
    pub max_file_size: u64,
    pub dictionary_len: u32,
    /// Where the saved free-block list starts (0: none); it runs to the end of the file.
    pub free_list_offset: u64,
    pub free_list_len: u32,
    /// XXH3-64 of the dictionary bytes; checked at open before any value is decoded.
    pub dictionary_checksum: u64,
    /// XXH3-64 of the saved free-block list; a list that fails it is not loaded.
    pub free_list_checksum: u64,
    /// Records the last rebuild wrote (0: none known); `HashDbm::should_be_rebuilt` counts
    /// only the records beyond them against the buckets.
    pub rebuilt_records: u64,
    /// The version read from the file: a version 1 file has neither checksum (both read 0
    /// and are not checked); a file before version 3 has no wide record checks. Encoding
    /// writes version 2 for a version 1 file (the first writer stores both checksums) and
    /// the file's own version otherwise: the records decide whether it can be 3.
    pub version: u16,
}

impl Header {
    /// Whether the file keeps a copy of its header (version 4 on).
    pub fn has_copy(&self) -> bool {
        self.version >= FORMAT_VERSION_HEADER_COPY
    }

    /// Where the bucket array starts: after the header region (version 4), else right after
    /// the one header.
    pub fn buckets_start(&self) -> u64 {
        buckets_start_of(self.version)
    }

    /// Offset of bucket `index`'s entry.
    pub fn bucket_offset(&self, index: u64) -> u64 {
        self.buckets_start() + index * BUCKET_WIDTH
    }

    /// Whether the file stores checksums of its dictionary and free list (version 2 on).
    pub fn has_shared_checksums(&self) -> bool {
        self.version >= FORMAT_VERSION_SHARED_CHECKS
    }

    /// Which of its records carry a wide check (version 3 on: those crossing a sector;
    /// version 5 on: every one).
    pub fn check_layout(&self) -> CheckLayout {
        if self.version >= FORMAT_VERSION_WIDE_RECORDS {
            CheckLayout::Wide
        } else if self.version >= FORMAT_VERSION_WIDE_CHECKS {
            CheckLayout::WideAcrossSectors
        } else {
            CheckLayout::Narrow
        }
    }

    /// The `record_check` a copy of this file keeps (a rebuild, a restore after a crash):
    /// wide for version 5, narrow before (whose records lack the wide check).
    pub fn record_check(&self) -> RecordCheck {
        if self.check_layout() == CheckLayout::Wide {
            RecordCheck::Wide
        } else {
            RecordCheck::Narrow
        }
    }

    /// Where the dictionary starts: right after the bucket array.
    pub fn dictionary_offset(&self) -> u64 {
        self.bucket_offset(self.num_buckets)
    }

    /// Where records start: after the bucket array and the dictionary.
    pub fn data_start(&self) -> u64 {
        self.dictionary_offset() + u64::from(self.dictionary_len)
    }

    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = HeaderBytes::<HEADER_BYTES>::new();
        b.put(MAGIC_FIELD, MAGIC);
        b.put_u16(VERSION_FIELD, self.version.max(FORMAT_VERSION_SHARED_CHECKS));
        b.put_u8(CODEC_FIELD, self.codec.id());
        b.put_u8(UPDATE_MODE_FIELD, self.update_mode.id());
        b.put_u8(CLOSED_CLEANLY_FIELD, u8::from(self.closed_cleanly));
        b.put_u8(BUCKET_WIDTH_FIELD, BUCKET_WIDTH as u8);
        b.put_u64(NUM_BUCKETS_FIELD, self.num_buckets);
        b.put_u64(RECORD_COUNT_FIELD, self.record_count);
        b.put_u64(DATA_END_FIELD, self.data_end);
        b.put_u64(MAX_FILE_SIZE_FIELD, self.max_file_size);
        b.put_u32(DICTIONARY_LEN_FIELD, self.dictionary_len);
        b.put_u64(FREE_LIST_OFFSET_FIELD, self.free_list_offset);
        b.put_u32(FREE_LIST_LEN_FIELD, self.free_list_len);
        b.put_u64(DICTIONARY_CHECKSUM_FIELD, self.dictionary_checksum);
        b.put_u64(FREE_LIST_CHECKSUM_FIELD, self.free_list_checksum);
        b.put_u64(REBUILT_RECORDS_FIELD, self.rebuilt_records);
        let checksum = xxh3_64(b.before(CHECKSUM_FIELD));
        b.put_u64(CHECKSUM_FIELD, checksum);
        b.into_bytes()
    }

    /// The bytes a header write puts at offset 0: the header alone before version 4; from
    /// version 4 the whole header region, the header, zeros, the same header again at
    /// `COPY_OFFSET` and zeros, one write within one page (so a killed writer leaves all of it
    /// or none of it, and a writer's open repairs any byte of the region).
    pub fn encode_copies(&self) -> Vec<u8> {
        let one = self.encode();
        if !self.has_copy() {
            return one.to_vec();
        }
        let mut bytes = vec![0u8; HEADER_REGION as usize];
        for at in [0, COPY_AT] {
            if let Some(place) = bytes.get_mut(at..at + HEADER_BYTES) {
                place.copy_from_slice(&one);
            }
        }
        bytes
    }

    /// Decodes and validates a header against the length of its file (the fuzz targets' and
    /// tests' way in; an open reads both copies instead).
    #[cfg(any(test, feature = "internals"))]
    pub fn decode(bytes: &[u8], file_len: u64) -> Result<Header> {
        let header = Header::decode_fields(bytes)?;
        header.validate(file_len)?;
        Ok(header)
    }

    /// Decodes a header whose checksum holds, without checking it against its file: a
    /// salvage takes the layout of a file cut short from it (see header_salvage.rs).
    pub fn decode_fields(bytes: &[u8]) -> Result<Header> {
        if bytes.len() < HEADER_BYTES {
            return Err(Error::broken(format!(
                "the file has {} bytes, fewer than a {HEADER_SIZE}-byte header: not a Kura hash database or truncated",
                bytes.len()
            )));
        }
        let b = HeaderBytes::<HEADER_BYTES>::read(bytes, "hash database header")?;
        if b.get(MAGIC_FIELD) != *MAGIC {
            return Err(Error::broken("bad magic: not a Kura hash database"));
        }
        if xxh3_64(b.before(CHECKSUM_FIELD)) != b.u64(CHECKSUM_FIELD) {
            return Err(Error::broken("the header checksum does not match: the header is corrupted"));
        }
        let version = b.u16(VERSION_FIELD);
        if !(FORMAT_VERSION_UNCHECKED..=FORMAT_VERSION).contains(&version) {
            return Err(Error::broken(format!(
                "format version {version} is not supported (this build reads versions {FORMAT_VERSION_UNCHECKED} to {FORMAT_VERSION})"
            )));
        }
        let clean = b.u8(CLOSED_CLEANLY_FIELD);
        if u64::from(b.u8(BUCKET_WIDTH_FIELD)) != BUCKET_WIDTH || clean > 1 {
            return Err(Error::broken("unexpected bucket width or state flag in the header"));
        }
        Ok(Header {
            codec: CodecKind::from_id(b.u8(CODEC_FIELD))?,
            update_mode: UpdateMode::from_id(b.u8(UPDATE_MODE_FIELD))?,
            closed_cleanly: clean == 1,
            num_buckets: b.u64(NUM_BUCKETS_FIELD),
            record_count: b.u64(RECORD_COUNT_FIELD),
            data_end: b.u64(DATA_END_FIELD),
            max_file_size: b.u64(MAX_FILE_SIZE_FIELD),
            dictionary_len: b.u32(DICTIONARY_LEN_FIELD),
            free_list_offset: b.u64(FREE_LIST_OFFSET_FIELD),
            free_list_len: b.u32(FREE_LIST_LEN_FIELD),
            dictionary_checksum: b.u64(DICTIONARY_CHECKSUM_FIELD),
            free_list_checksum: b.u64(FREE_LIST_CHECKSUM_FIELD),
            rebuilt_records: b.u64(REBUILT_RECORDS_FIELD),
            version,
        })
    }

    /// Checks that every offset the header implies lies within the file, so that nothing
    /// later is sized or positioned by a bad number.
    pub fn validate(&self, file_len: u64) -> Result<()> {
        let bad = |what: String| Err(Error::broken(format!("header: {what}")));
        if self.num_buckets == 0 || self.num_buckets > MAX_ADDRESSABLE / BUCKET_WIDTH {
            return bad(format!("impossible bucket count {}", self.num_buckets));
        }
        if self.max_file_size > MAX_ADDRESSABLE || self.max_file_size < HEADER_SIZE {
            return bad(format!("impossible maximum file size {}", self.max_file_size));
        }
        if self.data_start() > file_len {
            return bad(format!(
                "the bucket array and dictionary end at {}, past the end of the file ({file_len} bytes): truncated",
                self.data_start()
            ));
        }
        if self.closed_cleanly {
            if self.data_end < self.data_start() || self.data_end > file_len {
                return bad(format!("data end {} outside the file ({file_len} bytes)", self.data_end));
            }
            let free_end = self.free_list_offset.saturating_add(u64::from(self.free_list_len));
            if self.free_list_len > 0 && (self.free_list_offset < self.data_end || free_end > file_len) {
                return bad("the free-block list lies outside the file".to_string());
            }
        }
        Ok(())
    }
}

/// Where the bucket array of a file of format `version` starts.
pub fn buckets_start_of(version: u16) -> u64 {
    if version >= FORMAT_VERSION_HEADER_COPY {
        HEADER_REGION
    } else {
        HEADER_SIZE
    }
}

/// The header's fields read as they are, without the checksum or any check: what a salvage
/// of a file whose header is damaged beyond repair starts from. Each is a hint only, to be
/// confirmed by the file's own bytes (header_salvage.rs) before it is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hints {
    pub version: u16,
    pub codec_id: u8,
    pub update_mode_id: u8,
    pub closed_cleanly: u8,
    pub num_buckets: u64,
    pub data_end: u64,
    pub max_file_size: u64,
    pub dictionary_len: u32,
    pub free_list_offset: u64,
    pub free_list_len: u32,
    pub dictionary_checksum: u64,
    pub free_list_checksum: u64,
}

impl Hints {
    /// The fields of the first 128 bytes of a file (missing bytes read as zero).
    pub fn read(bytes: &[u8]) -> Hints {
        let mut padded = [0u8; HEADER_BYTES];
        let available = bytes.len().min(HEADER_BYTES);
        if let (Some(to), Some(from)) = (padded.get_mut(..available), bytes.get(..available)) {
            to.copy_from_slice(from);
        }
        let b = HeaderBytes::<HEADER_BYTES>::read(&padded, "hash database header").unwrap_or_default();
        Hints {
            version: b.u16(VERSION_FIELD),
            codec_id: b.u8(CODEC_FIELD),
            update_mode_id: b.u8(UPDATE_MODE_FIELD),
            closed_cleanly: b.u8(CLOSED_CLEANLY_FIELD),
            num_buckets: b.u64(NUM_BUCKETS_FIELD),
            data_end: b.u64(DATA_END_FIELD),
            max_file_size: b.u64(MAX_FILE_SIZE_FIELD),
            dictionary_len: b.u32(DICTIONARY_LEN_FIELD),
            free_list_offset: b.u64(FREE_LIST_OFFSET_FIELD),
            free_list_len: b.u32(FREE_LIST_LEN_FIELD),
            dictionary_checksum: b.u64(DICTIONARY_CHECKSUM_FIELD),
            free_list_checksum: b.u64(FREE_LIST_CHECKSUM_FIELD),
        }
    }

    /// The fields of the header at 0, or of the copy at `COPY_OFFSET` when only the copy
    /// still starts with the magic (the first `COPIES_BYTES` bytes of a file, or fewer).
    pub fn read_either(bytes: &[u8]) -> Hints {
        let copy = bytes.get(COPY_AT..COPIES_BYTES).filter(|copy| copy.starts_with(MAGIC));
        match copy {
            Some(copy) if !bytes.starts_with(MAGIC) => Hints::read(copy),
            _ => Hints::read(bytes),
        }
    }

    /// The update mode the hint names, if it names one.
    pub fn update_mode(&self) -> Option<UpdateMode> {
        UpdateMode::from_id(self.update_mode_id).ok()
    }
}

/// A header that fails to decode but differs in one byte from one that decodes: the damaged
/// byte, located by the 64-bit header checksum, and the header with it put back
/// (`encoding::repair_one_byte`, which TreeDbm's header copies share).
pub fn repair_one_byte(bytes: &[u8]) -> Option<(Header, usize)> {
    crate::encoding::repair_one_byte(bytes, CHECKSUM_FIELD, |b: &[u8; HEADER_BYTES]| Header::decode_fields(b).ok())
        .map(|repaired| (repaired.value, repaired.byte))
}

/// A sound header of the current version, for the tests of the header and its copies.
#[cfg(test)]
pub(super) fn sample() -> Header {
    Header {
        codec: CodecKind::Zstd,
        update_mode: UpdateMode::InPlace,
        closed_cleanly: true,
        num_buckets: 16,
        record_count: 3,
        data_end: 1200,
        max_file_size: 1 << 40,
        dictionary_len: 0,
        free_list_offset: 0,
        free_list_len: 0,
        dictionary_checksum: 7,
        free_list_checksum: 9,
        rebuilt_records: 2,
        version: FORMAT_VERSION,
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

    #[test]
    fn round_trip() {
        let header = sample();
        assert_eq!(Header::decode(&header.encode(), 1200).unwrap(), header);
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut broken = bytes;
            broken[i] ^= 0x10;
            assert!(Header::decode(&broken, 1200).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn the_layout_and_codec_ids_are_the_ones_docs_format_md_documents() {
        let docs = include_str!("../../../../docs/format.md");
        let fields = [
            MAGIC_FIELD.row(),
            VERSION_FIELD.row(),
            CODEC_FIELD.row(),
            UPDATE_MODE_FIELD.row(),
            CLOSED_CLEANLY_FIELD.row(),
            BUCKET_WIDTH_FIELD.row(),
            PAD_FIELD.row(),
            NUM_BUCKETS_FIELD.row(),
            RECORD_COUNT_FIELD.row(),
            DATA_END_FIELD.row(),
            MAX_FILE_SIZE_FIELD.row(),
            DICTIONARY_LEN_FIELD.row(),
            PAD2_FIELD.row(),
            FREE_LIST_OFFSET_FIELD.row(),
            FREE_LIST_LEN_FIELD.row(),
            DICTIONARY_CHECKSUM_FIELD.row(),
            FREE_LIST_CHECKSUM_FIELD.row(),
            REBUILT_RECORDS_FIELD.row(),
            RESERVED_FIELD.row(),
            CHECKSUM_FIELD.row(),
        ];
        assert_eq!(documented_layout(docs, "### Header (128 bytes)"), fields);
        let ids: Vec<(u8, String)> = crate::codec::shipped().map(|c| (c.id, c.name.to_string())).collect();
        assert_eq!(documented_codec_ids(docs, "| 10 | 1 | codec |"), ids);
        // The bytes the table describes: a sample header's fields at the documented offsets.
        let bytes = sample().encode();
        assert_eq!(&bytes[..8], b"KuraHash");
        assert_eq!(bytes[8..10], FORMAT_VERSION.to_le_bytes());
        assert_eq!((bytes[10], bytes[11], bytes[12], bytes[13]), (2, 0, 1, 5));
        assert_eq!(bytes[16..24], 16u64.to_le_bytes());
        assert_eq!(bytes[24..32], 3u64.to_le_bytes());
        assert_eq!(bytes[32..40], 1200u64.to_le_bytes());
        assert_eq!(bytes[84..92], 2u64.to_le_bytes());
        assert!(bytes[92..120].iter().all(|&b| b == 0), "reserved bytes are zero");
        assert_eq!(bytes[120..], xxh3_64(&bytes[..120]).to_le_bytes());
    }

    /// The header region of docs/format.md: the header, zeros, the copy at 512, zeros to 1,024.
    #[test]
    fn the_header_region_is_the_one_docs_format_md_documents() {
        let docs = include_str!("../../../../docs/format.md");
        let region = [
            (0, HEADER_BYTES),
            (HEADER_BYTES, COPY_AT - HEADER_BYTES),
            (COPY_AT, HEADER_BYTES),
            (COPIES_BYTES, HEADER_REGION as usize - COPIES_BYTES),
        ];
        assert_eq!(documented_layout(docs, "### Header region"), region);
        let bytes = sample().encode_copies();
        assert_eq!(bytes.len(), HEADER_REGION as usize);
        assert_eq!(bytes[..HEADER_BYTES], sample().encode());
        assert_eq!(bytes[COPY_AT..COPIES_BYTES], sample().encode());
        assert!(bytes[HEADER_BYTES..COPY_AT].iter().chain(&bytes[COPIES_BYTES..]).all(|&b| b == 0));
        assert_eq!(sample().bucket_offset(2), HEADER_REGION + 10);
        // Before version 4: one header, and the buckets right after it.
        let v3 = Header { version: FORMAT_VERSION_WIDE_CHECKS, ..sample() };
        assert_eq!(v3.encode_copies(), v3.encode().to_vec());
        assert_eq!(v3.bucket_offset(2), HEADER_SIZE + 10);
    }

    #[test]
    fn every_codec_has_a_documented_frame() {
        let docs = include_str!("../../../../docs/format.md");
        let frames = docs.split_once("### Codec frames").map(|(_, rest)| rest).unwrap_or_default();
        for codec in crate::codec::shipped().filter(|c| c.kind != CodecKind::None) {
            assert!(frames.contains(&format!("| {} |", codec.name)), "docs/format.md has no frame for {}", codec.name);
        }
    }

    #[test]
    fn a_version_1_header_opens_without_shared_checksums() {
        let mut bytes = sample().encode();
        bytes[8..10].copy_from_slice(&FORMAT_VERSION_UNCHECKED.to_le_bytes());
        bytes[68..84].fill(0);
        let checksum = xxh3_64(&bytes[..120]);
        bytes[120..].copy_from_slice(&checksum.to_le_bytes());
        let header = Header::decode(&bytes, 1200).unwrap();
        assert!(!header.has_shared_checksums());
        assert_eq!(header.check_layout(), CheckLayout::Narrow);
        assert!(sample().has_shared_checksums());
        // The first writer stores both checksums: version 2, still without wide checks.
        assert_eq!(header.encode()[8..10], FORMAT_VERSION_SHARED_CHECKS.to_le_bytes());
    }

    #[test]
    fn a_version_2_header_keeps_its_version_and_its_narrow_checks() {
        let v2 = Header { version: FORMAT_VERSION_SHARED_CHECKS, ..sample() };
        let decoded = Header::decode(&v2.encode(), 1200).unwrap();
        assert_eq!(decoded.version, FORMAT_VERSION_SHARED_CHECKS);
        assert!(decoded.has_shared_checksums());
        assert_eq!(decoded.check_layout(), CheckLayout::Narrow);
        assert_eq!(sample().check_layout(), CheckLayout::Wide);
    }

    #[test]
    fn record_check_names_its_version_and_a_version_its_record_check() {
        for check in [RecordCheck::Wide, RecordCheck::Narrow] {
            assert_eq!(RecordCheck::from_name(check.name()).unwrap(), check);
            let header = Header { version: check.version(), ..sample() };
            let decoded = Header::decode(&header.encode(), 1200).unwrap();
            assert_eq!(decoded.record_check(), check);
            assert!(decoded.has_copy(), "both settings keep the header copy");
        }
        assert_eq!(
            Header { version: FORMAT_VERSION_HEADER_COPY, ..sample() }.check_layout(),
            CheckLayout::WideAcrossSectors
        );
        assert!(RecordCheck::from_name("37").unwrap_err().to_string().contains("record_check"));
    }

    #[test]
    fn a_later_version_is_refused() {
        let later = Header { version: FORMAT_VERSION + 1, ..sample() };
        let message = Header::decode(&later.encode(), 1200).unwrap_err().to_string();
        assert!(message.contains("not supported"), "{message}");
    }

    #[test]
    fn truncated_file_is_detected() {
        let header = sample();
        assert!(Header::decode(&header.encode(), 200).is_err());
        assert!(Header::decode(&header.encode()[..100], 1200).is_err());
    }
}
