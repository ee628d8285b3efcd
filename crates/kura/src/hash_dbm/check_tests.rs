//! Tests of `check`'s walk of the record area (check_blocks.rs), beside its walk of the chains:
//! a sound file of every configuration checks clean, also while a writer has it open; a
//! flipped bit anywhere outside the free spans' unused bytes is reported, in the saved free
//! list too; a damaged dead record kept inside a free span is reported.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::path::{Path, PathBuf};

use super::chain_lock::WholeFile;
use super::record::{Block, KIND_FREE};
use super::storage::Storage;
use super::HashDbm;
use crate::dbm::{Dbm, OpenMode, Params};
use crate::encoding::varint_len;
use crate::error::Result;

const RECORDS: u32 = 120;

/// A file of `RECORDS` keys with history (a third replaced, a tenth removed), closed.
fn written(dir: &Path, name: &str, params: &str) -> PathBuf {
    let path = dir.join(format!("{name}.kuh"));
    let params = Params::parse(&format!("num_buckets=64,{params}")).unwrap();
    let db = HashDbm::create(&path, &params).unwrap();
    let value = |i: u32, round: u32| format!("value {i} of round {round}: {}", "ab".repeat((i % 9) as usize));
    for i in 0..RECORDS {
        db.set(format!("key:{i:04}").as_bytes(), value(i, 0).as_bytes(), true).unwrap();
    }
    db.synchronize(true).unwrap();
    for i in (0..RECORDS).filter(|i| i % 3 == 1) {
        db.set(format!("key:{i:04}").as_bytes(), value(i, 1).as_bytes(), true).unwrap();
    }
    for i in (0..RECORDS).filter(|i| i % 10 == 4) {
        db.remove(format!("key:{i:04}").as_bytes()).unwrap();
    }
    if params.get("record_comp") == Some("zstd-dict") {
        db.rebuild(&Params::new()).unwrap();
    }
    db.close().unwrap();
    path
}

fn check_is_clean(path: &Path) -> bool {
    crate::registry::check(path, &Params::new()).unwrap().is_clean()
}

/// The bytes of the file at `path` that no read meets (`unread_bytes`), and where the record
/// area starts.
fn unread(path: &Path) -> (Vec<(u64, u64)>, u64) {
    let db = HashDbm::open(path, OpenMode::ReadOnly, &Params::new()).unwrap();
    let found = db
        .with_all(|slot| {
            let (s, whole) = WholeFile::unshared(slot.as_mut().unwrap());
            Ok((unread_bytes(s, &whole)?, s.header.data_start()))
        })
        .unwrap();
    db.close().unwrap();
    found
}

/// The bytes of a sound file that no read meets, walked block by block (also the salvage
/// soak's, salvage_tests.rs): the unused bytes of each free span (after its tag and length),
/// and the chain pointer of each dead record, which nothing follows (a restore's scan only
/// refuses one that leads before the records, and so does check).
pub(super) fn unread_bytes(s: &Storage, whole: &WholeFile<'_>) -> Result<Vec<(u64, u64)>> {
    let (mut offset, end) = (s.header.data_start(), s.space.end());
    let mut unread = Vec::new();
    while offset < end {
        offset += match s.scan_block(whole, offset)? {
            Block::Filler => 1,
            Block::FreeSpan { len } => {
                unread.push((offset + 1 + varint_len(len) as u64, offset + len));
                len
            }
            Block::Record(header) => {
                if header.kind() == KIND_FREE {
                    unread.push((header.next_at, header.next_at + u64::from(header.next_width)));
                }
                header.total_len()
            }
        };
    }
    Ok(unread)
}

const CONFIGS: [(&str, &str); 6] = [
    ("in_place", ""),
    ("appending", "update_mode=appending"),
    ("lz4", "record_comp=lz4"),
    ("zstd_dict", "record_comp=zstd-dict"),
    ("narrow", "record_check=narrow"),
    ("narrow_appending", "record_check=narrow,update_mode=appending"),
];

#[test]
fn a_sound_file_checks_clean_closed_and_while_a_writer_has_it() {
    let dir = tempfile::tempdir().unwrap();
    for (name, params) in CONFIGS {
        let path = written(dir.path(), name, params);
        let report = crate::registry::check(&path, &Params::new()).unwrap();
        assert!(report.is_clean(), "{name}: {report:?}");
        assert_eq!(report.records, u64::from(RECORDS - RECORDS / 10), "{name}");
        // A writer's unlinked records keep their live tag until it synchronizes: its check
        // passes them, and the file closed after it checks clean again.
        let db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
        for i in (0..RECORDS).step_by(4) {
            db.set(format!("key:{i:04}").as_bytes(), format!("again {i}").as_bytes(), true).unwrap();
        }
        db.remove(b"key:0001").unwrap();
        let report = db.check().unwrap();
        assert!(report.is_clean(), "{name}, open: {report:?}");
        db.close().unwrap();
        assert!(check_is_clean(&path), "{name}: closed again");
    }
}

/// About 120 bytes spread over the record area and the saved free list flipped (one bit each,
/// the all-positions run is `make salvage-soak`'s): each copy
/// that changed a byte a read meets (all but `unread_bytes`) is reported. Inside the free
/// spans, the dead records check finds are reported too (counted, and some must be).
#[test]
fn every_flip_of_a_byte_a_read_meets_is_reported() {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    for (name, params) in [("in_place", ""), ("appending", "update_mode=appending"), ("narrow", "record_check=narrow")]
    {
        let path = written(dir.path(), name, params);
        let image = std::fs::read(&path).unwrap();
        let (insides, data_start) = unread(&path);
        let damaged = dir.path().join("damaged.kuh");
        let (mut inside, mut inside_flagged) = (0, 0);
        // About 120 positions (an open costs about 13 ms in a debug build), odd offsets apart.
        let step = ((image.len() - data_start as usize) / 120) | 1;
        for at in (data_start as usize..image.len()).step_by(step) {
            let mut bytes = image.clone();
            bytes[at] ^= 1 << (at % 8);
            std::fs::write(&damaged, &bytes).unwrap();
            let clean = check_is_clean(&damaged);
            if insides.iter().any(|&(a, b)| (a..b).contains(&(at as u64))) {
                inside += 1;
                inside_flagged += u32::from(!clean);
            } else {
                assert!(!clean, "{name}: the flip at {at} of {} went unreported", image.len());
            }
        }
        println!("{name}: {inside} flips of bytes no read meets, {inside_flagged} reported");
        if name == "in_place" {
            assert!(inside > 0, "{name}: the history left no free span");
            assert!(inside_flagged > 0, "{name}: no damaged dead record inside a free span was reported");
        }
    }
}

/// Two adjacent records removed become one free span at the synchronization, the second
/// keeping its dead tag inside: a flipped byte of its value is reported there.
#[test]
fn a_damaged_dead_record_inside_a_free_span_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("span.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 1)).unwrap();
    for (key, value) in
        [("a", "first live value"), ("b", "removed first"), ("c", "removed second, kept inside"), ("d", "x")]
    {
        db.set(key.as_bytes(), value.as_bytes(), true).unwrap();
    }
    db.remove(b"b").unwrap();
    db.remove(b"c").unwrap();
    db.close().unwrap();
    assert!(check_is_clean(&path));
    let image = std::fs::read(&path).unwrap();
    let (insides, _) = unread(&path);
    let kept = image.windows(11).position(|w| w == b"kept inside").unwrap() as u64;
    assert!(insides.iter().any(|&(a, b)| (a..b).contains(&kept)), "the removed records lie in no span: {insides:?}");
    let mut bytes = image.clone();
    bytes[kept as usize] ^= 0x04;
    let damaged = dir.path().join("damaged.kuh");
    std::fs::write(&damaged, &bytes).unwrap();
    let report = crate::registry::check(&damaged, &Params::new()).unwrap();
    assert!(report.first_problems.iter().any(|p| p.message.contains("inside the free span")), "{report:?}");
    // What reads meet is intact: every live record reads back.
    let db = HashDbm::open(&damaged, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), b"first live value");
    assert_eq!(db.get(b"d").unwrap(), b"x");
}
