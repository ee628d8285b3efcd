//! `write_batch`, the bulk path (`kura import` hands records over in batches): the batch's
//! operations are grouped by lock group and bucket first, so each group is locked once and
//! each bucket decoded and encoded once per batch rather than once per record.
//!
//! Order is kept: within a bucket the operations are stably sorted by key, and of several on
//! one key the last wins, as if they had been applied one by one.

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
        let mut start = 0;
        while let Some(&(bucket, _)) = bucketed.get(start) {
            let run = bucketed.get(start..).unwrap_or_default().iter().take_while(|e| e.0 == bucket).count();
            edits.clear();
            for &(_, (key, value)) in bucketed.get(start..start + run).unwrap_or_default() {
                match edits.last_mut() {
                    Some(last) if last.0 == key => *last = (key, value),
                    _ => edits.push((key, value)),
                }
            }
            with_scratch(|scratch| group.apply_edits(bucket, &edits, effort, scratch))?;
            cell.cache.lock().invalidate(bucket);
            start += run;
        }
    }
    Ok(())
}
