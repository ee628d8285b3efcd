//! Tree pages in memory and their serialized form (before compression).
//!
//! A leaf holds records sorted by key; a branch holds child page references separated by keys:
//! child `i` holds the keys `k` with `keys[i-1] <= k < keys[i]`. In memory a leaf keeps all its
//! bytes in one arena with a sorted index of entries (see prefix_index.rs), so that a page
//! costs a few allocations and a record about 21 bytes of overhead, whatever its size.
//!
//! A leaf read from an uncompressed slot of the file's mapping may *lend* its values from
//! there (`Leaf::decode_lending`): its arena then holds each key followed by its value's
//! place in the slot (4 bytes), and the values stay in the page cache, as LMDB reads them.
//! Decoding then writes a fifth of the bytes into memory the process has never touched,
//! which is most of what a read after an open costs (docs/tree.md). A lent leaf copies its
//! values into its arena before any change, and so does every copy (`Clone`), which is how
//! a leaf leaves the tree's lock (pager.rs says why the lent bytes stay while it is held).
//!
//! Serialized leaf: `varint count`, then per record `varint shared, varint suffix_len,
//! varint value_len, suffix, value`, where `shared` is the length of the prefix the key has in
//! common with the previous key. Serialized branch: `varint children, varint child_0`, then per
//! further child `varint shared, varint suffix_len, suffix, varint child_i`. Decoding checks
//! every length against the bytes at hand and that keys strictly ascend, so a corrupted page is
//! BrokenData and never a panic or an oversized allocation.

use std::cmp::Ordering;

use crate::codec::MAX_RATIO;
use crate::encoding::{put_varint, ByteReader};
use crate::error::{Error, ErrorKind, Result};
use crate::file::LentBytes;

use super::comparator::Comparator;
use super::format::{DATA_START, SLOT_ALIGN};
use super::prefix_index::{key_prefix, same_prefix_order, search_run, PrefixIndex, Seek};
use super::slot_hint::SlotHint;
use crate::file::prefetch_slice;

/// Child references on disk are slot offsets; larger values are reserved in memory for pages
/// not yet written (see `btree.rs`), so a stored one is corruption.
const MAX_CHILD_OFFSET: u64 = 1 << 62;

/// A stored child reference: its offset and, in a file of format version 2 (`hinted`), the
/// hint in its low bits (slot_hint.rs); a version 1 reference has none, so low bits set there
/// are corruption.
fn check_child(reference: u64, hinted: bool) -> Result<(u64, SlotHint)> {
    let (child, hint) = if hinted { SlotHint::split(reference) } else { (reference, SlotHint::UNKNOWN) };
    if child < DATA_START || !child.is_multiple_of(SLOT_ALIGN) || child >= MAX_CHILD_OFFSET {
        return Err(Error::broken(format!("branch page: impossible child offset {reference}")));
    }
    Ok((child, hint))
}

/// The largest key plus value accepted: far beyond any page, and small enough that a leaf
/// holding two of them plus a page of others still fits the arena's 32-bit offsets.
pub const MAX_RECORD_SIZE: usize = 1 << 30;

/// The memory a decoded page of at most `max_page_size` encoded bytes is budgeted: one and a
/// half times it (a decoded page of 8 KiB takes about 12 KiB). The modified pages' budget
/// (`TreeOptions::dirty_budget`) and the pinned branches' table (pins.rs) count pages in it.
pub fn decoded_page_bytes(max_page_size: usize) -> usize {
    max_page_size.max(1).saturating_mul(3) / 2
}

/// Estimated serialized bytes per record besides the key and value (three varints).
const RECORD_OVERHEAD: usize = 3;
/// Estimated serialized bytes per child reference (a varint offset and two key varints).
const CHILD_OVERHEAD: usize = 8;

#[derive(Debug, Clone)]
pub enum Page {
    Leaf(Leaf),
    Branch(Branch),
}

impl Page {
    /// Whether this is a leaf whose values lie in the file's mapping (`Leaf::decode_lending`).
    pub fn is_lent(&self) -> bool {
        matches!(self, Page::Leaf(leaf) if leaf.is_lent())
    }

    /// Bytes this page takes in memory, for the cache budget (a lent leaf's values are the
    /// page cache's, not counted).
    pub fn memory_size(&self) -> usize {
        match self {
            Page::Leaf(leaf) => leaf.arena.capacity() + leaf.entries.memory_size() + 64,
            Page::Branch(branch) => branch.key_bytes + branch.children.len() * 32 + branch.index.memory_size() + 64,
        }
    }
}

/// The most arena bytes a lookup prefetches: past this a record is large, and its first lines
/// are what a reader needs first (or, for a guessed range, the guess spans too many records
/// to be worth it).
const MAX_RECORD_PREFETCH: usize = 512;

#[derive(Debug, Clone, Copy)]
struct Entry {
    offset: u32,
    key_len: u32,
    value_len: u32,
}

/// Bytes a lent leaf's arena holds after each key: where its value starts in the slot.
const LENT_PLACE: usize = 4;

/// A leaf page: records in key order.
#[derive(Debug, Default)]
pub struct Leaf {
    /// Key and value bytes of the entries, plus garbage left by replaced records.
    arena: Vec<u8>,
    /// The entries with their keys' `key_prefix` (see prefix_index.rs): for the lexical
    /// order, unequal prefixes decide a comparison without touching entries or arena.
    /// Invariant: sorted by key, strictly ascending under the tree's comparator.
    entries: PrefixIndex<Entry>,
    /// Arena bytes no entry refers to; the arena is compacted when they are the majority.
    garbage: usize,
    /// Sum of key and value lengths of the entries.
    live_bytes: usize,
    /// The slot the values lie in, for a leaf decoded with `decode_lending` and not changed
    /// since; None when the arena holds the values.
    lent: Option<LentBytes>,
}

impl Clone for Leaf {
    /// A copy holds its values in its own arena: it may outlive the tree's lock (a seek's
    /// position) or be changed (a page made dirty), where a lent slot may not stay.
    fn clone(&self) -> Leaf {
        if self.lent.is_none() {
            return Leaf {
                arena: self.arena.clone(),
                entries: self.entries.clone(),
                garbage: self.garbage,
                live_bytes: self.live_bytes,
                lent: None,
            };
        }
        let mut entries = self.entries.clone();
        let arena = self.arena_with_values(&mut entries);
        Leaf { arena, entries, garbage: 0, live_bytes: self.live_bytes, lent: None }
    }
}

impl Leaf {
    pub fn new() -> Leaf {
        Leaf::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn encoded_size(&self) -> usize {
        self.live_bytes + self.entries.len() * RECORD_OVERHEAD + 4
    }

    fn bytes(&self, offset: u32, len: u32) -> &[u8] {
        let start = offset as usize;
        self.arena.get(start..start + len as usize).unwrap_or_default()
    }

    pub fn key(&self, index: usize) -> Option<&[u8]> {
        self.entries.get(index).map(|e| self.bytes(e.offset, e.key_len))
    }

    /// The value of `entry`: after its key in the arena, or in the lent slot at the place
    /// the arena holds after its key.
    #[inline]
    fn value_of(&self, entry: &Entry) -> &[u8] {
        match &self.lent {
            None => self.bytes(entry.offset + entry.key_len, entry.value_len),
            Some(lent) => {
                let place = (entry.offset + entry.key_len) as usize;
                let start = self
                    .arena
                    .get(place..place + LENT_PLACE)
                    .and_then(|bytes| <[u8; LENT_PLACE]>::try_from(bytes).ok())
                    .map_or(usize::MAX, |bytes| u32::from_le_bytes(bytes) as usize);
                let value = lent.get(start..start.saturating_add(entry.value_len as usize));
                debug_assert!(value.is_some(), "invariant: a lent value lies in its slot (a bug in Kura)");
                value.unwrap_or_default()
            }
        }
    }

    pub fn value(&self, index: usize) -> Option<&[u8]> {
        self.entries.get(index).map(|e| self.value_of(e))
    }

    pub fn record(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(index).map(|e| (self.bytes(e.offset, e.key_len), self.value_of(e)))
    }

    /// Whether the values lie in a slot of the file's mapping (`decode_lending`).
    pub fn is_lent(&self) -> bool {
        self.lent.is_some()
    }

    /// Copies a lent leaf's values into its arena (each key followed by its value, as a
    /// leaf built in memory holds them); nothing for a leaf that holds its own.
    fn own(&mut self) {
        if self.lent.is_none() {
            return;
        }
        let mut entries = std::mem::take(&mut self.entries);
        self.arena = self.arena_with_values(&mut entries);
        self.entries = entries;
        self.garbage = 0;
        self.lent = None;
    }

    /// An arena holding each key of `entries` (this leaf's, moved out or copied) followed by
    /// its value, and `entries`' offsets set to match. Decoding bounded keys and values
    /// together by `u32::MAX` (`decode_from`), so the offsets fit.
    fn arena_with_values(&self, entries: &mut PrefixIndex<Entry>) -> Vec<u8> {
        let mut arena = Vec::with_capacity(self.live_bytes);
        for entry in entries.items_mut() {
            let offset = arena.len() as u32;
            arena.extend_from_slice(self.bytes(entry.offset, entry.key_len));
            arena.extend_from_slice(self.value_of(entry));
            entry.offset = offset;
        }
        debug_assert_eq!(arena.len(), self.live_bytes, "invariant: live bytes count keys and values");
        arena
    }

    /// Starts loading the arena's room where an insert of `len` bytes would go (its first
    /// `MAX_RECORD_PREFETCH` bytes, within the capacity: an insert past it moves the arena).
    #[inline]
    pub fn prefetch_append(&self, len: usize) {
        let room = self.arena.capacity().saturating_sub(self.arena.len()).min(len).min(MAX_RECORD_PREFETCH);
        let end = self.arena.as_ptr() as usize + self.arena.len();
        crate::file::prefetch_range(end, room);
    }

    /// Starts loading what a search for `key` reads first: the index's top level (a batched
    /// lookup's stage; see tree_dbm/get_many.rs).
    #[inline]
    pub fn prefetch_index(&self) {
        self.entries.prefetch_top();
    }

    /// The first step of a lookup of `key` in stages, once the top level is in the cache:
    /// starts loading the block of the index it reads next (see `PrefixIndex::seek`). None
    /// for the comparators other than the bytewise one, which binary search the whole index
    /// (`find` then does the lookup).
    #[inline]
    pub fn seek(&self, comparator: Comparator, key: &[u8]) -> Option<Seek> {
        (comparator == Comparator::Lexical).then(|| self.entries.seek(key_prefix(key)))
    }

    /// The second step, once the block is in the cache: starts loading the entry where the
    /// key is or would be.
    #[inline]
    pub fn seek_entry(&self, seek: &mut Seek) {
        self.entries.seek_item(seek);
    }

    /// The third step, once the entry is in the cache: starts loading the record it points to
    /// (up to `MAX_RECORD_PREFETCH` bytes), which the value's visitor reads. (A guess from the
    /// entry's rank, as `search` prefetches, would save this step only in pages whose
    /// records still lie in key order, as decoding lays them out: a page written since holds
    /// them in the order they came.)
    ///
    /// In a leaf lending its values the arena holds the key and the value's place only, and
    /// the value lies in the file's pages: `seek_lent_value` is the step after this one.
    #[inline]
    pub fn seek_record(&self, seek: &Seek) {
        if let Some(position) = seek.position() {
            self.prefetch_record(position);
        }
    }

    /// Starts loading record `index` (up to `MAX_RECORD_PREFETCH` bytes of it in the arena).
    #[inline]
    pub fn prefetch_record(&self, index: usize) {
        if let Some(entry) = self.entries.get(index) {
            let start = entry.offset as usize;
            let in_arena = if self.lent.is_some() { LENT_PLACE } else { entry.value_len as usize };
            let len = entry.key_len as usize + in_arena;
            self.prefetch_arena(start, start + len.min(MAX_RECORD_PREFETCH));
        }
    }

    /// The step after `seek_record` in a leaf lending its values, once the record is in the
    /// cache: starts loading the value from the file's pages (up to `MAX_RECORD_PREFETCH`
    /// bytes), where it lies apart from the record, so that the visitor of a batched lookup
    /// after a reopen does not wait for it one value at a time. Nothing in a leaf holding its
    /// values.
    #[inline]
    pub fn seek_lent_value(&self, seek: &Seek) {
        if self.lent.is_none() {
            return;
        }
        if let Some(entry) = seek.position().and_then(|position| self.entries.get(position)) {
            let value = self.value_of(entry);
            prefetch_slice(value.get(..value.len().min(MAX_RECORD_PREFETCH)).unwrap_or_default());
        }
    }

    /// The last step: the index of `key` (which `seek` was given), as `find` answers it.
    #[inline]
    pub fn seek_end(&self, seek: &Seek, key: &[u8]) -> Option<usize> {
        debug_assert_eq!(seek.probe(), key_prefix(key), "a seek finished with another key");
        let low = match seek.position() {
            Some(position) => position,
            None => self.entries.lower_bound_cached(seek.probe()),
        };
        self.search_from(seek.probe(), low, key).ok()
    }

    /// `Ok(index)` of `key`, or `Err(index)` where it would be inserted. Before searching,
    /// the page's first and last keys are checked (one line each), which makes writers in
    /// key order (appends, deletes from the front) skip the search.
    #[inline]
    pub fn search(&self, comparator: Comparator, key: &[u8]) -> std::result::Result<usize, usize> {
        if comparator == Comparator::Lexical {
            let probe = key_prefix(key);
            if self.entries.last_prefix().is_some_and(|last| probe > last) {
                return Err(self.entries.len()); // after every key (appending in key order)
            }
            let low = self.entries.lower_bound(probe, |start, end| self.prefetch_records(start, end));
            self.search_from(probe, low, key)
        } else {
            self.search_others(comparator, key)
        }
    }

    /// The index of `key`, as `search` finds it, for a batched lookup's later keys in a leaf
    /// it is reading (sorted batches meet a leaf's keys one after another): it reads the top
    /// level, one block of the index and the entries of the key's prefix, and prefetches
    /// nothing, as their lines came in with the earlier keys or lie next to theirs; nor does
    /// it check the page's ends (two more lines).
    #[inline]
    pub fn find(&self, comparator: Comparator, key: &[u8]) -> Option<usize> {
        if comparator == Comparator::Lexical {
            let probe = key_prefix(key);
            self.search_from(probe, self.entries.lower_bound_cached(probe), key).ok()
        } else {
            self.search_others(comparator, key).ok()
        }
    }

    /// The search among the keys whose prefix is `probe`, from the first of them at `low`.
    #[inline]
    fn search_from(&self, probe: u64, low: usize, key: &[u8]) -> std::result::Result<usize, usize> {
        let high = self.entries.run_end(low, probe);
        search_run(low, high, |i| match self.entries.get(i) {
            Some(e) => same_prefix_order(e.key_len as usize, key.len(), || self.bytes(e.offset, e.key_len).cmp(key)),
            None => Ordering::Greater,
        })
    }

    /// The search for the comparators other than the bytewise one: a binary search of the
    /// whole index.
    fn search_others(&self, comparator: Comparator, key: &[u8]) -> std::result::Result<usize, usize> {
        self.entries.items().binary_search_by(|e| comparator.compare(self.bytes(e.offset, e.key_len), key))
    }

    /// Prefetches where the records `start..end` likely lie in the arena, so that reading the
    /// value found overlaps with the search. A decoded page holds its records in key order,
    /// so their place is about proportional to their rank; in a page modified since, the
    /// guess may miss, which costs nothing but the prefetch.
    #[inline]
    fn prefetch_records(&self, start: usize, end: usize) {
        let count = self.entries.len().max(1);
        let per_record = self.arena.len() / count;
        let (from, to) = (start * per_record, (end + 1) * per_record);
        if to - from <= MAX_RECORD_PREFETCH {
            self.prefetch_arena(from, to);
        }
    }

    /// Starts loading the arena bytes `from..to` (what lies inside the arena).
    #[inline]
    fn prefetch_arena(&self, from: usize, to: usize) {
        prefetch_slice(self.arena.get(from..to.min(self.arena.len())).unwrap_or_default());
    }

    /// The number of records whose key is below `key` (or not above it, with `inclusive`).
    pub fn rank(&self, comparator: Comparator, key: &[u8], inclusive: bool) -> usize {
        match self.search(comparator, key) {
            Ok(index) if inclusive => index + 1,
            Ok(index) | Err(index) => index,
        }
    }

    fn push_bytes(&mut self, key: &[u8], value: &[u8]) -> Result<Entry> {
        if key.len() + value.len() > MAX_RECORD_SIZE {
            return Err(Error::new(
                ErrorKind::Limit,
                format!("a record of {} bytes is over the limit of {MAX_RECORD_SIZE}", key.len() + value.len()),
            ));
        }
        if self.garbage > 0 && self.arena.len() + key.len() + value.len() > u32::MAX as usize {
            self.compact();
        }
        let offset = u32::try_from(self.arena.len())
            .ok()
            .filter(|o| (*o as usize) + key.len() + value.len() <= u32::MAX as usize)
            .ok_or_else(|| Error::new(ErrorKind::Limit, "a leaf page outgrew 4 GiB"))?;
        self.arena.extend_from_slice(key);
        self.arena.extend_from_slice(value);
        Ok(Entry { offset, key_len: key.len() as u32, value_len: value.len() as u32 })
    }

    /// Inserts a record at `index` (from `search`'s `Err`).
    pub fn insert(&mut self, index: usize, key: &[u8], value: &[u8]) -> Result<()> {
        self.own();
        let entry = self.push_bytes(key, value)?;
        let index = index.min(self.entries.len());
        self.entries.insert(index, key_prefix(key), entry);
        self.live_bytes += key.len() + value.len();
        Ok(())
    }

    /// Replaces the value of the record at `index` (from `search`'s `Ok`).
    pub fn set_value(&mut self, index: usize, value: &[u8]) -> Result<()> {
        self.own();
        let Some(old) = self.entries.get(index).copied() else {
            return Err(Error::not_found("no record at this leaf position"));
        };
        if value.len() <= old.value_len as usize {
            // Fits where the old value was: overwrite in place.
            let start = (old.offset + old.key_len) as usize;
            if let Some(target) = self.arena.get_mut(start..start + value.len()) {
                target.copy_from_slice(value);
            }
            self.garbage += old.value_len as usize - value.len();
            self.live_bytes -= old.value_len as usize - value.len();
            if let Some(entry) = self.entries.get_mut(index) {
                entry.value_len = value.len() as u32;
            }
        } else {
            let key = self.bytes(old.offset, old.key_len).to_vec();
            let entry = self.push_bytes(&key, value)?;
            if let Some(slot) = self.entries.get_mut(index) {
                *slot = entry;
            }
            self.garbage += (old.key_len + old.value_len) as usize;
            self.live_bytes += value.len() - old.value_len as usize;
        }
        self.maybe_compact();
        Ok(())
    }

    pub fn remove(&mut self, index: usize) {
        self.own();
        if let Some(old) = self.entries.remove(index) {
            let size = (old.key_len + old.value_len) as usize;
            self.garbage += size;
            self.live_bytes -= size;
            self.maybe_compact();
        }
    }

    fn maybe_compact(&mut self) {
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact();
        }
    }

    fn compact(&mut self) {
        self.compact_with_room(0);
    }

    /// `compact`, leaving room in the new arena for up to `room` bytes of records in all.
    fn compact_with_room(&mut self, room: usize) {
        let mut arena = Vec::with_capacity(self.live_bytes.max(room));
        for entry in self.entries.items_mut() {
            let start = entry.offset as usize;
            let len = (entry.key_len + entry.value_len) as usize;
            entry.offset = arena.len() as u32;
            arena.extend_from_slice(self.arena.get(start..start + len).unwrap_or_default());
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Moves the records from `at` on into a new leaf. Each half's arena gets room for `room`
    /// bytes of records (a page's worth): a half is a leaf that random inserts fill again,
    /// and an arena of its records alone was reallocated (copied, and its new memory faulted
    /// in) at the next insert into either half, 15% of a durable batch's time.
    pub fn split_off(&mut self, at: usize, room: usize) -> Leaf {
        self.own();
        let mut right = Leaf { entries: self.entries.split_off(at), ..Leaf::default() };
        let moved: usize = right.entries.items().iter().map(|e| (e.key_len + e.value_len) as usize).sum();
        right.arena.reserve(moved.max(room));
        for entry in right.entries.items_mut() {
            let start = entry.offset as usize;
            let len = (entry.key_len + entry.value_len) as usize;
            entry.offset = right.arena.len() as u32;
            right.arena.extend_from_slice(self.arena.get(start..start + len).unwrap_or_default());
        }
        right.live_bytes = moved;
        self.live_bytes -= moved;
        self.garbage += moved;
        self.compact_with_room(room);
        right
    }

    /// Appends all records of `right`, whose keys all follow this leaf's.
    pub fn append(&mut self, right: &Leaf) -> Result<()> {
        self.own();
        for index in 0..right.len() {
            if let Some((key, value)) = right.record(index) {
                let entry = self.push_bytes(key, value)?;
                self.entries.push(key_prefix(key), entry);
                self.live_bytes += key.len() + value.len();
            }
        }
        Ok(())
    }

    /// Where to split an oversized leaf: where the records before it fill about `fill` bytes
    /// (sequential inserts split near the end so that pages stay full).
    pub fn split_point(&self, target_bytes: usize) -> usize {
        let mut bytes = 0;
        for (index, entry) in self.entries.items().iter().enumerate() {
            bytes += (entry.key_len + entry.value_len) as usize + RECORD_OVERHEAD;
            if bytes > target_bytes {
                return index.clamp(1, self.entries.len().saturating_sub(1).max(1));
            }
        }
        self.entries.len().saturating_sub(1).max(1)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.encoded_size());
        put_varint(out, self.entries.len() as u64);
        let mut previous: &[u8] = &[];
        for index in 0..self.entries.len() {
            let (key, value) = self.record(index).unwrap_or_default();
            let shared = common_prefix(previous, key);
            put_varint(out, shared as u64);
            put_varint(out, (key.len() - shared) as u64);
            put_varint(out, value.len() as u64);
            out.extend_from_slice(key.get(shared..).unwrap_or_default());
            out.extend_from_slice(value);
            previous = key;
        }
    }

    pub fn decode(raw: &[u8], comparator: Comparator) -> Result<Leaf> {
        Leaf::decode_from(raw, comparator, None)
    }

    /// `decode` of a page whose serialized form is the whole of `lent` (an uncompressed slot
    /// of the file's mapping): the leaf keeps its values there instead of copying them.
    pub fn decode_lending(lent: LentBytes, comparator: Comparator) -> Result<Leaf> {
        let raw = lent.all();
        Leaf::decode_from(raw, comparator, Some(lent))
    }

    /// The value of `key` in the serialized leaf `raw`, found by reading its records in order
    /// up to the first key at or past `key`, without decoding the page: a point read of a
    /// leaf that is not to be cached (`Pager::find_in_leaf_slot`) builds no arena and no
    /// index. What it reads is checked as `decode` checks it (lengths, shared prefixes, keys
    /// ascending); the records after the answer go unread, and the slot's checksum, verified
    /// before, covers their bytes.
    pub fn find_encoded<'r>(raw: &'r [u8], comparator: Comparator, key: &[u8]) -> Result<Option<&'r [u8]>> {
        let mut reader = ByteReader::new(raw, "tree leaf page");
        let count = reader.count(RECORD_OVERHEAD)?;
        // The previous key and the one being read: each is a prefix of the one before plus a
        // suffix, so neither outgrows the page.
        let (mut previous, mut current) = (Vec::with_capacity(64), Vec::with_capacity(64));
        for index in 0..count {
            let LeafRecord { shared, suffix, value } = LeafRecord::read(&mut reader)?;
            let prefix = previous.get(..shared).filter(|_| index > 0 || shared == 0);
            let prefix =
                prefix.ok_or_else(|| Error::broken("leaf page: shared prefix longer than the previous key"))?;
            current.clear();
            current.extend_from_slice(prefix);
            current.extend_from_slice(suffix);
            if index > 0 && comparator.compare(&previous, &current) != Ordering::Less {
                return Err(Error::broken("leaf page: keys out of order"));
            }
            match comparator.compare(&current, key) {
                Ordering::Less => std::mem::swap(&mut previous, &mut current),
                Ordering::Equal => return Ok(Some(value)),
                Ordering::Greater => return Ok(None),
            }
        }
        reader.finish()?;
        Ok(None)
    }

    /// `decode`, lending the values from `lent` when given (then `raw` is its bytes).
    fn decode_from(raw: &[u8], comparator: Comparator, lent: Option<LentBytes>) -> Result<Leaf> {
        let mut reader = ByteReader::new(raw, "tree leaf page");
        let count = reader.count(RECORD_OVERHEAD)?;
        // Keys rebuilt from shared prefixes may exceed the page; bound them like a codec ratio.
        let arena_limit = raw.len().saturating_mul(MAX_RATIO).min(u32::MAX as usize);
        // Room for the page plus the shared prefixes of a typical page; a page whose keys
        // share more grows it. `shrink_to_fit` below gives back the rest (in place, as the
        // allocator shrinks a block), so the cache counts no slack. (Reading every record's
        // lengths beforehand to size it exactly cost a third of the decoding.) A lent page's
        // arena holds its keys and value places: a guess of 32 bytes a record.
        let capacity = match lent {
            None => raw.len().saturating_add(raw.len() / 2),
            Some(_) => count.saturating_mul(32),
        };
        let mut leaf = Leaf {
            arena: Vec::with_capacity(capacity.min(arena_limit)),
            entries: PrefixIndex::with_capacity(count),
            garbage: 0,
            live_bytes: 0,
            lent,
        };
        let mut previous: Option<Entry> = None;
        for _ in 0..count {
            let LeafRecord { shared, suffix, value } = LeafRecord::read(&mut reader)?;
            let (suffix_len, value_len) = (suffix.len(), value.len());
            // Where the value starts in `raw`: it ends where the reader now stands.
            let place = raw.len() - reader.remaining() - value_len;
            let offset = leaf.arena.len();
            let prefix = match previous {
                Some(p) if shared <= p.key_len as usize => p.offset as usize..p.offset as usize + shared,
                None if shared == 0 => 0..0,
                _ => return Err(Error::broken("leaf page: shared prefix longer than the previous key")),
            };
            let key_len = shared + suffix_len;
            // Keys and values together, lent or not, so that both decodings accept the same
            // pages and a lent leaf's copy (`own`) fits 32-bit offsets.
            if leaf.live_bytes + key_len + value_len > arena_limit {
                return Err(Error::broken("leaf page: keys expand beyond any plausible size"));
            }
            leaf.arena.extend_from_within(prefix);
            leaf.arena.extend_from_slice(suffix);
            match lent {
                None => leaf.arena.extend_from_slice(value),
                // `place` < raw.len(), which a slot's 32-bit length bounds.
                Some(_) => leaf.arena.extend_from_slice(&(place as u32).to_le_bytes()),
            }
            let entry = Entry { offset: offset as u32, key_len: key_len as u32, value_len: value_len as u32 };
            if let Some(p) = previous {
                let previous_key = leaf.bytes(p.offset, p.key_len);
                // Lexically, the first byte after the shared prefix decides when it differs
                // from the previous key's (the common case), sparing a full comparison.
                let decided = match (previous_key.get(shared), suffix.first()) {
                    (Some(a), Some(b)) if comparator == Comparator::Lexical && a != b => Some(a < b),
                    _ => None,
                };
                let ascending = decided.unwrap_or_else(|| {
                    comparator.compare(previous_key, leaf.bytes(entry.offset, entry.key_len)) == Ordering::Less
                });
                if !ascending {
                    return Err(Error::broken("leaf page: keys out of order"));
                }
            }
            leaf.entries.push(key_prefix(leaf.bytes(entry.offset, entry.key_len)), entry);
            leaf.live_bytes += key_len + value_len;
            previous = Some(entry);
        }
        reader.finish()?;
        leaf.arena.shrink_to_fit();
        Ok(leaf)
    }
}

/// One record of a serialized leaf as it lies in the page: the length of the prefix its key
/// shares with the previous key, the rest of its key, and its value.
struct LeafRecord<'r> {
    shared: usize,
    suffix: &'r [u8],
    value: &'r [u8],
}

impl<'r> LeafRecord<'r> {
    /// Reads the record at `reader`'s position, every length checked against the page.
    /// (Always inlined: `Leaf::decode` reads one a record, and its loop is the cost of a leaf
    /// read from the disk.)
    #[inline(always)]
    fn read(reader: &mut ByteReader<'r>) -> Result<LeafRecord<'r>> {
        let shared = reader.length()?;
        let suffix_len = reader.length()?;
        let value_len = reader.length()?;
        let suffix = reader.take(suffix_len)?;
        let value = reader.take(value_len)?;
        Ok(LeafRecord { shared, suffix, value })
    }
}

/// A branch page: children separated by keys.
#[derive(Debug, Clone, Default)]
pub struct Branch {
    /// Invariant: `keys.len() + 1 == children.len()`, keys strictly ascending; or both
    /// empty, for the moment between the removal of a branch's last child and the removal of
    /// the branch itself (rebalance.rs drops it in the same step).
    pub keys: Vec<Vec<u8>>,
    /// Child references: file offsets, or ids of pages modified since the last commit.
    children: Vec<u64>,
    /// What each child's slot length is known to be (slot_hint.rs): written with the child's
    /// reference in a file of format version 2. Invariant: `hints.len() == children.len()`.
    hints: Vec<SlotHint>,
    key_bytes: usize,
    /// `key_prefix` of each key with its length (saturated at `u32::MAX`, which still tells
    /// a key over 8 bytes), rebuilt after every change (branches change rarely): a search
    /// and a batch's upper bound read them instead of the key, which lies elsewhere in memory.
    /// Invariant: `index.len() == keys.len()`.
    index: PrefixIndex<u32>,
}

impl Branch {
    pub fn new(first_child: u64) -> Branch {
        Branch::with_first(first_child, SlotHint::UNKNOWN)
    }

    /// A branch of one child, whose slot length `hint` tells.
    pub fn with_first(first_child: u64, hint: SlotHint) -> Branch {
        Branch {
            keys: Vec::new(),
            children: vec![first_child],
            hints: vec![hint],
            key_bytes: 0,
            index: PrefixIndex::default(),
        }
    }

    /// A branch of these children and separators as given, unchecked (forge.rs builds
    /// impossible branches on purpose).
    #[cfg(any(test, feature = "internals"))]
    pub fn forged(children: &[u64], keys: Vec<Vec<u8>>) -> Branch {
        Branch {
            key_bytes: keys.iter().map(Vec::len).sum(),
            keys,
            children: children.to_vec(),
            hints: vec![SlotHint::UNKNOWN; children.len()],
            index: PrefixIndex::default(),
        }
    }

    /// The child references, in key order.
    #[inline]
    pub fn children(&self) -> &[u64] {
        &self.children
    }

    /// Child `index`, None past the last.
    #[inline]
    pub fn child(&self, index: usize) -> Option<u64> {
        self.children.get(index).copied()
    }

    /// Child `index` with what is known of its slot's length.
    #[inline]
    pub fn child_hinted(&self, index: usize) -> Option<(u64, SlotHint)> {
        Some((*self.children.get(index)?, self.hints.get(index).copied().unwrap_or_default()))
    }

    /// Points child `index` at `child`, whose slot length `hint` tells; false when there is no
    /// such child.
    pub fn set_child(&mut self, index: usize, child: u64, hint: SlotHint) -> bool {
        match (self.children.get_mut(index), self.hints.get_mut(index)) {
            (Some(slot), Some(slot_hint)) => {
                *slot = child;
                *slot_hint = hint;
                true
            }
            _ => false,
        }
    }

    fn refresh_prefixes(&mut self) {
        debug_assert_eq!(self.hints.len(), self.children.len(), "invariant: a hint for every child");
        debug_assert!(
            self.keys.len() + 1 == self.children.len() || (self.keys.is_empty() && self.children.is_empty()),
            "invariant: a separator between children ({} keys, {} children)",
            self.keys.len(),
            self.children.len()
        );
        self.index.rebuild(self.keys.iter().map(|k| (key_prefix(k), u32::try_from(k.len()).unwrap_or(u32::MAX))));
        debug_assert_eq!(self.index.len(), self.keys.len());
    }

    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn encoded_size(&self) -> usize {
        self.key_bytes + self.children.len() * CHILD_OVERHEAD + 4
    }

    /// The child that holds `key`: the number of separators not above it.
    #[inline]
    pub fn child_index(&self, comparator: Comparator, key: &[u8]) -> usize {
        // (`keys` is public: a forged branch may not have its index; then compare fully.)
        if comparator == Comparator::Lexical && self.index.len() == self.keys.len() {
            let probe = key_prefix(key);
            // The child taken is one of the block's (or the one after it): its line loads
            // while the block's prefixes are read, not after (a miss of its own per level).
            let low = self.index.lower_bound_hot(probe, |start, end| {
                prefetch_slice(self.children.get(start..(end + 2).min(self.children.len())).unwrap_or_default());
            });
            let high = self.index.run_end(low, probe);
            let found = search_run(low, high, |i| match (self.index.get(i), self.keys.get(i)) {
                (Some(&len), Some(k)) => same_prefix_order(len as usize, key.len(), || k.as_slice().cmp(key)),
                _ => Ordering::Greater,
            });
            // A separator equal to the key opens the child that holds it.
            return match found {
                Ok(i) => i + 1,
                Err(i) => i,
            };
        }
        self.keys.partition_point(|k| comparator.compare(k, key) != Ordering::Greater)
    }

    /// Whether `key` lies between the separators on either side of child `index`, both
    /// present: then it is child `index`'s, whatever the branches above hold. False for the
    /// first and the last child, whose other bound is an ancestor's.
    pub fn encloses(&self, comparator: Comparator, index: usize, key: &[u8]) -> bool {
        let (Some(low), Some(high)) = (index.checked_sub(1).and_then(|i| self.keys.get(i)), self.keys.get(index))
        else {
            return false;
        };
        comparator.compare(low, key) != Ordering::Greater && comparator.compare(key, high) == Ordering::Less
    }

    /// The `key_prefix` and length of separator `index` (the upper bound of child `index`;
    /// None for the last child), from the index where the branch has one, without touching
    /// the separator itself.
    #[inline]
    pub fn separator_prefix(&self, index: usize) -> Option<(u64, usize)> {
        if self.index.len() == self.keys.len() {
            Some((self.index.prefix(index)?, *self.index.get(index)? as usize))
        } else {
            self.keys.get(index).map(|k| (key_prefix(k), k.len()))
        }
    }

    /// Inserts `child` after position `index`, separated from it by `key`.
    pub fn insert_after(&mut self, index: usize, key: Vec<u8>, child: u64) {
        self.insert_hinted_after(index, key, child, SlotHint::UNKNOWN);
    }

    /// `insert_after` for a child whose slot length `hint` tells.
    pub fn insert_hinted_after(&mut self, index: usize, key: Vec<u8>, child: u64, hint: SlotHint) {
        let at = (index + 1).min(self.children.len());
        self.key_bytes += key.len();
        let key_at = at.saturating_sub(1).min(self.keys.len());
        // The index takes the one separator (moving the shorter side of its arrays) rather
        // than being rebuilt: a leaf split in a batch of random inserts did that to a branch
        // of hundreds of separators, 6% of the batch's time.
        let in_step = self.index.len() == self.keys.len();
        let (prefix, len) = (key_prefix(&key), u32::try_from(key.len()).unwrap_or(u32::MAX));
        self.keys.insert(key_at, key);
        self.children.insert(at, child);
        self.hints.insert(at, hint);
        if in_step {
            self.index.insert(key_at, prefix, len);
        } else {
            self.refresh_prefixes();
        }
    }

    /// Removes child `index` with the separator that bounds it (the one before it, or the one
    /// after it for the first child).
    pub fn remove_child(&mut self, index: usize) {
        if index >= self.children.len() {
            debug_assert!(false, "remove_child({index}) of a branch with {} children", self.children.len());
            return;
        }
        self.children.remove(index);
        self.hints.remove(index);
        if !self.keys.is_empty() {
            let in_step = self.index.len() == self.keys.len();
            let key_at = index.saturating_sub(1).min(self.keys.len() - 1);
            let key = self.keys.remove(key_at);
            self.key_bytes -= key.len();
            if in_step {
                self.index.remove(key_at);
                return;
            }
        }
        self.refresh_prefixes();
    }

    /// Splits an oversized branch: returns the separator that moves up and the right half;
    /// None when there are too few children to split.
    pub fn split(&mut self) -> Option<(Vec<u8>, Branch)> {
        if self.keys.len() < 2 {
            return None;
        }
        let middle = self.keys.len() / 2;
        let mut right_keys = self.keys.split_off(middle);
        let up = right_keys.remove(0);
        let right_children = self.children.split_off(middle + 1);
        let right_hints = self.hints.split_off(middle + 1);
        let right_bytes: usize = right_keys.iter().map(Vec::len).sum();
        self.key_bytes -= right_bytes + up.len();
        self.refresh_prefixes();
        let mut right = Branch {
            keys: right_keys,
            children: right_children,
            hints: right_hints,
            key_bytes: right_bytes,
            index: PrefixIndex::default(),
        };
        right.refresh_prefixes();
        Some((up, right))
    }

    /// Appends `right`, whose keys all follow `separator`, which follows this branch's keys.
    pub fn append(&mut self, separator: Vec<u8>, right: &Branch) {
        self.key_bytes += separator.len() + right.key_bytes;
        self.keys.push(separator);
        self.keys.extend(right.keys.iter().cloned());
        self.children.extend_from_slice(&right.children);
        self.hints.extend_from_slice(&right.hints);
        self.refresh_prefixes();
    }

    /// The branch's bytes into `out`. A branch without children exists only between the
    /// removal of its last child and its own removal, and is never written: writing one is
    /// a bug in Kura, reported rather than encoded as a branch pointing at offset 0.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<()> {
        let Some(&first) = self.children.first() else {
            return Err(Error::internal("a branch written to the file has a child"));
        };
        out.clear();
        out.reserve(self.encoded_size());
        put_varint(out, self.children.len() as u64);
        put_varint(out, self.hints.first().copied().unwrap_or_default().stored_with(first));
        let mut previous: &[u8] = &[];
        let hinted = self.children.iter().zip(&self.hints).skip(1);
        for (key, (child, hint)) in self.keys.iter().zip(hinted) {
            let shared = common_prefix(previous, key);
            put_varint(out, shared as u64);
            put_varint(out, (key.len() - shared) as u64);
            out.extend_from_slice(key.get(shared..).unwrap_or_default());
            put_varint(out, hint.stored_with(*child));
            previous = key;
        }
        Ok(())
    }

    /// The branch of `raw`; `hinted`: the file's format records slot hints (version 2).
    pub fn decode(raw: &[u8], comparator: Comparator, hinted: bool) -> Result<Branch> {
        let mut reader = ByteReader::new(raw, "tree branch page");
        let count = reader.count(1)?;
        if count == 0 {
            return Err(Error::broken("branch page without children"));
        }
        let (first, hint) = check_child(reader.varint()?, hinted)?;
        let mut branch = Branch::with_first(first, hint);
        branch.children.reserve(count - 1);
        branch.hints.reserve(count - 1);
        let arena_limit = raw.len().saturating_mul(MAX_RATIO);
        for _ in 1..count {
            let shared = reader.length()?;
            let suffix_len = reader.length()?;
            let suffix = reader.take(suffix_len)?;
            let previous = branch.keys.last().map(Vec::as_slice).unwrap_or_default();
            if shared > previous.len() {
                return Err(Error::broken("branch page: shared prefix longer than the previous key"));
            }
            if branch.key_bytes + shared + suffix_len > arena_limit {
                return Err(Error::broken("branch page: keys expand beyond any plausible size"));
            }
            let mut key = Vec::with_capacity(shared + suffix_len);
            key.extend_from_slice(previous.get(..shared).unwrap_or_default());
            key.extend_from_slice(suffix);
            if !branch.keys.is_empty() && comparator.compare(previous, &key) != Ordering::Less {
                return Err(Error::broken("branch page: keys out of order"));
            }
            branch.key_bytes += key.len();
            branch.keys.push(key);
            let (child, hint) = check_child(reader.varint()?, hinted)?;
            branch.children.push(child);
            branch.hints.push(hint);
        }
        reader.finish()?;
        branch.refresh_prefixes();
        Ok(branch)
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;
    use proptest::prelude::*;

    /// Builds a leaf of `map`, encodes it and decodes the bytes again: the bytes, and whether
    /// the decoded leaf holds `map`'s records and an arena without slack for the page cache
    /// to count.
    fn round_trip(map: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>) -> (Vec<u8>, bool) {
        let mut leaf = Leaf::new();
        for (key, value) in map {
            let index = leaf.search(Comparator::Lexical, key).unwrap_err();
            leaf.insert(index, key, value).unwrap();
        }
        let mut raw = Vec::new();
        leaf.encode(&mut raw);
        let decoded = Leaf::decode(&raw, Comparator::Lexical).unwrap();
        let same_records = (0..decoded.len())
            .map(|i| decoded.record(i).unwrap())
            .eq(map.iter().map(|(k, v)| (k.as_slice(), v.as_slice())));
        let sound = same_records && decoded.arena.capacity() == decoded.arena.len();
        (raw, sound)
    }

    fn records(leaf: &Leaf) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..leaf.len()).map(|i| leaf.record(i).map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap()).collect()
    }

    /// A change to a leaf, the same applied to a lent and an owned one.
    #[derive(Debug, Clone)]
    enum Change {
        Set(Vec<u8>, Vec<u8>),
        Remove(Vec<u8>),
        Split(usize),
        Append,
        Cloned,
    }

    fn change() -> impl Strategy<Value = Change> {
        let key = proptest::collection::vec(b'a'..b'e', 1..5);
        let value = proptest::collection::vec(any::<u8>(), 0..30);
        prop_oneof![
            (key.clone(), value).prop_map(|(k, v)| Change::Set(k, v)),
            key.prop_map(Change::Remove),
            (0usize..40).prop_map(Change::Split),
            Just(Change::Append),
            Just(Change::Cloned),
        ]
    }

    /// Applies `change`; a split keeps the left part, an append adds a fixed record after
    /// every key the changes make.
    fn apply(leaf: &mut Leaf, change: &Change) {
        match change {
            Change::Set(key, value) => match leaf.search(Comparator::Lexical, key) {
                Ok(index) => leaf.set_value(index, value).unwrap(),
                Err(index) => leaf.insert(index, key, value).unwrap(),
            },
            Change::Remove(key) => {
                if let Ok(index) = leaf.search(Comparator::Lexical, key) {
                    leaf.remove(index);
                }
            }
            Change::Split(at) if leaf.len() > 1 => drop(leaf.split_off(1 + at % (leaf.len() - 1), 0)),
            Change::Split(_) => {}
            Change::Append => {
                let mut right = Leaf::new();
                if leaf.search(Comparator::Lexical, b"zz").is_err() {
                    right.insert(0, b"zz", b"appended").unwrap();
                }
                leaf.append(&right).unwrap();
            }
            Change::Cloned => *leaf = leaf.clone(),
        }
    }

    proptest! {
        /// A leaf that lends its values from its page's bytes holds the same records as one
        /// decoded from them, and after any sequence of changes both hold the same records
        /// and encode to the same bytes: the first change, or a copy, takes the values in.
        #[test]
        fn a_lent_leaf_changes_as_an_owned_one(
            map in proptest::collection::btree_map(proptest::collection::vec(b'a'..b'e', 1..5), proptest::collection::vec(any::<u8>(), 0..30), 0..30),
            changes in proptest::collection::vec(change(), 0..12),
        ) {
            let mut built = Leaf::new();
            for (key, value) in &map {
                built.insert(built.len(), key, value).unwrap();
            }
            let mut raw = Vec::new();
            built.encode(&mut raw);
            let mut owned = Leaf::decode(&raw, Comparator::Lexical).unwrap();
            let mut lent = Leaf::decode_lending(LentBytes::of_static(raw.leak()), Comparator::Lexical).unwrap();
            prop_assert!(lent.is_lent());
            prop_assert_eq!(records(&lent), records(&owned));
            for change in &changes {
                apply(&mut owned, change);
                apply(&mut lent, change);
                prop_assert_eq!(records(&lent), records(&owned), "after {:?}", change);
                prop_assert_eq!(lent.encoded_size(), owned.encoded_size());
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            lent.encode(&mut a);
            owned.encode(&mut b);
            prop_assert_eq!(a, b);
        }

        /// Keys sharing a long prefix rebuild an arena many times the page's size, beyond the
        /// room decoding starts with: it grows, and still ends without slack.
        #[test]
        fn leaf_of_long_shared_prefixes_round_trips(
            prefix_len in 0usize..400,
            map in proptest::collection::btree_map(proptest::collection::vec(any::<u8>(), 0..6), proptest::collection::vec(any::<u8>(), 0..4), 1..60),
        ) {
            let map = map.into_iter().map(|(suffix, value)| ([vec![b'p'; prefix_len], suffix].concat(), value)).collect();
            prop_assert!(round_trip(&map).1);
        }

        #[test]
        fn leaf_round_trip(map in proptest::collection::btree_map(proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..20), 0..40)) {
            let (raw, sound) = round_trip(&map);
            prop_assert!(sound);
            // Every truncation or single-byte change is an error or a different valid page, never a panic,
            // and the decoding that lends its values accepts exactly the pages the other does, with
            // the same records.
            for cut in 0..raw.len() {
                let mut bad = raw.clone();
                bad[cut] ^= 0x55;
                for damaged in [raw[..cut].to_vec(), bad.clone()] {
                    let owned = Leaf::decode(&damaged, Comparator::Lexical);
                    let lent = Leaf::decode_lending(LentBytes::of_static(damaged.leak()), Comparator::Lexical);
                    prop_assert_eq!(owned.is_ok(), lent.is_ok());
                    if let (Ok(owned), Ok(lent)) = (owned, lent) {
                        prop_assert_eq!(records(&owned), records(&lent));
                    }
                }
                let _ = Branch::decode(&bad, Comparator::Lexical, true);
            }
        }
    }

    proptest! {
        /// `find_encoded` answers every key of a page, and keys between and around them, as
        /// the decoded page's `search` does, under both comparators; a page with a byte
        /// damaged that still decodes is answered as its decoding answers, and one that does
        /// not decode never makes it panic.
        #[test]
        fn find_encoded_agrees_with_the_decoded_page(
            keys in proptest::collection::btree_set(tied_key(), 0..40),
            probes in proptest::collection::vec(tied_key(), 0..20),
            flip in any::<proptest::sample::Index>(),
        ) {
            for comparator in Comparator::ALL {
                let mut leaf = Leaf::new();
                let mut sorted: Vec<&Vec<u8>> = keys.iter().collect();
                sorted.sort_by(|a, b| comparator.compare(a, b));
                for (i, key) in sorted.iter().enumerate() {
                    leaf.insert(i, key, &[i as u8; 3]).unwrap();
                }
                let mut raw = Vec::new();
                leaf.encode(&mut raw);
                for key in keys.iter().chain(&probes) {
                    let decoded = leaf.search(comparator, key).ok().and_then(|i| leaf.value(i));
                    prop_assert_eq!(Leaf::find_encoded(&raw, comparator, key).unwrap(), decoded);
                }
                if !raw.is_empty() {
                    let mut bad = raw.clone();
                    bad[flip.index(raw.len())] ^= 0x55;
                    // A damaged page that still decodes answers as its decoding does; one that
                    // does not may answer from the records before the damage, or refuse.
                    if let Ok(damaged) = Leaf::decode(&bad, comparator) {
                        for key in keys.iter().chain(&probes) {
                            let decoded = damaged.search(comparator, key).ok().and_then(|i| damaged.value(i));
                            prop_assert_eq!(Leaf::find_encoded(&bad, comparator, key).unwrap(), decoded);
                        }
                    }
                }
            }
        }
    }

    /// A key of 0-11 bytes from a small alphabet: many keys share their first 8 bytes, and
    /// zero bytes tie with the prefix's padding.
    fn tied_key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(b'a'), Just(0xff)], 0..12)
    }

    /// A key that is mostly 8 equal bytes and a short suffix: long runs of equal prefixes,
    /// across the index's blocks.
    fn shared_prefix_key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a')], 0..4).prop_map(|suffix| {
            let mut key = b"aaaaaaaa".to_vec();
            key.extend(suffix);
            key
        })
    }

    proptest! {
        /// `find` and the staged lookup (`seek`, `seek_entry`, `seek_record`, `seek_end`)
        /// answer as `search` does and as a sorted model says, in pages built by inserts in
        /// random order and removals anywhere (which open and move the gap at the front),
        /// with keys that tie on their prefix, shorter ones that tie with its zero padding,
        /// and long runs of one prefix.
        #[test]
        fn lookups_agree_with_search(
            inserted in proptest::collection::vec(prop_oneof![tied_key(), shared_prefix_key()], 0..300),
            removals in proptest::collection::vec(prop_oneof![Just(0usize), 0usize..300], 0..120),
            probes in proptest::collection::vec(prop_oneof![tied_key(), shared_prefix_key()], 1..60),
        ) {
            let mut leaf = Leaf::new();
            let mut model = std::collections::BTreeSet::new();
            for key in &inserted {
                if let Err(index) = leaf.search(Comparator::Lexical, key) {
                    leaf.insert(index, key, key).unwrap();
                    model.insert(key.clone());
                }
            }
            for removal in removals {
                if let Some(key) = model.iter().nth(removal % model.len().max(1)).cloned() {
                    leaf.remove(removal % model.len());
                    model.remove(&key);
                }
            }
            let stored: Vec<&Vec<u8>> = model.iter().collect();
            prop_assert_eq!(leaf.len(), stored.len());
            for probe in probes.iter().chain(stored.iter().copied()) {
                let expected = leaf.search(Comparator::Lexical, probe).ok();
                prop_assert_eq!(expected, stored.binary_search(&probe).ok());
                prop_assert_eq!(leaf.find(Comparator::Lexical, probe), expected);
                let seek = leaf.seek(Comparator::Lexical, probe).unwrap();
                prop_assert_eq!(leaf.seek_end(&seek, probe), expected, "without seek_entry");
                let mut seek = seek;
                leaf.seek_entry(&mut seek);
                leaf.seek_record(&seek);
                prop_assert_eq!(leaf.seek_end(&seek, probe), expected, "after seek_entry");
            }
        }
    }

    #[test]
    fn leaf_edits_and_splits() {
        let mut leaf = Leaf::new();
        for i in 0..100u32 {
            let key = format!("{i:04}");
            leaf.insert(i as usize, key.as_bytes(), &[7u8; 50]).unwrap();
        }
        leaf.set_value(3, b"x").unwrap();
        leaf.set_value(4, &[9u8; 200]).unwrap();
        leaf.remove(5);
        let right = leaf.split_off(50, 0);
        assert_eq!(leaf.len(), 50);
        assert_eq!(right.len(), 49);
        assert_eq!(leaf.value(3).unwrap(), b"x");
        assert_eq!(leaf.value(4).unwrap(), &[9u8; 200][..]);
        assert_eq!(right.key(0).unwrap(), b"0051");
        let mut joined = leaf.clone();
        joined.append(&right).unwrap();
        assert_eq!(joined.len(), 99);
        assert_eq!(joined.encoded_size(), leaf.encoded_size() + right.encoded_size() - 4);
    }

    /// A branch built and thinned in random order, with separators that tie on their first 8
    /// bytes, hold zero bytes and are shorter and longer than 8: its index (prefix and length
    /// of each separator) stays that of its keys, through splits too, and its child search
    /// answers as a full comparison does, and so does `encloses`.
    #[test]
    fn branch_index_follows_its_separators() {
        let mut rng = crate::split_mix::SplitMix64::new(5);
        let word = |rng: &mut crate::split_mix::SplitMix64| -> Vec<u8> {
            (0..rng.below(14)).map(|_| [0u8, 1, b'a', 0xff][rng.below(4) as usize]).collect()
        };
        let check = |branch: &Branch, rng: &mut crate::split_mix::SplitMix64, round: usize| {
            for (i, key) in branch.keys.iter().enumerate() {
                assert_eq!(branch.separator_prefix(i), Some((key_prefix(key), key.len())), "round {round}");
            }
            assert_eq!(branch.separator_prefix(branch.keys.len()), None);
            for _ in 0..20 {
                let probe = word(rng);
                let expected = branch.keys.partition_point(|k| k.as_slice() <= probe.as_slice());
                assert_eq!(branch.child_index(Comparator::Lexical, &probe), expected, "round {round}: {probe:?}");
                // The child a key is enclosed in is the one the search takes, and every child
                // but the first and last encloses the keys it holds.
                for index in 0..branch.len() {
                    let inner = index > 0 && index + 1 < branch.len();
                    assert_eq!(
                        branch.encloses(Comparator::Lexical, index, &probe),
                        inner && index == expected,
                        "round {round}: child {index} of {}, {probe:?}",
                        branch.len()
                    );
                }
            }
        };
        for round in 0..200 {
            let mut separators: Vec<Vec<u8>> = (0..rng.below(60)).map(|_| word(&mut rng)).collect();
            separators.sort();
            separators.dedup();
            let mut branch = Branch::new(0);
            // Inserted in random order, each after the child whose range it splits.
            let mut order: Vec<usize> = (0..separators.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            for (n, &i) in order.iter().enumerate() {
                let key = separators[i].clone();
                let at = branch.keys.partition_point(|k| *k < key);
                branch.insert_after(at, key, n as u64 + 1);
            }
            assert_eq!(branch.keys, separators);
            check(&branch, &mut rng, round);
            for _ in 0..rng.below(10).min(branch.keys.len() as u64) {
                branch.remove_child(rng.below(branch.children.len() as u64) as usize);
            }
            check(&branch, &mut rng, round);
            if branch.keys.len() >= 3 {
                let (_, right) = branch.split().unwrap();
                check(&branch, &mut rng, round);
                check(&right, &mut rng, round);
            }
        }
    }

    #[test]
    fn branch_round_trip_and_split() {
        let unit = super::super::slot_hint::HintUnit::for_page_size(8192);
        let mut branch = Branch::with_first(4096, unit.hint(100));
        for i in 1..20u64 {
            let hint = if i % 3 == 0 { SlotHint::UNKNOWN } else { unit.hint(i * 400) };
            branch.insert_hinted_after(i as usize - 1, format!("k{i:03}").into_bytes(), 4096 + i * 16, hint);
        }
        let mut raw = Vec::new();
        branch.encode(&mut raw).unwrap();
        let decoded = Branch::decode(&raw, Comparator::Lexical, true).unwrap();
        assert_eq!(decoded.keys, branch.keys);
        assert_eq!(decoded.children, branch.children);
        assert_eq!(decoded.hints, branch.hints);
        assert_eq!(decoded.child_hinted(2), Some((4096 + 32, unit.hint(800))));
        assert_eq!(decoded.child_index(Comparator::Lexical, b"k005"), 5);
        assert_eq!(decoded.child_index(Comparator::Lexical, b"a"), 0);
        // A version 1 file has no hints: a reference with low bits set is corruption there.
        assert!(Branch::decode(&raw, Comparator::Lexical, false).is_err());
        let unhinted = Branch::forged(&branch.children, branch.keys.clone());
        unhinted.encode(&mut raw).unwrap();
        assert_eq!(Branch::decode(&raw, Comparator::Lexical, false).unwrap().children, branch.children);
        let (up, right) = branch.clone().split().unwrap();
        assert_eq!(up, b"k010");
        assert_eq!(right.children.len() + 10, 20);
        assert_eq!(right.hints, branch.hints[10..]);
        let mut reordered = branch.clone();
        reordered.keys.swap(2, 3);
        reordered.encode(&mut raw).unwrap();
        assert!(Branch::decode(&raw, Comparator::Lexical, true).is_err());
    }
}
