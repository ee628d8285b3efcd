//! Tests of what the restore (restore.rs) accepts from a chain, and of the record a resynchronizing
//! scan must not take for the shadow of a dead one: each builds a file, damages its image
//! the way a power loss or a wrong pointer would, and restores it.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use super::chain_lock::WholeFile;
use super::header::{BUCKET_WIDTH, HEADER_REGION};
use super::record::{checksum, KIND_FREE, KIND_MASK};
use super::storage::{bucket_of, hash_key};
use super::HashDbm;
use crate::dbm::{Dbm, DbmExt, OpenMode, Params};

/// The offset of the record of `key` that its chain reaches first.
fn offset_of(db: &HashDbm, key: &[u8]) -> u64 {
    db.with_all(|slot| {
        let (s, whole) = WholeFile::unshared(slot.as_mut().unwrap());
        let hash = hash_key(key);
        let found = s.find(whole.chain(bucket_of(hash, s.header.num_buckets)), key, hash)?;
        Ok(found.unwrap().offset)
    })
    .unwrap()
}

/// Points bucket `bucket`'s head at `target` in `image`.
fn set_head(image: &mut [u8], bucket: u64, target: u64) {
    let at = (HEADER_REGION + bucket * BUCKET_WIDTH) as usize;
    image[at..at + BUCKET_WIDTH as usize].copy_from_slice(&target.to_le_bytes()[..BUCKET_WIDTH as usize]);
}

/// Writes `image` as the file `name` beside the test's files.
fn write_file(dir: &std::path::Path, name: &str, image: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, image).unwrap();
    path
}

/// Writes `image` (taken while the database was open: "not closed") beside the test's files
/// and opens it for writing, which restores it.
fn restore(dir: &std::path::Path, image: &[u8]) -> HashDbm {
    let crashed = write_file(dir, "crashed.kuh", image);
    HashDbm::open(&crashed, OpenMode::Write, &Params::new()).unwrap()
}

/// A new HashDbm `name` in `dir` of `buckets` buckets, updated in `mode` ("in_place" or
/// "appending"): its path and the open database.
fn create_db(dir: &std::path::Path, name: &str, buckets: u64, mode: &str) -> (std::path::PathBuf, HashDbm) {
    let path = dir.join(name);
    let params = Params::new().with("num_buckets", buckets).with("update_mode", mode);
    let db = HashDbm::create(&path, &params).unwrap();
    (path, db)
}

/// The first key `prefix{i}` whose bucket among `buckets` is `bucket`.
fn key_in_bucket(prefix: &str, bucket: u64, buckets: u64) -> Vec<u8> {
    (0..).map(|i| format!("{prefix}{i}").into_bytes()).find(|k| bucket_of(hash_key(k), buckets) == bucket).unwrap()
}

/// A pointer of bucket 3 that reaches a record of bucket 1 (here an old version of a key,
/// unlinked by a replace and held until the next hard synchronization, so still tagged live)
/// must not be followed: the old version was taken from it and, salvaged after the current
/// one, hid it; the key was counted twice; and as no chain looked broken, the records that
/// bucket 3 lost were never searched for.
#[test]
fn salvage_takes_no_record_of_another_bucket_from_a_chain() {
    const BUCKETS: u64 = 4;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", BUCKETS)).unwrap();
    let replaced = key_in_bucket("k", 1, BUCKETS);
    let lost = key_in_bucket("j", 3, BUCKETS);
    db.set(&replaced, b"old version", true).unwrap();
    db.set(&lost, b"bucket 3", true).unwrap();
    db.synchronize(true).unwrap();
    let old = offset_of(&db, &replaced);
    db.set(&replaced, b"new version, longer so it goes elsewhere", true).unwrap();
    assert_ne!(offset_of(&db, &replaced), old, "the replace reused the old place");
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    set_head(&mut image, 3, old);
    let restored = restore(dir.path(), &image);
    assert_eq!(restored.get(&replaced).unwrap(), b"new version, longer so it goes elsewhere");
    assert_eq!(restored.get(&lost).unwrap(), b"bucket 3", "the scan did not run");
    assert_eq!(restored.count().unwrap(), 2);
}

/// A live record whose `next` field starts with `110sssss`, its own checksum bits, reads one
/// byte further as an intact dead record with its key and value. Met at its start by a scan
/// resynchronizing after a damaged block, with its chain broken, it was taken for the shadow
/// of that dead record and dropped. The dead record's `next` (the pointer shifted right by 7
/// bits) points into the bucket area, where no writer ever points: no dead record.
#[test]
fn restore_scan_keeps_a_record_whose_pointer_reads_as_a_dead_tag() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pointer.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 1)).unwrap();
    // Places the predecessor at an offset whose low 7 bits are `10xxxxx`.
    db.set(b"first", &[7u8; 180], true).unwrap();
    let damaged = b"the predecessor, damaged".to_vec();
    db.set(b"q", &damaged, true).unwrap();
    let predecessor = offset_of(&db, b"q");
    assert_eq!(predecessor & 0x60, 0x40, "the predecessor's offset {predecessor} gives no dead tag");
    let hash = hash_key(b"r");
    let value = (0..)
        .map(|i| format!("kept value {i}").into_bytes())
        .find(|v| u64::from(checksum(hash, false, v).narrow() >> 8) == predecessor & 0x1F)
        .unwrap();
    db.set(b"r", &value, true).unwrap();
    db.synchronize(true).unwrap();
    let record = offset_of(&db, b"r") as usize;
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    assert_eq!(image[record + 1] & KIND_MASK, KIND_FREE, "the pointer's first byte is no dead tag");
    // The only chain broken (its head points into the header), and the block before the
    // record damaged, so that the scan meets the record resynchronizing.
    set_head(&mut image, 0, 1);
    let at = image.windows(damaged.len()).position(|w| w == damaged).unwrap();
    image[at] ^= 0x02;
    let restored = restore(dir.path(), &image);
    assert_eq!(restored.get(b"r").unwrap(), value, "a live record was taken for a dead one");
    assert_eq!(restored.get(b"first").unwrap(), [7u8; 180]);
}

/// A file closed cleanly ends with its saved free list, after the record area. A scan that
/// went on to the end of the file read those bytes as records (here an intact record put
/// after the list, as its varints could read): a value never written came back.
#[test]
fn restore_scan_of_a_clean_file_stops_at_the_end_of_its_record_area() {
    use super::record::{encode_record, CheckLayout, KIND_RECORD};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clean.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 1)).unwrap();
    for key in [&b"a"[..], b"b", b"c"] {
        db.set(key, b"kept", true).unwrap();
    }
    db.remove(b"b").unwrap();
    db.close().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    let ghost = b"never written".to_vec();
    let check = checksum(hash_key(b"ghost"), false, &ghost);
    encode_record(&mut image, CheckLayout::WideAcrossSectors, KIND_RECORD, false, check, 0, 1, b"ghost", &ghost);
    set_head(&mut image, 0, 1);
    let source = write_file(dir.path(), "source.kuh", &image);
    let dest = dir.path().join("dest.kuh");
    HashDbm::restore_file(&source, &dest).unwrap();
    let restored = HashDbm::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert!(restored.get(b"ghost").is_err(), "a record after the free list was taken");
    assert_eq!(restored.get(b"a").unwrap(), b"kept");
    assert_eq!(restored.get(b"c").unwrap(), b"kept");
    assert_eq!(restored.count().unwrap(), 2);
}

/// A record the scan meets resynchronizing (here inside the damaged last record) whose bytes
/// run on past the end of the record area, into the saved free list, is none.
#[test]
fn restore_scan_takes_no_record_running_past_the_record_area() {
    use super::record::{encode_record_header, KIND_RECORD, MAX_HEADER_SIZE};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clean.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 1)).unwrap();
    let last = vec![b'x'; 64];
    db.set(b"a", b"kept", true).unwrap();
    db.set(b"b", b"removed", true).unwrap();
    db.set(b"c", &last, true).unwrap();
    db.remove(b"b").unwrap();
    db.close().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    // A record "ghost" from inside the value of "c" to the end of the file, its checksum
    // computed over the bytes there, the end of "c" and the free list.
    let at = image.windows(last.len()).position(|w| w == last).unwrap() + 8;
    let key = b"ghost";
    let header_len = 5;
    let value_at = at + header_len + key.len();
    let value_len = image.len() - value_at;
    let check = checksum(hash_key(key), false, &image[value_at..]);
    let mut header = [0u8; MAX_HEADER_SIZE];
    assert_eq!(encode_record_header(&mut header, KIND_RECORD, false, check, 0, 1, key.len(), value_len), header_len);
    image[at..at + header_len].copy_from_slice(&header[..header_len]);
    image[at + header_len..value_at].copy_from_slice(key);
    set_head(&mut image, 0, 1);
    let source = write_file(dir.path(), "source.kuh", &image);
    let dest = dir.path().join("dest.kuh");
    HashDbm::restore_file(&source, &dest).unwrap();
    let restored = HashDbm::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert!(restored.get(b"ghost").is_err(), "a record running into the free list was taken");
    assert_eq!(restored.get(b"a").unwrap(), b"kept");
}

/// A tombstone's value is empty: a chain reaching one with a value (here bytes inside
/// another record's value, with a `next` to an old version of another key) is broken there.
/// Followed, it gave that key its replaced value, which then hid the newer one the scan found.
#[test]
fn salvage_follows_no_tombstone_with_a_value() {
    use super::record::{encode_record, CheckLayout, KIND_TOMBSTONE};
    let dir = tempfile::tempdir().unwrap();
    let (path, db) = create_db(dir.path(), "tombstone.kuh", 1, "appending");
    db.set(b"j", b"replaced", true).unwrap();
    let replaced = offset_of(&db, b"j");
    let inner = b"inside a value".to_vec();
    let check = checksum(hash_key(b"k"), false, &inner);
    let mut carrier = Vec::new();
    encode_record(&mut carrier, CheckLayout::Narrow, KIND_TOMBSTONE, false, check, replaced, 3, b"k", &inner);
    db.set(b"k", &carrier, true).unwrap();
    db.set(b"j", b"current", true).unwrap();
    db.synchronize(true).unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    let at = image.windows(carrier.len()).position(|w| w == carrier).unwrap();
    set_head(&mut image, 0, at as u64);
    let restored = restore(dir.path(), &image);
    assert_eq!(restored.get(b"j").unwrap(), b"current");
    assert_eq!(restored.get(b"k").unwrap(), carrier);
}

/// Bytes inside a value that read as an intact record (its 13-bit check matching, as one
/// reading in 8,192 does) while the scan of an appending file resynchronizes after a damaged
/// block: a key never written came back (the appending ShardDbm set's power-loss run, round
/// 148). In appending mode a record points to nothing or back to an older record of its own
/// bucket; this one points back to a record of another bucket, and is no record.
#[test]
fn appending_scan_takes_no_record_pointing_into_another_bucket() {
    use super::record::{encode_record, CheckLayout, KIND_RECORD};
    const BUCKETS: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    let (path, db) = create_db(dir.path(), "appending.kuh", BUCKETS, "appending");
    let ghost = key_in_bucket("ghost", 0, BUCKETS);
    let elsewhere = key_in_bucket("other", 1, BUCKETS);
    db.set(&elsewhere, b"kept", true).unwrap();
    let target = offset_of(&db, &elsewhere);
    // A fake record: a 3-byte pointer to that record, the ghost key and a value, checked.
    let inner = b"never written".to_vec();
    let check = checksum(hash_key(&ghost), false, &inner);
    let mut carrier = b"damaged here: ".to_vec();
    let fake_in_carrier = carrier.len();
    encode_record(&mut carrier, CheckLayout::Narrow, KIND_RECORD, false, check, target, 3, &ghost, &inner);
    let fake_len = (carrier.len() - fake_in_carrier) as u64;
    let carrier_key = key_in_bucket("carrier", 2, BUCKETS);
    db.set(&carrier_key, &carrier, true).unwrap();
    db.synchronize(true).unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    let at = image.windows(carrier.len()).position(|w| w == carrier).unwrap();
    let fake_at = (at + fake_in_carrier) as u64;
    // The fake record lies within one sector, so that its 13 bits are all it has.
    assert!(!CheckLayout::WideAcrossSectors.is_wide(fake_at, fake_len));
    image[at] ^= 0x02;
    let restored = restore(dir.path(), &image);
    assert!(restored.get(&ghost).is_err(), "a record read inside a value was taken");
    assert_eq!(restored.get(&elsewhere).unwrap(), b"kept");
}

/// In place, a file closed cleanly: a flipped byte turns the key of one record into another
/// key of its chain (`key:1` read as `key:0`, the soak's `key:01883` as `key:00883`). The
/// damaged record fails its check and decided the key it reads as, so the intact record of
/// that key further down the chain was lost with it, though none of its bytes were damaged
/// (the soak's one missed record in 190,000 flips). A key has one record in its chain in
/// place, so the intact one is the key's own: it is taken, and only the damaged record is
/// lost. (In appending mode the damaged record may be a newer version of any older key of its
/// bucket, which are dropped, never given an older value: checked here too.)
#[test]
fn a_damaged_key_reading_as_a_later_key_of_its_chain_costs_only_its_own_record() {
    for mode in ["in_place", "appending"] {
        let dir = tempfile::tempdir().unwrap();
        let (path, db) = create_db(dir.path(), "flipped.kuh", 1, mode);
        // Chain order is newest first: `key:1`, then `key:0`, then `other`.
        let written = [(&b"other"[..], &b"o"[..]), (b"key:0", b"zero"), (b"key:1", b"one")];
        for (key, value) in written {
            db.set(key, value, true).unwrap();
        }
        db.close().unwrap();
        let mut image = std::fs::read(&path).unwrap();
        assert_eq!(image.windows(5).filter(|w| *w == b"key:1").count(), 1);
        let at = image.windows(5).position(|w| w == b"key:1").unwrap();
        image[at + 4] ^= 1;
        let source = write_file(dir.path(), "source.kuh", &image);
        let dest = dir.path().join("dest.kuh");
        HashDbm::restore_file(&source, &dest).unwrap();
        let restored = HashDbm::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
        assert!(restored.get(b"key:1").is_err(), "{mode}: the damaged record came back");
        // Appending mode too: the damaged record's key put back by one byte passes its check
        // (damaged_owner.rs), so it shadows `key:1` only, not the older keys of its chain.
        for (key, value) in &written[..2] {
            assert_eq!(&restored.get(key).unwrap(), value, "{mode}: the intact record of {key:?} was lost");
        }
    }
}

/// Appending mode: every byte of a key's newest record damaged in turn (flipped, then
/// zeroed), in chains of a few dozen keys that each have older versions behind it. The
/// restore must give every other key its current value: the damaged record may be the newest
/// version of any key of its chain, and until damaged_owner.rs named whose it was, all of
/// them were dropped. The damaged key itself is absent or current, never an older value.
/// Then whole stretches of the record zeroed (key and value together, which no check can
/// attribute): nothing may come back older, though keys may be dropped.
#[test]
fn appending_a_damaged_byte_costs_only_its_own_key() {
    const BUCKETS: u64 = 4;
    let dir = tempfile::tempdir().unwrap();
    let (path, db) = create_db(dir.path(), "appending.kuh", BUCKETS, "appending");
    let mut model = std::collections::BTreeMap::new();
    for round in 0..3u32 {
        for i in (0..48u32).filter(|i| round == 0 || i % (round + 1) == 0) {
            let key = format!("key:{i:03}").into_bytes();
            let value = format!("value {i} round {round} {}", "x".repeat((i % 5) as usize)).into_bytes();
            db.set(&key, &value, true).unwrap();
            model.insert(key, value);
        }
    }
    // Newest records (written last, or rewritten in round 2) and one key never rewritten.
    let damaged_keys: Vec<Vec<u8>> = ["key:047", "key:042", "key:006", "key:001"].map(|k| k.as_bytes().to_vec()).into();
    let spans: Vec<(Vec<u8>, u64, u64)> = damaged_keys
        .iter()
        .map(|key| {
            db.with_all(|slot| {
                let (s, whole) = WholeFile::unshared(slot.as_mut().unwrap());
                let hash = hash_key(key);
                let found = s.find(whole.chain(bucket_of(hash, s.header.num_buckets)), key, hash)?.unwrap();
                Ok((key.clone(), found.offset, found.offset + found.header.total_len()))
            })
            .unwrap()
        })
        .collect();
    db.close().unwrap();
    let image = std::fs::read(&path).unwrap();
    let restore_with = |damage: &dyn Fn(&mut Vec<u8>)| {
        let mut damaged = image.clone();
        damage(&mut damaged);
        let source = write_file(dir.path(), "source.kuh", &damaged);
        let dest = dir.path().join("dest.kuh");
        let _ = std::fs::remove_file(&dest);
        HashDbm::salvage_file(&source, &dest).unwrap();
        let restored = HashDbm::open(&dest, OpenMode::ReadOnly, &Params::new()).unwrap();
        let got: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
            restored.records().unwrap().map(|record| record.unwrap()).collect();
        restored.close().unwrap();
        for (key, value) in &got {
            assert_eq!(model.get(key), Some(value), "{:?}: a value not current", String::from_utf8_lossy(key));
        }
        got
    };
    for (key, start, end) in &spans {
        for at in *start..*end {
            for zeroed in [false, true] {
                let got = restore_with(&|bytes: &mut Vec<u8>| {
                    let byte = &mut bytes[at as usize];
                    *byte = if zeroed { 0 } else { *byte ^ (1 << (at % 8)) };
                });
                let lost: Vec<_> = model.keys().filter(|k| *k != key && !got.contains_key(*k)).collect();
                assert!(lost.is_empty(), "byte {at} of {:?}'s record ({start}..{end}): lost {lost:?}", key);
            }
        }
        // Stretches across the key and the value, and the whole record.
        for (from, to) in [(*start + 12, *start + 20), (*start + 14, *end - 2), (*start, *end)] {
            restore_with(&|bytes: &mut Vec<u8>| bytes[from as usize..to as usize].fill(0));
        }
    }
}
