//! CompactDbm (`.kumz`): an in-memory map that keeps its records serialized and compressed in
//! a fixed number of buckets, so a large table takes a fraction of the memory of a hash map of
//! records (design and formats: docs/compact.md). A get decodes one bucket; a set re-encodes
//! one. Optionally backed by a snapshot file, like the other memory engines, whose life
//! (`memory_dbm/backing.rs`) and file (`memory_dbm/snapshot.rs`) it shares.
//!
//! Its parts: `options.rs` (parameters and defaults), `bucket.rs` (a bucket's records, sorted),
//! `block.rs` (a bucket encoded with the codec), `group.rs` (buckets behind one lock, with
//! their counters), `cache.rs` (a group's decoded buckets), `batch.rs` (`write_batch`: each
//! bucket encoded once per batch), `layout.rs` (rebuild and dictionary training),
//! `training.rs` (when a dictionary is trained, and what is known of it), `cursor.rs`,
//! `image.rs` (the snapshot's records).

mod arena;
mod batch;
mod block;
mod bucket;
mod cache;
mod cursor;
mod get_many;
mod group;
mod image;
mod layout;
mod options;
mod training;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::WriteBatch;
use crate::codec::{CodecKind, Effort};
use crate::dbm::{Action, Cursor, Dbm, OpenMode, Params, Processor};
use crate::engine::Mark;
use crate::error::Result;
use crate::memory_dbm::backing::{self, Backing};
use crate::memory_dbm::key_hash::{hash_key, slot_of};
use crate::memory_dbm::slotted::Padded;
use crate::memory_dbm::snapshot;
use crate::stats::{CodecStat, Stat, Stats};
use group::{with_scratch, Group, GroupCell, Scratch};
use layout::Layout;
use options::{Options, NUM_GROUPS};

pub use cursor::CompactCursor;
pub(crate) use options::{DEFAULT_BUCKET_RECORDS, DEFAULT_EXPECTED_RECORDS, MAX_KEY_LEN, MAX_VALUE_LEN};

/// The in-memory map of compressed buckets (`.kumz`): see docs/compact.md.
pub struct CompactDbm {
    groups: Box<[Padded<GroupCell>]>,
    /// The codec and bucket count the groups have (or are being moved to by a rebuild);
    /// held by rebuilds, dictionary training and snapshot saves, one at a time.
    layout: Mutex<Layout>,
    /// The fewest records at which a write asks whether the dictionary is due
    /// (`layout::train_when_due`): 0, or twice the records of a sample that made none.
    auto_training_from: AtomicU64,
    /// When single writes train the dictionary (`train_records`, `train_bytes`).
    auto_training: training::AutoTraining,
    backing: Backing,
}

impl CompactDbm {
    /// The parameters `open` takes (the registry lists them; anything else is an error).
    pub const PARAMS: &'static [&'static str] = options::PARAMS;

    /// The longest key it stores, in bytes.
    pub const MAX_KEY_LEN: usize = MAX_KEY_LEN;

    /// The longest value it stores, in bytes.
    pub const MAX_VALUE_LEN: usize = MAX_VALUE_LEN;

    /// The records a bucket holds on average when it is sized (`bucket_records`' default).
    pub const DEFAULT_BUCKET_RECORDS: u64 = DEFAULT_BUCKET_RECORDS;

    /// The records a new database is sized for when `expected_records` is not given.
    pub const DEFAULT_EXPECTED_RECORDS: u64 = DEFAULT_EXPECTED_RECORDS;

    /// The marks its files start with (the registry lists them; `kura.dbm.whichdb` asks).
    pub const MAGIC: &'static [Mark] = &snapshot::magic(&image::CLASS);

    /// A database with no file. Parameters: `bucket_comp` (none, lz4, zstd, zstd-dict, ...),
    /// `num_buckets` or `expected_records` and `bucket_records`, `cache_bytes`, `dict_size`,
    /// `train_records` and `train_bytes`.
    pub fn new(params: &Params) -> Result<CompactDbm> {
        Self::open(Path::new(""), OpenMode::Create, params)
    }

    /// `kura restore`: copies every intact bucket of the snapshot `source` into a new
    /// snapshot `dest` (docs/compact.md, "The snapshot file").
    pub fn salvage_file(source: &Path, dest: &Path) -> Result<crate::engine::RestoreReport> {
        image::salvage_file(source, dest)
    }

    /// Opens `path` (empty: no file), loading its snapshot as `mode` says. The codec and the
    /// bucket count given apply to a new database; an existing snapshot keeps its own (change
    /// them with `rebuild`). `cache_bytes`, `dict_size`, `train_records` and `train_bytes` always
    /// apply.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<CompactDbm> {
        let options = Options::parse(params)?;
        let opened = Backing::open(path.as_ref(), mode, image::CLASS)?;
        let (codec, buckets_per_group, groups, trained) = match &opened.snapshot {
            Some(bytes) => {
                let loaded = image::load(bytes)?;
                (loaded.codec, loaded.buckets_per_group, loaded.groups, loaded.trained)
            }
            None => {
                let codec = Arc::new(block::codec(options.codec.unwrap_or(options::DEFAULT_CODEC), Vec::new())?);
                let per_group = options
                    .buckets_per_group(options::DEFAULT_EXPECTED_RECORDS)
                    .unwrap_or_else(|| options::buckets_per_group_for(options::DEFAULT_EXPECTED_RECORDS));
                let groups = (0..NUM_GROUPS).map(|_| Group::new(Arc::clone(&codec), per_group)).collect();
                (codec, per_group, groups, None)
            }
        };
        let cache_bytes = options.cache_bytes.unwrap_or(options::DEFAULT_CACHE_BYTES);
        let per_group_cache = usize::try_from(cache_bytes / NUM_GROUPS as u64).unwrap_or(usize::MAX);
        let groups = groups.into_iter().map(|g| Padded(GroupCell::new(g, per_group_cache))).collect();
        let dictionary_size = options::dictionary_size(&options);
        let layout = Layout { codec, buckets_per_group, dictionary_size, cache_bytes, trained };
        let dbm = CompactDbm {
            groups,
            layout: Mutex::new(layout),
            auto_training_from: AtomicU64::new(0),
            auto_training: options.auto_training,
            backing: opened.backing,
        };
        if opened.write_now {
            dbm.save()?;
        }
        Ok(dbm)
    }

    #[inline]
    fn cell(&self, hash: u64) -> &GroupCell {
        &self.groups.get(slot_of(hash, self.groups.len())).expect("slot_of stays below the group count").0
    }

    fn save(&self) -> Result<()> {
        let layout = self.layout.lock();
        self.backing.save("", |writer| {
            let guards: Vec<_> = self.groups.iter().map(|g| g.lock.read()).collect();
            let count = guards.iter().map(|g| g.records).sum();
            image::write_meta(writer, &layout.codec, layout.buckets_per_group, layout.trained, count)?;
            let mut id = 0u64;
            for group in &guards {
                for block in group.blocks() {
                    if !block.is_empty() {
                        image::write_bucket(writer, id, block)?;
                    }
                    id += 1;
                }
            }
            // The layout again, last: a copy for `kura restore` when the first one's block is
            // damaged.
            image::write_meta(writer, &layout.codec, layout.buckets_per_group, layout.trained, count)
        })
    }

    /// The memory the map holds: the blocks, the bucket tables, the caches, the groups and
    /// the dictionary (docs/compact.md, "Memory accounting").
    pub fn memory_bytes(&self) -> u64 {
        let groups: u64 = self
            .groups
            .iter()
            .map(|cell| {
                let group = cell.lock.read();
                group.heap_bytes() + group.table_bytes() + cell.cache.lock().memory_bytes() as u64
            })
            .sum();
        let fixed = std::mem::size_of_val(&*self.groups) + std::mem::size_of::<CompactDbm>();
        let dictionary = self.layout.lock().codec.dictionary().len();
        groups + (block_heap(fixed) + block_heap(dictionary)) as u64
    }

    /// Sums of the groups' counters: (records, raw bytes, stored bytes).
    fn totals(&self) -> (u64, u64, u64) {
        self.groups.iter().fold((0, 0, 0), |(records, raw, stored), cell| {
            let group = cell.lock.read();
            (records + group.records, raw + group.raw_bytes, stored + group.stored_bytes)
        })
    }

    /// See `auto_training_from`.
    fn auto_training_from(&self) -> u64 {
        self.auto_training_from.load(Ordering::Relaxed)
    }

    /// Asks writes to check for a due dictionary again only from `records` records on.
    fn defer_auto_training(&self, records: u64) {
        self.auto_training_from.store(records, Ordering::Relaxed);
    }

    /// Whether `group`, just written, suggests the table is due a dictionary (`training.rs`):
    /// its codec awaits one and its share of the table has reached `AUTO_TRAIN`.
    fn may_train(&self, group: &Group) -> bool {
        group.codec.awaits_dictionary()
            && self.auto_training.is_due_in_group(group.records, group.raw_bytes, NUM_GROUPS as u64)
            && group.records.saturating_mul(NUM_GROUPS as u64) >= self.auto_training_from()
    }

    /// Runs the read-only path of `process`: the processor may only keep.
    fn process_read_only(&self, key: &[u8], hash: u64, processor: Processor<'_, '_>) -> Result<()> {
        let mut outcome = Ok(());
        self.cell(hash).get_with(key, hash, &mut |value| {
            if !matches!(processor(value), Action::Keep) {
                outcome = Err(backing::read_only());
            }
        })?;
        outcome
    }
}

fn block_heap(len: usize) -> usize {
    block::heap_size(len)
}

impl Dbm for CompactDbm {
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        self.backing.check_open()?;
        options::check_sizes(key, None)?;
        let hash = hash_key(key);
        if !self.backing.is_writable() {
            return self.process_read_only(key, hash, processor);
        }
        let cell = self.cell(hash);
        let mut group = cell.lock.write();
        let bucket = group.bucket_of(hash);
        let written = with_scratch(|scratch| {
            let Scratch { decoded, merged, frame, block: encoded } = scratch;
            let raw = block::decode(&group.codec, group.block(bucket)?, decoded)?;
            let old = bucket::find(raw, key)?;
            let delta = match processor(old) {
                Action::Keep => return Ok(false),
                Action::Remove if old.is_none() => return Ok(false),
                Action::Remove => bucket::merge(raw, &[(key, None)], merged)?,
                Action::Set(value) => {
                    options::check_sizes(key, Some(&value))?;
                    bucket::merge(raw, &[(key, Some(&value))], merged)?
                }
            };
            // One record changed: a level the waiting caller can afford (`codec/effort.rs`).
            block::encode(&group.codec, merged, Effort::Quick, frame, encoded)?;
            group.install(bucket, encoded, delta)?;
            cell.cache.lock().invalidate(bucket);
            Ok(true)
        })?;
        let train = written && self.may_train(&group);
        // Training takes the layout lock and then each group's: this one is let go first.
        drop(group);
        if train {
            layout::train_when_due(self)?;
        }
        Ok(())
    }

    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        self.backing.check_open()?;
        if key.len() > MAX_KEY_LEN {
            visit(None);
            return Ok(());
        }
        let hash = hash_key(key);
        self.cell(hash).get_with(key, hash, visit)
    }

    fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        self.get_many_grouped(keys, visit)
    }

    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.backing.check_writable()?;
        layout::train_on_batch(self, batch)?;
        batch::apply(&self.groups, batch)?;
        if self.layout.lock().codec.awaits_dictionary() {
            layout::train_when_due(self)?;
        }
        if batch.len() >= batch::BULK_RECORDS {
            // A bulk load is over or pausing: the pooled compression contexts (about 5 MiB
            // each for `zstd-dict` at its level) would outweigh many buckets' worth of the
            // map, and small writes make one again when they need it.
            self.layout.lock().codec.release_compressors();
        }
        Ok(())
    }

    fn prefers_whole_batches(&self) -> bool {
        true
    }

    fn count(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.groups.iter().map(|cell| cell.lock.read().records).sum())
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        self.backing.check_open()?;
        Ok(Box::new(CompactCursor::new(self)))
    }

    fn clear(&self) -> Result<()> {
        self.backing.check_writable()?;
        for cell in self.groups.iter() {
            let mut group = cell.lock.write();
            group.clear();
            cell.cache.lock().clear();
        }
        Ok(())
    }

    fn synchronize(&self, _hard: bool) -> Result<()> {
        self.backing.synchronize(|| self.save())
    }

    fn rebuild(&self, params: &Params) -> Result<()> {
        self.backing.check_writable()?;
        layout::rebuild(self, &Options::parse(params)?)
    }

    fn should_be_rebuilt(&self) -> Result<bool> {
        self.backing.check_open()?;
        Ok(layout::should_be_rebuilt(self))
    }

    fn file_size(&self) -> Result<u64> {
        self.backing.check_open()?;
        Ok(self.memory_bytes())
    }

    fn codec(&self) -> Result<Option<CodecKind>> {
        self.backing.check_open()?;
        Ok(Some(self.layout.lock().codec.kind()))
    }

    fn inspect(&self) -> Result<Stats> {
        self.backing.check_open()?;
        let (count, raw_bytes, stored_bytes) = self.totals();
        let memory = self.memory_bytes();
        let (codec, dictionary, num_buckets, cache_bytes, trained) = {
            let layout = self.layout.lock();
            let buckets = layout.buckets_per_group as u64 * NUM_GROUPS as u64;
            (layout.codec.kind(), layout.codec.dictionary().len(), buckets, layout.cache_bytes, layout.trained)
        };
        let cached: usize = self.groups.iter().map(|cell| cell.cache.lock().memory_bytes()).sum();
        let mut own = vec![
            ("num_buckets", Stat::Number(num_buckets)),
            ("num_groups", Stat::Number(NUM_GROUPS as u64)),
            // Records a bucket holds on average, rounded up: what a get decodes.
            ("bucket_records", Stat::Number(count.div_ceil(num_buckets.max(1)))),
            ("compressed_bytes", Stat::Number(stored_bytes)),
            ("raw_bytes", Stat::Number(raw_bytes)),
            ("memory_bytes", Stat::Number(memory)),
            ("cache_bytes", Stat::Number(cached as u64)),
            ("cache_capacity", Stat::Number(cache_bytes)),
            ("dict_size", Stat::Number(dictionary as u64)),
            ("dict_trained", Stat::Flag(dictionary > 0)),
        ];
        if let Some(trained) = trained.filter(|_| dictionary > 0) {
            own.push(("dict_trigger", Stat::Name(trained.trigger.name())));
            own.push(("dict_trained_at", Stat::Number(trained.at)));
            own.push(("dict_trained_records", Stat::Number(trained.records)));
        }
        let mut stats = self.backing.stats("CompactDbm", count, memory, own);
        stats.codec = Some(CodecStat { param: "bucket_comp", kind: codec });
        Ok(stats)
    }

    fn is_writable(&self) -> bool {
        self.backing.is_writable()
    }

    fn close(&self) -> Result<()> {
        self.backing.close(|| self.save())
    }
}

impl Drop for CompactDbm {
    fn drop(&mut self) {
        self.backing.save_if_open(|| self.save());
    }
}
