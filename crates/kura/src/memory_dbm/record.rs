//! One in-memory record (key and value) in 24 bytes plus, only when it is large, one heap block.
//!
//! Small records (key + value up to `INLINE_CAPACITY` bytes, e.g. 8-byte keys and values) are
//! stored inline, so the common case costs no allocation at all: this is what keeps the memory
//! engines' RSS well below one `malloc` chunk per record.

use crate::error::{Error, ErrorKind, Result};

/// Bytes of key + value that fit inside the record itself.
pub const INLINE_CAPACITY: usize = 21;

/// What the allocator adds to a record that spills to the heap: glibc's 8-byte chunk header
/// plus rounding to 16 bytes, at most.
pub const HEAP_OVERHEAD: usize = 24;

/// A key and its value. Invariant (Inline): `key_len <= len <= INLINE_CAPACITY`; (Heap):
/// `key_len <= bytes.len()`. The key is `bytes[..key_len]`, the value the rest.
#[derive(Clone)]
pub enum RecordBytes {
    Inline { key_len: u8, len: u8, bytes: [u8; INLINE_CAPACITY] },
    Heap { key_len: u32, bytes: Box<[u8]> },
}

// The layout the memory accounting of the engines relies on (see docs/memory.md).
const _: () = assert!(std::mem::size_of::<RecordBytes>() == 24);

impl RecordBytes {
    /// Builds a record; a key of 4 GiB or more is a Limit error.
    pub fn new(key: &[u8], value: &[u8]) -> Result<RecordBytes> {
        let total = key.len().checked_add(value.len()).ok_or_else(too_large)?;
        if total <= INLINE_CAPACITY {
            let mut bytes = [0u8; INLINE_CAPACITY];
            let (key_part, rest) = bytes.split_at_mut(key.len());
            key_part.copy_from_slice(key);
            if let Some(value_part) = rest.get_mut(..value.len()) {
                value_part.copy_from_slice(value);
            }
            // Both lengths are <= INLINE_CAPACITY < 256 here.
            return Ok(RecordBytes::Inline { key_len: key.len() as u8, len: total as u8, bytes });
        }
        let key_len = u32::try_from(key.len())
            .map_err(|_| Error::new(ErrorKind::Limit, "a key of memory engines must be shorter than 4 GiB"))?;
        let mut joined = Vec::with_capacity(total);
        joined.extend_from_slice(key);
        joined.extend_from_slice(value);
        Ok(RecordBytes::Heap { key_len, bytes: joined.into_boxed_slice() })
    }

    #[inline]
    fn parts(&self) -> (&[u8], &[u8]) {
        match self {
            RecordBytes::Inline { key_len, len, bytes } => {
                let used = bytes.get(..usize::from(*len)).unwrap_or(&[]);
                used.split_at_checked(usize::from(*key_len)).unwrap_or((used, &[]))
            }
            RecordBytes::Heap { key_len, bytes } => bytes.split_at_checked(*key_len as usize).unwrap_or((bytes, &[])),
        }
    }

    #[inline]
    pub fn key(&self) -> &[u8] {
        self.parts().0
    }

    #[inline]
    pub fn value(&self) -> &[u8] {
        self.parts().1
    }

    /// Starts loading the heap block of a record that spilled there (nothing for an inline
    /// one, whose bytes are where the record is).
    #[inline]
    pub fn prefetch_spilled(&self) {
        if let RecordBytes::Heap { bytes, .. } = self {
            crate::file::prefetch_slice(bytes);
        }
    }

    /// Replaces the value, reusing the storage when the size allows.
    pub fn set_value(&mut self, value: &[u8]) -> Result<()> {
        if let RecordBytes::Heap { key_len, bytes } = self {
            if bytes.len() == *key_len as usize + value.len() {
                if let Some(value_part) = bytes.get_mut(*key_len as usize..) {
                    value_part.copy_from_slice(value);
                    return Ok(());
                }
            }
        }
        let rebuilt = RecordBytes::new(self.key(), value)?;
        *self = rebuilt;
        Ok(())
    }
}

fn too_large() -> Error {
    Error::new(ErrorKind::Limit, "the record is too large")
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parts_round_trip(key in proptest::collection::vec(any::<u8>(), 0..40),
                            value in proptest::collection::vec(any::<u8>(), 0..40),
                            other in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut record = RecordBytes::new(&key, &value).unwrap();
            prop_assert_eq!(record.key(), &key[..]);
            prop_assert_eq!(record.value(), &value[..]);
            prop_assert_eq!(matches!(record, RecordBytes::Heap { .. }), key.len() + value.len() > INLINE_CAPACITY);
            record.set_value(&other).unwrap();
            prop_assert_eq!(record.key(), &key[..]);
            prop_assert_eq!(record.value(), &other[..]);
        }
    }
}
