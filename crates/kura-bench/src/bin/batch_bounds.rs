//! Times single gets and batched gets (`get_many_with`, 64 keys) of every hashed or ordered
//! engine twice: on a small table whose lines all stay in the CPU's caches, and on a table
//! of a million records, with the keys formatted beforehand and shuffled.
//!
//! Why: a batched get can only hide memory stalls; it cannot make a lookup's own work
//! cheaper. The small table shows that work (the CPU cost of a get and of a batched key), the
//! large one what the misses add, and the difference between the two bounds what batching
//! can gain on the machine at hand. docs/get_many.md ("What bounds it") reads these figures.
//! Run: `cargo run --release -p kura-bench --bin batch_bounds [RECORDS]`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use kura::split_mix::SplitMix64;
use kura::{Engine, OpenMode};

/// Records of the table that stays in the caches (its lines fit in a core's L2).
const IN_CACHE: u64 = 20_000;
const BATCH: usize = 64;
const ROUNDS: usize = 3;

/// The engines measured: the hashed and ordered ones a user picks for lookups (not CompactDbm,
/// whose reads decompress a bucket, nor a shard set, which is its shards').
const MEASURED: [&str; 4] = ["hash", "tiny", "cache", "tree"];

/// A key as `kura bench` formats it (`%08d`), kept in place rather than formatted per get.
type Key = [u8; 8];

fn main() -> kura::Result<()> {
    let large: u64 = std::env::args().nth(1).and_then(|arg| arg.parse().ok()).unwrap_or(1_000_000);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ns per key, best of {ROUNDS} rounds; batches of {BATCH} keys; keys in random order");
    let _ = writeln!(
        out,
        "| engine | {IN_CACHE} records: get | get_many | {large} records: get | get_many | batch gain | \
         most a batch could gain (get / in-cache get_many) |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for name in MEASURED {
        let engine = kura::registry::engine(name)?;
        let (small_get, small_batch) = measure(engine, IN_CACHE, large)?;
        let (get, batch) = measure(engine, large, large)?;
        let _ = writeln!(
            out,
            "| {name} | {small_get:.0} | {small_batch:.0} | {get:.0} | {batch:.0} | {:.2}x | {:.2}x |",
            get / batch,
            get / small_batch
        );
    }
    Ok(())
}

/// Fills a new `engine` database with `records` records of 8-byte values and returns the best
/// time per key of a single get and of a batched get, each timed over passes through every key
/// in a shuffled order, at least `lookups` lookups (a short timing would measure the clock).
fn measure(engine: &Engine, records: u64, lookups: u64) -> kura::Result<(f64, f64)> {
    let path = scratch_path(engine);
    // Sized for its records as an import sizes it: one bucket a record for the hash engine, a
    // cache that evicts nothing.
    let db = engine.open(&path, OpenMode::Truncate, &engine.import_params(records))?;
    let mut keys: Vec<Key> = (0..records).map(format_key).collect();
    for key in &keys {
        db.set(key, b"abcdefgh", true)?;
    }
    SplitMix64::new(records).shuffle(&mut keys);
    let passes = lookups.div_ceil(records).max(1);
    let timed = passes * records;
    let mut found = 0u64;
    let (mut best_get, mut best_batch) = (f64::MAX, f64::MAX);
    let mut batch: Vec<&[u8]> = Vec::with_capacity(BATCH);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for key in (0..passes).flat_map(|_| &keys) {
            db.get_with(key, &mut |value| found += u64::from(value.is_some()))?;
        }
        best_get = best_get.min(per_key(started, timed));
        let started = Instant::now();
        for chunk in (0..passes).flat_map(|_| keys.chunks(BATCH)) {
            batch.clear();
            batch.extend(chunk.iter().map(|key| key.as_slice()));
            db.get_many_with(&batch, &mut |_, value| found += u64::from(value.is_some()))?;
        }
        best_batch = best_batch.min(per_key(started, timed));
    }
    drop(db);
    let _ = std::fs::remove_file(path);
    // Every key was written: a miss would mean the figures timed something else.
    let expected = 2 * ROUNDS as u64 * timed;
    if found != expected {
        return Err(kura::Error::broken(format!("{}: {found} of {expected} lookups found", engine.name)));
    }
    Ok((best_get, best_batch))
}

/// A temporary file named with the engine's extension (a memory engine's snapshot, written at
/// close, outside the timings).
fn scratch_path(engine: &Engine) -> PathBuf {
    std::env::temp_dir().join(format!("kura-batch-bounds-{}.{}", std::process::id(), engine.extension))
}

fn per_key(started: Instant, records: u64) -> f64 {
    started.elapsed().as_nanos() as f64 / records as f64
}

fn format_key(number: u64) -> Key {
    let mut key = [b'0'; 8];
    let mut rest = number;
    for digit in key.iter_mut().rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    key
}
