//! What the batched lookups (the `Dbm::get_many_with` overrides of the hash engines) share:
//! how many keys they overlap, and the order in which a group takes its locks.
//!
//! A lookup of a million-record table waits on one or two random memory loads. A batch
//! overlaps them: for a group of keys it first computes every hash and prefetches every
//! bucket, then (once those lines arrive) every chain head or record, and only then compares,
//! so the group pays for its misses about once instead of once per key (docs/get_many.md).

/// Keys looked up together. The misses in flight are bounded by the core's line fill
/// buffers (10 to 16 on current x86), so larger groups overlap no more; smaller ones leave
/// some of that parallelism unused.
pub const GROUP: usize = 16;

/// The batch `keys` cut into groups of at most `GROUP` keys, of nearly even sizes (a batch of
/// 17 makes groups of 9 and 8, not 16 and a lone key whose misses overlap with nothing),
/// each with the index of its first key in the batch.
pub fn groups<'b, 'k>(keys: &'b [&'k [u8]]) -> impl Iterator<Item = (usize, &'b [&'k [u8]])> {
    let count = keys.len().div_ceil(GROUP).max(1);
    let size = keys.len().div_ceil(count).max(1);
    keys.chunks(size).enumerate().map(move |(number, group)| (number * size, group))
}

/// Sorts lock indices (stripes, slots) ascending and drops repeats. A group takes each lock
/// it needs once, in this order: engines that ever hold several of their locks at once take
/// them in ascending order too (HashDbm's `with_all`), and single-key operations hold one,
/// so no cycle of waits can form; taking each lock once also keeps a reader from waiting on
/// a lock it already holds behind a queued writer.
pub fn lock_order(indices: &mut Vec<usize>) {
    indices.sort_unstable();
    indices.dedup();
}

/// Where `lock` sits in a list made by `lock_order` (which holds it).
#[inline]
pub fn position(locks: &[usize], lock: usize) -> Option<usize> {
    locks.binary_search(&lock).ok()
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on a wrong index")]
    use super::*;

    #[test]
    fn groups_cover_the_batch_in_order_evenly_and_within_the_group_size() {
        let keys: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        for len in 0..refs.len() {
            let batch = &refs[..len];
            let cut: Vec<(usize, &[&[u8]])> = groups(batch).collect();
            let mut next = 0;
            for (first, group) in &cut {
                assert_eq!(*first, next);
                assert!(!group.is_empty() && group.len() <= GROUP);
                assert_eq!(*group, &batch[next..next + group.len()]);
                next += group.len();
            }
            assert_eq!(next, len);
            assert_eq!(cut.len(), len.div_ceil(GROUP));
            let sizes: Vec<usize> = cut.iter().map(|(_, g)| g.len()).collect();
            if let (Some(most), Some(least)) = (sizes.iter().max(), sizes.iter().min()) {
                assert!(most - least <= 1 || *least == sizes[sizes.len() - 1], "{len}: {sizes:?}");
            }
        }
    }
}
