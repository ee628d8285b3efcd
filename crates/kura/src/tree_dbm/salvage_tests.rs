//! What `kura restore` salvages from a damaged TreeDbm file (issue 43, item 1), against the
//! model: every record whose own leaf is intact must come back, even when the root, a
//! branch or a header copy is damaged, and no value may be one that is not the key's
//! current one (the file holds stale copies of older pages in its free slots: values
//! replaced since, keys removed since).
//!
//! A file with history (values replaced, keys removed, over several commits) is damaged at
//! sampled positions of every region (both header copies, the root, branches, leaves, free
//! slots) by a flipped bit, a zeroed run or a cut, and restored. A record's own bytes are
//! its leaf's slot.

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
    /// key -> [start, end) of its leaf's slot.
    spans: BTreeMap<Vec<u8>, (u64, u64)>,
    /// [start, end) of every branch slot, the root's first.
    branches: Vec<(u64, u64)>,
}

fn value_of(i: u32, round: u32) -> Vec<u8> {
    format!("v{i}.{round}: {}", "tree salvage ".repeat((i % 4) as usize)).into_bytes()
}

fn subject(dir: &Path, params: &str, records: u32) -> Subject {
    let path = dir.join("subject.kut");
    let db = TreeDbm::open(&path, OpenMode::Truncate, &Params::parse(params).unwrap()).unwrap();
    let mut model = Model::new();
    for round in 0..3 {
        for i in (0..records).filter(|i| round == 0 || i % (round + 2) == 1) {
            let key = format!("key:{i:05}").into_bytes();
            db.set(&key, &value_of(i, round), true).unwrap();
            model.insert(key, value_of(i, round));
        }
        for i in (0..records).filter(|i| round > 0 && i % 11 == round) {
            let key = format!("key:{i:05}").into_bytes();
            db.remove(&key).unwrap();
            model.remove(&key);
        }
        db.synchronize(true).unwrap();
    }
    db.close().unwrap();
    let pager = Pager::open_for_salvage(&path, 1 << 20, 1 << 40).unwrap();
    let (mut spans, mut branches) = (BTreeMap::new(), Vec::new());
    let mut stack = vec![pager.header().root];
    while let Some(offset) = stack.pop() {
        let end = offset + pager.slot_header(offset).unwrap().slot_len;
        match pager.decode_page(offset).unwrap() {
            Page::Branch(branch) => {
                branches.push((offset, end));
                stack.extend(branch.children.iter().copied());
            }
            Page::Leaf(leaf) => {
                for index in 0..leaf.len() {
                    spans.insert(leaf.record(index).unwrap().0.to_vec(), (offset, end));
                }
            }
        }
    }
    drop(pager);
    assert_eq!(spans.len(), model.len());
    Subject { image: std::fs::read(&path).unwrap(), model, spans, branches }
}

#[derive(Debug, Default)]
struct Tally {
    trials: u64,
    whole: u64,
    wrong: Vec<String>,
}

/// Damages bytes [start, end) (`cut`: the file ends at `start`), restores, compares.
fn trial(dir: &Path, subject: &Subject, start: u64, end: u64, how: &str, tally: &mut Tally) {
    let mut image = subject.image.clone();
    match how {
        "flip" => image[start as usize] ^= 1 << (start % 8),
        "zero" => image[start as usize..end as usize].fill(0),
        _ => image.truncate(start as usize),
    }
    let end = if how == "cut" { subject.image.len() as u64 } else { end };
    let damaged = dir.join("damaged.kut");
    let restored = dir.join("restored.kut");
    std::fs::write(&damaged, image).unwrap();
    let _ = std::fs::remove_file(&restored);
    tally.trials += 1;
    let mut got = Model::new();
    if TreeDbm::salvage_file(&damaged, &restored).is_ok() {
        let db = TreeDbm::open(&restored, OpenMode::ReadOnly, &Params::new()).unwrap();
        for record in db.records().unwrap() {
            let (key, value) = record.unwrap();
            got.insert(key, value);
        }
        db.close().unwrap();
    }
    for (key, value) in &got {
        if subject.model.get(key) != Some(value) {
            tally.wrong.push(format!("{how} {start}..{end}: {}", String::from_utf8_lossy(key)));
        }
    }
    let missed = subject
        .model
        .keys()
        .filter(|key| !got.contains_key(*key))
        .filter(|key| {
            let (a, b) = subject.spans[*key];
            !(a < end && start < b)
        })
        .count();
    if missed == 0 {
        tally.whole += 1;
    } else {
        eprintln!("{how} {start}..{end}: {missed} records of intact leaves missed");
    }
}

#[test]
fn restore_rebuilds_from_every_intact_leaf_and_revives_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for params in ["max_page_size=1024", "max_page_size=2048,record_comp=zstd"] {
        let subject = subject(dir.path(), params, 600);
        let len = subject.image.len() as u64;
        let mut tally = Tally::default();
        // Header copies: every 5th byte of each flipped, each copy zeroed whole.
        for at in (0..2 * HEADER_SIZE as u64).step_by(5) {
            trial(dir.path(), &subject, at, at + 1, "flip", &mut tally);
        }
        for copy in 0..2 {
            let at = copy * HEADER_SIZE as u64;
            trial(dir.path(), &subject, at, at + HEADER_SIZE as u64, "zero", &mut tally);
        }
        // The root and every branch: a byte of the slot header, of the body, and all zeroed.
        for &(start, end) in &subject.branches {
            for at in [start + 2, start + 20, start + 30, (start + end) / 2, end - 20] {
                trial(dir.path(), &subject, at, at + 1, "flip", &mut tally);
            }
            trial(dir.path(), &subject, start, end, "zero", &mut tally);
        }
        // Elsewhere: leaves and free slots, flipped and zeroed; and cuts.
        for i in 0..40 {
            let at = 2 * HEADER_SIZE as u64 + i * (len - 2 * HEADER_SIZE as u64) / 40;
            trial(dir.path(), &subject, at, at + 1, "flip", &mut tally);
            trial(dir.path(), &subject, at, (at + 64).min(len), "zero", &mut tally);
        }
        for i in 1..4 {
            trial(dir.path(), &subject, i * len / 4, len, "cut", &mut tally);
        }
        eprintln!(
            "{params}: {} trials, every intact leaf's records back in {}, {} wrong values",
            tally.trials,
            tally.whole,
            tally.wrong.len()
        );
        assert!(tally.wrong.is_empty(), "{params}: wrong values: {:?}", &tally.wrong[..tally.wrong.len().min(5)]);
    }
}
