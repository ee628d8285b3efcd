//! Bulk subcommands: import a TSV file, export to one.
//!
//! Import reads the file on one thread and stores records on several: compression is the
//! costly part of storing, and it parallelises. Each key always goes to the same worker (by
//! a hash of the key), so when a key occurs twice in the file its last line still wins.
//! Workers store records in write batches (`Dbm::write_batch`): TreeDbm applies each batch
//! atomically under one lock and one commit, the other engines record by record.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::time::Instant;

use kura::{Dbm, Error, OpenMode, Params, WriteBatch};

use super::{open, write_error};
use crate::progress;

/// A batch is sent to a worker when it holds this many bytes or records. TreeDbm commits each
/// batch as one unit, so a batch is also the most an interrupted import can leave half done.
const BATCH_BYTES: usize = 4 << 20;
const BATCH_RECORDS: usize = 16384;
/// Batches in flight per worker; bounds memory when the workers fall behind the reader.
const QUEUE_DEPTH: usize = 4;

/// A worker's queue and the batch being filled for it.
struct Lane {
    queue: SyncSender<WriteBatch>,
    filling: WriteBatch,
}

/// A database created by this import gets the parameters its engine's registry entry sizes
/// for the input's line count (HashDbm: one bucket a record), unless the user gave them.
fn sized_for_input(path: &Path, tsv: &Path, params: &Params) -> kura::Result<Params> {
    let engine = kura::registry::resolve(path, params)?;
    let sized = (engine.import_params)(0);
    if path.exists() || sized.names().all(|name| params.get(name).is_some()) {
        return Ok(params.clone());
    }
    let mut lines = 0u64;
    let mut reader = BufReader::with_capacity(
        1 << 20,
        File::open(tsv).map_err(|e| Error::io(format!("open {}", tsv.display()), e))?,
    );
    loop {
        let chunk = reader.fill_buf().map_err(|e| Error::io(format!("read {}", tsv.display()), e))?;
        if chunk.is_empty() {
            break;
        }
        lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        let consumed = chunk.len();
        reader.consume(consumed);
    }
    Ok(params.or_defaults(&(engine.import_params)(lines)))
}

pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(8)
}

pub fn import(path: &Path, tsv: &Path, params: &Params, threads: Option<usize>) -> kura::Result<()> {
    let started = Instant::now();
    let input = File::open(tsv).map_err(|e| Error::io(format!("open {}", tsv.display()), e))?;
    let input_size = input.metadata().map_or(0, |m| m.len());
    let params = &sized_for_input(path, tsv, params)?;
    let db = open(path, OpenMode::Create, params)?;
    let workers = threads.unwrap_or_else(default_threads).max(1);
    let bar = progress::bytes(input_size, "import");
    let mut reader = BufReader::with_capacity(1 << 20, input);

    let (stored, skipped) = std::thread::scope(|scope| -> kura::Result<(u64, u64)> {
        let mut lanes = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (queue, batches) = sync_channel::<WriteBatch>(QUEUE_DEPTH);
            let db: &dyn Dbm = db.as_ref();
            handles.push(scope.spawn(move || -> kura::Result<u64> {
                let mut stored = 0u64;
                for batch in batches {
                    db.write_batch(&batch)?;
                    stored += batch.len() as u64;
                }
                Ok(stored)
            }));
            lanes.push(Lane { queue, filling: WriteBatch::new() });
        }

        let mut skipped = 0u64;
        let mut line = Vec::new();
        let mut read_result = Ok(());
        'reading: loop {
            line.clear();
            let length = match reader.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(length) => length,
                Err(e) => {
                    read_result = Err(Error::io(format!("read {}", tsv.display()), e));
                    break;
                }
            };
            bar.inc(length as u64);
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            let Some(tab) = body.iter().position(|&b| b == b'\t') else {
                skipped += 1;
                continue;
            };
            let (key, rest) = body.split_at(tab);
            let value = rest.get(1..).unwrap_or_default();
            let lane_index = if workers == 1 { 0 } else { lane_of(key, workers) };
            let Some(lane) = lanes.get_mut(lane_index) else {
                continue;
            };
            lane.filling.set(key, value);
            if (lane.filling.byte_size() >= BATCH_BYTES || lane.filling.len() >= BATCH_RECORDS)
                && lane.queue.send(std::mem::take(&mut lane.filling)).is_err()
            {
                break 'reading; // the worker stopped on an error, reported below
            }
        }
        for lane in lanes {
            if !lane.filling.is_empty() {
                let _ = lane.queue.send(lane.filling);
            }
        }
        let mut stored = 0u64;
        let mut first_error = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(count)) => stored += count,
                Ok(Err(e)) => first_error = first_error.or(Some(e)),
                Err(_) => first_error = first_error.or(Some(Error::infeasible("an import worker panicked"))),
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        read_result.map(|()| (stored, skipped))
    })?;
    bar.finish_and_clear();

    // A database whose codec needs a trained dictionary (zstd-dict) or whose buckets became
    // too few asks for a rebuild; doing it now leaves the file in its best shape.
    let rebuilt = db.should_be_rebuilt()?;
    if rebuilt {
        db.rebuild(&Params::new())?;
    }
    let count = db.count()?;
    db.close()?;
    let file_size = std::fs::metadata(path).map_or(0, |m| m.len());
    println!(
        "imported records={stored} skipped={skipped} count={count} seconds={:.3} file_size={file_size} \
         rebuilt={} threads={workers}",
        started.elapsed().as_secs_f64(),
        if rebuilt { "yes" } else { "no" },
    );
    Ok(())
}

/// FNV-1a: any stable spread of keys over the workers will do.
fn lane_of(key: &[u8], workers: usize) -> usize {
    let hash = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    (hash % workers as u64) as usize
}

pub fn export(path: &Path, params: &Params, file: Option<&Path>) -> kura::Result<()> {
    let db = open(path, OpenMode::ReadOnly, params)?;
    let target = match file {
        Some(file) => file.display().to_string(),
        None => "stdout".to_string(),
    };
    let sink: Box<dyn Write> = match file {
        Some(file) => Box::new(File::create(file).map_err(|e| Error::io(format!("create {target}"), e))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    let bar = progress::items(db.count()?, "export");
    let mut cursor = db.cursor()?;
    let mut moved = cursor.first()?;
    while moved {
        if let Some((key, value)) = cursor.record()? {
            out.write_all(&key)
                .and_then(|()| out.write_all(b"\t"))
                .and_then(|()| out.write_all(&value))
                .and_then(|()| out.write_all(b"\n"))
                .map_err(write_error(&target))?;
            bar.inc(1);
        }
        moved = cursor.next()?;
    }
    bar.finish_and_clear();
    drop(cursor);
    out.flush().map_err(write_error(&target))?;
    drop(out);
    db.close()
}
