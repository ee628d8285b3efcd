//! CacheDbm (`.kumc`): an in-memory hash database that evicts least recently used records to
//! stay under a record cap and an optional memory cap, as memcached or Tkrzw's CacheDBM.
//!
//! Records are sharded into slots by key hash; each slot has its own mutex, hash table, LRU
//! list, and an equal share of both caps (the first `cap % num_slots` slots get one unit
//! more), so the shares add up to exactly the global caps and the global figures can never
//! exceed them. Eviction is per slot: the slot's least recently used record goes first. Any
//! access through `process` or `get` (even one that keeps the record) refreshes recency;
//! cursors do not.
//!
//! Accounted memory of a slot = its bucket array + for each record `record_cost` (slab entry,
//! key, value, allocator overhead if spilled) + the LRU links. See docs/memory.md.

use std::path::Path;

use parking_lot::Mutex;

use super::backing::{self, Backing};
use super::lru::{LruList, LINK_BYTES};
use super::record::RecordBytes;
use super::slotted::{KeySnapshot, Padded, Slotted, SlottedCursor};
use super::table::{hash_key, record_cost, slot_of, SlotTable, BUCKET_BYTES};
use crate::dbm::{Action, Cursor, Dbm, Params, Processor, Properties};
use crate::error::{Error, ErrorKind, Result};
use crate::open::OpenMode;

/// Default slot count: as Tkrzw's CacheDBM; plenty for a few threads, and few enough that
/// per-slot LRU stays close to a global LRU.
pub const DEFAULT_NUM_SLOTS: usize = 16;

/// The most records a slot reserves room for at creation (128 MiB of slab).
const MAX_RESERVED_RECORDS: usize = 1 << 22;

const CLASS: u8 = b'c';
const PARAMS: &[&str] = &["cap_rec_num", "cap_mem_bytes", "num_slots"];

/// One shard. Invariants, kept by `store` and `evict_to_caps` whenever the mutex is released:
/// `table.len() <= cap_records` and `mem_usage() <= cap_bytes`; the LRU list holds exactly the
/// live records of `table`.
struct Slot {
    table: SlotTable,
    lru: LruList,
    cap_records: usize,
    cap_bytes: usize,
    evictions: u64,
}

impl Slot {
    fn mem_usage(&self) -> usize {
        self.table.num_buckets() * BUCKET_BYTES + self.table.record_bytes() + self.table.len() * LINK_BYTES
    }

    /// Sets `key` to `value` (`found`: its current index), then evicts to the caps.
    fn store(&mut self, key: &[u8], value: &[u8], hash: u64, found: Option<u32>) -> Result<()> {
        let fixed = self.table.num_buckets() * BUCKET_BYTES;
        let cost = CacheDbm::record_cost(key.len(), value.len());
        if fixed.saturating_add(cost) > self.cap_bytes {
            return Err(Error::new(
                ErrorKind::Limit,
                format!(
                    "a record of {cost} accounted bytes exceeds the slot's memory share ({} bytes)",
                    self.cap_bytes
                ),
            ));
        }
        let index = match found {
            Some(index) => {
                self.table.set_value(index, value)?;
                self.lru.touch(index);
                index
            }
            None => {
                let index = self.table.insert(RecordBytes::new(key, value)?, hash)?;
                self.lru.push_newest(index);
                index
            }
        };
        self.evict_to_caps(index);
        Ok(())
    }

    /// Evicts least recently used records until both caps hold. `keep` (the record just
    /// written, the newest) fits alone by the check in `store`, so it is never the victim.
    fn evict_to_caps(&mut self, keep: u32) {
        while self.table.len() > self.cap_records || self.mem_usage() > self.cap_bytes {
            match self.lru.oldest() {
                Some(victim) if victim != keep => {
                    self.lru.unlink(victim);
                    self.table.remove(victim);
                    self.evictions += 1;
                }
                _ => break,
            }
        }
    }

    fn remove(&mut self, index: u32) -> bool {
        if self.table.remove(index).is_some() {
            self.lru.unlink(index);
            true
        } else {
            false
        }
    }

    fn clear(&mut self) {
        self.table.clear();
        self.lru.clear();
    }
}

pub struct CacheDbm {
    slots: Box<[Padded<Mutex<Slot>>]>,
    cap_rec_num: u64,
    cap_mem_bytes: Option<u64>,
    backing: Backing,
}

/// Splits `total` into `parts` shares adding up to it.
fn share(total: u64, parts: usize, index: usize) -> usize {
    let parts = parts as u64;
    let extra = u64::from((index as u64) < total % parts);
    usize::try_from(total / parts + extra).unwrap_or(usize::MAX)
}

impl CacheDbm {
    /// A cache with no file. Parameters: `cap_rec_num` (required), `cap_mem_bytes`,
    /// `num_slots` (default 16).
    pub fn new(params: &Params) -> Result<CacheDbm> {
        Self::with_backing(params, Backing::in_memory(CLASS))
    }

    /// Opens `path` (empty: no file), loading its snapshot as `mode` says; records beyond the
    /// caps are evicted while loading, the oldest first.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<CacheDbm> {
        let opened = Backing::open(path.as_ref(), mode, CLASS)?;
        let dbm = Self::with_backing(params, opened.backing)?;
        if let Some(bytes) = opened.snapshot {
            backing::load(&bytes, |key, value| {
                let hash = hash_key(key);
                let mut slot = dbm.slot(hash).lock();
                let found = slot.table.find(key, hash);
                match slot.store(key, value, hash, found) {
                    // A record too large for a smaller cap than it was saved with is dropped.
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

    fn with_backing(params: &Params, backing: Backing) -> Result<CacheDbm> {
        params.check_known("cache", PARAMS)?;
        let cap_rec_num = params
            .get_u64("cap_rec_num")?
            .ok_or_else(|| Error::invalid("cache needs cap_rec_num (the maximum number of records)"))?;
        let cap_mem_bytes = params.get_u64("cap_mem_bytes")?;
        let num_slots = params.get_u64("num_slots")?.map_or(Ok(DEFAULT_NUM_SLOTS), |n| {
            usize::try_from(n)
                .ok()
                .filter(|n| (1..=1 << 16).contains(n))
                .ok_or_else(|| Error::invalid("num_slots must be 1..=65536"))
        })?;
        Self::build(cap_rec_num, cap_mem_bytes, num_slots, backing)
    }

    /// A cache with no file and an explicit slot count (tests use 1 to compare with a plain
    /// LRU). The slot count is lowered to `cap_rec_num` if that is smaller.
    pub fn with_slots(cap_rec_num: u64, cap_mem_bytes: Option<u64>, num_slots: usize) -> Result<CacheDbm> {
        Self::build(cap_rec_num, cap_mem_bytes, num_slots, Backing::in_memory(CLASS))
    }

    fn build(cap_rec_num: u64, cap_mem_bytes: Option<u64>, num_slots: usize, backing: Backing) -> Result<CacheDbm> {
        if cap_rec_num == 0 {
            return Err(Error::invalid("cap_rec_num must be at least 1"));
        }
        let num_slots = num_slots.clamp(1, usize::try_from(cap_rec_num).unwrap_or(usize::MAX));
        let mut slots = Vec::with_capacity(num_slots);
        for index in 0..num_slots {
            let cap_records = share(cap_rec_num, num_slots, index);
            // Buckets: one per record of the cap (load factor <= 1). Slab and LRU links are
            // reserved for the cap, up to a bound that keeps a huge cap from asking for more
            // address space than the machine will grant.
            let reserve = cap_records.min(MAX_RESERVED_RECORDS);
            let table = SlotTable::new(cap_records, reserve);
            let cap_bytes = cap_mem_bytes.map_or(usize::MAX, |cap| share(cap, num_slots, index));
            let fixed = table.num_buckets() * BUCKET_BYTES;
            if fixed >= cap_bytes {
                return Err(Error::invalid(format!(
                    "cap_mem_bytes is too small: the bucket arrays for cap_rec_num={cap_rec_num} alone take about {} bytes",
                    fixed.saturating_mul(num_slots)
                )));
            }
            slots.push(Padded(Mutex::new(Slot {
                table,
                lru: LruList::with_capacity(reserve),
                cap_records,
                cap_bytes,
                evictions: 0,
            })));
        }
        Ok(CacheDbm { slots: slots.into_boxed_slice(), cap_rec_num, cap_mem_bytes, backing })
    }

    #[inline]
    fn slot(&self, hash: u64) -> &Mutex<Slot> {
        let slots = &self.slots;
        &slots.get(slot_of(hash, slots.len())).expect("slot_of stays below the slot count").0
    }

    fn save(&self) -> Result<()> {
        // Oldest first, so that loading the file back rebuilds the same recency order.
        self.backing.save(|writer| {
            for slot in self.slots.iter() {
                let slot = slot.lock();
                for index in slot.lru.oldest_first() {
                    if let Some(record) = slot.table.get(index) {
                        writer.record(record.key(), record.value())?;
                    }
                }
            }
            Ok(())
        })
    }

    /// The accounted bytes of one record of these sizes (slab entry, key, value, allocator
    /// overhead if it spills to the heap, LRU links).
    pub fn record_cost(key_len: usize, value_len: usize) -> usize {
        record_cost(key_len, value_len).saturating_add(LINK_BYTES)
    }

    /// Accounted bytes over all slots; never above `cap_mem_bytes`.
    pub fn mem_usage(&self) -> u64 {
        self.slots.iter().map(|s| s.lock().mem_usage() as u64).sum()
    }

    /// Records evicted so far.
    pub fn evictions(&self) -> u64 {
        self.slots.iter().map(|s| s.lock().evictions).sum()
    }

    pub fn num_slots(&self) -> usize {
        self.slots.len()
    }

    /// The keys of one slot from the least to the most recently used (for tests and tools).
    pub fn slot_keys_oldest_first(&self, slot: usize) -> Vec<Vec<u8>> {
        let Some(slot) = self.slots.get(slot) else { return Vec::new() };
        let slot = slot.lock();
        slot.lru.oldest_first().filter_map(|i| slot.table.get(i).map(|r| r.key().to_vec())).collect()
    }
}

impl Dbm for CacheDbm {
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        self.backing.check_open()?;
        let hash = hash_key(key);
        let mut slot = self.slot(hash).lock();
        let found = slot.table.find(key, hash);
        let action = processor(found.and_then(|i| slot.table.get(i)).map(RecordBytes::value));
        match (action, found) {
            (Action::Keep, Some(index)) => {
                slot.lru.touch(index);
                Ok(())
            }
            (Action::Keep, None) | (Action::Remove, None) => Ok(()),
            (_, _) if !self.backing.is_writable() => Err(Error::infeasible("the database is opened read-only")),
            (Action::Set(value), found) => slot.store(key, &value, hash, found),
            (Action::Remove, Some(index)) => {
                slot.remove(index);
                Ok(())
            }
        }
    }

    /// A hit refreshes the record's recency, as every read of a cache does.
    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        let hash = hash_key(key);
        let mut slot = self.slot(hash).lock();
        let found = slot.table.find(key, hash);
        if let Some(index) = found {
            slot.lru.touch(index);
        }
        visit(found.and_then(|index| slot.table.get(index)).map(RecordBytes::value));
        Ok(())
    }

    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        self.backing.check_writable()?;
        let hash = hash_key(key);
        let mut slot = self.slot(hash).lock();
        let found = slot.table.find(key, hash);
        if let (Some(index), false) = (found, overwrite) {
            slot.lru.touch(index);
            return Err(Error::new(ErrorKind::Duplicate, "a record exists for the key"));
        }
        slot.store(key, value, hash, found)
    }

    fn count(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.slots.iter().map(|s| s.lock().table.len() as u64).sum())
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
        self.backing.check_open()?;
        self.save()
    }

    fn rebuild(&self, params: &Params) -> Result<()> {
        // The caps fix the layout; there is nothing to compact.
        self.backing.check_writable()?;
        params.check_known("cache", &[])
    }

    fn should_be_rebuilt(&self) -> Result<bool> {
        self.backing.check_open()?;
        Ok(false)
    }

    fn file_size(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.mem_usage())
    }

    fn inspect(&self) -> Result<Properties> {
        let count = self.count()?;
        let mem_usage = self.mem_usage();
        let mut properties = vec![
            ("class".to_string(), "CacheDbm".to_string()),
            ("count".to_string(), count.to_string()),
            ("file_size".to_string(), mem_usage.to_string()),
            ("healthy".to_string(), "true".to_string()),
            ("mem_usage".to_string(), mem_usage.to_string()),
            ("evictions".to_string(), self.evictions().to_string()),
            ("cap_rec_num".to_string(), self.cap_rec_num.to_string()),
            ("cap_mem_bytes".to_string(), self.cap_mem_bytes.map_or("unlimited".to_string(), |c| c.to_string())),
            ("num_slots".to_string(), self.slots.len().to_string()),
        ];
        if let Some(path) = self.backing.path() {
            properties.push(("path".to_string(), path.display().to_string()));
        }
        Ok(properties)
    }

    fn is_writable(&self) -> bool {
        self.backing.is_writable()
    }

    fn close(&self) -> Result<()> {
        self.backing.close(|| self.save())
    }
}

impl Drop for CacheDbm {
    fn drop(&mut self) {
        self.backing.save_if_open(|| self.save());
    }
}

impl Slotted for CacheDbm {
    fn backing(&self) -> &Backing {
        &self.backing
    }

    fn num_slots(&self) -> usize {
        self.slots.len()
    }

    fn slot_keys(&self, slot: usize, from: Option<&[u8]>, keys: &mut KeySnapshot) -> bool {
        keys.reset(0);
        let Some(slot) = self.slots.get(slot) else { return false };
        let slot = slot.lock();
        let start = match from {
            None => 0,
            Some(key) => match slot.table.find(key, hash_key(key)) {
                Some(index) => index,
                None => return false,
            },
        };
        keys.reset(slot.table.len());
        for (index, record) in slot.table.records_from(start) {
            keys.push(record.key(), index);
        }
        true
    }

    /// Reads without touching the LRU list: a scan must not make every record recent.
    fn peek<R>(&self, slot: usize, key: &[u8], hint: u32, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let slot = self.slots.get(slot)?.lock();
        let table = &slot.table;
        let at_hint = table.get(hint).filter(|record| record.key() == key);
        let record = at_hint.or_else(|| table.find(key, hash_key(key)).and_then(|index| table.get(index)))?;
        Some(read(record.value()))
    }
}
