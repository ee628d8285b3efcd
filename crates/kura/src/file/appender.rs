//! A file appended to through a shared mapping, by many threads at once: each write lands in
//! the page cache, where it survives a killed process, without a system call or a lock.
//!
//! Why: the file engines' journal takes a frame per commit, and HashDbm logs every single
//! write as a frame of its own. A `pwrite` of a 40-byte frame cost more than the update it
//! carried (a system call is several microseconds on these virtual machines), and a lock
//! around the copy made two threads' sets queue behind each other: 2-thread random sets fell
//! from 2.6M to 1.3-2.0M a second when HashDbm's journal took them under one mutex.
//!
//! How: a writer reserves its bytes with one compare-and-swap on the next free offset, copies
//! into them, and publishes them in reservation order (append_order.rs, which `make loom`
//! checks): a writer whose predecessor is still copying waits for it, a few nanoseconds.
//! Publishing in order is what keeps a reader of the file that stops at the first incomplete
//! frame (the journal's replay) from losing a later write that already returned: everything
//! before a returned write is whole. The mapping reserves address space for the largest size the file
//! may reach (as `MappedFile` does), so growth never moves it; the file grows by zeros written
//! with `pwrite` (`grow_to`), so its blocks exist and are initialized before the mapping
//! stores into them, and a later sync changes no extent or size for the file system to commit
//! first. `fdatasync` of the file makes the mapped writes durable like written ones.
//!
//! What needs the file alone (starting it over, shrinking it) takes `exclusive`: it seals the
//! appender (new reservations wait), waits for the reservations in flight to be published,
//! and unseals it when dropped.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

pub use super::append_order::Published;
use super::append_order::{AppendOrder, Reserve, Sealed, MAX_OFFSET};
use crate::error::{Error, ErrorKind, Result};

/// Address space reserved for the file (less where a ulimit refuses it): far more than a
/// journal holds between two checkpoints.
const MAX_MAPPED: u64 = 1 << 38;
/// The smallest page size of the systems Kura runs on (`drop_written_pages` rounds to it).
const PAGE_SIZE: u64 = 4096;
/// The least address space an appender accepts when the system refuses more.
const MIN_MAPPED: u64 = 64 << 20;

/// How a reservation's bytes reach the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendWrite {
    /// Copied in through the mapping (data that is not synced at once).
    Mapped,
    /// Written with `pwrite` (data about to be synced). A page stored into through the
    /// mapping and then synced is write-protected by the writeback, and the next store faults
    /// it back: on ext4 that fault dirtied the inode, and each durable commit then waited for a
    /// journal commit of the file system as well; single-record durable commits took
    /// 320-500 µs, against 120-140 µs written this way.
    Through,
}

pub struct MappedAppender {
    file: Arc<File>,
    path: PathBuf,
    /// Address space for the whole file, at a fixed address. Invariant: `len <= map.len()`.
    map: memmap2::MmapRaw,
    /// The file's length: the only bytes ever stored into lie below it. It shrinks only under
    /// `Exclusive`, when no reservation is in flight.
    len: AtomicU64,
    /// Zeros are written this far ahead of the reservations when the file grows.
    growth: u64,
    /// Held while the file's length changes; it guards the offset below which the pages
    /// written are no longer mapped (`drop_written_pages`).
    grow: Mutex<u64>,
    /// Who gets which bytes, and when they count as written.
    order: AppendOrder,
    /// Set when a reservation could not be written: its bytes are not a whole frame, so
    /// nothing after them may be taken for written (see `Reservation::write_through`).
    broken: AtomicBool,
}

impl std::fmt::Debug for MappedAppender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedAppender").field("path", &self.path).field("len", &self.len()).finish()
    }
}

/// Bytes reserved for one writer, until it writes them (`write`, `write_through`): then they
/// are published, after every earlier reservation. Dropped unwritten (an error or a panic of
/// its writer), they are published as they are, so that later writers do not wait forever,
/// and the appender refuses every later reservation.
pub struct Reservation<'a> {
    appender: &'a MappedAppender,
    offset: u64,
    end: u64,
    written: bool,
}

/// The appender held alone: no reservation is in flight, and new ones wait until it drops.
pub struct Exclusive<'a> {
    appender: &'a MappedAppender,
    sealed: Sealed<'a>,
}

impl MappedAppender {
    /// Maps `file` (at `path`, for messages) as it is, reservations starting at `start`;
    /// the file grows by `growth` bytes of zeros at a time. The caller holds the lock that
    /// makes this process the file's only writer (the database file's exclusive lock), and
    /// makes this appender its only writer in the process.
    pub fn new(file: Arc<File>, path: &Path, start: u64, growth: u64) -> Result<MappedAppender> {
        let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
        let len = file.metadata().map_err(|e| io("stat", e))?.len();
        let map = super::mapped::reserve_address_space(&file, MAX_MAPPED.max(len), len.max(MIN_MAPPED / 2), true)
            .map_err(|e| io("mmap", e))?;
        Ok(MappedAppender {
            file,
            path: path.to_path_buf(),
            map,
            len: AtomicU64::new(len),
            growth: growth.max(1),
            grow: Mutex::new(0),
            order: AppendOrder::new(start),
            broken: AtomicBool::new(false),
        })
    }

    fn io(&self, what: &str, e: std::io::Error) -> Error {
        Error::io(format!("{what} {}", self.path.display()), e)
    }

    /// The file's length.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    /// Where the next reservation starts (the end of the reservations so far).
    pub fn end(&self) -> u64 {
        self.order.end()
    }

    /// Reserves the next `len` bytes, growing the file first if they lie beyond it. Nothing
    /// is reserved when this fails (a full disk: the next call tries again).
    pub fn reserve(&self, len: usize) -> Result<Reservation<'_>> {
        loop {
            if self.broken.load(Ordering::Acquire) {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("{}: an earlier write to it failed; close and reopen the database", self.path.display()),
                ));
            }
            match self.order.try_reserve(len as u64, || self.len()) {
                Some(Reserve::Reserved(offset)) => {
                    return Ok(Reservation { appender: self, offset, end: offset + len as u64, written: false });
                }
                // Zeros a growth step ahead of the end, at least (see `grow_to`).
                Some(Reserve::Beyond(end)) => {
                    self.grow_to(end.div_ceil(self.growth).saturating_add(1).saturating_mul(self.growth))?;
                }
                None => {
                    return Err(Error::new(
                        ErrorKind::Limit,
                        format!("{}: {len} bytes more do not fit (at most {MAX_OFFSET})", self.path.display()),
                    ));
                }
            }
        }
    }

    /// Lengthens the file to `target` bytes with zeros written by `pwrite` (so that its blocks
    /// are allocated and initialized before stores reach them), unless it is that long.
    fn grow_to(&self, target: u64) -> Result<()> {
        let mut unmapped = self.grow.lock();
        let len = self.len();
        if target <= len {
            return Ok(());
        }
        self.drop_written_pages(&mut unmapped);
        if target > self.map.len() as u64 {
            return Err(Error::new(
                ErrorKind::Limit,
                format!(
                    "{} would grow to {target} bytes, past the {} its mapping holds",
                    self.path.display(),
                    self.map.len()
                ),
            ));
        }
        write_zeros(&self.file, len, target - len).map_err(|e| self.io("write", e))?;
        self.len.store(target, Ordering::Release);
        // The new pages are mapped writable in one call rather than faulted one by one by
        // the writers' stores (as `MappedFile::populate_ahead` does; a kernel before 5.14
        // refuses, and the stores fault as before).
        if let (Ok(offset), Ok(bytes)) = (usize::try_from(len), usize::try_from(target - len)) {
            let _ = self.map.advise_range(memmap2::Advice::PopulateWrite, offset, bytes);
        }
        Ok(())
    }

    /// Unmaps the pages wholly below the published offset, from `unmapped` on: no writer
    /// stores into them again before the file starts over. Why: a mapped page the process
    /// wrote counts in its resident set, and a journal grows to `checkpoint_bytes` (64 MiB)
    /// between checkpoints; unmapped, the pages stay in the page cache (dirty until written
    /// back, as before), and only the cache counts them.
    fn drop_written_pages(&self, unmapped: &mut u64) {
        let published = self.order.filled() & !(PAGE_SIZE - 1);
        if published <= *unmapped {
            return;
        }
        if let (Ok(start), Ok(len)) = (usize::try_from(*unmapped), usize::try_from(published - *unmapped)) {
            // SAFETY: the mapping is shared and backed by the file, so MADV_DONTNEED frees no
            // content (the pages stay in the page cache with their dirty state), and no one
            // holds a slice of these bytes: every reservation below `published` is written.
            let _ = unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) };
        }
        *unmapped = published;
    }

    /// Seals the appender and waits for the reservations in flight to be published: the file
    /// is the caller's until the guard drops.
    pub fn exclusive(&self) -> Exclusive<'_> {
        Exclusive { appender: self, sealed: self.order.seal() }
    }

    /// The position every reservation up to which is published (see `Published::position`).
    pub fn published(&self) -> u64 {
        self.order.published()
    }

    /// Makes every write to the file durable: one `fdatasync`.
    pub fn sync_data(&self) -> Result<()> {
        super::sync_probe::before_sync(&self.path);
        self.file.sync_data().map_err(|e| self.io("fdatasync", e))
    }

    /// Starts writing the file's dirty pages to the device without waiting for them, so that
    /// a `sync_data` later waits only for what is still in flight. A hint: where it fails, or
    /// on a system without `sync_file_range`, the `fdatasync` that follows writes the pages.
    pub fn start_writeback(&self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: `sync_file_range` reads and writes no memory of this process; the
            // descriptor is the file's, open for as long as `self.file` lives.
            let _hint = unsafe { libc::sync_file_range(self.file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
        }
    }

    /// The file's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A bug in Kura, loud: a write of other bytes than were reserved.
    fn mismatch(&self, reserved: u64, given: usize) -> Error {
        Error::internal(format!("{}: a write of {given} bytes into a reservation of {reserved}", self.path.display()))
    }
}

/// Zeros to write from: in the program's zero-initialized data, so its pages are the
/// system's one zero page until something writes them (nothing does), and copying from them
/// reads the same cached bytes over and over.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// Writes `len` zeros at `offset` of `file`.
fn write_zeros(file: &File, mut offset: u64, mut len: u64) -> std::io::Result<()> {
    while len > 0 {
        let chunk = len.min(ZEROS.len() as u64) as usize;
        file.write_all_at(ZEROS.get(..chunk).unwrap_or_default(), offset)?;
        offset += chunk as u64;
        len -= chunk as u64;
    }
    Ok(())
}

impl Reservation<'_> {
    /// Where the reserved bytes start in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// How many bytes are reserved.
    pub fn len(&self) -> usize {
        (self.end - self.offset) as usize
    }

    /// Writes `bytes`, exactly the reserved length, as `how` says, then publishes them.
    pub fn write(mut self, bytes: &[u8], how: AppendWrite) -> Result<Published> {
        let appender = self.appender;
        if bytes.len() != self.len() {
            return Err(appender.mismatch(self.end - self.offset, bytes.len()));
        }
        match how {
            AppendWrite::Mapped => {
                let start = self.offset as usize;
                // SAFETY: `offset..end` was handed to this reservation alone by the
                // compare-and-swap in `reserve` (reservations never overlap, and no other code
                // of this process stores into the file's bytes while reservations are taken:
                // `Exclusive` waits for them); it lies below the file's length, checked before
                // the reservation was taken (the length shrinks only under `Exclusive`, which
                // waits for this reservation), and so within the mapping (`len <= map.len()`).
                // The mapping is shared and writable; `bytes` is memory of the caller's, not
                // of the mapping.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), appender.map.as_mut_ptr().add(start), bytes.len());
                }
            }
            AppendWrite::Through => {
                appender.file.write_all_at(bytes, self.offset).map_err(|e| appender.io("write", e))?;
            }
        }
        self.written = true;
        Ok(appender.order.publish(self.offset, self.end))
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.written {
            self.appender.broken.store(true, Ordering::Release);
            let _ = self.appender.order.publish(self.offset, self.end);
        }
    }
}

impl Exclusive<'_> {
    /// The file's length.
    pub fn len(&self) -> u64 {
        self.appender.len()
    }

    /// Where reservations would go on now.
    #[cfg(test)]
    pub fn end(&self) -> u64 {
        self.sealed.end()
    }

    /// Reservations go on from `offset` once this guard drops (a file started over).
    pub fn restart_at(&mut self, offset: u64) {
        self.sealed.restart_at(offset);
        let mut unmapped = self.appender.grow.lock();
        *unmapped = (*unmapped).min(offset & !(PAGE_SIZE - 1));
    }

    /// Lengthens the file to `len` bytes of zeros, unless it is that long already.
    pub fn grow_to(&mut self, len: u64) -> Result<()> {
        self.appender.grow_to(len)
    }

    /// Shortens the file to `len` bytes.
    pub fn truncate(&mut self, len: u64) -> Result<()> {
        let appender = self.appender;
        let _grow = appender.grow.lock();
        if len >= appender.len() {
            return Ok(());
        }
        appender.file.set_len(len).map_err(|e| appender.io("truncate", e))?;
        appender.len.store(len, Ordering::Release);
        Ok(())
    }

    /// Copies `bytes` to `offset` through the mapping, within the file's length.
    pub fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        let appender = self.appender;
        let end = offset.checked_add(bytes.len() as u64).filter(|end| *end <= appender.len());
        let Some(end) = end else {
            return Err(Error::internal(format!(
                "{}: a write of {} bytes at {offset} lies within its {} bytes (callers grow the file first)",
                appender.path.display(),
                bytes.len(),
                appender.len()
            )));
        };
        debug_assert!(end <= appender.map.len() as u64, "invariant: the file never outgrows its mapping");
        // SAFETY: the range lies below the file's length and so within the mapping; the
        // appender is sealed and no reservation is in flight (`exclusive` waited for them), so
        // no other thread stores into the file's bytes while this guard lives.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), appender.map.as_mut_ptr().add(offset as usize), bytes.len());
        }
        Ok(())
    }

    /// Makes every write to the file durable: one `fdatasync`.
    pub fn sync_data(&self) -> Result<()> {
        self.appender.sync_data()
    }

    /// After a failed start over: the file's state is unknown, so no reservation may be taken
    /// for written from here (the appender refuses them).
    pub fn mark_broken(&mut self) {
        self.appender.broken.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;

    /// A write of other bytes than were reserved, or past the end, is a bug in its caller: an
    /// Internal error in release builds, a panic (`Error::internal`'s debug assertion) in
    /// debug ones.
    fn refused<T>(write: impl FnOnce() -> Result<T>) -> bool {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(write)) {
            Ok(result) => result.is_err_and(|e| e.kind() == ErrorKind::Internal),
            Err(_) => cfg!(debug_assertions),
        }
    }

    fn appender(path: &Path, growth: u64) -> MappedAppender {
        let file = Arc::new(
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).unwrap(),
        );
        MappedAppender::new(file, path, 0, growth).unwrap()
    }

    #[test]
    fn writes_reach_the_file_and_growth_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("appended");
        let appender = appender(&path, 4096);
        assert_eq!(appender.len(), 0);
        let first = appender.reserve(10).unwrap();
        assert_eq!((first.offset(), appender.len()), (0, 2 * 4096), "grown ahead by a step");
        assert_eq!(first.write(b"0123456789", AppendWrite::Mapped).unwrap(), Published { end: 10, position: 10 });
        let across = appender.reserve(8190).unwrap();
        let bytes: Vec<u8> = (0..8190u32).map(|i| i as u8).collect();
        across.write(&bytes, AppendWrite::Mapped).unwrap();
        let through = appender.reserve(7).unwrap();
        through.write(b"written", AppendWrite::Through).unwrap();
        let mismatched = appender.reserve(3).unwrap();
        assert!(refused(|| mismatched.write(b"four", AppendWrite::Mapped)));
        assert!(appender.reserve(1).is_err(), "an unwritten reservation breaks the appender");
        let file = std::fs::read(&path).unwrap();
        assert_eq!(file.len() as u64, appender.len());
        assert_eq!(&file[..10], b"0123456789");
        assert_eq!(&file[10..8200], &bytes[..]);
        assert_eq!(&file[8200..8207], b"written");
        assert!(file[8207..].iter().all(|&b| b == 0));
        let mut exclusive = appender.exclusive();
        assert_eq!(exclusive.end(), 8210);
        exclusive.truncate(4096).unwrap();
        exclusive.write(4000, b"still mapped").unwrap();
        assert!(refused(|| exclusive.write(4090, b"too far")));
        drop(exclusive);
        assert_eq!(&std::fs::read(&path).unwrap()[4000..4012], b"still mapped");
    }

    /// Threads reserve and write at once, one of them starting the file over now and then:
    /// every reservation is whole, none overlaps another, and every write that returned lies
    /// below the published end before its writer goes on.
    #[test]
    fn concurrent_reservations_are_disjoint_and_published_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("appended");
        let appender = appender(&path, 4096);
        let threads = 4;
        let per_thread = 3000;
        let restarts = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for thread in 0..threads {
                let (appender, restarts) = (&appender, &restarts);
                scope.spawn(move || {
                    for i in 0..per_thread {
                        if thread == 0 && i % 500 == 499 {
                            let mut exclusive = appender.exclusive();
                            let end = exclusive.end();
                            // Every reserved byte is written: no zero is left behind the end.
                            let file = std::fs::read(&appender.path).unwrap();
                            assert!(file[..end as usize].iter().all(|&b| b != 0), "a hole below {end}");
                            exclusive.restart_at(0);
                            exclusive.truncate(4096).unwrap();
                            let zeros = vec![0u8; 4096];
                            exclusive.write(0, &zeros).unwrap();
                            restarts.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        let len = 1 + (i * 7 + thread) % 300;
                        let reservation = appender.reserve(len).unwrap();
                        let offset = reservation.offset();
                        let tag = (thread as u8) + 1;
                        let appended = reservation.write(&vec![tag; len], AppendWrite::Mapped).unwrap();
                        assert_eq!(appended.end, offset + len as u64);
                        assert!(appender.published() >= appended.position, "published in order");
                    }
                });
            }
        });
        assert!(restarts.load(Ordering::Relaxed) >= 5);
        let end = appender.end() as usize;
        let file = std::fs::read(&path).unwrap();
        assert!(file[..end].iter().all(|&b| (1..=threads as u8).contains(&b)), "every reserved byte written once");
    }
}
