//! Model-based test of CompactDbm: random operation sequences (sets, removes, appends,
//! batches, cursor edits, clears, snapshot reopens, rebuilds to another codec and bucket
//! count) checked against a BTreeMap, with every codec, answer by answer and whole content
//! at intervals.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "test data is indexed within its known bounds")]

use std::collections::BTreeMap;
use std::path::Path;

use kura::split_mix::SplitMix64;
use kura::{CodecKind, CompactDbm, Dbm, DbmExt, ErrorKind, OpenMode, Params, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(rng: &mut SplitMix64) -> Vec<u8> {
    match rng.below(20) {
        0 => Vec::new(),
        1 => vec![b'L'; 40 + rng.below(4) as usize],
        _ => format!("user:{:05}", rng.below(3000)).into_bytes(),
    }
}

fn value(rng: &mut SplitMix64) -> Vec<u8> {
    match rng.below(4) {
        0 => Vec::new(),
        1 => (0..rng.below(300)).map(|_| rng.next_u64() as u8).collect(),
        _ => format!("{{\"name\":\"n{}\",\"score\":{},\"tags\":[\"a\",\"b\"]}}", rng.below(100), rng.below(1000))
            .into_bytes(),
    }
}

fn property<'a>(properties: &'a [(String, String)], name: &str) -> &'a str {
    properties.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str()).unwrap()
}

fn check_content(dbm: &dyn Dbm, model: &Model) {
    let content: Model = dbm.records().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(content.len(), model.len());
    assert!(content == *model, "content differs from the model");
    assert_eq!(dbm.count().unwrap(), model.len() as u64);
    let properties = dbm.inspect().unwrap().properties();
    assert_eq!(property(&properties, "count"), model.len().to_string());
    let raw: usize = model.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(property(&properties, "raw_bytes").parse::<usize>().unwrap() >= raw);
}

/// A batch of `len` random sets and removes. At 4,096 operations and more a batch is a bulk
/// write (dense level, each group's blocks replaced at once: `compact_dbm/batch.rs`).
fn bulk(rng: &mut SplitMix64, model: &mut Model, len: usize) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for _ in 0..len {
        let k = key(rng);
        if rng.below(10) == 0 {
            batch.remove(&k);
            model.remove(&k);
        } else {
            let v = value(rng);
            batch.set(&k, &v);
            model.insert(k, v);
        }
    }
    batch
}

fn reopen(path: &Path) -> CompactDbm {
    CompactDbm::open(path, OpenMode::Write, &Params::new()).unwrap()
}

fn run(path: &Path, codec: CodecKind, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let params = Params::parse(&format!("bucket_comp={codec},num_buckets=512")).unwrap();
    let mut dbm = CompactDbm::open(path, OpenMode::Truncate, &params).unwrap();
    let mut model = Model::new();
    dbm.write_batch(&bulk(&mut rng, &mut model, 1500)).unwrap();
    if codec == CodecKind::ZstdDict {
        let properties = dbm.inspect().unwrap().properties();
        assert_ne!(property(&properties, "dict_size"), "0", "the first bulk batch trains the dictionary");
    }
    for step in 0..1500u32 {
        if step == 700 {
            // A bulk batch into a map already written record by record.
            dbm.write_batch(&bulk(&mut rng, &mut model, 4500)).unwrap();
            check_content(&dbm, &model);
        }
        let k = key(&mut rng);
        match rng.below(100) {
            0..=29 => {
                let v = value(&mut rng);
                let overwrite = rng.below(4) > 0;
                let outcome = dbm.set(&k, &v, overwrite);
                if !overwrite && model.contains_key(&k) {
                    assert_eq!(outcome.unwrap_err().kind(), ErrorKind::Duplicate);
                } else {
                    outcome.unwrap();
                    model.insert(k, v);
                }
            }
            30..=44 => {
                let outcome = dbm.remove(&k);
                match model.remove(&k) {
                    Some(_) => outcome.unwrap(),
                    None => assert_eq!(outcome.unwrap_err().kind(), ErrorKind::NotFound),
                }
            }
            45..=74 => match model.get(&k) {
                Some(v) => assert_eq!(&dbm.get(&k).unwrap(), v),
                None => assert_eq!(dbm.get(&k).unwrap_err().kind(), ErrorKind::NotFound),
            },
            75..=82 => {
                let v = value(&mut rng);
                dbm.append(&k, &v, b",").unwrap();
                match model.get_mut(&k) {
                    Some(old) => {
                        old.push(b',');
                        old.extend_from_slice(&v);
                    }
                    None => {
                        model.insert(k, v);
                    }
                }
            }
            83..=88 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.below(40) {
                    let k = key(&mut rng);
                    if rng.below(3) == 0 {
                        batch.remove(&k);
                        model.remove(&k);
                    } else {
                        let v = value(&mut rng);
                        batch.set(&k, &v);
                        model.insert(k, v);
                    }
                }
                dbm.write_batch(&batch).unwrap();
            }
            89..=91 => {
                let mut cursor = dbm.cursor().unwrap();
                if cursor.jump(&k).unwrap() {
                    let v = value(&mut rng);
                    if rng.below(2) == 0 {
                        cursor.set(&v).unwrap();
                        model.insert(k, v);
                    } else {
                        cursor.remove().unwrap();
                        model.remove(&k);
                    }
                } else {
                    assert!(!model.contains_key(&k));
                }
            }
            92..=94 => {
                dbm.close().unwrap();
                dbm = reopen(path);
            }
            95..=97 => {
                let kinds = [CodecKind::None, CodecKind::Lz4, CodecKind::Zstd, CodecKind::ZstdDict];
                let to = kinds[rng.below(kinds.len() as u64) as usize];
                let buckets = [256u64, 300, 1000, 4096][rng.below(4) as usize];
                dbm.rebuild(&Params::parse(&format!("bucket_comp={to},num_buckets={buckets}")).unwrap()).unwrap();
                let properties = dbm.inspect().unwrap().properties();
                assert_eq!(property(&properties, "bucket_comp"), to.name());
                assert_eq!(property(&properties, "num_buckets"), (buckets.div_ceil(256) * 256).to_string());
                check_content(&dbm, &model);
            }
            98 => {
                if rng.below(4) == 0 {
                    dbm.clear().unwrap();
                    model.clear();
                }
            }
            _ => check_content(&dbm, &model),
        }
        if step.is_multiple_of(250) {
            check_content(&dbm, &model);
        }
    }
    check_content(&dbm, &model);
    dbm.close().unwrap();
    let reopened = reopen(path);
    check_content(&reopened, &model);
    reopened.close().unwrap();
}

#[test]
fn every_codec_matches_a_model_through_batches_reopens_and_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    for (i, codec) in CodecKind::ALL.into_iter().enumerate() {
        let path = dir.path().join(format!("{codec}.kumz"));
        run(&path, codec, 0x5eed + i as u64);
    }
}

#[test]
fn opens_through_the_registry_by_extension_and_sizes_buckets_from_expected_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sized.kumz");
    let dbm = kura::open(&path, OpenMode::Create, &Params::parse("expected_records=100000,bucket_records=8").unwrap())
        .unwrap();
    let properties = dbm.inspect().unwrap().properties();
    assert_eq!(property(&properties, "class"), "CompactDbm");
    assert_eq!(property(&properties, "num_buckets"), (12500u64.div_ceil(256) * 256).to_string());
    assert_eq!(property(&properties, "bucket_comp"), "zstd-dict", "the default codec");
    assert_eq!(property(&properties, "dict_trained"), "false");
    let default = CompactDbm::new(&Params::new()).unwrap();
    let properties = default.inspect().unwrap().properties();
    assert_eq!(
        property(&properties, "num_buckets"),
        (CompactDbm::DEFAULT_EXPECTED_RECORDS / CompactDbm::DEFAULT_BUCKET_RECORDS).to_string()
    );
    assert!(CompactDbm::new(&Params::parse("bucket_comp=nope").unwrap()).is_err());
    assert!(CompactDbm::new(&Params::parse("buckets=3").unwrap()).is_err());
}

#[test]
fn a_rebuild_without_a_count_sizes_buckets_for_the_records_and_should_be_rebuilt_says_when() {
    let dbm = CompactDbm::new(&Params::parse("num_buckets=256,bucket_comp=lz4").unwrap()).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..20000u32 {
        batch.set(format!("{i:08}"), format!("value {i}"));
    }
    dbm.write_batch(&batch).unwrap();
    assert!(dbm.should_be_rebuilt().unwrap(), "78 records a bucket is over four times the target");
    dbm.rebuild(&Params::new()).unwrap();
    assert!(!dbm.should_be_rebuilt().unwrap());
    let properties = dbm.inspect().unwrap().properties();
    let sized = 20000u64.div_ceil(CompactDbm::DEFAULT_BUCKET_RECORDS);
    assert_eq!(property(&properties, "num_buckets"), (sized.div_ceil(256) * 256).to_string());
    assert_eq!(property(&properties, "bucket_comp"), "lz4");
    assert_eq!(dbm.get(b"00012345").unwrap(), b"value 12345");
    assert_eq!(dbm.count().unwrap(), 20000);
    dbm.rebuild(&Params::parse("bucket_records=16").unwrap()).unwrap();
    let properties = dbm.inspect().unwrap().properties();
    assert_eq!(
        property(&properties, "num_buckets"),
        (1250u64.div_ceil(256) * 256).to_string(),
        "sized for the records held"
    );
    assert_eq!(dbm.get(b"00012345").unwrap(), b"value 12345");
}

#[test]
fn a_zstd_dict_rebuild_trains_a_dictionary_that_shrinks_the_buckets() {
    let dbm = CompactDbm::new(&Params::parse("num_buckets=4096,bucket_comp=zstd").unwrap()).unwrap();
    let mut rng = SplitMix64::new(3);
    let mut model = Model::new();
    for _ in 0..4 {
        dbm.write_batch(&bulk(&mut rng, &mut model, 1500)).unwrap();
    }
    let compressed = |dbm: &CompactDbm| -> u64 {
        property(&dbm.inspect().unwrap().properties(), "compressed_bytes").parse().unwrap()
    };
    let before = compressed(&dbm);
    dbm.rebuild(&Params::parse("bucket_comp=zstd-dict,num_buckets=4096").unwrap()).unwrap();
    let properties = dbm.inspect().unwrap().properties();
    assert_ne!(property(&properties, "dict_size"), "0");
    assert!(compressed(&dbm) < before, "{} !< {before}", compressed(&dbm));
    check_content(&dbm, &model);
}
