//! The interface every Kura engine implements: one trait for the database, one for cursors.
//!
//! Engines implement a handful of primitives (`process`, `get`, `count`, `cursor`, ...); the
//! rest (`set`, `remove`, `append`, `compare_exchange`, `increment`) are defined once here in
//! terms of `process`, so every engine has the same semantics for them. Engines may override
//! a provided method for speed, never to change its meaning.

use std::borrow::Cow;

use crate::batch::{BatchOp, WriteBatch};
use crate::check::{CheckReport, Place};
use crate::codec::CodecKind;
use crate::error::{Error, ErrorKind, Result};
use crate::expiry::Expiry;
use crate::stats::Stats;

/// How a database file is opened; the letters match Python's `dbm` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `r`: read only; the file must exist. Takes a shared lock.
    ReadOnly,
    /// `w`: read and write; the file must exist. Takes the exclusive lock.
    Write,
    /// `c`: read and write, creating the file if it does not exist.
    Create,
    /// `n`: read and write, always starting from a new empty database.
    Truncate,
}

impl OpenMode {
    /// The mode of a `dbm`-style flag letter: `r`, `w`, `c` or `n`.
    pub fn from_flag(flag: &str) -> Result<OpenMode> {
        match flag {
            "r" => Ok(OpenMode::ReadOnly),
            "w" => Ok(OpenMode::Write),
            "c" => Ok(OpenMode::Create),
            "n" => Ok(OpenMode::Truncate),
            _ => Err(Error::invalid(format!("open flag {flag:?} is not one of r, w, c, n"))),
        }
    }

    /// Whether a handle opened in this mode may write.
    pub fn is_writable(self) -> bool {
        self != OpenMode::ReadOnly
    }
}

/// What a `process` callback decides to do with the record it was shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<'v> {
    /// Leave the record as it is (or absent, if it was absent).
    Keep,
    /// Store this value under the key, creating or replacing the record.
    Set(Cow<'v, [u8]>),
    /// Remove the record; nothing happens if it was absent.
    Remove,
}

/// A read-modify-write callback: sees the current value (`None` when absent) and decides.
/// It runs under the record's lock, so it must not call back into the same database.
pub type Processor<'f, 'v> = &'f mut dyn FnMut(Option<&[u8]>) -> Action<'v>;

/// A `Processor` that also says when the value it sets expires (None: never); the expiry of
/// any other action is ignored. See `Dbm::process_expiring`.
pub type ExpiringProcessor<'f, 'v> = &'f mut dyn FnMut(Option<&[u8]>) -> (Action<'v>, Option<Expiry>);

/// A key-value database. Keys and values are arbitrary bytes. A handle is `Send + Sync`:
/// many threads may use one open database at once, and each operation is atomic. `Any` lets
/// a binding that opened an engine through the registry reach its concrete type for a fast
/// path (`Arc<dyn Dbm>` upcasts to `Arc<dyn Any + Send + Sync>` and downcasts).
pub trait Dbm: Send + Sync + std::any::Any {
    /// Runs `processor` on the record of `key` atomically and applies its decision.
    fn process(&self, key: &[u8], processor: Processor<'_, '_>) -> Result<()>;

    /// `process`, where a value set carries the instant it expires at. An engine that knows
    /// expiry (SegCacheDbm) never returns the record from then on and reclaims its memory
    /// first; the others store the value alone and forever (the default), so a caller that
    /// needs expiry on every engine keeps it in the value too, as kura-server does.
    fn process_expiring(&self, key: &[u8], processor: ExpiringProcessor<'_, '_>) -> Result<()> {
        self.process(key, &mut |old| processor(old).0)
    }

    /// Returns the value of `key`, or a NotFound error.
    fn get(&self, key: &[u8]) -> Result<Vec<u8>> {
        let mut found = None;
        self.get_with(key, &mut |value| found = value.map(<[u8]>::to_vec))?;
        found.ok_or_else(|| Error::not_found("no record for the key"))
    }

    /// Shows the value of `key` to `visit` (`None` when absent) without copying it out: the
    /// zero-copy read, and what `get` is made of. Engines override it with a lookup under a
    /// read lock (the default runs `process`, which may lock for writing). `visit` runs under
    /// the record's lock, so it must not call back into the same database.
    fn get_with(&self, key: &[u8], visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        self.process(key, &mut |value| {
            visit(value);
            Action::Keep
        })
    }

    /// Looks up every key of `keys` and shows each value to `visit` with the key's index in
    /// `keys` (`None` when the key has no record): the batched zero-copy read, and what
    /// `get_many` is made of. Every index is visited exactly once (a key given twice is looked
    /// up twice), in an order the engine chooses (TreeDbm visits in key order); a
    /// missing key is not an error. Each value is one the key held at some moment during the
    /// call: the batch is not a snapshot, and writers may run between two of its keys. An
    /// error (broken data, a closed database) ends the call, and the indices not visited by
    /// then were not looked up. `visit` runs under engine locks, so it must not call back
    /// into the same database. The default loops over `get_with`; the hash engines and the
    /// tree override it with a lookup that overlaps the memory misses of a batch's keys
    /// (docs/get_many.md).
    fn get_many_with(&self, keys: &[&[u8]], visit: &mut dyn FnMut(usize, Option<&[u8]>)) -> Result<()> {
        for (index, key) in keys.iter().enumerate() {
            self.get_with(key, &mut |value| visit(index, value))?;
        }
        Ok(())
    }

    /// The values of `keys` in the caller's order: `None` where a key has no record (RocksDB's
    /// `MultiGet`). As `get_many_with`, which it is made of.
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut values = vec![None; keys.len()];
        let mut stray = None;
        self.get_many_with(keys, &mut |index, value| match values.get_mut(index) {
            Some(slot) => *slot = value.map(<[u8]>::to_vec),
            None => stray = Some(index),
        })?;
        match stray {
            None => Ok(values),
            Some(index) => Err(Error::internal(format!(
                "get_many_with visits only indexes of its keys, not {index} of {}",
                keys.len()
            ))),
        }
    }

    /// Stores `value` under `key`. With `overwrite` false, an existing record is left as it is
    /// and the call fails with a Duplicate error.
    fn set(&self, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
        set_by_process(self, key, value, overwrite)
    }

    /// Replaces the value of `key` only if it has a record (memcached's `replace`): true when
    /// stored; false when the key was absent, and then nothing is stored.
    fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut existed = false;
        self.process(key, &mut |old| {
            existed = old.is_some();
            if existed {
                Action::Set(Cow::Borrowed(value))
            } else {
                Action::Keep
            }
        })?;
        Ok(existed)
    }

    /// Removes the record of `key`, or fails with NotFound.
    fn remove(&self, key: &[u8]) -> Result<()> {
        let mut existed = false;
        self.process(key, &mut |old| {
            existed = old.is_some();
            Action::Remove
        })?;
        if existed {
            Ok(())
        } else {
            Err(Error::not_found("no record for the key"))
        }
    }

    /// Appends `value` to the existing value, with `delimiter` between them when the record
    /// existed; creates the record with `value` otherwise.
    fn append(&self, key: &[u8], value: &[u8], delimiter: &[u8]) -> Result<()> {
        self.process(key, &mut |old| match old {
            None => Action::Set(Cow::Borrowed(value)),
            Some(old) => {
                let mut joined = Vec::with_capacity(old.len() + delimiter.len() + value.len());
                joined.extend_from_slice(old);
                joined.extend_from_slice(delimiter);
                joined.extend_from_slice(value);
                Action::Set(Cow::Owned(joined))
            }
        })
    }

    /// Replaces the record only if its current state equals `expected` (`None`: absent);
    /// `desired` `None` removes it. A mismatch is an Infeasible error and changes nothing.
    fn compare_exchange(&self, key: &[u8], expected: Option<&[u8]>, desired: Option<&[u8]>) -> Result<()> {
        if self.compare_exchange_matched(key, expected, desired)? {
            Ok(())
        } else {
            Err(Error::infeasible("compare_exchange: the record does not match the expected state"))
        }
    }

    /// `compare_exchange` that tells a mismatch apart from a failure: `Ok(false)` when the
    /// record did not match (and nothing changed).
    fn compare_exchange_matched(&self, key: &[u8], expected: Option<&[u8]>, desired: Option<&[u8]>) -> Result<bool> {
        let mut matched = false;
        self.process(key, &mut |old| {
            matched = old == expected;
            match (matched, desired) {
                (false, _) => Action::Keep,
                (true, Some(value)) => Action::Set(Cow::Borrowed(value)),
                (true, None) => Action::Remove,
            }
        })?;
        Ok(matched)
    }

    /// Adds `delta` to the counter stored under `key` (8 bytes, big-endian, as Tkrzw stores
    /// counters) and returns the new value; an absent record starts from `initial`.
    /// A value of another length is an InvalidArgument error and is left as it is.
    fn increment(&self, key: &[u8], delta: i64, initial: i64) -> Result<i64> {
        let mut outcome = Ok(0);
        self.process(key, &mut |old| {
            let current = match old {
                None => Ok(initial),
                Some(bytes) => <[u8; 8]>::try_from(bytes)
                    .map(i64::from_be_bytes)
                    .map_err(|_| Error::invalid(format!("increment: the value has {} bytes, not 8", bytes.len()))),
            };
            outcome = current.map(|c| c.wrapping_add(delta));
            match &outcome {
                Ok(next) => Action::Set(Cow::Owned(next.to_be_bytes().to_vec())),
                Err(_) => Action::Keep,
            }
        })?;
        outcome
    }

    /// Applies the operations of `batch` in order. The file engines apply a batch atomically:
    /// TreeDbm all of it or none, even across a crash; HashDbm likewise through its journal,
    /// except a batch of more than a quarter of its `checkpoint_bytes` (a bulk load), atomic
    /// for readers but not across a crash; a ShardDbm of file engines per shard
    /// (docs/durability.md). The
    /// default applies the operations one by one, each atomic on its own, so that a failure
    /// midway can leave a prefix applied. Removing an absent key is not an error here.
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        write_op_by_op(self, batch)
    }

    /// `write_batch`, then durable: when this returns, the batch survives a power loss (as
    /// after `synchronize(true)`). TreeDbm and HashDbm make it durable with one `fdatasync`
    /// of their journal (HashDbm's bulk batches, which bypass it, with a checkpoint); the
    /// default applies the batch and then synchronizes the database.
    fn write_batch_durable(&self, batch: &WriteBatch) -> Result<()> {
        self.write_batch(batch)?;
        self.synchronize(true)
    }

    /// True when the engine encodes its storage units once per `write_batch` (CompactDbm
    /// encodes each bucket once per batch), so that a bulk load should hand it the whole input
    /// as one batch from one writer: `kura import` then gathers everything before writing.
    fn prefers_whole_batches(&self) -> bool {
        false
    }

    /// Number of records.
    fn count(&self) -> Result<u64>;

    /// A cursor over all records. Its order is the engine's (key order for ordered engines).
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>>;

    /// Removes every record.
    fn clear(&self) -> Result<()>;

    /// Writes what is buffered to the file; with `hard`, also forces it to the device
    /// (fsync), so that it survives a power loss and not only a process crash.
    fn synchronize(&self, hard: bool) -> Result<()>;

    /// Rewrites the database compactly, applying `params` (codec, bucket count, ...) where
    /// the engine knows them; unknown names are an InvalidArgument error.
    fn rebuild(&self, params: &Params) -> Result<()>;

    /// True when a rebuild would pay: much free space, or a bucket array too small.
    fn should_be_rebuilt(&self) -> Result<bool>;

    /// Bytes the database occupies in its file (or in memory, for memory engines).
    fn file_size(&self) -> Result<u64>;

    /// The codec its values are stored with, or None for an engine that stores them as
    /// given. Typed, for the code that acts on it: a binding releases its interpreter's lock
    /// around reads that decompress (`CodecKind::decompresses`).
    fn codec(&self) -> Result<Option<CodecKind>> {
        Ok(None)
    }

    /// Whether its cursor visits keys in order and `ordered_cursor` works (TreeDbm, BabyDbm,
    /// and a shard set of either): typed, so that nobody probes by opening a cursor.
    fn is_ordered(&self) -> bool {
        false
    }

    /// Whether reading a value decodes it (its codec compresses): such a read takes
    /// microseconds, long enough that a binding lets other threads run meanwhile, which is
    /// what Python's and Ruby's record calls decide by.
    fn reads_decompress(&self) -> Result<bool> {
        Ok(self.codec()?.is_some_and(CodecKind::decompresses))
    }

    /// What the database is and holds, typed (`Stats`): at least its class, count, size and
    /// health; `Stats::entries` is the form people and the bindings read. `healthy` is cheap:
    /// the clean-close flag of a file's header, not a check of the data (`check` reads it all).
    fn inspect(&self) -> Result<Stats>;

    /// Reads every record and verifies what the engine can, reporting damage as problems
    /// (with their places) rather than failing at the first: `kura check`. The default reads
    /// every record through the cursor and compares their number with `count`; HashDbm also
    /// walks every chain (each record's checksum, its bucket, the count in the header),
    /// TreeDbm every page (checksums, key order within and across leaves, the count); a
    /// memory engine's snapshot was verified whole (its checksum) when it was opened. Meant
    /// for a database no other thread writes meanwhile: a concurrent write may show as a
    /// count that disagrees. Errors other than damage (a closed database, I/O) are returned.
    fn check(&self) -> Result<CheckReport> {
        read_every_record(self)
    }

    /// Whether the handle may write.
    fn is_writable(&self) -> bool;

    /// Flushes and releases the database; later calls fail with Infeasible.
    fn close(&self) -> Result<()>;

    /// A cursor that also moves backwards and jumps to neighbours of a key; only ordered
    /// engines (BabyDbm, TreeDbm) have one.
    fn ordered_cursor(&self) -> Result<Box<dyn OrderedCursor + '_>> {
        Err(Error::infeasible("this engine is not ordered"))
    }
}

/// `Dbm::set` as a `process` that looks at the old record: an engine whose own `set` takes
/// another way for some calls (TreeDbm's write buffer) falls back on this for the rest.
pub(crate) fn set_by_process<D: Dbm + ?Sized>(db: &D, key: &[u8], value: &[u8], overwrite: bool) -> Result<()> {
    let mut existed = false;
    db.process(key, &mut |old| {
        existed = old.is_some();
        if existed && !overwrite {
            Action::Keep
        } else {
            Action::Set(Cow::Borrowed(value))
        }
    })?;
    if existed && !overwrite {
        return Err(Error::new(ErrorKind::Duplicate, "a record exists for the key"));
    }
    Ok(())
}

/// A position in a database. A fresh cursor points nowhere: call `first` or `jump`.
/// Cursors stay valid while other threads update the database; they never yield a record
/// twice, and see a record written concurrently or not, but never a torn one.
pub trait Cursor {
    /// Moves to the first record; false if the database is empty.
    fn first(&mut self) -> Result<bool>;
    /// Moves to `key` (hash engines: exactly that key; ordered engines: the first key not
    /// less than it); false if there is no such record.
    fn jump(&mut self, key: &[u8]) -> Result<bool>;
    /// Moves to the next record; false at the end.
    fn next(&mut self) -> Result<bool>;
    /// The record at the cursor, or None when the cursor is at no record.
    fn record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>>;
    /// Lends the record at the cursor to `visit` as slices; false when the cursor is at no
    /// record. TreeDbm lends them from its decoded page, without a copy; the default copies
    /// them out with `record`.
    fn record_with(&mut self, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<bool> {
        match self.record()? {
            Some((key, value)) => {
                visit(&key, &value);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    /// The key at the cursor, or None.
    fn key(&mut self) -> Result<Option<Vec<u8>>>;
    /// Replaces the value of the record at the cursor; NotFound if the cursor is at no record.
    fn set(&mut self, value: &[u8]) -> Result<()>;
    /// Removes the record at the cursor and moves to the next one.
    fn remove(&mut self) -> Result<()>;
}

/// A cursor of an ordered engine, in key order: it can also go backwards and land beside a key.
pub trait OrderedCursor: Cursor {
    /// Moves to the last record; false if the database is empty.
    fn last(&mut self) -> Result<bool>;
    /// Moves to the previous record; false at the beginning.
    fn previous(&mut self) -> Result<bool>;
    /// Moves to the last record whose key is less than `key` (or equal, with `inclusive`);
    /// false if there is none.
    fn jump_lower(&mut self, key: &[u8], inclusive: bool) -> Result<bool>;
    /// Moves to the first record whose key is greater than `key` (or equal, with `inclusive`);
    /// false if there is none.
    fn jump_upper(&mut self, key: &[u8], inclusive: bool) -> Result<bool>;
}

/// Iterates over the records of a cursor, from its first record.
pub struct Records<'c> {
    cursor: Box<dyn Cursor + 'c>,
    started: bool,
}

impl<'c> Records<'c> {
    /// Iterates over `cursor`'s records from its first one.
    pub fn new(cursor: Box<dyn Cursor + 'c>) -> Records<'c> {
        Records { cursor, started: false }
    }
}

impl Iterator for Records<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let moved = if self.started { self.cursor.next() } else { self.cursor.first() };
            self.started = true;
            match moved {
                Err(e) => return Some(Err(e)),
                Ok(false) => return None,
                // A record removed by another thread since the cursor reached it is skipped.
                Ok(true) => match self.cursor.record() {
                    Ok(None) => continue,
                    other => return other.transpose(),
                },
            }
        }
    }
}

/// Extension helpers available on every database.
pub trait DbmExt: Dbm {
    /// All records, in the engine's order.
    fn records(&self) -> Result<Records<'_>> {
        Ok(Records::new(self.cursor()?))
    }
}

impl<T: Dbm + ?Sized> DbmExt for T {}

/// Tuning parameters given as `name=value` pairs, as on the command line
/// (`record_comp=zstd,num_buckets=1000000`). Engines take the names they know and reject the
/// others, so a typo is an error rather than a silent default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// No parameters.
    pub fn new() -> Params {
        Params::default()
    }

    /// Parses `a=1,b=2` (also accepts `;` and whitespace as separators).
    pub fn parse(text: &str) -> Result<Params> {
        let mut params = Params::new();
        for item in text.split([',', ';', ' ', '\n']).filter(|s| !s.is_empty()) {
            let (name, value) =
                item.split_once('=').ok_or_else(|| Error::invalid(format!("parameter {item:?} is not name=value")))?;
            params = params.with(name.trim(), value.trim());
        }
        Ok(params)
    }

    /// Adds or replaces a parameter.
    pub fn with(mut self, name: &str, value: impl ToString) -> Params {
        self.pairs.retain(|(n, _)| n != name);
        self.pairs.push((name.to_string(), value.to_string()));
        self
    }

    /// These parameters, plus each of `defaults` whose name they do not give.
    pub fn or_defaults(&self, defaults: &Params) -> Params {
        let mut merged = self.clone();
        for (name, value) in &defaults.pairs {
            if merged.get(name).is_none() {
                merged.pairs.push((name.clone(), value.clone()));
            }
        }
        merged
    }

    /// These parameters less `name` (`engine=` chooses the engine and is not the engine's).
    pub fn without(&self, name: &str) -> Params {
        Params { pairs: self.pairs.iter().filter(|(n, _)| n != name).cloned().collect() }
    }

    /// The value of parameter `name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Whether no parameter is given.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The names given, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(n, _)| n.as_str())
    }

    /// Parses a numeric parameter; `1M`, `64K`, `1G` suffixes (powers of 1024 for sizes are
    /// not implied: K=1000? No: K, M, G, T are powers of 1024, as for file sizes).
    pub fn get_u64(&self, name: &str) -> Result<Option<u64>> {
        self.get(name).map(|v| parse_size(v).map_err(|e| Error::invalid(format!("{name}: {e}")))).transpose()
    }

    /// Parses a boolean parameter (`1 true yes on` / `0 false no off`).
    pub fn get_bool(&self, name: &str) -> Result<Option<bool>> {
        self.get(name)
            .map(|v| match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(Error::invalid(format!("{name}: {v:?} is not a boolean"))),
            })
            .transpose()
    }

    /// Fails with InvalidArgument naming the first parameter not in `known`.
    pub fn check_known(&self, engine: &str, known: &[&str]) -> Result<()> {
        match self.names().find(|n| !known.contains(n)) {
            None => Ok(()),
            Some(unknown) => {
                Err(Error::invalid(format!("{engine} has no parameter {unknown:?} (known: {})", known.join(", "))))
            }
        }
    }
}

/// Parses `123`, `64K`, `1M`, `2G`, `1T` (binary multiples).
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("{text:?} has an unknown unit")),
            };
            (text.get(..i).unwrap_or(""), shift)
        }
        _ => (text, 0),
    };
    let number: u64 = digits.parse().map_err(|_| format!("{text:?} is not a number"))?;
    number.checked_mul(1u64 << shift).ok_or_else(|| format!("{text:?} is too large"))
}

/// Applies the operations of `batch` in order, each on its own: `Dbm::write_batch`'s default,
/// and what an engine that overrides it falls back to (HashDbm before its journal is open).
pub(crate) fn write_op_by_op<D: Dbm + ?Sized>(dbm: &D, batch: &WriteBatch) -> Result<()> {
    for op in batch.ops() {
        match op {
            BatchOp::Set { key, value } => dbm.set(key, value, true)?,
            BatchOp::Remove { key } => dbm.process(key, &mut |_| Action::Remove)?,
        }
    }
    Ok(())
}

/// `Dbm::check`'s default: reads every record through the cursor (each read verifies what
/// the engine's reads verify), then compares their number with `count`. Damage (a BrokenData
/// error) is a problem of the report and ends the walk, as a cursor cannot be trusted past
/// it; any other error (a closed database, an I/O error) is returned.
fn read_every_record<D: Dbm + ?Sized>(db: &D) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let damage = |report: &mut CheckReport, error: Error| -> Result<()> {
        if error.kind() == ErrorKind::BrokenData {
            report.add(Place::Database, error.message().to_string());
            Ok(())
        } else {
            Err(error)
        }
    };
    {
        let mut cursor = match db.cursor() {
            Ok(cursor) => cursor,
            Err(e) => {
                damage(&mut report, e)?;
                return Ok(report);
            }
        };
        let mut moved = cursor.first();
        loop {
            match moved {
                Ok(false) => break,
                Ok(true) => match cursor.record_with(&mut |_, _| {}) {
                    Ok(read) => report.records += u64::from(read),
                    Err(e) => {
                        damage(&mut report, e)?;
                        break;
                    }
                },
                Err(e) => {
                    damage(&mut report, e)?;
                    break;
                }
            }
            moved = cursor.next();
        }
    }
    let count = db.count()?;
    if report.is_clean() && count != report.records {
        report.add(Place::Database, format!("the count says {count} records, {} were read", report.records));
    }
    Ok(report)
}
