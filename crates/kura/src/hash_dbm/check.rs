//! `Dbm::check` for HashDbm: every chain walked from its bucket, every record on it verified.
//!
//! The cursor alone would stop at the first broken chain and never see a chain cut short by
//! a damaged bucket entry. This walk reads each bucket's chain to its end and checks what the
//! format lets it check: the chain itself (pointers inside the record area, no loop, no free
//! block), that each record's key belongs to the bucket that reaches it, that each live
//! record's value passes its checksum and decodes, that no tombstone carries a value (or, in
//! place, exists at all: in-place writers write none), and that the live records add up to
//! the count the database keeps. A broken chain is one problem and the walk goes on with the
//! next bucket, so that one bad pointer does not hide the rest of the file. A header copy
//! found damaged or stale at open is a problem too, though the other copy served: the next
//! damage there would cost the file (a writable open repairs it and reports nothing more).
//!
//! The chains do not reach every byte a read may meet: older versions behind a key's newest
//! (appending mode), dead records, free spans, the saved free list. check_blocks.rs walks the
//! record area block by block and verifies those; in a file closed cleanly, every record and
//! tombstone it finds must be one a chain reaches, and the other way round, and in place the
//! live records it finds must be as many as the header counts.

use std::collections::HashSet;

use super::chain_lock::WholeFile;
use super::check_blocks::check_blocks;
use super::header::{UpdateMode, COPIES_BYTES, COPY_OFFSET, HEADER_REGION, HEADER_SIZE};
use super::record::{KIND_RECORD, KIND_TOMBSTONE};
use super::storage::{bucket_of, hash_key, Storage};
use super::HashDbm;
use crate::check::{CheckReport, Place};
use crate::error::{Error, Result};

impl HashDbm {
    /// The whole walk, with every stripe held so that the chains and the count agree.
    pub(crate) fn check_chains(&self) -> Result<CheckReport> {
        self.with_all(|slot| {
            let storage = slot.as_mut().ok_or_else(|| Error::infeasible("the database is closed"))?;
            let (storage, whole) = WholeFile::unshared(storage);
            check_storage(storage, &whole)
        })
    }
}

/// Walks every chain of `s` (whole: no other thread touches it).
fn check_storage(s: &Storage, whole: &WholeFile<'_>) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    if let Some(found) = s.copies.describe().filter(|_| !s.copies_repaired) {
        report.add(Place::Database, format!("{found} (a writable open writes both copies anew)"));
    }
    if s.header.has_copy() {
        // The reserved bytes around the copies are zero as written: any other is damage.
        for (start, end) in [(HEADER_SIZE, COPY_OFFSET), (COPIES_BYTES as u64, HEADER_REGION)] {
            let bytes = s.raw_bytes(whole, start, (end - start) as usize)?;
            if let Some(at) = bytes.iter().position(|&b| b != 0) {
                report.add(
                    Place::Database,
                    format!(
                        "the header region's reserved byte at {} is not zero (a writable open writes it anew)",
                        start + at as u64
                    ),
                );
            }
        }
    }
    let in_place = s.header.update_mode == UpdateMode::InPlace;
    let num_buckets = s.header.num_buckets;
    let mut value = Vec::new();
    // Every offset a chain reached, to hold against the blocks of the record area.
    let mut reached: HashSet<u64> = HashSet::new();
    // The records whose value the chain walk found damaged, which the block walk does not
    // report again.
    let mut flagged: HashSet<u64> = HashSet::new();
    for bucket in 0..num_buckets {
        let chain = whole.chain(bucket);
        // The keys met so far in this chain: the first record of a key is its state (in
        // appending mode older versions follow it; in place a key appears once).
        let mut decided: HashSet<Vec<u8>> = HashSet::new();
        let walked = s.walk(chain, |offset, header, _, key| {
            reached.insert(offset);
            let hash = hash_key(key);
            let owner = bucket_of(hash, num_buckets);
            if owner != bucket {
                // Reached through a wrong pointer: what follows is not this chain's.
                report.add(Place::Bucket(bucket), format!("links to a record of bucket {owner} at {offset}"));
                return Ok(false);
            }
            if header.kind() == KIND_TOMBSTONE && (header.value_len != 0 || in_place) {
                let why = if in_place { "a tombstone in an in-place file" } else { "a tombstone with a value" };
                report.add(Place::Record(offset), why);
                return Ok(false);
            }
            if !decided.insert(key.to_vec()) {
                if in_place {
                    report.add(Place::Record(offset), "a second record of a key in one chain of an in-place file");
                }
                return Ok(true);
            }
            if header.kind() == KIND_RECORD {
                match s.read_value(chain, offset, header, hash, &mut value) {
                    Ok(()) => report.records += 1,
                    Err(e) => {
                        flagged.insert(offset);
                        let message = without_path(s, e.message());
                        let at = format!("record at {offset}: ");
                        report.add(Place::Record(offset), message.strip_prefix(at.as_str()).unwrap_or(&message))
                    }
                }
            }
            Ok(true)
        });
        if let Err(e) = walked {
            report.add(Place::Bucket(bucket), without_path(s, e.message()));
        }
    }
    let blocks = check_blocks(s, whole, &flagged, &mut report)?;
    let counted = s.count();
    if s.header.closed_cleanly && blocks.whole {
        // A clean close leaves no record unlinked under a live tag (it marks them dead).
        let mut unreached: Vec<u64> = blocks.linked.difference(&reached).copied().collect();
        let mut stray: Vec<u64> = reached.difference(&blocks.linked).copied().collect();
        unreached.sort_unstable();
        stray.sort_unstable();
        if let Some(first) = unreached.first() {
            report.add(
                Place::Record(*first),
                format!("{} intact records or tombstones that no chain reaches, the first here", unreached.len()),
            );
        }
        if let Some(first) = stray.first() {
            report.add(
                Place::Record(*first),
                format!(
                    "chains reach {} places where the record area holds no intact record, the first here",
                    stray.len()
                ),
            );
        }
        if in_place && blocks.live != counted {
            report.add(
                Place::Database,
                format!("the database counts {counted} records, the record area holds {} live ones", blocks.live),
            );
        }
    }
    let unreadable = report.problems;
    if report.records + unreadable < counted || (report.is_clean() && report.records != counted) {
        let crashed = if s.header.closed_cleanly {
            ""
        } else {
            " (the file was not closed cleanly: a writer's open restores it)"
        };
        report.add(
            Place::Database,
            format!("the database counts {counted} records, its chains hold {}{crashed}", report.records),
        );
    }
    Ok(report)
}

/// A message without the file's name in front (the report is about that file already).
fn without_path(s: &Storage, message: &str) -> String {
    let prefix = format!("{}: ", s.path().display());
    message.strip_prefix(prefix.as_str()).unwrap_or(message).to_string()
}
