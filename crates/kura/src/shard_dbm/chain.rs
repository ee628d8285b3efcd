//! The cursor of a set of unordered shards: shard 0's records, then shard 1's, and so on.
//!
//! `jump` goes to the one shard that can hold the key, and `next` continues from there into
//! the following shards, so a jump followed by `next` calls still visits each record once.

use crate::dbm::Cursor;
use crate::error::Result;

use super::route::shard_of;

pub struct ChainCursor<'a> {
    cursors: Vec<Box<dyn Cursor + 'a>>,
    /// The shard whose cursor is at a record; `None` before a move or past the end.
    current: Option<usize>,
}

impl<'a> ChainCursor<'a> {
    pub fn new(cursors: Vec<Box<dyn Cursor + 'a>>) -> ChainCursor<'a> {
        ChainCursor { cursors, current: None }
    }

    /// Moves to the first record of the first non-empty shard from `start` on.
    fn first_from(&mut self, start: usize) -> Result<bool> {
        self.current = None;
        for (index, cursor) in self.cursors.iter_mut().enumerate().skip(start) {
            if cursor.first()? {
                self.current = Some(index);
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn at(&mut self) -> Option<&mut Box<dyn Cursor + 'a>> {
        self.current.and_then(|index| self.cursors.get_mut(index))
    }
}

impl Cursor for ChainCursor<'_> {
    fn first(&mut self) -> Result<bool> {
        self.first_from(0)
    }

    fn jump(&mut self, key: &[u8]) -> Result<bool> {
        let index = shard_of(key, self.cursors.len());
        self.current = None;
        let Some(cursor) = self.cursors.get_mut(index) else {
            return Ok(false);
        };
        let found = cursor.jump(key)?;
        if found {
            self.current = Some(index);
        }
        Ok(found)
    }

    fn next(&mut self) -> Result<bool> {
        let Some(index) = self.current else {
            return Ok(false);
        };
        if let Some(cursor) = self.cursors.get_mut(index) {
            if cursor.next()? {
                return Ok(true);
            }
        }
        self.first_from(index + 1)
    }

    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self.at() {
            Some(cursor) => cursor.record(),
            None => Ok(None),
        }
    }

    fn key(&mut self) -> Result<Option<Vec<u8>>> {
        match self.at() {
            Some(cursor) => cursor.key(),
            None => Ok(None),
        }
    }

    fn set(&mut self, value: &[u8]) -> Result<()> {
        match self.at() {
            Some(cursor) => cursor.set(value),
            None => Err(crate::Error::not_found("the cursor is at no record")),
        }
    }

    fn remove(&mut self) -> Result<()> {
        let Some(index) = self.current else {
            return Err(crate::Error::not_found("the cursor is at no record"));
        };
        let Some(cursor) = self.cursors.get_mut(index) else {
            return Err(crate::Error::not_found("the cursor is at no record"));
        };
        cursor.remove()?;
        // The shard's cursor moved to its next record; past its last, go on to the next shard.
        if cursor.key()?.is_none() {
            self.first_from(index + 1)?;
        }
        Ok(())
    }
}
