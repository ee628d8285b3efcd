//! Pinned file formats: small database files written by this release are committed under
//! `tests/fixtures/`, and every later build must open each one and find every record.
//!
//! A change to an encoder that also changes its decoder passes every round-trip test and
//! would silently break the files users already have; these fixtures catch it. A deliberate
//! format change bumps the format version, keeps reading (or clearly refuses) the old
//! fixtures, adds new ones, and says so in docs/format.md.
//!
//! `KURA_WRITE_FIXTURES=1 cargo test -p kura --test format_fixtures` writes the fixtures that
//! are missing (for a new engine, or a new format version: commit the new files beside the
//! old ones, which are never rewritten). A ShardDbm set is a set of files of other engines,
//! each pinned by its own fixtures.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kura::{Dbm, DbmExt, OpenMode, Params};

/// One fixture: its file name and the parameters it was created with. The engine comes from
/// the extension, as users open files.
const FIXTURES: &[(&str, &str)] = &[
    ("hash-none.kuh", "num_buckets=64"),
    ("hash-zlib.kuh", "num_buckets=64,record_comp=zlib"),
    ("hash-zstd.kuh", "num_buckets=64,record_comp=zstd"),
    ("hash-lz4.kuh", "num_buckets=64,record_comp=lz4"),
    ("hash-lzma.kuh", "num_buckets=64,record_comp=lzma"),
    ("hash-snappy.kuh", "num_buckets=64,record_comp=snappy"),
    ("hash-zstd-dict.kuh", "num_buckets=64,record_comp=zstd-dict"),
    ("hash-appending.kuh", "num_buckets=64,update_mode=appending,record_comp=lz4"),
    // Format version 2 (dictionary and free-list checksums); the files above are version 1.
    ("hash-v2-none.kuh", "num_buckets=64"),
    ("hash-v2-zstd-dict.kuh", "num_buckets=64,record_comp=zstd-dict"),
    // Format version 3 (wide checks in records crossing a sector).
    ("hash-v3-none.kuh", "num_buckets=64"),
    ("hash-v3-zstd-dict.kuh", "num_buckets=64,record_comp=zstd-dict"),
    ("hash-v3-appending.kuh", "num_buckets=64,update_mode=appending,record_comp=lz4"),
    // Format version 4 (a copy of the header at 512, the buckets at 1,024).
    ("hash-v4-none.kuh", "num_buckets=64"),
    ("hash-v4-zstd-dict.kuh", "num_buckets=64,record_comp=zstd-dict"),
    ("hash-v4-appending.kuh", "num_buckets=64,update_mode=appending,record_comp=lz4"),
    // Format version 5 (the wide check in every record).
    ("hash-v5-none.kuh", "num_buckets=64"),
    ("hash-v5-zstd-dict.kuh", "num_buckets=64,record_comp=zstd-dict"),
    ("hash-v5-appending.kuh", "num_buckets=64,update_mode=appending,record_comp=lz4"),
    // Version 5 rebuilt since 2026-12-01: packed three records a bucket, chain pointers
    // without the spare byte, `rebuilt_records` in the header (`write_fixture` rebuilds a
    // fixture named "packed").
    ("hash-v5-packed.kuh", "num_buckets=64,record_comp=lz4"),
    ("tree-none.kut", "max_page_size=1024"),
    ("tree-zstd.kut", "max_page_size=1024,record_comp=zstd"),
    ("tree-zstd-dict.kut", "max_page_size=1024,record_comp=zstd-dict"),
    ("tree-numeric.kut", "max_page_size=1024,key_comparator=numeric,record_comp=snappy"),
    // TreeDbm format version 2 (slot hints in the branches' child references); the four
    // above are version 1.
    ("tree-v2-none.kut", "max_page_size=1024"),
    ("tree-v2-zstd-dict.kut", "max_page_size=1024,record_comp=zstd-dict"),
    ("tree-v2-numeric.kut", "max_page_size=1024,key_comparator=numeric,record_comp=snappy"),
    ("tiny.kumt", ""),
    ("baby.kumb", ""),
    ("cache.kumc", "cap_rec_num=10000"),
    ("compact-zstd.kumz", "num_buckets=256,bucket_comp=zstd"),
    // Memory snapshot version 2 (the parameters a reopen needs); the four above are version 1.
    ("tiny-v2.kumt", ""),
    ("baby-v2.kumb", ""),
    ("cache-v2.kumc", "cap_rec_num=10000,policy=tinylfu"),
    ("compact-v2-zstd.kumz", "num_buckets=256,bucket_comp=zstd"),
    // SegCacheDbm's first snapshots: memory snapshot version 2 with class 's'.
    ("segcache.kums", "cap_rec_num=10000,cap_mem_bytes=1000000,num_slots=4"),
    // Memory snapshot version 3 (the records in blocks, each with its checksum).
    ("tiny-v3.kumt", ""),
    ("baby-v3.kumb", ""),
    ("cache-v3.kumc", "cap_rec_num=10000,policy=tinylfu"),
    ("compact-v3-zstd.kumz", "num_buckets=256,bucket_comp=zstd"),
    // CompactDbm's layout record format 2 (how its dictionary was trained); the three compact
    // fixtures above have format 1.
    ("compact-layout2-zstd-dict.kumz", "num_buckets=256,bucket_comp=zstd-dict"),
];

/// The records every fixture holds: 400 keys with values of varied length and
/// compressibility (dictionary-like text, a few longer ones, an empty one).
fn records() -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..400u32)
        .map(|i| {
            // Numeric-comparator trees need 8-byte big-endian keys; the others take them too.
            let key = u64::from(i * 7919 % 100_003).to_be_bytes().to_vec();
            let value = match i % 10 {
                0 => Vec::new(),
                1 => format!("{i}").repeat(i as usize % 50 + 1).into_bytes(),
                _ => format!(r#"{{"word":"w{i:05}","gloss":"sense {} of entry {i}, see also w{:05}"}}"#, i % 13, i / 3)
                    .into_bytes(),
            };
            (key, value)
        })
        .collect()
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Writes a fixture: the records, plus an update and a removal so that the file holds more
/// than fresh records, then a rebuild where the codec trains a dictionary.
fn write_fixture(path: &Path, params: &str) {
    let params = Params::parse(params).unwrap();
    let _ = std::fs::remove_file(path);
    let db = kura::open(path, OpenMode::Create, &params).unwrap();
    db.set(b"to be removed", b"x", true).unwrap();
    db.set(b"to be updated", b"old", true).unwrap();
    for (key, value) in records() {
        db.set(&key, &value, true).unwrap();
    }
    db.remove(b"to be removed").unwrap();
    db.remove(b"to be updated").unwrap();
    for codec_param in ["record_comp", "bucket_comp"] {
        if params.get(codec_param) == Some("zstd-dict") {
            db.rebuild(&Params::parse(&format!("{codec_param}=zstd-dict,dict_size=2048")).unwrap()).unwrap();
        }
    }
    if is_packed(path) {
        db.rebuild(&Params::new()).unwrap();
    }
    db.close().unwrap();
}

/// Whether the fixture at `path` is a rebuild's packed copy.
fn is_packed(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name.to_string_lossy().contains("packed"))
}

#[test]
fn every_committed_fixture_opens_with_every_record() {
    let dir = fixture_dir();
    if std::env::var_os("KURA_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, params) in FIXTURES {
            if !dir.join(name).exists() {
                write_fixture(&dir.join(name), params);
            }
        }
    }
    let expected = records();
    let scratch = tempfile::tempdir().unwrap();
    for (name, params) in FIXTURES {
        // A copy: opening must not be able to change the committed file.
        let path = scratch.path().join(name);
        std::fs::copy(dir.join(name), &path).unwrap_or_else(|e| panic!("fixture {name} is missing: {e}"));
        let params = Params::parse(params).unwrap();
        // Only parameters an engine needs to open (the cache's cap) are given again.
        let opening = params.get("cap_rec_num").map_or_else(Params::new, |cap| Params::new().with("cap_rec_num", cap));
        let codec = params.get("record_comp").or(params.get("bucket_comp"));
        let db = kura::open(&path, OpenMode::ReadOnly, &opening).unwrap_or_else(|e| panic!("{name}: {e}"));
        let found: BTreeMap<Vec<u8>, Vec<u8>> = db.records().unwrap().map(Result::unwrap).collect();
        assert_eq!(found, expected, "{name}: the records read back differ");
        assert_eq!(db.count().unwrap(), expected.len() as u64, "{name}");
        for (key, value) in &expected {
            assert_eq!(&db.get(key).unwrap(), value, "{name}");
        }
        assert!(db.get(b"to be removed").unwrap_err().is_not_found(), "{name}");
        let properties: BTreeMap<String, String> = db.inspect().unwrap().properties().into_iter().collect();
        if let Some(codec) = codec {
            let stored = properties.get("record_comp").or(properties.get("bucket_comp"));
            assert_eq!(stored.map(String::as_str), Some(codec), "{name}");
        }
        if is_packed(&path) {
            assert_eq!(properties.get("rebuilt_records"), Some(&expected.len().to_string()), "{name}");
        }
        db.close().unwrap();
    }
}

/// How `churn` writes into a fixture's copy.
struct Churn {
    /// Sets of keys `new N`, N in `0..new_keys` in a scattered order (7,919 is prime), each
    /// value 4 to `4 * value_units` bytes long.
    sets: u32,
    new_keys: u32,
    value_units: usize,
    /// After every this many sets, one record of the model is removed.
    remove_every: u32,
}

/// Sets and removes records in `db` as `how` says, doing the same to `model`.
fn churn(db: &dyn Dbm, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, how: Churn) {
    for i in 0..how.sets {
        let key = format!("new {:05}", u64::from(i) * 7919 % u64::from(how.new_keys)).into_bytes();
        let value = format!("{i:04}").repeat((i as usize * 37) % how.value_units + 1).into_bytes();
        db.set(&key, &value, true).unwrap();
        model.insert(key, value);
        if i % how.remove_every == 0 {
            let old = model.keys().nth(i as usize % (model.len() / 2).max(1)).cloned().unwrap();
            db.remove(&old).unwrap();
            model.remove(&old);
        }
    }
}

/// The format version in a HashDbm file's header (bytes 8 and 9, docs/format.md).
fn hash_format_version(path: &Path) -> u16 {
    let bytes = std::fs::read(path).unwrap();
    u16::from_le_bytes(bytes.get(8..10).unwrap().try_into().unwrap())
}

/// A file of an older HashDbm version takes writes as its own version: records of version 2
/// have no wide checks, so the file stays version 2 (a version 3 header would make a reader
/// look for wide checks in them), a version 3 file has its buckets where a version 4 copy of
/// the header would go, so it stays version 3, and a version 4 file's records lack the wide
/// check of version 5, so it stays version 4, until a rebuild writes it anew: in version 4,
/// the layout of `record_check=narrow`, which a rebuild keeps, or with `record_check=wide` in
/// version 5. Checked against a model through writes, a reopen and both rebuilds.
#[test]
fn an_older_hash_file_takes_writes_and_keeps_its_version_until_a_rebuild() {
    for (name, kept) in [
        ("hash-v2-none.kuh", 2),
        ("hash-none.kuh", 2),
        ("hash-v2-zstd-dict.kuh", 2),
        ("hash-v3-none.kuh", 3),
        ("hash-v4-none.kuh", 4),
    ] {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join(name);
        std::fs::copy(fixture_dir().join(name), &path).unwrap();
        let mut model = records();
        let db = kura::open(&path, OpenMode::Write, &Params::new()).unwrap();
        // Lengths from 1 to 1,200 bytes, so that records land across sectors too.
        churn(&*db, &mut model, Churn { sets: 600, new_keys: 600, value_units: 300, remove_every: 7 });
        db.close().unwrap();
        assert_eq!(hash_format_version(&path), kept, "{name}: the version after writes");
        let reopened = kura::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
        let properties: BTreeMap<String, String> = reopened.inspect().unwrap().properties().into_iter().collect();
        let kept_text = kept.to_string();
        assert_eq!(properties.get("format_version"), Some(&kept_text), "{name}");
        let copies = if kept >= 4 { "2" } else { "1" };
        assert_eq!(properties.get("header_copies").map(String::as_str), Some(copies), "{name}");
        assert_eq!(properties.get("record_check").map(String::as_str), Some("narrow"), "{name}");
        reopened.close().unwrap();
        let check = |what: &str| {
            let db = kura::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
            let found: BTreeMap<Vec<u8>, Vec<u8>> = db.records().unwrap().map(Result::unwrap).collect();
            assert_eq!(found, model, "{name}, {what}: the records read back differ");
            db.close().unwrap();
        };
        check("reopened");
        let db = kura::open(&path, OpenMode::Write, &Params::new()).unwrap();
        db.rebuild(&Params::new()).unwrap();
        db.close().unwrap();
        assert_eq!(hash_format_version(&path), 4, "{name}: the version after a rebuild");
        check("rebuilt");
        let db = kura::open(&path, OpenMode::Write, &Params::new()).unwrap();
        db.rebuild(&Params::new().with("record_check", "wide")).unwrap();
        db.close().unwrap();
        assert_eq!(hash_format_version(&path), 5, "{name}: the version after a rebuild with record_check=wide");
        check("rebuilt with the wide check");
    }
}

/// The format version in a TreeDbm file's header (bytes 8 to 11 of the copy at 0, docs/tree.md).
fn tree_format_version(path: &Path) -> u32 {
    let bytes = std::fs::read(path).unwrap();
    u32::from_le_bytes(bytes.get(8..12).unwrap().try_into().unwrap())
}

/// A TreeDbm file of format version 1 takes writes as version 1 (its branches' child
/// references without slot hints, which a version 1 reader refuses), through splits, merges,
/// a reopen and `check`, until a rebuild writes it as version 2 with hints that `check` finds
/// true; a new file is version 2. Checked against a model.
#[test]
fn an_older_tree_file_takes_writes_and_keeps_its_version_until_a_rebuild() {
    for name in ["tree-none.kut", "tree-zstd-dict.kut"] {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join(name);
        std::fs::copy(fixture_dir().join(name), &path).unwrap();
        assert_eq!(tree_format_version(&path), 1, "{name}: a version 1 fixture");
        let mut model = records();
        // A memory this small reads every page with `pread`, the path the hints size.
        let small = Params::new().with("cache_bytes", 4096).with("memory_bytes", 4096);
        let db = kura::open(&path, OpenMode::Write, &small).unwrap();
        churn(&*db, &mut model, Churn { sets: 1_500, new_keys: 1_500, value_units: 60, remove_every: 3 });
        db.close().unwrap();
        let check = |version: u32, what: &str| {
            assert_eq!(tree_format_version(&path), version, "{name}: the version {what}");
            let db = kura::open(&path, OpenMode::ReadOnly, &small).unwrap();
            let found: BTreeMap<Vec<u8>, Vec<u8>> = db.records().unwrap().map(Result::unwrap).collect();
            assert_eq!(found, model, "{name}, {what}: the records read back differ");
            for (key, value) in &model {
                assert_eq!(&db.get(key).unwrap(), value, "{name}, {what}");
            }
            let properties: BTreeMap<String, String> = db.inspect().unwrap().properties().into_iter().collect();
            assert_eq!(properties.get("format_version"), Some(&version.to_string()), "{name}, {what}");
            let report = db.check().unwrap();
            assert!(report.is_clean(), "{name}, {what}: {report:?}");
            db.close().unwrap();
        };
        check(1, "after writes");
        let db = kura::open(&path, OpenMode::Write, &Params::new()).unwrap();
        db.rebuild(&Params::new()).unwrap();
        db.close().unwrap();
        check(2, "after a rebuild");
    }
    let scratch = tempfile::tempdir().unwrap();
    let path = scratch.path().join("new.kut");
    kura::open(&path, OpenMode::Create, &Params::new()).unwrap().close().unwrap();
    assert_eq!(tree_format_version(&path), 2, "a new file");
}

/// Every HashDbm fixture restores whole into a file of the current version (the wide check in
/// every record, whatever the source had), also with one
/// header byte damaged (put back by the header checksum: the versions before 4 have no copy)
/// or with its whole header at 0 zeroed (version 4: the copy serves; before, the layout is
/// rebuilt from the file); `check` passes the fixture and reports the damaged header.
#[test]
fn every_hash_fixture_restores_whole_into_the_current_version() {
    let scratch = tempfile::tempdir().unwrap();
    let expected = records();
    for (name, _) in FIXTURES.iter().filter(|(name, _)| name.ends_with(".kuh")) {
        let original = std::fs::read(fixture_dir().join(name)).unwrap();
        let version = u16::from_le_bytes(original[8..10].try_into().unwrap());
        let mut damages: Vec<(&str, Vec<u8>)> = vec![("intact", original.clone())];
        let mut flipped = original.clone();
        flipped[40] ^= 0x10;
        damages.push(("byte 40 flipped", flipped));
        // Version 4: the copy serves; before, the layout is rebuilt from the file (tried on
        // the uncompressed fixture of each version: a rebuild samples every codec, slow in a
        // debug build).
        if version >= 4 || name.ends_with("none.kuh") {
            let mut zeroed = original.clone();
            zeroed[..128].fill(0);
            damages.push(("the header at 0 zeroed", zeroed));
        }
        for (what, bytes) in damages {
            let source = scratch.path().join(name);
            let dest = scratch.path().join("restored.kuh");
            let _ = std::fs::remove_file(&dest);
            std::fs::write(&source, &bytes).unwrap();
            let report = kura::registry::check(&source, &Params::new()).unwrap();
            assert_eq!(report.is_clean(), what == "intact", "{name}, {what}: {report:?}");
            kura::HashDbm::salvage_file(&source, &dest).unwrap_or_else(|e| panic!("{name}, {what}: {e}"));
            assert_eq!(hash_format_version(&dest), 5, "{name}, {what}");
            let db = kura::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
            let found: BTreeMap<Vec<u8>, Vec<u8>> = db.records().unwrap().map(Result::unwrap).collect();
            assert_eq!(found, expected, "{name}, {what}: the records restored differ");
            db.close().unwrap();
        }
    }
}
