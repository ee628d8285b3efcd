//! What a durable commit costs in system calls, counted by strace (a third-party judge, not
//! our own counters): a child process commits one record at a time with
//! `write_batch_durable` and with `set` + `synchronize(true)` on a TreeDbm and on a HashDbm
//! (both journaled), marking each
//! commit with a `stat` of a path that does not exist; the parent runs it under
//! `strace -f` and counts the sync calls between the marks. A durable commit of one record
//! must be exactly one `fdatasync` (of the journal) and no `fsync`, `msync` or other sync:
//! the peers' floor (LMDB, redb, RocksDB and fjall each make one per durable commit). So must
//! a durable batch of 100 records, but for one `sync_file_range` that starts its write early
//! (none in a tree file larger than half the memory, where batches of any size and sets wait
//! in the write buffer, tree_dbm/write_buffer.rs).
//!
//! strace is installed by `make deps`; where it is missing the test says so and passes.
//! Beside it, `inspect`'s own count of the journal's syncs (`journal_syncs`) is checked
//! against the same rule, one a durable commit, in a test that needs no strace.

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::path::Path;
use std::process::Command;

use kura::{OpenMode, Params, WriteBatch};

const CHILD_ENV: &str = "KURA_DURABLE_COMMIT_CHILD";
/// Commits measured per kind.
const ROUNDS: usize = 8;
/// Records of the large durable batch of each round (above TreeDbm's threshold for
/// journaling a batch before applying it).
const LARGE_BATCH: usize = 100;
const MARK: &str = "/kura-durable-commit-mark";
/// In a database file of this name the child gives the tree this little memory, so that the
/// file counts as larger than memory (`memory_bytes`).
const SMALL_MEMORY: &str = "small-memory";
/// The system calls that force data to the device.
const SYNC_CALLS: &[&str] = &["fsync", "fdatasync", "msync", "sync_file_range", "syncfs", "sync"];

fn mark(what: &str, round: usize) {
    // A stat of a path that does not exist: a system call strace shows with the path.
    let _ = std::fs::metadata(format!("{MARK}-{what}-{round}"));
}

/// The child: a database (the engine of its extension) with some records and a first durable commit (the journal exists, as in
/// a running application), then single-record durable commits between marks.
#[test]
fn durable_commit_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let params =
        if path.contains(SMALL_MEMORY) { Params::new().with("memory_bytes", 64u64 << 10) } else { Params::new() };
    let mut db = kura::open(&path, OpenMode::Create, &params).unwrap();
    for i in 0..2000u32 {
        db.set(format!("key{i:05}").as_bytes(), &[7u8; 150], true).unwrap();
    }
    if path.contains(SMALL_MEMORY) {
        // Closed and opened again, so that the records are in the tree file, not only in its
        // journal, and the file is larger than the memory given.
        db.close().unwrap();
        db = kura::open(&path, OpenMode::Write, &params).unwrap();
        // A first write after the open creates the journal (and syncs its directory).
        db.set(b"key00000", &[8u8; 150], true).unwrap();
    }
    db.synchronize(true).unwrap();
    for round in 0..ROUNDS {
        let key = format!("key{:05}", round * 211);
        let mut batch = WriteBatch::new();
        batch.set(key.as_bytes(), format!("batch {round}").as_bytes());
        mark("batch-begin", round);
        db.write_batch_durable(&batch).unwrap();
        mark("batch-end", round);
        mark("sync-begin", round);
        db.set(key.as_bytes(), format!("set {round}").as_bytes(), true).unwrap();
        db.synchronize(true).unwrap();
        mark("sync-end", round);
        let mut large = WriteBatch::new();
        for i in 0..LARGE_BATCH {
            large.set(format!("key{:05}", (round * 307 + i * 13) % 2000).as_bytes(), [round as u8; 150]);
        }
        mark("large-begin", round);
        db.write_batch_durable(&large).unwrap();
        mark("large-end", round);
    }
    db.close().unwrap();
}

/// The sync calls each `strace` line between the marks `begin` and `end` of `round` shows.
fn syncs_between(log: &str, what: &str, round: usize) -> Vec<String> {
    let begin = format!("{MARK}-{what}-begin-{round}\"");
    let end = format!("{MARK}-{what}-end-{round}\"");
    let lines: Vec<&str> = log.lines().collect();
    let start = lines.iter().position(|l| l.contains(&begin)).unwrap_or_else(|| panic!("no mark {begin} in the log"));
    let stop = lines.iter().position(|l| l.contains(&end)).unwrap_or_else(|| panic!("no mark {end} in the log"));
    lines
        .get(start + 1..stop)
        .unwrap_or_default()
        .iter()
        .filter_map(|line| {
            // "PID name(args) = result", or "PID <... name resumed>" for a call split by another thread.
            let call = line.split_whitespace().nth(1)?;
            let name = call.split('(').next()?;
            SYNC_CALLS.contains(&name).then(|| line.to_string())
        })
        .collect()
}

#[test]
fn a_durable_commit_of_one_record_is_one_fdatasync() {
    if Command::new("strace").arg("-V").output().is_err() {
        println!("strace is not installed (make deps installs it): not counted");
        return;
    }
    for name in ["commits.kut", "commits.kuh", "commits-small-memory.kut"] {
        count_syncs_of_durable_commits(name);
    }
}

fn count_syncs_of_durable_commits(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(name);
    let log = dir.path().join("strace.log");
    let traced = ["fsync", "fdatasync", "msync", "sync_file_range", "syncfs", "sync", "statx", "newfstatat", "stat"];
    let status = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .arg(format!("--trace={}", traced.join(",")))
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "durable_commit_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &db)
        .status()
        .unwrap();
    assert!(status.success(), "the traced child failed");
    let log = std::fs::read_to_string(&log).unwrap();
    for round in 0..ROUNDS {
        // A large durable batch: one fdatasync as well, which TreeDbm precedes with one
        // `sync_file_range` that starts the journal's write while the batch is applied (it
        // waits for nothing and flushes no device cache; tree_dbm/store.rs). In a tree file
        // larger than memory the batch waits in the write buffer instead (write_buffer.rs):
        // nothing is applied meanwhile, and the one fdatasync is all.
        let syncs = syncs_between(&log, "large", round);
        let fdatasyncs = syncs.iter().filter(|line| line.contains("fdatasync(")).count();
        let early_writes = syncs.iter().filter(|line| line.contains("sync_file_range(")).count();
        let expected_early = usize::from(name.ends_with(".kut") && !name.contains(SMALL_MEMORY));
        assert!(
            fdatasyncs == 1 && early_writes == expected_early && syncs.len() == fdatasyncs + early_writes,
            "{name}: large batch {round}: expected one fdatasync and {expected_early} sync_file_range, strace saw:\n{}",
            syncs.join("\n")
        );
        for what in ["batch", "sync"] {
            let syncs = syncs_between(&log, what, round);
            let fdatasyncs = syncs.iter().filter(|line| line.contains("fdatasync(")).count();
            let early_writes = syncs.iter().filter(|line| line.contains("sync_file_range(")).count();
            // In a tree file larger than memory, a batch of one record and a `set` wait in the
            // write buffer: the journal's one fdatasync is all.
            let expected_early = 0;
            assert!(
                fdatasyncs == 1 && early_writes == expected_early && syncs.len() == fdatasyncs + early_writes,
                "{name}: {what} commit {round}: expected one fdatasync and {expected_early} sync_file_range, strace saw:\n{}",
                syncs.join("\n")
            );
        }
    }
    assert!(!Path::new(&kura::journal_path(&db)).exists(), "a close removes the journal");
}

/// The journal's syncs as `inspect` counts them (`journal_syncs`).
fn journal_syncs(db: &dyn kura::Dbm) -> u64 {
    let stats = db.inspect().unwrap();
    match stats.details.iter().find(|(name, _)| *name == "journal_syncs") {
        Some((_, kura::Stat::Number(syncs))) => *syncs,
        other => panic!("{}: journal_syncs {other:?}", stats.class),
    }
}

/// `inspect`'s `journal_syncs` counts what the strace test above counts: one `fdatasync` for
/// each durable commit of a single thread, and one for any number of commits made durable
/// together by a `synchronize(true)`.
#[test]
fn inspect_counts_the_journal_syncs_of_durable_commits() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["counted.kut", "counted.kuh"] {
        let db = kura::open(dir.path().join(name), OpenMode::Create, &Params::new()).unwrap();
        db.set(b"first", b"record", true).unwrap();
        db.synchronize(true).unwrap();
        let before = journal_syncs(db.as_ref());
        for i in 0..ROUNDS {
            let mut batch = WriteBatch::new();
            batch.set(format!("durable{i}").as_bytes(), b"value");
            db.write_batch_durable(&batch).unwrap();
        }
        assert_eq!(journal_syncs(db.as_ref()) - before, ROUNDS as u64, "{name}: one sync a durable commit");
        for i in 0..ROUNDS {
            db.set(format!("plain{i}").as_bytes(), b"value", true).unwrap();
        }
        db.synchronize(true).unwrap();
        assert_eq!(journal_syncs(db.as_ref()) - before, ROUNDS as u64 + 1, "{name}: one sync for the plain sets");
        db.close().unwrap();
    }
}
