//! Kill -9 with several writing threads. HashDbm's single writes append their journal frames
//! with no lock of the journal's (journal/writer.rs, file/appender.rs): each reserves its
//! bytes and publishes them in reservation order, so that a write that returned has every
//! earlier frame whole behind it. This test holds that to a real killed process: a child runs
//! `THREADS` threads, each overwriting its own keys with values that count up, and records
//! after each set returned how far it got (a `pwrite` into a progress file, which the page
//! cache keeps across the kill); it is killed at a random moment. The reopened file (restored,
//! its journal replayed) must hold for every key the value of its thread's last returned set
//! of it or the one in flight, never an older one and never one that was not written. A small
//! `checkpoint_bytes` makes checkpoints (the journal held alone, then started over) run among
//! the appends. `KURA_CRASH_TRIALS` sets the number of trials (default 30).

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

#[path = "support/killed_child.rs"]
#[allow(dead_code, reason = "each kill test uses part of the shared child machinery")]
mod killed_child;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use killed_child::{report_progress, KilledChild};
use kura::{Dbm, HashDbm, OpenMode, Params};

const CHILD_ENV: &str = "KURA_THREADS_CRASH_CHILD";
const THREADS: u64 = 3;
/// Keys each thread overwrites in turn.
const KEYS: u64 = 97;

fn key(thread: u64, slot: u64) -> Vec<u8> {
    format!("t{thread}-k{slot}").into_bytes()
}

/// The value of a thread's `i`-th set: says whose and which it is, in varying lengths.
fn value(thread: u64, i: u64) -> Vec<u8> {
    let mut value = format!("{thread}:{i}:").into_bytes();
    value.resize(value.len() + (i % 23) as usize, b'.');
    value
}

fn parse_value(value: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.splitn(3, ':');
    let thread = parts.next()?.parse().ok()?;
    let i: u64 = parts.next()?.parse().ok()?;
    let padding = parts.next()?;
    (padding.len() as u64 == i % 23 && padding.bytes().all(|b| b == b'.')).then_some((thread, i))
}

fn params_for(trial: u64) -> Params {
    let mode = if trial % 3 == 2 { "appending" } else { "in_place" };
    Params::new().with("update_mode", mode).with("num_buckets", 101 + trial * 7).with("checkpoint_bytes", 64 << 10)
}

fn progress_path(path: &Path) -> std::path::PathBuf {
    path.with_extension("progress")
}

/// The child: every thread sets forever (until killed), each set recorded once it returned.
fn child(path: &Path, trial: u64) {
    let db = HashDbm::open(path, OpenMode::Create, &params_for(trial)).unwrap();
    let progress =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(progress_path(path)).unwrap();
    progress.write_all_at(&[0; (THREADS * 8) as usize], 0).unwrap();
    report_progress(1);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (db, progress) = (&db, &progress);
            scope.spawn(move || {
                for i in 0.. {
                    db.set(&key(thread, i % KEYS), &value(thread, i), true).unwrap();
                    // Sets 0..=i returned.
                    progress.write_all_at(&(i + 1).to_le_bytes(), thread * 8).unwrap();
                    if thread == 0 && i % 500 == 499 {
                        report_progress(2 + i / 500);
                    }
                }
            });
        }
    });
}

#[test]
fn killed_threads_lose_no_set_that_returned() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let (trial, path) = spec.split_once(':').unwrap();
        child(Path::new(path), trial.parse().unwrap());
        return;
    }
    let trials: u64 = std::env::var("KURA_CRASH_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(30);
    let mut rng = kura::split_mix::SplitMix64::new(0x5EED_7A11);
    let mut replayed_sets = 0;
    for trial in 0..trials {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.kuh");
        let mut child = KilledChild::spawn(
            "killed_threads_lose_no_set_that_returned",
            &[(CHILD_ENV, format!("{trial}:{}", path.display()))],
        );
        let seed = rng.next_u64();
        // Started, then a random number of thread 0's 500-set steps (0 to 7) and a random delay.
        child.wait_for(1 + seed % 8);
        child.kill_after(Duration::from_micros((seed >> 8) % 20_000));
        let progress = std::fs::read(progress_path(&path)).unwrap();
        let returned: Vec<u64> =
            progress.chunks(8).map(|bytes| u64::from_le_bytes(bytes.try_into().unwrap())).collect();
        let db = HashDbm::open(&path, OpenMode::Write, &Params::new()).unwrap();
        let mut records = 0;
        for thread in 0..THREADS {
            let done = returned[thread as usize];
            for slot in 0..KEYS {
                // The last set of this key that returned, if any: sets slot, slot + KEYS, ...
                let last_returned = (done > slot).then(|| slot + (done - 1 - slot) / KEYS * KEYS);
                let found = match db.get(&key(thread, slot)) {
                    Ok(found) => Some(found),
                    Err(e) if e.is_not_found() => None,
                    Err(e) => panic!("trial {trial}: {e}"),
                };
                let Some(found) = found else {
                    assert!(
                        last_returned.is_none(),
                        "trial {trial}: thread {thread} key {slot}: set {last_returned:?} returned and is lost"
                    );
                    continue;
                };
                records += 1;
                let (writer, i) = parse_value(&found).unwrap_or_else(|| {
                    panic!(
                        "trial {trial}: thread {thread} key {slot}: {:?} was never written",
                        String::from_utf8_lossy(&found)
                    )
                });
                assert_eq!((writer, i % KEYS), (thread, slot), "trial {trial}: a value of another key");
                // The set in flight when the child died is the only one that may be newer.
                assert!(
                    i <= done,
                    "trial {trial}: thread {thread} key {slot}: set {i} is past the one in flight ({done})"
                );
                if let Some(last) = last_returned {
                    assert!(
                        i >= last,
                        "trial {trial}: thread {thread} key {slot}: set {i} is older than set {last}, which returned"
                    );
                }
                replayed_sets += u64::from(i >= last_returned.unwrap_or(0));
            }
        }
        assert_eq!(db.count().unwrap(), records, "trial {trial}: count disagrees with the records");
        assert!(db.check().unwrap().is_clean(), "trial {trial}: check after the restore");
    }
    assert!(replayed_sets > 0, "no trial got far enough to test anything");
}
