//! A reader-writer lock for critical sections of a microsecond or less (one operation on an
//! ordered tree): a thread that finds it taken waits in user space for a while before it lets
//! the lock put it to sleep.
//!
//! Why: `parking_lot`'s lock spins only a few hundred cycles before parking the thread on a
//! futex. When two threads update one tree, each holds the lock about half a microsecond, so
//! the waiter parked almost every time, and a park and wake-up through the kernel (several
//! microseconds on a virtual machine) cost more than the work: two writing threads ran at
//! 0.4 to 0.6 times the speed of one (BabyDbm and TreeDbm, random keys, `make bench`). Waiting
//! for the holder to let go, which it does within about a microsecond, keeps two threads at
//! least as fast as one. The wait is bounded by `MAX_SPIN`, after which the thread blocks as
//! before (the holder may have been descheduled, or be doing I/O), so nothing can hang here
//! that would not hang on the plain lock.

#[cfg(loom)]
use loom::hint::spin_loop;
#[cfg(not(loom))]
use std::hint::spin_loop;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Spin-loop hints between two looks at the lock's state.
#[cfg(not(loom))]
const SPINS_PER_LOOK: u32 = 16;
/// Looks at the lock's state before the caller checks its time budget.
#[cfg(not(loom))]
const LOOKS_PER_WAIT: u32 = 64;
// Under loom every spin hint is a point where the model switches threads: one of each keeps
// the number of interleavings small while still covering the waiting path.
#[cfg(loom)]
const SPINS_PER_LOOK: u32 = 1;
#[cfg(loom)]
const LOOKS_PER_WAIT: u32 = 1;

/// How long a contended thread may spin before it blocks.
#[cfg(not(loom))]
struct SpinBudget(std::time::Instant);

#[cfg(not(loom))]
impl SpinBudget {
    /// How long a thread waits in user space before it blocks: many times a short critical
    /// section, still well below what a sleep and wake-up costs.
    const MAX_SPIN: std::time::Duration = std::time::Duration::from_micros(20);

    fn start() -> SpinBudget {
        SpinBudget(std::time::Instant::now())
    }

    fn is_spent(&mut self) -> bool {
        self.0.elapsed() >= Self::MAX_SPIN
    }
}

/// Under loom, time does not pass: the budget is a number of tries, so that the model
/// explores both the spinning path and the blocking one.
#[cfg(loom)]
struct SpinBudget(u32);

#[cfg(loom)]
impl SpinBudget {
    const TRIES: u32 = 2;

    fn start() -> SpinBudget {
        SpinBudget(0)
    }

    fn is_spent(&mut self) -> bool {
        self.0 += 1;
        self.0 >= Self::TRIES
    }
}

/// A `parking_lot::RwLock` that waits in user space first (see the module comment).
pub struct SpinRwLock<T> {
    lock: RwLock<T>,
}

impl<T> SpinRwLock<T> {
    pub fn new(value: T) -> SpinRwLock<T> {
        SpinRwLock { lock: RwLock::new(value) }
    }

    /// Shared access: waits while a writer holds the lock.
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        if let Some(guard) = self.lock.try_read() {
            return guard;
        }
        self.read_contended()
    }

    /// Exclusive access: waits while anyone holds the lock.
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        if let Some(guard) = self.lock.try_write() {
            return guard;
        }
        self.write_contended()
    }

    #[cold]
    fn read_contended(&self) -> RwLockReadGuard<'_, T> {
        wait_then_take(|| self.lock.is_locked_exclusive(), || self.lock.try_read(), || self.lock.read())
    }

    #[cold]
    fn write_contended(&self) -> RwLockWriteGuard<'_, T> {
        wait_then_take(|| self.lock.is_locked(), || self.lock.try_write(), || self.lock.write())
    }
}

/// The contended path of both kinds of access: while `taken`, watch the lock's state without
/// writing to it (so the holder's cache line stays put), try to `try_take` it when it looks
/// free, and once the `SpinBudget` is spent block in `take`.
fn wait_then_take<G>(taken: impl Fn() -> bool, try_take: impl Fn() -> Option<G>, take: impl FnOnce() -> G) -> G {
    let mut budget = SpinBudget::start();
    loop {
        wait_while(&taken);
        if let Some(guard) = try_take() {
            return guard;
        }
        if budget.is_spent() {
            return take();
        }
    }
}

/// Spins while `taken` says so, for at most a few hundred cycles at a time (the caller checks
/// its time budget in between).
#[inline]
fn wait_while(taken: impl Fn() -> bool) {
    for _ in 0..LOOKS_PER_WAIT {
        if !taken() {
            return;
        }
        for _ in 0..SPINS_PER_LOOK {
            spin_loop();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use std::sync::Arc;

    #[test]
    fn writers_and_readers_exclude_each_other() {
        // Each writer moves a pair from (n, n) through (n + 1, n) to (n + 1, n + 1); a reader
        // (or writer) that ever sees the middle state was let in while a writer held the lock.
        let lock = Arc::new(SpinRwLock::new((0u64, 0u64)));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if t % 2 == 0 {
                            let mut pair = lock.write();
                            assert_eq!(pair.0, pair.1);
                            pair.0 += 1;
                            std::hint::black_box(&mut *pair);
                            pair.1 += 1;
                        } else {
                            let pair = lock.read();
                            assert_eq!(pair.0, pair.1);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*lock.read(), (40_000, 40_000));
    }
}

/// Every interleaving (up to loom's preemption bound) of two writers and a reader going
/// through the contended path, `wait_then_take` and `wait_while`, over loom's model of a
/// reader-writer lock (`crate::sync` under `--cfg loom`; parking_lot itself cannot run in a
/// model, and TreeDbm needs parking_lot's guards, so the model lock stands in for it here).
/// A writer moves a pair from (n, n) through (n + 1, n) to (n + 1, n + 1) with a point in the
/// middle where the model may switch threads, so any thread let in during a write sees the
/// middle state. Run by `make loom`.
#[cfg(all(test, loom))]
mod loom_tests {
    #![expect(clippy::unwrap_used, reason = "a model fails loudly on the first broken expectation")]
    use super::*;
    use crate::sync::model::RwLock as ModelRwLock;
    use loom::sync::Arc;

    /// `SpinRwLock`'s two entry points, over the model lock.
    struct ModelSpinRwLock<T>(ModelRwLock<T>);

    impl<T> ModelSpinRwLock<T> {
        fn read(&self) -> loom::sync::RwLockReadGuard<'_, T> {
            if let Some(guard) = self.0.try_read() {
                return guard;
            }
            wait_then_take(|| self.0.is_locked_exclusive(), || self.0.try_read(), || self.0.read())
        }

        fn write(&self) -> loom::sync::RwLockWriteGuard<'_, T> {
            if let Some(guard) = self.0.try_write() {
                return guard;
            }
            wait_then_take(|| self.0.is_locked(), || self.0.try_write(), || self.0.write())
        }
    }

    #[test]
    fn writers_and_readers_exclude_each_other_in_every_interleaving() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let lock = Arc::new(ModelSpinRwLock(ModelRwLock::new((0u64, 0u64))));
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let lock = Arc::clone(&lock);
                    loom::thread::spawn(move || {
                        let mut pair = lock.write();
                        assert_eq!(pair.0, pair.1);
                        pair.0 += 1;
                        loom::thread::yield_now();
                        pair.1 += 1;
                    })
                })
                .collect();
            let reader = {
                let lock = Arc::clone(&lock);
                loom::thread::spawn(move || {
                    let pair = lock.read();
                    assert_eq!(pair.0, pair.1);
                })
            };
            for writer in writers {
                writer.join().unwrap();
            }
            reader.join().unwrap();
            assert_eq!(*lock.read(), (2, 2));
        });
    }
}
