//! Bulk loading: a TSV or JSON-lines file into a database or a shard set, in parallel.
//!
//! The reader cuts the file into chunks (`chunks.rs`), worker threads parse them
//! (`parse.rs`) and group records into write batches per lane, and writers apply the batches
//! in input order (`pipeline.rs`). Into one database the lanes are `threads` writers sharing
//! it (a key always goes to the same writer); into a shard set (`shards`, or an existing set)
//! each shard has its own writer (or several when threads outnumber shards), so no two
//! writers share a lock. Compression happens in the writers, inside the engine; at most
//! `threads` writers write at once, so `threads` bounds the cores an import uses for parsing
//! and for compressing alike, however many shards there are. `kura import`
//! and Python's `kura.import_file` are this function with a progress bar or without.
//!
//! A regular file is read twice when a new database is sized for it (its lines counted
//! first); standard input, a pipe or any other stream is read once (`import_reader`), and
//! the new database takes its engine's default size and is rebuilt at the end, which sizes
//! it for the records it got.

// Crate-visible for `crate::fuzz::import_lines`, which drives the pipeline on arbitrary input.
pub(crate) mod chunks;
pub mod escape;
mod newlines;
pub mod packed_rows;
pub(crate) mod parse;
pub(crate) mod pipeline;
mod shard_writer;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::Instant;

use crate::dbm::{Dbm, OpenMode, Params};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::shard_dbm::{self, ShardDbm};
use crate::split_mix::mix;

pub use parse::Format;
pub use shard_writer::{ShardWriter, ShardWriterOptions, ShardWritten};

/// The generated key of keyless row `number`: `prefix` (which keeps two loads' keys apart)
/// and the number in 12 digits. `kura import`'s keyless lines and `kura.dask`'s keyless rows
/// are named alike.
pub fn keyless_key(out: &mut Vec<u8>, prefix: &[u8], number: u64) {
    use std::io::Write;
    out.clear();
    out.extend_from_slice(prefix);
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{number:012}");
}

/// Records per write batch unless `batch` says otherwise: large batches amortise a TreeDbm
/// commit, and a batch is also the most an interrupted import can leave half done.
pub const DEFAULT_BATCH: usize = 16384;

/// How to import, besides the paths and the engine parameters. `None` means the default.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Parser threads, and writers of a single database (default: the CPUs, at most 8).
    pub threads: Option<usize>,
    /// Import into a shard set of this many shards (`PATH-0000i-of-0000N`).
    pub shards: Option<usize>,
    /// Records per write batch (default `DEFAULT_BATCH`).
    pub batch: Option<usize>,
    /// The input format (default: by the file's extension, see `Format::of_file`).
    pub format: Option<Format>,
    /// Skip and count malformed lines instead of stopping at the first one.
    pub skip_bad: bool,
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    /// Records written (a key repeated in the input counts each time).
    pub stored: u64,
    /// Malformed lines skipped (`skip_bad`).
    pub skipped: u64,
    /// Records of keyless rows, stored under generated keys.
    pub keyless: u64,
    /// Records in the database afterwards.
    pub count: u64,
    /// Wall-clock seconds the import took.
    pub seconds: f64,
    /// Bytes of the database's file, or of its shards' files.
    pub file_size: u64,
    /// Whether the import ended with a rebuild (zstd-dict training, too few buckets).
    pub rebuilt: bool,
    /// Worker threads used.
    pub threads: usize,
    /// The set's shard count; 0 for a single database.
    pub shards: usize,
    /// Records per batch handed to a writer.
    pub batch: usize,
}

/// The default worker count: the number of CPUs, at most 8.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(8)
}

/// Counts the input's lines, to size a new database (HashDbm: one bucket a record).
fn count_lines(input: &Path) -> Result<u64> {
    let file = File::open(input).map_err(|e| Error::io(format!("open {}", input.display()), e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut lines = 0u64;
    loop {
        let chunk = reader.fill_buf().map_err(|e| Error::io(format!("read {}", input.display()), e))?;
        if chunk.is_empty() {
            return Ok(lines);
        }
        lines += newlines::count(chunk);
        let consumed = chunk.len();
        reader.consume(consumed);
    }
}

/// The database an import writes: one database, or a shard set whose shards it writes apart.
enum Target {
    Single(Box<dyn Dbm>),
    Shards(ShardDbm),
}

impl Target {
    fn as_dbm(&self) -> &dyn Dbm {
        match self {
            Target::Single(db) => db.as_ref(),
            Target::Shards(set) => set,
        }
    }
}

/// Names the database in an error unless the message already does.
fn naming(path: &Path) -> impl Fn(Error) -> Error + '_ {
    move |e| {
        let shown = path.display().to_string();
        if e.message().contains(&shown) {
            e
        } else {
            Error::new(e.kind(), format!("{shown}: {}", e.message()))
        }
    }
}

/// A new database that a stream (which cannot be counted before it is read) created with its
/// engine's default size: the import sizes it at the end, for the records it got, by a
/// rebuild with the parameters a counted input would have created it with.
struct SizeAtEnd {
    engine: &'static Engine,
    /// The parameters the user gave.
    given: Params,
    /// The databases the records are shared out among (a set's shards, each sized alike).
    ways: u64,
}

impl SizeAtEnd {
    /// The rebuild's parameters for `records` in all: the engine's sizes for its share, under
    /// the user's own values of the engine's parameters (a compact map's `num_buckets` wins
    /// over the `expected_records` sized here, as when a counted input creates it).
    fn params(&self, records: u64) -> Params {
        let sized = self.engine.import_params(records.div_ceil(self.ways.max(1)));
        let mut params = Params::new();
        for name in self.engine.params {
            if let Some(value) = self.given.get(name) {
                params = params.with(name, value);
            }
        }
        params.or_defaults(&sized)
    }
}

/// Whether a new database of `engine` is for the import to size: its engine sizes for its
/// records, and the user gave none of the parameters that size it.
fn to_size(engine: &Engine, params: &Params) -> bool {
    !engine.sized_by.is_empty() && engine.sized_by.iter().all(|name| params.get(name).is_none())
}

/// Opens the target, giving a new database the parameters its engine sizes for the input's
/// line count (per shard for a set), unless the user gave them. A stream (`countable` None)
/// cannot be counted before it is imported: then a new database takes its engine's defaults,
/// to be sized at the end (`SizeAtEnd`).
fn open_target(
    path: &Path,
    countable: Option<&Path>,
    params: &Params,
    shards: Option<usize>,
) -> Result<(Target, Option<SizeAtEnd>)> {
    let engine = crate::registry::resolve(path, params)?;
    let sharded = shards.is_some() || engine.shard_set;
    if !sharded {
        let new_unsized = !path.exists() && to_size(engine, params);
        let params = match countable {
            Some(input) if new_unsized => params.or_defaults(&engine.import_params(count_lines(input)?)),
            _ => params.clone(),
        };
        return engine
            .open(path, OpenMode::Create, &params.without("engine"))
            .map(|db| {
                let size_at_end =
                    (new_unsized && countable.is_none()).then(|| SizeAtEnd { engine, given: params.clone(), ways: 1 });
                (Target::Single(db), size_at_end)
            })
            .map_err(naming(path));
    }
    if path.is_file() {
        return Err(Error::invalid(format!(
            "{} is a single database; --shards imports into a shard set ({}-00000-of-NNNNN ...)",
            path.display(),
            path.display()
        )));
    }
    let mut params = params.without("engine");
    if let Some(count) = shards {
        params = params.with("num_shards", count);
    }
    let mut size_at_end = None;
    if shard_dbm::find_set(path)?.is_none() {
        let count = match params.get_u64("num_shards")? {
            Some(count) => count.max(1),
            None => shard_dbm::DEFAULT_NUM_SHARDS as u64,
        };
        let inner = shard_dbm::inner_engine_of(crate::registry::ENGINES, path, &params)?;
        if to_size(inner, &params) {
            match countable {
                Some(input) => {
                    let per_shard = inner.import_params(count_lines(input)?.div_ceil(count));
                    params = params.or_defaults(&shard_dbm::for_whole_set(inner, per_shard, count)?);
                }
                None => size_at_end = Some(SizeAtEnd { engine: inner, given: params.clone(), ways: count }),
            }
        }
    }
    ShardDbm::open(path, OpenMode::Create, &params, crate::registry::ENGINES)
        .map(|set| (Target::Shards(set), size_at_end))
        .map_err(naming(path))
}

/// Bytes the database occupies on disk after closing: its file, or its shards' files.
fn size_on_disk(path: &Path) -> u64 {
    if let Ok(metadata) = std::fs::metadata(path) {
        return metadata.len();
    }
    shard_dbm::naming::existing_shards(path)
        .map(|found| found.iter().filter_map(|(_, _, p)| std::fs::metadata(p).ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

/// A prefix for generated keys that differs between imports: the clock and the process id,
/// mixed.
fn keyless_prefix() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    format!("{:016x}-", mix(nanos ^ (u64::from(std::process::id()) << 32)))
}

/// Imports `input` into the database or shard set at `path` (created if missing, with
/// `params`). `progress` is told the bytes of each chunk as the reader hands it over.
/// A regular file sizes a new database for its line count; any other file (a named pipe,
/// `/dev/stdin`) is read once, as by `import_reader`. The format, unless `options` gives it,
/// follows the file's extension (`Format::of_file`).
///
/// A malformed line (without `skip_bad`) stops the import: exactly the records of the lines
/// before it are written, the database is closed cleanly, and the error (BrokenData) names
/// the line. An empty input is an InvalidArgument error and creates nothing.
pub fn import_file(
    path: &Path,
    input: &Path,
    params: &Params,
    options: &ImportOptions,
    progress: &dyn Fn(u64),
) -> Result<ImportSummary> {
    let file = File::open(input).map_err(|e| Error::io(format!("open {}", input.display()), e))?;
    let regular = file.metadata().is_ok_and(|metadata| metadata.is_file());
    let format = options.format.unwrap_or_else(|| Format::of_file(input));
    let name = input.display().to_string();
    import_from(path, file, &name, format, regular.then_some(input), params, options, progress)
}

/// Imports the lines `input` gives (standard input, a pipe, a decompressor's output) into
/// the database or shard set at `path`, reading them once: a new database takes its engine's
/// default size and is rebuilt at the end, sized for its records (unless `params` gives
/// one of the parameters that size it, `Engine::sized_by`: then it is rebuilt only if it
/// asks to be, `Dbm::should_be_rebuilt`). An engine that cannot open without a size
/// (CacheDbm's `cap_rec_num`) needs it in `params`. `name` names the
/// input in errors; the format is TSV unless `options` gives another. Otherwise as
/// `import_file`.
pub fn import_reader(
    path: &Path,
    input: impl Read,
    name: &str,
    params: &Params,
    options: &ImportOptions,
    progress: &dyn Fn(u64),
) -> Result<ImportSummary> {
    let format = options.format.unwrap_or(Format::Tsv);
    import_from(path, input, name, format, None, params, options, progress)
}

/// The import itself; `countable` is the input's path when it can be read twice (a regular
/// file), to count its lines and size a new database for them.
#[expect(clippy::too_many_arguments, reason = "the two public entry points' arguments, passed on as they are")]
fn import_from(
    path: &Path,
    input: impl Read,
    name: &str,
    format: Format,
    countable: Option<&Path>,
    params: &Params,
    options: &ImportOptions,
    progress: &dyn Fn(u64),
) -> Result<ImportSummary> {
    let started = Instant::now();
    let mut reader = chunks::ChunkReader::new(input, name.to_string());
    if !reader.has_input()? {
        return Err(Error::invalid(format!("{name} is empty: nothing to import")));
    }
    if options.shards == Some(0) || options.batch == Some(0) || options.threads == Some(0) {
        return Err(Error::invalid("shards, threads and batch must be at least 1"));
    }
    let threads = options.threads.unwrap_or_else(default_threads).max(1);
    let (target, size_at_end) = open_target(path, countable, params, options.shards)?;
    let (dbs, writers_per_db): (Vec<&dyn Dbm>, usize) = match &target {
        Target::Single(db) => (vec![db.as_ref()], threads),
        Target::Shards(set) => {
            let shards: Vec<&dyn Dbm> = set.shards().iter().map(|s| s.as_ref()).collect();
            let per_shard = (threads / shards.len()).max(1);
            (shards, per_shard)
        }
    };
    // One writer per database that takes the whole input as one batch: two writers would
    // each encode every bucket once.
    let whole_batches = dbs.iter().all(|db| db.prefers_whole_batches());
    let writers_per_db = if whole_batches { 1 } else { writers_per_db };
    let settings = pipeline::Settings {
        format,
        batch: options.batch.unwrap_or(DEFAULT_BATCH),
        skip_bad: options.skip_bad,
        parsers: threads,
        writing: threads,
        keyless_prefix: keyless_prefix(),
    };
    let outcome = pipeline::run(&mut reader, &dbs, writers_per_db, &settings, progress);
    let db = target.as_dbm();
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            // What was written stays: close cleanly so that every file is consistent.
            let _ = db.close();
            return Err(e);
        }
    };

    // A database whose codec needs a trained dictionary (zstd-dict) or whose buckets became
    // too few asks for a rebuild; doing it now leaves the file in its best shape. So does a
    // new one created from a stream with its engine's default size (a hash file's 1M buckets
    // for ten records, a compact map's default buckets for a million): a rebuild sizes it
    // for its records, as a counted input sizes it at the start. Each shard of a set
    // rebuilds (and trains its dictionary) on its own, in parallel, on no more threads than
    // the import was given.
    let rebuilt = outcome.bad_line.is_none() && (size_at_end.is_some() || db.should_be_rebuilt()?);
    if rebuilt {
        let params = match &size_at_end {
            Some(size) => size.params(db.count()?),
            None => Params::new(),
        };
        match &target {
            Target::Single(single) => single.rebuild(&params)?,
            Target::Shards(set) => set.rebuild_on(&params, threads)?,
        }
    }
    let count = db.count()?;
    db.close()?;
    if let Some(bad) = outcome.bad_line {
        let imported = match outcome.stored {
            0 => "no record of the lines before it was imported".to_string(),
            1 => "the 1 record of the lines before it was imported".to_string(),
            many => format!("the {many} records of the lines before it were imported"),
        };
        return Err(Error::broken(format!(
            "{name} line {}: {}; {imported} (--skip-bad skips such lines)",
            bad.line, bad.message
        )));
    }
    Ok(ImportSummary {
        stored: outcome.stored,
        skipped: outcome.skipped,
        keyless: outcome.keyless,
        count,
        seconds: started.elapsed().as_secs_f64(),
        file_size: size_on_disk(path),
        rebuilt,
        threads,
        shards: match &target {
            Target::Single(_) => 0,
            Target::Shards(set) => set.num_shards(),
        },
        // A database given its whole input at once got one batch per shard.
        batch: if whole_batches {
            usize::try_from(outcome.stored.div_ceil(dbs.len() as u64)).unwrap_or(usize::MAX)
        } else {
            settings.batch
        },
    })
}
