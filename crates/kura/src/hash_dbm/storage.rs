//! One open HashDbm file: its mapping, header fields, codec and space, and the chain
//! operations on it.
//!
//! Concurrency contract: the chain of a bucket (its entry in the bucket array and every
//! record reachable from it) is read only under the bucket's stripe lock, shared or
//! exclusive, and written only under it exclusively. Free blocks belong to no chain and are
//! written only by the thread that took them from the pool. The methods that touch chains
//! take a proof of the right lock (`chain_lock.rs`): `Chain` to read, `ChainMut` to write,
//! `WholeFile` for the whole file, so a caller without the lock does not compile.
//!
//! Crash contract: a record is written completely before anything links to it, and a link
//! is a single pointer write, so a process killed at any moment leaves every chain either
//! before or after each update. In place, a replace is one pointer write too: the new
//! version takes the old one's place in the chain (`HashDbm::apply`). A record unlinked in
//! place is held, untouched, until the next hard synchronization (freed.rs), so that after
//! a power loss every record of the last synchronized state is still in the file.

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

use xxhash_rust::xxh3::xxh3_64;

use super::buckets::{filter_bits, BucketCache, Entry};
use super::chain_lock::{Chain, ChainMut, WholeFile};
use super::freed::{Freed, FreedBlock};
use super::header::{Header, RecordCheck, UpdateMode, BUCKET_WIDTH, COPIES_BYTES};
use super::header_copies::{read_copies, Copies};
use super::record::{
    self, checksum, encode_free, encode_record_header, next_width, Block, Check, PointerReach, RecordHeader, RecordLen,
    KIND_FREE, KIND_RECORD, KIND_TOMBSTONE, MAX_HEADER_SIZE,
};
use super::space::{Space, SHARDS};
use crate::codec::{Codec, Effort};
use crate::encoding::{decode_varint, encode_varint};
use crate::error::{Error, ErrorKind, Result};
use crate::file::{open_regular_file, FileLock, LockMode, MappedFile};

/// Bytes `Storage::will_need_head` asks for: one page of the disk's, which holds the record
/// header, key and a value of most sizes.
const HEAD_READ_AHEAD_BYTES: usize = 4096;

/// Hash of a key: picks its bucket and seeds its record checksum. Part of the file format.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// Bucket of a hash among `num_buckets` (multiply-shift, no division).
#[inline]
pub fn bucket_of(hash: u64, num_buckets: u64) -> u64 {
    ((u128::from(hash) * u128::from(num_buckets)) >> 64) as u64
}

/// Where the pointer to a record lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Bucket(u64),
    Next { at: u64, width: u8 },
}

/// A record found in a chain.
#[derive(Debug, Clone, Copy)]
pub struct Found {
    pub offset: u64,
    pub header: RecordHeader,
    pub link: Link,
}

/// What the first record of a chain says about a key (`Storage::find_at_head`).
#[derive(Debug, Clone, Copy)]
pub enum HeadStep {
    /// The head is the key's record or tombstone.
    Found(Found),
    /// The chain holds no record of the key.
    Absent,
    /// The head holds another key and the chain goes on; its next record is on its way.
    Further(AfterHead),
}

/// Where a lookup leaves a chain whose head holds another key: `Storage::find_after_head`
/// goes on from the second record rather than reading the head again.
#[derive(Debug, Clone, Copy)]
pub struct AfterHead {
    /// The bucket whose chain it is: `find_after_head` must be given that chain's proof.
    bucket: u64,
    head: u64,
    next: u64,
    /// The link that points at `next` (the head's).
    link: Link,
}

/// A walk along a chain looking for `key` (`find`, `find_after_head`): it stops at the key's
/// record, and gathers the filter bits of every other key it passes, which become the
/// bucket's filter when the chain does not hold the key. Each caller walks with a closure of
/// its own around `step`, so that each walk compiles to one loop in its caller (a shared
/// closure or function around the walk was not inlined, and cost a single get 8-25% in the
/// caches).
struct KeySearch<'k> {
    key: &'k [u8],
    found: Option<Found>,
    filter: u32,
}

impl<'k> KeySearch<'k> {
    fn new(key: &'k [u8]) -> KeySearch<'k> {
        KeySearch { key, found: None, filter: 0 }
    }

    /// Looks at one record of the walk; false once it is the key's.
    #[inline(always)]
    fn step(&mut self, offset: u64, header: &RecordHeader, link: Link, record_key: &[u8]) -> bool {
        if record_key == self.key {
            self.found = Some(Found { offset, header: *header, link });
            return false;
        }
        self.filter |= filter_bits(hash_key(record_key));
        true
    }
}

/// Settings of a new file.
#[derive(Debug, Clone)]
pub struct Layout {
    pub codec: crate::codec::CodecKind,
    pub dictionary: Vec<u8>,
    pub update_mode: UpdateMode,
    pub num_buckets: u64,
    pub max_file_size: u64,
    /// Which check the records get, and so the format version of the file.
    pub record_check: RecordCheck,
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct ShardCount(AtomicI64);

fn new_counts(count: u64) -> Box<[ShardCount]> {
    let counts: Box<[ShardCount]> = (0..SHARDS).map(|_| ShardCount::default()).collect();
    if let Some(first) = counts.first() {
        first.0.store(count as i64, Ordering::Relaxed);
    }
    counts
}

/// The free-pool and counter shard of a bucket: its lock stripe's, so that one stripe's
/// writers always use the same shard.
#[inline]
pub fn shard_of(bucket: u64) -> usize {
    (bucket % SHARDS as u64) as usize
}

thread_local! {
    /// Per-thread buffer for compressing values, so writes do not allocate. (Records are
    /// assembled in place in the mapping.)
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A record's value as a file stores it: the bytes (compressed or not), the check they give
/// with the key's hash, and the codec of the file they come from.
#[derive(Clone, Copy)]
pub struct StoredValue<'a> {
    pub bytes: &'a [u8],
    pub compressed: bool,
    pub check: Check,
    pub codec: crate::codec::CodecKind,
}

pub struct Storage {
    file: MappedFile,
    _lock: FileLock,
    pub header: Header,
    pub codec: Codec,
    pub space: Space,
    /// Records freed since the last hard synchronization, not yet in the pool (freed.rs).
    freed: Freed,
    /// Record count, split like the free pool so that writers on different stripes do not
    /// share a counter's cache line; the sum is the count.
    counts: Box<[ShardCount]>,
    /// False when the file was found not closed cleanly and was not restored (read-only).
    pub healthy: bool,
    /// What the open found of the header's two copies (version 4 files; `One` before).
    pub copies: Copies,
    /// A writable open found a copy damaged or stale and wrote both anew (`mark_open`).
    pub copies_repaired: bool,
    /// The bucket array in memory, mirroring the file's (see buckets.rs).
    buckets: BucketCache,
    /// The stored dictionary failed its checksum (only ever true for a salvage, which opens
    /// such a file anyway to copy the records that do not need it): every compressed
    /// record is then refused rather than decoded with bad history.
    dictionary_damaged: bool,
    /// How wide the chain pointers of new records are (record::next_width): `Growing` but
    /// between a rebuild's `start_copy` and `finish_copy`.
    pointer_reach: PointerReach,
    /// Bytes below a chain's head that a lookup asks the CPU to load with the head, in a
    /// file a rebuild packed (0 otherwise): see `chain_lookbehind`.
    chain_lookbehind: usize,
}

/// Records a rebuild puts in each bucket when not given `num_buckets`: three to a bucket
/// take 5 bytes of bucket array and chain pointer a record fewer than one (at the peers
/// benchmark's 174-byte records), and, the rebuild writing each chain's records one after
/// another, a lookup loads them together (`chain_lookbehind`) and walks them as fast as one
/// bucket a record (docs/hash.md, "Rebuild").
pub const REBUILT_RECORDS_PER_BUCKET: u64 = 3;

/// The most bytes below a head that a lookup loads with it: 8 cache lines.
const MAX_LOOKBEHIND: u64 = 512;

/// Bytes below a chain's head that a lookup loads with the head in a file a rebuild packed
/// (`Header::rebuilt_records` > 0; else 0). The rebuild wrote each chain's records one after
/// another, the head last, so those a lookup walks after the head lie right below it: the
/// average record of the file times the records a bucket held beyond its head (0 at one
/// record a bucket or fewer, 2 at three), at most `MAX_LOOKBEHIND`. Records added since the
/// rebuild lie elsewhere; for them the loads are wasted, a few lines each, until the next
/// rebuild.
fn chain_lookbehind(header: &Header, data_end: u64) -> usize {
    if header.rebuilt_records == 0 {
        return 0;
    }
    let average = data_end.saturating_sub(header.data_start()) / header.rebuilt_records;
    let beyond_head = header.rebuilt_records.div_ceil(header.num_buckets.max(1)).saturating_sub(1);
    average.saturating_mul(beyond_head).min(MAX_LOOKBEHIND) as usize
}

/// How `from_file` treats a dictionary that fails its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamagedDictionary {
    /// BrokenData: the normal open.
    Refuse,
    /// Open without it; compressed records read as BrokenData (restore).
    Skip,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").field("file", &self.file).field("header", &self.header).finish()
    }
}

impl Storage {
    /// Creates a new, empty database file at `path` (replacing any content), locked for
    /// writing.
    pub fn create(path: &Path, layout: &Layout) -> Result<Storage> {
        let file = open_regular_file(path, true, true)?;
        let lock = FileLock::acquire(&file, path, LockMode::Exclusive)?;
        Storage::initialize(file, lock, path, layout)
    }

    /// Writes a fresh database into an already locked file.
    pub fn initialize(file: File, lock: FileLock, path: &Path, layout: &Layout) -> Result<Storage> {
        let dictionary_len = u32::try_from(layout.dictionary.len())
            .map_err(|_| Error::invalid("the dictionary is larger than 4 GiB"))?;
        let mut header = Header {
            codec: layout.codec,
            update_mode: layout.update_mode,
            closed_cleanly: false,
            num_buckets: layout.num_buckets,
            record_count: 0,
            data_end: 0,
            max_file_size: layout.max_file_size,
            dictionary_len,
            free_list_offset: 0,
            free_list_len: 0,
            dictionary_checksum: xxh3_64(&layout.dictionary),
            free_list_checksum: 0,
            rebuilt_records: 0,
            version: layout.record_check.version(),
        };
        header.data_end = header.data_start();
        if header.data_end > layout.max_file_size {
            return Err(Error::invalid(format!(
                "{} buckets do not fit in max_file_size {}",
                layout.num_buckets, layout.max_file_size
            )));
        }
        let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
        // A zero length first discards old content; extending then yields zeroed buckets.
        file.set_len(0).map_err(|e| io("truncate", e))?;
        file.set_len(header.data_end).map_err(|e| io("resize", e))?;
        // Allocated now so that a full disk fails here, not as a SIGBUS on a bucket write.
        crate::file::allocate(&file, 0, header.data_end).map_err(|e| io("allocate", e))?;
        file.write_all_at(&layout.dictionary, header.dictionary_offset()).map_err(|e| io("write", e))?;
        file.write_all_at(&header.encode_copies(), 0).map_err(|e| io("write", e))?;
        let codec = Codec::new(layout.codec, layout.dictionary.clone())?;
        let mapped = MappedFile::new(file, path, layout.max_file_size, true)?;
        let space = Space::new(header.data_end);
        let buckets = BucketCache::new(header.num_buckets)?;
        Ok(Storage {
            file: mapped,
            _lock: lock,
            header,
            codec,
            space,
            freed: Freed::default(),
            counts: new_counts(0),
            healthy: true,
            copies: Copies::Intact,
            copies_repaired: false,
            buckets,
            dictionary_damaged: false,
            pointer_reach: PointerReach::Growing,
            chain_lookbehind: 0,
        })
    }

    /// Reads the database in an opened, locked file.
    pub fn from_file(
        file: File,
        lock: FileLock,
        path: &Path,
        writable: bool,
        damaged_dictionary: DamagedDictionary,
    ) -> Result<Storage> {
        let file_len = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len();
        if file_len == 0 {
            return Err(Error::broken(format!("{} is empty: not a Kura hash database", path.display())));
        }
        let mut bytes = [0u8; COPIES_BYTES];
        let readable = usize::try_from(file_len.min(COPIES_BYTES as u64)).unwrap_or(0);
        let head = bytes.get_mut(..readable).unwrap_or_default();
        file.read_exact_at(head, 0).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        // The header at 0, or its copy when it fails its check (header.rs, `read_copies`).
        let (header, copies) = read_copies(head)
            .and_then(|(header, copies)| header.validate(file_len).map(|()| (header, copies)))
            .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))?;
        let mut storage = Storage::with_header(file, lock, path, header, writable, damaged_dictionary)?;
        storage.copies = copies;
        Ok(storage)
    }

    /// The database in an opened, locked file, laid out as `header` says: the one read from
    /// the file (`from_file`), or one a salvage repaired or rebuilt (header_salvage.rs),
    /// validated against the file's length.
    pub fn with_header(
        file: File,
        lock: FileLock,
        path: &Path,
        mut header: Header,
        writable: bool,
        damaged_dictionary: DamagedDictionary,
    ) -> Result<Storage> {
        let file_len = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len();
        header.validate(file_len).map_err(|e| e.in_file(path))?;
        // The header was validated against the file length, so this allocation is bounded
        // by the file's real size.
        let mut dictionary = vec![0u8; header.dictionary_len as usize];
        file.read_exact_at(&mut dictionary, header.dictionary_offset())
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        // Every compressed value depends on every byte of the dictionary, and the record
        // checksums cover only the stored frames: the dictionary is checked here, before any
        // value can be decoded with it. A version 1 file has no dictionary checksum; its
        // dictionary is taken as it is and the checksum a writer stores from now on is its.
        let mut dictionary_damaged = false;
        if !header.has_shared_checksums() {
            header.dictionary_checksum = xxh3_64(&dictionary);
        } else if xxh3_64(&dictionary) != header.dictionary_checksum {
            if damaged_dictionary == DamagedDictionary::Refuse {
                return Err(Error::broken(format!(
                    "{}: the zstd dictionary ({} bytes at offset {}) fails its checksum: the file is damaged \
                     (kura restore salvages the records stored uncompressed)",
                    path.display(),
                    header.dictionary_len,
                    header.dictionary_offset()
                )));
            }
            dictionary_damaged = true;
            dictionary.clear();
        }
        let codec = Codec::new(header.codec, dictionary)?;
        let mapped = MappedFile::new(file, path, header.max_file_size, writable)?;
        let data_end = if header.closed_cleanly { header.data_end } else { file_len };
        let buckets = BucketCache::new(header.num_buckets)?;
        // SAFETY: the storage is not shared yet; the range was validated against the file.
        buckets.load(
            unsafe { mapped.slice(header.buckets_start(), (header.num_buckets * BUCKET_WIDTH) as usize)? },
            BUCKET_WIDTH as usize,
        );
        let lookbehind = chain_lookbehind(&header, data_end);
        let storage = Storage {
            buckets,
            file: mapped,
            _lock: lock,
            counts: new_counts(header.record_count),
            space: Space::new(data_end),
            freed: Freed::default(),
            healthy: header.closed_cleanly,
            copies: if header.has_copy() { Copies::Intact } else { Copies::One },
            copies_repaired: false,
            header,
            codec,
            dictionary_damaged,
            pointer_reach: PointerReach::Growing,
            chain_lookbehind: lookbehind,
        };
        if storage.header.closed_cleanly {
            storage.load_free_list();
        }
        Ok(storage)
    }

    /// Marks the file as open for writing: a crash from now on is detected at the next open.
    pub fn mark_open(&mut self) -> Result<()> {
        if self.header.closed_cleanly && self.header.free_list_len > 0 {
            // The saved free list lies after the records; drop it, it is in memory now.
            // SAFETY: no slice of the file is held while the storage is being set up.
            unsafe { self.file.set_len(self.space.end())? };
        }
        self.header.closed_cleanly = false;
        self.header.free_list_offset = 0;
        self.header.free_list_len = 0;
        self.header.free_list_checksum = 0;
        // Both copies are written: one found damaged or stale at open is repaired here.
        self.write_header()?;
        self.copies_repaired = self.copies.is_damaged();
        self.file.sync(false)
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Whether the stored dictionary failed its checksum (see `DamagedDictionary::Skip`).
    pub fn dictionary_damaged(&self) -> bool {
        self.dictionary_damaged
    }

    /// Refuses every compressed record from now on, as with a damaged dictionary: a salvage
    /// that could not establish the codec (header_salvage.rs) copies only raw records.
    pub fn refuse_compressed(&mut self) {
        self.dictionary_damaged = true;
    }

    /// The settings this file was created with, for a copy of it (without a damaged
    /// dictionary: the copy then compresses as plain zstd until its next rebuild).
    pub fn layout(&self) -> Layout {
        Layout {
            codec: self.header.codec,
            dictionary: self.codec.dictionary().to_vec(),
            update_mode: self.header.update_mode,
            num_buckets: self.header.num_buckets,
            max_file_size: self.header.max_file_size,
            record_check: self.header.record_check(),
        }
    }

    /// Makes this new file a rebuild's copy, about to receive `bytes` of records: the chain
    /// pointers of its records reach twice that (`PointerReach::Below`), without the spare
    /// byte of a growing file's, until `finish_copy`.
    pub fn start_copy(&mut self, bytes: u64) {
        let expected_end = self.header.data_start().saturating_add(bytes);
        self.pointer_reach = PointerReach::Below(expected_end.saturating_mul(2));
    }

    /// Ends a copy that wrote `count` records: the file counts them, records in its header
    /// that they are packed (`Header::rebuilt_records`, `chain_lookbehind`), and writes the
    /// pointers of later records as a growing file does.
    pub fn finish_copy(&mut self, count: u64) {
        self.set_count(count);
        self.pointer_reach = PointerReach::Growing;
        self.header.rebuilt_records = count;
        self.chain_lookbehind = chain_lookbehind(&self.header, self.space.end());
    }

    /// Forgets that a rebuild packed the file (`clear` empties it): the header's
    /// `rebuilt_records` and the lookbehind go back to those of a file never rebuilt.
    pub fn forget_packing(&mut self) {
        self.header.rebuilt_records = 0;
        self.chain_lookbehind = 0;
    }

    /// Records that the file was renamed (a rebuilt file moved over the original).
    pub fn renamed(&mut self, path: &Path) {
        self.file.renamed(path);
    }

    pub fn is_writable(&self) -> bool {
        self.file.is_writable()
    }

    pub fn count(&self) -> u64 {
        let sum: i64 = self.counts.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
        sum.max(0) as u64
    }

    pub fn file_len(&self) -> u64 {
        self.file.len()
    }

    /// Adds `delta` to the count of `bucket`'s shard.
    pub fn add_count(&self, bucket: u64, delta: i64) {
        if let Some(count) = self.counts.get(shard_of(bucket)) {
            count.0.fetch_add(delta, Ordering::Relaxed);
        }
    }

    pub fn set_count(&self, count: u64) {
        for (i, shard) in self.counts.iter().enumerate() {
            shard.0.store(if i == 0 { count as i64 } else { 0 }, Ordering::Relaxed);
        }
    }

    /// Where the file's bucket array and the bucket copy live, for prefetch hints only.
    pub fn file_buckets_address(&self) -> usize {
        self.file.address().wrapping_add(self.header.buckets_start() as usize)
    }

    pub fn bucket_cache_address(&self) -> usize {
        self.buckets.address()
    }

    /// Bytes of memory the in-memory bucket array takes.
    pub fn bucket_cache_size(&self) -> usize {
        self.buckets.memory_size()
    }

    fn write_header(&self) -> Result<()> {
        let mut header = self.header.clone();
        header.record_count = self.count();
        header.data_end = self.space.end();
        // One pwrite, not stores into the map: a header torn by a kill -9 between two stores
        // fails its checksum (MappedFile::write_untorn; the TreeDbm soak found the same with
        // its header copy), and one pwrite within a page puts both copies (version 4) or
        // neither. A power loss tears it at most inside one 512-byte sector, and each copy has
        // a sector of its own: at least one copy stays whole, new or as before (docs/format.md).
        // SAFETY: the header bytes belong to no chain; only the thread that holds the whole
        // database (open, sync or close, under every stripe lock or before sharing) writes them.
        unsafe { self.file.write_untorn(0, &header.encode_copies()) }
    }

    /// Writes the header with the current counters and flushes the mapping. A hard
    /// synchronization also settles the records freed since the last one (freed.rs).
    pub fn synchronize(&self, hard: bool) -> Result<()> {
        if !self.is_writable() {
            return Ok(());
        }
        self.write_header()?;
        if !hard {
            return self.file.sync(false);
        }
        let held = self.freed.take_all();
        self.sync_holding(&held)?;
        if held.is_empty() {
            return Ok(());
        }
        self.settle_held(&held)?;
        self.file.sync(true)
    }

    /// A hard sync of the mapping, which makes durable every pointer that unlinked the
    /// records `held`, taken before it: each was unlinked before it was held. On failure they
    /// stay held.
    fn sync_holding(&self, held: &[FreedBlock]) -> Result<()> {
        let synced = self.file.sync(true);
        if synced.is_err() {
            self.freed.put_back(held.to_vec());
        }
        synced
    }

    /// Rewrites the tag of each held record as dead (the layout and checksum bits stay) and
    /// hands them to the free pool, merged with adjacent free blocks under one free-span tag
    /// (coalesce.rs). Each record of a merged block keeps its dead tag (but the first, under
    /// the span's), so that a restore scan that meets the block other than at its start
    /// still knows its records for dead ones. The caller makes the tags durable.
    fn settle_held(&self, held: &[FreedBlock]) -> Result<()> {
        for block in held {
            // SAFETY: a held record belongs to no chain (it was unlinked) and not to the pool
            // (it is not released yet): only the caller, which took it, can reach it.
            unsafe { self.file.write(block.offset, &[block.dead_tag])? };
        }
        let blocks = held.iter().map(|b| (b.offset, b.len, b.shard)).collect();
        let mut span = Vec::new();
        self.space.settle(blocks, |offset, len| {
            encode_free(len, &mut span);
            // SAFETY: the merged block is made of held records, owned as above, and of blocks
            // taken out of the pool for the merge: no other thread can reach it.
            unsafe { self.file.write(offset, &span) }
        })
    }

    /// The records held until the next hard synchronization (for tests).
    #[cfg(test)]
    pub fn held_blocks(&self) -> Vec<FreedBlock> {
        let held = self.freed.take_all();
        self.freed.put_back(held.clone());
        held
    }

    /// Whether the held records are due a hard synchronization (freed.rs): the writer that
    /// sees this synchronizes once it has released its lock.
    #[inline]
    pub fn settle_due(&self) -> bool {
        self.freed.settle_due()
    }

    /// Saves the free list after the records, marks the file closed cleanly and flushes it.
    pub fn close(&mut self) -> Result<()> {
        if !self.is_writable() {
            return Ok(());
        }
        // The held records join the pool, to be saved with it. Their dead tags reach the disk
        // after the pointers that unlinked them (the first sync) and before the clean header
        // does: a restore trusts a cleanly closed file to hold no unlinked record with a live
        // tag (restore.rs, the scan when the chains fall short of the record count). Every
        // sync of a close is `sync_for_close`; no caller uses a storage whose close failed,
        // so a failed sync need not put the held records back, as `sync_holding` does.
        let held = self.freed.take_all();
        if !held.is_empty() {
            self.file.sync_for_close()?;
            self.settle_held(&held)?;
        }
        // Free blocks that reach the end of the record area are given back to the file
        // system instead of being saved: removing records shrinks the file.
        let mut blocks = self.space.blocks();
        let mut end = self.space.end();
        while let Some(&(offset, len)) = blocks.last() {
            if offset + len != end {
                break;
            }
            end = offset;
            blocks.pop();
        }
        self.space.reset_end(end);
        let mut list = Vec::new();
        let mut previous = 0;
        let mut buf = [0u8; 10];
        for (offset, len) in blocks {
            for value in [offset - previous, len] {
                let n = encode_varint(value, &mut buf);
                list.extend_from_slice(buf.get(..n).unwrap_or_default());
            }
            previous = offset;
        }
        // SAFETY: close holds every stripe lock exclusively; nothing else reads the file.
        let saved = unsafe { self.file.set_len(end + list.len() as u64).and_then(|()| self.file.write(end, &list)) };
        if saved.is_err() {
            // No room for the list (a full disk): close without it rather than leave the file
            // to be restored, which would need room for a whole copy. Its free blocks stay
            // unused until a rebuild.
            list.clear();
            // SAFETY: as above; this only shrinks the file to the end of the records.
            unsafe { self.file.set_len(end)? };
        }
        // Everything before the clean header, on the disk before it: the records written
        // since the last sync, the dead tags, the free list and the file's length. An open
        // trusts a clean file's chains and list without a restore; with one sync for all, a
        // power loss could keep the header and not a page of records (a chain then led to a
        // free block) or not the length (the list then lay past the end): the power-loss test
        // that cuts a close at each of its syncs, 20,000 images.
        self.file.sync_for_close()?;
        self.header.free_list_offset = if list.is_empty() { 0 } else { end };
        self.header.free_list_len = list.len() as u32;
        self.header.free_list_checksum = xxh3_64(&list);
        self.header.closed_cleanly = true;
        self.write_header()?;
        self.file.sync_for_close()
    }

    fn load_free_list(&self) {
        let (offset, len) = (self.header.free_list_offset, self.header.free_list_len as usize);
        if len == 0 {
            return;
        }
        // SAFETY: called at open, before the storage is shared.
        let Ok(bytes) = (unsafe { self.file.slice(offset, len) }) else { return };
        // A list that fails its checksum is not used at all: an entry with a wrong length
        // would hand out live records as free space. Its blocks stay unused until a rebuild.
        if self.header.has_shared_checksums() && xxh3_64(bytes) != self.header.free_list_checksum {
            return;
        }
        let data_start = self.header.data_start();
        for (block, block_len) in free_list_entries(bytes).map_while(|entry| entry) {
            // A saved entry is trusted only if it lies in the record area and really holds a
            // free block there; anything else is skipped (a rebuild reclaims it).
            // SAFETY: as above.
            let is_free = block >= data_start
                && block.saturating_add(block_len) <= self.header.data_end
                && unsafe { self.file.slice(block, 1) }
                    .is_ok_and(|b| b.first().is_some_and(|&t| t & KIND_FREE == KIND_FREE));
            if is_free {
                self.space.release(block, block_len, (block >> 4) as usize);
            }
        }
    }

    /// The saved free-block list of a file closed cleanly, as stored (None without one), and
    /// whether it matches the checksum the header keeps (a version 1 file keeps none: true).
    pub fn saved_free_list(&self, _whole: &WholeFile<'_>) -> Result<Option<(&[u8], bool)>> {
        let (offset, len) = (self.header.free_list_offset, self.header.free_list_len as usize);
        if !self.header.closed_cleanly || len == 0 {
            return Ok(None);
        }
        // SAFETY: the caller has the whole file to itself.
        let bytes = unsafe { self.file.slice(offset, len)? };
        let holds = !self.header.has_shared_checksums() || xxh3_64(bytes) == self.header.free_list_checksum;
        Ok(Some((bytes, holds)))
    }

    /// Asks the disk for the first record of `chain` (`MappedFile::will_need`, which starts
    /// the read and returns): for a walk over the buckets of a file larger than memory, whose
    /// records lie in the file in the order they were written, not in bucket order.
    pub fn will_need_head(&self, chain: Chain<'_>) {
        if let Ok(entry) = self.entry(chain.bucket()) {
            if entry.head != 0 {
                self.file.will_need(entry.head, HEAD_READ_AHEAD_BYTES);
            }
        }
    }

    /// Starts loading the first record of `chain` into the processor's cache: a walk over
    /// every bucket (a rebuild's) reads the records at random, one memory miss each, which
    /// asking a few buckets ahead overlaps.
    pub fn prefetch_first_record(&self, chain: Chain<'_>) {
        if let Ok(entry) = self.entry(chain.bucket()) {
            if entry.head != 0 {
                self.file.prefetch_range(entry.head, MAX_HEADER_SIZE);
            }
        }
    }

    /// The first bucket in `from..to` whose chain is not empty, or `to`: a hint, read without
    /// the buckets' locks, so a chain linked or emptied meanwhile may show either way. A
    /// cursor skips empty buckets with it; locking each of a default file's million buckets
    /// in turn took 40 ms to list a file of one record.
    pub fn first_occupied_bucket(&self, from: u64, to: u64) -> u64 {
        self.buckets.first_occupied(from, to)
    }

    /// Reads the head pointer of `chain`'s bucket.
    #[inline]
    pub fn head(&self, chain: Chain<'_>) -> Result<u64> {
        Ok(self.entry(chain.bucket())?.head)
    }

    #[inline]
    fn entry(&self, index: u64) -> Result<Entry> {
        self.buckets.get(index).ok_or_else(|| Error::broken(format!("bucket {index} out of range")))
    }

    /// Starts loading the first record of `chain`, which a lookup of the key hashed `hash`
    /// (`key_len` bytes long) reads first; nothing when the bucket's filter rules the key out.
    /// A hint only: the proof of the lock makes the entry it reads the chain's, and a stale
    /// address would cost nothing more than the wasted hint.
    #[inline]
    pub fn prefetch_head(&self, chain: Chain<'_>, hash: u64, key_len: usize) {
        if let Ok(entry) = self.entry(chain.bucket()) {
            if entry.may_contain(hash) {
                self.file.prefetch_range(entry.head, MAX_HEADER_SIZE.saturating_add(key_len));
            }
        }
    }

    /// Links `offset`, a new record of the key hashed `hash`, at the head of `chain`.
    pub fn link_new_head(&self, chain: &ChainMut<'_>, offset: u64, hash: u64) -> Result<()> {
        let filter = self.entry(chain.bucket())?.filter | filter_bits(hash);
        self.set_head(chain, offset, filter)
    }

    fn set_head(&self, chain: &ChainMut<'_>, offset: u64, filter: u32) -> Result<()> {
        let index = chain.bucket();
        let bytes = offset.to_le_bytes();
        // The file first: it is what survives a crash.
        // SAFETY: the bucket entry belongs to `chain`, which the caller holds exclusively.
        unsafe {
            self.file.write(self.header.bucket_offset(index), bytes.get(..BUCKET_WIDTH as usize).unwrap_or_default())?
        };
        self.buckets.set(index, Entry { head: offset, filter });
        Ok(())
    }

    /// Parses the record at `offset` of `_chain` and checks that all of it lies within the
    /// file.
    #[inline]
    pub fn read_header(&self, chain: Chain<'_>, offset: u64) -> Result<RecordHeader> {
        self.parse_header(chain, offset).map_err(|e| e.in_file(self.path()))
    }

    /// `read_header` before its error names the file.
    #[inline]
    fn parse_header(&self, _chain: Chain<'_>, offset: u64) -> Result<RecordHeader> {
        if offset < self.header.data_start() {
            return Err(Error::broken(format!("a chain points to {offset}, inside the header area")));
        }
        // SAFETY: the record belongs to the chain the caller holds a lock of, so no thread
        // writes it meanwhile.
        let bytes = unsafe { self.file.slice_upto(offset, MAX_HEADER_SIZE)? };
        let header = RecordHeader::parse(bytes, offset, self.header.check_layout())?;
        if offset.saturating_add(header.total_len()) > self.file.len() {
            return Err(Error::broken(format!("record at {offset} runs past the end of the file")));
        }
        Ok(header)
    }

    /// The key of a parsed record of `_chain`, valid while the chain's lock is held.
    #[inline]
    pub fn key_of<'a>(&'a self, _chain: Chain<'a>, offset: u64, header: &RecordHeader) -> Result<&'a [u8]> {
        // SAFETY: as in `read_header`; the slice lives no longer than the lock's proof.
        unsafe { self.file.slice(offset + header.header_len as u64, header.key_len) }
    }

    /// Verifies the checksum of a record of `chain` and decodes its value into `out`.
    pub fn read_value(
        &self,
        chain: Chain<'_>,
        offset: u64,
        header: &RecordHeader,
        hash: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let stored = self.checked_stored(chain, offset, header, hash)?;
        self.decode_stored(&stored, out)
    }

    /// Verifies the checksum of a record of `chain` and shows its value to `visit`: in place
    /// in the file when it is stored raw, else decoded into a buffer of its own. `visit`
    /// cannot keep the slice, which borrows the mapping only for the call.
    pub fn visit_value<R>(
        &self,
        chain: Chain<'_>,
        offset: u64,
        header: &RecordHeader,
        hash: u64,
        visit: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        let stored = self.checked_value(chain, offset, header, hash)?;
        if !header.is_compressed() {
            return Ok(visit(stored));
        }
        let mut decoded = Vec::new();
        self.codec.decode(stored, true, &mut decoded).map_err(|e| e.in_file(self.path()))?;
        Ok(visit(&decoded))
    }

    /// The stored bytes of the value of a record of `chain`, once its checksum matched.
    fn checked_value<'a>(
        &'a self,
        chain: Chain<'a>,
        offset: u64,
        header: &RecordHeader,
        hash: u64,
    ) -> Result<&'a [u8]> {
        self.checked_stored(chain, offset, header, hash).map(|stored| stored.bytes)
    }

    /// A record's value as stored, its checksum verified, with the check it gave: what a copy
    /// of the record into a file of the same codec writes as it is (`write_stored_record`).
    pub fn checked_stored<'a>(
        &'a self,
        _chain: Chain<'a>,
        offset: u64,
        header: &RecordHeader,
        hash: u64,
    ) -> Result<StoredValue<'a>> {
        let at = offset + (header.header_len + header.key_len) as u64;
        if header.value_len > 64 {
            self.file.prefetch_range(at, header.value_len);
        }
        // SAFETY: as in `read_header`; the slice lives no longer than the lock's proof.
        let stored = unsafe { self.file.slice(at, header.value_len)? };
        let path = self.path().display();
        let check = checksum(hash, header.is_compressed(), stored);
        if !header.verifies(check) {
            return Err(Error::broken(format!("{path}: record at {offset}: checksum mismatch")));
        }
        if self.dictionary_damaged && header.is_compressed() {
            return Err(Error::broken(format!("{path}: record at {offset}: compressed with the damaged dictionary")));
        }
        Ok(StoredValue { bytes: stored, compressed: header.is_compressed(), check, codec: self.header.codec })
    }

    /// Decodes a value `checked_stored` gave into `out`.
    pub fn decode_stored(&self, stored: &StoredValue<'_>, out: &mut Vec<u8>) -> Result<()> {
        self.codec.decode(stored.bytes, stored.compressed, out).map_err(|e| e.in_file(self.path()))
    }

    /// Walks `chain` to the first record or tombstone of `key` (hashed `hash`). A walk that
    /// reaches the end of the chain leaves behind the chain's exact key filter.
    pub fn find(&self, chain: Chain<'_>, key: &[u8], hash: u64) -> Result<Option<Found>> {
        let entry = self.entry(chain.bucket())?;
        if !entry.may_contain(hash) {
            return Ok(None);
        }
        if self.chain_lookbehind > 0 {
            // A packed chain: the records after the head lie right below it (Storage::chain_lookbehind).
            let from = entry.head.saturating_sub(self.chain_lookbehind as u64);
            self.file.prefetch_range(from, self.chain_lookbehind.saturating_add(MAX_HEADER_SIZE));
        }
        let mut search = KeySearch::new(key);
        self.walk(chain, |offset, header, link, record_key| Ok(search.step(offset, header, link, record_key)))?;
        if search.found.is_none() {
            self.refresh_filter(chain, search.filter)?;
        }
        Ok(search.found)
    }

    /// The first step of `find`: the head of `chain` alone. When the head holds another key
    /// and the chain goes on, starts loading the next record and says `Further`, so that a
    /// batch can look at every head of a group before it waits for any second record; then
    /// `find_after_head` goes on from the second record.
    pub fn find_at_head(&self, chain: Chain<'_>, key: &[u8], hash: u64) -> Result<HeadStep> {
        if !self.entry(chain.bucket())?.may_contain(hash) {
            return Ok(HeadStep::Absent);
        }
        let mut step = HeadStep::Absent;
        self.walk(chain, |offset, header, link, record_key| {
            step = if record_key == key {
                HeadStep::Found(Found { offset, header: *header, link })
            } else if header.next != 0 {
                self.file.prefetch_range(header.next, MAX_HEADER_SIZE.saturating_add(key.len()));
                let link = Link::Next { at: header.next_at, width: header.next_width };
                HeadStep::Further(AfterHead { bucket: chain.bucket(), head: offset, next: header.next, link })
            } else {
                HeadStep::Absent
            };
            Ok(false)
        })?;
        Ok(step)
    }

    /// The rest of `find` for a key whose `find_at_head` said `Further` (in the same hold of
    /// the chain's lock, so the chain is the one its head step saw).
    pub fn find_after_head(&self, chain: Chain<'_>, after: AfterHead, key: &[u8]) -> Result<Option<Found>> {
        debug_assert_eq!(after.bucket, chain.bucket(), "a head step of another chain");
        let mut search = KeySearch::new(key);
        self.walk_from(chain, after.next, after.link, |offset, header, link, record_key| {
            Ok(search.step(offset, header, link, record_key))
        })?;
        if search.found.is_none() {
            let header = self.read_header(chain, after.head)?;
            let head_filter = filter_bits(hash_key(self.key_of(chain, after.head, &header)?));
            self.refresh_filter(chain, search.filter | head_filter)?;
        }
        Ok(search.found)
    }

    /// Tightens the key filter of `chain`'s bucket to `filter`, the bits of every key in the
    /// chain. Readers may store this too: under the stripe lock no writer changes the chain,
    /// and every reader computes the same filter.
    fn refresh_filter(&self, chain: Chain<'_>, filter: u32) -> Result<()> {
        let bucket = chain.bucket();
        let entry = self.entry(bucket)?;
        self.buckets.set(bucket, Entry { head: entry.head, filter });
        Ok(())
    }

    /// Calls `visit(offset, header, link, key)` for each record of a chain in order until it
    /// returns false. A cycle or a pointer to something that is not a record is BrokenData;
    /// cycles are caught with Brent's algorithm in time linear in the chain's length.
    pub fn walk(
        &self,
        chain: Chain<'_>,
        visit: impl FnMut(u64, &RecordHeader, Link, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        self.walk_from(chain, self.head(chain)?, Link::Bucket(chain.bucket()), visit)
    }

    /// `walk` from the record at `offset` of `chain`, which `link` points at.
    fn walk_from(
        &self,
        chain: Chain<'_>,
        mut offset: u64,
        mut link: Link,
        mut visit: impl FnMut(u64, &RecordHeader, Link, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let bucket = chain.bucket();
        let (mut marker, mut power, mut steps) = (0u64, 1u64, 0u64);
        while offset != 0 {
            let header = self.read_header(chain, offset)?;
            if header.kind() == KIND_FREE {
                return Err(
                    Error::broken(format!("bucket {bucket} links to a free block at {offset}")).in_file(self.path())
                );
            }
            let key = self.key_of(chain, offset, &header)?;
            if !visit(offset, &header, link, key)? {
                return Ok(());
            }
            link = Link::Next { at: header.next_at, width: header.next_width };
            offset = header.next;
            if offset != 0 && offset == marker {
                return Err(Error::broken(format!("the chain of bucket {bucket} loops")).in_file(self.path()));
            }
            steps += 1;
            if steps == power {
                marker = offset;
                power = power.saturating_mul(2);
                steps = 0;
            }
        }
        Ok(())
    }

    /// Writes a record (or tombstone, with `value` None) for `key` at a fresh place, with
    /// `next` as its successor in `chain`, which it is to join, and returns its offset.
    /// Nothing links to it yet.
    pub fn write_record(
        &self,
        chain: &ChainMut<'_>,
        key: &[u8],
        hash: u64,
        value: Option<&[u8]>,
        next: u64,
    ) -> Result<u64> {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (kind, (stored, compressed)) = match value {
                Some(raw) => (KIND_RECORD, self.codec.stored(raw, Effort::Dense, &mut scratch)?),
                None => (KIND_TOMBSTONE, (&[][..], false)),
            };
            let check = checksum(hash, compressed, stored);
            let value = StoredValue { bytes: stored, compressed, check, codec: self.header.codec };
            self.place_record(chain, key, kind, value, next)
        })
    }

    /// Whether this file reads `stored`, a value of another file, as that file does: the same
    /// codec, and none that takes a dictionary (each file trains its own).
    pub fn takes_as_stored(&self, stored: &StoredValue<'_>) -> bool {
        stored.codec == self.header.codec && !self.header.codec.uses_dictionary()
    }

    /// Writes a record whose value another file stores as `stored` (a rebuild's copy): its
    /// bytes and check as they are, neither decoded and encoded again nor hashed again. A
    /// value this file does not take as stored (`takes_as_stored`) is a bug in the caller,
    /// refused as Internal rather than written where no read could decode it.
    pub fn write_stored_record(
        &self,
        chain: &ChainMut<'_>,
        key: &[u8],
        stored: StoredValue<'_>,
        next: u64,
    ) -> Result<u64> {
        if !self.takes_as_stored(&stored) {
            return Err(Error::internal(format!(
                "{}: a value stored with {} copied as stored into a file of {}",
                self.path().display(),
                stored.codec.name(),
                self.header.codec.name()
            )));
        }
        self.place_record(chain, key, KIND_RECORD, stored, next)
    }

    /// Allocates the record's place, links nothing, and writes its header, key and value.
    fn place_record(
        &self,
        chain: &ChainMut<'_>,
        key: &[u8],
        kind: u8,
        value: StoredValue<'_>,
        next: u64,
    ) -> Result<u64> {
        let StoredValue { bytes: stored, compressed, check, .. } = value;
        if stored.len() > record::MAX_VALUE_SIZE {
            return Err(Error::new(ErrorKind::Limit, "the value is larger than 4 GiB"));
        }
        let mut header = [0u8; MAX_HEADER_SIZE];
        let width = next_width(next, self.space.end(), self.pointer_reach);
        let narrow_header_len =
            encode_record_header(&mut header, kind, compressed, check, next, width, key.len(), stored.len());
        let need = RecordLen {
            narrow: (narrow_header_len + key.len() + stored.len()) as u64,
            layout: self.header.check_layout(),
        };
        let reuse = self.header.update_mode == UpdateMode::InPlace;
        let place =
            self.space.allocate(need, reuse, self.header.max_file_size, shard_of(chain.bucket())).ok_or_else(|| {
                Error::new(
                    ErrorKind::Limit,
                    format!("the file would exceed max_file_size {}", self.header.max_file_size),
                )
            })?;
        // Where the record crosses a sector, its header ends with the wide check.
        let header_len = if place.len > need.narrow {
            record::append_wide_check(&mut header, narrow_header_len, check)
        } else {
            narrow_header_len
        };
        let header = header.get(..header_len).unwrap_or_default();
        let record_len = header_len + key.len() + stored.len();
        let len = place.len;
        if record_len as u64 != len {
            debug_assert!(false, "a {record_len}-byte record in a {len}-byte place");
            return Err(Error::broken(format!("record assembly: {record_len} bytes for a {len}-byte place")));
        }
        if let Err(e) = self.file.ensure_len(place.offset + len + place.remainder) {
            // A full disk: the room taken at the end has no file behind it; give it back
            // so that the record area never ends past the file.
            self.space.give_back_end(place.offset, len);
            return Err(e);
        }
        if place.remainder > 0 {
            let mut free = Vec::new();
            encode_free(place.remainder, &mut free);
            // SAFETY: the block came from the pool, so this thread owns it.
            unsafe { self.file.write(place.offset + len, &free)? };
            if place.remainder >= record::MIN_SPAN {
                self.space.release(place.offset + len, place.remainder, shard_of(chain.bucket()));
            }
        }
        // SAFETY: the block is ours, as above (or freshly appended past every chain).
        unsafe {
            // `target` is `record_len` bytes long, so the splits and copies always fit; a
            // failed split is a bug in the length arithmetic above, never a silent skip.
            self.file.write_with(place.offset, record_len, |target| {
                let split = target
                    .split_at_mut_checked(header_len)
                    .and_then(|(head, body)| Some((head, body.split_at_mut_checked(key.len())?)));
                let Some((head, (key_part, value_part))) = split else {
                    debug_assert!(false, "a {record_len}-byte record place cannot hold its parts");
                    return Err(Error::broken(format!("record assembly: {record_len} bytes do not fit the record")));
                };
                head.copy_from_slice(header);
                key_part.copy_from_slice(key);
                value_part.copy_from_slice(stored);
                Ok(())
            })?
        };
        Ok(place.offset)
    }

    /// Whether `link` can point at `target` (a chain pointer has the width it was written
    /// with; a bucket holds any offset of the file).
    pub fn link_fits(&self, link: Link, target: u64) -> bool {
        match link {
            Link::Bucket(_) => true,
            Link::Next { width, .. } => crate::encoding::varint_len(target) <= usize::from(width),
        }
    }

    /// Points `link`, a pointer of `chain`, at `target`.
    pub fn set_link(&self, chain: &ChainMut<'_>, link: Link, target: u64) -> Result<()> {
        match link {
            // The chain loses a record: its filter keeps the record's bits, harmlessly.
            Link::Bucket(index) => {
                debug_assert_eq!(index, chain.bucket(), "a link of another chain");
                self.set_head(chain, target, self.entry(index)?.filter)
            }
            Link::Next { at, width } => {
                let mut field = [0u8; 10];
                let field = field.get_mut(..usize::from(width)).unwrap_or_default();
                // Fits by the invariant of `record::next_width`; a failure means a corrupted
                // chain, which must not be made worse.
                if !crate::encoding::encode_varint_padded(target, field) {
                    return Err(Error::broken(format!("chain pointer at {at} is too narrow for {target}")));
                }
                // SAFETY: the pointer is inside a record of `chain`, held exclusively.
                unsafe { self.file.write(at, field) }
            }
        }
    }

    /// Holds a record just unlinked from `chain` (still held exclusively) until the next hard
    /// synchronization marks it free and returns its space (freed.rs).
    pub fn free_record(&self, chain: &ChainMut<'_>, offset: u64, header: &RecordHeader) -> Result<()> {
        if self.header.update_mode == UpdateMode::Appending {
            return Ok(());
        }
        // The tag's low bits keep the checksum; only the kind changes, in one byte, at the
        // next hard synchronization. Until then the record stays as it is (freed.rs).
        let dead_tag = (header.tag & !record::KIND_MASK & !record::COMPRESSED_BIT) | KIND_FREE;
        let block = FreedBlock { offset, len: header.total_len(), dead_tag, shard: shard_of(chain.bucket()) };
        self.freed.hold(block, self.space.end().saturating_sub(self.header.data_start()));
        Ok(())
    }

    /// How many zero bytes start at `offset` (filler blocks), for a scan to skip them at once.
    pub fn zero_run(&self, _whole: &WholeFile<'_>, offset: u64) -> u64 {
        const WINDOW: usize = 1 << 16;
        let mut at = offset;
        loop {
            // SAFETY: the caller has the whole file to itself.
            let Ok(bytes) = (unsafe { self.file.slice_upto(at, WINDOW) }) else { return at - offset };
            match first_nonzero(bytes) {
                Some(first) => return at + first as u64 - offset,
                None if bytes.len() < WINDOW => return at + bytes.len() as u64 - offset,
                None => at += WINDOW as u64,
            }
        }
    }

    /// `checksum_matches` for a dead record (or a tag that reads as one), whose tag no longer
    /// says whether its value was compressed: either way.
    pub fn checksum_matches_either_way(
        &self,
        whole: &WholeFile<'_>,
        offset: u64,
        header: &RecordHeader,
        hash: u64,
    ) -> bool {
        [false, true].into_iter().any(|compressed| self.checksum_matches(whole, offset, header, hash, compressed))
    }

    /// Whether the stored value of the record at `offset` matches its checksum, during a
    /// sequential scan (restore), for a record stored `compressed` or not. A dead record's tag
    /// no longer says whether it was compressed: the scan tries both.
    pub fn checksum_matches(
        &self,
        _whole: &WholeFile<'_>,
        offset: u64,
        header: &RecordHeader,
        hash: u64,
        compressed: bool,
    ) -> bool {
        let at = offset.saturating_add((header.header_len + header.key_len) as u64);
        // SAFETY: the caller has the whole file to itself.
        let Ok(stored) = (unsafe { self.file.slice(at, header.value_len) }) else { return false };
        header.verifies(checksum(hash, compressed, stored))
    }

    /// Up to `len` bytes of the file from `offset`, for a salvage looking at the file as bytes
    /// (header_salvage.rs); an offset past the end is BrokenData.
    pub fn raw_bytes(&self, _whole: &WholeFile<'_>, offset: u64, len: usize) -> Result<&[u8]> {
        // SAFETY: the caller has the whole file to itself.
        unsafe { self.file.slice_upto(offset, len) }
    }

    /// Reads the block at `offset` during a sequential scan (restore); bytes must lie in the file.
    pub fn scan_block(&self, _whole: &WholeFile<'_>, offset: u64) -> Result<Block> {
        // SAFETY: the caller has the whole file to itself.
        let bytes = unsafe { self.file.slice_upto(offset, MAX_HEADER_SIZE)? };
        record::parse_block(bytes, offset, self.header.check_layout())
    }

    /// Zeroes the bucket array and empties the record area.
    pub fn clear(&self, _whole: &WholeFile<'_>) -> Result<()> {
        let data_start = self.header.data_start();
        // SAFETY: the caller has the whole file to itself; shrinking to the header and growing back zeroes
        // the buckets without writing them one by one.
        unsafe {
            self.file.set_len(self.header.buckets_start())?;
            self.file.set_len(data_start)?;
            self.file.write_untorn(0, &self.header.encode_copies())?;
            self.file.write(self.header.dictionary_offset(), self.codec.dictionary())?;
        }
        self.buckets.reset();
        self.space.reset(data_start);
        self.freed.clear();
        self.set_count(0);
        self.write_header()
    }
}

/// The index of the first non-zero byte of `bytes`. Blocks are compared whole first (a
/// memcmp): a restore steps over a growth margin of a megabyte or more of zeros, which a
/// byte-by-byte search crawls through in a debug build.
fn first_nonzero(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 256;
    const ZEROS: [u8; BLOCK] = [0; BLOCK];
    let mut start = 0;
    for block in bytes.chunks(BLOCK) {
        if ZEROS.get(..block.len()) != Some(block) {
            return block.iter().position(|&b| b != 0).map(|within| start + within);
        }
        start += block.len();
    }
    None
}

/// The entries of a saved free-block list, `(offset, length)` each, decoded from its pairs of
/// varints (offset deltas and lengths, docs/format.md); None for an entry whose varints are
/// cut or malformed, after which nothing more is read.
pub fn free_list_entries(bytes: &[u8]) -> impl Iterator<Item = Option<(u64, u64)>> + '_ {
    let (mut at, mut previous, mut broken) = (0usize, 0u64, false);
    std::iter::from_fn(move || {
        if broken || at >= bytes.len() {
            return None;
        }
        let rest = bytes.get(at..).unwrap_or_default();
        let entry = decode_varint(rest).and_then(|(delta, n1)| {
            let (block_len, n2) = decode_varint(rest.get(n1..).unwrap_or_default())?;
            Some((delta, block_len, n1 + n2))
        });
        let Some((delta, block_len, width)) = entry else {
            broken = true;
            return Some(None);
        };
        at += width;
        previous = previous.saturating_add(delta);
        Some(Some((previous, block_len)))
    })
}

#[cfg(test)]
mod first_nonzero_tests {
    use super::first_nonzero;

    #[test]
    fn finds_the_first_nonzero_byte_in_any_block_or_none() {
        assert_eq!(first_nonzero(&[]), None);
        assert_eq!(first_nonzero(&[0; 1000]), None);
        for at in [0, 1, 255, 256, 257, 511, 999] {
            let mut bytes = vec![0u8; 1000];
            bytes.get_mut(at..).into_iter().flatten().for_each(|b| *b = 7);
            assert_eq!(first_nonzero(&bytes), Some(at), "non-zero from {at}");
        }
    }
}

#[cfg(test)]
mod stored_copy_tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::super::chain_lock::WholeFile;
    use super::super::HashDbm;
    use crate::dbm::{Dbm, OpenMode, Params};
    use crate::error::ErrorKind;

    /// A value copied as stored goes only into a file that reads it as its source does: one of
    /// another codec, or of a codec with a dictionary, takes it not (`takes_as_stored`), and a
    /// copy into it anyway is refused as a bug in Kura (a panic of `Error::internal` in debug
    /// builds, an Internal error in release ones) with nothing written.
    #[test]
    fn a_value_copied_as_stored_goes_only_where_it_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str, codec: &str| {
            let params = Params::new().with("record_comp", codec).with("num_buckets", 16);
            HashDbm::open(dir.path().join(name), OpenMode::Truncate, &params).unwrap()
        };
        let source = open("source.kuh", "lz4");
        source.set(b"key", &b"a value that lz4 may or may not shrink".repeat(4), true).unwrap();
        let same = open("same.kuh", "lz4");
        let other = open("other.kuh", "zstd");
        let dictionary = open("dictionary.kuh", "zstd-dict");
        source
            .with_all(|slot| {
                let storage = slot.as_mut().unwrap();
                let (s, whole) = WholeFile::unshared(storage);
                let hash = super::hash_key(b"key");
                let chain = whole.chain(super::bucket_of(hash, s.header.num_buckets));
                let found = s.find(chain, b"key", hash)?.unwrap();
                let stored = s.checked_stored(chain, found.offset, &found.header, hash)?;
                let takes = |db: &HashDbm| {
                    db.with_all(|slot| Ok(WholeFile::unshared(slot.as_mut().unwrap()).0.takes_as_stored(&stored)))
                };
                assert!(takes(&same)?, "the same codec reads the value as it is stored");
                assert!(!takes(&other)?, "another codec does not");
                assert!(!takes(&dictionary)?, "a codec with a dictionary of its own does not");
                let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    other.with_all(|slot| {
                        let (target, whole) = WholeFile::unshared(slot.as_mut().unwrap());
                        let chain = whole.chain_mut(super::bucket_of(hash, target.header.num_buckets));
                        target.write_stored_record(&chain, b"key", stored, 0)
                    })
                }));
                let refused = match refused {
                    Ok(result) => result.is_err_and(|e| e.kind() == ErrorKind::Internal),
                    Err(_) => cfg!(debug_assertions),
                };
                assert!(refused, "a value of another codec was copied as stored");
                Ok(())
            })
            .unwrap();
        assert_eq!(other.count().unwrap(), 0);
        assert!(matches!(other.get(b"key"), Err(e) if e.kind() == ErrorKind::NotFound));
    }
}
