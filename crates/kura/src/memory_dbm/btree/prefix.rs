//! Key prefixes: the first 8 bytes of a key as a big-endian `u64`, so that most comparisons in
//! a node are one integer comparison on a compact array instead of a `memcmp` through a record.

pub use crate::key_prefix::key_prefix;
use crate::key_prefix::{count_below, search_run};

/// A key and its prefix, computed once per operation.
#[derive(Clone, Copy)]
pub struct Probe<'k> {
    pub prefix: u64,
    pub key: &'k [u8],
}

impl<'k> Probe<'k> {
    #[inline]
    pub fn new(key: &'k [u8]) -> Probe<'k> {
        Probe { prefix: key_prefix(key), key }
    }
}

/// Prefixes per block of a node's prefix array: 8, one cache line.
const BLOCK: usize = 8;

/// How many of the sorted `prefixes` are smaller than `prefix`: first among the heads of the
/// blocks, then within the one block where the smaller ones end. This reads every cache line
/// of the array, but with loads independent of one another that the CPU issues at once (one
/// memory latency per node, where a binary search waits for one miss after another, measured
/// faster for nodes out of cache), and compares 2 x 8 prefixes of a full node instead of 64.
#[inline]
pub fn count_less(prefixes: &[u64], prefix: u64) -> usize {
    let mut heads = 0;
    let mut at = 0;
    while let Some(&head) = prefixes.get(at) {
        heads += usize::from(head < prefix);
        at += BLOCK;
    }
    let Some(last) = heads.checked_sub(1) else { return 0 };
    let base = last * BLOCK;
    let block = prefixes.get(base..).unwrap_or_default();
    base + count_below(block.get(..BLOCK).unwrap_or(block), prefix)
}

/// Search of `probe` in a node's sorted keys, given their prefixes and a way to read the key
/// at an index: `Ok(index)` when found, else `Err(index)` where it would be inserted.
/// Full keys are read only within the run of prefixes equal to the probe's.
#[inline]
pub fn search<'a>(
    prefixes: &[u64],
    probe: &Probe<'_>,
    key_at: impl Fn(usize) -> Option<&'a [u8]>,
) -> Result<usize, usize> {
    search_from(prefixes, probe, count_less(prefixes, probe.prefix), key_at)
}

/// `search`'s second half, from `start = count_less(prefixes, probe.prefix)` (a batched
/// lookup computes it a stage earlier, then loads the entry there before finishing).
#[inline]
pub fn search_from<'a>(
    prefixes: &[u64],
    probe: &Probe<'_>,
    start: usize,
    key_at: impl Fn(usize) -> Option<&'a [u8]>,
) -> Result<usize, usize> {
    debug_assert_eq!(start, count_less(prefixes, probe.prefix), "a search resumed from elsewhere");
    let run = prefixes.get(start..).unwrap_or_default();
    let run_len = run.iter().take_while(|&&p| p == probe.prefix).count();
    search_run(start, start + run_len, |i| key_at(i).unwrap_or_default().cmp(probe.key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn prefix_order_agrees_with_key_order(a in proptest::collection::vec(0u8..3, 0..12),
                                              b in proptest::collection::vec(0u8..3, 0..12)) {
            let (pa, pb) = (key_prefix(&a), key_prefix(&b));
            if pa != pb {
                prop_assert_eq!(pa.cmp(&pb), a.cmp(&b));
            }
        }

        #[test]
        fn search_agrees_with_binary_search(mut keys in proptest::collection::vec(
                                                proptest::collection::vec(0u8..3, 0..10), 0..40),
                                            probe in proptest::collection::vec(0u8..3, 0..10)) {
            keys.sort();
            keys.dedup();
            let prefixes: Vec<u64> = keys.iter().map(|k| key_prefix(k)).collect();
            let found = search(&prefixes, &Probe::new(&probe), |i| keys.get(i).map(Vec::as_slice));
            prop_assert_eq!(found, keys.binary_search(&probe));
        }
    }
}
