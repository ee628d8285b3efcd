//! Damaged tree files: structural corruption (cycles, wrong heights, unordered keys),
//! truncation, bad compressed pages and random byte flips give typed errors, never a panic,
//! a hang or a huge allocation, read through the mapping and with `pread` (a cache and memory
//! said to be so small that the file exceeds them); `restore_file` salvages what is readable.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::path::{Path, PathBuf};

use kura::{forge, TreeDbm};
use kura::{CodecKind, Dbm, DbmExt, ErrorKind, OpenMode, Params, WriteBatch};

const RECORDS: u32 = 3000;

fn build(dir: &Path, codec: CodecKind) -> PathBuf {
    let path = dir.join(format!("damaged-{}.kut", codec.name()));
    let params = Params::new().with("record_comp", codec.name()).with("max_page_size", 512);
    let db = TreeDbm::open(&path, OpenMode::Create, &params).unwrap();
    for i in 0..RECORDS {
        db.set(format!("key{i:06}").as_bytes(), &value_of(i), true).unwrap();
    }
    db.close().unwrap();
    path
}

/// A cache so small, and memory said to be so small, that every file here is larger than
/// half of it: pages are then read with `pread` into a buffer, not through the mapping
/// (tree_dbm/pager.rs, `with_slot_read`).
const TINY_CACHE_BYTES: u64 = 4096;

/// Parameters that read the file as larger than memory (`TINY_CACHE_BYTES`).
fn tiny_memory() -> Params {
    Params::new().with("cache_bytes", TINY_CACHE_BYTES).with("memory_bytes", TINY_CACHE_BYTES)
}

/// The value `build` writes for record `i`.
fn value_of(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

/// Reads everything every way, through the mapping and then by `pread` (a tiny cache);
/// returns the first error (both must meet one, of the same kind). Damage must name the file
/// whatever found it (a page's checksum, a cycle, a wrong height), so that a user of the
/// library knows which file to check or restore.
fn read_all(path: &Path) -> kura::Error {
    let mapped = read_all_with(path, &Params::new());
    let read = read_all_with(path, &tiny_memory());
    assert_eq!(read.kind(), mapped.kind(), "pread: {} / mapping: {}", read.message(), mapped.message());
    let shown = path.display().to_string();
    for error in [&mapped, &read] {
        if error.kind() == ErrorKind::BrokenData {
            assert!(error.message().contains(&shown), "damage that does not name the file: {}", error.message());
        }
    }
    mapped
}

fn read_all_with(path: &Path, params: &Params) -> kura::Error {
    let db = match TreeDbm::open(path, OpenMode::ReadOnly, params) {
        Ok(db) => db,
        Err(e) => return e,
    };
    let mut first = None;
    for i in (0..RECORDS).step_by(7) {
        match db.get(format!("key{i:06}").as_bytes()) {
            Ok(value) => assert_eq!(value, value_of(i), "key {i}: a value never written"),
            Err(e) if e.kind() != ErrorKind::NotFound => {
                first.get_or_insert(e);
            }
            Err(_) => {}
        }
    }
    for item in db.range(..) {
        if let Err(e) = item {
            first.get_or_insert(e);
            break;
        }
    }
    for item in db.range(..).rev() {
        if let Err(e) = item {
            first.get_or_insert(e);
            break;
        }
    }
    first.expect("the damage went unnoticed")
}

#[test]
fn page_pointing_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = build(dir.path(), CodecKind::None);
    let (root, height, _) = forge::root(&path).unwrap();
    assert!(height >= 3, "the test needs a deep tree");
    let raw = forge::branch_bytes(&[root, root], &[b"key001000"]).unwrap();
    forge::write_page(&path, root, true, &raw, false).unwrap();
    assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData);
}

#[test]
fn cycle_between_two_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = build(dir.path(), CodecKind::None);
    let (root, _, _) = forge::root(&path).unwrap();
    let children = forge::children(&path, root).unwrap();
    let child = children[0];
    forge::write_page(&path, child, true, &forge::branch_bytes(&[root], &[]).unwrap(), false).unwrap();
    assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData);
    // A writer opening it after a crash walks the tree, finds the cycle and restores.
    let (root, height, _) = forge::root(&path).unwrap();
    forge::set_root(&path, root, height).unwrap();
    forge::set_closed_cleanly(&path, false).unwrap();
    let db = TreeDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
    assert!(db.was_restored());
    assert!(db.count().unwrap() < u64::from(RECORDS));
    for item in db.records().unwrap() {
        item.unwrap();
    }
}

#[test]
fn wrong_heights() {
    let dir = tempfile::tempdir().unwrap();
    let path = build(dir.path(), CodecKind::None);
    let (root, height, _) = forge::root(&path).unwrap();
    forge::set_root(&path, root, height + 5).unwrap();
    assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData);
    forge::set_root(&path, root, height - 1).unwrap();
    assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData);
    // An impossible height fails the header's own check: the other header copy (the
    // previous commit, intact here) is used instead, as after a torn header write.
    forge::set_root(&path, root, 1000).unwrap();
    let db = TreeDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(db.count().unwrap(), u64::from(RECORDS));
}

#[test]
fn keys_out_of_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = build(dir.path(), CodecKind::None);
    let (root, height, _) = forge::root(&path).unwrap();
    let mut page = root;
    for _ in 1..height {
        page = forge::children(&path, page).unwrap()[1];
    }
    let raw = forge::leaf_bytes(&[(b"key000900", b"a"), (b"key000800", b"b")]);
    forge::write_page(&path, page, false, &raw, false).unwrap();
    assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData);
    let branch = forge::branch_bytes(&[page, page, page], &[b"m", b"c"]).unwrap();
    forge::write_page(&path, root, true, &branch, false).unwrap();
    assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData);
}

/// A tree of height 2 made from a real file: a root branch over two leaves holding `first`
/// and `second`, separated by `separator` (forged into slots of the file, checksums valid).
fn two_leaves(dir: &Path, first: &[(&[u8], &[u8])], second: &[(&[u8], &[u8])], separator: &[u8]) -> PathBuf {
    let path = build(dir, CodecKind::None);
    let (root, height, _) = forge::root(&path).unwrap();
    let mut branch = root;
    for _ in 2..height {
        branch = forge::children(&path, branch).unwrap()[0];
    }
    let leaves = forge::children(&path, branch).unwrap();
    forge::write_page(&path, leaves[0], false, &forge::leaf_bytes(first), false).unwrap();
    forge::write_page(&path, leaves[1], false, &forge::leaf_bytes(second), false).unwrap();
    forge::write_page(&path, root, true, &forge::branch_bytes(&leaves[..2], &[separator]).unwrap(), false).unwrap();
    forge::set_root(&path, root, 2).unwrap();
    path
}

/// Two leaves whose keys overlap, under a separator that sends every key to the first: a
/// forward scan ending the first leaf is sent on to the second, whose first key is not beyond
/// where it stands, and a backward scan the other way round. Before the seek checked the
/// leaves it lands in against their branches' ranges, a scan came back to keys it had shown
/// and never ended (found by fuzzing `open_file` with the pages' checksums fixed up).
#[test]
fn overlapping_leaves_end_a_scan_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_leaves(
        dir.path(),
        &[(b"key000001", b"a"), (b"key000002", b"b")],
        &[(b"key000001", b"c"), (b"key000003", b"d")],
        b"key999999",
    );
    let db = TreeDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    // Bounded, so that a scan that loops fails the test instead of hanging it.
    let forward: Vec<_> = db.range(..).take(100).collect();
    assert!(forward.len() < 100, "a forward scan went on for {} records", forward.len());
    assert_eq!(forward.last().unwrap().as_ref().unwrap_err().kind(), ErrorKind::BrokenData);
    let backward: Vec<_> = db.range(..).rev().take(100).collect();
    assert!(backward.len() < 100, "a backward scan went on for {} records", backward.len());
    let mut cursor = db.cursor().unwrap();
    let mut steps = 0;
    let mut moved = cursor.first();
    while let Ok(true) = moved {
        steps += 1;
        assert!(steps < 100, "a cursor went on for {steps} records");
        moved = cursor.next();
    }
    assert_eq!(moved.unwrap_err().kind(), ErrorKind::BrokenData);
}

/// A leaf holding a key beyond its separator: lookups, which follow the separators, never
/// reach it there, so a scan that showed it would show a record `get` says is absent (found
/// by fuzzing `open_file`, whose harness compares the two). The scan reports the leaf instead.
#[test]
fn a_leaf_key_beyond_its_separator_is_reported_by_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_leaves(
        dir.path(),
        &[(b"key000001", b"a"), (b"key000700", b"stray")],
        &[(b"key000600", b"b")],
        b"key000500",
    );
    let db = TreeDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(db.get(b"key000700").unwrap_err().kind(), ErrorKind::NotFound);
    for scan in [db.range(..).collect::<Vec<_>>(), db.range(..).rev().collect()] {
        let error = scan.iter().find_map(|item| item.as_ref().err()).expect("the stray key went unnoticed");
        assert_eq!(error.kind(), ErrorKind::BrokenData);
        assert!(scan.iter().flatten().all(|(key, _)| key.as_slice() != b"key000700"), "a scan showed the stray key");
    }
}

#[test]
fn bad_compressed_pages() {
    for codec in [CodecKind::Zstd, CodecKind::Lz4, CodecKind::Zlib, CodecKind::Snappy, CodecKind::Lzma] {
        let dir = tempfile::tempdir().unwrap();
        let path = build(dir.path(), codec);
        let (root, _, _) = forge::root(&path).unwrap();
        let leaf = forge::children(&path, forge::children(&path, root).unwrap()[0]).unwrap()[0];
        // A frame claiming a huge raw size, then plain garbage, both with valid checksums.
        let mut claims_huge = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
        claims_huge.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        forge::write_page(&path, leaf, false, &claims_huge, true).unwrap();
        assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData, "{codec}");
        forge::write_page(&path, leaf, false, &[40, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9], true).unwrap();
        assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData, "{codec}");
        // A valid frame of a branch's bytes where a leaf is expected.
        let raw = forge::branch_bytes(&[root, root], &[b"k"]).unwrap();
        let stored = forge::compress(codec, &[raw.clone(), raw.clone(), raw].concat()).unwrap();
        let _ = forge::write_page(&path, leaf, false, &stored, true);
        assert_eq!(read_all(&path).kind(), ErrorKind::BrokenData, "{codec}");
        let restored = dir.path().join("restored.kut");
        let count = TreeDbm::restore_file(&path, &restored).unwrap();
        assert!(count > 0 && count < u64::from(RECORDS));
    }
}

#[test]
fn truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = build(dir.path(), CodecKind::Zstd);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / 2).unwrap();
    let err = TreeDbm::open(&path, OpenMode::Write, &Params::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenData);
    let restored = dir.path().join("restored.kut");
    let count = TreeDbm::restore_file(&path, &restored).unwrap_or(0);
    assert!(count < u64::from(RECORDS));
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(100).unwrap();
    assert_eq!(TreeDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap_err().kind(), ErrorKind::BrokenData);
}

#[test]
fn random_byte_flips_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let original = build(dir.path(), CodecKind::Lz4);
    let bytes = std::fs::read(&original).unwrap();
    let mut x = 0x1234_5678_9abc_def1u64;
    let path = dir.path().join("flipped.kut");
    for round in 0..60 {
        let mut damaged = bytes.clone();
        for _ in 0..(1 + round % 8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x % damaged.len() as u64) as usize;
            damaged[at] ^= 1 << (x >> 60 & 7);
        }
        std::fs::write(&path, &damaged).unwrap();
        for params in [Params::new(), tiny_memory()] {
            if let Ok(db) = TreeDbm::open(&path, OpenMode::ReadOnly, &params) {
                let _ = db.range(..).take(RECORDS as usize + 10).count();
                let _ = db.range(..).rev().take(RECORDS as usize + 10).count();
                if let Ok(value) = db.get(b"key000123") {
                    assert_eq!(value, value_of(123), "round {round}: a value never written");
                }
            }
        }
        if let Ok(db) = TreeDbm::open(&path, OpenMode::Write, &Params::new()) {
            let _ = db.set(b"key000500", b"new", true);
            let _ = db.remove(b"key000501");
            let _ = db.close();
        }
        let _ = TreeDbm::restore_file(&path, dir.path().join("restored.kut"));
    }
}

/// `restore_file` of a crashed tree (its file and journal as a crash left them) copies the
/// checkpointed records and replays the commits its journal holds since.
#[test]
fn restore_replays_the_commits_in_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.kut");
    let db = TreeDbm::open(&live, OpenMode::Create, &Params::new()).unwrap();
    let key = |i: u32| format!("k{i:03}").into_bytes();
    for i in 0..100 {
        db.set(&key(i), b"checkpointed", true).unwrap();
    }
    db.checkpoint().unwrap();
    for i in 50..150 {
        db.set(&key(i), b"journaled", true).unwrap();
    }
    db.remove(&key(0)).unwrap();
    db.synchronize(false).unwrap();
    // What a crash leaves: the tree file as of the checkpoint, and the journal since.
    let crashed = dir.path().join("crashed.kut");
    std::fs::copy(&live, &crashed).unwrap();
    std::fs::copy(kura::journal_path(&live), kura::journal_path(&crashed)).unwrap();
    let restored = dir.path().join("restored.kut");
    assert_eq!(TreeDbm::restore_file(&crashed, &restored).unwrap(), 149);
    let copy = TreeDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert!(copy.get(&key(0)).is_err(), "the journaled removal is replayed");
    for i in 1..150 {
        let expected: &[u8] = if i < 50 { b"checkpointed" } else { b"journaled" };
        assert_eq!(copy.get(&key(i)).unwrap(), expected, "key {i}");
    }
    assert!(!kura::journal_path(&restored).exists(), "the copy is closed: one file");
}

/// A zstd file (`build`) whose first leaf is overwritten with bytes that fail its checksum.
fn build_with_first_leaf_damaged(dir: &Path) -> PathBuf {
    let path = build(dir, CodecKind::Zstd);
    let (root, _, _) = forge::root(&path).unwrap();
    let first_leaf = forge::children(&path, forge::children(&path, root).unwrap()[0]).unwrap()[0];
    forge::write_page(&path, first_leaf, false, &[40, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9], true).unwrap();
    path
}

/// 40 keys past the damaged first leaf (`build_with_first_leaf_damaged`), and, halfway
/// through, one that lands in it.
fn keys_one_in_the_damaged_leaf() -> Vec<Vec<u8>> {
    (0..40u32)
        .map(|i| if i == 20 { b"key000000".to_vec() } else { format!("key{:06}-new", 1000 + i * 50).into_bytes() })
        .collect()
}

/// A durable batch that meets a damaged leaf while it is applied, after TreeDbm journaled it
/// whole (tree_dbm/store.rs, `write_batch_journaled_first`), fails whole: none of it is read
/// back, before or after a reopen, and the database takes the next batches. (Replaying the
/// journal with the batch in it would meet the damaged leaf again, and leave memory, the
/// journal and every later open at odds.)
#[test]
fn a_durable_batch_meeting_a_damaged_leaf_is_absent_and_the_file_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let path = build_with_first_leaf_damaged(dir.path());
    let failing = keys_one_in_the_damaged_leaf();
    let later: Vec<Vec<u8>> = (0..20u32).map(|i| format!("key{:06}-later", 1000 + i * 70).into_bytes()).collect();
    let batch_of = |keys: &[Vec<u8>], value: &[u8]| {
        let mut batch = WriteBatch::new();
        for key in keys {
            batch.set(key, value);
        }
        batch
    };
    let check = |db: &TreeDbm, after_later: bool| {
        for key in failing.iter().filter(|key| key.ends_with(b"-new")) {
            let found = db.get(key);
            assert_eq!(found.map_err(|e| e.kind()), Err(ErrorKind::NotFound), "{}", String::from_utf8_lossy(key));
        }
        for key in &later {
            let found = db.get(key).ok();
            assert_eq!(found.as_deref(), after_later.then_some(&b"later"[..]), "{}", String::from_utf8_lossy(key));
        }
    };
    let db = TreeDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
    let err = db.write_batch_durable(&batch_of(&failing, b"new")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenData, "{err}");
    check(&db, false);
    db.write_batch_durable(&batch_of(&later, b"later")).unwrap();
    check(&db, true);
    db.close().unwrap();
    let db = TreeDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
    check(&db, true);
    db.close().unwrap();
}

/// The same batch, but held in the write buffer (tree_dbm/write_buffer.rs): it is durable in
/// the journal when its call returns, and reads see it. Applying the buffer meets the damaged
/// leaf, and so does replaying the journal to undo that, so memory cannot be brought back in
/// line with the journal: the database then refuses every operation, reads included, and its
/// close leaves the journal (the only whole record of the commits) beside the file. The reopen
/// reports the damage, and a restore copies what is readable and replays the journal over the
/// copy: every record of the batch is there, the one whose leaf was damaged included.
#[test]
fn a_buffered_batch_meeting_a_damaged_leaf_is_kept_by_the_journal_for_the_restore() {
    let dir = tempfile::tempdir().unwrap();
    let path = build_with_first_leaf_damaged(dir.path());
    let keys = keys_one_in_the_damaged_leaf();
    let mut batch = WriteBatch::new();
    for key in &keys {
        batch.set(key, b"new");
    }
    let db = TreeDbm::open(&path, OpenMode::Write, &Params::new().with("write_buffer_bytes", 1 << 20)).unwrap();
    db.write_batch_durable(&batch).unwrap();
    assert_eq!(db.get(&keys[0]).unwrap(), b"new");
    let err = db.count().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenData, "{err}");
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    // Every operation is refused now, with the same error.
    assert_eq!(db.get(&keys[1]).unwrap_err().kind(), ErrorKind::BrokenData);
    assert_eq!(db.set(b"key002000-after", b"x", true).unwrap_err().kind(), ErrorKind::BrokenData);
    assert!(db.synchronize(true).is_err());
    assert!(db.close().is_err());
    drop(db);
    assert!(kura::journal_path(&path).exists(), "the close removed the journal");
    let reopened = TreeDbm::open(&path, OpenMode::Write, &Params::new());
    assert_eq!(reopened.map(drop).unwrap_err().kind(), ErrorKind::BrokenData);
    let restored = dir.path().join("restored.kut");
    TreeDbm::restore_file(&path, &restored).unwrap();
    let db = TreeDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap();
    for key in &keys {
        assert_eq!(db.get(key).unwrap(), b"new", "{}", String::from_utf8_lossy(key));
    }
}

/// Sets wait in the write buffer too in a file larger than memory, as pending entries of the
/// journal until a commit: applying the buffer writes them first, so that when it meets the
/// damaged leaf, the undo's replay has them (and meets the leaf too), and the restore keeps
/// every set that returned, not only those a commit had written.
#[test]
fn buffered_sets_meeting_a_damaged_leaf_are_kept_by_the_journal_for_the_restore() {
    let dir = tempfile::tempdir().unwrap();
    let path = build_with_first_leaf_damaged(dir.path());
    let keys = keys_one_in_the_damaged_leaf();
    let db = TreeDbm::open(&path, OpenMode::Write, &tiny_memory().with("write_buffer_bytes", 1 << 20)).unwrap();
    for key in &keys {
        db.set(key, b"new", true).unwrap();
    }
    assert_eq!(db.count().unwrap_err().kind(), ErrorKind::BrokenData);
    assert_eq!(db.get(&keys[0]).unwrap_err().kind(), ErrorKind::BrokenData);
    assert!(db.close().is_err());
    drop(db);
    let restored = dir.path().join("restored.kut");
    TreeDbm::restore_file(&path, &restored).unwrap();
    let db = TreeDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap();
    for key in &keys {
        assert_eq!(db.get(key).unwrap(), b"new", "{}", String::from_utf8_lossy(key));
    }
}
