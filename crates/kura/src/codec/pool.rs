//! A small pool of compression contexts shared by the threads of one database.
//!
//! zstd, zlib and lzma contexts are costly to create (zstd's is ~100 KiB, lzma's allocates
//! its window), so a codec keeps the ones it made; a thread takes a context, uses it for one
//! record and puts it back. The pool is a mutex-guarded stack, held for a push or a pop only,
//! never while compressing.

use parking_lot::Mutex;

use crate::error::Result;

pub struct Pool<T> {
    free: Mutex<Vec<T>>,
}

impl<T> Default for Pool<T> {
    fn default() -> Pool<T> {
        Pool { free: Mutex::new(Vec::new()) }
    }
}

impl<T> Pool<T> {
    /// Runs `f` with a pooled context, creating one with `make` when the pool is empty.
    pub fn with<R>(&self, make: impl FnOnce() -> Result<T>, f: impl FnOnce(&mut T) -> R) -> Result<R> {
        let taken = self.free.lock().pop();
        let mut context = match taken {
            Some(context) => context,
            None => make()?,
        };
        let result = f(&mut context);
        self.free.lock().push(context);
        Ok(result)
    }

    /// Drops the pooled contexts (one in use now is put back and kept).
    pub fn clear(&self) {
        self.free.lock().clear();
    }
}
