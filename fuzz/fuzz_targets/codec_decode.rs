//! Fuzz target: every codec's decoder on arbitrary frames (`kura::fuzz::codec_decode`).
#![no_main]

use kura_fuzz as _; // the allocation limit (fuzz/src/lib.rs)

libfuzzer_sys::fuzz_target!(|data: &[u8]| kura::fuzz::codec_decode(data));
