//! Read-ahead requests made on a thread of their own, so that asking for pages does not stop
//! the thread that will use them.
//!
//! A request to read ahead (`POSIX_FADV_WILLNEED`, which `MADV_WILLNEED` on a file mapping
//! also is) does its work in the caller: it allocates the page cache's pages, charges them to
//! the memory cgroup (reclaiming others when a limit is reached) and submits the reads, which
//! in a virtual machine rings the device's doorbell. A TreeDbm load of 8M records under a
//! 512 MiB limit spent 17% of its one thread there (`perf`), while the machine's other core
//! sat mostly idle. Here the requests are queued to a thread that makes them, and the writer
//! goes on applying the records whose leaves it asked for earlier.
//!
//! Only advice: a request that is late, dropped or refused costs the reader a read of its
//! own, never a wrong byte. A full queue makes the caller ask itself (as it did before this
//! thread existed), so that a slow disk never lets requests pile up in memory.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Requests the queue holds before the caller makes them itself: about a second of them at
/// the rate a load beyond memory asks (each a run of neighbouring leaves).
const QUEUE_LEN: usize = 1024;

/// A thread that asks the kernel to read ranges of one file ahead (`advise`); stopped and
/// joined when dropped.
pub struct AdviceThread {
    requests: Option<SyncSender<(u64, u64)>>,
    /// Set when dropped: the requests still queued are for a tree that is closing, and a
    /// close should not wait for them.
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AdviceThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdviceThread").field("running", &self.thread.is_some()).finish()
    }
}

impl AdviceThread {
    /// Starts a thread that advises `file` (a descriptor of its own, so the thread outlives
    /// nothing it borrows). None when the system gives no descriptor or thread: the caller
    /// then advises itself. The descriptor is a duplicate: it shares the open file
    /// description, and with it the `flock` (lock.rs), which is therefore let go only once
    /// this is dropped too (the pager holding both drops them together).
    pub fn start(file: &File) -> Option<AdviceThread> {
        let file = file.try_clone().ok()?;
        let (requests, queue) = sync_channel::<(u64, u64)>(QUEUE_LEN);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("kura-read-ahead".to_owned())
            .spawn(move || {
                for (offset, len) in queue {
                    if stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    will_need(&file, offset, len);
                }
            })
            .ok()?;
        Some(AdviceThread { requests: Some(requests), stop, thread: Some(thread) })
    }

    /// Queues a request to read `offset..offset+len` ahead; false when the queue is full (or
    /// the thread gone), for the caller to ask itself.
    pub fn advise(&self, offset: u64, len: u64) -> bool {
        match self.requests.as_ref().map(|requests| requests.try_send((offset, len))) {
            Some(Ok(())) => true,
            Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => false,
        }
    }
}

impl Drop for AdviceThread {
    fn drop(&mut self) {
        // The thread ends at its next request, or when the queue is closed and empty.
        self.stop.store(true, Ordering::Relaxed);
        drop(self.requests.take());
        if let Some(thread) = self.thread.take() {
            // A panic there (none is possible in `will_need`) would only have lost advice.
            let _ = thread.join();
        }
    }
}

/// `POSIX_FADV_WILLNEED` for `offset..offset+len` of `file`; ranges past the end are the
/// kernel's to clip, and a refusal is only lost advice.
fn will_need(file: &File, offset: u64, len: u64) {
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return;
    };
    // SAFETY: the descriptor is `file`'s, open for the whole call; the advice touches no
    // memory of this process.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_WILLNEED) };
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    #[test]
    fn advice_is_taken_until_the_queue_is_full_and_the_thread_stops_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, vec![7u8; 1 << 16]).unwrap();
        let file = File::open(&path).unwrap();
        let thread = AdviceThread::start(&file).expect("a thread");
        // Far more requests than the queue holds: none blocks, the queue takes at least as
        // many as it holds (more as the thread makes them), and the ones taken are made (a
        // range past the end included).
        let taken = (0..QUEUE_LEN as u64 * 4).filter(|i| thread.advise(i * 4096 % (1 << 17), 4096)).count();
        assert!(taken >= QUEUE_LEN, "the queue took {taken} requests, fewer than it holds");
        drop(thread);
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 1 << 16], "advice changed the file");
    }
}
