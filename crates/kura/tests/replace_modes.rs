//! Which open modes and library calls may replace a database, and that none does unasked
//! (issue 43, item 4; the list is in docs/durability.md, "What replaces a database"):
//! `Create`, `Write` and `ReadOnly` keep every engine's records; `Truncate` is the one mode
//! that empties, and not a database another handle holds (a shard set included); a restore
//! never writes over an existing database.

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::collections::BTreeMap;

use kura::{DbmExt, ErrorKind, OpenMode, Params};

/// The parameters an engine needs to open (CacheDbm's cap), sized small (HashDbm's buckets),
/// from the registry.
fn params_of(engine: &kura::Engine) -> Params {
    engine.bench_params(100).or_defaults(&engine.import_params(100)).without("num_shards").with("engine", engine.name)
}

fn contents(path: &std::path::Path, params: &Params) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = kura::open(path, OpenMode::ReadOnly, params).unwrap();
    let records = db.records().unwrap().map(Result::unwrap).collect();
    db.close().unwrap();
    records
}

#[test]
fn only_truncate_empties_and_every_other_mode_keeps_the_records() {
    let dir = tempfile::tempdir().unwrap();
    for engine in kura::engines() {
        let path = dir.path().join(format!("db.{}", engine.extension));
        let params = params_of(engine);
        let model: BTreeMap<Vec<u8>, Vec<u8>> =
            (0..30u32).map(|i| (format!("k{i}").into_bytes(), format!("v{i}").into_bytes())).collect();
        let db = kura::open(&path, OpenMode::Create, &params).unwrap();
        for (key, value) in &model {
            db.set(key, value, true).unwrap();
        }
        db.close().unwrap();
        for mode in [OpenMode::ReadOnly, OpenMode::Write, OpenMode::Create] {
            kura::open(&path, mode, &params).unwrap().close().unwrap();
            assert_eq!(contents(&path, &params), model, "{} after {mode:?}", engine.name);
        }
        kura::open(&path, OpenMode::Truncate, &params).unwrap().close().unwrap();
        assert!(contents(&path, &params).is_empty(), "{}: Truncate kept records", engine.name);
    }
}

#[test]
fn truncating_a_shard_set_another_handle_holds_is_refused_and_removes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("set.kuh");
    let params = Params::new().with("num_shards", 3);
    let held = kura::open(&base, OpenMode::Create, &params).unwrap();
    held.set(b"k", b"v", true).unwrap();
    for wanted in [2, 3] {
        let error = kura::open(&base, OpenMode::Truncate, &Params::new().with("num_shards", wanted)).err().unwrap();
        assert_eq!(error.kind(), ErrorKind::Locked, "{error}");
    }
    assert_eq!(kura::shard_dbm::existing_shards(&base).unwrap().len(), 3);
    assert_eq!(held.get(b"k").unwrap(), b"v");
    held.close().unwrap();
    assert_eq!(kura::open(&base, OpenMode::ReadOnly, &Params::new()).unwrap().get(b"k").unwrap(), b"v");
    // Once nobody holds it, truncating is what was asked.
    kura::open(&base, OpenMode::Truncate, &Params::new().with("num_shards", 2)).unwrap().close().unwrap();
    assert_eq!(kura::shard_dbm::existing_shards(&base).unwrap().len(), 2);
}

#[test]
fn a_restore_never_writes_over_an_existing_database() {
    let dir = tempfile::tempdir().unwrap();
    for engine in kura::engines().iter().filter(|e| e.can_restore()) {
        let params = params_of(engine);
        let with_shards = if engine.shard_set { params.clone().with("num_shards", 2) } else { params.clone() };
        let source = dir.path().join(format!("source.{}", engine.extension));
        let target = dir.path().join(format!("target.{}", engine.extension));
        for (path, value) in [(&source, b"new"), (&target, b"old")] {
            let db = kura::open(path, OpenMode::Create, &with_shards).unwrap();
            db.set(b"k", value, true).unwrap();
            db.close().unwrap();
        }
        let error = engine.restore(&source, &target).err().unwrap();
        assert_eq!(error.kind(), ErrorKind::Duplicate, "{}: {error}", engine.name);
        let kept = kura::open(&target, OpenMode::ReadOnly, &params).unwrap();
        assert_eq!(kept.get(b"k").unwrap(), b"old", "{}", engine.name);
    }
}
