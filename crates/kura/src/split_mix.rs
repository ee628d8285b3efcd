//! SplitMix64: the one pseudo-random generator and 64-bit mixer of the project.
//!
//! Kura needs reproducible, well-spread numbers in a few places: the record sample that trains
//! a zstd dictionary (the same input must train the same dictionary), the TinyLFU sketch's
//! counter positions, the random operation sequences of the tests, and the key orders and
//! shuffles of the benchmarks (whose C++ drivers implement the same generator, in
//! `bench/split_mix.h`, so that both sides read keys in the same order). None of them needs a
//! cryptographic or seedable-trait generator, so a dozen lines here serve them all instead of
//! a dependency.

/// The increment of the state: the golden ratio's 64-bit fraction, odd, so the state visits
/// every value.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function: a bijection on `u64` that spreads every input bit over the
/// whole output, so distinct inputs stay distinct and neighbours land far apart.
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generator: a counter stepped by `GAMMA`, each step passed through `mix`.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`: the same seed gives the same sequence.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }

    /// A number in `0..bound` (Lemire's multiply-shift, without the rejection step: the bias
    /// is below `bound / 2^64`). `bound` 0 yields 0.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// A uniform number in [0, 1) with 53 bits of precision.
    #[cfg(feature = "internals")]
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Shuffles `items` in place with Fisher-Yates, walking down from the last element.
    #[cfg(feature = "internals")]
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for last in (1..items.len()).rev() {
            let other = self.below(last as u64 + 1) as usize;
            items.swap(last, other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sequence() {
        // The first outputs for seed 0 of the reference C implementation (Vigna's
        // splitmix64.c), which bench/split_mix.h must also produce.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn below_stays_in_bounds_and_reaches_both_ends() {
        let mut rng = SplitMix64::new(9);
        let draws: Vec<u64> = (0..10_000).map(|_| rng.below(10)).collect();
        assert!(draws.iter().all(|d| *d < 10));
        assert!(draws.contains(&0) && draws.contains(&9));
        assert_eq!(rng.below(0), 0);
    }

    #[test]
    fn shuffle_is_a_fixed_permutation() {
        let mut a: Vec<u32> = (0..1000).collect();
        let mut b = a.clone();
        SplitMix64::new(3).shuffle(&mut a);
        SplitMix64::new(3).shuffle(&mut b);
        assert_eq!(a, b);
        assert_ne!(a, (0..1000).collect::<Vec<u32>>());
        a.sort_unstable();
        assert_eq!(a, (0..1000).collect::<Vec<u32>>());
    }
}
