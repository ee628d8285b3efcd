//! Tests of the record area's block structure (mostly in place): the tags on disk must always
//! describe the blocks the chains and the free pool use, since a restore after a crash
//! walks the area by those tags.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeSet;

use super::chain_lock::WholeFile;
use super::record::{Block, KIND_FREE};
use super::storage::Storage;
use super::HashDbm;
use crate::dbm::{Dbm, Params};
use crate::split_mix::SplitMix64;

/// The block starts of the record area, walked from its start by the on-disk lengths.
fn block_starts(s: &Storage, whole: &WholeFile<'_>) -> BTreeSet<u64> {
    let mut starts = BTreeSet::new();
    let mut offset = s.header.data_start();
    let end = s.space.end();
    while offset < end {
        starts.insert(offset);
        let step = match s.scan_block(whole, offset).unwrap() {
            Block::Filler => 1,
            Block::FreeSpan { len } => len,
            Block::Record(header) => header.total_len(),
        };
        offset += step;
    }
    assert_eq!(offset, end, "the last block runs past the end of the record area");
    starts
}

/// Checks that every chained record and every pooled free block starts a block of the walk,
/// and that each pooled block is marked free on disk with its length.
fn check_layout(db: &HashDbm) {
    db.with_all(|slot| {
        let storage = slot.as_mut().unwrap();
        let (s, whole) = WholeFile::unshared(storage);
        let starts = block_starts(s, &whole);
        for bucket in 0..s.header.num_buckets {
            s.walk(whole.chain(bucket), |offset, _, _, _| {
                assert!(starts.contains(&offset), "record at {offset} lies inside another block");
                Ok(true)
            })
            .unwrap();
        }
        for held in s.held_blocks() {
            match s.scan_block(&whole, held.offset).unwrap() {
                Block::Record(header) if header.total_len() == held.len => {}
                other => panic!("held record at {} ({} bytes) is {other:?} on disk", held.offset, held.len),
            }
            assert!(starts.contains(&held.offset), "held record at {} lies inside another block", held.offset);
        }
        for (offset, len) in s.space.blocks() {
            assert!(starts.contains(&offset), "free block at {offset} lies inside another block");
            let on_disk = match s.scan_block(&whole, offset).unwrap() {
                Block::FreeSpan { len } => len,
                Block::Record(header) if header.kind() == KIND_FREE => header.total_len(),
                other => panic!("free block at {offset} is tagged {other:?}"),
            };
            assert_eq!(on_disk, len, "free block at {offset}: pooled and tagged lengths differ");
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn free_tags_match_the_pool_through_overwrites_and_syncs() {
    free_tags_match_the_pool(&Params::new(), 4000);
}

/// The same with version 4's layout (`record_check=narrow`), whose records have the wide
/// check only where they cross a sector, so that a free block may fit a record at one offset
/// and not at another.
#[test]
fn free_tags_match_the_pool_with_narrow_record_checks() {
    free_tags_match_the_pool(&Params::new().with("record_check", "narrow"), 400);
}

fn free_tags_match_the_pool(params: &Params, operations: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("layout.kuh");
    let params = params.clone().with("num_buckets", 64).with("record_comp", "lz4");
    let mut db = HashDbm::create(&path, &params).unwrap();
    let mut rng = SplitMix64::new(19);
    for _ in 0..operations {
        let key = format!("key{}", rng.below(200));
        let len = match rng.below(10) {
            0 => 1500 + rng.below(2500),
            1..=2 => 200 + rng.below(800),
            _ => 1 + rng.below(120),
        } as usize;
        // Values that compress to varying sizes, as in tests/power_loss.rs.
        let stamp = format!("{key}:{:x}:", rng.next_u64());
        let value: Vec<u8> = stamp.bytes().cycle().take(len.max(20)).collect();
        match rng.below(10) {
            0..=1 => {
                let _ = db.remove(key.as_bytes());
            }
            2 => {
                let mut grown = db.get(key.as_bytes()).unwrap_or_default();
                grown.extend_from_slice(&value[..value.len().min(300)]);
                db.set(key.as_bytes(), &grown, true).unwrap();
            }
            _ => db.set(key.as_bytes(), &value, true).unwrap(),
        }
        match rng.below(60) {
            0..=1 => db.checkpoint().unwrap(),
            2 => {
                db.close().unwrap();
                db = HashDbm::open(&path, crate::dbm::OpenMode::Write, &Params::new()).unwrap();
            }
            _ => {}
        }
        check_layout(&db);
    }
}

/// A new file is version 5, every record, tombstone and dead record of it with the wide
/// check; `record_check=narrow` makes a version 4 file, whose records have it only where they
/// cross a sector; an open that names the other setting is refused, naming the file.
#[test]
fn every_record_of_a_new_file_has_the_wide_check_and_narrow_keeps_version_4() {
    let dir = tempfile::tempdir().unwrap();
    for (setting, version, all_wide) in [(None, 5, true), (Some("wide"), 5, true), (Some("narrow"), 4, false)] {
        let path = dir.path().join(format!("{setting:?}.kuh"));
        let params = setting.map_or_else(Params::new, |s| Params::new().with("record_check", s));
        let db =
            HashDbm::create(&path, &params.clone().with("num_buckets", 8).with("update_mode", "appending")).unwrap();
        for i in 0..300u32 {
            db.set(format!("k{}", i % 100).as_bytes(), &vec![b'v'; (i as usize * 13) % 700], true).unwrap();
            if i % 9 == 0 {
                let _ = db.remove(format!("k{}", i % 50).as_bytes());
            }
        }
        let (mut wide, mut narrow) = (0, 0);
        db.with_all(|slot| {
            let storage = slot.as_mut().unwrap();
            assert_eq!(storage.header.version, version, "{setting:?}");
            let (s, whole) = WholeFile::unshared(storage);
            for offset in block_starts(s, &whole) {
                if let Block::Record(header) = s.scan_block(&whole, offset).unwrap() {
                    *(if header.check_wide.is_some() { &mut wide } else { &mut narrow }) += 1;
                }
            }
            Ok(())
        })
        .unwrap();
        assert!(wide > 0, "{setting:?}: no record has a wide check");
        assert_eq!(narrow == 0, all_wide, "{setting:?}: {narrow} records without a wide check, {wide} with");
        let stats = db.inspect().unwrap();
        let properties: std::collections::BTreeMap<String, String> = stats.properties().into_iter().collect();
        let expected = if all_wide { ("wide", "37") } else { ("narrow", "13") };
        assert_eq!(properties.get("record_check").map(String::as_str), Some(expected.0));
        assert_eq!(properties.get("record_check_bits").map(String::as_str), Some(expected.1));
        db.close().unwrap();
        let other = if all_wide { "narrow" } else { "wide" };
        let error =
            HashDbm::open(&path, crate::dbm::OpenMode::Write, &Params::new().with("record_check", other)).unwrap_err();
        assert!(error.to_string().contains("record_check") && error.to_string().contains(&*path.to_string_lossy()));
    }
}

/// The scan of a restore walks past a dead record by its length. It used to step into it
/// one byte at a time, and a byte 0xE0 in the dead value then read as a free-span tag whose
/// length (here 96) jumped over the live records after it: the "free-span tag covering live
/// records" of the first power-loss images was such a byte, not a tag the writer left.
#[test]
fn restore_scan_skips_dead_records_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dead.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 1)).unwrap();
    let mut dead_value = vec![0xE0, 96];
    dead_value.resize(24, 1);
    db.set(b"a", &dead_value, true).unwrap();
    for key in [&b"b"[..], b"c", b"d"] {
        db.set(key, b"live", true).unwrap();
    }
    db.remove(b"a").unwrap();
    db.checkpoint().unwrap();
    let image = std::fs::read(&path).unwrap();
    drop(db);
    let restored = restore_by_scan_alone(dir.path(), image);
    for key in [&b"b"[..], b"c", b"d"] {
        assert_eq!(restored.get(key).unwrap(), b"live", "{}", String::from_utf8_lossy(key));
    }
    assert!(restored.get(b"a").is_err(), "a removed record came back");
}

/// Flips a bit of the first byte of `pattern`'s one occurrence in `image`: a block damaged
/// there makes a restore scan resynchronize byte by byte through what follows.
fn damage_first_byte_of(image: &mut [u8], pattern: &[u8]) {
    let at = image.windows(pattern.len()).position(|w| w == pattern).unwrap();
    image[at] ^= 0x02;
}

/// Breaks the only chain of a one-bucket file image (its head then points into the header),
/// so that a restore has to find every record by scanning the record area; writes it beside
/// the test's files and opens it for writing, which restores it. The image was taken while
/// the database was open: its header says "not closed".
fn restore_by_scan_alone(dir: &std::path::Path, mut image: Vec<u8>) -> HashDbm {
    let bucket = super::header::HEADER_REGION as usize;
    image[bucket..bucket + super::header::BUCKET_WIDTH as usize].copy_from_slice(&[1, 0, 0, 0, 0]);
    let crashed = dir.join("crashed.kuh");
    std::fs::write(&crashed, &image).unwrap();
    HashDbm::open(&crashed, crate::dbm::OpenMode::Write, &Params::new()).unwrap()
}

/// A dead tag has its top bit set: read from the byte before it, it is the first byte of a
/// longer `next` field, and the dead record's key, value and check byte follow. When that
/// byte (here the last value byte of the record before) equals the dead record's tag when it
/// was live, the scan, stepping byte by byte after a damaged block, read an intact live
/// record there: the removed record came back (the 10,000-image power-loss run, round 125).
#[test]
fn restore_scan_does_not_revive_a_dead_record_read_from_the_byte_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shadow.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 1)).unwrap();
    let removed = b"removed value".to_vec();
    let check = super::record::checksum(super::storage::hash_key(b"a"), false, &removed);
    let live_tag = super::record::KIND_RECORD | (check.narrow() >> 8) as u8;
    let mut before = vec![1u8; 24];
    *before.last_mut().unwrap() = live_tag;
    db.set(b"p", &before, true).unwrap();
    db.set(b"a", &removed, true).unwrap();
    db.set(b"b", b"live", true).unwrap();
    db.remove(b"a").unwrap();
    db.checkpoint().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    // Damages a value byte of "p", so that the scan resynchronizes byte by byte through it.
    damage_first_byte_of(&mut image, &before);
    let restored = restore_by_scan_alone(dir.path(), image);
    assert!(restored.get(b"a").is_err(), "a removed record came back");
    assert_eq!(restored.get(b"b").unwrap(), b"live");
}

/// A free span written over removed records keeps the first one's bytes after its own tag
/// and length. Read from the length byte, they are a record with a `next` one byte shorter
/// (still 0, where the record was its chain's last), then the removed key, value and check
/// bytes: intact when the length equals the record's live tag. A scan resynchronizing byte
/// by byte through a damaged block right before the span took it, and the removed record
/// came back (the power-loss test that cuts checkpoints, 20,000 images).
///
/// Built here: two buckets; "a" and "c" of bucket 0 removed together (a span covers merged
/// blocks only), after "r", the record "a" pointed at, was removed, which rewrote the
/// pointer of "a" to 0 in its 3 bytes; "x" of bucket 1 right before "a" damaged. The value
/// of "a" is chosen so that the span's length is its live tag.
#[test]
fn restore_scan_does_not_revive_a_removed_record_under_a_free_span() {
    let key_in = |bucket: u64| {
        (0u64..)
            .map(|i| format!("k{i}").into_bytes())
            .find(|key| super::storage::bucket_of(super::storage::hash_key(key), 2) == bucket)
            .unwrap()
    };
    let (zero, one) = (key_in(0), key_in(1));
    let key = |base: &[u8], suffix: &str| {
        // Keys of a bucket: its first key with a suffix, searched until the bucket matches.
        (0u64..)
            .map(|i| [base, format!("{suffix}{i}").as_bytes()].concat())
            .find(|key| {
                super::storage::bucket_of(super::storage::hash_key(key), 2)
                    == super::storage::bucket_of(super::storage::hash_key(base), 2)
            })
            .unwrap()
    };
    let (r, a, c) = (key(&zero, "r"), key(&zero, "a"), key(&zero, "c"));
    let (x, b) = (key(&one, "x"), key(&one, "b"));
    // A record whose `next` is 3 bytes wide: tag, next, both sizes, the check byte, the wide
    // check, then key and value.
    let record_len = |key: &[u8], value: &[u8]| 1 + 3 + 1 + 1 + 1 + 3 + key.len() + value.len();
    let second = b"second value".to_vec();
    let hash = super::storage::hash_key(&a);
    let removed = (0u64..)
        .flat_map(|stamp| (10..70).map(move |len| (stamp, len)))
        .map(|(stamp, len)| format!("{stamp:08x}:").bytes().cycle().take(len).collect::<Vec<u8>>())
        .find(|value| {
            let tag = super::record::KIND_RECORD | (super::record::checksum(hash, false, value).narrow() >> 8) as u8;
            usize::from(tag) == record_len(&a, value) + record_len(&c, &second)
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("span.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 2)).unwrap();
    let damaged_value = vec![7u8; 40];
    db.set(&r, b"pointed at", true).unwrap();
    db.set(&x, &damaged_value, true).unwrap();
    db.set(&a, &removed, true).unwrap();
    db.set(&c, &second, true).unwrap();
    db.set(&b, b"live", true).unwrap();
    db.remove(&r).unwrap();
    db.checkpoint().unwrap();
    db.remove(&a).unwrap();
    db.remove(&c).unwrap();
    db.checkpoint().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    let span = image.windows(removed.len()).position(|w| w == removed).unwrap() - record_len(&a, b"");
    assert_eq!(image[span], 0xE0, "the checkpoint wrote a free span over the removed records");
    assert_eq!(
        image[span + 1],
        super::record::KIND_RECORD | (super::record::checksum(hash, false, &removed).narrow() >> 8) as u8
    );
    assert_eq!(
        image[span + 2..span + 4],
        [0x80, 0x00],
        "the pointer of the removed record reads as 0 from the byte after its first"
    );
    damage_first_byte_of(&mut image, &damaged_value);
    let restored = restore_by_scan_alone(dir.path(), image);
    assert!(restored.get(&a).is_err(), "a removed record came back");
    assert_eq!(restored.get(&b).unwrap(), b"live");
}

/// A tombstone's value is empty. The last bytes of a padded `next` field (a continuation
/// byte `10 0 sssss`, then 0) read as a tombstone whose key, value and check byte are the
/// record's own: a scan resynchronizing there took it, and in appending mode removed the
/// key (the 10,000-image power-loss run, round 198). Here such bytes sit in another value.
#[test]
fn restore_scan_takes_no_tombstone_with_a_value() {
    use super::record::{checksum, encode_record, CheckLayout, KIND_TOMBSTONE};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tombstone.kuh");
    let params = Params::new().with("num_buckets", 1).with("update_mode", "appending");
    let db = HashDbm::create(&path, &params).unwrap();
    let value = b"kept value".to_vec();
    let check = checksum(super::storage::hash_key(b"a"), false, &value);
    let mut carrier = vec![1u8; 8];
    encode_record(&mut carrier, CheckLayout::Narrow, KIND_TOMBSTONE, false, check, 0, 1, b"a", &value);
    db.set(b"a", &value, true).unwrap();
    db.set(b"z", &carrier, true).unwrap();
    db.checkpoint().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    // Damages the carrier's value, so that the scan resynchronizes byte by byte through it.
    damage_first_byte_of(&mut image, &carrier);
    let restored = restore_by_scan_alone(dir.path(), image);
    assert_eq!(restored.get(b"a").unwrap(), value, "a record was taken for removed");
}

/// Bytes of the torn value that reached the disk: one 512-byte sector less than a 4 KiB page.
const TORN_AT: usize = 3584;
/// Its length: the record straddles a page boundary, as records of a few KB do.
const TORN_VALUE_LEN: usize = 5000;

/// A record written since the last `synchronize(true)` and torn by a power loss (its last
/// sectors never reached the disk, so its value ends in zeros) fails its 13-bit checksum
/// only 8,191 times in 8,192; the other time the torn value was taken as the record's value,
/// by the chain walk or the scan alike. The ShardDbm power-loss simulation met it in a
/// release run (4 HashDbm shards in appending mode, seed 1, round 50, image 9: key0074 came
/// back as its newest value with its last 122 bytes zero). Since format version 3 a record
/// crossing a sector, as every torn one does, has 24 more check bits. Here the value is
/// chosen among candidates so that its torn copy has the same 13-bit checksum.
#[test]
fn restore_takes_no_torn_value_whose_checksum_collides() {
    let key = b"a";
    let hash = super::storage::hash_key(key);
    let torn_copy = |value: &[u8]| {
        let mut torn = value.to_vec();
        torn[TORN_AT..].fill(0);
        torn
    };
    let value = (0u64..)
        .map(|stamp| format!("{stamp:016x}:").bytes().cycle().take(TORN_VALUE_LEN).collect::<Vec<u8>>())
        .find(|value| {
            super::record::checksum(hash, false, value).narrow()
                == super::record::checksum(hash, false, &torn_copy(value)).narrow()
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn.kuh");
    let params = Params::new().with("num_buckets", 1).with("update_mode", "appending");
    let db = HashDbm::create(&path, &params).unwrap();
    db.set(key, b"synced", true).unwrap();
    db.checkpoint().unwrap();
    db.set(key, &value, true).unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    let at = image.windows(64).position(|w| w == &value[..64]).unwrap();
    image[at + TORN_AT..at + TORN_VALUE_LEN].fill(0);
    let crashed = dir.path().join("crashed.kuh");
    std::fs::write(&crashed, &image).unwrap();
    let restored = HashDbm::open(&crashed, crate::dbm::OpenMode::Write, &Params::new()).unwrap();
    let got = restored.get(key).unwrap();
    assert!(got == b"synced" || got == value, "a torn value came back ({} bytes)", got.len());
}

/// A free span is believed only if a block starts where it ends, and a zero byte there is
/// no proof: zeros lie inside records. A span's tag torn from its length at a page boundary
/// (the tag written since the sync, the length byte an old one) ended on a zero inside a
/// record's value, and the scan skipped the live record between (the ShardDbm power-loss
/// run, in place, round 62: a record synced and modified since came back absent). Here the
/// first record's tag and first byte are made into such a span.
#[test]
fn restore_scan_believes_no_span_ending_on_a_zero_inside_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn_span.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 1)).unwrap();
    let (first, carrier) = (b"first value".to_vec(), b"ab\x00\x07cd".to_vec());
    db.set(b"p", &first, true).unwrap();
    db.set(b"k", b"live", true).unwrap();
    db.set(b"q", &carrier, true).unwrap();
    db.checkpoint().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    // "p" is the chain's last record: tag, a one-byte `next` of 0, key_len, value_len,
    // check_lo, the key, then the value.
    let record_at = image.windows(first.len()).position(|w| w == first).unwrap() - 6;
    let zero_at = image.windows(carrier.len()).position(|w| w == carrier).unwrap() + 2;
    let span_len = u8::try_from(zero_at - record_at).unwrap();
    assert!(span_len < 0x80, "a one-byte varint");
    image[record_at] = super::record::TAG_FREE_SPAN;
    image[record_at + 1] = span_len;
    let restored = restore_by_scan_alone(dir.path(), image);
    assert_eq!(restored.get(b"k").unwrap(), b"live", "a span ending on a zero swallowed a live record");
    assert_eq!(restored.get(b"q").unwrap(), carrier);
}

/// A torn span's length can also reach past the record area into the growth margin, whose
/// zeros run to the end of the file and so read as the end of the area: such a span was
/// believed and skipped every live record after it (the ShardDbm power-loss run, in place,
/// round 149). A span must end within the data end the header recorded.
#[test]
fn restore_scan_believes_no_span_reaching_past_the_record_area() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long_span.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", 1)).unwrap();
    let first = b"first value".to_vec();
    db.set(b"p", &first, true).unwrap();
    db.set(b"k", b"live", true).unwrap();
    db.checkpoint().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    let record_at = image.windows(first.len()).position(|w| w == first).unwrap() - 6;
    // 2,000 bytes (a two-byte varint): far past the two records, into the zeros after them.
    let span_len: u16 = 2000;
    assert!(record_at + usize::from(span_len) < image.len(), "the margin holds the span's end");
    image[record_at] = super::record::TAG_FREE_SPAN;
    image[record_at + 1] = (span_len & 0x7f) as u8 | 0x80;
    image[record_at + 2] = (span_len >> 7) as u8;
    let restored = restore_by_scan_alone(dir.path(), image);
    assert_eq!(restored.get(b"k").unwrap(), b"live", "a span past the area swallowed a live record");
}

/// A chain walked by a restore that reaches a record of another bucket's key is broken: after
/// a power loss in place, a bucket's new pointer reached the disk and the record it was
/// written for did not, and the older bytes there were a stale record with a live tag (left
/// inside a free span). Taken, it replaced its key's value with an older one (the ShardDbm
/// power-loss run, in place, round 225). Here the stale record is a held one (replaced since
/// the last synchronization, its tag still live) and another bucket is pointed at it.
#[test]
fn restore_takes_no_record_of_another_bucket_from_a_chain() {
    use super::header::{BUCKET_WIDTH, HEADER_REGION};
    use super::storage::{bucket_of, hash_key};
    const BUCKETS: u64 = 16;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.kuh");
    let db = HashDbm::create(&path, &Params::new().with("num_buckets", BUCKETS)).unwrap();
    // A key whose bucket is walked before the last one, which is pointed at its old record.
    let key =
        (0..).map(|i| format!("key{i}")).find(|k| bucket_of(hash_key(k.as_bytes()), BUCKETS) < BUCKETS - 1).unwrap();
    db.set(key.as_bytes(), b"old value", true).unwrap();
    db.checkpoint().unwrap();
    db.set(key.as_bytes(), b"new value, longer", true).unwrap();
    let mut image = std::fs::read(&path).unwrap();
    drop(db);
    // The old record is the first one: tag, a one-byte `next` of 0, key_len, value_len,
    // check_lo, then the key.
    let old_at = (image.windows(key.len()).position(|w| w == key.as_bytes()).unwrap() - 5) as u64;
    let foreign = (HEADER_REGION + (BUCKETS - 1) * BUCKET_WIDTH) as usize;
    image[foreign..foreign + BUCKET_WIDTH as usize].copy_from_slice(&old_at.to_le_bytes()[..BUCKET_WIDTH as usize]);
    let crashed = dir.path().join("crashed.kuh");
    std::fs::write(&crashed, &image).unwrap();
    let restored = HashDbm::open(&crashed, crate::dbm::OpenMode::Write, &Params::new()).unwrap();
    assert_eq!(restored.get(key.as_bytes()).unwrap(), b"new value, longer", "a stale record came back");
}
