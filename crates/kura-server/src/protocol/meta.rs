//! The meta commands' words (`mg ms md ma me`): flags as single letters with an optional
//! argument (`v`, `T30`, `Oopaque`), base64 keys (`b`), and the return flags that echo the
//! request (`k`, `O`, `b`) as memcached 1.6 writes them.

use super::numbers::{parse_i32, parse_u32, parse_u64};
use super::text::is_valid_key;

pub const INVALID_FLAG: &[u8] = b"CLIENT_ERROR invalid flag\r\n";
pub const DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR duplicate flag\r\n";
pub const INVALID_OR_DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";

/// How a command words a flag it refuses, as memcached 1.6 does: `mg` and `ms` tell an
/// unknown letter from a repeated one, `md` and `ma` do not.
#[derive(Debug, Clone, Copy)]
pub struct FlagErrors {
    pub invalid: &'static [u8],
    pub duplicate: &'static [u8],
}

pub const GET_SET_FLAG_ERRORS: FlagErrors = FlagErrors { invalid: INVALID_FLAG, duplicate: DUPLICATE_FLAG };
pub const DELETE_ARITHMETIC_FLAG_ERRORS: FlagErrors =
    FlagErrors { invalid: INVALID_OR_DUPLICATE_FLAG, duplicate: INVALID_OR_DUPLICATE_FLAG };
pub const BAD_KEY_ENCODING: &[u8] = b"CLIENT_ERROR error decoding key\r\n";
pub const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

/// The flags of one meta request, in the order given.
#[derive(Debug, Clone)]
pub struct MetaFlags<'l> {
    pub flags: Vec<(u8, &'l [u8])>,
}

impl<'l> MetaFlags<'l> {
    /// Splits `words` into flags, refusing any letter not in `allowed` and any letter given
    /// twice, in the words of `errors`.
    pub fn parse(words: &[&'l [u8]], allowed: &[u8], errors: FlagErrors) -> Result<MetaFlags<'l>, &'static [u8]> {
        let mut flags: Vec<(u8, &'l [u8])> = Vec::with_capacity(words.len());
        for word in words {
            let Some((&letter, argument)) = word.split_first() else { continue };
            if !allowed.contains(&letter) {
                return Err(errors.invalid);
            }
            if flags.iter().any(|(seen, _)| *seen == letter) {
                return Err(errors.duplicate);
            }
            flags.push((letter, argument));
        }
        Ok(MetaFlags { flags })
    }

    pub fn has(&self, letter: u8) -> bool {
        self.flags.iter().any(|(l, _)| *l == letter)
    }

    fn argument(&self, letter: u8) -> Option<&'l [u8]> {
        self.flags.iter().find(|(l, _)| *l == letter).map(|(_, a)| *a)
    }

    /// A signed 32-bit argument (a TTL), or a format error if present but not a number.
    pub fn ttl(&self, letter: u8) -> Result<Option<i64>, &'static [u8]> {
        self.argument(letter).map(|a| parse_i32(a).map(i64::from).ok_or(BAD_FORMAT)).transpose()
    }

    pub fn unsigned(&self, letter: u8) -> Result<Option<u64>, &'static [u8]> {
        self.argument(letter).map(|a| parse_u64(a).ok_or(BAD_FORMAT)).transpose()
    }

    pub fn flags32(&self, letter: u8) -> Result<Option<u32>, &'static [u8]> {
        self.argument(letter).map(|a| parse_u32(a).ok_or(BAD_FORMAT)).transpose()
    }

    pub fn mode(&self) -> Option<u8> {
        self.argument(b'M').and_then(|a| a.first().copied())
    }

    /// The return flags of a reply (`returns`), with `value` giving each letter's text.
    pub fn returns(&self, key_word: &[u8], value: impl FnMut(u8) -> Option<String>) -> Vec<u8> {
        write_returns(self.flags.iter().map(|&(letter, argument)| (letter, argument)), key_word, value)
    }

    /// The echo flags alone (` kKEY`, ` b`, ` Oopaque`), in the order asked.
    pub fn echo(&self, key_word: &[u8]) -> Vec<u8> {
        self.returns(key_word, |_| None)
    }
}

/// The return flags of a meta reply, in the order the request gave them, as memcached 1.6
/// writes them: `k` echoes the key as received (followed by ` b` for a base64 key), `O` its
/// opaque token, and any other letter the text `value` gives for it (None: not shown).
pub fn write_returns<'a>(
    flags: impl Iterator<Item = (u8, &'a [u8])> + Clone,
    key_word: &[u8],
    mut value: impl FnMut(u8) -> Option<String>,
) -> Vec<u8> {
    let base64 = flags.clone().any(|(letter, _)| letter == b'b');
    let mut out = Vec::new();
    for (letter, argument) in flags {
        match letter {
            b'k' => {
                out.extend_from_slice(b" k");
                out.extend_from_slice(key_word);
                if base64 {
                    out.extend_from_slice(b" b");
                }
            }
            b'O' => {
                out.extend_from_slice(b" O");
                out.extend_from_slice(argument);
            }
            _ => {
                if let Some(text) = value(letter) {
                    out.push(b' ');
                    out.push(letter);
                    out.extend_from_slice(text.as_bytes());
                }
            }
        }
    }
    out
}

/// The first check of a meta request, as memcached 1.6 makes it: the key word is at most 250
/// bytes as written (a base64 key's encoded length), before any flag is read, so a key too
/// long is `bad command line format` whatever else the line holds.
pub fn check_key_word(word: &[u8]) -> Result<(), &'static [u8]> {
    if word.len() <= super::text::MAX_KEY_LEN {
        Ok(())
    } else {
        Err(BAD_FORMAT)
    }
}

/// The key of a meta request: base64-decoded with `b`, then checked as any key.
pub fn decode_key(word: &[u8], base64: bool) -> Result<Vec<u8>, &'static [u8]> {
    let key = if base64 { decode_base64(word).ok_or(BAD_KEY_ENCODING)? } else { word.to_vec() };
    if is_valid_key(&key) {
        Ok(key)
    } else {
        Err(BAD_FORMAT)
    }
}

fn sextet(byte: u8) -> Option<u32> {
    let value = match byte {
        b'A'..=b'Z' => byte - b'A',
        b'a'..=b'z' => byte - b'a' + 26,
        b'0'..=b'9' => byte - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(value))
}

/// Standard base64 with `=` padding (what memcached's meta commands use); None if malformed.
pub fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let chunks = text.chunks_exact(4);
    let last = chunks.len().saturating_sub(1);
    for (index, chunk) in chunks.enumerate() {
        let padding = chunk.iter().rev().take_while(|b| **b == b'=').count();
        if padding > 2 || (padding > 0 && index != last) {
            return None;
        }
        let mut group = 0u32;
        for byte in chunk.iter().take(4 - padding) {
            group = (group << 6) | sextet(*byte)?;
        }
        group <<= 6 * padding as u32;
        let bytes = group.to_be_bytes();
        out.extend_from_slice(bytes.get(1..4 - padding).unwrap_or_default());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_keys_decode_and_malformed_ones_are_refused() {
        assert_eq!(decode_base64(b"a2V5").as_deref(), Some(&b"key"[..]));
        assert_eq!(decode_base64(b"a2U=").as_deref(), Some(&b"ke"[..]));
        assert_eq!(decode_base64(b"aw==").as_deref(), Some(&b"k"[..]));
        assert_eq!(decode_base64(b"AP8A").as_deref(), Some(&[0u8, 255, 0][..]));
        for bad in [&b"!!!"[..], b"a2V", b"a=V5", b"a===", b"aw==a2V5"] {
            assert_eq!(decode_base64(bad), None, "{bad:?}");
        }
        assert_eq!(decode_key(b"!!!", true), Err(BAD_KEY_ENCODING));
        assert_eq!(decode_key(b"a2V5", true), Ok(b"key".to_vec()));
    }
}
