//! Reads of the ordered tree: exact lookup, the neighbours of a key either way, the ends, and
//! in-order visits. Nodes may be empty (a leaf left alone under its parent), so each search
//! falls back to the next non-empty sibling subtree.

use super::node::{Leaf, Node};
use super::prefix::Probe;
use crate::memory_dbm::record::RecordBytes;

impl Node {
    #[inline]
    pub(super) fn get(&self, probe: &Probe<'_>) -> Option<&RecordBytes> {
        let mut node = self;
        loop {
            match node {
                Node::Leaf(leaf) => return leaf.records().get(leaf.search(probe).ok()?),
                Node::Inner(inner) => node = inner.children.get(inner.child_index(probe))?,
            }
        }
    }

    #[inline]
    pub(super) fn get_mut(&mut self, probe: &Probe<'_>) -> Option<&mut RecordBytes> {
        let mut node = self;
        loop {
            match node {
                Node::Leaf(leaf) => {
                    let index = leaf.search(probe).ok()?;
                    return leaf.records_mut().get_mut(index);
                }
                Node::Inner(inner) => {
                    let index = inner.child_index(probe);
                    node = inner.children.get_mut(index)?;
                }
            }
        }
    }

    pub(super) fn first(&self) -> Option<&RecordBytes> {
        match self {
            Node::Leaf(leaf) => leaf.records().first(),
            Node::Inner(inner) => inner.children.iter().find_map(Node::first),
        }
    }

    pub(super) fn last(&self) -> Option<&RecordBytes> {
        match self {
            Node::Leaf(leaf) => leaf.records().last(),
            Node::Inner(inner) => inner.children.iter().rev().find_map(Node::last),
        }
    }

    /// The first record whose key is greater than the probe's (or equal, with `inclusive`).
    pub(super) fn after(&self, probe: &Probe<'_>, inclusive: bool) -> Option<&RecordBytes> {
        match self {
            Node::Leaf(leaf) => leaf.records().get(leaf.index_after(probe, inclusive)),
            Node::Inner(inner) => {
                let index = inner.child_index(probe);
                let mut rest = inner.children.iter().skip(index);
                rest.next()?.after(probe, inclusive).or_else(|| rest.find_map(Node::first))
            }
        }
    }

    /// The last record whose key is less than the probe's (or equal, with `inclusive`).
    pub(super) fn before(&self, probe: &Probe<'_>, inclusive: bool) -> Option<&RecordBytes> {
        match self {
            Node::Leaf(leaf) => leaf.records().get(leaf.index_before(probe, inclusive)?),
            Node::Inner(inner) => {
                let index = inner.child_index(probe);
                let mut rest = inner.children.iter().take(index + 1).rev();
                rest.next()?.before(probe, inclusive).or_else(|| rest.find_map(Node::last))
            }
        }
    }

    /// Shows every record to `visit` in key order, stopping at its first error.
    pub(super) fn for_each<E>(
        &self,
        visit: &mut impl FnMut(&RecordBytes) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        match self {
            Node::Leaf(leaf) => leaf.records().iter().try_for_each(visit),
            Node::Inner(inner) => inner.children.iter().try_for_each(|child| child.for_each(visit)),
        }
    }

    /// Shows every node to `visit`, parents before children.
    pub(super) fn for_each_node(&self, visit: &mut impl FnMut(&Node)) {
        visit(self);
        if let Node::Inner(inner) = self {
            inner.children.iter().for_each(|child| child.for_each_node(visit));
        }
    }
}

impl Leaf {
    fn index_after(&self, probe: &Probe<'_>, inclusive: bool) -> usize {
        match self.search(probe) {
            Ok(index) if !inclusive => index + 1,
            Ok(index) | Err(index) => index,
        }
    }

    fn index_before(&self, probe: &Probe<'_>, inclusive: bool) -> Option<usize> {
        match self.search(probe) {
            Ok(index) if inclusive => Some(index),
            Ok(index) | Err(index) => index.checked_sub(1),
        }
    }
}
