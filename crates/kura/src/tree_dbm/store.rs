//! The tree and its journal, kept together under the tree's lock: every change to the tree is
//! also an entry of the journal, and pages reach the tree file only at checkpoints.
//!
//! The rules that make a crash at any moment recoverable (journal/mod.rs says why replay is
//! idempotent):
//! - a change is encoded into the journal's pending entries as it is applied to the tree in
//!   memory; a commit writes the pending entries as one frame (kill-safe), a durable commit
//!   syncs the journal as well (power-loss-safe); a durable batch of many operations (of any
//!   size in a file larger than half the memory) is journaled whole before it is applied
//!   (`write_batch_journaled_first`), so that the device writes its frame meanwhile;
//! - the tree's pages are written only by a checkpoint: a durable commit of the tree file,
//!   after which the journal starts over (durably). So the tree file never holds a change the
//!   journal on disk lacks while that journal holds an older change it would undo; a batch
//!   too large for the journal is applied only once a checkpoint has emptied it;
//! - when applying a change fails midway (an I/O error, a batch with a record over the limit),
//!   the tree goes back to the last checkpoint and the journal's frames are replayed, so memory
//!   and journal agree again; a batch journaled before it was applied is left out of that
//!   replay, and a checkpoint then starts the journal over without it. If that replay or
//!   checkpoint fails too (a failing disk), the error says to reopen the database, and the
//!   reopen finds such a batch whole or absent, as after a crash.

use std::borrow::Cow;
use std::path::Path;

use super::btree::{check_record_size, BTree};
use super::pager::Placement;
use super::write_buffer::WriteBuffer;
use crate::batch::{BatchOp, WriteBatch};
use crate::dbm::{Action, Processor};
use crate::error::{Error, Result};
use crate::journal::{self, encode_entry, Entry, Journal, Recovered, SyncTicket};

pub use crate::journal::DEFAULT_CHECKPOINT_BYTES;

/// Leaves read ahead while a sorted batch spills (`BTree::leaves_read_ahead`): enough to keep
/// the disk busy with several reads at once, few enough that what was read ahead is still in
/// memory when its turn comes, under a memory limit too.
const SPILL_READ_AHEAD_LEAVES: usize = 16;

/// Operations of a spilling batch or a drain whose leaves are asked for ahead of their turn in
/// a file larger than half the memory (`LeafReadAhead`): enough reads in flight for this
/// disk's best rate (32 at once), few enough (at most 512 leaves, about 6 MiB) that each leaf
/// is still in memory when its operation comes. Asked for half a window at a time: in key
/// order, a drain's leaves lie one after another (`Placement::Sequential`), so that 256
/// operations are a few requests (`Pager::read_ahead_in_run`), where 32 were one or two. 8M
/// records loaded under 512 MiB, alternating runs: 66.6 and 53.9 s with 512 (and the
/// requests on the advice thread) against 66.9 and 57.1 s with 64.
const READ_AHEAD_OPS: usize = 512;

/// The keys of a write batch whose leaves are warmed together before they are updated
/// (`BTree::warm_leaves`): as many as a batched lookup overlaps.
const WARM_GROUP: usize = super::get_many::LEAF_GROUP;

/// A durable batch of at least this many operations is journaled before it is applied
/// (`write_batch_journaled_first`). A smaller one applies in less time than starting the
/// write early saves, and a durable commit of one record stays one system call that syncs
/// (durable_commit_syscalls.rs); except in a file larger than half the memory, where its
/// leaf's read from the disk overlaps the journal's write (1,000 durable single records into
/// 2M under a 128 MiB limit: 168-172 µs each against 205-217 µs).
const JOURNAL_FIRST_MIN_OPS: usize = WARM_GROUP;

/// Applying the write buffer commits the tree durably, rather than without a sync, once the
/// slots held back for the last durable tree pass this share of the file (`Store::drain`):
/// each commit without a sync holds back the slots of the pages it replaced until the next
/// durable one (durable.rs), and a buffer of random records that replaces most leaves would
/// otherwise grow the file by most of the tree (8M records under 512 MiB: 2.72 GB after the
/// removals instead of 1.99 GB). Every commit durable kept the file from growing but made
/// applying the buffer 10-30% slower (2M records under 128 MiB, alternating runs: 500,000
/// removals 15.6-17.4 s against 12.1-13.0 s); an eighth bounds the growth at that share.
const HELD_BACK_SHARE: u64 = 8;

/// A batch of at least this many operations is buffered (write_buffer.rs) rather than applied,
/// when the store has a buffer: one that is journaled first anyway. A smaller one, one record
/// above all, applies in about the time buffering it takes in memory, and would leave a buffer
/// for every read to look into; in a file larger than half the memory, where applying it
/// waits for a leaf from the disk, a batch of any size is buffered (and so is a `set`).
const BUFFER_MIN_OPS: usize = JOURNAL_FIRST_MIN_OPS;

/// How a batch's operations reach the journal as they are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Journaled {
    /// Each change is journaled as it is made (the pending entries, one frame at the commit).
    AsApplied,
    /// The whole batch was journaled before it is applied (`write_batch_journaled_first`).
    Already,
    /// Not through the journal: a batch too large for it (`apply_spilling`).
    Bypassed,
}

pub struct Store {
    pub tree: BTree,
    journal: Journal,
    checkpoint_bytes: u64,
    /// Entries at the end of the journal that memory does not hold: a durable batch journaled
    /// before it is applied, while it is applied (`write_batch_journaled_first`). An undo
    /// replays the journal without them.
    unapplied_tail: usize,
    /// Batches and sets journaled (a set's entry perhaps still pending) and not yet applied
    /// (write_buffer.rs). Empty whenever anything but a point read or another buffered batch
    /// or set meets the tree: `drain` applies it first.
    buffer: WriteBuffer,
    buffer_policy: BufferPolicy,
    /// Set when undoing a failed change could not bring memory back in line with the journal
    /// (its replay failed too: a damaged leaf, a full disk): the journal file is then the only
    /// whole record of the commits, so nothing may checkpoint over it or remove it, and every
    /// operation is refused, with this error, until the database is reopened (which replays
    /// the journal, or says to restore the file, which replays it over the copy).
    broken: Option<(crate::error::ErrorKind, String)>,
}

/// When batches wait in the write buffer (`TreeOptions::write_buffer_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferPolicy {
    /// The most memory the buffer may take; 0: batches are applied as they come.
    pub budget: usize,
    /// While the buffer is in use, the journal may grow to this many bytes before a checkpoint
    /// (which applies the buffer), when that is more than `checkpoint_bytes`: the journal holds
    /// every buffered batch until then, so a smaller limit would apply the buffer at a fraction
    /// of its budget. 0 keeps `checkpoint_bytes` (as the defaults do when it was given).
    pub journal_bytes: u64,
    /// Only while the file is larger than half the memory (`Pager::exceeds_memory`), the
    /// default. In memory, applying the buffered records in key order took about as long as
    /// applying each batch as it came (1M records, 100 batches of 1,000 random records: 0.13 s
    /// for the drain against 0.17 s of applies), so waiting only moved that time to whatever
    /// came next; from the disk, each leaf is read once for all its records, in file order.
    pub beyond_memory_only: bool,
}

impl Store {
    pub fn new(tree: BTree, path: &Path, checkpoint_bytes: u64, buffer_policy: BufferPolicy) -> Store {
        Store {
            tree,
            journal: Journal::new(path),
            checkpoint_bytes,
            unapplied_tail: 0,
            buffer: WriteBuffer::default(),
            buffer_policy,
            broken: None,
        }
    }

    /// Refuses any operation once an undo failed (`broken`).
    pub fn usable(&self) -> Result<()> {
        match &self.broken {
            Some((kind, message)) => Err(Error::new(*kind, message.clone())),
            None => Ok(()),
        }
    }

    /// Shows `visit` the value of `key` as a point read sees it: the buffered operation on it
    /// (`WriteBuffer::get`), else the tree's record.
    pub fn get(&self, key: &[u8], visit: impl FnOnce(Option<&[u8]>)) -> Result<()> {
        match self.buffer.get(key) {
            Some(buffered) => {
                visit(buffered);
                Ok(())
            }
            None => self.tree.get(key, visit),
        }
    }

    /// Whether batches wait in the buffer (`drain` applies them).
    pub fn has_buffered(&self) -> bool {
        !self.buffer.is_empty()
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Runs `processor` on `key` and journals the change it made; true when it changed
    /// something.
    pub fn process(&mut self, key: &[u8], processor: Processor<'_, '_>) -> Result<bool> {
        // (`drain` refuses a broken store, buffer or none.)
        self.drain()?;
        let Store { tree, journal, .. } = self;
        let pending = journal.pending_mut();
        let mark = pending.len();
        let outcome = tree.process(key, &mut |old| {
            let action = processor(old);
            match &action {
                Action::Set(value) => encode_entry(pending, Entry::Set { key, value }),
                Action::Remove => encode_entry(pending, Entry::Remove { key }),
                Action::Keep => {}
            }
            action
        });
        if matches!(outcome, Ok(true)) {
            journal.entry_added();
        } else {
            journal.pending_mut().truncate(mark);
        }
        outcome
    }

    /// Applies `batch` all or nothing: in the journal its entries form one frame. A batch of
    /// more than a quarter of the journal's limit (`checkpoint_limit`) bypasses the journal:
    /// after a checkpoint of what came before, it is applied and made durable by a checkpoint
    /// at once (whose shadow paging keeps it whole or absent across a crash), so that a bulk
    /// load is written once, into the tree, and not first into the journal; unless it
    /// modifies more pages than the budget allows (`apply_spilling`). So does a batch of more operations than the budget
    /// has pages, however small: each operation may modify a leaf of its own, and a journaled
    /// batch holds all it modifies until it ends (100,000 random removals, 2.4 MB of keys,
    /// modify every leaf of a 2M-record tree: 400 MB, under a 128 MiB memory limit).
    pub fn write_batch(&mut self, batch: &WriteBatch, durable: bool) -> Result<()> {
        // What came before stands in the journal file on its own, so that a failure below can
        // rebuild it from there. (`commit` refuses a broken store.)
        self.commit()?;
        if let Some(cost) = self.buffered_cost(batch) {
            return self.write_batch_buffered(batch, cost, durable);
        }
        self.drain()?;
        if batch.byte_size() as u64 > self.checkpoint_limit() / 4 || batch.len() > self.tree.max_dirty_pages {
            // A checkpoint first, which empties the journal durably: a crash between the
            // batch's checkpoint and the journal's restart would otherwise replay older entries
            // over the batch's changes (found by the kill soak). From here the tree may hold a
            // change the journal lacks, since the journal holds nothing that could undo it.
            self.checkpoint()?;
            self.apply_spilling(batch)?;
            return self.checkpoint();
        }
        // In a file larger than half the memory, a batch of any size: its leaves come from the
        // disk, and that read proceeds while the device writes the journal.
        if durable && (batch.len() >= JOURNAL_FIRST_MIN_OPS || self.tree.pager.exceeds_memory()) {
            return self.write_batch_journaled_first(batch);
        }
        self.apply(batch, Journaled::AsApplied)?;
        if durable {
            self.commit_to_sync()?;
        } else {
            self.commit()?;
        }
        self.after_change()
    }

    /// What buffering `batch` costs (`WriteBuffer::cost_of`, a pass over its operations) when
    /// it goes to the buffer, None when it does not: it goes when the store has a buffer
    /// (`BufferPolicy`), the batch is more than a handful of operations or the file larger
    /// than half the memory (`BUFFER_MIN_OPS`), small enough for the journal (a larger one is
    /// written once, into the tree: `apply_spilling`), and fits in the buffer's budget on its
    /// own. (Unlike a batch applied at once, it may modify more pages than their budget:
    /// `drain` commits as it goes.)
    fn buffered_cost(&self, batch: &WriteBatch) -> Option<usize> {
        let eligible = self.buffer_in_use()
            && (batch.len() >= BUFFER_MIN_OPS || self.tree.pager.exceeds_memory())
            && batch.byte_size() as u64 <= self.checkpoint_limit() / 4;
        if !eligible {
            return None;
        }
        Some(WriteBuffer::cost_of(batch)).filter(|&cost| cost <= self.buffer_policy.budget)
    }

    /// Whether batches go to the write buffer now (`BufferPolicy`).
    fn buffer_in_use(&self) -> bool {
        let BufferPolicy { budget, beyond_memory_only, .. } = self.buffer_policy;
        budget > 0 && (!beyond_memory_only || self.tree.pager.exceeds_memory())
    }

    /// The journal bytes past which a change checkpoints: `checkpoint_bytes`, or the buffer's
    /// `journal_bytes` while the buffer is in use, when larger. A batch of more than a quarter
    /// of it bypasses the journal (`write_batch`).
    fn checkpoint_limit(&self) -> u64 {
        if self.buffer_in_use() {
            self.checkpoint_bytes.max(self.buffer_policy.journal_bytes)
        } else {
            self.checkpoint_bytes
        }
    }

    /// Stores `value` under `key` through the buffer, when the file is larger than half the
    /// memory and has a buffer: journaled as a pending entry (committed with the next commit,
    /// as a `set` applied at once is), not applied, so that it does not wait for its leaf to
    /// come from the disk. False when it takes the usual way (`process`), which it does in a
    /// file that fits in memory: there it applies in about the time buffering it takes, and
    /// would leave a buffer for every read to look into.
    pub fn set_buffered(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.usable()?;
        let op = BatchOp::Set { key, value };
        let cost = WriteBuffer::cost_of_op(op);
        if self.buffer_policy.budget < cost || !self.tree.pager.exceeds_memory() {
            return Ok(false);
        }
        check_record_size(key, value)?;
        if self.buffer.bytes() + cost > self.buffer_policy.budget {
            self.checkpoint()?;
        }
        encode_entry(self.journal.pending_mut(), Entry::Set { key, value });
        self.journal.entry_added();
        self.buffer.insert(op);
        Ok(true)
    }

    /// A batch journaled and buffered, to be applied with the buffer (`drain`): one frame of
    /// the journal, synced by the caller when `durable`, as a batch applied at once is; the
    /// buffer is applied by a checkpoint first when the batch (costing `cost`,
    /// `buffered_cost`) would take it past its budget. Records too large for a page are
    /// refused before anything is journaled, as applying them would refuse them.
    fn write_batch_buffered(&mut self, batch: &WriteBatch, cost: usize, durable: bool) -> Result<()> {
        check_record_sizes(batch)?;
        if self.buffer.bytes() + cost > self.buffer_policy.budget {
            self.checkpoint()?;
        }
        self.encode_pending(batch);
        // One frame, however large, as `write_batch_journaled_first` says.
        if durable {
            self.commit_to_sync()?;
        } else {
            self.commit()?;
        }
        for op in batch.ops() {
            self.buffer.insert(op);
        }
        self.after_change()
    }

    /// Applies the buffered batches and sets to the tree, in key order, and empties the buffer.
    /// Their records are in the journal's frames (the sets' once the pending entries are
    /// written, first thing here): a crash replays them over whatever part
    /// of them the tree file holds, and a failure here replays them into memory
    /// (`undo_uncommitted`). When the modified pages pass their budget midway, the tree is
    /// committed as it stands, once the journal is synced (a tree file may hold a change only
    /// where the journal on disk holds it too, or a replay of an older journal would set its
    /// key back): without a sync, as a spilling batch's is, or durably once the slots held
    /// back for the last durable tree pass `HELD_BACK_SHARE` of the file. In a file larger
    /// than half the memory the drain's pages are placed one after another, in the order it
    /// writes them (`Placement::Sequential`, docs/tree.md "Where a drain writes its pages").
    pub fn drain(&mut self) -> Result<()> {
        self.usable()?;
        if self.buffer.is_empty() {
            return Ok(());
        }
        // Buffered sets are pending entries until a commit: written now (a frame, not
        // synced), so that the undo of a failure below replays them with the batches rather
        // than dropping sets that returned.
        self.commit()?;
        let buffered_bytes = self.buffer.bytes();
        let drained = self.buffer.take_sorted(self.tree.comparator());
        let ops: Vec<BatchOp<'_>> = drained.ops().collect();
        let mut journal_synced = false;
        if self.tree.pager.exceeds_memory() {
            self.tree.pager.set_placement(Placement::Sequential { next: 0, wrapped: false });
        }
        let applied = in_key_order(self, &ops, |store, op| {
            store.apply_op(op, Journaled::Already)?;
            if store.tree.wants_commit() {
                store.commit_drained(&mut journal_synced)?;
            }
            Ok(())
        })
        // A drain that committed midway (a large one) commits its last pages too, so that
        // they are placed as the rest were; a small one leaves them to the next commit, as
        // before, rather than sync the journal for them.
        .and_then(|()| if journal_synced { self.commit_drained(&mut journal_synced) } else { Ok(()) });
        self.tree.pager.set_placement(Placement::BestFit);
        // The buffer's chunks go back to the kernel rather than stay resident in the heap,
        // where a memory limit would count them against the file's cached pages.
        drop(ops);
        drop(drained);
        if buffered_bytes >= crate::freed_memory::WORTH_TRIMMING {
            crate::freed_memory::give_back();
        }
        applied
    }

    /// Commits the tree as a drain left it (`drain`), the journal synced first unless
    /// `journal_synced`: without a sync, or durably once the slots held back for the last
    /// durable tree pass an eighth of the file, so that they are reused (`HELD_BACK_SHARE`).
    fn commit_drained(&mut self, journal_synced: &mut bool) -> Result<()> {
        if !*journal_synced {
            let synced = self.journal.sync_published();
            self.undone_on_failure(synced)?;
            *journal_synced = true;
        }
        let held = self.tree.pager.held_bytes();
        let durable = held > self.tree.pager.used_size() / HELD_BACK_SHARE;
        let committed = self.tree.commit(durable);
        self.undone_on_failure(committed)
    }

    /// A durable batch, journaled before it is applied: its entries written as one frame, the
    /// device set writing it, and then the batch applied, so that the write proceeds while the
    /// leaves are updated and the `fdatasync` after the lock is let go waits only for what is
    /// still in flight. (Applied first, a batch of 1,000 random records in the peers benchmark
    /// waited for its frame after the apply: 10-15% of its time.) Records too large for a page
    /// are refused before anything is journaled, as the apply would refuse them. A failure
    /// while applying it (a damaged page, an I/O error) takes the batch back out: the undo
    /// replays the journal without its entries and then checkpoints, which starts the journal
    /// over without its frame (`undo_uncommitted`), so the batch is absent, as the error says.
    /// (A crash before that checkpoint may replay it: its call had not returned.)
    fn write_batch_journaled_first(&mut self, batch: &WriteBatch) -> Result<()> {
        check_record_sizes(batch)?;
        self.encode_pending(batch);
        // One frame, however large (a batch this path takes is at most a quarter of
        // `checkpoint_bytes`): frames a replay takes only together could be completed by a
        // later commit's frame if writing one of them failed.
        self.commit_to_sync()?;
        self.journal.start_writeback();
        self.unapplied_tail = batch.len();
        let applied = self.apply(batch, Journaled::Already);
        self.unapplied_tail = 0;
        applied?;
        self.after_change()
    }

    /// Encodes every operation of `batch` into the journal's pending entries (the caller
    /// writes them as one frame).
    fn encode_pending(&mut self, batch: &WriteBatch) {
        for op in batch.ops() {
            encode_entry(self.journal.pending_mut(), Entry::from(op));
            self.journal.entry_added();
        }
    }

    /// Applies the operations of `batch` in order; a failure leaves memory and journal back in
    /// line (`undo_uncommitted`) and is returned.
    fn apply(&mut self, batch: &WriteBatch, journaled: Journaled) -> Result<()> {
        if batch.len() > 1 {
            self.tree.read_ahead_leaves_of(batch.ops().map(|op| op.key()));
        }
        let mut group: Vec<BatchOp<'_>> = Vec::with_capacity(WARM_GROUP);
        let mut ops = batch.ops();
        loop {
            group.clear();
            group.extend(ops.by_ref().take(WARM_GROUP));
            if group.is_empty() {
                return Ok(());
            }
            if batch.len() > 1 {
                warm_leaves_of(&self.tree, &group);
            }
            for op in group.drain(..) {
                self.apply_op(op, journaled)?;
            }
        }
    }

    /// Applies one operation of a batch, journaled as `journaled` says; a failure is undone
    /// as `apply` says.
    fn apply_op(&mut self, op: BatchOp<'_>, journaled: Journaled) -> Result<()> {
        let outcome = match (op, journaled) {
            (BatchOp::Set { key, value }, Journaled::AsApplied) => {
                self.process(key, &mut |_| Action::Set(Cow::Borrowed(value)))
            }
            (BatchOp::Remove { key }, Journaled::AsApplied) => self.process(key, &mut |_| Action::Remove),
            (BatchOp::Set { key, value }, Journaled::Already | Journaled::Bypassed) => {
                self.tree.process(key, &mut |_| Action::Set(Cow::Borrowed(value)))
            }
            (BatchOp::Remove { key }, Journaled::Already | Journaled::Bypassed) => {
                self.tree.process(key, &mut |_| Action::Remove)
            }
        };
        self.undone_on_failure(outcome)
    }

    /// Applies a batch that bypasses the journal (`write_batch`), its modified pages bounded by
    /// the budget: a batch larger than memory (a bulk load into a tree that does not fit)
    /// would otherwise hold every page it modifies until its checkpoint. The first time the
    /// budget is passed, the whole batch is written to the journal (frames that a replay takes
    /// only together, journal/mod.rs) and synced; from then on the tree is committed (without a sync)
    /// as it stands whenever the budget is passed again, and the rest applied. A crash then leaves
    /// the journal holding the whole batch, which the next open replays over whatever part of
    /// it the tree holds: the batch stays whole or absent, as LMDB's spilled transactions do.
    /// Once journaled, the batch is committed: a failure after that undoes memory back to the
    /// tree file and replays the journal, the batch included.
    ///
    /// Once the budget is first passed, the rest of the batch is applied in key order (a
    /// stable sort, after the operations already applied, so that later operations on a key
    /// still win): each spill then writes a run of neighbouring leaves, and a leaf is modified
    /// and written about once per batch, not once per spill that happens to touch it. 1M
    /// random records in batches of 100,000 with a 16 MiB cache: in batch order, 30 s wrote
    /// 2.4 GB into a 112 MB file and the load had not finished; sorted, 5.6 s. A batch that
    /// never spills keeps its order: sorted into a tree in memory it loads about 8% faster,
    /// but fills every leaf (each split of an append leaves the left leaf full), and random
    /// writes afterwards split nearly every leaf they touch (the peers benchmark's durable
    /// batches took twice as long, its reads 26% longer).
    ///
    /// In a file larger than half the memory each operation's leaf is asked for a window ahead
    /// of its turn (`LeafReadAhead`), in batch order and in key order alike; in a smaller one,
    /// whose leaves a cold mapping faults in one page at a time, the sorted rest asks for the
    /// 16 leaves after each one it descends to (`BTree::leaves_read_ahead`).
    fn apply_spilling(&mut self, batch: &WriteBatch) -> Result<()> {
        let ops: Vec<BatchOp<'_>> = batch.ops().collect();
        let mut ahead = LeafReadAhead::default();
        for (at, &op) in ops.iter().enumerate() {
            ahead.before(&self.tree, &ops, at);
            self.apply_op(op, Journaled::Bypassed)?;
            if self.tree.wants_commit() {
                self.journal_whole(batch)?;
                self.spill()?;
                let comparator = self.tree.comparator();
                let mut rest: Vec<BatchOp<'_>> = ops.get(at + 1..).unwrap_or_default().to_vec();
                rest.sort_by(|a, b| comparator.compare(a.key(), b.key()));
                if !self.tree.pager.exceeds_memory() {
                    self.tree.leaves_read_ahead = SPILL_READ_AHEAD_LEAVES;
                }
                let applied = self.apply_sorted_rest(&rest);
                self.tree.leaves_read_ahead = 0;
                return applied;
            }
        }
        Ok(())
    }

    /// The rest of a spilling batch, in key order (`apply_spilling`).
    fn apply_sorted_rest(&mut self, rest: &[BatchOp<'_>]) -> Result<()> {
        let mut ahead = LeafReadAhead::default();
        for (at, &op) in rest.iter().enumerate() {
            ahead.before(&self.tree, rest, at);
            self.apply_op(op, Journaled::Bypassed)?;
            if self.tree.wants_commit() {
                self.spill()?;
            }
        }
        Ok(())
    }

    /// Commits the tree as a spilling batch left it. Not synced: the journal holds the whole
    /// batch durably, so a power loss may take the tree back to its last checkpoint, which the
    /// batch is replayed over. (The slots a spill replaces stay held until the batch's
    /// checkpoint.)
    fn spill(&mut self) -> Result<()> {
        let spilled = self.tree.commit(false);
        self.undone_on_failure(spilled)
    }

    /// Writes every operation of `batch` to the (empty) journal as one commit of as many
    /// frames as it takes, and syncs it.
    fn journal_whole(&mut self, batch: &WriteBatch) -> Result<()> {
        for op in batch.ops() {
            encode_entry(self.journal.pending_mut(), Entry::from(op));
            self.journal.entry_added();
            if self.journal.pending_is_large() {
                let written = self.journal.write_pending_continued();
                self.undone_on_failure(written)?;
            }
        }
        self.commit_to_sync()?;
        self.journal.sync_published()
    }

    /// Writes the pending entries as a frame (a commit that survives a killed process).
    pub fn commit(&mut self) -> Result<()> {
        self.usable()?;
        let written = self.journal.write_pending();
        self.undone_on_failure(written)
    }

    /// `commit`, for a commit the caller syncs next (`ticket`).
    pub fn commit_to_sync(&mut self) -> Result<()> {
        self.usable()?;
        let written = self.journal.write_pending_to_sync();
        self.undone_on_failure(written)
    }

    /// What makes the commits so far durable once the tree's lock is released; None when a
    /// checkpoint already did (or nothing was journaled since one).
    pub fn ticket(&self) -> Option<SyncTicket> {
        self.journal.ticket()
    }

    /// After a change: a checkpoint when the journal or the dirty pages grew too large, or the
    /// pending entries written out when they did.
    pub fn after_change(&mut self) -> Result<()> {
        if self.tree.wants_commit() || self.journal.bytes() > self.checkpoint_limit() {
            self.checkpoint()
        } else if self.journal.pending_is_large() {
            self.commit()
        } else {
            Ok(())
        }
    }

    /// Writes every change into the tree file durably and starts the journal over.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.usable()?;
        self.drain()?;
        // Everything stands in the journal file first: a failed tree commit rolls the tree
        // back to the last checkpoint, and the journal is then replayed over it.
        self.commit()?;
        // The frames first: a journal left beside the checkpoint is replayed whole over it
        // (`JournalFile::sync_published`).
        self.journal.sync_published()?;
        let committed = self.tree.commit(true);
        self.undone_on_failure(committed)?;
        self.journal.restart()
    }

    /// Removes every record, durably: the clear is journaled and synced before the empty tree
    /// is published, so that a crash in between cannot replay older entries over it.
    pub fn clear(&mut self) -> Result<()> {
        self.usable()?;
        // The buffered batches come before the clear in the journal, which a replay clears too.
        self.buffer.clear();
        encode_entry(self.journal.pending_mut(), Entry::Clear);
        self.journal.entry_added();
        self.commit_to_sync()?;
        self.journal.sync_published()?;
        let cleared = self.tree.clear();
        self.undone_on_failure(cleared)?;
        self.journal.restart()
    }

    /// A checkpoint, then the journal file removed (a close: the tree file holds everything).
    pub fn close(&mut self) -> Result<()> {
        self.usable()?;
        self.drain()?;
        self.commit()?;
        // Until its removal reaches the directory, the journal may be replayed over the closed
        // file: whole, which changes nothing (`JournalFile::sync_published`).
        self.journal.sync_published()?;
        let closed = self.tree.commit(false).and_then(|()| self.tree.pager.close(false));
        self.undone_on_failure(closed)?;
        self.journal.remove()
    }

    /// `outcome`, after `undo_uncommitted` when it is a failure.
    fn undone_on_failure<T>(&mut self, outcome: Result<T>) -> Result<()> {
        outcome.map(drop).map_err(|e| self.undo_uncommitted(e))
    }

    /// After a change failed midway: the tree back at the last checkpoint, the journal's frames
    /// replayed over it (the pending entries, not yet committed, are dropped). Returns the error
    /// to report: `cause`, or why memory could not be brought back in line with the journal.
    fn undo_uncommitted(&mut self, cause: Error) -> Error {
        self.tree.rollback();
        self.journal.discard_pending();
        // The buffered records are in the journal: batches in their frames, sets in the frames
        // of the commits that wrote them (`drain` writes any still pending before it applies
        // anything); the replay applies them. (A set whose pending entry is dropped here was
        // never committed, as an unbuffered set's would be.)
        self.buffer.clear();
        let path = self.tree.pager.path().to_path_buf();
        // A batch journaled before it was applied, and not wholly applied: left out of the
        // replay, and out of the journal by a checkpoint that starts it over.
        let unapplied = std::mem::take(&mut self.unapplied_tail);
        // The replay may commit the tree file durably (`journal::make_durable`).
        let replayed = journal::make_durable(&path).and_then(|()| journal::recover(&path)).and_then(|recovered| {
            let take = if unapplied == 0 {
                usize::MAX
            } else {
                let entries = recovered.entries().count();
                entries.checked_sub(unapplied).ok_or_else(|| {
                    Error::internal(format!(
                        "a journal of {entries} entries lacks the {unapplied} of the batch it ends with"
                    ))
                })?
            };
            replay_first(&mut self.tree, &recovered, true, take)?;
            if unapplied > 0 {
                self.tree.commit(true)?;
                self.journal.restart()?;
            }
            Ok(())
        });
        match replayed {
            Ok(()) => cause,
            Err(e) => {
                let message = format!(
                    "{}: {}; then replaying its journal failed too: {}; the database refuses every operation \
                     until it is reopened, which replays the journal (every commit is in it{}; if the reopen \
                     reports damage, `kura restore` copies what is readable and replays the journal over the copy)",
                    path.display(),
                    cause.message(),
                    e.message(),
                    if unapplied > 0 { ", and the batch is found whole or absent, as after a crash" } else { "" }
                );
                self.broken = Some((e.kind(), message.clone()));
                Error::new(e.kind(), message)
            }
        }
    }
}

/// Refuses `batch` when a record of it is too large for a page, as applying it would, before
/// anything of it is journaled.
fn check_record_sizes(batch: &WriteBatch) -> Result<()> {
    for op in batch.ops() {
        if let BatchOp::Set { key, value } = op {
            check_record_size(key, value)?;
        }
    }
    Ok(())
}

/// `BTree::warm_leaves` for the operations of `group`.
fn warm_leaves_of(tree: &BTree, group: &[BatchOp<'_>]) {
    let keys: Vec<&[u8]> = group.iter().map(|op| op.key()).collect();
    // What an insert would append: the key and value of a set, nothing for a removal.
    let appended: Vec<usize> =
        group.iter().map(|op| op.value().map_or(0, |value| op.key().len() + value.len())).collect();
    tree.warm_leaves(&keys, &appended);
}

/// Asks for the leaves of a spilling batch's operations a window ahead of the one applied, in
/// a file larger than half the memory (`BTree::read_ahead_leaves_of`, which does nothing in a
/// smaller one): the disk then reads them several at a time while the batch applies the ones
/// before. What it replaces there, the 16 leaves after each one a sorted batch descends to,
/// read every leaf of those runs, which at 100,000 random keys into 8M records (270,000
/// leaves) is three leaves for each one the batch changes.
#[derive(Default)]
struct LeafReadAhead {
    /// Operations before this one have had their leaves asked for.
    asked_until: usize,
}

impl LeafReadAhead {
    /// Before operation `at` of `ops` is applied: asks for the leaves of `next(len, at)`.
    fn before(&mut self, tree: &BTree, ops: &[BatchOp<'_>], at: usize) {
        if let Some(range) = self.next(ops.len(), at) {
            tree.read_ahead_leaves_of(ops.get(range).unwrap_or_default().iter().map(|op| op.key()));
        }
    }

    /// The operations (of `len`) to ask for before operation `at`, once half the window is
    /// used up: from the first not yet asked for up to a window past `at`.
    fn next(&mut self, len: usize, at: usize) -> Option<std::ops::Range<usize>> {
        if self.asked_until >= len || at + READ_AHEAD_OPS / 2 < self.asked_until {
            return None;
        }
        let from = self.asked_until.max(at);
        let until = (at + READ_AHEAD_OPS).min(len);
        self.asked_until = until;
        Some(from..until)
    }
}

/// What `in_key_order` applies operations to: the store (draining its buffer) or the bare tree
/// (a replay at open).
trait HoldsTree {
    fn tree(&self) -> &BTree;
}

impl HoldsTree for Store {
    fn tree(&self) -> &BTree {
        &self.tree
    }
}

impl HoldsTree for BTree {
    fn tree(&self) -> &BTree {
        self
    }
}

/// Runs `apply` on each of `ops`, sorted by key: each group's leaves warmed together first
/// (`warm_leaves_of`), and the leaves of the operations a window ahead asked from the disk
/// (`LeafReadAhead`), so that each leaf is read once for all its operations, several at a time.
fn in_key_order<S: HoldsTree>(
    state: &mut S,
    ops: &[BatchOp<'_>],
    mut apply: impl FnMut(&mut S, BatchOp<'_>) -> Result<()>,
) -> Result<()> {
    let mut ahead = LeafReadAhead::default();
    for (group_start, group) in ops.chunks(WARM_GROUP).enumerate().map(|(i, g)| (i * WARM_GROUP, g)) {
        // The group's leaves asked from the disk before the warming descends to them.
        ahead.before(state.tree(), ops, group_start);
        warm_leaves_of(state.tree(), group);
        for (offset, &op) in group.iter().enumerate() {
            ahead.before(state.tree(), ops, group_start + offset);
            apply(state, op)?;
        }
    }
    Ok(())
}

/// Applies the journal's entries to `tree`. A reader (`writable` false) applies a clear in
/// memory only.
pub fn replay(tree: &mut BTree, recovered: &Recovered, writable: bool) -> Result<()> {
    replay_first(tree, recovered, writable, usize::MAX)
}

/// `replay` of the first `take` entries only.
///
/// Each key is set to the state its last entry left it in, in key order (`in_key_order`): the
/// entries are blind writes, so the last of a key's entries alone gives the state all of them
/// give in turn, and a clear drops whatever came before it. In journal order, every entry of a
/// file larger than the memory waited for its own leaf from the disk: the open after a crash
/// that left 108 MB of a write buffer's batches in the journal (8M records, under 512 MiB, the
/// page cache dropped) took 98 s, against 14.8 s in key order.
fn replay_first(tree: &mut BTree, recovered: &Recovered, writable: bool, take: usize) -> Result<()> {
    let entries: Vec<Entry<'_>> = recovered.entries().take(take).collect::<Result<_>>()?;
    let after_clear = match entries.iter().rposition(|entry| *entry == Entry::Clear) {
        Some(last_clear) => {
            if writable {
                tree.clear()?;
            } else {
                tree.empty_in_memory();
            }
            last_clear + 1
        }
        None => 0,
    };
    // (No clear is left after the last one.)
    let mut ops: Vec<BatchOp<'_>> =
        entries.get(after_clear..).unwrap_or_default().iter().filter_map(|&entry| entry.batch_op()).collect();
    let comparator = tree.comparator();
    // Stable: a key's operations keep their journal order, and of each run of one key's, the
    // last (moved into the place of the first) is the one kept.
    ops.sort_by(|a, b| comparator.compare(a.key(), b.key()));
    ops.dedup_by(|later, kept| {
        let same_key = comparator.compare(later.key(), kept.key()).is_eq();
        if same_key {
            *kept = *later;
        }
        same_key
    });
    in_key_order(tree, &ops, |tree, op| {
        match op {
            BatchOp::Set { key, value } => {
                tree.process(key, &mut |_| Action::Set(Cow::Borrowed(value)))?;
            }
            BatchOp::Remove { key } => {
                tree.process(key, &mut |_| Action::Remove)?;
            }
        }
        if writable && tree.wants_commit() {
            // The journal is still whole on disk: a crash now replays all of it again.
            tree.commit(true)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation is asked for once, in order, before its turn, and never more than a
    /// window ahead of the operation applied.
    #[test]
    fn read_ahead_asks_for_each_operation_once_and_in_time() {
        for len in [0, 1, 2, READ_AHEAD_OPS / 2, READ_AHEAD_OPS - 1, READ_AHEAD_OPS, 1_000, 1_001] {
            let mut ahead = LeafReadAhead::default();
            let mut asked = 0;
            for at in 0..len {
                if let Some(range) = ahead.next(len, at) {
                    assert_eq!(range.start, asked.max(at), "len {len}: a gap or an overlap before {at}");
                    assert!(range.end <= at + READ_AHEAD_OPS && range.end <= len, "len {len}: too far at {at}");
                    asked = range.end;
                }
                assert!(asked > at, "len {len}: operation {at} applied before it was asked for");
                assert!(asked >= (at + READ_AHEAD_OPS / 2).min(len), "len {len}: the window ran low at {at}");
            }
            assert_eq!(asked, len);
        }
    }
}
