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

/// Cells in the table. Branch pages are about one in several hundred pages, so this holds the
/// upper levels of trees of many millions of records.
const CELLS: usize = 64;

/// A pinned page and the offset it was read from; empty until a reader fills it.
type Cell = OnceLock<(u64, Arc<Page>)>;

fn cell_index(offset: u64) -> usize {
    // Slots are 16-byte aligned: mix before choosing a cell.
    ((offset >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % CELLS
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

    /// Pins `page` (read from `offset`) if it is a branch and its cell is free.
    pub fn offer(&self, offset: u64, page: &Arc<Page>) {
        if matches!(**page, Page::Branch(_)) {
            if let Some(cell) = self.cell(offset) {
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
