//! A lock group: a run of buckets behind one reader-writer lock, with the codec they are
//! encoded with, the counters `inspect` reports, and its decoded-bucket cache.
//!
//! A key's group is chosen by the high half of its hash and its bucket within the group by
//! the low half (with the group's own bucket count, read under the group's lock), so a
//! rebuild can re-bucket or re-encode one group at a time while the others serve.

use std::cell::RefCell;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::arena::BlockArena;
use super::block;
use super::bucket::{self, Edit};
use super::cache::DecodedCache;
use crate::codec::{Codec, Effort};
use crate::error::Result;

pub struct Group {
    pub codec: Arc<Codec>,
    /// Each bucket's block (empty for an empty bucket).
    blocks: BlockArena,
    pub records: u64,
    /// Sum of the raw bucket sizes.
    pub raw_bytes: u64,
    /// Sum of the block sizes.
    pub stored_bytes: u64,
}

/// A group and its cache; the cache has its own small lock, taken under the group's read
/// lock by gets and under its write lock by writes.
pub struct GroupCell {
    pub lock: RwLock<Group>,
    pub cache: Mutex<DecodedCache>,
}

/// Buffers a thread reuses from operation to operation.
#[derive(Default)]
pub struct Scratch {
    pub decoded: Vec<u8>,
    pub merged: Vec<u8>,
    pub frame: Vec<u8>,
    pub block: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's scratch buffers (fresh ones if they are in use, as when a
/// callback of one database reads another).
pub fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut Scratch::default()),
    })
}

/// The bucket within a group of `hash`, among `count` buckets (multiply-shift on the low half).
#[inline]
pub fn bucket_in_group(hash: u64, count: usize) -> usize {
    (((hash & 0xffff_ffff) * count as u64) >> 32) as usize
}

/// Moves the sums of raw and stored bucket sizes from block `old` to block `new`.
fn account(raw_bytes: &mut u64, stored_bytes: &mut u64, old: &[u8], new: &[u8]) {
    *raw_bytes = (*raw_bytes + block::raw_len(new) as u64).saturating_sub(block::raw_len(old) as u64);
    *stored_bytes = (*stored_bytes + new.len() as u64).saturating_sub(old.len() as u64);
}

impl Group {
    pub fn new(codec: Arc<Codec>, buckets: usize) -> Group {
        Group { codec, blocks: BlockArena::new(buckets), records: 0, raw_bytes: 0, stored_bytes: 0 }
    }

    /// The number of buckets.
    pub fn bucket_count(&self) -> usize {
        self.blocks.bucket_count()
    }

    /// Every bucket's block in bucket order (empty for an empty bucket).
    pub fn blocks(&self) -> impl Iterator<Item = &[u8]> {
        self.blocks.iter()
    }

    #[inline]
    pub fn bucket_of(&self, hash: u64) -> usize {
        bucket_in_group(hash, self.blocks.bucket_count())
    }

    pub fn block(&self, bucket: usize) -> Result<&[u8]> {
        self.blocks.get(bucket)
    }

    /// Makes room for `bytes` more bytes of blocks at once: for a bulk build that knows them.
    pub fn reserve_blocks(&mut self, bytes: usize) {
        self.blocks.reserve_exact(bytes);
    }

    /// Gives the blocks' spare room back: after a bulk build.
    pub fn shrink_blocks(&mut self) {
        self.blocks.shrink_to_fit();
    }

    /// Puts `new` in place of bucket `bucket`'s block, whose record count changed by
    /// `delta`, and updates the counters.
    pub fn install(&mut self, bucket: usize, new: &[u8], delta: i64) -> Result<()> {
        let (mut raw_bytes, mut stored_bytes) = (self.raw_bytes, self.stored_bytes);
        account(&mut raw_bytes, &mut stored_bytes, self.block(bucket)?, new);
        self.blocks.replace(bucket, new)?;
        (self.raw_bytes, self.stored_bytes) = (raw_bytes, stored_bytes);
        self.records = self.records.saturating_add_signed(delta);
        Ok(())
    }

    /// Applies `edits` (sorted by key, each key once) to bucket `bucket`: decodes it once,
    /// merges, encodes once at `effort`.
    pub fn apply_edits(
        &mut self,
        bucket: usize,
        edits: &[Edit<'_>],
        effort: Effort,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let Scratch { decoded, merged, frame, block: encoded } = scratch;
        let raw = block::decode(&self.codec, self.block(bucket)?, decoded)?;
        let delta = bucket::merge(raw, edits, merged)?;
        block::encode(&self.codec, merged, effort, frame, encoded)?;
        self.install(bucket, encoded, delta)
    }

    /// Applies the edits of many buckets, each bucket's `(bucket, edits)` in ascending bucket
    /// order, as a bulk batch does: every new block is encoded at `effort` into `staging`,
    /// then the blocks are replaced at once (`BlockArena::replace_many`).
    pub fn apply_bulk<'e>(
        &mut self,
        runs: impl Iterator<Item = (usize, &'e [Edit<'e>])>,
        effort: Effort,
        staging: &mut Vec<u8>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let Scratch { decoded, merged, frame, block: encoded } = scratch;
        staging.clear();
        let mut staged = Vec::new();
        let mut delta_sum = 0i64;
        let (mut raw_bytes, mut stored_bytes) = (self.raw_bytes, self.stored_bytes);
        for (bucket, edits) in runs {
            let old = self.block(bucket)?;
            let raw = block::decode(&self.codec, old, decoded)?;
            delta_sum += bucket::merge(raw, edits, merged)?;
            block::encode(&self.codec, merged, effort, frame, encoded)?;
            account(&mut raw_bytes, &mut stored_bytes, old, encoded);
            staged.push((bucket, staging.len()..staging.len() + encoded.len()));
            staging.extend_from_slice(encoded);
        }
        self.blocks.replace_many(&staged, staging)?;
        self.raw_bytes = raw_bytes;
        self.stored_bytes = stored_bytes;
        self.records = self.records.saturating_add_signed(delta_sum);
        Ok(())
    }

    /// What the allocator holds for the blocks, spare and dead bytes included.
    pub fn heap_bytes(&self) -> u64 {
        self.blocks.heap_bytes()
    }

    /// Memory held besides the blocks: the bucket table.
    pub fn table_bytes(&self) -> u64 {
        self.blocks.table_bytes()
    }

    /// Removes every record, keeping the bucket count (in a new zeroed table: see
    /// `BlockArena::spans`).
    pub fn clear(&mut self) {
        self.blocks = BlockArena::new(self.blocks.bucket_count());
        self.records = 0;
        self.raw_bytes = 0;
        self.stored_bytes = 0;
    }
}

impl GroupCell {
    pub fn new(group: Group, cache_capacity: usize) -> GroupCell {
        GroupCell { lock: RwLock::new(group), cache: Mutex::new(DecodedCache::new(cache_capacity)) }
    }

    /// Shows the value of `key` (hash `hash`) to `visit`, under the group's read lock.
    pub fn get_with(&self, key: &[u8], hash: u64, visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        let group = self.lock.read();
        self.with_bucket(&group, group.bucket_of(hash), |raw| {
            visit(bucket::find(raw, key)?);
            Ok(())
        })
    }

    /// Runs `read` on the raw records of `bucket` of `group` (which the caller holds at
    /// least read-locked): a raw bucket in place, a compressed one from the cache or decoded
    /// (and then offered to the cache).
    pub fn with_bucket(&self, group: &Group, bucket: usize, read: impl FnOnce(&[u8]) -> Result<()>) -> Result<()> {
        let stored = group.block(bucket)?;
        if stored.first().is_none_or(|&flag| flag == 0) {
            return read(stored.get(1..).unwrap_or_default());
        }
        let cached = {
            let mut cache = self.cache.lock();
            if cache.is_enabled() {
                cache.get(bucket)
            } else {
                None
            }
        };
        if let Some(raw) = cached {
            return read(&raw);
        }
        with_scratch(|scratch| {
            let raw = block::decode(&group.codec, stored, &mut scratch.decoded)?;
            read(raw)?;
            let mut cache = self.cache.lock();
            if cache.is_enabled() {
                cache.offer(bucket, raw);
            }
            Ok(())
        })
    }
}
