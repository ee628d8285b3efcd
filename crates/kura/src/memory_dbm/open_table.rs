//! The hash table of one TinyDbm slot: open addressing with linear probing, the records
//! stored in the cells themselves.
//!
//! Why: with 1M records neither the table nor the records fit in the caches, so a lookup
//! costs one cache miss per dependent load. A bucket array pointing into a slab takes two
//! (bucket, then entry); here the home cell of a key usually holds its record, and a probe
//! that goes on reads the next cell, mostly on the same or the adjacent cache line, which the
//! hardware fetches ahead. So a lookup costs about one miss.
//!
//! Removal leaves a tombstone (unless the next cell is empty), so a live record never moves
//! except when the whole table is rebuilt (`rehash`), which only an insert can trigger.
//! (Cursors therefore walk snapshots of keys, not cell indices: see `slotted.rs`.)

use std::mem;

use super::record::{RecordBytes, HEAP_OVERHEAD, INLINE_CAPACITY};
use super::slotted::SlotRecords;
use crate::error::{Error, ErrorKind, Result};
use crate::file::prefetch;

/// One cell: empty (`record` None, not a tombstone), a tombstone, or a live record with the
/// low half of its key's hash (it picks the home cell again on a rebuild, and skips most key
/// comparisons while probing).
#[derive(Default)]
struct Cell {
    record: Option<RecordBytes>,
    hash: u32,
    tombstone: bool,
}

// 24-byte record + hash + flag: the per-cell footprint documented in docs/memory.md.
const _: () = assert!(mem::size_of::<Cell>() == 32);

/// Size of one cell, for memory accounting.
pub const CELL_BYTES: usize = mem::size_of::<Cell>();

/// The most cells a table has: cell indices must fit in a u32.
const MAX_CELLS: usize = 1 << 31;

/// The heap bytes a record holds outside its cell (none when inline).
#[inline]
fn heap_bytes(record: &RecordBytes) -> usize {
    let payload = record.key().len() + record.value().len();
    if payload > INLINE_CAPACITY {
        payload.saturating_add(HEAP_OVERHEAD)
    } else {
        0
    }
}

/// Invariants: `cells.len()` is a power of two; `live + tombstones` stays at most 3/4 of the
/// cells (kept by `insert`), so every probe sequence meets an empty cell and ends; every live
/// record sits at or after its home cell (cyclically) with no empty cell in between.
pub struct OpenTable {
    cells: Vec<Cell>,
    live: usize,
    tombstones: usize,
    /// Sum of `heap_bytes` over the live records.
    heap: usize,
}

fn empty_cells(count: usize) -> Vec<Cell> {
    let mut cells = Vec::with_capacity(count);
    cells.resize_with(count, Cell::default);
    cells
}

impl OpenTable {
    /// A table of `num_cells` cells (rounded up to a power of two, at least 8).
    pub fn new(num_cells: usize) -> OpenTable {
        let num_cells = num_cells.clamp(8, MAX_CELLS).next_power_of_two();
        OpenTable { cells: empty_cells(num_cells), live: 0, tombstones: 0, heap: 0 }
    }

    pub fn num_cells(&self) -> usize {
        self.cells.len()
    }

    /// Bytes held: the cells plus the heap blocks of spilled records.
    pub fn memory_bytes(&self) -> usize {
        self.cells.len() * CELL_BYTES + self.heap
    }

    /// Removes every record, keeping the cell count.
    pub fn clear(&mut self) {
        *self = OpenTable::new(self.cells.len());
    }

    #[inline]
    fn mask(&self) -> usize {
        self.cells.len() - 1
    }

    #[inline]
    fn cell(&self, index: usize) -> &Cell {
        self.cells.get(index).expect("invariant: probe indices are masked into the table")
    }

    /// The home cell of the key hashed `hash`: where its probe starts.
    #[inline]
    fn home(&self, hash: u64) -> Option<&Cell> {
        self.cells.get(hash as u32 as usize & self.mask())
    }

    /// Starts loading the home cell of the key hashed `hash` (a batched lookup's first stage).
    #[inline]
    pub fn prefetch_home(&self, hash: u64) {
        if let Some(cell) = self.home(hash) {
            prefetch(std::ptr::from_ref(cell) as usize);
        }
    }

    /// Starts loading the heap block of the record in the home cell of `hash` when that
    /// record is likely the key's (same hash) and spilled to the heap (the second stage).
    #[inline]
    pub fn prefetch_home_record(&self, hash: u64) {
        if let Some(Cell { record: Some(record), hash: cell_hash, .. }) = self.home(hash) {
            if *cell_hash == hash as u32 {
                record.prefetch_spilled();
            }
        }
    }

    /// Replaces the value of the live record at `index`.
    pub fn set_value(&mut self, index: u32, value: &[u8]) -> Result<()> {
        let cell = self.cells.get_mut(index as usize).ok_or_else(|| Error::not_found("the record is gone"))?;
        let record = cell.record.as_mut().ok_or_else(|| Error::not_found("the record is gone"))?;
        let old = heap_bytes(record);
        record.set_value(value)?;
        self.heap = self.heap - old + heap_bytes(record);
        Ok(())
    }

    /// Adds a record for a key known to be absent; returns its cell index. May rebuild the
    /// table first (which moves every record).
    pub fn insert(&mut self, record: RecordBytes, hash: u64) -> Result<u32> {
        if (self.live + self.tombstones + 1) * 4 > self.cells.len() * 3 {
            // Grow when live records alone would fill more than half the new table;
            // otherwise a same-size rebuild that only drops the tombstones is enough.
            let wanted = if (self.live + 1) * 2 > self.cells.len() { self.cells.len() * 2 } else { self.cells.len() };
            if wanted > MAX_CELLS {
                return Err(Error::new(ErrorKind::Limit, "too many records in one slot"));
            }
            self.rehash(wanted);
        }
        let hash = hash as u32;
        self.heap += heap_bytes(&record);
        let index = self.place(record, hash);
        self.live += 1;
        debug_assert!(
            self.cells.len().is_power_of_two() && (self.live + self.tombstones) * 4 <= self.cells.len() * 3,
            "invariant: a power-of-two table at most 3/4 full"
        );
        Ok(index as u32)
    }

    /// Puts a record in the first free cell of its probe sequence (reusing a tombstone).
    fn place(&mut self, record: RecordBytes, hash: u32) -> usize {
        let mask = self.mask();
        let mut index = hash as usize & mask;
        loop {
            let cell = self.cells.get_mut(index).expect("invariant: probe indices are masked into the table");
            if cell.record.is_none() {
                if cell.tombstone {
                    self.tombstones -= 1;
                }
                *cell = Cell { record: Some(record), hash, tombstone: false };
                return index;
            }
            index = (index + 1) & mask;
        }
    }

    /// Removes the live record at `index` and returns it.
    pub fn remove(&mut self, index: u32) -> Option<RecordBytes> {
        let index = index as usize;
        let mask = self.mask();
        let next_is_empty = self.cells.get((index + 1) & mask).is_some_and(|c| c.record.is_none() && !c.tombstone);
        let cell = self.cells.get_mut(index)?;
        let record = cell.record.take()?;
        self.live -= 1;
        self.heap -= heap_bytes(&record);
        if next_is_empty {
            // No probe needs to pass this cell: it and the tombstones just before it become
            // empty again, which keeps probe sequences short after removals.
            let mut at = index;
            loop {
                at = at.wrapping_sub(1) & mask;
                match self.cells.get_mut(at) {
                    Some(previous) if previous.tombstone && at != index => {
                        previous.tombstone = false;
                        self.tombstones -= 1;
                    }
                    _ => break,
                }
            }
        } else {
            cell.tombstone = true;
            self.tombstones += 1;
        }
        Some(record)
    }

    /// Rebuilds the table with `num_cells` cells (a power of two, at least 8), raised as far
    /// as the live records need.
    pub fn resize(&mut self, num_cells: usize) {
        let mut wanted = num_cells.clamp(8, MAX_CELLS).next_power_of_two();
        while wanted < MAX_CELLS && self.live * 2 > wanted {
            wanted *= 2;
        }
        self.rehash(wanted);
    }

    fn rehash(&mut self, num_cells: usize) {
        let old = mem::replace(&mut self.cells, empty_cells(num_cells));
        self.tombstones = 0;
        for cell in old {
            if let Some(record) = cell.record {
                self.place(record, cell.hash);
            }
        }
    }
}

impl SlotRecords for OpenTable {
    type Record<'a> = &'a RecordBytes;

    fn len(&self) -> usize {
        self.live
    }

    /// The cell index of `key`'s record.
    #[inline]
    fn find(&self, key: &[u8], hash: u64) -> Option<u32> {
        let hash = hash as u32;
        let mask = self.mask();
        let mut index = hash as usize & mask;
        loop {
            let cell = self.cell(index);
            match &cell.record {
                Some(record) if cell.hash == hash && record.key() == key => return Some(index as u32),
                Some(_) => {}
                None if cell.tombstone => {}
                None => return None,
            }
            index = (index + 1) & mask;
        }
    }

    /// The record at `index`, if that cell is live.
    #[inline]
    fn get(&self, index: u32) -> Option<&RecordBytes> {
        self.cells.get(index as usize).and_then(|c| c.record.as_ref())
    }

    /// The cell count: at most `MAX_CELLS`, 2^31.
    fn index_end(&self) -> u32 {
        self.cells.len() as u32
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;
    use crate::memory_dbm::key_hash::hash_key;
    use std::collections::HashMap;

    #[test]
    fn matches_a_hash_map_through_growth_removal_and_rebuilds() {
        let mut table = OpenTable::new(1);
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut rng = crate::split_mix::SplitMix64::new(99);
        for step in 0..40_000u32 {
            let state = rng.next_u64();
            let key = format!("k{}", (state >> 33) % 3000).into_bytes();
            let hash = hash_key(&key);
            let found = table.find(&key, hash);
            assert_eq!(found.is_some(), model.contains_key(&key));
            match (state >> 20) % 4 {
                0 | 1 => {
                    let value = vec![step as u8; (step % 40) as usize];
                    match found {
                        Some(index) => table.set_value(index, &value).unwrap(),
                        None => {
                            let index = table.insert(RecordBytes::new(&key, &value).unwrap(), hash).unwrap();
                            assert_eq!(table.get(index).unwrap().key(), &key[..]);
                        }
                    }
                    model.insert(key, value);
                }
                2 => {
                    if let Some(index) = found {
                        assert_eq!(table.remove(index).unwrap().key(), &key[..]);
                        assert!(table.remove(index).is_none());
                    }
                    model.remove(&key);
                }
                _ => {
                    if let Some(index) = found {
                        assert_eq!(table.get(index).unwrap().value(), &model[&key][..]);
                    }
                }
            }
            assert_eq!(table.len(), model.len());
            if step % 10_000 == 0 {
                table.resize(1);
            }
        }
        assert!((table.live + table.tombstones) * 4 <= table.num_cells() * 3);
        let heap: usize = model.iter().map(|(k, v)| RecordBytes::new(k, v).unwrap()).map(|r| heap_bytes(&r)).sum();
        assert_eq!(table.memory_bytes(), table.num_cells() * CELL_BYTES + heap);
        let mut seen: Vec<(Vec<u8>, Vec<u8>)> =
            table.records_from(0).map(|(_, r)| (r.key().to_vec(), r.value().to_vec())).collect();
        seen.sort();
        let mut expected: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
        expected.sort();
        assert_eq!(seen, expected);
    }
}
