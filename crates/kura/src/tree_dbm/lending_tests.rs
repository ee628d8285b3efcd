//! Tests of the leaves that lend their values from the file's mapping (page.rs,
//! `Leaf::decode_lending`; pager.rs, `decode_page_lending`): after an open, reads find the
//! values written; a changed leaf and every position a seek keeps hold their own values, so
//! that the slots the writer frees and reuses afterwards never show through; a model of the
//! records checks every read while the tree is rewritten over and over.

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::page::Page;
use super::seek::{Position, Seek};
use super::TreeDbm;
use crate::dbm::{Dbm, OpenMode, Params};
use crate::split_mix::SplitMix64;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small pages, so that a few thousand records make hundreds of leaves, and checkpoints
/// often, so that the slots of replaced pages are soon freed and written over.
fn params() -> Params {
    Params::new().with("max_page_size", 1024).with("checkpoint_bytes", 16384).with("max_dirty_pages", 16)
}

fn key(n: u64) -> Vec<u8> {
    format!("key{n:06}").into_bytes()
}

/// A value whose bytes say which key and which write made it, so that a value shown from a
/// reused slot cannot pass for the right one.
fn value(rng: &mut SplitMix64, n: u64, round: u64) -> Vec<u8> {
    let len = 8 + rng.below(120) as usize;
    let mut value = format!("{n}:{round}:").into_bytes();
    value.resize(len, b'a' + (round % 26) as u8);
    value
}

/// A file of `count` records written and closed; returns the model.
fn written(path: &Path, count: u64, rng: &mut SplitMix64) -> Model {
    let db = TreeDbm::open(path, OpenMode::Create, &params()).unwrap();
    let mut model = Model::new();
    for n in 0..count {
        let v = value(rng, n, 0);
        db.set(&key(n), &v, true).unwrap();
        model.insert(key(n), v);
    }
    db.close().unwrap();
    model
}

/// The value of `key`, None if absent.
fn read(db: &TreeDbm, key: &[u8]) -> Option<Vec<u8>> {
    let mut found = None;
    db.get_with(key, &mut |value| found = value.map(<[u8]>::to_vec)).unwrap();
    found
}

fn check_all(db: &TreeDbm, model: &Model) {
    for (k, v) in model {
        assert_eq!(read(db, k).as_deref(), Some(&v[..]), "{}", String::from_utf8_lossy(k));
    }
    assert_eq!(db.count().unwrap(), model.len() as u64);
}

/// `count` records written, the file reopened and every record read (so that its leaves
/// lend); returns what the test needs to go on.
fn reopened(name: &str, seed: u64, count: u64) -> (tempfile::TempDir, TreeDbm, Model, SplitMix64) {
    let (dir, path, model, rng) = written_file(name, seed, count);
    let db = TreeDbm::open(&path, OpenMode::Write, &params()).unwrap();
    check_all(&db, &model);
    (dir, db, model, rng)
}

/// A file `name` of `count` records written and closed in a new directory; returns the
/// directory, the file, the model and the random numbers that went on.
fn written_file(name: &str, seed: u64, count: u64) -> (tempfile::TempDir, PathBuf, Model, SplitMix64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let mut rng = SplitMix64::new(seed);
    let model = written(&path, count, &mut rng);
    (dir, path, model, rng)
}

/// Whether the leaf of key `n` lends its values (read from the file now if not cached).
fn leaf_lends(db: &TreeDbm, n: u64) -> bool {
    let tree = db.read().unwrap();
    let (leaf, _) = tree.find_leaf(&key(n), &mut Vec::new()).unwrap();
    tree.page(leaf).unwrap().is_lent()
}

type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// The position a seek to `n` keeps, with a copy of its leaf's records as they are now.
fn kept_at(db: &TreeDbm, n: u64) -> (Position, Records) {
    let position = db.read().unwrap().seek(Seek::AtLeast(&key(n))).unwrap().unwrap();
    assert!(!position.leaf.is_lent(), "a seek's position lends from a slot");
    let records = (0..leaf_of(&position).len())
        .map(|i| leaf_of(&position).record(i).map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    (position, records)
}

fn leaf_of(position: &Position) -> &super::page::Leaf {
    match &*position.leaf {
        Page::Leaf(leaf) => leaf,
        Page::Branch(_) => panic!("a position on a branch"),
    }
}

/// Asserts that the kept position's leaf still holds `records`.
fn assert_unchanged(position: &Position, records: &Records) {
    for (i, (k, v)) in records.iter().enumerate() {
        assert_eq!(leaf_of(position).record(i).unwrap(), (&k[..], &v[..]), "a kept position's record changed");
    }
}

#[test]
fn reads_after_an_open_lend_values_and_match_the_model() {
    let (_dir, db, _model, _rng) = reopened("lend.kut", 470, 3000);
    // The reads went through leaves that lend: the leaf of some key is one.
    let lent = (0..3000).step_by(97).filter(|&n| leaf_lends(&db, n)).count();
    assert!(lent > 0, "no leaf read after the open lends its values");
}

/// A batched lookup (`get_many`) right after an open, through leaves that lend their values
/// (whose values it seeks in the file's pages a stage ahead, get_many.rs), gives every value
/// of the model, and None for the keys never written, in any order of the keys.
#[test]
fn batched_lookups_through_lending_leaves_match_the_model() {
    let (_dir, path, model, mut rng) = written_file("many.kut", 471, 3000);
    let db = TreeDbm::open(&path, OpenMode::Write, &params()).unwrap();
    let mut keys: Vec<Vec<u8>> = (0..3300).map(key).collect();
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let values = db.get_many(&refs).unwrap();
    for (k, v) in keys.iter().zip(&values) {
        assert_eq!(v.as_deref(), model.get(k).map(Vec::as_slice), "{}", String::from_utf8_lossy(k));
    }
    assert!(leaf_lends(&db, 1500), "the batch read its leaves without lending");
}

/// A file larger than the cache of decoded pages but well within memory is read through the
/// mapping, its leaves lending their values; judged by the cache (before `memory_bytes`), it
/// was read with `pread` into leaves holding their values, which overflowed the cache
/// (pager.rs, `exceeds_memory`). Said to be larger than half the memory, it is read with
/// `pread`, and its leaves hold their values.
#[test]
fn a_file_larger_than_the_cache_but_not_than_memory_is_read_through_the_mapping() {
    let (_dir, path, model, _rng) = written_file("mapped.kut", 472, 3000);
    let file_len = std::fs::metadata(&path).unwrap().len();
    let small_cache = params().with("cache_bytes", file_len / 8);
    for (params, lends) in [(small_cache.clone(), true), (small_cache.with("memory_bytes", file_len), false)] {
        let db = TreeDbm::open(&path, OpenMode::ReadOnly, &params).unwrap();
        check_all(&db, &model);
        assert_eq!(leaf_lends(&db, 1500), lends, "{params:?}: a {file_len}-byte file");
    }
}

#[test]
fn a_kept_position_holds_its_values_while_the_writer_reuses_slots() {
    let (_dir, db, mut model, mut rng) = reopened("kept.kut", 471, 2000);
    let kept: Vec<_> = (0..2000).step_by(53).map(|n| kept_at(&db, n)).collect();
    // Every record rewritten several times, each round committed, so that the slots of the
    // leaves the positions came from are freed and written over.
    for round in 1..=4 {
        for n in 0..2000 {
            let v = value(&mut rng, n, round);
            db.set(&key(n), &v, true).unwrap();
            model.insert(key(n), v);
        }
        db.synchronize(false).unwrap();
    }
    for (position, records) in &kept {
        assert_unchanged(position, records);
    }
    check_all(&db, &model);
}

#[test]
fn mixed_changes_after_each_open_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.kut");
    let mut rng = SplitMix64::new(472);
    let mut model = written(&path, 1500, &mut rng);
    for round in 1..=6u64 {
        let db = TreeDbm::open(&path, OpenMode::Write, &params()).unwrap();
        for step in 0..3000 {
            let n = rng.below(2500);
            match rng.below(10) {
                0..=3 => {
                    let v = value(&mut rng, n, round);
                    db.set(&key(n), &v, true).unwrap();
                    model.insert(key(n), v);
                }
                4 => {
                    db.remove(&key(n)).ok();
                    model.remove(&key(n));
                }
                5 => {
                    // A short scan: its positions are copies, its records the model's.
                    let mut seen = Vec::new();
                    db.scan(&key(n)[..].., &mut |k, v| {
                        seen.push((k.to_vec(), v.to_vec()));
                        seen.len() < 12
                    })
                    .unwrap();
                    let expected: Vec<(Vec<u8>, Vec<u8>)> =
                        model.range(key(n)..).take(12).map(|(k, v)| (k.clone(), v.clone())).collect();
                    assert_eq!(seen, expected, "round {round}, step {step}");
                }
                _ => assert_eq!(read(&db, &key(n)), model.get(&key(n)).cloned(), "round {round}, step {step}"),
            }
            if step % 500 == 499 {
                db.synchronize(false).unwrap();
            }
        }
        check_all(&db, &model);
        db.close().unwrap();
    }
}

#[test]
fn a_kept_position_outlives_a_clear_and_a_rebuild() {
    let (_dir, db, model, _rng) = reopened("cut.kut", 473, 1500);
    let before_rebuild = kept_at(&db, 700);
    // The rebuild writes a new file in place of the old one and drops the old mapping.
    db.rebuild(&Params::new()).unwrap();
    check_all(&db, &model);
    let before_clear = kept_at(&db, 300);
    // The clear cuts the file short.
    db.clear().unwrap();
    assert_eq!(db.count().unwrap(), 0);
    for (position, records) in [before_rebuild, before_clear] {
        assert_unchanged(&position, &records);
        for (k, v) in &records {
            assert_eq!(model.get(k), Some(v), "a kept position shows a record never written");
        }
    }
}

#[test]
fn long_shared_keys_with_tiny_values_lend_as_they_decode() {
    // Keys that share almost all their bytes expand far beyond the page; values under 4
    // bytes take less room in the slot than a lent value's place in the arena.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.kut");
    let params = Params::new().with("max_page_size", 4096);
    let stem = vec![b's'; 3000];
    let long_key = |n: u64| {
        let mut k = stem.clone();
        k.extend_from_slice(format!("{n:05}").as_bytes());
        k
    };
    let mut model = Model::new();
    {
        let db = TreeDbm::open(&path, OpenMode::Create, &params).unwrap();
        for n in 0..600u64 {
            let v = vec![b'v'; (n % 3) as usize];
            db.set(&long_key(n), &v, true).unwrap();
            model.insert(long_key(n), v);
        }
        db.close().unwrap();
    }
    let db = TreeDbm::open(&path, OpenMode::Write, &params).unwrap();
    check_all(&db, &model);
    // Changed after lending: each leaf copies its values first.
    for n in (0..600u64).step_by(7) {
        db.set(&long_key(n), b"xyz", true).unwrap();
        model.insert(long_key(n), b"xyz".to_vec());
    }
    check_all(&db, &model);
}
