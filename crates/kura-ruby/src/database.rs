//! `Kura::DB`: one open database of any engine, with the native half of its Hash-like API.
//!
//! ruby/lib/kura.rb adds the Ruby half (`fetch`, `each` with keywords, enumerators, aliases,
//! `Enumerable`, `batch` with a block) on top of these primitives.
//!
//! Threads: a `Kura::DB` may be shared by Ruby threads; each engine call is atomic. The GVL
//! is released (`gvl::without_gvl`) around calls that do I/O or may wait (open, close, sync,
//! rebuild, clear, stats, batches, batched lookups of `LONG_BATCH` keys or more, the chunks
//! of a walk) and around record calls (smaller batched lookups included) on
//! databases whose records are compressed (decompression takes microseconds) or that were
//! opened with `release_gvl: true`. Uncompressed record calls keep it: they take about as
//! long as releasing and re-taking it; except while another thread of this database is in
//! one of the long calls above (`busy`), since a record call may then wait for the engine
//! lock that call holds, and must not stop every Ruby thread meanwhile. Ruby code never runs
//! while an engine lock is held:
//! values are copied out of the engine before Ruby strings are made of them.

use kura::binding::DbHandle;
use kura::{Action, Dbm, PackedBytes, Params, Stat, TypedDbm};
use magnus::encoding::{Index, RbEncoding};
use magnus::{Error, IntoValue, RArray, RHash, RString, Ruby, Value};
use std::ops::Bound;
use std::path::PathBuf;

use crate::batch::Batch;
use crate::convert::{Input, Output};
use crate::errors::{self, OrRaise};
use crate::gvl::without_gvl;
use crate::walk::{Kind, Walk, Yield};

#[magnus::wrap(class = "Kura::DB", free_immediately, size)]
pub struct Database {
    /// The open database: its engine, what it is, how it was opened, when its calls release
    /// the GVL (record calls, and long calls, counted: see the file header), whether it is
    /// closed (`kura::binding::DbHandle`, shared with Python's `kura.Database`).
    handle: DbHandle,
    output: Output,
}

/// Keys from which a batched lookup (`values_at` and its kin) runs as a long call, with the
/// GVL released: 16 keys at a few hundred nanoseconds each take several microseconds, more
/// than one GVL hand-over (about a 1.3 µs read's worth, docs/ruby.md), so other threads
/// gain. An estimate, not a measured crossing point. Smaller batches follow the database's
/// record calls (`record_call_releases`).
const LONG_BATCH: usize = 16;

pub fn params_of(pairs: Vec<(String, String)>) -> Params {
    pairs.into_iter().fold(Params::new(), |params, (name, value)| params.with(&name, value))
}

impl Database {
    /// `Kura::DB._open(path, mode, [[name, value], ...], encoding or nil, release_gvl or
    /// nil)`; lib/kura.rb turns keyword arguments into these.
    pub fn open(
        ruby: &Ruby,
        path: String,
        mode: String,
        params: Vec<(String, String)>,
        encoding: Option<RbEncoding>,
        release_gvl: Option<bool>,
    ) -> Result<Database, Error> {
        let params = params_of(params);
        let handle = without_gvl(|| DbHandle::open(PathBuf::from(path), &mode, &params, release_gvl)).or_raise(ruby)?;
        Ok(Database { handle, output: Output::new(encoding.map(Index::from)) })
    }

    /// The engine, or ClosedError.
    #[inline]
    fn live(&self, ruby: &Ruby) -> Result<&TypedDbm, Error> {
        self.handle.live().ok_or_else(|| errors::closed(ruby))
    }

    /// Whether a record call releases the GVL: always on a database that says so, else while
    /// another thread is in a long call (whose lock the record call may wait for).
    #[inline]
    fn record_call_releases(&self) -> bool {
        self.handle.release().record_call_releases()
    }

    /// Runs a long call (`long`: I/O, many records) with the GVL released, counted in
    /// `busy`, or a record call as `record_call_releases` says.
    fn run<T>(&self, ruby: &Ruby, long: bool, call: impl FnOnce(&dyn Dbm) -> kura::Result<T>) -> Result<T, Error> {
        let dbm = self.live(ruby)?.dbm();
        let outcome = if long {
            let _long = self.handle.release().long_call();
            without_gvl(|| call(dbm))
        } else if self.record_call_releases() {
            without_gvl(|| call(dbm))
        } else {
            call(dbm)
        };
        outcome.or_raise(ruby)
    }

    fn string(&self, ruby: &Ruby, bytes: &[u8]) -> RString {
        self.output.string(ruby, bytes)
    }

    /// `db[key]`: the value, or nil.
    pub fn aref(ruby: &Ruby, rb_self: &Database, key: Value) -> Result<Option<RString>, Error> {
        let engine = rb_self.live(ruby)?;
        let key = Input::key(ruby, key)?;
        let found = if rb_self.record_call_releases() {
            let key = key.to_vec();
            without_gvl(|| engine.get(&key))
        } else {
            key.with_bytes(|k| engine.get(k))
        };
        Ok(found.or_raise(ruby)?.map(|value| rb_self.string(ruby, &value)))
    }

    /// `db._get_many(keys)`: the values of an Array of keys in its order, nil where a key has
    /// no record, as one batched lookup (`Dbm::get_many_with`, docs/get_many.md). The keys
    /// are copied out first, end to end into one buffer (Ruby strings may change once the
    /// GVL is released), so a key that is not a String or Symbol is a TypeError before
    /// anything is looked up; the values come back in one buffer too and become Ruby strings
    /// once the GVL is held again. A batch of `LONG_BATCH` keys or more is a long call (the
    /// GVL released, `busy` counted); a smaller one is a record call. lib/kura/db.rb passes
    /// an Array no Ruby code can reach (a Symbol's `name` runs Ruby code).
    pub fn get_many(ruby: &Ruby, rb_self: &Database, keys: RArray) -> Result<RArray, Error> {
        rb_self.live(ruby)?;
        let mut packed = PackedBytes::with_capacity(keys.len(), 0);
        for at in 0..keys.len() {
            let key = Input::key(ruby, keys.entry::<Value>(at as isize)?)?;
            key.with_bytes(|bytes| packed.push(Some(bytes)));
        }
        let refs = packed.slices();
        let long = refs.len() >= LONG_BATCH;
        let fetched =
            rb_self.run(ruby, long, |dbm| PackedBytes::collect(refs.len(), |visit| dbm.get_many_with(&refs, visit)))?;
        let values = ruby.ary_new_capa(fetched.len());
        for value in fetched.iter() {
            values.push(value.map(|value| rb_self.string(ruby, value)))?;
        }
        Ok(values)
    }

    /// `db[key] = value`: stores the record, replacing any; returns `value`.
    pub fn aset(ruby: &Ruby, rb_self: &Database, key: Value, value: Value) -> Result<Value, Error> {
        let engine = rb_self.live(ruby)?;
        let (raw_key, raw_value) = (Input::key(ruby, key)?, Input::value(ruby, value)?);
        let outcome = if rb_self.record_call_releases() {
            let (k, v) = (raw_key.to_vec(), raw_value.to_vec());
            without_gvl(|| engine.set(&k, &v, true))
        } else {
            raw_key.with_bytes(|k| raw_value.with_bytes(|v| engine.set(k, v, true)))
        };
        outcome.or_raise(ruby)?;
        Ok(value)
    }

    /// `db.key?(key)`.
    pub fn has_key(ruby: &Ruby, rb_self: &Database, key: Value) -> Result<bool, Error> {
        let engine = rb_self.live(ruby)?;
        let key = Input::key(ruby, key)?;
        let found = if rb_self.record_call_releases() {
            let key = key.to_vec();
            without_gvl(|| engine.contains(&key))
        } else {
            key.with_bytes(|k| engine.contains(k))
        };
        found.or_raise(ruby)
    }

    /// Removes the record of `key` and returns its old value, or nil if there was none.
    pub fn remove(ruby: &Ruby, rb_self: &Database, key: Value) -> Result<Option<RString>, Error> {
        let key = Input::key(ruby, key)?.to_vec();
        let old = rb_self.run(ruby, false, |dbm| {
            let mut old = None;
            dbm.process(&key, &mut |value| {
                old = value.map(<[u8]>::to_vec);
                Action::Remove
            })?;
            Ok(old)
        })?;
        Ok(old.map(|value| rb_self.string(ruby, &value)))
    }

    /// Number of records.
    pub fn size(ruby: &Ruby, rb_self: &Database) -> Result<u64, Error> {
        rb_self.run(ruby, false, |dbm| dbm.count())
    }

    /// Yields records (`what`: 0 pairs as `[key, value]`, 1 keys, 2 values) between the
    /// bounds (nil: open) in key order, or all records in the engine's order when there are
    /// no bounds and no `reversed` (see walk.rs).
    #[expect(
        clippy::too_many_arguments,
        reason = "the flat primitive behind each/range; lib/kura.rb gives it keywords"
    )]
    pub fn walk(
        ruby: &Ruby,
        rb_self: &Database,
        what: u8,
        lower: Option<Value>,
        lower_inclusive: bool,
        upper: Option<Value>,
        upper_inclusive: bool,
        reversed: bool,
    ) -> Result<(), Error> {
        rb_self.live(ruby)?;
        let what = Yield::from_code(what)
            .ok_or_else(|| Error::new(ruby.exception_arg_error(), format!("Kura: unknown walk {what}")))?;
        let in_key_order = lower.is_some() || upper.is_some() || reversed;
        let lower = bound(ruby, lower, lower_inclusive)?;
        let upper = bound(ruby, upper, upper_inclusive)?;
        let dbm = rb_self.handle.shared();
        let tree = rb_self.live(ruby)?.tree().cloned();
        let mut walk = match &tree {
            Some(tree) => Walk::new(Kind::Tree { range: tree.range((lower, upper)), reversed }),
            None if rb_self.handle.is_ordered() => Walk::new(Kind::Ordered {
                cursor: dbm.ordered_cursor().or_raise(ruby)?,
                lower,
                upper,
                reversed,
                started: false,
            }),
            None if in_key_order => return Err(errors::not_ordered(ruby, rb_self.handle.kind().name)),
            None => Walk::new(Kind::Plain { cursor: dbm.cursor().or_raise(ruby)?, started: false }),
        };
        loop {
            rb_self.live(ruby)?;
            let chunk = {
                let _long = rb_self.handle.release().long_call();
                without_gvl(|| walk.next_chunk(what))
            }
            .or_raise(ruby)?;
            if chunk.is_empty() {
                return Ok(());
            }
            for (key, value) in chunk.records() {
                let _: Value = match what {
                    Yield::Pairs => ruby.yield_value(
                        ruby.ary_new_from_values(&[rb_self.string(ruby, key), rb_self.string(ruby, value)]),
                    )?,
                    Yield::Keys => ruby.yield_value(rb_self.string(ruby, key))?,
                    Yield::Values => ruby.yield_value(rb_self.string(ruby, value))?,
                };
            }
        }
    }

    /// Adds `delta` to the counter under `key` (8 bytes, big-endian); returns the new value.
    pub fn increment(ruby: &Ruby, rb_self: &Database, key: Value, delta: i64, initial: i64) -> Result<i64, Error> {
        let key = Input::key(ruby, key)?.to_vec();
        rb_self.run(ruby, false, |dbm| dbm.increment(&key, delta, initial))
    }

    /// Sets the record to `desired` (nil: removes it) if it is `expected` (nil: absent);
    /// true when it matched and was changed.
    pub fn compare_exchange(
        ruby: &Ruby,
        rb_self: &Database,
        key: Value,
        expected: Option<Value>,
        desired: Option<Value>,
    ) -> Result<bool, Error> {
        let key = Input::key(ruby, key)?.to_vec();
        let expected = expected.map(|v| Input::value(ruby, v).map(|v| v.to_vec())).transpose()?;
        let desired = desired.map(|v| Input::value(ruby, v).map(|v| v.to_vec())).transpose()?;
        rb_self.run(ruby, false, |dbm| dbm.compare_exchange_matched(&key, expected.as_deref(), desired.as_deref()))
    }

    /// Applies a `Kura::Batch` (and empties it).
    pub fn write(ruby: &Ruby, rb_self: &Database, batch: &Batch) -> Result<(), Error> {
        rb_self.live(ruby)?;
        let ops = batch.take();
        rb_self.run(ruby, true, |dbm| dbm.write_batch(&ops))
    }

    /// Removes every record.
    pub fn clear(ruby: &Ruby, rb_self: &Database) -> Result<(), Error> {
        rb_self.run(ruby, true, |dbm| dbm.clear())
    }

    /// Writes buffered changes to the file; with `hard`, also to the device.
    pub fn sync(ruby: &Ruby, rb_self: &Database, hard: bool) -> Result<(), Error> {
        rb_self.run(ruby, true, |dbm| dbm.synchronize(hard))
    }

    /// Rewrites the database compactly with these parameters.
    pub fn rebuild(ruby: &Ruby, rb_self: &Database, params: Vec<(String, String)>) -> Result<(), Error> {
        let params = params_of(params);
        rb_self.run(ruby, true, |dbm| dbm.rebuild(&params))
    }

    /// The engine's `inspect` properties: Symbol keys; integers, booleans and strings.
    pub fn stats(ruby: &Ruby, rb_self: &Database) -> Result<RHash, Error> {
        let stats = rb_self.run(ruby, true, |dbm| dbm.inspect())?;
        let hash = ruby.hash_new();
        for (name, stat) in stats.entries() {
            let value = match stat {
                Stat::Number(number) => number.into_value_with(ruby),
                Stat::Flag(flag) => flag.into_value_with(ruby),
                Stat::Name(text) => ruby.str_new(text).into_value_with(ruby),
                Stat::Text(text) => ruby.str_new(&text).into_value_with(ruby),
            };
            hash.aset(ruby.to_symbol(&name), value)?;
        }
        Ok(hash)
    }

    /// Bytes the database occupies in its file (or in memory).
    pub fn file_size(ruby: &Ruby, rb_self: &Database) -> Result<u64, Error> {
        rb_self.run(ruby, false, |dbm| dbm.file_size())
    }

    /// Flushes and releases the database; closing twice is harmless.
    pub fn close(ruby: &Ruby, rb_self: &Database) -> Result<(), Error> {
        let handle = &rb_self.handle;
        without_gvl(|| handle.close()).or_raise(ruby)
    }

    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }

    pub fn path(&self) -> String {
        self.handle.path().display().to_string()
    }

    /// The engine's registry name: hash, tree, ...
    pub fn engine(&self) -> &'static str {
        self.handle.kind().name
    }

    /// Whether the engine keeps keys in order (from:, to:, reversed:, range).
    pub fn is_ordered(&self) -> bool {
        self.handle.is_ordered()
    }

    pub fn is_writable(&self) -> bool {
        self.handle.is_writable()
    }

    pub fn mode(&self) -> String {
        self.handle.flag().to_string()
    }

    /// The encoding results are tagged with; nil for binary (ASCII-8BIT).
    pub fn encoding(&self) -> Option<RbEncoding> {
        self.output.encoding().map(RbEncoding::from)
    }

    pub fn releases_gvl(&self) -> bool {
        self.handle.release().releases_records()
    }
}

/// A walk bound from a key (nil: unbounded).
fn bound(ruby: &Ruby, key: Option<Value>, inclusive: bool) -> Result<Bound<Vec<u8>>, Error> {
    Ok(match key {
        None => Bound::Unbounded,
        Some(key) if inclusive => Bound::Included(Input::key(ruby, key)?.to_vec()),
        Some(key) => Bound::Excluded(Input::key(ruby, key)?.to_vec()),
    })
}
