//! What `kura restore` salvages from a damaged TreeDbm file (issue 43, item 1), against the
//! model: every record whose own leaf is intact must come back, even when the root, a
//! branch or a header copy is damaged, and no value may be one that is not the key's
//! current one (the file holds stale copies of older pages in its free slots: values
//! replaced since, keys removed since).
//!
//! A file with history (values replaced, keys removed, over several commits) is damaged at
//! sampled positions of every region (both header copies, the root, branches, leaves, free
//! slots) by a flipped bit, a zeroed run or a cut, restored, and checked (`registry::check`,
//! what `kura check` runs). A record's own bytes are its leaf's slot. The all-positions run
//! (`make salvage-soak-tree`, release build) flips one bit of every byte of a 2,000-record
//! file of each configuration and prints the figures docs/durability.md quotes.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;
use std::path::Path;

use super::format::HEADER_SIZE;
use super::page::Page;
use super::pager::Pager;
use super::TreeDbm;
use crate::dbm::{Dbm, DbmExt, OpenMode, Params};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

struct Subject {
    image: Vec<u8>,
    model: Model,
    /// key -> [start, end) of its leaf's slot, and whether the leaf was compressed with the
    /// dictionary (whose bytes are then the record's own too, as a HashDbm soak counts them).
    spans: BTreeMap<Vec<u8>, (u64, u64, bool)>,
    /// [start, end) of the zstd dictionary's slot (empty without one).
    dictionary: (u64, u64),
    /// [start, end) of every branch slot, the root's first.
    branches: Vec<(u64, u64)>,
    /// [start, end) of the unused bytes at the end of each page's slot (its checksum covers
    /// the stored bytes only).
    tails: Vec<(u64, u64)>,
    /// [start, end) of every free slot of the saved list, and of the list's own slot.
    free: Vec<(u64, u64)>,
    free_list: (u64, u64),
}

fn value_of(i: u32, round: u32) -> Vec<u8> {
    format!("v{i}.{round}: {}", "tree salvage ".repeat((i % 4) as usize)).into_bytes()
}

fn subject(dir: &Path, params: &str, records: u32) -> Subject {
    let path = dir.join("subject.kut");
    let db = TreeDbm::open(&path, OpenMode::Truncate, &Params::parse(params).unwrap()).unwrap();
    let mut model = Model::new();
    // Round 0 writes every key; rounds 1 and 2 replace values in overlapping thirds of the
    // key space and remove keys elsewhere, so that some leaves are rewritten (twice for some)
    // and others kept: the slots of the replaced pages are freed with the old pages in them.
    let third = records / 3;
    for round in 0..3u32 {
        let (replaced, removed) = match round {
            0 => (0..records, 0..0),
            1 => (0..third, third..third + third / 2),
            _ => (third / 2..third + third / 2, 2 * third..records),
        };
        for i in replaced.filter(|i| round == 0 || i % 2 == 1) {
            let key = format!("key:{i:05}").into_bytes();
            db.set(&key, &value_of(i, round), true).unwrap();
            model.insert(key, value_of(i, round));
        }
        for i in removed.filter(|i| i % 5 == round) {
            let key = format!("key:{i:05}").into_bytes();
            db.remove(&key).unwrap();
            model.remove(&key);
        }
        db.synchronize(true).unwrap();
        // Into the tree file (commits go to the journal until a checkpoint): each round's
        // pages replace the last round's, whose slots are freed with the old pages in them.
        db.checkpoint().unwrap();
        if round == 0 && params.contains("zstd-dict") {
            // The dictionary is trained by a rebuild; the later rounds then free slots of
            // pages compressed with it.
            db.rebuild(&Params::new()).unwrap();
        }
    }
    db.close().unwrap();
    let pager = Pager::open_for_salvage(&path, 1 << 20, 1 << 40).unwrap();
    let (mut spans, mut branches, mut tails) = (BTreeMap::new(), Vec::new(), Vec::new());
    // The slot at `offset`: its header, and its unused tail (past the stored bytes) noted.
    let mut slot_at = |offset: u64| {
        let slot = pager.slot_header(offset).unwrap();
        let stored_end = offset + slot.content_len();
        if stored_end < offset + slot.slot_len {
            tails.push((stored_end, offset + slot.slot_len));
        }
        slot
    };
    let mut stack = vec![pager.header().root];
    while let Some(offset) = stack.pop() {
        let slot = slot_at(offset);
        let end = offset + slot.slot_len;
        match pager.decode_page(offset).unwrap() {
            Page::Branch(branch) => {
                branches.push((offset, end));
                stack.extend(branch.children().iter().copied());
            }
            Page::Leaf(leaf) => {
                let uses_dictionary = slot.compressed && pager.header().dictionary != 0;
                for index in 0..leaf.len() {
                    spans.insert(leaf.record(index).unwrap().0.to_vec(), (offset, end, uses_dictionary));
                }
            }
        }
    }
    let dictionary = match pager.header().dictionary {
        0 => (0, 0),
        at => (at, at + slot_at(at).slot_len),
    };
    let free = pager.space().slots().map(|(offset, len)| (offset, offset + len)).collect();
    let list = pager.header().free_list;
    let free_list = (list, list + slot_at(list).slot_len);
    drop(pager);
    assert_eq!(spans.len(), model.len());
    Subject { image: std::fs::read(&path).unwrap(), model, spans, dictionary, branches, tails, free, free_list }
}

/// Where a damaged byte lies, for the per-region figures.
const REGIONS: [&str; 8] =
    ["header copies", "branches", "leaves", "slot tails", "free slots", "free list", "dictionary", "elsewhere"];

impl Subject {
    fn region_of(&self, at: u64) -> usize {
        let within = |spans: &[(u64, u64)]| spans.iter().any(|&(a, b)| a <= at && at < b);
        let leaves: Vec<(u64, u64)> = self.spans.values().map(|&(a, b, _)| (a, b)).collect();
        if at < 2 * HEADER_SIZE as u64 {
            0
        } else if within(&self.tails) {
            3
        } else if within(&self.branches) {
            1
        } else if within(&leaves) {
            2
        } else if within(&self.free) {
            4
        } else if within(&[self.free_list]) {
            5
        } else if within(&[self.dictionary]) {
            6
        } else {
            7
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip(u64),
    Zero(u64, u64),
    Cut(u64),
}

impl Damage {
    /// [start, end) of the bytes it changes in a file of `len` bytes.
    fn range(self, len: u64) -> (u64, u64) {
        match self {
            Damage::Flip(at) => (at, at + 1),
            Damage::Zero(at, end) => (at, end.min(len)),
            Damage::Cut(at) => (at, len),
        }
    }

    fn apply(self, image: &[u8]) -> Vec<u8> {
        let mut copy = image.to_vec();
        match self {
            Damage::Flip(at) => copy[at as usize] ^= 1 << (at % 8),
            Damage::Zero(at, end) => copy[at as usize..(end as usize).min(image.len())].fill(0),
            Damage::Cut(at) => copy.truncate(at as usize),
        }
        copy
    }
}

#[derive(Debug, Default)]
struct Tally {
    trials: u64,
    /// Trials in which every record of an intact leaf came back.
    whole: u64,
    missed_records: u64,
    refused: u64,
    wrong: Vec<String>,
    /// Per region (`REGIONS`): trials, damaged files the check passed.
    regions: [(u64, u64); REGIONS.len()],
    shown: u64,
}

/// Damages the subject's image, restores and checks it, and compares with the model.
fn trial(dir: &Path, subject: &Subject, damage: Damage, tally: &mut Tally) {
    let len = subject.image.len() as u64;
    let (start, end) = damage.range(len);
    let bytes = damage.apply(&subject.image);
    let damaged = dir.join("damaged.kut");
    let restored = dir.join("restored.kut");
    std::fs::write(&damaged, &bytes).unwrap();
    let _ = std::fs::remove_file(&restored);
    tally.trials += 1;
    let region = subject.region_of(start);
    tally.regions[region].0 += 1;
    if bytes != subject.image {
        let clean = crate::registry::check(&damaged, &Params::new()).is_ok_and(|report| report.is_clean());
        if clean {
            tally.regions[region].1 += 1;
            if region != 3 && tally.regions[region].1 <= 5 {
                eprintln!("{damage:?} ({}): check found nothing", REGIONS[region]);
            }
        }
    }
    let mut got = Model::new();
    match TreeDbm::salvage_file(&damaged, &restored) {
        Ok(_) => {
            let db = TreeDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap();
            for record in db.records().unwrap() {
                let (key, value) = record.unwrap();
                got.insert(key, value);
            }
            db.close().unwrap();
        }
        Err(_) => tally.refused += 1,
    }
    for (key, value) in &got {
        if subject.model.get(key) != Some(value) {
            tally.wrong.push(format!(
                "{damage:?}: {} = {:?}, the model has {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(value),
                subject.model.get(key).map(|v| String::from_utf8_lossy(v).into_owned())
            ));
        }
    }
    let missed = subject
        .model
        .keys()
        .filter(|key| !got.contains_key(*key))
        .filter(|key| {
            let (a, b, uses_dictionary) = subject.spans[*key];
            let (d, e) = subject.dictionary;
            !(a < end && start < b || uses_dictionary && d < end && start < e)
        })
        .count() as u64;
    tally.missed_records += missed;
    if missed == 0 {
        tally.whole += 1;
    } else if tally.shown < 20 && !matches!(damage, Damage::Cut(_)) {
        tally.shown += 1;
        eprintln!("{damage:?}: {missed} records of intact leaves missed");
    }
}

fn report(name: &str, tally: &Tally) {
    for (region, (trials, unflagged)) in REGIONS.iter().zip(tally.regions) {
        eprintln!("{name} {region}: {trials} trials, {unflagged} damaged files checked clean");
    }
    eprintln!(
        "{name}: {} trials, every intact leaf's records back in {} ({:.3}%), {} intact records missed, {} refused, \
         {} wrong values",
        tally.trials,
        tally.whole,
        100.0 * tally.whole as f64 / tally.trials.max(1) as f64,
        tally.missed_records,
        tally.refused,
        tally.wrong.len()
    );
    for line in tally.wrong.iter().take(20) {
        eprintln!("{name} wrong: {line}");
    }
}

const CONFIGS: [(&str, &str); 4] = [
    ("tree_plain", "max_page_size=1024"),
    ("tree_zstd", "max_page_size=2048,record_comp=zstd"),
    ("tree_lz4", "max_page_size=2048,record_comp=lz4"),
    ("tree_zstd_dict", "max_page_size=2048,record_comp=zstd-dict"),
];

/// The other codecs, in the all-positions soak only (`make test` samples the four above).
const SOAK_ONLY_CONFIGS: [(&str, &str); 3] = [
    ("tree_zlib", "max_page_size=2048,record_comp=zlib"),
    ("tree_lzma", "max_page_size=2048,record_comp=lzma"),
    ("tree_snappy", "max_page_size=2048,record_comp=snappy"),
];

#[test]
fn restore_rebuilds_from_every_intact_leaf_and_revives_nothing() {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    for (name, params) in CONFIGS {
        let subject = subject(dir.path(), params, 600);
        let len = subject.image.len() as u64;
        let mut tally = Tally::default();
        // Header copies: every 5th byte of each flipped, each copy zeroed whole.
        for at in (0..2 * HEADER_SIZE as u64).step_by(5) {
            trial(dir.path(), &subject, Damage::Flip(at), &mut tally);
        }
        for copy in 0..2 {
            let at = copy * HEADER_SIZE as u64;
            trial(dir.path(), &subject, Damage::Zero(at, at + HEADER_SIZE as u64), &mut tally);
        }
        // The root and every branch: a byte of the slot header, of the body, and all zeroed.
        for &(start, end) in &subject.branches {
            for at in [start + 2, start + 20, start + 30, (start + end) / 2, end - 20] {
                trial(dir.path(), &subject, Damage::Flip(at), &mut tally);
            }
            trial(dir.path(), &subject, Damage::Zero(start, end), &mut tally);
        }
        // Elsewhere: leaves and free slots, flipped and zeroed; and cuts.
        for i in 0..40 {
            let at = 2 * HEADER_SIZE as u64 + i * (len - 2 * HEADER_SIZE as u64) / 40;
            trial(dir.path(), &subject, Damage::Flip(at), &mut tally);
            trial(dir.path(), &subject, Damage::Zero(at, at + 64), &mut tally);
        }
        // Every trial so far gets every record of an intact leaf back.
        let whole_before_cuts = (tally.whole, tally.trials);
        // The cut that takes only the free list costs nothing; cuts through the tree keep what
        // the newest tree's intact branches reach (the free list went with the cut:
        // docs/durability.md).
        trial(dir.path(), &subject, Damage::Cut(subject.free_list.0), &mut tally);
        let whole_free_list_cut = tally.whole - whole_before_cuts.0;
        for i in 1..4 {
            trial(dir.path(), &subject, Damage::Cut(i * len / 4), &mut tally);
        }
        report(name, &tally);
        assert!(tally.wrong.is_empty(), "{name}: wrong values: {:?}", &tally.wrong[..tally.wrong.len().min(5)]);
        assert_eq!(tally.refused, 0, "{name}: a restore failed");
        assert_eq!(whole_before_cuts.0, whole_before_cuts.1, "{name}: intact records were lost");
        assert_eq!(whole_free_list_cut, 1, "{name}: a cut through the free list alone lost records");
        // Every damage of the headers, the tree's pages and the free list is flagged.
        for region in [0, 1, 2, 5, 6] {
            assert_eq!(tally.regions[region].1, 0, "{name}: check passed a file damaged in the {}", REGIONS[region]);
        }
    }
}

/// One damaged byte of a header copy costs nothing at open: a read-only open serves every
/// record from the copy with the byte put back and writes nothing, `check` reports it, and a
/// writer's open writes the copy back as it was.
#[test]
fn a_damaged_header_byte_is_put_back_at_open() {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let subject = subject(dir.path(), "max_page_size=1024", 200);
    let path = dir.path().join("damaged.kut");
    for at in (0..2 * HEADER_SIZE as u64).step_by(7) {
        for damage in [Damage::Flip(at), Damage::Zero(at, at + 1)] {
            let bytes = damage.apply(&subject.image);
            if bytes == subject.image {
                continue;
            }
            std::fs::write(&path, &bytes).unwrap();
            let db = TreeDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
            let got: Model = db.records().unwrap().map(Result::unwrap).collect();
            assert_eq!(got, subject.model, "{damage:?}");
            db.close().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "{damage:?}: a read-only open wrote");
            let report = crate::registry::check(&path, &Params::new()).unwrap();
            assert!(!report.is_clean(), "{damage:?}: check found nothing");
            let db = TreeDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
            let head = std::fs::read(&path).unwrap();
            for copy in 0..2 {
                let bytes = &head[copy * HEADER_SIZE..(copy + 1) * HEADER_SIZE];
                assert!(super::format::FileHeader::decode(bytes).is_ok(), "{damage:?}: copy {copy} not repaired");
            }
            assert_eq!(db.count().unwrap(), subject.model.len() as u64);
            db.close().unwrap();
            assert!(crate::registry::check(&path, &Params::new()).unwrap().is_clean(), "{damage:?}");
        }
    }
}

/// The newest header copy damaged beyond one byte in a file a writer had open (its journal
/// beside it): the other copy's tree is older, so an open refuses the file and a restore
/// copies none of its records (only the journal's), and says so; in a file closed cleanly
/// the other copy holds the same tree and serves.
#[test]
fn a_lost_newest_copy_is_replaced_only_by_a_copy_proven_current() {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let subject = subject(dir.path(), "max_page_size=1024", 200);
    let path = dir.path().join("subject.kut");
    let newest = |image: &[u8]| {
        let (a, b) = (&image[..HEADER_SIZE], &image[HEADER_SIZE..2 * HEADER_SIZE]);
        let sequence = |bytes| super::format::FileHeader::decode(bytes).unwrap().sequence;
        if sequence(a) > sequence(b) {
            0
        } else {
            HEADER_SIZE as u64
        }
    };
    // Closed cleanly: either copy zeroed, the other serves every record.
    for at in [0, HEADER_SIZE as u64] {
        let damaged = dir.path().join("damaged.kut");
        std::fs::write(&damaged, Damage::Zero(at, at + HEADER_SIZE as u64).apply(&subject.image)).unwrap();
        let db = TreeDbm::open(&damaged, OpenMode::ReadOnly, &Params::new()).unwrap();
        let got: Model = db.records().unwrap().map(Result::unwrap).collect();
        assert_eq!(got, subject.model);
        db.close().unwrap();
    }
    // A writer replaces every value and checkpoints (the tree file's newest copy holds the new
    // tree, the other the old one), then one more value goes to the journal only.
    let db = TreeDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
    let mut model = subject.model.clone();
    for (key, value) in &mut model {
        value.extend_from_slice(b" (replaced)");
        db.set(key, value, true).unwrap();
    }
    db.checkpoint().unwrap();
    let (last_key, last_value) = (b"key:00001".to_vec(), b"journaled".to_vec());
    db.set(&last_key, &last_value, true).unwrap();
    db.synchronize(true).unwrap();
    let image = std::fs::read(&path).unwrap();
    let journal = std::fs::read(crate::journal::journal_path(&path)).unwrap();
    db.close().unwrap();
    let at = newest(&image);
    let damaged = dir.path().join("lost.kut");
    let restored = dir.path().join("lost-restored.kut");
    std::fs::write(&damaged, Damage::Zero(at, at + HEADER_SIZE as u64).apply(&image)).unwrap();
    std::fs::write(crate::journal::journal_path(&damaged), &journal).unwrap();
    let refused = TreeDbm::open(&damaged, OpenMode::ReadOnly, &Params::new()).unwrap_err();
    assert!(refused.message().contains("kura restore"), "{}", refused.message());
    assert!(!crate::registry::check(&damaged, &Params::new()).unwrap().is_clean());
    let report = TreeDbm::salvage_file(&damaged, &restored).unwrap();
    assert_eq!(report.dropped_records, subject.model.len() as u64, "{report:?}");
    assert!(report.dropped.iter().any(|line| line.contains("cannot be proven")), "{report:?}");
    let db = TreeDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap();
    let got: Model = db.records().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, Model::from([(last_key, last_value)]), "only the journal's record is proven");
    db.close().unwrap();
}

/// `make salvage-soak-tree`: every byte of a 2,000-record file of each configuration, one
/// bit flipped, restored and checked (release build).
#[test]
#[ignore = "minutes in a release build: make salvage-soak-tree"]
fn every_flipped_byte_tree_salvage_soak() {
    let crate::salvage_soak::SoakSettings { records, step, dir } = crate::salvage_soak::settings();
    let only = std::env::var("KURA_SALVAGE_CONFIG").ok().filter(|name| !name.is_empty());
    let mut wrong = 0;
    let configs = CONFIGS.into_iter().chain(SOAK_ONLY_CONFIGS);
    for (name, params) in configs.filter(|(name, _)| only.as_deref().is_none_or(|only| only == *name)) {
        let subject = subject(dir.path(), params, records);
        eprintln!(
            "{name}: {} bytes, {} branches, {} free slots",
            subject.image.len(),
            subject.branches.len(),
            subject.free.len()
        );
        let mut tally = Tally::default();
        for at in (0..subject.image.len() as u64).step_by(step as usize) {
            trial(dir.path(), &subject, Damage::Flip(at), &mut tally);
        }
        report(name, &tally);
        wrong += tally.wrong.len();
    }
    assert_eq!(wrong, 0, "wrong values");
}
