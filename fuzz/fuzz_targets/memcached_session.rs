//! Fuzz target: one client's whole conversation with `kura serve` from arbitrary bytes,
//! through the server's request loop (`kura_server::fuzz::session`).
#![no_main]

use kura_fuzz as _; // the allocation limit (fuzz/src/lib.rs)

libfuzzer_sys::fuzz_target!(|data: &[u8]| kura_server::fuzz::session(data));
