//! The write-ahead journal of the file engines (TreeDbm, HashDbm): why a durable commit costs
//! one `fdatasync`.
//!
//! Without a journal, a durable commit made every page it changed durable in the database
//! file: TreeDbm rewrote every page it changed (copy-on-write: a batch of 1,000 random keys
//! rewrote about 1,000 leaves), HashDbm synced every bucket page a batch touched (about 1,000
//! random pages for 1,000 new keys), and each such page was written again by the next commit.
//! With it, a commit appends its changes as they ended (each key set to its new value, or
//! removed) to a journal beside the database file, `<file>.journal`, and a durable commit
//! syncs that one file once. The database file is made durable only at checkpoints (a durable
//! commit of everything, after which the journal starts over): a hot page is so written once
//! per checkpoint, not once per commit. SQLite's WAL mode, RocksDB's WAL and WiredTiger's log
//! are the references.
//!
//! Why replay needs no sequence numbers: every entry is a blind write (the value a key ended
//! with, or its removal, or the removal of everything), so replaying the journal over a
//! database that already holds any prefix of it ends in the same state as replaying it over
//! the database without that prefix. Each checkpoint is durable before the journal starts over
//! (with a new salt, made durable too), so the database file on disk never lacks a change of
//! an earlier journal, and the engines write every change to the journal in the order they
//! apply it to the same key.
//!
//! A frame is one commit: whole, or absent. Its checksum is seeded with the journal's salt and
//! the frame's offset, so a frame torn by a crash, a stale frame of an earlier journal at the
//! same offset, or one moved, is not taken; replay stops at the first frame that fails.
//!
//! ```text
//! header (32 bytes): [8] magic "KuraJrnl", u32 version, u32 zero, u64 salt, u64 xxh3 of 0..24
//! frame:             u32 payload length, u32 entry count (top bit: the commit continues in the
//!                    next frame), u64 checksum, payload
//! entry:             u8 kind (1 set, 2 remove, 3 clear), varint key length, key,
//!                    and for a set: varint value length, value
//! ```

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::encoding::{put_varint, ByteReader, Field, HeaderBytes};
use crate::error::{Error, ErrorKind, Result};
use crate::file::{sibling_path, MappedAppender};

const MAGIC: &[u8; 8] = b"KuraJrnl";
/// 2: a frame's entry count carries `CONTINUED` (a batch written as several frames).
const VERSION: u32 = 2;
/// The oldest journal version an open still replays.
const OLDEST_VERSION: u32 = 1;
/// Set in a frame's entry count when the next frame continues the same commit: a batch too
/// large for one frame is replayed only if its last frame (without the bit) is whole too.
const CONTINUED: u32 = 1 << 31;

// The journal header's fields, each after the one before (the table in the module comment).
const MAGIC_FIELD: Field<HEADER_SIZE, { MAGIC.len() }> = Field::first();
const VERSION_FIELD: Field<HEADER_SIZE, 4> = Field::after(MAGIC_FIELD);
const ZERO_FIELD: Field<HEADER_SIZE, 4> = Field::after(VERSION_FIELD);
const SALT_FIELD: Field<HEADER_SIZE, 8> = Field::after(ZERO_FIELD);
const CHECKSUM_FIELD: Field<HEADER_SIZE, 8> = Field::after(SALT_FIELD);
pub const HEADER_SIZE: usize = 32;
const _: () = assert!(CHECKSUM_FIELD.end() == HEADER_SIZE, "docs/tree.md specifies a 32-byte journal header");

// A frame's header.
const FRAME_LEN_FIELD: Field<FRAME_HEADER_SIZE, 4> = Field::first();
const FRAME_COUNT_FIELD: Field<FRAME_HEADER_SIZE, 4> = Field::after(FRAME_LEN_FIELD);
const FRAME_CHECKSUM_FIELD: Field<FRAME_HEADER_SIZE, 8> = Field::after(FRAME_COUNT_FIELD);
pub const FRAME_HEADER_SIZE: usize = 16;
const _: () =
    assert!(FRAME_CHECKSUM_FIELD.end() == FRAME_HEADER_SIZE, "docs/tree.md specifies 16-byte journal frame headers");

const KIND_SET: u8 = 1;
const KIND_REMOVE: u8 = 2;
const KIND_CLEAR: u8 = 3;

/// Checkpoint once the journal holds this many bytes: bounds the replay after a crash (about a
/// second per 64 MiB of entries) and the journal file.
pub const DEFAULT_CHECKPOINT_BYTES: u64 = 64 << 20;

/// Pending entries beyond this are written out as a frame before the next one is added, so
/// that a long run of sets without a commit does not hold its whole journal in memory.
const MAX_PENDING_BYTES: usize = 1 << 20;

/// The journal file grows by zeros written this far ahead of its frames, and is reused, not
/// truncated, when it starts over (up to `MAX_RECYCLED_BYTES`). Why: a frame then overwrites
/// blocks the file already has, so its `fdatasync` writes the data and flushes the device,
/// with no change of the file's size or extents for the file system to commit first (on
/// ext4 a commit into a growing file cost a journal commit of its own). RocksDB recycles its
/// log files for the same reason.
const GROWTH_BYTES: u64 = 1 << 20;
const MAX_RECYCLED_BYTES: u64 = 64 << 20;

/// The journal file of the database file at `db_path`.
pub fn journal_path(db_path: &Path) -> PathBuf {
    sibling_path(db_path, ".journal")
}

/// One change, as the journal keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    /// The key's value is now `value`.
    Set { key: &'a [u8], value: &'a [u8] },
    /// The key is absent now.
    Remove { key: &'a [u8] },
    /// Every record was removed.
    Clear,
}

impl<'a> From<crate::batch::BatchOp<'a>> for Entry<'a> {
    /// A write batch's operation as the journal keeps it.
    fn from(op: crate::batch::BatchOp<'a>) -> Entry<'a> {
        match op.value() {
            Some(value) => Entry::Set { key: op.key(), value },
            None => Entry::Remove { key: op.key() },
        }
    }
}

/// What the journal of a file held when it was opened: the payloads of its whole frames, in
/// order, to be replayed.
#[derive(Debug, Default)]
pub struct Recovered {
    payloads: Vec<u8>,
    /// Frames taken.
    pub frames: u64,
    /// Bytes after the last whole frame (a torn or unsynced tail), not taken.
    pub dropped_bytes: u64,
}

impl Recovered {
    pub fn is_empty(&self) -> bool {
        self.payloads.is_empty()
    }

    /// The entries of every frame taken, in the order they were written.
    pub fn entries(&self) -> Entries<'_> {
        Entries { reader: ByteReader::new(&self.payloads, "journal") }
    }
}

/// Iterates over encoded entries (the payloads of frames, end to end).
pub struct Entries<'a> {
    reader: ByteReader<'a>,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>>;

    fn next(&mut self) -> Option<Result<Entry<'a>>> {
        if self.reader.is_at_end() {
            return None;
        }
        Some(self.read_entry())
    }
}

impl<'a> Entries<'a> {
    fn read_entry(&mut self) -> Result<Entry<'a>> {
        let [kind] = self.reader.array::<1>()?;
        match kind {
            KIND_CLEAR => Ok(Entry::Clear),
            KIND_SET | KIND_REMOVE => {
                let key_len = self.reader.length()?;
                let key = self.reader.take(key_len)?;
                if kind == KIND_REMOVE {
                    return Ok(Entry::Remove { key });
                }
                let value_len = self.reader.length()?;
                let value = self.reader.take(value_len)?;
                Ok(Entry::Set { key, value })
            }
            // A frame whose checksum held was written by Kura: an unknown kind is a bug.
            other => Err(Error::broken(format!(
                "journal: an entry of unknown kind {other} in a frame whose checksum holds (a bug in Kura)"
            ))),
        }
    }
}

/// Appends `entry` to `out` in the journal's encoding.
pub fn encode_entry(out: &mut Vec<u8>, entry: Entry<'_>) {
    match entry {
        Entry::Set { key, value } => {
            out.push(KIND_SET);
            put_varint(out, key.len() as u64);
            out.extend_from_slice(key);
            put_varint(out, value.len() as u64);
            out.extend_from_slice(value);
        }
        Entry::Remove { key } => {
            out.push(KIND_REMOVE);
            put_varint(out, key.len() as u64);
            out.extend_from_slice(key);
        }
        Entry::Clear => out.push(KIND_CLEAR),
    }
}

fn frame_checksum(salt: u64, offset: u64, len: u32, count: u32, payload: &[u8]) -> u64 {
    let seed =
        salt ^ offset.rotate_left(23) ^ (u64::from(len) << 32 | u64::from(count)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    xxh3_64_with_seed(payload, seed)
}

fn encode_header(salt: u64) -> [u8; HEADER_SIZE] {
    let mut out = HeaderBytes::<HEADER_SIZE>::new();
    out.put(MAGIC_FIELD, MAGIC);
    out.put_u32(VERSION_FIELD, VERSION);
    out.put_u64(SALT_FIELD, salt);
    let checksum = xxh3_64(out.before(CHECKSUM_FIELD));
    out.put_u64(CHECKSUM_FIELD, checksum);
    out.into_bytes()
}

/// The salt of a journal header, or None when the header is not a whole, valid one (a journal
/// whose creation was cut short: it holds no frame that could have been made durable).
fn decode_header(bytes: &[u8], path: &Path) -> Result<Option<u64>> {
    let Ok(header) = HeaderBytes::<HEADER_SIZE>::read(bytes, "journal header") else {
        return Ok(None);
    };
    if header.get(MAGIC_FIELD) != *MAGIC || header.u64(CHECKSUM_FIELD) != xxh3_64(header.before(CHECKSUM_FIELD)) {
        return Ok(None);
    }
    let version = header.u32(VERSION_FIELD);
    // Version 1 differs only in never setting `CONTINUED`: its journals replay as they are.
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(Error::broken(format!(
            "{}: journal format version {version} is not supported (written by a newer Kura?)",
            path.display()
        )));
    }
    Ok(Some(header.u64(SALT_FIELD)))
}

/// Reads the journal of the database file at `db_path`, if there is one: the frames to replay.
pub fn recover(db_path: &Path) -> Result<Recovered> {
    let path = journal_path(db_path);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recovered::default()),
        Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
    };
    let Some(salt) = decode_header(&bytes, &path)? else {
        return Ok(Recovered { dropped_bytes: bytes.len() as u64, ..Recovered::default() });
    };
    let mut recovered = Recovered::default();
    let mut offset = HEADER_SIZE;
    // Where the commit being read began in `payloads`, and the frames it has so far: a commit
    // whose last frame is missing is dropped whole.
    let mut commit_start = 0;
    let mut commit_frames = 0;
    while let Some(frame) = bytes.get(offset..) {
        let Ok(header) = HeaderBytes::<FRAME_HEADER_SIZE>::read(frame, "journal frame") else {
            break;
        };
        let len = header.u32(FRAME_LEN_FIELD);
        let count = header.u32(FRAME_COUNT_FIELD);
        // The length is checked against the bytes that exist before anything is taken.
        let Some(payload) = frame.get(FRAME_HEADER_SIZE..FRAME_HEADER_SIZE + len as usize) else {
            break;
        };
        if header.u64(FRAME_CHECKSUM_FIELD) != frame_checksum(salt, offset as u64, len, count, payload) {
            break;
        }
        recovered.payloads.extend_from_slice(payload);
        commit_frames += 1;
        offset += FRAME_HEADER_SIZE + len as usize;
        if count & CONTINUED == 0 {
            recovered.frames += commit_frames;
            commit_frames = 0;
            commit_start = recovered.payloads.len();
        }
    }
    recovered.payloads.truncate(commit_start);
    recovered.dropped_bytes = (bytes.len() - offset.min(bytes.len())) as u64;
    Ok(recovered)
}

/// Rewrites the checksums of a journal's header and of every frame it walks (by their
/// lengths, up to the first that does not fit) to match the bytes, as a writer would have
/// written them: so that fuzzed journals reach the entry decoder and the replay instead of
/// stopping at a checksum (`kura::fuzz::journal_replay`).
#[cfg(feature = "internals")]
pub(crate) fn fix_checksums(bytes: &mut [u8]) {
    let Ok(mut header) = HeaderBytes::<HEADER_SIZE>::read(bytes, "journal header") else { return };
    let checksum = xxh3_64(header.before(CHECKSUM_FIELD));
    header.put_u64(CHECKSUM_FIELD, checksum);
    let salt = header.u64(SALT_FIELD);
    if let Some(head) = bytes.get_mut(..HEADER_SIZE) {
        head.copy_from_slice(header.as_bytes());
    }
    let mut offset = HEADER_SIZE;
    while let Some(frame) = bytes.get_mut(offset..) {
        let Ok(mut head) = HeaderBytes::<FRAME_HEADER_SIZE>::read(frame, "journal frame") else { return };
        let (len, count) = (head.u32(FRAME_LEN_FIELD), head.u32(FRAME_COUNT_FIELD));
        let Some(payload) = frame.get(FRAME_HEADER_SIZE..FRAME_HEADER_SIZE + len as usize) else { return };
        head.put_u64(FRAME_CHECKSUM_FIELD, frame_checksum(salt, offset as u64, len, count, payload));
        if let Some(at) = frame.get_mut(..FRAME_HEADER_SIZE) {
            at.copy_from_slice(head.as_bytes());
        }
        offset += FRAME_HEADER_SIZE + len as usize;
    }
}

/// A position in the journal's stream of frames: the bytes written to it since the database was
/// opened, across restarts of the journal. A durable commit waits until the synced position
/// reaches its own (group commit: one sync serves every commit written before it started).
pub type Position = u64;

/// How far the journal is written and synced: shared between the journal (under the
/// database's lock) and the committers that sync outside it, so that one `fdatasync` serves every commit
/// whose frame was written before it started (group commit).
#[derive(Debug, Default)]
pub struct SyncState {
    written: AtomicU64,
    synced: Mutex<Position>,
    /// Set when an fdatasync failed: the kernel may have dropped the dirty pages it could not
    /// write, so a later sync that succeeds proves nothing. Every durable commit fails from then.
    failed: AtomicBool,
}

/// What a committer needs to make its frame durable once it let go of the database's lock.
#[derive(Debug)]
pub struct SyncTicket {
    file: Arc<File>,
    path: PathBuf,
    position: Position,
}

impl SyncState {
    /// Makes every frame up to the ticket's position durable: one `fdatasync`, unless a sync
    /// that started after the frame was written already covered it.
    pub fn sync(&self, ticket: &SyncTicket) -> Result<()> {
        let mut synced = self.synced.lock();
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Io,
                format!("{}: an earlier fdatasync failed; close and reopen the database", ticket.path.display()),
            ));
        }
        if *synced >= ticket.position {
            return Ok(());
        }
        let target = self.written.load(Ordering::Acquire).max(ticket.position);
        if let Err(e) = ticket.file.sync_data() {
            self.failed.store(true, Ordering::Release);
            return Err(Error::io(format!("fdatasync {}", ticket.path.display()), e));
        }
        *synced = target;
        Ok(())
    }

    /// Every frame written so far is durable (a checkpoint, or a restart that synced).
    fn all_durable(&self) {
        let written = self.written.load(Ordering::Acquire);
        let mut synced = self.synced.lock();
        *synced = (*synced).max(written);
    }
}

/// How a frame reaches the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameWrite {
    /// Copied in through the mapping (a commit that is not synced).
    Mapped,
    /// Written with `pwrite` (a commit about to be synced).
    Written,
}

/// The open journal of a writer: the file and the entries not yet written to it.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    sync: Arc<SyncState>,
    /// Shared with committers that sync outside the database's lock.
    file: Option<Arc<File>>,
    salt: u64,
    /// Where the next frame goes.
    end: u64,
    /// The file, mapped: frames are copied into it (file/appender.rs); None before the first.
    appender: Option<MappedAppender>,
    /// Room for a frame's header, then the entries encoded since the last frame was written:
    /// a frame is copied into the file from here in one piece.
    pending: Vec<u8>,
    pending_entries: u32,
    /// Set while `write_pending_continued` writes its frame.
    continued: bool,
    /// The position after the last frame written.
    written: Position,
    /// Frames written since the journal last started over.
    frames: u64,
}

impl Journal {
    /// The journal of the database file at `db_path`. Its file is created by the first frame.
    pub fn new(db_path: &Path) -> Journal {
        Journal {
            path: journal_path(db_path),
            sync: Arc::new(SyncState::default()),
            file: None,
            salt: 0,
            end: 0,
            appender: None,
            pending: vec![0; FRAME_HEADER_SIZE],
            pending_entries: 0,
            continued: false,
            written: 0,
            frames: 0,
        }
    }

    /// Bytes of the journal file in use (0 while it has no frame).
    pub fn bytes(&self) -> u64 {
        if self.frames == 0 {
            0
        } else {
            self.end
        }
    }

    /// The sync state shared with committers outside the database's lock.
    pub fn sync_state(&self) -> Arc<SyncState> {
        Arc::clone(&self.sync)
    }

    /// What a commit that wrote its frame needs to make it durable outside the database's lock:
    /// None when nothing it wrote waits for a sync (no frame since the last checkpoint).
    pub fn ticket(&self) -> Option<SyncTicket> {
        let file = self.file.as_ref()?;
        (self.frames > 0).then(|| SyncTicket {
            file: Arc::clone(file),
            path: self.path.clone(),
            position: self.written,
        })
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

    /// Writes the pending entries as one frame (without syncing).
    /// The frame is copied in through the mapping: the commit reaches the page cache without
    /// a system call.
    pub fn write_pending(&mut self) -> Result<()> {
        self.write_pending_as(FrameWrite::Mapped)
    }

    /// `write_pending` for a commit about to be synced: the frame is written with `pwrite`
    /// (see `MappedAppender::write_through` for why).
    pub fn write_pending_to_sync(&mut self) -> Result<()> {
        self.write_pending_as(FrameWrite::Written)
    }

    /// Writes the pending entries as a frame of a commit that the next frame continues: a
    /// replay takes it only together with the frames after it up to one written by
    /// `write_pending` or `write_pending_to_sync` (a batch too large for one frame).
    pub fn write_pending_continued(&mut self) -> Result<()> {
        self.continued = true;
        let written = self.write_pending_as(FrameWrite::Written);
        self.continued = false;
        written
    }

    fn write_pending_as(&mut self, how: FrameWrite) -> Result<()> {
        if self.pending_entries == 0 {
            return Ok(());
        }
        if self.pending_entries >= CONTINUED {
            return Err(Error::new(ErrorKind::Limit, "a journal frame of 2^31 entries or more"));
        }
        let count = if self.continued { self.pending_entries | CONTINUED } else { self.pending_entries };
        let len = u32::try_from(self.pending.len() - FRAME_HEADER_SIZE)
            .map_err(|_| Error::new(ErrorKind::Limit, "a commit of more than 4 GiB of changes"))?;
        if self.file.is_none() {
            self.start(None)?;
        }
        let offset = self.end;
        let (head, payload) = self.pending.split_at_mut(FRAME_HEADER_SIZE);
        let mut header = HeaderBytes::<FRAME_HEADER_SIZE>::new();
        header.put_u32(FRAME_LEN_FIELD, len);
        header.put_u32(FRAME_COUNT_FIELD, count);
        header.put_u64(FRAME_CHECKSUM_FIELD, frame_checksum(self.salt, offset, len, count, payload));
        head.copy_from_slice(&header.into_bytes());
        let frame = &self.pending;
        let appender = self.appender.as_mut().ok_or_else(|| Error::internal("a journal has its file once started"))?;
        let frame_end = offset + frame.len() as u64;
        if frame_end > appender.len() {
            // Zeros ahead (a replay stops at them: an all-zero frame header fails its checksum).
            let grown = frame_end.div_ceil(GROWTH_BYTES).saturating_add(1).saturating_mul(GROWTH_BYTES);
            appender.grow_to(grown)?;
        }
        match how {
            FrameWrite::Mapped => appender.write(offset, frame)?,
            FrameWrite::Written => appender.write_through(offset, frame)?,
        }
        self.end += frame.len() as u64;
        self.written += frame.len() as u64;
        self.sync.written.store(self.written, Ordering::Release);
        self.frames += 1;
        self.discard_pending();
        Ok(())
    }

    /// Starts the journal over, empty, with a new salt, and makes that durable: called right
    /// after a checkpoint made every change the journal held durable in the database file.
    pub fn restart(&mut self) -> Result<()> {
        self.discard_pending();
        if self.file.is_none() && !self.path.exists() {
            self.frames = 0;
        } else {
            let file = self.file.clone();
            self.start(file)?;
        }
        self.sync.all_durable();
        Ok(())
    }

    /// Creates the journal file now, empty, if it does not exist yet (it is otherwise created by
    /// the first frame): a writer whose checkpoints must show in the file from the start.
    pub fn create_now(&mut self) -> Result<()> {
        if self.file.is_none() {
            self.start(None)?;
        }
        Ok(())
    }

    /// Writes a fresh header with a new salt into `file` (or a newly created file) and syncs
    /// it; the file keeps its length (see `GROWTH_BYTES`).
    fn start(&mut self, file: Option<Arc<File>>) -> Result<()> {
        let io = |what: &str, e| Error::io(format!("{what} {}", self.path.display()), e);
        let created = file.is_none();
        let file = match file {
            Some(file) => file,
            None => Arc::new(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&self.path)
                    .map_err(|e| io("create", e))?,
            ),
        };
        // The new salt is taken only once the header holding it is durable: until then frames
        // go on with the old salt after the old end, where a replay finds them.
        let salt = new_salt(self.salt);
        let mut appender = match self.appender.take() {
            Some(appender) => appender,
            None => MappedAppender::new(Arc::clone(&file), &self.path)?,
        };
        // The old frames stay behind the new header: their checksums hold only with the old
        // salt. A new file gets its first zeros (see `GROWTH_BYTES`) before the header.
        let started = (|| {
            if appender.len() > MAX_RECYCLED_BYTES {
                appender.truncate(MAX_RECYCLED_BYTES)?;
            }
            appender.grow_to(GROWTH_BYTES)?;
            appender.write(0, &encode_header(salt))?;
            file.sync_data().map_err(|e| io("fdatasync", e))?;
            if created {
                crate::file::sync_parent(&self.path)?;
            }
            Ok(())
        })();
        if let Err(e) = started {
            if !created {
                // The header may or may not hold the new salt now: frames written after it with
                // either salt could be lost to a replay, so no commit may claim durability again.
                self.sync.failed.store(true, Ordering::Release);
                self.appender = Some(appender);
            }
            return Err(e);
        }
        self.salt = salt;
        self.appender = Some(appender);
        self.end = HEADER_SIZE as u64;
        self.frames = 0;
        self.file = Some(file);
        Ok(())
    }

    /// Removes the journal file (after a close made its changes durable in the tree file).
    pub fn remove(&mut self) -> Result<()> {
        self.discard_pending();
        self.appender = None;
        self.file = None;
        self.frames = 0;
        crate::file::remove_if_exists(&self.path)
    }
}

/// A salt unlike the previous one and unlike any earlier journal's at this path: the clock,
/// the process and the previous salt, mixed.
fn new_salt(previous: u64) -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let salt = crate::split_mix::mix(nanos ^ u64::from(std::process::id()).rotate_left(40) ^ previous.rotate_left(7));
    if salt == previous {
        salt.wrapping_add(1)
    } else {
        salt
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;
    use crate::encoding::documented_layout;

    fn set<'a>(key: &'a [u8], value: &'a [u8]) -> Entry<'a> {
        Entry::Set { key, value }
    }

    fn write(journal: &mut Journal, entries: &[Entry<'_>]) {
        for entry in entries {
            encode_entry(journal.pending_mut(), *entry);
            journal.entry_added();
        }
        journal.write_pending().unwrap();
    }

    fn replayed(tree: &Path) -> Vec<String> {
        let recovered = recover(tree).unwrap();
        recovered
            .entries()
            .map(|entry| match entry.unwrap() {
                Entry::Set { key, value } => {
                    format!("{}={}", String::from_utf8_lossy(key), String::from_utf8_lossy(value))
                }
                Entry::Remove { key } => format!("-{}", String::from_utf8_lossy(key)),
                Entry::Clear => "clear".to_string(),
            })
            .collect()
    }

    #[test]
    fn frames_are_replayed_whole_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t.kut");
        assert!(recover(&tree).unwrap().is_empty(), "no journal file: nothing to replay");
        let mut journal = Journal::new(&tree);
        write(&mut journal, &[set(b"a", b"1"), Entry::Remove { key: b"b" }]);
        write(&mut journal, &[Entry::Clear, set(b"c", b"3")]);
        assert_eq!(replayed(&tree), ["a=1", "-b", "clear", "c=3"]);
        let whole = std::fs::read(journal_path(&tree)).unwrap();
        // The first frame's payload: set a=1 (5 bytes), remove b (3 bytes); the second's: clear
        // (1 byte), set c=3 (5 bytes). Zeros follow (written ahead of the frames).
        let second = HEADER_SIZE + FRAME_HEADER_SIZE + 8;
        let second_end = second + FRAME_HEADER_SIZE + 6;
        assert!(whole[second_end..].iter().all(|&b| b == 0), "zeros after the last frame");
        // Every cut inside the second frame drops that frame only; one flipped byte in it too.
        for cut in second..second_end {
            std::fs::write(journal_path(&tree), &whole[..cut]).unwrap();
            assert_eq!(replayed(&tree), ["a=1", "-b"], "cut at {cut}");
        }
        for at in second..second_end {
            let mut damaged = whole.clone();
            damaged[at] ^= 0x10;
            std::fs::write(journal_path(&tree), &damaged).unwrap();
            assert_eq!(replayed(&tree), ["a=1", "-b"], "flip at {at}");
        }
        // A damaged header: the journal was never made durable with frames in it.
        let mut damaged = whole.clone();
        damaged[20] ^= 1;
        std::fs::write(journal_path(&tree), &damaged).unwrap();
        assert!(replayed(&tree).is_empty());
    }

    #[test]
    fn a_restarted_journal_never_takes_an_earlier_frame() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t.kut");
        let mut journal = Journal::new(&tree);
        write(&mut journal, &[set(b"old", b"1")]);
        let old = std::fs::read(journal_path(&tree)).unwrap();
        journal.restart().unwrap();
        assert!(replayed(&tree).is_empty());
        // The new header with the old frame behind it (a truncation that did not reach the disk).
        let mut stale = std::fs::read(journal_path(&tree)).unwrap();
        stale.extend_from_slice(&old[HEADER_SIZE..]);
        std::fs::write(journal_path(&tree), &stale).unwrap();
        assert!(replayed(&tree).is_empty(), "a frame of the previous salt is not taken");
        journal.restart().unwrap();
        write(&mut journal, &[set(b"new", b"2")]);
        assert_eq!(replayed(&tree), ["new=2"]);
        assert!(journal.ticket().is_some(), "a frame waits for a sync");
        journal.remove().unwrap();
        assert!(!journal_path(&tree).exists());
    }

    /// Hostile journals: random bytes after a valid header, random frame headers (lengths up to
    /// `u32::MAX`), and frames whose checksums hold over random payloads. Recovery never panics
    /// and never takes more than the file holds; entries are well-formed or an error.
    #[test]
    fn hostile_journals_are_refused_or_read_within_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t.kut");
        let mut rng = crate::split_mix::SplitMix64::new(11);
        let salt = 0x5eed;
        let mut with_frames = 0;
        for round in 0..2000 {
            let mut bytes = encode_header(salt).to_vec();
            let frames = rng.below(4);
            for _ in 0..frames {
                let len = rng.below(64) as usize;
                let payload: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                let offset = bytes.len() as u64;
                let count = rng.below(5) as u32;
                let claimed = if rng.below(8) == 0 { rng.next_u64() as u32 } else { len as u32 };
                let mut header = HeaderBytes::<FRAME_HEADER_SIZE>::new();
                header.put_u32(FRAME_LEN_FIELD, claimed);
                header.put_u32(FRAME_COUNT_FIELD, count);
                header.put_u64(FRAME_CHECKSUM_FIELD, frame_checksum(salt, offset, claimed, count, &payload));
                bytes.extend_from_slice(&header.into_bytes());
                bytes.extend_from_slice(&payload);
            }
            let tail = rng.below(40) as usize;
            bytes.extend((0..tail).map(|_| rng.next_u64() as u8));
            std::fs::write(journal_path(&tree), &bytes).unwrap();
            let recovered = recover(&tree).unwrap();
            let taken = recovered.payloads.len() + recovered.frames as usize * FRAME_HEADER_SIZE;
            assert_eq!(HEADER_SIZE + taken + recovered.dropped_bytes as usize, bytes.len(), "round {round}");
            with_frames += usize::from(recovered.frames > 0);
            for entry in recovered.entries() {
                match entry {
                    Ok(Entry::Set { key, value }) => assert!(key.len() + value.len() <= bytes.len()),
                    Ok(Entry::Remove { key }) => assert!(key.len() <= bytes.len()),
                    Ok(Entry::Clear) => {}
                    Err(e) => {
                        assert_eq!(e.kind(), crate::error::ErrorKind::BrokenData);
                        break;
                    }
                }
            }
        }
        assert!(with_frames > 500, "the frames were taken in {with_frames} rounds: too few to test their entries");
    }

    #[test]
    fn a_commit_of_continued_frames_replays_only_with_its_last_frame() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t.kut");
        let mut journal = Journal::new(&tree);
        write(&mut journal, &[set(b"before", b"0")]);
        let before_batch = std::fs::read(journal_path(&tree)).unwrap();
        let end_of_first = journal.end as usize;
        for part in [&b"p1"[..], b"p2"] {
            encode_entry(journal.pending_mut(), set(part, b"x"));
            journal.entry_added();
            journal.write_pending_continued().unwrap();
        }
        write(&mut journal, &[set(b"last", b"y")]);
        assert_eq!(replayed(&tree), ["before=0", "p1=x", "p2=x", "last=y"]);
        let whole = std::fs::read(journal_path(&tree)).unwrap();
        let end = journal.end as usize;
        // Cut anywhere after the first commit and before the batch's last frame is whole: the
        // batch is absent, all of it.
        for cut in (end_of_first..end).step_by(7) {
            let mut bytes = whole[..cut].to_vec();
            bytes.resize(whole.len(), 0);
            std::fs::write(journal_path(&tree), &bytes).unwrap();
            assert_eq!(replayed(&tree), ["before=0"], "cut at {cut}");
        }
        assert_eq!(before_batch.len(), whole.len(), "the journal file keeps its length");
    }

    #[test]
    fn a_version_1_journal_still_replays_and_a_newer_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t.kut");
        let mut journal = Journal::new(&tree);
        write(&mut journal, &[set(b"a", b"1"), Entry::Remove { key: b"b" }]);
        let written = std::fs::read(journal_path(&tree)).unwrap();
        let with_version = |version: u32| {
            let mut bytes = written.clone();
            let mut header = HeaderBytes::<HEADER_SIZE>::read(&bytes, "test").unwrap();
            header.put_u32(VERSION_FIELD, version);
            let checksum = xxh3_64(header.before(CHECKSUM_FIELD));
            header.put_u64(CHECKSUM_FIELD, checksum);
            bytes[..HEADER_SIZE].copy_from_slice(header.as_bytes());
            std::fs::write(journal_path(&tree), bytes).unwrap();
        };
        with_version(1);
        assert_eq!(replayed(&tree), ["a=1", "-b"], "version 1 has the same frames");
        with_version(VERSION + 1);
        let refused = recover(&tree).unwrap_err();
        assert!(refused.message().contains("not supported"), "{refused}");
    }

    #[test]
    fn the_layouts_are_the_ones_docs_tree_md_documents() {
        let docs = include_str!("../../../docs/tree.md");
        let header = [MAGIC_FIELD.row(), VERSION_FIELD.row(), ZERO_FIELD.row(), SALT_FIELD.row(), CHECKSUM_FIELD.row()];
        assert_eq!(documented_layout(docs, "### Journal header"), header);
        let frame = [FRAME_LEN_FIELD.row(), FRAME_COUNT_FIELD.row(), FRAME_CHECKSUM_FIELD.row()];
        assert_eq!(documented_layout(docs, "### Journal frame"), frame);
    }
}
