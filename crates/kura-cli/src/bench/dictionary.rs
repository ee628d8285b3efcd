//! Random-order gets of every key of a TSV file from an existing database: the read side
//! of the dictionary benchmark (`make bench`), mirrored for Tkrzw by `bench/tkrzw_get.cc`.
//!
//! The keys are shuffled with a fixed seed, and each thread gets a disjoint, contiguous
//! share of the shuffled list, so every key is read exactly once whatever the thread count
//! and the QPS of N threads compares directly with that of one.
//!
//! On an ordered database, `--scan` adds full scans and `--range-scan N` adds `--iter` range
//! scans of N records starting at the shuffled keys (see `scan.rs`); `bench/tkrzw_get.cc`
//! has the same two modes.

use std::io::BufRead;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use kura::{Error, OpenMode, PackedBytes, Params};
use serde_json::json;

use super::report::Phase;
use super::scan;
use super::workload::{shuffle, SHUFFLE_SEED};
use super::BenchArgs;
use crate::progress;

pub fn run(args: &BenchArgs, tsv: &Path, params: &Params) -> kura::Result<()> {
    let path = args.path.as_ref().ok_or_else(|| Error::invalid("--keys-from needs --path DB"))?;
    let mut params = params.clone();
    if let Some(engine) = &args.engine {
        params = params.with("engine", engine);
    }
    let mut keys = read_keys(tsv)?;
    shuffle(&mut keys, SHUFFLE_SEED);
    let keys = pack(keys);

    let db = crate::commands::open(path, OpenMode::ReadOnly, &params)?;
    let engine = kura::registry::resolve(path, &params).map_or("unknown", |e| e.name);
    let misses = AtomicU64::new(0);
    let bar = progress::items(keys.len() as u64, "get");
    let share = keys.len().div_ceil(args.threads).max(1);
    let started = Instant::now();
    let outcome = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..keys.len())
            .step_by(share)
            .map(|begin| {
                let (db, misses, bar, keys) = (db.as_ref(), &misses, &bar, &keys);
                let end = keys.len().min(begin + share);
                scope.spawn(move || -> kura::Result<()> {
                    // Each value is copied into one buffer reused by the thread, as
                    // `tkrzw_get.cc` copies it into one std::string with `Get(key, &value)`.
                    let mut value = Vec::new();
                    for (done, index) in (begin..end).enumerate() {
                        let mut found = false;
                        db.get_with(keys.get(index).unwrap_or_default(), &mut |stored| {
                            if let Some(stored) = stored {
                                value.clear();
                                value.extend_from_slice(stored);
                                found = true;
                            }
                        })?;
                        if !found {
                            misses.fetch_add(1, Ordering::Relaxed);
                        }
                        if done % 4096 == 4095 {
                            bar.inc(4096);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        super::join_all(workers)
    });
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    outcome?;
    let misses = misses.load(Ordering::Relaxed);
    Phase {
        engine,
        name: "get",
        threads: args.threads,
        operations: keys.len() as u64,
        records: db.count()?,
        elapsed,
        file_size: db.file_size()?,
        misses,
        context: json!({
            "keys_from": tsv.display().to_string(),
            "path": path.display().to_string(),
            "params": params.names().map(|n| format!("{n}={}", params.get(n).unwrap_or_default())).collect::<Vec<_>>().join(","),
        }),
    }
    .print(args.json)?;
    let context = json!({
        "keys_from": tsv.display().to_string(),
        "path": path.display().to_string(),
    });
    let scan_phase = |name: &'static str, scanned: &scan::Scanned| -> kura::Result<Phase<'_>> {
        Ok(Phase {
            engine,
            name,
            threads: 1,
            operations: scanned.operations,
            records: db.count()?,
            elapsed: scanned.elapsed,
            file_size: db.file_size()?,
            misses: 0,
            context: context.clone(),
        })
    };
    if args.scan {
        for (name, backward) in [("scan", false), ("scan_back", true)] {
            scan_phase(name, &scan::full_scan(db.as_ref(), backward)?)?.print(args.json)?;
        }
    }
    if let Some(span) = args.range_scan {
        let span = span.max(1);
        let starts = keys.len().min(usize::try_from(args.iter).unwrap_or(usize::MAX));
        let per_thread = (starts / args.threads).max(1) as u64;
        let start_key = |thread_id: usize, i: u64, key: &mut Vec<u8>| {
            let index = (thread_id as u64 * per_thread + i) as usize % keys.len().max(1);
            key.clear();
            key.extend_from_slice(keys.get(index).unwrap_or_default());
        };
        let scanned = scan::range_scans(db.as_ref(), args.threads, per_thread, span, &start_key)?;
        let mut line = scan_phase("range", &scanned)?;
        line.threads = args.threads;
        if let Some(extra) = line.context.as_object_mut() {
            extra.insert("span".to_string(), json!(span));
            extra.insert("records_read".to_string(), json!(scanned.records));
        }
        line.print(args.json)?;
    }
    db.close()?;
    if misses > 0 {
        return Err(Error::infeasible(format!("{misses} of {} keys were not found", keys.len())));
    }
    Ok(())
}

/// The first column of every line that has a tab.
fn read_keys(tsv: &Path) -> kura::Result<Vec<Vec<u8>>> {
    let file = std::fs::File::open(tsv).map_err(|e| Error::io(format!("open {}", tsv.display()), e))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut keys = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(|e| Error::io(format!("read {}", tsv.display()), e))?;
        if read == 0 {
            return Ok(keys);
        }
        if let Some(tab) = line.iter().position(|&b| b == b'\t') {
            keys.push(line.get(..tab).unwrap_or_default().to_vec());
        }
    }
}

/// The shuffled keys packed end to end in one buffer, in the order they are read. Fetching
/// the next key is then a sequential read, as it is for the short strings stored inline in
/// `bench/tkrzw_get.cc`'s list (which packs its keys the same way): the time measured is the
/// database's, not the cache misses of a list of separately allocated keys.
fn pack(keys: Vec<Vec<u8>>) -> PackedBytes {
    let mut packed = PackedBytes::with_capacity(keys.len(), keys.iter().map(Vec::len).sum());
    for key in &keys {
        packed.push(Some(key));
    }
    packed
}
