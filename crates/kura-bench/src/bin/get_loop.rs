//! Times the same 1M gets on one TinyDbm from two loops: one over keys formatted beforehand,
//! one that formats each key (`%08d`) right before its get, as `kura bench` and
//! `tkrzw_dbm_perf` do.
//!
//! Why: each get waits for about one memory load (see `memory_latency.rs`). When a loop
//! iteration is short, the CPU reaches the next get's load while the previous one is still
//! waiting and the two overlap; a longer iteration (here, formatting the key)
//! leaves no room for that. The difference is a property of the calling loop, not of the
//! engine; docs/bench.md says what it means for the benchmark figures.
//! Run: `cargo run --release -p kura-bench --bin get_loop`.

use std::io::Write;
use std::time::Instant;

use kura::{Dbm, Params, TinyDbm};

const RECORDS: u64 = 1_000_000;
const ROUNDS: usize = 3;

fn main() -> kura::Result<()> {
    let db = TinyDbm::new(&Params::default())?;
    let mut key = Vec::with_capacity(20);
    let mut formatted = Vec::with_capacity(RECORDS as usize);
    for number in 0..RECORDS {
        format_key(number, &mut key);
        db.set(&key, b"abcdefgh", true)?;
        formatted.push(key.clone());
    }
    for round in 1..=ROUNDS {
        let mut found = 0u64;
        let started = Instant::now();
        for key in &formatted {
            db.get_with(key, &mut |value| found += u64::from(value.is_some()))?;
        }
        let prepared = started.elapsed();
        let started = Instant::now();
        for number in 0..RECORDS {
            format_key(number, &mut key);
            db.get_with(&key, &mut |value| found += u64::from(value.is_some()))?;
        }
        let in_loop = started.elapsed();
        let started = Instant::now();
        for number in 0..RECORDS {
            format_key(number, &mut key);
            found += u64::from(std::hint::black_box(&key).len() == 8);
        }
        let formatting = started.elapsed();
        let per_get = |elapsed: std::time::Duration| elapsed.as_nanos() as f64 / RECORDS as f64;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "round {round}: keys formatted beforehand {:.0} ns/get, formatted in the loop {:.0} ns/get, \
             formatting alone {:.0} ns/key ({found})",
            per_get(prepared),
            per_get(in_loop),
            per_get(formatting)
        );
    }
    Ok(())
}

/// `sprintf("%08d")` into a reused buffer, through Rust's formatting machinery.
fn format_key(number: u64, out: &mut Vec<u8>) {
    out.clear();
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{number:08}");
}
