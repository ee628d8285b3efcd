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
