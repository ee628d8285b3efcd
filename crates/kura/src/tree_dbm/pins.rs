//! Branch pages pinned for reads without atomic operations.
//!
//! Every lookup passes through the root and the upper branches, so going through the page
//! cache for them (a shard lock and a reference count, each an atomic read-modify-write) costs
//! more than searching them, and with several reader threads those shared counters bounce
//! between cores. Branch pages are therefore also kept here, in a direct-mapped table of
//! write-once cells: a reader finds a pinned page with plain loads and borrows it for as long
//! as it holds the tree's read lock.
//!
//! Soundness of the borrow: a cell is only emptied through `&mut self` (the writer, which
//! excludes readers), and the writer empties the cell of an offset whenever that slot stops
//! holding that page (made dirty, freed, or the file cleared), so a pinned page is always the
//! page at its offset in the committed tree.
//!
//! Memory: a pinned page outlives its eviction from the page cache, so the pins are memory
//! beside `cache_bytes`. The table is sized from it: a cell for each sixteenth of the cache a
//! decoded page takes, a power of two from 64 to 1,024.

use std::sync::{Arc, OnceLock};

use super::page::{decoded_page_bytes, Page};

/// The fewest cells: what every cache got before the table was sized from it.
const MIN_CELLS: usize = 64;
/// The most cells. Branch pages are about one in a hundred and fifty pages: a tree of 1M
/// records of 174 bytes has about 250, which 64 cells, direct-mapped, left mostly to the page
/// cache's shard locks and reference counts (`perf`: 14% of a cold read phase in `offer`);
/// 1,024 pin most branches of a tree of a few million records, and the upper levels of any.
const MAX_CELLS: usize = 1024;
/// The pins may hold about this fraction of `cache_bytes` (beyond `MIN_CELLS` pages).
const CACHE_FRACTION: usize = 16;

/// A pinned page and the offset it was read from; empty until a reader fills it.
type Cell = OnceLock<(u64, Arc<Page>)>;

pub struct PinnedPages {
    cells: Box<[Cell]>,
    /// `64 - log2(cells)`: the hash's top bits choose a cell.
    shift: u32,
}

impl PinnedPages {
    /// A table for a page cache of `cache_bytes` holding pages of up to `max_page_size` bytes
    /// (see the module comment).
    pub fn for_cache(cache_bytes: usize, max_page_size: usize) -> PinnedPages {
        let fits = (cache_bytes / CACHE_FRACTION / decoded_page_bytes(max_page_size)).max(1);
        // The largest power of two not above `fits`, within the bounds.
        let cells = (1usize << fits.ilog2()).clamp(MIN_CELLS, MAX_CELLS);
        PinnedPages::with_cells(cells)
    }

    fn with_cells(cells: usize) -> PinnedPages {
        assert!(cells.is_power_of_two() && cells >= 2, "a bug in Kura: {cells} pin cells");
        PinnedPages { cells: (0..cells).map(|_| OnceLock::new()).collect(), shift: 64 - cells.trailing_zeros() }
    }

    fn cell_index(&self, offset: u64) -> usize {
        // Slots are 16-byte aligned: mix before choosing a cell.
        ((offset >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    fn cell(&self, offset: u64) -> Option<&Cell> {
        self.cells.get(self.cell_index(offset))
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
        let index = self.cell_index(offset);
        let cell = self.cells.get_mut(index)?;
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

    /// Two offsets whose cells collide, found by the cell function itself (among any
    /// `cells + 1` offsets two share a cell).
    fn colliding_offsets(pins: &PinnedPages) -> (u64, u64) {
        let first = 16;
        let second = (2..).map(|n| n * 16).find(|&offset| pins.cell_index(offset) == pins.cell_index(first));
        (first, second.unwrap_or_else(|| unreachable!("two of any cells + 1 offsets share a cell")))
    }

    const PAGE: usize = 8192;

    /// The table grows with the cache, within its bounds, and every offset has a cell.
    #[test]
    fn the_table_is_sized_from_the_cache() {
        assert_eq!(PinnedPages::for_cache(0, PAGE).cells.len(), MIN_CELLS);
        assert_eq!(PinnedPages::for_cache(8 << 20, PAGE).cells.len(), MIN_CELLS);
        assert_eq!(PinnedPages::for_cache(32 << 20, PAGE).cells.len(), 128);
        assert_eq!(PinnedPages::for_cache(256 << 20, PAGE).cells.len(), MAX_CELLS);
        assert_eq!(PinnedPages::for_cache(4 << 30, PAGE).cells.len(), MAX_CELLS);
        let pins = PinnedPages::for_cache(64 << 20, PAGE);
        let cells = pins.cells.len();
        assert!((0..100_000u64).all(|n| pins.cell_index(n * 16) < cells));
    }

    /// Only branches are pinned, a pinned page is found at its own offset only, a full cell
    /// keeps its page and holds no reference to a page offered after it, and an emptied cell
    /// takes the next branch offered.
    #[test]
    fn branches_are_pinned_once_per_cell() {
        let pins = PinnedPages::for_cache(256 << 20, PAGE);
        let (first, second) = colliding_offsets(&pins);
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
