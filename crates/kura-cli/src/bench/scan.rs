//! The ordered-engine phases of `kura bench` (TreeDbm, BabyDbm): a full scan through the
//! ordered cursor in either direction, and short range scans from many start keys, the
//! LevelDB-style "seek then read N" access that a hash engine cannot serve.
//!
//! Both the sequence workload (`--scan`, `--range-scan N`) and the dictionary workload
//! (`--keys-from` with the same flags) use these; only where the start keys come from differs.

use std::time::{Duration, Instant};

use kura::Dbm;

/// What a scan phase did.
pub struct Scanned {
    /// Scans for range phases; records visited for full scans.
    pub operations: u64,
    /// Records read, all scans together.
    pub records: u64,
    pub elapsed: Duration,
}

/// Visits every record with one ordered cursor, from the first key up or the last key down,
/// reading each record as the `iterate` phase does.
pub fn full_scan(db: &dyn Dbm, backward: bool) -> kura::Result<Scanned> {
    let started = Instant::now();
    let mut cursor = db.ordered_cursor()?;
    let mut visited = 0u64;
    let mut moved = if backward { cursor.last()? } else { cursor.first()? };
    while moved {
        if cursor.record()?.is_some() {
            visited += 1;
        }
        moved = if backward { cursor.previous()? } else { cursor.next()? };
    }
    drop(cursor);
    Ok(Scanned { operations: visited, records: visited, elapsed: started.elapsed() })
}

/// Writes the start key of a thread's `i`-th range scan into the buffer.
pub type StartKey<'a> = dyn Fn(usize, u64, &mut Vec<u8>) + Sync + 'a;

/// `threads` threads at once, each doing `scans_per_thread` range scans: jump to the first
/// key not less than its start key, then read up to `span` records forward (fewer at the
/// end of the database). Each thread has its own cursor.
pub fn range_scans(
    db: &dyn Dbm,
    threads: usize,
    scans_per_thread: u64,
    span: u64,
    start_key: &StartKey,
) -> kura::Result<Scanned> {
    let started = Instant::now();
    let outcome = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread_id| {
                scope.spawn(move || -> kura::Result<u64> {
                    let mut cursor = db.ordered_cursor()?;
                    let mut key = Vec::with_capacity(64);
                    let mut records = 0u64;
                    for i in 0..scans_per_thread {
                        start_key(thread_id, i, &mut key);
                        let mut moved = cursor.jump(&key)?;
                        let mut read = 0;
                        while moved && read < span {
                            if cursor.record()?.is_some() {
                                read += 1;
                            }
                            moved = cursor.next()?;
                        }
                        records += read;
                    }
                    Ok(records)
                })
            })
            .collect();
        super::join_all(workers)
    });
    let elapsed = started.elapsed();
    let records = outcome?.iter().sum();
    Ok(Scanned { operations: scans_per_thread.saturating_mul(threads as u64), records, elapsed })
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use kura::{BabyDbm, Params};

    fn filled(count: u64) -> BabyDbm {
        let db = BabyDbm::new(&Params::new()).unwrap();
        for i in 0..count {
            db.set(format!("{i:08}").as_bytes(), b"v", true).unwrap();
        }
        db
    }

    #[test]
    fn full_scans_visit_every_record_both_ways() {
        let db = filled(1000);
        assert_eq!(full_scan(&db, false).unwrap().records, 1000);
        assert_eq!(full_scan(&db, true).unwrap().records, 1000);
    }

    #[test]
    fn range_scans_read_span_records_except_at_the_end() {
        let db = filled(1000);
        let start = |thread: usize, i: u64, key: &mut Vec<u8>| {
            key.clear();
            key.extend_from_slice(format!("{:08}", thread as u64 * 500 + i * 100).as_bytes());
        };
        // Starts at 0, 100, ..., 400 and 500, ..., 900: ten full ranges of 50.
        let scanned = range_scans(&db, 2, 5, 50, &start).unwrap();
        assert_eq!(scanned.operations, 10);
        assert_eq!(scanned.records, 500);
        // The range of 150 from 900 reaches the end after 100 records.
        let scanned = range_scans(&db, 2, 5, 150, &start).unwrap();
        assert_eq!(scanned.records, 9 * 150 + 100);
    }

    #[test]
    fn hash_engines_are_refused() {
        let db = kura::TinyDbm::new(&Params::new()).unwrap();
        assert!(full_scan(&db, false).is_err());
    }
}
