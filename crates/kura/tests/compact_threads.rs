//! CompactDbm under threads: increments from several threads sum exactly (no lost update
//! when two threads re-encode one bucket), and readers running beside writers and batches
//! only ever see values that were written for the key they asked.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::sync::atomic::{AtomicBool, Ordering};

use kura::split_mix::SplitMix64;
use kura::{CompactDbm, Dbm, DbmExt, Params, WriteBatch};

const THREADS: u64 = 4;

#[test]
fn increments_from_several_threads_sum_exactly() {
    for codec in ["none", "lz4", "zstd"] {
        // Few buckets, so that threads meet in the same buckets all the time.
        let dbm = CompactDbm::new(&Params::parse(&format!("bucket_comp={codec},num_buckets=256")).unwrap()).unwrap();
        let per_thread = 3000u64;
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let dbm = &dbm;
                scope.spawn(move || {
                    let mut rng = SplitMix64::new(t);
                    for i in 0..per_thread {
                        let key = format!("counter{}", rng.below(50));
                        dbm.increment(key.as_bytes(), 1, 0).unwrap();
                        dbm.increment(b"total", 2, 0).unwrap();
                        if i % 100 == 0 {
                            dbm.set(format!("filler{t}-{i}").as_bytes(), &[b'x'; 64], true).unwrap();
                        }
                    }
                });
            }
        });
        let total = dbm.increment(b"total", 0, 0).unwrap();
        assert_eq!(total as u64, 2 * THREADS * per_thread, "{codec}");
        let counters: i64 = (0..50).map(|i| dbm.increment(format!("counter{i}").as_bytes(), 0, 0).unwrap()).sum();
        assert_eq!(counters as u64, THREADS * per_thread, "{codec}");
    }
}

/// A value written for `key`: the key, then a version, so a reader can tell it belongs there.
fn value_for(key: &[u8], version: u64) -> Vec<u8> {
    let mut value = key.to_vec();
    value.extend_from_slice(format!("#{version:020}").as_bytes());
    value
}

#[test]
fn readers_beside_writers_and_batches_only_see_values_written_for_their_key() {
    let dbm = CompactDbm::new(&Params::parse("bucket_comp=lz4,num_buckets=512,cache_bytes=65536").unwrap()).unwrap();
    for i in 0..2000u64 {
        let key = format!("k{i}");
        dbm.set(key.as_bytes(), &value_for(key.as_bytes(), 0), true).unwrap();
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for t in 0..2u64 {
            let (dbm, done) = (&dbm, &done);
            scope.spawn(move || {
                let mut rng = SplitMix64::new(100 + t);
                for round in 1..=300u64 {
                    if t == 0 {
                        let mut batch = WriteBatch::new();
                        for _ in 0..20 {
                            let key = format!("k{}", rng.below(2000));
                            batch.set(&key, value_for(key.as_bytes(), round));
                        }
                        dbm.write_batch(&batch).unwrap();
                    } else {
                        for _ in 0..20 {
                            let key = format!("k{}", rng.below(2000));
                            dbm.set(key.as_bytes(), &value_for(key.as_bytes(), round), true).unwrap();
                        }
                    }
                }
                done.store(true, Ordering::Release);
            });
        }
        for t in 0..2u64 {
            let (dbm, done) = (&dbm, &done);
            scope.spawn(move || {
                let mut rng = SplitMix64::new(200 + t);
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < 1000 {
                    // A skewed key choice, so the decoded-bucket cache is used too.
                    let range = if rng.below(2) == 0 { 20 } else { 2000 };
                    let key = format!("k{}", rng.below(range));
                    let value = dbm.get(key.as_bytes()).unwrap();
                    assert!(value.starts_with(key.as_bytes()) && value.get(key.len()) == Some(&b'#'));
                    reads += 1;
                    if reads.is_multiple_of(500) {
                        let mut seen = 0;
                        for record in dbm.records().unwrap() {
                            let (k, v) = record.unwrap();
                            assert!(v.starts_with(&k));
                            seen += 1;
                        }
                        assert_eq!(seen, 2000, "a scan yields every record once");
                    }
                }
            });
        }
    });
    assert_eq!(dbm.count().unwrap(), 2000);
}
