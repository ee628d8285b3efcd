//! Model-based tests of TinyDbm and BabyDbm: random operation sequences, including cursor
//! edits and close/reopen through the snapshot file, checked against a BTreeMap; BabyDbm's
//! ordered cursor is also checked move by move against BTreeMap ranges.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use kura::{open, BabyDbm, Dbm, DbmExt, ErrorKind, OpenMode, Params};
use proptest::prelude::*;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Set(Vec<u8>, Vec<u8>, bool),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    Append(Vec<u8>, Vec<u8>),
    CursorSet(Vec<u8>, Vec<u8>),
    CursorRemove(Vec<u8>),
    Clear,
    Reopen,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => (0u8..24).prop_map(|k| vec![b'k', k]),
        2 => (0u8..4).prop_map(|k| vec![k; 30]), // large enough to spill to the heap
        1 => Just(Vec::new()),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 20..60)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), value(), any::<bool>()).prop_map(|(k, v, o)| Op::Set(k, v, o)),
        3 => key().prop_map(Op::Remove),
        3 => key().prop_map(Op::Get),
        2 => (key(), value()).prop_map(|(k, v)| Op::Append(k, v)),
        1 => (key(), value()).prop_map(|(k, v)| Op::CursorSet(k, v)),
        1 => key().prop_map(Op::CursorRemove),
        1 => Just(Op::Clear),
        1 => Just(Op::Reopen),
    ]
}

/// Runs `ops` on the engine at `path` and on a model, comparing every answer and the whole
/// content at the end and after each reopen.
fn run(path: &Path, ops: &[Op]) {
    let params = Params::new();
    let mut model = Model::new();
    let mut dbm = open(path, OpenMode::Truncate, &params).unwrap();
    for op in ops {
        match op {
            Op::Set(k, v, overwrite) => {
                let result = dbm.set(k, v, *overwrite);
                if model.contains_key(k) && !overwrite {
                    assert_eq!(result.unwrap_err().kind(), ErrorKind::Duplicate);
                } else {
                    result.unwrap();
                    model.insert(k.clone(), v.clone());
                }
            }
            Op::Remove(k) => match model.remove(k) {
                Some(_) => dbm.remove(k).unwrap(),
                None => assert_eq!(dbm.remove(k).unwrap_err().kind(), ErrorKind::NotFound),
            },
            Op::Get(k) => match model.get(k) {
                Some(v) => assert_eq!(&dbm.get(k).unwrap(), v),
                None => assert!(dbm.get(k).unwrap_err().is_not_found()),
            },
            Op::Append(k, v) => {
                dbm.append(k, v, b",").unwrap();
                let joined = match model.get(k) {
                    Some(old) => [old.as_slice(), b",", v.as_slice()].concat(),
                    None => v.clone(),
                };
                model.insert(k.clone(), joined);
            }
            Op::CursorSet(k, v) => {
                let mut cursor = dbm.cursor().unwrap();
                let found = cursor.jump(k).unwrap();
                // Hash engines land on the key itself; ordered ones on the first key >= it.
                let landed = cursor.key().unwrap();
                assert_eq!(found, landed.is_some());
                if let Some(landed) = landed {
                    cursor.set(v).unwrap();
                    model.insert(landed, v.clone());
                }
            }
            Op::CursorRemove(k) => {
                let mut cursor = dbm.cursor().unwrap();
                if cursor.jump(k).unwrap() {
                    let landed = cursor.key().unwrap().unwrap();
                    cursor.remove().unwrap();
                    model.remove(&landed);
                    // After a remove the cursor is on the next record, or on none.
                    if let Some(next) = cursor.key().unwrap() {
                        assert!(model.contains_key(&next));
                    }
                } else {
                    assert_eq!(cursor.remove().unwrap_err().kind(), ErrorKind::NotFound);
                }
            }
            Op::Clear => {
                dbm.clear().unwrap();
                model.clear();
            }
            Op::Reopen => {
                dbm.close().unwrap();
                assert_eq!(dbm.count().unwrap_err().kind(), ErrorKind::Infeasible);
                dbm = open(path, OpenMode::Write, &params).unwrap();
                assert_eq!(content(dbm.as_ref()), model);
            }
        }
        assert_eq!(dbm.count().unwrap(), model.len() as u64);
    }
    assert_eq!(content(dbm.as_ref()), model);
    dbm.close().unwrap();
    let reopened = open(path, OpenMode::ReadOnly, &params).unwrap();
    assert_eq!(content(reopened.as_ref()), model);
    assert_eq!(reopened.set(b"x", b"y", true).unwrap_err().kind(), ErrorKind::Infeasible);
}

/// All records through a cursor, checking that none comes twice.
fn content(dbm: &dyn Dbm) -> Model {
    let records: Vec<(Vec<u8>, Vec<u8>)> = dbm.records().unwrap().map(|r| r.unwrap()).collect();
    let map: Model = records.iter().cloned().collect();
    assert_eq!(map.len(), records.len(), "a cursor yields each record once");
    map
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn tiny_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        run(&dir.path().join("db.kumt"), &ops);
    }

    #[test]
    fn baby_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        run(&dir.path().join("db.kumb"), &ops);
    }

    #[test]
    fn baby_is_in_key_order(ops in proptest::collection::vec(op(), 1..80)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.kumb");
        run(&path, &ops);
        let dbm = open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
        let keys: Vec<Vec<u8>> = dbm.records().unwrap().map(|r| r.unwrap().0).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        prop_assert_eq!(keys, sorted);
    }

    #[test]
    fn baby_ordered_cursor_matches_ranges(
        keys in proptest::collection::btree_set(proptest::collection::vec(0u8..4, 0..4), 0..30),
        probes in proptest::collection::vec((proptest::collection::vec(0u8..4, 0..4), any::<bool>(), 0u8..6), 1..40),
    ) {
        let dbm = BabyDbm::new(&Params::new()).unwrap();
        let model: Model = keys.iter().map(|k| (k.clone(), k.repeat(2))).collect();
        for (k, v) in &model {
            dbm.set(k, v, true).unwrap();
        }
        let mut cursor = dbm.ordered_cursor().unwrap();
        let mut expected: Option<Vec<u8>> = None;
        for (probe, inclusive, action) in &probes {
            let (moved, want) = match action {
                0 => (cursor.jump_upper(probe, *inclusive).unwrap(), {
                    let lower = if *inclusive { Bound::Included(probe) } else { Bound::Excluded(probe) };
                    model.range::<Vec<u8>, _>((lower, Bound::Unbounded)).next().map(|(k, _)| k.clone())
                }),
                1 => (cursor.jump_lower(probe, *inclusive).unwrap(), {
                    let upper = if *inclusive { Bound::Included(probe) } else { Bound::Excluded(probe) };
                    model.range::<Vec<u8>, _>((Bound::Unbounded, upper)).next_back().map(|(k, _)| k.clone())
                }),
                2 => (cursor.next().unwrap(), expected.as_ref().and_then(|e| {
                    model.range::<Vec<u8>, _>((Bound::Excluded(e), Bound::Unbounded)).next().map(|(k, _)| k.clone())
                })),
                3 => (cursor.previous().unwrap(), expected.as_ref().and_then(|e| {
                    model.range::<Vec<u8>, _>((Bound::Unbounded, Bound::Excluded(e))).next_back().map(|(k, _)| k.clone())
                })),
                4 => (cursor.first().unwrap(), model.keys().next().cloned()),
                _ => (cursor.last().unwrap(), model.keys().next_back().cloned()),
            };
            prop_assert_eq!(moved, want.is_some());
            let record = cursor.record().unwrap();
            prop_assert_eq!(record.clone().map(|(k, _)| k), want.clone());
            if let Some((k, v)) = record {
                prop_assert_eq!(&v, &model[&k]);
            }
            expected = want;
        }
    }
}

#[test]
fn hash_engines_have_no_ordered_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let dbm = open(dir.path().join("a.kumt"), OpenMode::Create, &Params::new()).unwrap();
    assert_eq!(dbm.ordered_cursor().err().unwrap().kind(), ErrorKind::Infeasible);
    assert_eq!(dbm.inspect().unwrap().properties()[0], ("class".to_string(), "TinyDbm".to_string()));
    let unknown = open(dir.path().join("b.kumt"), OpenMode::Create, &Params::parse("bogus=1").unwrap());
    assert_eq!(unknown.err().unwrap().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn in_memory_without_a_path() {
    for engine in ["tiny", "baby", "cache"] {
        let params = Params::parse(&format!("engine={engine},cap_rec_num=100")).unwrap();
        let params = if engine == "cache" { params } else { Params::parse(&format!("engine={engine}")).unwrap() };
        let dbm = open("", OpenMode::Create, &params).unwrap();
        dbm.set(b"a", b"1", true).unwrap();
        assert_eq!(dbm.increment(b"n", 5, 10).unwrap(), 15);
        dbm.synchronize(true).unwrap();
        assert_eq!(dbm.count().unwrap(), 2);
        let inspected: std::collections::HashMap<String, String> =
            dbm.inspect().unwrap().properties().into_iter().collect();
        for name in ["class", "count", "file_size", "healthy"] {
            assert!(inspected.contains_key(name), "{engine} lacks {name}");
        }
        dbm.close().unwrap();
    }
}

#[test]
fn rebuild_keeps_content_and_checks_parameters() {
    for (engine, params, rebuild) in
        [("tiny", "", "num_buckets=16"), ("baby", "", ""), ("cache", ",cap_rec_num=1000", "")]
    {
        let dbm = open("", OpenMode::Create, &Params::parse(&format!("engine={engine}{params}")).unwrap()).unwrap();
        for i in 0..500u32 {
            dbm.set(&i.to_be_bytes(), &i.to_le_bytes(), true).unwrap();
        }
        let before = content(dbm.as_ref());
        dbm.rebuild(&Params::parse(rebuild).unwrap()).unwrap();
        assert!(!dbm.should_be_rebuilt().unwrap());
        assert_eq!(content(dbm.as_ref()), before, "{engine}");
        let bad = dbm.rebuild(&Params::parse("no_such=1").unwrap());
        assert_eq!(bad.unwrap_err().kind(), ErrorKind::InvalidArgument, "{engine}");
    }
}
