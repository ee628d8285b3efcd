//! What the Python and Ruby bindings share, so that each keeps only its own types and
//! idioms (feature `binding`): `DbHandle` (`handle.rs`), one open database; `ErrorClass`
//! (`error_class.rs`), the one table from a Kura error to an exception class; and, here,
//! what they share about their interpreter's lock (CPython's GIL, Ruby's GVL):
//!
//! - `LockRelease`: whether an engine call runs with the lock released. Long calls (I/O,
//!   many records) always do, counted while they run (`busy`); record calls do on a
//!   database whose reads decompress (`Dbm::reads_decompress`, the engine's typed codec, not
//!   a property's name), or that was opened asking for it, or while another thread is in a
//!   long call, whose engine lock a record call may wait for and must not stop every thread
//!   of the interpreter meanwhile.
//! - `Handover`: taking the lock back without a kernel sleep. When a thread's work is done
//!   and another thread holds the lock, the interpreter puts it to sleep on a condition
//!   variable and the holder wakes it through the kernel when it lets go; on a virtual
//!   machine that costs several times a decompressed read, and two reading threads ended up
//!   far from twice one thread's speed. So a thread first waits in user space, briefly,
//!   while another thread that came back through the same `Handover` still holds the lock,
//!   and only then asks the interpreter, which then finds it free. The holder is known only
//!   between its re-acquire here and its next release here: a holder that let go of the lock
//!   elsewhere leaves a stale mark that costs one bounded spin (`MAX_SPIN`). The lock itself
//!   is always taken by the interpreter, so the spin can delay a thread but never deadlock.

mod error_class;
mod handle;

pub use error_class::{os_error, ErrorClass};
pub use handle::DbHandle;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::dbm::Dbm;

/// How long a thread waits in user space for a holder to let go before it lets the
/// interpreter put it to sleep: several times the interpreter's half of a `db[k]` loop
/// iteration, well below what a sleep and wake-up costs.
const MAX_SPIN: Duration = Duration::from_micros(20);

/// When an open database's engine calls release the interpreter's lock.
#[derive(Debug)]
pub struct LockRelease {
    /// Record calls release it too (reads decompress, or the caller asked).
    records: bool,
    /// Threads now in a long call with the lock released.
    busy: AtomicUsize,
}

/// Counts a thread as in a long call (`LockRelease::long_call`) for as long as it lives.
#[derive(Debug)]
pub struct LongCall<'a>(&'a AtomicUsize);

impl Drop for LongCall<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl LockRelease {
    /// The choice for `dbm`: `asked` when the caller gave one (`release_gil=`,
    /// `release_gvl:`), else whether its reads decompress.
    pub fn new(dbm: &dyn Dbm, asked: Option<bool>) -> LockRelease {
        let records = asked.unwrap_or_else(|| dbm.reads_decompress().unwrap_or(false));
        LockRelease { records, busy: AtomicUsize::new(0) }
    }

    /// Whether record calls release the lock whatever else runs (what the bindings show as
    /// `release_gil` / `release_gvl?`).
    pub fn releases_records(&self) -> bool {
        self.records
    }

    /// Whether a record call releases the lock now: always on a database that says so, else
    /// while another thread is in a long call.
    #[inline]
    pub fn record_call_releases(&self) -> bool {
        self.records || self.busy.load(Ordering::Acquire) > 0
    }

    /// Counts this thread into the long calls until the guard drops: call it before
    /// releasing the lock for a long call.
    pub fn long_call(&self) -> LongCall<'_> {
        self.busy.fetch_add(1, Ordering::AcqRel);
        LongCall(&self.busy)
    }
}

/// Hands an interpreter lock back to a thread without a kernel sleep (see the file header).
/// One per binding, as a `static`.
#[derive(Debug, Default)]
pub struct Handover {
    /// A number identifying the thread that took the lock back here and has not released it
    /// here since; 0 when none (as far as this binding knows).
    holder: AtomicU64,
}

std::thread_local! {
    /// This thread's mark: the address of a thread-local, never 0, unique among live threads.
    static MARK: u8 = const { 0 };
}

fn this_thread() -> u64 {
    MARK.with(|mark| std::ptr::from_ref(mark) as usize as u64)
}

impl Handover {
    /// A handover that knows no holder yet.
    pub const fn new() -> Handover {
        Handover { holder: AtomicU64::new(0) }
    }

    /// Runs `work` in a thread that has just released the lock, then waits (at most
    /// `MAX_SPIN`) while another thread that came back through here still holds it. The
    /// caller takes the lock back after this returns, then calls `retaken`.
    pub fn run_released<T>(&self, work: impl FnOnce() -> T) -> T {
        let me = this_thread();
        // The lock is released now: this thread no longer holds it.
        let _ = self.holder.compare_exchange(me, 0, Ordering::Release, Ordering::Relaxed);
        let outcome = work();
        self.wait_for_release(me);
        outcome
    }

    /// Marks this thread as the lock's holder: call it right after taking the lock back.
    pub fn retaken(&self) {
        self.holder.store(this_thread(), Ordering::Release);
    }

    /// Spins while another marked thread still holds the lock, for at most `MAX_SPIN`.
    fn wait_for_release(&self, me: u64) {
        let holder = self.holder.load(Ordering::Acquire);
        if holder == 0 || holder == me {
            return;
        }
        let start = Instant::now();
        loop {
            for _ in 0..32 {
                std::hint::spin_loop();
                if self.holder.load(Ordering::Acquire) != holder {
                    return;
                }
            }
            if start.elapsed() >= MAX_SPIN {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;
    use crate::dbm::OpenMode;

    /// A compressing engine releases for record calls whatever it calls its codec parameter;
    /// an uncompressed one only while a long call runs; the caller's choice wins.
    #[test]
    fn record_calls_release_where_reads_decompress_or_a_long_call_runs() {
        for engine in crate::registry::ENGINES.iter().filter(|e| e.codec_param.is_some()) {
            let dir = tempfile::tempdir().unwrap();
            let param = engine.codec_param.unwrap();
            for (codec, decompresses) in [("none", false), ("zstd", true)] {
                let path = dir.path().join(format!("{codec}.{}", engine.extension));
                let params = engine.bench_params(100).with(param, codec);
                let db = engine.open(&path, OpenMode::Create, &params).unwrap();
                let release = LockRelease::new(&*db, None);
                assert_eq!(release.releases_records(), decompresses, "{} {codec}", engine.name);
                assert_eq!(release.record_call_releases(), decompresses);
                {
                    let _long = release.long_call();
                    assert!(release.record_call_releases(), "{} {codec}: during a long call", engine.name);
                }
                assert_eq!(release.record_call_releases(), decompresses);
                assert!(LockRelease::new(&*db, Some(true)).releases_records());
                assert!(!LockRelease::new(&*db, Some(false)).releases_records());
                db.close().unwrap();
            }
        }
    }

    #[test]
    fn a_handover_runs_the_work_and_marks_the_thread_that_took_the_lock_back() {
        let handover = Handover::new();
        assert_eq!(handover.run_released(|| 7), 7);
        handover.retaken();
        assert_eq!(handover.holder.load(Ordering::Acquire), this_thread());
        // Released again by the holder: the mark is cleared before the work runs.
        handover.run_released(|| assert_eq!(handover.holder.load(Ordering::Acquire), 0));
    }
}
