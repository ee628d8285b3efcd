//! The key hash both in-memory hash tables use (TinyDbm's open table, CacheDbm's chained
//! table), and how a hash picks one of the sharded engines' slots.
//!
//! One function for both tables keeps their slot choice and their bucket choice independent
//! in the same way: the high half of the hash picks the slot, the low half the bucket or cell.

use xxhash_rust::xxh3::xxh3_64;

/// The 64-bit hash of a key (both hash engines). Its high half selects the slot, its low half
/// the bucket or cell, so the two choices are independent.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// Which of `num_slots` slots a hash falls in (multiply-shift: no power of two needed).
#[inline]
pub fn slot_of(hash: u64, num_slots: usize) -> usize {
    (((hash >> 32) * num_slots as u64) >> 32) as usize
}
