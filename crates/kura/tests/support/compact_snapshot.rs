//! Forging CompactDbm snapshots for the bad-input tests: the memory engines' snapshot split
//! into its header and records and put back together with every checksum recomputed (version 2:
//! the count and checksum trailer; version 3: the header's, each block's and the trailer's;
//! docs/memory.md, docs/compact.md), so that the check under test is the one that must catch
//! the damage.
#![allow(dead_code, reason = "each test binary that includes this file uses a part of it")]
#![expect(clippy::unwrap_used, reason = "forged from a snapshot the test has just written")]
#![expect(clippy::indexing_slicing, reason = "forged bytes are indexed within the lengths just parsed")]

use kura::encoding::{decode_varint, encode_varint};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

pub const HEADER_LEN: usize = 16;

pub type Records = Vec<(Vec<u8>, Vec<u8>)>;

pub fn varint(value: u64) -> Vec<u8> {
    let mut buffer = [0u8; 10];
    let used = encode_varint(value, &mut buffer);
    buffer[..used].to_vec()
}

/// Byte 8 of a snapshot: its format version.
const VERSION_AT: usize = 8;

/// Records per block in a forged version 3 file (the writer cuts blocks by size instead).
const FORGED_BLOCK_RECORDS: usize = 16;

/// The snapshot's bytes before its records (the header, and from version 2 on the
/// parameters after it; a version 3 header's checksum is left out, `assemble` recomputing it)
/// and its records.
pub fn split(bytes: &[u8]) -> (Vec<u8>, Records) {
    let records_start = match bytes[VERSION_AT] {
        1 => HEADER_LEN,
        _ => {
            let (params_len, used) = decode_varint(&bytes[HEADER_LEN..]).unwrap();
            HEADER_LEN + used + params_len as usize
        }
    };
    let mut records = Vec::new();
    if bytes[VERSION_AT] == 3 {
        let mut at = records_start + 8;
        while &bytes[at..at + 4] == b"KBLK" {
            let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
            parse_records(&bytes[at + 20..at + 20 + len], &mut records);
            at += 20 + len;
        }
    } else {
        parse_records(&bytes[records_start..bytes.len() - 16], &mut records);
    }
    (bytes[..records_start].to_vec(), records)
}

fn parse_records(mut rest: &[u8], records: &mut Records) {
    while !rest.is_empty() {
        let (key_len, used) = decode_varint(rest).unwrap();
        rest = &rest[used..];
        let (value_len, used) = decode_varint(rest).unwrap();
        rest = &rest[used..];
        let (key, after) = rest.split_at(key_len as usize);
        let (value, after) = after.split_at(value_len as usize);
        records.push((key.to_vec(), value.to_vec()));
        rest = after;
    }
}

fn frame(records: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (key, value) in records {
        bytes.extend(varint(key.len() as u64));
        bytes.extend(varint(value.len() as u64));
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value);
    }
    bytes
}

/// A snapshot of `header` (as `split` gives it) and `records`, in the header's version.
pub fn assemble(header: &[u8], records: &Records) -> Vec<u8> {
    let mut bytes = header.to_vec();
    if header[VERSION_AT] != 3 {
        bytes.extend(frame(records));
        bytes.extend_from_slice(&(records.len() as u64).to_le_bytes());
        let checksum = xxh3_64(&bytes);
        bytes.extend_from_slice(&checksum.to_le_bytes());
        return bytes;
    }
    let (params_len, used) = decode_varint(&header[HEADER_LEN..]).unwrap();
    let params = header[HEADER_LEN + used..HEADER_LEN + used + params_len as usize].to_vec();
    let checksum = xxh3_64(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    let mut blocks = 0u64;
    for chunk in records.chunks(FORGED_BLOCK_RECORDS) {
        let framed = frame(chunk);
        let (len, count) = ((framed.len() as u32).to_le_bytes(), (chunk.len() as u32).to_le_bytes());
        let mut covered = len.to_vec();
        covered.extend_from_slice(&count);
        covered.extend_from_slice(&framed);
        let checksum = xxh3_64_with_seed(&covered, bytes.len() as u64);
        bytes.extend_from_slice(b"KBLK");
        bytes.extend_from_slice(&len);
        bytes.extend_from_slice(&count);
        bytes.extend_from_slice(&checksum.to_le_bytes());
        bytes.extend_from_slice(&framed);
        blocks += 1;
    }
    let start = bytes.len();
    bytes.extend_from_slice(b"KEND");
    bytes.extend_from_slice(&params);
    bytes.extend_from_slice(&(params.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&blocks.to_le_bytes());
    bytes.extend_from_slice(&(records.len() as u64).to_le_bytes());
    let checksum = xxh3_64_with_seed(&bytes[start..], start as u64);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes
}

/// A bucket record's value for `block`, with its checksum.
pub fn bucket_value(block: &[u8]) -> Vec<u8> {
    let mut value = xxh3_64(block).to_le_bytes().to_vec();
    value.extend_from_slice(block);
    value
}
