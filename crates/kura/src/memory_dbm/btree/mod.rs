//! The ordered tree of BabyDbm: a B+ tree of records in key order, built for fast in-memory
//! lookups (design: docs/memory.md, "BabyDbm").
//!
//! Leaves hold up to `LEAF_CAPACITY` records (`record.rs`, 24 bytes, inline when small) next to
//! an array of their keys' 8-byte prefixes (`prefix.rs`): a search is a binary search over
//! integers in one compact array, and reads a full key only where prefixes tie. Inner nodes
//! hold up to `INNER_CAPACITY` separator keys, with prefixes too, and the child nodes by value.
//! Updates are in `node.rs` (splits, merges), reads in `walk.rs`, batched lookups in
//! `get_many.rs`. There are no leaf links and
//! no parent pointers: cursors stand on keys and search again from the root, so they need no
//! node to stay put.

mod get_many;
mod node;
mod prefix;
#[cfg(test)]
mod tests;
mod walk;

use std::mem::size_of;

pub use node::Put;
use node::{Inner, Leaf, Node};
use prefix::Probe;

use crate::error::Result;
use crate::memory_dbm::record::RecordBytes;

// Tiny nodes in the crate's unit tests, so that a few hundred keys already split, merge and
// refill nodes over several levels; the engine (and the integration tests) use the real sizes.
const LEAF_CAPACITY: usize = if cfg!(test) { 4 } else { 64 };
const INNER_CAPACITY: usize = if cfg!(test) { 4 } else { 64 };
/// Entries a node's arrays grow by at a time (see `node::make_room`).
const GROWTH: usize = if cfg!(test) { 2 } else { 8 };

/// Bytes `malloc` adds to each block (glibc: header and 16-byte rounding, at most).
const ALLOCATION_OVERHEAD: usize = 24;

pub struct OrderedTree {
    root: Node,
    /// Invariant: the number of records in the tree (kept by `put` and `remove`).
    len: usize,
}

impl OrderedTree {
    pub fn new() -> OrderedTree {
        OrderedTree { root: Node::Leaf(Leaf::with_room_for(0)), len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn clear(&mut self) {
        *self = OrderedTree::new();
    }

    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&RecordBytes> {
        self.root.get(&Probe::new(key))
    }

    #[inline]
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut RecordBytes> {
        self.root.get_mut(&Probe::new(key))
    }

    /// Stores `value` under `key`; an existing record is replaced only with `overwrite`.
    pub fn put(&mut self, key: &[u8], value: &[u8], overwrite: bool) -> Result<Put> {
        let (put, split) = self.root.put(&Probe::new(key), value, overwrite)?;
        if put == Put::Inserted {
            self.len += 1;
        }
        if let Some(split) = split {
            let old_root = std::mem::replace(&mut self.root, Node::Leaf(Leaf::with_room_for(0)));
            self.root = Node::Inner(Inner::new_root(old_root, split));
        }
        Ok(put)
    }

    /// Removes the record of `key` and returns it.
    pub fn remove(&mut self, key: &[u8]) -> Option<RecordBytes> {
        let removed = self.root.remove(&Probe::new(key))?;
        self.len -= 1;
        // A root with one child is one level too many.
        while let Node::Inner(inner) = &mut self.root {
            if inner.children.len() != 1 {
                break;
            }
            let Some(only) = inner.children.pop() else { break };
            self.root = only;
        }
        Some(removed)
    }

    pub fn first(&self) -> Option<&RecordBytes> {
        self.root.first()
    }

    pub fn last(&self) -> Option<&RecordBytes> {
        self.root.last()
    }

    /// The first record whose key is greater than `key` (or equal, with `inclusive`).
    pub fn after(&self, key: &[u8], inclusive: bool) -> Option<&RecordBytes> {
        self.root.after(&Probe::new(key), inclusive)
    }

    /// The last record whose key is less than `key` (or equal, with `inclusive`).
    pub fn before(&self, key: &[u8], inclusive: bool) -> Option<&RecordBytes> {
        self.root.before(&Probe::new(key), inclusive)
    }

    /// Shows every record to `visit` in key order, stopping at its first error.
    pub fn for_each<E>(
        &self,
        mut visit: impl FnMut(&RecordBytes) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.root.for_each(&mut visit)
    }

    /// Bytes of memory the tree takes: node arrays at their capacity, separator keys, records
    /// spilled to the heap, and the allocator's overhead on each block.
    pub fn memory_bytes(&self) -> u64 {
        let mut bytes = size_of::<OrderedTree>();
        self.root.for_each_node(&mut |node| match node {
            Node::Leaf(leaf) => {
                bytes += leaf.array_bytes() + 2 * ALLOCATION_OVERHEAD;
                for record in leaf.records().iter().filter(|r| matches!(r, RecordBytes::Heap { .. })) {
                    bytes += record.key().len() + record.value().len() + ALLOCATION_OVERHEAD;
                }
            }
            Node::Inner(inner) => {
                bytes += inner.prefixes.capacity() * size_of::<u64>()
                    + inner.separators.capacity() * size_of::<Box<[u8]>>()
                    + inner.children.capacity() * size_of::<Node>()
                    + 3 * ALLOCATION_OVERHEAD;
                bytes += inner.separators.iter().map(|s| s.len() + ALLOCATION_OVERHEAD).sum::<usize>();
            }
        });
        bytes as u64
    }
}

impl Default for OrderedTree {
    fn default() -> Self {
        OrderedTree::new()
    }
}
