//! The recency order of one CacheDbm slot: a doubly linked list threaded through a side array
//! indexed like the slot's slab, so that moving a record to the front is four 4-byte writes
//! and no allocation.

use super::chained_table::{index_of, link, Link};
use crate::file::prefetch;

#[derive(Clone, Copy, Default)]
struct Links {
    /// Towards the most recently used end.
    newer: Link,
    /// Towards the least recently used end.
    older: Link,
}

/// Bytes the list spends per record, for memory accounting.
pub const LINK_BYTES: usize = std::mem::size_of::<Links>();

/// Invariant: the linked entries are exactly the live records of the slot, each once;
/// `newest`/`oldest` are None together, when the slot is empty.
#[derive(Default)]
pub struct LruList {
    links: Vec<Links>,
    newest: Link,
    oldest: Link,
}

impl LruList {
    /// An empty list with room for links of `reserve` slab indices (see `SlotTable::new`).
    pub fn with_capacity(reserve: usize) -> LruList {
        LruList { links: Vec::with_capacity(reserve), newest: None, oldest: None }
    }

    pub fn clear(&mut self) {
        *self = LruList::with_capacity(self.links.capacity());
    }

    fn links_mut(&mut self, index: u32) -> &mut Links {
        let index = index as usize;
        if index >= self.links.len() {
            // The slab grows one entry at a time, so this grows the side array in step.
            self.links.resize(index + 1, Links::default());
        }
        self.links.get_mut(index).expect("invariant: resized just above")
    }

    /// Adds `index` as the most recently used record (it must not be in the list).
    pub fn push_newest(&mut self, index: u32) {
        let old_newest = self.newest;
        *self.links_mut(index) = Links { newer: None, older: old_newest };
        match old_newest {
            Some(old) => self.links_mut(index_of(old)).newer = link(index),
            None => self.oldest = link(index),
        }
        self.newest = link(index);
    }

    /// Takes `index` out of the list (it must be in it).
    pub fn unlink(&mut self, index: u32) {
        let Links { newer, older } = *self.links_mut(index);
        match newer {
            Some(newer) => self.links_mut(index_of(newer)).older = older,
            None => self.newest = older,
        }
        match older {
            Some(older) => self.links_mut(index_of(older)).newer = newer,
            None => self.oldest = newer,
        }
        *self.links_mut(index) = Links::default();
    }

    /// Starts loading the links of `index`, which `touch` will read.
    #[inline]
    pub fn prefetch(&self, index: u32) {
        if let Some(links) = self.links.get(index as usize) {
            prefetch(std::ptr::from_ref(links) as usize);
        }
    }

    /// Starts loading the links of `index`'s neighbours, which `touch` will rewrite.
    #[inline]
    pub fn prefetch_neighbours(&self, index: u32) {
        if let Some(links) = self.links.get(index as usize) {
            for neighbour in [links.newer, links.older].into_iter().flatten() {
                self.prefetch(index_of(neighbour));
            }
        }
    }

    /// Marks `index` as the most recently used record.
    #[inline]
    pub fn touch(&mut self, index: u32) {
        if self.newest != link(index) {
            self.unlink(index);
            self.push_newest(index);
        }
    }

    /// Whether `index` is in the list: a linked entry has a neighbour or is the only one
    /// (`unlink` resets the links of the entries it takes out).
    pub fn contains(&self, index: u32) -> bool {
        self.newest == link(index)
            || self.links.get(index as usize).is_some_and(|l| l.newer.is_some() || l.older.is_some())
    }

    /// The least recently used record, the next to evict.
    pub fn oldest(&self) -> Option<u32> {
        self.oldest.map(index_of)
    }

    /// Slab indices from the least to the most recently used.
    pub fn oldest_first(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(self.oldest.map(index_of), move |&index| {
            self.links.get(index as usize).and_then(|l| l.newer).map(index_of)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn matches_a_deque() {
        let mut list = LruList::default();
        let mut model: VecDeque<u32> = VecDeque::new(); // front = oldest
        let mut rng = crate::split_mix::SplitMix64::new(12345);
        for _ in 0..5000 {
            let state = rng.next_u64();
            let index = ((state >> 33) % 40) as u32;
            let present = model.contains(&index);
            match (state >> 20) % 3 {
                0 if !present => {
                    list.push_newest(index);
                    model.push_back(index);
                }
                1 if present => {
                    list.touch(index);
                    model.retain(|&i| i != index);
                    model.push_back(index);
                }
                2 if present => {
                    list.unlink(index);
                    model.retain(|&i| i != index);
                }
                _ => {}
            }
            assert_eq!(list.oldest_first().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            assert_eq!(list.oldest(), model.front().copied());
            assert!((0..40).all(|i| list.contains(i) == model.contains(&i)));
        }
    }
}
