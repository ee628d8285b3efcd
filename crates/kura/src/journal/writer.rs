//! The journal file of a writer: frames appended from many threads at once, group commit, and
//! starting over after a checkpoint.
//!
//! A frame goes in with one reservation of the file's bytes (file/appender.rs): its checksum
//! is seeded with the offset the reservation got, and the frame is copied in and published in
//! reservation order, so that a frame which returned has every earlier frame whole behind it
//! (the replay stops at the first frame that fails). HashDbm's single writes append their own
//! frames this way, with no lock of the journal's; TreeDbm's commits, and HashDbm's batches,
//! come through `Journal` (pending.rs), which collects a commit's entries first.
//!
//! Positions: a frame's position is the count of frame bytes published before its end since
//! the writer opened the database, across the journal's restarts (`Published::position`); a
//! durable commit waits until the synced position reaches its own (`SyncState`), so one
//! `fdatasync` serves every commit whose frame was published before it started.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::{encode_header, frame_checksum, journal_path, new_salt, Entry};
use super::{CONTINUED, FRAME_CHECKSUM_FIELD, FRAME_COUNT_FIELD, FRAME_HEADER_SIZE, FRAME_LEN_FIELD, HEADER_SIZE};
use crate::encoding::HeaderBytes;
use crate::error::{Error, ErrorKind, Result};
use crate::file::{AppendWrite, Exclusive, MappedAppender, Published};

/// The journal file grows by zeros written this far ahead of its frames, and is reused, not
/// truncated, when it starts over (up to `MAX_RECYCLED_BYTES`). Why: a frame then overwrites
/// blocks the file already has, so its `fdatasync` writes the data and flushes the device,
/// with no change of the file's size or extents for the file system to commit first (on
/// ext4 a commit into a growing file cost a journal commit of its own). RocksDB recycles its
/// log files for the same reason.
const GROWTH_BYTES: u64 = 1 << 20;
const MAX_RECYCLED_BYTES: u64 = 64 << 20;

/// A position in the journal's stream of frames (see the module comment).
pub type Position = u64;

/// How far the journal is synced: shared between the writers and the committers that sync
/// outside the database's lock (group commit).
#[derive(Debug, Default)]
pub struct SyncState {
    synced: Mutex<Position>,
    /// The `fdatasync`s that succeeded so far (`inspect`'s `journal_syncs`): fewer than the
    /// durable commits when commits share one.
    syncs: AtomicU64,
    /// Set when an fdatasync failed: the kernel may have dropped the dirty pages it could not
    /// write, so a later sync that succeeds proves nothing. Every durable commit fails from then.
    failed: AtomicBool,
}

/// What a committer needs to make its frame durable once it let go of the database's lock.
#[derive(Debug)]
pub struct SyncTicket {
    appender: Arc<MappedAppender>,
    position: Position,
}

impl SyncState {
    /// Makes every frame up to the ticket's position durable: one `fdatasync`, unless a sync
    /// that started after the frame was published already covered it.
    pub fn sync(&self, ticket: &SyncTicket) -> Result<()> {
        let mut synced = self.synced.lock();
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{}: an earlier fdatasync failed; close and reopen the database",
                    ticket.appender.path().display()
                ),
            ));
        }
        if *synced >= ticket.position {
            return Ok(());
        }
        // Every frame published before the sync starts is covered by it.
        let target = ticket.appender.published().max(ticket.position);
        if let Err(e) = ticket.appender.sync_data() {
            self.failed.store(true, Ordering::Release);
            return Err(e);
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        *synced = target;
        Ok(())
    }

    /// The `fdatasync`s `sync` made so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Every frame published so far is durable (a checkpoint, or a restart that synced).
    fn all_durable(&self, published: Position) {
        let mut synced = self.synced.lock();
        *synced = (*synced).max(published);
    }
}

/// The journal file once it exists.
#[derive(Debug)]
struct Opened {
    appender: Arc<MappedAppender>,
}

/// The journal file of the database file at `db_path`, created by its first frame (or
/// `create_now`).
#[derive(Debug)]
pub struct JournalFile {
    path: PathBuf,
    sync: Arc<SyncState>,
    opened: OnceLock<Opened>,
    /// Serializes the file's creation.
    creating: Mutex<()>,
    /// The salt of the frames written now. Changed only while the appender is held alone.
    salt: AtomicU64,
    /// Set by `remove`: the file is gone, and no frame may be written again.
    removed: AtomicBool,
}

impl JournalFile {
    pub fn new(db_path: &Path) -> JournalFile {
        JournalFile {
            path: journal_path(db_path),
            sync: Arc::new(SyncState::default()),
            opened: OnceLock::new(),
            creating: Mutex::new(()),
            salt: AtomicU64::new(0),
            removed: AtomicBool::new(false),
        }
    }

    /// The sync state shared with committers outside the database's lock.
    pub fn sync_state(&self) -> Arc<SyncState> {
        Arc::clone(&self.sync)
    }

    /// Makes every frame up to the ticket's position durable (`SyncState::sync`).
    pub fn sync(&self, ticket: &SyncTicket) -> Result<()> {
        self.sync.sync(ticket)
    }

    /// The `fdatasync`s durable commits made of this journal since the database opened.
    pub fn syncs(&self) -> u64 {
        self.sync.syncs()
    }

    /// Starts the device writing the frames published so far (`MappedAppender::start_writeback`),
    /// for a commit that syncs them later.
    pub fn start_writeback(&self) {
        if let Some(opened) = self.opened.get() {
            opened.appender.start_writeback();
        }
    }

    /// Bytes of the journal file in use (0 while it has no frame).
    pub fn bytes(&self) -> u64 {
        match self.opened.get() {
            Some(opened) if opened.appender.end() > HEADER_SIZE as u64 => opened.appender.end(),
            _ => 0,
        }
    }

    /// What makes every frame published so far durable, once the caller let go of the
    /// database's lock: None when no frame waits for a sync (none since the last checkpoint).
    pub fn ticket(&self) -> Option<SyncTicket> {
        let opened = self.opened.get()?;
        (opened.appender.end() > HEADER_SIZE as u64).then(|| self.ticket_at(opened, opened.appender.published()))
    }

    /// Makes every frame published so far durable: one `fdatasync`, none when a sync already
    /// covered them. The first step of a checkpoint and of a close, before the database file
    /// is written with every change the frames hold.
    ///
    /// Why: the journal outlives that write until its restart (or, at a close, its removal)
    /// is durable, and a power loss in between leaves it to be replayed over a database file
    /// that already holds its frames. Replaying all of them changes nothing there; replaying
    /// the prefix that writeback happened to put on the disk (frames written without a sync
    /// reach it in any order, and the replay stops at the first missing one) would set a key
    /// rewritten after that prefix back to its older value. Found by the power-loss test that
    /// cuts a checkpoint at each of its syncs (tests/power_loss.rs).
    pub fn sync_published(&self) -> Result<()> {
        match self.ticket() {
            Some(ticket) => self.sync.sync(&ticket),
            None => Ok(()),
        }
    }

    fn ticket_at(&self, opened: &Opened, position: Position) -> SyncTicket {
        SyncTicket { appender: Arc::clone(&opened.appender), position }
    }

    /// The journal file, created (with a header) if it does not exist yet.
    fn opened(&self) -> Result<&Opened> {
        if self.removed.load(Ordering::Acquire) {
            return Err(Error::infeasible(format!("{}: the database is closed", self.path.display())));
        }
        if let Some(opened) = self.opened.get() {
            return Ok(opened);
        }
        let _creating = self.creating.lock();
        if let Some(opened) = self.opened.get() {
            return Ok(opened);
        }
        let io = |what: &str, e| Error::io(format!("{what} {}", self.path.display()), e);
        let file = Arc::new(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&self.path)
                .map_err(|e| io("create", e))?,
        );
        let appender = MappedAppender::new(file, &self.path, HEADER_SIZE as u64, GROWTH_BYTES)?;
        let opened = Opened { appender: Arc::new(appender) };
        self.start(&mut opened.appender.exclusive(), true)?;
        Ok(self.opened.get_or_init(|| opened))
    }

    /// Creates the journal file now, empty, if it does not exist yet (it is otherwise created
    /// by the first frame): a writer whose checkpoints must show in the file from the start.
    pub fn create_now(&self) -> Result<()> {
        self.opened().map(drop)
    }

    /// Appends `entry` as a frame of its own (into the page cache: a killed process loses
    /// nothing that returned). Returns the journal's bytes in use after it.
    ///
    /// The frame is built in a buffer of the calling thread's and copied in whole: the last
    /// bytes of the journal are where every writer's frame goes, and a cache line another
    /// core is writing costs a transfer for every access, so the frame's bytes are read (by
    /// the checksum) in a line of its own thread's and written to the journal's only once.
    pub fn append_entry(&self, entry: Entry<'_>) -> Result<u64> {
        thread_local! {
            static FRAME: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let opened = self.opened()?;
        FRAME.with_borrow_mut(|frame| {
            frame.clear();
            frame.resize(FRAME_HEADER_SIZE, 0);
            super::encode_entry(frame, entry);
            let appended = self.append(opened, frame, 1, AppendWrite::Mapped);
            if frame.capacity() > THREAD_FRAME_KEPT {
                *frame = Vec::new();
            }
            appended.map(|appended| appended.end)
        })
    }

    /// Appends a frame built in `frame`: `FRAME_HEADER_SIZE` bytes of room for its header,
    /// then the payload of `count` entries; `continued` when the next frame continues the same
    /// commit (the caller is then the journal's only writer until that commit's last frame).
    /// Returns the position after it.
    pub fn append_frame(&self, frame: &mut [u8], count: u32, continued: bool, how: AppendWrite) -> Result<Position> {
        if count >= CONTINUED {
            return Err(Error::new(ErrorKind::Limit, "a journal frame of 2^31 entries or more"));
        }
        let count = if continued { count | CONTINUED } else { count };
        let opened = self.opened()?;
        self.append(opened, frame, count, how).map(|appended| appended.position)
    }

    /// Appends the frame in `frame` (room for its header, then the payload of `count`
    /// entries): reserved, its checksum seeded with where it landed, copied in, published.
    fn append(&self, opened: &Opened, frame: &mut [u8], count: u32, how: AppendWrite) -> Result<Published> {
        let payload_len = frame
            .len()
            .checked_sub(FRAME_HEADER_SIZE)
            .ok_or_else(|| Error::internal("a journal frame is built behind room for its header"))?;
        let len = frame_len_field(payload_len)?;
        let reservation = opened.appender.reserve(frame.len())?;
        // The salt changes only while the appender is held alone, which waits for this
        // reservation: it is the salt of the file's current header.
        let salt = self.salt.load(Ordering::Acquire);
        let (head, payload) = frame.split_at_mut(FRAME_HEADER_SIZE);
        head.copy_from_slice(&frame_header(salt, reservation.offset(), len, count, payload));
        reservation.write(frame, how)
    }

    /// A ticket for the frames up to `position` (a committer's own frame).
    pub fn ticket_for(&self, position: Position) -> Option<SyncTicket> {
        self.opened.get().map(|opened| self.ticket_at(opened, position))
    }

    /// Holds the journal alone (no frame in flight, new ones wait), makes its frames durable
    /// (`sync_published`), runs `make_durable` (the checkpoint that makes every change its
    /// frames hold durable in the database file), then starts the journal over, empty, with a
    /// new salt, and makes that durable.
    ///
    /// Why the frames wait during `make_durable` too: a write applied to the database file
    /// after it synced, whose frame landed before the restart, would be in neither.
    pub fn restart_after(&self, make_durable: impl FnOnce() -> Result<()>) -> Result<()> {
        let Some(opened) = self.opened.get() else {
            make_durable()?;
            if !self.removed.load(Ordering::Acquire) && self.path.exists() {
                // A journal a crashed writer left and this one has not opened: its frames are
                // durable now in the database, so it is started over like an open one.
                self.opened()?;
            }
            if let Some(opened) = self.opened.get() {
                self.sync.all_durable(opened.appender.published());
            }
            return Ok(());
        };
        let mut exclusive = opened.appender.exclusive();
        self.sync_published()?;
        make_durable()?;
        if self.removed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.start(&mut exclusive, false)?;
        self.sync.all_durable(opened.appender.published());
        Ok(())
    }

    /// Writes a fresh header with a new salt and syncs it; the file keeps its length (see
    /// `GROWTH_BYTES`), up to `MAX_RECYCLED_BYTES`.
    fn start(&self, exclusive: &mut Exclusive<'_>, created: bool) -> Result<()> {
        // The new salt is taken only once the header holding it is durable: until then frames
        // go on with the old salt after the old end, where a replay finds them.
        let salt = new_salt(self.salt.load(Ordering::Acquire));
        // The old frames stay behind the new header: their checksums hold only with the old
        // salt. A new file gets its first zeros (see `GROWTH_BYTES`) before the header.
        let started = (|| {
            exclusive.grow_to(GROWTH_BYTES)?;
            exclusive.write(0, &encode_header(salt))?;
            exclusive.sync_data()?;
            if created {
                crate::file::sync_parent(&self.path)?;
            }
            // Cut only once the new salt is durable: cut before, a power loss could keep the
            // old header over a shortened journal, whose first frames a replay would then set
            // over a database file that already holds the later ones (review). After, the
            // frames cut are the old salt's, which no replay takes.
            if exclusive.len() > MAX_RECYCLED_BYTES {
                exclusive.truncate(MAX_RECYCLED_BYTES)?;
            }
            Ok(())
        })();
        if let Err(e) = started {
            if !created {
                // The header may or may not hold the new salt now: frames written after it with
                // either salt could be lost to a replay, so no commit may claim durability again.
                self.sync.failed.store(true, Ordering::Release);
                exclusive.mark_broken();
            }
            return Err(e);
        }
        self.salt.store(salt, Ordering::Release);
        exclusive.restart_at(HEADER_SIZE as u64);
        Ok(())
    }

    /// Removes the journal file (after a close made its changes durable in the database file).
    /// The mapping and descriptor stay until this value drops; no frame is written again.
    pub fn remove(&self) -> Result<()> {
        let _creating = self.creating.lock();
        let _exclusive = self.opened.get().map(|opened| opened.appender.exclusive());
        self.removed.store(true, Ordering::Release);
        crate::file::remove_if_exists(&self.path)
    }
}

/// A thread's single-entry frame buffer is kept for its next frame up to this capacity.
const THREAD_FRAME_KEPT: usize = 64 << 10;

/// A payload length as the frame header's 32-bit field.
fn frame_len_field(payload_len: usize) -> Result<u32> {
    u32::try_from(payload_len).map_err(|_| Error::new(ErrorKind::Limit, "a commit of more than 4 GiB of changes"))
}

fn frame_header(salt: u64, offset: u64, len: u32, count: u32, payload: &[u8]) -> [u8; FRAME_HEADER_SIZE] {
    let mut header = HeaderBytes::<FRAME_HEADER_SIZE>::new();
    header.put_u32(FRAME_LEN_FIELD, len);
    header.put_u32(FRAME_COUNT_FIELD, count);
    header.put_u64(FRAME_CHECKSUM_FIELD, frame_checksum(salt, offset, len, count, payload));
    header.into_bytes()
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut frame = vec![0; FRAME_HEADER_SIZE];
        frame.extend_from_slice(payload);
        frame
    }

    /// Group commit: a sync covers every frame published before it started, so a commit whose
    /// frame it covered returns without an `fdatasync` of its own.
    #[test]
    fn one_sync_serves_every_frame_published_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let journal = JournalFile::new(&dir.path().join("db.kut"));
        let first = journal.append_frame(&mut frame(b"first"), 1, false, AppendWrite::Mapped).unwrap();
        let second = journal.append_frame(&mut frame(b"second"), 1, false, AppendWrite::Mapped).unwrap();
        assert!(first < second);
        journal.sync(&journal.ticket_for(first).unwrap()).unwrap();
        assert_eq!(journal.syncs(), 1);
        journal.sync(&journal.ticket_for(second).unwrap()).unwrap();
        assert_eq!(journal.syncs(), 1, "the second frame was published before the first sync started");
        let third = journal.append_frame(&mut frame(b"third"), 1, false, AppendWrite::Mapped).unwrap();
        journal.sync(&journal.ticket_for(third).unwrap()).unwrap();
        assert_eq!(journal.syncs(), 2, "a frame published after the last sync needs one of its own");
    }

    /// Threads committing at once: every commit is durable when its sync returns (the synced
    /// position reaches its frame, whichever thread's sync covered it).
    #[test]
    fn concurrent_commits_are_each_covered_by_a_sync() {
        const THREADS: usize = 4;
        const COMMITS: usize = 50;
        let dir = tempfile::tempdir().unwrap();
        let journal = JournalFile::new(&dir.path().join("db.kut"));
        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let journal = &journal;
                scope.spawn(move || {
                    for commit in 0..COMMITS {
                        let payload = format!("thread {thread} commit {commit}");
                        let mut built = frame(payload.as_bytes());
                        let position = journal.append_frame(&mut built, 1, false, AppendWrite::Mapped).unwrap();
                        journal.sync(&journal.ticket_for(position).unwrap()).unwrap();
                        assert!(*journal.sync.synced.lock() >= position, "a commit returned before its sync");
                    }
                });
            }
        });
    }
}
