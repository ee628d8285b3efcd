//! SegCacheDbm against a map: random operation sequences with random sizes, under a record
//! cap and a memory cap small enough that segments are evicted again and again. After every
//! operation both caps hold (globally and per slot), every value read is the last one written
//! for its key (an evicted key reads as absent, never as an older value), and a write that
//! returned Ok is readable at once. Then: the snapshot round trip and a damaged snapshot
//! refused, and writers on several threads evicting each other's records. With expiry (a
//! hand-moved clock): an expired record is never read, and a record that has not expired is
//! evicted only when its slot has no segment whose records have all expired.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::borrow::Cow;
use std::collections::HashMap;

use kura::{Action, Clock, Dbm, DbmExt, ErrorKind, Expiry, ManualClock, OpenMode, Params, SegCacheDbm};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Set(u16, usize, bool),
    Get(u16),
    Remove(u16),
    Append(u16, usize),
}

fn op(keys: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..keys, prop_oneof![8 => 0usize..120, 1 => 200usize..2000], any::<bool>())
            .prop_map(|(k, n, o)| Op::Set(k, n, o)),
        4 => (0..keys).prop_map(Op::Get),
        2 => (0..keys).prop_map(Op::Remove),
        1 => (0..keys, 0usize..40).prop_map(|(k, n)| Op::Append(k, n)),
    ]
}

fn key(k: u16) -> Vec<u8> {
    format!("key{k}").into_bytes()
}

/// A value that says which write made it: `n` bytes from a counter.
fn value(n: usize, serial: u32) -> Vec<u8> {
    (0..n).map(|i| (serial as usize).wrapping_mul(31).wrapping_add(i) as u8).collect()
}

fn check_caps(db: &SegCacheDbm, cap_records: u64, cap_bytes: Option<u64>) -> Result<(), TestCaseError> {
    prop_assert!(db.count().unwrap() <= cap_records);
    if let Some(cap) = cap_bytes {
        prop_assert!(db.mem_usage() <= cap, "{} accounted bytes over the cap of {cap}", db.mem_usage());
    }
    for slot in 0..db.num_slots() {
        let (records, bytes) = db.slot_usage(slot).unwrap();
        let (cap_records, cap_bytes) = db.slot_caps(slot).unwrap();
        prop_assert!(records <= cap_records && bytes <= cap_bytes);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn caps_hold_and_every_read_is_the_last_write(
        cap_records in 1u64..400,
        cap_bytes in prop_oneof![Just(None), (6_000u64..40_000).prop_map(Some)],
        num_slots in 1u64..4,
        keys in 8u16..300,
        ops in proptest::collection::vec(op(300), 1..400),
    ) {
        let mut params = Params::new().with("cap_rec_num", cap_records).with("num_slots", num_slots);
        if let Some(cap) = cap_bytes {
            params = params.with("cap_mem_bytes", cap);
        }
        let db = SegCacheDbm::new(&params).unwrap();
        // What each key last held, if anything; an evicted key may be absent, nothing else.
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut serial = 0u32;
        for op in &ops {
            serial += 1;
            match op {
                Op::Set(k, n, overwrite) => {
                    let (k, v) = (key(k % keys), value(*n, serial));
                    let present = db.get(&k).ok();
                    prop_assert!(present.is_none() || present.as_ref() == model.get(&k));
                    match db.set(&k, &v, *overwrite) {
                        Ok(()) => {
                            prop_assert!(*overwrite || present.is_none());
                            prop_assert_eq!(db.get(&k).unwrap(), v.clone(), "a write is readable at once");
                            model.insert(k, v);
                        }
                        Err(e) if e.kind() == ErrorKind::Duplicate => prop_assert!(!overwrite && present.is_some()),
                        Err(e) => {
                            prop_assert_eq!(e.kind(), ErrorKind::Limit, "{}", e.message());
                            let share = cap_bytes.unwrap_or(u64::MAX) / num_slots;
                            prop_assert!(SegCacheDbm::record_len(k.len(), v.len()) as u64 * 2 > share / 4,
                                "a record of {} bytes refused under a share of {share}", v.len());
                        }
                    }
                }
                Op::Get(k) => {
                    let k = key(k % keys);
                    if let Ok(v) = db.get(&k) {
                        prop_assert_eq!(Some(&v), model.get(&k), "a value that is not the last written");
                    }
                }
                Op::Remove(k) => {
                    let k = key(k % keys);
                    let _ = db.remove(&k);
                    model.remove(&k);
                    prop_assert!(db.get(&k).unwrap_err().is_not_found());
                }
                Op::Append(k, n) => {
                    let (k, v) = (key(k % keys), value(*n, serial));
                    let before = db.get(&k).ok();
                    let joined = match &before {
                        Some(old) => [old.as_slice(), b"+", v.as_slice()].concat(),
                        None => v.clone(),
                    };
                    match db.append(&k, &v, b"+") {
                        Ok(()) => {
                            prop_assert_eq!(db.get(&k).unwrap(), joined.clone());
                            model.insert(k, joined);
                        }
                        Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Limit),
                    }
                }
            }
            check_caps(&db, cap_records, cap_bytes)?;
        }
        // A full scan sees exactly the records present, each with its last value.
        let mut scanned = 0u64;
        for record in db.records().unwrap() {
            let (k, v) = record.unwrap();
            prop_assert_eq!(Some(&v), model.get(&k));
            scanned += 1;
        }
        prop_assert_eq!(scanned, db.count().unwrap());
    }

    /// With caps the records never reach, nothing is evicted: the cache is the map.
    #[test]
    fn under_its_caps_it_is_a_map(ops in proptest::collection::vec(op(60), 1..300)) {
        let params = Params::new().with("cap_rec_num", 1000).with("num_slots", 2).with("cap_mem_bytes", 1 << 22);
        let db = SegCacheDbm::new(&params).unwrap();
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for (serial, op) in (0u32..).zip(&ops) {
            match op {
                Op::Set(k, n, _) | Op::Append(k, n) => {
                    let (k, v) = (key(*k), value(*n, serial));
                    db.set(&k, &v, true).unwrap();
                    model.insert(k, v);
                }
                Op::Get(k) => prop_assert_eq!(db.get(&key(*k)).ok(), model.get(&key(*k)).cloned()),
                Op::Remove(k) => prop_assert_eq!(db.remove(&key(*k)).is_ok(), model.remove(&key(*k)).is_some()),
            }
        }
        prop_assert_eq!(db.evictions(), 0);
        prop_assert_eq!(db.count().unwrap(), model.len() as u64);
        for (k, v) in &model {
            prop_assert_eq!(&db.get(k).unwrap(), v);
        }
    }
}

#[derive(Debug, Clone)]
enum TtlOp {
    /// Key, value length, seconds to live (None: never expires).
    Set(u16, usize, Option<u64>),
    Get(u16),
    Remove(u16),
    /// Seconds the clock moves.
    Advance(u64),
}

fn ttl_op(keys: u16) -> impl Strategy<Value = TtlOp> {
    prop_oneof![
        8 => (0..keys, prop_oneof![8 => 0usize..120, 1 => 200usize..1500],
              prop_oneof![1 => Just(None), 3 => (0u64..30).prop_map(Some)])
            .prop_map(|(k, n, ttl)| TtlOp::Set(k, n, ttl)),
        5 => (0..keys).prop_map(TtlOp::Get),
        1 => (0..keys).prop_map(TtlOp::Remove),
        2 => (0u64..8).prop_map(TtlOp::Advance),
    ]
}

/// Sets `key` to `value` expiring at `expiry` through `process_expiring`.
fn set_expiring(db: &SegCacheDbm, key: &[u8], value: &[u8], expiry: Option<Expiry>) -> kura::Result<()> {
    db.process_expiring(key, &mut |_| (Action::Set(Cow::Borrowed(value)), expiry))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random sets with random sizes and time to live, gets, removes and clock moves, under
    /// caps that force evictions: the caps hold after every operation; a read returns the
    /// last value written for its key and only before its expiry (gets, `get_many`, the
    /// cursor, `process`); and a slot's live evictions grow during an operation only if it
    /// is left with no segment whose records have all expired (the clock stands still during
    /// an operation, so such a segment was there all along and eviction passed it over).
    #[test]
    fn expired_records_are_never_read_and_go_before_live_ones(
        cap_records in 20u64..400,
        cap_bytes in 6_000u64..40_000,
        num_slots in 1u64..4,
        keys in 8u16..300,
        ops in proptest::collection::vec(ttl_op(300), 1..400),
    ) {
        let params = Params::new()
            .with("cap_rec_num", cap_records)
            .with("num_slots", num_slots)
            .with("cap_mem_bytes", cap_bytes);
        let clock = ManualClock::new(1_700_000_000);
        let db = SegCacheDbm::new(&params).unwrap().with_clock(Clock::Manual(clock.clone()));
        // What each key last held and when it expires (None: never).
        let mut model: HashMap<Vec<u8>, (Vec<u8>, Option<u64>)> = HashMap::new();
        let readable = |model: &HashMap<Vec<u8>, (Vec<u8>, Option<u64>)>, k: &[u8], now: u64| {
            model.get(k).filter(|(_, expiry)| expiry.is_none_or(|expiry| expiry > now)).map(|(v, _)| v.clone())
        };
        for (serial, op) in (0u32..).zip(&ops) {
            let now = clock.now();
            let before: Vec<_> = (0..db.num_slots()).map(|slot| db.slot_expiry_state(slot).unwrap()).collect();
            match op {
                TtlOp::Set(k, n, ttl) => {
                    let (k, v) = (key(k % keys), value(*n, serial));
                    let expiry = ttl.map(|ttl| now + ttl);
                    match set_expiring(&db, &k, &v, expiry.and_then(Expiry::at_unix_seconds)) {
                        Ok(()) => {
                            let expected = expiry.is_none_or(|expiry| expiry > now).then(|| v.clone());
                            prop_assert_eq!(db.get(&k).ok(), expected, "a write is readable at once, until it expires");
                            model.insert(k, (v, expiry));
                        }
                        Err(e) => {
                            prop_assert_eq!(e.kind(), ErrorKind::Limit, "{}", e.message());
                            // A refused write leaves the key's previous value (a record too
                            // large for the slot is refused before anything moves), or nothing
                            // if making room for it evicted that value first.
                            match db.get(&k).ok() {
                                Some(found) => prop_assert_eq!(Some(found), readable(&model, &k, now),
                                    "a refused write changed the key's value"),
                                None => {
                                    model.remove(&k);
                                }
                            }
                        }
                    }
                }
                TtlOp::Get(k) => {
                    let k = key(k % keys);
                    let mut seen = None;
                    db.process(&k, &mut |old| {
                        seen = old.map(<[u8]>::to_vec);
                        Action::Keep
                    }).unwrap();
                    prop_assert_eq!(&db.get(&k).ok(), &seen);
                    if seen.is_some() {
                        prop_assert_eq!(&seen, &readable(&model, &k, now), "an expired or never written value");
                    }
                }
                TtlOp::Remove(k) => {
                    let k = key(k % keys);
                    let _ = db.remove(&k);
                    model.remove(&k);
                    prop_assert!(db.get(&k).unwrap_err().is_not_found());
                }
                TtlOp::Advance(seconds) => clock.advance(*seconds),
            }
            check_caps(&db, cap_records, Some(cap_bytes))?;
            for (slot, (evictions_before, _)) in before.into_iter().enumerate() {
                let (evictions, expired_segments) = db.slot_expiry_state(slot).unwrap();
                prop_assert!(evictions == evictions_before || expired_segments == 0,
                    "slot {slot} evicted live records while a segment of expired records was left");
            }
        }
        let now = clock.now();
        let all: Vec<Vec<u8>> = (0..keys).map(key).collect();
        let refs: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
        let many = db.get_many(&refs).unwrap();
        let mut readable_present = 0u64;
        for (k, got) in all.iter().zip(&many) {
            prop_assert_eq!(got, &db.get(k).ok());
            if got.is_some() {
                prop_assert_eq!(got, &readable(&model, k, now));
                readable_present += 1;
            } else if readable(&model, k, now).is_some() {
                prop_assert!(db.evictions() > 0, "a live record is missing though nothing was evicted");
            }
        }
        let mut scanned = 0u64;
        for record in db.records().unwrap() {
            let (k, v) = record.unwrap();
            prop_assert_eq!(Some(v), readable(&model, &k, now), "the cursor shows an expired record");
            scanned += 1;
        }
        prop_assert_eq!(scanned, readable_present);
    }
}

/// Records that never expire, then short-lived records that fill the cache, and expire; then
/// more records that never expire, the two sets together well within what the cache holds:
/// all of them stay. The expired records' segments make the room, where CLOCK alone would
/// compact the oldest segment first, which holds the first records, never read.
#[test]
fn expired_segments_make_room_before_live_records_go() {
    let cap_bytes = 64u64 << 10;
    let params = Params::new().with("cap_rec_num", 1_000_000).with("num_slots", 2).with("cap_mem_bytes", cap_bytes);
    let clock = ManualClock::new(1_700_000_000);
    let db = SegCacheDbm::new(&params).unwrap().with_clock(Clock::Manual(clock.clone()));
    let first: Vec<Vec<u8>> = (0..60).map(|i| format!("first{i}").into_bytes()).collect();
    for k in &first {
        db.set(k, &[1; 100], true).unwrap();
    }
    let short = Expiry::at_unix_seconds(clock.now() + 10);
    let mut written = 0;
    let has_room = |slot| db.slot_usage(slot).unwrap().1 + 2_000 < db.slot_caps(slot).unwrap().1;
    while (0..db.num_slots()).all(has_room) {
        set_expiring(&db, format!("short{written}").as_bytes(), &[2; 100], short).unwrap();
        written += 1;
    }
    assert_eq!(db.evictions(), 0);
    assert!(written > 300, "{written} short-lived records fill the cache");
    clock.advance(10);
    assert!(db.get(b"short0").unwrap_err().is_not_found(), "expired at its second");
    let later: Vec<Vec<u8>> = (0..200).map(|i| format!("later{i}").into_bytes()).collect();
    for k in &later {
        db.set(k, &[3; 100], true).unwrap();
    }
    assert_eq!(db.evictions(), 0, "a live record was evicted while expired ones were left");
    for k in &first {
        assert_eq!(db.get(k).unwrap(), [1; 100]);
    }
    for k in &later {
        assert_eq!(db.get(k).unwrap(), [3; 100]);
    }
    assert!(db.expired() > 0);
    assert!(db.mem_usage() <= cap_bytes);
    assert_eq!(db.records().unwrap().count(), first.len() + later.len(), "only the live records are scanned");
}

/// Records read often survive the eviction of their segment; records never read go first.
#[test]
fn referenced_records_outlive_unreferenced_ones() {
    let params = Params::new().with("cap_rec_num", 1_000_000).with("num_slots", 1).with("cap_mem_bytes", 64 << 10);
    let db = SegCacheDbm::new(&params).unwrap();
    let hot: Vec<Vec<u8>> = (0..50).map(|i| format!("hot{i}").into_bytes()).collect();
    for k in &hot {
        db.set(k, &[1; 100], true).unwrap();
    }
    for round in 0..5_000u32 {
        db.set(format!("cold{round}").as_bytes(), &[2; 100], true).unwrap();
        for k in &hot {
            db.get(k).unwrap();
        }
    }
    assert!(db.evictions() > 4_000, "the cold records were evicted: {}", db.evictions());
    for k in &hot {
        assert_eq!(db.get(k).unwrap(), [1; 100], "a record read after every write was evicted");
    }
    assert!(db.mem_usage() <= 64 << 10);
}

#[test]
fn snapshot_round_trip_and_damaged_snapshot_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.kums");
    let params = Params::new().with("cap_rec_num", 10_000).with("cap_mem_bytes", 1 << 20).with("num_slots", 4);
    let mut written: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    {
        let db = SegCacheDbm::open(&path, OpenMode::Create, &params).unwrap();
        for i in 0..3_000u32 {
            let (k, v) = (format!("k{}", i % 2_000).into_bytes(), value((i % 300) as usize, i));
            db.set(&k, &v, true).unwrap();
            written.insert(k, v);
        }
        for i in (0..2_000u32).step_by(7) {
            db.remove(format!("k{i}").as_bytes()).unwrap();
            written.remove(format!("k{i}").as_bytes());
        }
        db.close().unwrap();
    }
    let db = SegCacheDbm::open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
    assert_eq!(db.count().unwrap(), written.len() as u64);
    for (k, v) in &written {
        assert_eq!(&db.get(k).unwrap(), v);
    }
    assert!(db.inspect().unwrap().properties().contains(&("cap_mem_bytes".to_string(), (1u64 << 20).to_string())));
    drop(db);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let refused = SegCacheDbm::open(&path, OpenMode::ReadOnly, &Params::new()).err().unwrap();
    assert_eq!(refused.kind(), ErrorKind::BrokenData);
}

/// Four writers on shared keys under a memory cap that forces evictions all along: no read
/// ever shows a value that was not written for its key, and the caps hold at the end.
#[test]
fn writers_on_threads_evict_each_other_safely() {
    let cap_bytes = 256u64 << 10;
    let params = Params::new().with("cap_rec_num", 5_000).with("cap_mem_bytes", cap_bytes).with("num_slots", 4);
    let db = SegCacheDbm::new(&params).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let db = &db;
            scope.spawn(move || {
                let mut rng = kura::split_mix::SplitMix64::new(thread + 1);
                for _ in 0..20_000 {
                    let r = rng.next_u64();
                    let k = format!("k{}", r % 3_000);
                    // The value names its key, so that a read can tell a value of another key.
                    let v = format!("{k}:{thread}:{}", "x".repeat((r >> 32) as usize % 200));
                    match (r >> 20) % 4 {
                        0 | 1 => db.set(k.as_bytes(), v.as_bytes(), true).unwrap(),
                        2 => {
                            if let Ok(got) = db.get(k.as_bytes()) {
                                assert!(got.starts_with(format!("{k}:").as_bytes()), "a value of another key");
                            }
                        }
                        _ => {
                            let _ = db.remove(k.as_bytes());
                        }
                    }
                }
            });
        }
    });
    assert!(db.mem_usage() <= cap_bytes);
    assert!(db.count().unwrap() <= 5_000);
    assert!(db.evictions() > 0);
    let scanned = db.records().unwrap().map(|r| r.unwrap()).inspect(|(k, v)| assert!(v.starts_with(k))).count();
    assert_eq!(scanned as u64, db.count().unwrap());
}

/// A shard set of SegCacheDbm shards passes the expiry to the shard (`ShardDbm` forwards
/// `process_expiring`; the default would store the value forever): a write whose expiry has
/// passed leaves nothing, one that has not stays readable.
#[test]
fn a_shard_set_of_segcaches_honours_expiry() {
    let params = Params::new().with("num_shards", 3).with("inner_engine", "segcache").with("cap_rec_num", 1000);
    let dir = tempfile::tempdir().unwrap();
    let db = kura::open(dir.path().join("set.kums"), OpenMode::Create, &params).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    for i in 0..30 {
        let key = format!("k{i}").into_bytes();
        let (value, expiry) = if i % 2 == 0 { (b"past", now - 5) } else { (b"soon", now + 3600) };
        let expiry = Expiry::at_unix_seconds(expiry);
        db.process_expiring(&key, &mut |_| (Action::Set(Cow::Borrowed(&value[..])), expiry)).unwrap();
    }
    for i in 0..30 {
        let found = db.get(format!("k{i}").as_bytes());
        if i % 2 == 0 {
            assert!(found.unwrap_err().is_not_found(), "k{i} expired before it was written");
        } else {
            assert_eq!(found.unwrap(), b"soon");
        }
    }
}
