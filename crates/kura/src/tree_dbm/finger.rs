//! The finger: the leaf of the last updates, with its key range and branch path, so that an
//! update landing in the same leaf as the one before (keys in order: imports, sequential
//! loads and deletes) skips the descent from the root. `BTree` decides when to take one
//! (`remember_leaf` in btree.rs); this file holds the finger and its checks.
//!
//! A finger is only as good as the page ids and separators it copied: it stays valid while
//! `BTree::structure` is unchanged, and every change of a page id or a separator (a page made
//! dirty, created, dropped or merged, a commit, a rollback) bumps that counter. Records added
//! to or removed from a leaf change neither its range nor the path.

use std::cmp::Ordering;

use super::comparator::Comparator;

#[derive(Default)]
pub struct Finger {
    /// `BTree::structure` when the finger was taken; `None`: no finger.
    structure: Option<u64>,
    leaf: u64,
    path: Vec<(u64, usize)>,
    /// The leaf holds the keys `k` with `low <= k < high`; `None` is unbounded.
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
}

impl Finger {
    /// The leaf for `key` when the finger is current for `structure` and covers the key,
    /// with the branch path appended to `path`.
    #[inline]
    pub fn leaf_for(
        &self,
        structure: u64,
        comparator: Comparator,
        key: &[u8],
        path: &mut Vec<(u64, usize)>,
    ) -> Option<u64> {
        if self.structure != Some(structure) {
            return None;
        }
        let above_low = match self.low.as_deref() {
            Some(low) => comparator.compare(low, key) != Ordering::Greater,
            None => true,
        };
        let below_high = match self.high.as_deref() {
            Some(high) => comparator.compare(key, high) == Ordering::Less,
            None => true,
        };
        if !(above_low && below_high) {
            return None;
        }
        path.extend_from_slice(&self.path);
        Some(self.leaf)
    }

    /// Whether the finger is current for `structure`.
    pub fn is_current(&self, structure: u64) -> bool {
        self.structure == Some(structure)
    }

    /// Takes `leaf`, reached along `path`, holding the keys `low <= k < high`, as the finger
    /// for `structure`.
    pub fn take(
        &mut self,
        structure: u64,
        leaf: u64,
        path: &[(u64, usize)],
        low: Option<Vec<u8>>,
        high: Option<Vec<u8>>,
    ) {
        self.low = low;
        self.high = high;
        self.leaf = leaf;
        self.path.clear();
        self.path.extend_from_slice(path);
        self.structure = Some(structure);
    }
}
