//! Putting back one damaged byte of a fixed-size header whose last field is the XXH3-64 of
//! every byte before it (HashDbm's header and its copy, TreeDbm's two header copies).
//!
//! A 64-bit checksum over a header of about a hundred bytes does more than tell that the
//! header is damaged: it locates a single damaged byte. Changing one byte to each of its 255
//! other values and comparing the checksum finds the one header that differs from the stored
//! bytes in one byte and whose checksum holds; a second such header would need a 64-bit
//! collision. A damaged byte of the checksum field itself shows as the checksum of the other
//! bytes differing from the stored one in that byte alone. So every single-byte damage of
//! such a header (a flipped bit, a zeroed byte, any value) is undone, at the cost of about
//! 30,000 checksums of a hundred bytes (under a millisecond), and only for a header that
//! failed its check.

use xxhash_rust::xxh3::xxh3_64;

use super::layout::Field;

/// A header with one byte put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired<T, const N: usize> {
    /// The header, decoded.
    pub value: T,
    /// Which byte was damaged (its offset in the header).
    pub byte: usize,
    /// The header's bytes as they were written.
    pub bytes: [u8; N],
}

/// The header of `N` bytes at the start of `bytes` with one byte put back, located by
/// `checksum` (the XXH3-64 of every byte before it, its last field), when exactly one
/// such header decodes (`decode` says which do); None when none does, or when two do (which
/// would need a 64-bit collision: the search gives up rather than guess).
pub fn repair_one_byte<T, const N: usize>(
    bytes: &[u8],
    checksum: Field<N, 8>,
    decode: impl Fn(&[u8; N]) -> Option<T>,
) -> Option<Repaired<T, N>> {
    let mut work: [u8; N] = bytes.get(..N)?.try_into().ok()?;
    let covered = checksum.offset();
    let stored = u64::from_le_bytes(work.get(covered..checksum.end())?.try_into().ok()?);
    let mut found: Option<Repaired<T, N>> = None;
    let computed = xxh3_64(work.get(..covered)?);
    let differing: Vec<usize> =
        (0..8).filter(|&i| computed.to_le_bytes().get(i) != stored.to_le_bytes().get(i)).collect();
    if let [only] = differing.as_slice() {
        let mut fixed = work;
        fixed.get_mut(covered..checksum.end())?.copy_from_slice(&computed.to_le_bytes());
        if let Some(value) = decode(&fixed) {
            found = Some(Repaired { value, byte: covered + only, bytes: fixed });
        }
    }
    for position in 0..covered {
        let original = *work.get(position)?;
        for candidate in 0..=u8::MAX {
            if candidate == original {
                continue;
            }
            *work.get_mut(position)? = candidate;
            if xxh3_64(work.get(..covered)?) == stored {
                if let Some(value) = decode(&work) {
                    if found.is_some() {
                        return None;
                    }
                    found = Some(Repaired { value, byte: position, bytes: work });
                }
            }
        }
        *work.get_mut(position)? = original;
    }
    found
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;

    const N: usize = 40;
    const BODY: Field<N, 32> = Field::first();
    const SUM: Field<N, 8> = Field::after(BODY);

    fn sealed() -> [u8; N] {
        let mut bytes = [0u8; N];
        for (i, b) in bytes[..32].iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let sum = xxh3_64(&bytes[..32]);
        bytes[32..].copy_from_slice(&sum.to_le_bytes());
        bytes
    }

    /// Every byte, the checksum's included, damaged to several values comes back exactly;
    /// two damaged bytes are not "repaired"; a decoder that refuses everything gives None.
    #[test]
    fn every_single_byte_damage_is_put_back_and_no_other() {
        let good = sealed();
        let accept = |b: &[u8; N]| Some(b[0]);
        for at in 0..N {
            for value in [0u8, 0xFF, good[at] ^ 1, good[at] ^ 0x80] {
                if value == good[at] {
                    continue;
                }
                let mut damaged = good;
                damaged[at] = value;
                let repaired = repair_one_byte(&damaged, SUM, accept).unwrap();
                assert_eq!((repaired.byte, repaired.bytes), (at, good), "byte {at} set to {value}");
                assert!(repair_one_byte(&damaged, SUM, |_: &[u8; N]| None::<u8>).is_none());
            }
        }
        let mut twice = good;
        twice[3] ^= 1;
        twice[20] ^= 4;
        assert!(repair_one_byte(&twice, SUM, accept).is_none());
        assert!(repair_one_byte(&good[..N - 1], SUM, accept).is_none(), "too short");
    }
}
