//! Tests of the journal's replay at open (store.rs, `replay`): it applies the last entry of
//! each key in key order rather than every entry in journal order, which must end in the same
//! records. Random journals of sets, removals and clears over a small key space, so that keys
//! repeat within and across frames, are replayed over a closed tree by a writer and by a
//! reader, and every key is checked against a model that applied the entries in order.

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::collections::BTreeMap;
use std::path::Path;

use super::TreeDbm;
use crate::dbm::{Dbm, OpenMode, Params};
use crate::journal::{encode_entry, Entry, Journal};
use crate::split_mix::SplitMix64;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys drawn from this many, so that most journals set and remove some key several times.
const KEYS: u64 = 300;

/// Small pages, so that a few hundred records make dozens of leaves, and a small budget of
/// modified pages, so that a replay commits the tree midway.
fn params() -> Params {
    Params::new().with("max_page_size", 512).with("max_dirty_pages", 8)
}

fn key(n: u64) -> Vec<u8> {
    format!("key{n:04}").into_bytes()
}

/// A closed tree of random records; returns the model of them.
fn closed_tree(path: &Path, rng: &mut SplitMix64) -> Model {
    let db = TreeDbm::open(path, OpenMode::Create, &params()).unwrap();
    let mut model = Model::new();
    for _ in 0..rng.below(KEYS) {
        let (k, v) = (key(rng.below(KEYS)), rng.next_u64().to_string().into_bytes());
        db.set(&k, &v, true).unwrap();
        model.insert(k, v);
    }
    db.close().unwrap();
    model
}

/// Writes a journal of random frames beside the tree at `path` (as a writer killed before its
/// next checkpoint leaves it) and applies its entries to `model`, in order.
fn write_journal(path: &Path, rng: &mut SplitMix64, model: &mut Model) {
    let mut journal = Journal::new(path);
    for _ in 0..1 + rng.below(6) {
        for _ in 0..rng.below(80) {
            let k = key(rng.below(KEYS));
            let value = format!("v{}", rng.next_u64()).into_bytes();
            let entry = match rng.below(20) {
                0 => Entry::Clear,
                1..=6 => Entry::Remove { key: &k },
                _ => Entry::Set { key: &k, value: &value },
            };
            match entry {
                Entry::Clear => model.clear(),
                Entry::Remove { key } => {
                    model.remove(key);
                }
                Entry::Set { key, value } => {
                    model.insert(key.to_vec(), value.to_vec());
                }
            }
            encode_entry(journal.pending_mut(), entry);
            journal.entry_added();
        }
        journal.write_pending().unwrap();
    }
}

fn check(db: &TreeDbm, model: &Model, what: &str) {
    assert_eq!(db.count().unwrap(), model.len() as u64, "{what}: the count");
    for n in 0..KEYS {
        let k = key(n);
        let mut found = None;
        db.get_with(&k, &mut |value| found = value.map(<[u8]>::to_vec)).unwrap();
        assert_eq!(found.as_ref(), model.get(&k), "{what}: key {n}");
    }
}

#[test]
fn a_replay_in_key_order_ends_where_the_journal_order_does() {
    let mut rng = SplitMix64::new(47);
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replay.kut");
        let mut model = closed_tree(&path, &mut rng);
        write_journal(&path, &mut rng, &mut model);
        // A reader replays into memory and leaves the journal; the writer then replays it into
        // the file and checkpoints.
        let reader = TreeDbm::open(&path, OpenMode::ReadOnly, &params()).unwrap();
        check(&reader, &model, &format!("round {round}, reader"));
        drop(reader);
        let writer = TreeDbm::open(&path, OpenMode::Write, &params()).unwrap();
        check(&writer, &model, &format!("round {round}, writer"));
        writer.close().unwrap();
        let reopened = TreeDbm::open(&path, OpenMode::ReadOnly, &params()).unwrap();
        check(&reopened, &model, &format!("round {round}, after the checkpoint"));
    }
}
