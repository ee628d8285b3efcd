//! Walking the records of a database for `each`, `each_key`, `each_value` and `range`.
//!
//! A walk reads records in chunks (with the GVL released when the database says so) and
//! copies them out before any of them is handed to Ruby: the block then runs with no engine
//! lock held, so it may read, write, `break`, raise or close the database. The cursor kept
//! between chunks holds no lock either (a Kura cursor stays valid while others write).
//!
//! Order: an unordered engine walks in its own order; TreeDbm walks a key range in its own
//! key order (its comparator) with `TreeRange`; the other ordered engine (BabyDbm) compares
//! keys as bytes, the only order it has.

use std::cmp::Ordering;
use std::ops::Bound;

use kura::tree_dbm::TreeRange;
use kura::{Cursor, OrderedCursor};

/// Records read per chunk: enough to amortise releasing the GVL, few enough that a block
/// that stops early (`first`, `find`, `break`) wastes little.
const CHUNK_RECORDS: usize = 256;

/// Bytes per chunk at most (beyond one record), so big values do not pile up in memory.
const CHUNK_BYTES: usize = 1 << 20;

/// What a walk yields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Yield {
    Pairs,
    Keys,
    Values,
}

impl Yield {
    pub fn from_code(code: u8) -> Option<Yield> {
        match code {
            0 => Some(Yield::Pairs),
            1 => Some(Yield::Keys),
            2 => Some(Yield::Values),
            _ => None,
        }
    }
}

/// A record of a chunk; the part the walk does not yield is left empty.
pub type Record = (Vec<u8>, Vec<u8>);

/// A walk: where it is, and whether it has reached its end (then it stays there).
pub struct Walk<'a> {
    kind: Kind<'a>,
    done: bool,
}

/// An engine walk of any kind.
pub enum Kind<'a> {
    /// The engine's own order, start to end.
    Plain { cursor: Box<dyn Cursor + 'a>, started: bool },
    /// TreeDbm: a key range, forwards or backwards.
    Tree { range: TreeRange<'a>, reversed: bool },
    /// Another ordered engine: a key range in byte order, forwards or backwards.
    Ordered {
        cursor: Box<dyn OrderedCursor + 'a>,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reversed: bool,
        started: bool,
    },
}

impl<'a> Walk<'a> {
    pub fn new(kind: Kind<'a>) -> Walk<'a> {
        Walk { kind, done: false }
    }

    /// The next records, at most a chunk; empty at the end.
    pub fn next_chunk(&mut self, what: Yield) -> kura::Result<Vec<Record>> {
        let mut chunk = Vec::new();
        let mut bytes = 0;
        while !self.done && chunk.len() < CHUNK_RECORDS && bytes < CHUNK_BYTES {
            match self.kind.next_record(what)? {
                Some((key, value)) => {
                    bytes += key.len() + value.len();
                    chunk.push((key, value));
                }
                None => self.done = true,
            }
        }
        Ok(chunk)
    }
}

impl Kind<'_> {
    fn next_record(&mut self, what: Yield) -> kura::Result<Option<Record>> {
        match self {
            Kind::Plain { cursor, started } => loop {
                let moved = if *started { cursor.next()? } else { cursor.first()? };
                *started = true;
                if !moved {
                    return Ok(None);
                }
                // A record removed by another thread since the cursor reached it is skipped.
                let found =
                    if what == Yield::Keys { cursor.key()?.map(|k| (k, Vec::new())) } else { cursor.record()? };
                if found.is_some() {
                    return Ok(found);
                }
            },
            Kind::Tree { range, reversed } => {
                let next = if *reversed { range.next_back() } else { range.next() };
                next.transpose()
            }
            Kind::Ordered { cursor, lower, upper, reversed, started } => loop {
                let moved = match (*started, *reversed) {
                    (true, false) => cursor.next()?,
                    (true, true) => cursor.previous()?,
                    (false, false) => match lower {
                        Bound::Included(key) => cursor.jump_upper(key, true)?,
                        Bound::Excluded(key) => cursor.jump_upper(key, false)?,
                        Bound::Unbounded => cursor.first()?,
                    },
                    (false, true) => match upper {
                        Bound::Included(key) => cursor.jump_lower(key, true)?,
                        Bound::Excluded(key) => cursor.jump_lower(key, false)?,
                        Bound::Unbounded => cursor.last()?,
                    },
                };
                *started = true;
                if !moved {
                    return Ok(None);
                }
                let Some((key, value)) = cursor.record()? else { continue };
                let beyond = if *reversed { below(&key, lower) } else { above(&key, upper) };
                return Ok(if beyond { None } else { Some((key, value)) });
            },
        }
    }
}

/// Whether `key` lies beyond an upper bound.
fn above(key: &[u8], upper: &Bound<Vec<u8>>) -> bool {
    match upper {
        Bound::Included(bound) => key.cmp(bound) == Ordering::Greater,
        Bound::Excluded(bound) => key.cmp(bound) != Ordering::Less,
        Bound::Unbounded => false,
    }
}

/// Whether `key` lies beyond a lower bound.
fn below(key: &[u8], lower: &Bound<Vec<u8>>) -> bool {
    match lower {
        Bound::Included(bound) => key.cmp(bound) == Ordering::Less,
        Bound::Excluded(bound) => key.cmp(bound) != Ordering::Greater,
        Bound::Unbounded => false,
    }
}
