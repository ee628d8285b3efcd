//! The keys, values and random numbers of the benchmarks, defined as `tkrzw_dbm_perf`
//! defines them so that both programs do the same work.

/// The generator of random keys and of the dictionary benchmark's shuffle. The C++ drivers
/// (`bench/split_mix.h`, used by `bench/tkrzw_get.cc` and `bench/leveldb_sequence.cc`)
/// implement the same one, so both sides draw and shuffle keys into the same order.
pub use kura::split_mix::SplitMix64;

/// The seed of the dictionary benchmark's shuffle (also in `bench/tkrzw_get.cc`).
pub const SHUFFLE_SEED: u64 = 0x6b75_7261; // "kura"

/// Shuffles in place, as `bench/tkrzw_get.cc` does with the same seed.
pub fn shuffle<T>(items: &mut [T], seed: u64) {
    SplitMix64::new(seed).shuffle(items);
}

/// Writes `number` as at least eight decimal digits, zero-padded: `sprintf("%08d")`.
pub fn format_key(number: u64, out: &mut Vec<u8>) {
    out.clear();
    let mut digits = [b'0'; 20];
    let mut rest = number;
    let mut used = 0;
    for slot in digits.iter_mut().rev() {
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
        used += 1;
        if rest == 0 && used >= 8 {
            break;
        }
    }
    out.extend_from_slice(digits.get(digits.len() - used..).unwrap_or_default());
}

/// The distance between value offsets, as in Tkrzw: a prime, so offsets vary a lot.
const VALUE_SPREAD: usize = 2039;

/// A thread's value source: a patterned buffer that each operation takes a window of.
pub struct Values {
    pattern: Vec<u8>,
    size: usize,
}

impl Values {
    pub fn new(thread_id: usize, size: usize) -> Values {
        let pattern = (0..size + VALUE_SPREAD)
            .map(|j| {
                let period = if j % 2 == 1 { 26 } else { 9 };
                b'a' + ((thread_id + j) % period) as u8
            })
            .collect();
        Values { pattern, size }
    }

    /// The value of the `i`-th operation: the window at `(i * (i + 1)) mod 2039`, computed
    /// with the 32-bit truncation Tkrzw applies.
    pub fn get(&self, i: u64) -> &[u8] {
        let offset = (i.wrapping_mul(i.wrapping_add(1)) as u32 % VALUE_SPREAD as u32) as usize;
        self.pattern.get(offset..offset + self.size).unwrap_or_default()
    }
}

/// Which key number the `i`-th operation of a thread uses.
pub enum KeyOrder {
    /// Threads interleave: thread t takes t, t + threads, t + 2*threads, ...
    Sequential { thread_id: u64, threads: u64 },
    /// Uniform over all keys, from a generator seeded by the thread id, so every phase
    /// draws the same keys and gets find what sets stored.
    Random { rng: SplitMix64, key_count: u64 },
}

impl KeyOrder {
    pub fn new(random: bool, thread_id: usize, threads: usize, iterations: u64) -> KeyOrder {
        if random {
            KeyOrder::Random {
                rng: SplitMix64::new(thread_id as u64),
                key_count: iterations.saturating_mul(threads as u64),
            }
        } else {
            KeyOrder::Sequential { thread_id: thread_id as u64, threads: threads as u64 }
        }
    }

    pub fn key_number(&mut self, i: u64) -> u64 {
        match self {
            KeyOrder::Sequential { thread_id, threads } => i * *threads + *thread_id,
            KeyOrder::Random { rng, key_count } => rng.below(*key_count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_zero_padded_to_eight_digits() {
        let mut key = Vec::new();
        format_key(42, &mut key);
        assert_eq!(key, b"00000042");
        format_key(123_456_789, &mut key);
        assert_eq!(key, b"123456789");
        format_key(0, &mut key);
        assert_eq!(key, b"00000000");
        format_key(u64::MAX, &mut key);
        assert_eq!(key, u64::MAX.to_string().as_bytes());
    }

    #[test]
    fn values_follow_the_pattern() {
        let values = Values::new(0, 8);
        // i = 0 -> offset 0: j even -> 'a' + j % 9, j odd -> 'a' + j % 26
        assert_eq!(values.get(0), b"abcdefgh");
        assert_eq!(values.get(1).len(), 8);
        // offset for i = 100000: 100000 * 100001 truncated to u32, mod 2039
        let offset = ((100_000u64 * 100_001) as u32 % 2039) as usize;
        let expected: Vec<u8> =
            (offset..offset + 8).map(|j| b'a' + (j % if j % 2 == 1 { 26 } else { 9 }) as u8).collect();
        assert_eq!(values.get(100_000), &expected[..]);
    }
}
