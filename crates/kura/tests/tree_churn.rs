//! Free pages are reused: a long run of mixed inserts and removes keeps the file within a
//! stated factor of its rebuilt size, and rebuild brings it back down.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use kura::TreeDbm;
use kura::{Dbm, OpenMode, Params};

/// Stated bound: during churn the file stays under this many times its size after rebuild.
const CHURN_FACTOR: u64 = 4;

/// Mixed operations per configuration: millions in all, as the Tkrzw report of a growing tree
/// file described, in a release build (`cargo test --release --test tree_churn`). The debug
/// build of `make test` runs 400,000 per configuration, 20 times the live keys over: the file
/// reaches its steady size within the first few passes. The two configurations are two
/// tests, so that they share the test threads (one test of 800,000 took 45 s of `make test`).
const OPERATIONS: u64 = if cfg!(debug_assertions) { 400_000 } else { 1_000_000 };

/// One step of the churn on `live_keys` keys: a pseudo-random key is removed one time in
/// four, else set to a value of 0-199 bytes.
fn churn_step(db: &TreeDbm, x: &mut u64, live_keys: u64) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    let key = format!("{:010}", *x % live_keys);
    if *x >> 62 == 0 {
        let _ = db.remove(key.as_bytes());
    } else {
        let len = (*x >> 40) as usize % 200;
        db.set(key.as_bytes(), &vec![b'v'; len], true).unwrap();
    }
}

#[test]
fn churn_of_small_compressed_pages_keeps_the_file_bounded() {
    let params = Params::new().with("max_page_size", 2048).with("max_dirty_pages", 256).with("record_comp", "lz4");
    churn_keeps_file_bounded(&params, 0x2545_f491_4f6c_dd1d);
}

#[test]
fn churn_of_default_pages_keeps_the_file_bounded() {
    churn_keeps_file_bounded(&Params::new().with("max_dirty_pages", 64), 0x9e37_79b9_7f4a_7c15);
}

/// Churns a tree opened with `params` for `OPERATIONS` steps from `seed`, reopening it
/// halfway, and checks that the file never grows past `CHURN_FACTOR` times its rebuilt size.
fn churn_keeps_file_bounded(params: &Params, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("churn.kut");
    let mut db = TreeDbm::open(&path, OpenMode::Create, params).unwrap();
    let mut x = seed;
    let live_keys = 20_000u64;
    let mut peak = 0;
    for step in 0..OPERATIONS {
        churn_step(&db, &mut x, live_keys);
        if step % 1000 == 0 {
            peak = peak.max(db.file_size().unwrap());
        }
        if step == OPERATIONS / 2 {
            // Reopening loses nothing of the free space (saved at close).
            db.close().unwrap();
            drop(db);
            db = TreeDbm::open(&path, OpenMode::Write, params).unwrap();
        }
    }
    db.synchronize(false).unwrap();
    peak = peak.max(db.file_size().unwrap());
    let count = db.count().unwrap();
    db.rebuild(&Params::new()).unwrap();
    let rebuilt = db.file_size().unwrap();
    assert_eq!(db.count().unwrap(), count);
    println!("churn: peak {peak} bytes, rebuilt {rebuilt} bytes, factor {:.2}", peak as f64 / rebuilt as f64);
    assert!(peak <= rebuilt * CHURN_FACTOR, "peak {peak} vs rebuilt {rebuilt}");
    // Churn after a rebuild stays bounded too.
    let before = db.file_size().unwrap();
    for i in 0..50_000u64 {
        let key = format!("{:010}", (i * 7919) % live_keys);
        if i % 3 == 0 {
            let _ = db.remove(key.as_bytes());
        } else {
            db.set(key.as_bytes(), &vec![b'w'; (i % 150) as usize], true).unwrap();
        }
    }
    db.synchronize(false).unwrap();
    assert!(db.file_size().unwrap() <= before * CHURN_FACTOR);
}
