//! The process's resident set, measured one way by every benchmark program of this crate that
//! reports memory per record (and by the C++ drivers beside them, `bench/tkrzw_tiny.cc` and
//! `bench/tkrzw_cache.cc`), so that their figures compare.

/// The resident set of this process in bytes (0 where /proc is missing), after handing the
/// allocator's free pages back to the system, so that what a load allocated and freed again
/// (a bulk batch, dictionary training) is not counted as the map's. Every contender is
/// measured the same way (`bench/tkrzw_tiny.cc` and the Python dict call `malloc_trim` too).
pub fn resident_bytes() -> u64 {
    // SAFETY: malloc_trim only returns free memory of glibc's heaps to the system.
    unsafe { libc::malloc_trim(0) };
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}
