//! CompactDbm's memory accounting against the process: `inspect`'s `memory_bytes` after a
//! million records must be within 10% of the resident-set growth measured in /proc/self/statm.
//!
//! Alone in its own test binary, so no other test allocates while it measures. The records
//! are generated into the batch before the first measurement and kept until the last, so
//! the growth is the map's alone; the batch goes through `write_batch`, the bulk path, so
//! each bucket is allocated once and no freed block lingers in the allocator's heap.
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

#[path = "support/resident.rs"]
mod resident;

use kura::split_mix::SplitMix64;
use kura::{CompactDbm, Dbm, Params, WriteBatch};
use resident::resident_bytes;

const RECORDS: u64 = 1_000_000;

#[test]
fn inspect_memory_bytes_is_within_ten_percent_of_the_measured_rss_growth() {
    let mut rng = SplitMix64::new(16);
    let words = ["alpha", "beta", "gamma", "delta", "session", "user", "token", "expires", "region", "tokyo"];
    let mut batch = WriteBatch::new();
    for i in 0..RECORDS {
        let mut value = format!("{{\"id\":{i},");
        for _ in 0..4 + rng.below(6) {
            value.push_str(words.get(rng.below(words.len() as u64) as usize).unwrap());
            value.push_str(&format!(":{},", rng.below(1000)));
        }
        batch.set(format!("key:{:012}", rng.next_u64() % 10_000_000_000), value);
    }
    let raw: usize = batch.byte_size();
    let before = resident_bytes();
    let dbm = CompactDbm::new(&Params::parse(&format!("bucket_comp=lz4,expected_records={RECORDS}")).unwrap()).unwrap();
    dbm.write_batch(&batch).unwrap();
    let grown = resident_bytes().saturating_sub(before);
    let properties = dbm.inspect().unwrap().properties();
    let memory: u64 = properties.iter().find(|(n, _)| n == "memory_bytes").map(|(_, v)| v.parse().unwrap()).unwrap();
    let count = dbm.count().unwrap();
    eprintln!(
        "records {count}, raw {raw} bytes, memory_bytes {memory}, RSS growth {grown}, {:.1} bytes/record",
        grown as f64 / count as f64
    );
    assert!(count > RECORDS * 99 / 100);
    let ratio = memory as f64 / grown as f64;
    assert!((0.9..=1.1).contains(&ratio), "memory_bytes {memory} vs RSS growth {grown}: ratio {ratio:.3}");
    drop(batch);
}
