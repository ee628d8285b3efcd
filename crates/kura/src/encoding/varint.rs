//! LEB128 variable-length integers (7 bits a byte, low group first, high bit = more).
//!
//! Decoding accepts non-minimal encodings (extra `0x80` groups), which the hash engine relies
//! on to rewrite a chain pointer in place within the width it was first written with.

/// The most bytes a varint of a `u64` takes.
pub const MAX_VARINT_LEN: usize = 10;

/// Writes `value` into `out` in the minimal number of bytes and returns that number (1..=10).
pub fn encode_varint(mut value: u64, out: &mut [u8; MAX_VARINT_LEN]) -> usize {
    let mut len = 0;
    for slot in out.iter_mut() {
        let group = (value & 0x7f) as u8;
        value >>= 7;
        len += 1;
        if value == 0 {
            *slot = group;
            break;
        }
        *slot = group | 0x80;
    }
    len
}

/// Writes `value` into exactly `out.len()` bytes (padding with `0x80` groups); false if it
/// does not fit.
pub fn encode_varint_padded(mut value: u64, out: &mut [u8]) -> bool {
    let width = out.len();
    for (i, slot) in out.iter_mut().enumerate() {
        let group = (value & 0x7f) as u8;
        value >>= 7;
        *slot = if i + 1 == width { group } else { group | 0x80 };
    }
    value == 0 && width > 0
}

/// Appends `value` to `out` in the minimal number of bytes.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, value: u64) {
    if value < 0x80 {
        // One byte: the common case for lengths and counts.
        out.push(value as u8);
        return;
    }
    let mut buffer = [0u8; MAX_VARINT_LEN];
    let len = encode_varint(value, &mut buffer);
    out.extend_from_slice(buffer.get(..len).unwrap_or(&buffer));
}

/// The number of bytes `encode_varint` uses for `value`.
pub fn varint_len(value: u64) -> usize {
    let bits = 64 - value.leading_zeros() as usize;
    bits.max(1).div_ceil(7)
}

/// Reads a varint from the start of `bytes`: `(value, bytes used)`, or None when truncated
/// or longer than 10 bytes / 64 bits.
#[inline]
pub fn decode_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    match bytes.first() {
        // One byte: the common case for lengths and counts (a tree leaf's decoding reads
        // three per record), spared the general loop.
        Some(&byte) if byte < 0x80 => Some((u64::from(byte), 1)),
        _ => decode_long_varint(bytes),
    }
}

/// `decode_varint` of two bytes or more (or of a truncated input).
fn decode_long_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(MAX_VARINT_LEN) {
        let group = u64::from(byte & 0x7f);
        let shift = 7 * i as u32;
        if shift == 63 && group > 1 {
            return None;
        }
        value |= group << shift;
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "tests slice buffers they sized themselves")]
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(value: u64) {
            let mut buf = [0u8; 10];
            let len = encode_varint(value, &mut buf);
            prop_assert_eq!(len, varint_len(value));
            prop_assert_eq!(decode_varint(&buf[..len]), Some((value, len)));
            prop_assert_eq!(decode_varint(&buf[..len - 1]), None);
        }

        #[test]
        fn padded_round_trip(value in 0u64..(1 << 35), width in 1usize..8) {
            let mut buf = vec![0u8; width];
            let fits = encode_varint_padded(value, &mut buf);
            prop_assert_eq!(fits, varint_len(value) <= width);
            if fits {
                prop_assert_eq!(decode_varint(&buf), Some((value, width)));
            }
        }
    }

    proptest! {
        #[test]
        fn put_appends_what_decode_reads(value: u64, prefix in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = prefix.clone();
            put_varint(&mut out, value);
            prop_assert_eq!(&out[..prefix.len()], &prefix[..]);
            prop_assert_eq!(decode_varint(&out[prefix.len()..]), Some((value, varint_len(value))));
        }
    }

    #[test]
    fn rejects_overlong() {
        assert_eq!(decode_varint(&[0xff; 11]), None);
        assert_eq!(decode_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), None);
    }
}
