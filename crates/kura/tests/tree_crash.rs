//! Crash tests: a child process (this test binary, re-run in a child mode) writes batches or
//! rebuilds and is killed with SIGKILL at a random moment; the parent then opens the file,
//! which must hold every batch wholly or not at all, in order, and nothing torn.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

#[path = "support/killed_child.rs"]
#[allow(dead_code, reason = "each kill test uses part of the shared child machinery")]
mod killed_child;

use std::path::Path;
use std::time::Duration;

use killed_child::KilledChild;

use kura::{Dbm, DbmExt, OpenMode, Params};
use kura::{TreeDbm, WriteBatch};

const CHILD_MODE: &str = "KURA_TREE_CRASH_CHILD";
const CHILD_PATH: &str = "KURA_TREE_CRASH_PATH";
const BATCH_KEYS: usize = 30;
const REBUILD_RECORDS: u32 = 3000;
/// Keys every large batch rewrites: about 150 KB a batch, so it bypasses the journal, and
/// about 150 leaves of 1 KiB, over `max_dirty_pages`, so it spills (tree_dbm/store.rs).
const LARGE_BATCH_KEYS: u32 = 6000;

fn params() -> Params {
    // The batches of `batches` (about 3.8 KiB) go through the journal, which checkpoints every
    // 16 KiB; the 3,000-record batch of `rebuild` is over a quarter of that, so it bypasses the
    // journal (applied, then checkpointed at once): kills land in both paths.
    Params::new()
        .with("max_page_size", 1024)
        .with("record_comp", "lz4")
        .with("max_dirty_pages", 64)
        .with("checkpoint_bytes", 16384)
}

fn batch_key(batch: u64, j: usize) -> Vec<u8> {
    format!("b{batch:06}-{j:03}").into_bytes()
}

/// The child's work, run when this binary is started with CHILD_MODE set.
#[test]
fn crash_child_entry() {
    let (Ok(mode), Ok(path)) = (std::env::var(CHILD_MODE), std::env::var(CHILD_PATH)) else { return };
    let db = TreeDbm::open(&path, OpenMode::Create, &params()).unwrap();
    match mode.as_str() {
        "batches" => {
            let mut next = db.get(b"progress").map(|v| u64::from_be_bytes(v.try_into().unwrap()) + 1).unwrap_or(0);
            loop {
                let mut batch = WriteBatch::new();
                for j in 0..BATCH_KEYS {
                    batch.set(batch_key(next, j), format!("{next}-{j}-{}", "v".repeat(j * 7)));
                }
                if next >= 3 {
                    // Removing half of an older batch is part of the same atomic unit.
                    for j in 0..BATCH_KEYS / 2 {
                        batch.remove(batch_key(next - 3, j));
                    }
                }
                batch.set(b"progress", next.to_be_bytes());
                db.write_batch(&batch).unwrap();
                // Single writes between batches are committed with the next batch or lost.
                db.set(format!("single{next:06}").as_bytes(), b"x", true).unwrap();
                next += 1;
            }
        }
        "rebuild" => {
            if db.count().unwrap() == 0 {
                let mut batch = WriteBatch::new();
                for i in 0..REBUILD_RECORDS {
                    batch.set(format!("r{i:06}"), format!("value{i}"));
                }
                db.write_batch(&batch).unwrap();
            }
            let codecs = ["zstd", "none", "lz4", "zlib"];
            for round in 0.. {
                let params = Params::new()
                    .with("record_comp", codecs[round % codecs.len()])
                    .with("max_page_size", 512 << (round % 3));
                db.rebuild(&params).unwrap();
            }
        }
        "large_batches" => {
            let mut next = db.get(b"progress").map(|v| u64::from_be_bytes(v.try_into().unwrap()) + 1).unwrap_or(0);
            loop {
                let mut batch = WriteBatch::new();
                for i in 0..LARGE_BATCH_KEYS {
                    batch.set(format!("large{i:05}"), format!("batch {next} key {i}"));
                }
                batch.set(b"progress", next.to_be_bytes());
                db.write_batch(&batch).unwrap();
                next += 1;
            }
        }
        _ => panic!("unknown child mode {mode}"),
    }
}

fn spawn(mode: &str, path: &Path) -> KilledChild {
    KilledChild::spawn("crash_child_entry", &[(CHILD_MODE, mode.to_string()), (CHILD_PATH, path.display().to_string())])
}

fn kill_after(child: KilledChild, millis: u64) {
    child.kill_after(Duration::from_millis(millis));
}

fn check_batches(path: &Path) -> u64 {
    let db = TreeDbm::open(path, OpenMode::Write, &Params::new()).unwrap();
    assert!(!db.was_restored(), "the committed tree must survive a process crash");
    let last = db.get(b"progress").map(|v| u64::from_be_bytes(v.try_into().unwrap())).ok();
    let batches = last.map_or(0, |l| l + 1);
    for batch in 0..batches + 3 {
        let present: Vec<bool> = (0..BATCH_KEYS).map(|j| db.get(&batch_key(batch, j)).is_ok()).collect();
        let expected_first_half = batch < batches && batch + 3 >= batches;
        let expected_second_half = batch < batches;
        for (j, p) in present.iter().enumerate() {
            let expected = if j < BATCH_KEYS / 2 { expected_first_half } else { expected_second_half };
            assert_eq!(*p, expected, "batch {batch} key {j} of {batches} committed batches");
        }
    }
    let mut records = 0u64;
    for record in db.records().unwrap() {
        record.unwrap();
        records += 1;
    }
    assert_eq!(records, db.count().unwrap());
    // The tree a crash left is sound to a full check of its pages (issue 43).
    let report = db.check().unwrap();
    assert!(report.is_clean() && report.records == records, "check after the crash: {report:?}");
    // The recovered free space is usable.
    for i in 0..200 {
        db.set(format!("after{i}").as_bytes(), &[7u8; 100], true).unwrap();
    }
    for i in 0..200 {
        db.remove(format!("after{i}").as_bytes()).unwrap();
    }
    db.close().unwrap();
    batches
}

#[test]
fn killed_writer_keeps_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.kut");
    let mut previous = 0;
    for round in 0..6u64 {
        kill_after(spawn("batches", &path), 150 + round * 97 % 300);
        if !path.exists() {
            continue;
        }
        let batches = check_batches(&path);
        assert!(batches >= previous);
        previous = batches;
    }
    assert!(previous > 0, "the child never committed a batch: is the machine that slow?");
}

/// Batches too large for the journal and for the modified-page budget: each is applied in
/// steps, the tree committed durably between them after the whole batch was journaled, so a
/// killed writer still leaves every batch whole or absent.
#[test]
fn killed_writer_keeps_whole_batches_larger_than_the_page_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.kut");
    let mut previous = None;
    for round in 0..6u64 {
        kill_after(spawn("large_batches", &path), 200 + round * 151 % 500);
        if !path.exists() {
            continue;
        }
        let db = TreeDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
        let last = db.get(b"progress").map(|v| u64::from_be_bytes(v.try_into().unwrap())).ok();
        if let Some(last) = last {
            for i in 0..LARGE_BATCH_KEYS {
                let value = db.get(format!("large{i:05}").as_bytes()).unwrap();
                assert_eq!(
                    value,
                    format!("batch {last} key {i}").into_bytes(),
                    "round {round}: key {i} of batch {last}"
                );
            }
        } else {
            assert_eq!(db.count().unwrap(), 0, "round {round}: records without a whole batch");
        }
        assert!(last >= previous, "round {round}: batch {last:?} after {previous:?}");
        previous = last;
        db.close().unwrap();
    }
}

#[test]
fn killed_rebuild_keeps_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rebuild.kut");
    for round in 0..4u64 {
        kill_after(spawn("rebuild", &path), 300 + round * 131 % 400);
        if !path.exists() {
            continue;
        }
        let db = match TreeDbm::open(&path, OpenMode::Write, &Params::new()) {
            Ok(db) => db,
            Err(e) => panic!("round {round}: {e}"),
        };
        let count = db.count().unwrap();
        assert!(count == 0 || count == u64::from(REBUILD_RECORDS), "count {count}");
        if count > 0 {
            for i in (0..REBUILD_RECORDS).step_by(17) {
                assert_eq!(db.get(format!("r{i:06}").as_bytes()).unwrap(), format!("value{i}").into_bytes());
            }
            assert_eq!(db.records().unwrap().count() as u64, count);
        }
        db.close().unwrap();
    }
}
