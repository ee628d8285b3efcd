//! What every fuzz target links besides its entry point: an allocator that refuses any single
//! allocation above the limit the fuzzer is run with.
//!
//! libFuzzer's `-malloc_limit_mb` sees allocations through the sanitizer's malloc hooks only.
//! A build without a sanitizer (`cargo fuzz build -s none`, several times faster, for the long
//! runs) would let an allocation sized by an unchecked length pass unnoticed as long as its
//! pages were never touched. This allocator forwards to the system's and aborts on such a
//! request in every build, so that libFuzzer reports it as a crash with its input.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;

/// The largest single allocation a target may make: `-malloc_limit_mb=512` of `make fuzz`.
pub const ALLOCATION_LIMIT_BYTES: usize = 512 << 20;

/// The system allocator with [`ALLOCATION_LIMIT_BYTES`] enforced.
pub struct LimitedAllocator;

#[global_allocator]
static ALLOCATOR: LimitedAllocator = LimitedAllocator;

impl LimitedAllocator {
    fn check(size: usize) {
        if size > ALLOCATION_LIMIT_BYTES {
            // Written without formatting, which could allocate while the allocator runs.
            let _ = std::io::stderr().write_all(b"kura-fuzz: a single allocation over the 512 MB limit\n");
            std::process::abort();
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's own arguments, after a check
// that allocates nothing, so `System`'s guarantees are the caller's.
unsafe impl GlobalAlloc for LimitedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires of it.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc_zeroed` requires of it.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::check(new_size);
        // SAFETY: the caller's block, layout and size, as `GlobalAlloc::realloc` requires.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's block and layout, as `GlobalAlloc::dealloc` requires.
        unsafe { System.dealloc(ptr, layout) }
    }
}
