//! Bad input never panics and always says what is wrong: truncated files, flipped bytes in
//! the header and in records, wrong magic, lengths pointing past the end, directories and
//! empty files, a second writer, corrupted compressed frames, unknown names, huge keys.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use kura::{Codec, CodecKind, Dbm, DbmExt, ErrorKind, HashDbm, OpenMode, Params, Result};
use proptest::prelude::*;

const RECORDS: u32 = 200;

fn value(i: u32) -> Vec<u8> {
    format!("{{\"n\":{i},\"text\":\"the value of record {i}\"}}").repeat(1 + i as usize % 3).into_bytes()
}

/// A small closed database with a few removed records (so it has a saved free list).
fn make_db(dir: &Path, codec: CodecKind) -> PathBuf {
    let path = dir.join(format!("bad-{}.kuh", codec.name()));
    let params = Params::new().with("record_comp", codec.name()).with("num_buckets", 64);
    let db = HashDbm::open(&path, OpenMode::Truncate, &params).unwrap();
    for i in 0..RECORDS {
        db.set(format!("key{i}").as_bytes(), &value(i), true).unwrap();
    }
    for i in (0..RECORDS).step_by(10) {
        db.remove(format!("key{i}").as_bytes()).unwrap();
    }
    db.close().unwrap();
    path
}

/// Opens the file and reads everything; any outcome but a panic is acceptable, and errors
/// must be typed. Returns the records read if the whole pass succeeded.
fn exercise(path: &Path, mode: OpenMode) -> Result<usize> {
    let db = HashDbm::open(path, mode, &Params::new())?;
    let mut n = 0;
    for record in db.records()? {
        let (k, v) = record?;
        assert_eq!(db.get(&k)?, v);
        n += 1;
    }
    for i in 0..RECORDS {
        match db.get(format!("key{i}").as_bytes()) {
            Ok(v) => assert!(!v.is_empty()),
            Err(e) => assert!(matches!(e.kind(), ErrorKind::NotFound | ErrorKind::BrokenData), "{e}"),
        }
    }
    if mode != OpenMode::ReadOnly {
        db.set(b"new", b"record", true)?;
        db.close()?;
    }
    Ok(n)
}

fn assert_broken<T: std::fmt::Debug>(result: Result<T>) {
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BrokenData, "{e}");
}

#[test]
fn truncated_files_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(make_db(dir.path(), CodecKind::Lz4)).unwrap();
    let path = dir.path().join("cut.kuh");
    // The header region (the header and its copy) and 64 buckets.
    let data_start = 1024 + 64 * 5;
    for len in (0..original.len()).step_by(7).chain([original.len() - 1]) {
        std::fs::write(&path, &original[..len]).unwrap();
        let read_only = exercise(&path, OpenMode::ReadOnly);
        if len < data_start {
            assert_broken(read_only);
        } else {
            // Cut in the record area: the header's data end lies past the file.
            assert!(read_only.is_err(), "a file cut at {len} of {} opened", original.len());
        }
        std::fs::write(&path, &original[..len]).unwrap();
        assert!(exercise(&path, OpenMode::Write).is_err());
    }
}

/// A flip in either header copy is detected: the other copy serves (a read-only open says
/// which in `inspect`, a writer's open writes both anew: tried at every 8th byte); a flip in
/// both is BrokenData.
#[test]
fn every_header_byte_flip_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(make_db(dir.path(), CodecKind::None)).unwrap();
    let path = dir.path().join("flip.kuh");
    let property = |db: &HashDbm, name: &str| db.inspect().unwrap().property(name).unwrap();
    for at in 0..128 {
        for (copies, damage) in [(&[at][..], "first"), (&[512 + at][..], "copy"), (&[at, 512 + at][..], "both")] {
            let mut bytes = original.clone();
            copies.iter().for_each(|&i| bytes[i] ^= 0x41);
            std::fs::write(&path, &bytes).unwrap();
            if damage == "both" {
                assert_broken(HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()));
                assert_broken(HashDbm::open(&path, OpenMode::Write, &Params::new()));
                continue;
            }
            let db = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
            assert_eq!(property(&db, "header_damage"), damage, "byte {at}");
            assert_eq!(db.count().unwrap(), u64::from(RECORDS - RECORDS.div_ceil(10)), "byte {at}");
            drop(db);
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "a read-only open wrote");
            if at % 8 != 0 {
                continue;
            }
            let db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
            assert_eq!(property(&db, "header_repaired"), "true", "byte {at}");
            db.close().unwrap();
            let db = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
            assert_eq!(property(&db, "header_damage"), "none", "byte {at}: not repaired");
        }
    }
}

#[test]
fn wrong_magic_empty_file_and_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.kuh");
    std::fs::write(&path, b"SQLite format 3\0 this is not a kura database at all, but long enough to hold a header ................................................................").unwrap();
    let e = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BrokenData);
    assert!(e.to_string().contains("magic"), "{e}");
    std::fs::write(&path, b"").unwrap();
    assert_broken(HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()));
    let e = HashDbm::open(dir.path(), OpenMode::ReadOnly, &Params::new()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument | ErrorKind::Io), "{e}");
    let e = HashDbm::open(dir.path().join("missing.kuh"), OpenMode::Write, &Params::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
}

#[test]
fn record_length_past_the_end_is_broken_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.kuh");
    let db = HashDbm::open(&path, OpenMode::Truncate, &Params::new().with("num_buckets", 1)).unwrap();
    db.set(b"k", b"v", true).unwrap();
    db.close().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // The only record starts right after the header region and the one bucket: tag, next (1
    // byte), key size, value size. Claim a 2^28-byte value.
    let record = 1024 + 5;
    bytes[record + 3] = 0x80;
    bytes.splice(record + 4..record + 4, [0x80, 0x80, 0x80, 0x01]);
    std::fs::write(&path, &bytes).unwrap();
    let db = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_broken(db.get(b"k"));
}

#[test]
fn flipped_record_bytes_are_detected_and_restore_salvages_the_rest() {
    for codec in [CodecKind::None, CodecKind::Zstd, CodecKind::Snappy] {
        let dir = tempfile::tempdir().unwrap();
        let path = make_db(dir.path(), codec);
        let original = std::fs::read(&path).unwrap();
        let data_start = 1024 + 64 * 5;
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..60 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let at = data_start + (rng as usize % (original.len() - data_start));
            let mut bytes = original.clone();
            bytes[at] ^= 1u8 << ((rng >> 60) % 8);
            std::fs::write(&path, &bytes).unwrap();
            let _ = exercise(&path, OpenMode::ReadOnly);
            // Salvage: every record the flip did not hit comes back.
            let restored = dir.path().join("restored.kuh");
            let count = HashDbm::restore_file(&path, &restored).unwrap();
            assert!(count >= u64::from(RECORDS - RECORDS / 10) - 3, "{codec}: only {count} records salvaged");
            let db = HashDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap();
            for record in db.records().unwrap() {
                let (k, v) = record.unwrap();
                let i: u32 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                assert_eq!(v, value(i), "{codec}: salvaged a wrong value");
            }
        }
    }
}

fn property(db: &HashDbm, name: &str) -> String {
    db.inspect().unwrap().properties().into_iter().find(|(n, _)| n == name).unwrap().1
}

#[test]
fn a_new_or_cleanly_closed_file_is_not_restored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.kuh");
    for mode in [OpenMode::Create, OpenMode::Truncate] {
        let db = HashDbm::open(&path, mode, &Params::new()).unwrap();
        assert_eq!(property(&db, "restored"), "false", "{mode:?}");
        db.set(b"k", b"v", true).unwrap();
        db.close().unwrap();
        let db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
        assert_eq!(property(&db, "restored"), "false");
        assert_eq!(db.get(b"k").unwrap(), b"v");
        db.close().unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn second_writer_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_db(dir.path(), CodecKind::None);
    let db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
    let e = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Locked);
    let e = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Locked);
    db.close().unwrap();
    let reader = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    let second_reader = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap_err().kind(), ErrorKind::Locked);
    assert_eq!(reader.count().unwrap(), second_reader.count().unwrap());
    assert_eq!(reader.set(b"a", b"b", true).unwrap_err().kind(), ErrorKind::Infeasible);
}

#[test]
fn second_writer_process_is_locked_out() {
    const CHILD: &str = "KURA_LOCK_CHILD";
    if let Ok(path) = std::env::var(CHILD) {
        let _db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
        println!("holding");
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = make_db(dir.path(), CodecKind::None);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "second_writer_process_is_locked_out", "--nocapture"])
        .env(CHILD, &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("holding") {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0, "the child died");
    }
    let e = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Locked);
    assert!(e.to_string().contains("locked"), "{e}");
    child.kill().unwrap();
    child.wait().unwrap();
    // The dead holder's lock is gone; its unclean file is restored.
    let db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
    assert_eq!(db.count().unwrap(), u64::from(RECORDS - RECORDS / 10));
}

#[test]
fn bad_arguments_are_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("args.kuh");
    for params in
        ["record_comp=brotli", "num_buckets=0", "num_buckets=lots", "no_such_param=1", "update_mode=sometimes"]
    {
        let e = HashDbm::open(&path, OpenMode::Create, &Params::parse(params).unwrap()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{params}: {e}");
    }
    let db = HashDbm::open(&path, OpenMode::Create, &Params::new()).unwrap();
    let huge = vec![b'k'; kura::MAX_KEY_SIZE + 1];
    assert_eq!(db.set(&huge, b"v", true).unwrap_err().kind(), ErrorKind::InvalidArgument);
    db.close().unwrap();
    let e = HashDbm::open(&path, OpenMode::Write, &Params::parse("record_comp=zstd").unwrap()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("rebuild"), "{e}");
}

#[test]
fn corrupted_compressed_frames_are_broken_data() {
    let raw: Vec<u8> = (0..4000u32).flat_map(|i| format!("{} ", i % 97).into_bytes()).collect();
    for kind in CodecKind::ALL.into_iter().filter(|k| *k != CodecKind::None) {
        let codec = Codec::new(kind, Vec::new()).unwrap();
        let mut stored = Vec::new();
        assert!(codec.encode(&raw, kura::codec::Effort::Dense, &mut stored).unwrap(), "{kind} did not compress");
        let mut out = Vec::new();
        codec.decode(&stored, true, &mut out).unwrap();
        assert_eq!(out, raw);
        for cut in [1, stored.len() / 2, stored.len() - 1] {
            assert_broken(codec.decode(&stored[..cut], true, &mut out));
        }
        // A raw length claiming far more than the frame can hold is refused before allocating.
        let mut lying = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
        lying.extend_from_slice(&stored[5..]);
        assert_broken(codec.decode(&lying, true, &mut out));
    }
}

/// The raw length a compressed frame claims: its leading LEB128 varint (docs/format.md).
fn claimed_raw_len(frame: &[u8]) -> u64 {
    let mut value = 0u64;
    for (i, byte) in frame.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            break;
        }
    }
    value
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Garbage given to any decoder is an error or a value of the claimed length, never a panic.
    #[test]
    fn decoders_survive_garbage(kind in 1usize..7, garbage in proptest::collection::vec(any::<u8>(), 0..300)) {
        let codec = Codec::new(CodecKind::ALL[kind], Vec::new()).unwrap();
        let mut out = Vec::new();
        if codec.decode(&garbage, true, &mut out).is_ok() {
            prop_assert_eq!(out.len() as u64, claimed_raw_len(&garbage));
        }
    }

    /// Random damage anywhere in a file never panics the engine.
    #[test]
    fn random_damage_never_panics(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let dir = tempfile::tempdir().unwrap();
        let path = make_db(dir.path(), CodecKind::Lz4);
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, x) in flips {
            let len = bytes.len();
            bytes[at % len] ^= x | 1;
        }
        std::fs::write(&path, &bytes).unwrap();
        let _ = exercise(&path, OpenMode::ReadOnly);
        let _ = HashDbm::restore_file(&path, dir.path().join("r.kuh"));
        std::fs::write(&path, &bytes).unwrap();
        let _ = exercise(&path, OpenMode::Write);
    }
}
