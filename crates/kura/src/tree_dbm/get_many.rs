//! TreeDbm's batched lookup (`Dbm::get_many_with`): the keys are sorted, and the tree is
//! descended once per run of keys that share a leaf instead of once per key.
//!
//! A descent notes the leaf's upper separator (the tightest bound met on the way down, as
//! the finger does); the keys that follow in sorted order are looked up in the same leaf
//! while they stay below it. The leaf stays in place in the page cache meanwhile (its cache
//! shard locked, see `Pager::with_page`), so a run pays for one descent and one cache lookup.
//! The sorted batch is done in segments of `SEGMENT` keys, each under one hold of the tree's
//! read lock, so a writer waits for one segment at most, not for a whole large batch.

use std::cmp::Ordering;

use super::btree::{wrong_level, BTree, TEMP_BIT};
use super::page::Page;
use super::TreeDbm;
use crate::error::Result;

/// Sorted keys looked up under one hold of the read lock.
const SEGMENT: usize = 512;

impl TreeDbm {
    pub(super) fn get_many_sorted(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let comparator = self.read()?.comparator();
        let key = |index: usize| keys.get(index).copied().unwrap_or_default();
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by(|&a, &b| comparator.compare(key(a), key(b)));
        for segment in order.chunks(SEGMENT) {
            self.read()?.get_sorted(keys, segment, visit)?;
        }
        Ok(())
    }
}

impl BTree {
    /// Shows the value of each key of `keys` named by `order` (indices into `keys`, in the
    /// comparator's order) to `visit`, with its index.
    fn get_sorted(&self, keys: &[&[u8]], order: &[usize], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        let comparator = self.comparator();
        let key_at = |position: usize| order.get(position).map(|&i| (i, keys.get(i).copied().unwrap_or_default()));
        let mut position = 0;
        // The upper separator of the current leaf, when it has one (the last leaf has none).
        let mut high: Vec<u8> = Vec::new();
        while let Some((_, first_key)) = key_at(position) {
            if self.height == 0 {
                for &index in order.get(position..).unwrap_or_default() {
                    visit(index, None);
                }
                return Ok(());
            }
            let mut bounded = false;
            let mut id = self.root;
            for _ in 1..self.height {
                let mut child = |page: &Page| match page {
                    Page::Branch(branch) => {
                        let index = branch.child_index(comparator, first_key);
                        // Deeper separators are tighter: the last one met bounds the leaf.
                        if let Some(separator) = branch.keys.get(index) {
                            high.clear();
                            high.extend_from_slice(separator);
                            bounded = true;
                        }
                        branch.children.get(index).copied()
                    }
                    Page::Leaf(_) => None,
                };
                let next =
                    if id & TEMP_BIT != 0 { child(&*self.page(id)?) } else { self.pager.with_page(id, child)? };
                id = next.ok_or_else(|| wrong_level(id))?;
            }
            let run_start = position;
            let mut in_leaf = |page: &Page| -> Result<()> {
                let Page::Leaf(leaf) = page else { return Err(wrong_level(id)) };
                while let Some((index, key)) = key_at(position) {
                    // The run's first key belongs here by the descent (and so the loop always
                    // advances, even on a damaged tree); the next ones while below the bound.
                    if position > run_start && bounded && comparator.compare(key, &high) != Ordering::Less {
                        break;
                    }
                    visit(index, leaf.search(comparator, key).ok().and_then(|i| leaf.value(i)));
                    position += 1;
                }
                Ok(())
            };
            if id & TEMP_BIT != 0 {
                in_leaf(&*self.page(id)?)?;
            } else {
                self.pager.with_page(id, in_leaf)??;
            }
        }
        Ok(())
    }
}
