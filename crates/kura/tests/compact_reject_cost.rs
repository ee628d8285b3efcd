//! A broken CompactDbm snapshot costs no more to refuse than it took to read: a snapshot of a
//! few hundred bytes may declare up to 2^28 buckets (a 4 GiB bucket table), and loading
//! allocates that table only after every bucket record has passed its checks. Before, a
//! refused snapshot allocated the table and then walked all of it to drop it, which made such
//! inputs the slowest the fuzzer found (docs/fuzzing.md).
//!
//! Alone in its test binary: its allocator records the largest single allocation.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "forged bytes are indexed within the lengths just parsed")]

#[path = "support/compact_snapshot.rs"]
mod compact_snapshot;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use compact_snapshot::{assemble, split};
use kura::{CompactDbm, Dbm, ErrorKind, OpenMode, Params};

/// The system allocator, noting the largest request since the last `reset`.
struct LargestRequest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

impl LargestRequest {
    fn note(size: usize) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
    }

    fn reset() {
        LARGEST.store(0, Ordering::Relaxed);
    }

    fn largest() -> usize {
        LARGEST.load(Ordering::Relaxed)
    }
}

// SAFETY: every method forwards to `System` with the caller's own arguments, after noting a
// size, so `System`'s guarantees are the caller's.
unsafe impl GlobalAlloc for LargestRequest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size());
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires of it.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size());
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc_zeroed` requires of it.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::note(new_size);
        // SAFETY: the caller's block, layout and size, as `GlobalAlloc::realloc` requires.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's block and layout, as `GlobalAlloc::dealloc` requires.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: LargestRequest = LargestRequest;

/// The largest bucket count a layout may declare (docs/compact.md).
const MAX_BUCKETS: u32 = 1 << 28;
/// Lock groups in every layout (docs/compact.md): the layout record states buckets per group.
const NUM_GROUPS: u32 = 256;
/// Where the layout record's value holds its buckets per group, and its record count.
const BUCKETS_PER_GROUP_AT: std::ops::Range<usize> = 2..6;
const RECORD_COUNT_AT: std::ops::Range<usize> = 10..18;
/// What the test calls a large allocation: no bucket table of these layouts is smaller.
const LARGE: usize = 1 << 20;

/// A snapshot of no buckets whose layout record declares `buckets` and `record_count`.
fn layout_only(header: &[u8], records: &compact_snapshot::Records, buckets: u32, record_count: u64) -> Vec<u8> {
    let mut layout = records[..1].to_vec();
    layout[0].1[BUCKETS_PER_GROUP_AT].copy_from_slice(&(buckets / NUM_GROUPS).to_le_bytes());
    layout[0].1[RECORD_COUNT_AT].copy_from_slice(&record_count.to_le_bytes());
    assemble(header, &layout)
}

fn open_noting_the_largest_allocation(path: &std::path::Path, bytes: &[u8]) -> (kura::Result<CompactDbm>, usize) {
    std::fs::write(path, bytes).unwrap();
    LargestRequest::reset();
    let opened = CompactDbm::open(path, OpenMode::ReadOnly, &Params::new());
    (opened, LargestRequest::largest())
}

#[test]
fn a_refused_snapshot_that_declares_the_largest_layout_allocates_no_bucket_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("layout.kumz");
    let dbm = CompactDbm::open(&path, OpenMode::Truncate, &Params::parse("num_buckets=256").unwrap()).unwrap();
    for i in 0..300u32 {
        dbm.set(format!("key{i:06}").as_bytes(), b"value", true).unwrap();
    }
    dbm.close().unwrap();
    let (header, records) = split(&std::fs::read(&path).unwrap());

    // The largest layout, stating 300 records but holding none: refused, once all is read.
    let forged = layout_only(&header, &records, MAX_BUCKETS, 300);
    let (refused, largest) = open_noting_the_largest_allocation(&path, &forged);
    assert_eq!(refused.err().map(|e| e.kind()), Some(ErrorKind::BrokenData), "the forged snapshot was accepted");
    eprintln!("a {}-byte snapshot declaring 2^28 buckets, refused: largest allocation {largest} bytes", forged.len());
    assert!(largest < LARGE, "refusing a {}-byte snapshot allocated {largest} bytes at once", forged.len());

    // A layout of 2^26 buckets that states its 0 records is a valid snapshot (sized for far
    // more records than it holds): it loads, and its tables (2 MiB a group) are allocated
    // then, which shows that the allocator above sees them.
    let valid = layout_only(&header, &records, 1 << 26, 0);
    let (loaded, largest) = open_noting_the_largest_allocation(&path, &valid);
    assert_eq!(loaded.unwrap().count().unwrap(), 0);
    assert!(largest >= LARGE, "loading a layout of 2^26 buckets allocated at most {largest} bytes at once");
}
