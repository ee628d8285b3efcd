//! The lock CacheDbm's slots are built on: parking_lot's in every normal build; under
//! `RUSTFLAGS="--cfg loom"` (`make loom`), a thin adapter over loom's model with the same
//! method, so that `tests/loom_cache.rs` explores the interleavings of the very same code.
//! The model reader-writer lock here stands in for parking_lot's in the loom test of
//! `SpinRwLock`'s waiting path (`spin_lock.rs`).

#[cfg(not(loom))]
pub use parking_lot::{Mutex, MutexGuard};

#[cfg(loom)]
pub use model::{Mutex, MutexGuard};

#[cfg(loom)]
pub mod model {
    pub use loom::sync::{MutexGuard, RwLockReadGuard, RwLockWriteGuard};

    /// Why a loom lock can be poisoned: a model thread panicked, and the model fails anyway.
    const POISONED: &str = "a loom model thread panicked while holding the lock";

    /// loom's mutex with parking_lot's `lock` (no poisoning to handle).
    pub struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub fn new(value: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().expect(POISONED)
        }

        /// The lock if it is free now (parking_lot's `try_lock`).
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok()
        }
    }

    /// loom's reader-writer lock with the parking_lot methods `SpinRwLock` uses.
    #[allow(dead_code, reason = "used by spin_lock's loom test only")]
    pub struct RwLock<T>(loom::sync::RwLock<T>);

    #[allow(dead_code, reason = "used by spin_lock's loom test only")]
    impl<T> RwLock<T> {
        pub fn new(value: T) -> RwLock<T> {
            RwLock(loom::sync::RwLock::new(value))
        }

        pub fn read(&self) -> RwLockReadGuard<'_, T> {
            self.0.read().expect(POISONED)
        }

        pub fn write(&self) -> RwLockWriteGuard<'_, T> {
            self.0.write().expect(POISONED)
        }

        pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
            self.0.try_read().ok()
        }

        pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
            self.0.try_write().ok()
        }

        /// Whether anyone holds the lock: loom has no such query, so it asks by trying.
        pub fn is_locked(&self) -> bool {
            self.0.try_write().is_err()
        }

        /// Whether a writer holds the lock.
        pub fn is_locked_exclusive(&self) -> bool {
            self.0.try_read().is_err()
        }
    }
}
