//! The memory engines' backing file: saved on close and synchronize, reopened identical, and
//! a truncated or corrupted file refused with BrokenData (never a panic).
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

#[path = "support/compact_snapshot.rs"]
mod compact_snapshot;

use std::collections::BTreeMap;
use std::path::Path;

use kura::{open, CacheDbm, Dbm, DbmExt, ErrorKind, OpenMode, Params};

const ENGINES: [(&str, &str); 3] = [("kumt", ""), ("kumb", ""), ("kumc", "cap_rec_num=100000")];

fn fill(dbm: &dyn Dbm) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for i in 0..3000u32 {
        let key = format!("key{i:05}").into_bytes();
        let value = vec![(i % 251) as u8; (i % 97) as usize];
        dbm.set(&key, &value, true).unwrap();
        model.insert(key, value);
    }
    dbm.set(b"", b"empty key", true).unwrap();
    model.insert(Vec::new(), b"empty key".to_vec());
    model
}

fn content(dbm: &dyn Dbm) -> BTreeMap<Vec<u8>, Vec<u8>> {
    dbm.records().unwrap().map(|r| r.unwrap()).collect()
}

fn reopen(path: &Path, params: &str, mode: OpenMode) -> kura::Result<Box<dyn Dbm>> {
    open(path, mode, &Params::parse(params).unwrap())
}

#[test]
fn save_and_reopen_identical() {
    for (extension, params) in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("db.{extension}"));
        let dbm = reopen(&path, params, OpenMode::Create).unwrap();
        assert!(path.exists(), "{extension}: a created database has its file at once");
        let model = fill(dbm.as_ref());
        dbm.synchronize(false).unwrap();
        // Synchronize alone makes the file complete: a reader sees everything.
        assert_eq!(content(reopen(&path, params, OpenMode::ReadOnly).unwrap().as_ref()), model);
        dbm.remove(b"key00000").unwrap();
        dbm.close().unwrap();
        let mut model = model;
        model.remove(b"key00000".as_slice());
        let reopened = reopen(&path, params, OpenMode::Write).unwrap();
        assert_eq!(content(reopened.as_ref()), model, "{extension}");
        reopened.set(b"after", b"reopen", true).unwrap();
        // Dropping without close still writes the file back.
        drop(reopened);
        let last = reopen(&path, params, OpenMode::ReadOnly).unwrap();
        assert_eq!(last.get(b"after").unwrap(), b"reopen");
        assert!(!dir.path().join(format!("db.{extension}.tmp")).exists());
        // Truncate starts empty.
        let truncated = reopen(&path, params, OpenMode::Truncate).unwrap();
        assert_eq!(truncated.count().unwrap(), 0);
    }
}

#[test]
fn missing_file_is_not_found_unless_created() {
    let dir = tempfile::tempdir().unwrap();
    for (extension, params) in ENGINES {
        let path = dir.path().join(format!("none.{extension}"));
        for mode in [OpenMode::ReadOnly, OpenMode::Write] {
            assert_eq!(reopen(&path, params, mode).err().unwrap().kind(), ErrorKind::NotFound);
        }
    }
}

#[test]
fn truncated_or_corrupted_file_is_broken_data() {
    for (extension, params) in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("db.{extension}"));
        let dbm = reopen(&path, params, OpenMode::Create).unwrap();
        for i in 0..50u32 {
            dbm.set(&i.to_be_bytes(), &[i as u8; 40], true).unwrap();
        }
        dbm.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let broken = dir.path().join(format!("broken.{extension}"));
        let mut cuts: Vec<usize> = (0..40).collect();
        cuts.extend((40..bytes.len()).step_by(61));
        cuts.push(bytes.len() - 1);
        for cut in cuts {
            std::fs::write(&broken, &bytes[..cut]).unwrap();
            let error = reopen(&broken, params, OpenMode::ReadOnly).err().unwrap();
            assert_eq!(error.kind(), ErrorKind::BrokenData, "{extension} cut at {cut}");
        }
        for at in (0..bytes.len()).step_by(13) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x01;
            std::fs::write(&broken, &flipped).unwrap();
            let error = reopen(&broken, params, OpenMode::Write).err().unwrap();
            assert_eq!(error.kind(), ErrorKind::BrokenData, "{extension} flip at {at}");
        }
        // A file of another kind.
        std::fs::write(&broken, vec![0xffu8; 4096]).unwrap();
        assert_eq!(reopen(&broken, params, OpenMode::Create).err().unwrap().kind(), ErrorKind::BrokenData);
    }
}

#[test]
fn cache_keeps_recency_order_across_reopen_and_applies_smaller_caps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lru.kumc");
    let params = Params::parse("cap_rec_num=10,num_slots=1").unwrap();
    let dbm = CacheDbm::open(&path, OpenMode::Create, &params).unwrap();
    for i in 0..10u8 {
        dbm.set(&[i], b"v", true).unwrap();
    }
    dbm.get(&[0]).unwrap();
    let before = dbm.slot_keys_oldest_first(0);
    dbm.close().unwrap();
    let reopened = CacheDbm::open(&path, OpenMode::Write, &params).unwrap();
    assert_eq!(reopened.slot_keys_oldest_first(0), before);
    reopened.close().unwrap();
    // Reopened with a smaller cap: the least recently used records are dropped.
    let smaller = CacheDbm::open(&path, OpenMode::Write, &Params::parse("cap_rec_num=3,num_slots=1").unwrap()).unwrap();
    assert_eq!(smaller.slot_keys_oldest_first(0), before[7..].to_vec());
}

/// The cache's own parameters, as `inspect` reports them.
fn cache_settings(dbm: &dyn Dbm) -> Vec<(String, String)> {
    let wanted = ["cap_rec_num", "cap_mem_bytes", "num_slots", "policy"];
    dbm.inspect().unwrap().properties().into_iter().filter(|(name, _)| wanted.contains(&name.as_str())).collect()
}

#[test]
fn a_cache_file_keeps_its_parameters_and_reopens_without_any() {
    let dir = tempfile::tempdir().unwrap();
    for params in ["cap_rec_num=5000,cap_mem_bytes=400000,num_slots=3,policy=tinylfu", "cap_rec_num=2000"] {
        let path = dir.path().join("kept.kumc");
        let dbm = reopen(&path, params, OpenMode::Truncate).unwrap();
        let model = fill(dbm.as_ref());
        let settings = cache_settings(dbm.as_ref());
        let kept = content(dbm.as_ref());
        assert!(kept.len() < model.len(), "{params}: the caps evicted some records");
        dbm.close().unwrap();
        for mode in [OpenMode::ReadOnly, OpenMode::Write, OpenMode::Create] {
            let reopened = reopen(&path, "", mode).unwrap();
            assert_eq!(cache_settings(reopened.as_ref()), settings, "{params}, {mode:?}");
            assert_eq!(content(reopened.as_ref()), kept, "{params}, {mode:?}");
            reopened.close().unwrap();
        }
        // A parameter given at the reopen replaces the saved one; the others stay.
        let smaller = reopen(&path, "cap_rec_num=20", OpenMode::Write).unwrap();
        let expected: Vec<(String, String)> = settings
            .iter()
            .map(|(name, value)| (name.clone(), if name == "cap_rec_num" { "20".to_string() } else { value.clone() }))
            .collect();
        assert_eq!(cache_settings(smaller.as_ref()), expected, "{params}");
        assert!(smaller.count().unwrap() <= 20);
        smaller.close().unwrap();
        assert_eq!(cache_settings(reopen(&path, "", OpenMode::ReadOnly).unwrap().as_ref()), expected, "{params}");
    }
}

#[test]
fn a_cache_file_of_format_version_1_still_needs_its_caps() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cache.kumc");
    assert_eq!(std::fs::read(&fixture).unwrap()[8], 1, "the fixture is a version 1 snapshot");
    let error = reopen(&fixture, "", OpenMode::ReadOnly).err().unwrap();
    assert!(error.message().contains("cap_rec_num"), "{error}");
    assert!(reopen(&fixture, "cap_rec_num=10000", OpenMode::ReadOnly).unwrap().count().unwrap() > 0);
}

/// A cache snapshot (version 2) whose saved parameters are `params`, checksum right.
fn cache_snapshot_saving(params: &[u8]) -> Vec<u8> {
    let mut head = b"KURAMEM\0\x02c\0\0\0\0\0\0".to_vec();
    head.extend(compact_snapshot::varint(params.len() as u64));
    head.extend_from_slice(params);
    compact_snapshot::assemble(&head, &vec![(b"k".to_vec(), b"v".to_vec())])
}

#[test]
fn saved_cache_parameters_that_are_damaged_or_impossible_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forged.kumc");
    std::fs::write(&path, cache_snapshot_saving(b"cap_rec_num=9")).unwrap();
    assert_eq!(reopen(&path, "", OpenMode::ReadOnly).unwrap().get(b"k").unwrap(), b"v", "the forgery is sound");
    let cases: [(&[u8], ErrorKind); 5] = [
        (b"cap_rec_num", ErrorKind::BrokenData),
        (b"cap_rec_num=9,\xff\xfe=1", ErrorKind::BrokenData),
        (b"cap_rec_num=nine", ErrorKind::InvalidArgument),
        (b"cap_rec_num=0", ErrorKind::InvalidArgument),
        (b"cap_rec_num=9,num_slots=99999,policy=fifo", ErrorKind::InvalidArgument),
    ];
    for (params, kind) in cases {
        std::fs::write(&path, cache_snapshot_saving(params)).unwrap();
        let error = reopen(&path, "", OpenMode::ReadOnly).err().unwrap();
        assert_eq!(error.kind(), kind, "{:?}: {error}", String::from_utf8_lossy(params));
        // Parameters given at the open replace the saved ones that are wrong.
        if kind == ErrorKind::InvalidArgument {
            let given = "cap_rec_num=9,num_slots=1,policy=lru";
            assert_eq!(reopen(&path, given, OpenMode::ReadOnly).unwrap().get(b"k").unwrap(), b"v");
        }
    }
}
