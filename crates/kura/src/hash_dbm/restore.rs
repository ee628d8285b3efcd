//! Salvaging the records of a crashed or damaged HashDbm file into a fresh one.
//!
//! First every chain is walked from its bucket: after a process crash the chains are
//! intact (see the crash contract in storage.rs), and the first record of a key in its
//! chain is its current state. If any chain is broken (a pointer out of the file, a bad
//! header, a loop), the record area is then scanned from start to end and every intact
//! record (checksum verified) whose key was not yet recovered is added too, so that damage
//! loses only the records it hit.

use std::collections::HashSet;

use super::chain_lock::WholeFile;
use super::record::{Block, KIND_RECORD};
use super::storage::{bucket_of, hash_key, Storage};
use crate::error::Result;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Salvage {
    pub from_chains: u64,
    pub from_scan: u64,
    pub broken_chains: u64,
}

/// A storage with the proof that the caller has all of it.
type Whole<'a> = (&'a Storage, WholeFile<'a>);

/// Inserts a record known to be absent from `sink`.
fn insert((sink, whole): &Whole<'_>, key: &[u8], hash: u64, value: &[u8]) -> Result<()> {
    let bucket = bucket_of(hash, sink.header.num_buckets);
    let chain = whole.chain_mut(bucket);
    let head = sink.head(chain.read())?;
    let offset = sink.write_record(&chain, key, hash, Some(value), head)?;
    sink.link_new_head(&chain, offset, hash)?;
    sink.add_count(bucket, 1);
    Ok(())
}

/// Copies what can be recovered from `source` into the empty `sink`; the caller has both
/// to itself (opened at restore, under their file locks).
pub fn salvage(source: &mut Storage, sink: &mut Storage) -> Result<Salvage> {
    let source = WholeFile::unshared(source);
    let sink = WholeFile::unshared(sink);
    let (from, whole) = &source;
    let mut report = Salvage::default();
    let mut value = Vec::new();
    for bucket in 0..from.header.num_buckets {
        let mut decided: HashSet<Vec<u8>> = HashSet::new();
        let chain = whole.chain(bucket);
        let walked = from.walk(chain, |offset, header, _, key| {
            if !decided.insert(key.to_vec()) {
                return Ok(true);
            }
            if header.kind() != KIND_RECORD {
                return Ok(true);
            }
            let hash = hash_key(key);
            // A record failing its checksum is skipped, not fatal: the rest of the chain may
            // still be fine (its pointer is validated when followed).
            if from.read_value(chain, offset, header, hash, &mut value).is_ok() {
                insert(&sink, key, hash, &value)?;
                report.from_chains += 1;
            }
            Ok(true)
        });
        if walked.is_err() {
            report.broken_chains += 1;
        }
    }
    if report.broken_chains > 0 {
        scan(&source, &sink, &mut report)?;
    }
    Ok(report)
}

/// Adds every intact record of the record area whose key `sink` does not have yet.
fn scan((source, whole): &Whole<'_>, sink: &Whole<'_>, report: &mut Salvage) -> Result<()> {
    let mut offset = source.header.data_start();
    let end = source.file_len();
    let mut value = Vec::new();
    while offset < end {
        let step = match source.scan_block(whole, offset) {
            Ok(Block::Filler) => 1,
            Ok(Block::FreeSpan { len }) => len,
            Ok(Block::Record(header)) => {
                // The record belongs to some chain (or none): the whole file is ours either way.
                let chain = whole.chain(0);
                let recovered = source.key_of(chain, offset, &header).ok().and_then(|key| {
                    let hash = hash_key(key);
                    let intact = source.read_value(chain, offset, &header, hash, &mut value).is_ok();
                    (intact && header.kind() == KIND_RECORD).then(|| (key.to_vec(), hash))
                });
                match recovered {
                    Some((key, hash)) => {
                        let (into, into_whole) = sink;
                        let bucket = bucket_of(hash, into.header.num_buckets);
                        if into.find(into_whole.chain(bucket), &key, hash)?.is_none() {
                            insert(sink, &key, hash, &value)?;
                            report.from_scan += 1;
                        }
                        header.total_len()
                    }
                    // Not an intact record: resynchronize one byte further.
                    None => 1,
                }
            }
            Err(_) => 1,
        };
        offset = offset.saturating_add(step.max(1));
    }
    Ok(())
}
