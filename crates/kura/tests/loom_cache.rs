//! CacheDbm's slots under loom (`make loom`, built with `RUSTFLAGS="--cfg loom"`): threads
//! setting, reading and removing records in the same slots and in different ones, in every
//! interleaving up to the preemption bound. After each, the slot's recency list holds
//! exactly the records the table holds, each once, within the record cap, and every value
//! is one that was written for its key; `count` agrees with the lists. A batched read
//! (`get_many`, which only try-locks its slots) runs beside a writer in one of them.
#![cfg(loom)]
#![expect(clippy::unwrap_used, reason = "a model fails loudly on the first broken expectation")]

use loom::sync::Arc;

use kura::{CacheDbm, Dbm};

/// Every slot's recency list against the table: same keys, each once, within the cap.
fn check_slots(db: &CacheDbm, cap: u64, written: &[(&[u8], &[&[u8]])]) {
    let mut listed = 0u64;
    for slot in 0..db.num_slots() {
        let keys = db.slot_keys_oldest_first(slot);
        let mut distinct = keys.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), keys.len(), "a key is twice in a recency list");
        listed += keys.len() as u64;
    }
    assert!(listed <= cap, "{listed} records listed over the cap of {cap}");
    assert_eq!(db.count().unwrap(), listed, "count disagrees with the recency lists");
    for (key, values) in written {
        if let Ok(value) = db.get(key) {
            assert!(values.contains(&value.as_slice()), "a value never written for its key");
        }
    }
}

fn model(cap: u64, slots: usize) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(move || {
        let db = Arc::new(CacheDbm::with_slots(cap, None, slots).unwrap());
        let first = {
            let db = Arc::clone(&db);
            loom::thread::spawn(move || {
                db.set(b"a", b"1", true).unwrap();
                db.set(b"b", b"2", true).unwrap();
                let _ = db.get(b"c");
            })
        };
        let second = {
            let db = Arc::clone(&db);
            loom::thread::spawn(move || {
                db.set(b"c", b"3", true).unwrap();
                let _ = db.remove(b"a");
                db.set(b"a", b"4", true).unwrap();
            })
        };
        let counted = db.count().unwrap();
        assert!(counted <= cap);
        first.join().unwrap();
        second.join().unwrap();
        let written: &[(&[u8], &[&[u8]])] = &[(b"a", &[b"1", b"4"]), (b"b", &[b"2"]), (b"c", &[b"3"])];
        check_slots(&db, cap, written);
    });
}

/// A batched read beside a writer: `get_many` only try-locks its slots and looks up the keys
/// of a slot held elsewhere one by one after its group (slot_group.rs), touching the recency
/// lists under both paths. Every value it gives must be one written for its key, and the
/// lists must stay in step with the tables.
fn batch_model(cap: u64, slots: usize) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(move || {
        let db = Arc::new(CacheDbm::with_slots(cap, None, slots).unwrap());
        db.set(b"a", b"1", true).unwrap();
        let written: &[(&[u8], &[&[u8]])] = &[(b"a", &[b"1"]), (b"b", &[b"2", b"4"]), (b"c", &[b"3"])];
        let reader = {
            let db = Arc::clone(&db);
            loom::thread::spawn(move || {
                let keys: [&[u8]; 4] = [b"a", b"b", b"c", b"a"];
                let values = db.get_many(&keys).unwrap();
                for (key, value) in keys.iter().zip(values) {
                    let (_, allowed) = written.iter().find(|(k, _)| k == key).unwrap();
                    if let Some(value) = value {
                        assert!(allowed.contains(&value.as_slice()), "get_many gave a value never written");
                    }
                }
            })
        };
        let writer = {
            let db = Arc::clone(&db);
            loom::thread::spawn(move || {
                db.set(b"b", b"2", true).unwrap();
                let _ = db.remove(b"a");
                db.set(b"c", b"3", true).unwrap();
                db.set(b"b", b"4", true).unwrap();
            })
        };
        reader.join().unwrap();
        writer.join().unwrap();
        check_slots(&db, cap, written);
    });
}

#[test]
fn a_batch_beside_a_writer_gives_written_values_and_keeps_the_lists_in_step() {
    batch_model(8, 2);
}

#[test]
fn one_slot_evicting_keeps_its_list_and_table_in_step() {
    model(2, 1);
}

#[test]
fn two_slots_keep_count_and_lists_in_step() {
    model(8, 2);
}
