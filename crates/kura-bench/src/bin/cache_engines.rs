//! Kura's cache engines at the engine level, the Kura side of `bench/cache_engines.py` (issue
//! 42's "memory <= 0.8x Tkrzw CacheDBM's, set and get >= 1.2x its QPS"), step for step the
//! workload of `bench/tkrzw_cache.cc`, which measures Tkrzw's CacheDBM:
//!
//! - the engine opened through the registry with no file and its benchmark parameters
//!   (`Engine::bench_params`: a record cap of records * 5 / 4 + 1024, room for every key, so
//!   nothing is evicted, which the count after the sets confirms);
//! - the keys `%08d` of 0 .. records-1 set in that order (`kura bench`'s sequential keys), each
//!   with a value of `value_size` bytes naming its key: the key's digits, then
//!   `'a' + (index + position) % 26`;
//! - every key got in the same order, then again in a shuffled order (SplitMix64, seed "kura"),
//!   each value copied into one reused buffer (`get_with`, as Tkrzw's `Get` copies into one
//!   reused `std::string`) and compared with the value set: a missing or wrong value is an error;
//! - the resident set after the sets minus before them (`resident.rs`, as the C++ driver);
//! - untimed, a digest of every key and value (FNV-1a), which must equal the C++ driver's.
//!
//! `kura bench` prints the resident set but not its growth, and counts misses without checking
//! values, hence this program. Prints one JSON line:
//! `cargo run --release -p kura-bench --bin cache_engines -- ENGINE [RECORDS] [VALUE_SIZE]`.

#[path = "../resident.rs"]
mod resident;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use kura::split_mix::SplitMix64;
use kura::{Dbm, Error, OpenMode};
use resident::resident_bytes;
use serde_json::json;

/// The seed of the shuffled get order ("kura"), as in `bench/tkrzw_cache.cc`.
const SHUFFLE_SEED: u64 = 0x6b75_7261;

/// `%08d` of the index, written by hand (least significant digit first, then reversed):
/// formatting through `write!` took a sizeable share of a get.
fn make_key(index: u64, key: &mut Vec<u8>) {
    key.clear();
    let mut rest = index;
    while rest > 0 || key.len() < 8 {
        key.push(b'0' + (rest % 10) as u8);
        rest /= 10;
    }
    key.reverse();
}

/// The alphabet repeated over 26 + `size` bytes: every window `make_value` takes.
fn letters(size: usize) -> Vec<u8> {
    (0..26 + size).map(|i| b'a' + (i % 26) as u8).collect()
}

/// The value of key `index`: its key's digits, then letters that shift with the index, that is
/// `'a' + (index + position) % 26`, taken as a window of `letters`.
fn make_value(key: &[u8], index: u64, size: usize, letters: &[u8], value: &mut Vec<u8>) {
    let prefix = key.len().min(size);
    let start = ((index + prefix as u64) % 26) as usize;
    value.clear();
    value.extend_from_slice(key.get(..prefix).unwrap_or_default());
    value.extend_from_slice(letters.get(start..start + size - prefix).unwrap_or_default());
}

/// FNV-1a over every key and value of the workload, in set order, computed untimed:
/// `bench/cache_engines.py` checks that both sides print the same, i.e. did the same work.
fn workload_digest(records: u64, value_size: usize, letters: &[u8]) -> u64 {
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut digest = 0xcbf2_9ce4_8422_2325_u64;
    for index in 0..records {
        make_key(index, &mut key);
        make_value(&key, index, value_size, letters, &mut value);
        for &byte in key.iter().chain(value.iter()) {
            digest = (digest ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    digest
}

/// Gets every key of `order`, checking each value; the seconds it took.
fn timed_gets(db: &dyn Dbm, order: &[u64], value_size: usize) -> kura::Result<f64> {
    let letters = letters(value_size);
    let (mut key, mut expected, mut value) = (Vec::new(), Vec::new(), Vec::new());
    let started = Instant::now();
    for &index in order {
        make_key(index, &mut key);
        make_value(&key, index, value_size, &letters, &mut expected);
        let mut found = false;
        db.get_with(&key, &mut |stored| {
            value.clear();
            if let Some(stored) = stored {
                value.extend_from_slice(stored);
                found = true;
            }
        })?;
        if !found || value != expected {
            return Err(Error::internal(format!(
                "key {} did not return the value set (found: {found})",
                String::from_utf8_lossy(&key)
            )));
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

fn run(name: &str, records: u64, value_size: usize) -> kura::Result<serde_json::Value> {
    let engine = kura::registry::engine(name)?;
    let in_order: Vec<u64> = (0..records).collect();
    let mut shuffled = in_order.clone();
    SplitMix64::new(SHUFFLE_SEED).shuffle(&mut shuffled);
    let params = engine.bench_params(records);
    let digest = workload_digest(records, value_size, &letters(value_size));
    let rss_before = resident_bytes();
    let db = engine.open(Path::new(""), OpenMode::Create, &params)?;
    let letters = letters(value_size);
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for &index in &in_order {
        make_key(index, &mut key);
        make_value(&key, index, value_size, &letters, &mut value);
        db.set(&key, &value, true)?;
    }
    let set_s = started.elapsed().as_secs_f64();
    let rss_after = resident_bytes();
    let count = db.count()?;
    if count != records {
        return Err(Error::internal(format!(
            "{name} holds {count} records after {records} sets: its benchmark parameters' record cap evicted"
        )));
    }
    let get_s = timed_gets(db.as_ref(), &in_order, value_size)?;
    let get_random_s = timed_gets(db.as_ref(), &shuffled, value_size)?;
    let grown = rss_after.saturating_sub(rss_before);
    let params_text: Vec<String> =
        params.names().map(|n| format!("{n}={}", params.get(n).unwrap_or_default())).collect();
    let line = json!({
        "engine": name, "class": engine.class, "params": params_text.join(","), "records": records,
        "value_size": value_size, "count": count,
        "set_s": set_s, "set_qps": records as f64 / set_s,
        "get_s": get_s, "get_qps": records as f64 / get_s,
        "get_random_s": get_random_s, "get_random_qps": records as f64 / get_random_s,
        "rss_before": rss_before, "rss_after_set": rss_after, "rss_growth": grown,
        "bytes_per_record": grown as f64 / records as f64, "values_checked": 2 * records,
        "workload_digest": format!("{digest:016x}"),
    });
    db.close()?;
    Ok(line)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map_or("segcache", String::as_str);
    let records = args.get(2).and_then(|a| a.parse::<u64>().ok()).unwrap_or(1_000_000).max(1);
    let value_size = args.get(3).and_then(|a| a.parse::<usize>().ok()).unwrap_or(100);
    match run(name, records, value_size) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cache_engines: {e}");
            ExitCode::FAILURE
        }
    }
}
