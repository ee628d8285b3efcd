//! Proofs that a chain's lock is held, taken by every storage function that reads or writes
//! a chain (`storage.rs`), so that the concurrency contract is checked by the compiler rather
//! than stated in `# Safety` sections.
//!
//! A bucket's chain (its bucket entry and every record reachable from it) is read only under
//! the bucket's stripe lock, shared or exclusive, and written only under it exclusively (the
//! locks live in `mod.rs`). `Chain` proves the first and `ChainMut` the second; each borrows
//! the guard it was made from, so it cannot outlive the lock. `WholeFile` proves that no other
//! thread can touch any chain of a storage: it borrows that storage mutably when made, which
//! is possible only while every stripe lock is held exclusively (`with_all`) or while the
//! storage is not shared at all (a file being restored, a rebuild's new file).

use std::marker::PhantomData;

use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Error, Result};

/// The right to read the chain of one bucket.
#[derive(Debug, Clone, Copy)]
pub struct Chain<'lock> {
    bucket: u64,
    _lock: PhantomData<&'lock ()>,
}

impl<'lock> Chain<'lock> {
    /// The chain of `bucket`, whose stripe's lock `_guard` holds shared.
    pub fn shared(_guard: &'lock RwLockReadGuard<'_, ()>, bucket: u64) -> Chain<'lock> {
        Chain { bucket, _lock: PhantomData }
    }

    /// The bucket whose chain this is.
    pub fn bucket(self) -> u64 {
        self.bucket
    }
}

/// The right to read and write the chain of one bucket.
#[derive(Debug)]
pub struct ChainMut<'lock> {
    bucket: u64,
    _lock: PhantomData<&'lock ()>,
}

impl<'lock> ChainMut<'lock> {
    /// The chain of `bucket`, whose stripe's lock `_guard` holds exclusively.
    pub fn exclusive(_guard: &'lock RwLockWriteGuard<'_, ()>, bucket: u64) -> ChainMut<'lock> {
        ChainMut { bucket, _lock: PhantomData }
    }

    /// The bucket whose chain this is.
    pub fn bucket(&self) -> u64 {
        self.bucket
    }

    /// Reading is allowed too.
    pub fn read(&self) -> Chain<'_> {
        Chain { bucket: self.bucket, _lock: PhantomData }
    }
}

/// The lock a `process` call got: exclusive on a writable handle, shared on a read-only one.
#[derive(Debug)]
pub enum ChainLock<'lock> {
    /// Read only.
    Shared(Chain<'lock>),
    /// Read and write.
    Exclusive(ChainMut<'lock>),
}

impl ChainLock<'_> {
    /// The right to read.
    pub fn read(&self) -> Chain<'_> {
        match self {
            ChainLock::Shared(chain) => *chain,
            ChainLock::Exclusive(chain) => chain.read(),
        }
    }

    /// The right to write; Infeasible on a read-only handle's shared lock.
    pub fn write(&self) -> Result<&ChainMut<'_>> {
        match self {
            ChainLock::Exclusive(chain) => Ok(chain),
            ChainLock::Shared(_) => Err(Error::infeasible("the database is open read-only")),
        }
    }
}

/// The right to read and write every chain of one storage.
#[derive(Debug)]
pub struct WholeFile<'lock> {
    _lock: PhantomData<&'lock ()>,
}

impl<'lock> WholeFile<'lock> {
    /// Takes `storage` (a `Storage`) whole: the mutable borrow proves no other reference to it
    /// exists now, and the shared reference returned is the only way to it while the proof
    /// lives.
    pub fn unshared<S>(storage: &'lock mut S) -> (&'lock S, WholeFile<'lock>) {
        (storage, WholeFile { _lock: PhantomData })
    }

    /// The right to read the chain of `bucket`.
    pub fn chain(&self, bucket: u64) -> Chain<'_> {
        Chain { bucket, _lock: PhantomData }
    }

    /// The right to write the chain of `bucket`.
    pub fn chain_mut(&self, bucket: u64) -> ChainMut<'_> {
        ChainMut { bucket, _lock: PhantomData }
    }
}
