//! TreeDbm: an ordered file database, a B+ tree whose pages are compressed as a whole.
//!
//! The file is a page file of its own (see `format.rs` and docs/tree.md): pages live in
//! variable-size slots, are compressed with the database's codec, and are written
//! copy-on-write. Updates modify decoded pages in memory; a commit writes the modified pages to
//! free slots and then publishes the new root in the file header (shadow paging). So the file
//! always holds a whole committed tree, a write batch is atomic across a crash, and crash
//! recovery only has to find which slots are free.
//!
//! Concurrency: one reader-writer lock over the tree. Readers (get, cursors, ranges) run in
//! parallel and share the page cache; a writer runs alone. Cursors keep the leaf they stand on
//! (a shared, immutable snapshot) and re-seek by key when the tree changed since.

mod btree;
mod cache;
mod check;
pub(crate) mod comparator;
mod cursor;
mod dirty;
mod durable;
#[cfg(test)]
mod fallback_tests;
mod finger;
#[cfg(feature = "internals")]
pub mod forge;
pub(crate) mod format;
mod get_many;
mod header_copies;
#[cfg(test)]
mod hint_tests;
#[cfg(test)]
mod lending_tests;
mod options;
mod page;
mod pager;
mod pins;
mod prefix_index;
mod range;
mod rebalance;
mod rebuild;
mod recovery;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod salvage_tests;
mod scan;
mod second_touch;
mod seek;
mod slot_hint;
mod space;
mod store;
mod verify;
mod write_behind;
pub(crate) mod write_buffer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{MappedRwLockReadGuard, MappedRwLockWriteGuard, RwLockReadGuard, RwLockWriteGuard};

pub(crate) use crate::batch::WriteBatch;
pub use comparator::Comparator;
pub use cursor::TreeCursor;
pub(crate) use options::DEFAULT_CACHE_BYTES;
pub use range::{KeyRange, TreeRange};

use crate::codec::CodecKind;
use crate::dbm::OpenMode;
use crate::dbm::{Cursor, Dbm, OrderedCursor, Params, Processor};
use crate::engine::Mark;
use crate::error::{Error, Result};
use crate::file::{remove_if_exists, sibling_path};
use crate::journal::{self, SyncState};
use crate::spin_lock::SpinRwLock;
use crate::stats::{CodecStat, Stat, Stats};
use btree::BTree;
use options::TreeOptions;
use pager::Pager;
use store::Store;

/// The file B+ tree database (`.kut`): see the module documentation and docs/tree.md.
pub struct TreeDbm {
    path: PathBuf,
    writable: bool,
    /// The tree and its journal, `None` once closed. Its lock waits in user space first
    /// (`spin_lock.rs`): an operation holds it for about a microsecond.
    tree: SpinRwLock<Option<Store>>,
    /// How far the journal is synced: a durable commit syncs after letting go of the lock, so
    /// that commits of other threads meanwhile share its sync (group commit).
    journal_sync: Arc<SyncState>,
    /// Bumped by every change of content (under the write lock): cursors use it to know
    /// whether the leaf they hold is still current.
    generation: AtomicU64,
    dictionary_size: usize,
    restored: AtomicBool,
}

impl std::fmt::Debug for TreeDbm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeDbm").field("path", &self.path).field("writable", &self.writable).finish()
    }
}

impl TreeDbm {
    /// The parameters `open` takes (the registry lists them; anything else is an error).
    pub const PARAMS: &'static [&'static str] = options::PARAMS;

    /// The marks its files start with (the registry lists them; `kura.dbm.whichdb` asks).
    pub const MAGIC: &'static [Mark] = &[Mark::new(0, format::MAGIC)];

    /// Opens or creates a tree database. Parameters: `record_comp` (codec, alias
    /// `page_comp`), `key_comparator` (lexical, numeric), `max_page_size` (these three apply
    /// when the file is created), `cache_bytes`, `max_dirty_pages`, `max_file_size`,
    /// `dict_size` (zstd-dict dictionary size at rebuild).
    pub fn open(path: impl AsRef<Path>, mode: OpenMode, params: &Params) -> Result<TreeDbm> {
        let path = path.as_ref();
        // Damage met on the way (a dictionary page, the journal) names the file, as the
        // methods' errors do (`named`).
        Self::open_unnamed(path, mode, params).map_err(|e| e.in_file(path))
    }

    fn open_unnamed(path: &Path, mode: OpenMode, params: &Params) -> Result<TreeDbm> {
        let options = TreeOptions::parse(params)?;
        let writable = mode.is_writable();
        let exists_with_content = std::fs::metadata(path).map(|m| m.len() > 0).unwrap_or(false);
        let create = mode == OpenMode::Truncate || (mode == OpenMode::Create && !exists_with_content);
        let mut restored = false;
        let pager = if create {
            Pager::create(path, &options.pager_options())?
        } else {
            let mut pager = Pager::open(path, writable, options.clean_cache_bytes(), options.max_file_size)?;
            pager.limit_memory(options.memory_bytes);
            if writable && !pager.header().closed_cleanly {
                match recovery::recover_space(&pager) {
                    Ok(space) => pager.set_space(space),
                    Err(_) => {
                        // The committed tree itself is damaged (a lost or torn write below
                        // the header): salvage what is readable into a new file.
                        pager = recovery::restore_in_place(pager, &options)?;
                        restored = true;
                    }
                }
            }
            pager
        };
        let dirty_budget = options.dirty_budget(pager.max_page_size());
        let mut tree = BTree::new(pager, dirty_budget);
        // Commits since the last checkpoint (none after a clean close or a creation, which
        // removed the journal under the lock).
        let recovered = journal::recover(path)?;
        if writable {
            if !recovered.is_empty() {
                // The replay below may commit the tree file durably, and the checkpoint after
                // it will (`journal::make_durable`).
                journal::make_durable(path)?;
            }
            tree.pager.mark_open()?;
            // Leftovers of a rebuild or restore killed midway; we hold the lock, so they are
            // nobody's work in progress.
            for suffix in [".rebuild", ".restore"] {
                remove_if_exists(&sibling_path(path, suffix))?;
            }
        }
        let replayed = store::replay(&mut tree, &recovered, writable);
        replayed.map_err(|e| {
            let journal = journal::journal_path(path);
            Error::new(e.kind(), format!("{}: replaying it failed: {}", journal.display(), e.message()))
        })?;
        let mut store = Store::new(tree, path, options.checkpoint_bytes, options.buffer_policy());
        if writable && (!recovered.is_empty() || recovered.dropped_bytes > 0) {
            // What was replayed becomes durable in the tree file, and the journal starts over.
            store.checkpoint()?;
        }
        let journal_sync = store.journal().sync_state();
        Ok(TreeDbm {
            path: path.to_path_buf(),
            writable,
            tree: SpinRwLock::new(Some(store)),
            journal_sync,
            generation: AtomicU64::new(0),
            dictionary_size: options.dictionary_size,
            restored: AtomicBool::new(restored),
        })
    }

    /// Copies every readable record of a damaged (or sound) tree file `source` into a new
    /// file `dest`; returns the number of records copied.
    pub fn restore_file(source: impl AsRef<Path>, dest: impl AsRef<Path>) -> Result<u64> {
        Self::salvage_file(source, dest).map(|report| report.records)
    }

    /// `restore_file`, saying also how many damaged pages were skipped (their records are
    /// lost; a page's records cannot be counted once it fails its checksum). A damaged
    /// dictionary does not stop it: the records of the pages stored raw that it reaches
    /// through branches stored raw are copied (as pages compress, usually none), those
    /// compressed with the dictionary are dropped, and the report says so.
    ///
    /// The commits in the source's journal since its last checkpoint are replayed over the
    /// copy: they are as much the database as the pages are.
    pub fn salvage_file(source: impl AsRef<Path>, dest: impl AsRef<Path>) -> Result<crate::engine::RestoreReport> {
        let journal = journal::recover(source.as_ref())?;
        let source = Pager::open_for_salvage(source.as_ref(), DEFAULT_CACHE_BYTES, options::DEFAULT_MAX_FILE_SIZE)?;
        let (mut records, walked) = recovery::restore_to(&source, dest.as_ref())?;
        if !journal.is_empty() {
            let copy = TreeDbm::open(dest.as_ref(), OpenMode::Write, &Params::new())?;
            {
                let mut store = copy.write()?;
                store::replay(&mut store.tree, &journal, true)?;
                records = store.tree.count();
            }
            copy.close()?;
        }
        let mut dropped = source.found().to_vec();
        if walked.stale_records > 0 {
            dropped.push(format!(
                "{} records of that copy's tree were dropped: it may be older than the lost copy's, and an older \
                 value is never copied over a newer one",
                walked.stale_records
            ));
        }
        if source.dictionary_damaged() {
            dropped.push(
                "the zstd dictionary is damaged: every page compressed with it (and the records under it) was dropped"
                    .to_string(),
            );
        }
        if walked.skipped > 0 {
            dropped.push(format!("{} damaged pages of the tree were skipped", walked.skipped));
            if walked.scan_refused {
                dropped.push(
                    "the records under them were dropped: without an intact free list (a file not closed cleanly, \
                     its list damaged, or cut away) the leaves the tree no longer reaches cannot be told from stale \
                     copies of older commits"
                        .to_string(),
                );
            } else {
                dropped.push(format!(
                    "every slot was scanned: {} leaves of the current tree under the damaged pages were copied \
                     (the records of damaged leaves are lost)",
                    walked.scanned_leaves
                ));
            }
        }
        Ok(crate::engine::RestoreReport {
            records,
            dropped_records: walked.stale_records,
            dropped,
            ..Default::default()
        })
    }

    /// The path the database was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tree, holding every change made: the buffered batches applied (write_buffer.rs).
    pub(crate) fn read(&self) -> Result<MappedRwLockReadGuard<'_, BTree>> {
        self.read_store().map(|store| MappedRwLockReadGuard::map(store, |store| &store.tree))
    }

    /// The tree with its journal, the buffered batches applied.
    fn read_store(&self) -> Result<MappedRwLockReadGuard<'_, Store>> {
        let guard = self.tree.read();
        if !guard.as_ref().is_some_and(Store::has_buffered) {
            return usable(RwLockReadGuard::try_map(guard, Option::as_ref));
        }
        drop(guard);
        let mut guard = self.tree.write();
        if let Some(store) = guard.as_mut().filter(|store| store.has_buffered()) {
            // (Another reader may have applied it meanwhile: then nothing changed.)
            self.named(store.drain())?;
            self.changed();
        }
        // Downgraded, not let go: no batch can be buffered again before the reader reads.
        usable(RwLockReadGuard::try_map(RwLockWriteGuard::downgrade(guard), Option::as_ref))
    }

    /// The store as it is, batches perhaps waiting in its buffer: for point reads, which look
    /// there first (`Store::buffered`), and for what does not read the records.
    pub(super) fn read_undrained(&self) -> Result<MappedRwLockReadGuard<'_, Store>> {
        usable(RwLockReadGuard::try_map(self.tree.read(), Option::as_ref))
    }

    fn write(&self) -> Result<MappedRwLockWriteGuard<'_, Store>> {
        if !self.writable {
            return Err(Error::infeasible(format!("{} is open read-only", self.path.display())));
        }
        RwLockWriteGuard::try_map(self.tree.write(), Option::as_mut)
            .map_err(|_| Error::infeasible("the database is closed"))
    }

    /// Makes the commits up to `ticket` durable, after the caller let go of the tree's lock.
    fn sync_journal(&self, ticket: Option<journal::SyncTicket>) -> Result<()> {
        match ticket {
            Some(ticket) => self.journal_sync.sync(&ticket),
            None => Ok(()),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Called with the tree's write lock held, which serializes writers: so a plain load and
    /// store (no read-modify-write instruction on the hot path of every update) suffice.
    fn changed(&self) {
        let next = self.generation.load(Ordering::Relaxed).wrapping_add(1);
        self.generation.store(next, Ordering::Release);
    }

    /// `result`, its damage (BrokenData) naming this file: what the tree finds deep down (a
    /// cycle, a wrong height, a damaged slot header) knows a page's offset, not the file, and a
    /// user of the library must learn which file to check or restore (issue 43). Every `Dbm`
    /// method and the cursor's reads pass their errors through here.
    pub(crate) fn named<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|e| e.in_file(&self.path))
    }

    /// A cursor in key order, with backward moves and neighbour jumps.
    pub fn tree_cursor(&self) -> TreeCursor<'_> {
        TreeCursor::new(self)
    }

    /// The records whose keys lie in `range`, in key order; `.rev()` walks it backwards.
    /// `db.range(..)`, `db.range(&b"a"[..]..&b"m"[..])`, `db.range("k1"..="k9")`.
    pub fn range(&self, range: impl KeyRange) -> TreeRange<'_> {
        TreeRange::new(self, range.bounds())
    }

    /// Commits pending changes so that they survive a crash of the process (not of the
    /// machine: use `synchronize(true)` for that): one write to the journal.
    pub fn commit(&self) -> Result<()> {
        self.named(self.write().and_then(|mut store| store.commit()))
    }

    /// Writes every change into the tree file durably and starts the journal over (done by
    /// itself when the journal or the modified pages grow large, and at close).
    pub fn checkpoint(&self) -> Result<()> {
        self.named(self.write().and_then(|mut store| store.checkpoint()))
    }

    /// Whether this handle found the file damaged and rebuilt it from what was readable.
    pub fn was_restored(&self) -> bool {
        self.restored.load(Ordering::Relaxed)
    }
}

/// The store behind `mapped` when there is one (the database is open) and it is usable (no
/// failed undo left memory at odds with the journal: `Store::usable`).
fn usable<'a, Other>(
    mapped: std::result::Result<MappedRwLockReadGuard<'a, Store>, Other>,
) -> Result<MappedRwLockReadGuard<'a, Store>> {
    let store = mapped.map_err(|_| Error::infeasible("the database is closed"))?;
    store.usable()?;
    Ok(store)
}

impl Dbm for TreeDbm {
    /// Applies all operations of `batch`, or none: the batch is committed as one unit, so a
    /// crash leaves it wholly present or wholly absent, and an error leaves it absent.
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        let outcome = self.write().and_then(|mut store| {
            let outcome = store.write_batch(batch, false);
            self.changed();
            outcome
        });
        self.named(outcome)
    }

    /// The batch is one frame of the journal, and one `fdatasync` of the journal makes it
    /// durable (shared with the commits other threads make meanwhile).
    fn write_batch_durable(&self, batch: &WriteBatch) -> Result<()> {
        let ticket = self.write().and_then(|mut store| {
            let outcome = store.write_batch(batch, true);
            self.changed();
            outcome.map(|()| store.ticket())
        });
        self.named(ticket.and_then(|ticket| self.sync_journal(ticket)))
    }

    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        self.named(self.try_process(key, processor))
    }

    /// An overwriting `set` in a file larger than half the memory goes to the write buffer
    /// (`Store::set_buffered`); any other, as `process`.
    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        if overwrite && self.writable {
            let mut store = self.write()?;
            if self.named(store.set_buffered(key, value))? {
                self.changed();
                return self.named(store.after_change());
            }
        }
        crate::dbm::set_by_process(self, key, value, overwrite)
    }

    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        self.named(self.read_undrained().and_then(|store| store.get(key, visit)))
    }

    /// Sorts the batch and descends once per leaf (`get_many.rs`); visits in key order.
    fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        self.named(self.get_many_sorted(keys, visit))
    }

    fn count(&self) -> Result<u64> {
        Ok(self.named(self.read())?.count())
    }

    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        let _open = self.named(self.read())?;
        Ok(Box::new(TreeCursor::new(self)))
    }

    fn is_ordered(&self) -> bool {
        true
    }

    fn ordered_cursor(&self) -> Result<Box<dyn OrderedCursor + '_>> {
        let _open = self.named(self.read())?;
        Ok(Box::new(TreeCursor::new(self)))
    }

    fn clear(&self) -> Result<()> {
        let outcome = self.write().and_then(|mut store| {
            let outcome = store.clear();
            self.changed();
            outcome
        });
        self.named(outcome)
    }

    /// Without `hard`, a commit (a write to the journal); with it, the journal synced too
    /// (one `fdatasync`), or the tree file made durable when nothing was journaled since the
    /// last checkpoint.
    fn synchronize(&self, hard: bool) -> Result<()> {
        self.named(self.try_synchronize(hard))
    }

    fn rebuild(&self, params: &Params) -> Result<()> {
        self.named(self.try_rebuild(params))
    }

    fn should_be_rebuilt(&self) -> Result<bool> {
        let store = self.read_undrained()?;
        let space = store.tree.pager.space();
        Ok(space.free_bytes() > space.end() / 2 && space.end() > 1 << 20)
    }

    fn file_size(&self) -> Result<u64> {
        let store = self.read_undrained()?;
        Ok(store.tree.pager.used_size() + store.journal().bytes())
    }

    /// Reads every page from the file (check.rs): checksums, levels, key order, the count.
    fn check(&self) -> Result<crate::check::CheckReport> {
        self.named(self.check_pages())
    }

    fn codec(&self) -> Result<Option<CodecKind>> {
        Ok(Some(self.read_undrained()?.tree.pager.codec().kind()))
    }

    fn inspect(&self) -> Result<Stats> {
        let store = self.named(self.read_store())?;
        let tree = &store.tree;
        let header = tree.pager.header();
        let space = tree.pager.space();
        let mut stats = Stats::new("TreeDbm", tree.count(), tree.pager.used_size(), true);
        stats.path = Some(self.path.clone());
        stats.codec = Some(CodecStat { param: "record_comp", kind: tree.pager.codec().kind() });
        stats.key_order = Some(header.comparator);
        stats.details = vec![
            ("max_page_size", Stat::Number(u64::from(header.max_page_size))),
            // 2: the branches keep each child's slot length (slot hints); 1 until a rebuild.
            ("format_version", Stat::Number(u64::from(header.version))),
            ("tree_height", Stat::Number(tree.height() as u64)),
            ("free_bytes", Stat::Number(space.free_bytes())),
            ("free_slots", Stat::Number(space.free_slots() as u64)),
            ("dirty_pages", Stat::Number(tree.dirty_pages() as u64)),
            ("journal_bytes", Stat::Number(store.journal().bytes())),
            // Fewer than the durable commits when threads' commits shared one (group commit).
            ("journal_syncs", Stat::Number(store.journal().syncs())),
            ("cache_bytes_used", Stat::Number(tree.pager.cache().bytes() as u64)),
            ("memory_bytes", Stat::Number(tree.pager.memory_bytes())),
            ("dictionary_size", Stat::Number(tree.pager.codec().dictionary().len() as u64)),
            ("restored", Stat::Flag(self.was_restored())),
        ];
        Ok(stats)
    }

    fn is_writable(&self) -> bool {
        self.writable
    }

    fn close(&self) -> Result<()> {
        self.named(self.try_close())
    }
}

/// The bodies of the `Dbm` methods that return early: the methods name their errors
/// (`TreeDbm::named`).
impl TreeDbm {
    fn try_process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()> {
        if !self.writable {
            // Read-only handles still run processors that only look.
            // (The value is copied out: `get` may not call back, the processor may.)
            let value = self.read()?.get(key, |value| value.map(<[u8]>::to_vec))?;
            if !matches!(processor(value.as_deref()), crate::dbm::Action::Keep) {
                return Err(Error::infeasible(format!("{} is open read-only", self.path.display())));
            }
            return Ok(());
        }
        let mut store = self.write()?;
        if store.process(key, processor)? {
            self.changed();
            store.after_change()?;
        }
        Ok(())
    }

    fn try_synchronize(&self, hard: bool) -> Result<()> {
        if !self.writable {
            let _open = self.read()?;
            return Ok(());
        }
        let ticket = {
            let mut store = self.write()?;
            if !hard {
                return store.commit();
            }
            store.commit_to_sync()?;
            match store.ticket() {
                Some(ticket) => ticket,
                None => return store.tree.commit(true),
            }
        };
        self.sync_journal(Some(ticket))
    }

    fn try_rebuild(&self, params: &Params) -> Result<()> {
        let options = TreeOptions::parse(params)?;
        let mut store = self.write()?;
        // The rebuilt file replaces this one: everything goes into it first.
        store.checkpoint()?;
        rebuild::rebuild(&mut store.tree, &self.path, &options, self.dictionary_size)?;
        self.changed();
        Ok(())
    }

    fn try_close(&self) -> Result<()> {
        let mut slot = self.tree.write();
        let Some(mut store) = slot.take() else {
            return Err(Error::infeasible("the database is already closed"));
        };
        if self.writable {
            store.close()?;
        }
        self.changed();
        Ok(())
    }
}

impl Drop for TreeDbm {
    fn drop(&mut self) {
        if self.tree.read().is_some() {
            let _ = self.close();
        }
    }
}
