//! Many threads on one database, for every engine in the registry: counting threads add to
//! shared counters with `increment`, owning threads set, append and remove keys of their
//! own (and keep a model of them), and a maintenance thread rebuilds, synchronizes, counts
//! and walks every record with a cursor meanwhile. Afterwards every counter holds the exact
//! sum of what was added, every owned key holds exactly what its owner's model says (no record
//! lost or resurrected by a concurrent rebuild or cursor), and the cursor never showed a torn
//! value. Then everything is checked again after closing and reopening (the memory engines
//! from their snapshot file).

#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
#![expect(clippy::indexing_slicing, reason = "indices into small tables of known size")]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use kura::registry::{engines, Engine};
use kura::split_mix::SplitMix64;
use kura::{Dbm, DbmExt, OpenMode, Params};

const COUNTING_THREADS: u64 = 2;
const OWNING_THREADS: u64 = 2;
const OPERATIONS_PER_THREAD: u64 = 20_000;
const COUNTERS: u64 = 8;
const KEYS_PER_OWNER: u64 = 150;

fn counter_key(counter: u64) -> Vec<u8> {
    format!("counter{counter}").into_bytes()
}

fn owned_key(owner: u64, key: u64) -> Vec<u8> {
    format!("owner{owner}-key{key:03}").into_bytes()
}

/// A value of `key` is chunks `key#n` joined by commas: a torn or misplaced value shows.
fn chunk(key: &[u8], n: u64) -> Vec<u8> {
    let mut chunk = key.to_vec();
    chunk.extend_from_slice(format!("#{n}").as_bytes());
    chunk
}

fn assert_whole(key: &[u8], value: &[u8], engine: &str) {
    if key.starts_with(b"counter") {
        assert_eq!(value.len(), 8, "{engine}: a counter is not 8 bytes");
        return;
    }
    for piece in value.split(|&b| b == b',') {
        assert!(
            piece.starts_with(key) && piece.get(key.len()) == Some(&b'#'),
            "{engine}: torn value under {}: {}",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(value)
        );
    }
}

/// Adds random deltas to random counters; returns what it added to each.
fn count(db: &dyn Dbm, seed: u64) -> Vec<i64> {
    let mut rng = SplitMix64::new(seed);
    let mut added = vec![0i64; COUNTERS as usize];
    for _ in 0..OPERATIONS_PER_THREAD {
        let counter = rng.next_u64() % COUNTERS;
        let delta = (rng.next_u64() % 1000) as i64 - 400;
        db.increment(&counter_key(counter), delta, 0).unwrap();
        added[counter as usize] += delta;
    }
    added
}

/// Sets, appends and removes the keys of `owner`; returns the model of what they hold.
fn own(db: &dyn Dbm, owner: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut rng = SplitMix64::new(0x0ace + owner);
    let mut model = BTreeMap::new();
    for n in 0..OPERATIONS_PER_THREAD {
        let key = owned_key(owner, rng.next_u64() % KEYS_PER_OWNER);
        match rng.next_u64() % 10 {
            0..=4 => {
                let value = vec![chunk(&key, n); 1 + (n % 4) as usize].join(&b","[..]);
                db.set(&key, &value, true).unwrap();
                model.insert(key, value);
            }
            5..=6 => {
                let piece = chunk(&key, n);
                db.append(&key, &piece, b",").unwrap();
                let joined = match model.get(&key) {
                    Some(old) => [old.as_slice(), b",", &piece].concat(),
                    None => piece,
                };
                model.insert(key, joined);
            }
            _ => {
                let existed = model.remove(&key).is_some();
                assert_eq!(db.remove(&key).is_ok(), existed, "a removed key's presence differs from the model");
            }
        }
        if n % 64 == 0 {
            // The owner's latest writes are there at once, whatever the other threads do.
            for (key, value) in model.iter().take(4) {
                assert_eq!(&db.get(key).unwrap(), value);
            }
        }
    }
    model
}

/// Rebuilds, synchronizes, counts and walks the records until `done` (at least once).
fn maintain(db: &dyn Dbm, engine: &str, done: &AtomicBool) -> u64 {
    let mut rounds = 0;
    while rounds == 0 || !done.load(Ordering::Acquire) {
        match rounds % 3 {
            0 => db.rebuild(&Params::new()).unwrap(),
            1 => db.synchronize(false).unwrap(),
            _ => {
                db.count().unwrap();
            }
        }
        for record in db.records().unwrap() {
            let (key, value) = record.unwrap();
            assert_whole(&key, &value, engine);
        }
        rounds += 1;
    }
    rounds
}

fn check(db: &dyn Dbm, engine: &str, sums: &[i64], models: &[BTreeMap<Vec<u8>, Vec<u8>>]) {
    for (counter, sum) in sums.iter().enumerate() {
        let value = db.get(&counter_key(counter as u64)).unwrap();
        assert_eq!(
            i64::from_be_bytes(value.try_into().unwrap()),
            *sum,
            "{engine}: counter {counter} lost an increment"
        );
    }
    for (owner, model) in models.iter().enumerate() {
        for key in 0..KEYS_PER_OWNER {
            let key = owned_key(owner as u64, key);
            assert_eq!(db.get(&key).ok().as_ref(), model.get(&key), "{engine}: {}", String::from_utf8_lossy(&key));
        }
    }
    let expected = sums.len() + models.iter().map(BTreeMap::len).sum::<usize>();
    assert_eq!(db.count().unwrap(), expected as u64, "{engine}: count");
    assert_eq!(db.records().unwrap().count(), expected, "{engine}: records the cursor visits");
}

fn stress(engine: &Engine, path: &Path) {
    let keys = COUNTERS + OWNING_THREADS * KEYS_PER_OWNER;
    // Room for every key many times over, so that CacheDbm never evicts one.
    let params = engine.bench_params(keys * 8);
    let db = engine.open(path, OpenMode::Create, &params).unwrap();
    let db: &dyn Dbm = db.as_ref();
    let done = AtomicBool::new(false);
    let (sums, models) = std::thread::scope(|scope| {
        let counters: Vec<_> = (0..COUNTING_THREADS).map(|t| scope.spawn(move || count(db, 0xc0de + t))).collect();
        let owners: Vec<_> = (0..OWNING_THREADS).map(|owner| scope.spawn(move || own(db, owner))).collect();
        let maintainer = scope.spawn(|| maintain(db, engine.name, &done));
        let mut sums = vec![0i64; COUNTERS as usize];
        for counter in counters {
            for (sum, added) in sums.iter_mut().zip(counter.join().unwrap()) {
                *sum += added;
            }
        }
        let models: Vec<_> = owners.into_iter().map(|owner| owner.join().unwrap()).collect();
        done.store(true, Ordering::Release);
        let rounds = maintainer.join().unwrap();
        println!("{}: {rounds} maintenance rounds beside the writers", engine.name);
        (sums, models)
    });
    check(db, engine.name, &sums, &models);
    db.close().unwrap();
    let reopened = engine.open(path, OpenMode::ReadOnly, &params).unwrap();
    check(reopened.as_ref(), engine.name, &sums, &models);
    reopened.close().unwrap();
}

#[test]
fn every_engine_keeps_exact_sums_and_every_record_under_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    for engine in engines() {
        stress(engine, &dir.path().join(format!("threads.{}", engine.extension)));
    }
}
