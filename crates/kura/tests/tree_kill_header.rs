//! A kill -9 aimed at TreeDbm's header writes: a child process commits one small change at a
//! time (`synchronize(false)` after each set), so that much of its time goes into writing
//! the header copy, and is killed with SIGKILL at random moments. Every commit that returned
//! must survive: a header copy torn by the kill would lose, with the commit it was writing,
//! every commit since the durable one (the torn copy held the last of them, and the other
//! copy holds the durable commit). So after each kill the file must hold the last commit
//! reported or the one in flight; a failure shows what the header copies held. `make test`
//! runs 300 kills; before the header was written with `pwrite`, a copy tore about once in
//! 500 to 1,500 kills (release build), so `KURA_TREE_KILL_HEADER_TRIALS` sets more for a
//! real check.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

#[path = "support/killed_child.rs"]
#[allow(dead_code, reason = "each kill test uses part of the shared child machinery")]
mod killed_child;

use std::os::unix::fs::FileExt;
use std::time::Duration;

use killed_child::{report_progress, KilledChild};
use kura::split_mix::SplitMix64;
use kura::TreeDbm;
use kura::{Dbm, OpenMode, Params};

const CHILD_PATH: &str = "KURA_TREE_KILL_HEADER_PATH";
const TRIALS_ENV: &str = "KURA_TREE_KILL_HEADER_TRIALS";
const DEFAULT_TRIALS: u64 = 300;
/// The key every commit changes.
const KEY: &[u8] = b"commits";
/// Both header copies: the first bytes of a tree file (docs/tree.md).
const HEADERS_SIZE: usize = 256;

/// Commits go to the journal; a checkpoint every 4 KiB of it (about every 100 commits) writes
/// the header copies often enough for the kills to land in them.
fn params() -> Params {
    Params::new().with("max_page_size", 512).with("record_comp", "none").with("checkpoint_bytes", 4096)
}

/// The number of commits the file holds (the value of `KEY`), 0 for a new file.
fn commits_in(db: &TreeDbm) -> u64 {
    db.get(KEY).map(|v| u64::from_be_bytes(v.try_into().unwrap())).unwrap_or(0)
}

/// The child: commits `KEY` = 1, 2, 3 ... from where the file stands, one commit at a time,
/// reporting each commit that returned (progress = 1 + the commits made by this child).
#[test]
fn header_child_entry() {
    let Ok(path) = std::env::var(CHILD_PATH) else { return };
    let db = TreeDbm::open(&path, OpenMode::Create, &params()).unwrap();
    let first = commits_in(&db) + 1;
    report_progress(1);
    for next in first.. {
        db.set(KEY, &next.to_be_bytes(), true).unwrap();
        db.synchronize(false).unwrap();
        report_progress(next - first + 2);
    }
}

#[test]
fn killed_header_writes_keep_every_commit() {
    let trials: u64 = std::env::var(TRIALS_ENV).ok().and_then(|t| t.parse().ok()).unwrap_or(DEFAULT_TRIALS);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("headers.kut");
    let mut rng = SplitMix64::new(0x4ead_e125);
    let mut committed = 0u64;
    let mut failures = Vec::new();
    for trial in 0..trials {
        let mut child = KilledChild::spawn("header_child_entry", &[(CHILD_PATH, path.display().to_string())]);
        child.wait_for(1 + rng.next_u64() % 50);
        let progress = child.kill_after(Duration::from_micros(rng.next_u64() % 2000)).unwrap();
        let returned = committed + progress - 1;
        let mut start = [0u8; HEADERS_SIZE];
        std::fs::File::open(&path).unwrap().read_exact_at(&mut start, 0).unwrap();
        let headers = kura::forge::describe_headers(&start);
        let db = TreeDbm::open(&path, OpenMode::Write, &params()).unwrap();
        let found = commits_in(&db);
        db.close().unwrap();
        if !(returned..=returned + 1).contains(&found) {
            failures.push(format!("trial {trial}: {found} commits in the file, {returned} had returned ({headers})"));
        }
        // The next child goes on from what the file holds.
        committed = found;
    }
    println!("{trials} kills of a writer committing one change at a time: {} lost commits", failures.len());
    assert!(failures.is_empty(), "{} of {trials} kills lost commits:\n{}", failures.len(), failures.join("\n"));
}
