//! A database file mapped into memory at a fixed address for its whole life.
//!
//! The mapping reserves address space for the largest size the file may reach, so growing
//! the file (ftruncate) never moves the mapping and readers never need a lock to keep their
//! pointers valid. Only bytes below the file's current length are ever touched: beyond it a
//! shared mapping would fault (SIGBUS), so every accessor checks the range first.
//!
//! Writes go to the page cache immediately, so they survive a crash of the process; `sync`
//! forces them to the device so that they survive a crash of the machine.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::error::{Error, ErrorKind, Result};

/// Files grow by at least this much at a time, so that appending does not call ftruncate
/// for every record.
const MIN_GROWTH: u64 = 1 << 20;
/// Prefetching more than this at once only competes with the hardware prefetcher.
const MAX_PREFETCH: usize = 4096;
/// Bytes of the region the file grew into that are mapped writable at a time, ahead of the
/// appends (see `populate_ahead`), once an append comes within half of it of the populated end.
const POPULATE_CHUNK: u64 = 4 << 20;
/// The smallest page size of the systems Kura runs on: a `write_untorn` within one such
/// page is copied whole by the kernel.
const UNTORN_PAGE: u64 = 4096;

/// Bytes of a `MappedFile` lent without a borrow (`MappedFile::lend`): read-only, and valid for
/// as long as the promise `lend`'s caller made holds.
#[derive(Clone, Copy)]
pub struct LentBytes {
    start: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: a read-only view of a shared file mapping, which no one writes while the view lives
// (`MappedFile::lend`'s contract); reading it from any thread is as sound as from one.
unsafe impl Send for LentBytes {}
// SAFETY: as for `Send`: shared references only read.
unsafe impl Sync for LentBytes {}

impl LentBytes {
    /// A view of bytes that never change (tests of the leaves that lend, without a file).
    #[cfg(test)]
    pub fn of_static(bytes: &'static [u8]) -> LentBytes {
        let start = std::ptr::NonNull::from(bytes).cast::<u8>();
        LentBytes { start, len: bytes.len() }
    }

    /// All the bytes of the view.
    #[inline]
    pub fn all(&self) -> &[u8] {
        // SAFETY: the lent bytes, which stay mapped and unchanged while this view lives
        // (`MappedFile::lend`'s contract).
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }

    /// The bytes `range` of the view, None if it does not lie within it.
    #[inline]
    pub fn get(&self, range: std::ops::Range<usize>) -> Option<&[u8]> {
        if range.start > range.end || range.end > self.len {
            return None;
        }
        // SAFETY: the range lies within the lent bytes (checked above), which stay mapped and
        // unchanged while this view lives (`MappedFile::lend`'s contract).
        Some(unsafe { std::slice::from_raw_parts(self.start.as_ptr().add(range.start), range.end - range.start) })
    }
}

impl std::fmt::Debug for LentBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LentBytes").field("len", &self.len).finish()
    }
}

pub struct MappedFile {
    file: File,
    path: PathBuf,
    map: memmap2::MmapRaw,
    /// Bytes of the file that exist on disk (its length). Invariant: `len <= map.len()`.
    len: AtomicU64,
    /// Where the pages mapped writable ahead of the appends end (`populate_ahead`); from here
    /// to `len` nothing has touched them yet. (Pages below may fault again: writeback
    /// write-protects them, `sync_for_close` drops them.) Written only under `grow`, where
    /// `populated <= len` holds; a reader without the lock may see it past a shrink for a
    /// moment, and then skips populating, which only costs faults.
    populated: AtomicU64,
    grow: Mutex<()>,
    writable: bool,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile").field("path", &self.path).field("len", &self.len()).finish()
    }
}

impl MappedFile {
    /// Maps `file`, reserving room for it to grow up to `max_len` bytes.
    pub fn new(file: File, path: &Path, max_len: u64, writable: bool) -> Result<MappedFile> {
        let len = file.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len();
        if len > max_len {
            return Err(Error::new(
                ErrorKind::Limit,
                format!("{} has {len} bytes, more than its maximum {max_len}", path.display()),
            ));
        }
        if writable && len > 0 {
            // A file made sparse (by an older version, or another tool) gets its holes
            // filled now, while an error can still be returned (see `set_len_locked`); a
            // file without holes needs no new block, so this succeeds on a full disk too.
            allocate(&file, 0, len).map_err(|e| Error::io(format!("allocate {}", path.display()), e))?;
        }
        let map = reserve_address_space(&file, max_len, len, writable)
            .map_err(|e| Error::io(format!("mmap {}", path.display()), e))?;
        // Lookups land anywhere in the file: without this advice a fault in a file that is not
        // in memory reads around itself (the disks here read ahead 8 MiB), so a random get on
        // a cold file larger than memory dragged megabytes in and evicted the rest. (LMDB calls
        // it MDB_NORDAHEAD.) Advice only: a kernel that refuses it reads ahead as before.
        let _ = map.advise(memmap2::Advice::Random);
        // The same for the reads `read_at` makes with `pread`: the advice above is the
        // mapping's, this one the open file's (a random `pread` otherwise read ahead too).
        // SAFETY: the descriptor is `file`'s, open for the whole call; the advice touches no
        // memory of this process.
        let _ = unsafe { libc::posix_fadvise(std::os::fd::AsRawFd::as_raw_fd(&file), 0, 0, libc::POSIX_FADV_RANDOM) };
        Ok(MappedFile {
            file,
            path: path.to_path_buf(),
            map,
            len: AtomicU64::new(len),
            // An existing file's bytes are its data: only what it grows into is populated.
            populated: AtomicU64::new(len),
            grow: Mutex::new(()),
            writable,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Follows a rename of the file, for messages.
    pub fn renamed(&mut self, path: &Path) {
        self.path = path.to_path_buf();
    }

    /// Where the mapping starts, for prefetch hints (never dereferenced through this).
    pub fn address(&self) -> usize {
        self.map.as_ptr() as usize
    }

    /// Starts loading `offset..offset+len` (at most `MAX_PREFETCH` bytes of it) into the
    /// cache, so that reading a long value waits for one memory latency, not one per line.
    #[inline]
    pub fn prefetch_range(&self, offset: u64, len: usize) {
        super::prefetch_range((self.map.as_ptr() as usize).wrapping_add(offset as usize), len.min(MAX_PREFETCH));
    }

    /// Asks the kernel to start reading `offset..offset+len` of the file (`MADV_WILLNEED`)
    /// without waiting for it: the mapping is advised random, so a fault reads only its own
    /// page, and a reader that knows which pages it needs next has them read meanwhile. A
    /// range past the end is clipped; the advice is only advice, so its failure is ignored.
    pub fn will_need(&self, offset: u64, len: usize) {
        // memmap2 rounds the range out to whole pages.
        let end = offset.saturating_add(len as u64).min(self.len());
        if offset < end {
            let _ = self.map.advise_range(memmap2::Advice::WillNeed, offset as usize, (end - offset) as usize);
        }
    }

    /// A thread that makes `will_need`'s requests for this file on its own descriptor
    /// (advice_thread.rs); None when the system gives none.
    pub fn start_advice_thread(&self) -> Option<super::AdviceThread> {
        super::AdviceThread::start(&self.file)
    }

    /// Copies the bytes at `offset..offset+buffer.len()` into `buffer` with `pread`, not
    /// through the mapping: for reads of a file larger than memory, where a fault maps a page
    /// that reclaim must later unmap again (an interrupt to every core running the process,
    /// to flush its TLB), while a page read this way is never mapped. BrokenData beyond the
    /// end, as `slice` says.
    pub fn read_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.check_range(offset, buffer.len())?;
        self.file.read_exact_at(buffer, offset).map_err(|e| Error::io(format!("read {}", self.path.display()), e))
    }

    /// Current length of the file in bytes.
    #[inline]
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The largest length the file may reach.
    pub fn max_len(&self) -> u64 {
        self.map.len() as u64
    }

    #[inline]
    fn check_range(&self, offset: u64, len: usize) -> Result<usize> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.len() => Ok(offset as usize),
            _ => Err(Error::broken(format!(
                "{}: {len} bytes at offset {offset} lie beyond the end of the file ({} bytes)",
                self.path.display(),
                self.len()
            ))),
        }
    }

    /// The bytes at `offset..offset+len`, or BrokenData if they lie beyond the end.
    ///
    /// # Safety
    /// No other thread may write these bytes while the returned slice lives. The engines keep
    /// this by holding the lock that owns the range (a bucket stripe, or all of them).
    #[inline]
    pub unsafe fn slice(&self, offset: u64, len: usize) -> Result<&[u8]> {
        let start = self.check_range(offset, len)?;
        // SAFETY: `start + len <= self.len <= map.len()`, so the range is inside the mapping
        // and backed by the file; the caller guarantees no concurrent writer.
        Ok(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(start), len) })
    }

    /// A view of the bytes at `offset..offset+len` that borrows nothing, or BrokenData if
    /// they lie beyond the end: what a decoded TreeDbm leaf keeps its values in, so that a
    /// leaf read from the file copies its keys only (tree_dbm/page.rs, `Leaf::decode_lending`).
    ///
    /// # Safety
    /// Until the last copy of the view is dropped, no one may write these bytes, shrink the
    /// file below them or drop this `MappedFile` (tree_dbm/pager.rs says how TreeDbm keeps
    /// this promise).
    pub unsafe fn lend(&self, offset: u64, len: usize) -> Result<LentBytes> {
        let start = self.check_range(offset, len)?;
        // SAFETY: `start + len <= self.len <= map.len()`: the pointer lies inside the mapping.
        let pointer = unsafe { self.map.as_ptr().add(start) };
        let start = std::ptr::NonNull::new(pointer.cast_mut())
            .ok_or_else(|| Error::internal("a file mapping at address zero: a bug in Kura"))?;
        Ok(LentBytes { start, len })
    }

    /// The bytes from `offset` up to at most `max` bytes, cut at the end of the file.
    ///
    /// # Safety
    /// As for `slice`.
    #[inline]
    pub unsafe fn slice_upto(&self, offset: u64, max: usize) -> Result<&[u8]> {
        let available = self.len().saturating_sub(offset);
        let len = usize::try_from(available).unwrap_or(usize::MAX).min(max);
        // SAFETY: forwarded to the caller.
        unsafe { self.slice(offset, len) }
    }

    /// Copies `data` to `offset`.
    ///
    /// # Safety
    /// No other thread may read or write these bytes during the call; see `slice`.
    #[inline]
    pub unsafe fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe {
            self.write_with(offset, data.len(), |target| {
                target.copy_from_slice(data);
                Ok(())
            })
        }
    }

    /// Copies `data` to `offset` with one `pwrite(2)` call rather than through the mapping,
    /// so that a process killed meanwhile leaves all of it or none of it: the kernel copies a
    /// write that lies within one page whole before it acts on a pending SIGKILL, while a copy
    /// into the mapping is a run of stores that the kill may cut between any two (a torn
    /// TreeDbm header copy, found by the kill -9 soak). For small records that must never be
    /// seen torn after a kill, such as a file header; the mapping shows the bytes at once (it
    /// is the same page cache), and `sync` writes them back with the rest.
    ///
    /// # Safety
    /// As for `write`.
    pub unsafe fn write_untorn(&self, offset: u64, data: &[u8]) -> Result<()> {
        let last = offset + (data.len() as u64).saturating_sub(1);
        debug_assert_eq!(offset / UNTORN_PAGE, last / UNTORN_PAGE, "an untorn write must lie within one page");
        // SAFETY: forwarded to the caller.
        unsafe { self.write_unmapped(offset, data) }
    }

    /// Copies `data` to `offset` with `pwrite(2)`, not through the mapping: for a file larger
    /// than memory, where a store into the mapping faults each file page in first, reading
    /// it from the disk even when the store covers it whole, while `pwrite` reads only the
    /// pages it covers in part. The mapping shows the bytes at once (the same page cache).
    ///
    /// # Safety
    /// As for `write`.
    pub unsafe fn write_unmapped(&self, offset: u64, data: &[u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        if !self.writable {
            return Err(Error::infeasible(format!("{} is open read-only", self.path.display())));
        }
        self.check_range(offset, data.len())?;
        self.file.write_all_at(data, offset).map_err(|e| Error::io(format!("write {}", self.path.display()), e))
    }

    /// `will_need` for the file page a write starting or ending at `at` covers in part: none
    /// when `at` is on a page boundary.
    pub fn will_need_page_cut_at(&self, at: u64) {
        if !at.is_multiple_of(UNTORN_PAGE) {
            self.will_need(at, 1);
        }
    }

    /// Lets `fill` write the `len` bytes at `offset` in place (no intermediate buffer).
    ///
    /// # Safety
    /// As for `write`.
    #[inline]
    pub unsafe fn write_with(&self, offset: u64, len: usize, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<()> {
        if !self.writable {
            return Err(Error::infeasible(format!("{} is open read-only", self.path.display())));
        }
        let start = self.check_range(offset, len)?;
        // SAFETY: the range is inside the mapping and the file (checked above), the mapping is
        // writable, and the caller guarantees that no other thread reads or writes these
        // bytes meanwhile.
        fill(unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(start), len) })
    }

    /// Makes the file at least `needed` bytes long, growing it by a margin so that appends
    /// amortize. Safe to call from many threads.
    pub fn ensure_len(&self, needed: u64) -> Result<()> {
        self.grow_to(needed, true)
    }

    /// `ensure_len` for bytes written with `write_unmapped`: the mapping is not populated
    /// ahead, since nothing stores into it there (populating maps page-cache pages for
    /// writing that reclaim must unmap again: 3% of a load larger than memory, `perf`).
    pub fn ensure_len_unmapped(&self, needed: u64) -> Result<()> {
        self.grow_to(needed, false)
    }

    fn grow_to(&self, needed: u64, populate: bool) -> Result<()> {
        let len = self.len();
        if needed <= len {
            if populate && population_due(needed, len, self.populated.load(Ordering::Relaxed)) {
                self.populate_ahead(needed);
            }
            return Ok(());
        }
        let guard = self.grow.lock();
        let current = self.len();
        if needed <= current {
            return Ok(());
        }
        if needed > self.max_len() {
            return Err(Error::new(
                ErrorKind::Limit,
                format!("{} would grow to {needed} bytes, over its maximum {}", self.path.display(), self.max_len()),
            ));
        }
        let margin = (current / 8).max(MIN_GROWTH);
        let target = needed.saturating_add(margin).min(self.max_len());
        // On a nearly full disk the margin may not fit where the write itself does.
        self.set_len_locked(target).or_else(|_| self.set_len_locked(needed))?;
        if populate {
            self.populate_locked(&guard, needed);
        }
        Ok(())
    }

    /// Sets the file's length exactly (shrinking it on close or clear).
    ///
    /// # Safety
    /// When shrinking, no thread may hold a slice beyond the new length.
    pub unsafe fn set_len(&self, len: u64) -> Result<()> {
        let _guard = self.grow.lock();
        self.set_len_locked(len)
    }

    fn set_len_locked(&self, len: u64) -> Result<()> {
        if len > self.max_len() {
            return Err(Error::new(ErrorKind::Limit, format!("{} cannot hold {len} bytes", self.path.display())));
        }
        let current = self.len();
        if len > current {
            // Growing: the blocks are allocated now, so that a full disk is an error here
            // rather than a SIGBUS later, when a store into the mapping finds no block.
            allocate(&self.file, current, len - current)
                .map_err(|e| Error::io(format!("grow {} to {len} bytes", self.path.display()), e))?;
        }
        self.file.set_len(len).map_err(|e| Error::io(format!("resize {}", self.path.display()), e))?;
        debug_assert!(len <= self.map.len() as u64, "invariant: the file never outgrows its mapping");
        self.len.store(len, Ordering::Release);
        self.populated.fetch_min(len, Ordering::Relaxed);
        Ok(())
    }

    /// Maps the next `POPULATE_CHUNK` bytes of the region the file grew into writable, from
    /// `needed` or the end of what is populated, whichever is further.
    ///
    /// Why: appending threads store into pages nothing has touched yet, and each first store
    /// faults. Two threads appending at the same end fault on the same page cache folio, and
    /// one sleeps on its lock while the other maps it: a ShardDbm random set on 2 threads
    /// switched context 8,000-9,000 times in 2M sets, against 600-900 on one thread, at
    /// 3.4-3.6M sets a second. Populated in one call per chunk under the growth lock, it
    /// switched 1,300-1,600 times at 3.7-4.3M; one thread did not change (docs/shard.md).
    /// A failure (a kernel before 5.14) only leaves the pages to fault one by one as before.
    ///
    /// The cost: populated pages are dirty zeros until the appends fill them, so a
    /// `synchronize(true)` or the kernel's writeback meanwhile writes up to a chunk and a half
    /// of zeros a file, and those pages again once filled. Contents never change: the pages
    /// lie within the file, already allocated (`set_len_locked`), and read as zeros.
    ///
    /// A thread that finds another populating or growing the file goes on without waiting:
    /// waiting for the other's `madvise` (about a millisecond for 4 MiB) would cost more than
    /// the faults it saves.
    #[cold]
    fn populate_ahead(&self, needed: u64) {
        if let Some(guard) = self.grow.try_lock() {
            self.populate_locked(&guard, needed);
        }
    }

    /// `populate_ahead` with the growth lock held.
    fn populate_locked(&self, _grow: &MutexGuard<'_, ()>, needed: u64) {
        let (len, populated) = (self.len(), self.populated.load(Ordering::Relaxed));
        if !population_due(needed, len, populated) {
            return; // another thread populated it meanwhile
        }
        let start = populated.max(needed);
        let end = start.saturating_add(POPULATE_CHUNK).min(len);
        if let (Ok(offset), Ok(bytes)) = (usize::try_from(start), usize::try_from(end - start)) {
            let _ = self.map.advise_range(memmap2::Advice::PopulateWrite, offset, bytes);
        }
        self.populated.store(end, Ordering::Relaxed);
    }

    /// Without `hard`, starts writing the mapping's dirty pages back; with it, makes every
    /// write to the file durable and waits for the device: one `fdatasync`.
    ///
    /// Why no `msync(MS_SYNC)` first: on Linux a store through a shared file mapping marks its
    /// page dirty in the page cache (the first store to a clean page faults for that), so
    /// `fdatasync` writes it like any other dirty page, and also the file's length when it
    /// changed. `msync(MS_SYNC)` would only sync the mapped range the same way once more,
    /// walking the whole mapping (about 180 µs at 180 MB even with little dirty) and flushing
    /// the device a second time.
    pub fn sync(&self, hard: bool) -> Result<()> {
        if hard {
            super::sync_probe::before_sync(&self.path);
            return self.file.sync_data().map_err(|e| Error::io(format!("fdatasync {}", self.path.display()), e));
        }
        let len = usize::try_from(self.len()).unwrap_or(usize::MAX);
        self.map.flush_async_range(0, len).map_err(|e| Error::io(format!("msync {}", self.path.display()), e))
    }

    /// `sync(true)` for a file about to be closed: drops the mapping's page table entries,
    /// then writes the file back and waits for the device.
    ///
    /// Why: writing back a page that a mapping has dirtied write-protects its entry (so that a
    /// later store dirties it again), one page at a time, and while another thread of the
    /// process runs on another core each of those interrupts that core to flush its TLB.
    /// A 757 MB HashDbm took 0.31 s in `msync` alone, and two 378 MB shards closing side by
    /// side 0.69 s each. Dropped entries hand their dirty state to the page cache at once, in
    /// batches, and leave writeback nothing to write-protect. The mapping stays valid: a
    /// later access faults its page back in from the page cache.
    ///
    /// Where the kernel refuses the advice (locked memory, after `mlockall`), this is
    /// `sync(true)`: the file reaches the device either way.
    pub fn sync_for_close(&self) -> Result<()> {
        let len = usize::try_from(self.len()).unwrap_or(usize::MAX);
        if self.writable && len > 0 {
            // SAFETY: the mapping is shared and backed by the file, so MADV_DONTNEED frees no
            // content: the pages stay in the page cache with their dirty state, and any
            // slice still borrowed reads the same bytes after faulting them back in.
            let dropped = unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, 0, len) };
            if dropped.is_err() {
                return self.sync(true);
            }
        }
        super::sync_probe::before_sync(&self.path);
        self.file.sync_all().map_err(|e| Error::io(format!("fsync {}", self.path.display()), e))
    }
}

/// Maps `max_len` bytes, or less if the address space refuses (a ulimit), but never less
/// than twice the current length.
pub(super) fn reserve_address_space(
    file: &File,
    max_len: u64,
    len: u64,
    writable: bool,
) -> std::io::Result<memmap2::MmapRaw> {
    let mut want = max_len.max(1);
    loop {
        let size = usize::try_from(want).unwrap_or(usize::MAX);
        let mut options = memmap2::MmapOptions::new();
        options.len(size).no_reserve_swap();
        let mapped = if writable { options.map_raw(file) } else { options.map_raw_read_only(file) };
        match mapped {
            Ok(map) => return Ok(map),
            Err(e) if want / 2 >= len.saturating_mul(2).max(MIN_GROWTH) => {
                let _ = e;
                want /= 2;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Allocates `len` bytes of `file` from `offset` (extending it), with `fallocate`. A file
/// system without it (EOPNOTSUPP) keeps the sparse growth of `set_len`.
pub fn allocate(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    loop {
        // SAFETY: fallocate only reads its integer arguments; the descriptor is open for
        // as long as `file` lives.
        let result = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
        if result == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) => return Ok(()),
            _ => return Err(error),
        }
    }
}

/// Whether an append reaching `needed` should populate more of the file: it has grown past
/// what is populated (`populated < len`), and `needed` comes within half a chunk of the
/// populated end.
fn population_due(needed: u64, len: u64, populated: u64) -> bool {
    populated < len && needed.saturating_add(POPULATE_CHUNK / 2) > populated
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on an error or a wrong index"
    )]
    use super::*;
    use crate::split_mix::SplitMix64;

    /// A new writable file `name` in `dir`, mapped with room for `max_len` bytes.
    fn fresh(dir: &tempfile::TempDir, name: &str, max_len: u64) -> (MappedFile, PathBuf) {
        let path = dir.path().join(name);
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        (MappedFile::new(file, &path, max_len, true).unwrap(), path)
    }

    /// `sync_for_close` drops the mapping's page table entries before writing back: the bytes
    /// stored through the mapping must reach the file all the same (a private mapping, or a
    /// drop that discarded dirty pages, would lose them), and the mapping must still read and
    /// write the file afterwards.
    #[test]
    fn sync_for_close_keeps_what_the_mapping_wrote_and_the_mapping_usable() {
        let dir = tempfile::tempdir().unwrap();
        let (mapped, path) = fresh(&dir, "mapped", 1 << 24);
        let len: usize = 5 * 4096 + 123;
        mapped.ensure_len(len as u64).unwrap();
        let mut expected = vec![0u8; usize::try_from(mapped.len()).unwrap()];
        let mut rng = SplitMix64::new(1);
        for byte in expected.iter_mut().take(len) {
            *byte = rng.next_u64() as u8;
        }
        // SAFETY: this test is the only user of the mapping.
        unsafe { mapped.write(0, &expected).unwrap() };
        mapped.sync_for_close().unwrap();
        assert!(std::fs::read(&path).unwrap() == expected, "the file lost bytes written through the mapping");
        // SAFETY: as above.
        assert!(unsafe { mapped.slice(0, expected.len()) }.unwrap() == expected.as_slice());
        expected[4096 * 3 + 7] ^= 0xff;
        // SAFETY: as above.
        unsafe { mapped.write(0, &expected).unwrap() };
        mapped.sync_for_close().unwrap();
        assert!(std::fs::read(&path).unwrap() == expected, "a store after the first sync was lost");
    }

    /// Growth, populating ahead of the appends, and shrinking keep the file equal to a byte
    /// model: random appends (some far beyond the populated end), stores into the middle and
    /// shrinks, with the file read back through the mapping and from the disk.
    #[test]
    fn a_file_grown_populated_and_shrunk_holds_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let (mapped, path) = fresh(&dir, "grown", 1 << 28);
        let mut model: Vec<u8> = Vec::new();
        let mut rng = SplitMix64::new(2);
        let mut next = move || rng.next_u64();
        for step in 0..400u64 {
            let choice = next() % 10;
            if choice < 6 || model.is_empty() {
                // An append, mostly small, sometimes past a whole populate chunk.
                let len =
                    if choice == 0 { (next() % (3 * POPULATE_CHUNK)) as usize } else { (next() % 5000) as usize + 1 };
                let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                let at = model.len() as u64;
                mapped.ensure_len(at + len as u64).unwrap();
                // SAFETY: this test is the only user of the mapping.
                unsafe { mapped.write(at, &data).unwrap() };
                model.extend_from_slice(&data);
            } else if choice < 9 {
                let at = (next() % model.len() as u64) as usize;
                let len = ((next() % 300) as usize).min(model.len() - at);
                let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                mapped.ensure_len((at + len) as u64).unwrap();
                // SAFETY: as above.
                unsafe { mapped.write(at as u64, &data).unwrap() };
                model[at..at + len].copy_from_slice(&data);
            } else {
                let len = next() % (model.len() as u64 + 1);
                // SAFETY: no slice of the mapping is held across this call.
                unsafe { mapped.set_len(len).unwrap() };
                model.truncate(len as usize);
            }
            assert!(mapped.populated.load(Ordering::Relaxed) <= mapped.len(), "step {step}: populated past the end");
            // SAFETY: as above.
            let mapped_bytes = unsafe { mapped.slice(0, model.len()) }.unwrap();
            assert!(mapped_bytes == model.as_slice(), "step {step}: the mapping differs from the model");
            let margin_len = (mapped.len() - model.len() as u64) as usize;
            // SAFETY: as above.
            let margin = unsafe { mapped.slice(model.len() as u64, margin_len) }.unwrap();
            assert!(margin.iter().all(|&b| b == 0), "step {step}: the growth margin is not zero");
        }
        mapped.sync(true).unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert!(on_disk.get(..model.len()) == Some(model.as_slice()), "the file differs from the model");
    }
}
