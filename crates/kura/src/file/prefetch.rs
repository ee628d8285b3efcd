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
