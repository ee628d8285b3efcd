//! The inter-process lock of a database file: one writer, or any number of readers.
//!
//! `flock` locks belong to the open file description, so they are released when the process
//! dies, however it dies: a killed writer never leaves a stale lock behind.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Many readers may hold it together; no writer while they do.
    Shared,
    /// One writer, and nobody else.
    Exclusive,
}

/// Proof that the lock is held: the lock lasts as long as the file descriptor it was taken
/// on, which the owner of this value keeps open.
#[derive(Debug)]
pub struct FileLock {
    _held: (),
}

impl FileLock {
    /// Takes the lock without waiting: a Locked error names the file if someone holds it.
    pub fn acquire(file: &File, path: &Path, mode: LockMode) -> Result<FileLock> {
        let operation = match mode {
            LockMode::Shared => libc::LOCK_SH,
            LockMode::Exclusive => libc::LOCK_EX,
        } | libc::LOCK_NB;
        loop {
            // SAFETY: flock takes a valid open descriptor (borrowed from `file` for the call)
            // and an operation flag; it touches no memory of ours.
            let rc = unsafe { libc::flock(file.as_raw_fd(), operation) };
            if rc == 0 {
                return Ok(FileLock { _held: () });
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) => {
                    let held = match mode {
                        LockMode::Shared => "a writer",
                        LockMode::Exclusive => "another process or handle",
                    };
                    return Err(Error::new(ErrorKind::Locked, format!("{} is locked by {held}", path.display())));
                }
                _ => return Err(Error::io(format!("lock {}", path.display()), err)),
            }
        }
    }
}
