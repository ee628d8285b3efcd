//! A prefetch hint: start loading a cache line that will be needed soon, so that several
//! memory accesses overlap instead of waiting for each other.

/// Asks the CPU to bring the line holding `address` into the cache. Only a hint: it reads
/// nothing, cannot fault whatever the address, and does nothing on other architectures.
#[inline]
pub fn prefetch(address: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 accesses nothing architecturally and cannot fault, whatever the
    // address; SSE is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(address as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// The size of a cache line on the machines Kura runs on.
const LINE: usize = 64;

/// Asks the CPU to bring every line that `len` bytes from `start` touch into the cache,
/// including the second line of a short range that straddles a line boundary.
#[inline]
pub fn prefetch_range(start: usize, len: usize) {
    let end = start.saturating_add(len);
    let mut line = start & !(LINE - 1);
    while line < end {
        prefetch(line);
        line = line.saturating_add(LINE);
    }
}

/// Asks the CPU to bring the memory of `items` into the cache.
#[inline]
pub fn prefetch_slice<T>(items: &[T]) {
    prefetch_range(items.as_ptr() as usize, std::mem::size_of_val(items));
}
