//! Counting the newlines of an import's input, which happens twice on the reader's thread (to
//! size a new database, and to number each chunk's first line): a byte-at-a-time count there
//! took a quarter of a one-thread import and was the serial part that kept two threads from
//! paying. Counting into byte-wide lanes lets the compiler compare 16 or 32 bytes at a time.

/// Bytes compared per step; a multiple of every vector width the compiler may use.
const LANES: usize = 32;
/// Steps per block: a lane counts at most one newline per step, so it cannot overflow a byte
/// within a block.
const STEPS_PER_BLOCK: usize = u8::MAX as usize;
const BLOCK: usize = LANES * STEPS_PER_BLOCK;

/// The number of `\n` bytes in `bytes`.
pub fn count(bytes: &[u8]) -> u64 {
    let blocks = bytes.chunks_exact(BLOCK);
    let tail = blocks.remainder();
    let whole: u64 = blocks.map(count_block).sum();
    whole + count_slowly(tail)
}

/// A block of exactly `BLOCK` bytes, in byte-wide lanes summed once at the end.
fn count_block(block: &[u8]) -> u64 {
    let mut lanes = [0u8; LANES];
    for step in block.chunks_exact(LANES) {
        for (lane, &byte) in lanes.iter_mut().zip(step) {
            *lane += u8::from(byte == b'\n');
        }
    }
    lanes.iter().map(|&n| u64::from(n)).sum()
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
            bytes in proptest::collection::vec(any::<u8>(), 0..3 * BLOCK + 77),
            newline_below in any::<u8>(),
        ) {
            // Dense or sparse newlines: every byte below `newline_below` becomes one.
            let bytes: Vec<u8> = bytes.into_iter().map(|b| if b < newline_below { b'\n' } else { b }).collect();
            prop_assert_eq!(count(&bytes), count_slowly(&bytes));
        }
    }

    #[test]
    fn a_block_of_nothing_but_newlines_does_not_overflow_a_lane() {
        let bytes = vec![b'\n'; 2 * BLOCK + 5];
        assert_eq!(count(&bytes), bytes.len() as u64);
    }
}
