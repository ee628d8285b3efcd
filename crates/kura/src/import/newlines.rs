//! Counting the newlines of an import's input, which happens twice on the reader's thread (to
//! size a new database, and to number each chunk's first line): a byte-at-a-time count there
//! took a twentieth of a one-thread import, all of it on the one thread the others wait for.
//!
//! Eight bytes at a time instead: each word is XORed with eight newlines, so that a newline
//! becomes a zero byte, and the zero bytes are found without carries between bytes (for a
//! byte `x`, `((x & 0x7f) + 0x7f) | x` has its top bit set exactly when `x` is not zero).
//! The per-byte results are summed in byte-wide lanes of one word, folded into the total
//! before a lane can overflow.

const WORD: usize = 8;
const ONES: u64 = u64::from_ne_bytes([1; WORD]);
const LOW_SEVEN_BITS: u64 = u64::from_ne_bytes([0x7f; WORD]);
const EIGHT_NEWLINES: u64 = u64::from_ne_bytes([b'\n'; WORD]);
const EVEN_BYTES: u64 = 0x00ff_00ff_00ff_00ff;
/// Words per fold: a lane gains at most one per word, so it stays within a byte.
const WORDS_PER_FOLD: usize = u8::MAX as usize;

/// The number of `\n` bytes in `bytes`.
pub fn count(bytes: &[u8]) -> u64 {
    let (words, tail) = bytes.as_chunks::<WORD>();
    let mut total = count_slowly(tail);
    for run in words.chunks(WORDS_PER_FOLD) {
        let mut lanes = 0u64;
        for word in run {
            let x = u64::from_ne_bytes(*word) ^ EIGHT_NEWLINES;
            let not_zero = ((x & LOW_SEVEN_BITS) + LOW_SEVEN_BITS) | x;
            lanes += (!not_zero >> 7) & ONES;
        }
        total += sum_lanes(lanes);
    }
    total
}

/// The sum of the eight byte-wide lanes of `lanes`.
fn sum_lanes(lanes: u64) -> u64 {
    // Pairs into four 16-bit lanes (each at most 510), then all four into the top 16 bits.
    let pairs = (lanes & EVEN_BYTES) + ((lanes >> 8) & EVEN_BYTES);
    pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48
}

fn count_slowly(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn counts_what_a_byte_by_byte_count_counts(
            bytes in proptest::collection::vec(any::<u8>(), 0..3 * WORD * WORDS_PER_FOLD + 77),
            newline_below in any::<u8>(),
        ) {
            // Dense or sparse newlines: every byte below `newline_below` becomes one.
            let bytes: Vec<u8> = bytes.into_iter().map(|b| if b < newline_below { b'\n' } else { b }).collect();
            prop_assert_eq!(count(&bytes), count_slowly(&bytes));
        }
    }

    #[test]
    fn a_block_of_nothing_but_newlines_does_not_overflow_a_lane() {
        let bytes = vec![b'\n'; 2 * WORD * WORDS_PER_FOLD + 5];
        assert_eq!(count(&bytes), bytes.len() as u64);
    }
}
