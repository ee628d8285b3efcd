//! HashDbm's write-ahead journal: durable commits at one `fdatasync`, atomic write batches.
//!
//! Without it, a durable commit synced the mapped file: a batch of 1,000 new keys dirtied
//! about 1,000 random pages of the bucket array, each written by the sync and write-faulted
//! again by the next batch (6 ms of `fdatasync` and 3 ms of faults a batch at 1M records). With
//! it, every change is also appended to `<file>.journal` (crate::journal), and a durable commit
//! syncs that file only. The database file is made durable at checkpoints: today's hard
//! synchronization (`Storage::synchronize(true)`, which also settles the records freed since
//! the last one), after which the journal starts over. A checkpoint runs when the journal
//! passes `checkpoint_bytes`, when the freed records are due one (freed.rs), before a batch too
//! large for the journal, and at close (which removes the journal).
//!
//! What a crash leaves: the file as of its last checkpoint with any of the pages written since
//! (the crash contract HashDbm kept before the journal: every record of that state intact,
//! each record modified since its old value or one written since), restored at the next open
//! as before; then the journal's whole frames are replayed over it. Entries are blind writes
//! (journal/mod.rs), so a replay over a file that already holds some of them ends in their state.
//!
//! Ordering, so that a replay never undoes a later change of the same key: a single write
//! applies and then appends its entry, and a batch appends its frame and then applies it,
//! each under the stripe locks of its keys, so that the journal holds the changes of one key
//! in the order they were applied. A single write's frame goes into the journal with no lock
//! of the journal's (journal/writer.rs: one reservation of its bytes, published in order), so
//! that two threads' sets do not queue behind each other. A batch holds `commit` from its
//! frame until its last change is applied; a checkpoint holds `commit`, and the journal alone
//! (new frames wait), from before the file's sync until the journal restarted. So a
//! checkpoint never drops a frame whose changes the synced file lacks: a single write whose
//! frame went in before the checkpoint held the journal was applied before the sync, and a
//! batch's frame and changes are both before it or both after. Lock order: the header lock,
//! then stripes (ascending), then `commit`, then the journal held alone.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, RwLockWriteGuard};

use super::chain_lock::ChainMut;
use super::header::UpdateMode;
use super::storage::{bucket_of, hash_key};
use super::{check_key, stripe_of, HashDbm};
use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};
use crate::file::AppendWrite;
use crate::journal::{self, encode_entry, Entry, JournalFile, Recovered, SyncTicket, FRAME_HEADER_SIZE};
use crate::multi_get::LockSet;

/// A batch's frame buffer is kept for the next batch up to this capacity.
const BATCH_BUFFER_KEPT: usize = 1 << 20;

/// A writer's journal and what decides its checkpoints.
#[derive(Debug)]
pub(super) struct HashJournal {
    file: JournalFile,
    /// A batch's frame buffer (room for the frame's header, then its entries), held from the
    /// frame until the batch is applied; a checkpoint holds it too (see the module comment).
    commit: Mutex<Vec<u8>>,
    checkpoint_bytes: u64,
    /// Set when a batch too large for the journal changed the file since the last checkpoint
    /// without an entry: the next durable commit must then be a checkpoint.
    unjournaled: AtomicBool,
}

impl HashJournal {
    pub fn new(db_path: &std::path::Path, checkpoint_bytes: u64) -> HashJournal {
        HashJournal {
            file: JournalFile::new(db_path),
            commit: Mutex::new(Vec::new()),
            checkpoint_bytes,
            unjournaled: AtomicBool::new(false),
        }
    }

    /// Appends one change as a frame of its own (into the page cache: a killed process loses
    /// nothing that returned). Returns whether the journal is due a checkpoint.
    pub fn log(&self, entry: Entry<'_>) -> Result<bool> {
        let bytes = self.file.append_entry(entry)?;
        Ok(bytes > self.checkpoint_bytes)
    }

    /// Bytes of the journal file in use, and the `fdatasync`s durable commits made of it
    /// (`inspect`'s `journal_bytes` and `journal_syncs`).
    pub fn usage(&self) -> (u64, u64) {
        (self.file.bytes(), self.file.syncs())
    }

    /// Whether a batch of `bytes` bytes is too large for the journal: applied without entries
    /// after a checkpoint, and made durable by the next.
    fn bypasses(&self, bytes: usize) -> bool {
        bytes as u64 > self.checkpoint_bytes / 4
    }
}

/// One operation of a batch, its key's hash and bucket picked before the stripes are locked.
struct Planned<'b> {
    op: BatchOp<'b>,
    hash: u64,
    bucket: u64,
}

impl HashDbm {
    /// Applies `batch` atomically: readers see none of it or all of it (its stripes are held
    /// throughout), and a killed process leaves all of it or none (its frame is written before
    /// its first change). `durable`: the frame is synced before this returns.
    pub(super) fn write_batch_journaled(&self, journal: &HashJournal, batch: &WriteBatch, durable: bool) -> Result<()> {
        self.check_writable()?;
        for op in batch.ops() {
            check_key(op.key())?;
        }
        if journal.bypasses(batch.byte_size()) {
            return self.write_batch_bypassing(journal, batch, durable);
        }
        let (due, ticket) = self.with_batch_locked(batch, None, |applying| {
            let mut frame = journal.commit.lock();
            frame.clear();
            frame.resize(FRAME_HEADER_SIZE, 0);
            for op in batch.ops() {
                encode_entry(&mut frame, Entry::from(op));
            }
            let count = u32::try_from(batch.len()).unwrap_or(u32::MAX);
            let how = if durable { AppendWrite::Through } else { AppendWrite::Mapped };
            let position = journal.file.append_frame(&mut frame, count, false, how);
            if frame.capacity() > BATCH_BUFFER_KEPT {
                *frame = Vec::new();
            }
            let position = position?;
            applying()?;
            Ok((
                journal.file.bytes() > journal.checkpoint_bytes,
                durable.then(|| journal.file.ticket_for(position)).flatten(),
            ))
        })?;
        let checkpointed = match ticket {
            Some(ticket) => self.make_durable(journal, Some(ticket))?,
            None => false,
        };
        self.checkpoint_if_due(due && !checkpointed)
    }

    /// A batch larger than a quarter of `checkpoint_bytes` (a bulk load): a checkpoint first,
    /// under the header lock and the batch's stripes, so that no entry older than the batch is
    /// left in the journal to be replayed over it; then the batch is applied without a frame,
    /// atomic for readers but not across a crash (a prefix of it may survive), and the file is
    /// due a checkpoint before the next durable commit returns.
    ///
    /// In place, the operations of the keys the batch removes are still journaled, each as it
    /// is applied: a restore after a crash scans the record area (restore.rs), where a record
    /// removed since the last checkpoint still looks live (its tag is marked dead only at the
    /// next: freed.rs), and the replay of these entries removes it again. Without them a
    /// killed process brought back a key that a returned batch had removed. Every operation of
    /// such a key is journaled, not only its removal, so that a replay ends in its state after
    /// the same prefix of the batch (a set after the removal included); keys the batch only
    /// sets need no entry, since their new record heads their chain.
    fn write_batch_bypassing(&self, journal: &HashJournal, batch: &WriteBatch, durable: bool) -> Result<()> {
        let header = self.header_lock.lock();
        // In appending mode a removal is a tombstone, which the scan takes as the key's state.
        let in_place = self.storage_ref()?.header.update_mode == UpdateMode::InPlace;
        let (settle, journal_due) = self.with_batch_locked(batch, in_place.then_some(journal), |applying| {
            let _commit = journal.commit.lock();
            journal.file.restart_after(|| self.storage_ref()?.synchronize(true))?;
            journal.unjournaled.store(true, Ordering::Release);
            let journal_due = applying()?;
            Ok((self.storage_ref()?.settle_due(), journal_due))
        })?;
        let due = settle || journal_due;
        drop(header);
        if durable || due {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Runs `body` with the stripes of every key of `batch` locked exclusively (taken once
    /// each, ascending, as `multi_get::LockSet` explains); `body` gets the function that
    /// applies the batch's operations in order, each under its key's stripe. With
    /// `ops_of_removed_keys_to`, every operation of a key the batch removes is appended to that
    /// journal right after it is applied (`write_batch_bypassing` says why), and the function
    /// returns whether the journal is then due a checkpoint.
    fn with_batch_locked<R>(
        &self,
        batch: &WriteBatch,
        ops_of_removed_keys_to: Option<&HashJournal>,
        body: impl FnOnce(&mut dyn FnMut() -> Result<bool>) -> Result<R>,
    ) -> Result<R> {
        let removed: HashSet<&[u8]> = match ops_of_removed_keys_to {
            Some(_) => batch.ops().filter(|op| op.value().is_none()).map(|op| op.key()).collect(),
            None => HashSet::new(),
        };
        let mut body = Some(body);
        let mut planned: Vec<Planned<'_>> = Vec::with_capacity(batch.len());
        let mut stripes = LockSet::default();
        loop {
            let num_buckets = self.num_buckets.load(Ordering::Acquire);
            planned.clear();
            for op in batch.ops() {
                let hash = hash_key(op.key());
                let bucket = bucket_of(hash, num_buckets);
                stripes.insert(stripe_of(bucket));
                planned.push(Planned { op, hash, bucket });
            }
            let order = stripes.order();
            let guards: Vec<RwLockWriteGuard<'_, ()>> =
                order.iter().filter_map(|stripe| self.stripes.get(stripe)).map(|lock| lock.write()).collect();
            if self.num_buckets.load(Ordering::Acquire) != num_buckets {
                // A rebuild ran in between: the buckets were picked for the old file.
                continue;
            }
            let storage = self.storage_ref()?;
            let mut applying = || -> Result<bool> {
                let mut journal_due = false;
                for plan in &planned {
                    let guard = order
                        .position(stripe_of(plan.bucket))
                        .and_then(|at| guards.get(at))
                        .ok_or_else(|| Error::internal("write_batch takes the stripe lock of every key it writes"))?;
                    let chain = ChainMut::exclusive(guard, plan.bucket);
                    let key = plan.op.key();
                    let found = storage.find(chain.read(), key, plan.hash)?;
                    Self::apply_write(storage, &chain, key, plan.hash, plan.op.value(), found)?;
                    if let Some(journal) = ops_of_removed_keys_to {
                        if removed.contains(key) {
                            journal_due |= journal.log(Entry::from(plan.op))?;
                        }
                    }
                }
                Ok(journal_due)
            };
            let body = body.take().ok_or_else(|| Error::internal("write_batch applies its batch once"))?;
            return body(&mut applying);
        }
    }

    /// Makes every change so far durable: one `fdatasync` of the journal, shared with the
    /// commits of other threads written before it started; a checkpoint instead when a batch
    /// bypassed the journal since the last one.
    pub(super) fn sync_journal(&self, journal: &HashJournal) -> Result<()> {
        self.make_durable(journal, journal.file.ticket()).map(drop)
    }

    /// Makes the commits up to `ticket` durable: one `fdatasync` of the journal, or a
    /// checkpoint when a batch bypassed the journal since the last one, since that batch is in
    /// the file only (a durable batch that synced the journal alone returned with such a
    /// batch before it not durable: the power-loss test with durable batches found its keys
    /// back at their values before it). Returns whether it checkpointed.
    fn make_durable(&self, journal: &HashJournal, ticket: Option<SyncTicket>) -> Result<bool> {
        if journal.unjournaled.load(Ordering::Acquire) {
            self.checkpoint()?;
            return Ok(true);
        }
        if let Some(ticket) = ticket {
            journal.file.sync(&ticket)?;
        }
        Ok(false)
    }

    /// Makes the file durable as it is (a hard synchronization, which also hands the space of
    /// the records freed since the last one back for reuse), then starts the journal over.
    /// Writes call it by themselves when the journal passes `checkpoint_bytes` or the freed
    /// space is due (freed.rs); `synchronize(true)` syncs the journal only.
    pub fn checkpoint(&self) -> Result<()> {
        let _header = self.header_lock.lock();
        self.with_any(|s| match &self.journal {
            Some(journal) => {
                let _commit = journal.commit.lock();
                journal.file.restart_after(|| s.synchronize(true))?;
                journal.unjournaled.store(false, Ordering::Release);
                Ok(())
            }
            None => s.synchronize(true),
        })
    }

    /// A checkpoint, when a write found one due (after it released its locks).
    pub(super) fn checkpoint_if_due(&self, due: bool) -> Result<()> {
        if due {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// After a rebuild or a clear replaced or emptied the file (every stripe held): what the
    /// journal held is in the file, or gone with it, so it starts over.
    pub(super) fn journal_restarted(&self) -> Result<()> {
        match &self.journal {
            Some(journal) => {
                let _commit = journal.commit.lock();
                journal.file.restart_after(|| Ok(()))?;
                journal.unjournaled.store(false, Ordering::Release);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Logs a clear, before it is applied (every stripe held): a replay then clears too.
    pub(super) fn log_clear(&self) -> Result<()> {
        match &self.journal {
            Some(journal) => journal.log(Entry::Clear).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Makes the journal's frames durable before a close writes the file with their changes:
    /// until its removal reaches the directory, the journal may be replayed over the closed
    /// file, which changes nothing only when it is replayed whole
    /// (`JournalFile::sync_published`).
    pub(super) fn sync_journal_before_close(&self) -> Result<()> {
        match &self.journal {
            Some(journal) => journal.file.sync_published(),
            None => Ok(()),
        }
    }

    /// Removes the journal after a close made the file durable.
    pub(super) fn remove_journal(&self) -> Result<()> {
        match &self.journal {
            Some(journal) => journal.file.remove(),
            None => Ok(()),
        }
    }

    /// Replays `recovered` (a journal's whole frames) through the ordinary writes, while the
    /// database has no journal of its own yet.
    pub(super) fn replay(&self, recovered: &Recovered) -> Result<()> {
        debug_assert!(self.journal.is_none(), "a replay must not journal its writes again");
        for entry in recovered.entries() {
            match entry? {
                Entry::Set { key, value } => crate::dbm::Dbm::set(self, key, value, true)?,
                Entry::Remove { key } => match crate::dbm::Dbm::remove(self, key) {
                    Err(e) if e.is_not_found() => {}
                    other => other?,
                },
                Entry::Clear => crate::dbm::Dbm::clear(self)?,
            }
        }
        Ok(())
    }

    /// Opens the journal of a writable database, after replaying what a crash left in it.
    pub(super) fn start_journal(&mut self, checkpoint_bytes: u64) -> Result<()> {
        let recovered = journal::recover(&self.path)?;
        self.replay(&recovered).map_err(|e| {
            let path = journal::journal_path(&self.path);
            Error::new(e.kind(), format!("{}: replaying it failed: {}", path.display(), e.message()))
        })?;
        let journal = HashJournal::new(&self.path, checkpoint_bytes);
        let replayed = !recovered.is_empty() || recovered.dropped_bytes > 0;
        if !replayed {
            // The journal exists from the start, so that every checkpoint shows as a new salt
            // in its header (the power-loss simulation follows checkpoints by it).
            journal.file.create_now()?;
        }
        self.journal = Some(journal);
        if replayed {
            // What was replayed becomes durable in the file, the records it removed marked
            // dead, and only then does the journal start over (the checkpoint opens it after
            // the file's sync: `JournalFile::restart_after`). Started over first, a journal
            // under a new salt left the replay's removals to the next restore's scan, which
            // found their records live: a writer killed in this open, after a writer killed
            // after a removal, brought the removed key back; and a power loss there lost
            // durable commits the journal alone held.
            self.checkpoint()?;
        }
        Ok(())
    }
}
