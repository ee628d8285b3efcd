//! The resident set of the test process, for the tests that hold the library to a memory
//! figure (`compact_memory.rs`, `compact_sparse.rs`). Each such test is alone in its binary,
//! so that nothing else allocates while it measures.

/// The resident set of this process in bytes (/proc/self/statm).
pub fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm is readable");
    let pages: u64 =
        statm.split_whitespace().nth(1).and_then(|field| field.parse().ok()).expect("statm's second field");
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).expect("a positive page size")
}
