//! Model-based tests of TreeDbm under runs of updates in key order, forwards and backwards
//! (the pattern for which an update may skip the descent from the root, see tree/finger.rs),
//! mixed with single updates, batches, commits and reopens, on small pages so that leaves and
//! branches split and merge all the time. Reads after commits also go through the branch
//! pages pinned for readers (tree/pins.rs), whose slots get reused by later commits.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::collections::BTreeMap;

use kura::{Dbm, OpenMode, Params};
use kura::{TreeDbm, WriteBatch};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// `len` updates of keys `start, start ± 1, ...`: sets (with a value length) or removes.
    Run {
        start: u16,
        len: u16,
        down: bool,
        set: Option<usize>,
    },
    Set(u16, usize),
    Remove(u16),
    Batch(Vec<(u16, bool)>),
    Commit,
    Reopen,
}

fn key(k: u16) -> Vec<u8> {
    // Keys longer than 8 bytes share their first 8 bytes in runs: the full comparison path.
    if k.is_multiple_of(3) {
        format!("{k:05}").into_bytes()
    } else {
        format!("shared-prefix-{k:05}").into_bytes()
    }
}

fn value(k: u16, len: usize) -> Vec<u8> {
    (0..len).map(|i| (k as usize * 13 + i) as u8).collect()
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u16..1500;
    prop_oneof![
        6 => (k.clone(), 1u16..400, any::<bool>(), proptest::option::of(0usize..60))
            .prop_map(|(start, len, down, set)| Op::Run { start, len, down, set }),
        4 => (k.clone(), 0usize..60).prop_map(|(k, l)| Op::Set(k, l)),
        3 => k.clone().prop_map(Op::Remove),
        1 => proptest::collection::vec((k, any::<bool>()), 0..80).prop_map(Op::Batch),
        2 => Just(Op::Commit),
        1 => Just(Op::Reopen),
    ]
}

fn params() -> Params {
    Params::new().with("max_page_size", 512).with("max_dirty_pages", 16)
}

fn check(db: &TreeDbm, model: &BTreeMap<Vec<u8>, Vec<u8>>, probes: &[u16]) {
    assert_eq!(db.count().unwrap(), model.len() as u64);
    for &k in probes {
        let got = db.get(&key(k)).ok();
        assert_eq!(got.as_ref(), model.get(&key(k)), "key {k}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn runs_match_a_btreemap(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.kut");
        let mut db = TreeDbm::open(&path, OpenMode::Create, &params()).unwrap();
        let mut model = BTreeMap::new();
        for op in ops {
            let mut probes = Vec::new();
            match op {
                Op::Run { start, len, down, set } => {
                    for step in 0..len {
                        let k = if down { start.checked_sub(step) } else { start.checked_add(step) };
                        let Some(k) = k else { break };
                        match set {
                            Some(l) => {
                                db.set(&key(k), &value(k, l), true).unwrap();
                                model.insert(key(k), value(k, l));
                            }
                            None => {
                                let _ = db.remove(&key(k));
                                model.remove(&key(k));
                            }
                        }
                        probes.push(k);
                        // Reads between the updates of a run, on both sides of it.
                        if step.is_multiple_of(17) {
                            probes.push(k.saturating_add(1));
                            probes.push(k.saturating_sub(1));
                            check(&db, &model, &probes);
                        }
                    }
                }
                Op::Set(k, l) => {
                    db.set(&key(k), &value(k, l), true).unwrap();
                    model.insert(key(k), value(k, l));
                    probes.push(k);
                }
                Op::Remove(k) => {
                    let _ = db.remove(&key(k));
                    model.remove(&key(k));
                    probes.push(k);
                }
                Op::Batch(ops) => {
                    let mut batch = WriteBatch::new();
                    for (k, set) in ops {
                        if set {
                            batch.set(key(k), value(k, 5));
                            model.insert(key(k), value(k, 5));
                        } else {
                            batch.remove(key(k));
                            model.remove(&key(k));
                        }
                        probes.push(k);
                    }
                    db.write_batch(&batch).unwrap();
                }
                Op::Commit => db.commit().unwrap(),
                Op::Reopen => {
                    db.close().unwrap();
                    db = TreeDbm::open(&path, OpenMode::Create, &params()).unwrap();
                }
            }
            check(&db, &model, &probes);
        }
        let all: Vec<_> = db.range(..).map(|r| r.unwrap()).collect();
        let expected: Vec<_> = model.into_iter().collect();
        prop_assert_eq!(all, expected);
    }
}
