//! Tests of the open after a power loss (pager.rs, verify.rs): a header written without fsync
//! is used only if every page its tree gained since the durable commit is on the disk;
//! otherwise the open falls back to the durable header in the other copy. Each test takes
//! the file's bytes after a durable commit and after a later commit without fsync, damages
//! the later image as a power loss would, opens it and compares every record with a model.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::format::{FileHeader, HEADER_SIZE};
use super::options::{DEFAULT_CACHE_BYTES, DEFAULT_MAX_FILE_SIZE};
use super::page::Page;
use super::pager::Pager;
use super::TreeDbm;
use crate::dbm::{Dbm, DbmExt, OpenMode, Params};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Where the digest of the pages written since the durable commit lies in a header copy
/// (docs/tree.md, bytes 80..88), and its checksum (bytes 120..128, xxh3 of 0..120).
const DIGEST_AT: usize = 80;
const CHECKSUM_AT: usize = 120;
const KEYS: u32 = 300;
const CHANGED: &[u8] = b"key0150";

fn value(key: u32, version: u32) -> Vec<u8> {
    format!("value of {key:04}, version {version}").into_bytes()
}

/// The file's bytes, the model of its records, and the header the image holds.
struct Image {
    bytes: Vec<u8>,
    model: Model,
    header: FileHeader,
}

/// Three states of one file: a checkpoint, a second checkpoint that rewrote the leaf
/// of `CHANGED` (so the first one's leaf slot is free space, still holding a valid leaf),
/// and a commit without fsync that rewrote it again.
struct History {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    durable: Image,
    soft: Image,
}

fn image(path: &Path, model: &Model) -> Image {
    let bytes = std::fs::read(path).unwrap();
    let (header, _) = FileHeader::read_both(&bytes).unwrap();
    Image { bytes, model: model.clone(), header }
}

fn set(db: &TreeDbm, model: &mut Model, key: u32, version: u32) {
    let key_bytes = format!("key{key:04}").into_bytes();
    db.set(&key_bytes, &value(key, version), true).unwrap();
    model.insert(key_bytes, value(key, version));
}

fn history() -> History {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tree.kut");
    let params = Params::new().with("max_page_size", 512).with("record_comp", "none");
    let db = TreeDbm::open(&path, OpenMode::Create, &params).unwrap();
    let mut model = Model::new();
    for key in 0..KEYS {
        set(&db, &mut model, key, 1);
    }
    db.checkpoint().unwrap();
    set(&db, &mut model, 150, 2);
    db.checkpoint().unwrap();
    let durable = image(&path, &model);
    set(&db, &mut model, 150, 3);
    // A commit of the tree file without fsync: what writers before the journal made of every
    // commit (and what the open must still verify in their files). The journal is not copied
    // into the images.
    db.write().unwrap().tree.commit(false).unwrap();
    let soft = image(&path, &model);
    History { dir: dir.path().to_path_buf(), _dir: dir, durable, soft }
}

/// Writes `bytes` as a file of its own.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Every page of the tree of the file at `path` as its opening reader sees it: offset →
/// (is a leaf, slot length).
fn tree_pages(path: &Path) -> HashMap<u64, (bool, u64)> {
    let pager = Pager::open(path, false, DEFAULT_CACHE_BYTES, DEFAULT_MAX_FILE_SIZE).unwrap();
    let mut pages = HashMap::new();
    let mut stack = vec![pager.header().root];
    while let Some(offset) = stack.pop() {
        let slot_len = pager.slot_header(offset).unwrap().slot_len;
        match pager.decode_page(offset).unwrap() {
            Page::Leaf(_) => pages.insert(offset, (true, slot_len)),
            Page::Branch(branch) => {
                stack.extend(branch.children().iter().copied());
                pages.insert(offset, (false, slot_len))
            }
        };
    }
    pages
}

/// Opens the file at `path` for writing, as after a crash, and checks that it holds exactly
/// `expected`; then that it takes a write and reopens cleanly with it.
fn assert_opens_with(path: &Path, expected: &Model) {
    let db = TreeDbm::open(path, OpenMode::Write, &Params::new()).unwrap();
    let found: Model = db.records().unwrap().map(Result::unwrap).collect();
    assert_eq!(found.len(), expected.len(), "record count");
    assert_eq!(&found, expected);
    db.set(b"after", b"the open", true).unwrap();
    db.close().unwrap();
    let db = TreeDbm::open(path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(db.count().unwrap(), expected.len() as u64 + 1);
    assert_eq!(db.get(b"after").unwrap(), b"the open");
}

#[test]
fn an_undamaged_commit_without_fsync_is_used() {
    let history = history();
    let soft = &history.soft.header;
    let since = soft.since_base.unwrap();
    assert!(soft.needs_verification() && since.base == history.durable.header.sequence && since.new_pages > 0);
    assert_eq!(history.soft.model[CHANGED], value(150, 3));
    let path = write(&history.dir, "soft.kut", &history.soft.bytes);
    assert_opens_with(&path, &history.soft.model);
}

/// The page that did not reach the disk leaves the page the slot held before: a valid leaf,
/// at the right level, with the value of `CHANGED` of the first commit. Only the digest
/// (and page count) of the header tells it from the page written: without them the open
/// would have read a value older than the durable one.
#[test]
fn a_lost_page_falls_back_to_the_durable_commit() {
    let history = history();
    let soft_path = write(&history.dir, "soft.kut", &history.soft.bytes);
    let durable_path = write(&history.dir, "durable.kut", &history.durable.bytes);
    let durable_pages = tree_pages(&durable_path);
    let durable_reader = Pager::open(&durable_path, false, DEFAULT_CACHE_BYTES, DEFAULT_MAX_FILE_SIZE).unwrap();
    // A leaf written since the durable commit into a slot that held a valid leaf of the same
    // slot length in the durable image (free space there).
    let (&lost, &(_, slot_len)) = tree_pages(&soft_path)
        .iter()
        .filter(|(offset, (leaf, len))| {
            *leaf
                && !durable_pages.contains_key(offset)
                && durable_reader.slot_header(**offset).is_ok_and(|slot| slot.slot_len == *len)
                && matches!(durable_reader.decode_page(**offset), Ok(Page::Leaf(_)))
        })
        .min_by_key(|(offset, _)| **offset)
        .expect("no new leaf was written over an older one");
    let mut bytes = history.soft.bytes.clone();
    let range = lost as usize..(lost + slot_len) as usize;
    bytes[range.clone()].copy_from_slice(&history.durable.bytes[range]);
    let path = write(&history.dir, "lost-page.kut", &bytes);
    assert_opens_with(&path, &history.durable.model);
    assert_eq!(history.durable.model[CHANGED], value(150, 2));
}

/// A header whose digest does not match its pages (here damaged in the header itself, its
/// checksum made to match again) is not used either.
#[test]
fn a_wrong_digest_falls_back_to_the_durable_commit() {
    let history = history();
    let mut bytes = history.soft.bytes.clone();
    let copy = history.soft.header.copy_offset() as usize;
    bytes[copy + DIGEST_AT] ^= 1;
    let checksum = xxhash_rust::xxh3::xxh3_64(&bytes[copy..copy + CHECKSUM_AT]);
    bytes[copy + CHECKSUM_AT..copy + HEADER_SIZE].copy_from_slice(&checksum.to_le_bytes());
    let (newest, _) = FileHeader::read_both(&bytes).unwrap();
    assert_eq!(newest.sequence, history.soft.header.sequence, "the damaged header no longer reads");
    let path = write(&history.dir, "digest.kut", &bytes);
    assert_opens_with(&path, &history.durable.model);
}

/// A header whose format version differs from its durable base's (damage that kept the
/// checksum: no writer changes a file's version in place) is not used either: read as
/// version 1, its branches' slot hints would be taken for offsets.
#[test]
fn a_header_of_another_format_version_falls_back_to_the_durable_commit() {
    /// The format version's place in a header copy (docs/tree.md, bytes 8..12).
    const VERSION_AT: usize = 8;
    let history = history();
    let mut bytes = history.soft.bytes.clone();
    let copy = history.soft.header.copy_offset() as usize;
    assert_eq!(bytes[copy + VERSION_AT..copy + VERSION_AT + 4], 2u32.to_le_bytes(), "a new file is version 2");
    bytes[copy + VERSION_AT..copy + VERSION_AT + 4].copy_from_slice(&1u32.to_le_bytes());
    let checksum = xxhash_rust::xxh3::xxh3_64(&bytes[copy..copy + CHECKSUM_AT]);
    bytes[copy + CHECKSUM_AT..copy + HEADER_SIZE].copy_from_slice(&checksum.to_le_bytes());
    let (newest, _) = FileHeader::read_both(&bytes).unwrap();
    assert_eq!((newest.sequence, newest.version), (history.soft.header.sequence, 1));
    let path = write(&history.dir, "version.kut", &bytes);
    assert_opens_with(&path, &history.durable.model);
}
