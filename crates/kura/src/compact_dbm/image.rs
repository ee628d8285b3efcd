//! CompactDbm's snapshot: the memory engines' snapshot file (`memory_dbm/snapshot.rs`, class
//! byte `z`) whose records are the layout and the encoded buckets as they are in memory, so
//! saving copies blocks and loading decodes each bucket once, to check it. Byte by byte in
//! docs/compact.md:
//!
//! ```text
//! record 0      key: empty           value: format:u8=2 codec:u8 buckets_per_group:u32 LE
//!                                           num_groups:u32 LE record_count:u64 LE
//!                                           trained_at:u64 LE trained_records:u64 LE
//!                                           trigger:u8 dictionary
//!                                           (format 1, read still: no trained_at, trained_records
//!                                           and trigger)
//! record 1..n   key: bucket:u32 LE   value: checksum:u64 LE (xxh3-64 of the block) block
//! record n+1    key: empty           value: the layout record again (snapshot version 3 on)
//! ```
//!
//! Only non-empty buckets are written, in increasing bucket order (`bucket = group *
//! buckets_per_group + bucket within the group`). Loading checks, besides the file's own
//! checksum: each block's checksum before it is decoded; that it decodes to exactly its
//! stated length; every record length within the bucket; keys sorted; each key in the bucket
//! its hash chooses; and the record count. Any failure is BrokenData. `salvage_file` (`kura
//! restore`) keeps every bucket of the intact blocks that passes the same checks.

use std::path::Path;
use std::sync::Arc;

use xxhash_rust::xxh3::xxh3_64;

use super::block;
use super::bucket;
use super::group::{bucket_in_group, Group};
use super::options::{MAX_BUCKETS, NUM_GROUPS};
use super::training::{Trained, Trigger};
use crate::codec::{Codec, CodecKind};
use crate::dbm::OpenMode;
use crate::engine::RestoreReport;
use crate::error::{Error, Result};
use crate::memory_dbm::backing;
use crate::memory_dbm::key_hash::{hash_key, slot_of};
use crate::memory_dbm::snapshot::SnapshotWriter;
use crate::memory_dbm::snapshot_salvage::Salvage;

pub const CLASS: u8 = b'z';
/// The layout record's format: 2 adds the training facts (`training.rs`) before the
/// dictionary; format 1 (snapshots before 2026-11-29) is still read, its training unknown.
const FORMAT: u8 = 2;
const FORMAT_1: u8 = 1;
/// The fixed fields of format 1, then what format 2 adds.
const META_LEN_1: usize = 1 + 1 + 4 + 4 + 8;
const META_LEN: usize = META_LEN_1 + 8 + 8 + 1;

fn broken(what: impl std::fmt::Display) -> Error {
    Error::broken(format!("compact snapshot: {what}"))
}

/// Writes the layout record (format 2): the codec, the bucket count, the record count, how
/// the dictionary was trained (all zero when that is not known) and the dictionary.
pub fn write_meta(
    writer: &mut SnapshotWriter,
    codec: &Codec,
    buckets_per_group: usize,
    trained: Option<Trained>,
    record_count: u64,
) -> Result<()> {
    writer.record(&[], &meta_bytes(codec, buckets_per_group, trained, record_count)?)
}

/// The layout record's value (format 2).
fn meta_bytes(codec: &Codec, buckets_per_group: usize, trained: Option<Trained>, record_count: u64) -> Result<Vec<u8>> {
    let per_group = u32::try_from(buckets_per_group).map_err(|_| Error::invalid("too many buckets to save"))?;
    let mut meta = Vec::with_capacity(META_LEN + codec.dictionary().len());
    meta.push(FORMAT);
    meta.push(codec.kind().id());
    meta.extend_from_slice(&per_group.to_le_bytes());
    meta.extend_from_slice(&(NUM_GROUPS as u32).to_le_bytes());
    meta.extend_from_slice(&record_count.to_le_bytes());
    let trained = trained.filter(|_| !codec.dictionary().is_empty());
    meta.extend_from_slice(&trained.map_or(0, |t| t.at).to_le_bytes());
    meta.extend_from_slice(&trained.map_or(0, |t| t.records).to_le_bytes());
    meta.push(trained.map_or(0, |t| t.trigger.id()));
    meta.extend_from_slice(codec.dictionary());
    Ok(meta)
}

/// Writes one non-empty bucket's record.
pub fn write_bucket(writer: &mut SnapshotWriter, bucket: u64, block: &[u8]) -> Result<()> {
    let id = u32::try_from(bucket).map_err(|_| Error::invalid("too many buckets to save"))?;
    let mut value = Vec::with_capacity(8 + block.len());
    value.extend_from_slice(&xxh3_64(block).to_le_bytes());
    value.extend_from_slice(block);
    writer.record(&id.to_le_bytes(), &value)
}

/// A snapshot read back and checked: the codec and the groups, ready to serve.
pub struct Loaded {
    pub codec: Arc<Codec>,
    pub buckets_per_group: usize,
    pub groups: Vec<Group>,
    pub trained: Option<Trained>,
}

struct Meta {
    codec: Arc<Codec>,
    buckets_per_group: usize,
    record_count: u64,
    trained: Option<Trained>,
}

/// The training facts of a format-2 layout record (`fields`: its 17 bytes after the record
/// count): None when its trigger is 0 (no dictionary, or not known); an unknown trigger, or
/// a trigger without a dictionary, is a damaged record.
fn parse_trained(fields: &[u8], has_dictionary: bool) -> Result<Option<Trained>> {
    let u64_at = |at: usize| -> Result<u64> {
        let bytes = fields.get(at..at + 8).ok_or_else(|| broken("short layout record"))?;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| broken("short layout record"))?))
    };
    let (at, records) = (u64_at(0)?, u64_at(8)?);
    match *fields.get(16).ok_or_else(|| broken("short layout record"))? {
        0 if at == 0 && records == 0 => Ok(None),
        0 => Err(broken("training facts without a trigger")),
        id => {
            let trigger = Trigger::from_id(id).ok_or_else(|| broken(format!("unknown training trigger {id}")))?;
            if !has_dictionary {
                return Err(broken("training facts without a dictionary"));
            }
            Ok(Some(Trained { at, records, trigger }))
        }
    }
}

fn parse_meta(value: &[u8]) -> Result<Meta> {
    let meta_len = match value.first() {
        Some(&FORMAT) => META_LEN,
        Some(&FORMAT_1) => META_LEN_1,
        _ => return Err(broken("unsupported format")),
    };
    let (head, dictionary) = value.split_at_checked(meta_len).ok_or_else(|| broken("short layout record"))?;
    let u32_at = |at: usize| -> Result<u32> {
        let bytes = head.get(at..at + 4).ok_or_else(|| broken("short layout record"))?;
        Ok(u32::from_le_bytes(bytes.try_into().map_err(|_| broken("short layout record"))?))
    };
    let kind = CodecKind::from_id(*head.get(1).ok_or_else(|| broken("short layout record"))?)?;
    let buckets_per_group = u32_at(2)? as usize;
    let num_buckets = buckets_per_group as u64 * NUM_GROUPS as u64;
    if u32_at(6)? as usize != NUM_GROUPS || buckets_per_group == 0 || num_buckets > MAX_BUCKETS {
        return Err(broken("impossible bucket layout"));
    }
    let count_bytes = head.get(10..18).ok_or_else(|| broken("short layout record"))?;
    let record_count = u64::from_le_bytes(count_bytes.try_into().map_err(|_| broken("short layout record"))?);
    let trained = match head.get(META_LEN_1..) {
        Some(fields) if !fields.is_empty() => parse_trained(fields, !dictionary.is_empty())?,
        _ => None,
    };
    let codec = block::codec(kind, dictionary.to_vec()).map_err(|e| broken(format!("codec: {}", e.message())))?;
    Ok(Meta { codec: Arc::new(codec), buckets_per_group, record_count, trained })
}

/// A bucket read from the snapshot and checked, waiting for its group's table (24 bytes
/// besides its block: a valid snapshot holds this list and its tables at once for a moment).
struct CheckedBucket {
    id: u32,
    records: u32,
    block: Box<[u8]>,
}

/// Checks one bucket record against the layout: its id in range, its checksum before its
/// block is decoded, the decoding, every record length, the keys' order and home, and at
/// least one record.
fn check_bucket(layout: &Meta, key: &[u8], value: &[u8], scratch: &mut Vec<u8>) -> Result<CheckedBucket> {
    let id: [u8; 4] = key.try_into().map_err(|_| broken("a bucket id is not 4 bytes"))?;
    let stored_id = u32::from_le_bytes(id);
    let id = u64::from(stored_id);
    let per_group = layout.buckets_per_group as u64;
    if id >= per_group * NUM_GROUPS as u64 {
        return Err(broken(format!("bucket {id} is out of range")));
    }
    let (group, bucket) = ((id / per_group) as usize, (id % per_group) as usize);
    let (checksum, stored) = value.split_at_checked(8).ok_or_else(|| broken("short bucket record"))?;
    let checksum = u64::from_le_bytes(checksum.try_into().map_err(|_| broken("short bucket record"))?);
    if stored.is_empty() || xxh3_64(stored) != checksum {
        return Err(broken(format!("bucket {id}: checksum mismatch")));
    }
    let raw = block::decode(&layout.codec, stored, scratch)?;
    let records = bucket::validate(raw, |key| {
        let hash = hash_key(key);
        let home = slot_of(hash, NUM_GROUPS) == group && bucket_in_group(hash, layout.buckets_per_group) == bucket;
        if home {
            Ok(())
        } else {
            Err(broken(format!("bucket {id} holds a key of another bucket")))
        }
    })?;
    if records == 0 {
        return Err(broken(format!("bucket {id} is empty")));
    }
    let records = u32::try_from(records).map_err(|_| broken(format!("bucket {id} holds too many records")))?;
    Ok(CheckedBucket { id: stored_id, records, block: Box::from(stored) })
}

/// Reads and checks a whole snapshot. The bucket tables are allocated only once every record
/// has passed its checks: a snapshot of a few bytes may declare up to `MAX_BUCKETS` buckets,
/// and a broken one must cost no more to reject than it took to read.
pub fn load(bytes: &[u8]) -> Result<Loaded> {
    let mut meta: Option<Meta> = None;
    let mut checked: Vec<CheckedBucket> = Vec::new();
    let mut next_bucket = 0u64;
    let mut scratch = Vec::new();
    // The layout's bytes, which its copy after the buckets must repeat; then the copy's.
    let (mut layout_bytes, mut copied) = (Vec::new(), false);
    backing::load(bytes, |key, value| {
        let Some(layout) = &meta else {
            if !key.is_empty() {
                return Err(broken("the layout record is not first"));
            }
            meta = Some(parse_meta(value)?);
            layout_bytes = value.to_vec();
            return Ok(());
        };
        if copied {
            return Err(broken("a record after the layout's copy"));
        }
        if key.is_empty() {
            copied = true;
            return if value == layout_bytes {
                Ok(())
            } else {
                Err(broken("the layout's copy differs from the layout"))
            };
        }
        let bucket = check_bucket(layout, key, value, &mut scratch)?;
        if u64::from(bucket.id) < next_bucket {
            return Err(broken(format!("bucket {} is out of order", bucket.id)));
        }
        next_bucket = u64::from(bucket.id) + 1;
        checked.push(bucket);
        Ok(())
    })?;
    let meta = meta.ok_or_else(|| broken("no layout record"))?;
    if checked.iter().map(|b| u64::from(b.records)).sum::<u64>() != meta.record_count {
        return Err(broken("the record count does not match the buckets"));
    }
    let mut groups: Vec<Group> =
        (0..NUM_GROUPS).map(|_| Group::new(Arc::clone(&meta.codec), meta.buckets_per_group)).collect();
    let per_group = meta.buckets_per_group as u64;
    let group_of = |id: u32| (u64::from(id) / per_group) as usize;
    // Each group's arena is sized once, exactly (`checked` is in bucket order).
    for run in checked.chunk_by(|a, b| group_of(a.id) == group_of(b.id)) {
        let group = run.first().and_then(|first| groups.get_mut(group_of(first.id)));
        let group = group.ok_or_else(|| broken("group out of range"))?;
        group.reserve_blocks(run.iter().map(|b| b.block.len()).sum());
        for CheckedBucket { id, records, block } in run {
            group.install((u64::from(*id) % per_group) as usize, block, i64::from(*records))?;
        }
    }
    Ok(Loaded { codec: meta.codec, buckets_per_group: meta.buckets_per_group, groups, trained: meta.trained })
}

/// `kura restore` of a CompactDbm snapshot: every bucket of every intact block of `source`
/// that passes its own checks is written into a new snapshot at `dest`, behind the layout
/// record (one of its two copies must be intact: it holds the codec and the dictionary the
/// buckets need),
/// with the count of the records kept.
pub fn salvage_file(source: &Path, dest: &Path) -> Result<RestoreReport> {
    let bytes = std::fs::read(source).map_err(|e| Error::io(format!("read {}", source.display()), e))?;
    let salvage = Salvage::read(&bytes).map_err(|e| e.in_file(source))?;
    // The buckets are checked once the walk is over, against the first intact layout (the
    // first record, or its copy, the last).
    let mut meta: Option<Meta> = None;
    let mut buckets: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut report = salvage.records(|key, value| {
        match (&meta, key.is_empty()) {
            (None, true) => meta = Some(parse_meta(value)?),
            (Some(_), true) => {}
            (_, false) => buckets.push((key.to_vec(), value.to_vec())),
        }
        Ok(())
    })?;
    let meta = meta.ok_or_else(|| {
        broken("both copies of the layout record (codec, dictionary, bucket count) are damaged, so no bucket can be decoded")
            .in_file(source)
    })?;
    let (mut kept, mut refused, mut next_bucket) = (Vec::<CheckedBucket>::new(), 0u64, 0u64);
    let mut scratch = Vec::new();
    for (key, value) in &buckets {
        match check_bucket(&meta, key, value, &mut scratch) {
            Ok(bucket) if u64::from(bucket.id) >= next_bucket => {
                next_bucket = u64::from(bucket.id) + 1;
                kept.push(bucket);
            }
            _ => refused += 1,
        }
    }
    let records: u64 = kept.iter().map(|b| u64::from(b.records)).sum();
    if refused > 0 {
        report.dropped.push(format!("{refused} buckets in intact blocks failed their own checks: dropped"));
    }
    report.records = records;
    report.dropped_records = meta.record_count.saturating_sub(records);
    let target = backing::Backing::open(dest, OpenMode::Truncate, CLASS)?.backing;
    target.save(salvage.params().unwrap_or_default(), |writer| {
        write_meta(writer, &meta.codec, meta.buckets_per_group, meta.trained, records)?;
        kept.iter().try_for_each(|bucket| write_bucket(writer, u64::from(bucket.id), &bucket.block))?;
        write_meta(writer, &meta.codec, meta.buckets_per_group, meta.trained, records)
    })?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    /// The layout record's fields as docs/compact.md lists them under "record 0": (name, width
    /// in bytes, or None for the dictionary, the rest of the value).
    fn documented_fields() -> Vec<(String, Option<usize>)> {
        let doc = include_str!("../../../../docs/compact.md");
        let start = doc.find("record 0  key_len = 0").unwrap();
        let end = start + doc.get(start..).unwrap().find("record i ").unwrap();
        doc.get(start..end)
            .unwrap()
            .lines()
            .skip(1)
            .filter_map(|line| {
                let field = line.split_whitespace().next()?;
                let width = line.split(':').nth(1).and_then(|rest| rest.split_whitespace().next());
                match (field.strip_suffix(':'), width) {
                    (Some(name), Some("u8")) => Some((name.to_string(), Some(1))),
                    (Some(name), Some("u32")) => Some((name.to_string(), Some(4))),
                    (Some(name), Some("u64")) => Some((name.to_string(), Some(8))),
                    (None, _) if field == "dictionary" => Some((field.to_string(), None)),
                    _ => None,
                }
            })
            .collect()
    }

    #[test]
    fn the_layout_record_is_laid_out_as_docs_compact_md_says() {
        let samples: Vec<Vec<u8>> =
            (0..400u32).map(|i| format!("{{\"word\":\"w{i}\",\"gloss\":\"sense {}\"}}", i % 17).into_bytes()).collect();
        let dictionary = crate::codec::train_dictionary(&samples, 1024).unwrap();
        assert!(!dictionary.is_empty());
        let codec = block::codec(CodecKind::ZstdDict, dictionary.clone()).unwrap();
        let trained = Trained { at: 1_795_900_000, records: 400, trigger: Trigger::Rebuild };
        let meta = meta_bytes(&codec, 3, Some(trained), 777).unwrap();
        let expected: Vec<(&str, u64)> = vec![
            ("format", u64::from(FORMAT)),
            ("codec", u64::from(CodecKind::ZstdDict.id())),
            ("buckets_per_group", 3),
            ("num_groups", NUM_GROUPS as u64),
            ("record_count", 777),
            ("trained_at", trained.at),
            ("trained_records", trained.records),
            ("trigger", u64::from(trained.trigger.id())),
        ];
        let fields = documented_fields();
        assert_eq!(fields.len(), expected.len() + 1, "{fields:?}");
        let mut at = 0;
        for ((name, width), (expected_name, value)) in fields.iter().zip(&expected) {
            assert_eq!(name, expected_name);
            let width = width.unwrap();
            let mut bytes = [0u8; 8];
            bytes.get_mut(..width).unwrap().copy_from_slice(meta.get(at..at + width).unwrap());
            assert_eq!(u64::from_le_bytes(bytes), *value, "{name} at {at}");
            at += width;
        }
        assert_eq!(at, META_LEN);
        assert_eq!(fields.last().unwrap(), &("dictionary".to_string(), None));
        assert_eq!(meta.get(at..).unwrap(), &dictionary[..]);
        let parsed = parse_meta(&meta).unwrap();
        assert_eq!((parsed.buckets_per_group, parsed.record_count, parsed.trained), (3, 777, Some(trained)));
    }
}
