//! What `kura restore` salvages from a damaged HashDbm file (issue 43, item 1), against the
//! model: every record whose own bytes are intact must come back, and no value may be one
//! that is not the key's current one (never a record not written, never an old value
//! revived over a newer one).
//!
//! Each configuration writes a file with history (values replaced, keys removed: in
//! appending mode the old versions stay in the file), learns where each current record lies
//! by walking its chain, then damages a copy of the image at sampled positions of every
//! region (header, bucket array, dictionary, records, free list) by a flipped bit, a zeroed
//! byte or a cut, and restores it. A record's "own bytes" are its span; for a compressed
//! record of a zstd-dict file, the dictionary too. The all-positions run (`make
//! salvage-soak`, `KURA_SALVAGE_ALL=1`, release build) flips one bit of every byte of a
//! 2,000-record file of each configuration and prints the figures docs/durability.md quotes
//! (`KURA_SALVAGE_STEP=k` every k-th byte, `KURA_SALVAGE_AT=a,b` the bytes an earlier run
//! reported).

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;
use std::path::Path;

use super::chain_lock::WholeFile;
use super::header::{COPY_OFFSET, HEADER_REGION, HEADER_SIZE};
use super::storage::bucket_of;
use super::HashDbm;
use crate::dbm::{Dbm, DbmExt, OpenMode, Params};
use crate::shard_dbm::{naming, shard_of, ShardDbm};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A file image, its model, and where the bytes each current record depends on lie.
struct Subject {
    name: &'static str,
    image: Vec<u8>,
    model: Model,
    /// key -> [start, end) of its current record, and whether it depends on the dictionary.
    spans: BTreeMap<Vec<u8>, (u64, u64, bool)>,
    dictionary: (u64, u64),
    /// Where the bucket array ends and the saved free list starts and ends.
    buckets_end: u64,
    free_list: (u64, u64),
    /// The bytes no read meets: free spans' unused bytes, dead records' chain pointers
    /// (check_tests.rs).
    unread: Vec<(u64, u64)>,
}

fn value_of(i: u32, round: u32) -> Vec<u8> {
    let text = match i % 7 {
        0 => format!("{i}/{round}"),
        1 => format!("value {i} round {round} {}", "abcdefgh".repeat((i % 5) as usize)),
        _ => format!("v{i}.{round}: the quick brown fox jumps over the lazy dog {}", i * 7919 + round),
    };
    text.into_bytes()
}

/// Writes `records` keys, replaces a third, removes a tenth, closes; returns the subject.
fn subject(dir: &Path, name: &'static str, params: &str, records: u32) -> Subject {
    let path = dir.join(format!("{name}.kuh"));
    let params = Params::parse(&format!("{params},num_buckets={records}")).unwrap();
    let db = HashDbm::create(&path, &params).unwrap();
    let model = write_history(&db, records);
    if params.get("record_comp") == Some("zstd-dict") {
        db.rebuild(&Params::new()).unwrap();
    }
    db.close().unwrap();
    subject_of_file(&path, name, model)
}

/// The history every subject's file holds: `records` keys written and synchronized, a third
/// replaced, a tenth removed. Returns the model.
fn write_history(db: &dyn Dbm, records: u32) -> Model {
    let mut model = Model::new();
    for i in 0..records {
        let key = format!("key:{i:05}").into_bytes();
        db.set(&key, &value_of(i, 0), true).unwrap();
        model.insert(key, value_of(i, 0));
    }
    db.synchronize(true).unwrap();
    for i in (0..records).filter(|i| i % 3 == 1) {
        let key = format!("key:{i:05}").into_bytes();
        db.set(&key, &value_of(i, 1), true).unwrap();
        model.insert(key, value_of(i, 1));
    }
    for i in (0..records).filter(|i| i % 10 == 4) {
        let key = format!("key:{i:05}").into_bytes();
        db.remove(&key).unwrap();
        model.remove(&key);
    }
    model
}

/// The subject of the closed HashDbm file at `path`, whose records are `model`'s: where each
/// record lies, found by walking its chain.
fn subject_of_file(path: &Path, name: &'static str, model: Model) -> Subject {
    let db = HashDbm::open(path, OpenMode::ReadOnly, &Params::new()).unwrap();
    let (spans, dictionary, buckets_end, free_list, unread) = db
        .with_all(|slot| {
            let (s, whole) = WholeFile::unshared(slot.as_mut().unwrap());
            let mut spans = BTreeMap::new();
            for key in model.keys() {
                let hash = super::storage::hash_key(key);
                let chain = whole.chain(bucket_of(hash, s.header.num_buckets));
                let found = s.find(chain, key, hash)?.unwrap();
                let end = found.offset + found.header.total_len();
                spans.insert(key.clone(), (found.offset, end, found.header.is_compressed()));
            }
            let h = &s.header;
            let free = (h.free_list_offset, h.free_list_offset + u64::from(h.free_list_len));
            let insides = super::check_tests::unread_bytes(s, &whole)?;
            Ok((spans, (h.dictionary_offset(), h.data_start()), h.dictionary_offset(), free, insides))
        })
        .unwrap();
    db.close().unwrap();
    let uses_dictionary = dictionary.1 > dictionary.0;
    let spans = spans.into_iter().map(|(k, (a, b, c))| (k, (a, b, c && uses_dictionary))).collect();
    Subject { name, image: std::fs::read(path).unwrap(), model, spans, dictionary, buckets_end, free_list, unread }
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip(u64, u8),
    Zero(u64, u64),
    Cut(u64),
}

impl Damage {
    /// [start, end) of the bytes it changes in a file of `len` bytes.
    fn range(self, len: u64) -> (u64, u64) {
        match self {
            Damage::Flip(at, _) => (at, at + 1),
            Damage::Zero(at, n) => (at, (at + n).min(len)),
            Damage::Cut(at) => (at, len),
        }
    }

    fn apply(self, image: &[u8]) -> Vec<u8> {
        let mut copy = image.to_vec();
        match self {
            Damage::Flip(at, bits) => copy[at as usize] ^= bits,
            Damage::Zero(at, n) => copy[at as usize..(at + n).min(image.len() as u64) as usize].fill(0),
            Damage::Cut(at) => copy.truncate(at as usize),
        }
        copy
    }
}

#[derive(Debug, Default)]
struct Tally {
    trials: u64,
    /// Trials in which every record whose own bytes are intact came back.
    whole: u64,
    missed_records: u64,
    refused: u64,
    wrong: Vec<String>,
    /// Trials with misses printed so far.
    shown: u64,
    /// Whether each damaged file is also checked (`registry::check`, what `kura check` runs).
    with_check: bool,
    /// Damaged files (a byte changed) that the check passed.
    unflagged: u64,
    /// Of those, the files changed only in bytes no read meets (`Subject::unread`).
    unflagged_unread: u64,
}

/// Every record of the restored database `db`, which is closed after.
fn records_of(db: &dyn Dbm) -> Model {
    let got = db.records().unwrap().map(|record| record.unwrap()).collect();
    db.close().unwrap();
    got
}

/// Notes each record of `got` that the model does not hold (a value never written, or not
/// the key's current one) as wrong, saying which damage (`what`) gave it.
fn note_wrong(got: &Model, model: &Model, what: &str, tally: &mut Tally) {
    for (key, value) in got {
        if model.get(key) != Some(value) {
            tally.wrong.push(format!(
                "{what}: {} = {:?}, the model has {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(value),
                model.get(key).map(|v| String::from_utf8_lossy(v).into_owned())
            ));
        }
    }
}

/// Damages the subject's image, restores it and compares the result with the model.
fn trial(dir: &Path, subject: &Subject, damage: Damage, tally: &mut Tally) {
    let len = subject.image.len() as u64;
    let (start, end) = damage.range(len);
    let damaged = dir.join("damaged.kuh");
    let restored = dir.join("restored.kuh");
    let bytes = damage.apply(&subject.image);
    std::fs::write(&damaged, &bytes).unwrap();
    let _ = std::fs::remove_file(&restored);
    let _ = std::fs::remove_file(crate::journal::journal_path(&damaged));
    tally.trials += 1;
    if tally.with_check && bytes != subject.image {
        let clean = crate::registry::check(&damaged, &Params::new()).is_ok_and(|report| report.is_clean());
        let unread = subject.unread.iter().any(|&(a, b)| a <= start && end <= b);
        if clean {
            tally.unflagged += 1;
            tally.unflagged_unread += u64::from(unread);
            if tally.unflagged - tally.unflagged_unread <= 20 && !unread {
                eprintln!("{} {damage:?}: check found nothing", subject.name);
            }
        }
    }
    let got = match HashDbm::salvage_file(&damaged, &restored) {
        Ok(_) => records_of(&HashDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap()),
        Err(_) => {
            tally.refused += 1;
            Model::new()
        }
    };
    note_wrong(&got, &subject.model, &format!("{} {damage:?}", subject.name), tally);
    let hits = |(a, b): (u64, u64)| a < end && start < b;
    let missed = subject
        .model
        .keys()
        .filter(|key| !got.contains_key(*key))
        .filter(|key| {
            let (a, b, uses_dictionary) = subject.spans[*key];
            !(hits((a, b)) || uses_dictionary && hits(subject.dictionary))
        })
        .count() as u64;
    tally.missed_records += missed;
    if missed > 0 && tally.shown < 20 {
        tally.shown += 1;
        eprintln!("{} {damage:?}: {missed} intact records missed", subject.name);
    }
    if missed == 0 {
        tally.whole += 1;
    }
}

/// Positions of a region: every one, or `per_region` spread over it.
fn positions((start, end): (u64, u64), per_region: Option<u64>) -> Vec<u64> {
    let len = end.saturating_sub(start);
    match per_region {
        // `KURA_SALVAGE_AT=a,b,...`: those bytes only (a flip an earlier soak reported, again).
        None if std::env::var("KURA_SALVAGE_AT").is_ok_and(|at| !at.is_empty()) => {
            let at = std::env::var("KURA_SALVAGE_AT").unwrap_or_default();
            at.split(',').filter_map(|n| n.trim().parse().ok()).filter(|n| (start..end).contains(n)).collect()
        }
        // `KURA_SALVAGE_STEP=k`: every k-th byte, starting at a random offset below k.
        None => {
            let step = crate::salvage_soak::step();
            let first = start + crate::split_mix::SplitMix64::new(start ^ end).next_u64() % step;
            (first..end).step_by(step as usize).collect()
        }
        Some(n) => (0..n.min(len)).map(|i| start + i * len / n.min(len).max(1)).collect(),
    }
}

fn run(dir: &Path, subject: &Subject, per_region: Option<u64>, with_check: bool) -> Tally {
    let mut tally = Tally { with_check, ..Tally::default() };
    let len = subject.image.len() as u64;
    // Sampled: in each header copy; all positions: the whole header region, reserved bytes too.
    let (header, copy) = match per_region {
        Some(_) => ((0, HEADER_SIZE), (COPY_OFFSET, COPY_OFFSET + HEADER_SIZE)),
        None => ((0, HEADER_REGION), (0, 0)),
    };
    let regions = [
        ("header", header),
        ("header copy", copy),
        ("buckets", (HEADER_REGION, subject.buckets_end)),
        ("dictionary", subject.dictionary),
        ("records", (subject.dictionary.1, if subject.free_list.1 > 0 { subject.free_list.0 } else { len })),
        ("free list", subject.free_list),
    ];
    for (name, region) in regions {
        let (trials, unflagged, unread) = (tally.trials, tally.unflagged, tally.unflagged_unread);
        for at in positions(region, per_region) {
            trial(dir, subject, Damage::Flip(at, 1 << (at % 8)), &mut tally);
            if per_region.is_some() {
                trial(dir, subject, Damage::Zero(at, 1 + at % 16), &mut tally);
            }
        }
        if with_check {
            let (trials, unflagged, unread) =
                (tally.trials - trials, tally.unflagged - unflagged, tally.unflagged_unread - unread);
            eprintln!(
                "{} {name} {region:?}: {trials} trials, {unflagged} damaged files checked clean, {unread} of them \
                 changed only in bytes no read meets",
                subject.name
            );
        }
    }
    if per_region.is_some() {
        // The whole header zeroed, then its copy too, and cuts through the record area and
        // the free list.
        trial(dir, subject, Damage::Zero(0, HEADER_SIZE), &mut tally);
        trial(dir, subject, Damage::Zero(0, HEADER_REGION), &mut tally);
        for at in positions((subject.dictionary.1, len), Some(4)) {
            trial(dir, subject, Damage::Cut(at), &mut tally);
        }
    }
    tally
}

const CONFIGS: [(&str, &str); 4] = [
    ("in_place", "update_mode=in_place"),
    ("appending", "update_mode=appending"),
    ("lz4", "record_comp=lz4"),
    ("zstd_dict", "record_comp=zstd-dict"),
];

/// The other codecs, in the all-positions soak only (`make test` samples the four above: a
/// codec changes only the stored bytes a record's checksum covers).
const SOAK_ONLY_CONFIGS: [(&str, &str); 4] = [
    ("zstd", "record_comp=zstd"),
    ("zlib", "record_comp=zlib"),
    ("lzma", "record_comp=lzma"),
    ("snappy", "record_comp=snappy"),
];

fn check(tallies: &[(&str, Tally)]) {
    for (name, tally) in tallies {
        eprintln!(
            "{name}: {} trials, every intact record back in {} ({:.3}%), {} intact records missed, {} refused, {} wrong values{}",
            tally.trials,
            tally.whole,
            100.0 * tally.whole as f64 / tally.trials.max(1) as f64,
            tally.missed_records,
            tally.refused,
            tally.wrong.len(),
            if tally.with_check {
                format!(
                    ", {} damaged files checked clean ({} of them changed only in bytes no read meets)",
                    tally.unflagged, tally.unflagged_unread
                )
            } else {
                String::new()
            }
        );
    }
    let wrong: Vec<&String> = tallies.iter().flat_map(|(_, t)| &t.wrong).collect();
    for line in &wrong {
        eprintln!("wrong: {line}");
    }
    assert!(
        wrong.is_empty(),
        "{} wrong values, the first: {:?}",
        wrong.len(),
        wrong.iter().take(5).collect::<Vec<_>>()
    );
}

#[test]
fn restore_salvages_every_intact_record_and_no_wrong_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut tallies = Vec::new();
    for (name, params) in CONFIGS {
        let subject = subject(dir.path(), name, params, 100);
        tallies.push((name, run(dir.path(), &subject, Some(8), false)));
    }
    check(&tallies);
    for (name, tally) in &tallies {
        assert_eq!(tally.refused, 0, "{name}: a restore failed");
        // Appending mode drops the keys a damaged or cut record may hold a newer version of,
        // and a zstd-dict file whose header lost the dictionary's checksum drops its
        // compressed records (docs/durability.md); the other configurations lose nothing.
        if !matches!(*name, "appending" | "zstd_dict") {
            assert_eq!(tally.whole, tally.trials, "{name}: intact records were lost");
        }
    }
}

/// Every single-byte damage of the header region costs nothing (the other copy serves, or the
/// byte is put back) and `check` reports every one of them: each byte of the header flipped,
/// every third of its copy, every eighth of either zeroed, every 32nd reserved byte flipped;
/// each copy zeroed whole (the other serves), both zeroed (the header is rebuilt from the
/// file). In memory where there is a /dev/shm: the restores' syncs cost nothing there.
#[test]
fn a_damaged_header_byte_costs_no_record_and_check_reports_it() {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    for (name, params) in CONFIGS {
        let subject = subject(dir.path(), name, params, 30);
        let mut tally = Tally::default();
        let mut damages = Vec::new();
        for at in 0..HEADER_REGION {
            let in_copy = (COPY_OFFSET..COPY_OFFSET + HEADER_SIZE).contains(&at);
            let in_header = at < HEADER_SIZE;
            if in_header || (in_copy && at % 3 == 0) || at % 32 == 0 {
                damages.push(Damage::Flip(at, 1 << (at % 8)));
            }
            if (in_header || in_copy) && at % 8 == 0 {
                damages.push(Damage::Zero(at, 1));
            }
        }
        damages.extend([Damage::Zero(0, HEADER_SIZE), Damage::Zero(COPY_OFFSET, HEADER_SIZE)]);
        for damage in damages {
            trial(dir.path(), &subject, damage, &mut tally);
            let damaged = dir.path().join("damaged.kuh");
            let report = crate::registry::check(&damaged, &Params::new()).unwrap();
            if damage.apply(&subject.image) != subject.image {
                assert!(!report.is_clean(), "{name} {damage:?}: check found nothing");
            }
        }
        // Both copies lost: rebuilt from the file, which only zstd-dict pays for (its
        // dictionary's checksum was in the header).
        trial(dir.path(), &subject, Damage::Zero(0, HEADER_REGION), &mut tally);
        let (trials, whole, refused) = (tally.trials, tally.whole, tally.refused);
        check(&[(name, tally)]);
        assert_eq!(refused, 0, "{name}: a restore failed");
        let expected = if name == "zstd_dict" { trials - 1 } else { trials };
        assert!(whole >= expected, "{name}: a damaged header byte cost records ({whole} of {trials} whole)");
    }
}

/// `make salvage-soak`: every byte of a 2,000-record file of each configuration, one bit
/// flipped, restored and checked (release build); the header region's damage is in the
/// regions too (both copies and the reserved bytes). Fails on any wrong value, and on any
/// damaged file `check` passes whose changed byte a read meets (`Subject::unread`).
#[test]
#[ignore = "minutes in a release build: make salvage-soak"]
fn every_flipped_byte_salvage_soak() {
    let crate::salvage_soak::SoakSettings { records, dir, .. } = crate::salvage_soak::settings();
    let mut tallies = Vec::new();
    // `KURA_SALVAGE_CONFIG=NAME`: that configuration only.
    let only = std::env::var("KURA_SALVAGE_CONFIG").ok().filter(|name| !name.is_empty());
    let configs = CONFIGS.into_iter().chain(SOAK_ONLY_CONFIGS);
    for (name, params) in configs.filter(|(name, _)| only.as_deref().is_none_or(|only| only == *name)) {
        let subject = subject(dir.path(), name, params, records);
        eprintln!("{name}: {} bytes", subject.image.len());
        tallies.push((name, run(dir.path(), &subject, None, true)));
    }
    check(&tallies);
    for (name, tally) in &tallies {
        // Issue 43: check flags every damaged file whose changed byte a read can meet.
        assert_eq!(tally.unflagged, tally.unflagged_unread, "{name}: damaged files check passed");
    }
}

/// A shard set of HashDbm files with the subjects' history, one subject per shard.
struct SetSubject {
    shards: Vec<Subject>,
    model: Model,
}

fn set_subject(dir: &Path, name: &str, params: &str, shards: usize, records: u32) -> SetSubject {
    let base = dir.join(format!("{name}.kuh"));
    let params = Params::parse(&format!("{params},num_shards={shards},num_buckets={records}")).unwrap();
    let set = ShardDbm::open(&base, OpenMode::Create, &params, crate::registry::ENGINES).unwrap();
    let model = write_history(&set, records);
    set.close().unwrap();
    let shards = (0..shards)
        .map(|index| {
            let own = model.iter().filter(|(key, _)| shard_of(key, shards) == index);
            let own: Model = own.map(|(k, v)| (k.clone(), v.clone())).collect();
            subject_of_file(&naming::shard_path(&base, index, shards), "shard", own)
        })
        .collect();
    SetSubject { shards, model }
}

/// Writes the set with shard `damaged`'s image damaged, restores it as a set
/// (`ShardDbm::restore_set`, what `kura restore` runs on one) and compares the restored set
/// with the model: every record of the other shards and every record of the damaged one whose
/// own bytes are intact must be back, and no value wrong.
fn set_trial(dir: &Path, set: &SetSubject, damaged: usize, damage: Damage, tally: &mut Tally) {
    let count = set.shards.len();
    let (source, dest) = (dir.join("damaged.kuh"), dir.join("restored.kuh"));
    for (index, shard) in set.shards.iter().enumerate() {
        let bytes = if index == damaged { damage.apply(&shard.image) } else { shard.image.clone() };
        std::fs::write(naming::shard_path(&source, index, count), bytes).unwrap();
        let _ = std::fs::remove_file(naming::shard_path(&dest, index, count));
    }
    tally.trials += 1;
    let got = match ShardDbm::restore_set(&source, &dest, crate::registry::ENGINES) {
        Ok(_) => {
            records_of(&ShardDbm::open(&dest, OpenMode::ReadOnly, &Params::new(), crate::registry::ENGINES).unwrap())
        }
        Err(_) => {
            tally.refused += 1;
            Model::new()
        }
    };
    note_wrong(&got, &set.model, &format!("shard {damaged} {damage:?}"), tally);
    let shard = &set.shards[damaged];
    let (start, end) = damage.range(shard.image.len() as u64);
    let hits = |(a, b): (u64, u64)| a < end && start < b;
    let missed = set
        .model
        .keys()
        .filter(|key| !got.contains_key(*key))
        .filter(|key| match shard.spans.get(*key) {
            // A record of the damaged shard is excused when the damage lies in its own bytes.
            Some(&(a, b, uses_dictionary)) => !(hits((a, b)) || uses_dictionary && hits(shard.dictionary)),
            None => true,
        })
        .count() as u64;
    tally.missed_records += missed;
    if missed > 0 && tally.shown < 20 {
        tally.shown += 1;
        eprintln!("set, shard {damaged} {damage:?}: {missed} intact records missed");
    }
    if missed == 0 {
        tally.whole += 1;
    }
}

/// Flips of every `step`-th byte of each shard of a 2-shard set (in place, lz4), restored as
/// a set: the records of the undamaged shard all come back, the damaged shard's as a file's
/// do, and nothing wrong (`KURA_SALVAGE_STEP` and `KURA_SALVAGE_RECORDS` in the soak).
fn run_set(dir: &Path, records: u32, step: u64) -> Vec<(&'static str, Tally)> {
    let mut tallies = Vec::new();
    for (name, params) in [("set_in_place", "update_mode=in_place"), ("set_lz4", "record_comp=lz4")] {
        let set = set_subject(dir, name, params, 2, records);
        let mut tally = Tally::default();
        for (index, shard) in set.shards.iter().enumerate() {
            let first = crate::split_mix::SplitMix64::new(index as u64 + records as u64).next_u64() % step;
            for at in (first..shard.image.len() as u64).step_by(step as usize) {
                set_trial(dir, &set, index, Damage::Flip(at, 1 << (at % 8)), &mut tally);
            }
        }
        tallies.push((name, tally));
    }
    tallies
}

#[test]
fn a_shard_set_restore_salvages_every_intact_record_of_every_shard() {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let tallies = run_set(dir.path(), 100, 97);
    check(&tallies);
    for (name, tally) in &tallies {
        assert_eq!(tally.refused, 0, "{name}: a restore failed");
        assert_eq!(tally.whole, tally.trials, "{name}: intact records were lost");
    }
}

/// `make salvage-soak-sets`: every byte of each shard of 2-shard sets of 2,000 records
/// (`KURA_SALVAGE_STEP=k`: every k-th), restored as sets (release build).
#[test]
#[ignore = "minutes in a release build: make salvage-soak-sets"]
fn every_flipped_byte_of_a_shard_set_salvage_soak() {
    let crate::salvage_soak::SoakSettings { records, step, dir } = crate::salvage_soak::settings();
    let tallies = run_set(dir.path(), records, step);
    check(&tallies);
    for (name, tally) in &tallies {
        assert_eq!(tally.refused, 0, "{name}: a restore failed");
    }
}
