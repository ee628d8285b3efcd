//! `kura-compact-bench`: the density benchmark of CompactDbm (issue 16, `bench/compact.py`).
//!
//! `generate` writes a data set as TSV; `run` loads a TSV into one map (CompactDbm with a
//! codec and bucket size, TinyDbm, or `HashMap<Vec<u8>, Vec<u8>>`) and prints one JSON line:
//! bytes per record (the process's resident-set growth over the load, divided by the
//! records, both taken after `malloc_trim`), the load rate, and get and set QPS with 1 and 2 threads. One map per process,
//! so that nothing else moves the resident set. Gets read the keys in a shuffled order;
//! sets overwrite existing keys with another record's value, after the memory is measured.

mod contenders;
mod dataset;
#[path = "../resident.rs"]
mod resident;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use kura::split_mix::SplitMix64;
use serde_json::json;

use contenders::Table;
use dataset::Records;
use resident::resident_bytes;

#[derive(Parser, Debug)]
#[command(name = "kura-compact-bench")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Writes a generated data set as TSV.
    Generate {
        /// `short` (12-byte keys, 20-60 byte values) or `seq` (`%08d` keys and values).
        #[arg(long)]
        kind: String,
        #[arg(long)]
        records: u64,
        #[arg(long)]
        out: PathBuf,
    },
    /// Measures one map on one TSV data set.
    Run {
        #[arg(long)]
        data: PathBuf,
        /// `compact`, `tiny` or `hashmap`.
        #[arg(long)]
        contender: String,
        /// CompactDbm's codec.
        #[arg(long, default_value = "zstd")]
        codec: String,
        /// CompactDbm's records per bucket.
        #[arg(long, default_value_t = kura::CompactDbm::DEFAULT_BUCKET_RECORDS)]
        bucket_records: u64,
        /// Records to load at most.
        #[arg(long, default_value_t = u64::MAX)]
        limit: u64,
        /// Gets per thread in each get phase.
        #[arg(long, default_value_t = 1_000_000)]
        gets: u64,
        /// Sets per thread in each set phase.
        #[arg(long, default_value_t = 200_000)]
        sets: u64,
        /// More CompactDbm parameters (`dict_size=65536,cache_bytes=0`), after the ones above.
        #[arg(long, default_value = "")]
        params: String,
    },
}

fn main() -> ExitCode {
    let outcome = match Args::parse().command {
        Command::Generate { kind, records, out } => dataset::generate(&kind, records, &out),
        Command::Run { data, contender, codec, bucket_records, limit, gets, sets, params } => {
            let compact = contenders::CompactSettings { codec: &codec, bucket_records, extra: &params };
            run(&data, &contender, &compact, limit, gets, sets)
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kura-compact-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `per_thread` operations on each of `threads` threads, thread `t` walking `order` from
/// its own offset; returns operations per second over all threads.
fn timed(threads: u64, per_thread: u64, order: &[usize], op: &(dyn Fn(usize) + Sync)) -> f64 {
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                let offset = (t as usize).wrapping_mul(order.len() / threads.max(1) as usize);
                for i in 0..per_thread as usize {
                    if let Some(&index) = order.get((offset + i) % order.len().max(1)) {
                        op(index);
                    }
                }
            });
        }
    });
    (threads * per_thread) as f64 / started.elapsed().as_secs_f64().max(1e-9)
}

fn run(
    data: &std::path::Path,
    contender: &str,
    compact: &contenders::CompactSettings<'_>,
    limit: u64,
    gets: u64,
    sets: u64,
) -> kura::Result<()> {
    let records: Records = dataset::load(data, limit)?;
    let count = records.len() as u64;
    if count == 0 {
        return Err(kura::Error::invalid("the data set has no record"));
    }
    let raw_bytes: usize = records.iter().map(|(k, v)| k.len() + v.len()).sum();
    let mut order: Vec<usize> = (0..records.len()).collect();
    SplitMix64::new(0x6b75_7261).shuffle(&mut order);
    // The map is made after the baseline: a table sized at creation (TinyDbm's cells,
    // CompactDbm's bucket array) is part of its memory.
    let batch = (contender == "compact").then(|| contenders::bulk_batch(&records));
    let before = resident_bytes();
    let started = Instant::now();
    let mut table: Box<dyn Table> = match contender {
        "compact" => Box::new(contenders::compact(count, compact)?),
        "tiny" => Box::new(contenders::tiny(count)?),
        "hashmap" => Box::new(contenders::PlainHashMap::default()),
        other => return Err(kura::Error::invalid(format!("unknown contender {other:?}"))),
    };
    table.load(&records, batch.as_ref())?;
    let load_qps = count as f64 / started.elapsed().as_secs_f64().max(1e-9);
    let grown = resident_bytes().saturating_sub(before);
    drop(batch);
    let memory_bytes = table.memory_bytes();
    let gets = gets.min(count.saturating_mul(2)).max(1);
    let get_qps: Vec<f64> = [1, 2]
        .iter()
        .map(|&threads| {
            let table = &*table;
            timed(threads, gets, &order, &|index| {
                let found = records.get(index).is_some_and(|(key, _)| table.get(key));
                assert!(found, "a stored key was not found");
            })
        })
        .collect();
    let sets = sets.min(count).max(1);
    let value_of =
        |index: usize| records.get((index + 1) % records.len()).map(|(_, v)| v.as_slice()).unwrap_or_default();
    let started = Instant::now();
    for i in 0..sets as usize {
        if let Some(&index) = order.get(i % order.len()) {
            let key = records.get(index).map(|(k, _)| k.as_slice()).unwrap_or_default();
            table.set(key, value_of(index))?;
        }
    }
    let set_qps_1 = sets as f64 / started.elapsed().as_secs_f64().max(1e-9);
    let shared = &*table;
    let set_qps_2 = shared.shared_set(b"", b"").is_some().then(|| {
        timed(2, sets, &order, &|index| {
            let key = records.get(index).map(|(k, _)| k.as_slice()).unwrap_or_default();
            let _ = shared.shared_set(key, value_of(index));
        })
    });
    let line = json!({
        "contender": contender,
        "codec": (contender == "compact").then_some(compact.codec),
        "bucket_records": (contender == "compact").then_some(compact.bucket_records),
        "params": (contender == "compact" && !compact.extra.is_empty()).then_some(compact.extra),
        "data": data.file_name().map(|n| n.to_string_lossy().into_owned()),
        "records": count,
        "raw_bytes": raw_bytes,
        "rss_growth": grown,
        "bytes_per_record": grown as f64 / count as f64,
        "memory_bytes": memory_bytes,
        "load_qps": load_qps,
        "get_qps_1": get_qps.first(),
        "get_qps_2": get_qps.get(1),
        "set_qps_1": set_qps_1,
        "set_qps_2": set_qps_2,
    });
    println!("{line}");
    Ok(())
}
