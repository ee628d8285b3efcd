//! Number parsing as memcached's `safe_strtoul`/`safe_strtol`/`safe_strtoull` accept it, so
//! that a request memcached takes is taken here and one it refuses is refused the same way.
//!
//! memcached parses with C's `strtoul` family and then checks the character after the number:
//! a token is already free of spaces, so the whole token must be the number, with an optional
//! leading `+` (and `-` for the signed forms). Hexadecimal, empty and overflowing numbers fail.

/// An unsigned decimal token: `+`? digits, nothing else; None on overflow or other bytes.
pub fn parse_u64(token: &[u8]) -> Option<u64> {
    let digits = token.strip_prefix(b"+").unwrap_or(token);
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &byte| {
        let digit = byte.checked_sub(b'0').filter(|d| *d <= 9)?;
        value.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A 32-bit unsigned token (client flags, verbosity): as `parse_u64`, within `u32`.
pub fn parse_u32(token: &[u8]) -> Option<u32> {
    parse_u64(token).and_then(|value| u32::try_from(value).ok())
}

/// A signed 32-bit token (exptime, a value length): `+` or `-` then digits.
pub fn parse_i32(token: &[u8]) -> Option<i32> {
    match token.strip_prefix(b"-") {
        Some(digits) if !digits.starts_with(b"+") => {
            parse_u64(digits).and_then(|magnitude| i32::try_from(-i64::try_from(magnitude).ok()?).ok())
        }
        Some(_) => None,
        None => parse_u64(token).and_then(|value| i32::try_from(value).ok()),
    }
}

/// A stored counter as `incr`/`decr` read it (memcached runs `strtoull` over the item's
/// data): leading whitespace, an optional `+`, digits, then the end or whitespace (what
/// follows that whitespace is ignored, as memcached ignores it).
pub fn parse_counter(data: &[u8]) -> Option<u64> {
    let start = data.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(data.len());
    let rest = data.get(start..).unwrap_or_default();
    let rest = rest.strip_prefix(b"+").unwrap_or(rest);
    let end = rest.iter().position(|b| !b.is_ascii_digit()).unwrap_or(rest.len());
    let (digits, after) = rest.split_at(end);
    if digits.is_empty() || after.first().is_some_and(|b| !b.is_ascii_whitespace()) {
        return None;
    }
    parse_u64(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_as_memcached_accepts_them() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"+17"), Some(17));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        for bad in [&b""[..], b"+", b"-1", b"0x1", b"1a", b" 1"] {
            assert_eq!(parse_u64(bad), None, "{bad:?}");
        }
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), None);
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"-2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"2147483648"), None);
        assert_eq!(parse_i32(b"-+1"), None);
        assert_eq!(parse_counter(b" 12"), Some(12));
        assert_eq!(parse_counter(b"12 "), Some(12));
        assert_eq!(parse_counter(b"99 "), Some(99));
        assert_eq!(parse_counter(b"12a"), None);
        assert_eq!(parse_counter(b""), None);
        assert_eq!(parse_counter(b"x"), None);
    }
}
