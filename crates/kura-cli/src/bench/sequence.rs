//! The `tkrzw_dbm_perf sequence` workload: set, get, iterate and remove of `%08d` keys.
//!
//! Each phase opens the database afresh (reads: read-only) and closes it afterwards;
//! opening and closing are not timed. Setting and removing include `synchronize(false)` in
//! their time, as Tkrzw's do. Every thread performs all `--iter` operations.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use kura::{Dbm, EngineKind, Error, OpenMode, Params};
use serde_json::json;

use super::report::{title, Phase};
use super::workload::{format_key, KeyOrder, Values};
use super::BenchArgs;
use crate::progress;

/// How often a thread reports progress; rare enough not to disturb the timing.
const PROGRESS_STEP: u64 = 4096;

pub fn run(args: &BenchArgs, params: &Params) -> kura::Result<()> {
    let engine = EngineKind::from_name(args.engine.as_deref().unwrap_or("hash"))?;
    let params = params.clone().with("engine", engine.name());
    let (path, temporary) = match &args.path {
        Some(path) => (path.clone(), false),
        None => (temporary_path(engine), true),
    };
    let result = run_phases(args, engine, &params, &path);
    if temporary {
        let _ = std::fs::remove_file(&path);
    }
    result
}

fn temporary_path(engine: EngineKind) -> PathBuf {
    std::env::temp_dir().join(format!("kura-bench-{}.{}", std::process::id(), engine.extension()))
}

/// The part of a thread's work that varies by phase: one operation on one key.
type Operation<'a> = dyn Fn(&dyn Dbm, &[u8], &[u8], &AtomicU64) -> kura::Result<()> + Sync + 'a;

fn run_phases(args: &BenchArgs, engine: EngineKind, params: &Params, path: &Path) -> kura::Result<()> {
    let context = json!({
        "iter": args.iter,
        "size": args.size,
        "random_key": args.random_key,
        "params": params_text(params),
        "path": path.display().to_string(),
    });
    let total = args.iter.saturating_mul(args.threads as u64);
    let phase =
        |name: &'static str, operations: u64, records: u64, elapsed: Duration, file_size: u64, misses: u64| Phase {
            engine: engine.name(),
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
    announce(args, "set");
    let db = kura::open(path, OpenMode::Truncate, params)?;
    let started = Instant::now();
    let set: &Operation = &|db, key, value, _| db.set(key, value, true);
    run_threads(args, db.as_ref(), "set", set)?;
    db.synchronize(false)?;
    let elapsed = started.elapsed();
    phase("set", total, db.count()?, elapsed, db.file_size()?, 0).print(args.json);
    db.close()?;

    // Getting, read-only. Random keys may miss: that is part of the workload.
    announce(args, "get");
    let db = kura::open(path, OpenMode::ReadOnly, params)?;
    let misses = AtomicU64::new(0);
    let get: &Operation = &|db, key, _, misses| match db.get(key) {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => {
            misses.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(e),
    };
    let started = Instant::now();
    run_threads_counting(args, db.as_ref(), "get", get, &misses)?;
    let elapsed = started.elapsed();
    let misses = misses.load(Ordering::Relaxed);
    phase("get", total, db.count()?, elapsed, db.file_size()?, misses).print(args.json);
    db.close()?;

    // Iterating: one cursor over everything.
    announce(args, "iterate");
    let db = kura::open(path, OpenMode::ReadOnly, params)?;
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
    phase("iterate", visited, db.count()?, elapsed, db.file_size()?, 0).print(args.json);
    db.close()?;

    // Removing. Random keys repeat, so some removals find nothing.
    announce(args, "remove");
    let db = kura::open(path, OpenMode::Write, params)?;
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
    run_threads_counting(args, db.as_ref(), "remove", remove, &absent)?;
    db.synchronize(false)?;
    let elapsed = started.elapsed();
    phase("remove", total, db.count()?, elapsed, db.file_size()?, absent.load(Ordering::Relaxed)).print(args.json);
    db.close()
}

fn announce(args: &BenchArgs, phase: &str) {
    if !args.json {
        println!(
            "{}: impl={} num_iterations={} value_size={} num_threads={}",
            title(phase),
            args.engine.as_deref().unwrap_or("hash"),
            args.iter,
            args.size,
            args.threads
        );
    }
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
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err(Error::infeasible("a bench thread panicked"))))
            .collect::<kura::Result<Vec<()>>>()
    });
    bar.finish_and_clear();
    outcome.map(|_| ())
}
