//! A commit's entries collected before they go to the journal as frames: TreeDbm's writer,
//! which applies a commit's changes to its tree first and journals them at the commit.
//!
//! A commit larger than `MAX_PENDING_BYTES` goes out as several frames, all but the last
//! marked `CONTINUED`; the writer holding a `Journal` is its file's only writer, so those
//! frames lie one after the other.

use std::path::Path;
use std::sync::Arc;

use super::writer::{JournalFile, SyncState, SyncTicket};
use super::FRAME_HEADER_SIZE;
use crate::error::Result;
use crate::file::AppendWrite;

/// Pending entries beyond this are written out as a frame before the next one is added, so
/// that a long run of sets without a commit does not hold its whole journal in memory.
const MAX_PENDING_BYTES: usize = 1 << 20;

/// The open journal of a single writer: the file and the entries not yet written to it.
#[derive(Debug)]
pub struct Journal {
    file: JournalFile,
    /// Room for a frame's header, then the entries encoded since the last frame was written:
    /// a frame is copied into the file from here in one piece.
    pending: Vec<u8>,
    pending_entries: u32,
}

impl Journal {
    /// The journal of the database file at `db_path`. Its file is created by the first frame.
    pub fn new(db_path: &Path) -> Journal {
        Journal { file: JournalFile::new(db_path), pending: vec![0; FRAME_HEADER_SIZE], pending_entries: 0 }
    }

    /// Bytes of the journal file in use (0 while it has no frame).
    pub fn bytes(&self) -> u64 {
        self.file.bytes()
    }

    /// The `fdatasync`s durable commits made of the journal since the database opened.
    pub fn syncs(&self) -> u64 {
        self.file.syncs()
    }

    /// The sync state shared with committers outside the database's lock.
    pub fn sync_state(&self) -> Arc<SyncState> {
        self.file.sync_state()
    }

    /// What a commit that wrote its frame needs to make it durable outside the database's lock:
    /// None when nothing it wrote waits for a sync (no frame since the last checkpoint).
    pub fn ticket(&self) -> Option<SyncTicket> {
        self.file.ticket()
    }

    /// Makes every frame written so far durable (`JournalFile::sync_published`): before a
    /// checkpoint or a close writes the tree file with their changes.
    pub fn sync_published(&self) -> Result<()> {
        self.file.sync_published()
    }

    /// The pending entries' buffer, to encode one more entry into (`entry_added` after).
    pub fn pending_mut(&mut self) -> &mut Vec<u8> {
        &mut self.pending
    }

    /// Counts an entry encoded into `pending_mut`.
    pub fn entry_added(&mut self) {
        self.pending_entries += 1;
    }

    /// Whether the pending entries should be written out now (see `MAX_PENDING_BYTES`).
    pub fn pending_is_large(&self) -> bool {
        self.pending.len() > FRAME_HEADER_SIZE + MAX_PENDING_BYTES
    }

    /// Drops the pending entries (their changes are in a checkpoint, or were undone).
    pub fn discard_pending(&mut self) {
        self.pending.truncate(FRAME_HEADER_SIZE);
        self.pending_entries = 0;
    }

    /// Writes the pending entries as one frame (without syncing), copied in through the
    /// mapping: the commit reaches the page cache without a system call.
    pub fn write_pending(&mut self) -> Result<()> {
        self.write_pending_as(false, AppendWrite::Mapped)
    }

    /// `write_pending` for a commit about to be synced: the frame is written with `pwrite`
    /// (see `AppendWrite::Through` for why).
    pub fn write_pending_to_sync(&mut self) -> Result<()> {
        self.write_pending_as(false, AppendWrite::Through)
    }

    /// Starts the device writing the frames written so far, without waiting (a commit that
    /// is synced once the work between is done: `JournalFile::start_writeback`).
    pub fn start_writeback(&self) {
        self.file.start_writeback();
    }

    /// Writes the pending entries as a frame of a commit that the next frame continues: a
    /// replay takes it only together with the frames after it up to one written by
    /// `write_pending` or `write_pending_to_sync` (a batch too large for one frame).
    pub fn write_pending_continued(&mut self) -> Result<()> {
        self.write_pending_as(true, AppendWrite::Through)
    }

    fn write_pending_as(&mut self, continued: bool, how: AppendWrite) -> Result<()> {
        if self.pending_entries == 0 {
            return Ok(());
        }
        self.file.append_frame(&mut self.pending, self.pending_entries, continued, how)?;
        self.discard_pending();
        Ok(())
    }

    /// Starts the journal over, empty, with a new salt, and makes that durable: called right
    /// after a checkpoint made every change the journal held durable in the database file.
    pub fn restart(&mut self) -> Result<()> {
        self.discard_pending();
        self.file.restart_after(|| Ok(()))
    }

    /// Removes the journal file (after a close made its changes durable in the tree file).
    pub fn remove(&mut self) -> Result<()> {
        self.discard_pending();
        self.file.remove()
    }
}
