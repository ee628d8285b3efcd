//! Concurrency stress of the memory engines: threads doing mixed operations on overlapping
//! keys, with values that name their writer and version, checked at the end against what
//! some serial order of the operations allows.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails loudly on the first broken expectation"
)]

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use kura::split_mix::SplitMix64;
use kura::{open, Action, Dbm, DbmExt, OpenMode, Params};

const THREADS: u32 = 4;
const OPS: u32 = 20000;
const COUNTERS: u32 = 16;
const KEYS: u32 = 48;

/// A value naming its key, writer and sequence, with the key repeated so a torn record
/// shows. Some values are long enough to live on the heap.
fn value(key: u32, thread: u32, seq: u32) -> Vec<u8> {
    let mut v = format!("{key}:{thread}:{seq}:").into_bytes();
    v.resize(if seq.is_multiple_of(3) { 60 } else { v.len() }, b'#');
    v
}

fn parse(key: u32, v: &[u8]) -> (u32, u32) {
    let text = std::str::from_utf8(v).unwrap().trim_end_matches('#');
    let parts: Vec<u32> = text.trim_end_matches(':').split(':').map(|p| p.parse().unwrap()).collect();
    assert_eq!(parts[0], key, "a value under the wrong key: torn record");
    (parts[1], parts[2])
}

fn rng(state: &mut SplitMix64) -> u32 {
    (state.next_u64() >> 32) as u32
}

/// What one thread did last to each shared key: Some(seq) for a set, None for a remove.
type LastOps = HashMap<u32, Option<u32>>;

fn worker(dbm: &dyn Dbm, thread: u32) -> (LastOps, HashMap<u32, u64>) {
    let mut state = SplitMix64::new(u64::from(thread) * 7919 + 1);
    let mut last: LastOps = HashMap::new();
    let mut bumps: HashMap<u32, u64> = HashMap::new();
    for seq in 0..OPS {
        let choice = rng(&mut state) % 10;
        let key = rng(&mut state) % KEYS;
        let name = format!("k{key}").into_bytes();
        match choice {
            0..=2 => {
                dbm.set(&name, &value(key, thread, seq), true).unwrap();
                last.insert(key, Some(seq));
            }
            3 => {
                let _ = dbm.remove(&name);
                last.insert(key, None);
            }
            4..=6 => {
                if let Ok(v) = dbm.get(&name) {
                    parse(key, &v);
                }
            }
            7 | 8 => {
                // A read-modify-write counter: its final value counts every bump.
                let counter = format!("c{}", key % COUNTERS).into_bytes();
                dbm.process(&counter, &mut |old| {
                    let n = old.map_or(0, |o| u64::from_be_bytes(o.try_into().unwrap()));
                    Action::Set(Cow::Owned((n + 1).to_be_bytes().to_vec()))
                })
                .unwrap();
                *bumps.entry(key % COUNTERS).or_default() += 1;
            }
            _ => {
                // A scan under writers: every record it yields is whole, and no key comes
                // twice (memory_scan.rs checks the rest of the cursor contract).
                if seq % 50 == 0 {
                    let mut seen = std::collections::HashSet::new();
                    for record in dbm.records().unwrap() {
                        let (k, v) = record.unwrap();
                        assert!(seen.insert(k.clone()), "a scan yielded a key twice");
                        if k.first() == Some(&b'k') {
                            let key: u32 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
                            parse(key, &v);
                        }
                    }
                }
            }
        }
    }
    (last, bumps)
}

fn stress(path_or_empty: &str, params: &str) {
    let dbm: Arc<Box<dyn Dbm>> =
        Arc::new(open(path_or_empty, OpenMode::Create, &Params::parse(params).unwrap()).unwrap());
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let dbm = Arc::clone(&dbm);
            std::thread::spawn(move || worker(dbm.as_ref().as_ref(), thread))
        })
        .collect();
    let results: Vec<(LastOps, HashMap<u32, u64>)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for key in 0..KEYS {
        let name = format!("k{key}").into_bytes();
        match dbm.get(&name) {
            Ok(v) => {
                // The serially last operation on the key was this set: it is also the last
                // operation its thread did on the key.
                let (thread, seq) = parse(key, &v);
                assert_eq!(results[thread as usize].0.get(&key), Some(&Some(seq)), "{params}: key {key}");
            }
            Err(e) => {
                assert!(e.is_not_found());
                // Absent: it was never set, or some thread's last operation on it was a remove.
                let touched = results.iter().any(|(last, _)| last.contains_key(&key));
                let removed_last = results.iter().any(|(last, _)| last.get(&key) == Some(&None));
                assert!(!touched || removed_last, "{params}: key {key}");
            }
        }
    }
    for counter in 0..COUNTERS {
        let total: u64 = results.iter().map(|(_, bumps)| bumps.get(&counter).copied().unwrap_or(0)).sum();
        let stored = dbm.get(format!("c{counter}").as_bytes());
        let stored = stored.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
        assert_eq!(stored, total, "{params}: counter {counter} lost an update");
    }
}

#[test]
fn tiny_under_threads() {
    stress("", "engine=tiny,num_buckets=16");
}

#[test]
fn baby_under_threads() {
    stress("", "engine=baby");
}

#[test]
fn cache_under_threads() {
    // Caps large enough that nothing is evicted: the same checks as the others apply.
    stress("", "engine=cache,cap_rec_num=10000,num_slots=8");
}

#[test]
fn small_cache_under_threads_keeps_its_caps() {
    let dbm = Arc::new(
        open("", OpenMode::Create, &Params::parse("engine=cache,cap_rec_num=64,cap_mem_bytes=16K").unwrap()).unwrap(),
    );
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let dbm = Arc::clone(&dbm);
            std::thread::spawn(move || {
                let mut state = SplitMix64::new(u64::from(thread) + 99);
                for seq in 0..OPS {
                    let key = rng(&mut state) % 500;
                    let name = format!("k{key}").into_bytes();
                    if rng(&mut state).is_multiple_of(2) {
                        dbm.set(&name, &value(key, thread, seq), true).unwrap();
                    } else if let Ok(v) = dbm.get(&name) {
                        parse(key, &v);
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let properties: HashMap<String, String> = dbm.inspect().unwrap().properties().into_iter().collect();
    assert!(dbm.count().unwrap() <= 64);
    assert!(properties["mem_usage"].parse::<u64>().unwrap() <= 16 * 1024);
    assert!(properties["evictions"].parse::<u64>().unwrap() > 0);
}
