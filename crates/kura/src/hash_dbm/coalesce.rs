//! Merging adjacent free blocks into one, so that freed space is reused for records of any
//! size rather than only for ones no larger than the records it held.
//!
//! Without it, each reuse of a block leaves its remainder behind as a smaller block, and
//! blocks too small for any record pile up: a workload that rewrites the same keys with
//! values of varying sizes grew its file without bound. Blocks are merged when records
//! freed since the last hard synchronization are settled (`Storage::synchronize`): those
//! with each other always, and with the whole free pool whenever the pool has doubled since
//! it was last merged, so that the cost stays proportional to the blocks freed.

/// A free block made of one or more adjacent blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub offset: u64,
    pub len: u64,
    /// The free-pool shard it goes to: the first block's.
    pub shard: usize,
    /// More than one block: it needs a free-span tag of its own over all of them.
    pub merged: bool,
}

/// Merges `blocks` (offset, len, shard), sorted here by offset, into runs of blocks that
/// follow each other without a gap.
pub fn merge_adjacent(blocks: &mut [(u64, u64, usize)]) -> Vec<Run> {
    blocks.sort_unstable_by_key(|&(offset, _, _)| offset);
    let mut runs: Vec<Run> = Vec::with_capacity(blocks.len());
    for &(offset, len, shard) in blocks.iter() {
        debug_assert!(
            runs.last().is_none_or(|run| run.offset + run.len <= offset),
            "free block at {offset} ({len} bytes) overlaps {:?}",
            runs.last()
        );
        match runs.last_mut() {
            Some(run) if run.offset + run.len == offset => {
                run.len += len;
                run.merged = true;
            }
            _ => runs.push(Run { offset, len, shard, merged: false }),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_blocks_merge() {
        let mut blocks = vec![(150, 10, 1), (100, 50, 2), (170, 5, 3), (160, 5, 4), (300, 1, 5)];
        let run = |offset, len, shard, merged| Run { offset, len, shard, merged };
        assert_eq!(
            merge_adjacent(&mut blocks),
            vec![run(100, 65, 2, true), run(170, 5, 3, false), run(300, 1, 5, false)]
        );
    }
}
