//! The finger: the leaf of the last updates, with its key range and branch path, so that an
//! update landing in the same leaf as the one before (keys in order: imports, sequential
//! loads and deletes) skips the descent from the root.
//!
//! A finger is only as good as the page ids and separators it copied: it stays valid while
//! `BTree::structure` is unchanged, and every change of a page id or a separator (a page made
//! dirty, created, dropped or merged, a commit, a rollback) bumps that counter. Records added
//! to or removed from a leaf change neither its range nor the path.

use std::cmp::Ordering;

use super::btree::BTree;
use super::page::Page;
use crate::error::Result;

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

impl BTree {
    /// The leaf for `key` by the finger, with the branch path appended to `path`.
    #[inline]
    pub(super) fn finger_leaf(&self, key: &[u8], path: &mut Vec<(u64, usize)>) -> Option<u64> {
        let finger = &self.finger;
        if finger.structure != Some(self.structure) {
            return None;
        }
        let comparator = self.comparator();
        let above_low = match finger.low.as_deref() {
            Some(low) => comparator.compare(low, key) != Ordering::Greater,
            None => true,
        };
        let below_high = match finger.high.as_deref() {
            Some(high) => comparator.compare(key, high) == Ordering::Less,
            None => true,
        };
        if !(above_low && below_high) {
            return None;
        }
        path.extend_from_slice(&finger.path);
        Some(finger.leaf)
    }

    /// Called after an update that found `leaf` by the descent along `path` and changed no
    /// structure: when the update before used the same leaf, a run in key order has likely
    /// begun, so the finger is taken (reading the separators costs a descent's worth, and
    /// random updates rarely pay it).
    pub(super) fn remember_leaf(&mut self, leaf: u64, path: &[(u64, usize)]) -> Result<()> {
        let repeated = self.last_leaf == Some((leaf, self.structure));
        self.last_leaf = Some((leaf, self.structure));
        if !repeated || self.finger.structure == Some(self.structure) {
            return Ok(());
        }
        let mut low = None;
        let mut high = None;
        for &(branch_id, index) in path {
            let page = self.page(branch_id)?;
            let Page::Branch(branch) = &*page else {
                return Ok(());
            };
            // Deeper separators are tighter: the last one met wins.
            if let Some(key) = index.checked_sub(1).and_then(|i| branch.keys.get(i)) {
                low = Some(key.clone());
            }
            if let Some(key) = branch.keys.get(index) {
                high = Some(key.clone());
            }
        }
        let finger = &mut self.finger;
        finger.low = low;
        finger.high = high;
        finger.leaf = leaf;
        finger.path.clear();
        finger.path.extend_from_slice(path);
        finger.structure = Some(self.structure);
        Ok(())
    }
}
