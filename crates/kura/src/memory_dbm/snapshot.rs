//! The snapshot file of the memory engines: all records, written at once and replaced
//! atomically, read back whole at open. The format is specified in docs/memory.md:
//!
//! ```text
//! header   "KURAMEM\0"  version:u8=3  class:u8 ('t' | 'b' | 'c' | 'z')  6 zero bytes
//! params   params_len:varint  params (UTF-8, `name=value,...`: what reopening needs)
//!          header_checksum:u64 LE (xxh3-64 of the header and the parameters)
//! blocks   { "KBLK"  records_len:u32 LE  record_count:u32 LE
//!            checksum:u64 LE (xxh3-64 seeded with the block's offset, of records_len,
//!                             record_count and the records)
//!            records { key_len:varint  value_len:varint  key  value }* }*
//! trailer  "KEND"  params (a copy)  params_len:u32 LE  block_count:u64 LE
//!          record_count:u64 LE  checksum:u64 LE (xxh3-64 seeded with the trailer's offset, of
//!                                                the trailer's bytes before it)
//! ```
//!
//! Each block of about `BLOCK_TARGET` bytes carries its own checksum, so a damaged byte costs
//! the records of its block only: `snapshot_salvage.rs` reads every intact block of a damaged
//! file. Versions 1 (no parameters) and 2 (one checksum over the whole file, no blocks) still
//! open. Readers check every checksum before they trust the bytes it covers and every length
//! against the bytes that remain, so a truncated or corrupted file is a BrokenData error, and
//! no allocation is ever sized by a length read from the file (records and parameters are
//! slices of the file's bytes).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed, Xxh3};

use crate::dbm::Params;
use crate::encoding::{encode_varint, ByteReader, Field, HeaderBytes, MAX_VARINT_LEN};
use crate::engine::Mark;
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"KURAMEM\0";
/// The version written: 3 put the records in checksummed blocks.
pub const VERSION: u8 = 3;
/// Version 2 files have one checksum over the whole file; they still open.
pub const VERSION_WHOLE_CHECKSUM: u8 = 2;
/// Version 1 files have no parameters either; they still open.
pub const VERSION_WITHOUT_PARAMS: u8 = 1;

// The header's fields, each after the one before.
const MAGIC_FIELD: Field<HEADER_LEN, { MAGIC.len() }> = Field::first();
const VERSION_FIELD: Field<HEADER_LEN, 1> = Field::after(MAGIC_FIELD);
const CLASS_FIELD: Field<HEADER_LEN, 1> = Field::after(VERSION_FIELD);
const RESERVED_FIELD: Field<HEADER_LEN, 6> = Field::after(CLASS_FIELD);
pub const HEADER_LEN: usize = 16;
const _: () = assert!(RESERVED_FIELD.end() == HEADER_LEN, "docs/memory.md specifies a 16-byte header");

/// The marks of a snapshot of the engine whose class byte is `class`: the magic, and the
/// class after the version.
pub const fn magic(class: &'static u8) -> [Mark; 2] {
    [Mark::new(0, MAGIC), Mark::new(CLASS_FIELD.offset(), std::slice::from_ref(class))]
}

/// A version 1 or 2 file's trailer: the record count, then the checksum of every byte before it.
pub const TRAILER_LEN: usize = 2 * size_of::<u64>();

/// What starts each block, and the trailer.
pub(super) const BLOCK_MAGIC: &[u8; 4] = b"KBLK";
pub(super) const TRAILER_MAGIC: &[u8; 4] = b"KEND";
/// A block's magic, records length, record count and checksum.
pub(super) const BLOCK_HEAD_LEN: usize = 4 + 4 + 4 + 8;
/// The trailer's fixed end: params_len, block count, record count, checksum.
const TRAILER_END_LEN: usize = 4 + 8 + 8 + 8;
/// A block is written once its records take this many bytes (a larger record makes a larger
/// block): 20 bytes of framing per 4 KiB, and a damaged byte costs about 4 KiB of records.
const BLOCK_TARGET: usize = 4096;

fn broken(what: &str) -> Error {
    Error::broken(format!("memory snapshot: {what}"))
}

/// Reads a little-endian u32 at `at` of `bytes`, if there are four bytes there.
fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let four: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(four))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let eight: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(eight))
}

/// Streams records into a snapshot file, a block at a time.
pub struct SnapshotWriter {
    out: BufWriter<File>,
    /// Bytes written so far: the offset of the next block, which seeds its checksum.
    offset: u64,
    /// The records of the block being gathered.
    block: Vec<u8>,
    block_records: u32,
    blocks: u64,
    count: u64,
    params: String,
    context: String,
    /// The file written, for the sync probe.
    path: PathBuf,
}

impl SnapshotWriter {
    /// Creates (or truncates) `path` and writes the header for engine class `class` and the
    /// parameters a reopen takes from the file (`name=value,...`, possibly empty).
    pub fn create(path: &Path, class: u8, params: &str) -> Result<SnapshotWriter> {
        let context = format!("write {}", path.display());
        let file = File::create(path).map_err(|e| Error::io(&context, e))?;
        let mut writer = SnapshotWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            offset: 0,
            block: Vec::with_capacity(2 * BLOCK_TARGET),
            block_records: 0,
            blocks: 0,
            count: 0,
            params: params.to_string(),
            context,
            path: path.to_path_buf(),
        };
        let mut fields = HeaderBytes::<HEADER_LEN>::new();
        fields.put(MAGIC_FIELD, MAGIC);
        fields.put_u8(VERSION_FIELD, VERSION);
        fields.put_u8(CLASS_FIELD, class);
        let mut header = fields.as_bytes().to_vec();
        put_len(&mut header, params.len());
        header.extend_from_slice(params.as_bytes());
        let checksum = xxh3_64(&header);
        header.extend_from_slice(&checksum.to_le_bytes());
        writer.put(&header)?;
        Ok(writer)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.offset += bytes.len() as u64;
        self.out.write_all(bytes).map_err(|e| Error::io(&self.context, e))
    }

    pub fn record(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let framed = 2 * MAX_VARINT_LEN + key.len() + value.len();
        if u32::try_from(framed).is_err() {
            return Err(Error::invalid("a record of 4 GiB or more does not fit a snapshot block"));
        }
        if self.block.len() + framed > u32::MAX as usize || self.block_records == u32::MAX {
            self.flush_block()?;
        }
        put_len(&mut self.block, key.len());
        put_len(&mut self.block, value.len());
        self.block.extend_from_slice(key);
        self.block.extend_from_slice(value);
        self.block_records += 1;
        self.count += 1;
        if self.block.len() >= BLOCK_TARGET {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Writes the gathered records as one block, if there are any.
    fn flush_block(&mut self) -> Result<()> {
        if self.block_records == 0 {
            return Ok(());
        }
        let len = u32::try_from(self.block.len()).map_err(|_| Error::invalid("a snapshot block passed 4 GiB"))?;
        let checksum = block_checksum(self.offset, len, self.block_records, &self.block);
        let mut head = Vec::with_capacity(BLOCK_HEAD_LEN);
        head.extend_from_slice(BLOCK_MAGIC);
        head.extend_from_slice(&len.to_le_bytes());
        head.extend_from_slice(&self.block_records.to_le_bytes());
        head.extend_from_slice(&checksum.to_le_bytes());
        self.put(&head)?;
        let block = std::mem::take(&mut self.block);
        self.put(&block)?;
        self.block = block;
        self.block.clear();
        self.block_records = 0;
        self.blocks += 1;
        Ok(())
    }

    /// Writes the last block and the trailer and forces the file to the device, ready to be
    /// renamed over the database file.
    pub fn finish(mut self) -> Result<u64> {
        self.flush_block()?;
        let params_len = u32::try_from(self.params.len()).map_err(|_| Error::invalid("the parameters passed 4 GiB"))?;
        let mut trailer = TRAILER_MAGIC.to_vec();
        trailer.extend_from_slice(self.params.as_bytes());
        trailer.extend_from_slice(&params_len.to_le_bytes());
        trailer.extend_from_slice(&self.blocks.to_le_bytes());
        trailer.extend_from_slice(&self.count.to_le_bytes());
        let checksum = xxh3_64_with_seed(&trailer, self.offset);
        trailer.extend_from_slice(&checksum.to_le_bytes());
        self.put(&trailer)?;
        let file = self.out.into_inner().map_err(|e| Error::io(&self.context, e.into_error()))?;
        crate::file::sync_probe::before_sync(&self.path);
        file.sync_all().map_err(|e| Error::io(&self.context, e))?;
        Ok(self.count)
    }
}

/// Appends a length as a varint.
fn put_len(out: &mut Vec<u8>, len: usize) {
    let mut buffer = [0u8; MAX_VARINT_LEN];
    let used = encode_varint(len as u64, &mut buffer);
    out.extend_from_slice(buffer.get(..used).unwrap_or(&[]));
}

/// A block's checksum: of its length, count and records, seeded with its offset (so a block
/// is taken only where it was written).
fn block_checksum(offset: u64, len: u32, count: u32, records: &[u8]) -> u64 {
    let mut hasher = Xxh3::with_seed(offset);
    hasher.update(&len.to_le_bytes());
    hasher.update(&count.to_le_bytes());
    hasher.update(records);
    hasher.digest()
}

/// One block whose checksum holds: its records' bytes and count, and where the next starts.
pub(super) struct Block<'a> {
    pub records: &'a [u8],
    pub count: u32,
    pub end: usize,
}

/// The block at `at`, ending at or before `limit`, if one is there whole with its checksum.
pub(super) fn block_at(bytes: &[u8], at: usize, limit: usize) -> Option<Block<'_>> {
    if bytes.get(at..at.checked_add(4)?)? != BLOCK_MAGIC {
        return None;
    }
    let len = u32_at(bytes, at + 4)?;
    let count = u32_at(bytes, at + 8)?;
    let checksum = u64_at(bytes, at + 12)?;
    let start = at + BLOCK_HEAD_LEN;
    let end = start.checked_add(len as usize).filter(|end| *end <= limit)?;
    let records = bytes.get(start..end)?;
    (block_checksum(at as u64, len, count, records) == checksum).then_some(Block { records, count, end })
}

/// Calls `visit` on each record of a block's records, which must be `count` of them
/// exactly; returns false, having visited none, if they do not parse.
pub(super) fn block_records(block: &Block<'_>, mut visit: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<bool> {
    match each_record(block.records, &mut |_, _| Ok(())) {
        Ok(seen) if seen == u64::from(block.count) => {}
        _ => return Ok(false),
    }
    each_record(block.records, &mut visit)?;
    Ok(true)
}

/// Calls `visit` on each record framed in `records` (`key_len value_len key value`, the
/// lengths varints) and returns their number.
fn each_record(records: &[u8], visit: &mut impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<u64> {
    let mut reader = ByteReader::new(records, "memory snapshot records");
    let mut seen = 0u64;
    while !reader.is_at_end() {
        let key_len = reader.length()?;
        let value_len = reader.length()?;
        let key = reader.take(key_len)?;
        let value = reader.take(value_len)?;
        visit(key, value)?;
        seen += 1;
    }
    Ok(seen)
}

/// A version 3 trailer whose checksum holds.
pub(super) struct Trailer<'a> {
    /// Where it starts: the end of the blocks.
    pub start: usize,
    pub params: &'a [u8],
    pub blocks: u64,
    pub records: u64,
}

/// The trailer ending the file, if it is whole with its checksum.
pub(super) fn trailer(bytes: &[u8]) -> Option<Trailer<'_>> {
    let fixed = bytes.len().checked_sub(TRAILER_END_LEN)?;
    let params_len = u32_at(bytes, fixed)? as usize;
    let blocks = u64_at(bytes, fixed + 4)?;
    let records = u64_at(bytes, fixed + 12)?;
    let checksum = u64_at(bytes, fixed + 20)?;
    let start = fixed.checked_sub(params_len)?.checked_sub(TRAILER_MAGIC.len())?;
    let covered = bytes.get(start..fixed + 20)?;
    if !covered.starts_with(TRAILER_MAGIC) || xxh3_64_with_seed(covered, start as u64) != checksum {
        return None;
    }
    let params = bytes.get(start + TRAILER_MAGIC.len()..fixed)?;
    Some(Trailer { start, params, blocks, records })
}

/// A version 3 header whose checksum holds: its parameters, and where the blocks start.
pub(super) fn header_params(bytes: &[u8]) -> Option<(&[u8], usize)> {
    let mut reader = ByteReader::new(bytes.get(HEADER_LEN..)?, "memory snapshot parameters");
    let params_len = reader.length().ok()?;
    let params = reader.take(params_len).ok()?;
    let checksum = reader.u64_le().ok()?;
    let end = bytes.len() - reader.remaining();
    let covered = bytes.get(..end - size_of::<u64>())?;
    (xxh3_64(covered) == checksum && covered.starts_with(MAGIC)).then_some((params, end))
}

fn utf8(params: &[u8]) -> Result<&str> {
    std::str::from_utf8(params).map_err(|_| broken("the parameters are not UTF-8"))
}

/// Where a checked snapshot's records are.
enum Body<'a> {
    /// Versions 1 and 2: the records, checked whole by the file's checksum.
    Whole { records: &'a [u8], count: u64 },
    /// Version 3: the blocks between `start` and `end` of the file, each checked as it is read
    /// (its checksum is seeded with its offset in the file).
    Blocks { file: &'a [u8], start: usize, end: usize, block_count: u64, count: u64 },
}

/// A snapshot whose size, magic, version and parameters are checked; its records are read
/// (and, from version 3 on, their blocks checked) by `records`.
pub struct Snapshot<'a> {
    params: &'a str,
    body: Body<'a>,
}

impl<'a> Snapshot<'a> {
    pub fn read(bytes: &'a [u8]) -> Result<Snapshot<'a>> {
        if bytes.len() < HEADER_LEN + TRAILER_LEN {
            return Err(broken("the file is shorter than a header and a trailer"));
        }
        let header = HeaderBytes::<HEADER_LEN>::read(bytes, "memory snapshot")?;
        if header.get(MAGIC_FIELD) != *MAGIC {
            return Err(broken("bad magic: not a Kura memory-engine snapshot"));
        }
        match header.u8(VERSION_FIELD) {
            VERSION => Self::read_blocks(bytes),
            version @ (VERSION_WHOLE_CHECKSUM | VERSION_WITHOUT_PARAMS) => Self::read_whole(bytes, version),
            version => Err(broken(&format!("unsupported version {version}"))),
        }
    }

    fn read_blocks(bytes: &'a [u8]) -> Result<Snapshot<'a>> {
        let (params, blocks_start) =
            header_params(bytes).ok_or_else(|| broken("header checksum mismatch (a damaged header)"))?;
        let trailer =
            trailer(bytes).ok_or_else(|| broken("trailer checksum mismatch (truncated or corrupted file)"))?;
        if trailer.params != params {
            return Err(broken("the trailer's parameters differ from the header's"));
        }
        if blocks_start > trailer.start {
            return Err(broken("the trailer overlaps the header"));
        }
        Ok(Snapshot {
            params: utf8(params)?,
            body: Body::Blocks {
                file: bytes,
                start: blocks_start,
                end: trailer.start,
                block_count: trailer.blocks,
                count: trailer.records,
            },
        })
    }

    fn read_whole(bytes: &'a [u8], version: u8) -> Result<Snapshot<'a>> {
        let (hashed, checksum) = bytes.split_at(bytes.len() - size_of::<u64>());
        let checksum = ByteReader::new(checksum, "memory snapshot trailer").u64_le()?;
        if xxh3_64(hashed) != checksum {
            return Err(broken("checksum mismatch (truncated or corrupted file)"));
        }
        let (body, count) = hashed.split_at(hashed.len() - size_of::<u64>());
        let count = ByteReader::new(count, "memory snapshot trailer").u64_le()?;
        let mut after_header =
            ByteReader::new(body.get(HEADER_LEN..).unwrap_or_default(), "memory snapshot parameters");
        let params = if version == VERSION_WHOLE_CHECKSUM {
            let len = after_header.length()?;
            utf8(after_header.take(len)?)?
        } else {
            ""
        };
        let records = after_header.take(after_header.remaining())?;
        Ok(Snapshot { params, body: Body::Whole { records, count } })
    }

    /// The parameters the writer stored (empty in a version 1 file).
    pub fn params(&self) -> &'a str {
        self.params
    }

    /// `given` with the parameters this snapshot was saved with as defaults: a reopen needs
    /// none, and any given replace the saved ones.
    pub fn params_under(&self, given: &Params) -> Result<Params> {
        let saved = Params::parse(self.params()).map_err(|e| {
            Error::broken(format!("memory snapshot: the saved parameters do not parse: {}", e.message()))
        })?;
        Ok(given.or_defaults(&saved))
    }

    /// Calls `visit` on each record, in file order, and returns their number (which must be
    /// the trailer's). A damaged block is an error once the records before it were visited.
    pub fn records(&self, mut visit: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<u64> {
        let (seen, count) = match self.body {
            Body::Whole { records, count } => (each_record(records, &mut visit)?, count),
            Body::Blocks { file, start, end, block_count, count } => {
                let (mut at, mut seen, mut seen_blocks) = (start, 0u64, 0u64);
                while at < end {
                    let damaged =
                        || broken(&format!("block {seen_blocks} at {at}: checksum mismatch (a damaged block)"));
                    let block = block_at(file, at, end).ok_or_else(damaged)?;
                    if !block_records(&block, &mut visit)? {
                        return Err(broken(&format!("block {seen_blocks} at {at}: its records do not parse")));
                    }
                    seen += u64::from(block.count);
                    seen_blocks += 1;
                    at = block.end;
                }
                if seen_blocks != block_count {
                    return Err(broken("the block count does not match the blocks"));
                }
                (seen, count)
            }
        };
        if seen != count {
            return Err(broken("the record count does not match the records"));
        }
        Ok(seen)
    }
}

/// Rewrites every checksum of a snapshot as its writer would have (for the fuzzer, so that the
/// code behind them sees mutated bytes): a version 1 or 2 file's last 8 bytes; a version 3
/// file's header checksum, each block's (walking the blocks by their lengths up to the first
/// that does not fit) and the trailer's, found where the trailer's length says.
#[cfg(feature = "internals")]
pub fn fix_checksums(bytes: &mut [u8]) {
    let rewrite = |bytes: &mut [u8], at: usize, checksum: u64| {
        if let Some(place) = bytes.get_mut(at..at + 8) {
            place.copy_from_slice(&checksum.to_le_bytes());
        }
    };
    if bytes.get(MAGIC.len()) != Some(&VERSION) {
        if let Some(body) = bytes.len().checked_sub(8) {
            let checksum = xxh3_64(bytes.get(..body).unwrap_or_default());
            rewrite(bytes, body, checksum);
        }
        return;
    }
    let mut reader = ByteReader::new(bytes.get(HEADER_LEN..).unwrap_or_default(), "fuzzed snapshot");
    let Ok(params_len) = reader.length() else { return };
    let header_end = HEADER_LEN + (bytes.len() - HEADER_LEN - reader.remaining()) + params_len;
    let Some(covered) = bytes.get(..header_end) else { return };
    let checksum = xxh3_64(covered);
    rewrite(bytes, header_end, checksum);
    let mut at = header_end + 8;
    while bytes.get(at..at + 4) == Some(BLOCK_MAGIC) {
        let (Some(len), Some(count)) = (u32_at(bytes, at + 4), u32_at(bytes, at + 8)) else { return };
        let start = at + BLOCK_HEAD_LEN;
        let Some(records) = bytes.get(start..start + len as usize) else { return };
        let checksum = block_checksum(at as u64, len, count, records);
        rewrite(bytes, at + 12, checksum);
        at = start + len as usize;
    }
    let Some(fixed) = bytes.len().checked_sub(TRAILER_END_LEN) else { return };
    let Some(params_len) = u32_at(bytes, fixed) else { return };
    let Some(start) = fixed.checked_sub(params_len as usize + TRAILER_MAGIC.len()) else { return };
    let Some(covered) = bytes.get(start..fixed + 20) else { return };
    let checksum = xxh3_64_with_seed(covered, start as u64);
    rewrite(bytes, fixed + 20, checksum);
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;

    fn write(records: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut writer = SnapshotWriter::create(&path, b't', "cap_rec_num=7").unwrap();
        for (k, v) in records {
            writer.record(k, v).unwrap();
        }
        writer.finish().unwrap();
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn round_trip_and_every_truncation_or_flip_is_broken() {
        let records: Vec<(Vec<u8>, Vec<u8>)> =
            (0..20u8).map(|i| (vec![i; i as usize], vec![i ^ 0x55; 200 - i as usize * 3])).collect();
        let bytes = write(&records);
        let mut seen = Vec::new();
        let snapshot = Snapshot::read(&bytes).unwrap();
        assert_eq!(snapshot.params(), "cap_rec_num=7");
        snapshot
            .records(|k, v| {
                seen.push((k.to_vec(), v.to_vec()));
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, records);
        let read_all = |bytes: &[u8]| Snapshot::read(bytes).and_then(|snapshot| snapshot.records(|_, _| Ok(())));
        for len in 0..bytes.len() {
            assert_eq!(read_all(&bytes[..len]).unwrap_err().kind(), crate::ErrorKind::BrokenData);
        }
        for at in (0..bytes.len()).step_by(7) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert_eq!(read_all(&flipped).unwrap_err().kind(), crate::ErrorKind::BrokenData);
        }
    }
}
