//! The order of a file's appends when many threads append at once: who gets which bytes, and
//! when a writer may say its bytes are in the file. No I/O here (appender.rs does it), so
//! that `make loom` can explore every interleaving of the very same code.
//!
//! A writer reserves its bytes with one compare-and-swap on the next free offset, writes
//! them, and publishes them in reservation order: `publish` waits until every earlier
//! reservation is published (its writer is copying a few bytes, or was preempted), so that
//! once a write is published, every byte before it is written too. A reader of the file that
//! stops at the first incomplete frame (the journal's replay) then never loses a write that
//! returned. `seal` holds the order alone: new reservations wait, and it waits for those in
//! flight, so that the file can be started over or shrunk.

use std::sync::atomic::Ordering;

#[cfg(not(loom))]
use std::sync::atomic::AtomicU64;

#[cfg(loom)]
use loom::sync::atomic::AtomicU64;

use crate::sync::{Mutex, MutexGuard};

/// `next`: the offset of the next reservation in the low bits, a count of sealed sections
/// above it (so that a compare-and-swap prepared before one never succeeds after it, even
/// when the offset came back to the same value), and the seal in the top bit.
const OFFSET_BITS: u32 = 48;
pub const MAX_OFFSET: u64 = (1 << OFFSET_BITS) - 1;
const SEALED: u64 = 1 << 63;
const GENERATION_MASK: u64 = !MAX_OFFSET & !SEALED;
const GENERATION_ONE: u64 = 1 << OFFSET_BITS;

/// Where reservations stand. Both parts change with every write, so each has a cache line of
/// its own: a field beside them that writers only read (the file's length, the mapping's
/// address, the journal's salt) would otherwise travel between the cores with them, and a
/// writer waiting for its turn to publish (reading `filled`) would take `next` away from the
/// writer reserving after it.
pub struct AppendOrder {
    /// See `OFFSET_BITS`.
    next: Reserved,
    filled: Filled,
    /// Held by `Sealed` for its whole life: a reservation that finds the order sealed sleeps
    /// on it.
    seal: Mutex<()>,
}

#[repr(align(64))]
#[derive(Debug)]
struct Reserved(AtomicU64);

/// What is published, stored only by the writer whose turn it is.
#[repr(align(64))]
#[derive(Debug)]
struct Filled {
    /// Every reservation below this offset is published.
    offset: AtomicU64,
    /// Bytes published since the order was made, across restarts: a reservation's position in
    /// the stream of everything written (`Published::position`).
    total: AtomicU64,
}

/// Where a reservation's bytes went, once published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// The offset after them in the file.
    pub end: u64,
    /// The bytes published before their end since the order was made (restarts included):
    /// every reservation up to this position is whole in the file.
    pub position: u64,
}

/// What `try_reserve` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserve {
    /// `offset..offset + len` is the caller's, to write and then `publish`.
    Reserved(u64),
    /// The bytes would end at this offset, beyond the room the caller said it has: it grows
    /// the file and asks again (nothing is reserved).
    Beyond(u64),
}

/// The order held alone (see the module comment).
pub struct Sealed<'a> {
    order: &'a AppendOrder,
    _seal: MutexGuard<'a, ()>,
    /// Where reservations go on once it drops.
    next: u64,
}

impl AppendOrder {
    /// Reservations from `start` on.
    pub fn new(start: u64) -> AppendOrder {
        let start = start & MAX_OFFSET;
        AppendOrder {
            next: Reserved(AtomicU64::new(start)),
            filled: Filled { offset: AtomicU64::new(start), total: AtomicU64::new(0) },
            seal: Mutex::new(()),
        }
    }

    /// Where the next reservation starts (the end of the reservations so far).
    pub fn end(&self) -> u64 {
        self.next.0.load(Ordering::Acquire) & MAX_OFFSET
    }

    /// Every reservation below this offset is published.
    pub fn filled(&self) -> u64 {
        self.filled.offset.load(Ordering::Acquire)
    }

    /// The position up to which every reservation is published (`Published::position`).
    pub fn published(&self) -> u64 {
        self.filled.total.load(Ordering::Acquire)
    }

    /// Reserves the next `len` bytes if they end within `room()` (the file's length); waits
    /// while the order is sealed. None when they would end past `MAX_OFFSET`.
    ///
    /// `room` is read after `next` is seen unsealed, never before: the file shrinks only while
    /// the order is sealed, so a length read before a sealed section (a journal started over
    /// and truncated) could let a reservation past the new end, where a store through the
    /// mapping raises SIGBUS. Read after, it is the length the last unseal published (its
    /// release store of `next` orders the truncation before it), and a seal in between
    /// changes `next`, which fails the compare-and-swap.
    pub fn try_reserve(&self, len: u64, room: impl Fn() -> u64) -> Option<Reserve> {
        loop {
            let next = self.next.0.load(Ordering::Acquire);
            if next & SEALED != 0 {
                // `Sealed` holds the seal's lock for as long as the bit is set.
                drop(self.seal.lock());
                continue;
            }
            let offset = next & MAX_OFFSET;
            let end = offset.checked_add(len).filter(|end| *end <= MAX_OFFSET)?;
            if end > room() {
                return Some(Reserve::Beyond(end));
            }
            let reserved = (next & GENERATION_MASK) | end;
            if self.next.0.compare_exchange_weak(next, reserved, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return Some(Reserve::Reserved(offset));
            }
            spin();
        }
    }

    /// Publishes `offset..end` (a reservation, written) once every reservation before it is
    /// published.
    pub fn publish(&self, offset: u64, end: u64) -> Published {
        wait_until(|| self.filled.offset.load(Ordering::Acquire) == offset);
        // Only the writer whose turn it is stores these (the others wait above).
        let position = self.filled.total.load(Ordering::Acquire) + (end - offset);
        self.filled.total.store(position, Ordering::Release);
        self.filled.offset.store(end, Ordering::Release);
        Published { end, position }
    }

    /// Seals the order and waits for the reservations in flight to be published.
    pub fn seal(&self) -> Sealed<'_> {
        let seal = self.seal.lock();
        let sealed = self.next.0.fetch_or(SEALED, Ordering::AcqRel);
        let end = sealed & MAX_OFFSET;
        wait_until(|| self.filled.offset.load(Ordering::Acquire) == end);
        Sealed { order: self, _seal: seal, next: end }
    }
}

impl Sealed<'_> {
    /// Where reservations would go on now.
    #[cfg(test)]
    pub fn end(&self) -> u64 {
        self.next
    }

    /// Reservations go on from `offset` once this guard drops (a file started over).
    pub fn restart_at(&mut self, offset: u64) {
        self.next = offset & MAX_OFFSET;
        self.order.filled.offset.store(self.next, Ordering::Release);
    }
}

impl Drop for Sealed<'_> {
    fn drop(&mut self) {
        // A new generation: a reservation prepared before this section never lands after it.
        let next = &self.order.next.0;
        let generation = (next.load(Ordering::Acquire) & GENERATION_MASK).wrapping_add(GENERATION_ONE);
        next.store((generation & GENERATION_MASK) | self.next, Ordering::Release);
    }
}

/// One step of a wait for another thread.
fn spin() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Spins a little, then yields, until `done` (the thread it waits for was preempted).
fn wait_until(done: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !done() {
        if spins < 128 && cfg!(not(loom)) {
            spins += 1;
            spin();
        } else {
            #[cfg(loom)]
            loom::thread::yield_now();
            #[cfg(not(loom))]
            std::thread::yield_now();
        }
    }
}

/// The protocol under loom (`make loom`): writers reserve, write (each byte a flag in a model
/// of the file) and publish, beside each other or beside a thread that seals the order and
/// starts it over. In every interleaving up to the preemption bound: no byte is reserved
/// twice in one generation of the file, a writer's publish returns only when every byte below
/// its end is written, and a seal sees every byte below its end written.
#[cfg(all(test, loom))]
mod loom_tests {
    #![expect(clippy::unwrap_used, clippy::indexing_slicing, reason = "a model fails loudly")]
    use super::*;
    use loom::sync::atomic::AtomicU8;
    use loom::sync::Arc;

    const FILE: usize = 8;

    struct Model {
        order: AppendOrder,
        /// How many writers wrote each byte since the file last started over.
        bytes: Vec<AtomicU8>,
        /// Counted by the sealer before it starts the file over (and zeroes `bytes`).
        restarts: AtomicU8,
        /// The file's length: the sealer shrinks it, as a journal started over is truncated.
        room: AtomicU64,
    }

    impl Model {
        fn written_below(&self, end: u64) -> bool {
            self.bytes[..end as usize].iter().all(|b| b.load(Ordering::Acquire) == 1)
        }
    }

    fn writer(model: &Model, len: u64) {
        let restarts = model.restarts.load(Ordering::Acquire);
        let room = || model.room.load(Ordering::Acquire);
        let Some(Reserve::Reserved(offset)) = model.order.try_reserve(len, room) else {
            return; // the model's file is full
        };
        // The file shrinks only while sealed, and this reservation holds off the next seal
        // until it is published: its bytes must lie within the file (a store past the end
        // of a mapped file raises SIGBUS).
        assert!(offset + len <= room(), "a reservation past the end of the file");
        for byte in &model.bytes[offset as usize..(offset + len) as usize] {
            assert_eq!(byte.fetch_add(1, Ordering::AcqRel), 0, "a byte reserved twice");
        }
        let published = model.order.publish(offset, offset + len);
        assert_eq!(published.end, offset + len);
        let whole = model.written_below(published.end);
        // Unless the file started over since (its bytes zeroed), everything before this
        // write's end is written once it is published.
        if model.restarts.load(Ordering::Acquire) == restarts {
            assert!(whole, "published before an earlier reservation was written");
        }
    }

    fn model() -> Arc<Model> {
        Arc::new(Model {
            order: AppendOrder::new(0),
            bytes: (0..FILE).map(|_| AtomicU8::new(0)).collect(),
            restarts: AtomicU8::new(0),
            room: AtomicU64::new(FILE as u64),
        })
    }

    fn builder() -> loom::model::Builder {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        // Each turn of a wait is a branch: waits for a preempted writer take many.
        builder.max_branches = 10_000;
        builder
    }

    /// Two writers: their bytes never overlap, and each publishes only after the other's
    /// earlier bytes are written.
    #[test]
    fn reservations_are_disjoint_and_published_in_order() {
        builder().check(|| {
            let model = model();
            let other = {
                let model = Arc::clone(&model);
                loom::thread::spawn(move || writer(&model, 3))
            };
            writer(&model, 2);
            other.join().unwrap();
            let end = model.order.end();
            assert_eq!((end, model.order.filled(), model.order.published()), (5, 5, 5));
            assert!(model.written_below(end));
        });
    }

    /// A writer beside a thread that seals the order, truncates the file and starts it over:
    /// the seal sees every reserved byte written, the writer's bytes land in one generation
    /// of the file, and within its length in that generation.
    #[test]
    fn a_seal_waits_for_the_writes_in_flight() {
        builder().check(|| {
            let model = model();
            let sealer = {
                let model = Arc::clone(&model);
                loom::thread::spawn(move || {
                    let mut sealed = model.order.seal();
                    assert!(model.written_below(sealed.end()), "sealed with a reservation in flight");
                    model.restarts.fetch_add(1, Ordering::AcqRel);
                    for byte in &model.bytes {
                        byte.store(0, Ordering::Release);
                    }
                    // Truncated, as the journal is when it starts over.
                    model.room.store(2, Ordering::Release);
                    sealed.restart_at(0);
                })
            };
            writer(&model, 3);
            sealer.join().unwrap();
            let end = model.order.end();
            assert_eq!(model.order.filled(), end, "every reservation published");
            assert!(model.written_below(end));
        });
    }
}
