//! The page file: slots of serialized, compressed pages, their free space, the page cache and
//! the file header.
//!
//! Every access to the file goes through a `Pager`, and the pager lives inside the tree's
//! `RwLock`: reading needs `&Pager` (readers share the lock), writing needs `&mut Pager` (the
//! writer holds it alone). That is what makes the mapped-file accesses below sound.

use std::cell::RefCell;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::codec::{Codec, CodecKind, Effort};
use crate::error::{Error, ErrorKind, Result};
use crate::file::{open_regular_file, remove_if_exists, AdviceThread, FileLock, LockMode, MappedFile};

use super::cache::{IdMap, PageCache};
use super::comparator::Comparator;
use super::durable::Durability;
use super::format::{
    broken_slot, FileHeader, SlotHeader, SlotKind, DATA_START, HEADER_SIZE, SLOT_ALIGN, SLOT_HEADER_SIZE,
};
use super::header_copies;
use super::page::{Branch, Leaf, Page};
use super::pins::PinnedPages;
use super::second_touch::SecondTouch;
use super::slot_hint::{HintUnit, SlotHint};
use super::space::{aligned, Space};
use super::verify::{self, PageSource};
use super::write_behind::WriteBehind;

thread_local! {
    /// Reused for decompressing pages, see `Pager::with_slot`.
    static DECOMPRESSED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The slot bytes `Pager::with_slot_read` reads with `pread`.
    static READ: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Slots read ahead together join one request across a gap of up to this many bytes
/// (`Pager::read_ahead_in_run`): reading the gap costs the disk less than a second request.
const READ_AHEAD_JOIN_GAP: u64 = 16 << 10;

/// A decompression buffer larger than this (a page far above the default size) is not kept.
const MAX_KEPT_BUFFER: usize = 1 << 20;

/// How a new file is laid out, and how an opened one is run.
#[derive(Debug, Clone)]
pub struct PagerOptions {
    pub codec: CodecKind,
    pub dictionary: Vec<u8>,
    pub comparator: Comparator,
    pub max_page_size: u32,
    pub cache_bytes: usize,
    /// `TreeOptions::memory_bytes`.
    pub memory_bytes: Option<u64>,
    pub max_file_size: u64,
}

pub struct Pager {
    file: MappedFile,
    _lock: FileLock,
    path: PathBuf,
    codec: Codec,
    /// The header of the last commit (or of the file as opened).
    header: FileHeader,
    space: Space,
    cache: PageCache,
    /// Branch pages readers reach without atomics; see pins.rs for why a pinned page is
    /// always current (every path that frees or rewrites a slot unpins it).
    pins: PinnedPages,
    /// The leaves point reads found out of memory lately, beyond memory: a leaf read again
    /// is decoded into the cache, one read once is searched where it was read (second_touch.rs).
    second_touch: SecondTouch,
    /// Reused buffers for serializing and compressing pages.
    raw_buffer: Vec<u8>,
    stored_buffer: Vec<u8>,
    /// The durable commit and what was written and freed since (durable.rs).
    durability: Durability,
    /// The largest sequence number in either header copy: the next commit's is larger.
    highest_sequence: u64,
    /// What the pager does with a dictionary that fails its check.
    dictionary_policy: DictionaryPolicy,
    /// Set when the policy let the pager open without its damaged dictionary: every
    /// compressed slot is then refused, since decoding one without the dictionary it was made
    /// with could give bytes that were never written.
    dictionary_damaged: bool,
    /// The memory the file's pages may take (`exceeds_memory`): `TreeOptions::memory_bytes`
    /// (`limit_memory`); for a pager opened without it, or where it is not known, four times
    /// the cache (a file is then judged larger than memory when it is larger than twice the
    /// cache, as before there was this).
    memory_bytes: u64,
    /// Where new slots go: the best fit, or one after another (a drain, `Placement`).
    placement: Placement,
    /// Slots of the commit in progress not yet copied into the file (write_behind.rs): only
    /// for a file larger than half the memory, empty outside a commit.
    write_behind: WriteBehind,
    /// Makes the read-ahead requests of runs of leaves (`end_read_ahead_run`) on a thread of
    /// its own, started at the first of them (advice_thread.rs).
    advice: OnceLock<Option<AdviceThread>>,
    /// The slot lengths of pages `forget_replaced` took out of the cache since the last publish (the
    /// cache knew each: the page was read from or written to that slot), so that freeing
    /// those slots at the publish reads no slot header: in a file larger than memory that is
    /// a read from the disk for each page a commit replaced (measured: 126,000 of them for
    /// 100 batches of 1,000 records into 2M). Each stays true until the publish frees its
    /// slot (a slot of the committed tree keeps its length until then); emptied at every
    /// publish and rollback.
    forgotten_slot_lens: IdMap<u64>,
    /// What the open found wrong with the file, one sentence each (a header copy repaired or
    /// lost, a saved free list that failed its check, a file cut short): `kura check` reports
    /// them as problems, a restore in its report.
    found: Vec<String>,
    /// Set by a salvage's open when the tree it reads cannot be proven the file's newest (the
    /// newest header copy may be the one lost): its records may be older values.
    maybe_stale: bool,
}

/// A slot `write_slot` wrote.
struct WrittenSlot {
    offset: u64,
    slot_len: u64,
    checksum: u64,
    /// Its header and stored bytes (the slot may be longer).
    content_len: u64,
}

/// Where `write_slot` puts a new slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The smallest free slot that fits, else the end: keeps the file small.
    BestFit,
    /// The first free slot at or after `next` (where the last one ended) that fits; when none
    /// does, once from the file's start (`wrapped`), then the end: pages written in key order
    /// lie in key order, so that their writes join and the next walk in key order reads them
    /// in file order. Each pass over the free slots looks at each once.
    Sequential { next: u64, wrapped: bool },
}

/// What opening a file does when its dictionary blob fails its check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DictionaryPolicy {
    /// The open fails (every normal open: no value may be decoded with a wrong dictionary).
    Required,
    /// The open goes on without it, for a salvage, which then copies the pages stored raw.
    SalvageWithout,
}

/// How a header is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// Written without fsync: a power loss may keep any of its pages and the header.
    Soft,
    /// The pages are fsynced before the header is written (a close): the header needs no
    /// check after a crash, though it may itself be lost.
    PagesDurable,
    /// The pages are fsynced, then the header is written and fsynced: the new durable commit.
    Durable,
}

impl Publish {
    pub fn hard(hard: bool) -> Publish {
        if hard {
            Publish::Durable
        } else {
            Publish::Soft
        }
    }
}

/// BrokenData unless `offset` can start a slot: past the file headers, slot-aligned.
fn check_slot_offset(offset: u64) -> Result<()> {
    if offset < DATA_START || !offset.is_multiple_of(SLOT_ALIGN) {
        return Err(broken_slot(offset, "misaligned or inside the file header"));
    }
    Ok(())
}

impl Pager {
    /// Creates an empty tree file at `path`, replacing any content; locked for writing.
    pub fn create(path: &Path, options: &PagerOptions) -> Result<Pager> {
        let file = open_regular_file(path, true, true)?;
        let lock = FileLock::acquire(&file, path, LockMode::Exclusive)?;
        // A journal left by the file's previous content must not be replayed over the new,
        // empty tree: it goes before the file is emptied (and under the lock, so it is nobody
        // else's).
        remove_if_exists(&crate::journal::journal_path(path))?;
        let header = FileHeader {
            version: super::format::FORMAT_VERSION,
            codec: options.codec,
            comparator: options.comparator,
            closed_cleanly: false,
            max_page_size: options.max_page_size,
            height: 0,
            root: 0,
            count: 0,
            free_list: 0,
            end: DATA_START,
            dictionary: 0,
            sequence: 0,
            since_base: Some(super::format::SinceBase { base: 0, digest: 0, new_pages: 0 }),
        };
        let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
        file.set_len(0).map_err(|e| io("truncate", e))?;
        file.set_len(DATA_START).map_err(|e| io("resize", e))?;
        crate::file::allocate(&file, 0, DATA_START).map_err(|e| io("allocate", e))?;
        // Both copies in one write (one page, which a kill does not tear): a copy left unwritten
        // would read as damaged beyond repair (header_copies.rs).
        file.write_all_at(&[header.encode(), header.encode()].concat(), 0).map_err(|e| io("write", e))?;
        let codec = Codec::new(options.codec, Vec::new())?;
        let mapped = MappedFile::new(file, path, options.max_file_size, true)?;
        let mut pager = Pager::assemble(mapped, lock, path, codec, header, Space::new(DATA_START), options.cache_bytes);
        pager.limit_memory(options.memory_bytes);
        if !options.dictionary.is_empty() {
            pager.install_dictionary(options.dictionary.clone())?;
        }
        Ok(pager)
    }

    fn assemble(
        file: MappedFile,
        lock: FileLock,
        path: &Path,
        codec: Codec,
        header: FileHeader,
        space: Space,
        cache_bytes: usize,
    ) -> Pager {
        Pager {
            file,
            _lock: lock,
            path: path.to_path_buf(),
            codec,
            space,
            cache: PageCache::new(cache_bytes),
            memory_bytes: (cache_bytes as u64).saturating_mul(4),
            pins: PinnedPages::for_cache(cache_bytes, header.max_page_size as usize),
            second_touch: SecondTouch::new(),
            raw_buffer: Vec::new(),
            stored_buffer: Vec::new(),
            durability: Durability::new(header.sequence),
            highest_sequence: header.sequence,
            header,
            dictionary_policy: DictionaryPolicy::Required,
            dictionary_damaged: false,
            placement: Placement::BestFit,
            write_behind: WriteBehind::default(),
            advice: OnceLock::new(),
            forgotten_slot_lens: IdMap::default(),
            found: Vec::new(),
            maybe_stale: false,
        }
    }

    /// Opens an existing tree file: a writer takes the exclusive lock, a reader the shared one.
    /// The free space is loaded when the file was closed cleanly; otherwise the caller
    /// recovers it (see `recovery.rs`) before writing. A current header written without
    /// fsync is used only if every page it added since the durable header in the other copy
    /// is found whole (verify.rs); otherwise the durable one is.
    pub fn open(path: &Path, writable: bool, cache_bytes: usize, max_file_size: u64) -> Result<Pager> {
        Pager::open_with(path, writable, cache_bytes, max_file_size, DictionaryPolicy::Required)
    }

    /// Opens a file read-only for a salvage: as `open`, but a damaged dictionary is not fatal
    /// (see `DictionaryPolicy::SalvageWithout` and `dictionary_damaged`).
    pub fn open_for_salvage(path: &Path, cache_bytes: usize, max_file_size: u64) -> Result<Pager> {
        Pager::open_with(path, false, cache_bytes, max_file_size, DictionaryPolicy::SalvageWithout)
    }

    fn open_with(
        path: &Path,
        writable: bool,
        cache_bytes: usize,
        max_file_size: u64,
        dictionary_policy: DictionaryPolicy,
    ) -> Result<Pager> {
        let file = open_regular_file(path, writable, false)?;
        let mode = if writable { LockMode::Exclusive } else { LockMode::Shared };
        let lock = FileLock::acquire(&file, path, mode)?;
        let file_len = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len();
        let mut head = [0u8; 2 * HEADER_SIZE];
        if file_len < head.len() as u64 {
            return Err(Error::broken(format!("{} is too short to be a Kura tree file", path.display())));
        }
        file.read_exact_at(&mut head, 0).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        let copies = header_copies::read_copies(&head)
            .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))?;
        let salvage = dictionary_policy == DictionaryPolicy::SalvageWithout;
        let (newest, other) = (copies.newest.clone(), copies.other.clone());
        let highest_sequence = other.as_ref().map_or(newest.sequence, |o| o.sequence.max(newest.sequence));
        // The durable header this one was written after, when it is to be checked.
        let base =
            other.filter(|o| newest.needs_verification() && newest.since_base.map(|s| s.base) == Some(o.sequence));
        // A salvage reads a file cut short to its end (its slots are checked against it).
        let fits = |header: &FileHeader| if salvage { Ok(()) } else { check_length(path, header, file_len) };
        // A lone copy's length is checked once it is known which tree it holds (below).
        if base.is_none() && copies.lost.is_none() {
            fits(&newest)?;
        }
        let mapped = MappedFile::new(file, path, max_file_size.max(file_len), writable)?;
        let codec = Codec::new(newest.codec, Vec::new())?;
        let mut pager = Pager::assemble(mapped, lock, path, codec, newest.clone(), Space::new(newest.end), cache_bytes);
        pager.highest_sequence = highest_sequence;
        pager.dictionary_policy = dictionary_policy;
        pager.found = copies.describe();
        match base {
            None => pager.load_dictionary()?,
            Some(base) => {
                let whole = newest.end <= file_len
                    && pager.load_dictionary().is_ok()
                    && !pager.dictionary_damaged
                    && verify::new_pages_are_whole(&pager, &base).is_ok();
                if !whole {
                    fits(&base)?;
                    pager.adopt(base)?;
                }
            }
        }
        let header = pager.header.clone();
        if header.closed_cleanly && header.free_list != 0 {
            // A bad list is not fatal: the caller recovers free space from the tree instead.
            match pager.read_blob(header.free_list).and_then(|b| Space::decode(&b, header.free_list)) {
                Ok(space) => pager.space = space,
                Err(e) => {
                    pager.found.push(format!("the saved free-slot list at {}: {}", header.free_list, e.message()));
                    pager.header.closed_cleanly = false;
                    pager.header.free_list = 0;
                }
            }
        }
        if let Some((at, _)) = &copies.lost {
            // The intact copy may hold an older tree than the lost one: used only when proven
            // the newest (header_copies.rs).
            let proof = header_copies::lone_copy_is_current(&pager, path, file_len);
            if let Ok(Some(end)) = proof {
                // The close gave back the free tail after this commit: the tree ends there.
                pager.header.end = end;
                pager.space = Space::new(end);
            }
            if let Err(why) = proof {
                let what = format!(
                    "the other header copy (commit {}) cannot be proven to hold the newest tree: {why}",
                    pager.header.sequence
                );
                if !salvage {
                    return Err(Error::broken(format!(
                        "{}: header copy at {at} is damaged beyond one byte, and {what}; its records could be older \
                         values (`kura restore` copies what can be proven)",
                        path.display()
                    )));
                }
                pager.found.push(what);
                pager.maybe_stale = true;
            }
            fits(&pager.header)?;
        }
        if pager.header.end > file_len {
            pager.found.push(format!(
                "the file ends at {file_len}, before the end of the used area its header states ({}): cut short",
                pager.header.end
            ));
        }
        if writable {
            for copy in &copies.repaired {
                // SAFETY: the pager was made above and no reader has it yet; readers never
                // read the header copies through the map.
                unsafe { pager.file.write_untorn(copy.at, &copy.bytes) }?;
            }
            if !copies.repaired.is_empty() {
                pager.file.sync(true)?;
                // Put back in the file: their notes (the first ones, `Copies::describe`) go.
                pager.found.drain(..copies.repaired.len().min(pager.found.len()));
            }
        }
        Ok(pager)
    }

    /// What the open found wrong with the file (see `found`): empty for a sound file.
    pub fn found(&self) -> &[String] {
        &self.found
    }

    /// Whether the tree read may be older than the file's newest (a salvage's open only).
    pub fn maybe_stale(&self) -> bool {
        self.maybe_stale
    }

    /// Sets the codec with the dictionary of the current header, if it has one.
    fn load_dictionary(&mut self) -> Result<()> {
        self.codec = Codec::new(self.header.codec, Vec::new())?;
        self.dictionary_damaged = false;
        if self.header.dictionary != 0 {
            let loaded = self.read_blob(self.header.dictionary).and_then(|d| Codec::new(self.header.codec, d));
            match (loaded, self.dictionary_policy) {
                (Ok(codec), _) => self.codec = codec,
                (Err(_), DictionaryPolicy::SalvageWithout) => self.dictionary_damaged = true,
                (Err(e), DictionaryPolicy::Required) => {
                    return Err(Error::new(e.kind(), format!("the stored zstd dictionary: {}", e.message())))
                }
            }
        }
        Ok(())
    }

    /// Whether the pager opened without its damaged dictionary (`open_for_salvage`).
    pub fn dictionary_damaged(&self) -> bool {
        self.dictionary_damaged
    }

    /// Falls back to the durable header `base` after the current one failed its check. Its
    /// saved free list, if any, is not trusted (a close may have written another over it).
    fn adopt(&mut self, mut base: FileHeader) -> Result<()> {
        self.cache.clear();
        self.pins.clear();
        base.closed_cleanly = false;
        base.free_list = 0;
        self.space = Space::new(base.end);
        self.durability = Durability::new(base.sequence);
        self.header = base;
        self.load_dictionary()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the file this pager reports (after the file was moved into place).
    pub fn set_path(&mut self, path: &Path) {
        self.path = path.to_path_buf();
    }

    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    pub fn codec(&self) -> &Codec {
        &self.codec
    }

    pub fn comparator(&self) -> Comparator {
        self.header.comparator
    }

    pub fn max_page_size(&self) -> usize {
        self.header.max_page_size as usize
    }

    pub fn space(&self) -> &Space {
        &self.space
    }

    pub fn cache(&self) -> &PageCache {
        &self.cache
    }

    /// The slot header at `offset`, checked against the file.
    pub fn slot_header(&self, offset: u64) -> Result<SlotHeader> {
        check_slot_offset(offset)?;
        // SAFETY: see the module comment: `&self` excludes the writer, and slots of the
        // committed tree are never rewritten while it is current.
        let bytes = unsafe { self.file.slice(offset, SLOT_HEADER_SIZE) }?;
        SlotHeader::decode(bytes, offset, self.file.len())
    }

    /// Reads the slot at `offset` and hands its raw (decompressed) bytes to `use_raw`.
    ///
    /// In a file larger than half the memory (`exceeds_memory`) the slot is read with `pread`
    /// into a buffer instead of through the mapping: the file's pages then come and go through
    /// the kernel's page cache all the time, and each one a fault mapped must be unmapped
    /// again by reclaim, which interrupts every core the process runs on to flush its TLB.
    /// Reader threads then wait for each other's reclaim, and reads gained 1.43x from a second
    /// thread where redb, which reads with `pread`, gained 1.93x (2M records under 128 MiB).
    /// `hint`: what the page's parent says of the slot's length (slot_hint.rs), which sizes
    /// that read.
    fn with_slot<T>(
        &self,
        offset: u64,
        hint: SlotHint,
        use_raw: impl FnOnce(SlotHeader, &[u8]) -> Result<T>,
    ) -> Result<T> {
        debug_assert!(
            self.write_behind.find(offset).is_none(),
            "slot {offset} read before its held bytes were written"
        );
        if self.exceeds_memory() {
            return self.with_slot_read(offset, hint, use_raw);
        }
        let slot = self.slot_header(offset)?;
        // SAFETY: as in `slot_header`; the range was checked against the file length.
        let stored = unsafe { self.file.slice(offset + SLOT_HEADER_SIZE as u64, slot.stored_len as usize) }?;
        self.with_stored(offset, slot, stored, use_raw)
    }

    /// `with_slot` by `pread`: the slot's header and stored bytes in one read, as long as its
    /// `hint` says or, without one, a page's worth (a slot is at most that long unless its page
    /// outgrew `max_page_size`); a second read completes a slot longer than that. Into a buffer
    /// per thread as `DECOMPRESSED` is.
    fn with_slot_read<T>(
        &self,
        offset: u64,
        hint: SlotHint,
        use_raw: impl FnOnce(SlotHeader, &[u8]) -> Result<T>,
    ) -> Result<T> {
        check_slot_offset(offset)?;
        READ.with(|buffer| {
            let mut own = Vec::new();
            let mut shared = buffer.try_borrow_mut();
            let bytes = match shared.as_deref_mut() {
                Ok(buffer) => buffer,
                Err(_) => &mut own,
            };
            let guess = self.read_len(hint);
            let first = guess.min(self.file.len().saturating_sub(offset)) as usize;
            bytes.resize(first, 0);
            self.file.read_at(offset, bytes)?;
            let header =
                bytes.get(..SLOT_HEADER_SIZE).ok_or_else(|| broken_slot(offset, "cut by the end of the file"))?;
            let slot = SlotHeader::decode(header, offset, self.file.len())?;
            let end = slot.content_len() as usize;
            if end > bytes.len() {
                // `SlotHeader::decode` checked that the slot lies within the file.
                bytes.resize(end, 0);
                self.file.read_at(offset + first as u64, bytes.get_mut(first..).unwrap_or_default())?;
            }
            let stored =
                bytes.get(SLOT_HEADER_SIZE..end).ok_or_else(|| broken_slot(offset, "cut by the end of the file"))?;
            let result = self.with_stored(offset, slot, stored, use_raw);
            if bytes.capacity() > MAX_KEPT_BUFFER {
                *bytes = Vec::new();
            }
            result
        })
    }

    /// The rest of `with_slot` once the slot's stored bytes are at hand: checked against the
    /// slot's checksum and decompressed.
    fn with_stored<T>(
        &self,
        offset: u64,
        slot: SlotHeader,
        stored: &[u8],
        use_raw: impl FnOnce(SlotHeader, &[u8]) -> Result<T>,
    ) -> Result<T> {
        if slot.checksum_of(offset, stored) != slot.checksum {
            return Err(broken_slot(offset, "checksum mismatch"));
        }
        if slot.compressed && self.dictionary_damaged {
            return Err(broken_slot(offset, "compressed with the damaged dictionary"));
        }
        if slot.compressed {
            // A buffer per thread: decompressing into fresh memory on every cache miss costs
            // an allocation and, while the cache grows, page faults. `try_borrow_mut` fails
            // only if `use_raw` reads another slot meanwhile; that one gets a buffer of its own.
            DECOMPRESSED.with(|buffer| {
                let mut own = Vec::new();
                let mut shared = buffer.try_borrow_mut();
                let raw = match shared.as_deref_mut() {
                    Ok(buffer) => buffer,
                    Err(_) => &mut own,
                };
                self.codec.decode(stored, true, raw).map_err(|e| broken_slot(offset, e.message()))?;
                let result = use_raw(slot, raw);
                if raw.capacity() > MAX_KEPT_BUFFER {
                    *raw = Vec::new();
                }
                result
            })
        } else {
            use_raw(slot, stored)
        }
    }

    /// The page at `offset` if it is pinned (then borrowing it costs nothing).
    #[inline]
    pub fn pinned(&self, offset: u64) -> Option<&Arc<Page>> {
        self.pins.get(offset)
    }

    /// Starts reading the slot at `offset` from the disk unless its page is in memory
    /// (`MappedFile::will_need`): for a page a caller will read soon. As long as its `hint`
    /// says, or a whole page's worth without one (the slot's length is in its header).
    pub fn read_ahead(&self, offset: u64, hint: SlotHint) {
        if self.pins.get(offset).is_none() && !self.cache.contains(offset) {
            self.file.will_need(offset, self.read_len(hint) as usize);
        }
    }

    /// `read_ahead` of a slot among several asked for in file order: slots that follow each
    /// other closely join `run` (its start and end), asked for in one request when the next
    /// slot does not join it or by `end_read_ahead_run`. `madvise`, a request a slot here and
    /// in the slot writes, took 32% of a load's CPU beyond memory (`perf`: in a guest, each
    /// request rings the device's doorbell).
    pub fn read_ahead_in_run(&self, run: &mut Option<(u64, u64)>, offset: u64, hint: SlotHint) {
        if self.pins.get(offset).is_some() || self.cache.contains(offset) {
            return;
        }
        let end = offset + self.read_len(hint);
        match run {
            Some((start, run_end)) if *start <= offset && offset <= *run_end + READ_AHEAD_JOIN_GAP => {
                *run_end = (*run_end).max(end);
            }
            _ => {
                self.end_read_ahead_run(run);
                *run = Some((offset, end));
            }
        }
    }

    /// Asks for what `run` holds (`read_ahead_in_run`) and empties it: on the advice thread,
    /// so that the caller goes on with the leaves it asked for before (a load beyond memory
    /// spent 17% of its thread making these requests), or itself when that thread's queue is
    /// full or there is no thread.
    pub fn end_read_ahead_run(&self, run: &mut Option<(u64, u64)>) {
        if let Some((start, end)) = run.take() {
            let advice = self.advice.get_or_init(|| self.file.start_advice_thread());
            if !advice.as_ref().is_some_and(|thread| thread.advise(start, end - start)) {
                self.file.will_need(start, (end - start) as usize);
            }
        }
    }

    /// The bytes a read of a slot with `hint` asks for first: at least the header, whatever a
    /// (damaged) header's page size makes of the hint.
    fn read_len(&self, hint: SlotHint) -> u64 {
        self.hint_unit()
            .and_then(|unit| unit.read_len(hint))
            .unwrap_or((SLOT_HEADER_SIZE + self.max_page_size()) as u64)
            .max(SLOT_HEADER_SIZE as u64)
    }

    /// For a walk over the tree's slots in a file larger than memory (`exceeds_memory`):
    /// starts reading the slot at `offset`, only its header when `header_only` (a walk that
    /// needs a leaf's length, not its records); `hint` as in `read_ahead`.
    pub fn read_ahead_for_walk(&self, offset: u64, hint: SlotHint, header_only: bool) {
        if !self.exceeds_memory() {
            return;
        }
        if header_only {
            self.file.will_need(offset, SLOT_HEADER_SIZE);
        } else {
            self.read_ahead(offset, hint);
        }
    }

    /// Whether the file is larger than half the memory its pages may take (`memory_bytes`), so
    /// that a slot may be on the disk only: its slots are then read with `pread`, its commits'
    /// slot writes held back, and leaves read ahead (`with_slot`, write_behind.rs).
    ///
    /// Not the cache's budget: a file larger than the cache of decoded pages but well within
    /// memory stays in the kernel's page cache, where the mapping reads it and its leaves lend
    /// their values, so that the decoded pages stay small. Judged by the cache, a 353 MB file
    /// (1M records) with the default 256 MiB cache was read with `pread` into leaves holding
    /// their values, which overflowed the cache: every get decoded a leaf again, 3.0-3.4 µs
    /// against 0.5-0.9 µs with the file mapped (24 GiB of memory).
    pub fn exceeds_memory(&self) -> bool {
        self.file.len() > self.memory_bytes / 2
    }

    /// The memory the file's pages may take (`exceeds_memory`).
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// Sets the memory the file's pages may take, when known (`TreeOptions::memory_bytes`).
    pub fn limit_memory(&mut self, given: Option<u64>) {
        if let Some(bytes) = given {
            self.memory_bytes = bytes;
        }
    }

    /// Reads and decodes the page at `offset`, through the cache; `hint`: what its parent
    /// says of its slot's length (slot_hint.rs).
    pub fn read_page(&self, offset: u64, hint: SlotHint) -> Result<Arc<Page>> {
        if let Some(page) = self.cache.get(offset) {
            self.pins.offer(offset, &page);
            return Ok(page);
        }
        // (A file larger than half the memory is read with one `pread` of the slot, which
        // `with_slot` makes: no advice to read it ahead first, which would be a second system
        // call for the same read.)
        let (page, slot_len) = self.decode_page_lending(offset, hint)?;
        let page = Arc::new(page);
        self.cache.insert(offset, Arc::clone(&page), slot_len);
        self.pins.offer(offset, &page);
        Ok(page)
    }

    /// Whether a point read of the leaf at `offset` searches the slot's bytes as it reads them
    /// (`find_in_leaf_slot`) instead of decoding the page into the cache: in a file larger
    /// than half the memory, for a leaf neither pinned nor cached nor read lately
    /// (second_touch.rs says why).
    pub fn reads_leaf_uncached(&self, offset: u64) -> bool {
        self.exceeds_memory()
            && self.pins.get(offset).is_none()
            && !self.cache.contains(offset)
            && !self.second_touch.touch(offset)
    }

    /// Calls `found` with the value of `key` in the leaf of slot `offset` (None when absent),
    /// searched in the slot's bytes as read (`Leaf::find_encoded`), which neither the cache
    /// nor the pins keep; `hint` as in `read_page`. None when the slot holds a branch.
    pub fn find_in_leaf_slot<R>(
        &self,
        offset: u64,
        hint: SlotHint,
        key: &[u8],
        found: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<Option<R>> {
        self.with_slot(offset, hint, |slot, raw| match slot.kind {
            SlotKind::Leaf => Leaf::find_encoded(raw, self.header.comparator, key).map(|value| Some(found(value))),
            SlotKind::Branch | SlotKind::Blob => Ok(None),
        })
        .map_err(|e| self.named(e))
    }

    /// Puts `page`, a copy of the one read from `offset`, in the cache in its place, if that
    /// one is still cached (a copy of an evicted page is not worth a place).
    pub(super) fn recache(&self, offset: u64, page: Arc<Page>) {
        self.cache.replace(offset, page);
    }

    /// Runs `use_page` on the page at `offset` (pinned, cached or read) without taking a
    /// reference to it; a cached page stays locked in its cache shard meanwhile, so
    /// `use_page` must not call into the pager.
    #[inline]
    pub fn with_page<R>(&self, offset: u64, hint: SlotHint, use_page: impl FnOnce(&Page) -> R) -> Result<R> {
        if let Some(page) = self.pins.get(offset) {
            return Ok(use_page(page));
        }
        let mut use_page = Some(use_page);
        let cached = self.cache.with(offset, |page| {
            self.pins.offer(offset, page);
            use_page.take().map(|f| f(page))
        });
        match (cached.flatten(), use_page) {
            (Some(result), _) => Ok(result),
            (None, Some(f)) => self.read_page(offset, hint).map(|page| f(&page)),
            (None, None) => Err(broken_slot(offset, "page cache lost a page")),
        }
    }

    /// Drops the page of `offset` from the cache and the pins (its slot is being freed or
    /// its page replaced by a modified copy); returns it if it was in memory.
    pub fn forget(&mut self, offset: u64) -> Option<Arc<Page>> {
        self.take_from_memory(offset).0
    }

    /// `forget` for a page of the committed tree that the commit in progress replaces (its
    /// slot is freed when the commit publishes): remembers the slot's length, if the cache
    /// knew it, for that publish.
    pub fn forget_replaced(&mut self, offset: u64) -> Option<Arc<Page>> {
        let (page, slot_len) = self.take_from_memory(offset);
        if let Some(slot_len) = slot_len {
            self.forgotten_slot_lens.insert(offset, slot_len);
        }
        page
    }

    /// Takes the page of `offset` out of the cache and the pins: the page, and its slot's
    /// length if the cache had it.
    fn take_from_memory(&mut self, offset: u64) -> (Option<Arc<Page>>, Option<u64>) {
        let pinned = self.pins.unpin(offset);
        match self.cache.remove(offset) {
            Some((page, slot_len)) => (Some(page), Some(slot_len)),
            None => (pinned, None),
        }
    }

    /// Reads the page at `offset` without touching the cache.
    pub fn decode_page(&self, offset: u64) -> Result<Page> {
        self.decode_page_sized(offset, SlotHint::UNKNOWN).map(|(page, _)| page)
    }

    /// `decode_page` of a slot `hint` sizes, also returning the length of the page's slot.
    pub(super) fn decode_page_sized(&self, offset: u64, hint: SlotHint) -> Result<(Page, u64)> {
        self.with_slot(offset, hint, |slot, raw| Ok((self.decode_raw(offset, slot.kind, raw)?, slot.slot_len)))
            .map_err(|e| self.named(e))
    }

    /// The page of slot `offset` from its raw (decompressed) bytes.
    fn decode_raw(&self, offset: u64, kind: SlotKind, raw: &[u8]) -> Result<Page> {
        let comparator = self.header.comparator;
        match kind {
            SlotKind::Leaf => Leaf::decode(raw, comparator).map(Page::Leaf),
            SlotKind::Branch => Branch::decode(raw, comparator, self.header.records_slot_hints()).map(Page::Branch),
            SlotKind::Blob => Err(broken_slot(offset, "a blob where a page was expected")),
        }
    }

    /// `error` with the file's name in front.
    fn named(&self, error: Error) -> Error {
        Error::new(error.kind(), format!("{}: {}", self.path.display(), error.message()))
    }

    /// `decode_page` for the cache: a leaf of an uncompressed slot read through the mapping
    /// lends its values from there (`Leaf::decode_lending`), so that reading it copies its
    /// keys only.
    ///
    /// Why the lent bytes stay: a lent leaf lives in this pager's cache and in references
    /// taken under the tree's lock (see the module comment); every reference kept past the
    /// lock is a copy, which holds its own values (`Leaf`'s `Clone`: `seek`'s positions and
    /// `make_dirty` take copies of lent leaves). A slot's bytes change or go away only
    /// through `&mut Pager`: written once free, which a slot of a page becomes after the
    /// writer took that page out of the cache (`make_dirty` and `forget`), or cut off by
    /// `close` and `clear` (the latter empties the cache first), or unmapped with the pager
    /// and its cache. A cached page whose slot is freed otherwise is never read again: only
    /// the tree leads to a slot, and a slot the tree leads to anew holds a page written since,
    /// which replaced any older one in the cache. (A damaged file whose slots overlap, each
    /// with a valid checksum, breaks that last premise: a write into one then changes values
    /// a page cached from the other lends. That is wrong data, not unsound memory, since
    /// writes need `&mut Pager`; `kura check` finds overlapping slots.)
    ///
    /// Returns the page with the length of its slot.
    fn decode_page_lending(&self, offset: u64, hint: SlotHint) -> Result<(Page, u64)> {
        if self.exceeds_memory() {
            return self.decode_page_sized(offset, hint);
        }
        debug_assert!(
            self.write_behind.find(offset).is_none(),
            "slot {offset} read before its held bytes were written"
        );
        let slot = self.slot_header(offset)?;
        // SAFETY: `slot_header` checked the slot against the file; the bytes stay while a
        // leaf lending them lives, as the comment above says (any other page drops the view).
        let stored = unsafe { self.file.lend(offset + SLOT_HEADER_SIZE as u64, slot.stored_len as usize) }?;
        let lends = slot.kind == SlotKind::Leaf && !slot.compressed;
        self.with_stored(offset, slot, stored.all(), |slot, raw| {
            if lends {
                Leaf::decode_lending(stored, self.header.comparator).map(Page::Leaf)
            } else {
                self.decode_raw(offset, slot.kind, raw)
            }
        })
        .map(|page| (page, slot.slot_len))
        .map_err(|e| self.named(e))
    }

    pub fn read_blob(&self, offset: u64) -> Result<Vec<u8>> {
        self.with_slot(offset, SlotHint::UNKNOWN, |slot, raw| match slot.kind {
            SlotKind::Blob => Ok(raw.to_vec()),
            _ => Err(broken_slot(offset, "a page where a blob was expected")),
        })
    }

    /// Writes `raw` into a new slot; returns its offset, length and checksum. The slot comes
    /// from space freed by an earlier, published commit, or from the end of the file.
    fn write_slot(&mut self, kind: SlotKind, raw: &[u8], compress: bool, at_end: bool) -> Result<WrittenSlot> {
        let mut stored = std::mem::take(&mut self.stored_buffer);
        let compressed = if compress { self.codec.encode(raw, Effort::Dense, &mut stored)? } else { false };
        let body: &[u8] = if compressed { &stored } else { raw };
        let stored_len =
            u32::try_from(body.len()).map_err(|_| Error::new(ErrorKind::Limit, "a tree page is larger than 4 GiB"))?;
        let content_len = super::format::content_len(stored_len);
        let needed = aligned(content_len);
        let (offset, slot_len) = match &mut self.placement {
            _ if at_end => self.space.append(needed),
            Placement::BestFit => self.space.allocate(needed),
            Placement::Sequential { next, wrapped } => {
                let mut found = self.space.allocate_from(*next, needed);
                if found.is_none() && !*wrapped {
                    // Once from the start: slots freed since the run began lie behind it.
                    // (Then the best fit rather than the end kept the file smaller, 547 KB
                    // against 632 KB after 60 drains of random overwrites in
                    // tests/write_batch.rs, but scattered the pages a growing tree adds: 8M
                    // records loaded under 512 MiB took 65.3 s of CPU against 58-60 s.)
                    *wrapped = true;
                    found = self.space.allocate_from(DATA_START, needed);
                }
                let slot = found.unwrap_or_else(|| self.space.append(needed));
                *next = slot.0 + slot.1;
                slot
            }
        };
        let mut slot = SlotHeader { kind, compressed, stored_len, slot_len, checksum: 0 };
        slot.checksum = slot.checksum_of(offset, body);
        let done = WrittenSlot { offset, slot_len, checksum: slot.checksum, content_len };
        let exceeds_memory = self.exceeds_memory();
        let mut written = if exceeds_memory {
            self.file.ensure_len_unmapped(offset + slot_len)
        } else {
            self.file.ensure_len(offset + slot_len)
        };
        if written.is_ok() && exceeds_memory {
            // Held: the file pages it covers in part are asked for now, and the bytes written
            // at the flush (write_behind.rs). A slot that continues the run of slots before
            // it shares its first page with them, written whole by the run's one write; the
            // run's last page is asked for once the run ends.
            match self.write_behind.run_end() {
                Some(end) if end == offset => {}
                run_end => {
                    if let Some(end) = run_end {
                        self.file.will_need_page_cut_at(end);
                    }
                    self.file.will_need_page_cut_at(offset);
                }
            }
            let due = self.write_behind.hold(offset, slot_len, &[&slot.encode(), body]);
            self.stored_buffer = stored;
            if due {
                // On failure the slot stays held, and `abandon_unpublished` frees it.
                self.flush_held()?;
            }
            return Ok(done);
        }
        if written.is_ok() {
            // SAFETY: `&mut self` excludes readers, and the slot is free: not part of the
            // committed tree (see space.rs), so no one holds a slice of it.
            written = unsafe {
                self.file
                    .write(offset, &slot.encode())
                    .and_then(|()| self.file.write(offset + SLOT_HEADER_SIZE as u64, body))
            };
        }
        self.stored_buffer = stored;
        if let Err(e) = written {
            self.space.release(offset, slot_len);
            return Err(e);
        }
        Ok(done)
    }

    /// Copies the held slots into the file (write_behind.rs). On failure they stay held, for
    /// `abandon_unpublished` to free or the next flush to write again.
    fn flush_held(&mut self) -> Result<()> {
        let file = &self.file;
        if let Some(end) = self.write_behind.run_end() {
            file.will_need_page_cut_at(end);
        }
        self.write_behind.drain(|offset, bytes| {
            // SAFETY: as in `write_slot`: each held slot is free space of no committed tree,
            // and `&mut self` excludes readers.
            unsafe { file.write_unmapped(offset, bytes) }
        })
    }

    /// Serializes, compresses and writes a page; caches it under its new offset. Returns the
    /// offset and the hint a parent stores with it (`SlotHint::UNKNOWN` in a version 1 file).
    pub fn write_page(&mut self, page: Arc<Page>) -> Result<(u64, SlotHint)> {
        let mut raw = std::mem::take(&mut self.raw_buffer);
        let kind = match &*page {
            Page::Leaf(leaf) => {
                leaf.encode(&mut raw);
                Ok(SlotKind::Leaf)
            }
            Page::Branch(branch) => branch.encode(&mut raw).map(|()| SlotKind::Branch),
        };
        let written = kind.and_then(|kind| self.write_slot(kind, &raw, true, false));
        self.raw_buffer = raw;
        let WrittenSlot { offset, slot_len, checksum, content_len } = written?;
        self.durability.wrote(offset, checksum);
        self.pins.offer(offset, &page);
        self.cache.insert(offset, page, slot_len);
        let hint = self.hint_unit().map_or(SlotHint::UNKNOWN, |unit| unit.hint(content_len));
        Ok((offset, hint))
    }

    /// Sets where new slots go until the next call.
    pub fn set_placement(&mut self, placement: Placement) {
        self.placement = placement;
    }

    /// The unit of the file's slot hints; None for a file of format version 1, which has none.
    pub fn hint_unit(&self) -> Option<HintUnit> {
        self.header.records_slot_hints().then(|| HintUnit::for_page_size(self.header.max_page_size))
    }

    /// Writes an uncompressed blob; `at_end` puts it after everything else.
    pub fn write_blob(&mut self, bytes: &[u8], at_end: bool) -> Result<u64> {
        self.write_slot(SlotKind::Blob, bytes, false, at_end).map(|written| written.offset)
    }

    /// Frees the slot at `offset`. Only for slots of no committed tree: the caller frees a
    /// commit's replaced pages after publishing it. A slot of the durable tree is held back
    /// until the next durable commit (durable.rs).
    fn release(&mut self, offset: u64) -> Result<()> {
        self.forget(offset);
        let slot_len = match self.forgotten_slot_lens.remove(&offset) {
            Some(len) => {
                debug_assert_eq!(
                    self.slot_header(offset).map(|slot| slot.slot_len).ok(),
                    Some(len),
                    "a remembered slot length differs from the slot's header at {offset} (a bug in Kura)"
                );
                len
            }
            None => self.slot_header(offset)?.slot_len,
        };
        if self.durability.freed(offset, slot_len) {
            self.space.release(offset, slot_len);
        }
        Ok(())
    }

    /// Publishes `header` as the new current state, then frees the slots of the pages it
    /// `replaced`.
    pub fn publish(&mut self, mut header: FileHeader, mode: Publish, replaced: &[u64]) -> Result<()> {
        header.since_base = Some(self.durability.since_base(replaced));
        if self.exceeds_memory() {
            // Freeing a slot whose length the cache did not know reads its header: ask for
            // them all while the header is written.
            for &offset in replaced {
                if !self.forgotten_slot_lens.contains_key(&offset) {
                    self.file.will_need(offset, SLOT_HEADER_SIZE);
                }
            }
        }
        self.write_header(header, mode)?;
        for &offset in replaced {
            self.release(offset)?;
        }
        self.forgotten_slot_lens.clear();
        if mode == Publish::Durable {
            self.durable_now();
        }
        Ok(())
    }

    /// Writes `header` (with the digest fields of a soft one set) to the copy the durable
    /// header does not occupy (its sequence number has the other parity), so that the
    /// durable header survives until this one is durable too.
    fn write_header(&mut self, mut header: FileHeader, mode: Publish) -> Result<()> {
        // The header makes the commit's slots part of the tree: they must be in the file first.
        self.flush_held()?;
        let mut sequence = self.highest_sequence + 1;
        if sequence % 2 == self.durability.sequence() % 2 {
            sequence += 1;
        }
        header.sequence = sequence;
        header.end = self.space.end();
        header.codec = self.codec.kind();
        if mode != Publish::Soft {
            header.since_base = Some(super::format::SinceBase { base: sequence, digest: 0, new_pages: 0 });
            self.file.sync(true)?;
        }
        debug_assert_ne!(header.copy_offset(), self.durability.sequence() % 2 * HEADER_SIZE as u64);
        // One pwrite, not a copy into the map: a kill between two stores of a copy left the
        // copy torn, and the open fell back to the durable header in the other copy, losing
        // every commit since (the torn copy held the last of them).
        // SAFETY: `&mut self` excludes readers; readers never read the header through the map.
        unsafe { self.file.write_untorn(header.copy_offset(), &header.encode()) }?;
        // The header is in the file now: it is the current state even if the fsync fails.
        self.highest_sequence = sequence;
        self.header = header;
        self.durability.published();
        if mode == Publish::Durable {
            self.file.sync(true)?;
        }
        Ok(())
    }

    /// The current header is durable: the slots held back are free from now on.
    fn durable_now(&mut self) {
        for (offset, len) in self.durability.made_durable(self.header.sequence) {
            self.space.release(offset, len);
        }
    }

    /// File space held back for the durable tree (`Durability::held_bytes`).
    pub fn held_bytes(&self) -> u64 {
        self.durability.held_bytes()
    }

    /// Whether the current header is the durable one, with nothing written since.
    pub fn is_durable(&self) -> bool {
        self.durability.sequence() == self.header.sequence && self.durability.is_clean()
    }

    /// Publishes the current header again as a durable commit (after commits without fsync,
    /// when `synchronize(true)` finds nothing new to write).
    pub fn make_durable(&mut self) -> Result<()> {
        let header = self.header.clone();
        self.publish(header, Publish::Durable, &[])
    }

    /// Frees the slots written since the last publish (a commit that failed midway), held ones
    /// included: a held slot's length is known without reading its header, which it may not
    /// have in the file yet.
    pub fn abandon_unpublished(&mut self) {
        let mut held: std::collections::HashMap<u64, u64> =
            self.write_behind.take().into_iter().map(|slot| (slot.offset, slot.slot_len)).collect();
        for offset in self.durability.abandon() {
            self.forget(offset);
            let slot_len = held.remove(&offset).or_else(|| self.slot_header(offset).ok().map(|slot| slot.slot_len));
            if let Some(slot_len) = slot_len {
                self.space.release(offset, slot_len);
            }
        }
        // Held slots no page owns yet: the one whose write failed.
        for (offset, slot_len) in held {
            self.space.release(offset, slot_len);
        }
        // The replaced pages stay in the committed tree.
        self.forgotten_slot_lens.clear();
    }

    /// Stores a zstd dictionary in the file and compresses with it from now on. Only for a
    /// file without pages yet (rebuild and create), since old pages need the old dictionary.
    pub fn install_dictionary(&mut self, dictionary: Vec<u8>) -> Result<()> {
        if self.header.root != 0 {
            return Err(Error::infeasible("a dictionary can only be installed in an empty tree file"));
        }
        let codec = Codec::new(self.codec.kind(), dictionary.clone())?;
        let offset = self.write_blob(&dictionary, false)?;
        self.codec = codec;
        let mut header = self.header.clone();
        header.dictionary = offset;
        self.publish(header, Publish::Durable, &[])
    }

    /// Saves the free list, marks the file closed cleanly and trims it to its used length.
    /// The pages reach the device before the header (a clean header is trusted at open);
    /// with `hard`, the header too.
    pub fn close(&mut self, hard: bool) -> Result<()> {
        if !self.is_durable() {
            // A durable commit of the tree first: held slots become free space (a free tail
            // shortens the file) before the free list is saved after the end, and a torn
            // clean header falls back to this same tree.
            let header = self.header.clone();
            self.publish(header, Publish::Durable, &[])?;
        }
        debug_assert!(!self.durability.holds_slots(), "the saved free list would miss held slots");
        let list = self.space.encode();
        let mut header = self.header.clone();
        // The list goes after everything else, so that dropping it at the next open is a
        // truncation and never leaves a hole.
        let offset = self.write_blob(&list, true)?;
        header.free_list = offset;
        header.closed_cleanly = true;
        self.publish(header, if hard { Publish::Durable } else { Publish::PagesDurable }, &[])?;
        // SAFETY: `&mut self` excludes readers; nothing beyond the used length is referenced.
        unsafe { self.file.set_len(self.space.end()) }
    }

    /// Marks an opened file as being written: from now on a crash is detected at open. The
    /// state found is fsynced first and is the durable commit from then on.
    pub fn mark_open(&mut self) -> Result<()> {
        self.file.sync(true)?;
        self.durability = Durability::new(self.header.sequence);
        let mut header = self.header.clone();
        if header.free_list != 0 {
            // The saved list lies at the end, beyond the free space's end: give its slot
            // back. (Falling back to this header after a crash ignores its free list.)
            self.forget(header.free_list);
            let slot = self.slot_header(header.free_list)?;
            self.space.release(header.free_list, slot.slot_len);
        }
        header.free_list = 0;
        header.closed_cleanly = false;
        self.publish(header, Publish::Soft, &[])
    }

    /// Replaces the free space (recovered after a crash).
    pub fn set_space(&mut self, space: Space) {
        self.space = space;
    }

    pub fn sync(&self, hard: bool) -> Result<()> {
        debug_assert!(self.write_behind.is_empty(), "a sync with slots still held");
        self.file.sync(hard)
    }

    /// Bytes the file uses.
    pub fn used_size(&self) -> u64 {
        self.space.end()
    }

    /// Empties the tree: the current header stays valid until the new one is published, and
    /// only then is the file shortened.
    pub fn clear(&mut self) -> Result<()> {
        self.cache.clear();
        self.pins.clear();
        // Nothing of the old tree is kept: the empty one is made durable before the file is
        // shortened under it. If that fails the old tree stays current, and so must its free
        // space: a slot of it handed out as free would be written under live pages.
        let old_space = std::mem::replace(&mut self.space, Space::new(DATA_START));
        let fresh = Durability::new(self.durability.sequence());
        let old_durability = std::mem::replace(&mut self.durability, fresh);
        let mut header = self.header.clone();
        header.root = 0;
        header.height = 0;
        header.count = 0;
        header.free_list = 0;
        let had_dictionary = header.dictionary != 0;
        header.dictionary = 0;
        if let Err(e) = self.publish(header, Publish::Durable, &[]) {
            self.space = old_space;
            self.durability = old_durability;
            return Err(e);
        }
        // SAFETY: `&mut self` excludes readers; nothing references the dropped area any more.
        unsafe { self.file.set_len(DATA_START) }?;
        if had_dictionary {
            let dictionary = self.codec.dictionary().to_vec();
            self.install_dictionary(dictionary)?;
        }
        Ok(())
    }
}

/// Refuses a header whose used area is longer than the file.
fn check_length(path: &Path, header: &FileHeader, file_len: u64) -> Result<()> {
    if header.end > file_len {
        return Err(Error::broken(format!(
            "{}: the file is truncated ({file_len} bytes, {} expected)",
            path.display(),
            header.end
        )));
    }
    Ok(())
}

impl PageSource for Pager {
    fn header(&self) -> &FileHeader {
        Pager::header(self)
    }

    fn slot_header(&self, offset: u64) -> Result<SlotHeader> {
        Pager::slot_header(self, offset)
    }

    fn decode_page(&self, offset: u64) -> Result<Page> {
        Pager::decode_page(self, offset)
    }

    fn read_blob(&self, offset: u64) -> Result<Vec<u8>> {
        Pager::read_blob(self, offset)
    }
}
