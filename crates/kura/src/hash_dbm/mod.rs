//! HashDbm: a file hash database in the style of Tkrzw's HashDBM.
//!
//! One file holds a header, a static array of buckets, an optional zstd dictionary and the
//! records, which are chained per bucket (newest first) and compressed one by one with the
//! database's codec. See docs/format.md for the bytes and docs/hash.md for the design.
//!
//! Locking: buckets are grouped into `STRIPES` stripes (bucket index modulo the stripe
//! count), each behind a reader-writer lock, so readers run in parallel and writers only
//! wait for writers of the same stripe. Operations on the whole file (rebuild, clear, close)
//! take every stripe lock; that is also what allows them to replace the storage.

mod buckets;
mod chain_lock;
mod check;
mod check_blocks;
#[cfg(test)]
mod check_tests;
mod coalesce;
mod cursor;
mod damaged_owner;
mod freed;
mod get_many;
pub(crate) mod header;
mod header_copies;
mod header_salvage;
mod journaled;
#[cfg(test)]
mod layout_tests;
mod options;
mod prefetch;
pub(crate) mod record;
mod restore;
#[cfg(test)]
mod restore_tests;
#[cfg(test)]
mod reuse_tests;
#[cfg(test)]
mod salvage_tests;
mod space;
pub(crate) mod storage;

use std::cell::UnsafeCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

pub use header::{RecordCheck, UpdateMode};
pub(crate) use options::HashOptions;
pub use options::{DEFAULT_MAX_FILE_SIZE, DEFAULT_NUM_BUCKETS};
pub use record::MAX_KEY_SIZE;

use crate::batch::WriteBatch;
use crate::codec::{CodecKind, DictionaryTraining};
use crate::dbm::OpenMode;
use crate::dbm::{Action, Cursor, Dbm, Params, Processor};
use crate::engine::{Mark, RestoreReport};
use crate::error::{Error, ErrorKind, Result};
use crate::file::{open_regular_file, remove_if_exists, replace_file, sibling_path, FileLock, LockMode};
use crate::stats::{CodecStat, Stat, Stats};
use chain_lock::{Chain, ChainLock, ChainMut, WholeFile};
use cursor::HashCursor;
use journaled::HashJournal;
use prefetch::BucketPrefetcher;
use record::{KIND_RECORD, KIND_TOMBSTONE};
use storage::{
    bucket_of, hash_key, DamagedDictionary, Found, Layout, Storage, StoredValue, REBUILT_RECORDS_PER_BUCKET,
};

/// How far ahead of its walk a rebuild of a file larger than memory asks for the buckets'
/// first records (`HashDbm::for_each_live`): at the default two buckets a record, about 200
/// reads in flight, well past the 32 at which bench/peers' floors measure the disk serving
/// random reads 8x faster than one at a time.
const RECORD_READ_AHEAD_BUCKETS: u64 = 512;

/// How many buckets ahead a walk over every bucket loads a first record into the processor's
/// cache (`HashDbm::for_each_live`): enough misses in flight to hide a miss's latency behind
/// the walks of the buckets before it.
const RECORD_PREFETCH_BUCKETS: u64 = 16;

/// Buckets a cursor looks through for an occupied one under one stripe lock: a bounded
/// wait for the writers of that stripe (about 30 µs).
const CURSOR_SCAN_STEP: u64 = 1 << 15;
/// Number of lock stripes. Enough that two threads rarely meet on one; each is a word.
const STRIPES: usize = 1024;
const _: () = assert!(STRIPES <= crate::multi_get::MAX_LOCKS, "a batched lookup plans its stripes in a LockSet");
/// The fewest buckets a rebuild gives a file when not given `num_buckets`.
const MIN_REBUILD_BUCKETS: u64 = 1024;

/// The file hash database (`.kuh`): see the module documentation and docs/hash.md.
pub struct HashDbm {
    path: PathBuf,
    writable: bool,
    /// Mirrors the storage's bucket count so that a thread can pick its stripe before
    /// locking; re-checked under the lock, since a rebuild may change it.
    num_buckets: AtomicU64,
    stripes: Box<[RwLock<()>]>,
    /// The open file, `None` once closed. Invariant: replaced or taken only while every
    /// stripe lock is held exclusively; read only while at least one stripe lock is held.
    storage: UnsafeCell<Option<Storage>>,
    /// Serializes header writes (synchronize) against each other.
    header_lock: Mutex<()>,
    dict_size: usize,
    restored: AtomicBool,
    prefetcher: BucketPrefetcher,
    /// The write-ahead journal of a writer (journaled.rs); None when read-only, and while an
    /// open replays the journal a crash left.
    journal: Option<HashJournal>,
}

// SAFETY: the only field that is not Sync by itself is `storage`, whose access follows the
// stripe-lock invariant stated on it: shared access under any stripe lock, mutation under all.
unsafe impl Sync for HashDbm {}

impl std::fmt::Debug for HashDbm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashDbm").field("path", &self.path).field("writable", &self.writable).finish()
    }
}

/// The lock stripe that guards `bucket`'s chain.
fn stripe_of(bucket: u64) -> usize {
    bucket as usize % STRIPES
}

fn is_live(found: &Found) -> bool {
    found.header.kind() == KIND_RECORD
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_SIZE {
        return Err(Error::invalid(format!("the key has {} bytes, over the limit of {MAX_KEY_SIZE}", key.len())));
    }
    Ok(())
}

impl HashDbm {
    /// The parameters `open` takes (the registry lists them; anything else is an error).
    pub const PARAMS: &'static [&'static str] = options::PARAMS;

    /// The marks its files start with (the registry lists them; `kura.dbm.whichdb` asks).
    pub const MAGIC: &'static [Mark] = &[Mark::new(0, header::MAGIC)];

    /// Opens or creates a hash database. `params`: `record_comp`, `num_buckets`,
    /// `update_mode`, `max_file_size`, `dict_size` and `record_check` apply when the file is
    /// created (and at rebuild); on an existing file, a `record_comp`, `update_mode` or
    /// `record_check` that differs from the file's is an error rather than being ignored.
    ///
    /// A writer finding that the last writer did not close the file restores it first,
    /// salvaging every intact record into a new file that replaces the old one.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<HashDbm> {
        let path = path.as_ref();
        let options = HashOptions::from_params(params)?;
        let writable = mode.is_writable();
        let create = matches!(mode, OpenMode::Create | OpenMode::Truncate);
        let file = open_regular_file(path, writable, create)?;
        let lock = FileLock::acquire(&file, path, if writable { LockMode::Exclusive } else { LockMode::Shared })?;
        let empty = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len() == 0;
        let mut restored = false;
        let initialize = mode == OpenMode::Truncate || (create && empty);
        if initialize && writable {
            // A journal left beside a file being created anew belongs to what it replaces.
            remove_if_exists(&crate::journal::journal_path(path))?;
        }
        let mut storage = if initialize {
            Storage::initialize(file, lock, path, &Self::layout_for_new(&options, None))?
        } else {
            let storage = Storage::from_file(file, lock, path, writable, DamagedDictionary::Refuse)?;
            Self::check_options_match(&storage, &options)?;
            storage
        };
        if writable {
            remove_if_exists(&sibling_path(path, ".rebuild"))?;
            remove_if_exists(&sibling_path(path, ".restore"))?;
            let found = storage.copies.clone();
            if !initialize && !storage.header.closed_cleanly {
                storage = Self::restore_in_place(&mut storage, path)?;
                restored = true;
            }
            storage.mark_open()?;
            // A restore wrote a new file; what the open found of the old one's header stays said.
            if restored && found.is_damaged() {
                (storage.copies, storage.copies_repaired) = (found, true);
            }
        }
        let prefetcher = BucketPrefetcher::default();
        prefetcher.aim(storage.file_buckets_address(), storage.bucket_cache_address());
        let mut dbm = HashDbm {
            prefetcher,
            path: path.to_path_buf(),
            writable,
            num_buckets: AtomicU64::new(storage.header.num_buckets),
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            storage: UnsafeCell::new(Some(storage)),
            header_lock: Mutex::new(()),
            dict_size: options.dict_size(),
            restored: AtomicBool::new(restored),
            journal: None,
        };
        // A reader sees the file as it is: a journal beside it is a crashed writer's, replayed
        // by the next writer (as the file itself is restored by the next writer).
        if writable {
            dbm.start_journal(options.checkpoint_bytes())?;
        }
        Ok(dbm)
    }

    /// Creates a new database at `path`, replacing any file there.
    pub fn create(path: impl AsRef<Path>, params: &Params) -> Result<HashDbm> {
        HashDbm::open(path, OpenMode::Truncate, params)
    }

    fn check_options_match(storage: &Storage, options: &HashOptions) -> Result<()> {
        let path = storage.path().display();
        if let Some(codec) = options.record_comp.filter(|&c| c != storage.header.codec) {
            return Err(Error::invalid(format!(
                "{path} uses record_comp={}, not {codec}: rebuild it to change the codec",
                storage.header.codec
            )));
        }
        if let Some(mode) = options.update_mode.filter(|&m| m != storage.header.update_mode) {
            return Err(Error::invalid(format!(
                "{path} uses update_mode={}, not {}: rebuild it to change the mode",
                storage.header.update_mode.name(),
                mode.name()
            )));
        }
        if let Some(check) = options.record_check.filter(|&c| c != storage.header.record_check()) {
            return Err(Error::invalid(format!(
                "{path} uses record_check={}, not {}: rebuild it to change the record check",
                storage.header.record_check().name(),
                check.name()
            )));
        }
        Ok(())
    }

    /// The layout of a new file: from `options`, else from `previous` (rebuild), else defaults.
    fn layout_for_new(options: &HashOptions, previous: Option<&Storage>) -> Layout {
        let keep = |f: fn(&Storage) -> u64, default: u64| previous.map_or(default, f);
        Layout {
            codec: options.record_comp.or(previous.map(|p| p.header.codec)).unwrap_or(CodecKind::None),
            dictionary: Vec::new(),
            update_mode: options.update_mode.or(previous.map(|p| p.header.update_mode)).unwrap_or(UpdateMode::InPlace),
            num_buckets: options.num_buckets.unwrap_or_else(|| {
                keep(|p| p.count().div_ceil(REBUILT_RECORDS_PER_BUCKET).max(MIN_REBUILD_BUCKETS), DEFAULT_NUM_BUCKETS)
            }),
            max_file_size: options
                .max_file_size
                .unwrap_or_else(|| keep(|p| p.header.max_file_size, DEFAULT_MAX_FILE_SIZE)),
            record_check: options
                .record_check
                .or(previous.map(|p| p.header.record_check()))
                .unwrap_or(RecordCheck::Wide),
        }
    }

    /// Salvages a crashed file into a sibling, then moves it over the original.
    fn restore_in_place(crashed: &mut Storage, path: &Path) -> Result<Storage> {
        let target = sibling_path(path, ".restore");
        let mut fresh = Storage::create(&target, &crashed.layout())?;
        restore::salvage(crashed, &mut fresh, false, false)?;
        fresh.close()?;
        // As in rebuild: open (dirty) before it replaces the original.
        fresh.mark_open()?;
        replace_file(&target, path)?;
        fresh.renamed(path);
        Ok(fresh)
    }

    /// Copies every intact record of the (possibly crashed or damaged) database at `source`
    /// into a new database at `dest`, leaving `source` as it is. Returns the record count.
    pub fn restore_file(source: impl AsRef<Path>, dest: impl AsRef<Path>) -> Result<u64> {
        Self::salvage_file(source, dest).map(|report| report.records)
    }

    /// `restore_file`, saying also what could not be copied: records whose value failed its
    /// checksum, or compressed records when the stored dictionary failed its checksum (the
    /// copy then has no dictionary: plain zstd until its next rebuild trains one).
    ///
    /// The changes in the source's journal (a crashed writer's) are replayed over the copy:
    /// they are as much the database as its records are.
    pub fn salvage_file(source: impl AsRef<Path>, dest: impl AsRef<Path>) -> Result<RestoreReport> {
        let journal = crate::journal::recover(source.as_ref())?;
        let header_salvage::Opened { storage: mut source, notes, compressed_refused, cut_short } =
            header_salvage::open_for_salvage(source.as_ref())?;
        // The copy takes the wide check whatever the source had: its records are written anew.
        let mut fresh = Storage::create(dest.as_ref(), &Layout { record_check: RecordCheck::Wide, ..source.layout() })?;
        // A file closed cleanly holds no torn write: a record failing its check there is damage.
        let damaged = source.header.closed_cleanly || cut_short || !notes.is_empty();
        let salvage = restore::salvage(&mut source, &mut fresh, damaged, cut_short)?;
        let mut records = fresh.count();
        fresh.close()?;
        if !journal.is_empty() {
            let copy = HashDbm::open(dest.as_ref(), OpenMode::Write, &Params::new())?;
            copy.replay(&journal)?;
            records = copy.count()?;
            copy.close()?;
        }
        let mut dropped = notes;
        if compressed_refused {
            dropped.push("compressed records cannot be proven intact (see above): they were dropped".to_string());
        } else if source.dictionary_damaged() {
            dropped.push(format!(
                "the zstd dictionary ({} bytes) fails its checksum: compressed records cannot be proven intact",
                source.header.dictionary_len
            ));
        }
        if salvage.broken_chains > 0 {
            dropped.push(format!(
                "{} bucket chains were broken; the record area was scanned for intact records",
                salvage.broken_chains
            ));
        }
        if salvage.short_of_count > 0 {
            dropped.push(format!(
                "the bucket chains held {} records fewer than the file states; the record area was scanned for intact records",
                salvage.short_of_count
            ));
        }
        if salvage.dropped > 0 {
            dropped.push(format!("{} records whose value could not be proven intact", salvage.dropped));
        }
        if salvage.shadowed > 0 {
            dropped.push(format!(
                "{} records whose last intact version is older than a damaged record of their bucket, which may \
                 have been their newest value (an older value is never restored over a newer one)",
                salvage.shadowed
            ));
        }
        Ok(RestoreReport {
            records,
            dropped_records: salvage.dropped + salvage.shadowed,
            dropped,
            ..Default::default()
        })
    }

    /// The path the database was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A batch's operations one by one, each atomic on its own: the read-only handle's
    /// refusal, or a writer's batch before it has its journal.
    fn write_batch_op_by_op(&self, batch: &WriteBatch) -> Result<()> {
        self.check_writable()?;
        crate::dbm::write_op_by_op(self, batch)
    }

    /// Finds the live record of `key` under its stripe's shared lock and runs `read` on it
    /// while the lock is held; None when the key has no live record.
    #[inline]
    fn read_live<R>(
        &self,
        key: &[u8],
        read: impl FnOnce(&Storage, Chain<'_>, &Found, u64) -> Result<R>,
    ) -> Result<Option<R>> {
        let hash = hash_key(key);
        self.with_bucket(hash, false, |s, lock| {
            let chain = lock.read();
            match s.find(chain, key, hash)? {
                Some(found) if is_live(&found) => read(s, chain, &found, hash).map(Some),
                _ => Ok(None),
            }
        })
    }

    /// Runs `f` on the storage with bucket `hash`'s stripe locked (exclusively for writers),
    /// handing it the proof of that lock.
    fn with_bucket<R>(
        &self,
        hash: u64,
        exclusive: bool,
        f: impl FnOnce(&Storage, ChainLock<'_>) -> Result<R>,
    ) -> Result<R> {
        let mut f = Some(f);
        loop {
            let num_buckets = self.num_buckets.load(Ordering::Acquire);
            let bucket = bucket_of(hash, num_buckets);
            self.prefetcher.bucket(bucket, exclusive);
            // `f` runs at most once: only when the bucket count is still the one hashed with.
            let run = |s: &Storage, lock: ChainLock<'_>| match f.take() {
                Some(f) => f(s, lock),
                None => Err(Error::infeasible("operation already ran")),
            };
            if let Some(result) = self.with_bucket_index(bucket, num_buckets, exclusive, run) {
                return result;
            }
        }
    }

    /// Runs `f` with bucket `bucket`'s stripe locked, if the bucket count is still
    /// `num_buckets` once locked; None when a rebuild changed it (the caller retries).
    #[inline]
    fn with_bucket_index<R>(
        &self,
        bucket: u64,
        num_buckets: u64,
        exclusive: bool,
        f: impl FnOnce(&Storage, ChainLock<'_>) -> Result<R>,
    ) -> Option<Result<R>> {
        let stripe = self.stripes.get(stripe_of(bucket))?;
        let current = || self.num_buckets.load(Ordering::Acquire) == num_buckets;
        if exclusive {
            let guard = stripe.write();
            let lock = ChainLock::Exclusive(ChainMut::exclusive(&guard, bucket));
            current().then(|| self.storage_ref().and_then(|s| f(s, lock)))
        } else {
            let guard = stripe.read();
            let lock = ChainLock::Shared(Chain::shared(&guard, bucket));
            current().then(|| self.storage_ref().and_then(|s| f(s, lock)))
        }
    }

    /// The storage, while the caller holds a stripe lock.
    fn storage_ref(&self) -> Result<&Storage> {
        // SAFETY: callers hold a stripe lock (see `with_bucket_index`, `with_any`), and the
        // cell is only mutated under all stripe locks held exclusively.
        unsafe { (*self.storage.get()).as_ref() }.ok_or_else(|| Error::infeasible("the database is closed"))
    }

    /// Runs `f` on the storage under one stripe lock (for whole-database reads).
    fn with_any<R>(&self, f: impl FnOnce(&Storage) -> Result<R>) -> Result<R> {
        let stripe = self.stripes.first().ok_or_else(|| Error::infeasible("no lock stripes"))?;
        let _guard = stripe.read();
        self.storage_ref().and_then(f)
    }

    /// Runs `f` with every stripe locked exclusively: the whole database is the caller's.
    fn with_all<R>(&self, f: impl FnOnce(&mut Option<Storage>) -> Result<R>) -> Result<R> {
        let _guards: Vec<_> = self.stripes.iter().map(|s| s.write()).collect();
        // SAFETY: every stripe lock is held exclusively, so no other reference to the cell's
        // content exists (see the invariant on `storage`).
        let slot = unsafe { &mut *self.storage.get() };
        f(slot)
    }

    fn check_writable(&self) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::infeasible(format!("{} is open read-only", self.path.display())))
        }
    }

    /// Applies a write to `chain`: `value` Some stores it, None removes; `found` is the
    /// key's current first record in the chain, if any. Returns whether the records freed
    /// since the last hard synchronization are due one (`settle_if_due`).
    fn apply(
        &self,
        s: &Storage,
        chain: &ChainMut<'_>,
        key: &[u8],
        hash: u64,
        value: Option<&[u8]>,
        found: Option<Found>,
    ) -> Result<bool> {
        Self::apply_write(s, chain, key, hash, value, found)?;
        // Applied, then logged, under the key's stripe (journaled.rs says why in that order).
        let journal_due = match &self.journal {
            Some(journal) => journal.log(match value {
                Some(value) => crate::journal::Entry::Set { key, value },
                None => crate::journal::Entry::Remove { key },
            })?,
            None => false,
        };
        Ok(s.settle_due() || journal_due)
    }

    /// After a write that returned `due` from `apply`, with the stripe lock released: a
    /// checkpoint, so that the space of the records freed since the last one can be reused
    /// (hash_dbm/freed.rs) and the file does not grow without bound, and the journal starts over.
    fn settle_if_due(&self, due: bool) -> Result<()> {
        self.checkpoint_if_due(due)
    }

    fn apply_write(
        s: &Storage,
        chain: &ChainMut<'_>,
        key: &[u8],
        hash: u64,
        value: Option<&[u8]>,
        found: Option<Found>,
    ) -> Result<()> {
        let live = found.filter(is_live);
        let in_place = s.header.update_mode == UpdateMode::InPlace;
        let bucket = chain.bucket();
        match value {
            Some(value) => {
                if let Some(old) = live.filter(|_| in_place) {
                    // The new version takes the old one's place in the chain: one pointer
                    // write, in the one page of the pointer, replaces it, so that whichever
                    // pages a power loss keeps, the chain holds the old version or the new.
                    let new = s.write_record(chain, key, hash, Some(value), old.header.next)?;
                    if s.link_fits(old.link, new) {
                        s.set_link(chain, old.link, new)?;
                    } else {
                        // Too far for the pointer (the file grew past what it reaches since
                        // it was written, record::PointerReach): the new version goes to the
                        // head of the chain instead, then the old one is unlinked. Written
                        // again for that: its own pointer was sized for the old version's
                        // successor, one byte when the chain ended there, too narrow for the
                        // head. The first copy, linked nowhere, is freed as an unlinked
                        // record is.
                        let header = s.read_header(chain.read(), new)?;
                        s.free_record(chain, new, &header)?;
                        let head = s.head(chain.read())?;
                        let at_head = s.write_record(chain, key, hash, Some(value), head)?;
                        s.link_new_head(chain, at_head, hash)?;
                        s.set_link(chain, old.link, old.header.next)?;
                    }
                    s.free_record(chain, old.offset, &old.header)?;
                    return Ok(());
                }
                let head = s.head(chain.read())?;
                let new = s.write_record(chain, key, hash, Some(value), head)?;
                s.link_new_head(chain, new, hash)?;
                if live.is_none() {
                    s.add_count(bucket, 1);
                }
            }
            None => {
                let Some(old) = live else { return Ok(()) };
                if in_place {
                    s.set_link(chain, old.link, old.header.next)?;
                    s.free_record(chain, old.offset, &old.header)?;
                } else {
                    let head = s.head(chain.read())?;
                    let tombstone = s.write_record(chain, key, hash, None, head)?;
                    s.link_new_head(chain, tombstone, hash)?;
                }
                s.add_count(bucket, -1);
            }
        }
        Ok(())
    }

    /// The first bucket at or after `from` whose chain looks occupied, looking at most
    /// `CURSOR_SCAN_STEP` buckets ahead (the end of that window, or `num_buckets`, when none
    /// does); None when a rebuild changed the bucket count (the caller retries). A hint for
    /// cursors (`Storage::first_occupied_bucket`): one lock for many buckets.
    fn first_occupied_bucket(&self, from: u64, num_buckets: u64) -> Option<Result<u64>> {
        // The bucket count changes only under every stripe lock: holding one, it is stable.
        // The window's own stripe, so that cursors walking different parts of the file do not
        // all meet on one lock.
        let stripe = self.stripes.get(stripe_of(from))?;
        let _guard = stripe.read();
        if self.num_buckets.load(Ordering::Acquire) != num_buckets {
            return None;
        }
        let to = from.saturating_add(CURSOR_SCAN_STEP).min(num_buckets);
        Some(self.storage_ref().map(|s| s.first_occupied_bucket(from, to)))
    }

    /// Collects the live records of `chain` as (key, offset, header), newest version of
    /// each key only. Used by cursors and rebuild.
    fn live_keys(s: &Storage, chain: Chain<'_>) -> Result<Vec<(Vec<u8>, Found)>> {
        let mut keys: Vec<(Vec<u8>, Found)> = Vec::new();
        let mut shadowed: Vec<Vec<u8>> = Vec::new();
        let appending = s.header.update_mode == UpdateMode::Appending;
        s.walk(chain, |offset, header, link, key| {
            // In appending mode a chain holds old versions and tombstones behind the newest
            // one; in place, every key appears once.
            if appending && (keys.iter().any(|(k, _)| k == key) || shadowed.iter().any(|k| k == key)) {
                return Ok(true);
            }
            if header.kind() == KIND_TOMBSTONE {
                shadowed.push(key.to_vec());
            } else {
                keys.push((key.to_vec(), Found { offset, header: *header, link }));
            }
            Ok(true)
        })?;
        Ok(keys)
    }

    /// Shows `visit` every live record of `old` (whole: the caller holds every stripe lock)
    /// with its key's hash and its value as stored (checksum verified), bucket by bucket.
    ///
    /// Records lie in the file in the order they were written, so bucket order reads them at
    /// random. In a file larger than half the memory available, where most are on the disk
    /// only, the first record of the bucket `RECORD_READ_AHEAD_BUCKETS` ahead is asked for
    /// before each bucket is walked, so that the disk serves a few hundred reads at once
    /// instead of one fault after another (8M records, a 1.56 GB file under a 512 MiB memory
    /// limit: 826 s to rebuild before). In memory, the first record of the bucket
    /// `RECORD_PREFETCH_BUCKETS` ahead is loaded into the processor's cache the same way: each
    /// is a memory miss, a quarter of a rebuild's time when taken one after another.
    fn for_each_live(
        old: &Storage,
        whole_old: &WholeFile<'_>,
        mut visit: impl FnMut(&[u8], u64, StoredValue<'_>) -> Result<()>,
    ) -> Result<()> {
        let buckets = old.header.num_buckets;
        let read_ahead = crate::memory_budget::available_bytes().is_some_and(|memory| old.file_len() > memory / 2);
        if read_ahead {
            for bucket in 0..RECORD_READ_AHEAD_BUCKETS.min(buckets) {
                old.will_need_head(whole_old.chain(bucket));
            }
        }
        for bucket in 0..buckets {
            if read_ahead && bucket + RECORD_READ_AHEAD_BUCKETS < buckets {
                old.will_need_head(whole_old.chain(bucket + RECORD_READ_AHEAD_BUCKETS));
            }
            if bucket + RECORD_PREFETCH_BUCKETS < buckets {
                old.prefetch_first_record(whole_old.chain(bucket + RECORD_PREFETCH_BUCKETS));
            }
            let chain = whole_old.chain(bucket);
            for (key, found) in Self::live_keys(old, chain)? {
                let hash = hash_key(&key);
                let stored = old.checked_stored(chain, found.offset, &found.header, hash)?;
                visit(&key, hash, stored)?;
            }
        }
        Ok(())
    }

    /// Builds a compacted copy of `old` (whole: the caller holds every stripe lock) with
    /// `options` applied, at `path`'s ".rebuild" sibling, closed cleanly and synced, ready to
    /// be moved over `path`.
    ///
    /// Where the copy keeps the codec (and it takes no dictionary, which a rebuild trains
    /// anew), each value is copied as stored, with the check it gave: hashing it a second
    /// time was a tenth of a rebuild of values stored raw (`perf`: xxh3 over the values was
    /// a fifth, for the two hashes), and decoding and encoding compressed values again cost
    /// far more, for the same bytes.
    fn build_copy(&self, old: &Storage, whole_old: &WholeFile<'_>, options: &HashOptions) -> Result<Storage> {
        let mut layout = Self::layout_for_new(options, Some(old));
        let mut value = Vec::new();
        if layout.codec.uses_dictionary() {
            let mut training = DictionaryTraining::new(options.dict_size.unwrap_or(self.dict_size));
            Self::for_each_live(old, whole_old, |_, _, stored| {
                old.decode_stored(&stored, &mut value)?;
                training.add(&value);
                Ok(())
            })?;
            layout.dictionary = training.train()?;
        }
        let target = sibling_path(&self.path, ".rebuild");
        let mut fresh = Storage::create(&target, &layout)?;
        // About what the old file's records take: the copy's chain pointers are sized for it.
        let live = old.space.end().saturating_sub(old.header.data_start()).saturating_sub(old.space.free_bytes());
        fresh.start_copy(live);
        let (new, whole_new) = WholeFile::unshared(&mut fresh);
        let mut count = 0;
        Self::for_each_live(old, whole_old, |key, hash, stored| {
            let new_chain = whole_new.chain_mut(bucket_of(hash, new.header.num_buckets));
            let head = new.head(new_chain.read())?;
            let offset = if new.takes_as_stored(&stored) {
                new.write_stored_record(&new_chain, key, stored, head)?
            } else {
                old.decode_stored(&stored, &mut value)?;
                new.write_record(&new_chain, key, hash, Some(&value), head)?
            };
            new.link_new_head(&new_chain, offset, hash)?;
            count += 1;
            Ok(())
        })?;
        fresh.finish_copy(count);
        fresh.close()?;
        Ok(fresh)
    }
}

impl Dbm for HashDbm {
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        check_key(key)?;
        let hash = hash_key(key);
        // A writable handle locks the stripe exclusively, a read-only one shared: then only
        // `Action::Keep` can apply, and `lock.write()` refuses the rest.
        let due = self.with_bucket(hash, self.writable, |s, lock| {
            let found = s.find(lock.read(), key, hash)?;
            let live = found.filter(is_live);
            let mut old = Vec::new();
            if let Some(f) = &live {
                s.read_value(lock.read(), f.offset, &f.header, hash, &mut old)?;
            }
            match processor(live.map(|_| old.as_slice())) {
                Action::Keep => Ok(false),
                Action::Set(value) => {
                    self.check_writable()?;
                    self.apply(s, lock.write()?, key, hash, Some(&value), found)
                }
                Action::Remove => {
                    self.check_writable()?;
                    self.apply(s, lock.write()?, key, hash, None, found)
                }
            }
        })?;
        self.settle_if_due(due)
    }

    fn get(&self, key: &[u8]) -> Result<Vec<u8>> {
        // Decoded straight into the returned Vec: no intermediate buffer for compressed values.
        self.read_live(key, |s, chain, found, hash| {
            let mut value = Vec::new();
            s.read_value(chain, found.offset, &found.header, hash, &mut value)?;
            Ok(value)
        })?
        .ok_or_else(|| Error::not_found("no record for the key"))
    }

    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        let read = self.read_live(key, |s, chain, found, hash| {
            s.visit_value(chain, found.offset, &found.header, hash, |v| visit(Some(v)))
        })?;
        if read.is_none() {
            visit(None);
        }
        Ok(())
    }

    /// The pipelined lookup of `get_many.rs`: a group of keys overlaps its memory misses.
    fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        self.get_many_pipelined(keys, visit)
    }

    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        self.check_writable()?;
        check_key(key)?;
        let hash = hash_key(key);
        let due = self.with_bucket(hash, true, |s, lock| {
            let found = s.find(lock.read(), key, hash)?;
            if !overwrite && found.is_some_and(|f| is_live(&f)) {
                return Err(Error::new(ErrorKind::Duplicate, "a record exists for the key"));
            }
            self.apply(s, lock.write()?, key, hash, Some(value), found)
        })?;
        self.settle_if_due(due)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.check_writable()?;
        let hash = hash_key(key);
        let due = self.with_bucket(hash, true, |s, lock| {
            let found = s.find(lock.read(), key, hash)?;
            if !found.is_some_and(|f| is_live(&f)) {
                return Err(Error::not_found("no record for the key"));
            }
            self.apply(s, lock.write()?, key, hash, None, found)
        })?;
        self.settle_if_due(due)
    }

    fn count(&self) -> Result<u64> {
        self.with_any(|s| Ok(s.count()))
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(HashCursor::new(self)))
    }

    fn clear(&self) -> Result<()> {
        self.check_writable()?;
        self.with_all(|slot| {
            let storage = slot.as_mut().ok_or_else(|| Error::infeasible("the database is closed"))?;
            // No packed chain survives the clear; the header it writes says so.
            storage.forget_packing();
            let (s, whole) = WholeFile::unshared(storage);
            self.log_clear()?;
            s.clear(&whole)
        })
    }

    /// Hard: with the journal, one `fdatasync` of it (journaled.rs); soft: the header's
    /// counters written and the mapping's write-back started.
    fn synchronize(&self, hard: bool) -> Result<()> {
        if let (true, Some(journal)) = (hard, &self.journal) {
            return self.sync_journal(journal);
        }
        let _header = self.header_lock.lock();
        self.with_any(|s| s.synchronize(hard))
    }

    /// Atomic: see `write_batch_journaled`.
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        match &self.journal {
            Some(journal) => self.write_batch_journaled(journal, batch, false),
            None => self.write_batch_op_by_op(batch),
        }
    }

    /// Atomic, and durable at one `fdatasync` of the journal.
    fn write_batch_durable(&self, batch: &WriteBatch) -> Result<()> {
        match &self.journal {
            Some(journal) => self.write_batch_journaled(journal, batch, true),
            None => self.write_batch_op_by_op(batch).and_then(|()| self.synchronize(true)),
        }
    }

    fn rebuild(&self, params: &Params) -> Result<()> {
        self.check_writable()?;
        let options = HashOptions::from_params(params)?;
        self.with_all(|slot| {
            let storage = slot.as_mut().ok_or_else(|| Error::infeasible("the database is closed"))?;
            let (old, whole_old) = WholeFile::unshared(storage);
            let mut fresh = match self.build_copy(old, &whole_old, &options) {
                Ok(fresh) => fresh,
                Err(e) => {
                    // The original is untouched; only the partial copy goes.
                    let _ = remove_if_exists(&sibling_path(&self.path, ".rebuild"));
                    return Err(e);
                }
            };
            // Marked open before it takes the original's place: a writer killed at any moment
            // from here on leaves a file that the next writer restores, never a file that
            // claims a clean close while this handle still writes to it.
            fresh.mark_open()?;
            replace_file(fresh.path(), &self.path)?;
            fresh.renamed(&self.path);
            // The copy holds every change the journal held, durably.
            self.journal_restarted()?;
            self.num_buckets.store(fresh.header.num_buckets, Ordering::Release);
            self.prefetcher.aim(fresh.file_buckets_address(), fresh.bucket_cache_address());
            // Dropping the old storage unmaps it and closes its descriptor; its lock was on
            // the replaced file, and the new file is locked by `fresh` since its creation.
            *slot = Some(fresh);
            Ok(())
        })
    }

    fn should_be_rebuilt(&self) -> Result<bool> {
        self.with_any(|s| {
            let count = s.count();
            let data = s.space.end().saturating_sub(s.header.data_start());
            // The records a rebuild packed into its chains do not count: they are read as
            // fast as one a bucket would be (storage::REBUILT_RECORDS_PER_BUCKET).
            let overloaded = count.saturating_sub(s.header.rebuilt_records) > s.header.num_buckets.saturating_mul(2);
            let fragmented = s.space.free_bytes() > data / 2 && data > (1 << 20);
            let untrained = s.codec.awaits_dictionary() && count >= 64;
            Ok(overloaded || fragmented || untrained)
        })
    }

    fn file_size(&self) -> Result<u64> {
        self.with_any(|s| Ok(if s.is_writable() { s.space.end() } else { s.file_len() }))
    }

    /// Walks every chain (check.rs): more than the cursor, which stops at a broken chain.
    fn check(&self) -> Result<crate::check::CheckReport> {
        self.check_chains()
    }

    fn codec(&self) -> Result<Option<CodecKind>> {
        self.with_any(|s| Ok(Some(s.header.codec)))
    }

    fn inspect(&self) -> Result<Stats> {
        self.with_any(|s| {
            let h = &s.header;
            let file_size = if s.is_writable() { s.space.end() } else { s.file_len() };
            let mut stats = Stats::new("HashDbm", s.count(), file_size, s.healthy);
            stats.path = Some(self.path.clone());
            stats.codec = Some(CodecStat { param: "record_comp", kind: h.codec });
            stats.details = vec![
                ("update_mode", Stat::Name(h.update_mode.name())),
                ("num_buckets", Stat::Number(h.num_buckets)),
                // Records the last rebuild packed into its chains (0: never rebuilt).
                ("rebuilt_records", Stat::Number(h.rebuilt_records)),
                // The header's copies (2 from format version 4), and what the open found:
                // none, first (the header at 0 failed its check, the copy was used), copy,
                // differ; repaired when a writable open wrote both anew.
                ("header_copies", Stat::Number(if h.has_copy() { 2 } else { 1 })),
                ("header_damage", Stat::Name(s.copies.damage_name())),
                ("header_repaired", Stat::Flag(s.copies_repaired)),
                ("restored", Stat::Flag(self.restored.load(Ordering::Relaxed))),
                ("writable", Stat::Flag(self.writable)),
                ("free_blocks", Stat::Number(s.space.free_blocks() as u64)),
                ("free_bytes", Stat::Number(s.space.free_bytes())),
                ("dictionary_size", Stat::Number(s.codec.dictionary().len() as u64)),
                ("bucket_cache_bytes", Stat::Number(s.bucket_cache_size() as u64)),
                ("max_file_size", Stat::Number(h.max_file_size)),
                // As read at open: a version below 3 has no wide record checks until a rebuild.
                ("format_version", Stat::Number(u64::from(h.version))),
                // wide: 37 check bits in every record (version 5); narrow: 13, 37 in a record
                // crossing a sector (versions 3 and 4), 13 in every record (1 and 2).
                ("record_check", Stat::Name(h.record_check().name())),
                ("record_check_bits", Stat::Number(u64::from(h.check_layout().min_bits()))),
            ];
            if let Some(journal) = &self.journal {
                let (bytes, syncs) = journal.usage();
                // Fewer syncs than durable commits when threads' commits shared one.
                stats.details.extend([("journal_bytes", Stat::Number(bytes)), ("journal_syncs", Stat::Number(syncs))]);
            }
            Ok(stats)
        })
    }

    fn is_writable(&self) -> bool {
        self.writable
    }

    fn close(&self) -> Result<()> {
        self.with_all(|slot| match slot.take() {
            Some(mut s) => {
                self.sync_journal_before_close()?;
                s.close()?;
                // The file is durable and closed cleanly: its journal has nothing left to give.
                self.remove_journal()
            }
            None => Err(Error::infeasible("the database is already closed")),
        })
    }
}

impl Drop for HashDbm {
    fn drop(&mut self) {
        if let Some(mut s) = self.storage.get_mut().take() {
            // Errors cannot be reported from drop; call `close` to see them. A failed close
            // leaves the file marked as crashed, and the next writer restores it.
            if self.sync_journal_before_close().is_ok() && s.close().is_ok() {
                let _ = self.remove_journal();
            }
        }
    }
}
