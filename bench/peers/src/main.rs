//! kura-peers: Kura's TreeDbm and HashDbm against LMDB, RocksDB, fjall and redb, through the
//! phases of redb's `lmdb_benchmark` (cberner/redb: crates/redb-bench-compare/benches/
//! lmdb_benchmark.rs, its phases in crates/redb-bench/src/lib.rs): its phases, not its code,
//! without its retain, extract_if, pop and sorted-insert phases, with 2 and 4 reader threads
//! (the machine's cores) where it runs 4 to 32, and one run of each read phase per process
//! where it takes the median of 3. One store per process (bench/peers.py runs each in its own
//! and keeps the best of its rounds), so that no store inherits another's page cache or heap:
//!
//! ```text
//! kura-peers --store {kura-tree,kura-hash,lmdb,rocksdb,fjall,redb} --records N --dir DIR
//!            [--cache-bytes B] [--bulk-batch K] [--reads R] [--removals D]
//! ```
//!
//! Every phase prints one JSON line,
//! `{"store":..,"phase":..,"seconds":..,"ops":..,"bytes":..,"cpu_seconds":..,"read_bytes":..,"write_bytes":..}`
//! (the last two what the kernel counted for the process against the disk during the phase,
//! `/proc/self/io`; `null` where a field does not apply; read phases add the `checksum` of
//! what they read, which must be the same for every store). Every read phase checks what it
//! read: the random reads find every key with the value written, the range reads return
//! exactly the records that exist at and after each start key, `len()` counts every record;
//! a store that fails a check stops the run with exit status 1.
//!
//! Phases, in order (the records are `records::record(i)`, i counting up through the writes):
//! bulk load (N records, one durable commit, or commits of K with `--bulk-batch`, then the
//! store's `settle`: TreeDbm applies the write buffer the load filled), individual
//! writes (1,000 durable commits of one record), batch writes (100 durable commits of 1,000),
//! nosync writes (50,000 commits of one record, not synced; TreeDbm then rewrites the same
//! records through its other non-durable path, a one-record `write_batch`), len(), random reads (the N bulk
//! records, or with `--reads R` a slice of R of them, each read phase its own slice, one
//! thread), random range reads (min(500,000, N) ranges of 10 from bulk keys),
//! random reads on 2 and 4 threads, close + reopen, random reads after reopen (a
//! log-structured store now reads its tables, not its memtables), removals (half of all
//! records, or D with `--removals`, durable commits of 100,000), uncompacted size, compaction, compacted size (sizes:
//! the bytes of every file in the store's directory, measured after closing it), random
//! reads after compaction (reopened; the records the removals left, at most R).

mod fjall_store;
mod kura_store;
mod lmdb_store;
mod records;
mod redb_store;
mod rocksdb_store;
mod store;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use records::{Key, Op};
use store::{Result, Store};

const INDIVIDUAL_WRITES: u64 = 1_000;
const BATCH_WRITES: u64 = 100;
const BATCH_SIZE: u64 = 1_000;
const NOSYNC_WRITES: u64 = 50_000;
const MAX_SCANS: u64 = 500_000;
const SCAN_LEN: usize = 10;
const REMOVE_BATCH: u64 = 100_000;
const DEFAULT_CACHE_BYTES: u64 = 4 << 30;

const STORES: &[&str] = &["kura-tree", "kura-hash", "lmdb", "rocksdb", "fjall", "redb"];

struct Args {
    store: String,
    records: u64,
    dir: PathBuf,
    cache_bytes: u64,
    /// Records per commit of the bulk load; 0: all in one.
    bulk_batch: u64,
    /// Bulk records each read phase reads (the first ones written, random keys): all of them
    /// unless told; fewer where reads wait for the disk (a run under a memory limit).
    reads: u64,
    /// Records removed in the removals phase: half of all unless told (fewer where each
    /// removal waits for the disk).
    removals: u64,
    /// The directory already holds this store after its bulk load (a copy kept from an
    /// earlier run): open it and start at the phase after the bulk load. For investigating
    /// one phase of a run that takes minutes to load; bench/peers.py never passes it.
    skip_bulk: bool,
    /// With `--skip-bulk`: skip the write phases too (individual, batch and nosync writes), so
    /// that the store holds the bulk records only and a kept copy serves run after run of the
    /// read phases unchanged. For investigating reads; bench/peers.py never passes it.
    skip_writes: bool,
    /// Stop after the phase of this name (the JSON lines' `phase`), e.g. "batch writes".
    stop_after: Option<String>,
    /// The LSMs' memtable size (RocksDB `write_buffer_size`, fjall `max_memtable_size`); 0:
    /// their default (64 MiB each). bench/peers.py sets it under a memory limit, where two
    /// default memtables alone would take the whole of 128 MiB.
    memtable_bytes: u64,
}

const USAGE: &str = "usage: kura-peers --store {kura-tree,kura-hash,lmdb,rocksdb,fjall,redb} --records N --dir DIR \
                     [--cache-bytes B] [--bulk-batch K] [--reads R] [--removals D] \
                     [--skip-bulk 1 [--skip-writes 1]] [--stop-after PHASE] [--memtable-bytes M]";

fn parse_args() -> Result<Args> {
    let mut args = Args {
        store: String::new(),
        records: 0,
        dir: PathBuf::new(),
        cache_bytes: DEFAULT_CACHE_BYTES,
        bulk_batch: 0,
        reads: 0,
        removals: 0,
        skip_bulk: false,
        skip_writes: false,
        stop_after: None,
        memtable_bytes: 0,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let value = given.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number = || value.parse::<u64>().map_err(|_| format!("{flag}: {value:?} is not a number"));
        match flag.as_str() {
            "--store" => args.store = value.clone(),
            "--records" => args.records = number()?,
            "--dir" => args.dir = PathBuf::from(&value),
            "--cache-bytes" => args.cache_bytes = number()?,
            "--bulk-batch" => args.bulk_batch = number()?,
            "--reads" => args.reads = number()?,
            "--removals" => args.removals = number()?,
            "--skip-bulk" => args.skip_bulk = number()? != 0,
            "--skip-writes" => args.skip_writes = number()? != 0,
            "--stop-after" => args.stop_after = Some(value.clone()),
            "--memtable-bytes" => args.memtable_bytes = number()?,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    if !STORES.contains(&args.store.as_str()) || args.records == 0 || args.dir.as_os_str().is_empty() {
        return Err(USAGE.to_string());
    }
    if args.skip_writes && !args.skip_bulk {
        return Err("--skip-writes needs --skip-bulk 1 (a kept copy of the bulk load)".into());
    }
    if args.reads == 0 || args.reads > args.records {
        args.reads = args.records;
    }
    Ok(args)
}

fn open(args: &Args) -> Result<Box<dyn Store>> {
    let dir = &args.dir;
    Ok(match args.store.as_str() {
        "kura-tree" => {
            Box::new(kura_store::KuraStore::open(dir, kura_store::Engine::Tree, args.records, args.cache_bytes)?)
        }
        "kura-hash" => {
            Box::new(kura_store::KuraStore::open(dir, kura_store::Engine::Hash, args.records, args.cache_bytes)?)
        }
        "lmdb" => Box::new(lmdb_store::LmdbStore::open(dir)?),
        "rocksdb" => Box::new(rocksdb_store::RocksdbStore::open(dir, args.cache_bytes, args.memtable_bytes)?),
        "fjall" => Box::new(fjall_store::FjallStore::open(dir, args.cache_bytes, args.memtable_bytes)?),
        "redb" => Box::new(redb_store::RedbStore::open(dir, args.cache_bytes)?),
        other => return Err(format!("unknown store {other}")),
    })
}

/// One phase's JSON line.
#[derive(Default)]
struct Line {
    seconds: Option<f64>,
    ops: Option<u64>,
    bytes: Option<u64>,
    checksum: Option<u64>,
}

/// The phase after which the run stops (`--stop-after`), set once by `main`.
static STOP_AFTER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

fn emit(store: &str, phase: &str, line: Line) {
    fn field<T: std::fmt::Display>(value: Option<T>) -> String {
        value.map_or_else(|| "null".to_string(), |v| v.to_string())
    }
    let mut text = format!(
        "{{\"store\":\"{store}\",\"phase\":\"{phase}\",\"seconds\":{},\"ops\":{},\"bytes\":{},\"cpu_seconds\":{:.6}",
        field(line.seconds.map(|s| format!("{s:.6}"))),
        field(line.ops),
        field(line.bytes),
        cpu_seconds_since_last_line(),
    );
    if let Some(DiskBytes { read, written }) = disk_bytes_since_last_line() {
        text.push_str(&format!(",\"read_bytes\":{read},\"write_bytes\":{written}"));
    }
    if let Some(checksum) = line.checksum {
        text.push_str(&format!(",\"checksum\":{checksum}"));
    }
    text.push('}');
    let mut out = std::io::stdout().lock();
    // A closed stdout (the driver gone) ends the run at the next phase's write anyway.
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
    if STOP_AFTER.get().and_then(Option::as_deref) == Some(phase) {
        // Left without closing the store, as a killed process would leave it.
        std::process::exit(0);
    }
}

/// The process's CPU time (every thread, user and system) since the previous call: beside a
/// phase's wall time, what the phase cost in work, which a machine shared with other work
/// inflates far less than the wall time (what it does inflate: the caches' contention).
fn cpu_seconds_since_last_line() -> f64 {
    static LAST: std::sync::Mutex<f64> = std::sync::Mutex::new(0.0);
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `now` is, and reads nothing else.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    let seconds = if status == 0 { now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9 } else { 0.0 };
    let mut last = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let spent = seconds - *last;
    *last = seconds;
    spent
}

/// Bytes the process had the kernel read from the disk and write to it (`/proc/self/io`).
#[derive(Clone, Copy, Default)]
struct DiskBytes {
    read: u64,
    written: u64,
}

/// The disk bytes since the previous call, every thread of the process included (an LSM's
/// flushes and compactions): `read_bytes`, which counts the reads the process caused (its
/// faults and read-ahead included, the page cache's hits not), and `write_bytes`, which counts
/// the bytes it dirtied, whoever writes them back (less `cancelled_write_bytes`, dirtied bytes
/// truncated away before their write). What a phase moved to and from the device, beside its
/// time: the floor of a write path is its bytes at the disk's sequential rates. None where the
/// kernel keeps no such counts.
fn disk_bytes_since_last_line() -> Option<DiskBytes> {
    static LAST: std::sync::Mutex<DiskBytes> = std::sync::Mutex::new(DiskBytes { read: 0, written: 0 });
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| {
        text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<u64>().ok())
    };
    let now = DiskBytes {
        read: field("read_bytes")?,
        written: field("write_bytes")?.saturating_sub(field("cancelled_write_bytes").unwrap_or(0)),
    };
    let mut last = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let spent =
        DiskBytes { read: now.read.saturating_sub(last.read), written: now.written.saturating_sub(last.written) };
    *last = now;
    Some(spent)
}

/// Seconds `work` took, and what it returned.
fn timed<T>(work: impl FnOnce() -> Result<T>) -> Result<(f64, T)> {
    let start = Instant::now();
    let value = work()?;
    Ok((start.elapsed().as_secs_f64(), value))
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let meta = entry.metadata().map_err(|e| format!("{}: {e}", entry.path().display()))?;
        total += if meta.is_dir() { dir_bytes(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}

/// Found keys and the checksum of their values.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
struct Tally {
    found: u64,
    checksum: u64,
}

impl Tally {
    fn add(&mut self, value: &[u8]) {
        self.found += 1;
        self.checksum = self.checksum.wrapping_add(records::checksum(value));
    }

    fn merge(self, other: Tally) -> Tally {
        Tally { found: self.found + other.found, checksum: self.checksum.wrapping_add(other.checksum) }
    }
}

/// Reads the keys of records `first..end`.
fn read_keys(store: &dyn Store, first: u64, end: u64) -> Result<Tally> {
    let mut tally = Tally::default();
    store.get_each(&mut (first..end).map(records::key), &mut |value| {
        if let Some(value) = value {
            tally.add(value);
        }
    })?;
    Ok(tally)
}

/// Reads the `n` bulk records on `threads` threads, each its own share of them.
fn read_phase(store: &dyn Store, keys: std::ops::Range<u64>, threads: u64) -> Result<(f64, Tally)> {
    let (first, n) = (keys.start, keys.end - keys.start);
    timed(|| {
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|t| scope.spawn(move || read_keys(store, first + n * t / threads, first + n * (t + 1) / threads)))
                .collect();
            let mut total = Tally::default();
            for worker in workers {
                total = total.merge(worker.join().map_err(|_| "a reader thread panicked".to_string())??);
            }
            Ok(total)
        })
    })
}

fn check_reads(phase: &str, got: Tally, expected: Tally) -> Result<()> {
    if got != expected {
        return Err(format!(
            "{phase}: found {} keys with checksum {}, expected {} keys with checksum {}",
            got.found, got.checksum, expected.found, expected.checksum
        ));
    }
    Ok(())
}

/// Records in range reads of `SCAN_LEN` from each of `starts`, when the store holds the keys
/// of records `0..total`: `SCAN_LEN` a range, except from a start among the `SCAN_LEN - 1`
/// largest keys, where the range runs out of keys.
fn expected_range_records(starts: impl Iterator<Item = Key>, total: u64) -> u64 {
    let mut largest: Vec<Key> = Vec::with_capacity(SCAN_LEN + 1);
    for key in (0..total).map(records::key) {
        if largest.len() < SCAN_LEN || largest.first().is_some_and(|smallest| key > *smallest) {
            let at = largest.partition_point(|k| *k < key);
            largest.insert(at, key);
            if largest.len() > SCAN_LEN {
                largest.remove(0);
            }
        }
    }
    // A start above the tenth largest key (or any start, with fewer keys than a range) sees
    // only the largest keys at or after it; any other start has a whole range after it.
    starts
        .map(|start| match largest.first() {
            Some(tenth) if largest.len() < SCAN_LEN || start > *tenth => {
                largest.iter().filter(|k| **k >= start).count() as u64
            }
            _ => SCAN_LEN as u64,
        })
        .sum()
}

fn run(args: &Args) -> Result<()> {
    std::fs::create_dir_all(&args.dir).map_err(|e| format!("{}: {e}", args.dir.display()))?;
    let name = args.store.as_str();
    let n = args.records;
    let mut store = open(args)?;

    let bulk_batch = if args.bulk_batch == 0 { n } else { args.bulk_batch };
    let (seconds, ()) = timed(|| {
        let mut first = if args.skip_bulk { n } else { 0 };
        while first < n {
            let end = (first + bulk_batch).min(n);
            store.write(&mut (first..end).map(|i| Op::Set(records::record(i))), true)?;
            first = end;
        }
        if !args.skip_bulk {
            store.settle()?;
        }
        Ok(())
    })?;
    emit(name, "bulk load", Line { seconds: Some(seconds), ops: Some(n), ..Line::default() });
    let mut next = n;

    if !args.skip_writes {
        let (seconds, ()) = timed(|| {
            for i in next..next + INDIVIDUAL_WRITES {
                store.write(&mut std::iter::once(Op::Set(records::record(i))), true)?;
            }
            Ok(())
        })?;
        next += INDIVIDUAL_WRITES;
        emit(
            name,
            "individual writes",
            Line { seconds: Some(seconds), ops: Some(INDIVIDUAL_WRITES), ..Line::default() },
        );

        let (seconds, ()) = timed(|| {
            for batch in 0..BATCH_WRITES {
                let first = next + batch * BATCH_SIZE;
                store.write(&mut (first..first + BATCH_SIZE).map(|i| Op::Set(records::record(i))), true)?;
            }
            Ok(())
        })?;
        next += BATCH_WRITES * BATCH_SIZE;
        emit(
            name,
            "batch writes",
            Line { seconds: Some(seconds), ops: Some(BATCH_WRITES * BATCH_SIZE), ..Line::default() },
        );

        let nosync = next..next + NOSYNC_WRITES;
        let (seconds, ()) = timed(|| {
            for i in nosync.clone() {
                store.put_nosync(&records::record(i))?;
            }
            Ok(())
        })?;
        next += NOSYNC_WRITES;
        emit(name, "nosync writes", Line { seconds: Some(seconds), ops: Some(NOSYNC_WRITES), ..Line::default() });
        if let Some(phase) = store.alt_nosync_name() {
            let (seconds, ()) = timed(|| {
                for i in nosync.clone() {
                    store.alt_put_nosync(&records::record(i))?;
                }
                Ok(())
            })?;
            emit(name, phase, Line { seconds: Some(seconds), ops: Some(NOSYNC_WRITES), ..Line::default() });
        }
    }
    let total = next;

    let (seconds, len) = timed(|| store.len())?;
    if len != total {
        return Err(format!("len() is {len}, expected {total}"));
    }
    emit(name, "len()", Line { seconds: Some(seconds), ops: Some(1), ..Line::default() });

    // What the reads must find: every bulk record read, with the value written. With fewer
    // reads than records, each read phase reads its own slice of the bulk records, so that
    // no phase finds the pages an earlier one brought into memory.
    let reads = args.reads;
    let slices = if reads < n { n / reads } else { 1 };
    let mut slice = 0;
    let mut next_slice = || {
        let first = reads * (slice % slices);
        slice += 1;
        first..first + reads
    };
    let expected_of = |keys: std::ops::Range<u64>| {
        let mut expected = Tally::default();
        for i in keys {
            expected.add(&records::record(i).value);
        }
        expected
    };

    let keys = next_slice();
    let expected = expected_of(keys.clone());
    let (seconds, got) = read_phase(store.as_ref(), keys, 1)?;
    check_reads("random reads", got, expected)?;
    emit(
        name,
        "random reads",
        Line { seconds: Some(seconds), ops: Some(reads), checksum: Some(got.checksum), ..Line::default() },
    );

    let scans = reads.min(MAX_SCANS);
    let range_first = next_slice().start;
    let starts = range_first..range_first + scans;
    let expected_records = expected_range_records(starts.clone().map(records::key), total);
    let mut ranged = Tally::default();
    let (seconds, ordered) = timed(|| {
        store.range_each(&mut starts.clone().map(records::key), SCAN_LEN, &mut |key, value| {
            ranged.add(value);
            ranged.checksum = ranged.checksum.wrapping_add(records::checksum(key));
        })
    })?;
    if ordered {
        if ranged.found != expected_records {
            return Err(format!(
                "random range reads: {} records in {scans} ranges, expected {expected_records}",
                ranged.found
            ));
        }
        let line =
            Line { seconds: Some(seconds), ops: Some(scans), checksum: Some(ranged.checksum), ..Line::default() };
        emit(name, "random range reads", line);
    } else {
        emit(name, "random range reads", Line { ops: Some(scans), ..Line::default() });
    }

    for threads in [2, 4] {
        let phase = format!("random reads ({threads} threads)");
        let keys = next_slice();
        let expected = expected_of(keys.clone());
        let (seconds, got) = read_phase(store.as_ref(), keys, threads)?;
        check_reads(&phase, got, expected)?;
        emit(
            name,
            &phase,
            Line { seconds: Some(seconds), ops: Some(reads), checksum: Some(got.checksum), ..Line::default() },
        );
    }

    let (seconds, reopened) = timed(|| {
        store.close()?;
        open(args)
    })?;
    store = reopened;
    emit(name, "close + reopen", Line { seconds: Some(seconds), ops: Some(1), ..Line::default() });

    let keys = next_slice();
    let expected = expected_of(keys.clone());
    let (seconds, got) = read_phase(store.as_ref(), keys, 1)?;
    check_reads("random reads after reopen", got, expected)?;
    let line = Line { seconds: Some(seconds), ops: Some(reads), checksum: Some(got.checksum), ..Line::default() };
    emit(name, "random reads after reopen", line);

    let removals = if args.removals == 0 { total / 2 } else { args.removals.min(total) };
    let (seconds, ()) = timed(|| {
        let mut first = 0;
        while first < removals {
            let end = (first + REMOVE_BATCH).min(removals);
            store.write(&mut (first..end).map(|i| Op::Remove(records::key(i))), true)?;
            first = end;
        }
        // What the removals left in a write buffer is applied in the phase, not at the close.
        store.settle()?;
        Ok(())
    })?;
    emit(name, "removals", Line { seconds: Some(seconds), ops: Some(removals), ..Line::default() });
    let left = store.len()?;
    if left != total - removals {
        return Err(format!("len() after the removals is {left}, expected {}", total - removals));
    }

    store.close()?;
    emit(name, "uncompacted size", Line { bytes: Some(dir_bytes(&args.dir)?), ..Line::default() });

    store = open(args)?;
    let (seconds, compacted) = timed(|| store.compact())?;
    emit(name, "compaction", Line { seconds: compacted.then_some(seconds), ops: Some(1), ..Line::default() });
    let left = store.len()?;
    if left != total - removals {
        return Err(format!("len() after compaction is {left}, expected {}", total - removals));
    }
    store.close()?;
    emit(name, "compacted size", Line { bytes: Some(dir_bytes(&args.dir)?), ..Line::default() });

    // The compacted store, reopened, read as the first read phase read the bulk records: the
    // records the removals left (every record written has its own index, and the removals
    // took the lowest), at most `reads` of them.
    store = open(args)?;
    let live = removals..total.min(removals.saturating_add(reads));
    let expected = expected_of(live.clone());
    let (seconds, got) = read_phase(store.as_ref(), live.clone(), 1)?;
    check_reads("random reads after compaction", got, expected)?;
    let line = Line {
        seconds: Some(seconds),
        ops: Some(live.end - live.start),
        checksum: Some(got.checksum),
        ..Line::default()
    };
    emit(name, "random reads after compaction", line);
    store.close()?;
    Ok(())
}

fn main() {
    let outcome = parse_args().and_then(|args| {
        STOP_AFTER.get_or_init(|| args.stop_after.clone());
        run(&args)
    });
    if let Err(message) = outcome {
        eprintln!("kura-peers: {message}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use records::KEY_SIZE;

    #[test]
    fn ranges_near_the_largest_keys_are_short() {
        let total = 1_000;
        let mut keys: Vec<Key> = (0..total).map(records::key).collect();
        keys.sort();
        let count_from = |start: Key| keys.iter().filter(|k| **k >= start).count().min(SCAN_LEN) as u64;
        let starts: Vec<Key> = keys.iter().rev().take(15).copied().chain([[0; KEY_SIZE]]).collect();
        let expected: u64 = starts.iter().map(|s| count_from(*s)).sum();
        assert_eq!(expected_range_records(starts.into_iter(), total), expected);
    }
}
