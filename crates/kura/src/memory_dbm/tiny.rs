//! TinyDbm (`.kumt`): an in-memory hash database, sharded into slots by key hash, each slot an
//! `OpenTable` (records stored in the probed cells) behind its own reader-writer lock, so that
//! threads on different keys rarely meet. Optionally backed by a snapshot file (see
//! `backing.rs`).

use std::borrow::Cow;
use std::path::Path;

use parking_lot::{RwLock, RwLockReadGuard};

use super::backing::{self, Backing};
use super::key_hash::{hash_key, slot_of};
use super::open_table::OpenTable;
use super::record::RecordBytes;
use super::slot_group::{SlotGroup, SlotLookup};
use super::slotted::{Padded, SlotRecords, Slotted, SlottedCursor};
use super::snapshot;
use crate::dbm::OpenMode;
use crate::dbm::{Action, Cursor, Dbm, Params, Processor};
use crate::engine::Mark;
use crate::error::{Error, Result};
use crate::multi_get::{groups, try_each_in_turn, GROUP};
use crate::stats::{Stat, Stats};

/// Slots: enough that two threads rarely meet and that a table doubling (which holds one
/// slot's lock) stalls only 1/64 of the keys.
pub const NUM_SLOTS: usize = 64;
const _: () = assert!(NUM_SLOTS <= crate::multi_get::MAX_LOCKS, "a batched lookup plans its slots in a LockSet");
/// Initial cell count over all slots (1K cells, 32 KiB, per slot); each slot doubles its own
/// table when live records and tombstones would fill more than 3/4 of it. Small, because
/// fresh cells are written at creation (they are not zeroed pages) and doubling a slot's
/// table is cheap: it fits in the CPU's caches until it is large.
pub const DEFAULT_NUM_BUCKETS: u64 = 1 << 16;

const CLASS: u8 = b't';
const PARAMS: &[&str] = &["num_buckets"];

/// The in-memory hash database (`.kumt`): 64 independently locked open-addressing tables.
pub struct TinyDbm {
    slots: Box<[Padded<RwLock<OpenTable>>]>,
    backing: Backing,
}

impl TinyDbm {
    /// `kura restore`: copies every record of every intact block of the snapshot `source`
    /// into a new snapshot `dest` (docs/memory.md, "Salvage").
    pub fn salvage_file(source: &Path, dest: &Path) -> Result<crate::engine::RestoreReport> {
        super::backing::salvage_file(source, dest, CLASS)
    }

    /// The parameters `open` takes (the registry lists them; anything else is an error).
    pub const PARAMS: &'static [&'static str] = PARAMS;

    /// The marks its files start with (the registry lists them; `kura.dbm.whichdb` asks).
    pub const MAGIC: &'static [Mark] = &snapshot::magic(&CLASS);

    /// A database with no file. Parameters: `num_buckets` (initial cell count, over all slots).
    pub fn new(params: &Params) -> Result<TinyDbm> {
        Self::with_backing(params, Backing::in_memory(CLASS))
    }

    /// Opens `path` (empty: no file), loading its snapshot as `mode` says.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<TinyDbm> {
        let opened = Backing::open(path.as_ref(), mode, CLASS)?;
        let dbm = Self::with_backing(params, opened.backing)?;
        if let Some(bytes) = opened.snapshot {
            backing::load(&bytes, |key, value| dbm.store(key, value))?;
        }
        if opened.write_now {
            dbm.save()?;
        }
        Ok(dbm)
    }

    fn with_backing(params: &Params, backing: Backing) -> Result<TinyDbm> {
        params.check_known("tiny", PARAMS)?;
        let num_buckets = params.get_u64("num_buckets")?.unwrap_or(DEFAULT_NUM_BUCKETS);
        let per_slot = usize::try_from(num_buckets / NUM_SLOTS as u64).unwrap_or(usize::MAX);
        let slots = (0..NUM_SLOTS).map(|_| Padded(RwLock::new(OpenTable::new(per_slot)))).collect();
        Ok(TinyDbm { slots, backing })
    }

    #[inline]
    fn slot(&self, hash: u64) -> &RwLock<OpenTable> {
        let slots = &self.slots;
        &slots.get(slot_of(hash, slots.len())).expect("slot_of stays below the slot count").0
    }

    fn store(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let hash = hash_key(key);
        let mut table = self.slot(hash).write();
        match table.find(key, hash) {
            Some(index) => table.set_value(index, value),
            None => table.insert(RecordBytes::new(key, value)?, hash).map(|_| ()),
        }
    }

    fn save(&self) -> Result<()> {
        self.backing.save("", |writer| {
            for slot in self.slots.iter() {
                let table = slot.read();
                for (_, record) in table.records_from(0) {
                    writer.record(record.key(), record.value())?;
                }
            }
            Ok(())
        })
    }

    fn apply(table: &mut OpenTable, key: &[u8], hash: u64, found: Option<u32>, action: Action<'_>) -> Result<()> {
        match (action, found) {
            (Action::Keep, _) | (Action::Remove, None) => Ok(()),
            (Action::Set(value), Some(index)) => table.set_value(index, &value),
            (Action::Set(value), None) => table.insert(RecordBytes::new(key, &value)?, hash).map(|_| ()),
            (Action::Remove, Some(index)) => {
                table.remove(index);
                Ok(())
            }
        }
    }

    /// Estimated bytes in memory: the cells and the heap blocks of spilled records.
    fn memory_usage(&self) -> u64 {
        self.slots.iter().map(|slot| slot.read().memory_bytes() as u64).sum()
    }
}

impl Dbm for TinyDbm {
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        self.backing.check_open()?;
        let hash = hash_key(key);
        if !self.backing.is_writable() {
            let table = self.slot(hash).read();
            let found = table.find(key, hash);
            return match processor(found.and_then(|i| table.get(i)).map(RecordBytes::value)) {
                Action::Keep => Ok(()),
                _ => Err(backing::read_only()),
            };
        }
        let mut table = self.slot(hash).write();
        let found = table.find(key, hash);
        let action = processor(found.and_then(|i| table.get(i)).map(RecordBytes::value));
        Self::apply(&mut table, key, hash, found, action)
    }

    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        let hash = hash_key(key);
        let table = self.slot(hash).read();
        visit(table.find(key, hash).and_then(|i| table.get(i)).map(RecordBytes::value));
        Ok(())
    }

    /// The batched lookup of `slot_group.rs`: per group, each key's slot read-locked (tried
    /// key by key; when a writer is in the way, each slot once in order), the home cells
    /// prefetched, then the spilled records, then the compares.
    fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        let mut group = SlotGroup::default();
        let mut tables: Vec<RwLockReadGuard<'_, OpenTable>> = Vec::with_capacity(GROUP);
        for (first, chunk) in groups(keys, GROUP) {
            group.plan_per_key(chunk, first);
            let lookups = &group.lookups;
            let tried = try_each_in_turn(lookups.len(), &mut tables, |at| {
                lookups.get(at).and_then(|lookup| self.slot(lookup.hash).try_read())
            });
            if !tried {
                // A writer holds or awaits a slot (the tries left `tables` empty): each slot
                // once, in order, waiting.
                group.plan(chunk, first, self.slots.len());
                tables.extend(group.slots().filter_map(|slot| self.slots.get(slot)).map(|slot| slot.read()));
            }
            let table = |lookup: &SlotLookup<'_>| tables.get(lookup.lock);
            for lookup in &group.lookups {
                if let Some(table) = table(lookup) {
                    table.prefetch_home(lookup.hash);
                }
            }
            for lookup in &group.lookups {
                if let Some(table) = table(lookup) {
                    table.prefetch_home_record(lookup.hash);
                }
            }
            for lookup in &group.lookups {
                let value = table(lookup)
                    .and_then(|table| table.find(lookup.key, lookup.hash).and_then(|i| table.get(i)))
                    .map(RecordBytes::value);
                visit(lookup.index, value);
            }
            tables.clear();
        }
        Ok(())
    }

    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        self.backing.check_writable()?;
        let hash = hash_key(key);
        let mut table = self.slot(hash).write();
        match table.find(key, hash) {
            Some(_) if !overwrite => Err(Error::new(crate::error::ErrorKind::Duplicate, "a record exists for the key")),
            found => Self::apply(&mut table, key, hash, found, Action::Set(Cow::Borrowed(value))),
        }
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.backing.check_writable()?;
        let hash = hash_key(key);
        let mut table = self.slot(hash).write();
        let index = table.find(key, hash).ok_or_else(|| Error::not_found("no record for the key"))?;
        table.remove(index);
        Ok(())
    }

    fn count(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.slots.iter().map(|s| s.read().len() as u64).sum())
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        self.backing.check_open()?;
        Ok(Box::new(SlottedCursor::new(self)))
    }

    fn clear(&self) -> Result<()> {
        self.backing.check_writable()?;
        for slot in self.slots.iter() {
            slot.write().clear();
        }
        Ok(())
    }

    fn synchronize(&self, _hard: bool) -> Result<()> {
        self.backing.synchronize(|| self.save())
    }

    fn rebuild(&self, params: &Params) -> Result<()> {
        self.backing.check_writable()?;
        params.check_known("tiny", PARAMS)?;
        if let Some(num_buckets) = params.get_u64("num_buckets")? {
            let per_slot = usize::try_from(num_buckets / NUM_SLOTS as u64).unwrap_or(usize::MAX);
            for slot in self.slots.iter() {
                slot.write().resize(per_slot);
            }
        }
        Ok(())
    }

    fn should_be_rebuilt(&self) -> Result<bool> {
        self.backing.check_open()?;
        Ok(false)
    }

    fn file_size(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.memory_usage())
    }

    fn inspect(&self) -> Result<Stats> {
        let count = self.count()?;
        let num_buckets: usize = self.slots.iter().map(|s| s.read().num_cells()).sum();
        let own =
            [("num_slots", Stat::Number(self.slots.len() as u64)), ("num_buckets", Stat::Number(num_buckets as u64))];
        Ok(self.backing.stats("TinyDbm", count, self.memory_usage(), own))
    }

    fn is_writable(&self) -> bool {
        self.backing.is_writable()
    }

    fn close(&self) -> Result<()> {
        self.backing.close(|| self.save())
    }
}

impl Drop for TinyDbm {
    fn drop(&mut self) {
        self.backing.save_if_open(|| self.save());
    }
}

impl Slotted for TinyDbm {
    type Table = OpenTable;

    fn backing(&self) -> &Backing {
        &self.backing
    }

    fn num_slots(&self) -> usize {
        self.slots.len()
    }

    fn read_slot<R>(&self, slot: usize, read: impl FnOnce(&OpenTable) -> R) -> Option<R> {
        Some(read(&self.slots.get(slot)?.read()))
    }
}
