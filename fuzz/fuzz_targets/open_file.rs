//! Fuzz target: a database file of any engine from arbitrary bytes (`kura::fuzz::open_file`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kura::fuzz::open_file(data));
