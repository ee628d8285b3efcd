//! CacheDbm against a reference LRU: with one slot it must evict exactly as a plain LRU with
//! the same caps and the same per-record accounting; with many slots, both caps must hold
//! after every operation.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::collections::HashMap;

use kura::{CacheDbm, Dbm, ErrorKind, Params};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Set(u8, usize, bool),
    Get(u8),
    Remove(u8),
    Append(u8, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..40, 0usize..120, any::<bool>()).prop_map(|(k, n, o)| Op::Set(k, n, o)),
        4 => (0u8..40).prop_map(Op::Get),
        2 => (0u8..40).prop_map(Op::Remove),
        1 => (0u8..40, 0usize..30).prop_map(|(k, n)| Op::Append(k, n)),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k}").into_bytes()
}

/// A plain LRU with a record cap and a memory cap, accounted as CacheDbm documents.
struct ReferenceLru {
    /// Oldest first.
    order: Vec<(Vec<u8>, Vec<u8>)>,
    cap_records: usize,
    cap_bytes: usize,
    fixed_bytes: usize,
    evictions: u64,
}

impl ReferenceLru {
    fn mem(&self) -> usize {
        self.fixed_bytes + self.order.iter().map(|(k, v)| CacheDbm::record_cost(k.len(), v.len())).sum::<usize>()
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        self.order.iter().position(|(k, _)| k == key)
    }

    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let at = self.position(key)?;
        let record = self.order.remove(at);
        self.order.push(record.clone());
        Some(record.1)
    }

    /// Returns false when the record cannot fit at all (a Limit error).
    fn set(&mut self, key: &[u8], value: &[u8]) -> bool {
        if self.fixed_bytes + CacheDbm::record_cost(key.len(), value.len()) > self.cap_bytes {
            return false;
        }
        if let Some(at) = self.position(key) {
            self.order.remove(at);
        }
        self.order.push((key.to_vec(), value.to_vec()));
        while self.order.len() > 1 && (self.order.len() > self.cap_records || self.mem() > self.cap_bytes) {
            self.order.remove(0);
            self.evictions += 1;
        }
        true
    }

    fn remove(&mut self, key: &[u8]) -> bool {
        self.position(key).map(|at| self.order.remove(at)).is_some()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn one_slot_evicts_as_a_plain_lru(
        cap_records in 1u64..20,
        cap_bytes in prop_oneof![Just(None), (400u64..3000).prop_map(Some)],
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let dbm = CacheDbm::with_slots(cap_records, cap_bytes, 1).unwrap();
        let mut reference = ReferenceLru {
            order: Vec::new(),
            cap_records: cap_records as usize,
            cap_bytes: cap_bytes.map_or(usize::MAX, |c| c as usize),
            fixed_bytes: dbm.mem_usage() as usize,
            evictions: 0,
        };
        for op in &ops {
            match op {
                Op::Set(k, n, overwrite) => {
                    let (k, v) = (key(*k), vec![*n as u8; *n]);
                    let result = dbm.set(&k, &v, *overwrite);
                    if !overwrite && reference.position(&k).is_some() {
                        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::Duplicate);
                        reference.get(&k);
                    } else if reference.set(&k, &v) {
                        result.unwrap();
                    } else {
                        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::Limit);
                    }
                }
                Op::Get(k) => {
                    let k = key(*k);
                    match reference.get(&k) {
                        Some(v) => prop_assert_eq!(dbm.get(&k).unwrap(), v),
                        None => prop_assert!(dbm.get(&k).unwrap_err().is_not_found()),
                    }
                }
                Op::Remove(k) => {
                    let k = key(*k);
                    if reference.remove(&k) {
                        dbm.remove(&k).unwrap();
                    } else {
                        prop_assert!(dbm.remove(&k).unwrap_err().is_not_found());
                    }
                }
                Op::Append(k, n) => {
                    let (k, v) = (key(*k), vec![b'a'; *n]);
                    let joined = match reference.order.iter().find(|(rk, _)| *rk == k) {
                        Some((_, old)) => [old.as_slice(), b"+", v.as_slice()].concat(),
                        None => v.clone(),
                    };
                    let result = dbm.append(&k, &v, b"+");
                    if reference.set(&k, &joined) {
                        result.unwrap();
                    } else {
                        prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::Limit);
                    }
                }
            }
            let expected: Vec<Vec<u8>> = reference.order.iter().map(|(k, _)| k.clone()).collect();
            prop_assert_eq!(dbm.slot_keys_oldest_first(0), expected);
            prop_assert_eq!(dbm.mem_usage() as usize, reference.mem());
            prop_assert!(dbm.count().unwrap() <= cap_records);
            if let Some(cap) = cap_bytes {
                prop_assert!(dbm.mem_usage() <= cap);
            }
            prop_assert_eq!(dbm.evictions(), reference.evictions);
        }
        for (k, v) in &reference.order {
            prop_assert_eq!(&dbm.get(k).unwrap(), v);
        }
    }

    #[test]
    fn caps_hold_after_every_operation(
        cap_records in 1u64..200,
        cap_bytes in prop_oneof![Just(None), (4000u64..40000).prop_map(Some)],
        num_slots in 1usize..20,
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        let dbm = CacheDbm::with_slots(cap_records, cap_bytes, num_slots).unwrap();
        let mut ever_set: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for op in &ops {
            match op {
                Op::Set(k, n, overwrite) => {
                    let v = vec![*k ^ (*n as u8); *n];
                    if dbm.set(&key(*k), &v, *overwrite).is_ok() {
                        ever_set.insert(key(*k), v);
                    }
                }
                Op::Get(k) => {
                    // A hit returns the last value stored; a miss is fine (evicted).
                    if let Ok(v) = dbm.get(&key(*k)) {
                        prop_assert_eq!(Some(&v), ever_set.get(&key(*k)));
                    }
                }
                Op::Remove(k) => {
                    let _ = dbm.remove(&key(*k));
                    ever_set.remove(&key(*k));
                }
                Op::Append(k, n) => {
                    let v = vec![b'a'; *n];
                    if dbm.append(&key(*k), &v, b"").is_ok() {
                        ever_set.insert(key(*k), dbm.get(&key(*k)).unwrap());
                    }
                }
            }
            prop_assert!(dbm.count().unwrap() <= cap_records);
            if let Some(cap) = cap_bytes {
                prop_assert!(dbm.mem_usage() <= cap, "{} > {}", dbm.mem_usage(), cap);
            }
        }
        let properties: HashMap<String, String> = dbm.inspect().unwrap().properties().into_iter().collect();
        prop_assert_eq!(&properties["count"], &dbm.count().unwrap().to_string());
        prop_assert_eq!(&properties["cap_rec_num"], &cap_records.to_string());
        prop_assert!(properties.contains_key("evictions"));
        prop_assert!(properties.contains_key("mem_usage"));
    }
}

#[test]
fn eviction_is_counted_and_reported() {
    let dbm = CacheDbm::new(&Params::parse("cap_rec_num=100,num_slots=4").unwrap()).unwrap();
    for i in 0..1000u32 {
        dbm.set(&i.to_be_bytes(), b"value", true).unwrap();
    }
    assert_eq!(dbm.count().unwrap(), 100);
    assert_eq!(dbm.evictions(), 900);
    // Each slot keeps its 25 most recent records: the survivors are recent ones, the last
    // written among them (slots fill unevenly, so not exactly the last 100).
    let survivors: Vec<u32> = (0..1000u32).filter(|i| dbm.get(&i.to_be_bytes()).is_ok()).collect();
    assert_eq!(survivors.len(), 100);
    assert!(survivors.contains(&999));
    assert!(survivors.iter().all(|&i| i >= 700));
    let properties: HashMap<String, String> = dbm.inspect().unwrap().properties().into_iter().collect();
    assert_eq!(properties["evictions"], "900");
    assert_eq!(properties["class"], "CacheDbm");
}

/// `policy=noevict` (memcached's -M): once a cap is reached, a new key and a growing update
/// are refused with a Limit error, nothing is evicted, and room freed by a removal is used.
#[test]
fn noevict_refuses_writes_when_full_and_evicts_nothing() {
    for caps in ["cap_rec_num=40", "cap_rec_num=1000,cap_mem_bytes=64K"] {
        let params = Params::parse(&format!("{caps},num_slots=2,policy=noevict")).unwrap();
        let dbm = CacheDbm::new(&params).unwrap();
        let mut stored = Vec::new();
        for i in 0..5000u32 {
            match dbm.set(&i.to_be_bytes(), &[7u8; 100], true) {
                Ok(()) => stored.push(i),
                Err(e) => assert_eq!(e.kind(), ErrorKind::Limit, "{caps}: {e}"),
            }
        }
        assert!(stored.len() > 20 && stored.len() < 5000, "{caps}: {} stored", stored.len());
        assert_eq!(dbm.evictions(), 0, "{caps}");
        assert_eq!(dbm.count().unwrap(), stored.len() as u64, "{caps}");
        assert!(stored.iter().all(|i| dbm.get(&i.to_be_bytes()).unwrap() == [7u8; 100]), "{caps}: a record went");
        let first = stored[0].to_be_bytes();
        dbm.remove(&first).unwrap();
        let same_slot = (5000u32..100_000).find(|i| dbm.set(&i.to_be_bytes(), &[7u8; 100], true).is_ok());
        assert!(same_slot.is_some(), "{caps}: the room a removal freed is not used");
    }
    let properties: HashMap<String, String> = CacheDbm::new(&Params::parse("cap_rec_num=4,policy=noevict").unwrap())
        .unwrap()
        .inspect()
        .unwrap()
        .properties()
        .into_iter()
        .collect();
    assert_eq!(properties["policy"], "noevict");
}

#[test]
fn a_get_refreshes_recency() {
    let dbm = CacheDbm::with_slots(3, None, 1).unwrap();
    for k in [b"a", b"b", b"c"] {
        dbm.set(k, b"1", true).unwrap();
    }
    dbm.get(b"a").unwrap();
    dbm.set(b"d", b"1", true).unwrap();
    assert!(dbm.get(b"b").unwrap_err().is_not_found(), "b was the least recently used");
    assert!(dbm.get(b"a").is_ok());
}

#[test]
fn parameters_are_checked() {
    assert_eq!(CacheDbm::new(&Params::new()).err().unwrap().kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        CacheDbm::new(&Params::parse("cap_rec_num=0").unwrap()).err().unwrap().kind(),
        ErrorKind::InvalidArgument
    );
    for slots in ["num_slots=0", "num_slots=1025"] {
        let params = Params::parse(&format!("cap_rec_num=1M,{slots}")).unwrap();
        assert_eq!(CacheDbm::new(&params).err().unwrap().kind(), ErrorKind::InvalidArgument, "{slots}");
    }
    let most_slots = CacheDbm::new(&Params::parse("cap_rec_num=1M,num_slots=1024").unwrap()).unwrap();
    most_slots.set(b"k", b"v", true).unwrap();
    assert_eq!(most_slots.get_many(&[b"k".as_slice(), b"x"]).unwrap(), vec![Some(b"v".to_vec()), None]);
    let tiny_memory = Params::parse("cap_rec_num=1M,cap_mem_bytes=1K").unwrap();
    assert_eq!(CacheDbm::new(&tiny_memory).err().unwrap().kind(), ErrorKind::InvalidArgument);
    let dbm = CacheDbm::new(&Params::parse("cap_rec_num=10,cap_mem_bytes=2K").unwrap()).unwrap();
    assert_eq!(dbm.set(b"big", &[0u8; 4096], true).unwrap_err().kind(), ErrorKind::Limit);
}

#[test]
fn memory_follows_the_records_and_the_cap_holds_while_buckets_grow() {
    // A large record cap (the server derives one from its memory limit): the bucket arrays
    // start small and grow as records arrive, and the memory cap holds through every growth.
    let cap = 3_000_000u64;
    let dbm =
        CacheDbm::new(&Params::parse(&format!("cap_rec_num=500000,num_slots=2,cap_mem_bytes={cap}")).unwrap()).unwrap();
    let empty = dbm.mem_usage();
    assert!(empty < 10_000, "an empty cache accounts {empty} bytes, not its cap's bucket arrays");
    let mut rng = kura::split_mix::SplitMix64::new(17);
    let mut latest: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut grew_with_records = false;
    for step in 0..60_000u64 {
        let draw = rng.next_u64();
        let key = (draw % 40_000).to_be_bytes().to_vec();
        let value = vec![step as u8; (draw >> 32) as usize % 120];
        dbm.set(&key, &value, true).unwrap();
        latest.insert(key, value);
        let usage = dbm.mem_usage();
        assert!(usage <= cap, "step {step}: {usage} > {cap}");
        if step == 5_000 {
            grew_with_records = usage > empty + 5_000 * 4;
        }
    }
    assert!(grew_with_records);
    assert!(dbm.evictions() > 0, "the memory cap was reached");
    let mut present = 0;
    for (key, value) in &latest {
        if let Ok(stored) = dbm.get(key) {
            assert_eq!(&stored, value);
            present += 1;
        }
    }
    assert_eq!(present, dbm.count().unwrap());
}
