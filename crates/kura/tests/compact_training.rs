//! CompactDbm's default codec trains its dictionary by itself (`compact_dbm/training.rs`):
//! random sets, removes and gets against a BTreeMap across the write that trains it, across a
//! snapshot round trip that must carry the dictionary and its training facts, and across a
//! rebuild that trains anew; readers beside the training write only ever see values written.
//! The threshold is lowered with `train_records` so that the test stays cheap.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "test data is indexed within its known bounds")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use kura::split_mix::SplitMix64;
use kura::{CompactDbm, Dbm, DbmExt, ErrorKind, OpenMode, Params, Stat};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Records the auto-training is lowered to: past the engine's floor of 1,000.
const TRAIN_RECORDS: u64 = 1500;

fn key(rng: &mut SplitMix64) -> Vec<u8> {
    format!("word{:05}", rng.below(5000)).into_bytes()
}

/// Dictionary-like text: shared structure, varied words.
fn value(rng: &mut SplitMix64) -> Vec<u8> {
    let words = ["tree", "river", "light", "stone", "night", "garden", "silver", "morning"];
    let word = |rng: &mut SplitMix64| words[rng.below(words.len() as u64) as usize];
    let mut text = format!("{{\"word\":\"{}\",\"pos\":\"noun\",\"item\":[", word(rng));
    for sense in 0..1 + rng.below(3) {
        text.push_str(&format!(
            "{{\"label\":\"wn\",\"text\":\"a {} {} of the {} ({})\"}},",
            word(rng),
            word(rng),
            word(rng),
            rng.below(1000) + sense
        ));
    }
    text.push_str("]}");
    text.into_bytes()
}

fn stat(dbm: &dyn Dbm, name: &str) -> Option<Stat> {
    dbm.inspect().unwrap().details.into_iter().find(|(n, _)| *n == name).map(|(_, s)| s)
}

fn trained(dbm: &dyn Dbm) -> bool {
    stat(dbm, "dict_trained") == Some(Stat::Flag(true))
}

/// `steps` random operations, each answer checked against the model.
fn operate(dbm: &dyn Dbm, model: &mut Model, rng: &mut SplitMix64, steps: u32) {
    for _ in 0..steps {
        let k = key(rng);
        match rng.below(10) {
            0..=5 => {
                let v = value(rng);
                dbm.set(&k, &v, true).unwrap();
                model.insert(k, v);
            }
            6 => {
                let outcome = dbm.remove(&k);
                match model.remove(&k) {
                    Some(_) => outcome.unwrap(),
                    None => assert_eq!(outcome.unwrap_err().kind(), ErrorKind::NotFound),
                }
            }
            _ => match model.get(&k) {
                Some(v) => assert_eq!(&dbm.get(&k).unwrap(), v),
                None => assert_eq!(dbm.get(&k).unwrap_err().kind(), ErrorKind::NotFound),
            },
        }
    }
}

fn check_content(dbm: &dyn Dbm, model: &Model) {
    let content: Model = dbm.records().unwrap().map(|r| r.unwrap()).collect();
    assert!(content == *model, "content differs from the model");
    assert_eq!(dbm.count().unwrap(), model.len() as u64);
    for (k, v) in model {
        assert_eq!(&dbm.get(k).unwrap(), v);
    }
}

#[test]
fn the_default_trains_its_dictionary_once_enough_records_arrived_and_keeps_it_through_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auto.kumz");
    let params = Params::parse(&format!("train_records={TRAIN_RECORDS}")).unwrap();
    let dbm = CompactDbm::open(&path, OpenMode::Create, &params).unwrap();
    assert_eq!(dbm.codec().unwrap(), Some(kura::CodecKind::ZstdDict), "the default codec");
    let mut rng = SplitMix64::new(0x7261_696e);
    let mut model = Model::new();
    // Single writes until the dictionary comes: never before TRAIN_RECORDS records.
    while !trained(&dbm) {
        assert!((model.len() as u64) < TRAIN_RECORDS + 200, "no dictionary at {} records", model.len());
        assert_eq!(stat(&dbm, "dict_size"), Some(Stat::Number(0)));
        operate(&dbm, &mut model, &mut rng, 1);
    }
    assert!(model.len() as u64 >= TRAIN_RECORDS - 1, "trained at {} records", model.len());
    assert_eq!(stat(&dbm, "dict_trigger"), Some(Stat::Name("auto")));
    let Some(Stat::Number(on)) = stat(&dbm, "dict_trained_records") else { panic!("no dict_trained_records") };
    assert!(on >= TRAIN_RECORDS && on <= model.len() as u64 + 1, "trained on {on} records");
    let Some(Stat::Number(at)) = stat(&dbm, "dict_trained_at") else { panic!("no dict_trained_at") };
    let Some(Stat::Number(size)) = stat(&dbm, "dict_size") else { panic!("no dict_size") };
    assert!(size > 0);
    // Every record written before it was re-encoded with it, and those after use it.
    check_content(&dbm, &model);
    operate(&dbm, &mut model, &mut rng, 1500);
    check_content(&dbm, &model);
    dbm.close().unwrap();

    // The snapshot carries the dictionary and what is known of its training.
    let reopened = CompactDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
    check_content(&reopened, &model);
    assert_eq!(stat(&reopened, "dict_size"), Some(Stat::Number(size)));
    assert_eq!(stat(&reopened, "dict_trigger"), Some(Stat::Name("auto")));
    assert_eq!(stat(&reopened, "dict_trained_at"), Some(Stat::Number(at)));
    assert_eq!(stat(&reopened, "dict_trained_records"), Some(Stat::Number(on)));
    operate(&reopened, &mut model, &mut rng, 1500);
    check_content(&reopened, &model);

    // A rebuild trains anew on every record (and sizes the buckets for them).
    reopened.rebuild(&Params::new()).unwrap();
    assert_eq!(stat(&reopened, "dict_trigger"), Some(Stat::Name("rebuild")));
    assert_eq!(stat(&reopened, "dict_trained_records"), Some(Stat::Number(model.len() as u64)));
    let buckets = model.len() as u64 / CompactDbm::DEFAULT_BUCKET_RECORDS;
    assert_eq!(stat(&reopened, "num_buckets"), Some(Stat::Number(buckets.div_ceil(256).max(1) * 256)));
    check_content(&reopened, &model);
    operate(&reopened, &mut model, &mut rng, 1500);
    check_content(&reopened, &model);
    reopened.close().unwrap();
    let last = CompactDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    check_content(&last, &model);
    assert_eq!(stat(&last, "dict_trigger"), Some(Stat::Name("rebuild")));
}

#[test]
fn records_that_teach_nothing_make_no_dictionary_and_the_table_serves_on() {
    // Every value the same and keys that differ in one place: zstd's trainer learns nothing
    // it would keep (or little); either way every answer stays right.
    let dbm = CompactDbm::new(&Params::parse(&format!("train_records={TRAIN_RECORDS}")).unwrap()).unwrap();
    let mut model = Model::new();
    for i in 0..3000u32 {
        let (k, v) = (format!("{i:06}").into_bytes(), b"same".to_vec());
        dbm.set(&k, &v, true).unwrap();
        model.insert(k, v);
    }
    check_content(&dbm, &model);
    if !trained(&dbm) {
        assert_eq!(stat(&dbm, "dict_size"), Some(Stat::Number(0)));
    }
}

#[test]
fn readers_beside_the_training_write_see_only_values_written() {
    let dbm = CompactDbm::new(&Params::parse(&format!("train_records={TRAIN_RECORDS}")).unwrap()).unwrap();
    let mut rng = SplitMix64::new(11);
    // Half the records first, which the readers then read while the writer crosses the
    // threshold and every bucket is re-encoded.
    let written: Vec<(Vec<u8>, Vec<u8>)> =
        (0..TRAIN_RECORDS as u32 * 2).map(|i| (format!("key{i:06}").into_bytes(), value(&mut rng))).collect();
    let (first, rest) = written.split_at(TRAIN_RECORDS as usize / 2);
    for (k, v) in first {
        dbm.set(k, v, true).unwrap();
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for reader in 0..2u64 {
            let (dbm, done, first) = (&dbm, &done, first);
            scope.spawn(move || {
                let mut rng = SplitMix64::new(reader);
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < 1000 {
                    let (k, v) = &first[rng.below(first.len() as u64) as usize];
                    assert_eq!(&dbm.get(k).unwrap(), v);
                    reads += 1;
                }
            });
        }
        for (k, v) in rest {
            dbm.set(k, v, true).unwrap();
        }
        done.store(true, Ordering::Release);
    });
    assert!(trained(&dbm), "crossed the threshold");
    check_content(&dbm, &written.into_iter().collect());
}
