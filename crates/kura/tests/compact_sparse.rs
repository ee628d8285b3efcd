//! A CompactDbm laid out for far more records than it holds costs memory for what it holds:
//! its bucket tables are taken zeroed from the allocator (an empty bucket is all zero bytes),
//! so a table page becomes resident only when a bucket on it is written. Measured in a fresh
//! process, alone in its test binary: an allocator that has freed memory before may hand out
//! reused pages, which it zeroes by writing (the table then costs what it did before).
#![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

#[path = "support/resident.rs"]
mod resident;

use kura::{CompactDbm, Dbm, Params};
use resident::resident_bytes;

#[test]
fn a_layout_for_many_more_records_than_it_holds_takes_little_memory() {
    let before = resident_bytes();
    // 2^26 buckets: a 1 GiB bucket table.
    let sparse = CompactDbm::new(&Params::parse("expected_records=67108864,bucket_records=1").unwrap()).unwrap();
    for i in 0..1000u32 {
        sparse.set(format!("key{i}").as_bytes(), b"value", true).unwrap();
    }
    let grown = resident_bytes().saturating_sub(before);
    eprintln!("1,000 records in 2^26 buckets: RSS growth {grown} bytes");
    assert!(grown < 64 << 20, "an almost empty 1 GiB bucket table made {grown} bytes resident");
    for i in 0..1000u32 {
        assert_eq!(sparse.get(format!("key{i}").as_bytes()).unwrap(), b"value");
    }
    assert_eq!(sparse.count().unwrap(), 1000);
}
