//! The batched get phase of the sequence workload (`--batch N`): the same keys, in the same
//! order, as the single-key get phase, looked up N at a time through `Dbm::get_many_with`
//! (the zero-copy batched read, as the get phase uses the zero-copy `get_with`), so that the
//! two figures compare the read paths and nothing else.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use kura::{Dbm, PackedBytes};

use super::workload::{format_key, KeyOrder};
use super::BenchArgs;
use crate::progress;

/// Runs `--iter` lookups on each of `--threads` threads in batches of `batch` keys (the last
/// batch of a thread may be shorter); returns the time taken and the keys found absent.
pub fn get_in_batches(args: &BenchArgs, db: &dyn Dbm, batch: usize) -> kura::Result<(Duration, u64)> {
    let batch = batch.max(1);
    let misses = AtomicU64::new(0);
    let bar = progress::items(args.iter.saturating_mul(args.threads as u64), "get_batch");
    let started = Instant::now();
    let outcome = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..args.threads)
            .map(|thread_id| {
                let (bar, misses): (&ProgressBar, &AtomicU64) = (&bar, &misses);
                scope.spawn(move || -> kura::Result<()> {
                    let mut keys = KeyOrder::new(args.random_key, thread_id, args.threads, args.iter);
                    // The batch's keys end to end in one buffer, reused from batch to batch.
                    let mut packed = PackedBytes::with_capacity(batch, batch * 20);
                    let mut key = Vec::with_capacity(20);
                    let mut missed = 0u64;
                    let mut i = 0;
                    while i < args.iter {
                        packed.clear();
                        let len = (args.iter - i).min(batch as u64);
                        for j in i..i + len {
                            format_key(keys.key_number(j), &mut key);
                            packed.push(Some(&key));
                        }
                        let refs = packed.slices();
                        db.get_many_with(&refs, &mut |_, value| missed += u64::from(value.is_none()))?;
                        bar.inc(len);
                        i += len;
                    }
                    misses.fetch_add(missed, Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        super::join_all(workers)
    });
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    outcome.map(|_| (elapsed, misses.load(Ordering::Relaxed)))
}
