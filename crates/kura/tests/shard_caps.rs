//! A shard set of caches holds no more than the caps it was given, as one cache of its
//! engine would: each shard gets its share of `cap_rec_num` and `cap_mem_bytes`
//! (`Engine::shared_caps`), and `inspect` reports the set's caps as the sum of the shards'.
//!
//! Why: the set passed its parameters to every shard as given, so a set of N caches held up
//! to N times the records and the memory it was told to keep: a cache that overshoots its
//! cap, the complaint users have of caches that do.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

use std::collections::HashMap;
use std::path::Path;

use kura::{Dbm, OpenMode, Params};
use kura::{Stat, Stats};
use proptest::prelude::*;

/// The memory the shards account for (`mem_usage`, what `cap_mem_bytes` bounds), added up.
fn mem_usage(stats: &Stats) -> u64 {
    stats
        .shards
        .iter()
        .map(|shard| match shard.details.iter().find(|(name, _)| *name == "mem_usage") {
            Some((_, Stat::Number(bytes))) => *bytes,
            other => panic!("a cache shard reports its mem_usage: {other:?}"),
        })
        .sum()
}

fn open_set(base: &Path, mode: OpenMode, params: &Params) -> Box<dyn Dbm> {
    kura::registry::engine("shard").unwrap().open(base, mode, params).unwrap()
}

/// Writes `writes` (key, value length) into `db`, checking after each that the set stays
/// within `records` and `memory` and never returns a value that was not the key's last.
fn write_within(
    db: &dyn Dbm,
    writes: &[(u16, u16)],
    records: u64,
    memory: Option<u64>,
    model: &mut HashMap<Vec<u8>, Vec<u8>>,
) {
    for (step, &(k, len)) in writes.iter().enumerate() {
        let key = format!("key{k:05}").into_bytes();
        let value = vec![b'a' + (step % 26) as u8; usize::from(len)];
        db.set(&key, &value, true).unwrap();
        model.insert(key.clone(), value);
        let stats = db.inspect().unwrap();
        assert!(stats.count <= records, "step {step}: {} records held under a cap of {records}", stats.count);
        if let Some(memory) = memory {
            let used = mem_usage(&stats);
            assert!(used <= memory, "step {step}: {used} bytes accounted under a cap of {memory}");
        }
        let caps = stats.caps.unwrap();
        assert_eq!((caps.records, caps.memory), (records, memory), "the set's caps are the ones given");
        match db.get(&key) {
            Ok(got) => assert_eq!(got, model[&key], "step {step}: the key's last value"),
            Err(e) => assert!(e.is_not_found(), "{e}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_set_of_caches_stays_within_the_caps_given(
        segcache in any::<bool>(),
        shards in 1usize..6,
        records in 6u64..200,
        memory in prop::option::of(64u64 << 10..512 << 10),
        writes in prop::collection::vec((0u16..2000, 1u16..600), 1..400),
    ) {
        let engine = if segcache { "segcache" } else { "cache" };
        let mut params =
            Params::new().with("inner_engine", engine).with("num_shards", shards).with("cap_rec_num", records);
        if let Some(memory) = memory {
            params = params.with("cap_mem_bytes", memory);
        }
        let db = open_set(Path::new(""), OpenMode::Create, &params);
        write_within(db.as_ref(), &writes, records, memory, &mut HashMap::new());
    }
}

/// A set kept in files reopens by its base alone with the same caps (each shard's snapshot
/// keeps its share), and given the caps again splits them the same way.
#[test]
fn a_reopened_set_keeps_its_caps() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("set.kums");
    let params = Params::new().with("num_shards", 4).with("cap_rec_num", 101).with("cap_mem_bytes", 1 << 20);
    let writes: Vec<(u16, u16)> = (0..500).map(|i| (i * 7 % 1000, 20 + i % 90)).collect();
    let mut model = HashMap::new();
    let db = open_set(&base, OpenMode::Create, &params);
    write_within(db.as_ref(), &writes, 101, Some(1 << 20), &mut model);
    db.close().unwrap();
    for reopen_with in [Params::new(), params.clone()] {
        let db = open_set(&base, OpenMode::Write, &reopen_with);
        write_within(db.as_ref(), &writes, 101, Some(1 << 20), &mut model);
        db.close().unwrap();
    }
}

/// A small memory cap shared over shards still takes records of a few KiB: under a cap too
/// small for 16 slots of 64 KiB, a cache takes fewer slots (`slotted::SlotCount`), where
/// 64 KiB over 5 shards of 16 slots had left each slot 819 bytes and refused a 587-byte record.
#[test]
fn a_small_shared_memory_cap_takes_records_of_a_few_kib() {
    for engine in ["cache", "segcache"] {
        for shards in [1usize, 5] {
            let params = Params::new()
                .with("inner_engine", engine)
                .with("num_shards", shards)
                .with("cap_rec_num", 100)
                .with("cap_mem_bytes", 64 << 10);
            let db = open_set(Path::new(""), OpenMode::Create, &params);
            let writes: Vec<(u16, u16)> = (0..200).map(|i| (i, 587 + i * 17)).collect();
            write_within(db.as_ref(), &writes, 100, Some(64 << 10), &mut HashMap::new());
        }
    }
}

/// A cap smaller than the shard count cannot be shared: refused, naming the cap.
#[test]
fn a_cap_below_the_shard_count_is_refused() {
    let params = Params::new().with("inner_engine", "cache").with("num_shards", 4).with("cap_rec_num", 3);
    let error = match kura::registry::engine("shard").unwrap().open(Path::new(""), OpenMode::Create, &params) {
        Ok(_) => panic!("a cap of 3 over 4 shards was taken"),
        Err(error) => error,
    };
    assert!(error.message().contains("cap_rec_num=3 cannot be shared by 4 shards"), "{error}");
}

/// An import sizes a new set of caches for its lines as a whole (each shard for its share,
/// the set for all of them), from a counted file or, at the end, from a stream: every record
/// is kept, none evicted for a cap shared out twice.
#[test]
fn an_import_into_a_set_of_caches_keeps_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("records.tsv");
    let lines: String = (0..3000).map(|i| format!("key{i}\tvalue {i}\n")).collect();
    std::fs::write(&input, &lines).unwrap();
    for engine in ["cache", "segcache"] {
        let params = Params::new().with("inner_engine", engine);
        let options = kura::import::ImportOptions { shards: Some(4), ..Default::default() };
        let counted = dir.path().join(format!("counted-{engine}.kus"));
        kura::import::import_file(&counted, &input, &params, &options, &|_| {}).unwrap();
        // A stream is sized at its end; a cache needs a cap to open with, given for the set.
        let streamed = dir.path().join(format!("streamed-{engine}.kus"));
        let with_cap = params.clone().with("cap_rec_num", 100_000);
        kura::import::import_reader(&streamed, lines.as_bytes(), "stdin", &with_cap, &options, &|_| {}).unwrap();
        for base in [counted, streamed] {
            let db = open_set(&base, OpenMode::Write, &params);
            assert_eq!(db.count().unwrap(), 3000, "{engine}: {}", base.display());
            assert_eq!(db.get(b"key2999").unwrap(), b"value 2999");
        }
    }
}

/// A cache's slot count as `inspect` reports it.
fn num_slots(db: &dyn Dbm) -> u64 {
    match db.inspect().unwrap().details.iter().find(|(name, _)| *name == "num_slots") {
        Some((_, Stat::Number(slots))) => *slots,
        other => panic!("a cache reports num_slots: {other:?}"),
    }
}

/// A snapshot keeps `num_slots` only when it was given: a count derived from a small cap is
/// derived again from the caps of the reopen, a given count stays.
#[test]
fn a_derived_slot_count_follows_the_caps_of_the_reopen() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, extension) in [("cache", "kumc"), ("segcache", "kums")] {
        for given in [None, Some(4u64)] {
            let path = dir.path().join(format!("{}-slots.{extension}", given.unwrap_or(0)));
            let mut params = Params::new().with("cap_rec_num", 1000).with("cap_mem_bytes", 64 << 10);
            if let Some(slots) = given {
                params = params.with("num_slots", slots);
            }
            let registry = kura::registry::engine(engine).unwrap();
            let db = registry.open(&path, OpenMode::Create, &params).unwrap();
            assert_eq!(num_slots(db.as_ref()), given.unwrap_or(1), "{engine}: 64 KiB takes one slot");
            db.set(b"key", &[7; 3000], true).unwrap();
            db.close().unwrap();
            let larger = Params::new().with("cap_mem_bytes", 4 << 20);
            let db = registry.open(&path, OpenMode::Write, &larger).unwrap();
            assert_eq!(num_slots(db.as_ref()), given.unwrap_or(16), "{engine}, given {given:?}: after the reopen");
            assert_eq!(db.get(b"key").unwrap(), vec![7; 3000]);
            db.close().unwrap();
        }
    }
}
