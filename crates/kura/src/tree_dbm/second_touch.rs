//! Which leaves a point read beyond memory decodes into the cache of decoded pages (cache.rs):
//! those read twice in a while.
//!
//! In a file larger than half the memory (pager.rs, `exceeds_memory`), a leaf that a `get`
//! finds neither pinned nor cached is read with one `pread`, and the read's bytes are searched
//! where they lie (`Leaf::find_encoded`). Decoding the leaf into the cache as well cost a
//! tenth of such a read's processor time (8M records under 512 MiB, `perf`: the arena and
//! index allocations, the insert and the evictions it forced), for a page that random reads
//! of a file eight times the cache find again about one time in twenty before it is evicted;
//! and the decoded page takes half as much memory again as its bytes, memory that the
//! kernel's page cache, sharing the same limit, would have held the raw leaves in.
//!
//! A leaf read a second time while its offset is still in this table is not random: it is
//! decoded and cached, so that hot leaves are served from the cache as before. The table is
//! direct-mapped and lossy (a newer offset takes an older one's cell): it forgets a leaf after
//! about as many reads of other leaves as it has cells, which is the "while".

use std::sync::atomic::{AtomicU64, Ordering};

/// Cells of the table: 32 KiB. A leaf read again within about this many reads of others
/// counts as hot.
const CELLS: usize = 4096;

/// Offsets of leaves read once lately, each in the cell its hash chooses; 0 is an empty cell
/// (no slot lies at offset 0, the file header does).
pub struct SecondTouch {
    cells: Box<[AtomicU64]>,
}

impl SecondTouch {
    pub fn new() -> SecondTouch {
        SecondTouch { cells: (0..CELLS).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Notes a read of the leaf at `offset`; true when it was read lately too (its offset
    /// still held its cell), which makes it worth a place in the cache.
    pub fn touch(&self, offset: u64) -> bool {
        // Fibonacci hashing: slot offsets are aligned, so their low bits carry nothing.
        let cell = (offset.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - CELLS.trailing_zeros())) as usize;
        // `cells` has CELLS entries and the shift leaves log2(CELLS) bits.
        self.cells.get(cell).is_some_and(|held| held.swap(offset, Ordering::Relaxed) == offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_is_hot_on_its_second_read_while_the_table_remembers_it() {
        let touched = SecondTouch::new();
        assert!(!touched.touch(4096), "a first read is not hot");
        assert!(touched.touch(4096), "a second read is");
        // Reads of many other leaves push it out: random reads stay cold.
        let others: Vec<u64> = (1..=(CELLS as u64 * 8)).map(|i| 4096 + i * 512).collect();
        let hot = others.iter().filter(|&&offset| touched.touch(offset)).count();
        assert_eq!(hot, 0, "leaves read once each were taken for hot");
        assert!(!touched.touch(4096), "a leaf read long ago counts as read once");
    }
}
