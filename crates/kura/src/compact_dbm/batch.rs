//! `write_batch`, the bulk path (`kura import` hands records over in batches): the batch's
//! operations are grouped by lock group and bucket first, so each group is locked once and
//! each bucket decoded and encoded once per batch rather than once per record. A bulk batch
//! replaces a group's blocks at once (`Group::apply_bulk`).
//!
//! Order is kept: within a bucket the operations are stably sorted by key, and of several on
//! one key the last wins, as if they had been applied one by one.

use std::ops::Range;

use super::bucket::Edit;
use super::group::{with_scratch, GroupCell};
use super::options;
use crate::batch::WriteBatch;
use crate::codec::Effort;
use crate::error::Result;
use crate::memory_dbm::key_hash::{hash_key, slot_of};
use crate::memory_dbm::slotted::Padded;

/// A batch at least this long is a bulk load (`kura import` hands over thousands of records
/// at a time): it is encoded at the codec's dense level, and after it the codec's pooled
/// compression contexts are freed. A shorter batch is encoded at the quick level, as single
/// writes are (`codec/effort.rs`).
pub const BULK_RECORDS: usize = 4096;

/// One operation of the batch: its hash and where it is in the batch.
struct Placed {
    group: usize,
    hash: u64,
    op: usize,
}

pub fn apply(groups: &[Padded<GroupCell>], batch: &WriteBatch) -> Result<()> {
    for op in batch.ops() {
        options::check_sizes(op.key(), op.value())?;
    }
    let effort = if batch.len() >= BULK_RECORDS { Effort::Dense } else { Effort::Quick };
    let mut placed: Vec<Placed> = batch
        .ops()
        .enumerate()
        .map(|(op, batch_op)| {
            let hash = hash_key(batch_op.key());
            Placed { group: slot_of(hash, groups.len()), hash, op }
        })
        .collect();
    placed.sort_by_key(|p| p.group);
    let mut rest = placed.as_slice();
    let mut bucketed: Vec<(usize, Edit<'_>)> = Vec::new();
    let mut edits: Vec<Edit<'_>> = Vec::new();
    // Each bucket's edits: (bucket, their range in `edits`), in ascending bucket order.
    let mut runs: Vec<(usize, Range<usize>)> = Vec::new();
    let mut staging = Vec::new();
    while let Some(first) = rest.first() {
        let in_group = rest.iter().take_while(|p| p.group == first.group).count();
        let (these, after) = rest.split_at(in_group);
        rest = after;
        let Some(cell) = groups.get(first.group) else { continue };
        let mut group = cell.lock.write();
        bucketed.clear();
        for p in these {
            let Some(op) = batch.op(p.op) else { continue };
            bucketed.push((group.bucket_of(p.hash), (op.key(), op.value())));
        }
        // Stable: operations on one key keep their batch order, and the last one wins below.
        bucketed.sort_by(|a, b| (a.0, a.1 .0).cmp(&(b.0, b.1 .0)));
        edits.clear();
        runs.clear();
        for &(bucket, (key, value)) in &bucketed {
            match (runs.last_mut(), edits.last_mut()) {
                (Some((last_bucket, _)), Some(last)) if *last_bucket == bucket && last.0 == key => *last = (key, value),
                (Some((last_bucket, range)), _) if *last_bucket == bucket => {
                    edits.push((key, value));
                    range.end = edits.len();
                }
                _ => {
                    edits.push((key, value));
                    runs.push((bucket, edits.len() - 1..edits.len()));
                }
            }
        }
        let of_bucket =
            |(bucket, range): &(usize, Range<usize>)| (*bucket, edits.get(range.clone()).unwrap_or_default());
        with_scratch(|scratch| match effort {
            Effort::Dense => group.apply_bulk(runs.iter().map(of_bucket), effort, &mut staging, scratch),
            Effort::Quick => runs
                .iter()
                .map(of_bucket)
                .try_for_each(|(bucket, bucket_edits)| group.apply_edits(bucket, bucket_edits, effort, scratch)),
        })?;
        let mut cache = cell.cache.lock();
        for (bucket, _) in &runs {
            cache.invalidate(*bucket);
        }
    }
    Ok(())
}
