//! The `memcached_session` fuzz target's committed corpus (`fuzz/corpus/memcached_session/`:
//! hand-written conversations, plus any input the fuzzer once found a bug with) through the
//! same `kura_server::fuzz::session` the target calls, on the stable toolchain, so that CI
//! checks them without nightly or libFuzzer (docs/fuzzing.md).

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::path::{Path, PathBuf};

#[test]
fn every_corpus_conversation_goes_through_the_server_without_a_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/memcached_session");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 5, "the seed corpus is missing");
    for file in files {
        let data = std::fs::read(&file).unwrap();
        let outcome = std::panic::catch_unwind(|| kura_server::fuzz::session(&data));
        assert!(outcome.is_ok(), "{} panics", file.display());
        // Every piece size: the request loop must not depend on where TCP cuts the bytes.
        for piece in [0u8, 1, 2, 5, 63] {
            let mut cut = data.clone();
            if let Some(first) = cut.first_mut() {
                *first = piece;
            }
            kura_server::fuzz::session(&cut);
        }
    }
}
