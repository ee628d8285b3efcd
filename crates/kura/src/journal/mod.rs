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
//! The format and the replay live here; `writer.rs` appends frames (from many threads at once,
//! for HashDbm's single writes) and starts the journal over; `pending.rs` collects a commit's
//! entries into frames for a single writer (TreeDbm).
//!
//! ```text
//! header (32 bytes): [8] magic "KuraJrnl", u32 version, u32 zero, u64 salt, u64 xxh3 of 0..24
//! frame:             u32 payload length, u32 entry count (top bit: the commit continues in the
//!                    next frame), u64 checksum, payload
//! entry:             u8 kind (1 set, 2 remove, 3 clear), varint key length, key,
//!                    and for a set: varint value length, value
//! ```

use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::encoding::{put_varint, ByteReader, Field, HeaderBytes};
use crate::error::{Error, Result};
use crate::file::sibling_path;

mod pending;
mod writer;

pub use pending::Journal;
pub use writer::{JournalFile, SyncState, SyncTicket};

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

/// The journal file of the database file at `db_path`.
pub fn journal_path(db_path: &Path) -> PathBuf {
    sibling_path(db_path, ".journal")
}

/// Makes the journal of the database file at `db_path` durable as it stands, before a replay
/// of it commits the database file durably: a journal a crashed writer left (its last frames
/// perhaps never synced), or this writer's own, whose frames a commit without a sync wrote.
/// A database file may hold a change only where the journal on disk holds it too: after a
/// power loss that kept only an older part of the journal, its replay would set keys back.
pub fn make_durable(db_path: &Path) -> Result<()> {
    crate::file::sync_existing(&journal_path(db_path))
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

impl<'a> Entry<'a> {
    /// The write batch operation of an entry that sets or removes a key; None for a clear.
    pub fn batch_op(self) -> Option<crate::batch::BatchOp<'a>> {
        match self {
            Entry::Set { key, value } => Some(crate::batch::BatchOp::Set { key, value }),
            Entry::Remove { key } => Some(crate::batch::BatchOp::Remove { key }),
            Entry::Clear => None,
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
///
/// Frame by frame, through a buffer: the file is reused rather than truncated when the journal
/// starts over, so it may be far longer than the frames of the current journal (as long as the
/// largest journal it ever held), and a write buffer's journal may hold hundreds of megabytes;
/// read whole and then copied, it took twice its length in memory at the open after a crash,
/// under the memory limit the file was too large for.
pub fn recover(db_path: &Path) -> Result<Recovered> {
    let path = journal_path(db_path);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recovered::default()),
        Err(e) => return Err(Error::io(format!("open {}", path.display()), e)),
    };
    let file_len = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len();
    recover_from(std::io::BufReader::with_capacity(RECOVER_READ_BYTES, file), file_len, &path)
}

/// What `recover` reads at a time.
const RECOVER_READ_BYTES: usize = 1 << 20;

/// `recover` of a journal `file_len` bytes long (as the file said when it was opened) read
/// from `input`. A frame is taken only once its length fits in what remains of `file_len`,
/// so that no length read from the file sizes an allocation unchecked.
fn recover_from(mut input: impl std::io::Read, file_len: u64, path: &Path) -> Result<Recovered> {
    use std::io::Read as _;
    let read_error = |e| Error::io(format!("read {}", path.display()), e);
    let mut header = [0u8; HEADER_SIZE];
    // A header cut short is no valid header (`decode_header`).
    let salt = match read_or_end(&mut input, &mut header).map_err(read_error)? {
        true => decode_header(&header, path)?,
        false => None,
    };
    let Some(salt) = salt else {
        return Ok(Recovered { dropped_bytes: file_len, ..Recovered::default() });
    };
    let mut recovered = Recovered::default();
    let mut offset = HEADER_SIZE as u64;
    // Where the commit being read began in `payloads`, and the frames it has so far: a commit
    // whose last frame is missing is dropped whole.
    let mut commit_start = 0;
    let mut commit_frames = 0;
    loop {
        let mut head = [0u8; FRAME_HEADER_SIZE];
        if !read_or_end(&mut input, &mut head).map_err(read_error)? {
            break;
        }
        let Ok(header) = HeaderBytes::<FRAME_HEADER_SIZE>::read(&head, "journal frame") else {
            break;
        };
        let len = header.u32(FRAME_LEN_FIELD);
        let count = header.u32(FRAME_COUNT_FIELD);
        // The length is checked against the bytes that exist before anything is taken.
        let end = offset + (FRAME_HEADER_SIZE as u64) + u64::from(len);
        if end > file_len {
            break;
        }
        let start = recovered.payloads.len();
        let got = (&mut input).take(u64::from(len)).read_to_end(&mut recovered.payloads).map_err(read_error)?;
        let payload = recovered.payloads.get(start..).unwrap_or_default();
        if got < len as usize || header.u64(FRAME_CHECKSUM_FIELD) != frame_checksum(salt, offset, len, count, payload) {
            recovered.payloads.truncate(start);
            break;
        }
        commit_frames += 1;
        offset = end;
        if count & CONTINUED == 0 {
            recovered.frames += commit_frames;
            commit_frames = 0;
            commit_start = recovered.payloads.len();
        }
    }
    recovered.payloads.truncate(commit_start);
    recovered.payloads.shrink_to_fit();
    recovered.dropped_bytes = file_len.saturating_sub(offset);
    Ok(recovered)
}

/// Fills `buffer` from `input`: true, or false when the input ends first.
fn read_or_end(input: &mut impl std::io::Read, buffer: &mut [u8]) -> std::io::Result<bool> {
    match input.read_exact(buffer) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
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

    /// A journal file far longer than its frames (reused, not truncated, when the journal
    /// starts over, so as long as the largest journal it held) is read by its frames alone: a
    /// sparse tail of 64 GiB, which reading the file whole could not even allocate, is counted
    /// as dropped without being read.
    #[test]
    fn a_long_journal_file_is_read_by_its_frames_only() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t.kut");
        let mut journal = Journal::new(&tree);
        write(&mut journal, &[set(b"a", b"1")]);
        write(&mut journal, &[Entry::Remove { key: b"a" }, set(b"b", b"2")]);
        let frames_end = journal.bytes();
        let long = 64u64 << 30;
        std::fs::OpenOptions::new().write(true).open(journal_path(&tree)).unwrap().set_len(long).unwrap();
        let recovered = recover(&tree).unwrap();
        assert_eq!(recovered.frames, 2);
        assert_eq!(recovered.dropped_bytes, long - frames_end);
        assert_eq!(replayed(&tree), ["a=1", "-a", "b=2"]);
    }

    #[test]
    fn a_commit_of_continued_frames_replays_only_with_its_last_frame() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t.kut");
        let mut journal = Journal::new(&tree);
        write(&mut journal, &[set(b"before", b"0")]);
        let before_batch = std::fs::read(journal_path(&tree)).unwrap();
        let end_of_first = journal.bytes() as usize;
        for part in [&b"p1"[..], b"p2"] {
            encode_entry(journal.pending_mut(), set(part, b"x"));
            journal.entry_added();
            journal.write_pending_continued().unwrap();
        }
        write(&mut journal, &[set(b"last", b"y")]);
        assert_eq!(replayed(&tree), ["before=0", "p1=x", "p2=x", "last=y"]);
        let whole = std::fs::read(journal_path(&tree)).unwrap();
        let end = journal.bytes() as usize;
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
        let docs = include_str!("../../../../docs/tree.md");
        let header = [MAGIC_FIELD.row(), VERSION_FIELD.row(), ZERO_FIELD.row(), SALT_FIELD.row(), CHECKSUM_FIELD.row()];
        assert_eq!(documented_layout(docs, "### Journal header"), header);
        let frame = [FRAME_LEN_FIELD.row(), FRAME_COUNT_FIELD.row(), FRAME_CHECKSUM_FIELD.row()];
        assert_eq!(documented_layout(docs, "### Journal frame"), frame);
    }
}
