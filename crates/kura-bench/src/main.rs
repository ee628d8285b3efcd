//! `kura-cache-bench`: CacheDbm's hit ratio and throughput under a Zipf-distributed key
//! workload, with its default LRU policy and with TinyLFU admission (`policy=tinylfu`), beside moka and quick_cache at the same capacity and beside plain LRU (an exact
//! simulation and Che's approximation), for `make bench` (bench/run.py) and issue 4; and
//! SegCacheDbm at the same record count and at the memory CacheDbm takes for that count
//! (issue 42: `held` says how many records each holds at the end). With `--expiry`, also
//! SegCacheDbm at that memory with a quarter of the keys expiring, the expiry kept in the
//! value only or also given to the engine.
//!
//! Each cache replays the same trace (`zipf.rs`) with the cache-aside pattern
//! (`contenders.rs`): get, and set on a miss. The first `--warmup` share of the trace fills
//! the cache on one thread, untimed and uncounted, so that the hit ratio is the steady-state
//! one that Che's approximation predicts rather than one lowered by the first, compulsory
//! misses. The rest is cut into N contiguous parts replayed at once by N threads, timed.
//! One JSON line per measurement on stdout.

mod contenders;
mod lru;
mod zipf;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Parser;
use serde_json::json;

use contenders::{Contender, Kura, Moka, QuickCache, SegCacheExpiry};

/// Hit ratio and QPS of CacheDbm, moka and quick_cache under Zipf keys.
#[derive(Parser, Debug)]
#[command(name = "kura-cache-bench")]
struct Args {
    /// Entries each cache may hold.
    #[arg(long, default_value_t = 100_000)]
    capacity: u64,
    /// Distinct keys the trace draws from.
    #[arg(long, default_value_t = 1_000_000)]
    universe: u64,
    /// Requests in the trace.
    #[arg(long, default_value_t = 5_000_000)]
    ops: u64,
    /// Zipf exponents, comma separated.
    #[arg(long, default_value = "0.99,1.2", value_delimiter = ',')]
    zipf: Vec<f64>,
    /// Thread counts, comma separated.
    #[arg(long, default_value = "1,2", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Share of the trace replayed first to fill the caches, not counted.
    #[arg(long, default_value_t = 0.2)]
    warmup: f64,
    /// Seed of the trace.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Adds two rows of SegCacheDbm at CacheDbm's memory where a quarter of the keys expire
    /// this many virtual seconds (10,000 requests each) after they are stored: with the
    /// expiry in the value only, and also given to the engine (issue 42).
    #[arg(long)]
    expiry: Option<u64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kura-cache-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> kura::Result<()> {
    if args.capacity == 0 || args.universe == 0 || args.threads.contains(&0) {
        return Err(kura::Error::invalid("--capacity, --universe and --threads must be at least 1"));
    }
    if !(0.0..1.0).contains(&args.warmup) {
        return Err(kura::Error::invalid("--warmup must be in [0, 1)"));
    }
    for &s in &args.zipf {
        let probabilities = zipf::probabilities(args.universe, s);
        let trace = zipf::trace(&probabilities, args.ops, args.seed);
        let warm = ((args.ops as f64 * args.warmup) as usize).min(trace.len());
        let (warmup, measured) = trace.split_at(warm);
        let capacity = usize::try_from(args.capacity).unwrap_or(usize::MAX);
        let describe = |cache: &str, threads: usize| {
            json!({
                "cache": cache, "zipf_s": s, "threads": threads, "capacity": args.capacity,
                "universe": args.universe, "ops": measured.len(), "warmup_ops": warmup.len(),
            })
        };
        let simulated = lru::simulate(warmup, measured, capacity);
        let mut line = describe("plain LRU (simulated)", 1);
        extend(&mut line, json!({"hit_ratio": simulated}));
        println!("{line}");
        let mut line = describe("plain LRU (Che approximation)", 1);
        extend(&mut line, json!({"hit_ratio": lru::che_hit_ratio(&probabilities, capacity)}));
        println!("{line}");
        let lru_memory = Kura::lru_memory(args.capacity)?;
        for &threads in &args.threads {
            let mut contenders: Vec<Box<dyn Contender>> = vec![
                Box::new(Kura::lru(args.capacity)?),
                Box::new(Kura::tinylfu(args.capacity)?),
                Box::new(Kura::segcache_records(args.capacity)?),
                Box::new(Kura::segcache_memory(lru_memory)?),
                Box::new(Moka::new(args.capacity)),
                Box::new(QuickCache::new(args.capacity)),
            ];
            if let Some(ttl) = args.expiry {
                contenders.push(Box::new(SegCacheExpiry::new(lru_memory, ttl, false)?));
                contenders.push(Box::new(SegCacheExpiry::new(lru_memory, ttl, true)?));
            }
            for cache in contenders {
                warmup.iter().for_each(|&key| {
                    cache.access(key);
                });
                let (hit_ratio, qps) = replay(cache.as_ref(), measured, threads);
                let mut line = describe(cache.name(), threads);
                extend(
                    &mut line,
                    json!({"hit_ratio": hit_ratio, "qps": qps, "held": cache.held(), "lru_memory": lru_memory}),
                );
                println!("{line}");
            }
        }
    }
    Ok(())
}

fn extend(line: &mut serde_json::Value, more: serde_json::Value) {
    if let (Some(line), Some(more)) = (line.as_object_mut(), more.as_object()) {
        for (name, value) in more {
            line.insert(name.clone(), value.clone());
        }
    }
}

/// Replays the trace through the cache on `threads` threads, each taking a contiguous part;
/// returns the hit ratio and the requests per second.
fn replay(cache: &dyn Contender, trace: &[u64], threads: usize) -> (f64, f64) {
    let hits = AtomicU64::new(0);
    let share = trace.len().div_ceil(threads).max(1);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for part in trace.chunks(share) {
            let hits = &hits;
            scope.spawn(move || {
                let found = part.iter().filter(|&&key| cache.access(key)).count() as u64;
                hits.fetch_add(found, Ordering::Relaxed);
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let requests = trace.len().max(1) as f64;
    (hits.load(Ordering::Relaxed) as f64 / requests, if seconds > 0.0 { trace.len() as f64 / seconds } else { 0.0 })
}
