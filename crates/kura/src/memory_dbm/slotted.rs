//! What the sharded hash engines (TinyDbm, CacheDbm, SegCacheDbm) share: the cache-line
//! padding of their slot locks, each slot's share of a cap, the reads of a slot's table
//! (`SlotRecords`), and their one cursor, which walks slot by slot over snapshots of keys.
//!
//! Why keys and not positions: a record's cell moves when an insert rebuilds a TinyDbm slot's
//! table, and a CacheDbm slab index is reused by the next insert after a removal, so a cursor
//! that walks positions can meet a record twice or pass it by. Instead, entering a slot the
//! cursor copies that slot's keys under the slot's lock (one packed buffer, reused from slot
//! to slot), then yields them in that order, reading each record by key when it is read and
//! skipping keys removed since. Each key carries a hint, its index when copied, so that a
//! read finds a record that has not moved without hashing its key.
//!
//! Order: slots in index order; within a slot, the slot's storage order (cells, slab entries)
//! at the moment the cursor entered it. `jump(key)` enters `key`'s slot at `key` and takes only
//! the keys stored after it; `next` then goes on to the following slots.
//!
//! Guarantees under concurrent writers, for a scan from `first` to the end:
//! - every record present for the whole scan is yielded exactly once;
//! - no key is ever yielded twice (a key lives in one slot, and a slot's snapshot holds each
//!   key once);
//! - records added or removed during the scan may or may not be seen; a record is never seen
//!   torn (it is read under the slot's lock).
//!
//! Reading through the cursor peeks: it never refreshes a CacheDbm record's recency. The
//! cursor's `set` and `remove` act on the key it is at, through `Dbm::process`.

use super::backing::Backing;
use super::key_hash::{hash_key, slot_of};
use super::record::RecordBytes;
use crate::dbm::{Cursor, Dbm, Params};
use crate::error::{Error, Result};
use crate::multi_get::MAX_LOCKS;

/// Keeps each slot's lock on its own cache line, so threads on different slots do not
/// contend through false sharing.
#[repr(align(64))]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The keys of one slot as the cursor found them: packed end to end in one buffer, so that a
/// snapshot costs no allocation per key and the buffers are reused from slot to slot. Each
/// key comes with a hint: where it was stored (cell or slab index), which lets a read find
/// it without hashing while it has not moved; a read checks the key there, so a stale hint
/// only costs a regular lookup. Invariant: the ends in `keys` are non-decreasing and the last
/// (if any) is `bytes.len()`.
#[derive(Default)]
pub struct KeySnapshot {
    bytes: Vec<u8>,
    /// (end of the key in `bytes`, hint) per key.
    keys: Vec<(usize, u32)>,
}

impl KeySnapshot {
    /// Empties the snapshot, keeping its buffers, and makes room for `count` keys.
    pub fn reset(&mut self, count: usize) {
        self.bytes.clear();
        self.keys.clear();
        self.keys.reserve(count);
    }

    pub fn push(&mut self, key: &[u8], hint: u32) {
        self.bytes.extend_from_slice(key);
        self.keys.push((self.bytes.len(), hint));
    }

    /// The `index`-th key and its hint.
    pub fn get(&self, index: usize) -> Option<(&[u8], u32)> {
        let (end, hint) = *self.keys.get(index)?;
        let start = match index.checked_sub(1) {
            Some(previous) => self.keys.get(previous)?.0,
            None => 0,
        };
        Some((self.bytes.get(start..end)?, hint))
    }
}

/// A record as a slot's table lends it: a `RecordBytes` of TinyDbm and CacheDbm, a record
/// in a segment of SegCacheDbm.
pub trait RecordView {
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
}

impl RecordView for &RecordBytes {
    fn key(&self) -> &[u8] {
        RecordBytes::key(self)
    }

    fn value(&self) -> &[u8] {
        RecordBytes::value(self)
    }
}

/// The reads of one slot's table (TinyDbm's `OpenTable`, CacheDbm's `SlotTable`,
/// SegCacheDbm's slot): records at `u32` indices (cells, slab entries, segment locations)
/// where they stay while they live, except that an `OpenTable` rebuild and a segment's
/// compaction move them.
pub trait SlotRecords {
    /// What `get` lends.
    type Record<'a>: RecordView
    where
        Self: 'a;

    /// The number of live records.
    fn len(&self) -> usize;
    /// The index of `key`'s record; `hash` is `hash_key(key)`.
    fn find(&self, key: &[u8], hash: u64) -> Option<u32>;
    /// The record at `index`, if one lives there.
    fn get(&self, index: u32) -> Option<Self::Record<'_>>;
    /// One past the last index a record can be at (the cell count, the slab length).
    fn index_end(&self) -> u32;

    /// The live records and their indices in storage order, from index `from` on.
    fn records_from(&self, from: u32) -> impl Iterator<Item = (u32, Self::Record<'_>)> {
        (from..self.index_end()).filter_map(move |index| self.get(index).map(|record| (index, record)))
    }
}

/// The slot-level primitives the cursor needs beyond `Dbm`. An engine shards keys with
/// `slot_of(hash_key(key), num_slots())`.
pub trait Slotted: Dbm + Sync {
    type Table: SlotRecords;

    fn backing(&self) -> &Backing;
    fn num_slots(&self) -> usize;
    /// Runs `read` on the table of `slot` under the slot's lock, without refreshing any
    /// recency; None if there is no such slot.
    fn read_slot<R>(&self, slot: usize, read: impl FnOnce(&Self::Table) -> R) -> Option<R>;

    /// Replaces `keys` with the keys of `slot` in storage order, taken under the slot's lock.
    /// With `from`, only that key and the keys stored after it; false (and `keys` empty) if
    /// `from` is absent.
    fn slot_keys(&self, slot: usize, from: Option<&[u8]>, keys: &mut KeySnapshot) -> bool {
        keys.reset(0);
        let snapshot = |table: &Self::Table| {
            let start = match from {
                None => 0,
                Some(key) => match table.find(key, hash_key(key)) {
                    Some(index) => index,
                    None => return false,
                },
            };
            keys.reset(table.len());
            for (index, record) in table.records_from(start) {
                keys.push(record.key(), index);
            }
            true
        };
        self.read_slot(slot, snapshot).unwrap_or(false)
    }

    /// Reads the value of `key` (a key of `slot`, last seen at index `hint`) under the slot's
    /// lock, without refreshing any recency.
    fn peek<R>(&self, slot: usize, key: &[u8], hint: u32, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let read_record = |table: &Self::Table| {
            let at_hint = table.get(hint).filter(|record| record.key() == key);
            let record = at_hint.or_else(|| table.find(key, hash_key(key)).and_then(|index| table.get(index)))?;
            Some(read(record.value()))
        };
        self.read_slot(slot, read_record).flatten()
    }
}

pub struct SlottedCursor<'d, S: Slotted> {
    dbm: &'d S,
    /// The slot whose keys `keys` holds.
    slot: usize,
    keys: KeySnapshot,
    /// The index in `keys` of the key the cursor is at; None: at no record.
    at: Option<usize>,
}

impl<'d, S: Slotted> SlottedCursor<'d, S> {
    pub fn new(dbm: &'d S) -> Self {
        SlottedCursor { dbm, slot: 0, keys: KeySnapshot::default(), at: None }
    }

    /// Moves to the first key at or after `index` of the snapshot that is still live, entering
    /// the next slots as the snapshots run out.
    fn settle(&mut self, mut index: usize) -> bool {
        loop {
            while let Some((key, hint)) = self.keys.get(index) {
                if self.dbm.peek(self.slot, key, hint, |_| ()).is_some() {
                    self.at = Some(index);
                    return true;
                }
                index += 1;
            }
            self.slot += 1;
            if self.slot >= self.dbm.num_slots() {
                self.keys.reset(0);
                self.at = None;
                return false;
            }
            self.dbm.slot_keys(self.slot, None, &mut self.keys);
            index = 0;
        }
    }

    fn current(&self) -> Option<(&[u8], u32)> {
        self.at.and_then(|index| self.keys.get(index))
    }

    fn current_or_error(&self) -> Result<&[u8]> {
        self.current().map(|(key, _)| key).ok_or_else(|| Error::not_found("the cursor is at no record"))
    }

    /// Reads the record the cursor is at, if it is still there.
    fn peek_current<R>(&self, read: impl FnOnce(&[u8], &[u8]) -> R) -> Option<R> {
        let (key, hint) = self.current()?;
        self.dbm.peek(self.slot, key, hint, |value| read(key, value))
    }
}

impl<S: Slotted> Cursor for SlottedCursor<'_, S> {
    fn first(&mut self) -> Result<bool> {
        self.dbm.backing().check_open()?;
        self.slot = 0;
        self.dbm.slot_keys(0, None, &mut self.keys);
        Ok(self.settle(0))
    }

    fn jump(&mut self, key: &[u8]) -> Result<bool> {
        self.dbm.backing().check_open()?;
        self.slot = slot_of(hash_key(key), self.dbm.num_slots());
        let found = self.dbm.slot_keys(self.slot, Some(key), &mut self.keys);
        // The snapshot starts with `key` itself.
        self.at = found.then_some(0);
        Ok(found)
    }

    fn next(&mut self) -> Result<bool> {
        self.dbm.backing().check_open()?;
        match self.at {
            None => Ok(false),
            Some(index) => Ok(self.settle(index + 1)),
        }
    }

    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.dbm.backing().check_open()?;
        Ok(self.peek_current(|key, value| (key.to_vec(), value.to_vec())))
    }

    fn key(&mut self) -> Result<Option<Vec<u8>>> {
        self.dbm.backing().check_open()?;
        Ok(self.peek_current(|key, _| key.to_vec()))
    }

    fn set(&mut self, value: &[u8]) -> Result<()> {
        self.dbm.backing().check_writable()?;
        let key = self.current_or_error()?;
        if self.dbm.replace(key, value)? {
            Ok(())
        } else {
            Err(Error::not_found("the record at the cursor was removed"))
        }
    }

    fn remove(&mut self) -> Result<()> {
        self.dbm.backing().check_writable()?;
        let key = self.current_or_error()?;
        // NotFound when the record is gone; the cursor then stays where it is.
        self.dbm.remove(key)?;
        let index = self.at.map_or(0, |index| index + 1);
        self.settle(index);
        Ok(())
    }
}

/// Slot count of a cache (CacheDbm, SegCacheDbm) when `num_slots` is not given: as Tkrzw's
/// CacheDBM, plenty for a few threads, and few enough that per-slot recency stays close to a
/// global one.
pub const DEFAULT_NUM_SLOTS: usize = 16;

/// The least memory share the default slot count leaves a slot under a memory cap. A smaller
/// cap takes fewer slots (fewer writers in parallel, which so small a cache does not need)
/// rather than refusing records of a few KiB: a slot's share holds a record beside its index
/// and, in SegCacheDbm, a standard segment, and 64 KiB over 5 shards of 16 slots each left
/// 819 bytes, too little for a 587-byte record.
const MIN_DEFAULT_SLOT_SHARE: u64 = 64 << 10;

/// A cache's slot count, and whether its `num_slots` parameter gave it. A snapshot keeps a
/// given count only: a derived one is derived again from the caps the file reopens with.
#[derive(Debug, Clone, Copy)]
pub struct SlotCount {
    pub count: usize,
    pub given: bool,
}

impl SlotCount {
    /// The `num_slots` parameter (1 to `MAX_LOCKS`), or when not given `DEFAULT_NUM_SLOTS`,
    /// fewer under a memory cap too small to give each slot `MIN_DEFAULT_SLOT_SHARE` (at least
    /// one slot).
    pub fn from_params(params: &Params, cap_mem_bytes: Option<u64>) -> Result<SlotCount> {
        let Some(given) = params.get_u64("num_slots")? else {
            let count = cap_mem_bytes.map_or(DEFAULT_NUM_SLOTS, |cap| {
                usize::try_from(cap / MIN_DEFAULT_SLOT_SHARE).unwrap_or(usize::MAX).clamp(1, DEFAULT_NUM_SLOTS)
            });
            return Ok(SlotCount { count, given: false });
        };
        usize::try_from(given)
            .ok()
            .filter(|n| (1..=MAX_LOCKS).contains(n))
            .map(|count| SlotCount { count, given: true })
            .ok_or_else(|| Error::invalid(format!("num_slots must be 1..={MAX_LOCKS}")))
    }

    /// `,num_slots=N` for a snapshot's parameters when the count was given, else nothing.
    pub fn saved(self, actual: usize) -> String {
        if self.given {
            format!(",num_slots={actual}")
        } else {
            String::new()
        }
    }
}

/// Slot `index`'s share of a cap of `total` split over `parts` slots, the shares adding up to
/// it (the first `total % parts` slots take one more).
pub fn share(total: u64, parts: usize, index: usize) -> usize {
    let parts = parts as u64;
    let extra = u64::from((index as u64) < total % parts);
    usize::try_from(total / parts + extra).unwrap_or(usize::MAX)
}
