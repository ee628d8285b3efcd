//! The `tkrzw_dbm_perf sequence` workload: set, get, iterate and remove of `%08d` keys.
//!
//! A file engine's database is opened afresh for each phase (reads: read-only) and closed
//! afterwards; opening and closing are not timed. An in-memory engine (tiny, baby, cache)
//! with no `--path` keeps one database open through all phases, with no file at all, as
//! `tkrzw_dbm_perf` does for its on-memory DBMs. Setting and removing include
//! `synchronize(false)` in their time, as Tkrzw's do. Every thread performs all `--iter`
//! operations. `--batch N` adds a phase after the gets: the same gets in batches of N keys
//! (`batched.rs`). Ordered engines can add scan phases after iterating (`--scan`,
//! `--range-scan N`, see `scan.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use kura::{Dbm, Engine, Error, ErrorKind, OpenMode, Params};
use serde_json::json;

use super::batched;
use super::report::{title, Phase};
use super::scan;
use super::workload::{format_key, KeyOrder, SplitMix64, Values};
use super::{engine_of, BenchArgs};
use crate::commands::print_line;
use crate::progress;

/// How often a thread reports progress; rare enough not to disturb the timing.
const PROGRESS_STEP: u64 = 4096;

/// Seeds the start keys of range scans apart from the keys of the other phases.
const RANGE_SEED: u64 = 0x7261_6e67; // "rang"

pub fn run(args: &BenchArgs, params: &Params) -> kura::Result<()> {
    let engine = engine_of(args)?;
    if (args.scan || args.range_scan.is_some()) && !engine.is_ordered() {
        let ordered: Vec<&str> = kura::engines().iter().filter(|e| e.is_ordered()).map(|e| e.name).collect();
        return Err(Error::invalid(format!(
            "--scan and --range-scan need an ordered engine ({}), not {}",
            ordered.join(", "),
            engine.name
        )));
    }
    // What the engine needs for a run of this size, where the user did not say otherwise.
    let records = args.iter.saturating_mul(args.threads as u64);
    let params = params.or_defaults(&engine.bench_params(records)).with("engine", engine.name);
    if !args.json {
        print_line(format_args!("Parameters: {}", params_text(&params)))?;
    }
    if let (Some(path), false) = (&args.path, args.force) {
        if let Some(what) = crate::commands::maintenance::existing_database(path)? {
            return Err(Error::new(
                ErrorKind::Duplicate,
                format!("{what} already exists: the benchmark starts from an empty database (--force replaces it)"),
            ));
        }
    }
    let target = match &args.path {
        Some(path) => Target::File { path: path.clone(), temporary: false },
        None if engine.is_in_memory() => Target::Memory(kura::open("", OpenMode::Truncate, &params)?),
        None => Target::File { path: temporary_path(engine), temporary: true },
    };
    let result = run_phases(args, engine, &params, &target);
    match target {
        Target::File { path, temporary: true } => {
            let _ = std::fs::remove_file(&path);
            let _ = kura::shard_dbm::remove_shards(&path);
        }
        Target::Memory(db) => db.close()?,
        Target::File { .. } => {}
    }
    result
}

fn temporary_path(engine: &Engine) -> PathBuf {
    std::env::temp_dir().join(format!("kura-bench-{}.{}", std::process::id(), engine.extension))
}

/// Where the phases find their database.
enum Target {
    /// A file, reopened by each phase.
    File { path: PathBuf, temporary: bool },
    /// One in-memory database with no file, kept open through all phases.
    Memory(Box<dyn Dbm>),
}

impl Target {
    /// Runs `body` on the database opened in `mode` (a file) or on the one database (memory).
    fn with<T>(
        &self,
        mode: OpenMode,
        params: &Params,
        body: impl FnOnce(&dyn Dbm) -> kura::Result<T>,
    ) -> kura::Result<T> {
        match self {
            Target::File { path, .. } => {
                let db = kura::open(path, mode, params)?;
                let out = body(db.as_ref())?;
                db.close()?;
                Ok(out)
            }
            Target::Memory(db) => body(db.as_ref()),
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Target::File { path, .. } => Some(path),
            Target::Memory(_) => None,
        }
    }
}

/// The part of a thread's work that varies by phase: one operation on one key.
type Operation<'a> = dyn Fn(&dyn Dbm, &[u8], &[u8], &AtomicU64) -> kura::Result<()> + Sync + 'a;

fn run_phases(args: &BenchArgs, engine: &Engine, params: &Params, target: &Target) -> kura::Result<()> {
    let context = json!({
        "iter": args.iter,
        "size": args.size,
        "random_key": args.random_key,
        "params": params_text(params),
        "path": target.path().map_or_else(|| "(memory)".to_string(), |p| p.display().to_string()),
    });
    let total = args.iter.saturating_mul(args.threads as u64);
    let phase =
        |name: &'static str, operations: u64, records: u64, elapsed: Duration, file_size: u64, misses: u64| Phase {
            engine: engine.name,
            name,
            threads: args.threads,
            operations,
            records,
            elapsed,
            file_size,
            misses,
            context: context.clone(),
        };

    // Setting.
    announce(args, "set")?;
    target.with(OpenMode::Truncate, params, |db| {
        let started = Instant::now();
        let set: &Operation = &|db, key, value, _| db.set(key, value, true);
        run_threads(args, db, "set", set)?;
        db.synchronize(false)?;
        let elapsed = started.elapsed();
        phase("set", total, db.count()?, elapsed, db.file_size()?, 0).print(args.json)?;
        Ok(())
    })?;

    // Getting, read-only. Random keys may miss: that is part of the workload. Like
    // tkrzw_dbm_perf's `Get(key)`, which reads the record without copying its value out, the
    // value is looked at in place (`get_with`, the zero-copy read), not copied into a Vec.
    announce(args, "get")?;
    target.with(OpenMode::ReadOnly, params, |db| {
        let misses = AtomicU64::new(0);
        let get: &Operation = &|db, key, _, misses| {
            let mut found = false;
            db.get_with(key, &mut |value| found = value.is_some())?;
            if !found {
                misses.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        };
        let started = Instant::now();
        run_threads_counting(args, db, "get", get, &misses)?;
        let elapsed = started.elapsed();
        let misses = misses.load(Ordering::Relaxed);
        phase("get", total, db.count()?, elapsed, db.file_size()?, misses).print(args.json)?;
        Ok(())
    })?;

    // Getting again in batches of N (`--batch`): the same keys in the same order.
    for &batch in &args.batch {
        announce(args, "get_batch")?;
        target.with(OpenMode::ReadOnly, params, |db| {
            let (elapsed, misses) = batched::get_in_batches(args, db, usize::try_from(batch).unwrap_or(usize::MAX))?;
            let mut line = phase("get_batch", total, db.count()?, elapsed, db.file_size()?, misses);
            if let Some(extra) = line.context.as_object_mut() {
                extra.insert("batch".to_string(), json!(batch));
            }
            line.print(args.json)?;
            Ok(())
        })?;
    }

    // Iterating: one cursor over everything.
    announce(args, "iterate")?;
    target.with(OpenMode::ReadOnly, params, |db| {
        let started = Instant::now();
        let mut visited = 0u64;
        let mut cursor = db.cursor()?;
        let mut moved = cursor.first()?;
        while moved {
            if cursor.record()?.is_some() {
                visited += 1;
            }
            moved = cursor.next()?;
        }
        drop(cursor);
        let elapsed = started.elapsed();
        phase("iterate", visited, db.count()?, elapsed, db.file_size()?, 0).print(args.json)?;
        Ok(())
    })?;

    // Ordered engines: full scans through the ordered cursor, both ways.
    if args.scan {
        for (name, backward) in [("scan", false), ("scan_back", true)] {
            announce(args, name)?;
            target.with(OpenMode::ReadOnly, params, |db| {
                let scanned = scan::full_scan(db, backward)?;
                phase(name, scanned.operations, db.count()?, scanned.elapsed, db.file_size()?, 0).print(args.json)?;
                Ok(())
            })?;
        }
    }

    // Ordered engines: `iter / span` range scans per thread from random keys, so that each
    // thread reads about `iter` records.
    if let Some(span) = args.range_scan {
        let span = span.max(1);
        announce(args, "range")?;
        target.with(OpenMode::ReadOnly, params, |db| {
            let key_count = total.max(1);
            // The start key of scan i of a thread: SplitMix64's first output is a good hash
            // of its seed, so seeding by (thread, i) gives reproducible, well-spread keys
            // without a generator shared between threads.
            let start_key = |thread_id: usize, i: u64, key: &mut Vec<u8>| {
                let mut rng = SplitMix64::new(RANGE_SEED ^ ((thread_id as u64) << 40) ^ i);
                format_key(rng.below(key_count), key);
            };
            let scans = (args.iter / span).max(1);
            let scanned = scan::range_scans(db, args.threads, scans, span, &start_key)?;
            let mut line = phase("range", scanned.operations, db.count()?, scanned.elapsed, db.file_size()?, 0);
            if let Some(extra) = line.context.as_object_mut() {
                extra.insert("span".to_string(), json!(span));
                extra.insert("records_read".to_string(), json!(scanned.records));
            }
            line.print(args.json)?;
            Ok(())
        })?;
    }

    // Removing. Random keys repeat, so some removals find nothing.
    announce(args, "remove")?;
    target.with(OpenMode::Write, params, |db| {
        let absent = AtomicU64::new(0);
        let remove: &Operation = &|db, key, _, absent| match db.remove(key) {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => {
                absent.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        };
        let started = Instant::now();
        run_threads_counting(args, db, "remove", remove, &absent)?;
        db.synchronize(false)?;
        let elapsed = started.elapsed();
        phase("remove", total, db.count()?, elapsed, db.file_size()?, absent.load(Ordering::Relaxed))
            .print(args.json)?;
        Ok(())
    })
}

fn announce(args: &BenchArgs, phase: &str) -> kura::Result<()> {
    if !args.json {
        print_line(format_args!(
            "{}: impl={} num_iterations={} value_size={} num_threads={}",
            title(phase),
            engine_of(args)?.name,
            args.iter,
            args.size,
            args.threads
        ))?;
    }
    Ok(())
}

fn params_text(params: &Params) -> String {
    params.names().map(|n| format!("{n}={}", params.get(n).unwrap_or_default())).collect::<Vec<_>>().join(",")
}

fn run_threads(args: &BenchArgs, db: &dyn Dbm, what: &str, operation: &Operation) -> kura::Result<()> {
    run_threads_counting(args, db, what, operation, &AtomicU64::new(0))
}

/// Runs `operation` `--iter` times on each of `--threads` threads, on the keys and values
/// `tkrzw_dbm_perf` would use.
fn run_threads_counting(
    args: &BenchArgs,
    db: &dyn Dbm,
    what: &str,
    operation: &Operation,
    counter: &AtomicU64,
) -> kura::Result<()> {
    let bar = progress::items(args.iter.saturating_mul(args.threads as u64), what);
    let outcome = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..args.threads)
            .map(|thread_id| {
                let bar: &ProgressBar = &bar;
                scope.spawn(move || -> kura::Result<()> {
                    let values = Values::new(thread_id, args.size);
                    let mut keys = KeyOrder::new(args.random_key, thread_id, args.threads, args.iter);
                    let mut key = Vec::with_capacity(20);
                    for i in 0..args.iter {
                        format_key(keys.key_number(i), &mut key);
                        operation(db, &key, values.get(i), counter)?;
                        if (i + 1) % PROGRESS_STEP == 0 {
                            bar.inc(PROGRESS_STEP);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        super::join_all(workers)
    });
    bar.finish_and_clear();
    outcome.map(|_| ())
}
