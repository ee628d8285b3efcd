//! floors: what this machine's memory and disk allow at best, measured in the same run as the
//! stores (bench/peers.py runs it first), so that each store's figure can be set beside the
//! floor it cannot go below: a durable commit costs at least one `fdatasync`, a random read
//! of a file larger than memory at least one random read of the disk, a lookup in a tree
//! larger than the CPU caches at least a few dependent loads from memory.
//!
//! ```text
//! floors --dir DIR [--file-bytes B]
//! ```
//!
//! Prints one JSON line per measurement, in the schema of kura-peers' phases (`store` is
//! "floor"): `seconds` for `ops` operations (or `bytes` moved). The disk is read and written
//! with `O_DIRECT`, so that neither the page cache nor a memory limit on this process changes
//! what is measured: the device's own speed.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Linux's `O_DIRECT` on x86-64 and aarch64 (asm-generic: 0o40000; the peers run on Linux).
const O_DIRECT: i32 = 0o40000;
/// The page size random reads read: TreeDbm's `max_page_size` and RocksDB's block size are
/// about this, LMDB's and redb's pages half of it.
const READ_BYTES: usize = 8192;
/// Sequential transfers, in units a database's own large writes (a rebuild, a flush) use.
const SEQUENTIAL_BYTES: usize = 1 << 20;
/// Random reads in flight at once for the parallel measurement: what a store that asks for
/// many pages together (`MADV_WILLNEED`, several reader threads, io_uring) can have queued.
const IN_FLIGHT: usize = 32;
/// How long each random-read measurement runs.
const READ_SECONDS: f64 = 3.0;
/// The array the dependent loads chase through: far larger than any CPU cache.
const CHASE_BYTES: usize = 256 << 20;
const CHASE_LOADS: usize = 10_000_000;
/// The name of the durable-commit floor (bench/peers.py finds it by this name).
const FLOOR_SYNC: &str = "fdatasync of a 4 KiB write";

/// A buffer aligned for `O_DIRECT` (the block size; 4096 covers every device here).
struct Aligned {
    ptr: *mut u8,
    layout: Layout,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = Layout::from_size_align(len, 4096).expect("a valid layout");
        // SAFETY: `layout` has a non-zero size (every caller passes one).
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory for a {len}-byte buffer");
        Aligned { ptr, layout }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `layout.size()` initialised bytes owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

fn emit(phase: &str, seconds: f64, ops: Option<u64>, bytes: Option<u64>) {
    let field = |v: Option<u64>| v.map_or_else(|| "null".to_string(), |v| v.to_string());
    println!(
        "{{\"store\":\"floor\",\"phase\":\"{phase}\",\"seconds\":{seconds:.6},\"ops\":{},\"bytes\":{},\"checksum\":null}}",
        field(ops),
        field(bytes)
    );
    std::io::stdout().flush().ok();
}

/// A small random generator (SplitMix64), so that no crate is needed for it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// 1,000 writes of 4 KiB one after another into a file written and synced beforehand, each
/// followed by `fdatasync`: the least a durable commit to a log costs. (Into space written
/// before, as Kura's journal and RocksDB's recycled logs write: an append that grows the file
/// makes `fdatasync` commit the file system's journal too, 3.8 ms a commit here against
/// about 0.1 ms.)
fn sync_floor(dir: &Path) -> std::io::Result<()> {
    let path = dir.join("floor-sync");
    let count: u64 = 1000;
    let block = vec![7u8; 4096];
    let file = OpenOptions::new().create(true).truncate(true).write(true).open(&path)?;
    file.write_all_at(&vec![0u8; block.len() * count as usize], 0)?;
    file.sync_all()?;
    let began = Instant::now();
    for i in 0..count {
        file.write_all_at(&block, i * block.len() as u64)?;
        file.sync_data()?;
    }
    emit(FLOOR_SYNC, began.elapsed().as_secs_f64(), Some(count), None);
    std::fs::remove_file(&path)
}

/// Dependent loads through a random cycle over `CHASE_BYTES`: each load's address is the
/// previous load's value, so nothing overlaps: one memory latency each.
fn memory_floor() {
    let slots = CHASE_BYTES / 8;
    let mut order: Vec<usize> = (0..slots).collect();
    let mut rng = Rng(0x5EED);
    for i in (1..slots).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut next = vec![0usize; slots];
    for pair in order.windows(2) {
        next[pair[0]] = pair[1];
    }
    next[order[slots - 1]] = order[0];
    drop(order);
    let mut at = 0usize;
    let began = Instant::now();
    for _ in 0..CHASE_LOADS {
        at = next[at];
    }
    let seconds = began.elapsed().as_secs_f64();
    std::hint::black_box(at);
    emit("dependent memory load (256 MiB)", seconds, Some(CHASE_LOADS as u64), None);
}

/// Writes `bytes` sequentially (synced at the end) and reads them back, both with `O_DIRECT`.
fn sequential(path: &Path, bytes: u64) -> std::io::Result<File> {
    let mut buffer = Aligned::new(SEQUENTIAL_BYTES);
    buffer.bytes().iter_mut().enumerate().for_each(|(i, b)| *b = (i * 31) as u8);
    let file =
        OpenOptions::new().create(true).truncate(true).read(true).write(true).custom_flags(O_DIRECT).open(path)?;
    let chunks = bytes / SEQUENTIAL_BYTES as u64;
    let began = Instant::now();
    for chunk in 0..chunks {
        file.write_all_at(buffer.bytes(), chunk * SEQUENTIAL_BYTES as u64)?;
    }
    file.sync_data()?;
    emit("sequential write, 1 MiB at a time", began.elapsed().as_secs_f64(), Some(chunks), Some(bytes));
    let began = Instant::now();
    for chunk in 0..chunks {
        file.read_exact_at(buffer.bytes(), chunk * SEQUENTIAL_BYTES as u64)?;
    }
    emit("sequential read, 1 MiB at a time", began.elapsed().as_secs_f64(), Some(chunks), Some(bytes));
    Ok(file)
}

/// Random `READ_BYTES` reads of `file` (`bytes` long) from `threads` threads for
/// `READ_SECONDS`: `threads` reads in flight at a time.
fn random_reads(file: &File, bytes: u64, threads: usize) -> std::io::Result<()> {
    let pages = bytes / READ_BYTES as u64;
    let deadline = Duration::from_secs_f64(READ_SECONDS);
    let began = Instant::now();
    let counts: Vec<std::io::Result<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut buffer = Aligned::new(READ_BYTES);
                    let mut rng = Rng(0xD15C ^ t as u64);
                    let mut done = 0u64;
                    while began.elapsed() < deadline {
                        file.read_exact_at(buffer.bytes(), rng.below(pages) * READ_BYTES as u64)?;
                        done += 1;
                    }
                    Ok(done)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("a reader thread panicked")).collect()
    });
    let seconds = began.elapsed().as_secs_f64();
    let mut total = 0;
    for count in counts {
        total += count?;
    }
    let phase = if threads == 1 {
        "random 8 KiB reads, 1 in flight".to_string()
    } else {
        format!("random 8 KiB reads, {threads} in flight")
    };
    emit(&phase, seconds, Some(total), Some(total * READ_BYTES as u64));
    Ok(())
}

fn run(dir: &Path, file_bytes: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    sync_floor(dir)?;
    memory_floor();
    let path = dir.join("floor-data");
    let file = sequential(&path, file_bytes)?;
    random_reads(&file, file_bytes, 1)?;
    random_reads(&file, file_bytes, IN_FLIGHT)?;
    drop(file);
    std::fs::remove_file(&path)
}

fn main() {
    let mut dir: Option<PathBuf> = None;
    let mut file_bytes: u64 = 1 << 30;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--dir" => dir = Some(PathBuf::from(value)),
            "--file-bytes" => match value.parse::<u64>() {
                Ok(bytes) if bytes >= SEQUENTIAL_BYTES as u64 => file_bytes = bytes,
                _ => {
                    eprintln!("floors: --file-bytes takes a number of bytes, at least 1 MiB");
                    std::process::exit(2);
                }
            },
            _ => {
                eprintln!("usage: floors --dir DIR [--file-bytes B]");
                std::process::exit(2);
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("usage: floors --dir DIR [--file-bytes B]");
        std::process::exit(2);
    };
    file_bytes -= file_bytes % SEQUENTIAL_BYTES as u64;
    if let Err(e) = run(&dir, file_bytes) {
        eprintln!("floors: {}: {e}", dir.display());
        std::process::exit(1);
    }
}
