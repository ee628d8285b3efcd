//! The one interface the benchmark drives every database through: the primitives of redb's
//! `lmdb_benchmark` phases (a committed write of many operations, a count, point reads and
//! range reads in one read transaction, compaction, close). Each store file implements it
//! with the calls its library documents for the job, so that the phases in main.rs are the
//! same code for every store.

use crate::records::{Key, Op, Record};

/// Errors of any library, as text: the benchmark only reports them.
pub type Result<T> = std::result::Result<T, String>;

/// Turns any library error into the benchmark's.
pub fn err<E: std::fmt::Display>(context: &'static str) -> impl FnOnce(E) -> String {
    move |e| format!("{context}: {e}")
}

/// A database under test. `Sync`: the multi-threaded reads share one handle.
pub trait Store: Sync {
    /// Applies `ops` as one transaction (one atomic batch where the store has them) and
    /// commits it. `durable`: when this returns, the commit survives a power loss (the store's
    /// documented durable setting); otherwise it survives a crash of the process, not of the
    /// machine.
    fn write(&mut self, ops: &mut dyn Iterator<Item = Op>, durable: bool) -> Result<()>;

    /// The end of a write phase whose work could otherwise land outside any timed phase (the
    /// bulk load, the removals), inside it: work the store put off that its next operations
    /// would pay for. By default nothing (the LSMs flush and compact in threads of their own,
    /// as after any writes); TreeDbm applies its write buffer (`checkpoint`), so that writes
    /// into a file larger than memory count the leaves they rewrite in their own phase.
    fn settle(&mut self) -> Result<()> {
        Ok(())
    }

    /// One record in its own commit, not durable: the non-durable writes phase. By default a
    /// write of one operation; a store whose single writes have a faster documented path
    /// (Kura's `set`) overrides it.
    fn put_nosync(&mut self, record: &Record) -> Result<()> {
        self.write(&mut std::iter::once(Op::Set(*record)), false)
    }

    /// The name of a second non-durable single-write path measured next to `put_nosync`
    /// (as its own phase, over the same records again), when the store has one worth it.
    fn alt_nosync_name(&self) -> Option<&'static str> {
        None
    }

    /// That second path (see `alt_nosync_name`).
    fn alt_put_nosync(&mut self, record: &Record) -> Result<()> {
        self.put_nosync(record)
    }

    /// The number of records.
    fn len(&self) -> Result<u64>;

    /// Looks up every key in `keys` (in one read transaction where the store has them) and
    /// shows `visit` each value, `None` when the key has no record.
    fn get_each(&self, keys: &mut dyn Iterator<Item = Key>, visit: &mut dyn FnMut(Option<&[u8]>)) -> Result<()>;

    /// For every key in `starts`, the first `len` records whose keys are at or after it, in
    /// key order (fewer at the end of the keys), each shown to `visit` as key and value.
    /// `Ok(false)` without visiting anything when the store is not ordered.
    fn range_each(
        &self,
        starts: &mut dyn Iterator<Item = Key>,
        len: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool>;

    /// Rewrites the database compactly; `Ok(false)` when the store has no such operation.
    fn compact(&mut self) -> Result<bool>;

    /// Closes the database: everything written is on disk (a log-structured store has
    /// flushed its memtables to tables) and every file is closed, so that the directory's
    /// size is the store's and a reopen reads from its files.
    fn close(self: Box<Self>) -> Result<()>;
}
