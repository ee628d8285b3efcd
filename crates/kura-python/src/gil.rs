//! Releasing the GIL around a short engine call, and taking it back without a futex sleep.
//!
//! A record read from a compressed database takes a few microseconds of decompression, run
//! with the GIL released so that other Python threads go on meanwhile. When the read is done
//! the thread must take the GIL back. If another thread holds it at that moment (it runs the
//! Python half of its own loop, a fraction of a microsecond), CPython's `take_gil` puts this
//! thread to sleep on a condition variable and the holder wakes it through the kernel when it
//! lets go: on a virtual machine a sleep and wake-up of an idle vCPU costs several times the
//! read itself, and that, more than the GIL's hold time, is what kept two reading threads far
//! from twice one thread's speed.
//!
//! So before taking the GIL back, a thread waits in user space (spinning, briefly) while
//! another thread that came out of this binding holds it, and only then calls into CPython,
//! which then finds it free. The binding knows who holds the GIL only between its own
//! re-acquire and its own next release: `HOLDER` is set right after a thread takes the GIL
//! back here and cleared right after it lets go of it here. A holder that lets go of the GIL
//! elsewhere (its Python code sleeps or does I/O) leaves `HOLDER` set until the next thread
//! comes back through here and overwrites it; the spin is bounded by `MAX_SPIN`, so such a
//! stale mark costs at most that much once. The spin only delays a call that was going to
//! wait anyway; the GIL itself is always taken by CPython, so nothing here can deadlock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// How long a thread waits in user space for a holder to let go before it lets CPython put
/// it to sleep: several times the Python half of a dict-protocol loop iteration, well below
/// what a sleep and wake-up costs.
const MAX_SPIN: Duration = Duration::from_micros(20);

/// A number identifying the thread that took the GIL back through `detach` and has not yet
/// released it through `detach`; 0 when none (as far as this binding knows).
static HOLDER: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// This thread's `HOLDER` mark: the address of a thread-local, never 0, unique among
    /// live threads.
    static MARK: u8 = const { 0 };
}

fn this_thread() -> u64 {
    MARK.with(|mark| std::ptr::from_ref(mark) as usize as u64)
}

/// Runs `work` with the GIL released, like `Python::detach`, and takes the GIL back without
/// sleeping in the kernel when another thread of this binding holds it only briefly.
pub fn detach<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> T {
    let me = this_thread();
    let outcome = py.detach(|| {
        // The GIL is released now: this thread no longer holds it.
        let _ = HOLDER.compare_exchange(me, 0, Ordering::Release, Ordering::Relaxed);
        let outcome = work();
        wait_for_release(me);
        outcome
    });
    // The GIL is held again, by this thread.
    HOLDER.store(me, Ordering::Release);
    outcome
}

/// Spins while another thread marked as holding the GIL still does, for at most `MAX_SPIN`.
fn wait_for_release(me: u64) {
    let holder = HOLDER.load(Ordering::Acquire);
    if holder == 0 || holder == me {
        return;
    }
    let start = Instant::now();
    loop {
        for _ in 0..32 {
            std::hint::spin_loop();
            if HOLDER.load(Ordering::Acquire) != holder {
                return;
            }
        }
        if start.elapsed() >= MAX_SPIN {
            return;
        }
    }
}
