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
//! Which records a full slot keeps is the `policy` parameter: `lru` (the default) always
//! stores a new record and evicts the least recently used ones; `tinylfu` keeps a frequency
//! sketch per slot (`sketch.rs`), splits the slot's recency order into a probation and a
//! protected segment (`Admission`), and stores a new key that would evict only if it has been
//! requested more often lately than the record that would go (TinyLFU admission);
//! `noevict` evicts nothing: a write that would pass a cap is refused with a Limit error
//! (memcached's `-M`, which `kura serve -M` asks for).
//!
//! Accounted memory of a slot = its bucket array (as grown so far) + its frequency sketch (tinylfu only) + for
//! each record `record_cost` (slab entry, key, value, allocator overhead if spilled) + the LRU
//! links (twice under tinylfu: the protected list has its own). See docs/memory.md.

use std::path::Path;

use crate::sync::{Mutex, MutexGuard};

use super::backing::{self, Backing};
use super::chained_table::{record_cost, SlotTable, BUCKET_BYTES};
use super::key_hash::{hash_key, slot_of};
use super::lru::{LruList, LINK_BYTES};
use super::record::RecordBytes;
use super::sketch::FrequencySketch;
use super::slot_group::SlotGroup;
use super::slotted::{share, Padded, SlotCount, SlotRecords, Slotted, SlottedCursor};
use super::snapshot::{self, Snapshot};
use crate::dbm::OpenMode;
use crate::dbm::{Action, Cursor, Dbm, Params, Processor};
use crate::engine::Mark;
use crate::error::{Error, ErrorKind, Result};
use crate::multi_get::{groups, MAX_LOCKS};
use crate::stats::{Caps, Stat, Stats};

/// Keys a batched lookup takes together: half of `multi_get::GROUP`, because a CacheDbm
/// batch holds the mutexes of its keys' slots for the whole group (a hit moves its record in
/// the slot's recency list), and on 2 threads 32 keys a group ran 10% slower than 16.
const SLOT_GROUP: usize = 16;

/// The most records a slot reserves room for at creation (128 MiB of slab).
const MAX_RESERVED_RECORDS: usize = 1 << 22;

const CLASS: u8 = b'c';
const PARAMS: &[&str] = &["cap_rec_num", "cap_mem_bytes", "num_slots", "policy"];

/// Which records a full slot keeps (the `policy` parameter).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    /// Every write is stored; the least recently used records make room.
    Lru,
    /// A new key that would make room is stored only if the frequency sketch says it is more
    /// popular than the record that would be evicted (see `Admission` for which one that is).
    TinyLfu,
    /// Nothing is evicted: a write that would pass a cap is refused (a Limit error).
    NoEvict,
}

impl Policy {
    fn parse(name: Option<&str>) -> Result<Policy> {
        match name.map(str::to_ascii_lowercase).as_deref() {
            None | Some("lru") => Ok(Policy::Lru),
            Some("tinylfu") => Ok(Policy::TinyLfu),
            Some("noevict") => Ok(Policy::NoEvict),
            Some(_) => Err(Error::invalid(format!(
                "cache policy {:?} is unknown (known: lru, the default; tinylfu; noevict)",
                name.unwrap_or_default()
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::TinyLfu => "tinylfu",
            Policy::NoEvict => "noevict",
        }
    }
}

/// The TinyLFU state of one slot (`policy=tinylfu`).
///
/// The slot's records are split as in Caffeine's W-TinyLFU main space (segmented LRU): new
/// records enter the probation segment (the slot's `lru` list); a request that hits a
/// probation record promotes it to the protected segment, which holds at most
/// `PROTECTED_SHARE` of the slot's records (its least recently used ones go back to
/// probation). The eviction victim is probation's least recently used record (protected's
/// if probation is empty): a record requested once since it got in goes before one requested
/// again, which brings the victim's popularity close to the least in the slot. Compared with
/// admission against one LRU list's victim, under Zipf keys (kura-cache-bench, s = 0.99) it
/// lifts the hit ratio from 0.803 to 0.808 (with exact counts instead of the sketch: 0.807 to
/// 0.810; evicting the least frequent record of the slot would give 0.811), which is what
/// puts it ahead of quick_cache (0.806) rather than behind or level with it.
struct Admission {
    sketch: FrequencySketch,
    /// Invariant: holds exactly the live records of the slot not in its `lru` list.
    protected: LruList,
    /// Records in `protected`.
    protected_len: usize,
}

/// Numerator and denominator of the largest share of a slot's records the protected segment
/// keeps after a promotion (Caffeine's 80%).
const PROTECTED_SHARE: (usize, usize) = (4, 5);

/// One shard. Invariants, kept by `store` and `evict_to_caps` whenever the mutex is released:
/// `table.len() <= cap_records` and `mem_usage() <= cap_bytes` (`mem_usage` includes the
/// sketch, whose size is fixed at creation and within `cap_bytes` by the check in `build`);
/// the LRU list (under tinylfu: the LRU list and the protected list) holds exactly the live
/// records of `table`, each once. `offer` keeps them too: a record it does not admit is not
/// stored, and the table and lists stay as they were.
struct Slot {
    table: SlotTable,
    /// Under `policy=lru`, all the records; under tinylfu, the probation segment.
    lru: LruList,
    /// Some under `policy=tinylfu`.
    admission: Option<Admission>,
    cap_records: usize,
    cap_bytes: usize,
    /// `policy=noevict`: a user's write that would pass a cap is refused instead of evicting.
    no_evict: bool,
    evictions: u64,
    /// New keys not stored because admission preferred the record they would have evicted.
    rejections: u64,
}

impl Slot {
    /// Accounted bytes that do not depend on the records: bucket array and sketch.
    fn fixed_bytes(&self) -> usize {
        self.table.num_buckets() * BUCKET_BYTES + self.admission.as_ref().map_or(0, |a| a.sketch.bytes())
    }

    /// Accounted bytes of one record: `CacheDbm::record_cost`, plus the links of the
    /// protected list under tinylfu (indexed by slab entry like the LRU list's).
    fn record_cost(&self, key_len: usize, value_len: usize) -> usize {
        let protected_links = if self.admission.is_some() { LINK_BYTES } else { 0 };
        CacheDbm::record_cost(key_len, value_len).saturating_add(protected_links)
    }

    fn mem_usage(&self) -> usize {
        let links = if self.admission.is_some() { 2 * LINK_BYTES } else { LINK_BYTES };
        self.fixed_bytes() + self.table.record_bytes() + self.table.len() * links
    }

    /// Counts a request of the key of `hash` for admission (tinylfu only): every `get`,
    /// `process` and `set`, hit or miss.
    #[inline]
    fn record_access(&mut self, hash: u64) {
        if let Some(admission) = &mut self.admission {
            admission.sketch.record(hash);
        }
    }

    /// Marks the live record at `index` as just requested. Under tinylfu a probation record
    /// moves to the protected segment, which then gives its oldest records back to probation
    /// while it holds more than `PROTECTED_SHARE` of the slot's records.
    fn touch(&mut self, index: u32) {
        let Some(admission) = &mut self.admission else {
            self.lru.touch(index);
            return;
        };
        if admission.protected.contains(index) {
            admission.protected.touch(index);
            return;
        }
        self.lru.unlink(index);
        admission.protected.push_newest(index);
        admission.protected_len += 1;
        let (numerator, denominator) = PROTECTED_SHARE;
        while admission.protected_len * denominator > self.table.len() * numerator {
            let Some(oldest) = admission.protected.oldest() else { break };
            admission.protected.unlink(oldest);
            admission.protected_len -= 1;
            self.lru.push_newest(oldest);
        }
    }

    /// The record to evict next other than `keep`: the least recently used (under tinylfu,
    /// of probation, or of protected if probation holds nothing else).
    fn victim(&self, keep: Option<u32>) -> Option<u32> {
        let other = |index: &u32| Some(*index) != keep;
        let protected = || self.admission.as_ref().and_then(|a| a.protected.oldest()).filter(other);
        self.lru.oldest().filter(other).or_else(protected)
    }

    /// Takes the live record at `index` out of whichever list holds it.
    fn unlink(&mut self, index: u32) {
        match &mut self.admission {
            Some(admission) if admission.protected.contains(index) => {
                admission.protected.unlink(index);
                admission.protected_len -= 1;
            }
            _ => self.lru.unlink(index),
        }
    }

    /// Slab indices in eviction order (under tinylfu, probation then protected, each from
    /// the least to the most recently used).
    fn eviction_order(&self) -> impl Iterator<Item = u32> + '_ {
        self.lru.oldest_first().chain(self.admission.iter().flat_map(|a| a.protected.oldest_first()))
    }

    /// `fixed_bytes` once the bucket array has grown to the record cap: the most the slot's
    /// fixed part can reach.
    fn largest_fixed_bytes(&self) -> usize {
        self.table.max_buckets() * BUCKET_BYTES + self.admission.as_ref().map_or(0, |a| a.sketch.bytes())
    }

    /// A Limit error if a record of `cost` accounted bytes cannot fit even in the empty slot
    /// (with the bucket array at its largest, so that growing it later never leaves a record
    /// that alone overshoots the memory share).
    fn check_fits(&self, cost: usize) -> Result<()> {
        if self.largest_fixed_bytes().saturating_add(cost) > self.cap_bytes {
            return Err(Error::new(
                ErrorKind::Limit,
                format!(
                    "a record of {cost} accounted bytes exceeds the slot's memory share ({} bytes)",
                    self.cap_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Under `policy=noevict`, a Limit error unless a write of `cost` accounted bytes (a new
    /// record if `new`) fits beside the records already there without evicting. Counted as
    /// if the old value stayed until the new one is in (as memcached allocates the new item
    /// first, so a full memcached -M refuses updates too) and with the bucket array at its
    /// largest, so that no later growth of the array can push the slot over its cap.
    fn check_room(&self, cost: usize, new: bool) -> Result<()> {
        let links = if self.admission.is_some() { 2 * LINK_BYTES } else { LINK_BYTES };
        let records = self.table.len() + usize::from(new);
        let bytes = self
            .largest_fixed_bytes()
            .saturating_add(self.table.record_bytes())
            .saturating_add(records.saturating_mul(links))
            .saturating_add(cost);
        if records > self.cap_records || bytes > self.cap_bytes {
            return Err(Error::new(ErrorKind::Limit, "the cache is full and evicts nothing (policy=noevict)"));
        }
        Ok(())
    }

    /// Whether a new key of `hash` whose record costs `cost` bytes goes in: always unless
    /// the policy is tinylfu and storing it would evict; then only if the sketch says the key
    /// was requested more often lately than the record that would be evicted first.
    fn admits(&self, hash: u64, cost: usize) -> bool {
        let Some(admission) = &self.admission else { return true };
        let would_evict =
            self.table.len() >= self.cap_records || self.mem_usage().saturating_add(cost) > self.cap_bytes;
        if !would_evict {
            return true;
        }
        match self.victim(None).and_then(|victim| self.table.get(victim)) {
            Some(victim) => admission.sketch.estimate(hash) > admission.sketch.estimate(hash_key(victim.key())),
            None => true,
        }
    }

    /// A write by a user: as `store`, except that under tinylfu a new key that loses the
    /// admission comparison is not stored (Ok, counted in `rejections`), as if it had been
    /// stored and evicted at once. Updates of present keys are always stored.
    fn offer(&mut self, key: &[u8], value: &[u8], hash: u64, found: Option<u32>) -> Result<()> {
        let cost = self.record_cost(key.len(), value.len());
        self.check_fits(cost)?;
        if self.no_evict {
            self.check_room(cost, found.is_none())?;
        }
        if found.is_none() && !self.admits(hash, cost) {
            self.rejections += 1;
            return Ok(());
        }
        self.write(key, value, hash, found)
    }

    /// Sets `key` to `value` (`found`: its current index), then evicts to the caps.
    fn store(&mut self, key: &[u8], value: &[u8], hash: u64, found: Option<u32>) -> Result<()> {
        self.check_fits(self.record_cost(key.len(), value.len()))?;
        self.write(key, value, hash, found)
    }

    /// `store` once the record is known to fit in the empty slot (`check_fits`).
    fn write(&mut self, key: &[u8], value: &[u8], hash: u64, found: Option<u32>) -> Result<()> {
        let index = match found {
            Some(index) => {
                self.table.set_value(index, value)?;
                self.touch(index);
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

    /// Evicts records in `victim` order until both caps hold. `keep` (the record just
    /// written) is never the victim: it fits alone by the check before `write`.
    fn evict_to_caps(&mut self, keep: u32) {
        while self.table.len() > self.cap_records || self.mem_usage() > self.cap_bytes {
            match self.victim(Some(keep)) {
                Some(victim) => {
                    self.unlink(victim);
                    self.table.remove(victim);
                    self.evictions += 1;
                }
                None => break,
            }
        }
        debug_assert!(
            self.table.len() <= self.cap_records && self.mem_usage() <= self.cap_bytes,
            "invariant: a slot is within its caps whenever its mutex is released"
        );
    }

    fn remove(&mut self, index: u32) -> bool {
        if self.table.get(index).is_some() {
            self.unlink(index);
            self.table.remove(index);
            true
        } else {
            false
        }
    }

    fn clear(&mut self) {
        self.table.clear();
        self.lru.clear();
        if let Some(admission) = &mut self.admission {
            admission.sketch.clear();
            admission.protected.clear();
            admission.protected_len = 0;
        }
    }
}

/// The in-memory LRU cache (`.kumc`), bounded by a record cap and a memory cap.
pub struct CacheDbm {
    slots: Box<[Padded<Mutex<Slot>>]>,
    cap_rec_num: u64,
    cap_mem_bytes: Option<u64>,
    /// What `num_slots` was (a snapshot keeps a given count only).
    num_slots: SlotCount,
    policy: Policy,
    backing: Backing,
}

impl CacheDbm {
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
    /// `num_slots` (default 16, fewer under a `cap_mem_bytes` below 1 MiB:
    /// `SlotCount`), `policy` (default `lru`).
    ///
    /// `policy=lru`: every write is stored and a full slot evicts its least recently used
    /// records. `policy=tinylfu`: each slot also keeps a frequency sketch of the keys
    /// requested (every `get`, `process` and `set`, hit or miss), and a write of a NEW
    /// key that would evict is stored only if the sketch says that key was requested more
    /// often lately than the record that would be evicted first. That victim is the least
    /// recently used record among those not requested again since they got in (probation),
    /// else the least recently used of all. A write that loses is not stored, but still
    /// returns `Ok` (as a write followed at once by an eviction would): the cache-aside
    /// pattern (get, on a miss compute and set) needs no special case, and the key gets in
    /// once it is asked for often enough. Rejections are counted in `inspect` (`rejections`).
    /// Writes of keys already present are always stored. The sketch (about 12 bytes per
    /// record of the cap) and a second list of links (8 bytes per record) count in
    /// `mem_usage`, so within `cap_mem_bytes`. Any other policy name is an InvalidArgument
    /// error.
    pub fn new(params: &Params) -> Result<CacheDbm> {
        Self::with_backing(params, Backing::in_memory(CLASS))
    }

    /// Opens `path` (empty: no file), loading its snapshot as `mode` says; records beyond the
    /// caps are evicted while loading, the oldest first. The file keeps the parameters it was
    /// saved with (`saved_params`): they are the defaults of a reopen, so that one needs none,
    /// and any given here replace them.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<CacheDbm> {
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
                let found = slot.table.find(key, hash);
                // Loading bypasses admission: the file's order (oldest first) is the recency
                // to rebuild, and the sketch has seen no requests yet.
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
        let slot_count = SlotCount::from_params(params, cap_mem_bytes)?;
        let policy = Policy::parse(params.get("policy"))?;
        Self::build(cap_rec_num, cap_mem_bytes, slot_count, policy, backing)
    }

    /// A cache with no file and an explicit slot count (tests use 1 to compare with a plain
    /// LRU). The slot count is lowered to `cap_rec_num` if that is smaller.
    pub fn with_slots(cap_rec_num: u64, cap_mem_bytes: Option<u64>, num_slots: usize) -> Result<CacheDbm> {
        let slot_count = SlotCount { count: num_slots, given: true };
        Self::build(cap_rec_num, cap_mem_bytes, slot_count, Policy::Lru, Backing::in_memory(CLASS))
    }

    fn build(
        cap_rec_num: u64,
        cap_mem_bytes: Option<u64>,
        slot_count: SlotCount,
        policy: Policy,
        backing: Backing,
    ) -> Result<CacheDbm> {
        if cap_rec_num == 0 {
            return Err(Error::invalid("cap_rec_num must be at least 1"));
        }
        let num_slots = slot_count.count.clamp(1, usize::try_from(cap_rec_num).unwrap_or(usize::MAX)).min(MAX_LOCKS);
        let mut slots = Vec::with_capacity(num_slots);
        for index in 0..num_slots {
            let cap_records = share(cap_rec_num, num_slots, index);
            // Buckets: growing up to one per record of the cap (load factor <= 1). Slab and LRU links are
            // reserved for the cap, up to a bound that keeps a huge cap from asking for more
            // address space than the machine will grant.
            let reserve = cap_records.min(MAX_RESERVED_RECORDS);
            let table = SlotTable::new(cap_records, reserve);
            let cap_bytes = cap_mem_bytes.map_or(usize::MAX, |cap| share(cap, num_slots, index));
            // The sketch counts the keys the slot can hold: its record cap, or fewer if the
            // memory share cannot hold that many of the smallest records.
            let admission = (policy == Policy::TinyLfu).then(|| Admission {
                sketch: FrequencySketch::new(cap_records.min(cap_bytes / Self::record_cost(0, 0))),
                protected: LruList::with_capacity(reserve),
                protected_len: 0,
            });
            let fixed = table.max_buckets() * BUCKET_BYTES + admission.as_ref().map_or(0, |a| a.sketch.bytes());
            if fixed >= cap_bytes {
                return Err(Error::invalid(format!(
                    "cap_mem_bytes is too small: the bucket arrays{} for cap_rec_num={cap_rec_num} alone take about {} bytes",
                    if admission.is_some() { " and frequency sketches" } else { "" },
                    fixed.saturating_mul(num_slots)
                )));
            }
            slots.push(Padded(Mutex::new(Slot {
                table,
                lru: LruList::with_capacity(reserve),
                admission,
                cap_records,
                cap_bytes,
                no_evict: policy == Policy::NoEvict,
                evictions: 0,
                rejections: 0,
            })));
        }
        Ok(CacheDbm {
            slots: slots.into_boxed_slice(),
            cap_rec_num,
            cap_mem_bytes,
            num_slots: slot_count,
            policy,
            backing,
        })
    }

    #[inline]
    fn slot(&self, hash: u64) -> &Mutex<Slot> {
        let slots = &self.slots;
        &slots.get(slot_of(hash, slots.len())).expect("slot_of stays below the slot count").0
    }

    /// The parameters a snapshot keeps, as `Params::parse` reads them: the caps, the slot
    /// count if it was given, and the policy.
    fn saved_params(&self) -> String {
        let memory_cap = self.cap_mem_bytes.map(|cap| format!(",cap_mem_bytes={cap}")).unwrap_or_default();
        let slots = self.num_slots.saved(self.slots.len());
        let (records, policy) = (self.cap_rec_num, self.policy.name());
        format!("cap_rec_num={records}{memory_cap}{slots},policy={policy}")
    }

    fn save(&self) -> Result<()> {
        // Oldest first, so that loading the file back rebuilds the same recency order (under
        // tinylfu every loaded record starts in probation, in that order).
        self.backing.save(&self.saved_params(), |writer| {
            for slot in self.slots.iter() {
                let slot = slot.lock();
                for index in slot.eviction_order() {
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

    /// New keys not stored so far because admission (`policy=tinylfu`) preferred the records
    /// they would have evicted; always 0 under `policy=lru`.
    pub fn rejections(&self) -> u64 {
        self.slots.iter().map(|s| s.lock().rejections).sum()
    }

    /// The `policy` parameter in effect: `lru` or `tinylfu`.
    pub fn policy(&self) -> &'static str {
        self.policy.name()
    }

    /// The number of independently locked slots.
    pub fn num_slots(&self) -> usize {
        self.slots.len()
    }

    /// The keys of one slot in eviction order, the next victim first: from the least to the
    /// most recently used (under tinylfu, probation's then protected's) (for tests and tools).
    pub fn slot_keys_oldest_first(&self, slot: usize) -> Vec<Vec<u8>> {
        let Some(slot) = self.slots.get(slot) else { return Vec::new() };
        let slot = slot.lock();
        slot.eviction_order().filter_map(|i| slot.table.get(i).map(|r| r.key().to_vec())).collect()
    }
}

impl Dbm for CacheDbm {
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        self.backing.check_open()?;
        let hash = hash_key(key);
        let mut slot = self.slot(hash).lock();
        slot.record_access(hash);
        let found = slot.table.find(key, hash);
        let action = processor(found.and_then(|i| slot.table.get(i)).map(RecordBytes::value));
        match (action, found) {
            (Action::Keep, Some(index)) => {
                slot.touch(index);
                Ok(())
            }
            (Action::Keep, None) | (Action::Remove, None) => Ok(()),
            (_, _) if !self.backing.is_writable() => Err(backing::read_only()),
            (Action::Set(value), found) => slot.offer(key, &value, hash, found),
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
        slot.record_access(hash);
        let found = slot.table.find(key, hash);
        if let Some(index) = found {
            slot.touch(index);
        }
        visit(found.and_then(|index| slot.table.get(index)).map(RecordBytes::value));
        Ok(())
    }

    /// The batched lookup of `slot_group.rs`: per group, each slot locked once, then the
    /// buckets prefetched, then the chain heads and their recency links, then the spilled
    /// records and the links `touch` rewrites, then the compares. Each hit refreshes its
    /// record's recency and every key counts as a request, as `get_with` does.
    ///
    /// A slot another thread holds is not waited for while the group holds others: its keys
    /// are looked up one by one after the group, holding nothing else. (Waiting for it with
    /// several slots locked made two batching threads take turns for whole groups, and the
    /// batch ran slower on 2 threads than single gets.)
    fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        let mut group = SlotGroup::default();
        let mut slots: Vec<Option<MutexGuard<'_, Slot>>> = Vec::with_capacity(SLOT_GROUP);
        let mut heads: Vec<Option<u32>> = Vec::with_capacity(SLOT_GROUP);
        let mut busy: Vec<usize> = Vec::with_capacity(SLOT_GROUP);
        for (first, chunk) in groups(keys, SLOT_GROUP) {
            group.plan(chunk, first, self.slots.len());
            slots.extend(group.slots().map(|slot| self.slots.get(slot).and_then(|slot| slot.try_lock())));
            for lookup in &group.lookups {
                if let Some(slot) = held(&slots, lookup.lock) {
                    slot.table.prefetch_bucket(lookup.hash);
                }
            }
            heads.clear();
            for lookup in &group.lookups {
                let slot = held(&slots, lookup.lock);
                let head = slot.and_then(|slot| slot.table.prefetch_chain_head(lookup.hash));
                if let (Some(slot), Some(head)) = (slot, head) {
                    slot.lru.prefetch(head);
                }
                heads.push(head);
            }
            for (lookup, head) in group.lookups.iter().zip(&heads) {
                if let (Some(slot), Some(head)) = (held(&slots, lookup.lock), *head) {
                    slot.table.prefetch_spilled(head, lookup.hash);
                    slot.lru.prefetch_neighbours(head);
                }
            }
            busy.clear();
            for (position, lookup) in group.lookups.iter().enumerate() {
                let Some(slot) = slots.get_mut(lookup.lock).and_then(Option::as_mut) else {
                    busy.push(position);
                    continue;
                };
                slot.record_access(lookup.hash);
                let found = slot.table.find(lookup.key, lookup.hash);
                if let Some(index) = found {
                    slot.touch(index);
                }
                visit(lookup.index, found.and_then(|index| slot.table.get(index)).map(RecordBytes::value));
            }
            slots.clear();
            for lookup in busy.iter().filter_map(|&position| group.lookups.get(position)) {
                self.get_with(lookup.key, &mut |value| visit(lookup.index, value))?;
            }
        }
        Ok(())
    }

    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        self.backing.check_writable()?;
        let hash = hash_key(key);
        let mut slot = self.slot(hash).lock();
        slot.record_access(hash);
        let found = slot.table.find(key, hash);
        if let (Some(index), false) = (found, overwrite) {
            slot.touch(index);
            return Err(Error::new(ErrorKind::Duplicate, "a record exists for the key"));
        }
        slot.offer(key, value, hash, found)
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
        self.backing.synchronize(|| self.save())
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

    fn inspect(&self) -> Result<Stats> {
        let count = self.count()?;
        let mem_usage = self.mem_usage();
        let own = [
            ("mem_usage", Stat::Number(mem_usage)),
            ("num_slots", Stat::Number(self.slots.len() as u64)),
            ("policy", Stat::Name(self.policy.name())),
            ("rejections", Stat::Number(self.rejections())),
        ];
        let mut stats = self.backing.stats("CacheDbm", count, mem_usage, own);
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

impl Drop for CacheDbm {
    fn drop(&mut self) {
        self.backing.save_if_open(|| self.save());
    }
}

impl Slotted for CacheDbm {
    type Table = SlotTable;

    fn backing(&self) -> &Backing {
        &self.backing
    }

    fn num_slots(&self) -> usize {
        self.slots.len()
    }

    /// Reads the table alone, not touching the LRU list: a scan must not make every record
    /// recent.
    fn read_slot<R>(&self, slot: usize, read: impl FnOnce(&SlotTable) -> R) -> Option<R> {
        Some(read(&self.slots.get(slot)?.lock().table))
    }
}

/// The slot at position `lock` of a batch group's slots, if this thread holds it.
fn held<'a>(slots: &'a [Option<MutexGuard<'_, Slot>>], lock: usize) -> Option<&'a Slot> {
    slots.get(lock).and_then(Option::as_deref)
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on a wrong index")]
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// A batch whose group needs a slot another thread holds does not wait for it while it
    /// holds the group's other slots: the other keys are shown while that slot is still held,
    /// its own keys once it is free, and every key gets its value.
    #[test]
    fn a_batch_shows_the_other_slots_keys_while_one_slot_is_held_elsewhere() {
        let db = CacheDbm::with_slots(10_000, None, 4).unwrap();
        let keys: Vec<Vec<u8>> = (0..SLOT_GROUP).map(|i| format!("key{i}").into_bytes()).collect();
        let value_of = |key: &[u8]| [key, b"!"].concat();
        for key in &keys {
            db.set(key, &value_of(key), true).unwrap();
        }
        let slot_of_key = |key: &[u8]| slot_of(hash_key(key), db.slots.len());
        let held_slot = slot_of_key(&keys[0]);
        let in_held: Vec<bool> = keys.iter().map(|key| slot_of_key(key) == held_slot).collect();
        assert!(in_held.contains(&false), "the keys spread over more than one slot");

        let (shown, arrivals) = mpsc::channel();
        let held = db.slots[held_slot].0.lock();
        std::thread::scope(|scope| {
            let batch = scope.spawn(|| {
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let mut values: Vec<Option<Vec<u8>>> = vec![None; refs.len()];
                db.get_many_with(&refs, &mut |index, value| {
                    values[index] = value.map(<[u8]>::to_vec);
                    shown.send(index).unwrap();
                })
                .unwrap();
                values
            });
            for _ in in_held.iter().filter(|&&held| !held) {
                let index =
                    arrivals.recv_timeout(Duration::from_secs(20)).expect("a free slot's key waited for the held one");
                assert!(!in_held[index], "key {index} of the held slot was shown while the slot was held");
            }
            drop(held);
            let values = batch.join().unwrap();
            for (key, value) in keys.iter().zip(values) {
                assert_eq!(value, Some(value_of(key)));
            }
        });
    }
}
