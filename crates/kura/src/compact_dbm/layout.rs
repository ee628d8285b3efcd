//! The layout of a CompactDbm (its codec and bucket count) and how it changes: `rebuild`
//! re-buckets and re-encodes, and the `zstd-dict` codec trains its dictionary, on a sample of
//! the records, before the buckets are encoded with it.
//!
//! A group's records stay in their group whatever the bucket count (the group is chosen by
//! the high half of the key hash), so a rebuild moves one group at a time to the new layout
//! under that group's write lock while the other groups serve. Rebuilds, training and
//! snapshot saves take the layout lock, so they never interleave.

use std::sync::Arc;

use super::block;
use super::bucket::{self, BucketRecords};
use super::group::{bucket_in_group, with_scratch, Group, GroupCell, Scratch};
use super::options::{self, Options, DEFAULT_BUCKET_RECORDS, NUM_GROUPS};
use super::training::{Trained, Trigger, MIN_BATCH_RECORDS};
use super::CompactDbm;
use crate::batch::{BatchOp, WriteBatch};
use crate::codec::{Codec, DictionaryTraining, Effort};
use crate::error::Result;
use crate::memory_dbm::key_hash::hash_key;
use crate::memory_dbm::slotted::Padded;

pub struct Layout {
    pub codec: Arc<Codec>,
    pub buckets_per_group: usize,
    pub dictionary_size: usize,
    /// The decoded-bucket cache's capacity over all groups.
    pub cache_bytes: u64,
    /// How the dictionary the codec has was trained (None: no dictionary, or one from a
    /// snapshot that did not say).
    pub trained: Option<Trained>,
}

fn needs_dictionary(codec: &Codec) -> bool {
    codec.awaits_dictionary()
}

/// One record as a dictionary sample: in the bucket format, as the codec will see it.
fn sample(training: &mut DictionaryTraining, key: &[u8], value: &[u8], buffer: &mut Vec<u8>) {
    buffer.clear();
    bucket::put_record(buffer, key, value);
    training.add(buffer);
}

/// `write_batch`'s first step: a `zstd-dict` database without a dictionary trains one on a
/// large enough batch, and re-encodes the buckets it already has with it, before the batch's
/// buckets are encoded.
pub fn train_on_batch(dbm: &CompactDbm, batch: &WriteBatch) -> Result<()> {
    if batch.len() < MIN_BATCH_RECORDS {
        return Ok(());
    }
    let mut layout = dbm.layout.lock();
    if !needs_dictionary(&layout.codec) {
        return Ok(());
    }
    let mut training = DictionaryTraining::new(layout.dictionary_size);
    let mut buffer = Vec::new();
    let mut sets = 0u64;
    for op in batch.ops() {
        if let BatchOp::Set { key, value } = op {
            sample(&mut training, key, value, &mut buffer);
            sets += 1;
        }
    }
    let dictionary = training.train()?;
    if dictionary.is_empty() {
        return Ok(());
    }
    layout.codec = Arc::new(block::codec(layout.codec.kind(), dictionary)?);
    layout.trained = Some(Trained::now(sets, Trigger::Batch));
    move_groups(&dbm.groups, &layout, Effort::Dense)
}

/// After a write: a `zstd-dict` database without a dictionary that has reached its
/// `AutoTraining` (`train_records`, `train_bytes`)
/// trains one on a sample of all its records and re-encodes its buckets with it, group by
/// group (each group write-locked only while its own buckets are re-encoded, so readers of
/// the other 255 go on), at the quick level that the single writes to come use too. Returns
/// at once when another thread holds the layout (it is training, rebuilding or saving: the
/// next write asks again). A sample that teaches zstd nothing (all records alike) makes no
/// dictionary; the table then asks again when it has twice the records.
pub fn train_when_due(dbm: &CompactDbm) -> Result<()> {
    let Some(mut layout) = dbm.layout.try_lock() else { return Ok(()) };
    if !needs_dictionary(&layout.codec) {
        return Ok(());
    }
    let (records, raw_bytes) = dbm.groups.iter().fold((0u64, 0u64), |(records, raw), cell| {
        let group = cell.lock.read();
        (records + group.records, raw + group.raw_bytes)
    });
    if !dbm.auto_training.is_due(records, raw_bytes) || records < dbm.auto_training_from() {
        return Ok(());
    }
    let dictionary = train_on_records(&dbm.groups, layout.dictionary_size)?;
    if dictionary.is_empty() {
        dbm.defer_auto_training(records.saturating_mul(2));
        return Ok(());
    }
    layout.codec = Arc::new(block::codec(layout.codec.kind(), dictionary)?);
    layout.trained = Some(Trained::now(records, Trigger::Auto));
    move_groups(&dbm.groups, &layout, Effort::Quick)
}

/// `Dbm::rebuild`: the codec, bucket count and cache size given (the bucket count sized for
/// the current record count when no count is given), a `zstd-dict` dictionary trained anew.
pub fn rebuild(dbm: &CompactDbm, options: &Options) -> Result<()> {
    let mut layout = dbm.layout.lock();
    let records: u64 = dbm.groups.iter().map(|cell| cell.lock.read().records).sum();
    layout.buckets_per_group =
        options.buckets_per_group(records).unwrap_or_else(|| options::buckets_per_group_for(records));
    if let Some(size) = options.dict_size {
        layout.dictionary_size = size;
    }
    if let Some(bytes) = options.cache_bytes {
        layout.cache_bytes = bytes;
        let per_group = usize::try_from(bytes / NUM_GROUPS as u64).unwrap_or(usize::MAX);
        for cell in dbm.groups.iter() {
            *cell.cache.lock() = super::cache::DecodedCache::new(per_group);
        }
    }
    let kind = options.codec.unwrap_or(layout.codec.kind());
    let dictionary =
        if kind.uses_dictionary() { train_on_records(&dbm.groups, layout.dictionary_size)? } else { Vec::new() };
    layout.trained = (!dictionary.is_empty()).then(|| Trained::now(records, Trigger::Rebuild));
    layout.codec = Arc::new(block::codec(kind, dictionary)?);
    move_groups(&dbm.groups, &layout, Effort::Dense)?;
    // Every bucket was encoded just now: the contexts that did it are not needed until the
    // next write, which makes one again.
    layout.codec.release_compressors();
    Ok(())
}

/// A dictionary trained on a sample of every group's records.
fn train_on_records(groups: &[Padded<GroupCell>], dictionary_size: usize) -> Result<Vec<u8>> {
    let mut training = DictionaryTraining::new(dictionary_size);
    let mut buffer = Vec::new();
    for cell in groups {
        let group = cell.lock.read();
        with_scratch(|scratch| -> Result<()> {
            for stored in group.blocks() {
                let raw = block::decode(&group.codec, stored, &mut scratch.decoded)?;
                let mut records = BucketRecords::new(raw);
                while let Some((key, value)) = records.next_record()? {
                    sample(&mut training, key, value, &mut buffer);
                }
            }
            Ok(())
        })?;
    }
    training.train()
}

/// Moves every group to `layout`, its bucket count and codec, encoding at `effort`.
fn move_groups(groups: &[Padded<GroupCell>], layout: &Layout, effort: Effort) -> Result<()> {
    for cell in groups {
        let mut group = cell.lock.write();
        let moved = with_scratch(|scratch| relayout(&group, layout, effort, scratch))?;
        *group = moved;
        cell.cache.lock().clear();
    }
    Ok(())
}

/// The group `group` re-bucketed to `layout.buckets_per_group` buckets encoded with
/// `layout.codec` at `effort`. Each new bucket is encoded once.
fn relayout(group: &Group, layout: &Layout, effort: Effort, scratch: &mut Scratch) -> Result<Group> {
    let mut moved = Group::new(Arc::clone(&layout.codec), layout.buckets_per_group);
    // The blocks' present size is a fair guess of their new one; spare room is given back.
    moved.reserve_blocks(usize::try_from(group.stored_bytes).unwrap_or(0));
    let Scratch { decoded, merged, frame, block: encoded } = scratch;
    if moved.bucket_count() == group.bucket_count() {
        for (index, stored) in group.blocks().enumerate() {
            let raw = block::decode(&group.codec, stored, decoded)?;
            let count = bucket::validate(raw, |_| Ok(()))?;
            block::encode(&layout.codec, raw, effort, frame, encoded)?;
            moved.install(index, encoded, i64::try_from(count).unwrap_or(i64::MAX))?;
        }
        moved.shrink_blocks();
        return Ok(moved);
    }
    // Every record of the group, tagged with its new bucket, then sorted by bucket and key.
    let mut records: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::with_capacity(usize::try_from(group.records).unwrap_or(0));
    for stored in group.blocks() {
        let raw = block::decode(&group.codec, stored, decoded)?;
        let mut walk = BucketRecords::new(raw);
        while let Some((key, value)) = walk.next_record()? {
            let target = bucket_in_group(hash_key(key), layout.buckets_per_group);
            records.push((target, key.to_vec(), value.to_vec()));
        }
    }
    records.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut start = 0;
    while let Some((target, _, _)) = records.get(start) {
        let target = *target;
        let end = start + records.get(start..).unwrap_or_default().iter().take_while(|r| r.0 == target).count();
        merged.clear();
        for (_, key, value) in records.get(start..end).unwrap_or_default() {
            bucket::put_record(merged, key, value);
        }
        block::encode(&layout.codec, merged, effort, frame, encoded)?;
        moved.install(target, encoded, (end - start) as i64)?;
        start = end;
    }
    moved.shrink_blocks();
    Ok(moved)
}

/// True when buckets hold four times the records they were sized for, or a `zstd-dict`
/// database has records enough to train on but no dictionary yet.
pub fn should_be_rebuilt(dbm: &CompactDbm) -> bool {
    let records: u64 = dbm.groups.iter().map(|cell| cell.lock.read().records).sum();
    let layout = dbm.layout.lock();
    let buckets = (layout.buckets_per_group * NUM_GROUPS) as u64;
    records > buckets.saturating_mul(DEFAULT_BUCKET_RECORDS * 4)
        || (needs_dictionary(&layout.codec) && records >= MIN_BATCH_RECORDS as u64)
}
