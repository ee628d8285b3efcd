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
    use std::sync::Arc;

    use parking_lot::RwLock;

    /// What the observer is called with: the path about to be synced.
    type Observer = Arc<dyn Fn(&Path) + Send + Sync>;

    static OBSERVER: RwLock<Option<Observer>> = RwLock::new(None);

    /// Installs `observer` for every sync in the process until the returned guard drops. The
    /// observer runs on the syncing thread, inside the engine's call and under its locks: it
    /// may read files, never call into a database.
    ///
    /// # Panics
    /// If an observer is installed already: syncs of other databases would reach whichever
    /// was installed last.
    pub fn observe(observer: impl Fn(&Path) + Send + Sync + 'static) -> Observing {
        let mut installed = OBSERVER.write();
        assert!(installed.is_none(), "a sync observer is installed already (one per process)");
        *installed = Some(Arc::new(observer));
        Observing { _private: () }
    }

    /// An installed observer; dropping it removes the observer.
    #[must_use = "the observer is removed when this guard drops"]
    pub struct Observing {
        _private: (),
    }

    impl Drop for Observing {
        fn drop(&mut self) {
            *OBSERVER.write() = None;
        }
    }

    pub(super) fn notify(path: &Path) {
        // Cloned out of the lock, so that an observer may take as long as it likes.
        let observer = OBSERVER.read().clone();
        if let Some(observer) = observer {
            observer(path);
        }
    }
}
