//! The records every store is given: 24-byte keys and 150-byte values of random bytes, as in
//! redb's `lmdb_benchmark`, from a fixed-seed SplitMix64. Record `i` is a pure function of `i`
//! (SplitMix64's state is a counter, so the generator jumps to any record at once): a phase
//! that reads, ranges or removes the records written before regenerates their keys, and the
//! threads of a multi-threaded read start at their own shard without replaying the others.

/// Bytes of a key.
pub const KEY_SIZE: usize = 24;
/// Bytes of a value.
pub const VALUE_SIZE: usize = 150;

/// A key.
pub type Key = [u8; KEY_SIZE];

/// One record.
#[derive(Clone, Copy)]
pub struct Record {
    pub key: Key,
    pub value: [u8; VALUE_SIZE],
}

/// One operation of a write.
pub enum Op {
    Set(Record),
    Remove(Key),
}

const SEED: u64 = 3;
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
/// Words drawn per record: 3 for the key, 19 (152 bytes, 150 used) for the value.
const KEY_WORDS: u64 = 3;
const WORDS: u64 = KEY_WORDS + VALUE_SIZE.div_ceil(8) as u64;

/// SplitMix64 (Steele, Lea and Flood), the generator of java.util.SplittableRandom.
struct SplitMix {
    state: u64,
}

impl SplitMix {
    fn at(record: u64) -> SplitMix {
        SplitMix { state: SEED.wrapping_add(record.wrapping_mul(WORDS).wrapping_mul(GAMMA)) }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// The key of record `i`.
pub fn key(i: u64) -> Key {
    let mut key = [0; KEY_SIZE];
    SplitMix::at(i).fill(&mut key);
    key
}

/// Record `i`.
pub fn record(i: u64) -> Record {
    let mut rng = SplitMix::at(i);
    let mut record = Record { key: [0; KEY_SIZE], value: [0; VALUE_SIZE] };
    rng.fill(&mut record.key);
    rng.fill(&mut record.value);
    record
}

/// A value's contribution to a read's checksum: all of its bytes count, so that a store that
/// returned the wrong value, or a short one, fails the check.
///
/// Whole 8-byte words are read as such and only the tail is copied: copying each word into
/// a buffer of its own compiled to a call of memcpy per word, which took 28% of TreeDbm's
/// range-read phase (and as much of every other store's), all of it the harness's.
pub fn checksum(value: &[u8]) -> u64 {
    let mix = |sum: u64, word: u64| sum.wrapping_mul(31).wrapping_add(word);
    let words = value.chunks_exact(8);
    let tail = words.remainder();
    let sum =
        words.fold(value.len() as u64, |sum, chunk| mix(sum, u64::from_le_bytes(chunk.try_into().unwrap_or_default())));
    if tail.is_empty() {
        return sum;
    }
    let mut word = [0; 8];
    word[..tail.len()].copy_from_slice(tail);
    mix(sum, u64::from_le_bytes(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time checksum gives what the first one (a buffer per word) gave, whose
    /// figures the recorded results' checksums are.
    #[test]
    fn the_checksum_is_the_one_the_results_recorded() {
        let reference = |value: &[u8]| {
            value.chunks(8).fold(value.len() as u64, |sum, chunk| {
                let mut word = [0; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                sum.wrapping_mul(31).wrapping_add(u64::from_le_bytes(word))
            })
        };
        let r = record(7);
        for len in 0..=VALUE_SIZE {
            assert_eq!(checksum(&r.value[..len]), reference(&r.value[..len]), "length {len}");
        }
    }

    #[test]
    fn a_record_is_the_same_wherever_the_generator_starts() {
        let r = record(12_345);
        assert_eq!(r.key, key(12_345));
        assert_ne!(r.key, key(12_346));
        assert_ne!(&r.value[..KEY_SIZE], &record(12_346).value[..KEY_SIZE]);
    }
}
