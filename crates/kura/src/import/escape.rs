//! Escaped TSV fields: any bytes as one field of a `key<TAB>value` line, for `kura export
//! --escape` and the `tsv-escaped` import format, so that an export always imports back to
//! the same records.
//!
//! Plain TSV cannot hold a key with a tab or a newline, nor a value with a newline: the line
//! would split elsewhere on the way back. Escaped, a field holds no tab, newline or other
//! control byte: `\t`, `\n`, `\r` and `\\` stand for themselves, every other byte below 0x20
//! and 0x7f is `\xHH` (two lowercase hex digits), and every other byte, UTF-8 text included,
//! is written as it is. Unescaping is strict: a backslash followed by anything else, or a
//! field cut inside an escape, is an error, so a damaged line is reported instead of
//! imported as something that was never exported.

use std::borrow::Cow;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `field` escaped to `out`.
pub fn escape(field: &[u8], out: &mut Vec<u8>) {
    for &byte in field {
        match byte {
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..0x20 | 0x7f => {
                let hex = |nibble: u8| HEX.get(usize::from(nibble)).copied().unwrap_or(b'0');
                out.extend_from_slice(&[b'\\', b'x', hex(byte >> 4), hex(byte & 0x0f)]);
            }
            _ => out.push(byte),
        }
    }
}

/// The bytes an escaped field stands for (borrowed when it holds no escape), or what is
/// wrong with it.
pub fn unescape(field: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    if !field.contains(&b'\\') {
        return Ok(Cow::Borrowed(field));
    }
    let mut out = Vec::with_capacity(field.len());
    let mut bytes = field.iter().copied();
    while let Some(byte) = bytes.next() {
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        let unescaped = match bytes.next() {
            Some(b't') => b'\t',
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b'\\') => b'\\',
            Some(b'x') => {
                let digit = |digit: Option<u8>| digit.and_then(|d| char::from(d).to_digit(16));
                match (digit(bytes.next()), digit(bytes.next())) {
                    // Two hex digits make at most 0xff.
                    (Some(high), Some(low)) => (high * 16 + low) as u8,
                    _ => return Err("\\x not followed by two hex digits".to_string()),
                }
            }
            Some(other) => return Err(format!("unknown escape \\{}", char::from(other).escape_default())),
            None => return Err("a backslash ends the field".to_string()),
        };
        out.push(unescaped);
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use proptest::prelude::*;

    fn escaped(field: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        escape(field, &mut out);
        out
    }

    proptest! {
        #[test]
        fn any_bytes_come_back_and_hold_no_tab_or_line_break(field in proptest::collection::vec(any::<u8>(), 0..200)) {
            let text = escaped(&field);
            prop_assert!(!text.iter().any(|&b| b == b'\t' || b == b'\n' || b == b'\r'));
            let back = unescape(&text).unwrap();
            prop_assert_eq!(back.as_ref(), field.as_slice());
        }
    }

    #[test]
    fn text_stays_readable_and_damaged_escapes_are_errors() {
        assert_eq!(escaped("clé\tA\\B\n\u{1}\x7f".as_bytes()), b"cl\xc3\xa9\\tA\\\\B\\n\\x01\\x7f");
        assert!(matches!(unescape(b"plain"), Ok(Cow::Borrowed(_))));
        for bad in [&b"a\\"[..], b"\\q", b"\\x4", b"\\xg0", b"\\x"] {
            assert!(unescape(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
