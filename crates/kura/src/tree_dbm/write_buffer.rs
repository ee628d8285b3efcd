//! The records of write batches (and sets) that are journaled but not yet applied to the tree.
//!
//! A batch's records go to the journal first, and so does a `set` (a pending entry that the
//! next commit writes, as an applied set's is; store.rs), so a crash replays them whatever the
//! tree holds; applying them to the tree can wait. Applied as each batch came, every random
//! record of a batch reads its leaf and copies it (copy-on-write): in a tree larger than
//! memory that is a read from the disk for each record before the batch can return (100
//! durable batches of 1,000 random records into 8M records under 512 MiB: 9.4 s, where
//! RocksDB's memtable takes 1.1 s), and in memory a cache miss or two each. Held here instead,
//! the records of many batches are applied together, in key order, when the buffer fills or
//! something needs the tree itself (store.rs, `Store::drain`): each leaf is then read and
//! copied once for all the buffered records it holds, in the order the file lays them out.
//! WiredTiger keeps updates beside its pages for the same reason, and an LSM's memtable is
//! this buffer with no tree behind it.
//!
//! Point reads look here first (`get`); everything else that reads the tree (cursors, ranges,
//! counts, checks) has the buffer applied first, so that the tree alone answers them.
//!
//! Keys are held as bytes. Both comparators order equal keys only when their bytes are equal
//! (comparator.rs), so one entry per byte string is one entry per key of the tree.
//!
//! How it holds them: each operation's key and value end to end in large chunks, found by a
//! hash table of references, and sorted only when drained. The more records a budget holds,
//! the fewer drains a load beyond memory takes, and each drain reads and rewrites about every
//! leaf. A node set of one allocation per record took 264 heap bytes for a record of 24 + 150
//! bytes; this takes about 200 (tests/write_buffer_memory.rs).

use xxhash_rust::xxh3::xxh3_64;

use super::comparator::Comparator;
use crate::batch::{BatchOp, WriteBatch};
use crate::key_prefix::key_prefix;

/// Entries are appended to chunks of this many bytes; an entry longer than a quarter of it
/// has a chunk of its own, so that a chunk left for the next one wastes at most a quarter.
const CHUNK_BYTES: usize = 256 << 10;

/// What an allocation costs beyond the bytes asked for, at most: glibc's header, and the
/// page that a block this large, mapped on its own, is rounded up to.
const ALLOCATION_OVERHEAD: usize = 4096 + 16;

/// Each entry's header: its key's length (the top bit set for a removal) and its value's
/// length, 32 bits each, little-endian.
const ENTRY_HEADER: usize = 8;

/// The top bit of an entry's key length: the entry is a removal (no value).
const REMOVAL_BIT: u32 = 1 << 31;

/// What the hash table costs per entry, at most: 8 bytes a slot, at least 3 of 8 slots used
/// after it doubles (it doubles past 3 of 4).
const TABLE_SHARE: usize = 22;

/// An empty slot of the hash table (no reference packs to it: offsets stay below 2^24 - 1).
const EMPTY: u64 = u64::MAX;

/// Where an entry starts: its chunk and its offset in it, packed into a table slot with 8 bits
/// of its key's hash (a probe compares keys only where those agree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EntryRef {
    chunk: u32,
    offset: u32,
}

impl EntryRef {
    fn pack(self, tag: u8) -> u64 {
        (u64::from(tag) << 56) | (u64::from(self.chunk) << 24) | u64::from(self.offset)
    }

    fn unpack(slot: u64) -> EntryRef {
        EntryRef { chunk: ((slot >> 24) & 0xFFFF_FFFF) as u32, offset: (slot & 0xFF_FFFF) as u32 }
    }
}

/// The 8 bits of a key's hash kept in its slot (the index takes the low bits).
fn tag_of(hash: u64) -> u8 {
    (hash >> 56) as u8
}

/// What buffering an operation on `record_len` bytes of key and value costs against the
/// budget, at most (averaged over a chunk): its entry, its share of the hash table, and its
/// share of the chunk's allocation overhead.
fn entry_cost(record_len: usize) -> usize {
    let entry = ENTRY_HEADER.saturating_add(record_len);
    entry.saturating_add(TABLE_SHARE).saturating_add(entry / 32)
}

/// Buffered operations, the latest per key.
#[derive(Default)]
pub struct WriteBuffer {
    /// Entries end to end (`ENTRY_HEADER`, key, value); an entry replaced by a later operation
    /// on its key stays until the buffer is emptied (counted in `bytes`).
    chunks: Vec<Vec<u8>>,
    /// Open addressing, linear probing: `EMPTY` or a packed `EntryRef` of the latest entry of
    /// a key. Invariant: a power of two long (or empty), at most 3 of 4 slots used.
    slots: Vec<u64>,
    /// Keys with an entry (used slots).
    keys: usize,
    /// The heap the chunks and the table take, with each allocation's overhead (`bytes()`
    /// adds the list of chunks).
    bytes: usize,
}

/// The key and (for a set) the value of the entry at `at`. A reference the buffer made always
/// names a whole entry; one that does not is a bug in Kura, and panics.
fn entry_at(chunks: &[Vec<u8>], at: EntryRef) -> (&[u8], Option<&[u8]>) {
    let whole = chunks.get(at.chunk as usize).and_then(|chunk| chunk.get(at.offset as usize..));
    let whole = whole.expect("a write buffer reference names no entry: a bug in Kura");
    let (header, rest) = whole.split_at_checked(ENTRY_HEADER).expect("a write buffer entry cut short: a bug in Kura");
    let number = |bytes: &[u8]| u32::from_le_bytes(bytes.try_into().unwrap_or_default());
    let (key_field, value_field) = header.split_at(4);
    let (key_len, value_len) = (number(key_field), number(value_field) as usize);
    let (key, rest) = rest
        .split_at_checked((key_len & !REMOVAL_BIT) as usize)
        .expect("a write buffer entry cut short: a bug in Kura");
    if key_len & REMOVAL_BIT != 0 {
        return (key, None);
    }
    (key, Some(rest.get(..value_len).expect("a write buffer entry cut short: a bug in Kura")))
}

impl WriteBuffer {
    /// Whether no operation waits.
    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// How many keys have an operation waiting.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.keys
    }

    /// The memory the entries take: `bytes`, and the list of chunks.
    pub fn bytes(&self) -> usize {
        let list = self.chunks.capacity() * std::mem::size_of::<Vec<u8>>();
        self.bytes + if list == 0 { 0 } else { list + ALLOCATION_OVERHEAD }
    }

    /// What buffering every operation of `batch` would cost at most (less where the batch
    /// sets a key twice or one the buffer holds).
    pub fn cost_of(batch: &WriteBatch) -> usize {
        batch.ops().map(Self::cost_of_op).sum()
    }

    /// What buffering `op` would cost at most.
    pub fn cost_of_op(op: BatchOp<'_>) -> usize {
        entry_cost(op.key().len() + op.value().map_or(0, <[u8]>::len))
    }

    /// Records `op`, replacing an earlier operation on its key.
    pub fn insert(&mut self, op: BatchOp<'_>) {
        let key = op.key();
        if (self.keys + 1) * 4 > self.slots.len() * 3 {
            self.grow_table();
        }
        let hash = xxh3_64(key);
        let (index, found) = self.probe(hash, key);
        let at = self.append(op);
        if let Some(slot) = self.slots.get_mut(index) {
            *slot = at.pack(tag_of(hash));
        }
        if !found {
            self.keys += 1;
        }
    }

    /// The buffered operation on `key`: None when there is none (the tree answers), Some(None)
    /// when it is a removal, Some(Some(value)) when it is a set.
    pub fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        if self.keys == 0 {
            return None;
        }
        let (index, found) = self.probe(xxh3_64(key), key);
        if !found {
            return None;
        }
        let slot = self.slots.get(index).copied()?;
        Some(entry_at(&self.chunks, EntryRef::unpack(slot)).1)
    }

    /// Empties the buffer, giving its operations in `comparator`'s order (the order in which
    /// applying them walks the tree's leaves from first to last).
    pub fn take_sorted(&mut self, comparator: Comparator) -> Drained {
        let slots = std::mem::take(&mut self.slots);
        let chunks = std::mem::take(&mut self.chunks);
        let key_of = |at: EntryRef| entry_at(&chunks, at).0;
        // Each entry with its key's `key_prefix`, whose order is the lexical order wherever
        // they differ: most comparisons of a sort by key are then of two numbers, not two keys
        // in two chunks (a sort by key alone was 6% of a load beyond memory, `perf`). Keys are
        // unique: an unstable sort gives the one order.
        let mut entries: Vec<(u64, EntryRef)> = Vec::with_capacity(self.keys);
        entries.extend(slots.iter().filter(|&&slot| slot != EMPTY).map(|&slot| {
            let at = EntryRef::unpack(slot);
            (key_prefix(key_of(at)), at)
        }));
        drop(slots);
        match comparator {
            Comparator::Lexical => {
                entries.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| key_of(a.1).cmp(key_of(b.1))));
            }
            _ => entries.sort_unstable_by(|a, b| comparator.compare(key_of(a.1), key_of(b.1))),
        }
        self.clear();
        Drained { chunks, entries }
    }

    /// Drops every buffered operation (the tree got them another way: a replay of the
    /// journal, or a clear that removes them anyway).
    pub fn clear(&mut self) {
        *self = WriteBuffer::default();
    }

    /// The slot for `key` (of `hash`): where it is and true, or the empty slot where it would
    /// go and false. The table has an empty slot (at most 3 of 4 are used) unless it has none.
    fn probe(&self, hash: u64, key: &[u8]) -> (usize, bool) {
        let mask = self.slots.len().wrapping_sub(1);
        let tag = tag_of(hash);
        let mut index = hash as usize & mask;
        for _ in 0..self.slots.len() {
            match self.slots.get(index).copied() {
                None | Some(EMPTY) => return (index, false),
                Some(slot) => {
                    if (slot >> 56) as u8 == tag && entry_at(&self.chunks, EntryRef::unpack(slot)).0 == key {
                        return (index, true);
                    }
                }
            }
            index = (index + 1) & mask;
        }
        (index, false)
    }

    /// Doubles the table (64 slots at first), placing every entry anew.
    fn grow_table(&mut self) {
        let old = std::mem::take(&mut self.slots);
        if !old.is_empty() {
            self.bytes -= old.len() * 8 + ALLOCATION_OVERHEAD;
        }
        let len = (old.len() * 2).max(64);
        self.slots = vec![EMPTY; len];
        self.bytes += len * 8 + ALLOCATION_OVERHEAD;
        for slot in old.into_iter().filter(|&slot| slot != EMPTY) {
            let key = entry_at(&self.chunks, EntryRef::unpack(slot)).0;
            // Keys are unique: the probe ends at an empty slot.
            let (index, _) = self.probe(xxh3_64(key), key);
            if let Some(free) = self.slots.get_mut(index) {
                *free = slot;
            }
        }
    }

    /// Appends `op`'s entry to the last chunk, or to a new one when it does not fit.
    fn append(&mut self, op: BatchOp<'_>) -> EntryRef {
        let key = op.key();
        let value = op.value().unwrap_or_default();
        let len = ENTRY_HEADER + key.len() + value.len();
        let fits = self.chunks.last().is_some_and(|chunk| chunk.capacity() - chunk.len() >= len);
        if !fits {
            let capacity = if len > CHUNK_BYTES / 4 { len } else { CHUNK_BYTES };
            self.chunks.push(Vec::with_capacity(capacity));
            self.bytes += capacity + ALLOCATION_OVERHEAD;
        }
        let chunk_index = self.chunks.len() - 1;
        let chunk = self.chunks.last_mut().expect("a write buffer chunk was just made: a bug in Kura");
        let at = EntryRef {
            chunk: u32::try_from(chunk_index).expect("over 4 billion write buffer chunks: a bug in Kura"),
            offset: chunk.len() as u32,
        };
        // Keys and values are bounded by a page (`check_record_size`) long before 2^31.
        let key_field = key.len() as u32 | if op.value().is_none() { REMOVAL_BIT } else { 0 };
        chunk.extend_from_slice(&key_field.to_le_bytes());
        chunk.extend_from_slice(&(value.len() as u32).to_le_bytes());
        chunk.extend_from_slice(key);
        chunk.extend_from_slice(value);
        at
    }
}

/// The operations a buffer held, in key order, to be applied to the tree.
pub struct Drained {
    chunks: Vec<Vec<u8>>,
    /// In key order, each with its key's prefix (`WriteBuffer::take_sorted`).
    entries: Vec<(u64, EntryRef)>,
}

impl Drained {
    /// The operations, as batch operations, in key order.
    pub fn ops(&self) -> impl Iterator<Item = BatchOp<'_>> + '_ {
        self.entries.iter().map(|&(_, at)| match entry_at(&self.chunks, at) {
            (key, Some(value)) => BatchOp::Set { key, value },
            (key, None) => BatchOp::Remove { key },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Random operations on few keys: the buffer answers as a map of the latest operation per
    /// key does, drains in key order under either comparator, and counts its bytes back to 0.
    #[test]
    fn the_buffer_keeps_the_latest_operation_per_key_as_a_map_does() {
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for comparator in Comparator::ALL {
            for _round in 0..50 {
                let mut buffer = WriteBuffer::default();
                let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
                for _ in 0..(next() % 200) {
                    // Half the keys share their first 8 bytes and more: the sort's prefixes tie.
                    let shared = if next() % 2 == 0 { "a shared prefix " } else { "" };
                    let key = format!("{shared}{}", next() % 40).into_bytes();
                    if next() % 4 == 0 {
                        buffer.insert(BatchOp::Remove { key: &key });
                        model.insert(key, None);
                    } else {
                        let value = vec![b'v'; (next() % 9) as usize];
                        buffer.insert(BatchOp::Set { key: &key, value: &value });
                        model.insert(key, Some(value));
                    }
                    let shared = if next() % 2 == 0 { "a shared prefix " } else { "" };
                    let probe = format!("{shared}{}", next() % 45).into_bytes();
                    assert_eq!(buffer.get(&probe), model.get(&probe).map(Option::as_deref));
                }
                assert_eq!(buffer.len(), model.len());
                let live: usize =
                    model.iter().map(|(k, v)| ENTRY_HEADER + k.len() + v.as_ref().map_or(0, Vec::len)).sum();
                assert!(buffer.is_empty() || buffer.bytes() > live);
                let drained = buffer.take_sorted(comparator);
                assert!(buffer.is_empty() && buffer.bytes() == 0);
                let got: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                    drained.ops().map(|op| (op.key().to_vec(), op.value().map(<[u8]>::to_vec))).collect();
                let mut expected: Vec<(Vec<u8>, Option<Vec<u8>>)> = model.into_iter().collect();
                expected.sort_by(|a, b| comparator.compare(&a.0, &b.0));
                assert_eq!(got, expected, "{comparator:?}");
            }
        }
    }
}
