//! Power-loss simulation for the file engines (test support, not public API).
//!
//! A `Tracker` follows a workload on a database file: at every `synchronize(true)` it keeps a
//! copy of the file and of the model, and between two synchronizations it records every value
//! each key was given. A crash image is that synced copy plus an arbitrary subset of the
//! 4 KiB pages that differ in the file now (the kernel may write back any dirty page of a
//! mapped or written file, in any order), one more page torn at a 512-byte boundary (a prefix
//! of its sectors new, the rest old), and a length that is either the old or the new one (the
//! size may or may not have reached the disk). `check_image` opens such an image and requires:
//! every record synced and not modified since is present with its value; every record
//! modified since has its synced value or one written since (or is absent, if it was absent
//! or removed in between); no other key exists. Never garbage.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kura::split_mix::SplitMix64;
use kura::{Dbm, DbmExt, ErrorKind};

pub const PAGE: usize = 4096;
pub const SECTOR: usize = 512;

pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// What the file and the records were at the last `synchronize(true)`, and what happened since.
#[derive(Default)]
pub struct Tracker {
    /// Accept a record modified since the last sync being absent (the weaker promise of an
    /// engine that may lose a record in flight, documented as such).
    pub modified_may_vanish: bool,
    synced_bytes: Vec<u8>,
    synced: Model,
    /// Every state (value, or None for absent) each key was given since the last sync.
    since: BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>>,
    model: Model,
}

impl Tracker {
    pub fn new() -> Tracker {
        Tracker::default()
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        self.model.insert(key.to_vec(), value.to_vec());
        self.since.entry(key.to_vec()).or_default().push(Some(value.to_vec()));
    }

    pub fn remove(&mut self, key: &[u8]) {
        self.model.remove(key);
        self.since.entry(key.to_vec()).or_default().push(None);
    }

    /// Call right after `synchronize(true)` returned: the file at `path` is what survives.
    pub fn synchronized(&mut self, path: &Path) {
        self.synced_bytes = std::fs::read(path).expect("read the synchronized file");
        self.synced = self.model.clone();
        self.since.clear();
    }

    /// Builds one crash image from the synced copy and the file at `path` as it is now.
    pub fn image(&self, path: &Path, rng: &mut SplitMix64) -> Vec<u8> {
        let current = std::fs::read(path).expect("read the current file");
        crash_image(&self.synced_bytes, &current, rng)
    }

    /// Checks a database opened on a crash image; returns the records checked.
    pub fn check(&self, db: &dyn Dbm, what: &str) -> usize {
        let allowed = |key: &[u8]| -> Vec<Option<Vec<u8>>> {
            let mut states = vec![self.synced.get(key).cloned()];
            if let Some(later) = self.since.get(key) {
                states.extend(later.iter().cloned());
                if self.modified_may_vanish {
                    states.push(None);
                }
            }
            states
        };
        let keys: BTreeSet<&Vec<u8>> = self.synced.keys().chain(self.since.keys()).collect();
        for key in &keys {
            let got = match db.get(key) {
                Ok(value) => Some(value),
                Err(e) if e.kind() == ErrorKind::NotFound => None,
                Err(e) => panic!("{what}: reading {} failed: {e}", String::from_utf8_lossy(key)),
            };
            let states = allowed(key);
            assert!(
                states.contains(&got),
                "{what}: {} is {:?}, expected one of {} states (synced {:?}; modified since: {})",
                String::from_utf8_lossy(key),
                got.as_deref().map(short),
                states.len(),
                self.synced.get(*key).map(|v| short(v)),
                self.since.contains_key(*key),
            );
        }
        let mut seen = 0;
        for record in db.records().expect("cursor") {
            let (key, value) = record.unwrap_or_else(|e| panic!("{what}: iteration failed: {e}"));
            assert!(
                allowed(&key).contains(&Some(value.clone())),
                "{what}: the cursor shows a record never written: {} = {:?} (synced {:?}; modified since: {})",
                String::from_utf8_lossy(&key),
                short(&value),
                self.synced.get(&key).map(|v| short(v)),
                self.since.contains_key(&key),
            );
            seen += 1;
        }
        seen
    }
}

fn short(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    text.chars().take(40).collect()
}

/// The synced bytes with a random subset of the differing pages taken from `current`, one of
/// the others torn at a sector boundary, and the old or the new length.
pub fn crash_image(synced: &[u8], current: &[u8], rng: &mut SplitMix64) -> Vec<u8> {
    let longest = synced.len().max(current.len());
    let page_count = longest.div_ceil(PAGE);
    let same = |a: &[u8], b: &[u8]| {
        let common = a.len().min(b.len());
        a[..common] == b[..common] && a[common..].iter().chain(&b[common..]).all(|&x| x == 0)
    };
    let differing: Vec<usize> = (0..page_count).filter(|&p| !same(page_of(synced, p), page_of(current, p))).collect();
    let mut image = synced.to_vec();
    image.resize(page_count * PAGE, 0);
    // A write-back probability per image, so that images range from almost nothing written
    // to almost everything.
    let keep = rng.unit();
    let torn = if differing.is_empty() { None } else { Some(differing[rng.below(differing.len() as u64) as usize]) };
    for &page in &differing {
        let new = page_of(current, page);
        let slot = &mut image[page * PAGE..(page + 1) * PAGE];
        let take = if Some(page) == torn {
            (1 + rng.below((PAGE / SECTOR - 1) as u64) as usize) * SECTOR
        } else if rng.unit() < keep {
            PAGE
        } else {
            0
        };
        let copied = take.min(new.len());
        slot[..copied].copy_from_slice(&new[..copied]);
        slot[copied..take].fill(0);
    }
    let length = if rng.below(2) == 0 { synced.len() } else { current.len() };
    image.truncate(length);
    image
}

/// A page of `bytes`, short or empty past its end (read as zeros).
fn page_of(bytes: &[u8], page: usize) -> &[u8] {
    let start = (page * PAGE).min(bytes.len());
    &bytes[start..((page + 1) * PAGE).min(bytes.len())]
}

/// How many images a test builds in all: `KURA_POWERLOSS_IMAGES`, else `default`.
pub fn image_budget(default: usize) -> usize {
    std::env::var("KURA_POWERLOSS_IMAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
