//! The ordered tree against `BTreeMap` (with the tiny test node capacities, so that splits,
//! merges and refills happen over several levels), checking the node invariants after every
//! operation.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;

use super::node::Node;
use super::prefix::key_prefix;
use super::{OrderedTree, Put, INNER_CAPACITY, LEAF_CAPACITY};

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>, bool),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    /// A batched lookup (several groups, duplicates and missing keys among them).
    GetMany(Vec<Vec<u8>>),
    WalkForward(Vec<u8>, bool),
    WalkBackward(Vec<u8>, bool),
    /// Removes a run of keys from a point: empties whole nodes, forcing merges up the tree.
    RemoveRun(Vec<u8>, usize),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Many distinct keys with distinct prefixes: deep trees.
        (0u16..600).prop_map(|n| format!("{n:04}").into_bytes()),
        // Few bytes from a tiny alphabet: tied prefixes, prefixes of one another, the empty key.
        proptest::collection::vec(0u8..3, 0..11),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), proptest::collection::vec(any::<u8>(), 0..30), any::<bool>()).prop_map(|(k, v, o)| Op::Put(k, v, o)),
        3 => key().prop_map(Op::Remove),
        1 => key().prop_map(Op::Get),
        1 => proptest::collection::vec(key(), 0..80).prop_map(Op::GetMany),
        1 => (key(), any::<bool>()).prop_map(|(k, i)| Op::WalkForward(k, i)),
        1 => (key(), any::<bool>()).prop_map(|(k, i)| Op::WalkBackward(k, i)),
        1 => (key(), 1usize..200).prop_map(|(k, n)| Op::RemoveRun(k, n)),
    ]
}

fn pair(record: Option<&crate::memory_dbm::record::RecordBytes>) -> Option<(Vec<u8>, Vec<u8>)> {
    record.map(|r| (r.key().to_vec(), r.value().to_vec()))
}

fn model_pair(entry: Option<(&Vec<u8>, &Vec<u8>)>) -> Option<(Vec<u8>, Vec<u8>)> {
    entry.map(|(k, v)| (k.clone(), v.clone()))
}

/// Checks the invariants of `node.rs` under `node`, whose keys must lie in `[lower, upper)`,
/// collecting its keys; returns the depth of its leaves.
fn check_node(node: &Node, lower: Option<&[u8]>, upper: Option<&[u8]>, keys: &mut Vec<Vec<u8>>) -> usize {
    let in_bounds = |key: &[u8]| lower.is_none_or(|l| l <= key) && upper.is_none_or(|u| key < u);
    match node {
        Node::Leaf(leaf) => {
            assert!(leaf.vacancies_hold_nothing());
            assert_eq!(leaf.prefixes().len(), leaf.records().len());
            assert!(leaf.records().len() <= LEAF_CAPACITY);
            for (prefix, record) in leaf.prefixes().iter().zip(leaf.records()) {
                assert_eq!(*prefix, key_prefix(record.key()));
                assert!(in_bounds(record.key()));
                assert!(keys.last().is_none_or(|last| last.as_slice() < record.key()), "keys out of order");
                keys.push(record.key().to_vec());
            }
            0
        }
        Node::Inner(inner) => {
            assert_eq!(inner.children.len(), inner.separators.len() + 1);
            assert_eq!(inner.prefixes.len(), inner.separators.len());
            assert!(inner.separators.len() <= INNER_CAPACITY);
            let mut depths = Vec::new();
            for (index, child) in inner.children.iter().enumerate() {
                let low = if index == 0 { lower } else { Some(&*inner.separators[index - 1]) };
                let high = inner.separators.get(index).map(|s| &**s).or(upper);
                if let Some(separator) = inner.separators.get(index) {
                    assert_eq!(inner.prefixes[index], key_prefix(separator));
                    assert!(in_bounds(separator) || upper.is_some_and(|u| &**separator == u));
                }
                depths.push(check_node(child, low, high, keys));
            }
            assert!(depths.windows(2).all(|w| w[0] == w[1]), "leaves at different depths");
            depths[0] + 1
        }
    }
}

fn check(tree: &OrderedTree, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut keys = Vec::new();
    check_node(&tree.root, None, None, &mut keys);
    assert_eq!(keys, model.keys().cloned().collect::<Vec<_>>());
    assert_eq!(tree.len(), model.len());
    let mut visited = Vec::new();
    tree.for_each(|r| -> Result<(), ()> {
        visited.push((r.key().to_vec(), r.value().to_vec()));
        Ok(())
    })
    .unwrap();
    assert_eq!(visited, model.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>());
    assert_eq!(pair(tree.first()), model_pair(model.first_key_value()));
    assert_eq!(pair(tree.last()), model_pair(model.last_key_value()));
}

fn bound(key: &[u8], inclusive: bool) -> Bound<&[u8]> {
    if inclusive {
        Bound::Included(key)
    } else {
        Bound::Excluded(key)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn tree_matches_btreemap(ops in proptest::collection::vec(op(), 0..400)) {
        let mut tree = OrderedTree::new();
        let mut model = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(key, value, overwrite) => {
                    let put = tree.put(&key, &value, overwrite).unwrap();
                    let expected = match model.get(&key) {
                        None => Put::Inserted,
                        Some(_) if overwrite => Put::Replaced,
                        Some(_) => Put::Kept,
                    };
                    prop_assert_eq!(put, expected);
                    if expected != Put::Kept {
                        model.insert(key, value);
                    }
                }
                Op::Remove(key) => {
                    let removed = tree.remove(&key).map(|r| r.value().to_vec());
                    prop_assert_eq!(removed, model.remove(&key));
                }
                Op::Get(key) => {
                    prop_assert_eq!(tree.get(&key).map(|r| r.value().to_vec()), model.get(&key).cloned());
                }
                Op::GetMany(keys) => {
                    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                    let mut seen = Vec::new();
                    tree.get_many(&refs, |index, record| seen.push((index, pair(record))));
                    let expected: Vec<_> = keys.iter().enumerate().map(|(i, k)| (i, model_pair(model.get_key_value(k)))).collect();
                    prop_assert_eq!(seen, expected);
                }
                Op::WalkForward(key, inclusive) => {
                    // Walks to the end key by key, as a cursor does.
                    let expected: Vec<_> = model.range::<[u8], _>((bound(&key, inclusive), Bound::Unbounded))
                        .map(|(k, _)| k.clone()).collect();
                    let mut walked = Vec::new();
                    let mut at = tree.after(&key, inclusive).map(|r| r.key().to_vec());
                    while let Some(current) = at.filter(|_| walked.len() <= model.len()) {
                        at = tree.after(&current, false).map(|r| r.key().to_vec());
                        walked.push(current);
                    }
                    prop_assert_eq!(walked, expected);
                }
                Op::WalkBackward(key, inclusive) => {
                    let expected: Vec<_> = model.range::<[u8], _>((Bound::Unbounded, bound(&key, inclusive)))
                        .rev().map(|(k, _)| k.clone()).collect();
                    let mut walked = Vec::new();
                    let mut at = tree.before(&key, inclusive).map(|r| r.key().to_vec());
                    while let Some(current) = at.filter(|_| walked.len() <= model.len()) {
                        at = tree.before(&current, false).map(|r| r.key().to_vec());
                        walked.push(current);
                    }
                    prop_assert_eq!(walked, expected);
                }
                Op::RemoveRun(key, count) => {
                    let run: Vec<_> = model.range(key..).take(count).map(|(k, _)| k.clone()).collect();
                    for key in run {
                        prop_assert!(tree.remove(&key).is_some());
                        model.remove(&key);
                        check(&tree, &model);
                    }
                }
            }
            check(&tree, &model);
        }
        tree.clear();
        model.clear();
        check(&tree, &model);
    }

    #[test]
    fn keys_in_order_fill_leaves(count in 1usize..300, descending in any::<bool>()) {
        let mut tree = OrderedTree::new();
        let mut model = BTreeMap::new();
        let mut keys: Vec<Vec<u8>> = (0..count).map(|n| format!("{n:05}").into_bytes()).collect();
        if descending {
            keys.reverse();
        }
        for key in keys {
            tree.put(&key, b"v", true).unwrap();
            model.insert(key, b"v".to_vec());
        }
        check(&tree, &model);
        // Every leaf but the last (or, descending, the first) is full.
        let mut lens = Vec::new();
        tree.root.for_each_node(&mut |node| if let Node::Leaf(leaf) = node { lens.push(leaf.records().len()) });
        if descending {
            lens.reverse();
        }
        prop_assert!(lens.iter().rev().skip(1).all(|&len| len == LEAF_CAPACITY), "{:?}", lens);
    }
}
