//! No silent wrong values: flips bits of every region a decoded value depends on (file
//! headers, bucket arrays, zstd dictionaries, saved free lists, the first pages of records,
//! memory-engine snapshots) and checks that every read (`get`, `get_many`, the cursor) then
//! gives the right value, a typed BrokenData error, or no record, never a value that was not
//! written; and that `restore` of such a file copies only values it can prove intact and says
//! what it dropped.
//!
//! No record (NotFound) is accepted only in the hash file's bucket array and record pages: a
//! bucket entry or a record's next-pointer, which no checksum covers because they are
//! rewritten in place as chains change (docs/format.md), can cut a chain, and a flipped key
//! byte or kind bit makes a record another key's or a tombstone. After a bucket-array flip
//! the records behind the cut are still whole in the file, and `restore`, which scans records
//! rather than following chains, copies exactly the records written (checked after every
//! bucket-array flip that cut a chain). Everywhere else a flip must leave every record
//! readable or be refused.
//!
//! Every bit of the file headers, bucket array, dictionaries and free list is flipped; the
//! record pages and snapshots get one flip per byte (a rotating bit) in CI, every bit (and
//! more records) with `KURA_FLIP_ALL_BITS=1`. The figures are printed (run with
//! `--nocapture` to see them).

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]
#![expect(clippy::indexing_slicing, reason = "offsets into files the test wrote itself")]

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use kura::{Dbm, DbmExt, ErrorKind, HashDbm, OpenMode, Params, TreeDbm};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Compressible values of varied shape, so that a trained dictionary helps and some values
/// are stored raw (short ones) while others are compressed.
fn model(records: u32) -> Model {
    (0..records)
        .map(|i| {
            let key = format!("user:{i:05}").into_bytes();
            let value = if i % 7 == 0 {
                format!("{i}").into_bytes()
            } else {
                format!(
                    "{{\"id\":{i},\"name\":\"name-{}\",\"tags\":[\"a{}\",\"b{}\"],\"score\":{}}}",
                    i * 31,
                    i % 5,
                    i % 3,
                    i * 7
                )
                .into_bytes()
            };
            (key, value)
        })
        .collect()
}

fn flip_all_bits() -> bool {
    std::env::var("KURA_FLIP_ALL_BITS").is_ok_and(|v| v == "1")
}

/// Records of the flipped databases: each flip reads them all, so CI keeps them few.
fn records() -> u32 {
    if flip_all_bits() {
        600
    } else {
        200
    }
}

/// What one damaged image gave.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    flips: u64,
    refused_at_open: u64,
    right: u64,
    broken: u64,
    missing: u64,
    /// Values returned that were never written: must stay 0.
    wrong: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.flips += other.flips;
        self.refused_at_open += other.refused_at_open;
        self.right += other.right;
        self.broken += other.broken;
        self.missing += other.missing;
        self.wrong += other.wrong;
    }
}

/// Damage (BrokenData) must name the damaged file, whichever read met it, so that a user of
/// the library knows which file to check or restore.
fn assert_named(error: &kura::Error, path: &Path, what: &str) {
    if error.kind() == ErrorKind::BrokenData {
        let shown = path.display().to_string();
        assert!(error.message().contains(&shown), "{what}: damage that does not name the file: {error}");
    }
}

/// Opens the damaged file read-only and reads every record of `model` and every record the
/// cursor shows; counts a value that differs from the model (the wrong value this test
/// exists to rule out: the callers assert there is none) and panics on an error that is not
/// typed as damage, or damage that does not name the file.
fn check(open: &dyn Fn(&Path) -> kura::Result<Box<dyn Dbm>>, path: &Path, model: &Model, what: &str) -> Tally {
    let mut tally = Tally { flips: 1, ..Tally::default() };
    let db = match open(path) {
        Ok(db) => db,
        Err(e) => {
            assert_named(&e, path, what);
            assert_eq!(e.kind(), ErrorKind::BrokenData, "{what}: open failed with an untyped error: {e}");
            tally.refused_at_open = 1;
            return tally;
        }
    };
    for (key, value) in model {
        match db.get(key) {
            Ok(got) => {
                if &got == value {
                    tally.right += 1;
                } else {
                    tally.wrong += 1;
                    eprintln!("{what}: WRONG VALUE for {}", String::from_utf8_lossy(key));
                }
            }
            Err(e) if e.kind() == ErrorKind::BrokenData => {
                assert_named(&e, path, what);
                tally.broken += 1;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => tally.missing += 1,
            Err(e) => panic!("{what}: get failed with an untyped error: {e}"),
        }
    }
    // The batched read takes paths of its own (pipelined chain walks, leaf runs): the same
    // values, or an error typed as damage for the whole batch.
    let keys: Vec<&[u8]> = model.keys().map(Vec::as_slice).collect();
    match db.get_many(&keys) {
        Ok(values) => {
            assert_eq!(values.len(), keys.len(), "{what}: get_many gave another number of results");
            for ((key, value), got) in model.iter().zip(values) {
                if got.as_ref().is_some_and(|got| got != value) {
                    tally.wrong += 1;
                    eprintln!("{what}: get_many gave a WRONG VALUE for {}", String::from_utf8_lossy(key));
                }
            }
        }
        Err(e) => {
            assert_named(&e, path, what);
            assert!(matches!(e.kind(), ErrorKind::BrokenData), "{what}: get_many failed with an untyped error: {e}")
        }
    }
    if let Ok(records) = db.records() {
        for record in records {
            match record {
                Ok((key, value)) => {
                    if model.get(&key) != Some(&value) {
                        tally.wrong += 1;
                        eprintln!("{what}: the cursor shows a record never written");
                    }
                }
                Err(e) => {
                    assert_named(&e, path, what);
                    assert!(matches!(e.kind(), ErrorKind::BrokenData | ErrorKind::NotFound), "{what}: {e}");
                    break;
                }
            }
        }
    }
    tally
}

/// Flips bits of `range` in the file one at a time (restoring each before the next) and
/// checks each image.
fn flip_range(
    path: &Path,
    range: std::ops::Range<u64>,
    every_bit: bool,
    mut each: impl FnMut(&Path, u64) -> Tally,
) -> Tally {
    let file = OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut total = Tally::default();
    for offset in range {
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, offset).unwrap();
        let masks: Vec<u8> = if every_bit { (0..8).map(|b| 1u8 << b).collect() } else { vec![1u8 << (offset % 8)] };
        for mask in masks {
            file.write_all_at(&[byte[0] ^ mask], offset).unwrap();
            total.add(each(path, offset));
            file.write_all_at(&byte, offset).unwrap();
        }
    }
    total
}

fn read_u32(file: &File, at: u64) -> u32 {
    let mut bytes = [0u8; 4];
    file.read_exact_at(&mut bytes, at).unwrap();
    u32::from_le_bytes(bytes)
}

fn read_u64(file: &File, at: u64) -> u64 {
    let mut bytes = [0u8; 8];
    file.read_exact_at(&mut bytes, at).unwrap();
    u64::from_le_bytes(bytes)
}

/// Keys of the hash database written twice after its rebuild, the first value replaced.
const REPLACED: usize = 20;

/// A closed zstd-dict hash database with a trained dictionary, replaced values and a saved
/// free list.
fn make_hash(path: &Path, model: &Model) {
    let params = Params::new().with("record_comp", "zstd-dict").with("num_buckets", 64).with("dict_size", 2048);
    let db = HashDbm::open(path, OpenMode::Truncate, &params).unwrap();
    let (last_key, last_value) = model.last_key_value().unwrap();
    for (key, value) in model.range(..last_key.clone()) {
        db.set(key, value, true).unwrap();
    }
    db.rebuild(&Params::new().with("num_buckets", 64)).unwrap();
    // Replaced values stay in the file as dead records: a restore must never take them.
    for (key, value) in model.iter().take(REPLACED) {
        db.set(key, b"a value replaced before the close", true).unwrap();
        db.set(key, value, true).unwrap();
    }
    // Removed records leave free blocks, saved as the free list at close (the last record
    // keeps them off the end of the file, which would be truncated instead).
    for i in 0..40 {
        db.set(format!("gone:{i}").as_bytes(), &[b'x'; 300], true).unwrap();
    }
    db.set(last_key, last_value, true).unwrap();
    for i in 0..40 {
        db.remove(format!("gone:{i}").as_bytes()).unwrap();
    }
    let properties = db.inspect().unwrap().properties();
    let dictionary: usize = properties.iter().find(|(n, _)| n == "dictionary_size").unwrap().1.parse().unwrap();
    assert!(dictionary > 0, "the rebuild trained no dictionary");
    db.close().unwrap();
}

fn open_hash(path: &Path) -> kura::Result<Box<dyn Dbm>> {
    Ok(Box::new(HashDbm::open(path, OpenMode::ReadOnly, &Params::new())?))
}

fn open_hash_writer(path: &Path) -> kura::Result<Box<dyn Dbm>> {
    Ok(Box::new(HashDbm::open(path, OpenMode::Write, &Params::new())?))
}

/// The regions of a hash file that hold chain pointers, where a flip may cut a chain.
const CHAIN_REGIONS: [&str; 2] = ["bucket array", "first record page"];

/// Regions of a hash file from its header: (name, byte range).
fn hash_regions(path: &Path) -> Vec<(&'static str, std::ops::Range<u64>)> {
    let file = File::open(path).unwrap();
    // A rebuild chooses its own bucket count: read it from the header. The buckets start
    // after the header region, which holds the header and its copy (format version 4).
    let buckets_end = 1024 + read_u64(&file, 16) * 5;
    let dictionary_len = u64::from(read_u32(&file, 48));
    let data_start = buckets_end + dictionary_len;
    let free_list = read_u64(&file, 56);
    let free_list_len = u64::from(read_u32(&file, 64));
    assert!(free_list_len > 0, "the test database has no saved free list");
    vec![
        ("header", 0..128),
        ("header copy", 512..640),
        ("bucket array", 1024..buckets_end),
        ("dictionary", buckets_end..data_start),
        ("free list", free_list..free_list + free_list_len),
        ("first record page", data_start..data_start + 4096),
    ]
}

/// Flips the bits of the HashDbm regions named in `regions` (`hash_regions`), each flip in a
/// fresh copy of the file, and checks every read against the model.
fn hash_bit_flips_never_give_a_wrong_value(regions: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flips.kuh");
    let model = model(records());
    make_hash(&path, &model);
    let mut all = Tally::default();
    let chosen: Vec<_> = hash_regions(&path).into_iter().filter(|(name, _)| regions.contains(name)).collect();
    assert_eq!(chosen.len(), regions.len(), "a region named in {regions:?} is not one of hash_regions'");
    for (name, range) in chosen {
        let every_bit = name != "first record page" || flip_all_bits();
        let tally = flip_range(&path, range.clone(), every_bit, |p, at| {
            let what = format!("hash {name} flip at {at}");
            let mut tally = check(&open_hash, p, &model, &what);
            if name == "bucket array" && tally.missing > 0 {
                // The cut chain's records are intact in the file: restore finds every one.
                assert_restore_finds_every_record(p, &model, &what);
            }
            if name == "free list" {
                // A list that is used must not hand out live records as free space: write
                // through it, then read everything back.
                tally.add(write_through_free_list(p, &open_hash_writer, &model, &what));
            }
            tally
        });
        println!("hash {name} ({} bytes): {tally:?}", range.end - range.start);
        if name == "dictionary" {
            assert_eq!(tally.refused_at_open, tally.flips, "every {name} flip is refused at open");
        }
        if name.starts_with("header") {
            // The other copy serves (format version 4): no flip of one copy stops an open.
            assert_eq!(tally.refused_at_open, 0, "a {name} flip was refused at open");
        }
        if !CHAIN_REGIONS.contains(&name) {
            assert_eq!(tally.missing, 0, "a {name} flip made records disappear");
        }
        all.add(tally);
    }
    println!("hash total: {all:?}");
    assert_eq!(all.wrong, 0, "wrong values returned (see the lines above)");
}

// The regions in two tests of about 20 s each (debug build), so that they share the test
// threads.
#[test]
fn hash_header_and_bucket_flips_never_give_a_wrong_value() {
    hash_bit_flips_never_give_a_wrong_value(&["header", "header copy", "bucket array"]);
}

#[test]
fn hash_dictionary_free_list_and_record_flips_never_give_a_wrong_value() {
    hash_bit_flips_never_give_a_wrong_value(&["dictionary", "free list", "first record page"]);
}

/// Salvages the damaged file and checks that the copy holds exactly the records of `model`:
/// none lost, and no removed record or replaced value brought back by the scan.
fn assert_restore_finds_every_record(path: &Path, model: &Model, what: &str) {
    let restored = path.with_extension("restored.kuh");
    let report = HashDbm::salvage_file(path, &restored).unwrap();
    let db = HashDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap();
    let copied: Model = db.records().unwrap().map(Result::unwrap).collect();
    for (key, value) in model {
        assert_eq!(copied.get(key), Some(value), "{what}: restore lost a record or revived an old value ({report:?})");
    }
    if let Some(extra) = copied.keys().find(|key| !model.contains_key(*key)) {
        panic!("{what}: restore revived {}, which was removed ({report:?})", String::from_utf8_lossy(extra));
    }
    db.close().unwrap();
    std::fs::remove_file(&restored).unwrap();
}

/// Opens a copy of the (free-list-damaged) file for writing, writes records into free space,
/// and checks that every old record is still right.
fn write_through_free_list(
    path: &Path,
    open_writer: &dyn Fn(&Path) -> kura::Result<Box<dyn Dbm>>,
    model: &Model,
    what: &str,
) -> Tally {
    let extension = path.extension().unwrap().to_str().unwrap();
    let copy = path.with_extension(format!("write.{extension}"));
    std::fs::copy(path, &copy).unwrap();
    let mut tally = Tally::default();
    match open_writer(&copy) {
        Ok(db) => {
            for i in 0..40 {
                db.set(format!("new:{i}").as_bytes(), &[b'n'; 200], true).unwrap();
            }
            for (key, value) in model {
                let got = db.get(key).unwrap();
                if &got != value {
                    tally.wrong += 1;
                    eprintln!("{what}: a write through the free list damaged a record");
                }
            }
            db.close().unwrap();
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::BrokenData, "{what}: {e}");
            tally.refused_at_open += 1;
        }
    }
    std::fs::remove_file(&copy).unwrap();
    tally
}

/// A salvaged copy holds the records its report counts, each with a value that was written,
/// and works on: it takes a write (compressing without the lost dictionary). Removes it.
fn assert_salvaged_copy_is_sound(
    open_writer: &dyn Fn(&Path) -> kura::Result<Box<dyn Dbm>>,
    restored: &Path,
    report: &kura::RestoreReport,
    model: &Model,
) {
    let db = open_writer(restored).unwrap();
    assert_eq!(db.count().unwrap(), report.records);
    for record in db.records().unwrap() {
        let (key, value) = record.unwrap();
        assert_eq!(model.get(&key), Some(&value), "restore copied a value that was never written");
    }
    db.set(b"after", b"restore", true).unwrap();
    db.close().unwrap();
    std::fs::remove_file(restored).unwrap();
}

/// A bucket entry damaged to 0 empties its chain, which then walks cleanly: restore must
/// still find the chain's records (a cleanly closed file states its record count, and the
/// chains falling short of it starts the scan). Every non-empty bucket, one at a time.
#[test]
fn hash_restore_finds_the_records_of_an_emptied_bucket() {
    const BUCKET_BYTES: u64 = 5;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("emptied.kuh");
    let model = model(records());
    make_hash(&path, &model);
    let (_, buckets) = hash_regions(&path).into_iter().find(|(n, _)| *n == "bucket array").unwrap();
    let original = std::fs::read(&path).unwrap();
    let mut emptied = 0;
    for entry in (buckets.start..buckets.end).step_by(BUCKET_BYTES as usize) {
        let range = entry as usize..(entry + BUCKET_BYTES) as usize;
        if original[range.clone()].iter().all(|&b| b == 0) {
            continue;
        }
        let mut damaged = original.clone();
        damaged[range].fill(0);
        std::fs::write(&path, &damaged).unwrap();
        assert_restore_finds_every_record(&path, &model, &format!("bucket entry at {entry} emptied"));
        emptied += 1;
    }
    assert!(emptied > 0, "no bucket holds a chain");
}

#[test]
fn hash_restore_of_a_damaged_dictionary_keeps_only_proven_values_and_says_what_it_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dict.kuh");
    let model = model(records());
    make_hash(&path, &model);
    let (_, dictionary) = hash_regions(&path).into_iter().find(|(n, _)| *n == "dictionary").unwrap();
    let step = ((dictionary.end - dictionary.start) / 16).max(1);
    for at in (dictionary.start..dictionary.end).step_by(step as usize) {
        let original = std::fs::read(&path).unwrap();
        let mut damaged = original.clone();
        damaged[at as usize] ^= 0x20;
        let broken = dir.path().join("broken.kuh");
        std::fs::write(&broken, &damaged).unwrap();
        let error = HashDbm::open(&broken, OpenMode::ReadOnly, &Params::new()).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::BrokenData);
        assert!(error.message().contains("dictionary"), "{error}");
        let restored = dir.path().join("restored.kuh");
        let report = HashDbm::salvage_file(&broken, &restored).unwrap();
        assert!(report.dropped.iter().any(|d| d.contains("dictionary")), "{report:?}");
        assert!(report.dropped_records > 0 && report.records > 0, "{report:?}");
        assert_eq!(report.records + report.dropped_records, model.len() as u64, "{report:?}");
        assert_salvaged_copy_is_sound(&open_hash_writer, &restored, &report, &model);
    }
}

/// A closed zstd-dict tree database with a trained dictionary, small pages so that the first
/// pages hold records.
fn make_tree(path: &Path, model: &Model) {
    let params = Params::new().with("record_comp", "zstd-dict").with("dict_size", 2048).with("max_page_size", 1024);
    let db = TreeDbm::open(path, OpenMode::Truncate, &params).unwrap();
    for (key, value) in model {
        db.set(key, value, true).unwrap();
    }
    db.rebuild(&Params::new()).unwrap();
    // Pages of removed records become free slots, saved as the free-list blob at close.
    for i in 0..40 {
        db.set(format!("gone:{i}").as_bytes(), &[b'x'; 300], true).unwrap();
    }
    for i in 0..40 {
        db.remove(format!("gone:{i}").as_bytes()).unwrap();
    }
    let properties = db.inspect().unwrap().properties();
    let dictionary: usize = properties.iter().find(|(n, _)| n == "dictionary_size").unwrap().1.parse().unwrap();
    assert!(dictionary > 0, "the rebuild trained no dictionary");
    db.close().unwrap();
}

fn open_tree(path: &Path) -> kura::Result<Box<dyn Dbm>> {
    Ok(Box::new(TreeDbm::open(path, OpenMode::ReadOnly, &Params::new())?))
}

fn open_tree_writer(path: &Path) -> kura::Result<Box<dyn Dbm>> {
    Ok(Box::new(TreeDbm::open(path, OpenMode::Write, &Params::new())?))
}

/// Offsets of the tree file header (docs/tree.md, "File header (each copy)").
const TREE_HEADER_COPY: u64 = 128;
const TREE_FREE_LIST_AT: u64 = 40;
const TREE_DICTIONARY_AT: u64 = 56;
const TREE_SEQUENCE_AT: u64 = 64;
/// A slot's stored length and slot length fields and its header's length (docs/tree.md, "Slot").
const TREE_STORED_LEN_AT: u64 = 4;
const TREE_SLOT_LEN_AT: u64 = 8;
const TREE_SLOT_HEADER_LEN: u64 = 24;

/// The offset of the current header copy of a cleanly closed tree file: the one with the
/// larger sequence number.
fn current_tree_header(file: &File) -> u64 {
    if read_u64(file, TREE_HEADER_COPY + TREE_SEQUENCE_AT) > read_u64(file, TREE_SEQUENCE_AT) {
        TREE_HEADER_COPY
    } else {
        0
    }
}

#[test]
fn tree_bit_flips_never_give_a_wrong_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flips.kut");
    let model = model(records());
    make_tree(&path, &model);
    let file = File::open(&path).unwrap();
    // Both header copies are flipped; the current one names the dictionary and the free list.
    let current = current_tree_header(&file);
    let dictionary_slot = read_u64(&file, current + TREE_DICTIONARY_AT);
    assert!(dictionary_slot >= 256, "the tree has no dictionary slot");
    let dictionary_end = dictionary_slot + read_u64(&file, dictionary_slot + TREE_SLOT_LEN_AT);
    let free_list_slot = read_u64(&file, current + TREE_FREE_LIST_AT);
    assert!(free_list_slot >= 256, "the test tree has no saved free list");
    let free_list = free_list_slot..free_list_slot + read_u64(&file, free_list_slot + TREE_SLOT_LEN_AT);
    let file_len = file.metadata().unwrap().len();
    let headers_and_dictionary = 0..dictionary_end;
    let page_bytes = if flip_all_bits() { 8192 } else { 4096 };
    let first_pages = dictionary_end..(dictionary_end + page_bytes).min(file_len);
    let mut all = Tally::default();
    for (name, range, every_bit) in [
        ("headers and dictionary", headers_and_dictionary, true),
        ("free list", free_list, true),
        ("first pages", first_pages, flip_all_bits()),
    ] {
        let tally = flip_range(&path, range.clone(), every_bit, |p, at| {
            let what = format!("tree {name} flip at {at}");
            let mut tally = check(&open_tree, p, &model, &what);
            if name == "free list" {
                tally.add(write_through_free_list(p, &open_tree_writer, &model, &what));
            }
            tally
        });
        println!("tree {name} ({} bytes): {tally:?}", range.end - range.start);
        all.add(tally);
    }
    println!("tree total: {all:?}");
    assert_eq!(all.missing, 0, "a flip made records disappear from the tree");
    assert_eq!(all.wrong, 0, "wrong values returned (see the lines above)");
}

#[test]
fn tree_restore_of_a_damaged_dictionary_keeps_only_proven_values_and_says_what_it_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dict.kut");
    let model = model(records());
    make_tree(&path, &model);
    let file = File::open(&path).unwrap();
    let current = current_tree_header(&file);
    let slot = read_u64(&file, current + TREE_DICTIONARY_AT);
    // The blob's stored bytes, after the slot header (the slot's padding after them is not
    // under its checksum, and no reader looks at it).
    let stored = slot + TREE_SLOT_HEADER_LEN
        ..slot + TREE_SLOT_HEADER_LEN + u64::from(read_u32(&file, slot + TREE_STORED_LEN_AT));
    let step = ((stored.end - stored.start) / 16).max(1);
    for at in (stored.start..stored.end).step_by(step as usize) {
        let mut damaged = std::fs::read(&path).unwrap();
        damaged[at as usize] ^= 0x20;
        let broken = dir.path().join("broken.kut");
        std::fs::write(&broken, &damaged).unwrap();
        let error = TreeDbm::open(&broken, OpenMode::ReadOnly, &Params::new()).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::BrokenData);
        assert!(error.message().contains("dictionary"), "{error}");
        let restored = dir.path().join("restored.kut");
        let report = TreeDbm::salvage_file(&broken, &restored).unwrap();
        assert!(report.dropped.iter().any(|d| d.contains("dictionary")), "{report:?}");
        assert_salvaged_copy_is_sound(&open_tree_writer, &restored, &report, &model);
    }
}

#[test]
fn memory_snapshot_bit_flips_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = model(60);
    for engine in kura::engines().iter().filter(|e| e.is_in_memory()) {
        let path = dir.path().join(format!("flips.{}", engine.extension));
        let params = engine.bench_params(model.len() as u64);
        let db = engine.open(&path, OpenMode::Truncate, &params).unwrap();
        for (key, value) in &model {
            db.set(key, value, true).unwrap();
        }
        db.close().unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        let open = |p: &Path| engine.open(p, OpenMode::ReadOnly, &params);
        let tally = flip_range(&path, 0..len, flip_all_bits(), |p, at| {
            check(&open, p, &model, &format!("{} flip at {at}", engine.name))
        });
        println!("{} snapshot ({len} bytes): {tally:?}", engine.name);
        assert_eq!(tally.refused_at_open, tally.flips, "{}: every snapshot flip is refused at open", engine.name);
        assert_eq!((tally.wrong, tally.missing), (0, 0));
    }
}
