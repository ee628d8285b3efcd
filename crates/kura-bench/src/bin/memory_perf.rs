//! Throughput and RSS of the memory engines without a backing file, in the shape of
//! `tkrzw_dbm_perf sequence` (set, get, remove of `%08d` keys with 8-byte values):
//! `cargo run --release -p kura-bench --bin memory_perf -- tiny|baby|cache [records] [threads] [random|seq]
//! [cap_mem_bytes] [value_size]` (the cache's record cap is the number of records).
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::time::Instant;

use kura::{Dbm, OpenMode};

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1));
    kb.and_then(|k| k.parse::<u64>().ok()).unwrap_or(0) * 1024
}

fn key_of(i: u64, random: bool, n: u64) -> u64 {
    if random {
        // A hash of i reduced to 0..n: keys repeat, as with tkrzw_dbm_perf --random_key.
        kura::split_mix::SplitMix64::new(i).next_u64() % n
    } else {
        i
    }
}

fn phase(dbm: &dyn Dbm, name: &str, n: u64, threads: u64, random: bool, op: &(dyn Fn(&dyn Dbm, &[u8]) + Sync)) {
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                for i in 0..n {
                    let key = format!("{:08}", key_of(t * n + i, random, n * threads));
                    op(dbm, key.as_bytes());
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let qps = (n * threads) as f64 / elapsed;
    println!(
        "{name}: {:.3}s qps={:.0} count={} rss={} file_size={}",
        elapsed,
        qps,
        dbm.count().unwrap(),
        rss_bytes(),
        dbm.file_size().unwrap()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // The engine named on the command line (`tiny` when none is: the plainest memory engine).
    let name = args.get(1).map_or("tiny", String::as_str);
    let engine = kura::registry::engine(name).unwrap();
    let n: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let threads: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1);
    let random = args.get(4).is_some_and(|a| a == "random");
    let cap_mem: Option<u64> = args.get(5).and_then(|c| c.parse().ok());
    let value_size: usize = args.get(6).and_then(|a| a.parse().ok()).unwrap_or(8);
    let value = vec![b'v'; value_size];
    let value = value.as_slice();
    // What the engine needs to hold every record of the run (CacheDbm's record cap), and a
    // memory cap when one is given.
    let mut params = engine.bench_params(n * threads);
    if let Some(cap) = cap_mem {
        params = params.with("cap_mem_bytes", cap);
    }
    println!("{name} records={n} threads={threads} random={random} rss_at_start={}", rss_bytes());
    let dbm = engine.open(std::path::Path::new(""), OpenMode::Create, &params).unwrap();
    let dbm = dbm.as_ref();
    phase(dbm, "set", n, threads, random, &|db, key| db.set(key, value, true).unwrap());
    phase(dbm, "get", n, threads, random, &|db, key| {
        let _ = db.get(key);
    });
    phase(dbm, "remove", n, threads, random, &|db, key| {
        let _ = db.remove(key);
    });
    let properties = dbm.inspect().unwrap().properties();
    println!("{properties:?}");
}
