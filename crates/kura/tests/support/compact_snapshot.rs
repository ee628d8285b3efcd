//! Forging CompactDbm snapshots for the bad-input tests: the memory engines' snapshot split
//! into its header and records and put back together with its count and checksum trailer
//! recomputed (docs/memory.md, docs/compact.md), so that the check under test is the one that
//! must catch the damage.
#![allow(dead_code, reason = "each test binary that includes this file uses a part of it")]
#![expect(clippy::unwrap_used, reason = "forged from a snapshot the test has just written")]
#![expect(clippy::indexing_slicing, reason = "forged bytes are indexed within the lengths just parsed")]

use kura::encoding::{decode_varint, encode_varint};
use xxhash_rust::xxh3::xxh3_64;

pub const HEADER_LEN: usize = 16;

pub type Records = Vec<(Vec<u8>, Vec<u8>)>;

pub fn varint(value: u64) -> Vec<u8> {
    let mut buffer = [0u8; 10];
    let used = encode_varint(value, &mut buffer);
    buffer[..used].to_vec()
}

/// Byte 8 of a snapshot: its format version.
const VERSION_AT: usize = 8;

/// The snapshot's bytes before its records (the header, and from version 2 on the
/// parameters after it) and its records (the trailer is recomputed by `assemble`).
pub fn split(bytes: &[u8]) -> (Vec<u8>, Records) {
    let records_start = match bytes[VERSION_AT] {
        1 => HEADER_LEN,
        _ => {
            let (params_len, used) = decode_varint(&bytes[HEADER_LEN..]).unwrap();
            HEADER_LEN + used + params_len as usize
        }
    };
    let body = &bytes[records_start..bytes.len() - 16];
    let mut rest = body;
    let mut records = Vec::new();
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
    (bytes[..records_start].to_vec(), records)
}

pub fn assemble(header: &[u8], records: &Records) -> Vec<u8> {
    let mut bytes = header.to_vec();
    for (key, value) in records {
        bytes.extend(varint(key.len() as u64));
        bytes.extend(varint(value.len() as u64));
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value);
    }
    bytes.extend_from_slice(&(records.len() as u64).to_le_bytes());
    let checksum = xxh3_64(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes
}

/// A bucket record's value for `block`, with its checksum.
pub fn bucket_value(block: &[u8]) -> Vec<u8> {
    let mut value = xxh3_64(block).to_le_bytes().to_vec();
    value.extend_from_slice(block);
    value
}
