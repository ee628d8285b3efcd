//! Branch pages pinned for reads without atomic operations.
//!
//! Every lookup passes through the root and the upper branches, so going through the page
//! cache for them (a shard lock and a reference count, each an atomic read-modify-write) costs
//! more than searching them, and with several reader threads those shared counters bounce
//! between cores. A few branch pages are therefore also kept here, in a small direct-mapped
//! table of write-once cells: a reader finds a pinned page with plain loads and borrows it for
//! as long as it holds the tree's read lock.
//!
//! Soundness of the borrow: a cell is only emptied through `&mut self` (the writer, which
//! excludes readers), and the writer empties the cell of an offset whenever that slot stops
//! holding that page (made dirty, freed, or the file cleared), so a pinned page is always the
//! page at its offset in the committed tree.

use std::sync::{Arc, OnceLock};

use super::page::Page;

/// Cells in the table (a power of two). Branch pages are about one in a hundred and fifty
/// pages: a tree of 1M records of 174 bytes has about 250, which 64 cells, direct-mapped,
/// left mostly to the page cache's shard locks and reference counts (`perf`: 14% of a cold
/// read phase in `offer`). 1,024 cells take 24 KiB and pin most branches of a tree of a few
/// million records, and the upper levels of any.
const CELLS: usize = 1024;
const _: () = assert!(CELLS.is_power_of_two());

/// A pinned page and the offset it was read from; empty until a reader fills it.
type Cell = OnceLock<(u64, Arc<Page>)>;

fn cell_index(offset: u64) -> usize {
    // Slots are 16-byte aligned: mix before choosing a cell.
    ((offset >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - CELLS.trailing_zeros())) as usize
}

pub struct PinnedPages {
    cells: Box<[Cell]>,
}

impl Default for PinnedPages {
    fn default() -> Self {
        PinnedPages { cells: (0..CELLS).map(|_| OnceLock::new()).collect() }
    }
}

impl PinnedPages {
    fn cell(&self, offset: u64) -> Option<&Cell> {
        self.cells.get(cell_index(offset))
    }

    /// The page pinned for `offset`, if any.
    #[inline]
    pub fn get(&self, offset: u64) -> Option<&Arc<Page>> {
        match self.cell(offset)?.get() {
            Some((pinned, page)) if *pinned == offset => Some(page),
            _ => None,
        }
    }

    /// Pins `page` (read from `offset`) if it is a branch and its cell is free. A full cell is
    /// seen before the page's reference count is touched: cloning it for a `set` that fails
    /// was two atomic operations on a count every reader thread of that page shares.
    pub fn offer(&self, offset: u64, page: &Arc<Page>) {
        if let Some(cell) = self.cell(offset) {
            if cell.get().is_none() && matches!(**page, Page::Branch(_)) {
                let _ = cell.set((offset, Arc::clone(page)));
            }
        }
    }

    /// Unpins the page of `offset`, if pinned; returns it.
    pub fn unpin(&mut self, offset: u64) -> Option<Arc<Page>> {
        let cell = self.cells.get_mut(cell_index(offset))?;
        match cell.get() {
            Some((pinned, _)) if *pinned == offset => cell.take().map(|(_, page)| page),
            _ => None,
        }
    }

    pub fn clear(&mut self) {
        for cell in self.cells.iter_mut() {
            cell.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree_dbm::page::{Branch, Leaf};

    /// Offsets whose cells collide, found by the cell function itself.
    fn colliding_offsets() -> (u64, u64) {
        let first = 16;
        let second = (2..).map(|n| n * 16).find(|&offset| cell_index(offset) == cell_index(first));
        (first, second.unwrap_or_else(|| unreachable!("the cells repeat within 2^60 offsets")))
    }

    /// Only branches are pinned, a pinned page is found at its own offset only, a full cell
    /// keeps its page and holds no reference to a page offered after it, and an emptied cell
    /// takes the next branch offered.
    #[test]
    fn branches_are_pinned_once_per_cell() {
        let pins = PinnedPages::default();
        let (first, second) = colliding_offsets();
        let leaf = Arc::new(Page::Leaf(Leaf::new()));
        pins.offer(first, &leaf);
        assert!(pins.get(first).is_none(), "a leaf is never pinned");
        let branch = Arc::new(Page::Branch(Branch::new(1)));
        pins.offer(first, &branch);
        assert!(pins.get(first).is_some_and(|page| Arc::ptr_eq(page, &branch)));
        assert_eq!(Arc::strong_count(&branch), 2, "the pin holds one reference");
        let other = Arc::new(Page::Branch(Branch::new(2)));
        pins.offer(second, &other);
        assert!(pins.get(second).is_none(), "the cell was taken by the first branch");
        assert_eq!(Arc::strong_count(&other), 1, "a full cell holds no reference to a page offered after it");
        let mut pins = pins;
        assert!(pins.unpin(second).is_none(), "another offset's pin is not unpinned");
        assert!(pins.unpin(first).is_some_and(|page| Arc::ptr_eq(&page, &branch)));
        pins.offer(second, &other);
        assert!(pins.get(second).is_some(), "an emptied cell takes the next branch offered");
    }
}
