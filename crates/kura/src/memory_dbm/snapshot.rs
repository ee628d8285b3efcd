//! The snapshot file of the memory engines: all records, written at once and replaced
//! atomically, read back whole at open. The format is specified in docs/memory.md:
//!
//! ```text
//! header   "KURAMEM\0"  version:u8=2  class:u8 ('t' | 'b' | 'c' | 'z')  6 zero bytes
//! params   params_len:varint  params (UTF-8, `name=value,...`: what reopening needs)
//! records  { key_len:varint  value_len:varint  key  value }*
//! trailer  record_count:u64 LE  checksum:u64 LE (xxh3-64 of every byte before it)
//! ```
//!
//! Version 1 files, without the parameters, still open. Readers check the checksum first and
//! every length against the bytes that remain, so a truncated or corrupted file is a
//! BrokenData error, and no allocation is ever sized by a length read from the file (records
//! and parameters are slices of the file's bytes).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use xxhash_rust::xxh3::{xxh3_64, Xxh3Default};

use crate::encoding::{encode_varint, ByteReader, Field, HeaderBytes, MAX_VARINT_LEN};
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"KURAMEM\0";
/// The version written: 2 added the parameters after the header.
pub const VERSION: u8 = 2;
/// Version 1 files have no parameters; they still open.
pub const VERSION_WITHOUT_PARAMS: u8 = 1;

// The header's fields, each after the one before.
const MAGIC_FIELD: Field<HEADER_LEN, { MAGIC.len() }> = Field::first();
const VERSION_FIELD: Field<HEADER_LEN, 1> = Field::after(MAGIC_FIELD);
const CLASS_FIELD: Field<HEADER_LEN, 1> = Field::after(VERSION_FIELD);
const RESERVED_FIELD: Field<HEADER_LEN, 6> = Field::after(CLASS_FIELD);
pub const HEADER_LEN: usize = 16;
const _: () = assert!(RESERVED_FIELD.end() == HEADER_LEN, "docs/memory.md specifies a 16-byte header");

/// The trailer: the record count, then the checksum of every byte before it.
pub const TRAILER_LEN: usize = 2 * size_of::<u64>();

/// Streams records into a snapshot file, hashing as it goes.
pub struct SnapshotWriter {
    out: BufWriter<File>,
    hasher: Xxh3Default,
    count: u64,
    context: String,
}

impl SnapshotWriter {
    /// Creates (or truncates) `path` and writes the header for engine class `class` and the
    /// parameters a reopen takes from the file (`name=value,...`, possibly empty).
    pub fn create(path: &Path, class: u8, params: &str) -> Result<SnapshotWriter> {
        let context = format!("write {}", path.display());
        let file = File::create(path).map_err(|e| Error::io(&context, e))?;
        let mut writer = SnapshotWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            hasher: Xxh3Default::new(),
            count: 0,
            context,
        };
        let mut header = HeaderBytes::<HEADER_LEN>::new();
        header.put(MAGIC_FIELD, MAGIC);
        header.put_u8(VERSION_FIELD, VERSION);
        header.put_u8(CLASS_FIELD, class);
        writer.put(header.as_bytes())?;
        writer.put_len(params.len())?;
        writer.put(params.as_bytes())?;
        Ok(writer)
    }

    /// Writes a length as a varint.
    fn put_len(&mut self, len: usize) -> Result<()> {
        let mut buffer = [0u8; MAX_VARINT_LEN];
        let used = encode_varint(len as u64, &mut buffer);
        self.put(buffer.get(..used).unwrap_or(&[]))
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.hasher.update(bytes);
        self.out.write_all(bytes).map_err(|e| Error::io(&self.context, e))
    }

    pub fn record(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_len(key.len())?;
        self.put_len(value.len())?;
        self.put(key)?;
        self.put(value)?;
        self.count += 1;
        Ok(())
    }

    /// Writes the trailer and forces the file to the device, ready to be renamed over the
    /// database file.
    pub fn finish(mut self) -> Result<u64> {
        let count = self.count.to_le_bytes();
        self.put(&count)?;
        let checksum = self.hasher.digest().to_le_bytes();
        self.out.write_all(&checksum).map_err(|e| Error::io(&self.context, e))?;
        let file = self.out.into_inner().map_err(|e| Error::io(&self.context, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&self.context, e))?;
        Ok(self.count)
    }
}

fn broken(what: &str) -> Error {
    Error::broken(format!("memory snapshot: {what}"))
}

/// A snapshot whose size, magic, checksum, version and parameters are checked; its records
/// are read by `records`.
pub struct Snapshot<'a> {
    params: &'a str,
    records: &'a [u8],
    count: u64,
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
        let (hashed, checksum) = bytes.split_at(bytes.len() - size_of::<u64>());
        let checksum = ByteReader::new(checksum, "memory snapshot trailer").u64_le()?;
        if xxh3_64(hashed) != checksum {
            return Err(broken("checksum mismatch (truncated or corrupted file)"));
        }
        let (body, count) = hashed.split_at(hashed.len() - size_of::<u64>());
        let count = ByteReader::new(count, "memory snapshot trailer").u64_le()?;
        let mut after_header =
            ByteReader::new(body.get(HEADER_LEN..).unwrap_or_default(), "memory snapshot parameters");
        let params = match header.u8(VERSION_FIELD) {
            VERSION => {
                let len = after_header.length()?;
                std::str::from_utf8(after_header.take(len)?).map_err(|_| broken("the parameters are not UTF-8"))?
            }
            VERSION_WITHOUT_PARAMS => "",
            version => return Err(broken(&format!("unsupported version {version}"))),
        };
        let records = after_header.take(after_header.remaining())?;
        Ok(Snapshot { params, records, count })
    }

    /// The parameters the writer stored (empty in a version 1 file).
    pub fn params(&self) -> &'a str {
        self.params
    }

    /// Calls `visit` on each record, in file order, and returns their number (which must be
    /// the trailer's).
    pub fn records(&self, mut visit: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<u64> {
        let mut records = ByteReader::new(self.records, "memory snapshot records");
        let mut seen = 0u64;
        while !records.is_at_end() {
            let key_len = records.length()?;
            let value_len = records.length()?;
            let key = records.take(key_len)?;
            let value = records.take(value_len)?;
            visit(key, value)?;
            seen += 1;
        }
        if seen != self.count {
            return Err(broken("the record count does not match the records"));
        }
        Ok(seen)
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
