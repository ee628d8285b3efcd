//! The first comparison of the ordered engines' searches: a key's first 8 bytes as one number.
//!
//! TreeDbm's page index and BabyDbm's nodes keep these next to their keys, so that a search
//! compares integers in one pass and reads full keys only where prefixes tie.

use std::cmp::Ordering;

/// The first 8 bytes of `key`, zero-padded, big-endian. Order-preserving: a smaller prefix
/// means a smaller key (a key shorter than 8 bytes pads with zeros, and is then a proper
/// prefix of any longer key it ties with on the bytes it has). Equal prefixes say nothing
/// about the rest: compare the keys.
#[inline]
pub fn key_prefix(key: &[u8]) -> u64 {
    if let Some(head) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*head); // one load (the padded copy below calls memcpy)
    }
    let mut bytes = [0u8; 8];
    let taken = key.len().min(8);
    if let (Some(to), Some(from)) = (bytes.get_mut(..taken), key.get(..taken)) {
        to.copy_from_slice(from);
    }
    u64::from_be_bytes(bytes)
}

/// How many of the ascending `sorted` prefixes are below `probe`, counted without branches so
/// that the loads of the slice's lines overlap (both engines' searches count this way).
#[inline]
pub fn count_below(sorted: &[u64], probe: u64) -> usize {
    sorted.iter().map(|p| usize::from(*p < probe)).sum()
}

/// Binary search of positions `start..end` (all with the probe's prefix), `compare` telling
/// how the key at a position orders against the probe key.
#[inline]
pub fn search_run(start: usize, end: usize, compare: impl Fn(usize) -> Ordering) -> Result<usize, usize> {
    let (mut low, mut high) = (start, end);
    while low < high {
        let middle = low + (high - low) / 2;
        match compare(middle) {
            Ordering::Less => low = middle + 1,
            Ordering::Greater => high = middle,
            Ordering::Equal => return Ok(middle),
        }
    }
    Err(low)
}
