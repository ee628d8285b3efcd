//! `kura bench`: throughput measurements comparable with Tkrzw's.
//!
//! - `sequence.rs`: the workload of `tkrzw_dbm_perf sequence` (set, get, iterate, remove of
//!   `%08d` keys with small values), one thread or several;
//! - `batched.rs`: the get phase again in batches of N keys (`--batch N`, `Dbm::get_many_with`);
//! - `dictionary.rs`: random-order gets of every key of a TSV file (`--keys-from`) from an
//!   existing database, the read side of the dictionary benchmark;
//! - `scan.rs`: full scans and range scans through the ordered cursor (tree, baby), added
//!   to either mode by `--scan` and `--range-scan N`;
//! - `workload.rs`: the keys, values and random numbers both share;
//! - `report.rs`: the human and JSON lines, and the memory figure.

mod batched;
mod dictionary;
mod report;
mod scan;
mod sequence;
mod workload;

use std::path::PathBuf;
use std::thread::ScopedJoinHandle;

use clap::Args;
use kura::{Error, Params};

/// The engine measured: `--engine`'s, else the registry's default for benchmarks.
pub fn engine_of(args: &BenchArgs) -> kura::Result<&'static kura::Engine> {
    match args.engine.as_deref() {
        Some(name) => kura::registry::engine(name),
        None => kura::registry::benchmarked_by_default(),
    }
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Engine to measure (sequence mode; default hash). With --keys-from, the engine is
    /// taken from the path unless given.
    #[arg(long)]
    pub engine: Option<String>,
    /// Operations per thread in each phase.
    #[arg(long, default_value_t = 10_000)]
    pub iter: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 8)]
    pub size: usize,
    /// Threads working at once on the same database.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Keys drawn at random from 0..iter*threads instead of in sequence.
    #[arg(long, alias = "random_key")]
    pub random_key: bool,
    /// Database file (default: a temporary file, removed afterwards). Sequence mode starts
    /// it empty and leaves it behind; a database that exists there (a file or a shard set) is
    /// replaced only with --force (`tkrzw_dbm_perf` truncates it unasked). With --keys-from,
    /// the existing database to read.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Sequence mode: replace the database at --path if one exists.
    #[arg(long, visible_alias = "truncate", requires = "path", conflicts_with = "keys_from")]
    pub force: bool,
    /// Get every key of this TSV file (first column) in a shuffled order from --path. The
    /// sequence workload's --random-key, --size and --batch do not apply to it.
    #[arg(long, value_name = "FILE.tsv", conflicts_with_all = ["random_key", "size", "batch"])]
    pub keys_from: Option<PathBuf>,
    /// Ordered engines (tree, baby): also time a full forward and a full backward scan
    /// through the ordered cursor (phases `scan`, `scan_back`).
    #[arg(long)]
    pub scan: bool,
    /// Ordered engines: also time range scans, each a jump to a start key then N records
    /// forward (phase `range`, QPS in scans). Sequence mode: iter/N scans per thread from
    /// random keys; with --keys-from: --iter scans in all, from the shuffled keys.
    #[arg(long, value_name = "N")]
    pub range_scan: Option<u64>,
    /// Sequence mode: after the get phase, get the same keys again in batches of N through
    /// `get_many` (phase `get_batch`, with a `batch` field); several sizes separated by
    /// commas (`--batch 16,64`) each add a phase.
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: Vec<u64>,
    /// Print one JSON object per phase instead of Tkrzw-style lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &BenchArgs, params: &Params) -> kura::Result<()> {
    if args.threads == 0 {
        return Err(kura::Error::invalid("--threads must be at least 1"));
    }
    match &args.keys_from {
        Some(tsv) => dictionary::run(args, tsv, params),
        None => sequence::run(args, params),
    }
}

/// Waits for every worker of a phase and collects their results; a panicked worker is an
/// error of the phase rather than a panic of the command.
fn join_all<T>(workers: Vec<ScopedJoinHandle<'_, kura::Result<T>>>) -> kura::Result<Vec<T>> {
    workers
        .into_iter()
        .map(|w| w.join().unwrap_or_else(|_| Err(Error::infeasible("a bench thread panicked"))))
        .collect()
}
