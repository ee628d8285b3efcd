//! Cursors over a HashDbm: bucket by bucket, chain order within a bucket.
//!
//! A cursor holds no lock between calls. It copies the keys of one bucket at a time under
//! that bucket's lock and reads each record when asked, so other threads keep writing while
//! it moves; a record removed meanwhile is skipped, one added to a bucket not yet reached is
//! seen. Empty buckets, most of a file with few records, are passed over a window at a time
//! by reading the in-memory bucket array under one lock. A rebuild that changes the bucket
//! count restarts nothing: the cursor goes on with the new buckets and may then miss or
//! repeat records.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use super::storage::{bucket_of, hash_key};
use super::HashDbm;
use crate::dbm::{Cursor, Dbm};
use crate::error::{Error, Result};

pub struct HashCursor<'a> {
    dbm: &'a HashDbm,
    /// The next bucket whose keys are not yet loaded.
    next_bucket: u64,
    pending: VecDeque<Vec<u8>>,
    current: Option<Vec<u8>>,
}

impl<'a> HashCursor<'a> {
    pub fn new(dbm: &'a HashDbm) -> HashCursor<'a> {
        HashCursor { dbm, next_bucket: u64::MAX, pending: VecDeque::new(), current: None }
    }

    /// Loads the keys of bucket `bucket` into `pending`; none when a rebuild left fewer
    /// buckets than that (the walk then ends, as the module comment allows).
    fn load(&mut self, bucket: u64) -> Result<()> {
        loop {
            let num_buckets = self.dbm.num_buckets.load(Ordering::Acquire);
            if bucket >= num_buckets {
                // Chosen among more buckets: reading it would report an index out of range
                // as damaged data.
                return Ok(());
            }
            let loaded =
                self.dbm.with_bucket_index(bucket, num_buckets, false, |s, lock| HashDbm::live_keys(s, lock.read()));
            if let Some(keys) = loaded {
                self.pending.extend(keys?.into_iter().map(|(key, _)| key));
                return Ok(());
            }
        }
    }

    /// Moves to the next pending key, loading buckets as needed.
    fn advance(&mut self) -> Result<bool> {
        loop {
            if let Some(key) = self.pending.pop_front() {
                self.current = Some(key);
                return Ok(true);
            }
            let num_buckets = self.dbm.num_buckets.load(Ordering::Acquire);
            if self.next_bucket >= num_buckets {
                self.current = None;
                return Ok(false);
            }
            // Empty buckets are skipped a window at a time under one lock (most of a
            // sparse file's); the bucket found is then loaded under its own lock.
            let Some(occupied) = self.dbm.first_occupied_bucket(self.next_bucket, num_buckets) else {
                continue;
            };
            let bucket = occupied?;
            if bucket >= num_buckets {
                self.next_bucket = bucket;
                continue;
            }
            self.next_bucket = bucket + 1;
            self.load(bucket)?;
        }
    }

    fn current(&self) -> Result<&[u8]> {
        self.current.as_deref().ok_or_else(|| Error::not_found("the cursor is at no record"))
    }
}

impl Cursor for HashCursor<'_> {
    fn first(&mut self) -> Result<bool> {
        self.pending.clear();
        self.next_bucket = 0;
        self.advance()
    }

    fn jump(&mut self, key: &[u8]) -> Result<bool> {
        self.pending.clear();
        self.current = None;
        let bucket = bucket_of(hash_key(key), self.dbm.num_buckets.load(Ordering::Acquire));
        self.next_bucket = bucket + 1;
        self.load(bucket)?;
        match self.pending.iter().position(|k| k == key) {
            Some(at) => {
                self.pending.drain(..at);
                self.advance()
            }
            None => {
                self.pending.clear();
                self.next_bucket = u64::MAX;
                Ok(false)
            }
        }
    }

    fn next(&mut self) -> Result<bool> {
        if self.current.is_none() && self.pending.is_empty() {
            return Ok(false);
        }
        self.advance()
    }

    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(key) = self.current.clone() else { return Ok(None) };
        match self.dbm.get(&key) {
            Ok(value) => Ok(Some((key, value))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn key(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.current.clone())
    }

    fn set(&mut self, value: &[u8]) -> Result<()> {
        let key = self.current()?.to_vec();
        if self.dbm.replace(&key, value)? {
            Ok(())
        } else {
            Err(Error::not_found("the record at the cursor was removed"))
        }
    }

    fn remove(&mut self) -> Result<()> {
        let key = self.current()?.to_vec();
        let removed = self.dbm.remove(&key);
        self.advance()?;
        removed
    }
}
