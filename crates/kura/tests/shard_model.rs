//! Model-based tests of ShardDbm: random operation sequences on sets of HashDbm, TreeDbm and
//! BabyDbm shards checked against a BTreeMap, with close/reopen by path alone (the shard count
//! found from the directory), rebuilds, clears, batches, and the merged ordered cursor walked
//! in both directions, turned around midway, and jumped beside keys.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "test data is indexed by construction")]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use kura::{Dbm, DbmExt, OpenMode, Params, WriteBatch};
use proptest::prelude::*;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Set(u16, u8),
    Remove(u16),
    Append(u16, u8),
    Increment(u16, i8),
    Batch(Vec<(u16, Option<u8>)>),
    Walk { from: u16, forward: bool, inclusive: bool, steps: u8, turn: bool },
    CursorRemove(u16),
    Reopen,
    Rebuild,
    Clear,
}

fn key(k: u16) -> Vec<u8> {
    format!("key{k:04}").into_bytes()
}

fn value(k: u16, seed: u8) -> Vec<u8> {
    format!("value-{k}-{seed}-").repeat(usize::from(seed % 5)).into_bytes()
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u16..300;
    prop_oneof![
        30 => (k.clone(), any::<u8>()).prop_map(|(k, s)| Op::Set(k, s)),
        10 => k.clone().prop_map(Op::Remove),
        3 => (k.clone(), any::<u8>()).prop_map(|(k, s)| Op::Append(k, s)),
        2 => (k.clone(), any::<i8>()).prop_map(|(k, d)| Op::Increment(k, d)),
        4 => proptest::collection::vec((k.clone(), proptest::option::of(any::<u8>())), 0..40).prop_map(Op::Batch),
        6 => (k.clone(), any::<bool>(), any::<bool>(), 0u8..30, any::<bool>())
            .prop_map(|(from, forward, inclusive, steps, turn)| Op::Walk { from, forward, inclusive, steps, turn }),
        2 => k.clone().prop_map(Op::CursorRemove),
        2 => Just(Op::Reopen),
        1 => Just(Op::Rebuild),
        1 => Just(Op::Clear),
    ]
}

/// The keys the model visits from a jump_upper/jump_lower at `from`, in walking order.
fn expected_walk(model: &Model, from: &[u8], forward: bool, inclusive: bool) -> Vec<Vec<u8>> {
    let bound = if inclusive { Bound::Included(from.to_vec()) } else { Bound::Excluded(from.to_vec()) };
    if forward {
        model.range((bound, Bound::Unbounded)).map(|(k, _)| k.clone()).collect()
    } else {
        model.range((Bound::Unbounded, bound)).rev().map(|(k, _)| k.clone()).collect()
    }
}

fn check_walk(db: &dyn Dbm, model: &Model, from: &[u8], forward: bool, inclusive: bool, steps: u8, turn: bool) {
    let mut cursor = db.ordered_cursor().unwrap();
    let expected = expected_walk(model, from, forward, inclusive);
    let mut moved =
        if forward { cursor.jump_upper(from, inclusive).unwrap() } else { cursor.jump_lower(from, inclusive).unwrap() };
    let mut seen = Vec::new();
    while moved && seen.len() <= usize::from(steps) {
        let (k, v) = cursor.record().unwrap().unwrap();
        assert_eq!(Some(&v), model.get(&k));
        seen.push(k);
        moved = if forward { cursor.next().unwrap() } else { cursor.previous().unwrap() };
    }
    let taken = seen.len();
    assert_eq!(seen, expected[..taken].to_vec(), "walk from {from:?} forward={forward}");
    if turn && moved && taken > 0 {
        // The cursor stands at expected[taken]; turning around goes back to expected[taken - 1].
        let back = if forward { cursor.previous().unwrap() } else { cursor.next().unwrap() };
        assert!(back);
        assert_eq!(cursor.key().unwrap(), Some(expected[taken - 1].clone()));
    }
}

fn check_all(db: &dyn Dbm, model: &Model, ordered: bool) {
    assert_eq!(db.count().unwrap(), model.len() as u64);
    let mut all: Vec<(Vec<u8>, Vec<u8>)> = db.records().unwrap().map(|r| r.unwrap()).collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if ordered {
        assert_eq!(all, expected, "the merged cursor visits keys in order");
        let mut cursor = db.ordered_cursor().unwrap();
        let mut backward = Vec::new();
        let mut moved = cursor.last().unwrap();
        while moved {
            backward.push(cursor.record().unwrap().unwrap());
            moved = cursor.previous().unwrap();
        }
        backward.reverse();
        assert_eq!(backward, expected, "and backwards in reverse order");
    } else {
        all.sort();
        assert_eq!(all, expected);
    }
    for (k, v) in model.iter().take(20) {
        assert_eq!(&db.get(k).unwrap(), v);
    }
}

fn open(base: &Path, mode: OpenMode, params: &Params) -> Box<dyn Dbm> {
    kura::open(base, mode, params).unwrap()
}

fn run(ops: &[Op], base_name: &str, create_params: &Params, num_shards: usize, ordered: bool) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join(base_name);
    let mut db = open(&base, OpenMode::Create, &create_params.clone().with("num_shards", num_shards));
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Set(k, s) => {
                db.set(&key(*k), &value(*k, *s), true).unwrap();
                model.insert(key(*k), value(*k, *s));
            }
            Op::Remove(k) => {
                assert_eq!(db.remove(&key(*k)).is_ok(), model.remove(&key(*k)).is_some());
            }
            Op::Append(k, s) => {
                db.append(&key(*k), &value(*k, *s), b",").unwrap();
                let entry = model.entry(key(*k));
                match entry {
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(value(*k, *s));
                    }
                    std::collections::btree_map::Entry::Occupied(mut o) => {
                        o.get_mut().extend_from_slice(b",");
                        o.get_mut().extend_from_slice(&value(*k, *s));
                    }
                }
            }
            Op::Increment(k, d) => {
                let counter = [b"n".as_slice(), &key(*k)].concat();
                let old = model.get(&counter).map_or(5, |v| i64::from_be_bytes(v.as_slice().try_into().unwrap()));
                let new = db.increment(&counter, i64::from(*d), 5).unwrap();
                assert_eq!(new, old + i64::from(*d));
                model.insert(counter, new.to_be_bytes().to_vec());
            }
            Op::Batch(items) => {
                let mut batch = WriteBatch::new();
                for (k, s) in items {
                    match s {
                        Some(s) => {
                            batch.set(key(*k), value(*k, *s));
                            model.insert(key(*k), value(*k, *s));
                        }
                        None => {
                            batch.remove(key(*k));
                            model.remove(&key(*k));
                        }
                    }
                }
                db.write_batch(&batch).unwrap();
            }
            Op::Walk { from, forward, inclusive, steps, turn } => {
                if ordered {
                    check_walk(db.as_ref(), &model, &key(*from), *forward, *inclusive, *steps, *turn);
                } else {
                    let mut cursor = db.cursor().unwrap();
                    assert_eq!(cursor.jump(&key(*from)).unwrap(), model.contains_key(&key(*from)));
                }
            }
            Op::CursorRemove(k) => {
                let mut cursor = db.cursor().unwrap();
                if cursor.jump(&key(*k)).unwrap() {
                    let at = cursor.key().unwrap().unwrap();
                    cursor.remove().unwrap();
                    model.remove(&at);
                    if ordered {
                        // Removing moves to the next key in the whole set's order.
                        let next = model.range(at..).next().map(|(k, _)| k.clone());
                        assert_eq!(cursor.key().unwrap(), next);
                    }
                }
            }
            Op::Reopen => {
                db.close().unwrap();
                // By path alone: the registry sees the shard files and counts them.
                db = open(&base, OpenMode::Write, &Params::new());
                let stats = db.inspect().unwrap();
                assert_eq!(stats.number("num_shards"), Some(num_shards as u64));
                assert_eq!(stats.shards.len(), num_shards);
            }
            Op::Rebuild => db.rebuild(&Params::new()).unwrap(),
            Op::Clear => {
                db.clear().unwrap();
                model.clear();
            }
        }
    }
    check_all(db.as_ref(), &model, ordered);
    db.close().unwrap();
    let reopened = open(&base, OpenMode::ReadOnly, &Params::new());
    check_all(reopened.as_ref(), &model, ordered);
    let stats = reopened.inspect().unwrap();
    let per_shard: u64 = stats.shards.iter().map(|shard| shard.count).sum();
    assert_eq!(per_shard, stats.count, "the shards' counts add up to the total");
    assert_eq!(stats.count, model.len() as u64);
    let sizes: u64 = stats.shards.iter().map(|shard| shard.file_size).sum();
    assert_eq!(sizes, stats.file_size, "the shards' sizes add up to the total");
    // The shown form carries the same figures.
    let properties = stats.properties();
    let shown = |name: &str| properties.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    assert_eq!(shown("count"), Some(stats.count.to_string()));
    for (i, shard) in stats.shards.iter().enumerate() {
        assert_eq!(shown(&format!("shard_{i:05}_count")), Some(shard.count.to_string()));
        assert_eq!(shown(&format!("shard_{i:05}_healthy")), Some(shard.healthy.to_string()));
    }
    reopened.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn tree_shards_match_the_model_and_merge_in_order(ops in proptest::collection::vec(op(), 1..120), n in 1usize..5) {
        run(&ops, "db.kut", &Params::new().with("max_page_size", 512), n, true);
    }

    #[test]
    fn hash_shards_match_the_model(ops in proptest::collection::vec(op(), 1..120), n in 1usize..5) {
        run(&ops, "db.kuh", &Params::new().with("num_buckets", 64).with("record_comp", "lz4"), n, false);
    }

    #[test]
    fn baby_shards_match_the_model(ops in proptest::collection::vec(op(), 1..80), n in 1usize..4) {
        run(&ops, "db.kumb", &Params::new(), n, true);
    }

    #[test]
    fn tree_shards_under_a_kus_base_are_found_by_their_header(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops, "db.kus", &Params::new().with("inner_engine", "tree"), 3, true);
    }
}

/// Each tree shard of a set judges its file against its share of the memory (`memory_bytes`,
/// shown by `inspect`): the set's files together must fit for their pages to stay in memory.
/// A `memory_bytes` given to the set is each shard's as given.
#[test]
fn tree_shards_take_their_share_of_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let single = open(&dir.path().join("one.kut"), OpenMode::Create, &Params::new());
    let whole = single.inspect().unwrap().number("memory_bytes").unwrap();
    let tree_set = Params::new().with("inner_engine", "tree").with("num_shards", 4);
    let set = open(&dir.path().join("set.kus"), OpenMode::Create, &tree_set);
    let shares: Vec<u64> = set.inspect().unwrap().shards.iter().map(|s| s.number("memory_bytes").unwrap()).collect();
    assert_eq!(shares.len(), 4);
    for share in &shares {
        // MemAvailable moves a little between the two opens.
        assert!(*share * 4 < whole * 11 / 10 && *share * 4 > whole * 9 / 10, "{share} a shard of {whole}");
    }
    let given = tree_set.with("memory_bytes", 12345);
    let set = open(&dir.path().join("given.kus"), OpenMode::Create, &given);
    assert!(set.inspect().unwrap().shards.iter().all(|s| s.number("memory_bytes") == Some(12345)));
}
