//! CacheDbm with `policy=tinylfu`: after every operation of random sequences the caps hold and
//! the cache is a subset of a HashMap model of the last value set per key (admission may
//! decline a new key, never change a value or keep a removed one); on a Zipf trace it hits
//! more often than `policy=lru`; memory-cap evictions across both segments; concurrent
//! requests; parameters, `inspect` and the snapshot file.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::HashMap;

use kura::split_mix::SplitMix64;
use kura::{open, CacheDbm, Dbm, DbmExt, ErrorKind, OpenMode, Params};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Set(u8, usize, bool),
    Get(u8),
    Remove(u8),
    Append(u8, usize),
    Increment(u8, i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..60, 0usize..120, any::<bool>()).prop_map(|(k, n, o)| Op::Set(k, n, o)),
        5 => (0u8..60).prop_map(Op::Get),
        1 => (0u8..60).prop_map(Op::Remove),
        1 => (0u8..60, 0usize..30).prop_map(|(k, n)| Op::Append(k, n)),
        1 => (0u8..60, -3i64..4).prop_map(|(k, d)| Op::Increment(k, d)),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k}").into_bytes()
}

fn tinylfu(params: &str) -> CacheDbm {
    CacheDbm::new(&Params::parse(&format!("policy=tinylfu,{params}")).unwrap()).unwrap()
}

/// The records of the cache, read with a cursor (which changes neither recency nor the sketch).
fn content(dbm: &CacheDbm) -> HashMap<Vec<u8>, Vec<u8>> {
    dbm.records().unwrap().map(|r| r.unwrap()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn caps_hold_and_values_are_the_last_set(
        cap_records in 1u64..40,
        cap_bytes in prop_oneof![Just(None), (800u64..8000).prop_map(Some)],
        num_slots in 1usize..5,
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let mem = cap_bytes.map_or(String::new(), |c| format!(",cap_mem_bytes={c}"));
        let params = Params::parse(&format!("policy=tinylfu,cap_rec_num={cap_records},num_slots={num_slots}{mem}"));
        let dbm = CacheDbm::new(&params.unwrap());
        // A memory share too small for the bucket array and the sketch is refused at opening.
        prop_assume!(dbm.as_ref().err().is_none_or(|e| e.kind() != ErrorKind::InvalidArgument));
        let dbm = dbm.unwrap();
        // The last value each key was given by a write that returned Ok.
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut cached = content(&dbm);
        for op in &ops {
            match op {
                Op::Set(k, n, overwrite) => {
                    let (k, v) = (key(*k), vec![*k ^ (*n as u8); *n]);
                    match dbm.set(&k, &v, *overwrite) {
                        Ok(()) => {
                            prop_assert!(*overwrite || !cached.contains_key(&k));
                            model.insert(k, v);
                        }
                        Err(e) if e.kind() == ErrorKind::Duplicate => {
                            prop_assert!(!overwrite && cached.contains_key(&k));
                        }
                        Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Limit),
                    }
                }
                Op::Get(k) => {
                    let k = key(*k);
                    match dbm.get(&k) {
                        Ok(v) => prop_assert_eq!(Some(&v), cached.get(&k)),
                        Err(e) => prop_assert!(e.is_not_found() && !cached.contains_key(&k)),
                    }
                }
                Op::Remove(k) => {
                    let k = key(*k);
                    let result = dbm.remove(&k);
                    prop_assert_eq!(result.is_ok(), cached.contains_key(&k));
                    model.remove(&k);
                }
                Op::Append(k, n) => {
                    let (k, v) = (key(*k), vec![b'a'; *n]);
                    let joined = match cached.get(&k) {
                        Some(old) => [old.as_slice(), b"+", v.as_slice()].concat(),
                        None => v.clone(),
                    };
                    match dbm.append(&k, &v, b"+") {
                        Ok(()) => {
                            model.insert(k, joined);
                        }
                        Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Limit),
                    }
                }
                Op::Increment(k, delta) => {
                    let k = key(*k);
                    // Only on keys holding a counter (or absent), so the value parses.
                    let start = match cached.get(&k) {
                        Some(old) if old.len() == 8 => i64::from_be_bytes(old[..].try_into().unwrap()),
                        Some(_) => continue,
                        None => 0,
                    };
                    let value = dbm.increment(&k, *delta, 0).unwrap();
                    prop_assert_eq!(value, start + delta);
                    model.insert(k, value.to_be_bytes().to_vec());
                }
            }
            cached = content(&dbm);
            prop_assert_eq!(cached.len() as u64, dbm.count().unwrap());
            prop_assert!(dbm.count().unwrap() <= cap_records);
            if let Some(cap) = cap_bytes {
                prop_assert!(dbm.mem_usage() <= cap, "{} > {}", dbm.mem_usage(), cap);
            }
            for (k, v) in &cached {
                prop_assert_eq!(Some(v), model.get(k), "a cached record differs from the last value set");
            }
        }
        let properties: HashMap<String, String> = dbm.inspect().unwrap().properties().into_iter().collect();
        prop_assert_eq!(&properties["policy"], "tinylfu");
        prop_assert_eq!(&properties["rejections"], &dbm.rejections().to_string());
        prop_assert_eq!(&properties["count"], &dbm.count().unwrap().to_string());
    }
}

/// `len` keys drawn from `universe` by Zipf's law with exponent `s` (inverse of the
/// cumulative distribution), each rank mapped to a scattered key.
fn zipf_trace(universe: usize, s: f64, len: usize, seed: u64) -> Vec<u64> {
    let mut cumulative = Vec::with_capacity(universe);
    let mut sum = 0.0;
    for rank in 1..=universe {
        sum += (rank as f64).powf(-s);
        cumulative.push(sum);
    }
    let mut rng = SplitMix64::new(seed);
    (0..len)
        .map(|_| {
            let u = rng.unit() * sum;
            let rank = cumulative.partition_point(|&c| c <= u).min(universe - 1) as u64;
            rank.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        })
        .collect()
}

/// The share of requests after the first `warmup` that hit, with the cache-aside pattern.
fn hit_ratio(dbm: &CacheDbm, trace: &[u64], warmup: usize) -> f64 {
    let mut hits = 0;
    for (i, k) in trace.iter().enumerate() {
        let k = k.to_be_bytes();
        if dbm.get(&k).is_ok() {
            hits += usize::from(i >= warmup);
        } else {
            dbm.set(&k, b"value", true).unwrap();
        }
    }
    hits as f64 / (trace.len() - warmup) as f64
}

#[test]
fn tinylfu_hits_more_than_lru_under_zipf_keys() {
    // 3,000 entries, keys drawn from 50x as many.
    let trace = zipf_trace(150_000, 0.99, 400_000, 42);
    let params = "cap_rec_num=3000,num_slots=4";
    let lru = hit_ratio(&CacheDbm::new(&Params::parse(params).unwrap()).unwrap(), &trace, 100_000);
    let tiny = tinylfu(params);
    let tinylfu = hit_ratio(&tiny, &trace, 100_000);
    assert!(tinylfu > lru + 0.02, "tinylfu {tinylfu:.4} vs lru {lru:.4}");
    assert!(tiny.rejections() > 0);
    assert_eq!(tiny.count().unwrap(), 3000);
}

#[test]
fn a_declined_key_is_ok_and_absent() {
    let dbm = tinylfu("cap_rec_num=2,num_slots=1");
    // Two popular keys fill the slot.
    for _ in 0..3 {
        for k in [b"a", b"b"] {
            if dbm.get(k).is_err() {
                dbm.set(k, b"1", true).unwrap();
            }
        }
    }
    assert_eq!(dbm.count().unwrap(), 2);
    // A key asked for once loses against them: Ok, not stored, counted.
    assert!(dbm.get(b"c").unwrap_err().is_not_found());
    dbm.set(b"c", b"1", true).unwrap();
    assert!(dbm.get(b"c").unwrap_err().is_not_found());
    assert_eq!(dbm.rejections(), 1);
    assert_eq!(dbm.evictions(), 0);
    // Updates of present keys are always stored.
    dbm.set(b"a", b"2", true).unwrap();
    assert_eq!(dbm.get(b"a").unwrap(), b"2");
    // Asked for often enough, the key gets in.
    for _ in 0..10 {
        if dbm.get(b"c").is_err() {
            dbm.set(b"c", b"1", true).unwrap();
        }
    }
    assert_eq!(dbm.get(b"c").unwrap(), b"1");
    assert_eq!(dbm.evictions(), 1);
}

#[test]
fn the_policy_is_checked_and_reported() {
    let err = CacheDbm::new(&Params::parse("cap_rec_num=10,policy=lfu").unwrap()).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("tinylfu"), "{err}");
    let lru = CacheDbm::new(&Params::parse("cap_rec_num=10").unwrap()).unwrap();
    let properties: HashMap<String, String> = lru.inspect().unwrap().properties().into_iter().collect();
    assert_eq!((properties["policy"].as_str(), properties["rejections"].as_str()), ("lru", "0"));
    assert_eq!(lru.policy(), "lru");
    assert_eq!(tinylfu("cap_rec_num=10").policy(), "tinylfu");
    // The sketch counts against cap_mem_bytes: a share too small for it fails to open.
    let too_small = Params::parse("cap_rec_num=100000,cap_mem_bytes=500000,policy=tinylfu").unwrap();
    assert!(CacheDbm::new(&Params::parse("cap_rec_num=100000,cap_mem_bytes=500000").unwrap()).is_ok());
    assert_eq!(CacheDbm::new(&too_small).err().unwrap().kind(), ErrorKind::InvalidArgument);
    let dbm = tinylfu("cap_rec_num=1000,cap_mem_bytes=100000");
    assert!(dbm.mem_usage() > CacheDbm::new(&Params::parse("cap_rec_num=1000").unwrap()).unwrap().mem_usage());
}

#[test]
fn the_snapshot_file_keeps_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.kumc");
    let params = Params::parse("cap_rec_num=500,policy=tinylfu").unwrap();
    let dbm = open(&path, OpenMode::Create, &params).unwrap();
    for i in 0..2000u32 {
        // Each key twice, so that later ones win admission against earlier ones sometimes.
        for _ in 0..(i % 3) {
            if dbm.get(&i.to_be_bytes()).is_err() {
                dbm.set(&i.to_be_bytes(), &i.to_le_bytes(), true).unwrap();
            }
        }
    }
    let before: HashMap<Vec<u8>, Vec<u8>> = dbm.records().unwrap().map(|r| r.unwrap()).collect();
    assert!(before.len() <= 500 && before.len() > 400);
    dbm.close().unwrap();
    let reopened = open(&path, OpenMode::ReadOnly, &params).unwrap();
    let after: HashMap<Vec<u8>, Vec<u8>> = reopened.records().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(after, before);
    assert!(reopened.inspect().unwrap().properties().contains(&("policy".to_string(), "tinylfu".to_string())));
}

#[test]
fn a_large_admitted_record_evicts_from_both_segments() {
    // One slot whose memory share holds the fixed part and about four small records.
    let probe = tinylfu("cap_rec_num=10,num_slots=1,cap_mem_bytes=1000000");
    let fixed = probe.mem_usage();
    let small = CacheDbm::record_cost(2, 1) + 8; // + the protected list's links
    let cap = fixed + 4 * small as u64 + 30;
    let dbm = tinylfu(&format!("cap_rec_num=10,num_slots=1,cap_mem_bytes={cap}"));
    assert_eq!(dbm.mem_usage(), fixed);
    let request = |k: &[u8], value: &[u8]| {
        if dbm.get(k).is_err() {
            dbm.set(k, value, true).unwrap();
        }
    };
    for _ in 0..3 {
        for k in [b"k1", b"k2", b"k3", b"k4"] {
            request(k, b"v");
        }
    }
    // Hit twice each: most are in the protected segment now.
    assert_eq!(dbm.count().unwrap(), 4);
    let big = vec![7u8; 3 * small];
    for _ in 0..8 {
        request(b"bb", &big);
    }
    assert_eq!(dbm.get(b"bb").unwrap(), big);
    assert!(dbm.mem_usage() <= cap, "{} > {cap}", dbm.mem_usage());
    assert!(dbm.count().unwrap() <= 2);
}

#[test]
fn caps_hold_under_concurrent_requests() {
    let dbm = tinylfu("cap_rec_num=300,cap_mem_bytes=60000,num_slots=4");
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let dbm = &dbm;
            scope.spawn(move || {
                let mut rng = SplitMix64::new(thread);
                for _ in 0..20_000 {
                    let draw = rng.next_u64();
                    // Skewed keys: small ones far more often.
                    let k = (draw >> 40) % ((draw >> 20) % 2000 + 1);
                    let key = k.to_be_bytes();
                    match draw % 10 {
                        0 => {
                            let _ = dbm.remove(&key);
                        }
                        1 => dbm.set(&key, &vec![k as u8; (draw % 64) as usize], true).unwrap(),
                        _ => {
                            if let Ok(value) = dbm.get(&key) {
                                assert!(value.iter().all(|&b| b == k as u8));
                            } else {
                                dbm.set(&key, &[k as u8; 8], true).unwrap();
                            }
                        }
                    }
                }
            });
        }
    });
    assert!(dbm.count().unwrap() <= 300);
    assert!(dbm.mem_usage() <= 60000);
    assert!(dbm.rejections() > 0 && dbm.evictions() > 0);
    for record in dbm.records().unwrap() {
        let (key, value) = record.unwrap();
        let k = u64::from_be_bytes(key[..].try_into().unwrap());
        assert!(value.iter().all(|&b| b == k as u8));
    }
}
