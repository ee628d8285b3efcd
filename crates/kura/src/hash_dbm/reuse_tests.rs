//! Tests that in-place HashDbm reuses the space of replaced records, now that a freed record
//! is held until the next hard synchronization (freed.rs): overwriting the same keys again
//! and again must not grow the file without bound, with or without synchronizations.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use super::HashDbm;
use crate::dbm::{Dbm, Params};
use crate::split_mix::SplitMix64;

const KEYS: u64 = 200;

/// Overwrites every key `rounds` times with values of 500 to 1,500 bytes, calling
/// `between` after each round; returns the file size after each round.
fn overwrite_rounds(db: &HashDbm, rounds: usize, mut between: impl FnMut(&HashDbm)) -> Vec<u64> {
    let mut rng = SplitMix64::new(5);
    let mut sizes = Vec::new();
    for _ in 0..rounds {
        for key in 0..KEYS {
            let len = 500 + rng.below(1000) as usize;
            db.set(format!("key{key}").as_bytes(), &vec![b'x'; len], true).unwrap();
        }
        between(db);
        sizes.push(db.file_size().unwrap());
    }
    sizes
}

#[test]
fn overwrites_with_checkpoints_reuse_space() {
    let dir = tempfile::tempdir().unwrap();
    let db = HashDbm::create(dir.path().join("reuse.kuh"), &Params::new().with("num_buckets", 64)).unwrap();
    let sizes = overwrite_rounds(&db, 100, |db| db.checkpoint().unwrap());
    // About 200 KB are live; each round frees as much, reused after the next sync (the file
    // holds about two rounds). Before free blocks were merged it grew by some 15 KB a round
    // and kept growing (3 MB after 400 rounds).
    let (early, last) = (sizes[9], sizes[99]);
    assert!(last <= early + early / 10, "the file grew from {early} to {last} bytes: {sizes:?}");
    assert!(last < 500_000, "{last} bytes for 200 KB of records: {sizes:?}");
}

#[test]
fn overwrites_without_synchronizations_stay_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let db = HashDbm::create(dir.path().join("reuse.kuh"), &Params::new().with("num_buckets", 64)).unwrap();
    // 400 rounds free about 80 MB: past the point where a writer synchronizes by itself.
    let sizes = overwrite_rounds(&db, 400, |_| {});
    let last = *sizes.last().unwrap();
    assert!(last < 48 << 20, "{last} bytes for 200 KB of records: the held space was never reused");
}
