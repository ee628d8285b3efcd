//! Model-based test of the batched read (`Dbm::get_many`, `Dbm::get_many_with`) for every
//! engine of the registry, plus variants that stress the overrides (long HashDbm chains,
//! compressed records, a deep tree with uncommitted pages, spilled memory records):
//! random batches (repeated keys, missing keys, empty batches, one batch of 100,000 keys)
//! between random writes must equal the model and per-key `get`; under concurrent writers,
//! each result must be a value the key held at some moment during the call, also while the
//! database is rebuilt; a batch that meets a writer holding one of its keys waits for it.

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "indices come from the test's own bounded ranges")]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use kura::engines;
use kura::split_mix::SplitMix64;
use kura::{Dbm, Engine, OpenMode, Params};

/// Keys the random operations draw from; batches also ask for keys beyond them (missing).
const KEY_SPACE: u64 = 3000;

/// Every engine with its own benchmark parameters, then the variants that reach the
/// overrides' less common paths.
fn configurations() -> Vec<(&'static Engine, Params)> {
    let mut all: Vec<(&'static Engine, Params)> =
        engines().iter().map(|e| (e, e.bench_params(10 * KEY_SPACE))).collect();
    let engine = |name| kura::registry::engine(name).unwrap();
    // Chains of ~50 records per bucket, records compressed: every group walks long chains.
    all.push((engine("hash"), Params::new().with("num_buckets", 64).with("record_comp", "zstd")));
    // A tree several levels deep whose leaves hold a handful of records each.
    all.push((engine("tree"), Params::new().with("max_page_size", 256)));
    // Keys ordered as numbers: the batch is sorted by the comparator, not bytewise.
    all.push((engine("tree"), Params::new().with("max_page_size", 256).with("key_comparator", "numeric")));
    // Two cache slots: a group locks few slots and finds several keys in each.
    all.push((engine("cache"), engine("cache").bench_params(10 * KEY_SPACE).with("num_slots", 2)));
    // Compressed buckets of ~16 records and a small decoded-bucket cache: keys of a batch share
    // buckets, some decoded, some taken from the cache.
    all.push((
        engine("compact"),
        Params::new()
            .with("bucket_comp", "zstd")
            .with("expected_records", KEY_SPACE)
            .with("bucket_records", 16)
            .with("cache_bytes", 8192),
    ));
    // Three shards of trees: each shard's part of a batch goes through the tree's sorted walk.
    all.push((
        engine("shard"),
        Params::new().with("num_shards", 3).with("inner_engine", "tree").with("max_page_size", 256),
    ));
    all
}

fn key_of(number: u64) -> Vec<u8> {
    format!("key{number:06}").into_bytes()
}

/// Values of varied sizes: empty, inline in a memory record, spilled, longer than a line.
fn value_of(rng: &mut SplitMix64) -> Vec<u8> {
    let len = [0, 3, 8, 30, 100, 700][rng.below(6) as usize];
    let byte = rng.below(256) as u8;
    (0..len).map(|i| byte.wrapping_add((i % 13) as u8)).collect()
}

/// A random batch: keys present, removed and never written, repeats included.
fn batch_of(rng: &mut SplitMix64, len: usize) -> Vec<Vec<u8>> {
    (0..len).map(|_| key_of(rng.below(KEY_SPACE + KEY_SPACE / 4))).collect()
}

/// Checks one batch three ways: `get_many` against the model and against per-key `get`,
/// and `get_many_with` visiting each index exactly once with the same values.
fn check_batch(db: &dyn Dbm, model: &BTreeMap<Vec<u8>, Vec<u8>>, batch: &[Vec<u8>], what: &str) {
    let keys: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    let values = db.get_many(&keys).unwrap();
    assert_eq!(values.len(), keys.len(), "{what}");
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(values[i].as_ref(), model.get(*key), "{what}: key {:?}", String::from_utf8_lossy(key));
        match db.get(key) {
            Ok(value) => assert_eq!(values[i].as_deref(), Some(&value[..]), "{what}"),
            Err(e) => {
                assert!(e.is_not_found(), "{what}: {e}");
                assert_eq!(values[i], None, "{what}");
            }
        }
    }
    let mut seen = vec![None; keys.len()];
    db.get_many_with(&keys, &mut |index, value| {
        assert!(seen[index].is_none(), "{what}: index {index} visited twice");
        seen[index] = Some(value.map(<[u8]>::to_vec));
    })
    .unwrap();
    let seen: Vec<Option<Vec<u8>>> = seen.into_iter().map(|v| v.expect("every index visited")).collect();
    assert_eq!(seen, values, "{what}");
}

fn open(engine: &Engine, dir: &Path, params: &Params, mode: OpenMode) -> Box<dyn Dbm> {
    engine.open(&dir.join(format!("db.{}", engine.extension)), mode, params).unwrap()
}

#[test]
fn batches_equal_the_model_and_per_key_gets_for_every_engine() {
    for (case, (engine, params)) in configurations().into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(engine, dir.path(), &params, OpenMode::Create);
        let mut model = BTreeMap::new();
        let mut rng = SplitMix64::new(case as u64);
        let what = format!("{} {params:?}", engine.name);
        check_batch(db.as_ref(), &model, &[], &what);
        check_batch(db.as_ref(), &model, &batch_of(&mut rng, 50), &what);
        for round in 0..40 {
            for _ in 0..150 {
                let key = key_of(rng.below(KEY_SPACE));
                if rng.below(4) == 0 {
                    let _ = db.remove(&key);
                    model.remove(&key);
                } else {
                    let value = value_of(&mut rng);
                    db.set(&key, &value, true).unwrap();
                    model.insert(key, value);
                }
            }
            let len = [0, 1, 2, 15, 16, 17, 64, 300][rng.below(8) as usize];
            check_batch(db.as_ref(), &model, &batch_of(&mut rng, len), &what);
            if round == 20 {
                // Across a rebuild (HashDbm: a new bucket count) and a close and reopen.
                db.rebuild(&Params::new()).unwrap();
                check_batch(db.as_ref(), &model, &batch_of(&mut rng, 100), &what);
            }
        }
        let huge = batch_of(&mut rng, 100_000);
        check_batch(db.as_ref(), &model, &huge, &what);
        if engine.storage == kura::Storage::File {
            db.close().unwrap();
            let db = open(engine, dir.path(), &params, OpenMode::ReadOnly);
            check_batch(db.as_ref(), &model, &batch_of(&mut rng, 500), &what);
            db.close().unwrap();
        } else {
            db.close().unwrap();
        }
        assert!(db.get_many(&[b"k".as_slice()]).is_err(), "{what}: a closed database fails");
    }
}

/// The values a key of the concurrent test may hold: its own name and a generation below
/// `GENERATIONS`, so that a value shown for the wrong key or torn is caught.
const GENERATIONS: u64 = 5;

fn versioned(key: &[u8], generation: u64) -> Vec<u8> {
    let mut value = key.to_vec();
    value.extend_from_slice(format!(":{generation}:").as_bytes());
    value.resize(value.len() + (generation as usize * 17) % 40, b'x');
    value
}

fn is_version_of(key: &[u8], value: &[u8]) -> bool {
    (0..GENERATIONS).any(|generation| value == versioned(key, generation))
}

/// A new database of `engine` holding the keys below `count`, each at version 0.
fn filled(engine: &Engine, dir: &Path, params: &Params, count: u64) -> Box<dyn Dbm> {
    let db = open(engine, dir, params, OpenMode::Create);
    for number in 0..count {
        let key = key_of(number);
        db.set(&key, &versioned(&key, 0), true).unwrap();
    }
    db
}

#[test]
fn under_concurrent_writers_each_result_is_a_value_the_key_held() {
    // Keys below STABLE always hold a version; below VOLATILE they come and go; the rest
    // are never written.
    const STABLE: u64 = 1000;
    const VOLATILE: u64 = 2000;
    const NEVER: u64 = 2500;
    for (engine, params) in configurations() {
        let dir = tempfile::tempdir().unwrap();
        let db = filled(engine, dir.path(), &params, VOLATILE);
        let what = format!("{} {params:?}", engine.name);
        let writing = AtomicBool::new(true);
        std::thread::scope(|scope| {
            let db = db.as_ref();
            let writers: Vec<_> = (0..2u64)
                .map(|seed| {
                    scope.spawn(move || {
                        let mut rng = SplitMix64::new(100 + seed);
                        for step in 0..6000 {
                            // Rebuilds too, with a new bucket count where the engine takes
                            // one: HashDbm's batched lookup must then retry its group.
                            if seed == 0 && step % 1000 == 999 {
                                let rebuild = if engine.params.contains(&"num_buckets") {
                                    Params::new().with("num_buckets", 64 + rng.below(5000))
                                } else {
                                    Params::new()
                                };
                                db.rebuild(&rebuild).unwrap();
                            }
                            let number = rng.below(VOLATILE);
                            let key = key_of(number);
                            if number >= STABLE && rng.below(2) == 0 {
                                let _ = db.remove(&key);
                            } else {
                                db.set(&key, &versioned(&key, rng.below(GENERATIONS)), true).unwrap();
                            }
                        }
                    })
                })
                .collect();
            let mut rng = SplitMix64::new(7);
            // Bounded: the writers' fixed work ends the loop, and so does the cap.
            for _ in 0..2000 {
                let batch: Vec<Vec<u8>> = (0..rng.below(200)).map(|_| key_of(rng.below(NEVER))).collect();
                let keys: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
                let values = db.get_many(&keys).unwrap();
                for (i, key) in keys.iter().enumerate() {
                    let number: u64 = std::str::from_utf8(&key[3..]).unwrap().parse().unwrap();
                    match &values[i] {
                        Some(value) => {
                            assert!(number < VOLATILE, "{what}: a never-written key has a value");
                            assert!(is_version_of(key, value), "{what}: {:?}", String::from_utf8_lossy(value));
                        }
                        None => assert!((STABLE..NEVER).contains(&number), "{what}: key {number} vanished"),
                    }
                }
                if !writing.load(Ordering::Relaxed) {
                    break;
                }
                if writers.iter().all(|w| w.is_finished()) {
                    writing.store(false, Ordering::Relaxed);
                }
            }
            for writer in writers {
                writer.join().unwrap();
            }
        });
        db.close().unwrap();
    }
}

/// A batch that meets a writer in the middle of a write to one of its keys waits for it and
/// reads the new value: the batch's try at that key's lock fails, and the path that then
/// waits must lock what it reads. (The concurrent test above reaches that path only when a
/// writer happens to hold a lock at the moment a group tries it.)
#[test]
fn a_batch_that_meets_a_writer_waits_for_it_and_reads_its_write() {
    const KEYS: u64 = 200;
    /// Long enough for the batch to start while the writer holds the lock.
    const HOLD: std::time::Duration = std::time::Duration::from_millis(150);
    for (engine, params) in configurations() {
        let dir = tempfile::tempdir().unwrap();
        let db = filled(engine, dir.path(), &params, KEYS);
        let what = format!("{} {params:?}", engine.name);
        let written = key_of(KEYS / 2);
        let (holding, held) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let db = db.as_ref();
            let writer = scope.spawn(|| {
                let new_value = versioned(&written, 1);
                db.process(&written, &mut |_| {
                    holding.send(()).unwrap();
                    std::thread::sleep(HOLD);
                    kura::Action::Set(new_value.clone().into())
                })
                .unwrap();
            });
            held.recv().unwrap();
            let batch: Vec<Vec<u8>> = (0..KEYS).map(key_of).collect();
            let keys: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
            let values = db.get_many(&keys).unwrap();
            for (key, value) in keys.iter().zip(&values) {
                let generation = u64::from(*key == written.as_slice());
                assert_eq!(value.as_deref(), Some(versioned(key, generation).as_slice()), "{what}");
            }
            writer.join().unwrap();
        });
        db.close().unwrap();
    }
}
