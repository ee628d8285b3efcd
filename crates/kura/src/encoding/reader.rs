//! A bounds-checked reader over bytes that came from a file: every read either stays inside
//! the input or fails with BrokenData naming what was being read, and every length or count
//! is checked against the input before anything is sized by it.

use super::varint::decode_varint;
use crate::error::{Error, Result};

/// Reads fields one after another from `bytes`.
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    position: usize,
    /// What the bytes are, for error messages: "tree page", "snapshot", ...
    what: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `bytes`; `what` names them in errors.
    pub fn new(bytes: &'a [u8], what: &'static str) -> ByteReader<'a> {
        ByteReader { bytes, position: 0, what }
    }

    fn broken(&self, problem: &str) -> Error {
        Error::broken(format!("{}: {problem} at byte {}", self.what, self.position))
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.position)
    }

    /// Whether every byte was read.
    pub fn is_at_end(&self) -> bool {
        self.remaining() == 0
    }

    /// A varint. (Always inlined, as `length`: decoding a tree leaf reads three lengths a
    /// record, and as a call each cost some 35 instructions around a one-byte read.)
    #[inline(always)]
    pub fn varint(&mut self) -> Result<u64> {
        let rest = self.bytes.get(self.position..).unwrap_or_default();
        let (value, used) = decode_varint(rest).ok_or_else(|| self.broken("truncated or overlong number"))?;
        self.position += used;
        Ok(value)
    }

    /// A varint length that cannot exceed the whole input: what a later `take` will ask for.
    #[inline(always)]
    pub fn length(&mut self) -> Result<usize> {
        let value = self.varint()?;
        usize::try_from(value)
            .ok()
            .filter(|v| *v <= self.bytes.len())
            .ok_or_else(|| self.broken(&format!("length {value} beyond the {} bytes", self.bytes.len())))
    }

    /// A varint count of items, each of which takes at least `min_item_bytes` of the input,
    /// so that a corrupted count can never size an allocation beyond the input's size.
    pub fn count(&mut self, min_item_bytes: usize) -> Result<usize> {
        let value = self.varint()?;
        usize::try_from(value)
            .ok()
            .filter(|v| v.saturating_mul(min_item_bytes.max(1)) <= self.bytes.len())
            .ok_or_else(|| self.broken(&format!("count {value} beyond the {} bytes", self.bytes.len())))
    }

    /// The next `len` bytes.
    #[inline]
    pub fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self.position.checked_add(len).ok_or_else(|| self.broken("impossible length"))?;
        let taken = self.bytes.get(self.position..end).ok_or_else(|| self.broken("truncated"))?;
        self.position = end;
        Ok(taken)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let taken = self.take(N)?;
        <[u8; N]>::try_from(taken).map_err(|_| self.broken("truncated"))
    }

    /// The next 8 bytes as a little-endian `u64`.
    pub fn u64_le(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Fails unless every byte was read: trailing bytes mean the encoder and the decoder
    /// disagree, or the input is damaged.
    pub fn finish(&self) -> Result<()> {
        if self.is_at_end() {
            Ok(())
        } else {
            Err(self.broken(&format!("{} trailing bytes", self.remaining())))
        }
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use crate::encoding::put_varint;
    use crate::error::ErrorKind;

    #[test]
    fn reads_fields_in_order_and_refuses_to_pass_the_end() {
        let mut bytes = vec![7u8];
        bytes.extend_from_slice(&0xdead_beef_u64.to_le_bytes());
        put_varint(&mut bytes, 3);
        bytes.extend_from_slice(b"abc");
        let mut reader = ByteReader::new(&bytes, "sample");
        assert_eq!(reader.array::<1>().unwrap(), [7]);
        assert_eq!(reader.u64_le().unwrap(), 0xdead_beef);
        let len = reader.length().unwrap();
        assert_eq!(reader.take(len).unwrap(), b"abc");
        reader.finish().unwrap();
        let error = reader.take(1).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::BrokenData);
        assert!(error.message().starts_with("sample: truncated"), "{error}");
    }

    #[test]
    fn lengths_and_counts_beyond_the_input_are_broken_data() {
        let mut bytes = Vec::new();
        put_varint(&mut bytes, 1 << 40);
        assert_eq!(ByteReader::new(&bytes, "x").length().unwrap_err().kind(), ErrorKind::BrokenData);
        assert_eq!(ByteReader::new(&bytes, "x").count(1).unwrap_err().kind(), ErrorKind::BrokenData);
        let mut two = Vec::new();
        put_varint(&mut two, 2);
        two.push(0);
        // Two items of at least 2 bytes cannot fit in 2 bytes.
        assert!(ByteReader::new(&two, "x").count(2).is_err());
        assert_eq!(ByteReader::new(&two, "x").count(1).unwrap(), 2);
        let mut trailing = ByteReader::new(&two, "x");
        trailing.varint().unwrap();
        assert!(trailing.finish().is_err());
        assert!(ByteReader::new(&[0x80], "x").varint().is_err());
    }
}
