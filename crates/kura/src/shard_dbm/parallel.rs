//! Runs one piece of work per shard on as many threads as the machine has cores (or fewer,
//! when the caller was given a thread budget, as `kura import --threads` is).
//!
//! Rebuilding, a hard synchronize and a large write batch touch every shard independently,
//! so they run side by side; a pool no wider than the core count keeps a set of many shards
//! from starting hundreds of threads at once.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// The machine's core count: the default thread budget.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `work(i)` for every `i` in `0..count` on at most `max_threads` threads, and returns
/// the results in order; the first error (by shard index) wins, after every started piece
/// has finished.
pub fn each_shard<T: Send>(
    count: usize,
    max_threads: usize,
    work: impl Fn(usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let threads = max_threads.min(count);
    if threads <= 1 {
        return (0..count).map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<T>>> = (0..count).map(|_| None).collect();
    let finished: Vec<Vec<(usize, Result<T>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        if index >= count {
                            return done;
                        }
                        done.push((index, work(index)));
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    for (index, result) in finished.into_iter().flatten() {
        if let Some(slot) = slots.get_mut(index) {
            *slot = Some(result);
        }
    }
    slots
        .into_iter()
        .map(|slot| slot.unwrap_or_else(|| Err(Error::infeasible("a shard's worker thread panicked"))))
        .collect()
}
