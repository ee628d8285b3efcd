//! Model-based test of HashDbm: random operation sequences, including rebuilds, codec
//! changes and close/reopen, checked step by step against a BTreeMap, for every codec and
//! both update modes.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;

use kura::{CodecKind, Dbm, DbmExt, ErrorKind, HashDbm, OpenMode, Params};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Set(u8, Vec<u8>),
    SetIfAbsent(u8, Vec<u8>),
    Remove(u8),
    Append(u8, Vec<u8>),
    Increment(u8, i8),
    CompareExchange(u8, bool, Option<Vec<u8>>),
    CursorRemoveFirst,
    CursorSetAll(Vec<u8>),
    Rebuild(usize, u8),
    Reopen,
    Clear,
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        // Compressible values, long enough for every codec to shrink them.
        (any::<u8>(), 1usize..600).prop_map(|(b, n)| (0..n).map(|i| b.wrapping_add((i % 7) as u8)).collect()),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (any::<u8>(), value()).prop_map(|(k, v)| Op::Set(k, v)),
        2 => (any::<u8>(), value()).prop_map(|(k, v)| Op::SetIfAbsent(k, v)),
        5 => any::<u8>().prop_map(Op::Remove),
        2 => (any::<u8>(), value()).prop_map(|(k, v)| Op::Append(k, v)),
        1 => (any::<u8>(), any::<i8>()).prop_map(|(k, d)| Op::Increment(k, d)),
        1 => (any::<u8>(), any::<bool>(), proptest::option::of(value())).prop_map(|(k, e, d)| Op::CompareExchange(k, e, d)),
        1 => Just(Op::CursorRemoveFirst),
        1 => value().prop_map(Op::CursorSetAll),
        // 0 buckets: the default, three records a bucket with pointers sized for the copy.
        1 => (0usize..7, 0u8..40).prop_map(|(c, b)| Op::Rebuild(c, b)),
        1 => Just(Op::Reopen),
        1 => Just(Op::Clear),
    ]
}

fn key(k: u8) -> Vec<u8> {
    // Few distinct keys so that operations meet; varied lengths.
    format!("key{}", k % 48).repeat(1 + (k as usize % 3)).into_bytes()
}

fn check_same(db: &HashDbm, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    assert_eq!(db.count().unwrap(), model.len() as u64);
    let mut seen: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for record in db.records().unwrap() {
        let (k, v) = record.unwrap();
        assert!(seen.insert(k, v).is_none(), "the cursor yielded a key twice");
    }
    assert_eq!(&seen, model);
    for (k, v) in model {
        assert_eq!(&db.get(k).unwrap(), v);
        let mut lent = None;
        db.get_with(k, &mut |value| lent = value.map(<[u8]>::to_vec)).unwrap();
        assert_eq!(lent.as_ref(), Some(v), "get_with");
    }
    let mut absent = Some(Vec::new());
    db.get_with(b"not in the model", &mut |value| absent = value.map(<[u8]>::to_vec)).unwrap();
    assert!(model.contains_key(&b"not in the model"[..]) || absent.is_none(), "get_with of an absent key");
}

fn run(codec: CodecKind, appending: bool, ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.kuh");
    let mode = if appending { "appending" } else { "in_place" };
    let params = Params::new().with("record_comp", codec.name()).with("num_buckets", 7).with("update_mode", mode);
    let mut db = HashDbm::open(&path, OpenMode::Truncate, &params).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Set(k, v) => {
                db.set(&key(k), &v, true).unwrap();
                model.insert(key(k), v);
            }
            Op::SetIfAbsent(k, v) => {
                let result = db.set(&key(k), &v, false);
                match model.entry(key(k)) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        assert_eq!(result.unwrap_err().kind(), ErrorKind::Duplicate);
                    }
                    std::collections::btree_map::Entry::Vacant(slot) => {
                        result.unwrap();
                        slot.insert(v);
                    }
                }
            }
            Op::Remove(k) => {
                let result = db.remove(&key(k));
                match model.remove(&key(k)) {
                    Some(_) => result.unwrap(),
                    None => assert_eq!(result.unwrap_err().kind(), ErrorKind::NotFound),
                }
            }
            Op::Append(k, v) => {
                db.append(&key(k), &v, b",").unwrap();
                match model.get_mut(&key(k)) {
                    Some(old) => {
                        old.extend_from_slice(b",");
                        old.extend_from_slice(&v);
                    }
                    None => {
                        model.insert(key(k), v);
                    }
                }
            }
            Op::Increment(k, d) => {
                let current = model.get(&key(k)).cloned();
                let result = db.increment(&key(k), i64::from(d), 100);
                match current {
                    None => {
                        assert_eq!(result.unwrap(), 100 + i64::from(d));
                        model.insert(key(k), (100 + i64::from(d)).to_be_bytes().to_vec());
                    }
                    Some(bytes) if bytes.len() == 8 => {
                        let next = i64::from_be_bytes(bytes.try_into().unwrap()).wrapping_add(i64::from(d));
                        assert_eq!(result.unwrap(), next);
                        model.insert(key(k), next.to_be_bytes().to_vec());
                    }
                    Some(_) => assert_eq!(result.unwrap_err().kind(), ErrorKind::InvalidArgument),
                }
            }
            Op::CompareExchange(k, expect_current, desired) => {
                let current = model.get(&key(k)).cloned();
                let expected = if expect_current { current.clone() } else { Some(b"no such value".to_vec()) };
                let result = db.compare_exchange(&key(k), expected.as_deref(), desired.as_deref());
                if expected == current {
                    result.unwrap();
                    match desired {
                        Some(v) => model.insert(key(k), v),
                        None => model.remove(&key(k)),
                    };
                } else {
                    assert_eq!(result.unwrap_err().kind(), ErrorKind::Infeasible);
                }
            }
            Op::CursorRemoveFirst => {
                let mut cursor = db.cursor().unwrap();
                if cursor.first().unwrap() {
                    let k = cursor.key().unwrap().unwrap();
                    cursor.remove().unwrap();
                    assert!(model.remove(&k).is_some());
                } else {
                    assert!(model.is_empty());
                }
            }
            Op::CursorSetAll(v) => {
                let mut cursor = db.cursor().unwrap();
                let mut moved = cursor.first().unwrap();
                while moved {
                    let k = cursor.key().unwrap().unwrap();
                    cursor.set(&v).unwrap();
                    model.insert(k, v.clone());
                    moved = cursor.next().unwrap();
                }
            }
            Op::Rebuild(codec, buckets) => {
                let codec = CodecKind::ALL[codec];
                let mut params = Params::new().with("record_comp", codec.name());
                if buckets > 0 {
                    params = params.with("num_buckets", buckets);
                }
                db.rebuild(&params).unwrap();
                assert_eq!(
                    db.inspect().unwrap().properties().iter().find(|(n, _)| n == "record_comp").unwrap().1,
                    codec.name()
                );
            }
            Op::Reopen => {
                db.close().unwrap();
                db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
            }
            Op::Clear => {
                db.clear().unwrap();
                model.clear();
            }
        }
        assert_eq!(db.count().unwrap(), model.len() as u64);
    }
    check_same(&db, &model);
    db.close().unwrap();
    let db = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    check_same(&db, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Every case runs the same operations on every codec.
    #[test]
    fn matches_model_in_place(ops in proptest::collection::vec(op(), 1..120)) {
        for codec in CodecKind::ALL {
            run(codec, false, ops.clone());
        }
    }

    #[test]
    fn matches_model_appending(ops in proptest::collection::vec(op(), 1..120)) {
        for codec in CodecKind::ALL {
            run(codec, true, ops.clone());
        }
    }
}

#[test]
fn every_codec_round_trips_many_records() {
    for codec in CodecKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("many.kuh");
        let params = Params::new().with("record_comp", codec.name()).with("num_buckets", 1000);
        let db = HashDbm::open(&path, OpenMode::Truncate, &params).unwrap();
        for i in 0..3000u32 {
            let v = format!("{{\"id\":{i},\"text\":\"value number {i} of the test\"}}").repeat(1 + i as usize % 4);
            db.set(format!("{i:08}").as_bytes(), v.as_bytes(), true).unwrap();
        }
        db.rebuild(&Params::new()).unwrap();
        db.close().unwrap();
        let db = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
        assert_eq!(db.count().unwrap(), 3000);
        for i in (0..3000u32).step_by(7) {
            let v = format!("{{\"id\":{i},\"text\":\"value number {i} of the test\"}}").repeat(1 + i as usize % 4);
            assert_eq!(db.get(format!("{i:08}").as_bytes()).unwrap(), v.as_bytes(), "{codec}");
        }
    }
}

fn property(db: &HashDbm, name: &str) -> u64 {
    let properties = db.inspect().unwrap().properties();
    properties.iter().find(|(n, _)| n == name).unwrap().1.parse().unwrap()
}

/// A rebuild without `num_buckets` packs three records a bucket, with chain pointers sized
/// for twice the copy (no spare byte); the file is smaller than one bucket a record gives.
/// Replacing every record with one 40 times larger then grows the file past what those
/// pointers reach, so that replaces take the slower way (link at the head, unlink the old
/// version), and every value, a reopen and `check` still agree with the model. The records
/// added past the packed ones count against the buckets as in a file never rebuilt, and a
/// clear forgets the packing.
#[test]
fn a_default_rebuild_packs_its_chains_and_outgrowing_their_pointers_loses_nothing() {
    const RECORDS: u32 = 9000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("packed.kuh");
    let db = HashDbm::open(&path, OpenMode::Truncate, &Params::new().with("num_buckets", 2 * RECORDS)).unwrap();
    let mut model = BTreeMap::new();
    let mut seed = 7u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..RECORDS {
        let (key, value) = (next().to_le_bytes().to_vec(), next().to_le_bytes().to_vec());
        db.set(&key, &value, true).unwrap();
        model.insert(key, value);
    }
    db.rebuild(&Params::new().with("num_buckets", RECORDS)).unwrap();
    let one_a_bucket = db.file_size().unwrap();
    db.rebuild(&Params::new()).unwrap();
    let packed = db.file_size().unwrap();
    assert_eq!(property(&db, "num_buckets"), u64::from(RECORDS / 3));
    assert_eq!(property(&db, "rebuilt_records"), u64::from(RECORDS));
    // 10 bytes of buckets fewer per three records; more chain pointers, a byte narrower.
    assert!(packed + u64::from(RECORDS) * 2 < one_a_bucket, "{packed} bytes packed, {one_a_bucket} one a bucket");
    assert!(!db.should_be_rebuilt().unwrap());
    check_same(&db, &model);

    // 9000 x ~330 bytes: past the 2 MiB that the copy's 3-byte pointers reach.
    for (i, value) in model.values_mut().enumerate() {
        value.resize(320 + i % 7, i as u8);
    }
    for (key, value) in &model {
        db.set(key, value, true).unwrap();
    }
    assert!(db.file_size().unwrap() > 2 << 20);
    check_same(&db, &model);
    assert_eq!(db.check().unwrap().problems, 0);
    db.close().unwrap();
    let db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
    check_same(&db, &model);

    // Twice the buckets in records beyond the rebuilt ones: time to rebuild again.
    for i in 0..2 * RECORDS / 3 {
        assert!(!db.should_be_rebuilt().unwrap(), "after {i} new records");
        db.set(format!("new {i}").as_bytes(), b"v", true).unwrap();
    }
    db.set(b"one more", b"v", true).unwrap();
    assert!(db.should_be_rebuilt().unwrap());

    // A clear leaves nothing packed: the header says so, also after a reopen.
    db.clear().unwrap();
    assert_eq!(property(&db, "rebuilt_records"), 0);
    db.close().unwrap();
    let db = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(property(&db, "rebuilt_records"), 0);
}

/// A record written while the file was small has a chain pointer that reaches 128 times
/// the file as it was then. Replacing its successor after the file grew past that puts the
/// new version at the head of the chain; when the successor ended the chain, the new
/// version's own pointer was one byte (next = 0) and could not hold the head, which failed
/// the replace with "chain pointer ... too narrow" before 2026-12-01. One bucket, so that
/// every record is in the one chain.
#[test]
fn replacing_a_record_past_its_predecessors_reach_keeps_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grown.kuh");
    let db = HashDbm::open(&path, OpenMode::Truncate, &Params::new().with("num_buckets", 1)).unwrap();
    let mut model = BTreeMap::new();
    // The tail, then its predecessor, whose pointer (3 bytes at a 1 KiB file) reaches 2 MiB.
    for key in [b"tail".to_vec(), b"before the tail".to_vec()] {
        db.set(&key, b"small", true).unwrap();
        model.insert(key, b"small".to_vec());
    }
    for i in 0..2200u32 {
        let (key, value) = (format!("filler {i}").into_bytes(), vec![i as u8; 1000]);
        db.set(&key, &value, true).unwrap();
        model.insert(key, value);
    }
    assert!(db.file_size().unwrap() > 2 << 20);
    let grown = vec![7u8; 100];
    db.set(b"tail", &grown, true).unwrap();
    model.insert(b"tail".to_vec(), grown);
    check_same(&db, &model);
    assert_eq!(db.check().unwrap().problems, 0);
    db.close().unwrap();
    let db = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    check_same(&db, &model);
}
