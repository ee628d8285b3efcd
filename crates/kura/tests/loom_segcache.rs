//! SegCacheDbm's slots under loom (`make loom`, built with `RUSTFLAGS="--cfg loom"`): two
//! threads setting, reading and removing records in the same slots and in different ones,
//! with segments small enough that writes compact and evict segments, in every interleaving
//! up to the preemption bound. After each, every slot lists each of its keys once, within
//! the record cap; `count` agrees with the lists; every value read is one written for its
//! key; the memory cap holds.
#![cfg(loom)]
#![expect(clippy::unwrap_used, reason = "a model fails loudly on the first broken expectation")]

use loom::sync::Arc;

use kura::{Dbm, Params, SegCacheDbm};

const MEMORY: u64 = 2_048;

fn open(cap: u64, slots: usize) -> SegCacheDbm {
    let params = Params::new()
        .with("cap_rec_num", cap)
        .with("num_slots", slots)
        .with("cap_mem_bytes", MEMORY * slots as u64)
        .with("segment_bytes", 256);
    SegCacheDbm::new(&params).unwrap()
}

fn check_slots(db: &SegCacheDbm, cap: u64, written: &[(&[u8], &[&[u8]])]) {
    let mut listed = 0u64;
    for slot in 0..db.num_slots() {
        let keys = db.slot_keys_oldest_first(slot);
        let mut distinct = keys.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), keys.len(), "a key is twice in a slot");
        listed += keys.len() as u64;
    }
    assert!(listed <= cap, "{listed} records over the cap of {cap}");
    assert_eq!(db.count().unwrap(), listed, "count disagrees with the slots");
    assert!(db.mem_usage() <= MEMORY * db.num_slots() as u64);
    for (key, values) in written {
        if let Ok(value) = db.get(key) {
            assert!(values.contains(&value.as_slice()), "a value never written for its key");
        }
    }
}

/// Values long enough that a few fill a 256-byte segment, so the writes below compact.
const ONE: &[u8] = &[1; 90];
const TWO: &[u8] = &[2; 90];
const THREE: &[u8] = &[3; 90];
const FOUR: &[u8] = &[4; 90];

fn model(cap: u64, slots: usize) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(move || {
        let db = Arc::new(open(cap, slots));
        let first = {
            let db = Arc::clone(&db);
            loom::thread::spawn(move || {
                db.set(b"a", ONE, true).unwrap();
                db.set(b"b", TWO, true).unwrap();
                let _ = db.get(b"c");
            })
        };
        let second = {
            let db = Arc::clone(&db);
            loom::thread::spawn(move || {
                db.set(b"c", THREE, true).unwrap();
                let _ = db.remove(b"a");
                db.set(b"a", FOUR, true).unwrap();
            })
        };
        assert!(db.count().unwrap() <= cap);
        first.join().unwrap();
        second.join().unwrap();
        let written: &[(&[u8], &[&[u8]])] = &[(b"a", &[ONE, FOUR]), (b"b", &[TWO]), (b"c", &[THREE])];
        check_slots(&db, cap, written);
    });
}

#[test]
fn one_slot_evicting_keeps_its_index_and_segments_in_step() {
    model(2, 1);
}

#[test]
fn two_slots_keep_count_and_segments_in_step() {
    model(8, 2);
}
