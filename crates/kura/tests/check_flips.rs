//! `check` finds the damage reads can find, and finds none in a sound file (issue 43, item
//! 2): small files of every file-backed engine (HashDbm in place, appending and compressed,
//! TreeDbm plain and compressed, every memory engine's snapshot) get one byte flipped at
//! sampled positions across the whole file, header and bucket array included.
//!
//! After each flip the file is read as a user would (open, `get` of every key written, the
//! cursor, `count`), and the outcome compared with the model. Whenever those reads notice
//! anything (an error, a missing or different record, a count that disagrees), the check
//! (`kura::registry::check`, what `kura check` runs) must report a problem: a check that
//! passes a file some read then fails on is the failure this test exists to catch. The
//! check may find more than the reads (damage no read happens to reach), and the figures
//! say how often. Every undamaged file, before the flips, must check clean.
//!
//! How the project damages files otherwise: integrity_flips.rs (every bit of each region).

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]
#![expect(clippy::indexing_slicing, reason = "offsets into files the test wrote itself")]

use std::collections::BTreeMap;
use std::path::Path;

use kura::{DbmExt, ErrorKind, OpenMode, Params};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Records of each file: enough for several tree pages and hash chains, few enough that a
/// debug build checks a few hundred damaged copies in seconds.
const RECORDS: u32 = 120;

/// Positions flipped per configuration, spread over the whole file.
const FLIPS: usize = 160;

fn model() -> Model {
    (0..RECORDS)
        .map(|i| {
            let value = if i % 5 == 0 { format!("{i}") } else { format!("value {i} of the check test, {}", i * 7919) };
            (format!("key:{i:04}").into_bytes(), value.into_bytes())
        })
        .collect()
}

/// Whether a user's reads of the file at `path` notice anything wrong.
fn reads_notice_damage(path: &Path, params: &Params, model: &Model) -> bool {
    let db = match kura::open(path, OpenMode::ReadOnly, params) {
        Ok(db) => db,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::BrokenData, "open failed with an untyped error: {e}");
            return true;
        }
    };
    for (key, value) in model {
        match db.get(key) {
            Ok(got) if &got == value => {}
            Ok(_) => return true,
            Err(e) => {
                assert!(matches!(e.kind(), ErrorKind::BrokenData | ErrorKind::NotFound), "get: {e}");
                return true;
            }
        }
    }
    let Ok(records) = db.records() else { return true };
    let mut seen = Model::new();
    for record in records {
        let Ok((key, value)) = record else { return true };
        seen.insert(key, value);
    }
    seen != *model || db.count().ok() != Some(model.len() as u64)
}

/// Builds the file, checks it clean, then flips sampled bytes of copies of it.
fn flip_and_check(name: &str, extension: &str, params: &Params) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("sound.{extension}"));
    let model = model();
    let db = kura::open(&path, OpenMode::Create, params).unwrap();
    for (key, value) in &model {
        db.set(key, value, true).unwrap();
    }
    // Some churn, so that chains, free space and pages are not only fresh appends.
    for (key, value) in model.iter().step_by(3) {
        db.set(key, b"an interim value", true).unwrap();
        db.set(key, value, true).unwrap();
    }
    db.close().unwrap();
    let report = kura::registry::check(&path, params).unwrap();
    assert!(report.is_clean(), "{name}: the sound file checks with problems: {report:?}");
    assert_eq!(report.records, model.len() as u64, "{name}: check read another number of records");

    let sound = std::fs::read(&path).unwrap();
    let damaged = dir.path().join(format!("damaged.{extension}"));
    let (mut noticed, mut flagged, mut flagged_beyond_reads) = (0, 0, 0);
    let step = (sound.len() / FLIPS).max(1);
    // An odd offset into each step, so that the samples do not all fall on aligned fields.
    for position in (step / 3..sound.len()).step_by(step) {
        let mut bytes = sound.clone();
        bytes[position] ^= 1 << (position % 8);
        std::fs::write(&damaged, &bytes).unwrap();
        let notice = reads_notice_damage(&damaged, params, &model);
        let report = kura::registry::check(&damaged, params)
            .unwrap_or_else(|e| panic!("{name}: check of a flip at {position} failed: {e}"));
        if notice {
            noticed += 1;
            assert!(
                !report.is_clean(),
                "{name}: reads notice the flip at byte {position} of {}, check passes it",
                sound.len()
            );
        }
        if !report.is_clean() {
            flagged += 1;
            flagged_beyond_reads += u32::from(!notice);
        }
    }
    println!(
        "{name}: {} bytes, flips {}, noticed by reads {noticed}, flagged by check {flagged} \
         ({flagged_beyond_reads} that no read noticed)",
        sound.len(),
        sound.len().div_ceil(step)
    );
}

#[test]
fn hash_files() {
    let small = Params::new().with("num_buckets", 64);
    flip_and_check("hash in place", "kuh", &small);
    flip_and_check("hash appending", "kuh", &small.clone().with("update_mode", "appending"));
    flip_and_check("hash zstd", "kuh", &small.with("record_comp", "zstd"));
}

#[test]
fn tree_files() {
    let small = Params::new().with("max_page_size", 1024);
    flip_and_check("tree", "kut", &small);
    flip_and_check("tree lz4", "kut", &small.with("record_comp", "lz4"));
}

#[test]
fn memory_snapshots() {
    for engine in kura::engines().iter().filter(|e| e.is_in_memory()) {
        let params = engine.bench_params(u64::from(RECORDS)).with("engine", engine.name);
        flip_and_check(engine.name, engine.extension, &params);
    }
}
