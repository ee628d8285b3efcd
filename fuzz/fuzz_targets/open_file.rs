//! Fuzz target: a database file of any engine from arbitrary bytes (`kura::fuzz::open_file`).
#![no_main]

use kura_fuzz as _; // the allocation limit (fuzz/src/lib.rs)

libfuzzer_sys::fuzz_target!(|data: &[u8]| kura::fuzz::open_file(data));
