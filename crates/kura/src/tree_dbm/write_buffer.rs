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

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::comparator::Comparator;
use crate::batch::{BatchOp, WriteBatch};

/// The heap the set's nodes take per entry, at most as they fill when keys arrive in order:
/// a node holds 11 entries of 32 bytes (384 bytes from the heap), and an ascending or
/// descending load leaves about 6 in each, a random one about 8 (tests/write_buffer_memory.rs
/// measured 66 and 53 bytes an entry, the branch nodes included).
const NODE_SHARE: usize = 72;

// `NODE_SHARE` holds for entries of this size.
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

/// What buffering an operation on `record_len` bytes of key and value costs against the
/// budget: the heap block its bytes take, as glibc's malloc hands them out (the request and
/// an 8-byte header in 16-byte steps, at least 32; none for no bytes), and its share of the
/// set's nodes. Counting 48 bytes beyond key and value, as this did before, let a buffer of
/// small records take up to 1.75 times its budget (tests/write_buffer_memory.rs).
fn entry_cost(record_len: usize) -> usize {
    let block = if record_len == 0 { 0 } else { record_len.saturating_add(8).next_multiple_of(16).max(32) };
    block + NODE_SHARE
}

/// The latest operation on one key: its key and a set's value end to end, in one allocation.
struct Entry {
    bytes: Box<[u8]>,
    key_len: usize,
    /// A removal (no value); else a set.
    removes: bool,
}

impl Entry {
    fn key(&self) -> &[u8] {
        self.bytes.get(..self.key_len).unwrap_or_default()
    }

    fn value(&self) -> Option<&[u8]> {
        if self.removes {
            return None;
        }
        Some(self.bytes.get(self.key_len..).unwrap_or_default())
    }

    fn cost(&self) -> usize {
        entry_cost(self.bytes.len())
    }
}

// Entries are ordered and found by their key bytes alone (`Borrow<[u8]>` must agree with
// `Ord`).
impl Borrow<[u8]> for Entry {
    fn borrow(&self) -> &[u8] {
        self.key()
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> Ordering {
        self.key().cmp(other.key())
    }
}

/// Buffered operations, the latest per key.
#[derive(Default)]
pub struct WriteBuffer {
    entries: BTreeSet<Entry>,
    /// What the entries cost (`Entry::cost`), against the store's budget.
    bytes: usize,
}

impl WriteBuffer {
    /// Whether no operation waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many keys have an operation waiting.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The memory the entries take, about.
    pub fn bytes(&self) -> usize {
        self.bytes
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
        let mut bytes = Vec::with_capacity(key.len() + op.value().map_or(0, <[u8]>::len));
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(op.value().unwrap_or_default());
        let entry = Entry { bytes: bytes.into_boxed_slice(), key_len: key.len(), removes: op.value().is_none() };
        self.bytes += entry.cost();
        if let Some(earlier) = self.entries.replace(entry) {
            self.bytes -= earlier.cost();
        }
    }

    /// The buffered operation on `key`: None when there is none (the tree answers), Some(None)
    /// when it is a removal, Some(Some(value)) when it is a set.
    pub fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.entries.get(key).map(Entry::value)
    }

    /// Empties the buffer, giving its operations in `comparator`'s order (the order in which
    /// applying them walks the tree's leaves from first to last).
    pub fn take_sorted(&mut self, comparator: Comparator) -> Drained {
        self.bytes = 0;
        let mut entries: Vec<Entry> = std::mem::take(&mut self.entries).into_iter().collect();
        if comparator != Comparator::Lexical {
            entries.sort_by(|a, b| comparator.compare(a.key(), b.key()));
        }
        Drained { entries }
    }

    /// Drops every buffered operation (the tree got them another way: a replay of the
    /// journal, or a clear that removes them anyway).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

/// The operations a buffer held, in key order, to be applied to the tree.
pub struct Drained {
    entries: Vec<Entry>,
}

impl Drained {
    /// The operations, as batch operations, in key order.
    pub fn ops(&self) -> impl Iterator<Item = BatchOp<'_>> + '_ {
        self.entries.iter().map(|entry| match entry.value() {
            Some(value) => BatchOp::Set { key: entry.key(), value },
            None => BatchOp::Remove { key: entry.key() },
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
                    let key = format!("{}", next() % 40).into_bytes();
                    if next() % 4 == 0 {
                        buffer.insert(BatchOp::Remove { key: &key });
                        model.insert(key, None);
                    } else {
                        let value = vec![b'v'; (next() % 9) as usize];
                        buffer.insert(BatchOp::Set { key: &key, value: &value });
                        model.insert(key, Some(value));
                    }
                    let probe = format!("{}", next() % 45).into_bytes();
                    assert_eq!(buffer.get(&probe), model.get(&probe).map(Option::as_deref));
                }
                assert_eq!(buffer.len(), model.len());
                let expected_bytes: usize =
                    model.iter().map(|(k, v)| entry_cost(k.len() + v.as_ref().map_or(0, Vec::len))).sum();
                assert_eq!(buffer.bytes(), expected_bytes);
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
