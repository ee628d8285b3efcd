//! Fuzz target: a write-ahead journal from arbitrary bytes, replayed over a TreeDbm or
//! HashDbm file (`kura::fuzz::journal_replay`).
#![no_main]

use kura_fuzz as _; // the allocation limit (fuzz/src/lib.rs)

libfuzzer_sys::fuzz_target!(|data: &[u8]| kura::fuzz::journal_replay(data));
