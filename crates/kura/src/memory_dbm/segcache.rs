//! SegCacheDbm (`.kums`): an in-memory cache bounded by a record cap and a memory cap, as
//! CacheDbm, at a fraction of its memory per record: records are packed end to end into large
//! segments (`segments.rs`, no allocation per record) and found through an index of 8 bytes a
//! record (`segment_index.rs`), after the design of Pelikan's Segcache (Yang et al., NSDI '21).
//!
//! Records are sharded into slots by key hash as in CacheDbm; each slot has its own mutex,
//! index and segments, and an equal share of both caps, so the global figures never exceed
//! the caps. A slot's memory (`mem_usage`) is its index, its segments' buffers and their
//! bookkeeping, as allocated: every byte the slot holds besides the slot struct itself.
//!
//! Eviction works a segment at a time, as CLOCK over segments (FIFO with reinsertion): when
//! a slot needs room and may not allocate, it compacts its oldest segment in place, keeping
//! the records requested since they were written or last kept (their reference bit, in the
//! index entry) with the bit cleared, and evicting the others; dead records (overwritten,
//! removed) simply vanish. The compacted segment then takes new records. After every segment
//! has been compacted once in a row without making room, the next compaction evicts
//! regardless of reference bits, so a write always finishes.
//!
//! Expiry: a record set through `Dbm::process_expiring` carries the Unix second it expires at
//! (4 bytes in its segment; none for a record without one), and each segment the second by
//! which all the records written to it since its last compaction have expired. From its
//! expiry on, a record is never returned (gets, `get_many`, cursors, `process`, snapshots),
//! though it stays in the index, and in `count`, until its segment is compacted. The rule
//! eviction keeps: whenever a slot needs room (its active segment is full, or its index is at
//! the record cap or its load), it first compacts a segment whose records have all expired,
//! oldest first, before it allocates memory and before it evicts any record that has not
//! expired; a compaction for any reason drops the expired records it meets (counted as
//! `expired`, not as evictions). So a live record is evicted only when no segment of its slot
//! holds expired records alone. Records that expire are appended to an active segment of
//! their own, apart from those that never expire, so that their segments expire as a whole;
//! among them, a segment mixing long and short expiries frees its short-lived records only
//! when CLOCK reaches it (docs/memory.md).
//!
//! The trade against CacheDbm's exact LRU: a hit only sets a bit, and only if it was clear
//! (no list to relink, nothing written for a record already referenced), so a get is one
//! index probe and one record read; but the victim is a record of the oldest segment not
//! requested since it was written or last kept, not the least recently used record, and a
//! whole segment's such records go at once. docs/memory.md has the figures.

use std::path::Path;

use crate::sync::Mutex;

use super::backing::{self, Backing};
use super::key_hash::{hash_key, slot_of};
use super::segment_index::{tag_of, Location, Position, SegmentIndex, MAX_SEGMENTS};
use super::segments::{record_len, too_large, Room, Segments, StoredRecord};
use super::slotted::{share, Padded, RecordView, SlotCount, SlotRecords, Slotted, SlottedCursor};
use super::snapshot::{self, Snapshot};
use crate::dbm::ExpiringProcessor;
use crate::dbm::OpenMode;
use crate::dbm::{Action, Cursor, Dbm, Params, Processor};
use crate::engine::Mark;
use crate::error::{Error, ErrorKind, Result};
use crate::expiry::{Clock, Expiry};
use crate::stats::{Caps, Stat, Stats};

/// The largest standard segment: what a location's offset can address (1 MiB).
pub const MAX_SEGMENT_BYTES: usize = 1 << super::segment_index::OFFSET_BITS;
/// The smallest standard segment.
pub const MIN_SEGMENT_BYTES: usize = 256;
/// A slot's standard segments are this fraction of its memory share (within the bounds
/// above), so that one segment evicted at a time is a small part of the slot.
const SEGMENTS_PER_SHARE: usize = 32;

const CLASS: u8 = b's';
const PARAMS: &[&str] = &["cap_rec_num", "cap_mem_bytes", "num_slots", "policy", "segment_bytes"];

fn full_no_evict() -> Error {
    Error::new(ErrorKind::Limit, "the cache is full and evicts nothing (policy=noevict)")
}

/// One shard. Invariants whenever the mutex is released: `index.len() <= cap_records`,
/// `mem_usage() <= cap_bytes`; every index entry points at a record of `segments` with its
/// key, and no two at the same record; a segment's `live` bytes are the records the index
/// points at.
pub struct Slot {
    index: SegmentIndex,
    segments: Segments,
    cap_records: usize,
    cap_bytes: usize,
    /// `policy=noevict`: a write that would need an eviction is refused instead.
    no_evict: bool,
    /// Records that had not expired, evicted to make room.
    evictions: u64,
    /// Expired records dropped by a compaction.
    expired: u64,
    /// What records' expiry is compared with.
    clock: Clock,
}

impl Slot {
    fn mem_usage(&self) -> usize {
        self.index.bytes() + self.segments.buffer_bytes() + self.segments.bookkeeping_bytes()
    }

    #[inline]
    fn find(&self, key: &[u8], hash: u64) -> Option<Position> {
        let segments = &self.segments;
        self.index.find(tag_of(hash), |location| segments.read(location).is_some_and(|record| record.key == key))
    }

    /// The record at `position`, expired or not.
    #[inline]
    fn record(&self, position: Position) -> Option<StoredRecord<'_>> {
        self.segments.read(self.index.location(position))
    }

    /// The record at `position`, unless it has expired.
    #[inline]
    fn live_record(&self, position: Position) -> Option<StoredRecord<'_>> {
        self.record(position).filter(|record| self.unexpired(record))
    }

    /// Whether `record` has not expired now (the clock is read only for a record that expires).
    #[inline]
    fn unexpired(&self, record: &StoredRecord<'_>) -> bool {
        !record.expiry.is_some_and(|expiry| expiry.has_passed(self.clock.now()))
    }

    /// A Limit error unless a record of `len` bytes can be stored once everything else is
    /// evicted: the index as it is, one standard segment, and an oversized record's own one.
    fn check_fits(&self, len: usize) -> Result<()> {
        let segment_bytes = self.segments.segment_bytes();
        let own_segment = if len > segment_bytes { len } else { 0 };
        let needed = self.index.bytes() + self.segments.bookkeeping_bytes() + segment_bytes + own_segment;
        if needed > self.cap_bytes {
            return Err(too_large(len, self.cap_bytes));
        }
        Ok(())
    }

    /// Compacts a segment whose records have all expired, if there is one (oldest first), or
    /// else the oldest segment (the active one if it is the only one): expired records are
    /// dropped, records not referenced (all of them if `force`) are evicted, the others kept
    /// with their reference bit cleared. Under `policy=noevict` only dead and expired records
    /// go. `room`: see `Segments::compact`. False if there was no segment.
    fn reclaim(&mut self, room: Option<Room>, force: bool) -> bool {
        let now = self.now_if_expiring();
        let Some(id) = self.segments.take_expired(now).or_else(|| self.segments.take_oldest()) else { return false };
        self.compact(id, room, force, now);
        true
    }

    /// Compacts a segment whose records have all expired, if there is one: what a slot does
    /// before it allocates memory. False if there was none.
    fn reclaim_expired(&mut self, room: Option<Room>) -> bool {
        if !self.segments.any_expiring() {
            return false;
        }
        let now = self.clock.now();
        let Some(id) = self.segments.take_expired(now) else { return false };
        self.compact(id, room, false, now);
        true
    }

    /// The clock's second, or 0 (before every expiry) when no segment holds a record that
    /// expires: a cache that never sees an expiry never reads the clock.
    fn now_if_expiring(&self) -> u64 {
        if self.segments.any_expiring() {
            self.clock.now()
        } else {
            0
        }
    }

    /// Compacts segment `id`, taken out of the fill order (see `reclaim`).
    fn compact(&mut self, id: u16, room: Option<Room>, force: bool, now: u64) {
        let (index, no_evict) = (&mut self.index, self.no_evict);
        let (evictions, expired) = (&mut self.evictions, &mut self.expired);
        self.segments.compact(id, room, |old, record, new| {
            let Some(position) = index.find_location(tag_of(hash_key(record.key)), old) else { return false };
            let referenced = index.is_referenced(position);
            if record.has_expired(now) {
                index.remove(position);
                *expired += 1;
                false
            } else if no_evict || (referenced && !force) {
                index.relocate(position, new, referenced && no_evict);
                true
            } else {
                index.remove(position);
                *evictions += 1;
                false
            }
        });
    }

    /// Makes room in the index for one more record: grows it if the memory share allows,
    /// else evicts until the record cap and the index's load allow one more.
    fn make_index_room(&mut self) -> Result<()> {
        let rounds = self.segments.count();
        let mut attempts = 0;
        while self.index.len() >= self.cap_records || !self.index.has_room() {
            // Expired records' segments go first, before the index grows or anything is evicted.
            if self.reclaim_expired(None) {
                continue;
            }
            if self.index.len() < self.cap_records && !self.index.has_room() {
                let grown = self.index.bytes_for_one_more();
                let usage_after = self.mem_usage() - self.index.bytes() + grown;
                let alone_after = grown + self.segments.bookkeeping_bytes() + self.segments.segment_bytes();
                if usage_after <= self.cap_bytes && alone_after <= self.cap_bytes {
                    self.index.grow();
                    continue;
                }
            }
            if self.no_evict {
                return Err(full_no_evict());
            }
            if attempts > 2 * rounds + 2 || !self.reclaim(None, attempts >= rounds) {
                return Err(Error::internal("SegCacheDbm found a record to evict whenever its index was full"));
            }
            attempts += 1;
        }
        Ok(())
    }

    /// Stores the record of `len` bytes in a segment: in the active one if it has room; else
    /// in a segment whose records have all expired, compacted; else in new memory if the cap
    /// allows; else evicting to make room.
    fn store_in_segment(&mut self, key: &[u8], value: &[u8], expiry: Option<Expiry>, len: usize) -> Result<Location> {
        let segment_bytes = self.segments.segment_bytes();
        let rounds = self.segments.count();
        let expiring = expiry.is_some();
        let room = (len <= segment_bytes).then_some(Room { bytes: len, expiring });
        let mut attempts = 0;
        loop {
            if len <= segment_bytes {
                if let Some(location) = self.segments.append(key, value, expiry) {
                    return Ok(location);
                }
            }
            if self.reclaim_expired(room) {
                continue;
            }
            if len > segment_bytes {
                if self.mem_usage() + len <= self.cap_bytes && self.segments.has_free_id() {
                    return self
                        .segments
                        .store_oversized(key, value, expiry)
                        .ok_or_else(|| too_large(len, self.cap_bytes));
                }
            } else if self.mem_usage() + segment_bytes <= self.cap_bytes && self.segments.start_segment(expiring) {
                continue;
            }
            if attempts > 2 * rounds + 2 || !self.reclaim(room, attempts >= rounds) {
                return Err(if self.no_evict { full_no_evict() } else { too_large(len, self.cap_bytes) });
            }
            attempts += 1;
        }
    }

    /// Sets `key` to `value`, expiring at `expiry`: appends the record, then points the index
    /// at it (the former record, if any, becomes dead). `found`: the key's entry before the
    /// call, expired or not. A value that has already expired removes the record instead.
    fn write(
        &mut self,
        key: &[u8],
        value: &[u8],
        expiry: Option<Expiry>,
        hash: u64,
        found: Option<Position>,
    ) -> Result<()> {
        if expiry.is_some_and(|expiry| expiry.has_passed(self.clock.now())) {
            if let Some(position) = found {
                self.remove(position);
            }
            return Ok(());
        }
        let len = record_len(key.len(), value.len(), expiry.is_some());
        self.check_fits(len)?;
        if found.is_none() {
            self.make_index_room()?;
        }
        let location = self.store_in_segment(key, value, expiry, len)?;
        // Making room may have moved or evicted the key's former record: look it up again.
        match self.find(key, hash) {
            Some(position) => {
                let old = self.index.location(position);
                let old_len = self.segments.read(old).map_or(0, |record| record.len);
                self.index.relocate(position, location, true);
                self.segments.mark_dead(old, old_len);
            }
            None => {
                // Room was made above, or the eviction of the key's record left some.
                self.index.insert(tag_of(hash), location, false);
            }
        }
        debug_assert!(
            self.index.len() <= self.cap_records && self.mem_usage() <= self.cap_bytes,
            "invariant: a slot is within its caps whenever its mutex is released"
        );
        Ok(())
    }

    fn remove(&mut self, position: Position) {
        let location = self.index.location(position);
        let len = self.segments.read(location).map_or(0, |record| record.len);
        self.index.remove(position);
        self.segments.mark_dead(location, len);
    }

    fn clear(&mut self) {
        self.index.clear();
        self.segments.clear();
    }

    /// The live records in eviction order: the oldest segment first.
    fn live_in_eviction_order(&self) -> impl Iterator<Item = StoredRecord<'_>> {
        let now = self.clock.now();
        self.segments
            .eviction_order()
            .flat_map(|id| self.segments.segment_records(id))
            .filter(move |(location, record)| self.is_live(*location, record, now))
            .map(|(_, record)| record)
    }

    /// Whether the record at `location` is the one the index holds for its key, and has not
    /// expired at `now`.
    fn is_live(&self, location: Location, record: &StoredRecord<'_>, now: u64) -> bool {
        !record.has_expired(now) && self.index.find_location(tag_of(hash_key(record.key)), location).is_some()
    }

    /// The segments whose records have all expired now.
    fn expired_segments(&self) -> usize {
        self.segments.expired_count(self.clock.now())
    }
}

impl RecordView for StoredRecord<'_> {
    fn key(&self) -> &[u8] {
        self.key
    }

    fn value(&self) -> &[u8] {
        self.value
    }
}

impl SlotRecords for Slot {
    type Record<'a> = StoredRecord<'a>;

    fn len(&self) -> usize {
        self.index.len()
    }

    fn find(&self, key: &[u8], hash: u64) -> Option<u32> {
        let position = self.find(key, hash)?;
        self.live_record(position).map(|_| self.index.location(position).raw())
    }

    fn get(&self, index: u32) -> Option<StoredRecord<'_>> {
        let location = Location::from_raw(index)?;
        let record = self.segments.read(location)?;
        let live =
            self.unexpired(&record) && self.index.find_location(tag_of(hash_key(record.key)), location).is_some();
        live.then_some(record)
    }

    fn index_end(&self) -> u32 {
        u32::MAX
    }

    /// The live records in location order (segment id, then offset), from `from` on.
    fn records_from(&self, from: u32) -> impl Iterator<Item = (u32, StoredRecord<'_>)> {
        let now = self.clock.now();
        self.segments
            .records()
            .filter(move |(location, record)| location.raw() >= from && self.is_live(*location, record, now))
            .map(|(location, record)| (location.raw(), record))
    }
}

/// The in-memory cache of packed segments (`.kums`), bounded by a record cap and a memory cap.
pub struct SegCacheDbm {
    slots: Box<[Padded<Mutex<Slot>>]>,
    cap_rec_num: u64,
    cap_mem_bytes: Option<u64>,
    /// What `num_slots` was (a snapshot keeps a given count only).
    num_slots: SlotCount,
    no_evict: bool,
    segment_bytes: Option<usize>,
    backing: Backing,
}

impl SegCacheDbm {
    /// `kura restore`: copies every record of every intact block of the snapshot `source`
    /// into a new snapshot `dest` (docs/memory.md, "Salvage").
    pub fn salvage_file(source: &Path, dest: &Path) -> Result<crate::engine::RestoreReport> {
        super::backing::salvage_file(source, dest, CLASS)
    }

    /// The parameters `open` takes (the registry lists them; anything else is an error).
    pub const PARAMS: &'static [&'static str] = PARAMS;

    /// The marks its files start with (the registry lists them; `kura.dbm.whichdb` asks).
    pub const MAGIC: &'static [Mark] = &snapshot::magic(&CLASS);

    /// A cache with no file. Parameters: `cap_rec_num` (required), `cap_mem_bytes`,
    /// `num_slots` (default 16, fewer under a `cap_mem_bytes` below 1 MiB: `SlotCount`), `policy` (`clock`, the default: segment-at-a-time eviction
    /// with reinsertion; or `noevict`: a write that would need an eviction is a Limit error),
    /// `segment_bytes` (default: a 32nd of a slot's memory share, 256 bytes to 1 MiB).
    pub fn new(params: &Params) -> Result<SegCacheDbm> {
        Self::with_backing(params, Backing::in_memory(CLASS))
    }

    /// Opens `path` (empty: no file), loading its snapshot as `mode` says; records beyond the
    /// caps are evicted while loading. The file keeps the parameters it was saved with: they
    /// are the defaults of a reopen, and any given here replace them.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<SegCacheDbm> {
        let opened = Backing::open(path.as_ref(), mode, CLASS)?;
        let snapshot = opened.snapshot.as_deref().map(Snapshot::read).transpose()?;
        let params = match &snapshot {
            Some(snapshot) => snapshot.params_under(params)?,
            None => params.clone(),
        };
        let dbm = Self::with_backing(&params, opened.backing)?;
        if let Some(snapshot) = snapshot {
            snapshot.records(|key, value| {
                let hash = hash_key(key);
                let mut slot = dbm.slot(hash).lock();
                let found = slot.find(key, hash);
                match slot.write(key, value, None, hash, found) {
                    // A record too large for a smaller cap than it was saved with is dropped,
                    // as are the records a noevict cache has no room for.
                    Err(e) if e.kind() == ErrorKind::Limit => Ok(()),
                    other => other,
                }
            })?;
        }
        if opened.write_now {
            dbm.save()?;
        }
        Ok(dbm)
    }

    fn with_backing(params: &Params, backing: Backing) -> Result<SegCacheDbm> {
        params.check_known("segcache", PARAMS)?;
        let cap_rec_num = params
            .get_u64("cap_rec_num")?
            .ok_or_else(|| Error::invalid("segcache needs cap_rec_num (the maximum number of records)"))?;
        if cap_rec_num == 0 {
            return Err(Error::invalid("cap_rec_num must be at least 1"));
        }
        let cap_mem_bytes = params.get_u64("cap_mem_bytes")?;
        let slot_count = SlotCount::from_params(params, cap_mem_bytes)?;
        let no_evict = match params.get("policy").map(str::to_ascii_lowercase).as_deref() {
            None | Some("clock") => false,
            Some("noevict") => true,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "segcache policy {other:?} is unknown (known: clock, the default; noevict)"
                )))
            }
        };
        let segment_bytes = params
            .get_u64("segment_bytes")?
            .map(|n| {
                usize::try_from(n).ok().filter(|n| (MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(n)).ok_or_else(
                    || Error::invalid(format!("segment_bytes must be {MIN_SEGMENT_BYTES}..={MAX_SEGMENT_BYTES}")),
                )
            })
            .transpose()?;
        let num_slots = slot_count.count.min(usize::try_from(cap_rec_num).unwrap_or(usize::MAX));
        let mut slots = Vec::with_capacity(num_slots);
        for index in 0..num_slots {
            let cap_bytes = cap_mem_bytes.map_or(usize::MAX, |cap| share(cap, num_slots, index));
            let segment_bytes = segment_bytes
                .unwrap_or_else(|| (cap_bytes / SEGMENTS_PER_SHARE).clamp(MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES));
            // Every segment is at least a standard one, so this many cover the share.
            let max_segments = if cap_mem_bytes.is_some() { cap_bytes / segment_bytes + 1 } else { 0 };
            let slot = Slot {
                index: SegmentIndex::new(),
                segments: Segments::new(segment_bytes, max_segments.min(MAX_SEGMENTS)),
                cap_records: share(cap_rec_num, num_slots, index),
                cap_bytes,
                no_evict,
                evictions: 0,
                expired: 0,
                clock: Clock::System,
            };
            let fixed = slot.mem_usage() + segment_bytes;
            if fixed > cap_bytes {
                return Err(Error::invalid(format!(
                    "cap_mem_bytes is too small: each of the {num_slots} slots needs {fixed} bytes for its index \
                     and one segment of {segment_bytes} bytes (lower segment_bytes or num_slots, or raise the cap)"
                )));
            }
            slots.push(Padded(Mutex::new(slot)));
        }
        Ok(SegCacheDbm {
            slots: slots.into_boxed_slice(),
            cap_rec_num,
            cap_mem_bytes,
            num_slots: slot_count,
            no_evict,
            segment_bytes,
            backing,
        })
    }

    #[inline]
    fn slot(&self, hash: u64) -> &Mutex<Slot> {
        let slots = &self.slots;
        &slots.get(slot_of(hash, slots.len())).expect("slot_of stays below the slot count").0
    }

    /// The parameters a snapshot keeps, as `Params::parse` reads them.
    fn saved_params(&self) -> String {
        let memory_cap = self.cap_mem_bytes.map(|cap| format!(",cap_mem_bytes={cap}")).unwrap_or_default();
        let segments = self.segment_bytes.map(|bytes| format!(",segment_bytes={bytes}")).unwrap_or_default();
        let slots = self.num_slots.saved(self.slots.len());
        let (records, policy) = (self.cap_rec_num, self.policy());
        format!("cap_rec_num={records}{memory_cap}{slots},policy={policy}{segments}")
    }

    fn save(&self) -> Result<()> {
        // Oldest segment first, so that loading the file back keeps the eviction order.
        self.backing.save(&self.saved_params(), |writer| {
            for slot in self.slots.iter() {
                let slot = slot.lock();
                for record in slot.live_in_eviction_order() {
                    writer.record(record.key, record.value)?;
                }
            }
            Ok(())
        })
    }

    /// Accounted bytes over all slots (indexes, segments and their bookkeeping); never above
    /// `cap_mem_bytes`.
    pub fn mem_usage(&self) -> u64 {
        self.slots.iter().map(|s| s.lock().mem_usage() as u64).sum()
    }

    /// The cache reading `clock` for its records' expiry instead of the system's wall clock
    /// (tests move a `ManualClock`).
    pub fn with_clock(self, clock: Clock) -> SegCacheDbm {
        for slot in self.slots.iter() {
            slot.lock().clock = clock.clone();
        }
        self
    }

    /// Records that had not expired, evicted so far.
    pub fn evictions(&self) -> u64 {
        self.slots.iter().map(|s| s.lock().evictions).sum()
    }

    /// Expired records dropped so far by the compaction of their segment.
    pub fn expired(&self) -> u64 {
        self.slots.iter().map(|s| s.lock().expired).sum()
    }

    /// Slot `slot`'s live evictions so far and its segments whose records have all expired
    /// now (for tests: a slot's evictions grow only while it has no such segment).
    pub fn slot_expiry_state(&self, slot: usize) -> Option<(u64, usize)> {
        let slot = self.slots.get(slot)?.lock();
        Some((slot.evictions, slot.expired_segments()))
    }

    /// The `policy` parameter in effect: `clock` or `noevict`.
    pub fn policy(&self) -> &'static str {
        if self.no_evict {
            "noevict"
        } else {
            "clock"
        }
    }

    /// The number of independently locked slots.
    pub fn num_slots(&self) -> usize {
        self.slots.len()
    }

    /// The bytes a record of these lengths, with no expiry, takes in a segment (its index
    /// entry aside).
    pub fn record_len(key_len: usize, value_len: usize) -> usize {
        record_len(key_len, value_len, false)
    }

    /// The record cap and memory cap of slot `slot` (for tests).
    pub fn slot_caps(&self, slot: usize) -> Option<(usize, usize)> {
        let slot = self.slots.get(slot)?.lock();
        Some((slot.cap_records, slot.cap_bytes))
    }

    /// The records and accounted bytes of slot `slot` (for tests).
    pub fn slot_usage(&self, slot: usize) -> Option<(usize, usize)> {
        let slot = self.slots.get(slot)?.lock();
        Some((slot.index.len(), slot.mem_usage()))
    }

    /// The keys of one slot in eviction order (for tests and tools).
    pub fn slot_keys_oldest_first(&self, slot: usize) -> Vec<Vec<u8>> {
        let Some(slot) = self.slots.get(slot) else { return Vec::new() };
        let slot = slot.lock();
        slot.live_in_eviction_order().map(|record| record.key.to_vec()).collect()
    }
}

impl Dbm for SegCacheDbm {
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        self.process_expiring(key, &mut |old| (processor(old), None))
    }

    /// An expired record shows as absent to `processor`; a value set expires at the expiry
    /// returned with it (see the file's header).
    fn process_expiring(&self, key: &[u8], processor: ExpiringProcessor<'_, '_>) -> Result<()> {
        self.backing.check_open()?;
        let hash = hash_key(key);
        let mut slot = self.slot(hash).lock();
        // The key's entry even if its record expired: a write replaces it, never adds a second.
        let found = slot.find(key, hash);
        let (action, expiry) =
            processor(found.and_then(|position| slot.live_record(position)).map(|record| record.value));
        match (action, found) {
            (Action::Keep, Some(position)) => {
                slot.index.reference(position);
                Ok(())
            }
            (Action::Keep, None) | (Action::Remove, None) => Ok(()),
            (_, _) if !self.backing.is_writable() => Err(backing::read_only()),
            (Action::Set(value), found) => slot.write(key, &value, expiry, hash, found),
            (Action::Remove, Some(position)) => {
                slot.remove(position);
                Ok(())
            }
        }
    }

    /// A hit sets the record's reference bit if it is clear, and writes nothing else; an
    /// expired record is a miss.
    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        let hash = hash_key(key);
        let mut slot = self.slot(hash).lock();
        let found = slot.find(key, hash).filter(|&position| slot.live_record(position).is_some());
        if let Some(position) = found {
            slot.index.reference(position);
        }
        visit(found.and_then(|position| slot.record(position)).map(|record| record.value));
        Ok(())
    }

    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        self.backing.check_writable()?;
        let hash = hash_key(key);
        let mut slot = self.slot(hash).lock();
        let found = slot.find(key, hash);
        if let (Some(position), false) = (found, overwrite) {
            if slot.live_record(position).is_some() {
                slot.index.reference(position);
                return Err(Error::new(ErrorKind::Duplicate, "a record exists for the key"));
            }
        }
        slot.write(key, value, None, hash, found)
    }

    fn count(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.slots.iter().map(|s| s.lock().index.len() as u64).sum())
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        self.backing.check_open()?;
        Ok(Box::new(SlottedCursor::new(self)))
    }

    fn clear(&self) -> Result<()> {
        self.backing.check_writable()?;
        for slot in self.slots.iter() {
            slot.lock().clear();
        }
        Ok(())
    }

    fn synchronize(&self, _hard: bool) -> Result<()> {
        self.backing.synchronize(|| self.save())
    }

    fn rebuild(&self, params: &Params) -> Result<()> {
        // Compaction happens as segments are reused; there is nothing else to rebuild.
        self.backing.check_writable()?;
        params.check_known("segcache", &[])
    }

    fn should_be_rebuilt(&self) -> Result<bool> {
        self.backing.check_open()?;
        Ok(false)
    }

    fn file_size(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.mem_usage())
    }

    fn inspect(&self) -> Result<Stats> {
        let count = self.count()?;
        let mem_usage = self.mem_usage();
        let segments: usize = self.slots.iter().map(|s| s.lock().segments.count()).sum();
        let own = [
            ("mem_usage", Stat::Number(mem_usage)),
            ("expired", Stat::Number(self.expired())),
            ("num_slots", Stat::Number(self.slots.len() as u64)),
            ("policy", Stat::Name(self.policy())),
            ("segments", Stat::Number(segments as u64)),
        ];
        let mut stats = self.backing.stats("SegCacheDbm", count, mem_usage, own);
        stats.caps = Some(Caps { records: self.cap_rec_num, memory: self.cap_mem_bytes, evictions: self.evictions() });
        Ok(stats)
    }

    fn is_writable(&self) -> bool {
        self.backing.is_writable()
    }

    fn close(&self) -> Result<()> {
        self.backing.close(|| self.save())
    }
}

impl Drop for SegCacheDbm {
    fn drop(&mut self) {
        self.backing.save_if_open(|| self.save());
    }
}

impl Slotted for SegCacheDbm {
    type Table = Slot;

    fn backing(&self) -> &Backing {
        &self.backing
    }

    fn num_slots(&self) -> usize {
        self.slots.len()
    }

    /// Reads the slot alone, setting no reference bit: a scan must not make every record
    /// recent.
    fn read_slot<R>(&self, slot: usize, read: impl FnOnce(&Slot) -> R) -> Option<R> {
        Some(read(&self.slots.get(slot)?.lock()))
    }
}
