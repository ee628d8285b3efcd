//! The nodes of the ordered tree and how they change: insertion with splits, removal with
//! merges and refills. Reads live in `walk.rs`.
//!
//! Invariants (checked by `OrderedTree::check` in the tests):
//! - a leaf's records are sorted by key, without duplicates, `prefixes[i] == key_prefix(key i)`;
//! - an inner node has `children.len() == separators.len() + 1 >= 1`, and every key under
//!   `children[i]` is `< separators[i] <=` every key under `children[i + 1]`;
//! - all leaves are at the same depth; a node holds at most its capacity (between operations).

use super::prefix::{count_less, key_prefix, search, search_from, Probe};
use super::{GROWTH, INNER_CAPACITY, LEAF_CAPACITY};
use crate::error::{Error, Result};
use crate::file::prefetch_slice;
use crate::memory_dbm::record::RecordBytes;

pub enum Node {
    Leaf(Leaf),
    Inner(Inner),
}

/// Invariant: both arrays have the same length; their first `vacant` entries hold no record
/// (`VACANT`, which owns no heap block) and the rest are the leaf's records in key order.
/// Removing a record from the front half shifts the records before it up into a vacancy, and
/// inserting into the front half fills one: so records are moved on the shorter side only, and
/// removing keys in order moves nothing (an array kept packed at the front would shift the
/// whole leaf on each such removal).
///
/// TreeDbm's page index (`tree/prefix_index.rs`) keeps a front gap too, but is not used here:
/// its sparse top level is a separate array, which for a 64-entry node would add one chained
/// cache miss to every lookup out of cache (here the heads of the 8-prefix blocks are read in
/// place, in parallel, and the block found is already loaded); it opens gaps ahead of
/// inserts, copying `Copy` items, where a leaf owns its records and must not grow beyond
/// `GROWTH` spare entries. What both searches share is in `key_prefix.rs`.
pub struct Leaf {
    vacant: usize,
    prefixes: Vec<u64>,
    records: Vec<RecordBytes>,
}

/// What a vacant entry of a leaf holds: an empty inline record (nothing to free).
const VACANT: RecordBytes =
    RecordBytes::Inline { key_len: 0, len: 0, bytes: [0; crate::memory_dbm::record::INLINE_CAPACITY] };

pub struct Inner {
    pub(super) prefixes: Vec<u64>,
    pub(super) separators: Vec<Box<[u8]>>,
    pub(super) children: Vec<Node>,
}

/// What `put` did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Put {
    Inserted,
    Replaced,
    /// The key existed and overwriting was not asked for.
    Kept,
}

/// A node that overflowed gave its upper part away: the parent inserts `right` after it,
/// separated by `separator` (the smallest key under `right`, or a bound below it).
pub struct Split {
    separator: Box<[u8]>,
    right: Node,
}

/// Where an overflowing node (one entry over capacity, the new one at `inserted`) is cut, as
/// the index of the first entry that goes right, and whether the right node is to start with a
/// full node's room. Appending at either end cuts next to the new entry, so that keys written
/// in order fill nodes completely (as a snapshot load does). The right node of an append is
/// where the following keys will go, so it gets its full room at once instead of growing
/// `GROWTH` entries at a time: a reallocation and a copy of the arrays every 8 records cost a
/// sequential insert about 12% of its instructions.
fn cut_point(inserted: usize, len: usize) -> (usize, bool) {
    if inserted + 1 == len {
        (len - 1, true)
    } else if inserted == 0 {
        (1, false)
    } else {
        (len / 2, false)
    }
}

/// The capacity a node split off with `moved` entries starts with (see `cut_point`).
fn split_room(moved: usize, full_room: bool, capacity: usize) -> usize {
    if full_room {
        capacity + 1
    } else {
        moved + GROWTH
    }
}

/// Node arrays grow `GROWTH` entries at a time (not by doubling) up to `max` (one over the
/// node's capacity: a node takes its new entry first and splits after), so that a node's
/// unused room stays small whatever its fill: the arrays of a tree grown in random order are
/// about 70% full, and their spare room would be most of the tree's overhead.
fn make_room<T>(array: &mut Vec<T>, max: usize) {
    let len = array.len();
    if len == array.capacity() {
        array.reserve_exact(GROWTH.min(max.saturating_sub(len)).max(1));
    }
}

/// Gives back the room beyond `GROWTH` spare entries (after a split or a join).
fn trim<T>(array: &mut Vec<T>) {
    array.shrink_to(array.len() + GROWTH);
}

fn lost_child() -> Error {
    Error::broken("the ordered tree lost a child node")
}

impl Leaf {
    /// A leaf with room for `len` records and a few more.
    pub fn with_room_for(len: usize) -> Leaf {
        Leaf::with_capacity(len + GROWTH)
    }

    fn with_capacity(capacity: usize) -> Leaf {
        Leaf { vacant: 0, prefixes: Vec::with_capacity(capacity), records: Vec::with_capacity(capacity) }
    }

    /// The prefixes of the records' keys, in key order.
    #[inline]
    pub(super) fn prefixes(&self) -> &[u64] {
        self.prefixes.get(self.vacant..).unwrap_or_default()
    }

    /// The records, in key order.
    #[inline]
    pub(super) fn records(&self) -> &[RecordBytes] {
        self.records.get(self.vacant..).unwrap_or_default()
    }

    #[inline]
    pub(super) fn records_mut(&mut self) -> &mut [RecordBytes] {
        self.records.get_mut(self.vacant..).unwrap_or_default()
    }

    pub(super) fn len(&self) -> usize {
        self.records.len() - self.vacant
    }

    /// Bytes of the leaf's arrays, at their capacity.
    pub(super) fn array_bytes(&self) -> usize {
        self.prefixes.capacity() * std::mem::size_of::<u64>()
            + self.records.capacity() * std::mem::size_of::<RecordBytes>()
    }

    /// Whether the vacant entries are as the invariant says (for the tests' checks).
    #[cfg(test)]
    pub(super) fn vacancies_hold_nothing(&self) -> bool {
        self.prefixes.len() == self.records.len()
            && self.records.iter().take(self.vacant).all(|r| matches!(r, RecordBytes::Inline { len: 0, .. }))
    }

    /// Moves the records to the front of the arrays, leaving no vacancy.
    fn pack(&mut self) {
        if self.vacant > 0 {
            self.prefixes.drain(..self.vacant);
            self.records.drain(..self.vacant);
            self.vacant = 0;
        }
    }

    /// Inserts at `index` (of the records), filling a vacancy when `index` is in the front half.
    fn insert(&mut self, index: usize, prefix: u64, record: RecordBytes) {
        if self.vacant > 0 && index < self.len() / 2 {
            // Shift the records before `index` down one entry, into the last vacancy.
            let first = self.vacant - 1;
            let at = first + index;
            if let (Some(prefixes), Some(records)) =
                (self.prefixes.get_mut(first..=at), self.records.get_mut(first..=at))
            {
                prefixes.rotate_left(1);
                records.rotate_left(1);
                if let (Some(p), Some(r)) = (prefixes.last_mut(), records.last_mut()) {
                    *p = prefix;
                    *r = record;
                    self.vacant = first;
                    return;
                }
            }
        }
        self.pack();
        self.make_room();
        self.prefixes.insert(index, prefix);
        self.records.insert(index, record);
    }

    fn make_room(&mut self) {
        make_room(&mut self.prefixes, LEAF_CAPACITY + 1);
        make_room(&mut self.records, LEAF_CAPACITY + 1);
    }

    fn trim(&mut self) {
        self.pack();
        trim(&mut self.prefixes);
        trim(&mut self.records);
    }

    #[inline]
    pub(super) fn search(&self, probe: &Probe<'_>) -> std::result::Result<usize, usize> {
        let records = self.records();
        search(self.prefixes(), probe, |i| records.get(i).map(RecordBytes::key))
    }

    /// The first step of `search` in stages (a batched lookup's): the position of the first
    /// record whose key's prefix is not below `prefix`, reading the prefixes only.
    #[inline]
    pub(super) fn lower_bound(&self, prefix: u64) -> usize {
        count_less(self.prefixes(), prefix)
    }

    /// The last step: `search`'s answer, from `start = lower_bound(probe.prefix)`.
    #[inline]
    pub(super) fn search_from(&self, probe: &Probe<'_>, start: usize) -> std::result::Result<usize, usize> {
        let records = self.records();
        search_from(self.prefixes(), probe, start, |i| records.get(i).map(RecordBytes::key))
    }

    fn put(&mut self, probe: &Probe<'_>, value: &[u8], overwrite: bool) -> Result<(Put, Option<Split>)> {
        match self.search(probe) {
            Ok(index) => {
                if !overwrite {
                    return Ok((Put::Kept, None));
                }
                let record = self.records_mut().get_mut(index).ok_or_else(lost_child)?;
                record.set_value(value)?;
                Ok((Put::Replaced, None))
            }
            Err(index) => {
                let record = RecordBytes::new(probe.key, value)?;
                self.insert(index, probe.prefix, record);
                let len = self.len();
                let split = (len > LEAF_CAPACITY).then(|| {
                    let (at, full_room) = cut_point(index, len);
                    self.split(at, full_room)
                });
                Ok((Put::Inserted, split))
            }
        }
    }

    /// Moves the records from `at` on into a new right sibling (with a full leaf's room if
    /// `full_room`). `0 < at < len` keeps both sides non-empty, so the separator is a real key.
    fn split(&mut self, at: usize, full_room: bool) -> Split {
        let moved = self.len().saturating_sub(at);
        let mut right = Leaf::with_capacity(split_room(moved, full_room, LEAF_CAPACITY));
        let cut = self.vacant + at;
        right.prefixes.extend(self.prefixes.drain(cut..));
        right.records.extend(self.records.drain(cut..));
        self.trim();
        let separator = right.records.first().map(|r| Box::from(r.key())).unwrap_or_default();
        Split { separator, right: Node::Leaf(right) }
    }

    fn remove(&mut self, probe: &Probe<'_>) -> Option<RecordBytes> {
        let index = self.search(probe).ok()?;
        let at = self.vacant + index;
        if index >= self.len() / 2 {
            self.prefixes.remove(at);
            return Some(self.records.remove(at));
        }
        // Shift the records before `index` up one entry; the first becomes a vacancy.
        let prefixes = self.prefixes.get_mut(self.vacant..=at)?;
        let records = self.records.get_mut(self.vacant..=at)?;
        prefixes.rotate_right(1);
        records.rotate_right(1);
        let removed = std::mem::replace(records.first_mut()?, VACANT);
        self.vacant += 1;
        Some(removed)
    }
}

impl Node {
    /// Starts loading the prefixes a search of the node reads first (a batched lookup's
    /// stage: the node's structure should be in the cache by now).
    #[inline]
    pub(super) fn prefetch_prefixes(&self) {
        match self {
            Node::Leaf(leaf) => prefetch_slice(leaf.prefixes()),
            Node::Inner(inner) => prefetch_slice(&inner.prefixes),
        }
    }
}

impl Inner {
    /// A new root above two nodes.
    pub fn new_root(left: Node, split: Split) -> Inner {
        let mut root = Inner::empty();
        root.prefixes.push(key_prefix(&split.separator));
        root.separators.push(split.separator);
        root.children.push(left);
        root.children.push(split.right);
        root
    }

    fn empty() -> Inner {
        Inner::with_capacity(GROWTH)
    }

    /// An empty node with room for `separators` separators.
    fn with_capacity(separators: usize) -> Inner {
        Inner {
            prefixes: Vec::with_capacity(separators),
            separators: Vec::with_capacity(separators),
            children: Vec::with_capacity(separators + 1),
        }
    }

    fn make_room(&mut self) {
        make_room(&mut self.prefixes, INNER_CAPACITY + 1);
        make_room(&mut self.separators, INNER_CAPACITY + 1);
        make_room(&mut self.children, INNER_CAPACITY + 2);
    }

    fn trim(&mut self) {
        trim(&mut self.prefixes);
        trim(&mut self.separators);
        trim(&mut self.children);
    }

    /// The index of the child whose keys range covers `probe` (a key equal to a separator
    /// belongs to the right of it).
    #[inline]
    pub(super) fn child_index(&self, probe: &Probe<'_>) -> usize {
        match search(&self.prefixes, probe, |i| self.separators.get(i).map(|s| &s[..])) {
            Ok(index) => index + 1,
            Err(index) => index,
        }
    }

    fn put(&mut self, probe: &Probe<'_>, value: &[u8], overwrite: bool) -> Result<(Put, Option<Split>)> {
        let index = self.child_index(probe);
        let child = self.children.get_mut(index).ok_or_else(lost_child)?;
        let (put, split) = child.put(probe, value, overwrite)?;
        let Some(split) = split else { return Ok((put, None)) };
        self.make_room();
        self.prefixes.insert(index, key_prefix(&split.separator));
        self.separators.insert(index, split.separator);
        self.children.insert(index + 1, split.right);
        let len = self.separators.len();
        Ok((
            put,
            (len > INNER_CAPACITY).then(|| {
                let (at, full_room) = cut_point(index, len);
                self.split(at, full_room)
            }),
        ))
    }

    /// Moves the children after separator `at` into a new right sibling (with a full node's
    /// room if `full_room`); separator `at` goes up.
    fn split(&mut self, at: usize, full_room: bool) -> Split {
        let moved = self.separators.len().saturating_sub(at + 1);
        let mut right = Inner::with_capacity(split_room(moved, full_room, INNER_CAPACITY));
        right.prefixes.extend(self.prefixes.drain(at + 1..));
        right.separators.extend(self.separators.drain(at + 1..));
        right.children.extend(self.children.drain(at + 1..));
        self.prefixes.pop();
        let separator = self.separators.pop().unwrap_or_default();
        self.trim();
        Split { separator, right: Node::Inner(right) }
    }

    fn remove(&mut self, probe: &Probe<'_>) -> Option<RecordBytes> {
        let index = self.child_index(probe);
        let child = self.children.get_mut(index)?;
        let removed = child.remove(probe)?;
        if child.is_underfull() {
            self.rebalance(index);
        }
        Some(removed)
    }

    /// Joins the underfull child at `index` with a sibling; if the two do not fit in one node,
    /// cuts the joined node in the middle again, which leaves both at least half full.
    /// Both siblings are taken before anything moves, so no path drops a subtree.
    fn rebalance(&mut self, index: usize) {
        let left_index = index.saturating_sub(1);
        let Some([left, right]) = self.children.get_mut(left_index..left_index + 2) else {
            return; // An only child: the parent's own rebalancing (or the root's collapse) acts.
        };
        // The right sibling's place keeps an empty leaf until it is removed below.
        let right = std::mem::replace(right, Node::Leaf(Leaf::with_capacity(0)));
        let separator = self.separators.remove(left_index);
        let split = left.absorb(separator, right);
        self.prefixes.remove(left_index);
        self.children.remove(left_index + 1);
        if let Some(split) = split {
            self.prefixes.insert(left_index, key_prefix(&split.separator));
            self.separators.insert(left_index, split.separator);
            self.children.insert(left_index + 1, split.right);
        }
    }
}

impl Node {
    pub(super) fn put(&mut self, probe: &Probe<'_>, value: &[u8], overwrite: bool) -> Result<(Put, Option<Split>)> {
        match self {
            Node::Leaf(leaf) => leaf.put(probe, value, overwrite),
            Node::Inner(inner) => inner.put(probe, value, overwrite),
        }
    }

    pub(super) fn remove(&mut self, probe: &Probe<'_>) -> Option<RecordBytes> {
        match self {
            Node::Leaf(leaf) => leaf.remove(probe),
            Node::Inner(inner) => inner.remove(probe),
        }
    }

    /// A quarter full or less: worth joining with a sibling.
    fn is_underfull(&self) -> bool {
        match self {
            Node::Leaf(leaf) => leaf.len() <= LEAF_CAPACITY / 4,
            Node::Inner(inner) => inner.children.len() <= INNER_CAPACITY / 4,
        }
    }

    /// Appends `right` (the next sibling, of the same kind and depth, `separator` between
    /// them) to this node; returns the upper half if the result is over capacity.
    fn absorb(&mut self, separator: Box<[u8]>, right: Node) -> Option<Split> {
        match (self, right) {
            (Node::Leaf(left), Node::Leaf(mut right)) => {
                right.pack();
                left.prefixes.append(&mut right.prefixes);
                left.records.append(&mut right.records);
                let len = left.len();
                let split = (len > LEAF_CAPACITY).then(|| left.split(len / 2, false));
                left.trim();
                split
            }
            (Node::Inner(left), Node::Inner(right)) => {
                left.prefixes.push(key_prefix(&separator));
                left.separators.push(separator);
                left.prefixes.extend(right.prefixes);
                left.separators.extend(right.separators);
                left.children.extend(right.children);
                let len = left.separators.len();
                let split = (len > INNER_CAPACITY).then(|| left.split(len / 2, false));
                left.trim();
                split
            }
            // Siblings are of one kind (all leaves share one depth); were they not, handing
            // `right` back as a split puts the node back as it was.
            (_, right) => Some(Split { separator, right }),
        }
    }
}
