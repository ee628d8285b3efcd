//! Walking the records of a database for `each`, `each_key`, `each_value` and `range`.
//!
//! A walk reads records in chunks (with the GVL released when the database says so) and
//! copies them out before any of them is handed to Ruby: the block then runs with no engine
//! lock held, so it may read, write, `break`, raise or close the database. The cursor kept
//! between chunks holds no lock either (a Kura cursor stays valid while others write).
//!
//! A chunk is one buffer (`PackedBytes`): each record is copied once, from the slices the
//! engine lends (`record_with`, `TreeRange::next_with`), into it, and Ruby's strings are made
//! from there; not a pair of vectors a record, whose allocations cost more than the copy.
//!
//! Order: an unordered engine walks in its own order; TreeDbm walks a key range in its own
//! key order (its comparator) with `TreeRange`; the other ordered engine (BabyDbm) compares
//! keys as bytes, the only order it has.

use std::cmp::Ordering;
use std::ops::Bound;

use kura::TreeRange;
use kura::{Cursor, OrderedCursor, PackedBytes};

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

/// The records of a chunk, two items each in one buffer: the key, then the value; the part
/// the walk does not yield is missing.
#[derive(Default)]
pub struct Chunk(PackedBytes);

impl Chunk {
    /// The records in walk order: the yielded parts, a part not yielded as an empty slice.
    pub fn records(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut items = self.0.iter().map(Option::unwrap_or_default);
        std::iter::from_fn(move || Some((items.next()?, items.next()?)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn push(&mut self, what: Yield, key: &[u8], value: &[u8]) {
        self.0.push((what != Yield::Values).then_some(key));
        self.0.push((what != Yield::Keys).then_some(value));
    }
}

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
    pub fn next_chunk(&mut self, what: Yield) -> kura::Result<Chunk> {
        let mut chunk = Chunk::default();
        let mut records = 0;
        while !self.done && records < CHUNK_RECORDS && chunk.0.byte_len() < CHUNK_BYTES {
            if self.kind.next_record(what, &mut chunk)? {
                records += 1;
            } else {
                self.done = true;
            }
        }
        Ok(chunk)
    }
}

impl Kind<'_> {
    /// Adds the next record to `chunk`; false at the end.
    fn next_record(&mut self, what: Yield, chunk: &mut Chunk) -> kura::Result<bool> {
        match self {
            Kind::Plain { cursor, started } => loop {
                let moved = if *started { cursor.next()? } else { cursor.first()? };
                *started = true;
                if !moved {
                    return Ok(false);
                }
                // A record removed by another thread since the cursor reached it is skipped.
                // Keys alone are read as keys: a compressed engine then decompresses nothing.
                let found = if what == Yield::Keys {
                    cursor.key()?.map(|key| chunk.push(what, &key, &[])).is_some()
                } else {
                    cursor.record_with(&mut |key, value| chunk.push(what, key, value))?
                };
                if found {
                    return Ok(true);
                }
            },
            Kind::Tree { range, reversed } => {
                let mut visit = |key: &[u8], value: &[u8]| chunk.push(what, key, value);
                if *reversed {
                    range.next_back_with(&mut visit)
                } else {
                    range.next_with(&mut visit)
                }
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
                    return Ok(false);
                }
                let mut beyond = false;
                let found = cursor.record_with(&mut |key, value| {
                    beyond = if *reversed { below(key, lower) } else { above(key, upper) };
                    if !beyond {
                        chunk.push(what, key, value);
                    }
                })?;
                if found {
                    return Ok(!beyond);
                }
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
