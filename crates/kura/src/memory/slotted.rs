//! What TinyDbm and CacheDbm share as sharded hash engines: the cache-line padding of their
//! slot locks, and one cursor that walks slot by slot, slab index by slab index.
//!
//! A position is (slot, index): a slab index (CacheDbm) or a cell index (TinyDbm). A live
//! record's index moves only when an insert rebuilds a TinyDbm slot's table, so a cursor
//! survives concurrent updates; a record removed and re-added elsewhere during a scan, or any
//! record of a TinyDbm slot rebuilt during it, may be seen twice or missed, as with any
//! hash-order scan under writers. A cursor's own `set` and `remove` never move records.

use super::backing::Backing;
use crate::dbm::Cursor;
use crate::error::{Error, Result};

/// Keeps each slot's lock on its own cache line, so threads on different slots do not
/// contend through false sharing.
#[repr(align(64))]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The slot-level primitives the cursor needs.
pub trait Slotted: Sync {
    fn backing(&self) -> &Backing;
    fn num_slots(&self) -> usize;
    /// The slot and slab index of `key`'s record.
    fn locate(&self, key: &[u8]) -> Option<(usize, u32)>;
    /// The first live index at or after `from` in `slot`.
    fn next_live(&self, slot: usize, from: u32) -> Option<u32>;
    /// The record at a position, or None if that entry is vacant now.
    fn record_at(&self, slot: usize, index: u32) -> Option<(Vec<u8>, Vec<u8>)>;
    fn key_at(&self, slot: usize, index: u32) -> Option<Vec<u8>>;
    /// Replaces the value at a position; NotFound if vacant.
    fn set_at(&self, slot: usize, index: u32, value: &[u8]) -> Result<()>;
    /// Removes the record at a position; NotFound if vacant.
    fn remove_at(&self, slot: usize, index: u32) -> Result<()>;
}

pub struct SlottedCursor<'d, S: Slotted> {
    dbm: &'d S,
    position: Option<(usize, u32)>,
}

impl<'d, S: Slotted> SlottedCursor<'d, S> {
    pub fn new(dbm: &'d S) -> Self {
        SlottedCursor { dbm, position: None }
    }

    /// Moves to the first live record at or after (slot, index).
    fn settle(&mut self, mut slot: usize, mut index: u32) -> bool {
        while slot < self.dbm.num_slots() {
            if let Some(found) = self.dbm.next_live(slot, index) {
                self.position = Some((slot, found));
                return true;
            }
            slot += 1;
            index = 0;
        }
        self.position = None;
        false
    }

    fn at(&self) -> Result<(usize, u32)> {
        self.position.ok_or_else(|| Error::not_found("the cursor is at no record"))
    }
}

impl<S: Slotted> Cursor for SlottedCursor<'_, S> {
    fn first(&mut self) -> Result<bool> {
        self.dbm.backing().check_open()?;
        Ok(self.settle(0, 0))
    }

    fn jump(&mut self, key: &[u8]) -> Result<bool> {
        self.dbm.backing().check_open()?;
        self.position = self.dbm.locate(key);
        Ok(self.position.is_some())
    }

    fn next(&mut self) -> Result<bool> {
        self.dbm.backing().check_open()?;
        match self.position {
            None => Ok(false),
            Some((slot, index)) => Ok(self.settle(slot, index.saturating_add(1))),
        }
    }

    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.dbm.backing().check_open()?;
        Ok(self.position.and_then(|(slot, index)| self.dbm.record_at(slot, index)))
    }

    fn key(&mut self) -> Result<Option<Vec<u8>>> {
        self.dbm.backing().check_open()?;
        Ok(self.position.and_then(|(slot, index)| self.dbm.key_at(slot, index)))
    }

    fn set(&mut self, value: &[u8]) -> Result<()> {
        self.dbm.backing().check_writable()?;
        let (slot, index) = self.at()?;
        self.dbm.set_at(slot, index, value)
    }

    fn remove(&mut self) -> Result<()> {
        self.dbm.backing().check_writable()?;
        let (slot, index) = self.at()?;
        self.dbm.remove_at(slot, index)?;
        self.settle(slot, index.saturating_add(1));
        Ok(())
    }
}
