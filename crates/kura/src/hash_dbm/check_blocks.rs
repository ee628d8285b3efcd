//! `check`'s walk of the record area block by block, beside the walk of the chains (check.rs),
//! which only meets the records a chain reaches.
//!
//! From the start of the records to their end every block is parsed by its tag: each record,
//! tombstone and dead record must lie inside the area and pass its checksum (a dead record's
//! tag no longer says whether it was compressed: either way), a free span must end where a
//! block starts. Inside a free span of a file whose every record carries the wide check
//! (format version 5), the dead records a synchronization left there (docs/format.md, "Blocks
//! of the record area") are found and verified too: from the first one whose checksum holds,
//! they and any older block inside must follow each other up to the span's end. The first
//! record of the run, whose tag and first pointer bytes the span's own tag and length were
//! written over, is found under them when its other fields survived (its 32 check bits left
//! hold); else the first intact dead record further in is where the blocks must start, and
//! the bytes before it are checked by nothing: no read ever meets them. In a file of another
//! version a 13-bit check would pass one random position in 8,192, so its spans' insides are
//! not searched.
//!
//! The saved free-block list must match its checksum and name free blocks of the walk with
//! their lengths. What the walk returns lets check.rs compare the chains with the blocks.

use std::collections::{HashMap, HashSet};

use super::chain_lock::WholeFile;
use super::header::UpdateMode;
use super::record::{
    checksum, Block, CheckLayout, RecordHeader, KIND_FREE, KIND_RECORD, KIND_TOMBSTONE, MAX_HEADER_SIZE, MAX_NEXT_WIDTH,
};
use super::storage::{free_list_entries, hash_key, Storage};
use crate::check::{CheckReport, Place};
use crate::encoding::varint_len;
use crate::error::Result;

/// What the walk found, for check.rs to hold the chains against.
#[derive(Debug, Default)]
pub(super) struct Blocks {
    /// Offsets of the blocks tagged record or tombstone (intact or not), which a chain should
    /// reach.
    pub linked: HashSet<u64>,
    /// Records tagged live among them.
    pub live: u64,
    /// Whether the walk reached the end of the record area (a block it could not parse
    /// ends it: its length, and so where the next block starts, is unknown).
    pub whole: bool,
}

/// Walks the record area of `s` (whole: no other thread touches it), adding each damaged
/// block to `report` but those the chain walk reported already (`flagged`).
pub(super) fn check_blocks(
    s: &Storage,
    whole: &WholeFile<'_>,
    flagged: &HashSet<u64>,
    report: &mut CheckReport,
) -> Result<Blocks> {
    let mut blocks = Blocks::default();
    // Free blocks by offset and length, for the saved free list.
    let mut free: HashMap<u64, u64> = HashMap::new();
    let appending = s.header.update_mode == UpdateMode::Appending;
    let end = s.space.end().min(s.file_len());
    let mut offset = s.header.data_start();
    while offset < end {
        let step = match s.scan_block(whole, offset) {
            Ok(Block::Filler) => s.zero_run(whole, offset).max(1),
            Ok(Block::FreeSpan { len }) if offset.saturating_add(len) <= end => {
                free.insert(offset, len);
                if s.header.check_layout() == CheckLayout::Wide {
                    check_span_inside(s, whole, offset, len, report);
                }
                len
            }
            Ok(Block::FreeSpan { len }) => {
                report.add(
                    Place::Record(offset),
                    format!("a free span of {len} bytes runs past the end of the records ({end})"),
                );
                break;
            }
            Ok(Block::Record(header)) => {
                let len = header.total_len();
                if offset.saturating_add(len) > end {
                    report.add(
                        Place::Record(offset),
                        format!("a {len}-byte block runs past the end of the records ({end})"),
                    );
                    break;
                }
                if header.next != 0 && header.next < s.header.data_start() {
                    // No writer points there; a restore's scan takes no such block either.
                    report.add(
                        Place::Record(offset),
                        format!("its chain pointer {} leads before the records", header.next),
                    );
                }
                let kind = header.kind();
                if kind == KIND_FREE {
                    free.insert(offset, len);
                } else {
                    // Whether intact or not: a chain should reach it, and the header count it.
                    blocks.linked.insert(offset);
                    blocks.live += u64::from(kind == KIND_RECORD);
                }
                match (kind, verifies(s, whole, offset, &header)) {
                    (_, false) if flagged.contains(&offset) => {}
                    (_, false) => report.add(Place::Record(offset), what_fails(kind)),
                    (KIND_FREE, true) if appending => {
                        report.add(Place::Record(offset), "a dead record in an appending file, which writes none")
                    }
                    (_, true) => {}
                }
                len
            }
            Err(e) => {
                report.add(
                    Place::Record(offset),
                    format!("no block can be read here ({}): the walk of the record area stops", e.message()),
                );
                break;
            }
        };
        offset = offset.saturating_add(step);
    }
    blocks.whole = offset >= end;
    check_free_list(s, whole, &free, blocks.whole, report)?;
    Ok(blocks)
}

/// What a block that fails its checksum is called in a problem.
fn what_fails(kind: u8) -> &'static str {
    match kind {
        KIND_RECORD => "checksum mismatch",
        KIND_TOMBSTONE => "a tombstone fails its checksum",
        _ => "a dead record fails its checksum",
    }
}

/// Whether the block at `offset` passes its checksum: a record or tombstone with its own
/// compressed flag, a dead record with either; a tombstone also has no value.
fn verifies(s: &Storage, whole: &WholeFile<'_>, offset: u64, header: &RecordHeader) -> bool {
    let Ok(key) = s.key_of(whole.chain(0), offset, header) else { return false };
    let hash = hash_key(key);
    match header.kind() {
        KIND_FREE => s.checksum_matches_either_way(whole, offset, header, hash),
        KIND_TOMBSTONE if header.value_len != 0 => false,
        _ => s.checksum_matches(whole, offset, header, hash, header.is_compressed()),
    }
}

/// Checks the inside of the free span at `at`, `len` bytes (see the module comment): from
/// the first dead record whose checksum holds, the blocks must follow each other to its end.
fn check_span_inside(s: &Storage, whole: &WholeFile<'_>, at: u64, len: u64, report: &mut CheckReport) {
    let span_end = at + len;
    let inside = at + 1 + varint_len(len) as u64;
    let is_intact_dead = |offset: u64| match s.scan_block(whole, offset) {
        Ok(Block::Record(header)) => {
            header.kind() == KIND_FREE
                && offset.saturating_add(header.total_len()) <= span_end
                && verifies(s, whole, offset, &header)
        }
        _ => false,
    };
    // The first record of the run, under the span's own tag and length; else the first intact
    // dead record further in.
    let anchored = (1..=MAX_NEXT_WIDTH).filter(|&width| width >= varint_len(len)).find_map(|width| {
        let bytes = s.raw_bytes(whole, at, 2 * MAX_HEADER_SIZE).ok()?;
        let header = RecordHeader::parse_beneath_span(bytes, at, width, CheckLayout::Wide)?;
        let record_end = at.checked_add(header.total_len()).filter(|&e| e <= span_end)?;
        let key = s.key_of(whole.chain(0), at, &header).ok()?;
        let value_at = at + (header.header_len + header.key_len) as u64;
        let value = s.raw_bytes(whole, value_at, header.value_len).ok().filter(|v| v.len() == header.value_len)?;
        let hash = hash_key(key);
        [false, true]
            .into_iter()
            .any(|compressed| header.verifies_beneath_span(checksum(hash, compressed, value)))
            .then_some(record_end)
    });
    let Some(first) = anchored.or_else(|| (inside..span_end).find(|&offset| is_intact_dead(offset))) else { return };
    let mut offset = first;
    while offset < span_end {
        let step = match s.scan_block(whole, offset) {
            Ok(Block::Filler) => 1,
            Ok(Block::FreeSpan { len }) => len,
            Ok(Block::Record(header)) if verifies(s, whole, offset, &header) => header.total_len(),
            _ => 0,
        };
        if step == 0 || offset.saturating_add(step) > span_end {
            report.add(
                Place::Record(offset),
                format!(
                    "inside the free span at {at}: the dead records kept there from {first} on are damaged here \
                     (no read meets them, a rebuild drops them)"
                ),
            );
            return;
        }
        offset += step;
    }
}

/// Checks the saved free-block list: its checksum, and that each entry names a free block
/// of the walk with its length (when the walk reached the end: else the blocks are unknown).
fn check_free_list(
    s: &Storage,
    whole: &WholeFile<'_>,
    free: &HashMap<u64, u64>,
    walked: bool,
    report: &mut CheckReport,
) -> Result<()> {
    let Some((bytes, holds)) = s.saved_free_list(whole)? else { return Ok(()) };
    if !holds {
        report.add(
            Place::Database,
            "the saved free-block list fails its checksum (an open ignores it: its blocks stay unused until a rebuild)",
        );
        return Ok(());
    }
    let mut entries = 0u64;
    for entry in free_list_entries(bytes) {
        entries += 1;
        let Some((offset, len)) = entry else {
            report.add(Place::Database, format!("the saved free-block list's entry {entries} is malformed"));
            return Ok(());
        };
        if walked && free.get(&offset) != Some(&len) {
            report.add(
                Place::Database,
                format!(
                    "the saved free-block list names {len} bytes at {offset}, which are no free block of that length"
                ),
            );
            return Ok(());
        }
    }
    Ok(())
}
