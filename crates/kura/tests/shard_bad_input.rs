//! ShardDbm refuses damaged or mismatched sets with typed errors: a missing shard file,
//! shards of different engines or codecs, files of two set sizes under one base, a
//! `num_shards` that contradicts the files, and no set at all; its restore salvages each shard
//! and reports shard by shard.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "indexes into a report of three shards and a found marker")]

use std::path::Path;

use kura::shard_dbm::shard_path;
use kura::{Dbm, ErrorKind, HashDbm, OpenMode, Params, ShardDbm, TreeDbm};

fn make_set(base: &Path, count: usize, params: &Params) {
    let db = kura::open(base, OpenMode::Create, &params.clone().with("num_shards", count)).unwrap();
    for i in 0..100 {
        db.set(format!("k{i}").as_bytes(), b"v", true).unwrap();
    }
    db.close().unwrap();
}

fn open_error(base: &Path, mode: OpenMode, params: &Params) -> kura::Error {
    match kura::open(base, mode, params) {
        Ok(_) => panic!("{} opened", base.display()),
        Err(e) => e,
    }
}

#[test]
fn a_missing_shard_is_broken_data_naming_the_file_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("db.kuh");
    make_set(&base, 4, &Params::new());
    std::fs::remove_file(shard_path(&base, 2, 4)).unwrap();
    for mode in [OpenMode::ReadOnly, OpenMode::Write, OpenMode::Create] {
        let error = open_error(&base, mode, &Params::new().with("engine", "shard"));
        assert_eq!(error.kind(), ErrorKind::BrokenData, "{error}");
        assert!(error.message().contains("db.kuh-00002-of-00004"), "{error}");
        assert!(error.message().contains("missing"), "{error}");
    }
    assert!(!shard_path(&base, 2, 4).exists(), "opening never recreates a lost shard empty");
}

#[test]
fn a_stale_set_of_another_size_beside_the_set_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("db.kut");
    make_set(&base, 4, &Params::new());
    std::fs::copy(shard_path(&base, 0, 4), shard_path(&base, 0, 3)).unwrap();
    let error = open_error(&base, OpenMode::ReadOnly, &Params::new());
    assert_eq!(error.kind(), ErrorKind::BrokenData, "{error}");
    assert!(error.message().contains("-of-00003 beside -of-00004"), "{error}");
    // Truncate replaces the whole mess with a new set.
    let db = kura::open(&base, OpenMode::Truncate, &Params::new().with("num_shards", 2)).unwrap();
    assert_eq!(db.count().unwrap(), 0);
    db.close().unwrap();
    assert_eq!(kura::shard_dbm::find_set(&base).unwrap(), Some(2));
}

#[test]
fn a_shard_of_another_engine_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("db.kuh");
    make_set(&base, 3, &Params::new());
    let intruder = shard_path(&base, 1, 3);
    std::fs::remove_file(&intruder).unwrap();
    TreeDbm::open(&intruder, OpenMode::Create, &Params::new()).unwrap().close().unwrap();
    let error = open_error(&base, OpenMode::ReadOnly, &Params::new());
    assert_eq!(error.kind(), ErrorKind::BrokenData, "{error}");
    assert!(error.message().contains("shard 1 of 3"), "{error}");
    assert!(error.message().contains("HashDbm"), "{error}");
}

#[test]
fn a_shard_with_another_codec_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("db.kuh");
    make_set(&base, 3, &Params::new().with("record_comp", "zstd"));
    let intruder = shard_path(&base, 2, 3);
    std::fs::remove_file(&intruder).unwrap();
    HashDbm::open(&intruder, OpenMode::Create, &Params::new().with("record_comp", "lz4")).unwrap().close().unwrap();
    let error = open_error(&base, OpenMode::Write, &Params::new());
    assert_eq!(error.kind(), ErrorKind::BrokenData, "{error}");
    assert!(error.message().contains("record_comp is lz4 but shard 0's is zstd"), "{error}");
}

#[test]
fn num_shards_contradicting_the_files_and_absent_sets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("db.kuh");
    let error = open_error(&base, OpenMode::ReadOnly, &Params::new().with("num_shards", 4));
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    make_set(&base, 4, &Params::new());
    let error = open_error(&base, OpenMode::Write, &Params::new().with("num_shards", 8));
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    for bad in ["0", "100000", "x"] {
        let error = open_error(&dir.path().join("new.kuh"), OpenMode::Create, &Params::new().with("num_shards", bad));
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{bad}: {error}");
    }
    let error = open_error(&dir.path().join("x.kus"), OpenMode::Create, &Params::new().with("inner_engine", "shard"));
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    let single = dir.path().join("single.kuh");
    HashDbm::open(&single, OpenMode::Create, &Params::new()).unwrap().close().unwrap();
    let error = open_error(&single, OpenMode::Create, &Params::new().with("num_shards", 2));
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(kura::shard_dbm::find_set(&single).unwrap().is_none(), "no shard was made beside it");
}

#[test]
fn restore_salvages_every_shard_into_a_new_set() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("db.kut");
    make_set(&base, 3, &Params::new());
    let dest = dir.path().join("new.kut");
    assert_eq!(ShardDbm::restore_set(&base, &dest, kura::engines()).unwrap().records, 100);
    let db = kura::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(db.count().unwrap(), 100);
    assert_eq!(db.get(b"k42").unwrap(), b"v");
}

#[test]
fn restore_reports_shard_by_shard_and_keeps_the_shards_a_missing_one_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("db.kuh");
    let db = kura::open(&base, OpenMode::Create, &Params::new().with("num_shards", 3)).unwrap();
    let model: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = (0..300)
        .map(|i| (format!("k{i:04}").into_bytes(), format!("VALUE-{i:04}-{}", "x".repeat(i % 40)).into_bytes()))
        .collect();
    for (key, value) in &model {
        db.set(key, value, true).unwrap();
    }
    db.close().unwrap();
    let count_of = |index| {
        HashDbm::open(shard_path(&base, index, 3), OpenMode::ReadOnly, &Params::new()).unwrap().count().unwrap()
    };
    let (in_0, in_1) = (count_of(0), count_of(1));
    // One value byte of shard 1 damaged, shard 2's file gone.
    let shard_1 = shard_path(&base, 1, 3);
    let mut bytes = std::fs::read(&shard_1).unwrap();
    let at = bytes.windows(6).position(|w| w == b"VALUE-").unwrap();
    bytes[at + 7] ^= 0x01;
    std::fs::write(&shard_1, &bytes).unwrap();
    std::fs::remove_file(shard_path(&base, 2, 3)).unwrap();

    let dest = dir.path().join("new.kuh");
    let report = ShardDbm::restore_set(&base, &dest, kura::engines()).unwrap();
    let per_shard: Vec<(u64, u64)> = report.shards.iter().map(|s| (s.records, s.dropped_records)).collect();
    assert_eq!(per_shard, [(in_0, 0), (in_1 - 1, 1), (0, 0)], "{report:?}");
    assert!(report.shards[0].dropped.is_empty(), "{report:?}");
    assert!(report.shards[2].dropped[0].contains("nothing restored"), "{report:?}");
    assert!(report.dropped.iter().any(|why| why.starts_with("shard 2: nothing restored")), "{report:?}");
    assert_eq!(report.records, in_0 + in_1 - 1);
    // The new set opens, with the intact records of shards 0 and 1, each as written.
    let restored = kura::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(restored.count().unwrap(), report.records);
    let mut seen = 0;
    for record in kura::DbmExt::records(restored.as_ref()).unwrap() {
        let (key, value) = record.unwrap();
        assert_eq!(model.get(&key), Some(&value), "a restored record is one that was written");
        seen += 1;
    }
    assert_eq!(seen, report.records);
}

/// A set of caches whose shard 0 is gone: the empty shard put in its place must take the caps
/// its restored siblings have (a cache cannot be made without its record cap; the restore
/// failed, leaving the first shards of a new set behind), and the new set must hold every
/// record of the others, each as written, within the caps.
#[test]
fn restore_of_a_cache_set_missing_a_shard_gives_the_empty_one_its_siblings_caps() {
    let capped: Vec<&kura::Engine> = kura::engines().iter().filter(|engine| !engine.shared_caps.is_empty()).collect();
    assert!(!capped.is_empty(), "the registry lists the caches' shared caps");
    for engine in capped {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join(format!("db.{}", engine.extension));
        let params = Params::new().with("num_shards", 3).with("cap_rec_num", 3000);
        let db = kura::open(&base, OpenMode::Create, &params).unwrap();
        let model: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
            (0..300).map(|i| (format!("k{i:04}").into_bytes(), format!("v{i}").into_bytes())).collect();
        for (key, value) in &model {
            db.set(key, value, true).unwrap();
        }
        db.close().unwrap();
        let shard_stats = |base: &Path, index| {
            let shard =
                kura::open(shard_path(base, index, 3), OpenMode::ReadOnly, &Params::new().with("engine", engine.name));
            shard.unwrap().inspect().unwrap()
        };
        let sibling = shard_stats(&base, 1);
        std::fs::remove_file(shard_path(&base, 0, 3)).unwrap();

        let dest = dir.path().join(format!("new.{}", engine.extension));
        let report = ShardDbm::restore_set(&base, &dest, kura::engines())
            .unwrap_or_else(|e| panic!("{}: the restore failed: {e}", engine.name));
        assert!(report.shards[0].dropped[0].contains("nothing restored"), "{}: {report:?}", engine.name);
        let empty = shard_stats(&dest, 0);
        assert_eq!(empty.count, 0);
        for cap in engine.shared_caps {
            assert_eq!(empty.property(cap), sibling.property(cap), "{}: {cap} of the empty shard", engine.name);
        }
        let restored = kura::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
        let mut seen = 0;
        for record in kura::DbmExt::records(restored.as_ref()).unwrap() {
            let (key, value) = record.unwrap();
            assert_eq!(model.get(&key), Some(&value), "{}: a restored record is one that was written", engine.name);
            seen += 1;
        }
        assert_eq!(seen, report.records, "{}", engine.name);
        assert!(seen > 0 && seen < 300, "{}: shards 1 and 2 hold some of the 300 records: {seen}", engine.name);
    }
}

/// A restore that fails partway (here a shard that is a directory, which no engine can read:
/// an I/O error, not damage an empty shard could stand in for) leaves no shard of the new set
/// behind, so that the next attempt does not find a database already there.
#[test]
fn a_restore_that_fails_partway_leaves_no_shard_of_the_new_set() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("db.kuh");
    make_set(&base, 3, &Params::new());
    let last = shard_path(&base, 2, 3);
    std::fs::remove_file(&last).unwrap();
    std::fs::create_dir(&last).unwrap();
    let dest = dir.path().join("new.kuh");
    let error = ShardDbm::restore_set(&base, &dest, kura::engines()).unwrap_err();
    assert_ne!(error.kind(), ErrorKind::BrokenData, "{error}");
    for index in 0..3 {
        let shard = shard_path(&dest, index, 3);
        assert!(!shard.exists(), "{} was left behind after: {error}", shard.display());
    }
}
