//! CompactDbm on bad input: a corrupted snapshot (flipped bytes, truncation, a bucket whose
//! lengths point past its end, a bucket that decodes to more or less than it states, a key in
//! the wrong bucket, a wrong record count, a layout copy that differs) is refused with BrokenData, never a panic and
//! never served; an oversized key or value is a clear Limit error.
//!
//! The forged snapshots are built here from the format in docs/compact.md (the memory
//! engines' snapshot records, each bucket behind its own checksum), with every checksum
//! recomputed, so that the check under test is the one that must catch the damage.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "forged bytes are indexed within the lengths just parsed")]

use std::path::Path;

#[path = "support/compact_snapshot.rs"]
mod compact_snapshot;

use compact_snapshot::{assemble, bucket_value, split, varint};
use kura::encoding::decode_varint;
use kura::{CompactDbm, Dbm, ErrorKind, OpenMode, Params, WriteBatch};

fn snapshot(dir: &Path, codec: &str, records: u32) -> (std::path::PathBuf, Vec<u8>) {
    let path = dir.join(format!("{codec}.kumz"));
    let dbm = CompactDbm::open(
        &path,
        OpenMode::Truncate,
        &Params::parse(&format!("bucket_comp={codec},num_buckets=256")).unwrap(),
    )
    .unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..records {
        batch.set(format!("key{i:06}"), format!("value of record {i} {}", "abc".repeat((i % 20) as usize)));
    }
    dbm.write_batch(&batch).unwrap();
    dbm.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

fn open_error(path: &Path, bytes: &[u8]) -> ErrorKind {
    std::fs::write(path, bytes).unwrap();
    match CompactDbm::open(path, OpenMode::ReadOnly, &Params::new()) {
        Ok(_) => panic!("a damaged snapshot was accepted"),
        Err(e) => e.kind(),
    }
}

#[test]
fn every_truncation_and_flipped_byte_is_broken_data() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = snapshot(dir.path(), "lz4", 300);
    let step = (bytes.len() / 300).max(1);
    for len in (0..bytes.len()).step_by(step) {
        assert_eq!(open_error(&path, &bytes[..len]), ErrorKind::BrokenData, "truncated to {len}");
    }
    for at in (0..bytes.len()).step_by(step) {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x04;
        assert_eq!(open_error(&path, &flipped), ErrorKind::BrokenData, "flipped at {at}");
    }
}

#[test]
fn a_flipped_byte_in_a_bucket_is_caught_by_the_bucket_checksum_behind_a_valid_file_checksum() {
    let dir = tempfile::tempdir().unwrap();
    for codec in ["none", "lz4", "zstd"] {
        let (path, bytes) = snapshot(dir.path(), codec, 300);
        let (header, records) = split(&bytes);
        for index in [1, records.len() / 2, records.len() - 1] {
            for at in [8, records[index].1.len() / 2, records[index].1.len() - 1] {
                let mut forged = records.clone();
                forged[index].1[at] ^= 0x01;
                assert_eq!(open_error(&path, &assemble(&header, &forged)), ErrorKind::BrokenData, "{codec}");
            }
        }
    }
}

/// Forges bucket `index` of a snapshot with `change` applied to its block, checksums
/// recomputed, and expects the open to fail with BrokenData.
fn forged_bucket_is_refused(path: &Path, bytes: &[u8], index: usize, change: impl Fn(&[u8]) -> Vec<u8>) {
    let (header, mut records) = split(bytes);
    let block = change(&records[index].1[8..]);
    records[index].1 = bucket_value(&block);
    assert_eq!(open_error(path, &assemble(&header, &records)), ErrorKind::BrokenData);
}

#[test]
fn a_bucket_whose_lengths_point_past_its_end_is_broken_data() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = snapshot(dir.path(), "none", 300);
    // Raw block: flag 0, then the first record's key length: make it run past the end.
    forged_bucket_is_refused(&path, &bytes, 1, |block| {
        let (_, used) = decode_varint(&block[1..]).unwrap();
        let mut forged = vec![0];
        forged.extend(varint(block.len() as u64 + 5));
        forged.extend_from_slice(&block[1 + used..]);
        forged
    });
    // The last value one byte short of its stated length.
    forged_bucket_is_refused(&path, &bytes, 2, |block| block[..block.len() - 1].to_vec());
    // A record cut in the middle.
    forged_bucket_is_refused(&path, &bytes, 3, |block| block[..block.len() - 3].to_vec());
}

/// A compressed block with its stated raw length replaced by `stated(raw_len)`.
fn restated(block: &[u8], stated: impl Fn(u64) -> u64) -> Vec<u8> {
    assert_eq!(block[0], 1, "the bucket is compressed");
    let (raw_len, used) = decode_varint(&block[1..]).unwrap();
    let mut forged = vec![1];
    forged.extend(varint(stated(raw_len)));
    forged.extend_from_slice(&block[1 + used..]);
    forged
}

#[test]
fn a_bucket_that_decodes_to_more_or_less_than_it_states_is_broken_data() {
    let dir = tempfile::tempdir().unwrap();
    for codec in ["lz4", "zstd", "zstd-dict"] {
        let (path, bytes) = snapshot(dir.path(), codec, 3000);
        forged_bucket_is_refused(&path, &bytes, 1, |block| restated(block, |len| len - 7));
        forged_bucket_is_refused(&path, &bytes, 1, |block| restated(block, |len| len + 7));
        // A length far beyond what the stored bytes can hold is refused before allocating.
        forged_bucket_is_refused(&path, &bytes, 1, |block| restated(block, |_| 1 << 40));
        // An unknown flag, and a compressed flag on a raw bucket.
        forged_bucket_is_refused(&path, &bytes, 1, |block| [&[9], &block[1..]].concat());
    }
    let (path, bytes) = snapshot(dir.path(), "none", 300);
    forged_bucket_is_refused(&path, &bytes, 1, |block| [&[1], &block[1..]].concat());
}

#[test]
fn a_key_in_the_wrong_bucket_a_wrong_count_or_a_bad_layout_is_broken_data() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = snapshot(dir.path(), "lz4", 300);
    let (header, mut records) = split(&bytes);
    // The layout's copy, last (for a restore): a copy that differs or is not last is refused;
    // the forgeries below leave it out, as a version 2 file has none.
    let copy = records.pop().unwrap();
    assert_eq!(copy, records[0], "the last record is the layout's copy");
    let mut differing = records.clone();
    differing.push((Vec::new(), [&copy.1[..10], &[copy.1[10] ^ 1], &copy.1[11..]].concat()));
    assert_eq!(open_error(&path, &assemble(&header, &differing)), ErrorKind::BrokenData);
    let mut after_copy = records.clone();
    after_copy.insert(records.len() - 1, copy.clone());
    assert_eq!(open_error(&path, &assemble(&header, &after_copy)), ErrorKind::BrokenData);
    // Bucket 1's block under the id of a bucket its keys do not hash to.
    let id_of = |record: &(Vec<u8>, Vec<u8>)| u32::from_le_bytes(record.0[..4].try_into().unwrap());
    let ids: Vec<u32> = records[1..].iter().map(id_of).collect();
    let free = (0..u32::MAX).find(|id| !ids.contains(id)).unwrap();
    let mut moved = records.clone();
    let mut block = moved.remove(1);
    block.0 = free.to_le_bytes().to_vec();
    let at = moved[1..].iter().position(|r| id_of(r) > free).map_or(moved.len(), |p| p + 1);
    moved.insert(at, block);
    assert_eq!(open_error(&path, &assemble(&header, &moved)), ErrorKind::BrokenData);
    // Two records for one bucket, and buckets out of order.
    let mut doubled = records.clone();
    doubled.insert(2, doubled[1].clone());
    assert_eq!(open_error(&path, &assemble(&header, &doubled)), ErrorKind::BrokenData);
    let mut swapped = records.clone();
    swapped.swap(1, 2);
    assert_eq!(open_error(&path, &assemble(&header, &swapped)), ErrorKind::BrokenData);
    // A bucket dropped: the layout's record count no longer matches.
    let mut dropped = records.clone();
    dropped.remove(1);
    assert_eq!(open_error(&path, &assemble(&header, &dropped)), ErrorKind::BrokenData);
    // The layout record: a huge bucket count, an unknown codec, a missing layout.
    let mut huge = records.clone();
    huge[0].1[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(open_error(&path, &assemble(&header, &huge)), ErrorKind::BrokenData);
    let mut codec = records.clone();
    codec[0].1[1] = 99;
    assert_eq!(open_error(&path, &assemble(&header, &codec)), ErrorKind::BrokenData);
    assert_eq!(open_error(&path, &assemble(&header, &records[1..].to_vec())), ErrorKind::BrokenData);
    // The untouched records still load and serve.
    std::fs::write(&path, assemble(&header, &records)).unwrap();
    let dbm = CompactDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(dbm.get(b"key000042").unwrap(), format!("value of record 42 {}", "abc".repeat(2)).into_bytes());
}

#[test]
fn an_oversized_key_or_value_is_a_clear_limit_error_and_changes_nothing() {
    let dbm = CompactDbm::new(&Params::parse("num_buckets=256").unwrap()).unwrap();
    let big_key = vec![b'k'; kura::CompactDbm::MAX_KEY_LEN + 1];
    let big_value = vec![b'v'; kura::CompactDbm::MAX_VALUE_LEN + 1];
    let error = dbm.set(&big_key, b"v", true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Limit);
    assert!(error.message().contains("key"), "{}", error.message());
    let error = dbm.set(b"k", &big_value, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Limit);
    assert!(error.message().contains("value"), "{}", error.message());
    assert_eq!(dbm.append(b"k", &big_value, b"").unwrap_err().kind(), ErrorKind::Limit);
    let mut batch = WriteBatch::new();
    batch.set(b"small", b"v").set(b"k", &big_value);
    assert_eq!(dbm.write_batch(&batch).unwrap_err().kind(), ErrorKind::Limit);
    assert_eq!(dbm.count().unwrap(), 0, "a refused batch stores nothing");
    assert_eq!(dbm.get(&big_key).unwrap_err().kind(), ErrorKind::NotFound);
    let at_limit = vec![b'v'; kura::CompactDbm::MAX_VALUE_LEN];
    dbm.set(b"k", &at_limit, true).unwrap();
    assert_eq!(dbm.get(b"k").unwrap().len(), at_limit.len());
}

#[test]
fn the_layout_records_training_facts_are_checked_and_a_format_1_layout_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    // The layout record, and its copy last, changed alike (a copy that differs is refused
    // on its own).
    let relaid = |bytes: &[u8], change: &dyn Fn(&mut Vec<u8>)| {
        let (header, mut records) = split(bytes);
        let last = records.len() - 1;
        change(&mut records[0].1);
        change(&mut records[last].1);
        assemble(&header, &records)
    };
    // Format 2: format, codec, buckets per group (4), groups (4), count (8), then the training
    // facts: at (8), records (8), trigger (1), then the dictionary.
    let (path, bytes) = snapshot(dir.path(), "zstd-dict", 3000);
    assert_eq!(split(&bytes).1[0].1[34], 2, "a batch trained the dictionary");
    let unknown = relaid(&bytes, &|meta| meta[34] = 9);
    assert_eq!(open_error(&path, &unknown), ErrorKind::BrokenData);
    let no_trigger = relaid(&bytes, &|meta| meta[34] = 0);
    assert_eq!(open_error(&path, &no_trigger), ErrorKind::BrokenData, "facts without a trigger");
    let (zstd_path, zstd_bytes) = snapshot(dir.path(), "zstd", 300);
    let no_dictionary = relaid(&zstd_bytes, &|meta| meta[34] = 1);
    assert_eq!(open_error(&zstd_path, &no_dictionary), ErrorKind::BrokenData, "a trigger without a dictionary");
    // The same snapshot in format 1 (written before the training facts): it opens, with its
    // dictionary and every record, its training unknown.
    let format_1 = relaid(&bytes, &|meta| {
        meta[0] = 1;
        meta.drain(18..35);
    });
    std::fs::write(&path, format_1).unwrap();
    let dbm = CompactDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(dbm.get(b"key000042").unwrap(), format!("value of record 42 {}", "abc".repeat(2)).into_bytes());
    let stats = dbm.inspect().unwrap();
    assert_eq!(
        stats.details.iter().find(|(n, _)| *n == "dict_trained").map(|(_, s)| s.clone()),
        Some(kura::Stat::Flag(true))
    );
    assert!(stats.details.iter().all(|(n, _)| *n != "dict_trigger"), "no training facts in format 1");
}
