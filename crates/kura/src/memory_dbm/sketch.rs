//! The access-frequency estimate behind CacheDbm's `policy=tinylfu` admission (TinyLFU,
//! Einziger, Friedman and Manes, 2017): a count-min sketch of 4-bit counters with a doorkeeper
//! bit set in front, aged by halving, one per slot and used under the slot's lock.
//!
//! Why: under skewed (Zipf) keys plain LRU lets every one-off key push out a record that is
//! requested far more often. With this estimate the slot admits a new key only if it has been
//! asked for more often, recently, than the record it would evict.
//!
//! How: `record` counts one access of a key hash. A key's first access after an aging only sets
//! its doorkeeper bits (a small Bloom filter), so the many keys seen once never reach the
//! counters; later accesses increment the key's counters. The counters are a count-min sketch
//! of 4 rows; the 4 counters of a key sit in one 64-byte block (one cache line), each in a
//! different pair of words, and only those equal to the key's current minimum are incremented
//! (conservative update: it never under-counts and over-counts less). `estimate` is the
//! minimum of the 4 counters plus the doorkeeper bit, so at most 16. After `sample_size`
//! increments (10x the slot's record cap; accesses stopped by the doorkeeper or by saturated
//! counters do not count, as in Caffeine, so the hottest keys do not hasten it) every counter
//! is halved and the doorkeeper cleared, so that old popularity fades and the estimates follow
//! the recent workload.
//!
//! Memory: `COUNTERS_PER_RECORD` 4-bit counters and `DOORKEEPER_BITS_PER_RECORD` bits per record
//! of the cap (12 bytes), rounded up to powers of two: `bytes()` is counted in the slot's
//! accounted memory. The sizes were chosen with kura-cache-bench (docs/memory.md): 8 counters
//! or 8 doorkeeper bits per record cost about 0.002 of hit ratio at Zipf 0.99; twice as many of
//! either gain under 0.0005.

/// Counters of the sketch per record of the slot's cap (before rounding up to a power of two
/// of 64-byte blocks): each key raises 4 of them, and 16 per key of the cap (as Caffeine's
/// sketch) keep over-counting rare.
const COUNTERS_PER_RECORD: usize = 16;

/// Doorkeeper bits per record of the cap (a Bloom filter setting 2 bits per key): it is only
/// cleared by aging, so it must stay sparse over a whole sample of distinct keys.
const DOORKEEPER_BITS_PER_RECORD: usize = 32;

/// Counter increments between two agings, per record of the cap (the TinyLFU paper's W/C).
const SAMPLE_PER_RECORD: usize = 10;

/// The most 64-byte blocks a sketch takes (16 MiB, enough for 2M records at full precision;
/// more share counters): a huge `cap_rec_num` must not ask for an absurd table.
const MAX_BLOCKS: usize = 1 << 18;

/// Bits of each 4-bit counter but the top one: `(word >> 1) & HALVE_MASK` halves 16 counters.
const HALVE_MASK: u64 = 0x7777_7777_7777_7777;

/// One cache line of counters: 8 words of 16 counters; row `r` of the sketch uses words
/// `2r` and `2r + 1`.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Block([u64; 8]);

pub struct FrequencySketch {
    /// Invariant: a power of two in length, at least 1.
    blocks: Box<[Block]>,
    /// Invariant: a power of two in length, at least 1.
    doorkeeper: Box<[u64]>,
    /// Counter increments since the last aging; below `sample_size` between calls.
    additions: usize,
    sample_size: usize,
}

/// Spreads the key hash (whose high bits also chose the slot, so are nearly constant within
/// one) over all 64 bits: the SplitMix64 finalizer, a bijection.
#[inline]
fn spread(hash: u64) -> u64 {
    crate::split_mix::mix(hash ^ (hash >> 31) ^ 0x9e37_79b9_7f4a_7c15)
}

/// Where one key's 4 counters are: its block, and for each row the word (0..8) and the shift
/// of the nibble in it. Bits 0..20 of `spread` pick words and nibbles, bits 32.. the block;
/// the doorkeeper uses bits 20..32 and a second mix.
#[inline]
fn counter_positions(spread: u64, block_mask: usize) -> (usize, [(usize, u32); 4]) {
    let block = (spread >> 32) as usize & block_mask;
    let position = |row: usize| {
        let bits = spread >> (row * 5);
        (row * 2 + (bits & 1) as usize, ((bits >> 1) & 15) as u32 * 4)
    };
    (block, [position(0), position(1), position(2), position(3)])
}

impl FrequencySketch {
    /// A sketch for a slot that holds at most `cap_records` records.
    pub fn new(cap_records: usize) -> FrequencySketch {
        let counters = cap_records.max(1).saturating_mul(COUNTERS_PER_RECORD);
        let num_blocks = counters.div_ceil(128).clamp(1, MAX_BLOCKS).next_power_of_two();
        let doorkeeper_bits = cap_records.max(1).saturating_mul(DOORKEEPER_BITS_PER_RECORD);
        let doorkeeper_words = doorkeeper_bits.div_ceil(64).clamp(1, MAX_BLOCKS * 8).next_power_of_two();
        debug_assert!(num_blocks.is_power_of_two() && doorkeeper_words.is_power_of_two());
        FrequencySketch {
            blocks: vec![Block::default(); num_blocks].into_boxed_slice(),
            doorkeeper: vec![0; doorkeeper_words].into_boxed_slice(),
            additions: 0,
            sample_size: cap_records.max(1).saturating_mul(SAMPLE_PER_RECORD),
        }
    }

    /// The bytes the sketch holds, for the slot's memory accounting (fixed at creation).
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.blocks) + std::mem::size_of_val(&*self.doorkeeper)
    }

    /// The doorkeeper word of a key and the mask of its 2 bits.
    #[inline]
    fn doorkeeper_bits(&self, spread: u64) -> (usize, u64) {
        let mixed = (spread >> 20).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let word = (mixed >> 40) as usize & (self.doorkeeper.len() - 1);
        (word, (1 << (mixed & 63)) | (1 << ((mixed >> 6) & 63)))
    }

    fn in_doorkeeper(&self, spread: u64) -> bool {
        let (word, mask) = self.doorkeeper_bits(spread);
        self.doorkeeper.get(word).is_some_and(|w| w & mask == mask)
    }

    /// The minimum of a key's 4 counters.
    fn counted(&self, spread: u64) -> u64 {
        let (block, positions) = counter_positions(spread, self.blocks.len() - 1);
        let Some(Block(words)) = self.blocks.get(block) else { return 0 };
        positions.iter().map(|&(word, shift)| words.get(word).map_or(0, |w| (w >> shift) & 15)).min().unwrap_or(0)
    }

    /// How often the key of this hash was recorded lately, 0..=16.
    pub fn estimate(&self, hash: u64) -> u8 {
        let spread = spread(hash);
        (self.counted(spread) + u64::from(self.in_doorkeeper(spread))) as u8
    }

    /// Counts one access to the key of this hash; ages the sketch every `sample_size`
    /// increments.
    pub fn record(&mut self, hash: u64) {
        let spread = spread(hash);
        let (word, mask) = self.doorkeeper_bits(spread);
        let admitted_by_doorkeeper = match self.doorkeeper.get_mut(word) {
            Some(bits) if *bits & mask != mask => {
                *bits |= mask;
                false
            }
            _ => true,
        };
        if admitted_by_doorkeeper {
            let minimum = self.counted(spread);
            if minimum < 15 {
                let (block, positions) = counter_positions(spread, self.blocks.len() - 1);
                if let Some(Block(words)) = self.blocks.get_mut(block) {
                    for (word, shift) in positions {
                        if let Some(w) = words.get_mut(word) {
                            // Conservative update: only the counters at the minimum grow
                            // (a counter shared by two rows of the key is raised once).
                            if (*w >> shift) & 15 == minimum {
                                *w += 1 << shift;
                            }
                        }
                    }
                }
                self.additions += 1;
                if self.additions >= self.sample_size {
                    self.age();
                }
            }
        }
    }

    /// Halves every counter and clears the doorkeeper.
    pub fn age(&mut self) {
        for Block(words) in self.blocks.iter_mut() {
            for word in words.iter_mut() {
                *word = (*word >> 1) & HALVE_MASK;
            }
        }
        self.doorkeeper.fill(0);
        self.additions = 0;
    }

    /// Forgets every access (the slot was cleared).
    pub fn clear(&mut self) {
        self.blocks.fill(Block::default());
        self.doorkeeper.fill(0);
        self.additions = 0;
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use std::collections::HashMap;

    fn hash_of(key: u64) -> u64 {
        crate::memory_dbm::key_hash::hash_key(&key.to_be_bytes())
    }

    #[test]
    fn never_under_counts_before_aging() {
        let cap = 1000;
        let mut sketch = FrequencySketch::new(cap);
        let mut counts: HashMap<u64, u64> = HashMap::new();
        let mut rng = crate::split_mix::SplitMix64::new(7);
        // Fewer recorded accesses than the sample size, so no aging happens.
        for _ in 0..cap * SAMPLE_PER_RECORD - 1 {
            let state = rng.next_u64();
            // Skewed: small keys come up far more often.
            let key = (state >> 33) % ((state >> 20) % 1500 + 1);
            sketch.record(hash_of(key));
            *counts.entry(key).or_default() += 1;
        }
        // `additions` counts only counter increments, at most one per call: no aging yet.
        assert!(sketch.additions > 0 && sketch.additions < sketch.sample_size);
        for (&key, &count) in &counts {
            let estimate = u64::from(sketch.estimate(hash_of(key)));
            assert!(estimate >= count.min(16), "key {key}: estimate {estimate} < count {count}");
        }
        // Keys never recorded mostly read 0: the sketch is not saturated.
        let unseen = (1_000_000..1_001_000u64).filter(|&k| sketch.estimate(hash_of(k)) == 0).count();
        assert!(unseen > 800, "only {unseen} of 1000 unseen keys estimate 0");
    }

    #[test]
    fn aging_halves_the_counters() {
        let mut sketch = FrequencySketch::new(100);
        let hot = hash_of(1);
        for _ in 0..11 {
            sketch.record(hot);
        }
        // First access in the doorkeeper, then 10 counted.
        assert_eq!(sketch.estimate(hot), 11);
        sketch.age();
        assert_eq!(sketch.estimate(hot), 5, "10 halved, doorkeeper cleared");
        for _ in 0..40 {
            sketch.record(hot);
        }
        assert_eq!(sketch.estimate(hot), 16, "counters saturate at 15, plus the doorkeeper bit");
        sketch.age();
        assert_eq!(sketch.estimate(hot), 7);
    }

    #[test]
    fn ages_by_itself_after_the_sample() {
        let cap = 50;
        let mut sketch = FrequencySketch::new(cap);
        let hot = hash_of(3);
        for _ in 0..9 {
            sketch.record(hot);
        }
        // The first access only set the doorkeeper bits: 8 increments.
        assert_eq!((sketch.estimate(hot), sketch.additions), (9, 8));
        // Other keys, twice each (the second access increments), until the sample is full.
        let mut others = 1_000_000u64..;
        while sketch.additions != 0 {
            let key = hash_of(others.next().unwrap());
            sketch.record(key);
            sketch.record(key);
        }
        assert!(others.next().unwrap() < 1_000_000 + cap as u64 * SAMPLE_PER_RECORD as u64);
        // Keys counted once or twice cannot raise a counter of 8 (conservative update), so
        // the hot key's counters are exactly halved, and the doorkeeper is empty.
        assert_eq!(sketch.estimate(hot), 4);
    }

    #[test]
    fn bytes_follow_the_cap() {
        // 16 counters of 4 bits + 32 doorkeeper bits = 12 bytes per record, rounded up.
        let sketch = FrequencySketch::new(1024);
        assert_eq!(sketch.bytes(), 8 * 1024 + 4 * 1024);
        assert!(FrequencySketch::new(1).bytes() <= 64 + 8);
        sketch.blocks.iter().for_each(|b| assert_eq!(std::mem::align_of_val(b), 64));
    }
}
