//! Tree pages in memory and their serialized form (before compression).
//!
//! A leaf holds records sorted by key; a branch holds child page references separated by keys:
//! child `i` holds the keys `k` with `keys[i-1] <= k < keys[i]`. In memory a leaf keeps all its
//! bytes in one arena with a small sorted index of entries, so that a page costs two
//! allocations and a record 12 bytes of overhead, whatever its size.
//!
//! Serialized leaf: `varint count`, then per record `varint shared, varint suffix_len,
//! varint value_len, suffix, value`, where `shared` is the length of the prefix the key has in
//! common with the previous key. Serialized branch: `varint children, varint child_0`, then per
//! further child `varint shared, varint suffix_len, suffix, varint child_i`. Decoding checks
//! every length against the bytes at hand and that keys strictly ascend, so a corrupted page is
//! BrokenData and never a panic or an oversized allocation.

use std::cmp::Ordering;

use crate::codec::{decode_varint, encode_varint, MAX_RATIO};
use crate::error::{Error, ErrorKind, Result};

use super::comparator::Comparator;
use super::format::{DATA_START, SLOT_ALIGN};

/// Child references on disk are slot offsets; larger values are reserved in memory for pages
/// not yet written (see `btree.rs`), so a stored one is corruption.
const MAX_CHILD_OFFSET: u64 = 1 << 62;

fn check_child(child: u64) -> Result<u64> {
    if child < DATA_START || !child.is_multiple_of(SLOT_ALIGN) || child >= MAX_CHILD_OFFSET {
        return Err(Error::broken(format!("branch page: impossible child offset {child}")));
    }
    Ok(child)
}

/// The largest key plus value accepted: far beyond any page, and small enough that a leaf
/// holding two of them plus a page of others still fits the arena's 32-bit offsets.
pub const MAX_RECORD_SIZE: usize = 1 << 30;

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
    /// Bytes this page takes in memory, for the cache budget.
    pub fn memory_size(&self) -> usize {
        match self {
            Page::Leaf(leaf) => leaf.arena.capacity() + leaf.entries.capacity() * 20 + 64,
            Page::Branch(branch) => branch.key_bytes + branch.children.len() * 40 + 64,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    offset: u32,
    key_len: u32,
    value_len: u32,
}

/// A leaf page: records in key order.
#[derive(Debug, Clone, Default)]
pub struct Leaf {
    /// Key and value bytes of the entries, plus garbage left by replaced records.
    arena: Vec<u8>,
    /// Invariant: sorted by key, strictly ascending under the tree's comparator.
    entries: Vec<Entry>,
    /// `key_prefix` of each entry's key, in a contiguous array of its own: for the lexical
    /// order, unequal prefixes decide a comparison without touching entries or arena, and a
    /// binary search over 8-byte items touches few cache lines.
    prefixes: Vec<u64>,
    /// Arena bytes no entry refers to; the arena is compacted when they are the majority.
    garbage: usize,
    /// Sum of key and value lengths of the entries.
    live_bytes: usize,
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

    pub fn value(&self, index: usize) -> Option<&[u8]> {
        self.entries.get(index).map(|e| self.bytes(e.offset + e.key_len, e.value_len))
    }

    pub fn record(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.entries
            .get(index)
            .map(|e| (self.bytes(e.offset, e.key_len), self.bytes(e.offset + e.key_len, e.value_len)))
    }

    /// `Ok(index)` of `key`, or `Err(index)` where it would be inserted.
    #[inline]
    pub fn search(&self, comparator: Comparator, key: &[u8]) -> std::result::Result<usize, usize> {
        if comparator == Comparator::Lexical {
            let probe = key_prefix(key);
            let low = self.prefixes.partition_point(|p| *p < probe);
            let same = self.prefixes.get(low..).unwrap_or_default().partition_point(|p| *p == probe);
            let candidates = self.entries.get(low..low + same).unwrap_or_default();
            match candidates.binary_search_by(|e| self.bytes(e.offset, e.key_len).cmp(key)) {
                Ok(i) => Ok(low + i),
                Err(i) => Err(low + i),
            }
        } else {
            self.entries.binary_search_by(|e| comparator.compare(self.bytes(e.offset, e.key_len), key))
        }
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
        let entry = self.push_bytes(key, value)?;
        let index = index.min(self.entries.len());
        self.entries.insert(index, entry);
        self.prefixes.insert(index, key_prefix(key));
        self.live_bytes += key.len() + value.len();
        Ok(())
    }

    /// Replaces the value of the record at `index` (from `search`'s `Ok`).
    pub fn set_value(&mut self, index: usize, value: &[u8]) -> Result<()> {
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
        if index < self.entries.len() {
            let old = self.entries.remove(index);
            self.prefixes.remove(index);
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
        let mut arena = Vec::with_capacity(self.live_bytes);
        for entry in &mut self.entries {
            let start = entry.offset as usize;
            let len = (entry.key_len + entry.value_len) as usize;
            entry.offset = arena.len() as u32;
            arena.extend_from_slice(self.arena.get(start..start + len).unwrap_or_default());
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Moves the records from `at` on into a new leaf.
    pub fn split_off(&mut self, at: usize) -> Leaf {
        let mut right = Leaf::new();
        let moved = self.entries.split_off(at.min(self.entries.len()));
        right.prefixes = self.prefixes.split_off(at.min(self.prefixes.len()));
        right.arena.reserve(moved.iter().map(|e| (e.key_len + e.value_len) as usize).sum());
        for entry in moved {
            let (key, value) =
                (self.bytes(entry.offset, entry.key_len), self.bytes(entry.offset + entry.key_len, entry.value_len));
            let size = key.len() + value.len();
            let offset = right.arena.len() as u32;
            right.arena.extend_from_slice(key);
            right.arena.extend_from_slice(value);
            right.entries.push(Entry { offset, ..entry });
            right.live_bytes += size;
            self.live_bytes -= size;
            self.garbage += size;
        }
        self.compact();
        right
    }

    /// Appends all records of `right`, whose keys all follow this leaf's.
    pub fn append(&mut self, right: &Leaf) -> Result<()> {
        for index in 0..right.len() {
            if let Some((key, value)) = right.record(index) {
                let entry = self.push_bytes(key, value)?;
                self.entries.push(entry);
                self.prefixes.push(key_prefix(key));
                self.live_bytes += key.len() + value.len();
            }
        }
        Ok(())
    }

    /// Where to split an oversized leaf: where the records before it fill about `fill` bytes
    /// (sequential inserts split near the end so that pages stay full).
    pub fn split_point(&self, target_bytes: usize) -> usize {
        let mut bytes = 0;
        for (index, entry) in self.entries.iter().enumerate() {
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
        let mut reader = Reader { bytes: raw, position: 0 };
        let count = reader.count(RECORD_OVERHEAD)?;
        // Keys rebuilt from shared prefixes may exceed the page; bound them like a codec ratio.
        let arena_limit = raw.len().saturating_mul(MAX_RATIO).min(u32::MAX as usize);
        let mut leaf = Leaf {
            arena: Vec::with_capacity(raw.len()),
            entries: Vec::with_capacity(count),
            prefixes: Vec::with_capacity(count),
            garbage: 0,
            live_bytes: 0,
        };
        let mut previous: Option<Entry> = None;
        for _ in 0..count {
            let shared = reader.length()?;
            let suffix_len = reader.length()?;
            let value_len = reader.length()?;
            let suffix = reader.take(suffix_len)?;
            let value = reader.take(value_len)?;
            let offset = leaf.arena.len();
            let prefix = match previous {
                Some(p) if shared <= p.key_len as usize => p.offset as usize..p.offset as usize + shared,
                None if shared == 0 => 0..0,
                _ => return Err(Error::broken("leaf page: shared prefix longer than the previous key")),
            };
            let key_len = shared + suffix_len;
            if offset + key_len + value_len > arena_limit {
                return Err(Error::broken("leaf page: keys expand beyond any plausible size"));
            }
            leaf.arena.extend_from_within(prefix);
            leaf.arena.extend_from_slice(suffix);
            leaf.arena.extend_from_slice(value);
            let entry = Entry { offset: offset as u32, key_len: key_len as u32, value_len: value_len as u32 };
            if let Some(p) = previous {
                let key = leaf.bytes(entry.offset, entry.key_len);
                if comparator.compare(leaf.bytes(p.offset, p.key_len), key) != Ordering::Less {
                    return Err(Error::broken("leaf page: keys out of order"));
                }
            }
            leaf.entries.push(entry);
            leaf.prefixes.push(key_prefix(leaf.bytes(entry.offset, entry.key_len)));
            leaf.live_bytes += key_len + value_len;
            previous = Some(entry);
        }
        reader.finish("leaf")?;
        Ok(leaf)
    }
}

/// A branch page: children separated by keys.
#[derive(Debug, Clone, Default)]
pub struct Branch {
    /// Invariant: `keys.len() + 1 == children.len()`, keys strictly ascending.
    pub keys: Vec<Vec<u8>>,
    /// Child references: file offsets, or ids of pages modified since the last commit.
    pub children: Vec<u64>,
    key_bytes: usize,
    /// `key_prefix` of each key, rebuilt after every change (branches change rarely).
    prefixes: Vec<u64>,
}

impl Branch {
    pub fn new(first_child: u64) -> Branch {
        Branch { keys: Vec::new(), children: vec![first_child], key_bytes: 0, prefixes: Vec::new() }
    }

    fn refresh_prefixes(&mut self) {
        self.prefixes.clear();
        self.prefixes.extend(self.keys.iter().map(|k| key_prefix(k)));
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
        if comparator == Comparator::Lexical && self.prefixes.len() == self.keys.len() {
            let probe = key_prefix(key);
            let mut index = 0;
            let found = self.prefixes.partition_point(|p| *p < probe);
            // Separators with an equal prefix need the full comparison.
            for (p, k) in self.prefixes.iter().zip(&self.keys).skip(found) {
                if *p > probe || k.as_slice() > key {
                    break;
                }
                index += 1;
            }
            return found + index;
        }
        self.keys.partition_point(|k| comparator.compare(k, key) != Ordering::Greater)
    }

    /// Inserts `child` after position `index`, separated from it by `key`.
    pub fn insert_after(&mut self, index: usize, key: Vec<u8>, child: u64) {
        let at = (index + 1).min(self.children.len());
        self.key_bytes += key.len();
        self.keys.insert(at.saturating_sub(1).min(self.keys.len()), key);
        self.children.insert(at, child);
        self.refresh_prefixes();
    }

    /// Removes child `index` with the separator that bounds it (the one before it, or the one
    /// after it for the first child).
    pub fn remove_child(&mut self, index: usize) {
        if index >= self.children.len() {
            return;
        }
        self.children.remove(index);
        if !self.keys.is_empty() {
            let key = self.keys.remove(index.saturating_sub(1).min(self.keys.len() - 1));
            self.key_bytes -= key.len();
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
        let right_bytes: usize = right_keys.iter().map(Vec::len).sum();
        self.key_bytes -= right_bytes + up.len();
        self.refresh_prefixes();
        let mut right =
            Branch { keys: right_keys, children: right_children, key_bytes: right_bytes, prefixes: Vec::new() };
        right.refresh_prefixes();
        Some((up, right))
    }

    /// Appends `right`, whose keys all follow `separator`, which follows this branch's keys.
    pub fn append(&mut self, separator: Vec<u8>, right: &Branch) {
        self.key_bytes += separator.len() + right.key_bytes;
        self.keys.push(separator);
        self.keys.extend(right.keys.iter().cloned());
        self.children.extend_from_slice(&right.children);
        self.refresh_prefixes();
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.encoded_size());
        put_varint(out, self.children.len() as u64);
        put_varint(out, self.children.first().copied().unwrap_or(0));
        let mut previous: &[u8] = &[];
        for (key, child) in self.keys.iter().zip(self.children.iter().skip(1)) {
            let shared = common_prefix(previous, key);
            put_varint(out, shared as u64);
            put_varint(out, (key.len() - shared) as u64);
            out.extend_from_slice(key.get(shared..).unwrap_or_default());
            put_varint(out, *child);
            previous = key;
        }
    }

    pub fn decode(raw: &[u8], comparator: Comparator) -> Result<Branch> {
        let mut reader = Reader { bytes: raw, position: 0 };
        let count = reader.count(1)?;
        if count == 0 {
            return Err(Error::broken("branch page without children"));
        }
        let mut branch = Branch::new(check_child(reader.varint()?)?);
        branch.children.reserve(count - 1);
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
            branch.children.push(check_child(reader.varint()?)?);
        }
        reader.finish("branch")?;
        branch.refresh_prefixes();
        Ok(branch)
    }
}

/// The first 8 bytes of a key as a big-endian number, zero-padded. For two keys, unequal
/// prefixes order them as the lexical comparator would: a zero pad sorts like "ended".
#[inline]
pub fn key_prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    if let (Some(target), Some(source)) = (bytes.get_mut(..n), key.get(..n)) {
        target.copy_from_slice(source);
    }
    u64::from_be_bytes(bytes)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn put_varint(out: &mut Vec<u8>, value: u64) {
    let mut buffer = [0u8; 10];
    let len = encode_varint(value, &mut buffer);
    out.extend_from_slice(buffer.get(..len).unwrap_or_default());
}

/// A bounds-checked reader over a serialized page.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64> {
        let rest = self.bytes.get(self.position..).unwrap_or_default();
        let (value, used) = decode_varint(rest).ok_or_else(|| Error::broken("page: truncated number"))?;
        self.position += used;
        Ok(value)
    }

    /// A length that must fit in the remaining bytes.
    fn length(&mut self) -> Result<usize> {
        let value = self.varint()?;
        usize::try_from(value)
            .ok()
            .filter(|v| *v <= self.bytes.len())
            .ok_or_else(|| Error::broken("page: length beyond the page"))
    }

    /// An item count, each item taking at least `min_item_bytes`.
    fn count(&mut self, min_item_bytes: usize) -> Result<usize> {
        let value = self.varint()?;
        usize::try_from(value)
            .ok()
            .filter(|v| v.saturating_mul(min_item_bytes) <= self.bytes.len())
            .ok_or_else(|| Error::broken("page: item count beyond the page"))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let taken = self
            .bytes
            .get(self.position..self.position.saturating_add(len))
            .ok_or_else(|| Error::broken("page: truncated"))?;
        self.position += len;
        Ok(taken)
    }

    fn finish(&self, what: &str) -> Result<()> {
        if self.position == self.bytes.len() {
            Ok(())
        } else {
            Err(Error::broken(format!("{what} page: trailing bytes")))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn leaf_round_trip(map in proptest::collection::btree_map(proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..20), 0..40)) {
            let mut leaf = Leaf::new();
            for (key, value) in &map {
                let index = leaf.search(Comparator::Lexical, key).unwrap_err();
                leaf.insert(index, key, value).unwrap();
            }
            let mut raw = Vec::new();
            leaf.encode(&mut raw);
            let decoded = Leaf::decode(&raw, Comparator::Lexical).unwrap();
            let records: Vec<(Vec<u8>, Vec<u8>)> = (0..decoded.len()).map(|i| { let (k, v) = decoded.record(i).unwrap(); (k.to_vec(), v.to_vec()) }).collect();
            let expected: Vec<(Vec<u8>, Vec<u8>)> = map.into_iter().collect();
            prop_assert_eq!(records, expected);
            // Every truncation or single-byte change is an error or a different valid page, never a panic.
            for cut in 0..raw.len() {
                let _ = Leaf::decode(&raw[..cut], Comparator::Lexical);
                let mut bad = raw.clone();
                bad[cut] ^= 0x55;
                let _ = Leaf::decode(&bad, Comparator::Lexical);
                let _ = Branch::decode(&bad, Comparator::Lexical);
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
        let right = leaf.split_off(50);
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

    #[test]
    fn branch_round_trip_and_split() {
        let mut branch = Branch::new(4096);
        for i in 1..20u64 {
            branch.insert_after(i as usize - 1, format!("k{i:03}").into_bytes(), 4096 + i * 16);
        }
        let mut raw = Vec::new();
        branch.encode(&mut raw);
        let decoded = Branch::decode(&raw, Comparator::Lexical).unwrap();
        assert_eq!(decoded.keys, branch.keys);
        assert_eq!(decoded.children, branch.children);
        assert_eq!(decoded.child_index(Comparator::Lexical, b"k005"), 5);
        assert_eq!(decoded.child_index(Comparator::Lexical, b"a"), 0);
        let (up, right) = branch.clone().split().unwrap();
        assert_eq!(up, b"k010");
        assert_eq!(right.children.len() + 10, 20);
        let mut reordered = branch.clone();
        reordered.keys.swap(2, 3);
        reordered.encode(&mut raw);
        assert!(Branch::decode(&raw, Comparator::Lexical).is_err());
    }
}
