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
pub struct TreeRange<'a> {
    db: &'a TreeDbm,
    comparator: Comparator,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    front: Option<TreeCursor<'a>>,
    back: Option<TreeCursor<'a>>,
    /// The last keys yielded from each end: the other end must stay strictly inside them.
    front_key: Option<Vec<u8>>,
    back_key: Option<Vec<u8>>,
    done: bool,
}

impl<'a> TreeRange<'a> {
    pub(super) fn new(db: &'a TreeDbm, (lower, upper): (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> TreeRange<'a> {
        let comparator = db.read().map(|tree| tree.comparator()).unwrap_or_default();
        TreeRange {
            db,
            comparator,
            lower,
            upper,
            front: None,
            back: None,
            front_key: None,
            back_key: None,
            done: false,
        }
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        self.comparator.compare(a, b)
    }

    fn step_front(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let moved = match &mut self.front {
            Some(cursor) => cursor.next()?,
            None => {
                let mut cursor = TreeCursor::new(self.db);
                let moved = match &self.lower {
                    Bound::Unbounded => cursor.first()?,
                    Bound::Included(key) => cursor.jump_upper(key, true)?,
                    Bound::Excluded(key) => cursor.jump_upper(key, false)?,
                };
                self.front = Some(cursor);
                moved
            }
        };
        if !moved {
            return Ok(None);
        }
        let Some(record) = self.front.as_mut().map(|c| c.record()).transpose()?.flatten() else {
            return Ok(None);
        };
        let beyond = match &self.upper {
            Bound::Unbounded => false,
            Bound::Included(key) => self.compare(&record.0, key) == Ordering::Greater,
            Bound::Excluded(key) => self.compare(&record.0, key) != Ordering::Less,
        };
        let met = self.back_key.as_ref().is_some_and(|back| self.compare(&record.0, back) != Ordering::Less);
        if beyond || met {
            return Ok(None);
        }
        self.front_key = Some(record.0.clone());
        Ok(Some(record))
    }

    fn step_back(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let moved = match &mut self.back {
            Some(cursor) => cursor.previous()?,
            None => {
                let mut cursor = TreeCursor::new(self.db);
                let moved = match &self.upper {
                    Bound::Unbounded => cursor.last()?,
                    Bound::Included(key) => cursor.jump_lower(key, true)?,
                    Bound::Excluded(key) => cursor.jump_lower(key, false)?,
                };
                self.back = Some(cursor);
                moved
            }
        };
        if !moved {
            return Ok(None);
        }
        let Some(record) = self.back.as_mut().map(|c| c.record()).transpose()?.flatten() else {
            return Ok(None);
        };
        let beyond = match &self.lower {
            Bound::Unbounded => false,
            Bound::Included(key) => self.compare(&record.0, key) == Ordering::Less,
            Bound::Excluded(key) => self.compare(&record.0, key) != Ordering::Greater,
        };
        let met = self.front_key.as_ref().is_some_and(|front| self.compare(&record.0, front) != Ordering::Greater);
        if beyond || met {
            return Ok(None);
        }
        self.back_key = Some(record.0.clone());
        Ok(Some(record))
    }

    fn finish(&mut self, step: Result<Option<(Vec<u8>, Vec<u8>)>>) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        match step {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for TreeRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.step_front();
        self.finish(step)
    }
}

impl DoubleEndedIterator for TreeRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.step_back();
        self.finish(step)
    }
}
