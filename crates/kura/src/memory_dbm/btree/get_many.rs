//! BabyDbm's batched lookup (`OrderedTree::get_many`): the keys of a group descend the tree
//! together, level by level, so that their memory misses overlap instead of following one
//! another.
//!
//! Below the levels that stay in the caches, a lookup misses twice per level: on the node's
//! entry in its parent's array of children (the node's structure, which says where its
//! arrays are), then on the node's prefixes; and at the leaf on the record found, and on its
//! heap block when it spilled there. A lone lookup waits for each in turn. Here each step is
//! taken for the whole group before the next, and prefetches what the next one reads:
//! 1. per level, each key's child, from its node's prefixes (loaded by the step before), and
//!    a prefetch of the child's structure;
//! 2. per level, a prefetch of each child's prefixes;
//! 3. in the leaves, each key's position by prefix, and a prefetch of the record there;
//! 4. a prefetch of that record's heap block, for one that spilled;
//! 5. each search finished (full keys compared where prefixes tie) and its value shown.
//!
//! Leaves are all at one depth, so the group reaches them at the same step. The batch is not
//! sorted, as TreeDbm's is to take each leaf from its page cache once for a run of keys: a
//! node here is reached through a pointer, and keys that share one find it already loaded.

use super::node::{Leaf, Node};
use super::prefix::Probe;
use super::OrderedTree;
use crate::memory_dbm::record::RecordBytes;
use crate::multi_get::groups;

/// Keys that descend together: 16, not the hash engines' 32 (`multi_get::GROUP`). Each key's
/// step prefetches a node's prefixes, up to eight lines, so 32 keys ask for far more lines
/// than the core keeps in flight: batches of 64 random keys over 1M records ran at 5.9-6.3M
/// keys/s in groups of 16, 4.8-5.8M in groups of 32 and 5.0-5.6M in groups of 8
/// (2026-11-28, three alternating rounds).
const GROUP: usize = 16;

/// A key of the group on its way down: the node it has reached, None once it is known to be
/// absent.
struct Descent<'t, 'k> {
    probe: Probe<'k>,
    node: Option<&'t Node>,
    /// In the leaf, `Leaf::lower_bound` of the key (step 3).
    start: usize,
}

impl OrderedTree {
    /// Shows the record of each key of `keys` (None when absent) to `visit`, with the key's
    /// index, in the keys' order.
    pub fn get_many<'t>(&'t self, keys: &[&[u8]], mut visit: impl FnMut(usize, Option<&'t RecordBytes>)) {
        let mut group: Vec<Descent<'t, '_>> = Vec::with_capacity(GROUP);
        for (first, chunk) in groups(keys, GROUP) {
            group.clear();
            group.extend(chunk.iter().map(|key| Descent { probe: Probe::new(key), node: Some(&self.root), start: 0 }));
            while group.iter().any(|key| matches!(key.node, Some(Node::Inner(_)))) {
                // (A node the key before reached too is not prefetched again: keys in order
                // share most of their path, which is then in the cache, and prefetching a
                // whole node's prefixes per key would cost them more than their lookups.)
                let mut previous = None;
                for key in &mut group {
                    if let Some(Node::Inner(inner)) = key.node {
                        let child = inner.children.get(inner.child_index(&key.probe));
                        debug_assert!(child.is_some(), "invariant: an inner node has a child for every key");
                        if let Some(child) = child.filter(|&child| !same_node(previous, child)) {
                            crate::file::prefetch_slice(std::slice::from_ref(child));
                        }
                        key.node = child;
                        previous = child;
                    }
                }
                let mut previous = None;
                for key in &group {
                    if let Some(node) = key.node.filter(|&node| !same_node(previous, node)) {
                        node.prefetch_prefixes();
                    }
                    previous = key.node;
                }
            }
            for key in &mut group {
                if let Some(leaf) = leaf_of(key) {
                    key.start = leaf.lower_bound(key.probe.prefix);
                    if let Some(record) = leaf.records().get(key.start..key.start + 1) {
                        crate::file::prefetch_slice(record);
                    }
                }
            }
            for key in &group {
                if let Some(record) = leaf_of(key).and_then(|leaf| leaf.records().get(key.start)) {
                    record.prefetch_spilled();
                }
            }
            for (offset, key) in group.iter().enumerate() {
                let record = leaf_of(key)
                    .and_then(|leaf| leaf.search_from(&key.probe, key.start).ok().and_then(|i| leaf.records().get(i)));
                visit(first + offset, record);
            }
        }
    }
}

/// Whether `node` is `previous` (the node the key before reached).
fn same_node(previous: Option<&Node>, node: &Node) -> bool {
    previous.is_some_and(|previous| std::ptr::eq(previous, node))
}

/// The leaf a key of the group reached (None when it is absent; no key is left in an inner
/// node, as the descent goes on until none is).
fn leaf_of<'t>(key: &Descent<'t, '_>) -> Option<&'t Leaf> {
    match key.node {
        Some(Node::Leaf(leaf)) => Some(leaf),
        _ => None,
    }
}
