//! Which shard a key lives in: part of the on-disk layout, so it never changes.
//!
//! The engines hash keys with `xxh3_64` (seed 0) to pick buckets and slots. Routing with the
//! same hash would hand each shard only keys whose hashes share their high bits, so every
//! shard's buckets would fill in the same narrow band. A different seed makes the shard
//! choice independent of the bucket choice (Tkrzw uses a secondary hash for the same reason).

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The seed of the routing hash ("kuraSHRD" in ASCII). Changing it moves every key.
pub const SHARD_SEED: u64 = 0x6b75_7261_5348_5244;

/// The shard of `key` among `num_shards`: `xxh3_64_with_seed(key, SHARD_SEED) * num_shards
/// / 2^64` (multiply-shift, no division, even spread for any count).
#[inline]
pub fn shard_of(key: &[u8], num_shards: usize) -> usize {
    let hash = xxh3_64_with_seed(key, SHARD_SEED);
    ((u128::from(hash) * num_shards as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_spread_evenly_and_stay_in_range() {
        let mut counts = [0u32; 7];
        for i in 0..70_000u32 {
            let shard = shard_of(format!("{i:08}").as_bytes(), counts.len());
            if let Some(count) = counts.get_mut(shard) {
                *count += 1;
            }
        }
        assert_eq!(counts.iter().sum::<u32>(), 70_000, "every key lands in range");
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        assert_eq!(shard_of(b"anything", 1), 0);
    }
}
