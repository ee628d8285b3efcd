//! CompactDbm's cursor: bucket by bucket (groups in order, buckets in order within a group,
//! keys in order within a bucket), copying one bucket's records at a time under its group's
//! read lock, so a record is never seen torn and a scan holds no lock between calls.
//!
//! Guarantees under concurrent writers, for a scan from `first` to the end: a record present
//! for the whole scan is yielded once (a key lives in one bucket, and each bucket is copied
//! once), records added or removed meanwhile may or may not be seen. A rebuild during a scan
//! re-buckets groups; the cursor then goes on from its bucket index in the new layout and may
//! miss or repeat records of the group it was in. `set` and `remove` act by key through the
//! database.

use super::block;
use super::bucket::BucketRecords;
use super::group::{with_scratch, GroupCell};
use super::CompactDbm;
use crate::dbm::{Cursor, Dbm};
use crate::error::{Error, Result};
use crate::memory_dbm::key_hash::{hash_key, slot_of};

/// A cursor over a CompactDbm, bucket by bucket.
pub struct CompactCursor<'a> {
    dbm: &'a CompactDbm,
    /// The bucket whose records are loaded: (group, bucket within it).
    group: usize,
    bucket: usize,
    records: Vec<(Vec<u8>, Vec<u8>)>,
    /// The record at the cursor within `records`; None when the cursor is at no record.
    index: Option<usize>,
}

impl<'a> CompactCursor<'a> {
    /// A cursor at no record; call `first` or `jump`.
    pub fn new(dbm: &'a CompactDbm) -> CompactCursor<'a> {
        CompactCursor { dbm, group: 0, bucket: 0, records: Vec::new(), index: None }
    }

    fn cell(&self, group: usize) -> Option<&'a GroupCell> {
        self.dbm.groups.get(group).map(|padded| &padded.0)
    }

    /// Copies the records of bucket `bucket` of group `group`; false past the group's end.
    fn load(&mut self, group: usize, bucket: usize) -> Result<bool> {
        let Some(cell) = self.cell(group) else { return Ok(false) };
        let locked = cell.lock.read();
        if bucket >= locked.bucket_count() {
            return Ok(false);
        }
        let stored = locked.block(bucket)?;
        self.records.clear();
        with_scratch(|scratch| -> Result<()> {
            let raw = block::decode(&locked.codec, stored, &mut scratch.decoded)?;
            let mut walk = BucketRecords::new(raw);
            while let Some((key, value)) = walk.next_record()? {
                self.records.push((key.to_vec(), value.to_vec()));
            }
            Ok(())
        })?;
        self.group = group;
        self.bucket = bucket;
        Ok(true)
    }

    /// Moves to the first record at or after bucket (`group`, `bucket`); false at the end.
    fn settle(&mut self, mut group: usize, mut bucket: usize) -> Result<bool> {
        while group < self.dbm.groups.len() {
            if !self.load(group, bucket)? {
                group += 1;
                bucket = 0;
                continue;
            }
            if !self.records.is_empty() {
                self.index = Some(0);
                return Ok(true);
            }
            bucket += 1;
        }
        self.index = None;
        self.records.clear();
        Ok(false)
    }

    fn current(&self) -> Option<&(Vec<u8>, Vec<u8>)> {
        self.records.get(self.index?)
    }
}

fn nowhere() -> Error {
    Error::not_found("the cursor is at no record")
}

impl Cursor for CompactCursor<'_> {
    fn first(&mut self) -> Result<bool> {
        self.dbm.backing.check_open()?;
        self.settle(0, 0)
    }

    fn jump(&mut self, key: &[u8]) -> Result<bool> {
        self.dbm.backing.check_open()?;
        let hash = hash_key(key);
        let group = slot_of(hash, self.dbm.groups.len());
        let bucket = match self.cell(group) {
            Some(cell) => cell.lock.read().bucket_of(hash),
            None => return Ok(false),
        };
        self.index = None;
        if !self.load(group, bucket)? {
            return Ok(false);
        }
        self.index = self.records.iter().position(|(k, _)| k == key);
        Ok(self.index.is_some())
    }

    fn next(&mut self) -> Result<bool> {
        self.dbm.backing.check_open()?;
        let Some(index) = self.index else { return Ok(false) };
        if index + 1 < self.records.len() {
            self.index = Some(index + 1);
            return Ok(true);
        }
        self.settle(self.group, self.bucket + 1)
    }

    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.dbm.backing.check_open()?;
        Ok(self.current().cloned())
    }

    fn key(&mut self) -> Result<Option<Vec<u8>>> {
        self.dbm.backing.check_open()?;
        Ok(self.current().map(|(k, _)| k.clone()))
    }

    fn set(&mut self, value: &[u8]) -> Result<()> {
        let index = self.index.ok_or_else(nowhere)?;
        let record = self.records.get_mut(index).ok_or_else(nowhere)?;
        self.dbm.set(&record.0, value, true)?;
        record.1 = value.to_vec();
        Ok(())
    }

    fn remove(&mut self) -> Result<()> {
        let index = self.index.ok_or_else(nowhere)?;
        let key = self.records.get(index).ok_or_else(nowhere)?.0.clone();
        self.dbm.remove(&key)?;
        self.records.remove(index);
        if index < self.records.len() {
            return Ok(());
        }
        self.settle(self.group, self.bucket + 1).map(|_| ())
    }
}
