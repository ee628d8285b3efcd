//! Cursors and iterators: `db.cursor()`, `iter(db)`, `items()`, `values()` and `db.range()`.
//!
//! An engine cursor borrows its database. A Python object cannot hold a borrow, so each of
//! these owns a clone of the database's `Arc` next to the cursor that borrows from it
//! ([`Owned`]). They are `unsendable`: a cursor belongs to the thread that made it.

use std::sync::Arc;

use kura::TreeRange;
use kura::{Dbm, OrderedCursor, TreeDbm};
use pyo3::prelude::*;

use crate::convert::Encoding;
use crate::errors::{self, OrRaise};

/// What a cursor needs of its database. `database.rs` implements it (and `Handle` for its
/// Python object), so that this module never names the database type, which names the
/// cursors it makes: the two modules do not import each other.
pub trait Opened {
    /// Ok while the database is open, else `kura.ClosedError`.
    fn check_open(&self, py: Python<'_>) -> PyResult<()>;
    /// How keys and values cross to Python.
    fn encoding(&self) -> &Encoding;
    /// Whether record calls release the GIL.
    fn releases_gil(&self) -> bool;
    /// The engine, shared with what outlives the call.
    fn dbm(&self) -> Arc<dyn Dbm>;
    /// The engine when it is a TreeDbm, for ranges in the tree's own order.
    fn tree(&self) -> Option<&Arc<TreeDbm>>;
    /// Whether keys are in order.
    fn ordered(&self) -> bool;
}

/// A strong reference to the database's Python object, which keeps it open (and alive)
/// while a cursor lives, lent as what the cursor needs.
pub trait Handle {
    fn opened(&self) -> &dyn Opened;
}

/// An engine cursor of either kind.
enum EngineCursor<'a> {
    Plain(Box<dyn kura::Cursor + 'a>),
    Ordered(Box<dyn OrderedCursor + 'a>),
}

/// An engine cursor together with the database it borrows.
struct Owned {
    // Declared before `_db`: fields drop in declaration order, so the cursor is gone before
    // the Arc that keeps its database alive is released.
    cursor: EngineCursor<'static>,
    _db: Arc<dyn Dbm>,
}

impl Owned {
    fn new(db: Arc<dyn Dbm>, ordered: bool) -> kura::Result<Owned> {
        let cursor =
            if ordered { EngineCursor::Ordered(db.ordered_cursor()?) } else { EngineCursor::Plain(db.cursor()?) };
        // SAFETY: the cursor borrows `*db`, which lives in the Arc's heap allocation: moving
        // the Arc into `Owned` does not move the database, and `Owned` keeps the Arc for as
        // long as the cursor exists (it drops first, see the field order). The 'static
        // lifetime never escapes: the cursor is reachable only through `&mut Owned`.
        let cursor = unsafe { std::mem::transmute::<EngineCursor<'_>, EngineCursor<'static>>(cursor) };
        Ok(Owned { cursor, _db: db })
    }

    fn ordered(&mut self) -> Option<&mut (dyn OrderedCursor + 'static)> {
        match &mut self.cursor {
            EngineCursor::Plain(_) => None,
            EngineCursor::Ordered(cursor) => Some(&mut **cursor),
        }
    }
}

/// Runs `$body` with `$c` bound to the cursor of either kind (both have the `Cursor` methods;
/// matching avoids trait-object upcasting, which is newer than the workspace's MSRV).
macro_rules! on_cursor {
    ($owned:expr, $c:ident => $body:expr) => {
        match &mut $owned.cursor {
            EngineCursor::Plain($c) => $body,
            EngineCursor::Ordered($c) => $body,
        }
    };
}

/// Carries a cursor into `gil::detach` (`Python::detach`).
struct SendCell<T>(T);

// SAFETY: `Python::detach` runs its closure on the calling thread and returns before the
// caller goes on; `Send` is asked only to keep Python references out of code that runs
// without the GIL, and an engine cursor holds none. The value never reaches another thread.
unsafe impl<T> Send for SendCell<T> {}

/// Runs a cursor call, with the GIL released if the database does so.
fn step<T: Send>(
    py: Python<'_>,
    release_gil: bool,
    owned: &mut Owned,
    call: impl FnOnce(&mut Owned) -> kura::Result<T> + Send,
) -> PyResult<T> {
    let outcome = if release_gil {
        let cell = SendCell(owned);
        crate::gil::detach(py, move || {
            let cell = cell;
            call(cell.0)
        })
    } else {
        call(owned)
    };
    outcome.or_raise(py)
}

/// The database's state that a cursor needs on every step.
struct Source {
    db: Box<dyn Handle>,
    release_gil: bool,
}

impl Source {
    fn new(db: Box<dyn Handle>) -> Source {
        let release_gil = db.opened().releases_gil();
        Source { db, release_gil }
    }

    fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        self.db.opened().check_open(py)
    }

    fn output<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        self.db.opened().encoding().output(py, data)
    }
}

fn not_ordered(py: Python<'_>, what: &str) -> PyErr {
    errors::not_ordered(py, format!("{what} needs an ordered engine (tree, baby)"))
}

/// What a `KeyIter` yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Yield {
    Keys,
    Values,
}

/// Iterator over the keys (or values) of a database, in the engine's order.
#[pyclass(module = "kura._kura", name = "KeyIterator", unsendable)]
pub struct KeyIter {
    owned: Owned,
    source: Source,
    what: Yield,
    started: bool,
    done: bool,
}

impl KeyIter {
    pub fn new(py: Python<'_>, db: Box<dyn Handle>, what: Yield) -> PyResult<KeyIter> {
        let this = db.opened();
        this.check_open(py)?;
        let owned = Owned::new(this.dbm(), false).or_raise(py)?;
        Ok(KeyIter { owned, source: Source::new(db), what, started: false, done: false })
    }
}

/// Moves a plain iteration one record on and reads what it needs there; None at the end.
/// Records removed by another thread since the cursor reached them are skipped.
fn advance<T: Send>(
    owned: &mut Owned,
    started: &mut bool,
    read: impl Fn(&mut Owned) -> kura::Result<Option<T>> + Send,
) -> kura::Result<Option<T>> {
    loop {
        let moved = if *started {
            on_cursor!(owned, c => c.next())?
        } else {
            *started = true;
            on_cursor!(owned, c => c.first())?
        };
        if !moved {
            return Ok(None);
        }
        if let Some(found) = read(owned)? {
            return Ok(Some(found));
        }
    }
}

#[pymethods]
impl KeyIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.done {
            return Ok(None);
        }
        self.source.check_open(py)?;
        let what = self.what;
        let mut started = self.started;
        let found = step(py, self.source.release_gil, &mut self.owned, |owned| {
            advance(owned, &mut started, |owned| match what {
                Yield::Keys => on_cursor!(owned, c => c.key()),
                Yield::Values => Ok(on_cursor!(owned, c => c.record())?.map(|(_, value)| value)),
            })
        })?;
        self.started = started;
        match found {
            Some(data) => Ok(Some(self.source.output(py, &data)?)),
            None => {
                self.done = true;
                Ok(None)
            }
        }
    }
}

/// Iterator over `(key, value)` pairs, in the engine's order.
#[pyclass(module = "kura._kura", name = "RecordIterator", unsendable)]
pub struct RecordIter {
    owned: Owned,
    source: Source,
    started: bool,
    done: bool,
}

impl RecordIter {
    pub fn new(py: Python<'_>, db: Box<dyn Handle>) -> PyResult<RecordIter> {
        let this = db.opened();
        this.check_open(py)?;
        let owned = Owned::new(this.dbm(), false).or_raise(py)?;
        Ok(RecordIter { owned, source: Source::new(db), started: false, done: false })
    }
}

#[pymethods]
impl RecordIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        if self.done {
            return Ok(None);
        }
        self.source.check_open(py)?;
        if !self.source.release_gil {
            return self.next_lent(py);
        }
        let mut started = self.started;
        let found = step(py, self.source.release_gil, &mut self.owned, |owned| {
            advance(owned, &mut started, |owned| on_cursor!(owned, c => c.record()))
        })?;
        self.started = started;
        match found {
            Some((key, value)) => Ok(Some((self.source.output(py, &key)?, self.source.output(py, &value)?))),
            None => {
                self.done = true;
                Ok(None)
            }
        }
    }
}

impl RecordIter {
    /// `__next__` for a database whose reads keep the GIL: the pair is built straight from
    /// the key and value the engine lends (`Cursor::record_with`: from TreeDbm's decoded page,
    /// without copying them into vectors first). Records removed by another thread since the
    /// cursor reached them are skipped, as `advance` does.
    fn next_lent<'py>(&mut self, py: Python<'py>) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        let RecordIter { owned, source, started, done } = self;
        loop {
            let moved = if *started {
                on_cursor!(owned, c => c.next())
            } else {
                *started = true;
                on_cursor!(owned, c => c.first())
            };
            if !moved.or_raise(py)? {
                *done = true;
                return Ok(None);
            }
            let mut pair = None;
            let found = on_cursor!(owned, c => c.record_with(&mut |key, value| {
                pair = Some(source.output(py, key).and_then(|key| Ok((key, source.output(py, value)?))));
            }))
            .or_raise(py)?;
            if let (true, Some(pair)) = (found, pair) {
                return pair.map(Some);
            }
        }
    }
}

/// A cursor: a position in the database that moves record by record.
///
/// A fresh cursor points nowhere: `first()`, `last()` or a `jump` places it. Used as an
/// iterator it yields `(key, value)` from where it stands onwards (from the first record if
/// it was never placed), moving forward after each.
#[pyclass(module = "kura._kura", name = "Cursor", unsendable)]
pub struct Cursor {
    owned: Owned,
    source: Source,
    placed: bool,
}

impl Cursor {
    pub fn new(py: Python<'_>, db: Box<dyn Handle>) -> PyResult<Cursor> {
        let this = db.opened();
        this.check_open(py)?;
        let owned = Owned::new(this.dbm(), this.ordered()).or_raise(py)?;
        Ok(Cursor { owned, source: Source::new(db), placed: false })
    }

    fn moved(&mut self, py: Python<'_>, call: impl FnOnce(&mut Owned) -> kura::Result<bool> + Send) -> PyResult<bool> {
        self.source.check_open(py)?;
        let moved = step(py, self.source.release_gil, &mut self.owned, call)?;
        self.placed = true;
        Ok(moved)
    }

    fn ordered_move(
        &mut self,
        py: Python<'_>,
        what: &str,
        call: impl FnOnce(&mut (dyn OrderedCursor + 'static)) -> kura::Result<bool> + Send,
    ) -> PyResult<bool> {
        if self.owned.ordered().is_none() {
            return Err(not_ordered(py, what));
        }
        self.moved(py, |owned| match owned.ordered() {
            Some(cursor) => call(cursor),
            None => Ok(false),
        })
    }
}

#[pymethods]
impl Cursor {
    /// Moves to the first record; False if the database is empty.
    fn first(&mut self, py: Python<'_>) -> PyResult<bool> {
        self.moved(py, |owned| on_cursor!(owned, c => c.first()))
    }

    /// Moves to the last record (ordered engines); False if the database is empty.
    fn last(&mut self, py: Python<'_>) -> PyResult<bool> {
        self.ordered_move(py, "Cursor.last", |c| c.last())
    }

    /// Moves to `key`: on ordered engines the first record whose key is not less than it,
    /// on hash engines exactly that key. False if there is no such record.
    fn jump(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let raw = self.source.db.opened().encoding().input(key, "keys")?.into_owned();
        self.moved(py, move |owned| on_cursor!(owned, c => c.jump(&raw)))
    }

    /// Moves to the last record whose key is less than `key` (or equal, with `inclusive`).
    #[pyo3(signature = (key, inclusive = false))]
    fn jump_lower(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, inclusive: bool) -> PyResult<bool> {
        let raw = self.source.db.opened().encoding().input(key, "keys")?.into_owned();
        self.ordered_move(py, "Cursor.jump_lower", move |c| c.jump_lower(&raw, inclusive))
    }

    /// Moves to the first record whose key is greater than `key` (or equal, with `inclusive`).
    #[pyo3(signature = (key, inclusive = false))]
    fn jump_upper(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, inclusive: bool) -> PyResult<bool> {
        let raw = self.source.db.opened().encoding().input(key, "keys")?.into_owned();
        self.ordered_move(py, "Cursor.jump_upper", move |c| c.jump_upper(&raw, inclusive))
    }

    /// Moves to the next record; False at the end.
    fn next(&mut self, py: Python<'_>) -> PyResult<bool> {
        self.moved(py, |owned| on_cursor!(owned, c => c.next()))
    }

    /// Moves to the previous record (ordered engines); False at the beginning.
    fn previous(&mut self, py: Python<'_>) -> PyResult<bool> {
        self.ordered_move(py, "Cursor.previous", |c| c.previous())
    }

    /// The key at the cursor, or None.
    fn key<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.source.check_open(py)?;
        let key = step(py, self.source.release_gil, &mut self.owned, |owned| on_cursor!(owned, c => c.key()))?;
        key.map(|k| self.source.output(py, &k)).transpose()
    }

    /// The value at the cursor, or None.
    fn value<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self.record(py)?.map(|(_, value)| value))
    }

    /// The `(key, value)` pair at the cursor, or None.
    fn record<'py>(&mut self, py: Python<'py>) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        self.source.check_open(py)?;
        let record = step(py, self.source.release_gil, &mut self.owned, |owned| on_cursor!(owned, c => c.record()))?;
        match record {
            Some((key, value)) => Ok(Some((self.source.output(py, &key)?, self.source.output(py, &value)?))),
            None => Ok(None),
        }
    }

    /// Replaces the value of the record at the cursor.
    fn set_value(&mut self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.source.check_open(py)?;
        let raw = self.source.db.opened().encoding().input(value, "values")?.into_owned();
        step(py, self.source.release_gil, &mut self.owned, move |owned| on_cursor!(owned, c => c.set(&raw)))
    }

    /// Removes the record at the cursor and moves to the next one.
    fn remove(&mut self, py: Python<'_>) -> PyResult<()> {
        self.source.check_open(py)?;
        step(py, self.source.release_gil, &mut self.owned, |owned| on_cursor!(owned, c => c.remove()))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The record at the cursor, then moves forward; StopIteration at the end.
    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        self.source.check_open(py)?;
        let placed = self.placed;
        self.placed = true;
        let record = step(py, self.source.release_gil, &mut self.owned, move |owned| {
            if !placed && !on_cursor!(owned, c => c.first())? {
                return Ok(None);
            }
            loop {
                match on_cursor!(owned, c => c.record())? {
                    Some(record) => {
                        on_cursor!(owned, c => c.next())?;
                        return Ok(Some(record));
                    }
                    // At the end, or on a record another thread removed: the cursor moves on
                    // past removed records and reports the end as no move.
                    None => {
                        if !on_cursor!(owned, c => c.next())? {
                            return Ok(None);
                        }
                    }
                }
            }
        })?;
        match record {
            Some((key, value)) => Ok(Some((self.source.output(py, &key)?, self.source.output(py, &value)?))),
            None => Ok(None),
        }
    }
}

/// A tree range with the tree it borrows (see [`Owned`] for why this is sound).
struct OwnedTreeRange {
    // Declared before `_tree` so that it drops first.
    range: TreeRange<'static>,
    _tree: Arc<TreeDbm>,
}

impl OwnedTreeRange {
    fn new(tree: &Arc<TreeDbm>, bounds: &KeyBounds) -> OwnedTreeRange {
        use std::ops::Bound;
        let tree = tree.clone();
        let lower = bounds.start.clone().map_or(Bound::Unbounded, Bound::Included);
        let upper = match &bounds.stop {
            None => Bound::Unbounded,
            Some((stop, true)) => Bound::Included(stop.clone()),
            Some((stop, false)) => Bound::Excluded(stop.clone()),
        };
        let range = tree.range((lower, upper));
        // SAFETY: as in `Owned::new`: the range borrows the TreeDbm inside the Arc's heap
        // allocation, which `OwnedTreeRange` keeps alive and which outlives the range.
        let range = unsafe { std::mem::transmute::<TreeRange<'_>, TreeRange<'static>>(range) };
        OwnedTreeRange { range, _tree: tree }
    }
}

/// The keys a range walks: from `start` (inclusive) up to `stop`, which the flag beside it
/// includes (`inclusive=True`) or not (the default, as Python's own ranges and slices).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyBounds {
    pub start: Option<Vec<u8>>,
    pub stop: Option<(Vec<u8>, bool)>,
}

impl KeyBounds {
    /// Narrows the bounds to the keys that begin with `prefix`, in bytewise order: from the
    /// prefix itself up to (excluding) the first key past every key it begins, which is the
    /// prefix with its last byte below 0xff incremented and what follows dropped (no end
    /// when every byte is 0xff).
    pub fn within_prefix(mut self, prefix: &[u8]) -> KeyBounds {
        if self.start.as_deref().is_none_or(|start| start < prefix) {
            self.start = Some(prefix.to_vec());
        }
        if let Some(end) = prefix_end(prefix) {
            // The lower of the two ends; at a tie, exclusion is the narrower.
            let narrower = match &self.stop {
                None => true,
                Some((stop, inclusive)) => end < *stop || (end == *stop && *inclusive),
            };
            if narrower {
                self.stop = Some((end, false));
            }
        }
        self
    }

    /// Whether `key` lies beyond the upper end.
    fn above(&self, key: &[u8]) -> bool {
        match &self.stop {
            None => false,
            Some((stop, true)) => key > stop.as_slice(),
            Some((stop, false)) => key >= stop.as_slice(),
        }
    }

    /// Whether `key` lies below the lower end.
    fn below(&self, key: &[u8]) -> bool {
        self.start.as_deref().is_some_and(|start| key < start)
    }
}

/// The least byte string greater than every string that begins with `prefix`, or None when
/// there is none (an empty prefix, or one of 0xff bytes only).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&byte| byte != 0xff)?;
    let mut end = prefix.get(..=last)?.to_vec();
    if let Some(byte) = end.last_mut() {
        *byte += 1;
    }
    Some(end)
}

/// Walks a key range on an ordered engine other than the tree, comparing keys as bytes (the
/// only order those engines have).
struct CursorRange {
    owned: Owned,
    bounds: KeyBounds,
    started: bool,
}

impl CursorRange {
    fn step(&mut self, reverse: bool) -> kura::Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(cursor) = self.owned.ordered() else {
            return Ok(None);
        };
        let mut moved = match (self.started, reverse) {
            (true, false) => cursor.next()?,
            (true, true) => cursor.previous()?,
            (false, false) => match &self.bounds.start {
                Some(start) => cursor.jump(start)?,
                None => cursor.first()?,
            },
            (false, true) => match &self.bounds.stop {
                Some((stop, inclusive)) => cursor.jump_lower(stop, *inclusive)?,
                None => cursor.last()?,
            },
        };
        self.started = true;
        while moved {
            if let Some((key, value)) = cursor.record()? {
                let beyond = if reverse { self.bounds.below(&key) } else { self.bounds.above(&key) };
                return Ok(if beyond { None } else { Some((key, value)) });
            }
            // Removed by another thread since the cursor reached it.
            moved = if reverse { cursor.previous()? } else { cursor.next()? };
        }
        Ok(None)
    }
}

enum RangeWalk {
    Tree(OwnedTreeRange),
    Cursor(CursorRange),
}

/// Iterator over the records of a key range, from `db.range(...)`: `(key, value)` pairs, or
/// keys alone with `keys_only`.
#[pyclass(module = "kura._kura", name = "RangeIterator", unsendable)]
pub struct RangeIter {
    walk: RangeWalk,
    source: Source,
    reverse: bool,
    keys_only: bool,
    done: bool,
}

impl RangeIter {
    pub fn new(
        py: Python<'_>,
        db: Box<dyn Handle>,
        bounds: KeyBounds,
        reverse: bool,
        keys_only: bool,
    ) -> PyResult<RangeIter> {
        let this = db.opened();
        this.check_open(py)?;
        let walk = match this.tree() {
            Some(tree) => RangeWalk::Tree(OwnedTreeRange::new(tree, &bounds)),
            None if this.ordered() => RangeWalk::Cursor(CursorRange {
                owned: Owned::new(this.dbm(), true).or_raise(py)?,
                bounds,
                started: false,
            }),
            None => return Err(not_ordered(py, "range()")),
        };
        Ok(RangeIter { walk, source: Source::new(db), reverse, keys_only, done: false })
    }

    /// What one record yields: the key alone or the `(key, value)` pair.
    fn output<'py>(&self, py: Python<'py>, key: &[u8], value: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        yielded(py, &self.source, self.keys_only, key, value)
    }
}

/// A range's item: the key alone (`keys_only`) or the `(key, value)` pair.
fn yielded<'py>(
    py: Python<'py>,
    source: &Source,
    keys_only: bool,
    key: &[u8],
    value: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let key = source.output(py, key)?;
    if keys_only {
        return Ok(key);
    }
    Ok((key, source.output(py, value)?).into_pyobject(py)?.into_any())
}

#[pymethods]
impl RangeIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.done {
            return Ok(None);
        }
        self.source.check_open(py)?;
        let reverse = self.reverse;
        if let (RangeWalk::Tree(_), false) = (&self.walk, self.source.release_gil) {
            return self.next_lent(py);
        }
        let cell = SendCell(&mut self.walk);
        let call = move || {
            let cell = cell;
            match cell.0 {
                RangeWalk::Tree(tree) => {
                    let next = if reverse { tree.range.next_back() } else { tree.range.next() };
                    next.transpose()
                }
                RangeWalk::Cursor(walk) => walk.step(reverse),
            }
        };
        let record = if self.source.release_gil { crate::gil::detach(py, call) } else { call() }.or_raise(py)?;
        match record {
            Some((key, value)) => Ok(Some(self.output(py, &key, &value)?)),
            None => {
                self.done = true;
                Ok(None)
            }
        }
    }
}

impl RangeIter {
    /// `__next__` on a tree whose reads keep the GIL: what it yields is built straight from
    /// the key and value the range lends from the decoded page (`TreeRange::next_with`),
    /// without copying them into vectors first.
    fn next_lent<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let RangeIter { walk, source, reverse, keys_only, done } = self;
        let RangeWalk::Tree(tree) = walk else {
            return Ok(None);
        };
        let mut found = None;
        let mut visit = |key: &[u8], value: &[u8]| found = Some(yielded(py, source, *keys_only, key, value));
        let range = &mut tree.range;
        let lent =
            if *reverse { range.next_back_with(&mut visit) } else { range.next_with(&mut visit) }.or_raise(py)?;
        match found.filter(|_| lent) {
            Some(output) => output.map(Some),
            None => {
                *done = true;
                Ok(None)
            }
        }
    }
}
