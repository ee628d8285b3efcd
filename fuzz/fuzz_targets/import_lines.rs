//! Fuzz target: TSV and JSON-lines import through the parallel pipeline, checked against a
//! line-by-line model (`kura::fuzz::import_lines`).
#![no_main]

use kura_fuzz as _; // the allocation limit (fuzz/src/lib.rs)

libfuzzer_sys::fuzz_target!(|data: &[u8]| kura::fuzz::import_lines(data));
