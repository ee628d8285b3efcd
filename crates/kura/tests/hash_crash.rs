//! Crash test with real processes: a child process writes to a HashDbm in rounds, calling
//! `synchronize` after each, and is killed with SIGKILL at a random moment. The parent then
//! opens the database (which restores it) and checks that everything as of the last
//! completed synchronize is there with its value, and that the round in flight left only
//! whole operations behind. `KURA_CRASH_TRIALS` sets the number of trials (default 50).

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

#[path = "support/killed_child.rs"]
#[allow(dead_code, reason = "each kill test uses part of the shared child machinery")]
mod killed_child;

use std::collections::BTreeMap;
use std::time::Duration;

use killed_child::{report_progress, KilledChild};

use kura::{CodecKind, Dbm, DbmExt, HashDbm, OpenMode, Params, Stat};

const KEYS_PER_ROUND: u64 = 300;
const CHILD_ENV: &str = "KURA_CRASH_CHILD";

fn key(round: u64, i: u64) -> Vec<u8> {
    format!("r{round}-k{i}").into_bytes()
}

fn first_value(round: u64, i: u64) -> Vec<u8> {
    format!("value of {round}/{i} ").repeat(1 + (i % 5) as usize).into_bytes()
}

fn second_value(round: u64, i: u64) -> Vec<u8> {
    format!("rewritten {round}/{i}").into_bytes()
}

/// The operations of round `round`: set its own keys; for round-2's keys, remove the even
/// ones and rewrite every third odd one.
fn round_ops(round: u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut ops = Vec::new();
    for i in 0..KEYS_PER_ROUND {
        ops.push((key(round, i), Some(first_value(round, i))));
        if round >= 2 {
            if i % 2 == 0 {
                ops.push((key(round - 2, i), None));
            } else if i % 3 == 0 {
                ops.push((key(round - 2, i), Some(second_value(round - 2, i))));
            }
        }
    }
    ops
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

fn params_for(trial: u64) -> Params {
    let codec = CodecKind::ALL[(trial % 7) as usize];
    let mode = if trial % 3 == 2 { "appending" } else { "in_place" };
    Params::new().with("record_comp", codec.name()).with("update_mode", mode).with("num_buckets", 97 + trial * 13)
}

/// The child: writes rounds forever (until killed), reporting each synchronized round.
fn child(path: &str, trial: u64) {
    let db = HashDbm::open(path, OpenMode::Create, &params_for(trial)).unwrap();
    for round in 0.. {
        for (k, v) in round_ops(round) {
            match v {
                Some(v) => db.set(&k, &v, true).unwrap(),
                None => db.remove(&k).unwrap(),
            }
        }
        if round % 7 == 6 {
            db.rebuild(&Params::new()).unwrap();
        }
        db.synchronize(false).unwrap();
        // Progress n: rounds 0..n are synchronized.
        report_progress(round + 1);
    }
}

#[test]
fn killed_writer_loses_nothing_synchronized() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let (trial, path) = spec.split_once(':').unwrap();
        child(path, trial.parse().unwrap());
        return;
    }
    let trials: u64 = std::env::var("KURA_CRASH_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(50);
    let mut rng = kura::split_mix::SplitMix64::new(0x2545_F491_4F6C_DD1D);
    for trial in 0..trials {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crash.kuh");
        let mut child = KilledChild::spawn(
            "killed_writer_loses_nothing_synchronized",
            &[(CHILD_ENV, format!("{trial}:{}", path.display()))],
        );
        let seed = rng.next_u64();
        // Wait for a random number of synchronized rounds (0 to 5), then a random extra delay.
        child.wait_for(seed % 6);
        let progress = child.kill_after(Duration::from_micros((seed >> 8) % 20_000));
        let last_synced = progress.and_then(|rounds| rounds.checked_sub(1));

        // Expected state: all rounds up to the last synchronized one; the next round may be
        // partly applied, operation by operation.
        let mut synced = BTreeMap::new();
        let next_round = last_synced.map_or(0, |r| r + 1);
        for round in 0..next_round {
            apply(&mut synced, &round_ops(round));
        }
        let in_flight = round_ops(next_round);
        let (db, reopened_clean) = match HashDbm::open(&path, OpenMode::Write, &Params::new()) {
            Ok(db) => (db, true),
            Err(e) => {
                // The child may be killed before it created the file's header.
                assert!(last_synced.is_none(), "trial {trial}: open failed after round {last_synced:?}: {e}");
                continue;
            }
        };
        assert!(reopened_clean);
        if last_synced.is_some() {
            let restored = db.inspect().unwrap().detail("restored").cloned();
            assert_eq!(restored, Some(Stat::Flag(true)), "trial {trial}: a killed writer's file was not restored");
        }
        let actual: BTreeMap<Vec<u8>, Vec<u8>> = db.records().unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(actual.len() as u64, db.count().unwrap(), "trial {trial}: count disagrees with records");
        // What the automatic restore left is sound to a full check (issue 43: check passes
        // every undamaged file, also after a kill -9).
        let report = db.check().unwrap();
        assert!(report.is_clean(), "trial {trial}: check after the restore: {report:?}");
        assert_eq!(report.records, actual.len() as u64, "trial {trial}: check read another number of records");
        for (k, v) in &synced {
            let touched: Vec<&Option<Vec<u8>>> = in_flight.iter().filter(|(ik, _)| ik == k).map(|(_, v)| v).collect();
            match actual.get(k) {
                Some(got) if got == v => {}
                Some(got) => assert!(
                    touched.iter().any(|t| t.as_ref() == Some(got)),
                    "trial {trial}: key {} has an unexpected value",
                    String::from_utf8_lossy(k)
                ),
                None => assert!(
                    touched.iter().any(|t| t.is_none()),
                    "trial {trial}: synchronized key {} is lost (last synced round {last_synced:?})",
                    String::from_utf8_lossy(k)
                ),
            }
        }
        for (k, v) in &actual {
            if synced.get(k) == Some(v) {
                continue;
            }
            assert!(
                in_flight.iter().any(|(ik, iv)| ik == k && iv.as_ref() == Some(v)),
                "trial {trial}: key {} holds a value no operation wrote: {:?} (last synced round {last_synced:?}, synced value {:?})",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v),
                synced.get(k).map(|v| String::from_utf8_lossy(v).to_string())
            );
        }
        // The restored file is healthy, writable and closes cleanly.
        db.set(b"after", b"crash", true).unwrap();
        db.close().unwrap();
        let db = HashDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
        assert_eq!(db.get(b"after").unwrap(), b"crash");
        assert!(db.inspect().unwrap().healthy);
    }
}
