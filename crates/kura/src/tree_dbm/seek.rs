//! Finding a position in key order: the first or last record, or the neighbour of a key on
//! either side, crossing into the next or previous leaf when the target lies past the end
//! of the leaf the key leads to.
//!
//! The search keeps its path of branches, so moving to a neighbouring leaf climbs only as far
//! as needed. Every step either descends one level (at most `height` levels) or moves the
//! path strictly sideways, so even a corrupted tree cannot make it loop. Every leaf a seek
//! returns a record of is checked to hold only keys within the range its branches give it
//! (`check_leaf_range`). So a scan never shows a record that lookups cannot reach, and a
//! record found in a neighbouring leaf lies beyond the target (that leaf's range starts past
//! the one the target led to): a cursor, which seeks past the key it stands on to leave a
//! leaf, only ever moves on in key order, and meets a damaged tree's overlapping leaves as
//! BrokenData instead of circling through them (both found by fuzzing).

use std::cmp::Ordering;
use std::sync::Arc;

use super::btree::{wrong_level, BTree, PageRef};
use super::comparator::Comparator;
use super::page::{Leaf, Page};
use super::slot_hint::SlotHint;
use crate::error::{Error, Result};

/// Empty leaves never exist in a sound tree; a damaged one may hold some, but a scan that
/// meets this many is walking a malicious structure.
const MAX_EMPTY_LEAVES: usize = 10_000;

/// Where to go.
#[derive(Debug, Clone, Copy)]
pub enum Seek<'k> {
    First,
    Last,
    /// The first key `>= k`.
    AtLeast(&'k [u8]),
    /// The first key `> k`.
    Above(&'k [u8]),
    /// The last key `<= k`.
    AtMost(&'k [u8]),
    /// The last key `< k`.
    Below(&'k [u8]),
}

impl Seek<'_> {
    fn forward(self) -> bool {
        matches!(self, Seek::First | Seek::AtLeast(_) | Seek::Above(_))
    }
}

/// A found record: the leaf (shared, so it outlives the lock; never one lending its values
/// from the file, see `BTree::kept`) and the index in it.
pub struct Position {
    pub leaf: Arc<Page>,
    pub index: usize,
}

impl BTree {
    pub fn seek(&self, target: Seek<'_>) -> Result<Option<Position>> {
        if self.root == 0 || self.height == 0 {
            return Ok(None);
        }
        let comparator = self.comparator();
        let forward = target.forward();
        let mut path: Vec<(PageRef<'_>, usize)> = Vec::with_capacity(self.height as usize);
        let mut id = self.root;
        let mut hint = SlotHint::UNKNOWN;
        // Descend towards the target.
        loop {
            let page = self.page_hinted(id, hint)?;
            let leaf_level = path.len() + 1 == self.height as usize;
            match (&*page, leaf_level) {
                (Page::Branch(branch), false) => {
                    let index = match target {
                        Seek::First => 0,
                        Seek::Last => branch.len().saturating_sub(1),
                        Seek::AtLeast(key) | Seek::Above(key) | Seek::AtMost(key) | Seek::Below(key) => {
                            branch.child_index(comparator, key)
                        }
                    };
                    (id, hint) = branch.child_hinted(index).ok_or_else(|| wrong_level(id))?;
                    path.push((page, index));
                }
                (Page::Leaf(leaf), true) => {
                    let len = leaf.len();
                    let found = match target {
                        Seek::First => (len > 0).then_some(0),
                        Seek::Last => len.checked_sub(1),
                        Seek::AtLeast(key) => Some(leaf.rank(comparator, key, false)).filter(|i| *i < len),
                        Seek::Above(key) => Some(leaf.rank(comparator, key, true)).filter(|i| *i < len),
                        Seek::AtMost(key) => leaf.rank(comparator, key, true).checked_sub(1),
                        Seek::Below(key) => leaf.rank(comparator, key, false).checked_sub(1),
                    };
                    if let Some(index) = found {
                        check_leaf_range(comparator, &path, leaf)?;
                        return Ok(Some(Position { leaf: self.kept(id, page), index }));
                    }
                    break;
                }
                _ => return Err(wrong_level(id)),
            }
        }
        // The target lies beyond this leaf: the nearest record of the neighbouring leaves.
        let mut empty_leaves = 0usize;
        loop {
            let Some((parent, index)) = path.pop() else {
                return Ok(None);
            };
            let next = if forward {
                index.checked_add(1).filter(|i| *i < parent.as_branch_len())
            } else {
                index.checked_sub(1)
            };
            let Some(next) = next else { continue };
            let (child, child_hint) = parent.child(next).ok_or_else(|| wrong_level(id))?;
            path.push((parent, next));
            // Down the near edge of that subtree.
            let (mut id, mut hint) = (child, child_hint);
            loop {
                let page = self.page_hinted(id, hint)?;
                let leaf_level = path.len() + 1 == self.height as usize;
                match (&*page, leaf_level) {
                    (Page::Branch(branch), false) => {
                        let index = if forward { 0 } else { branch.len().saturating_sub(1) };
                        (id, hint) = branch.child_hinted(index).ok_or_else(|| wrong_level(id))?;
                        path.push((page, index));
                    }
                    (Page::Leaf(leaf), true) => {
                        let found = if forward { (!leaf.is_empty()).then_some(0) } else { leaf.len().checked_sub(1) };
                        if let Some(index) = found {
                            check_leaf_range(comparator, &path, leaf)?;
                            return Ok(Some(Position { leaf: self.kept(id, page), index }));
                        }
                        // An empty leaf (only in a damaged file): keep going, within reason.
                        empty_leaves += 1;
                        if empty_leaves > MAX_EMPTY_LEAVES {
                            return Err(Error::broken("tree has too many empty leaves"));
                        }
                        break;
                    }
                    _ => return Err(wrong_level(id)),
                }
            }
        }
    }
}

/// Checks that the keys of `leaf`, reached through the branches and child indices of `path`,
/// lie within the range each of those branches gives that child: from the separator before
/// it (inclusive) to the one after it (exclusive), as lookups descend. A sound tree always
/// holds this; a damaged one may hold a key in a leaf that lookups never reach, which a scan
/// would show with a value `get` does not give (or, from two such leaves, twice). Within a
/// leaf, decoding has checked the order, so its first and last keys stand for all.
fn check_leaf_range(comparator: Comparator, path: &[(PageRef<'_>, usize)], leaf: &Leaf) -> Result<()> {
    let (Some(first), Some(last)) = (leaf.key(0), leaf.len().checked_sub(1).and_then(|i| leaf.key(i))) else {
        return Ok(());
    };
    for (page, index) in path {
        // The descents push branches only: a leaf here is a broken invariant, not a range.
        let Page::Branch(branch) = &**page else {
            debug_assert!(false, "a seek's path holds a leaf");
            return Err(Error::broken("a seek's path holds a leaf"));
        };
        let below = index.checked_sub(1).and_then(|i| branch.keys.get(i));
        let above = branch.keys.get(*index);
        if below.is_some_and(|low| comparator.compare(first, low) == Ordering::Less)
            || above.is_some_and(|high| comparator.compare(last, high) != Ordering::Less)
        {
            return Err(Error::broken("tree leaf holds keys outside its branch's range"));
        }
    }
    Ok(())
}

impl PageRef<'_> {
    fn as_branch_len(&self) -> usize {
        match &**self {
            Page::Branch(branch) => branch.len(),
            Page::Leaf(_) => 0,
        }
    }

    fn child(&self, index: usize) -> Option<(u64, SlotHint)> {
        match &**self {
            Page::Branch(branch) => branch.child_hinted(index),
            Page::Leaf(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on a wrong index")]
    use super::*;
    use crate::split_mix::SplitMix64;
    use crate::tree_dbm::page::Branch;

    /// `check_leaf_range` accepts exactly the leaves whose keys lie in their branch's range:
    /// random leaves under random separators, for every comparator, with keys drawn from few
    /// bytes (zeros among them) and of lengths around a `key_prefix`'s 8 bytes, so that keys
    /// often tie with a separator or share its start.
    #[test]
    fn the_range_check_decides_as_whole_keys_do() {
        let mut rng = SplitMix64::new(43);
        let word = |rng: &mut SplitMix64| -> Vec<u8> {
            let len = [0, 3, 8, 9, 12][rng.below(5) as usize] + rng.below(2) as usize;
            (0..len).map(|_| [0u8, 1, b'a', 0xff][rng.below(4) as usize]).collect()
        };
        let sorted = |comparator: Comparator, mut keys: Vec<Vec<u8>>| {
            keys.sort_by(|a, b| comparator.compare(a, b));
            keys.dedup_by(|a, b| comparator.compare(a, b) == Ordering::Equal);
            keys
        };
        let (mut rejected, mut accepted) = (0, 0);
        for comparator in Comparator::ALL {
            for round in 0..4000 {
                let leaf_keys = sorted(comparator, (0..1 + rng.below(3)).map(|_| word(&mut rng)).collect());
                let separators = sorted(comparator, (0..1 + rng.below(3)).map(|_| word(&mut rng)).collect());
                let mut leaf = Leaf::new();
                for (i, key) in leaf_keys.iter().enumerate() {
                    leaf.insert(i, key, b"v").unwrap();
                }
                let mut branch = Branch::new(4096);
                for (i, separator) in separators.iter().enumerate() {
                    branch.insert_after(i, separator.clone(), 4096 * (i as u64 + 2));
                }
                let index = rng.below(separators.len() as u64 + 1) as usize;
                let (first, last) = (leaf_keys.first().unwrap(), leaf_keys.last().unwrap());
                let below = index.checked_sub(1).and_then(|i| separators.get(i));
                let expected = below.is_none_or(|low| comparator.compare(first, low) != Ordering::Less)
                    && separators.get(index).is_none_or(|high| comparator.compare(last, high) == Ordering::Less);
                let page = Arc::new(Page::Branch(branch));
                let path = [(PageRef::Borrowed(&page), index)];
                let checked = check_leaf_range(comparator, &path, &leaf);
                assert_eq!(
                    checked.is_ok(),
                    expected,
                    "{comparator:?} round {round}: leaf {leaf_keys:?} as child {index} of {separators:?}"
                );
                if expected {
                    accepted += 1;
                } else {
                    rejected += 1;
                }
            }
        }
        assert!(rejected > 1000 && accepted > 1000, "{rejected} rejected, {accepted} accepted: too few of one");
    }
}
