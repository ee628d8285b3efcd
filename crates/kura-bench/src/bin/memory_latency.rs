//! Measures the latency of one dependent memory load on this machine: a pointer chase
//! through a random cycle of cache lines, in buffers from 1 MiB to 256 MiB, on plain pages
//! and on pages advised as huge.
//!
//! Why: a get from a table of a million records is bound by such loads (the bucket, the
//! record), so this figure is the floor under the 1M-record sequence benchmarks; see
//! docs/bench.md. Run: `cargo run --release -p kura-bench --bin memory_latency`.

use std::time::Instant;

/// Words per 64-byte cache line: each line of the buffer holds one link of the cycle.
const WORDS_PER_LINE: usize = 8;
const STEPS: usize = 2_000_000;

/// Nanoseconds per step of a chase through `bytes` of memory.
fn chase(bytes: usize, huge_pages: bool) -> std::io::Result<f64> {
    let lines = bytes / 64;
    let mut map = memmap2::MmapMut::map_anon(bytes)?;
    if huge_pages {
        // Advice only: where the kernel declines, the pages stay small.
        let _ = map.advise(memmap2::Advice::HugePage);
    }
    // A random order of the lines, then each line points at the next one in that order.
    let mut order: Vec<usize> = (0..lines).collect();
    kura::split_mix::SplitMix64::new(1).shuffle(&mut order);
    let words: &mut [u64] = as_words(&mut map);
    for (position, &line) in order.iter().enumerate() {
        let successor = order.get((position + 1) % lines).copied().unwrap_or(0);
        if let Some(word) = words.get_mut(line * WORDS_PER_LINE) {
            *word = (successor * WORDS_PER_LINE) as u64;
        }
    }
    let started = Instant::now();
    let mut at = 0u64;
    for _ in 0..STEPS {
        // Each load's address is the previous load's result: no two can overlap.
        at = words.get(at as usize).copied().unwrap_or(0);
    }
    let elapsed = started.elapsed();
    std::hint::black_box(at);
    Ok(elapsed.as_nanos() as f64 / STEPS as f64)
}

/// The mapping as 64-bit words.
fn as_words(map: &mut memmap2::MmapMut) -> &mut [u64] {
    let len = map.len() / 8;
    // SAFETY: an anonymous mapping is page-aligned (so 8-byte aligned), `len * 8` bytes of
    // it are in bounds, every bit pattern is a valid u64, and the borrow of `map` keeps it
    // alive and unaliased for the slice's lifetime.
    unsafe { std::slice::from_raw_parts_mut(map.as_mut_ptr().cast::<u64>(), len) }
}

fn main() -> std::io::Result<()> {
    println!("| buffer | ns per dependent load, small pages | huge pages advised |");
    println!("| ---: | ---: | ---: |");
    for mebibytes in [1usize, 2, 4, 8, 16, 64, 256] {
        let bytes = mebibytes << 20;
        println!("| {mebibytes} MiB | {:.0} | {:.0} |", chase(bytes, false)?, chase(bytes, true)?);
    }
    Ok(())
}
