//! The ordered cursor of a set of ordered shards: a k-way merge of the shards' own cursors.
//!
//! Every shard's cursor stands at its own candidate, and the merged cursor is at the smallest
//! candidate (going forward) or the largest (going backward). A key lives in exactly one
//! shard, so candidates never tie. Turning around (`previous` after `next`) re-seats every
//! shard's cursor beside the current key, as a jump would. With few shards a linear scan for
//! the smallest candidate beats a heap, and it stays simple.

use crate::dbm::{Cursor, OrderedCursor};
use crate::error::{Error, Result};
use crate::tree_dbm::Comparator;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Backward,
}

/// One shard's cursor and the key it stands at (`None`: nothing left in this direction).
struct Lane<'a> {
    cursor: Box<dyn OrderedCursor + 'a>,
    key: Option<Vec<u8>>,
}

pub struct MergeCursor<'a> {
    lanes: Vec<Lane<'a>>,
    comparator: Comparator,
    direction: Direction,
    /// The lane whose key is the merged cursor's position.
    current: Option<usize>,
}

impl<'a> MergeCursor<'a> {
    pub fn new(cursors: Vec<Box<dyn OrderedCursor + 'a>>, comparator: Comparator) -> MergeCursor<'a> {
        let lanes = cursors.into_iter().map(|cursor| Lane { cursor, key: None }).collect();
        MergeCursor { lanes, comparator, direction: Direction::Forward, current: None }
    }

    /// Moves every lane with `seat`, reads its key, and picks the winner in `direction`.
    fn seat_all(
        &mut self,
        direction: Direction,
        mut seat: impl FnMut(&mut dyn OrderedCursor) -> Result<bool>,
    ) -> Result<bool> {
        for lane in &mut self.lanes {
            let moved = seat(lane.cursor.as_mut())?;
            lane.key = if moved { settled_key(lane.cursor.as_mut(), direction)? } else { None };
        }
        self.direction = direction;
        Ok(self.pick())
    }

    /// Chooses the lane with the smallest key (forward) or the largest (backward).
    fn pick(&mut self) -> bool {
        let comparator = self.comparator;
        let keyed = self.lanes.iter().enumerate().filter_map(|(i, lane)| lane.key.as_deref().map(|k| (i, k)));
        let best = match self.direction {
            Direction::Forward => keyed.min_by(|a, b| comparator.compare(a.1, b.1)),
            Direction::Backward => keyed.max_by(|a, b| comparator.compare(a.1, b.1)),
        };
        self.current = best.map(|(i, _)| i);
        self.current.is_some()
    }

    fn current_key(&self) -> Option<Vec<u8>> {
        self.current.and_then(|i| self.lanes.get(i)).and_then(|lane| lane.key.clone())
    }

    /// Steps in `direction`: the winning lane advances, or, after a turn, every lane is
    /// re-seated strictly beyond the current key.
    fn step(&mut self, direction: Direction) -> Result<bool> {
        let Some(key) = self.current_key() else {
            return Ok(false);
        };
        if direction != self.direction {
            return self.seat_beyond(&key, direction);
        }
        let Some(lane) = self.current.and_then(|i| self.lanes.get_mut(i)) else {
            return Ok(false);
        };
        let moved = match direction {
            Direction::Forward => lane.cursor.next()?,
            Direction::Backward => lane.cursor.previous()?,
        };
        lane.key = if moved { settled_key(lane.cursor.as_mut(), direction)? } else { None };
        Ok(self.pick())
    }

    fn seat_beyond(&mut self, key: &[u8], direction: Direction) -> Result<bool> {
        match direction {
            Direction::Forward => self.seat_all(direction, |c| c.jump_upper(key, false)),
            Direction::Backward => self.seat_all(direction, |c| c.jump_lower(key, false)),
        }
    }

    fn at(&mut self) -> Option<&mut Lane<'a>> {
        self.current.and_then(|i| self.lanes.get_mut(i))
    }
}

/// The key a lane's cursor stands at; a record removed by another thread since the move is
/// stepped over in the same direction.
fn settled_key(cursor: &mut dyn OrderedCursor, direction: Direction) -> Result<Option<Vec<u8>>> {
    loop {
        if let Some(key) = cursor.key()? {
            return Ok(Some(key));
        }
        let moved = match direction {
            Direction::Forward => cursor.next()?,
            Direction::Backward => cursor.previous()?,
        };
        if !moved {
            return Ok(None);
        }
    }
}

impl Cursor for MergeCursor<'_> {
    fn first(&mut self) -> Result<bool> {
        self.seat_all(Direction::Forward, |c| c.first())
    }

    fn jump(&mut self, key: &[u8]) -> Result<bool> {
        self.seat_all(Direction::Forward, |c| c.jump(key))
    }

    fn next(&mut self) -> Result<bool> {
        self.step(Direction::Forward)
    }

    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self.at() {
            Some(lane) => lane.cursor.record(),
            None => Ok(None),
        }
    }

    fn key(&mut self) -> Result<Option<Vec<u8>>> {
        match self.at() {
            Some(lane) => lane.cursor.key(),
            None => Ok(None),
        }
    }

    fn set(&mut self, value: &[u8]) -> Result<()> {
        match self.at() {
            Some(lane) => lane.cursor.set(value),
            None => Err(Error::not_found("the cursor is at no record")),
        }
    }

    fn remove(&mut self) -> Result<()> {
        let Some(key) = self.current_key() else {
            return Err(Error::not_found("the cursor is at no record"));
        };
        if let Some(lane) = self.at() {
            lane.cursor.remove()?;
        }
        // Removing moves to the next record in key order, whichever shard holds it.
        self.seat_beyond(&key, Direction::Forward)?;
        Ok(())
    }
}

impl OrderedCursor for MergeCursor<'_> {
    fn last(&mut self) -> Result<bool> {
        self.seat_all(Direction::Backward, |c| c.last())
    }

    fn previous(&mut self) -> Result<bool> {
        self.step(Direction::Backward)
    }

    fn jump_lower(&mut self, key: &[u8], inclusive: bool) -> Result<bool> {
        self.seat_all(Direction::Backward, |c| c.jump_lower(key, inclusive))
    }

    fn jump_upper(&mut self, key: &[u8], inclusive: bool) -> Result<bool> {
        self.seat_all(Direction::Forward, |c| c.jump_upper(key, inclusive))
    }
}
