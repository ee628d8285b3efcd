//! The fixed 128-byte header at the start of a HashDbm file, and the layout it implies.
//!
//! The header is written when the database is created, when it is synchronized and when it
//! is closed. Its checksum covers every other byte, so a flipped bit is BrokenData rather
//! than a wrong bucket count. `closed_cleanly` is false from the moment a writer opens the
//! file until it closes it: finding it false on open means the last writer crashed.

use xxhash_rust::xxh3::xxh3_64;

use crate::codec::CodecKind;
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"KuraHash";
/// Version 2 added the dictionary and free-list checksums; version 1 files still open (see
/// `Header::version`).
pub const FORMAT_VERSION: u16 = 2;
/// The first version, whose dictionary and free list carry no checksum.
pub const FORMAT_VERSION_UNCHECKED: u16 = 1;
pub const HEADER_SIZE: u64 = 128;
/// Bytes of one bucket entry: a little-endian file offset, enough for 1 TiB files.
pub const BUCKET_WIDTH: u64 = 5;
/// The largest file a 5-byte offset can address.
pub const MAX_ADDRESSABLE: u64 = 1 << (8 * BUCKET_WIDTH);
const CHECKSUM_AT: usize = 120;

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
    pub fn name(self) -> &'static str {
        match self {
            UpdateMode::InPlace => "in_place",
            UpdateMode::Appending => "appending",
        }
    }

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
    /// The version read from the file: a version 1 file has neither checksum (both read 0
    /// and are not checked). Encoding always writes the current version.
    pub version: u16,
}

impl Header {
    /// Offset of bucket `index`'s entry.
    pub fn bucket_offset(index: u64) -> u64 {
        HEADER_SIZE + index * BUCKET_WIDTH
    }

    /// Whether the file stores checksums of its dictionary and free list (version 2 on).
    pub fn has_shared_checksums(&self) -> bool {
        self.version >= FORMAT_VERSION
    }

    /// Where the dictionary starts: right after the bucket array.
    pub fn dictionary_offset(&self) -> u64 {
        Header::bucket_offset(self.num_buckets)
    }

    /// Where records start: after the bucket array and the dictionary.
    pub fn data_start(&self) -> u64 {
        self.dictionary_offset() + u64::from(self.dictionary_len)
    }

    pub fn encode(&self) -> [u8; HEADER_SIZE as usize] {
        fn put(bytes: &mut [u8], at: usize, field: &[u8]) {
            if let Some(slot) = bytes.get_mut(at..at + field.len()) {
                slot.copy_from_slice(field);
            }
        }
        let mut bytes = [0u8; HEADER_SIZE as usize];
        let b = &mut bytes;
        put(b, 0, MAGIC);
        put(b, 8, &FORMAT_VERSION.to_le_bytes());
        put(b, 10, &[self.codec.id(), self.update_mode.id(), u8::from(self.closed_cleanly), BUCKET_WIDTH as u8]);
        put(b, 16, &self.num_buckets.to_le_bytes());
        put(b, 24, &self.record_count.to_le_bytes());
        put(b, 32, &self.data_end.to_le_bytes());
        put(b, 40, &self.max_file_size.to_le_bytes());
        put(b, 48, &self.dictionary_len.to_le_bytes());
        put(b, 56, &self.free_list_offset.to_le_bytes());
        put(b, 64, &self.free_list_len.to_le_bytes());
        put(b, 68, &self.dictionary_checksum.to_le_bytes());
        put(b, 76, &self.free_list_checksum.to_le_bytes());
        let checksum = xxh3_64(b.get(..CHECKSUM_AT).unwrap_or_default());
        put(&mut bytes, CHECKSUM_AT, &checksum.to_le_bytes());
        bytes
    }

    /// Decodes and validates a header against the length of its file.
    pub fn decode(bytes: &[u8], file_len: u64) -> Result<Header> {
        if bytes.len() < HEADER_SIZE as usize {
            return Err(Error::broken(format!(
                "the file has {} bytes, fewer than a {HEADER_SIZE}-byte header: not a Kura hash database or truncated",
                bytes.len()
            )));
        }
        let field = |at: usize, len: usize| bytes.get(at..at + len).unwrap_or_default();
        let u64_at = |at: usize| u64::from_le_bytes(field(at, 8).try_into().unwrap_or_default());
        let u32_at = |at: usize| u32::from_le_bytes(field(at, 4).try_into().unwrap_or_default());
        if field(0, 8) != MAGIC {
            return Err(Error::broken("bad magic: not a Kura hash database"));
        }
        let checksum = xxh3_64(field(0, CHECKSUM_AT));
        if checksum != u64_at(CHECKSUM_AT) {
            return Err(Error::broken("the header checksum does not match: the header is corrupted"));
        }
        let version = u16::from_le_bytes(field(8, 2).try_into().unwrap_or_default());
        if version != FORMAT_VERSION && version != FORMAT_VERSION_UNCHECKED {
            return Err(Error::broken(format!(
                "format version {version} is not supported (this build reads {FORMAT_VERSION_UNCHECKED} and {FORMAT_VERSION})"
            )));
        }
        let flags = field(10, 4);
        let (codec, mode, clean, width) = match flags {
            [c, m, s, w] => (*c, *m, *s, *w),
            _ => return Err(Error::broken("truncated header")),
        };
        if u64::from(width) != BUCKET_WIDTH || clean > 1 {
            return Err(Error::broken("unexpected bucket width or state flag in the header"));
        }
        let header = Header {
            codec: CodecKind::from_id(codec)?,
            update_mode: UpdateMode::from_id(mode)?,
            closed_cleanly: clean == 1,
            num_buckets: u64_at(16),
            record_count: u64_at(24),
            data_end: u64_at(32),
            max_file_size: u64_at(40),
            dictionary_len: u32_at(48),
            free_list_offset: u64_at(56),
            free_list_len: u32_at(64),
            dictionary_checksum: u64_at(68),
            free_list_checksum: u64_at(76),
            version,
        };
        header.validate(file_len)?;
        Ok(header)
    }

    /// Checks that every offset the header implies lies within the file, so that nothing
    /// later is sized or positioned by a bad number.
    fn validate(&self, file_len: u64) -> Result<()> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn sample() -> Header {
        Header {
            codec: CodecKind::Zstd,
            update_mode: UpdateMode::InPlace,
            closed_cleanly: true,
            num_buckets: 16,
            record_count: 3,
            data_end: 300,
            max_file_size: 1 << 40,
            dictionary_len: 0,
            free_list_offset: 0,
            free_list_len: 0,
            dictionary_checksum: 7,
            free_list_checksum: 9,
            version: FORMAT_VERSION,
        }
    }

    #[test]
    fn round_trip() {
        let header = sample();
        assert_eq!(Header::decode(&header.encode(), 300).unwrap(), header);
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut broken = bytes;
            broken[i] ^= 0x10;
            assert!(Header::decode(&broken, 300).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn a_version_1_header_opens_without_shared_checksums() {
        let mut bytes = sample().encode();
        bytes[8..10].copy_from_slice(&FORMAT_VERSION_UNCHECKED.to_le_bytes());
        bytes[68..84].fill(0);
        let checksum = xxh3_64(&bytes[..CHECKSUM_AT]);
        bytes[CHECKSUM_AT..].copy_from_slice(&checksum.to_le_bytes());
        let header = Header::decode(&bytes, 300).unwrap();
        assert!(!header.has_shared_checksums());
        assert!(sample().has_shared_checksums());
    }

    #[test]
    fn truncated_file_is_detected() {
        let header = sample();
        assert!(Header::decode(&header.encode(), 200).is_err());
        assert!(Header::decode(&header.encode()[..100], 300).is_err());
    }
}
