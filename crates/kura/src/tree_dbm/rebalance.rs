//! Keeping pages within bounds after an update: splitting oversized pages upwards, and
//! merging underfull ones with a sibling.
//!
//! Splits: a leaf over `max_page_size` splits in two; when the record that overflowed it was
//! appended at either end (sequential inserts), the split leaves the old page full rather than
//! half full, so an import in key order packs pages densely. Merges: a page under a quarter of
//! `max_page_size` merges with a sibling when both fit in one page; an empty leaf is dropped;
//! a root branch with a single child gives way to that child.

use super::btree::{wrong_level, BTree, TEMP_BIT};
use super::format::MAX_HEIGHT;
use super::page::{Branch, Page};
use super::slot_hint::SlotHint;
use crate::error::{Error, ErrorKind, Result};

/// A branch needs at least this many children before it may split.
const MIN_SPLIT_CHILDREN: usize = 4;

impl BTree {
    /// Splits the dirty leaf `leaf_id` if oversized, and its ancestors as needed.
    /// `inserted` is the index of a record just inserted, if any.
    pub(super) fn split_if_needed(
        &mut self,
        path: &mut Vec<(u64, usize)>,
        leaf_id: u64,
        inserted: Option<usize>,
    ) -> Result<()> {
        let max = self.pager.max_page_size();
        let leaf = self.leaf_mut(leaf_id)?;
        if leaf.encoded_size() <= max || leaf.len() < 2 {
            return Ok(());
        }
        let last = leaf.len() - 1;
        let at = match inserted {
            Some(index) if index == last => last,
            Some(0) => 1,
            _ => leaf.split_point(leaf.encoded_size() / 2),
        };
        let right = leaf.split_off(at, max);
        let separator = right.key(0).unwrap_or_default().to_vec();
        let right_id = self.new_dirty(Page::Leaf(right));
        let (mut left_id, mut separator, mut right_id) = (leaf_id, separator, right_id);
        loop {
            let Some((parent_id, index)) = path.pop() else {
                if self.height >= MAX_HEIGHT {
                    return Err(Error::new(ErrorKind::Limit, "the tree reached its maximum height"));
                }
                let mut root = Branch::new(left_id);
                root.insert_after(0, separator, right_id);
                self.root = self.new_dirty(Page::Branch(root));
                self.height += 1;
                return Ok(());
            };
            let parent = self.branch_mut(parent_id)?;
            parent.insert_after(index, separator, right_id);
            if parent.encoded_size() <= max || parent.len() < MIN_SPLIT_CHILDREN {
                return Ok(());
            }
            let Some((up, right)) = parent.split() else {
                return Ok(());
            };
            right_id = self.new_dirty(Page::Branch(right));
            left_id = parent_id;
            separator = up;
        }
    }

    /// Merges the dirty leaf `leaf_id` and its ancestors with siblings where underfull.
    pub(super) fn merge_if_needed(&mut self, path: &mut Vec<(u64, usize)>, leaf_id: u64) -> Result<()> {
        let max = self.pager.max_page_size();
        let min = max / 4;
        let mut child_id = leaf_id;
        loop {
            let (size, len, is_leaf) = match &*self.page(child_id)? {
                Page::Leaf(leaf) => (leaf.encoded_size(), leaf.len(), true),
                Page::Branch(branch) => (branch.encoded_size(), branch.len(), false),
            };
            let Some(&(parent_id, index)) = path.last() else {
                return self.shrink_root(child_id, len, is_leaf);
            };
            if len == 0 {
                // Only a leaf can be empty: drop it from its parent.
                self.branch_mut(parent_id)?.remove_child(index);
                self.drop_page(child_id);
                path.pop();
                child_id = parent_id;
                continue;
            }
            if size >= min {
                return Ok(());
            }
            let parent = self.branch_mut(parent_id)?;
            if parent.len() < 2 {
                path.pop();
                child_id = parent_id;
                continue;
            }
            let left_index = if index + 1 < parent.len() { index } else { index - 1 };
            let (left, right) = match (parent.child(left_index), parent.child(left_index + 1)) {
                (Some(l), Some(r)) => (l, r),
                _ => return Err(wrong_level(parent_id)),
            };
            let separator = parent.keys.get(left_index).cloned().unwrap_or_default();
            // Look before copying: a pair that cannot merge (a shrinking page beside a full
            // one, as deleting in key order leaves) must not make the sibling dirty on every
            // update, to be rewritten unchanged at the next commit.
            let fits = match (&*self.page(left)?, &*self.page(right)?) {
                (Page::Leaf(l), Page::Leaf(r)) => l.encoded_size() + r.encoded_size() <= max,
                (Page::Branch(l), Page::Branch(r)) => l.encoded_size() + r.encoded_size() + separator.len() <= max,
                _ => true, // (`merge_pair` reports the damage)
            };
            if !fits {
                return Ok(());
            }
            let left = self.dirty_child(parent_id, left_index, left)?;
            let right = self.dirty_child(parent_id, left_index + 1, right)?;
            if !self.merge_pair(left, right, separator, max)? {
                return Ok(());
            }
            self.branch_mut(parent_id)?.remove_child(left_index + 1);
            self.drop_page(right);
            path.pop();
            child_id = parent_id;
        }
    }

    /// The root after removals: an empty root (a leaf without records, or a branch whose last
    /// child was removed) empties the tree; a branch root with one child hands the root to it.
    fn shrink_root(&mut self, root_id: u64, len: usize, is_leaf: bool) -> Result<()> {
        let (mut root_id, mut len, mut is_leaf) = (root_id, len, is_leaf);
        for _ in 0..MAX_HEIGHT {
            // An empty leaf, or a branch whose last child (an emptied leaf, or an emptied
            // branch below it) was just removed: the tree is empty.
            if len == 0 {
                self.drop_page(root_id);
                self.root = 0;
                self.height = 0;
                return Ok(());
            }
            if is_leaf || len != 1 {
                return Ok(());
            }
            let child = match &*self.page(root_id)? {
                Page::Branch(branch) => branch.child(0).ok_or_else(|| wrong_level(root_id))?,
                Page::Leaf(_) => return Err(wrong_level(root_id)),
            };
            self.drop_page(root_id);
            self.root = child;
            self.height = self.height.saturating_sub(1);
            root_id = child;
            (len, is_leaf) = match &*self.page(child)? {
                Page::Leaf(leaf) => (leaf.len(), true),
                Page::Branch(branch) => (branch.len(), false),
            };
        }
        Ok(())
    }

    /// Forgets a page no longer in the tree: a dirty one is dropped, a clean one's slot is
    /// freed after the next commit.
    fn drop_page(&mut self, id: u64) {
        self.structure += 1;
        if id & TEMP_BIT != 0 {
            self.dirty.remove(id);
        } else {
            self.pager.forget_replaced(id);
            self.replaced.push(id);
        }
    }

    /// Makes child `index` of the dirty branch `parent` writable; returns its dirty id.
    fn dirty_child(&mut self, parent: u64, index: usize, child: u64) -> Result<u64> {
        let copy = self.make_dirty(child)?;
        // A page not yet written has no hint.
        self.branch_mut(parent)?.set_child(index, copy, SlotHint::UNKNOWN);
        Ok(copy)
    }

    /// Moves everything of dirty page `right` into dirty page `left` if the result fits in a
    /// page; returns whether it did.
    fn merge_pair(&mut self, left: u64, right: u64, separator: Vec<u8>, max: usize) -> Result<bool> {
        let right_page = self
            .dirty
            .get(right)
            .cloned()
            .ok_or_else(|| Error::internal("a dirty page id names a page in the dirty set"))?;
        match (self.page_mut(left)?, &*right_page) {
            (Page::Leaf(l), Page::Leaf(r)) => {
                if l.encoded_size() + r.encoded_size() > max {
                    return Ok(false);
                }
                l.append(r)?;
            }
            (Page::Branch(l), Page::Branch(r)) => {
                if l.encoded_size() + r.encoded_size() + separator.len() > max {
                    return Ok(false);
                }
                l.append(separator, r);
            }
            _ => return Err(wrong_level(left)),
        }
        self.structure += 1;
        Ok(true)
    }
}
