//! `Dbm::write_batch` on every engine: random batches of sets and removes (with repeated
//! keys, so that a later operation on a key must win) checked against a BTreeMap, through the
//! polymorphic `open`, with a close and reopen in the middle for the file engines.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::BTreeMap;
use std::path::Path;

use kura::{open, BatchOp, Dbm, DbmExt, OpenMode, Params, WriteBatch};
use proptest::prelude::*;

/// An owned operation: a key, and the value of a set (None: a removal).
type Op = (Vec<u8>, Option<Vec<u8>>);

fn op() -> impl Strategy<Value = Op> {
    let key = (0u8..16).prop_map(|k| vec![b'k', k]);
    prop_oneof![
        3 => (key.clone(), proptest::collection::vec(any::<u8>(), 0..40)).prop_map(|(key, value)| (key, Some(value))),
        1 => key.prop_map(|key| (key, None)),
    ]
}

fn batches() -> impl Strategy<Value = Vec<Vec<Op>>> {
    proptest::collection::vec(proptest::collection::vec(op(), 0..24), 1..8)
}

fn batch_of(ops: &[Op]) -> WriteBatch {
    ops.iter()
        .map(|(key, value)| match value {
            Some(value) => BatchOp::Set { key, value },
            None => BatchOp::Remove { key },
        })
        .collect()
}

fn apply_to_model(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, batch: &WriteBatch) {
    for op in batch.ops() {
        match op {
            BatchOp::Set { key, value } => {
                model.insert(key.to_vec(), value.to_vec());
            }
            BatchOp::Remove { key } => {
                model.remove(key);
            }
        }
    }
}

fn contents(db: &dyn Dbm) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.records().unwrap().map(Result::unwrap).collect()
}

fn check_engine(path: &Path, params: &str, batches: &[Vec<Op>], reopens: bool) {
    let params = Params::parse(params).unwrap();
    let mut db = open(path, OpenMode::Truncate, &params).unwrap();
    let mut model = BTreeMap::new();
    for (index, ops) in batches.iter().enumerate() {
        let batch = batch_of(ops);
        db.write_batch(&batch).unwrap();
        apply_to_model(&mut model, &batch);
        assert_eq!(db.count().unwrap(), model.len() as u64);
        if reopens && index == batches.len() / 2 {
            db.close().unwrap();
            db = open(path, OpenMode::Write, &params).unwrap();
        }
    }
    assert_eq!(contents(db.as_ref()), model);
    db.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn batches_match_a_btreemap_on_every_engine(batches in batches()) {
        let dir = tempfile::tempdir().unwrap();
        check_engine(&dir.path().join("db.kuh"), "", &batches, true);
        check_engine(&dir.path().join("db.kut"), "", &batches, true);
        // Batches over a quarter of `checkpoint_bytes` bypass TreeDbm's journal (applied, then
        // checkpointed at once); the smaller ones go through it.
        check_engine(&dir.path().join("bypass.kut"), "checkpoint_bytes=400", &batches, true);
        check_engine(&dir.path().join("db.kumt"), "", &batches, true);
        check_engine(&dir.path().join("db.kumb"), "", &batches, true);
        // A cache large enough to evict nothing, so that the model stays exact.
        check_engine(&dir.path().join("db.kumc"), "cap_rec_num=1000", &batches, true);
    }
}

#[test]
fn a_read_only_handle_refuses_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["db.kuh", "db.kut"] {
        let path = dir.path().join(name);
        open(&path, OpenMode::Create, &Params::new()).unwrap().close().unwrap();
        let db = open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
        let mut batch = WriteBatch::new();
        batch.set("a", "1");
        assert!(db.write_batch(&batch).is_err(), "{name}");
        assert_eq!(db.count().unwrap(), 0);
    }
}

/// A TreeDbm batch that fails midway (its second key lies in a damaged page) leaves nothing of
/// itself, in memory and after a reopen, whether it went through the journal or bypassed it.
#[test]
fn a_tree_batch_that_fails_midway_leaves_nothing_of_itself() {
    let dir = tempfile::tempdir().unwrap();
    let key = |i: u32| format!("k{i:05}").into_bytes();
    for (name, params) in
        [("journaled.kut", "max_page_size=512"), ("bypass.kut", "max_page_size=512,checkpoint_bytes=64")]
    {
        let path = dir.path().join(name);
        let params = Params::parse(params).unwrap();
        let db = open(&path, OpenMode::Create, &params).unwrap();
        for i in 0..2000 {
            db.set(&key(i), format!("value {i}").as_bytes(), true).unwrap();
        }
        db.close().unwrap();
        // One byte flipped in the middle of the file: some page there fails its checksum.
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xFF;
        std::fs::write(&path, &bytes).unwrap();
        let db = open(&path, OpenMode::Write, &params).unwrap();
        let bad = (0..2000).map(key).find(|k| db.get(k).is_err()).expect("the flip damaged a page");
        let good = key(0);
        assert_eq!(db.get(&good).unwrap(), b"value 0", "{name}: the first page is intact");
        let mut failing = WriteBatch::new();
        failing.set(&good, b"changed").set(&bad, b"unreachable");
        assert!(db.write_batch(&failing).is_err(), "{name}: a batch into a damaged page fails");
        assert_eq!(db.get(&good).unwrap(), b"value 0", "{name}: nothing of the batch in memory");
        let mut fine = WriteBatch::new();
        fine.set(b"after", b"the failure");
        db.write_batch(&fine).unwrap();
        db.close().unwrap();
        let db = open(&path, OpenMode::Write, &params).unwrap();
        assert_eq!(db.get(&good).unwrap(), b"value 0", "{name}: nothing of the batch after a reopen");
        assert_eq!(db.get(b"after").unwrap(), b"the failure", "{name}: a batch after the failure stays");
        db.close().unwrap();
    }
}

/// A TreeDbm batch larger than a quarter of `checkpoint_bytes` (64 MiB by default) waits in a
/// write buffer large enough for it, journaled, when `checkpoint_bytes` is not given: the
/// journal may then grow to the buffer's budget, since it holds the buffered batches until a
/// checkpoint applies them (tree_dbm/options.rs, `buffer_policy`). Given, the batch bypasses
/// the journal as before: a checkpoint, the batch applied, another checkpoint. Either way every
/// record reads back, before and after a reopen.
#[test]
fn a_tree_batch_a_large_write_buffer_holds_is_journaled_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.kut");
    let value = vec![0x5a_u8; 1 << 20];
    let keys: Vec<Vec<u8>> = (0..18).map(|n| format!("large {n:02}").into_bytes()).collect();
    let batch: WriteBatch = keys.iter().map(|key| BatchOp::Set { key, value: &value }).collect();
    let buffer = Params::new().with("write_buffer_bytes", 80 << 20);
    let checkpoints_given = buffer.clone().with("checkpoint_bytes", 64 << 20);
    for (params, buffered) in [(buffer, true), (checkpoints_given, false)] {
        let db = open(&path, OpenMode::Truncate, &params).unwrap();
        db.write_batch(&batch).unwrap();
        let journal_bytes: u64 = db.inspect().unwrap().property("journal_bytes").unwrap().parse().unwrap();
        assert_eq!(journal_bytes > 18 << 20, buffered, "journal_bytes {journal_bytes}");
        for key in &keys {
            assert!(db.get(key).unwrap() == value, "buffered {buffered}");
        }
        db.close().unwrap();
        let db = open(&path, OpenMode::Write, &params).unwrap();
        for key in &keys {
            assert!(db.get(key).unwrap() == value, "buffered {buffered}, after the reopen");
        }
        db.close().unwrap();
    }
}

/// Batches of random overwrites and removals held by a write buffer in a file larger than its
/// memory, applied again and again (each time in key order, its pages placed one after another,
/// tree_dbm/pager.rs `Placement::Sequential`): every record reads as a BTreeMap says, across
/// reopens, and the file stays within three times its size after the first load, however
/// many times the buffer rewrote most leaves.
#[test]
fn buffered_batches_beyond_memory_keep_every_record_and_a_bounded_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buffered.kut");
    let params = Params::new()
        .with("memory_bytes", 64 << 10)
        .with("cache_bytes", 64 << 10)
        .with("write_buffer_bytes", 256 << 10)
        .with("max_page_size", 2048);
    let key = |n: u64| format!("key {:08}", n.wrapping_mul(0x9E37_79B9) % 100_000_000).into_bytes();
    let mut model = BTreeMap::new();
    let load: Vec<Op> = (0..3000u64).map(|n| (key(n), Some(vec![b'a' + (n % 26) as u8; 100]))).collect();
    let load = batch_of(&load);
    apply_to_model(&mut model, &load);
    let mut db = open(&path, OpenMode::Truncate, &params).unwrap();
    db.write_batch_durable(&load).unwrap();
    db.synchronize(true).unwrap();
    let loaded_size = db.file_size().unwrap();
    let mut seed = 0x0005_DEEC_E66D_u64;
    let mut random = move |below: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % below
    };
    for round in 0..60 {
        let ops: Vec<Op> = (0..300)
            .map(|_| {
                let k = key(random(3000));
                if random(10) == 0 {
                    (k, None)
                } else {
                    (k, Some(vec![b'a' + random(26) as u8; 80 + random(40) as usize]))
                }
            })
            .collect();
        let batch = batch_of(&ops);
        db.write_batch_durable(&batch).unwrap();
        apply_to_model(&mut model, &batch);
        let size = db.file_size().unwrap();
        assert!(size <= 3 * loaded_size, "round {round}: the file grew to {size} bytes from {loaded_size}");
        if round % 20 == 19 {
            assert_eq!(contents(db.as_ref()), model, "round {round}");
            db.close().unwrap();
            db = open(&path, OpenMode::Write, &params).unwrap();
            assert_eq!(contents(db.as_ref()), model, "round {round}, after the reopen");
        }
    }
    db.close().unwrap();
}
