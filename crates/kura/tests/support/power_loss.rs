//! Power-loss simulation for the file engines (test support, not public API).
//!
//! A `Tracker` follows a workload on a database made of one file or of several (a ShardDbm
//! set, one file per shard): at every `synchronize(true)` it keeps a copy of each file and of
//! the model, and between two synchronizations it records every value each key was given. A
//! crash image of a file is that synced copy plus an arbitrary subset of the 4 KiB pages that
//! differ in the file now (the kernel may write back any dirty page of a mapped or written
//! file, in any order), one more page torn at a 512-byte boundary (a prefix of its sectors
//! new, the rest old), and a length that is either the old or the new one (the size may or
//! may not have reached the disk). The files of a set lose their pages independently: in an
//! image of a set each file is its synced copy whole, its current bytes whole, or such a mix.
//! `check` opens such an image and requires: every record synced and not modified since is
//! present with its value; every record modified since has its synced value or one written
//! since (or is absent, if it was absent or removed in between); no other key exists. Never
//! garbage. `check_commit_prefix` adds, for an engine whose commits are atomic (TreeDbm), that
//! a file holds exactly the state after some prefix of its writes, never cut inside a batch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kura::split_mix::SplitMix64;
use kura::{Dbm, DbmExt, ErrorKind};

pub const PAGE: usize = 4096;
/// A TreeDbm file's two header copies (docs/tree.md): what a checkpoint rewrites.
const TREE_HEADERS: usize = 256;
/// A journal's header (docs/tree.md, "Journal header"), whose salt changes at each checkpoint.
const JOURNAL_HEADER: usize = 32;
pub const SECTOR: usize = 512;

pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One write since the last sync: a key's new state, and the batch it belongs to (if any).
struct Change {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    batch: Option<u64>,
}

/// What the files and the records were at the last `synchronize(true)`, and what happened since.
#[derive(Default)]
pub struct Tracker {
    /// Accept a record modified since the last sync being absent (the weaker promise of an
    /// engine that may lose a record in flight, documented as such).
    pub modified_may_vanish: bool,
    /// Each file of the database as of the last sync, with its path.
    synced_files: Vec<(PathBuf, Vec<u8>)>,
    synced: Model,
    /// Every state (value, or None for absent) each key was given since the last sync.
    since: BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>>,
    /// The same writes in their order, for `check_commit_prefix`.
    log: Vec<Change>,
    batches: u64,
    model: Model,
}

/// What one file of a set is in a crash image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Nothing written since the sync reached the disk: the synced copy, whole.
    Old,
    /// Everything reached the disk: the file as it is now, whole.
    New,
    /// Some pages, one torn (`crash_image`).
    Mixed,
}

impl Tracker {
    pub fn new() -> Tracker {
        Tracker::default()
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        self.change(key, Some(value), None);
        self.note_checkpoints();
    }

    pub fn remove(&mut self, key: &[u8]) {
        self.change(key, None, None);
        self.note_checkpoints();
    }

    /// A write batch that returned: its changes in order, applied as one unit where the
    /// engine commits a batch atomically.
    pub fn batch(&mut self, changes: &[(Vec<u8>, Option<Vec<u8>>)]) {
        self.batches += 1;
        for (key, value) in changes {
            self.change(key, value.as_deref(), Some(self.batches));
        }
        self.note_checkpoints();
    }

    /// A journaled file (TreeDbm, HashDbm) that made a checkpoint (or a clear) since its
    /// synced copy was taken: its pages were fsynced, and its journal started over durably
    /// under a new salt. The file and its journal as they are now are then what survives of
    /// them, so they become their synced copies. A checkpoint shows as a journal header (its
    /// salt) unlike the synced copy's, or, for TreeDbm, whose journal may not exist yet, as a
    /// changed header area of the tree file. (The model keeps its state of the last
    /// `synchronize(true)`: a checkpoint's records are among those written since, which
    /// `check` accepts.)
    fn note_checkpoints(&mut self) {
        for index in 0..self.synced_files.len() {
            let (path, synced) = &self.synced_files[index];
            let journal = kura::journal_path(path);
            let Some(journal_index) = self.synced_files.iter().position(|(p, _)| *p == journal) else {
                continue;
            };
            // Called after every operation: only the heads are read, the files whole only
            // when a checkpoint changed them.
            let is_tree_file = path.extension().is_some_and(|e| e == "kut") || is_tree_shard(path);
            let head = |bytes: &[u8], size: usize| bytes[..bytes.len().min(size)].to_vec();
            let synced_journal = &self.synced_files[journal_index].1;
            let restarted = !synced_journal.is_empty()
                && read_head(&journal, JOURNAL_HEADER) != head(synced_journal, JOURNAL_HEADER);
            let tree_committed = is_tree_file && read_head(path, TREE_HEADERS) != head(synced, TREE_HEADERS);
            if restarted || tree_committed {
                self.synced_files[index].1 = read_if_exists(path);
                self.synced_files[journal_index].1 = read_if_exists(&journal);
            }
        }
    }

    fn change(&mut self, key: &[u8], value: Option<&[u8]>, batch: Option<u64>) {
        match value {
            Some(value) => self.model.insert(key.to_vec(), value.to_vec()),
            None => self.model.remove(key),
        };
        let value = value.map(<[u8]>::to_vec);
        self.since.entry(key.to_vec()).or_default().push(value.clone());
        self.log.push(Change { key: key.to_vec(), value, batch });
    }

    /// Call right after `synchronize(true)` returned: the file at `path` is what survives.
    pub fn synchronized(&mut self, path: &Path) {
        self.synchronized_files(&[path.to_path_buf()]);
    }

    /// Call right after `synchronize(true)` of a database made of the files `paths` (every
    /// shard of a set, and the journal beside each file that has one) returned: they are what
    /// survives. A journaled file's `synchronize(true)` syncs only its journal: the file itself
    /// keeps its copy of the last checkpoint (`note_checkpoints`), or, at the first call, its
    /// bytes now.
    pub fn synchronized_files(&mut self, paths: &[PathBuf]) {
        let journals: BTreeSet<PathBuf> =
            paths.iter().map(|p| kura::journal_path(p)).filter(|j| paths.contains(j)).collect();
        let previous = std::mem::take(&mut self.synced_files);
        self.synced_files = paths
            .iter()
            .map(|path| {
                let journaled = journals.contains(&kura::journal_path(path));
                let kept = previous.iter().find(|(p, _)| journaled && p == path).map(|(_, bytes)| bytes.clone());
                (path.clone(), kept.unwrap_or_else(|| read_if_exists(path)))
            })
            .collect();
        self.synced = self.model.clone();
        self.since.clear();
        self.log.clear();
    }

    /// The tracked files as they are now beside their synced copies, to build crash images
    /// from (read once: the images of one moment all start from the same bytes).
    pub fn crash(&self) -> Crash<'_> {
        let files =
            self.synced_files.iter().map(|(path, synced)| DirtyFile::new(synced, read_if_exists(path))).collect();
        Crash { files }
    }

    /// Requires `actual`, the records of one file of the database (those of the keys for
    /// which `in_file` holds), to be exactly the synced records of that file with some prefix
    /// of the file's writes since applied, cut between two writes but never inside a batch:
    /// the promise of an engine whose commits are atomic (TreeDbm, where a crash leaves the
    /// state of some commit, and a batch is one commit).
    pub fn check_commit_prefix(&self, actual: &Model, in_file: impl Fn(&[u8]) -> bool, what: &str) {
        let mut state: Model =
            self.synced.iter().filter(|(key, _)| in_file(key)).map(|(k, v)| (k.clone(), v.clone())).collect();
        // Keys whose state differs from `actual`: at a cut where none does, the file matches.
        let mut differing: BTreeSet<Vec<u8>> =
            state.keys().chain(actual.keys()).filter(|key| state.get(*key) != actual.get(*key)).cloned().collect();
        let writes: Vec<&Change> = self.log.iter().filter(|change| in_file(&change.key)).collect();
        let mut matched = differing.is_empty();
        for (index, change) in writes.iter().enumerate() {
            match &change.value {
                Some(value) => state.insert(change.key.clone(), value.clone()),
                None => state.remove(&change.key),
            };
            if state.get(&change.key) == actual.get(&change.key) {
                differing.remove(&change.key);
            } else {
                differing.insert(change.key.clone());
            }
            let inside_batch =
                change.batch.is_some() && writes.get(index + 1).is_some_and(|next| next.batch == change.batch);
            matched |= differing.is_empty() && !inside_batch;
        }
        assert!(
            matched,
            "{what}: the file holds no prefix of its {} writes since the sync (cut between batches); \
             after all of them {} keys differ, first {:?}",
            writes.len(),
            differing.len(),
            differing.iter().next().map(|key| String::from_utf8_lossy(key).into_owned()),
        );
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

/// The files of a database at one moment, each beside its synced copy (`Tracker::crash`).
pub struct Crash<'a> {
    files: Vec<DirtyFile<'a>>,
}

impl Crash<'_> {
    /// A crash image of the only file (`Tracker::synchronized`).
    pub fn image(&self, rng: &mut SplitMix64) -> Vec<u8> {
        assert_eq!(self.files.len(), 1, "a database of several files has set images");
        self.files.iter().map(|file| file.image(rng)).next().unwrap_or_default()
    }

    /// A crash image of every file, each with its own fate (drawn at random: one in four
    /// wholly old, one in four wholly new, the others mixed, each with its own pages), in the
    /// order of the paths given to `synchronized_files`.
    pub fn set_image(&self, rng: &mut SplitMix64) -> Vec<(Vec<u8>, Fate)> {
        self.files
            .iter()
            .map(|file| match rng.below(4) {
                0 => (file.synced.to_vec(), Fate::Old),
                1 => (file.current.clone(), Fate::New),
                _ => (file.image(rng), Fate::Mixed),
            })
            .collect()
    }
}

/// A file's synced copy, its bytes now, and the 4 KiB pages in which they differ.
struct DirtyFile<'a> {
    synced: &'a [u8],
    current: Vec<u8>,
    differing: Vec<usize>,
}

impl DirtyFile<'_> {
    fn new(synced: &[u8], current: Vec<u8>) -> DirtyFile<'_> {
        let page_count = synced.len().max(current.len()).div_ceil(PAGE);
        let same = |a: &[u8], b: &[u8]| {
            let common = a.len().min(b.len());
            let zeros = |tail: &[u8]| tail.iter().all(|&x| x == 0);
            a[..common] == b[..common] && zeros(&a[common..]) && zeros(&b[common..])
        };
        let differing =
            (0..page_count).filter(|&p| !same(page_of(synced, p), page_of(&current, p))).collect::<Vec<usize>>();
        DirtyFile { synced, current, differing }
    }

    /// The synced bytes with a random subset of the differing pages taken from the current
    /// ones, one of the others torn at a sector boundary, and the old or the new length.
    fn image(&self, rng: &mut SplitMix64) -> Vec<u8> {
        let (synced, current, differing) = (self.synced, &self.current, &self.differing);
        let page_count = synced.len().max(current.len()).div_ceil(PAGE);
        let mut image = vec![0; page_count * PAGE];
        image[..synced.len()].copy_from_slice(synced);
        // A write-back probability per image, so that images range from almost nothing
        // written to almost everything.
        let keep = rng.unit();
        let torn =
            if differing.is_empty() { None } else { Some(differing[rng.below(differing.len() as u64) as usize]) };
        for &page in differing {
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
}

/// The synced bytes with a random subset of the differing pages taken from `current`, one of
/// the others torn at a sector boundary, and the old or the new length.
pub fn crash_image(synced: &[u8], current: &[u8], rng: &mut SplitMix64) -> Vec<u8> {
    DirtyFile::new(synced, current.to_vec()).image(rng)
}

/// Whether `path` is a shard file of a set of TreeDbm files (`db.kut-00000-of-00004`).
fn is_tree_shard(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|name| name.contains(".kut-") && !name.ends_with(".journal"))
}

/// The bytes of the file at `path`; none when it does not exist (a TreeDbm journal is created
/// by the first commit after a checkpoint and removed at close).
pub fn read_if_exists(path: &Path) -> Vec<u8> {
    match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("read {}: {e}", path.display()),
    }
}

/// The first `size` bytes of the file at `path` (fewer if it is shorter; none if it does not
/// exist).
fn read_head(path: &Path, size: usize) -> Vec<u8> {
    use std::io::Read;
    let mut head = Vec::with_capacity(size);
    match std::fs::File::open(path) {
        Ok(file) => {
            file.take(size as u64).read_to_end(&mut head).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("open {}: {e}", path.display()),
    }
    head
}

/// Writes a file of a crash image: `bytes`, or no file at all when there are none.
pub fn write_image_file(path: &Path, bytes: &[u8]) {
    if bytes.is_empty() {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("remove {}: {e}", path.display()),
        }
    } else {
        write_sparse(path, bytes);
    }
}

/// Writes `bytes` to the file at `path`, leaving its all-zero pages as holes, which read back
/// as the same zeros. A HashDbm file or journal of a few dozen records is mostly zeros (1 MiB
/// of each is reserved ahead), and writing them whole, file after file and image after image,
/// was most of a debug run's time.
pub fn write_sparse(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    const ZEROS: [u8; PAGE] = [0; PAGE];
    let write = || -> std::io::Result<()> {
        let file = std::fs::File::create(path)?;
        file.set_len(bytes.len() as u64)?;
        for (page, chunk) in bytes.chunks(PAGE).enumerate() {
            if chunk != &ZEROS[..chunk.len()] {
                file.write_all_at(chunk, (page * PAGE) as u64)?;
            }
        }
        Ok(())
    };
    write().unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
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
