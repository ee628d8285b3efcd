//! TreeDbm's write buffer counts what its records take from the heap, not less: its budget
//! (`write_buffer_bytes`, by default a third of the memory) is what a user sizes against a
//! memory limit, and a buffer that took a third more than it counted would push a process
//! under a cgroup limit into the OOM killer, as a cache overshooting its cap does.
//!
//! Alone in its test binary: its allocator counts the heap bytes of the blocks alive, as glibc
//! hands them out (the usable size of each block plus its 8-byte header), so the growth
//! measured while the buffer fills is the buffer's alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use kura::split_mix::SplitMix64;
use kura::{BatchOp, WriteBuffer};

/// The system allocator, counting the heap bytes of the live blocks.
struct HeapBytes;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// glibc's header before each block: a block takes its usable size plus this from the heap.
const BLOCK_HEADER: usize = 8;

impl HeapBytes {
    fn block_bytes(ptr: *mut u8) -> isize {
        if ptr.is_null() {
            return 0;
        }
        // SAFETY: `ptr` is a live block of `System`, which is glibc's malloc here.
        let usable = unsafe { libc::malloc_usable_size(ptr.cast()) };
        (usable + BLOCK_HEADER) as isize
    }

    fn live() -> isize {
        LIVE.load(Ordering::SeqCst)
    }
}

// SAFETY: every method forwards to `System` with the caller's own arguments and only reads the
// size of the block it returns or is given, so `System`'s guarantees are the caller's.
unsafe impl GlobalAlloc for HeapBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires of it.
        let ptr = unsafe { System.alloc(layout) };
        LIVE.fetch_add(Self::block_bytes(ptr), Ordering::SeqCst);
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc_zeroed` requires of it.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        LIVE.fetch_add(Self::block_bytes(ptr), Ordering::SeqCst);
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = Self::block_bytes(ptr);
        // SAFETY: the caller's block, layout and size, as `GlobalAlloc::realloc` requires.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(Self::block_bytes(new) - old, Ordering::SeqCst);
        }
        new
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(Self::block_bytes(ptr), Ordering::SeqCst);
        // SAFETY: the caller's block and layout, as `GlobalAlloc::dealloc` requires.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: HeapBytes = HeapBytes;

/// The orders in which keys arrive: ascending (a sequential load, which leaves the set's
/// nodes least full), descending, and random.
#[derive(Clone, Copy, Debug)]
enum Arrival {
    Ascending,
    Descending,
    Random,
}

/// For records of several sizes (removals, a few bytes, the peers benchmark's 24 + 150, and
/// larger) arriving in each order, with some keys set twice: what the buffer counts is at
/// least the heap its entries took, and not more than a quarter above it.
#[test]
fn the_buffer_counts_at_least_the_heap_its_records_take() {
    let shapes: [(usize, Option<usize>); 6] =
        [(8, None), (8, Some(8)), (16, Some(40)), (24, Some(150)), (40, Some(1000)), (100, Some(3000))];
    let mut rng = SplitMix64::new(47);
    for (key_len, value_len) in shapes {
        for arrival in [Arrival::Ascending, Arrival::Descending, Arrival::Random] {
            let records: u64 = 20_000;
            // Generated before the first measurement, so that only the buffer's blocks count.
            let mut keys: Vec<Vec<u8>> = (0..records)
                .map(|i| {
                    let number = match arrival {
                        Arrival::Ascending => i,
                        Arrival::Descending => records - i,
                        Arrival::Random => rng.next_u64(),
                    };
                    let mut key = number.to_be_bytes().to_vec();
                    key.resize(key_len, b'k');
                    key
                })
                .collect();
            // A tenth of the keys again, replacing their first operation.
            let again: Vec<Vec<u8>> = keys.iter().step_by(10).cloned().collect();
            keys.extend(again);
            let value = vec![b'v'; value_len.unwrap_or(0)];
            let before = HeapBytes::live();
            let mut buffer = WriteBuffer::default();
            for key in &keys {
                buffer.insert(match value_len {
                    Some(_) => BatchOp::Set { key, value: &value },
                    None => BatchOp::Remove { key },
                });
            }
            let taken = (HeapBytes::live() - before) as f64;
            let counted = buffer.bytes() as f64;
            eprintln!(
                "key {key_len}, value {value_len:?}, {arrival:?}: counted {counted}, heap {taken}, ratio {:.3}",
                counted / taken
            );
            assert!(
                counted >= taken && counted <= taken * 1.25,
                "key {key_len}, value {value_len:?}, {arrival:?}: the buffer counts {counted} bytes, its \
                 entries take {taken} from the heap"
            );
            drop(buffer);
        }
    }
}
