//! What the batched lookups (the `Dbm::get_many_with` overrides) share: how many keys they
//! overlap, how many the tree engines look up under one hold of their lock, and the order in
//! which a hash engine's group takes its locks.
//!
//! A lookup of a million-record table waits on one or two random memory loads. A batch
//! overlaps them: for a group of keys it first computes every hash and prefetches every
//! bucket, then (once those lines arrive) every chain head or record, and only then compares,
//! so the group pays for its misses about once instead of once per key (docs/get_many.md).

/// Keys looked up together. The L1's line fill buffers (10 to 16 on current x86) bound the
/// misses in flight, yet 32 keys ran up to 13% faster than 16 and nowhere slower (HashDbm
/// with sequential keys at 1M records 13%, HashDbm and TinyDbm with random keys at 10M 13%
/// and 9%): each key's stages wait on two or three dependent lines, and the L2 queues more
/// prefetches than the L1 has buffers. Smaller groups leave that parallelism unused.
pub const GROUP: usize = 32;

/// Keys a batch looks up under one hold of a lock that writers wait for (the tree engines'
/// one reader-writer lock): a writer then waits for one segment at most, not for a whole
/// large batch.
pub const SEGMENT: usize = 512;

/// The batch `keys` cut into groups of at most `size` keys, of nearly even sizes (a batch of
/// 17 in groups of 16 makes groups of 9 and 8, not 16 and a lone key whose misses overlap
/// with nothing), each with the index of its first key in the batch.
pub fn groups<'b, 'k>(keys: &'b [&'k [u8]], size: usize) -> impl Iterator<Item = (usize, &'b [&'k [u8]])> {
    let count = keys.len().div_ceil(size.max(1)).max(1);
    let size = keys.len().div_ceil(count).max(1);
    keys.chunks(size).enumerate().map(move |(number, group)| (number * size, group))
}

/// The common case of a group's locking (HashDbm, TinyDbm): each key's lock tried in the keys'
/// order, the i-th key's guard kept at `guards[i]` (a shared lock met twice is held twice),
/// nothing planned. False, with `guards` emptied, as soon as a try fails: a writer holds or
/// awaits that lock, and the group then takes its locks each once in ascending order
/// (`LockSet`), waiting. A try never waits, so this cannot deadlock, and a failed try leaves
/// the waiting writer ahead.
pub fn try_each_in_turn<G>(keys: usize, guards: &mut Vec<G>, mut try_lock: impl FnMut(usize) -> Option<G>) -> bool {
    guards.clear();
    for key in 0..keys {
        let Some(guard) = try_lock(key) else {
            guards.clear();
            return false;
        };
        guards.push(guard);
    }
    true
}

/// The most locks an engine may have for its batched lookups to plan with a `LockSet`
/// (HashDbm has 1,024 stripes; TinyDbm and CacheDbm 64 and 16 slots).
pub const MAX_LOCKS: usize = 1024;
const WORD_BITS: usize = u64::BITS as usize;
const WORDS: usize = MAX_LOCKS / WORD_BITS;

/// The locks (stripes, slots) a group needs, each once, as a bit set: collecting them costs
/// one bit each, where sorting and deduplicating a list cost more than the group's hashing.
///
/// A group takes them in ascending order (`LockSet::order`): engines that ever hold several
/// of their locks at once take them in ascending order too (HashDbm's `with_all`), and
/// single-key operations hold one, so no cycle of waits can form; taking each lock once also
/// keeps a reader from waiting on a lock it already holds behind a queued writer.
pub struct LockSet {
    words: [u64; WORDS],
    /// Which words hold a lock: a group's locks fill one word of TinyDbm's or CacheDbm's
    /// slots, so `order` reads and clears only those.
    used: u16,
}

const _: () = assert!(WORDS <= u16::BITS as usize, "a bit of `used` per word");

impl Default for LockSet {
    fn default() -> LockSet {
        LockSet { words: [0; WORDS], used: 0 }
    }
}

impl LockSet {
    /// Adds `lock` (below `MAX_LOCKS`; an engine's lock count is checked against it by a
    /// const assertion where the engine is defined).
    #[inline]
    pub fn insert(&mut self, lock: usize) {
        debug_assert!(lock < MAX_LOCKS, "lock {lock} of a lock set of {MAX_LOCKS}");
        if let Some(word) = self.words.get_mut(lock / WORD_BITS) {
            *word |= 1 << (lock % WORD_BITS);
            self.used |= 1 << (lock / WORD_BITS);
        }
    }

    /// The set, ready to be locked in order and searched; `self` is emptied for the next
    /// group.
    pub fn order(&mut self) -> LockOrder {
        let mut order = LockOrder { words: [0; WORDS], before: [0; WORDS], used: self.used };
        let mut count = 0u16;
        let mut used = u64::from(std::mem::take(&mut self.used));
        while let Some(index) = take_lowest_bit(&mut used) {
            if let (Some(word), Some(ordered), Some(before)) =
                (self.words.get_mut(index), order.words.get_mut(index), order.before.get_mut(index))
            {
                *ordered = std::mem::take(word);
                *before = count;
                count += ordered.count_ones() as u16;
            }
        }
        order
    }
}

/// The position of the lowest bit set in `bits`, cleared from it; None when none is set.
#[inline]
fn take_lowest_bit(bits: &mut u64) -> Option<usize> {
    let position = (*bits != 0).then(|| bits.trailing_zeros() as usize)?;
    *bits &= *bits - 1;
    Some(position)
}

/// A group's locks in ascending order, each once, with where each sits in that order.
pub struct LockOrder {
    words: [u64; WORDS],
    /// Which words hold a lock (as `LockSet::used`).
    used: u16,
    /// How many locks of the set lie in the words before each word.
    before: [u16; WORDS],
}

impl LockOrder {
    /// The locks, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let (mut used, mut index, mut rest) = (u64::from(self.used), 0, 0u64);
        std::iter::from_fn(move || {
            while rest == 0 {
                index = take_lowest_bit(&mut used)?;
                rest = self.words.get(index).copied().unwrap_or(0);
            }
            take_lowest_bit(&mut rest).map(|bit| index * WORD_BITS + bit)
        })
    }

    /// Where `lock` sits in `iter`'s order; None when it is not in the set.
    #[inline]
    pub fn position(&self, lock: usize) -> Option<usize> {
        let (index, bit) = (lock / WORD_BITS, lock % WORD_BITS);
        let word = *self.words.get(index)?;
        if word >> bit & 1 == 0 {
            return None;
        }
        let below = (word & ((1u64 << bit) - 1)).count_ones() as usize;
        Some(usize::from(*self.before.get(index)?) + below)
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on a wrong index")]
    use super::*;

    #[test]
    fn groups_cover_the_batch_in_order_evenly_and_within_the_group_size() {
        let keys: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        for (len, size) in (0..refs.len()).flat_map(|len| [(len, GROUP), (len, 16), (len, 1)]) {
            let batch = &refs[..len];
            let cut: Vec<(usize, &[&[u8]])> = groups(batch, size).collect();
            let mut next = 0;
            for (first, group) in &cut {
                assert_eq!(*first, next);
                assert!(!group.is_empty() && group.len() <= size);
                assert_eq!(*group, &batch[next..next + group.len()]);
                next += group.len();
            }
            assert_eq!(next, len);
            assert_eq!(cut.len(), len.div_ceil(size));
            let sizes: Vec<usize> = cut.iter().map(|(_, g)| g.len()).collect();
            if let (Some(most), Some(least)) = (sizes.iter().max(), sizes.iter().min()) {
                assert!(most - least <= 1 || *least == sizes[sizes.len() - 1], "{len}: {sizes:?}");
            }
        }
    }

    /// A lock set orders and numbers its locks as a sorted, deduplicated list would, for
    /// random groups with repeats over the whole range (the first and last lock included).
    #[test]
    fn a_lock_set_orders_and_numbers_its_locks_as_a_sorted_list_does() {
        let mut set = LockSet::default();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2_000 {
            let mut list: Vec<usize> = Vec::new();
            for _ in 0..round % 40 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let lock = match seed % 10 {
                    0 => 0,
                    1 => MAX_LOCKS - 1,
                    2 => (seed >> 8) as usize % 64,
                    _ => (seed >> 8) as usize % MAX_LOCKS,
                };
                set.insert(lock);
                list.push(lock);
            }
            list.sort_unstable();
            list.dedup();
            let order = set.order();
            assert_eq!(order.iter().collect::<Vec<_>>(), list, "round {round}");
            for lock in 0..MAX_LOCKS {
                assert_eq!(order.position(lock), list.binary_search(&lock).ok(), "round {round}, lock {lock}");
            }
        }
    }
}
