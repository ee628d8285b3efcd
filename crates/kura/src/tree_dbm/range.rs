//! Rust ranges over a tree: `db.range(a..b)` iterates in key order, `.rev()` backwards, and
//! both ends may be consumed alternately (a double-ended iterator).
//!
//! Each end is a cursor; an end stops at the range bound or where the other end has already
//! been, so no record is yielded twice.

use std::cmp::Ordering;
use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

use super::comparator::Comparator;
use super::cursor::TreeCursor;
use super::TreeDbm;
use crate::dbm::{Cursor, OrderedCursor};
use crate::error::Result;

/// Key bounds: implemented by Rust's range types over anything that is bytes, so that
/// `db.range(..)`, `db.range("a".."c")` and `db.range(&key[..]..=&other[..])` all work.
pub trait KeyRange {
    /// The range's start and end bounds.
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>);
}

fn owned<K: AsRef<[u8]>>(bound: Bound<K>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl KeyRange for RangeFull {
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for Range<K> {
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Included(self.start.as_ref().to_vec()), Bound::Excluded(self.end.as_ref().to_vec()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeInclusive<K> {
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let (start, end) = self.into_inner();
        (Bound::Included(start.as_ref().to_vec()), Bound::Included(end.as_ref().to_vec()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeFrom<K> {
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Included(self.start.as_ref().to_vec()), Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeTo<K> {
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, Bound::Excluded(self.end.as_ref().to_vec()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeToInclusive<K> {
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, Bound::Included(self.end.as_ref().to_vec()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for (Bound<K>, Bound<K>) {
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (owned(self.0), owned(self.1))
    }
}

/// An iterator over the records of a key range, from either end.
///
/// Besides the owned pairs of `Iterator`, `next_with` and `next_back_with` lend each key and
/// value from the decoded page (as `Cursor::record_with` does), so that a binding builds its
/// objects from them without copying them into vectors first.
pub struct TreeRange<'a> {
    db: &'a TreeDbm,
    comparator: Comparator,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    front: End<'a>,
    back: End<'a>,
    done: bool,
}

/// One end of a range: its cursor once placed, and the last key it yielded, which the other
/// end must stay strictly inside of (a buffer reused from record to record).
#[derive(Default)]
struct End<'a> {
    cursor: Option<TreeCursor<'a>>,
    last_key: Option<Vec<u8>>,
}

impl<'a> TreeRange<'a> {
    pub(super) fn new(db: &'a TreeDbm, (lower, upper): (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> TreeRange<'a> {
        // (Read as the tree stands: the comparator is the file's, whatever waits in the write
        // buffer, which the range's first read applies.)
        let comparator = db.read_undrained().map(|store| store.tree.comparator()).unwrap_or_default();
        TreeRange { db, comparator, lower, upper, front: End::default(), back: End::default(), done: false }
    }

    /// Lends the next record from the front to `visit`; false at the end of the range.
    pub fn next_with(&mut self, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<bool> {
        self.lend(false, visit)
    }

    /// Lends the next record from the back to `visit`; false at the end of the range.
    pub fn next_back_with(&mut self, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<bool> {
        self.lend(true, visit)
    }

    /// `step`, and the range done after its end or an error.
    fn lend(&mut self, backward: bool, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let stepped = self.step(backward, visit);
        if !matches!(stepped, Ok(true)) {
            self.done = true;
        }
        stepped
    }

    /// Moves one end a record on and lends that record, unless it lies beyond the end's bound
    /// (the upper bound for the front, the lower for the back) or where the other end has been.
    fn step(&mut self, backward: bool, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<bool> {
        let TreeRange { db, comparator, lower, upper, front, back, .. } = self;
        let (end, other, bound) = if backward { (back, &*front, &*lower) } else { (front, &*back, &*upper) };
        let moved = match &mut end.cursor {
            Some(cursor) if backward => cursor.previous()?,
            Some(cursor) => cursor.next()?,
            None => {
                let mut cursor = TreeCursor::new(db);
                let moved = match (backward, &*lower, &*upper) {
                    (false, Bound::Unbounded, _) => cursor.first()?,
                    (false, Bound::Included(key), _) => cursor.jump_upper(key, true)?,
                    (false, Bound::Excluded(key), _) => cursor.jump_upper(key, false)?,
                    (true, _, Bound::Unbounded) => cursor.last()?,
                    (true, _, Bound::Included(key)) => cursor.jump_lower(key, true)?,
                    (true, _, Bound::Excluded(key)) => cursor.jump_lower(key, false)?,
                };
                end.cursor = Some(cursor);
                moved
            }
        };
        let Some(cursor) = end.cursor.as_mut().filter(|_| moved) else {
            return Ok(false);
        };
        // Ahead is the direction the end moves in: past its bound, or at or past the other
        // end's last key, the range is exhausted.
        let ahead = if backward { Ordering::Less } else { Ordering::Greater };
        let comparator = *comparator;
        let last_key = &mut end.last_key;
        let mut lent = false;
        cursor.record_with(&mut |key, value| {
            let beyond = match bound {
                Bound::Unbounded => false,
                Bound::Included(limit) => comparator.compare(key, limit) == ahead,
                Bound::Excluded(limit) => comparator.compare(key, limit) != ahead.reverse(),
            };
            let met = other.last_key.as_deref().is_some_and(|seen| comparator.compare(key, seen) != ahead.reverse());
            if beyond || met {
                return;
            }
            let buffer = last_key.get_or_insert_with(Vec::new);
            buffer.clear();
            buffer.extend_from_slice(key);
            visit(key, value);
            lent = true;
        })?;
        Ok(lent)
    }

    /// The next record from one end, owned.
    fn owned(&mut self, backward: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        let mut record = None;
        match self.lend(backward, &mut |key, value| record = Some((key.to_vec(), value.to_vec()))) {
            Ok(true) => record.map(Ok),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl Iterator for TreeRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.owned(false)
    }
}

impl DoubleEndedIterator for TreeRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.owned(true)
    }
}
