//! The pages modified since the last commit, by their temporary ids (btree.rs).
//!
//! Temporary ids are handed out in sequence, so the set is a vector indexed by id rather than
//! a hash map. Between checkpoints every page a random update touched is dirty, the root and
//! the branches above it included, so a lookup in a tree in use finds most of its path here:
//! one slot of a dense array (8 bytes a page) where a hash map probed a table of about twice
//! as many 16-byte buckets plus its control bytes, a miss further down the caches per level.
//!
//! Ids handed out before the last `clear` lie below `base` and name no page, so an id kept
//! across a commit can never name a page made after it.

use std::sync::Arc;

use super::page::Page;

/// Marks an in-memory id of a page modified since the last commit; file offsets never have it.
pub const TEMP_BIT: u64 = 1 << 63;

/// Invariants: `pages[i]` holds the page of id `TEMP_BIT | (base + i)`, if it is still dirty;
/// `len` counts the `Some` slots; the next id handed out is `TEMP_BIT | (base + pages.len())`.
#[derive(Default)]
pub struct DirtyPages {
    base: u64,
    pages: Vec<Option<Arc<Page>>>,
    len: usize,
}

impl DirtyPages {
    /// Adds `page` under a new temporary id, which it returns.
    pub fn add(&mut self, page: Arc<Page>) -> u64 {
        let id = TEMP_BIT | (self.base + self.pages.len() as u64);
        self.pages.push(Some(page));
        self.len += 1;
        id
    }

    fn index(&self, id: u64) -> Option<usize> {
        if id & TEMP_BIT == 0 {
            return None;
        }
        usize::try_from((id & !TEMP_BIT).checked_sub(self.base)?).ok()
    }

    pub fn get(&self, id: u64) -> Option<&Arc<Page>> {
        self.pages.get(self.index(id)?)?.as_ref()
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Arc<Page>> {
        let index = self.index(id)?;
        self.pages.get_mut(index)?.as_mut()
    }

    pub fn remove(&mut self, id: u64) -> Option<Arc<Page>> {
        let index = self.index(id)?;
        let page = self.pages.get_mut(index)?.take();
        self.len -= usize::from(page.is_some());
        page
    }

    /// Pages still dirty.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Drops every page; the ids handed out so far name none from now on.
    pub fn clear(&mut self) {
        self.base += self.pages.len() as u64;
        self.pages.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on a wrong index")]
    use super::*;
    use crate::tree_dbm::page::Leaf;

    /// Against a map of the ids handed out: lookups, removals and clears in random order, and
    /// no id from before a clear naming a page after it.
    #[test]
    fn behaves_as_a_map_of_sequential_ids() {
        let mut rng = crate::split_mix::SplitMix64::new(5);
        let mut dirty = DirtyPages::default();
        let mut model = std::collections::BTreeMap::new();
        let mut handed_out = Vec::new();
        for _ in 0..5000 {
            match rng.below(10) {
                0..=4 => {
                    let page = Arc::new(Page::Leaf(Leaf::new()));
                    let id = dirty.add(Arc::clone(&page));
                    assert!(!handed_out.contains(&id), "id {id:#x} handed out twice");
                    handed_out.push(id);
                    model.insert(id, page);
                }
                5..=6 if !handed_out.is_empty() => {
                    let id = handed_out[rng.below(handed_out.len() as u64) as usize];
                    let removed = dirty.remove(id);
                    assert_eq!(removed.is_some(), model.remove(&id).is_some());
                }
                7 => {
                    dirty.clear();
                    model.clear();
                }
                _ => {}
            }
            assert_eq!(dirty.len(), model.len());
            for &id in handed_out.iter().rev().take(50) {
                let got = dirty.get(id).map(Arc::as_ptr);
                assert_eq!(got, model.get(&id).map(Arc::as_ptr), "id {id:#x}");
            }
            assert!(dirty.get(12).is_none(), "an offset is not a dirty id");
        }
    }
}
