//! The parallel part of an import: parser workers and writers, and the order they keep.
//!
//! The reader (the calling thread) hands chunks to `parsers` workers; each worker parses its
//! chunk's lines, routes every record to a lane (the shard its key lives in, and within a
//! shard one of `writers_per_db` writers by a second hash) and groups the lane's records into
//! `WriteBatch`es of `batch` records. A lane's writer applies the batches of chunk after
//! chunk in input order, whatever order the workers finish in, so when a key occurs twice the
//! later line wins, as in a sequential load; at most `writing` writers write at once. The
//! reader stays at most `2 * parsers + 2` chunks ahead of the slowest writer, which bounds
//! memory when writing is the bottleneck.
//!
//! A database that prefers whole batches (`Dbm::prefers_whole_batches`, CompactDbm) gets one
//! writer, which gathers every batch of the input and writes them as one batch at the end, so
//! each of its buckets is encoded once.
//!
//! A malformed line (without `skip_bad`) stops the import at that line: the records of the
//! lines before it are written, none after it, so the database holds exactly a prefix of the
//! input.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::sync::{Condvar, Mutex};

use crate::batch::WriteBatch;
use crate::dbm::Dbm;
use crate::error::{Error, Result};

use super::chunks::{lines, Chunk, ChunkReader};
use super::parse::{parse_line, Format, Row};

/// A batch is also closed when it holds this many key and value bytes.
pub(crate) const BATCH_BYTES: usize = 4 << 20;

/// What the workers need to know besides the data.
pub struct Settings {
    pub format: Format,
    pub batch: usize,
    pub skip_bad: bool,
    pub parsers: usize,
    /// Writers that may write at once. Compression happens as a writer writes, so this is
    /// what `threads` bounds even when shards outnumber threads (one writer per shard).
    pub writing: usize,
    /// Generated keys are this prefix and the line number: unique within the import, and the
    /// prefix (from the clock and the process id) keeps two imports' keys apart.
    pub keyless_prefix: String,
}

/// The first malformed line.
pub struct BadLine {
    pub line: u64,
    pub message: String,
}

pub struct Outcome {
    pub stored: u64,
    pub skipped: u64,
    pub keyless: u64,
    pub bad_line: Option<BadLine>,
}

/// One chunk's batches for one lane.
struct Parsed {
    seq: u64,
    batches: Vec<WriteBatch>,
}

/// State shared by the reader, the workers and the writers.
struct Shared {
    /// Per lane, the sequence number of the next chunk its writer will apply (`u64::MAX` once
    /// the writer has stopped).
    applied: Mutex<Vec<u64>>,
    progressed: Condvar,
    /// A writer failed: stop reading and applying.
    aborted: AtomicBool,
    /// The chunk of the first malformed line (`u64::MAX`: none); writers apply nothing later.
    bad_seq: AtomicU64,
    bad_line: Mutex<Option<(u64, BadLine)>>,
    skipped: AtomicU64,
    keyless: AtomicU64,
    /// Writers allowed to write now (see `Settings::writing`).
    permits: Mutex<usize>,
    permit_freed: Condvar,
}

impl Shared {
    fn mark_applied(&self, lane: usize, next_seq: u64) {
        let mut applied = self.applied.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = applied.get_mut(lane) {
            *slot = next_seq;
        }
        self.progressed.notify_all();
    }

    /// Waits until every writer is within `in_flight` chunks of `seq`, or the import stops.
    fn wait_for_room(&self, seq: u64, in_flight: u64) {
        let mut applied = self.applied.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while !self.stopped() && applied.iter().min().is_some_and(|&slowest| seq >= slowest.saturating_add(in_flight)) {
            applied = self.progressed.wait(applied).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Runs `write` once a writing permit is free.
    fn with_permit<T>(&self, write: impl FnOnce() -> T) -> T {
        let mut free = self.permits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while *free == 0 {
            free = self.permit_freed.wait(free).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *free -= 1;
        drop(free);
        let result = write();
        *self.permits.lock().unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        self.permit_freed.notify_one();
        result
    }

    fn stopped(&self) -> bool {
        self.aborted.load(Ordering::Acquire) || self.bad_seq.load(Ordering::Acquire) != u64::MAX
    }

    fn record_bad_line(&self, seq: u64, bad: BadLine) {
        let mut slot = self.bad_line.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.as_ref().is_none_or(|(earlier, _)| seq < *earlier) {
            *slot = Some((seq, bad));
            self.bad_seq.store(seq, Ordering::Release);
        }
        self.progressed.notify_all();
    }
}

/// A second hash spreading one shard's keys over its writers (FNV-1a: independent of the
/// shard routing hash).
fn sub_lane(key: &[u8], writers: usize) -> usize {
    let hash = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    (hash % writers as u64) as usize
}

/// Routes records to lanes: `dbs` databases (a set's shards, or one database), each written
/// by `writers_per_db` writers.
#[derive(Clone, Copy)]
struct Router {
    dbs: usize,
    writers_per_db: usize,
}

impl Router {
    fn lanes(self) -> usize {
        self.dbs * self.writers_per_db
    }

    fn lane(self, key: &[u8]) -> usize {
        let db = if self.dbs == 1 { 0 } else { crate::shard_dbm::shard_of(key, self.dbs) };
        let sub = if self.writers_per_db == 1 { 0 } else { sub_lane(key, self.writers_per_db) };
        db * self.writers_per_db + sub
    }
}

/// Imports every chunk of `reader` into `dbs` (the shards of a set, in shard order, or one
/// database). Returns when all is written, a line is malformed, or a write failed (the error).
pub fn run<R: Read>(
    reader: &mut ChunkReader<R>,
    dbs: &[&dyn Dbm],
    writers_per_db: usize,
    settings: &Settings,
    progress: &dyn Fn(u64),
) -> Result<Outcome> {
    let router = Router { dbs: dbs.len(), writers_per_db: writers_per_db.max(1) };
    let shared = Shared {
        applied: Mutex::new(vec![0; router.lanes()]),
        progressed: Condvar::new(),
        aborted: AtomicBool::new(false),
        bad_seq: AtomicU64::new(u64::MAX),
        bad_line: Mutex::new(None),
        skipped: AtomicU64::new(0),
        keyless: AtomicU64::new(0),
        permits: Mutex::new(settings.writing.max(1)),
        permit_freed: Condvar::new(),
    };
    let parsers = settings.parsers.max(1);
    let in_flight = (2 * parsers + 2) as u64;

    let (chunk_sender, chunk_receiver) = sync_channel::<Chunk>(parsers);
    let chunk_receiver = Mutex::new(chunk_receiver);
    let (stored, read_result) = std::thread::scope(|scope| {
        let mut lane_senders = Vec::with_capacity(router.lanes());
        let mut writers = Vec::with_capacity(router.lanes());
        for lane in 0..router.lanes() {
            let (sender, receiver) = channel::<Parsed>();
            lane_senders.push(sender);
            let db = dbs.get(lane / router.writers_per_db).copied();
            let shared = &shared;
            writers.push(scope.spawn(move || write_lane(lane, db, receiver, shared)));
        }
        let mut parser_threads = Vec::with_capacity(parsers);
        for _ in 0..parsers {
            let senders = lane_senders.clone();
            let (chunk_receiver, shared) = (&chunk_receiver, &shared);
            parser_threads.push(scope.spawn(move || parse_chunks(chunk_receiver, &senders, router, settings, shared)));
        }
        drop(lane_senders);

        let read_result = (|| -> Result<()> {
            while let Some(chunk) = reader.next_chunk()? {
                shared.wait_for_room(chunk.seq, in_flight);
                if shared.stopped() {
                    break;
                }
                progress(chunk.bytes.len() as u64);
                if chunk_sender.send(chunk).is_err() {
                    break;
                }
            }
            Ok(())
        })();
        drop(chunk_sender);
        let mut stored = 0u64;
        let mut first_error = None;
        for writer in writers {
            match writer.join() {
                Ok(Ok(count)) => stored += count,
                Ok(Err(e)) => first_error = first_error.or(Some(e)),
                Err(_) => first_error = first_error.or(Some(Error::infeasible("an import writer panicked"))),
            }
        }
        // Joined one by one rather than left to the scope: a parser that panicked becomes a
        // typed error like a writer's, and a joined thread has also run its thread-local
        // destructors (the scope only waits for the closures to return, so its threads may
        // still be freeing their thread-locals when `run` returns, which a leak checker run
        // right after, as the fuzzer's is, reports as leaks).
        for parser in parser_threads {
            if parser.join().is_err() {
                first_error = first_error.or(Some(Error::infeasible("an import parser panicked")));
            }
        }
        (first_error.map_or(Ok(stored), Err), read_result)
    });
    let stored = stored?;
    read_result?;
    let bad_line = shared.bad_line.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).map(|(_, bad)| bad);
    Ok(Outcome {
        stored,
        skipped: shared.skipped.load(Ordering::Relaxed),
        keyless: shared.keyless.load(Ordering::Relaxed),
        bad_line,
    })
}

/// A worker: parses chunks and sends each lane its batches of every chunk (an empty list
/// too, so that the lane's writer knows the chunk is done).
fn parse_chunks(
    chunks: &Mutex<Receiver<Chunk>>,
    lanes: &[Sender<Parsed>],
    router: Router,
    settings: &Settings,
    shared: &Shared,
) {
    loop {
        let received = chunks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv();
        let Ok(chunk) = received else {
            return;
        };
        let mut done: Vec<Vec<WriteBatch>> = (0..lanes.len()).map(|_| Vec::new()).collect();
        let mut filling: Vec<WriteBatch> = (0..lanes.len()).map(|_| WriteBatch::new()).collect();
        let (mut skipped, mut keyless) = (0u64, 0u64);
        let mut keyless_key = Vec::new();
        for (number, line) in lines(&chunk) {
            let row = match parse_line(settings.format, line) {
                Ok(row) => row,
                Err(_) if settings.skip_bad => {
                    skipped += 1;
                    continue;
                }
                Err(message) => {
                    shared.record_bad_line(chunk.seq, BadLine { line: number, message });
                    break;
                }
            };
            let (key, value): (&[u8], _) = match &row {
                Row::Keyed { key, value } => (key, value),
                Row::Keyless { value } => {
                    keyless += 1;
                    super::keyless_key(&mut keyless_key, settings.keyless_prefix.as_bytes(), number);
                    (&keyless_key, value)
                }
            };
            let lane = router.lane(key);
            if let (Some(batch), Some(full)) = (filling.get_mut(lane), done.get_mut(lane)) {
                batch.set(key, value);
                if batch.len() >= settings.batch || batch.byte_size() >= BATCH_BYTES {
                    full.push(std::mem::take(batch));
                }
            }
        }
        shared.skipped.fetch_add(skipped, Ordering::Relaxed);
        shared.keyless.fetch_add(keyless, Ordering::Relaxed);
        for ((sender, mut batches), last) in lanes.iter().zip(done).zip(filling) {
            if !last.is_empty() {
                batches.push(last);
            }
            // A writer that stopped on an error no longer listens; the error is reported.
            let _ = sender.send(Parsed { seq: chunk.seq, batches });
        }
    }
}

/// A writer: applies its lane's batches chunk by chunk in input order; returns the records
/// written.
fn write_lane(lane: usize, db: Option<&dyn Dbm>, parsed: Receiver<Parsed>, shared: &Shared) -> Result<u64> {
    let outcome = (|| -> Result<u64> {
        let db = db.ok_or_else(|| Error::infeasible("an import lane has no database"))?;
        let mut waiting: BTreeMap<u64, Vec<WriteBatch>> = BTreeMap::new();
        let mut next_seq = 0u64;
        let mut stored = 0u64;
        // An engine that encodes each bucket once per batch gets the lane's whole input as one
        // batch, written at the end (the chunks gathered are all before any bad line: a bad
        // line's chunk is known before the writer reaches any later chunk).
        let mut gathered = db.prefers_whole_batches().then(WriteBatch::new);
        for message in parsed {
            waiting.insert(message.seq, message.batches);
            while let Some(batches) = waiting.remove(&next_seq) {
                let wanted =
                    next_seq <= shared.bad_seq.load(Ordering::Acquire) && !shared.aborted.load(Ordering::Acquire);
                if let (true, Some(whole)) = (wanted, gathered.as_mut()) {
                    for batch in batches {
                        whole.append(batch);
                    }
                } else if wanted {
                    stored += shared.with_permit(|| -> Result<u64> {
                        let mut written = 0;
                        for batch in &batches {
                            db.write_batch(batch)?;
                            written += batch.len() as u64;
                        }
                        Ok(written)
                    })?;
                }
                next_seq += 1;
                shared.mark_applied(lane, next_seq);
            }
        }
        if let Some(whole) = gathered.filter(|whole| !whole.is_empty() && !shared.aborted.load(Ordering::Acquire)) {
            shared.with_permit(|| db.write_batch(&whole))?;
            stored += whole.len() as u64;
        }
        Ok(stored)
    })();
    if outcome.is_err() {
        shared.aborted.store(true, Ordering::Release);
    }
    shared.mark_applied(lane, u64::MAX);
    outcome
}
