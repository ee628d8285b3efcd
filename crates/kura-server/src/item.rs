//! The item format: how one memcached item is kept as a Kura value.
//!
//! The key is the record's key; the value is a 17-byte header followed by the data:
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 1    | format version, 1                                            |
//! | 1      | 4    | client flags, big-endian u32                                 |
//! | 5      | 4    | expiry, big-endian u32 Unix seconds; 0 never, 1 expired      |
//! | 9      | 8    | CAS unique, big-endian u64                                   |
//! | 17     | n    | the data, as the client sent it                              |
//!
//! Keeping all of it inside the value makes every engine a memcached store with no change
//! to the engine, and a served file carries flags, expiry and CAS across restarts.

use kura::{Error, Result};

/// The format version byte this code writes and reads.
pub const VERSION: u8 = 1;

/// Bytes before the data.
pub const HEADER_LEN: usize = 17;

/// The metadata of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub flags: u32,
    pub expiry: u32,
    pub cas: u64,
}

/// An item's stored bytes: the header, then the data in `parts` joined (append and prepend
/// join two parts without an intermediate copy).
pub fn encode(header: Header, parts: &[&[u8]]) -> Vec<u8> {
    let data_len: usize = parts.iter().map(|p| p.len()).sum();
    let mut stored = Vec::with_capacity(HEADER_LEN + data_len);
    stored.push(VERSION);
    stored.extend_from_slice(&header.flags.to_be_bytes());
    stored.extend_from_slice(&header.expiry.to_be_bytes());
    stored.extend_from_slice(&header.cas.to_be_bytes());
    for part in parts {
        stored.extend_from_slice(part);
    }
    stored
}

/// The header and data of stored bytes; a BrokenData error for bytes this format did not
/// write (too short or another version), which the server then treats as no item.
pub fn decode(stored: &[u8]) -> Result<(Header, &[u8])> {
    let (head, data) = stored.split_first_chunk::<HEADER_LEN>().ok_or_else(|| {
        Error::broken(format!("an item needs {HEADER_LEN} header bytes, the value has {}", stored.len()))
    })?;
    let [version, f0, f1, f2, f3, e0, e1, e2, e3, c0, c1, c2, c3, c4, c5, c6, c7] = *head;
    if version != VERSION {
        return Err(Error::broken(format!("item format version {version} is not {VERSION}")));
    }
    let header = Header {
        flags: u32::from_be_bytes([f0, f1, f2, f3]),
        expiry: u32::from_be_bytes([e0, e1, e2, e3]),
        cas: u64::from_be_bytes([c0, c1, c2, c3, c4, c5, c6, c7]),
    };
    Ok((header, data))
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "a test fails loudly on the first broken expectation"
    )]
    use super::*;

    #[test]
    fn items_round_trip_and_foreign_values_are_refused() {
        let header = Header { flags: 0xDEAD_BEEF, expiry: 1_900_000_000, cas: u64::MAX - 3 };
        let stored = encode(header, &[b"ab", b"", b"c\r\n\0"]);
        assert_eq!(stored.len(), HEADER_LEN + 6);
        assert_eq!(stored.first(), Some(&VERSION));
        assert_eq!(decode(&stored).unwrap(), (header, &b"abc\r\n\0"[..]));
        assert!(decode(&stored[..HEADER_LEN - 1]).is_err());
        let mut other = stored.clone();
        other[0] = 2;
        assert!(decode(&other).is_err());
        assert_eq!(decode(&encode(header, &[])).unwrap().1, b"");
    }
}
