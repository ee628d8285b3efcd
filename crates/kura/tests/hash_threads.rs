//! Many threads on one HashDbm: mixed writers and readers on overlapping keys, with rebuilds
//! and synchronizations in between. Each writer owns a residue class of a shared key range
//! and records what it did last, so the final state is checked key by key; readers check
//! that every value they see is one some writer wrote for that key.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kura::{Dbm, DbmExt, HashDbm, OpenMode, Params};

const WRITERS: u64 = 3;
const KEYS: u64 = 600;
const ROUNDS: u64 = 4000;

fn value(writer: u64, key: u64, version: u64) -> Vec<u8> {
    format!("w{writer}:k{key}:v{version}:").repeat(1 + (version % 4) as usize).into_bytes()
}

fn check_value(key: u64, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).unwrap();
    let first = text.split(':').collect::<Vec<_>>();
    assert_eq!(first[1], format!("k{key}"), "a value of another key: {text}");
    let writer: u64 = first[0][1..].parse().unwrap();
    let version: u64 = first[2][1..].parse().unwrap();
    assert_eq!(bytes, value(writer, key, version), "a torn value");
}

#[test]
fn concurrent_writers_and_readers_stay_consistent() {
    for codec in ["none", "lz4", "zstd"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.kuh");
        let params = Params::new().with("record_comp", codec).with("num_buckets", 101);
        let db = Arc::new(HashDbm::open(&path, OpenMode::Truncate, &params).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let key = (reads * 7919 + r) % KEYS;
                        match db.get(format!("key{key}").as_bytes()) {
                            Ok(v) => check_value(key, &v),
                            Err(e) => assert!(e.is_not_found(), "{e}"),
                        }
                        if reads.is_multiple_of(500) {
                            for record in db.records().unwrap() {
                                let (k, v) = record.unwrap();
                                check_value(std::str::from_utf8(&k[3..]).unwrap().parse().unwrap(), &v);
                            }
                        }
                        reads += 1;
                    }
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let db = Arc::clone(&db);
                std::thread::spawn(move || {
                    let mut last: BTreeMap<u64, Option<Vec<u8>>> = BTreeMap::new();
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (w + 1);
                    for version in 0..ROUNDS {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let key = (rng % (KEYS / WRITERS)) * WRITERS + w;
                        let name = format!("key{key}");
                        if rng.is_multiple_of(5) {
                            let _ = db.remove(name.as_bytes());
                            last.insert(key, None);
                        } else if rng.is_multiple_of(11) {
                            let v = value(w, key, version);
                            db.process(name.as_bytes(), &mut |_| kura::Action::Set(v.as_slice().into())).unwrap();
                            last.insert(key, Some(v));
                        } else {
                            let v = value(w, key, version);
                            db.set(name.as_bytes(), &v, true).unwrap();
                            last.insert(key, Some(v));
                        }
                        if w == 0 && version % 1000 == 999 {
                            db.rebuild(&Params::new().with("num_buckets", 50 + version / 10)).unwrap();
                        }
                        if w == 1 && version % 700 == 0 {
                            db.synchronize(false).unwrap();
                        }
                    }
                    last
                })
            })
            .collect();
        let mut expected = BTreeMap::new();
        for writer in writers {
            for (key, v) in writer.join().unwrap() {
                if let Some(v) = v {
                    expected.insert(format!("key{key}").into_bytes(), v);
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().unwrap();
        }
        let actual: BTreeMap<Vec<u8>, Vec<u8>> = db.records().unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(actual, expected, "{codec}");
        assert_eq!(db.count().unwrap(), expected.len() as u64);
        db.close().unwrap();
    }
}

/// A cursor skips empty buckets without their locks (`Storage::first_occupied_bucket`): in a
/// sparse file (a million buckets, a few hundred records) with writers linking and emptying
/// chains all the while, every walk still meets each record that stayed put the whole time,
/// once, with its value.
#[test]
fn a_walk_meets_every_record_that_stayed_put_while_writers_churn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.kuh");
    let params = Params::new().with("num_buckets", 1 << 20);
    let db = Arc::new(HashDbm::open(&path, OpenMode::Truncate, &params).unwrap());
    let stable: BTreeMap<Vec<u8>, Vec<u8>> =
        (0..300u64).map(|i| (format!("stable{i}").into_bytes(), format!("value{i}").into_bytes())).collect();
    for (key, value) in &stable {
        db.set(key, value, true).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("churn{w}-{}", i % 500);
                    if i % 3 == 2 {
                        let _ = db.remove(key.as_bytes());
                    } else {
                        db.set(key.as_bytes(), b"churning", true).unwrap();
                    }
                    i += 1;
                }
            })
        })
        .collect();
    for walk in 0..20 {
        let mut seen = BTreeMap::new();
        for record in db.records().unwrap() {
            let (key, value) = record.unwrap();
            if key.starts_with(b"stable") {
                assert!(seen.insert(key, value).is_none(), "walk {walk}: a record met twice");
            } else {
                assert_eq!(value, b"churning", "walk {walk}: a value never written");
            }
        }
        assert_eq!(seen, stable, "walk {walk}: the records that stayed put");
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
}

/// Walks while rebuilds shrink and grow the bucket array: a cursor that chose a bucket among
/// more buckets than a rebuild then left must end its walk (the module comment allows missed
/// records), never report the index as damaged data.
#[test]
fn a_walk_across_rebuilds_that_shrink_the_buckets_reports_no_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shrinking.kuh");
    let db = Arc::new(HashDbm::open(&path, OpenMode::Truncate, &Params::new().with("num_buckets", 1 << 16)).unwrap());
    for i in 0..300u64 {
        db.set(format!("key{i}").as_bytes(), b"value", true).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let rebuilder = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut rebuilds = 0u64;
            while !stop.load(Ordering::Relaxed) || rebuilds < 10 {
                let buckets = if rebuilds.is_multiple_of(2) { 1024 } else { 1 << 16 };
                db.rebuild(&Params::new().with("num_buckets", buckets)).unwrap();
                rebuilds += 1;
            }
            rebuilds
        })
    };
    for walk in 0..30 {
        for record in db.records().unwrap() {
            let (_, value) = record.unwrap_or_else(|e| panic!("walk {walk}: {e}"));
            assert_eq!(value, b"value");
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(rebuilder.join().unwrap() >= 10);
}
