//! Scans of the hash memory engines under a concurrent writer keep the cursor contract
//! (`slotted.rs`): every record present for the whole scan comes exactly once, and no key
//! comes twice. The writer forces what used to break position-walking cursors: TinyDbm slot
//! tables rebuilt by inserts (growth, and same-size rebuilds that drop tombstones), and
//! CacheDbm slab entries freed and reused by other keys.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

use kura::{open, Dbm, DbmExt, OpenMode, Params};

/// Keys the writer never touches: each must come exactly once in every scan.
const STABLE: u32 = 2000;
/// Keys the writer removes and adds back, so that they change places.
const MOVING: u32 = 2000;
const ROUNDS: u32 = 60;
/// New keys the writer adds per round (and removes the round after).
const FRESH_PER_ROUND: u32 = 1000;
/// Scans done after the writer finished, so a fast writer still meets some scans.
const MIN_SCANS: u32 = 3;

fn stable_value(i: u32) -> Vec<u8> {
    format!("stable value {i}").into_bytes()
}

/// `shrink`: params of a `rebuild` that shrinks the tables at the end of each round, so that the
/// next round's inserts grow (and reshuffle) them again.
fn writer(dbm: &dyn Dbm, shrink: Option<&str>) {
    for round in 0..ROUNDS {
        for j in 0..FRESH_PER_ROUND {
            dbm.set(format!("f{round}:{j}").as_bytes(), b"fresh", true).unwrap();
        }
        if let Some(previous) = round.checked_sub(1) {
            for j in 0..FRESH_PER_ROUND {
                dbm.remove(format!("f{previous}:{j}").as_bytes()).unwrap();
            }
        }
        // Remove them all, then add them back in the same order: in CacheDbm each slot's free
        // list is last in, first out, so the keys come back in reverse slab order (each
        // moves); in TinyDbm they may land in other cells.
        for i in 0..MOVING {
            dbm.remove(format!("m{i}").as_bytes()).unwrap();
        }
        for i in 0..MOVING {
            dbm.set(format!("m{i}").as_bytes(), b"moved", true).unwrap();
        }
        if let Some(params) = shrink {
            dbm.rebuild(&Params::parse(params).unwrap()).unwrap();
        }
    }
}

/// One full scan: how many times each key came; checks the stable records' values.
fn scan(dbm: &dyn Dbm) -> HashMap<Vec<u8>, u32> {
    let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
    for record in dbm.records().unwrap() {
        let (key, value) = record.unwrap();
        if let Some(i) = key.strip_prefix(b"s") {
            let i: u32 = std::str::from_utf8(i).unwrap().parse().unwrap();
            assert_eq!(value, stable_value(i), "a torn or foreign value");
        }
        *seen.entry(key).or_default() += 1;
    }
    seen
}

fn check(seen: &HashMap<Vec<u8>, u32>, params: &str) {
    for (key, count) in seen {
        assert_eq!(*count, 1, "{params}: key {:?} yielded {count} times", String::from_utf8_lossy(key));
    }
    for i in 0..STABLE {
        let key = format!("s{i}").into_bytes();
        assert!(seen.contains_key(&key), "{params}: key s{i}, present throughout, was missed");
    }
}

fn scans_under_a_writer(params: &str, shrink: Option<&str>) {
    let dbm = open("", OpenMode::Create, &Params::parse(params).unwrap()).unwrap();
    let dbm: &dyn Dbm = dbm.as_ref();
    for i in 0..STABLE {
        dbm.set(format!("s{i}").as_bytes(), &stable_value(i), true).unwrap();
    }
    for i in 0..MOVING {
        dbm.set(format!("m{i}").as_bytes(), b"moving", true).unwrap();
    }
    let done = AtomicBool::new(false);
    let start = Barrier::new(2);
    let mut scans_during_writes = 0u32;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            start.wait();
            writer(dbm, shrink);
            done.store(true, Ordering::Release);
        });
        start.wait();
        while !done.load(Ordering::Acquire) {
            check(&scan(dbm), params);
            scans_during_writes += 1;
        }
    });
    for _ in 0..MIN_SCANS {
        check(&scan(dbm), params);
    }
    eprintln!("{params}: {scans_during_writes} scans during the writes");
    assert_eq!(dbm.count().unwrap(), u64::from(STABLE + MOVING + FRESH_PER_ROUND));
}

#[test]
fn tiny_scans_survive_slot_rebuilds() {
    // 8 cells per slot at first, and shrunk back after each round: the inserts rebuild every
    // slot's table again and again.
    scans_under_a_writer("engine=tiny,num_buckets=512", Some("num_buckets=512"));
}

#[test]
fn cache_scans_survive_reused_slab_entries() {
    // Caps large enough that nothing is evicted.
    scans_under_a_writer("engine=cache,cap_rec_num=100000,num_slots=4", None);
}

/// A scan that edits through its own cursor, with no other writer, sees every record once.
#[test]
fn a_scan_that_edits_through_its_cursor_sees_each_record_once() {
    for params in ["engine=tiny,num_buckets=64", "engine=cache,cap_rec_num=10000"] {
        let dbm = open("", OpenMode::Create, &Params::parse(params).unwrap()).unwrap();
        for i in 0..3000u32 {
            dbm.set(format!("k{i}").as_bytes(), b"v", true).unwrap();
        }
        let mut cursor = dbm.cursor().unwrap();
        let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut moved = cursor.first().unwrap();
        while moved {
            let key = cursor.key().unwrap().unwrap();
            *seen.entry(key.clone()).or_default() += 1;
            let i: u32 = std::str::from_utf8(&key[1..]).unwrap().parse().unwrap();
            if i.is_multiple_of(3) {
                cursor.remove().unwrap();
                moved = cursor.key().unwrap().is_some();
            } else {
                cursor.set(b"edited").unwrap();
                moved = cursor.next().unwrap();
            }
        }
        drop(cursor);
        assert_eq!(seen.len(), 3000, "{params}");
        assert!(seen.values().all(|&n| n == 1), "{params}");
        assert_eq!(dbm.count().unwrap(), 2000, "{params}");
        assert!(dbm.records().unwrap().all(|r| r.unwrap().1 == b"edited"), "{params}");
    }
}

/// Reading through a CacheDbm cursor peeks: it does not make the records recent, so the
/// oldest record is still the first evicted after a full scan.
#[test]
fn cache_scans_do_not_refresh_recency() {
    let dbm = open("", OpenMode::Create, &Params::parse("engine=cache,cap_rec_num=3,num_slots=1").unwrap()).unwrap();
    for key in ["a", "b", "c"] {
        dbm.set(key.as_bytes(), b"v", true).unwrap();
    }
    let mut cursor = dbm.cursor().unwrap();
    assert!(cursor.jump(b"a").unwrap());
    assert_eq!(cursor.record().unwrap().unwrap().0, b"a");
    drop(cursor);
    assert_eq!(dbm.records().unwrap().count(), 3);
    dbm.set(b"d", b"v", true).unwrap();
    assert!(dbm.get(b"a").unwrap_err().is_not_found(), "the scan refreshed the oldest record");
    assert_eq!(dbm.count().unwrap(), 3);
}
