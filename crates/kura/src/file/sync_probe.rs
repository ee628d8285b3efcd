//! A probe called right before every sync that makes writes durable (`fdatasync` or `fsync`
//! of a file, `fsync` of a directory), so that the power-loss tests can take crash images at
//! the moments a sync orders writes, inside a checkpoint as well as between operations.
//!
//! Why a probe and not images between operations alone: a checkpoint is several writes with
//! syncs between them (the tree's pages, its header, the journal started over). Only at a
//! sync does the set of writes a power loss may keep change, so an image of every file's
//! durable bytes beside its bytes right before each sync covers a power loss cut anywhere
//! inside the checkpoint.
//!
//! Without the `internals` feature the probe is an empty inline function. With it (the
//! project's own binaries), a sync costs one uncontended read lock more, some nanoseconds
//! beside the sync's tens of microseconds.

use std::path::Path;

/// Called right before a sync of the file or directory at `path`: what was written to it so
/// far is what the sync makes durable.
#[inline]
pub(crate) fn before_sync(path: &Path) {
    #[cfg(feature = "internals")]
    observing::notify(path);
    #[cfg(not(feature = "internals"))]
    let _ = path;
}

#[cfg(feature = "internals")]
pub use observing::{observe, Observing};

#[cfg(feature = "internals")]
mod observing {
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use parking_lot::RwLock;

    /// What an observer is called with: the path about to be synced.
    type Observer = Arc<dyn Fn(&Path) + Send + Sync>;

    /// The installed observers, each under the number its guard removes it by. Several tests
    /// of one process observe at once, each its own directory.
    static OBSERVERS: RwLock<Vec<(u64, Observer)>> = RwLock::new(Vec::new());
    static NEXT_OBSERVER: AtomicU64 = AtomicU64::new(0);

    /// Installs `observer` for every sync in the process until the returned guard drops. The
    /// observer runs on the syncing thread, inside the engine's call and under its locks: it
    /// may read files, never call into a database. It sees the syncs of every database in the
    /// process, so it picks its own by their paths.
    pub fn observe(observer: impl Fn(&Path) + Send + Sync + 'static) -> Observing {
        let id = NEXT_OBSERVER.fetch_add(1, Ordering::Relaxed);
        OBSERVERS.write().push((id, Arc::new(observer)));
        Observing { id }
    }

    /// An installed observer; dropping it removes the observer.
    #[must_use = "the observer is removed when this guard drops"]
    pub struct Observing {
        id: u64,
    }

    impl Drop for Observing {
        fn drop(&mut self) {
            OBSERVERS.write().retain(|(id, _)| *id != self.id);
        }
    }

    pub(super) fn notify(path: &Path) {
        // Cloned out of the lock, so that an observer may take as long as it likes while
        // other tests install and remove theirs (no allocation when none is installed).
        let observers: Vec<Observer> = OBSERVERS.read().iter().map(|(_, observer)| Arc::clone(observer)).collect();
        for observer in observers {
            observer(path);
        }
    }
}
